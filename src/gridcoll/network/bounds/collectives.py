"""Lower bounds on the completion time of the collectives other than the broadcast: cuts
and the longest path.

The other collectives (:func:`collective_bound`) are bounded by cuts: a set of ranks
that must receive ``B`` bytes from outside it, all of which cross the max-flow min cut
between the two sides (:func:`set_flow`), needs at least ``B / flow`` plus the latency
of a hop into the set; and by the latency of the longest shortest path some byte or
signal must travel. Each op's cuts are listed in :func:`collective_bound`; scan's and
exscan's are the prefix cuts (:data:`PREFIX_CUTS`); a broadcast's bound is
:func:`gridcoll.network.bounds.broadcast.broadcast_bound`. The flows are max-flows on
the cluster quotient of the capacity graph (:mod:`gridcoll.network.bounds.flows`), the
latencies least sums along paths (:mod:`gridcoll.network.bounds.paths`).
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Sequence

import numpy as np

from gridcoll.network.bounds.broadcast import Bound, broadcast_bound, latency_bound
from gridcoll.network.bounds.flows import (
    RankClass,
    cluster_classes,
    cut_edges,
    max_flow,
    quotient_graph,
    wan_graph,
)
from gridcoll.network.bounds.paths import home_loop, hops
from gridcoll.network.grid import Grid

__all__ = ["BOUND_OPS", "PREFIX_CUTS", "collective_bound", "set_flow", "site_groups"]


# -- the other collectives -------------------------------------------------------------
BOUND_OPS = (
    "bcast",
    "scatter",
    "gather",
    "allgather",
    "alltoall",
    "reduce",
    "allreduce",
    "barrier",
    "reduce_scatter",
    "scan",
    "exscan",
)
"""The collectives :func:`collective_bound` knows."""

_Counts = tuple[tuple[int, int], ...]  # per cluster: (sources, sinks) among its ranks


def _count_flow(grid: Grid, counts: _Counts) -> tuple[float, float]:
    """Max-flow from the ranks counted as sources to those counted as sinks, and the
    least latency a byte still pays after crossing its min cut before it reaches a
    sink's cluster: over the cut's edges, for a wide-area edge the least over the routes
    that cross it of the route's ``L`` plus the least ``sum w`` from the route's end to
    a cluster holding a sink (:func:`gridcoll.network.bounds.paths.hops`), for a NIC or
    gateway side the LAN's ``L``. On the quotient with one class per cluster and role
    (:func:`quotient_graph`, terminals), which depends only on the counts; memoised."""

    def compute() -> tuple[float, float]:
        classes = []
        for c, (n_src, n_sink) in enumerate(counts):
            rest = grid.clusters[c].nranks - n_src - n_sink
            for role, n in (("source", n_src), ("sink", n_sink), ("other", rest)):
                if n > 0:
                    classes.append(RankClass(c, n, role))
        graph = quotient_graph(grid, classes, terminals=True)
        flow, reach = max_flow(graph, graph.caps, graph.index[("source",)], graph.index[("sink",)])
        sinks = [c for c, (_, k) in enumerate(counts) if k]
        onward = hops(grid, 1.0).D[:, sinks].min(axis=1)  # least sum w to a sink's cluster
        wan = wan_graph(grid)
        after = math.inf
        for e in cut_edges(graph, reach):
            routes = wan.routes[wan.ptr[e] : wan.ptr[e + 1]] if e < len(wan.edges) else ()
            if len(routes):  # a route's L, then on from its end to a sink
                after = min(after, float((wan.lat[routes] + onward[wan.dst[routes]]).min()))
            else:
                after = min(after, graph.after[e])
        return flow, 0.0 if math.isinf(after) else after

    return grid.memo.get("bounds.set_flows", counts, compute, maxsize=4096)


def set_flow(grid: Grid, sources: frozenset[int], sinks: frozenset[int]) -> float:
    """Max-flow (bytes/s) from the ranks ``sources`` to the ranks ``sinks`` together.

    A super-source feeds every source and every sink drains into a super-sink, both
    unbounded. Ranks of one cluster with the same role are interchangeable, so this is
    the flow of the quotient by (cluster, role) (:func:`quotient_graph`; memoised by the
    counts). Infinite when the sets share a rank. O(P) plus one max-flow on the quotient.
    """
    sources, sinks = frozenset(sources), frozenset(sinks)
    if sources & sinks:
        return math.inf
    n_src = [0] * grid.nclusters
    n_sink = [0] * grid.nclusters
    for r in sources:
        n_src[grid.cluster_of[grid.check_rank(r)]] += 1
    for r in sinks:
        n_sink[grid.cluster_of[grid.check_rank(r)]] += 1
    return _count_flow(grid, tuple(zip(n_src, n_sink, strict=True)))[0]


def _entry_latency(grid: Grid, counts: _Counts) -> float:
    """The least ``L`` of a message from a rank outside the counted sinks to one of them.

    The first message that brings a byte into the sink set crosses (or follows) every
    cut between the sources and the sinks, so a byte that crossed the min cut at ``t``
    arrives no earlier than ``t`` plus this latency: a LAN hop into a cluster holding
    both sinks and other ranks, or a route into a sink's cluster from a cluster holding
    a rank that is not a sink. O(C^2)."""
    L = hops(grid, 1.0).L
    outside = [grid.clusters[c].nranks - k for c, (_, k) in enumerate(counts)]
    best = math.inf
    for c, (_, k) in enumerate(counts):
        if not k:
            continue
        if outside[c]:
            best = min(best, grid.clusters[c].lan.L)
        for a in range(grid.nclusters):
            if a != c and outside[a]:
                best = min(best, float(L[a, c]))
    return 0.0 if math.isinf(best) else best


def _cut(grid: Grid, need: float, counts: _Counts, combined: bool = False) -> tuple[float, float]:
    """``(seconds, flow)`` for ``need`` bytes crossing from the counted sources into the
    counted sinks: ``need / flow`` plus the latency still paid after the min cut, the
    larger of the cut edges' least ``L`` (the message crossing pays its own) and
    :func:`_entry_latency` (the message entering the sinks, the same one or later).

    ``combined``: the bytes are partial results that must each combine every source's
    value (a reduction's); then the time the sources take to mix is also paid
    (:func:`_mixing_time`)."""
    if need <= 0 or not any(s for s, _ in counts) or not any(k for _, k in counts):
        return 0.0, math.inf
    flow, after = _count_flow(grid, counts)
    crossing = need / flow
    if combined:
        for k, tau, far in _mixing(grid, counts):
            crossing = max(
                crossing, _mixing_time(need, flow, k, tau), _mixing_time(need, flow, 2, far)
            )
    return crossing + max(after, _entry_latency(grid, counts)), flow


def _mixing(grid: Grid, counts: _Counts) -> list[tuple[int, float, float]]:
    """``(k, tau, far)`` per partition of the counted sources into groups (their
    clusters; the sites of :func:`site_groups` with the other clusters alone): ``k``
    groups hold sources; no rank holds values of two of them before ``tau``, nor a
    value of some one group ``g`` with another's before ``far``.

    Values of groups ``g`` and ``h`` meet at a cluster ``x`` no earlier than
    ``delta(g, h) = min_x max(D(g, x), D(h, x))``, ``D`` the least ``sum w`` from a
    cluster of the group to ``x`` (:func:`gridcoll.network.bounds.paths.hops`; 0 inside
    it). ``tau`` is the least ``delta`` over pairs, ``far`` the largest over ``g`` of
    ``min_h delta(g, h)`` (``teragrid``'s SDSC: 29 ms from any other site). O(k^2 C)
    per partition; above :data:`MIXING_PAIRS` ``k^2 C``, ``tau`` alone, from the hops
    that leave a group."""
    C = grid.nclusters
    h = hops(grid, 1.0)
    holding = [c for c, (n, _) in enumerate(counts) if n]
    grouped = {c for g in site_groups(grid) for c in g}
    partitions = [[(c,) for c in holding]]
    if grouped:
        groups = list(site_groups(grid)) + [(c,) for c in range(C) if c not in grouped]
        partitions.append([g for g in groups if any(counts[c][0] for c in g)])
    out = []
    for groups in partitions:
        k = len(groups)
        if k < 2:
            continue
        reach = np.array([h.D[list(g)].min(axis=0) for g in groups])  # (k, C)
        if k * k * C <= MIXING_PAIRS:
            delta = np.maximum(reach[:, None, :], reach[None, :, :]).min(axis=2)
            np.fill_diagonal(delta, np.inf)
            first = delta.min(axis=1)
            out.append((k, float(first.min()), float(first.max())))
        else:
            leave = [
                float(h.w[np.ix_(g, [b for b in range(C) if b not in g])].min()) for g in groups
            ]
            out.append((k, min(leave), 0.0))
    return out


MIXING_PAIRS = 4_000_000
"""The largest ``k^2 C`` for which :func:`_mixing` weighs every pair of groups."""


def _mixing_time(need: float, flow: float, k: int, tau: float) -> float:
    """The least time for ``need`` bytes of partial results, each combining the values
    of ``k`` groups of sources that cannot mix before ``tau``, to cross a cut of
    ``flow`` bytes/s.

    For each element, the partial results crossing the cut must together cover the
    ``k`` groups: ``k`` single-group messages, or at least one that combines two or
    more groups, formed (and so crossing) no earlier than ``tau``. Let ``b`` elements
    of the ``M = need`` have a combined crossing. By time ``x`` (after which the last
    crossing byte still pays its latency) ``k (M - b) + b`` bytes crossed, and the
    ``b`` combined ones crossed within ``[tau, x]``: ``x >= max((kM - (k-1) b) / F,
    tau + b / F)``, least at ``b = M - F tau / k``. So ``x >= M / F + (1 - 1/k) tau``
    when ``k M > F tau``, else ``x >= k M / F`` (every element crossed ``k`` times).
    The same count with one group ``g`` against the rest (``k = 2``, ``tau = far``):
    an element whose ``g`` value crosses alone crosses twice, and one that crosses
    combined with another group's crosses no earlier than ``far``.
    On ``magpie:8,1`` a reduce's root waits ``M / (7 MB/s) + (6/7) L`` before the last
    latency: the links into the root carry only the senders' own values until the
    others' arrive."""
    if k < 2 or tau <= 0:
        return need / flow
    if k * need <= flow * tau:
        return k * need / flow
    return need / flow + (1 - 1 / k) * tau


def _counts(C: int, sources: dict[int, int], sinks: dict[int, int]) -> _Counts:
    return tuple((sources.get(c, 0), sinks.get(c, 0)) for c in range(C))


def _block_bytes(
    grid: Grid, op: str, b: int, root: int, rep: int, counts: Sequence[int] | None
) -> dict:
    """The bytes each cut of :func:`collective_bound` must carry, for scatter, gather,
    allgather, all-to-all and reduce-scatter (``{}`` for the others): ``"cluster"``
    per cluster (into or out of it), ``"away"`` (the ranks outside the root's
    cluster), ``"rank"`` (into or out of the rank ``rep``); reduce-scatter's into and
    out of each cluster and ``rep``. Blocks of ``b`` bytes, or ``counts`` per block."""
    if op not in ("scatter", "gather", "allgather", "alltoall", "reduce_scatter"):
        return {}
    P = grid.nranks
    if counts is None:
        counts = [b] * (P * P if op == "alltoall" else P)
    cluster_of = grid.cluster_of
    if op == "alltoall":  # block src * P + dst
        into = [0] * grid.nclusters
        out = [0] * grid.nclusters
        for i, c in enumerate(counts):
            src, dst = divmod(i, P)
            if cluster_of[src] != cluster_of[dst]:
                into[cluster_of[dst]] += c
                out[cluster_of[src]] += c
        rank = sum(counts[s * P + rep] for s in range(P) if s != rep)
        return {"cluster": into, "cluster_out": out, "rank": rank}
    home = cluster_of[root]
    total = sum(counts)
    per = [0] * grid.nclusters
    for r, c in enumerate(counts):
        per[cluster_of[r]] += c
    if op == "reduce_scatter":  # block i: b_i from every rank outside i's cluster
        return {
            "cluster_in": per,
            "cluster_out": [total - x for x in per],
            "rank_in": counts[rep],
            "rank_out": total - counts[rep],
        }
    if op == "allgather":  # every cluster needs every other cluster's blocks
        return {"cluster": [total - x for x in per], "rank": total - counts[rep]}
    per[home] -= counts[root]  # scatter, gather: the root keeps its own block
    return {"cluster": per, "away": total - per[home] - counts[root], "rank": total - counts[root]}


def collective_bound(
    grid: Grid, op: str, nbytes: int, root: int = 0, counts: Sequence[int] | None = None
) -> Bound:
    """Lower bound on the completion time of one collective call (seconds).

    ``nbytes`` is what the call's ``--size`` means: the message of a broadcast, the
    block of one rank per peer for scatter, gather, allgather and all-to-all (MPI's
    count), the vector of a reduction (ignored by a barrier). The cuts, each needing
    ``bytes / max-flow`` plus the least latency of a hop into its receiving side:

    =========  ===================================================================
    bcast      :func:`broadcast_bound` (Edmonds' arborescence packing, windowed cuts)
    scatter    each cluster's non-root ranks receive ``N_c b`` from the root; the
               ranks outside the root's cluster ``(P - N_root) b``; all others
               ``(P-1) b`` through the root's NIC
    gather     the same towards the root
    allgather  each cluster receives ``(P - N_c) b`` from outside; a rank ``(P-1) b``
    alltoall   each cluster receives and sends ``N_c (P - N_c) b``; a rank
               receives ``(P-1) b``
    reduce     each cluster without the root, and all of them together, send the
               root ``M`` (any operation: a partial result is ``M`` bytes); the root
               receives ``M``
    allreduce  each cluster receives ``M`` and sends ``M``; a rank receives ``M``
    barrier    latency only
    reduce_    each cluster receives ``N_c b`` and sends ``(P - N_c) b``; a rank
    scatter    receives ``b`` and sends ``(P-1) b``
    scan,      a cluster receives ``M`` from the ranks outside it below its highest
    exscan     rank and sends ``M`` to those above its lowest (if any; the
               :data:`PREFIX_CUTS` clusters with the fewest such ranks each way);
               rank ``P-1`` receives ``M``, rank 0 sends ``M``
    =========  ===================================================================

    Clusters that share a site (:func:`site_groups`) are also cut together, with the
    same arguments (``teragrid``'s sites share one access link each, which no single
    cluster's cut sees). The allreduce is also bounded by its exchange across the
    clusters, the sites and the ranks (:func:`_gossip_cut`): ``2 (k-1) M`` bytes must
    enter ``k`` parts.

    With ``counts`` (the uneven form of scatter, gather, allgather, all-to-all or
    reduce-scatter: bytes per block, :func:`gridcoll.tune.plan`) each cut needs the
    bytes of the blocks that must cross it instead of a multiple of ``b``; every
    cluster is then cut on its own (its blocks differ), and a rank's cut is taken at
    the first rank.

    reduce_scatter (``nbytes = b``, one block): rank ``i``'s block depends on every
    rank's block ``i``, and a partial result of a block is ``b`` bytes (any
    operation); so the ``N_c`` blocks of cluster ``c`` need ``N_c b`` bytes from
    outside it, and the ``P - N_c`` blocks of the others ``b`` bytes each from it.
    scan and exscan (``nbytes = M``): rank ``r`` needs every ``x_{r'}``, ``r' < r``
    (exscan: the same pairs), and no rank but ``r'`` starts with anything of
    ``x_{r'}``; so a partial result of ``M`` bytes must cross every cut between the
    ranks outside cluster ``c`` below its highest rank and ``c`` (others may relay),
    and between ``c`` and the ranks outside it above its lowest; rank ``P-1`` must
    receive one and rank 0 send one; and
    ``x_{r'}`` must travel from ``r'`` to ``r``: the latency part is the largest least
    latency over such pairs (:func:`_latency_prefix`).

    The latency part is the farthest rank's shortest path (``sum (L + os(1))``) from the
    root (scatter), to it (gather, reduce), or between any two ranks (the rest).
    ``Bound.rate`` is the smallest flow of the cuts (bytes/s; ``inf`` if none).
    Cost: one max-flow on the quotient graph per class of clusters
    (:func:`cluster_classes`) and cut kind, memoised per grid.

    Raises
    ------
    ParameterError
        For a root out of range or an unknown ``op``.

    Examples
    --------
    >>> from gridcoll.network.presets import magpie
    >>> round(collective_bound(magpie(8, 1), "scatter", 2**20).time_s, 3)  # 1 MB at 1 MB/s + L_w
    1.059
    """
    from gridcoll.errors import ParameterError

    grid.check_rank(root, "root")
    if op not in BOUND_OPS:
        raise ParameterError(f"no bound is defined for {op!r}; choose one of {BOUND_OPS}")
    if op == "bcast":
        return broadcast_bound(grid, nbytes, root)
    P, C = grid.nranks, grid.nclusters
    if P == 1:
        return Bound(math.inf, 0.0, 0.0)
    sizes = [c.nranks for c in grid.clusters]
    home = grid.cluster_of[root]
    everyone = dict(enumerate(sizes))
    rep = root if op in ("scatter", "gather", "reduce") else grid.members[0][0]
    combined = op in ("reduce", "allreduce", "reduce_scatter")  # partial results cross
    sent = _block_bytes(grid, op, nbytes, root, rep, counts)

    def cluster_cuts(c: int) -> list[tuple[float, float]]:
        n = sizes[c]
        outside = {a: k for a, k in everyone.items() if a != c}
        if op == "scatter":
            k = n - (c == home)
            return [_cut(grid, sent["cluster"][c], _counts(C, {home: 1}, {c: k}))]
        if op == "gather":
            k = n - (c == home)
            return [_cut(grid, sent["cluster"][c], _counts(C, {c: k}, {home: 1}))]
        if op == "allgather":
            return [_cut(grid, sent["cluster"][c], _counts(C, outside, {c: n}))]
        if op == "alltoall":
            return [
                _cut(grid, sent["cluster"][c], _counts(C, outside, {c: n})),
                _cut(grid, sent["cluster_out"][c], _counts(C, {c: n}, outside)),
            ]
        if op == "reduce" and c != home:
            return [_cut(grid, nbytes, _counts(C, {c: n}, {home: 1}), combined=True)]
        if op == "allreduce" and outside:
            return [
                _cut(grid, nbytes, _counts(C, outside, {c: n}), combined=True),
                _cut(grid, nbytes, _counts(C, {c: n}, outside), combined=True),
            ]
        if op == "reduce_scatter" and outside:
            return [
                _cut(grid, sent["cluster_in"][c], _counts(C, outside, {c: n}), combined=True),
                _cut(grid, sent["cluster_out"][c], _counts(C, {c: n}, outside), combined=True),
            ]
        return []

    if op in ("scan", "exscan"):
        return _prefix_bound(grid, nbytes)
    cuts = []
    if counts is None:
        for cls in cluster_classes(grid, (home,)):
            cuts += cluster_cuts(cls[0])  # equal on every cluster of the class
    else:
        for c in range(C):
            cuts += cluster_cuts(c)
    for group in site_groups(grid):
        cuts += _group_cuts(grid, op, nbytes, root, group, counts)
    if op == "allreduce":
        cuts += [_gossip_cut(grid, k, parts, nbytes) for k, parts in _partitions(grid)]
    R = grid.cluster_of[rep]
    need = sent.get("rank", nbytes)
    away = {a: k for a, k in everyone.items() if a != home}  # ranks outside the root's cluster
    all_but_rep = {a: k - (a == R) for a, k in everyone.items()}
    if op == "scatter":
        cuts.append(_cut(grid, need, _counts(C, {R: 1}, all_but_rep)))
        cuts.append(_cut(grid, sent["away"], _counts(C, {home: 1}, away)))
    elif op == "gather":
        cuts.append(_cut(grid, sent["away"], _counts(C, away, {home: 1})))
    elif op == "reduce":
        cuts.append(_cut(grid, nbytes if away else 0, _counts(C, away, {home: 1}), combined=True))
    elif op == "reduce_scatter":
        cuts.append(_cut(grid, sent["rank_in"], _counts(C, all_but_rep, {R: 1}), combined=True))
        cuts.append(_cut(grid, sent["rank_out"], _counts(C, {R: 1}, all_but_rep), combined=True))
    if op in ("gather", "reduce", "allgather", "alltoall", "allreduce"):
        cuts.append(_cut(grid, need, _counts(C, all_but_rep, {R: 1}), combined))
    if op == "scatter":
        latency = latency_bound(grid, root)
    elif op in ("gather", "reduce"):
        latency = _latency_to(grid, root)
    else:
        latency = _latency_all(grid)
    throughput = max((t for t, _ in cuts), default=0.0)
    rate = min((f for _, f in cuts), default=math.inf)
    return Bound(rate, latency, throughput)


# -- cuts around groups of clusters, and the allreduce's exchange -----------------------
def site_groups(grid: Grid) -> tuple[tuple[int, ...], ...]:
    """The clusters of every site that holds two or more of them (not all): clusters
    that share a site usually share its access links, whose cut no single cluster's
    cut sees (``teragrid``'s sites). Memoised."""

    def compute() -> tuple[tuple[int, ...], ...]:
        by_site: dict[str, list[int]] = {}
        for c, cluster in enumerate(grid.clusters):
            if cluster.site:
                by_site.setdefault(cluster.site, []).append(c)
        return tuple(tuple(g) for g in by_site.values() if 1 < len(g) < grid.nclusters)

    return grid.memo.get("bounds.site_groups", None, compute, maxsize=1)


def _group_cuts(
    grid: Grid, op: str, nbytes: int, root: int, group: tuple[int, ...],
    counts: Sequence[int] | None,
) -> list[tuple[float, float]]:  # fmt: skip
    """The cuts of :func:`collective_bound` around a group of clusters ``S`` instead of
    one cluster: the bytes that must enter or leave ``S`` (the blocks of the ranks
    outside it, the reduced vector...), through the max-flow between ``S`` and the
    rest. The same arguments as for one cluster, with ``S`` for ``c``; around the
    root's own group, the blocks of every rank outside it (scatter, gather) or the
    reduced vector (reduce) cross between the root and the rest."""
    P, C = grid.nranks, grid.nclusters
    sizes = [c.nranks for c in grid.clusters]
    inside = {c: sizes[c] for c in group}
    outside = {c: sizes[c] for c in range(C) if c not in group}
    home = grid.cluster_of[root]
    ranks_in = [r for r in range(P) if grid.cluster_of[r] in group]
    ranks_out = [r for r in range(P) if grid.cluster_of[r] not in group]
    block = (lambda r: nbytes) if counts is None or op == "alltoall" else counts.__getitem__
    into, out_of = _counts(C, outside, inside), _counts(C, inside, outside)
    if op == "allgather":
        return [_cut(grid, sum(block(r) for r in ranks_out), into)]
    if op == "alltoall":
        if counts is None:
            need = leave = len(ranks_in) * len(ranks_out) * nbytes
        else:
            need = sum(counts[s * P + d] for s in ranks_out for d in ranks_in)
            leave = sum(counts[s * P + d] for s in ranks_in for d in ranks_out)
        return [_cut(grid, need, into), _cut(grid, leave, out_of)]
    if op == "reduce_scatter":
        return [
            _cut(grid, sum(block(r) for r in ranks_in), into, combined=True),
            _cut(grid, sum(block(r) for r in ranks_out), out_of, combined=True),
        ]
    if op == "allreduce":
        return [_cut(grid, nbytes, into, combined=True), _cut(grid, nbytes, out_of, combined=True)]
    if home in group:  # the root's own site: everything outside it enters or leaves once
        need = sum(block(r) for r in ranks_out)
        if op == "scatter":
            return [_cut(grid, need, _counts(C, {home: 1}, outside))]
        if op == "gather":
            return [_cut(grid, need, _counts(C, outside, {home: 1}))]
        if op == "reduce":
            return [_cut(grid, nbytes, _counts(C, outside, {home: 1}), combined=True)]
        return []
    to_root, from_root = _counts(C, inside, {home: 1}), _counts(C, {home: 1}, inside)
    if op == "reduce":
        return [_cut(grid, nbytes, to_root, combined=True)]
    if op in ("scatter", "gather"):
        need = sum(block(r) for r in ranks_in)
        return [_cut(grid, need, from_root if op == "scatter" else to_root)]
    return []


def _partitions(grid: Grid) -> list[tuple[int, list[tuple[_Counts, int]]]]:
    """The partitions of the ranks the allreduce's exchange is counted on: the clusters,
    the sites (:func:`site_groups`, when some site holds several clusters) and the
    single ranks. Each is ``(k, parts)``, ``k`` parts listed as ``(counts per cluster,
    how many parts alike)``: interchangeable clusters (:func:`cluster_classes`) and
    the ranks of one cluster have equal flows, computed once."""
    C = grid.nclusters
    sizes = [c.nranks for c in grid.clusters]
    classes = cluster_classes(grid)
    out = []
    if C > 1:
        out.append((C, [(_counts(C, {}, {cls[0]: sizes[cls[0]]}), len(cls)) for cls in classes]))
    groups = site_groups(grid)
    if groups:
        grouped = {c for g in groups for c in g}
        parts = [(_counts(C, {}, {c: sizes[c] for c in g}), 1) for g in groups]
        parts += [(_counts(C, {}, {c: sizes[c]}), 1) for c in range(C) if c not in grouped]
        out.append((len(parts), parts))
    if grid.nranks > 1:
        ranks = [(_counts(C, {}, {cls[0]: 1}), len(cls) * sizes[cls[0]]) for cls in classes]
        out.append((grid.nranks, ranks))
    return out


def _gossip_cut(
    grid: Grid, k: int, parts: list[tuple[_Counts, int]], nbytes: int
) -> tuple[float, float]:
    """The allreduce's exchange across a partition of the ranks into ``k`` parts.

    Every element of the result depends on every rank's element, so for each element
    position the messages between parts that carry it (a value or a partial result of
    it: the element's size, as for every cut here) must connect every part to every
    other causally: one-way gossip among ``k`` parties, which needs ``2 (k-1)``
    messages (Hajnal, Milner and Szemeredi 1972; intra-part messages are free here).
    So ``2 (k-1) M`` bytes must enter parts; part ``p`` takes at most ``F_p`` bytes/s
    (its max-flow from the other parts), so the time is at least
    ``2 (k-1) M / sum_p F_p`` plus the least latency of a hop into a part; and the same
    leaving the parts. Tighter than the single-part cuts (``M`` into each part) by up
    to ``2 (k-1) / k``: on ``magpie:8,1`` ``M / (4 MB/s)`` where every cluster's own
    cut says ``M / (7 MB/s)``. Returns ``(seconds, smallest total flow)``."""
    C = grid.nclusters
    sizes = [c.nranks for c in grid.clusters]
    if k < 2:
        return 0.0, math.inf
    best = 0.0
    flows = []
    for direction in ("in", "out"):
        total, latency = 0.0, math.inf
        for part, times in parts:
            rest = {c: sizes[c] - n for c, (_, n) in enumerate(part) if sizes[c] - n}
            inner = {c: n for c, (_, n) in enumerate(part) if n}
            counts = _counts(C, rest, inner) if direction == "in" else _counts(C, inner, rest)
            flow, after = _count_flow(grid, counts)
            total += times * flow
            latency = min(latency, max(after, _entry_latency(grid, counts)))
        flows.append(total)
        best = max(best, 2 * (k - 1) * nbytes / total + latency)
    return best, min(flows)


# -- the latency parts -----------------------------------------------------------------
def _latency_to(grid: Grid, root: int) -> float:
    """The farthest rank's least ``sum w`` to ``root`` (gather, reduce)."""
    h = hops(grid, 1.0)
    home = grid.cluster_of[root]
    dist = h.D[:, home].copy()
    dist[home] = home_loop(h, home) if grid.clusters[home].nranks > 1 else 0.0
    return float(dist.max())


def _latency_all(grid: Grid) -> float:
    """The largest over ordered pairs of ranks of the least latency between them: every
    rank must hear from every other (allgather, alltoall, allreduce, barrier)."""
    h = hops(grid, 1.0)
    far = float(h.D.max())
    loops = [home_loop(h, c) for c in range(grid.nclusters) if grid.clusters[c].nranks > 1]
    return max([far, *loops])


def _latency_prefix(grid: Grid) -> float:
    """The largest over ranks ``r' < r`` of the least latency from ``r'`` to ``r``
    (``sum w``): scan's rank ``r`` needs ``x_{r'}``. On the cluster graph: a pair of
    clusters ``(a, b)`` counts if the lowest rank of ``a`` is below the highest of
    ``b``; a cluster with two ranks counts its own loop. O(C^2)."""
    h = hops(grid, 1.0)
    lo = np.array([min(ranks) for ranks in grid.members])
    hi = np.array([max(ranks) for ranks in grid.members])
    pairs = lo[:, None] < hi[None, :]
    np.fill_diagonal(pairs, False)
    far = float(h.D[pairs].max()) if pairs.any() else 0.0
    loops = [home_loop(h, c) for c in range(grid.nclusters) if grid.clusters[c].nranks > 1]
    return max([far, *loops])


PREFIX_CUTS = 2
"""Clusters whose cuts :func:`collective_bound` computes for scan and exscan, in each
direction (those with the fewest ranks on the other side of the cut)."""


def _prefix_bound(grid: Grid, nbytes: int) -> Bound:
    """:func:`collective_bound` of scan and exscan (its docstring has the proof): the
    cut from the ranks outside cluster ``c`` below its highest rank into ``c``, and
    from ``c`` to the ranks outside it above its lowest rank (the only ones that need
    its data), for the :data:`PREFIX_CUTS` clusters with the fewest such ranks in each
    direction (every cut is a valid bound alone; the fewest ranks, the smallest flow,
    as a rule); rank ``P-1``'s and rank 0's cuts. O(C^2 log P) to count, then
    ``2 PREFIX_CUTS + 2`` max-flows (memoised)."""
    P, C = grid.nranks, grid.nclusters
    sizes = [c.nranks for c in grid.clusters]
    members = [sorted(ranks) for ranks in grid.members]
    into, out = [], []
    for c in range(C):
        lo, hi = members[c][0], members[c][-1]
        below = {a: bisect.bisect_left(members[a], hi) for a in range(C) if a != c}
        above = {a: sizes[a] - bisect.bisect_right(members[a], lo) for a in range(C) if a != c}
        if any(below.values()):
            into.append((sum(below.values()), c, _counts(C, below, {c: sizes[c]})))
        if any(above.values()):
            out.append((sum(above.values()), c, _counts(C, {c: sizes[c]}, above)))
    chosen = sorted(into)[:PREFIX_CUTS] + sorted(out)[:PREFIX_CUTS]
    cuts = [_cut(grid, nbytes, counts, combined=True) for _, _, counts in chosen]
    last, first = grid.cluster_of[P - 1], grid.cluster_of[0]
    but_last = {a: k - (a == last) for a, k in enumerate(sizes)}
    but_first = {a: k - (a == first) for a, k in enumerate(sizes)}
    cuts.append(_cut(grid, nbytes, _counts(C, but_last, {last: 1}), combined=True))
    cuts.append(_cut(grid, nbytes, _counts(C, {first: 1}, but_first), combined=True))
    throughput = max((t for t, _ in cuts), default=0.0)
    rate = min((f for _, f in cuts), default=math.inf)
    return Bound(rate, _latency_prefix(grid), throughput)
