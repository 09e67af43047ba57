"""P-LogP models of the all-to-all builders (:mod:`gridcoll.algorithms.alltoall`):
seed 002's bounds and contention ratio.

Seed 002, sec. 5, Table 3, for ``P`` ranks exchanging ``b = nbytes`` bytes per pair:

* upper bound ``(P-1) g(b) + (P-1) or(b) + L`` - a rank's transmissions are serialised
  by link contention;
* lower bound ``(P-1) os(b) + (P-1) or(b) + L`` - a rank reaches the network interface
  again as soon as its previous send returns.

On a grid every term is taken per peer with its route's parameters, for every rank, and
the slowest rank counts (:func:`alltoall_bounds`). Between them, seed 002 predicts
``T = lower + (upper - lower) gamma`` with a *contention ratio* ``gamma``, "constant and
depend[ing] only on the network characteristics", fitted to measurements (its cluster:
``gamma = 2/3``). :func:`fit_contention` is that least-squares fit from ``(size,
time)`` pairs (simulated or measured by the runtime benchmarks). The registered models
take ``gamma`` as data (``contention=``, default :data:`DEFAULT_CONTENTION`); the
tuner fits it on the simulator (:func:`gridcoll.tune.contention.simulated_contention`)
and passes it in, so this module needs no executor (models sit above ``simulate`` in
docs/architecture.md's layering).

Table 3's lower bound counts the CPU overheads only; in the simulator a rank's NIC also
serialises its ``P - 1`` messages at ``g_l(b)`` each (and a gateway its cluster's
``N_A (P - N_A)``), which exceeds ``(P-1)(os + or)`` once ``g(b) > os(b) + or(b)``
(``lan:24`` at 64 KiB: 30.3 ms against 20.3 ms). :func:`alltoall_bounds` reports these
resources as ``floor`` and a prediction never falls below it
(:meth:`AlltoallBounds.predict`): without it the fitted ratio predicted 29.8 ms there,
below the physical bound of 30.2 ms.

A constant ratio is the paper's simplification. In the simulator the ratio moves with
the message size when the protocol changes (from ``rendezvous_limit`` a sender is busy
for the whole WAN transfer, ``os_w = g_w``), so the fit weighs relative errors and the
model's error is largest at the sizes far from where most samples agree
(``bench/collectives.py`` reports it). Without rotation every rank starts with rank 0,
whose NIC then serialises ``P - 1`` arrivals at once: the plain direct exchange can
exceed the upper bound (``gamma > 1``) on a switched LAN, which is the overload the
rotated order avoids (sec. 5).

The cluster-aware all-to-all has no contention term: each of its phases is a set of
messages evaluated edge by edge (:func:`cluster_aware_alltoall_model`).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable
from dataclasses import dataclass

from gridcoll.algorithms._collective import check_segment_count
from gridcoll.algorithms.alltoall import agent
from gridcoll.errors import ParameterError
from gridcoll.models._collective import Costs, rounds_time
from gridcoll.models.single_layer import check_model_call
from gridcoll.network.grid import Grid

__all__ = [
    "CONTENTION_SIZES",
    "DEFAULT_CONTENTION",
    "MODELS",
    "AlltoallBounds",
    "alltoall_bounds",
    "cluster_aware_alltoall_model",
    "contention_samples",
    "direct_alltoall_model",
    "direct_rotated_alltoall_model",
    "fit_contention",
    "least_squares_ratio",
    "resource_floor",
    "segmented_alltoall_model",
]

DEFAULT_CONTENTION = 2 / 3
"""Seed 002's contention ratio for its Gigabit Ethernet cluster (sec. 5.1)."""

CONTENTION_SIZES = (1024, 8192, 65536, 524288)
"""Block sizes (bytes per pair) the tuner fits ``gamma`` on
(:mod:`gridcoll.tune.contention`)."""


@dataclass(frozen=True, slots=True)
class AlltoallBounds:
    """Seed 002, Table 3, on a grid (seconds)."""

    lower: float
    upper: float
    floor: float = 0.0
    """The busiest NIC's, gateway's or link's serialised occupancy plus the least latency
    after it (:func:`resource_floor`): no direct exchange finishes before it."""

    def predict(self, contention: float) -> float:
        """``lower + (upper - lower) * contention``, and never below ``floor``."""
        return max(self.floor, self.lower + (self.upper - self.lower) * contention)


