"""Find a grid's clusters from rank-to-rank latency and bandwidth, and build the grid.

Two grouping methods:

* :func:`pools` is seed 001's (sec. 2.4): a pool is a set of nodes whose bandwidths
  are at least ``percent`` % of the largest bandwidth of the matrix, tried at 10, 25,
  50 and 75 % (:func:`pool_sets`). The paper says "the average of communication
  bandwidths between nodes within a pool"; its own Table 1 example (20 % gives
  ``{h1..h6}, {h7, h8}``; 70 % gives ``{h1,h2,h3}, {h4,h5}, {h6}, {h7,h8}``) comes out
  only if *every* pair of a pool reaches the threshold (an average would put h7 and h8
  with h1..h6 at 20 %), so the default is that complete-linkage reading
  (``linkage="average"`` gives the literal one).
* :func:`find_clusters` (the default of :func:`discover`) looks for the *gap*: complete
  linkage over a dissimilarity, cut where the partition's separation -- the smallest
  dissimilarity between two groups over the largest inside one -- is largest, and
  accepted only if that separation is at least ``min_gap`` (8x: the LAN-WAN gaps of
  the presets are 10x, teragrid's 100 us LAN against its 1 ms cluster links, to 500x,
  while the two closest DAS sites, VU and UvA, are only 4x closer than the rest by
  bandwidth and are two clusters). It is tried on the latency and on the inverse
  bandwidth, and the clearer of the two wins. Why not the pools: they need a
  percentage, and they see bandwidth only, while a cluster's LAN and the link to a
  cluster of the same site can have the same bandwidth (teragrid: 100 Mb/s both) but
  latencies 10x apart; and a cluster is by definition a set of ranks
  that are much closer to each other than to anyone else, which is exactly the gap.
  Without any gap of ``min_gap`` there is one cluster if the typical latency is below
  ``lan_latency`` (500 us), else every rank is its own cluster (all links are WAN).

:func:`discover` measures the rank-to-rank matrices (:func:`pairwise_matrices`:
disjoint pairs at once, round-robin), groups the ranks, then measures the clusters'
links one pair at a time (:func:`gridcoll.measure.measure_matrix`, seed 001 sec. 2.5)
and builds a :class:`~gridcoll.network.Grid` with those LAN and per-pair WAN
parameters; :func:`grid_from_matrices` builds one from matrices alone.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from gridcoll.errors import GridError, ParameterError
from gridcoll.measure.matrix import LinkEstimate, LinkMatrices
from gridcoll.network.grid import Cluster, Grid, Link, Route
from gridcoll.network.plogp import PLogP

__all__ = [
    "Clustering",
    "discover",
    "find_clusters",
    "grid_from_matrices",
    "grid_from_tables",
    "pairwise_matrices",
    "pool_sets",
    "pools",
    "with_measured",
]

POOL_PERCENTS = (10, 25, 50, 75)
"""Seed 001's pool-set percentages."""
MIN_GAP = 8.0
"""Smallest separation (inter / intra dissimilarity) accepted as a cluster boundary."""
LAN_LATENCY = 500e-6
"""Without a gap: one cluster if the median latency is below this, else all WAN."""
PAIR_SIZE = 64 * 1024
"""Message size of the rank-to-rank bandwidth probes. Inside a cluster the transfer is
shorter than a round trip and the probe reports ``PAIR_SIZE / RTT(0)``, a lower bound:
16 KiB over TCP on loopback gave 17-29 MB/s, only 6.5x a 2.7 MB/s wide-area pair of
``das2`` on a namespace network (no gap of :data:`MIN_GAP`); 64 KiB gave 88-470 MB/s."""


def _matrix(values: Sequence[Sequence[float]], what: str) -> list[list[float]]:
    rows = [list(map(float, r)) for r in values]
    n = len(rows)
    if n == 0 or any(len(r) != n for r in rows):
        raise ParameterError(f"the {what} matrix must be square and non-empty")
    return rows


def _symmetric(rows: list[list[float]], *, invert: bool) -> list[list[float]]:
    """Dissimilarity: the worse of the two directions (NaN entries ignored)."""
    n = len(rows)
    out = [[0.0] * n for _ in range(n)]
    for i in range(n):
        for j in range(n):
            if i == j:
                continue
            vals = [v for v in (rows[i][j], rows[j][i]) if math.isfinite(v)]
            if invert:
                vals = [1.0 / v if v > 0 else math.inf for v in vals]
            out[i][j] = max(vals) if vals else math.inf
    return out


