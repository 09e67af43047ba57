"""Closed-form P-LogP models of the scan and exscan builders
(:mod:`gridcoll.algorithms.scan`).

``M = nbytes``, ``m`` the segment size, ``k = ceil(M/m)``. On one network:

=====================  ===============================================================
chain scan             ``(P-1) (L + g(m)) + (k-1) max(g(m), s(m), or(m) + os(m))``
chain exscan           the same with two messages per segment and hop (but the last)
recursive doubling     ``<= ceil(log2 P) max(L + g(M), os(M) + or(M))`` (+ one shift)
=====================  ===============================================================

The chains are seed 000's ``T = (k-1) gamma(m) + lam(m)`` (sec. 3.1.1) on the rank
chain, edge by edge (:func:`chain_scan_time`): ``lam`` the first segment's time along
it, every hop with its own route (one wide-area hop per pair of consecutive clusters on
the presets), ``gamma`` the busiest hop per segment. The doubling steps are evaluated
message by message (:func:`steps_time`). Combining costs
nothing, as in the reduce models and the simulator.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence

from gridcoll.algorithms._collective import check_commutative
from gridcoll.algorithms.scan import doubling_steps, exscan_copies
from gridcoll.models._collective import Costs, Inbound
from gridcoll.models.single_layer import check_model_call, nsegments
from gridcoll.network.grid import Grid

__all__ = [
    "MODELS",
    "chain_exscan_model",
    "chain_scan_model",
    "chain_scan_time",
    "chain_segmented_exscan_model",
    "chain_segmented_scan_model",
    "recursive_doubling_exscan_model",
    "recursive_doubling_scan_model",
    "steps_time",
]


def chain_scan_time(grid: Grid, nbytes: int, m: int, op: str = "scan") -> float:
    """``(k-1) gamma(m) + lam(m)`` of the chain scan (or exscan) over ranks
    ``0..P-1``, hop ``i-1 -> i`` carrying ``c_i`` messages per segment
    (:func:`~gridcoll.algorithms.scan.exscan_copies`: 2 on an exscan's hops but the
    last, else 1).

    ``lam``: rank ``i`` has its first segment's prefix at ``t_i = max(t_{i-1} + r,
    or)`` (``r = L + g(m)`` of hop ``i-1 -> i``: it posted the receive at once) and
    sends it on; with two copies it takes the second at ``max(t_{i-1} + r + max(s,
    g), t_i + c_{i+1} os + or)`` (it follows the first one gap behind, and rank ``i``
    takes it after its own sends). ``gamma``: the busiest per segment of a hop's gap
    and sender NIC (``c g``, ``c s``) and a forwarding rank's CPU (``c_in or + c_out
    os``). A link that several hops cross (ranks not numbered cluster by cluster)
    carries ``k sum c g_link`` in all: ``T`` is no less than that plus its latency.
    O(P).
    """
    P = grid.nranks
    if P == 1:
        return 0.0
    k = nsegments(nbytes, m)
    costs = Costs(grid)
    t = lam = gamma = 0.0  # t: when rank i holds the first segment's prefix (rank 0: at once)
    or_in = 0.0  # the forwarding rank's receive overheads per segment
    link_busy: dict[str, tuple[float, float]] = {}  # per segment g_link, and the hops' L
    for i in range(1, P):
        e = costs(i - 1, i, m)
        c = exscan_copies(op, P, i)
        gamma = max(gamma, c * e.g, c * e.s, or_in + c * e.os)
        for name, g_link in e.links:
            busy, L = link_busy.get(name, (0.0, 0.0))
            link_busy[name] = (busy + c * g_link, max(L, e.L))
        arrive = t + e.r
        t = max(arrive, e.or_)
        or_in = c * e.or_
        lam = max(lam, t)
        if c > 1:  # the second copy, one gap behind the first, taken after i's sends
            sends = exscan_copies(op, P, i + 1) * costs(i, i + 1, m).os if i < P - 1 else 0.0
            lam = max(lam, arrive + max(e.s, e.g), t + sends + e.or_)
    gamma = max(gamma, or_in)  # the last rank's receives
    links = max((k * busy + L for busy, L in link_busy.values()), default=0.0)
    return max((k - 1) * gamma + lam, links)


def chain_scan_model(
    grid: Grid, nbytes: int, root: int = 0, *, itemsize: int = 1, commutative: bool = True
) -> float:
    """Model of :func:`~gridcoll.algorithms.scan.chain_scan`: :func:`chain_scan_time`
    with one segment, ``(P-1) (L + g(M))`` on one network."""
    M = check_model_call(grid, nbytes, root, itemsize)
    check_commutative(commutative, "chain")
    return chain_scan_time(grid, M, M)


def chain_segmented_scan_model(
    grid: Grid,
    nbytes: int,
    root: int = 0,
    *,
    segment_size: int,
    itemsize: int = 1,
    commutative: bool = True,
) -> float:
    """Model of :func:`~gridcoll.algorithms.scan.chain_segmented_scan`:
    :func:`chain_scan_time` with ``k`` segments."""
    m = check_model_call(grid, nbytes, root, itemsize, segment_size)
    check_commutative(commutative, "chain-segmented")
    return chain_scan_time(grid, nbytes, min(m, nbytes))


def chain_exscan_model(
    grid: Grid, nbytes: int, root: int = 0, *, itemsize: int = 1, commutative: bool = True
) -> float:
    """Model of :func:`~gridcoll.algorithms.scan.chain_exscan`: :func:`chain_scan_time`
    with two copies per hop but the last, one segment."""
    M = check_model_call(grid, nbytes, root, itemsize)
    check_commutative(commutative, "chain")
    return chain_scan_time(grid, M, M, "exscan")


def chain_segmented_exscan_model(
    grid: Grid,
    nbytes: int,
    root: int = 0,
    *,
    segment_size: int,
    itemsize: int = 1,
    commutative: bool = True,
) -> float:
    """Model of :func:`~gridcoll.algorithms.scan.chain_segmented_exscan`:
    :func:`chain_scan_time` with two copies per hop but the last, ``k`` segments."""
    m = check_model_call(grid, nbytes, root, itemsize, segment_size)
    check_commutative(commutative, "chain-segmented")
    return chain_scan_time(grid, nbytes, min(m, nbytes), "exscan")


def steps_time(costs: Costs, steps: Sequence[Sequence[tuple[int, int]]], nbytes: int) -> float:
    """When the last rank finishes ``steps`` of messages ``(i, j)`` of ``nbytes`` each.

    In every step a rank makes its send (``os`` on its CPU, ``s`` on its NIC), then
    takes its receive at ``max(arrival, previous + or)`` and goes on to the next step,
    as the doubling programs do. Unlike
    :func:`~gridcoll.models._collective.rounds_time`, messages are booked at the
    receivers' NICs and on shared links in the order they *start*, whatever their step
    (a heap), as the simulator serves heads in the order they come: a later step's
    early message does not wait behind an earlier step's late one. O(E log E).
    """
    P = 1 + max((max(i, j) for step in steps for i, j in step), default=0)
    plan = [[(None, None) for _ in steps] for _ in range(P)]  # rank -> step -> (to, from)
    for d, step in enumerate(steps):
        for i, j in step:
            plan[i][d] = (j, plan[i][d][1])
            plan[j][d] = (plan[j][d][0], i)
    clock, nic, at = [0.0] * P, [0.0] * P, [0] * P
    inbound = Inbound(costs)
    heap: list[tuple[float, int, int, int]] = []
    arrived: dict[tuple[int, int], float] = {}  # (receiver, step) -> arrival

    def advance(r: int) -> None:  # run rank r until it waits for a message
        while at[r] < len(steps):
            to, source = plan[r][at[r]]
            if to is not None and at[r] >= 0:
                e = costs(r, to, nbytes)
                start = max(clock[r], nic[r])
                nic[r] = start + e.s
                clock[r] += e.os
                heapq.heappush(heap, (start, r, to, at[r]))
                plan[r][at[r]] = (None, source)  # sent
            if source is not None:
                if (r, at[r]) not in arrived:
                    return
                arrival = arrived.pop((r, at[r]))
                clock[r] = max(arrival, clock[r] + costs(source, r, nbytes).or_)
            at[r] += 1

    for r in range(P):
        advance(r)
    while heap:
        start, i, j, d = heapq.heappop(heap)
        arrived[(j, d)] = inbound.arrival(i, j, nbytes, start)
        if at[j] == d:
            advance(j)
    return max(clock, default=0.0)


def _doubling_time(grid: Grid, M: int, shift: bool) -> float:
    steps = doubling_steps(grid.nranks)
    if shift:
        steps.append([(i, i + 1) for i in range(grid.nranks - 1)])
    return steps_time(Costs(grid), steps, M)


def recursive_doubling_scan_model(
    grid: Grid, nbytes: int, root: int = 0, *, itemsize: int = 1, commutative: bool = True
) -> float:
    """Model of :func:`~gridcoll.algorithms.scan.recursive_doubling_scan`: its
    ``ceil(log2 P)`` steps of ``M`` bytes, step by step."""
    M = check_model_call(grid, nbytes, root, itemsize)
    check_commutative(commutative, "recursive-doubling")
    return _doubling_time(grid, M, shift=False)


def recursive_doubling_exscan_model(
    grid: Grid, nbytes: int, root: int = 0, *, itemsize: int = 1, commutative: bool = True
) -> float:
    """Model of :func:`~gridcoll.algorithms.scan.recursive_doubling_exscan`: the
    doubling steps and the shift, step by step."""
    M = check_model_call(grid, nbytes, root, itemsize)
    check_commutative(commutative, "recursive-doubling")
    return _doubling_time(grid, M, shift=True)


MODELS = {
    ("scan", "chain"): chain_scan_model,
    ("scan", "chain-segmented"): chain_segmented_scan_model,
    ("scan", "recursive-doubling"): recursive_doubling_scan_model,
    ("exscan", "chain"): chain_exscan_model,
    ("exscan", "chain-segmented"): chain_segmented_exscan_model,
    ("exscan", "recursive-doubling"): recursive_doubling_exscan_model,
}
"""The scan and exscan models, by ``(op, name)``."""