def _link_load(grid: Grid, nbytes: int) -> float:
    """The busiest shared link's occupancy when every pair exchanges ``nbytes``, plus the
    least latency across it (the last block on it may take the shortest route): no
    schedule that sends each block directly is faster."""
    counts = [c.nranks for c in grid.clusters]
    busy: dict[str, list[float]] = {}
    for (a, b), route in grid.routes.items():
        n = counts[a] * counts[b]
        for name in route.links:
            load = busy.setdefault(name, [0.0, math.inf])
            load[0] += n * grid.links[name].g(nbytes)
            load[1] = min(load[1], route.plogp.L)
    return max((g + L for g, L in busy.values()), default=0.0)


def alltoall_bounds(grid: Grid, nbytes: int) -> AlltoallBounds:
    """Table 3's bounds for ``nbytes`` per pair, per rank with every peer's route.

    For rank ``r``: ``upper_r = sum_{d != r} g_rd(b) + sum_{s != r} or_sr(b) + L_max``
    and ``lower_r`` with ``os_rd`` in place of ``g_rd``; ``L_max`` the largest latency
    from any peer; the largest over ranks counts. On a grid a shared WAN link carries
    the ``N_A N_B`` blocks of every cluster pair routed over it; its occupancy plus
    latency (:func:`_link_load`, zero on one cluster) is a second lower bound, and in
    the worst case it adds to a rank's serialised transmissions, so ``lower = max(
    lower_r, links)`` and ``upper = upper_r + links``. O(P_w^2).
    """
    P = grid.nranks
    if P < 2:
        return AlltoallBounds(0.0, 0.0)
    costs = Costs(grid)
    counts = [c.nranks for c in grid.clusters]
    reps = [ranks[0] for ranks in grid.members]
    lower = upper = 0.0
    for a, ra in enumerate(reps):
        g = os = or_ = L = 0.0
        for b, rb in enumerate(reps):
            n = counts[b] - (a == b)
            if not n:
                continue
            peer = rb if a != b else grid.members[b][1]
            out, into = costs(ra, peer, nbytes), costs(peer, ra, nbytes)
            g += n * out.g
            os += n * out.os
            or_ += n * into.or_
            L = max(L, into.L)
        lower, upper = max(lower, os + or_ + L), max(upper, g + or_ + L)
    links = _link_load(grid, nbytes)
    return AlltoallBounds(max(lower, links), upper + links, resource_floor(grid, nbytes))


def resource_floor(grid: Grid, nbytes: int) -> float:
    """The time the busiest resource needs when every rank sends ``b = nbytes`` to every
    other directly, plus the least latency after it (seconds).

    In the simulator (docs/architecture.md) every message of a rank ``r`` occupies its
    NIC for ``g_l(b)`` of its LAN on the way out, and every message to it on the way in;
    every message leaving or entering cluster ``A`` occupies its gateway side as long.
    A resource serving ``n`` messages is busy ``n g_l(b)`` from ``t >= 0``, and the last
    of them arrives ``L`` after it left its last resource, so: ``(P-1) g_l(b) + L_min``
    per NIC, ``N_A (P - N_A) g_l(b) + L_min`` per gateway side, and the shared links'
    load (:func:`_link_load`) on grids. O(C^2).
    """
    P = grid.nranks
    if P < 2:
        return 0.0
    C = grid.nclusters
    floor = _link_load(grid, nbytes) if C > 1 else 0.0
    for a, cluster in enumerate(grid.clusters):
        g = cluster.lan.g(nbytes)
        lat_out = [grid.wan(a, b).L for b in range(C) if b != a]
        lat_in = [grid.wan(b, a).L for b in range(C) if b != a]
        lan = [cluster.lan.L] if cluster.nranks > 1 else []
        floor = max(floor, (P - 1) * g + min(lan + lat_out), (P - 1) * g + min(lan + lat_in))
        away = cluster.nranks * (P - cluster.nranks)
        if away:
            floor = max(floor, away * g + min(lat_out), away * g + min(lat_in))
    return floor