def _complete_linkage(d: list[list[float]]) -> list[list[list[int]]]:
    """The partitions of complete-linkage agglomeration, from singletons to one group.

    O(n^3); n is the number of ranks (hundreds at most).
    """
    groups = [[i] for i in range(len(d))]
    levels = [[list(g) for g in groups]]
    while len(groups) > 1:
        best, pair = math.inf, (0, 1)
        for a in range(len(groups)):
            for b in range(a + 1, len(groups)):
                h = max(d[i][j] for i in groups[a] for j in groups[b])
                if h < best:
                    best, pair = h, (a, b)
        a, b = pair
        groups[a] = sorted(groups[a] + groups[b])
        del groups[b]
        levels.append([list(g) for g in groups])
    return levels


def _separation(d: list[list[float]], groups: list[list[int]]) -> float:
    """min dissimilarity between groups / max inside one (inf if no group has 2)."""
    where = {r: k for k, g in enumerate(groups) for r in g}
    inside = max((d[i][j] for g in groups for i in g for j in g if i != j), default=0.0)
    between = min(
        (d[i][j] for i in range(len(d)) for j in range(len(d)) if where[i] != where[j]),
        default=math.inf,
    )
    if inside <= 0:
        return math.inf if between > 0 else 1.0
    return between / inside


@dataclass(frozen=True)
class Clustering:
    """Groups of ranks and why: ``metric`` (latency, bandwidth or none), the
    ``separation`` of the partition (inter / intra dissimilarity)."""

    clusters: tuple[tuple[int, ...], ...]
    method: str
    metric: str
    separation: float
    reason: str

    @property
    def cluster_of(self) -> tuple[int, ...]:
        out = [0] * sum(len(c) for c in self.clusters)
        for k, c in enumerate(self.clusters):
            for r in c:
                out[r] = k
        return tuple(out)


def _best_cut(d: list[list[float]]) -> tuple[list[list[int]], float]:
    """The partition (at least one merge, at least two groups) with the largest
    separation."""
    best, best_sep = None, 0.0
    for level in _complete_linkage(d)[1:-1]:
        sep = _separation(d, level)
        if sep > best_sep:
            best, best_sep = level, sep
    return best or [[i] for i in range(len(d))], best_sep


def find_clusters(
    latency: Sequence[Sequence[float]],
    bandwidth: Sequence[Sequence[float]] | None = None,
    *,
    min_gap: float = MIN_GAP,
    lan_latency: float = LAN_LATENCY,
) -> Clustering:
    """Group ranks by the clearest gap in latency or inverse bandwidth (module docs).

    ``latency[i][j]`` (s) and ``bandwidth[i][j]`` (B/s) from rank i to rank j; the
    diagonal and NaN entries are ignored. O(n^3).

    Examples
    --------
    >>> lat = [[0, 2e-5, 1e-2], [2e-5, 0, 1e-2], [1e-2, 1e-2, 0]]
    >>> find_clusters(lat).clusters
    ((0, 1), (2,))
    """
    lat = _matrix(latency, "latency")
    n = len(lat)
    candidates = [("latency", _symmetric(lat, invert=False))]
    if bandwidth is not None:
        bw = _matrix(bandwidth, "bandwidth")
        if len(bw) != n:
            raise ParameterError("the latency and bandwidth matrices differ in size")
        candidates.append(("bandwidth", _symmetric(bw, invert=True)))
    if n == 1:
        return Clustering(((0,),), "gap", "none", math.inf, "a single rank")
    best = None
    for metric, d in candidates:
        groups, sep = _best_cut(d)
        if best is None or sep > best[2]:
            best = (metric, groups, sep)
    metric, groups, sep = best
    if sep >= min_gap:
        reason = (
            f"the {metric} inside every group is at least {sep:.3g}x smaller than "
            f"between any two groups (>= {min_gap:g}x)"
        )
        return Clustering(_canonical(groups), "gap", metric, sep, reason)
    typical = statistics.median(
        x for i in range(n) for j in range(n) if i != j and math.isfinite(x := lat[i][j])
    )
    if typical < lan_latency:
        reason = f"no gap of {min_gap:g}x and median latency {typical:.3g} s < {lan_latency:g} s"
        return Clustering((tuple(range(n)),), "gap", "none", sep, reason + ": one LAN")
    reason = f"no gap of {min_gap:g}x and median latency {typical:.3g} s: every link is WAN"
    return Clustering(tuple((i,) for i in range(n)), "gap", "none", sep, reason)


