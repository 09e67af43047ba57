"""Lower bounds on the completion time of an ``M``-byte broadcast: latency, throughput
and windowed cuts.

Three lower bounds; ``Bound.time_s`` is the largest (each is valid alone, against the
simulator's semantics of docs/architecture.md: cut-through FIFO resources, ``os``/``or``,
``L``):

* **Latency bound** (:func:`latency_bound`). Any byte reaches the farthest rank no
  earlier than the shortest path to it: per hop ``L + min(os(1), occ(1))``, ``occ`` the
  occupancy of the message's busiest resource (its tail leaves that resource no earlier
  than ``occ`` after its head entered; on every preset ``occ(1) >= os(1)``, so this is
  seed 000's ``L + os`` per hop; :mod:`gridcoll.network.bounds.paths`).
* **Throughput bound** (:func:`throughput_rate`). The rate at which a root can broadcast
  is at most the minimum, over all receivers x, of the max-flow from the root to x in
  the link-capacity graph (Edmonds' arborescence packing makes the minimum achievable).
  ``M / maxflow(root, x)`` plus the latency of a hop across x's min cut, at every x.
* **Windowed-cut bound** (:func:`windowed_time`): latency along paths and bandwidth
  together. A byte that crosses resource ``r`` in a message from rank ``y`` to rank
  ``z`` does so no earlier than ``d(root, y)`` (``y`` must hold it) and no later than
  ``T - L_yz - d(z, x)`` (it must still reach ``x`` by ``T``), ``d`` the least latency
  along paths; so by time ``T`` a cut ``C`` between the root and ``x`` lets at most
  ``f_C(T) = sum_{r in C} cap_r (T - lam_r)^+`` bytes through, ``lam_r`` the least
  such latency through ``r``. ``x`` cannot hold ``M`` bytes before the least ``T`` with
  ``min_C f_C(T) >= M``: a parametric minimum cut, solved by Newton's method on cuts.

The flows are max-flows on the cluster quotient of the capacity graph
(:mod:`gridcoll.network.bounds.flows`), one receiver per class of clusters that carry
equal flows. :func:`broadcast_bound` gathers the three.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from gridcoll.network.bounds.flows import (
    FlowGraph,
    RankClass,
    cluster_classes,
    cut_edges,
    first_time,
    max_flow,
    quotient_graph,
    wan_graph,
)
from gridcoll.network.bounds.paths import Hops, home_loop, hops
from gridcoll.network.grid import Grid

__all__ = [
    "NEWTON_STEPS",
    "Bound",
    "broadcast_bound",
    "latency_bound",
    "throughput_rate",
    "windowed_time",
]

NEWTON_STEPS = 16
"""Most minimum cuts :func:`windowed_time` solves per receiver (every step is valid)."""


# -- the latency bound -----------------------------------------------------------------
def latency_bound(grid: Grid, root: int = 0, m: float = 1.0) -> float:
    """Earliest time the farthest rank can hold a byte: max over ranks of the least
    ``sum (L + min(os(m), occ(m)))`` over the hops of a path from the root (seconds).

    A message sent at ``t`` arrives no earlier than ``t + occ(m) + L``, ``occ`` the
    occupancy of its busiest resource (docs/architecture.md, "Simulator semantics"), and
    a rank forwards nothing before it holds it. On every preset ``occ(m) >= os(m)``, so
    this is seed 000's ``L + os(m)`` per hop. O(C^2) after the memoised
    Floyd-Warshall."""
    grid.check_rank(root, "root")
    if grid.nranks == 1:
        return 0.0
    h = hops(grid, m)
    home = grid.cluster_of[root]
    dist = h.D[home].copy()
    dist[home] = home_loop(h, home) if grid.clusters[home].nranks > 1 else 0.0
    return float(dist.max())


# -- the broadcast: per receiver class -------------------------------------------------
@dataclass(frozen=True, eq=False)
class _Broadcast:
    """The quotient graph of broadcasts from one root, shared by every receiver: the
    classes ``{root}``, and per cluster one rank ``one`` (the receiver when it is that
    cluster's turn, a relay otherwise) and the ``rest``. (A finer partition than needed
    is still a partition into interchangeable ranks, so :func:`quotient_graph`'s
    argument holds for every receiver at once.)"""

    graph: FlowGraph
    classes: tuple[RankClass, ...]
    source: int
    ones: dict[int, int]  # cluster -> class index of its receiver
    out_e: np.ndarray  # NIC-out edges and their classes
    out_c: np.ndarray
    in_e: np.ndarray
    in_c: np.ndarray


def _broadcast(grid: Grid, root: int, per_rank: bool = False) -> _Broadcast:
    """:class:`_Broadcast` from ``root`` (memoised); ``per_rank`` makes every rank its
    own class (the per-rank graph, for tests)."""

    def compute() -> _Broadcast:
        H = grid.cluster_of[root]
        classes: list[RankClass] = [RankClass(H, 1, "root")]
        ones: dict[int, int] = {}
        for c, ranks in enumerate(grid.members):
            n = len(ranks) - (c == H)
            if n > 0:
                ones[c] = len(classes)
                classes.append(RankClass(c, 1, "one"))
            if n > 1:
                if per_rank:
                    classes += [RankClass(c, 1, "rest")] * (n - 1)
                else:
                    classes.append(RankClass(c, n - 1, "rest"))
        graph = quotient_graph(grid, classes)
        out_e = [e for e, k in enumerate(graph.kind) if k == "nic_out"]
        in_e = [e for e, k in enumerate(graph.kind) if k == "nic_in"]
        return _Broadcast(
            graph,
            tuple(classes),
            graph.index[("class", 0)],
            ones,
            np.array(out_e, dtype=np.int64),
            np.array([graph.key[e] for e in out_e], dtype=np.int64),
            np.array(in_e, dtype=np.int64),
            np.array([graph.key[e] for e in in_e], dtype=np.int64),
        )

    return grid.memo.get("bounds.broadcast", (root, per_rank), compute, maxsize=8)


def _windows(grid: Grid, b: _Broadcast, root: int, X: int) -> np.ndarray:
    """``lam[e]``: the least ``T`` at which edge ``e`` can carry a byte that reaches the
    receiver (the ``one`` of cluster ``X``) by ``T`` (:func:`windowed_time`); its
    capacity by ``T`` is ``cap_e (T - lam_e)^+``.

    With ``from(c)`` the least latency from the root to some rank of cluster ``c`` and
    ``to(c)`` from some rank of ``c`` to ``x`` (``sum w``, :func:`latency_bound`), a
    message ``y -> z`` on route ``rho`` crosses its resources within
    ``[from(y), T - L_rho - to(z)]``. A resource's window contains those of all messages
    that can cross it: a class's NIC out ``[frm, T - to]``; its NIC in ``[0, T - (least
    L into it) - to]``; a gateway side or a link ``[min from(src), T - min (L +
    to(dst))]`` over its routes; an unbounded hop (no resource; it only forbids what
    cannot arrive in time) is open from ``min (from + L + to)`` on. O(edges + route
    hops) numpy."""
    h, wan, graph = hops(grid, 1.0), wan_graph(grid), b.graph
    H = grid.cluster_of[root]
    C = grid.nclusters
    frommin, tomin = h.D[H].copy(), h.D[:, X].copy()
    frommin[H], tomin[X] = 0.0, 0.0
    lam = np.full(len(graph.tails), math.inf)
    used = np.flatnonzero(np.diff(wan.ptr))
    if len(used):
        rfrom = frommin[wan.src][wan.routes]
        rend = (wan.lat + tomin[wan.dst])[wan.routes]
        starts = wan.ptr[used]
        split = np.minimum.reduceat(rfrom, starts) + np.minimum.reduceat(rend, starts)
        joint = np.minimum.reduceat(rfrom + rend, starts)
        lam[used] = np.where(np.isfinite(graph.caps[used]), split, joint)
    if C > 1:
        L = h.L  # inf on the diagonal
        lam[wan.gw_out_e] = (frommin + (L + tomin[None, :]).min(axis=1))[wan.gw_out_c]
        order = np.argsort(frommin)
        first, second = frommin[order[0]], frommin[order[1]]
        not_self = np.where(np.arange(C) == order[0], second, first)
        lam[wan.gw_in_e] = (not_self + L.min(axis=0) + tomin)[wan.gw_in_c]
    cl = np.array([c.cluster for c in b.classes], dtype=np.int64)
    loop_h, loop_x = home_loop(h, H), home_loop(h, X)
    frm = np.where(cl == H, loop_h, h.D[H, cl])
    frm[0] = 0.0  # the root
    to = np.where(cl == X, loop_x, h.D[cl, X])
    to[b.ones[X]] = 0.0  # the receiver
    into = np.minimum(h.lan_L, h.L.min(axis=0))
    lam[b.out_e] = (frm + to)[b.out_c]
    lam[b.in_e] = (into[cl] + to)[b.in_c]
    return lam


@dataclass(frozen=True, eq=False)
class _Receiver:
    """One receiver class of a broadcast: its static max-flow, min cut and windows."""

    cluster: int
    sink: int
    flow: float
    after: float
    cut: tuple[int, ...]


def _receivers(grid: Grid, root: int, per_rank: bool = False) -> tuple[_Receiver, ...]:
    """One :class:`_Receiver` per class of receiver clusters (:func:`cluster_classes`
    fixing the root's cluster; every cluster with ``per_rank``), memoised per root."""

    def compute() -> tuple[_Receiver, ...]:
        b = _broadcast(grid, root, per_rank)
        graph, H = b.graph, grid.cluster_of[root]
        fixed = range(grid.nclusters) if per_rank else (H,)
        out = []
        for cls in cluster_classes(grid, fixed):
            X = cls[0]
            if X not in b.ones:
                continue
            t = graph.index[("class", b.ones[X])]
            flow, reach = max_flow(graph, graph.caps, b.source, t)
            cut = cut_edges(graph, reach)
            after = min((graph.after[e] for e in cut), default=0.0)
            out.append(_Receiver(X, t, flow, after, tuple(cut)))
        return tuple(out)

    return grid.memo.get("bounds.receivers", (root, per_rank), compute, maxsize=8)


def throughput_rate(grid: Grid, root: int = 0) -> float:
    """Maximum broadcast rate (bytes/s) from ``root``: min over receivers of the
    max-flow, one per receiver class on the quotient graph (:func:`quotient_graph`)."""
    grid.check_rank(root, "root")
    if grid.nranks == 1:
        return math.inf
    return min(r.flow for r in _receivers(grid, root))


def _newton(
    b: _Broadcast, receiver: _Receiver, lams: np.ndarray, nbytes: float, start: float
) -> float:
    """The least ``T`` at which the windowed min cut of one receiver reaches ``nbytes``,
    by Newton's method on cuts: at a ``T`` known too early, the minimum cut ``C`` of the
    capacities ``cap (T - lam)^+`` lets fewer than ``nbytes`` through; every ``T'`` below
    ``T_C`` (:func:`first_time` of ``C``) is then too early as well, so ``T_C`` is a
    valid bound and the next iterate. ``f_C`` is nondecreasing, so the iterates
    increase and stop at the exact value (or after :data:`NEWTON_STEPS`, still valid).
    One max-flow per step."""
    graph, caps = b.graph, b.graph.caps
    T = start
    for _ in range(NEWTON_STEPS):
        if not math.isfinite(T):
            return T
        with np.errstate(invalid="ignore"):
            now = np.where(lams < T, caps * (T - lams), 0.0)
        value, reach = max_flow(graph, now, b.source, receiver.sink)
        if value >= nbytes * (1 - 1e-9):
            return T
        cut = cut_edges(graph, reach)
        nxt = first_time(caps[cut].tolist(), lams[cut].tolist(), nbytes)
        if not nxt > T:
            return T
        T = nxt
    return T


def windowed_time(grid: Grid, nbytes: int, root: int = 0) -> float:
    """The windowed-cut bound of an ``nbytes`` broadcast from ``root`` (seconds): the
    largest over receivers ``x`` of the least ``T`` at which every cut between the root
    and ``x`` can have let ``nbytes`` through in time.

    **Validity** (docs/architecture.md, "Simulator semantics"). Follow any byte that
    ``x`` holds at ``T`` back to the root: a chain of messages, each sent at ``t`` by a
    rank that already held the byte and arriving at ``A``. A message sent at ``t``
    enters each resource of its path at ``h >= t``, holds it for its occupancy ``occ``
    (the tail leaves the busiest no earlier than ``occ(1)`` after ``t``), and arrives at
    ``A = e_last + L >= h + occ + L``; a receive completes no earlier than ``A`` (``or``
    only delays it), a send's ``os`` delays the sender's next operation, not this
    message's head, and a rank forwards only what it holds. So ``t >= from(sender)`` and
    ``A + to(receiver) <= T``, with ``from``/``to`` the least sums of ``w = L +
    min(os(1), occ(1))`` along paths (:func:`latency_bound`). Spread each message's
    ``m`` bytes evenly over each of its resource intervals ``[h, h + occ]``: every
    instant of those lies in ``[t, A - L]``, so every byte the message carries towards
    ``x`` crosses resource ``r`` inside ``r``'s window (:func:`_windows`), at a rate
    ``m / occ <= cap_r`` (:func:`peak_rate`), and the intervals of one FIFO resource do
    not overlap. The chain's resources form a path from the root to ``x`` in the
    capacity graph, so it crosses every cut ``C``; counting each byte once, at most
    ``f_C(T) = sum_{r in C} cap_r (T - lam_r)^+`` bytes reach ``x`` by ``T``. Hence
    ``x`` completes no earlier than the least ``T`` with ``min_C f_C(T) >= nbytes``.
    Windows are equal on the ranks of a class, so :func:`quotient_graph`'s argument
    gives the same minimum cuts on the quotient, and equal on clusters that
    :func:`cluster_classes` groups.

    It adds to the throughput bound what the paths' latency costs: on ``magpie:8,1`` a
    relayed byte pays two 10 ms WAN latencies, so at 16 KiB the relays carry little and
    the bound is 20.9 ms (throughput bound: 12.3 ms). As ``nbytes`` grows it tends to
    ``nbytes / maxflow`` plus a capacity-weighted latency of the min cut (at least the
    throughput bound's). Cost: a max-flow per receiver class and Newton step (usually
    one or two), memoised per ``(root, nbytes)``.
    """
    grid.check_rank(root, "root")
    if grid.nranks == 1 or nbytes <= 0:
        return 0.0
    return grid.memo.get(
        "bounds.windowed", (root, nbytes), lambda: _windowed(grid, nbytes, root), maxsize=256
    )


def _windowed(grid: Grid, nbytes: int, root: int, per_rank: bool = False) -> float:
    """:func:`windowed_time` unmemoised, on the quotient or (``per_rank``) per rank.

    Receivers are taken by decreasing streaming bound; one whose windowed time cannot
    exceed the largest found so far (:func:`_latest`) is skipped, so on large messages
    (where the static cut decides) one receiver's windows are solved, not all."""
    b = _broadcast(grid, root, per_rank)
    caps = b.graph.caps
    h = hops(grid, 1.0)
    receivers = sorted(_receivers(grid, root, per_rank), key=lambda r: -(nbytes / r.flow + r.after))
    worst = 0.0
    for receiver in receivers:
        if _latest(grid, h, root, receiver, nbytes) <= worst:
            continue  # its Newton steps could not raise the maximum
        lams = grid.memo.get(
            "bounds.windows",
            (root, receiver.cluster, per_rank),
            lambda r=receiver: _windows(grid, b, root, r.cluster),
            maxsize=1024,
        )
        cut = list(receiver.cut)
        start = first_time(caps[cut].tolist(), lams[cut].tolist(), nbytes)
        start = max(start, float(lams[b.out_e[0]]), worst)  # the root's NIC: d(root, x)
        worst = max(worst, _newton(b, receiver, lams, nbytes, start))
    return worst


def _latest(grid: Grid, h: Hops, root: int, receiver: _Receiver, nbytes: float) -> float:
    """An upper bound on one receiver's windowed time: every window of
    :func:`_windows` opens by ``lam_max = max from + max L + max to`` (the largest
    latency from the root to any rank, of one hop, and from any rank to ``x``), and at
    ``T = lam_max + nbytes / maxflow`` every cut lets ``sum cap (T - lam) >= maxflow *
    nbytes / maxflow`` through. O(C)."""
    H, X = grid.cluster_of[root], receiver.cluster
    finite = h.L[np.isfinite(h.L)]
    far = max(float(h.D[H].max()), home_loop(h, H) if grid.clusters[H].nranks > 1 else 0.0)
    back = max(float(h.D[:, X].max()), home_loop(h, X) if grid.clusters[X].nranks > 1 else 0.0)
    one = max(float(finite.max(initial=0.0)), float(np.nan_to_num(h.lan_L, posinf=0.0).max()))
    return nbytes / receiver.flow + far + one + back


@dataclass(frozen=True, slots=True)
class Bound:
    """The physical limit of one collective call (all times in seconds)."""

    rate: float
    """Throughput bound: best possible rate in bytes/s (the smallest cut's flow)."""
    latency_s: float
    """Latency bound: shortest path to the farthest rank, with per-hop overheads."""
    throughput_s: float
    """Streaming bound: max over receivers x of ``nbytes / maxflow(root, x)`` plus the
    least latency of the hops across x's min cut (the last byte still pays it)."""
    windowed_s: float = 0.0
    """Windowed-cut bound (:func:`windowed_time`): latency along paths and bandwidth
    together (0 where not computed)."""

    @property
    def time_s(self) -> float:
        """The bound on completion time: the largest of the three."""
        return max(self.latency_s, self.throughput_s, self.windowed_s)


def broadcast_bound(grid: Grid, nbytes: int, root: int = 0) -> Bound:
    """Lower bound on the completion time of an ``nbytes`` broadcast from ``root``.

    Every byte reaches receiver x through its min cut, at most ``maxflow(root, x)``
    bytes/s, and then pays the latency of the hop it crossed the cut on; so x cannot
    finish before ``nbytes / maxflow(root, x) + (least L of the cut's hops)``; nor
    before :func:`windowed_time`, nor before :func:`latency_bound`. Cost: one max-flow
    per receiver class on the quotient graph (memoised per root), plus the windowed
    cuts' Newton steps (memoised per root and size).

    >>> from gridcoll.network.presets import magpie
    >>> b = broadcast_bound(magpie(8, 1), 16384)
    >>> round(b.throughput_s * 1e3, 1), round(b.windowed_s * 1e3, 1)
    (12.3, 20.9)
    """
    grid.check_rank(root, "root")
    if grid.nranks == 1:
        return Bound(math.inf, 0.0, 0.0)
    receivers = _receivers(grid, root)
    streaming = max(nbytes / r.flow + r.after for r in receivers)
    return Bound(
        min(r.flow for r in receivers),
        latency_bound(grid, root),
        streaming,
        windowed_time(grid, nbytes, root),
    )