def least_squares_ratio(samples: Iterable[tuple[float, ...]], *, relative: bool = True) -> float:
    """The contention ratio that best fits ``(lower, upper, time[, floor])`` samples.

    Minimises ``sum w (max(floor, lower + (upper - lower) gamma) - time)^2`` (the
    prediction of :meth:`AlltoallBounds.predict`; ``floor`` defaults to none), with
    ``w = 1 / t^2`` (relative errors, so that sizes spanning decades weigh alike) or
    ``w = 1`` (``relative=False``, plain least squares on seconds). Without floors this
    is ``gamma = sum w (u - l)(t - l) / sum w (u - l)^2``. With them the objective is
    quadratic between the breakpoints ``(floor - l) / (u - l)`` where a sample leaves
    its floor: each piece's minimiser, clipped to the piece, and each breakpoint are
    tried, the least objective wins (a sample at its floor only says ``gamma`` is no
    larger). O(n^2). Not clamped: ``gamma > 1`` means slower than the upper bound.
    Raises ParameterError when no sample has ``upper > lower``.

    Examples
    --------
    >>> least_squares_ratio([(1.0, 4.0, 3.0), (2.0, 8.0, 6.0)], relative=False)
    0.6666666666666666
    >>> least_squares_ratio([(1.0, 4.0, 3.0), (2.0, 8.0, 7.0, 7.0)], relative=False)
    0.6666666666666666
    """
    rows = []
    for sample in samples:
        lower, upper, time = sample[:3]
        floor = sample[3] if len(sample) > 3 else -math.inf
        w = 1.0 / (time * time) if relative and time > 0 else 1.0
        rows.append((lower, upper - lower, time, floor, w))
    moving = [r for r in rows if r[1] > 0]
    if not moving:
        raise ParameterError("cannot fit a contention ratio: no sample has upper > lower")

    def objective(gamma: float) -> float:
        return sum(w * (max(f, l + s * gamma) - t) ** 2 for l, s, t, f, w in rows)

    breaks = sorted({(f - l) / s for l, s, _, f, _ in moving if f > -math.inf})
    edges = [-math.inf, *breaks, math.inf]
    trials = list(breaks)
    for lo, hi in itertools.pairwise(edges):
        active = [r for r in moving if r[3] == -math.inf or (r[3] - r[0]) / r[1] <= lo]
        den = sum(w * s * s for _, s, _, _, w in active)
        if den > 0:
            num = sum(w * s * (t - l) for l, s, t, _, w in active)
            trials.append(min(max(num / den, lo), hi))
    return min(trials, key=objective)


def fit_contention(
    grid: Grid, times: Iterable[tuple[int, float]], *, relative: bool = True
) -> float:
    """Seed 002's contention ratio of one all-to-all algorithm on ``grid``, fitted by
    least squares to ``(bytes per pair, seconds)`` pairs (simulated or measured).

    Each pair becomes ``(lower, upper, time)`` with :func:`alltoall_bounds`, then
    :func:`least_squares_ratio`. Seed 002 (sec. 5) found ``gamma = 2/3`` "constant and
    depend[ing] only on the network characteristics"; pass the result as the models'
    ``contention=``.

    Examples
    --------
    >>> from gridcoll.network import lan
    >>> b = alltoall_bounds(lan(4), 4096)
    >>> round(fit_contention(lan(4), [(4096, b.predict(0.5))]), 6)
    0.5
    """
    return least_squares_ratio(contention_samples(grid, times), relative=relative)


def contention_samples(
    grid: Grid, times: Iterable[tuple[int, float]]
) -> list[tuple[float, float, float, float]]:
    """``(lower, upper, time, floor)`` for ``(bytes per pair, seconds)`` pairs on
    ``grid`` (:func:`alltoall_bounds`)."""
    out = []
    for nbytes, seconds in times:
        bounds = alltoall_bounds(grid, nbytes)
        out.append((bounds.lower, bounds.upper, seconds, bounds.floor))
    return out


def _direct(
    algorithm: str, grid: Grid, nbytes: int, root: int, itemsize: int, contention: float | None
) -> float:
    b = check_model_call(grid, nbytes, root, itemsize)
    if contention is None:
        contention = DEFAULT_CONTENTION
    return alltoall_bounds(grid, b).predict(contention)


def direct_alltoall_model(
    grid: Grid,
    nbytes: int,
    root: int = 0,
    *,
    itemsize: int = 1,
    contention: float | None = None,
) -> float:
    """Model of :func:`~gridcoll.algorithms.alltoall.direct_alltoall`: Table 3's bounds
    with the contention ratio ``contention`` (default :data:`DEFAULT_CONTENTION`; the
    tuner passes the simulator's fit, :mod:`gridcoll.tune.contention`), never below the
    resources' floor (:meth:`AlltoallBounds.predict`). O(C^2)."""
    return _direct("direct", grid, nbytes, root, itemsize, contention)