def _canonical(groups: list[list[int]]) -> tuple[tuple[int, ...], ...]:
    return tuple(sorted(tuple(sorted(g)) for g in groups))


def pools(
    bandwidth: Sequence[Sequence[float]], percent: float, *, linkage: str = "complete"
) -> tuple[tuple[int, ...], ...]:
    """Seed 001's pools: groups whose bandwidths reach ``percent`` % of the maximum.

    First fit in rank order: a pool starts at the first rank not yet pooled and takes
    every later rank with which it still qualifies -- every pair at least the threshold
    (``linkage="complete"``, which reproduces the paper's Table 1 example), or their
    average (``"average"``, the paper's words). O(n^3). The maximum includes the diagonal
    (a node's own bandwidth, as in Table 1) when it is given.

    Examples
    --------
    >>> t1 = [[100, 80, 80, 60, 60, 20, 10, 10], [80, 100, 80, 60, 60, 20, 10, 10],
    ...       [80, 80, 100, 60, 60, 20, 10, 10], [60, 60, 60, 100, 80, 40, 50, 50],
    ...       [60, 60, 60, 80, 100, 40, 50, 50], [20, 20, 20, 40, 40, 100, 30, 30],
    ...       [10, 10, 10, 50, 50, 30, 100, 80], [10, 10, 10, 50, 50, 30, 80, 100]]
    >>> pools(t1, 20)
    ((0, 1, 2, 3, 4, 5), (6, 7))
    >>> pools(t1, 70)
    ((0, 1, 2), (3, 4), (5,), (6, 7))
    """
    if linkage not in ("complete", "average"):
        raise ParameterError(f"linkage must be complete or average, not {linkage!r}")
    bw = _matrix(bandwidth, "bandwidth")
    n = len(bw)
    sym = [[min(bw[i][j], bw[j][i]) for j in range(n)] for i in range(n)]
    top = max(x for row in bw for x in row if math.isfinite(x))
    threshold = percent / 100.0 * top

    def qualifies(g: list[int]) -> bool:
        pairs = [sym[i][j] for i in g for j in g if i < j]
        if not pairs:
            return True
        return (min(pairs) if linkage == "complete" else statistics.fmean(pairs)) >= threshold

    left, out = list(range(n)), []
    while left:
        pool = [left.pop(0)]
        for node in list(left):
            if qualifies([*pool, node]):
                pool.append(node)
                left.remove(node)
        out.append(pool)
    return _canonical(out)


def pool_sets(
    bandwidth: Sequence[Sequence[float]], percents: Sequence[float] = POOL_PERCENTS, **kw: Any
) -> dict[float, tuple[tuple[int, ...], ...]]:
    """:func:`pools` at each of seed 001's percentages (10, 25, 50, 75)."""
    return {p: pools(bandwidth, p, **kw) for p in percents}


# -- grids from measurements ---------------------------------------------------------


def _affine(latency: float, bandwidth: float, os0: float = 0.0) -> PLogP:
    """A measured link as an affine table: ``g(m) = os0 + m/bandwidth``, overheads os0."""
    bw = bandwidth if math.isfinite(bandwidth) and bandwidth > 0 else 1e12
    lat = latency if math.isfinite(latency) and latency >= 0 else 0.0
    return PLogP.linear(lat, bw, g0=os0, os0=os0, or0=os0)


def grid_from_tables(
    name: str,
    clusters: Sequence[Sequence[int]],
    lan: Sequence[PLogP],
    wan: dict[tuple[int, int], PLogP],
    names: Sequence[str] | None = None,
) -> Grid:
    """A grid with these clusters (rank lists), LAN tables and one private link per
    ordered cluster pair carrying that route's table (seed 000, figure 1)."""
    names = list(names) if names else [f"c{k}" for k in range(len(clusters))]
    placement = [0] * sum(len(c) for c in clusters)
    for k, c in enumerate(clusters):
        for r in c:
            placement[r] = k
    cl = tuple(Cluster(names[k], len(c), lan[k]) for k, c in enumerate(clusters))
    routes, links = {}, {}
    for (a, b), table in wan.items():
        link = f"{names[a]}->{names[b]}"
        links[link] = Link(link, table.g_fn)
        routes[(a, b)] = Route(table, (link,))
    contiguous = placement == sorted(placement)
    return Grid(name, cl, routes, links, None if contiguous else tuple(placement))


