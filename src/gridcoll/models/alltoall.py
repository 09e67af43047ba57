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
time)`` pairs (simulated here, measured by the runtime benchmarks);
:func:`simulated_contention` fits ``gamma`` of one algorithm on one grid from the
simulator, once per grid; the registered models use it (or :data:`DEFAULT_CONTENTION`
on grids too large to simulate cheaply), unless given ``contention=``.

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

from collections.abc import Iterable
from dataclasses import dataclass

from gridcoll.algorithms.alltoall import agent
from gridcoll.errors import ParameterError
from gridcoll.models._collective import Costs, rounds_time
from gridcoll.models.single_layer import check_model_call
from gridcoll.network.grid import Grid

__all__ = [
    "CONTENTION_SIZES",
    "DEFAULT_CONTENTION",
    "MAX_FIT_RANKS",
    "MODELS",
    "AlltoallBounds",
    "alltoall_bounds",
    "cluster_aware_alltoall_model",
    "contention_samples",
    "direct_alltoall_model",
    "direct_rotated_alltoall_model",
    "fit_contention",
    "least_squares_ratio",
    "simulated_contention",
]

DEFAULT_CONTENTION = 2 / 3
"""Seed 002's contention ratio for its Gigabit Ethernet cluster (sec. 5.1)."""

CONTENTION_SIZES = (1024, 8192, 65536, 524288)
"""Block sizes (bytes per pair) :func:`simulated_contention` fits on."""

MAX_FIT_RANKS = 128
"""Above this many ranks :func:`simulated_contention` returns :data:`DEFAULT_CONTENTION`
instead of simulating (``P^2`` messages per size)."""


@dataclass(frozen=True, slots=True)
class AlltoallBounds:
    """Seed 002, Table 3, on a grid (seconds)."""

    lower: float
    upper: float

    def predict(self, contention: float) -> float:
        """``lower + (upper - lower) * contention``."""
        return self.lower + (self.upper - self.lower) * contention


def _link_load(grid: Grid, nbytes: int) -> float:
    """The busiest shared link's occupancy when every pair exchanges ``nbytes``, plus the
    largest latency across it: no schedule that sends each block directly is faster."""
    counts = [c.nranks for c in grid.clusters]
    busy: dict[str, list[float]] = {}
    for (a, b), route in grid.routes.items():
        n = counts[a] * counts[b]
        for name in route.links:
            load = busy.setdefault(name, [0.0, 0.0])
            load[0] += n * grid.links[name].g(nbytes)
            load[1] = max(load[1], route.plogp.L)
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
    return AlltoallBounds(max(lower, links), upper + links)


def least_squares_ratio(
    samples: Iterable[tuple[float, float, float]], *, relative: bool = True
) -> float:
    """The contention ratio that best fits ``(lower, upper, time)`` samples.

    Minimises ``sum w (lower + (upper - lower) gamma - time)^2``:
    ``gamma = sum w (u - l)(t - l) / sum w (u - l)^2``, with ``w = 1 / t^2`` (relative
    errors, so that sizes spanning decades weigh alike) or ``w = 1`` (``relative=False``,
    plain least squares on seconds). Not clamped: ``gamma > 1`` means slower than the
    upper bound. Raises ParameterError when no sample has ``upper > lower``.

    Examples
    --------
    >>> least_squares_ratio([(1.0, 4.0, 3.0), (2.0, 8.0, 6.0)], relative=False)
    0.6666666666666666
    """
    num = den = 0.0
    for lower, upper, time in samples:
        spread = upper - lower
        w = 1.0 / (time * time) if relative and time > 0 else 1.0
        num += w * spread * (time - lower)
        den += w * spread * spread
    if den <= 0:
        raise ParameterError("cannot fit a contention ratio: no sample has upper > lower")
    return num / den


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
) -> list[tuple[float, float, float]]:
    """``(lower, upper, time)`` for ``(bytes per pair, seconds)`` pairs on ``grid``."""
    out = []
    for nbytes, seconds in times:
        bounds = alltoall_bounds(grid, nbytes)
        out.append((bounds.lower, bounds.upper, seconds))
    return out


_FITTED: dict[tuple[str, str], float] = {}
_FITTED_MAX = 256


def simulated_contention(grid: Grid, algorithm: str = "direct") -> float:
    """``gamma`` of ``algorithm`` (``direct`` or ``direct-rotated``) on ``grid``, fitted
    (:func:`fit_contention`) on the simulator at :data:`CONTENTION_SIZES`; memoised by
    grid fingerprint.

    Grids of more than :data:`MAX_FIT_RANKS` ranks, and grids where the bounds
    coincide at every size, get :data:`DEFAULT_CONTENTION`.
    """
    key = (grid.fingerprint, algorithm)
    if key in _FITTED:
        return _FITTED[key]
    gamma = DEFAULT_CONTENTION
    if 2 <= grid.nranks <= MAX_FIT_RANKS:
        from gridcoll.algorithms.registry import get_builder
        from gridcoll.simulate import simulate

        build = get_builder("alltoall", algorithm).build
        times = [(b, simulate(build(grid, b), grid).total_s) for b in CONTENTION_SIZES]
        try:
            gamma = fit_contention(grid, times)
        except ParameterError:
            gamma = DEFAULT_CONTENTION
    if len(_FITTED) >= _FITTED_MAX:
        _FITTED.pop(next(iter(_FITTED)))
    _FITTED[key] = gamma
    return gamma


def _direct(
    algorithm: str, grid: Grid, nbytes: int, root: int, itemsize: int, contention: float | None
) -> float:
    b = check_model_call(grid, nbytes, root, itemsize)
    if contention is None:
        contention = simulated_contention(grid, algorithm)
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
    with the contention ratio (``contention``, default :func:`simulated_contention`)."""
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


MODELS = {
    ("alltoall", "direct"): direct_alltoall_model,
    ("alltoall", "direct-rotated"): direct_rotated_alltoall_model,
    ("alltoall", "cluster-aware"): cluster_aware_alltoall_model,
}
"""The all-to-all models, by ``(op, name)``."""
