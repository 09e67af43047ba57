"""Closed-form P-LogP models of the scan and exscan builders
(:mod:`gridcoll.algorithms.scan`).

``M = nbytes``, ``m`` the segment size, ``k = ceil(M/m)``. On one network:

=====================  ===============================================================
chain scan             ``(P-1) (L + g(m) + or(m)) + (k-1) max(g(m), or(m) + os(m))``
chain exscan           the same with two messages per segment and hop
recursive doubling     ``ceil(log2 P) (L + g(M) + or(M))`` (+ one shift for exscan)
=====================  ===============================================================

The chains are seed 000's ``T = (k-1) gamma(m) + lam(m)`` (sec. 3.1.1) on the rank
chain, edge by edge (:func:`chain_scan_time`): ``lam`` the first segment's time along
it, every hop with its own route (one wide-area hop per pair of consecutive clusters on
the presets), ``gamma`` the busiest hop per segment. The doubling steps are evaluated
step by step (:func:`~gridcoll.models._collective.rounds_time`). Combining costs
nothing, as in the reduce models and the simulator.
"""

from __future__ import annotations

from gridcoll.algorithms._collective import check_commutative
from gridcoll.algorithms.scan import doubling_steps
from gridcoll.models._collective import Costs, rounds_time
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
]


def chain_scan_time(grid: Grid, nbytes: int, m: int, copies: int = 1) -> float:
    """``(k-1) gamma(m) + lam(m)`` of the chain over ranks ``0..P-1``, each hop carrying
    ``copies`` messages per segment (1: scan, 2: exscan).

    ``lam``: rank ``i`` has its first segment's prefix at ``t_i = max(t_{i-1} + r,
    os + or)`` (``r = L + g(m)`` of hop ``i-1 -> i``), sends it ``copies`` times
    and, for exscan, takes the second copy at ``max(t_{i-1} + r + max(s, g), t_i +
    2 os + or)`` (it follows the first one gap behind, and rank ``i`` takes it after
    its own two sends). ``gamma``: the busiest per segment of a
    hop's gap and sender NIC (``copies g``, ``copies s``) and a forwarding rank's CPU
    (``copies (or + os)``). O(P).
    """
    P = grid.nranks
    if P == 1:
        return 0.0
    k = nsegments(nbytes, m)
    costs = Costs(grid)
    t = lam = gamma = 0.0  # t: when rank i holds the first segment's prefix (rank 0: at once)
    or_in = 0.0  # the forwarding rank's receive overhead per message
    for i in range(1, P):
        e = costs(i - 1, i, m)
        gamma = max(gamma, copies * e.g, copies * e.s, copies * (or_in + e.os))
        arrive = t + e.r
        t = max(arrive, e.or_)
        or_in = e.or_
        if copies > 1:  # the second copy, one gap behind the first, taken after i's sends
            sends = copies * costs(i, i + 1, m).os if i < P - 1 else 0.0
            lam = max(lam, arrive + (copies - 1) * max(e.s, e.g), t + sends + e.or_)
        else:
            lam = max(lam, t)
    gamma = max(gamma, copies * or_in)  # the last rank's receives
    return (k - 1) * gamma + lam


def chain_scan_model(
    grid: Grid, nbytes: int, root: int = 0, *, itemsize: int = 1, commutative: bool = True
) -> float:
    """Model of :func:`~gridcoll.algorithms.scan.chain_scan`: :func:`chain_scan_time`
    with one segment, ``sum_hops (L + g(M) + or(M))`` on one network."""
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
    with two copies per hop, one segment."""
    M = check_model_call(grid, nbytes, root, itemsize)
    check_commutative(commutative, "chain")
    return chain_scan_time(grid, M, M, copies=2)


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
    :func:`chain_scan_time` with two copies per hop and ``k`` segments."""
    m = check_model_call(grid, nbytes, root, itemsize, segment_size)
    check_commutative(commutative, "chain-segmented")
    return chain_scan_time(grid, nbytes, min(m, nbytes), copies=2)


def _doubling_time(grid: Grid, M: int, shift: bool) -> float:
    rounds = [[(i, j, M) for i, j in step] for step in doubling_steps(grid.nranks)]
    if shift:
        rounds.append([(i, i + 1, M) for i in range(grid.nranks - 1)])
    return max(rounds_time(Costs(grid), rounds).values(), default=0.0)


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