def grid_from_matrices(
    clustering: Clustering | Sequence[Sequence[int]],
    matrices: LinkMatrices,
    *,
    name: str = "discovered",
    overhead: float = 0.0,
) -> Grid:
    """A grid from rank-to-rank matrices: per cluster the median over its pairs (LAN),
    per ordered cluster pair the median over the rank pairs between them (WAN)."""
    groups = clustering.clusters if isinstance(clustering, Clustering) else clustering
    lat, bw = matrices.latency, matrices.bandwidth

    def median(pairs, rows):
        vals = [rows[i][j] for i, j in pairs if math.isfinite(rows[i][j])]
        return statistics.median(vals) if vals else math.nan

    lans, fallback = [], None
    for g in groups:
        pairs = [(i, j) for i in g for j in g if i != j]
        lans.append((median(pairs, lat), median(pairs, bw)) if pairs else None)
        if pairs:
            fallback = lans[-1]
    fallback = fallback or (0.0, math.inf)
    lan = [_affine(*(x or fallback), overhead) for x in lans]
    wan = {}
    for a, ga in enumerate(groups):
        for b, gb in enumerate(groups):
            if a != b:
                pairs = [(i, j) for i in ga for j in gb]
                wan[(a, b)] = _affine(median(pairs, lat), median(pairs, bw), overhead)
    return grid_from_tables(name, groups, lan, wan)


def grid_from_cluster_matrices(
    groups: Sequence[Sequence[int]], m: LinkMatrices, *, name: str = "discovered", overhead=0.0
) -> Grid:
    """A grid from seed 001's cluster matrices (diagonal LAN, off-diagonal WAN)."""
    n = len(groups)
    diag = [(m.latency[k][k], m.bandwidth[k][k]) for k in range(n)]
    known = [d for d in diag if math.isfinite(d[0])]
    fallback = known[0] if known else (0.0, math.inf)
    lan = [_affine(*(d if math.isfinite(d[0]) else fallback), overhead) for d in diag]
    wan = {
        (a, b): _affine(m.latency[a][b], m.bandwidth[a][b], overhead)
        for a in range(n)
        for b in range(n)
        if a != b
    }
    return grid_from_tables(name, groups, lan, wan)


# -- measuring ---------------------------------------------------------------------------