def direct_rotated_alltoall_model(
    grid: Grid,
    nbytes: int,
    root: int = 0,
    *,
    itemsize: int = 1,
    contention: float | None = None,
) -> float:
    """Model of :func:`~gridcoll.algorithms.alltoall.direct_rotated_alltoall`: as
    :func:`direct_alltoall_model`, with its own fitted ratio."""
    return _direct("direct-rotated", grid, nbytes, root, itemsize, contention)


def cluster_aware_alltoall_model(
    grid: Grid, nbytes: int, root: int = 0, *, itemsize: int = 1
) -> float:
    """Model of :func:`~gridcoll.algorithms.alltoall.cluster_aware_alltoall`: three
    rounds (:func:`~gridcoll.models._collective.rounds_time`) - members to agents
    (``N_B b`` each) with the direct local blocks, agents across the WAN
    (``N_A N_B b``), agents to members (``N_A b`` each) - each rank starting a round
    when it has finished the previous one."""
    b = check_model_call(grid, nbytes, root, itemsize)
    C, members = grid.nclusters, grid.members
    collect, wan, hand_out = [], [], []
    for A in range(C):
        for i in range(1, C):
            B = (A + i) % C
            a = agent(grid, A, B)
            collect += [(x, a, len(members[B]) * b) for x in members[A] if x != a]
            wan.append((a, agent(grid, B, A), len(members[A]) * len(members[B]) * b))
            hand_out += [(a, z, len(members[B]) * b) for z in members[A] if z != a]
    for A in range(C):  # the direct blocks, rotated: step j to the j-th next rank
        N = len(members[A])
        for j in range(1, N):
            collect += [(members[A][i], members[A][(i + j) % N], b) for i in range(N)]
    clock = rounds_time(Costs(grid), [collect, wan, hand_out])
    return max(clock.values(), default=0.0)


def segmented_alltoall_model(
    grid: Grid, nbytes: int, root: int = 0, *, segment_size: int, itemsize: int = 1
) -> float:
    """Model of :func:`~gridcoll.algorithms.alltoall.segmented_alltoall`.

    Every segment message returns at once (``os(m)``), so the links, NICs and gateways
    all work together and ``T`` is the busiest of them plus the way of one segment:
    ``T = max_x W_x + max_routes (L + g(m))``, where, with ``W(f) = (k-1) f(m) +
    f(m_last)`` per block of ``k`` segments, a rank's CPU does ``sum W(os) + sum
    W(or)`` (all its sends are posted before its receives), its NIC ``(P-1) W(g_l)``
    each way, cluster ``A``'s gateway ``N_A (P - N_A) W(g_l)`` each way, and a wide-area
    link ``sum N_A N_B W(g_link)`` over the cluster pairs routed over it. O(C^2).
    """
    m = check_model_call(grid, nbytes, root, itemsize, segment_size)
    check_segment_count("alltoall", grid, nbytes, m)  # the builder declines too
    k = -(-nbytes // m)
    last = nbytes - (k - 1) * m
    P, C = grid.nranks, grid.nclusters
    counts = [c.nranks for c in grid.clusters]

    def W(f) -> float:
        return (k - 1) * f(m) + f(last)

    busy = 0.0
    way = 0.0
    links: dict[str, float] = {}
    for a, cluster in enumerate(grid.clusters):
        lan = cluster.lan
        cpu = 0.0
        for b in range(C):
            n = counts[b] - (a == b)
            if not n:
                continue
            out = lan if a == b else grid.wan(a, b)
            into = lan if a == b else grid.wan(b, a)
            cpu += n * (W(out.os) + W(into.or_))
            way = max(way, out.L + out.g(m))
            if a != b:
                for name in grid.routes[(a, b)].links:
                    links[name] = links.get(name, 0.0) + counts[a] * counts[b] * W(
                        grid.links[name].g
                    )
        away = counts[a] * (P - counts[a]) if C > 1 else 0
        busy = max(busy, cpu, (P - 1) * W(lan.g), away * W(lan.g))
    busy = max([busy, *links.values()])
    return busy + way


MODELS = {
    ("alltoall", "direct"): direct_alltoall_model,
    ("alltoall", "direct-rotated"): direct_rotated_alltoall_model,
    ("alltoall", "cluster-aware"): cluster_aware_alltoall_model,
    ("alltoall", "direct-segmented"): segmented_alltoall_model,
}
"""The all-to-all models, by ``(op, name)``."""