def _rounds(n: int) -> list[list[tuple[int, int]]]:
    """Round-robin tournament (circle method): every pair once, disjoint per round."""
    ranks = list(range(n)) + ([None] if n % 2 else [])
    m = len(ranks)
    out = []
    for _ in range(m - 1):
        pairs = []
        for k in range(m // 2):
            a, b = ranks[k], ranks[m - 1 - k]
            if a is not None and b is not None:
                pairs.append((min(a, b), max(a, b)))
        out.append(pairs)
        ranks = [ranks[0], ranks[-1], *ranks[1:-1]]
    return out


def pairwise_matrices(
    comm,
    *,
    grid=None,
    emulate: bool | None = None,
    size: int | None = None,
    timeout: float = 60.0,
) -> LinkMatrices:
    """Rank-to-rank latency and bandwidth, measured for every pair of ranks.

    Collective; every rank returns the matrices (one row and column per rank). Pairs
    are measured in ``P - 1`` rounds of disjoint pairs at once (the circle method), the
    lower rank measuring: pairs of one round that share an emulated link slow each
    other down, so the bandwidths are lower bounds -- good enough to see which ranks
    share a LAN, not to describe the WAN. Each pair takes the fastest of 5 empty round
    trips and of 3 with a :data:`PAIR_SIZE` message (delays only add: with many ranks on few cores
    a median can be a scheduling delay) (:func:`discover` measures that afterwards,
    one pair at a time). The matrices are filled symmetrically.
    """
    from gridcoll.errors import MeasurementError
    from gridcoll.measure.link import share
    from gridcoll.measure.matrix import probe_link
    from gridcoll.measure.transport import MPITransport, open_endpoint, run_mirror

    start = time.monotonic()
    ep = open_endpoint(comm, grid, emulate=emulate, timeout=timeout)
    try:
        n, rank = comm.Get_size(), ep.rank
        mine: dict[tuple[int, int], LinkEstimate] = {}
        error = None
        for pairs in _rounds(n):
            for a, b in pairs:
                if error is not None:
                    break
                try:
                    if rank == a:
                        transport = MPITransport(ep, b)
                        mine[(a, b)] = probe_link(
                            transport, size=size or PAIR_SIZE, reps0=5, reps=3, estimator="min"
                        )
                        transport.close()
                    elif rank == b:
                        run_mirror(ep, a)
                except MeasurementError as err:
                    error = f"rank {rank} with pair ({a}, {b}): {err}"
        found: dict = {}
        for r in range(n):
            part = share(ep.comm, (mine, error) if r == rank else None, r, None, "gathering")
            if part[1] is not None:
                raise MeasurementError(part[1])
            found |= part[0]
        lat = [[math.nan] * n for _ in range(n)]
        bw = [[math.nan] * n for _ in range(n)]
        sz = [[0] * n for _ in range(n)]
        for (a, b), e in found.items():
            for i, j in ((a, b), (b, a)):
                lat[i][j], bw[i][j], sz[i][j] = e.latency, e.bandwidth, e.size
        one_way = all(e.one_way for e in found.values()) if found else False
        return LinkMatrices(
            tuple(f"r{i}" for i in range(n)),
            tuple(range(n)),
            tuple(map(tuple, lat)),
            tuple(map(tuple, bw)),
            tuple(map(tuple, sz)),
            time.time(),
            one_way,
            time.monotonic() - start,
        )
    finally:
        ep.close()


def discover(
    source: Any,
    *,
    min_gap: float = MIN_GAP,
    refine: bool = True,
    name: str = "discovered",
    grid=None,
    emulate: bool | None = None,
    timeout: float = 60.0,
) -> Grid:
    """Group ranks into clusters with no configuration and return the grid.

    ``source`` is a communicator (collective: every rank returns the grid) or
    rank-to-rank :class:`LinkMatrices` (no MPI). With a communicator and ``refine``,
    the clusters' LAN (first two ranks) and per-pair WAN parameters are measured one
    pair at a time after grouping (seed 001, sec. 2.5); else they are the medians of
    the rank-to-rank matrices. ``grid``/``emulate``: for the WAN emulation, as in
    :func:`gridcoll.measure.measure_plogp`.

    Pass the result to ``gridcoll.Comm(comm, grid=...)``, or save it with
    :func:`gridcoll.network.save_grid`.
    """
    if isinstance(source, LinkMatrices):
        clustering = find_clusters(source.latency, source.bandwidth, min_gap=min_gap)
        return grid_from_matrices(clustering, source, name=name)
    if not hasattr(source, "Get_size"):
        raise ParameterError(f"discover needs a communicator or LinkMatrices, not {source!r}")
    from gridcoll.measure.matrix import measure_matrix

    pairwise = pairwise_matrices(source, grid=grid, emulate=emulate, timeout=timeout)
    clustering = find_clusters(pairwise.latency, pairwise.bandwidth, min_gap=min_gap)
    if not refine:
        return grid_from_matrices(clustering, pairwise, name=name)
    m = measure_matrix(
        source, grid=grid, clusters=clustering.clusters, emulate=emulate, timeout=timeout
    )
    return grid_from_cluster_matrices(clustering.clusters, m, name=name)


def with_measured(
    grid: Grid, a: int, b: int, forward: PLogP, backward: PLogP | None = None
) -> Grid:
    """``grid`` with the table measured from rank ``a`` to ``b`` (and back) in place:
    the route between their clusters (and its private link, if it has one), or their
    cluster's LAN if they share one."""
    ca, cb = grid.cluster_of[a], grid.cluster_of[b]
    clusters = list(grid.clusters)
    routes, links = dict(grid.routes), dict(grid.links)
    if ca == cb:
        c = clusters[ca]
        clusters[ca] = Cluster(c.name, c.nranks, forward, c.site)
    else:
        for (x, y), table in ((ca, cb), forward), ((cb, ca), backward):
            if table is None:
                continue
            route = routes[(x, y)]
            routes[(x, y)] = Route(table, route.links)
            private = f"{grid.clusters[x].name}->{grid.clusters[y].name}"
            if route.links == (private,):
                links[private] = Link(private, table.g_fn)
    return Grid(f"{grid.name}+measured", tuple(clusters), routes, links, grid.placement)


def check_same_clusters(found: Grid, expected: Grid) -> None:
    """Raise GridError unless both grids group the ranks identically (tests, benches)."""
    a = sorted(tuple(m) for m in found.members)
    b = sorted(tuple(m) for m in expected.members)
    if a != b:
        raise GridError(f"found clusters {a!r}, expected {b!r}")
