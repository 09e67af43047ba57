"""Physical limits of a broadcast on a grid: the figures every benchmark reports against.

* **Throughput bound.** The rate at which a root can broadcast is at most the minimum,
  over all receivers, of the max-flow from the root to that receiver in the
  link-capacity graph (Edmonds' arborescence-packing theorem: the minimum of these
  max-flows is achievable by packing spanning arborescences, and no scheme beats it).
  An ``M``-byte broadcast needs at least ``M / maxflow(root, x)`` plus the latency of a
  hop across x's min cut, at every receiver x. (design.md adds the latency to the
  farthest rank instead; that sum is not a lower bound when the latency of one path
  overlaps the streaming of another, so we take this rigorous per-receiver form.)
* **Latency bound.** Any byte reaches the farthest rank no earlier than the shortest
  path to it: the sum over hops of ``L`` plus one send overhead ``os`` per hop.

The capacity graph has a node per rank, per cluster switch, per gateway side and per
shared link (split into in/out nodes carrying the link's capacity); capacities are the
asymptotic bandwidths ``1/G`` of the P-LogP gaps. Ranks of one cluster are symmetric in
it, so one max-flow per cluster suffices: O(P_w) max-flow computations.

The other collectives (:func:`collective_bound`) are bounded by cuts: a set of ranks
that must receive ``B`` bytes from outside it, all of which cross the max-flow min cut
between the two sides (:func:`set_flow`), needs at least ``B / flow`` plus the latency
of a hop into the set; and by the latency of the longest shortest path some byte or
signal must travel. Each op's cuts are listed in :func:`collective_bound`.
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from dataclasses import dataclass
from typing import TYPE_CHECKING

from gridcoll.network.grid import Grid

if TYPE_CHECKING:  # networkx is imported when a bound is first computed (it is slow to load)
    import networkx as nx

__all__ = [
    "BOUND_OPS",
    "Bound",
    "broadcast_bound",
    "capacity_graph",
    "collective_bound",
    "latency_bound",
    "set_flow",
    "throughput_rate",
]


def _add(graph: nx.DiGraph, u: object, v: object, capacity: float) -> None:
    if math.isinf(capacity):
        graph.add_edge(u, v)  # networkx: no capacity attribute means infinite capacity
    else:
        graph.add_edge(u, v, capacity=capacity)


def _capacity_edges(grid: Grid) -> list[tuple[tuple, tuple, float]]:
    """The edges ``(u, v, bytes/s)`` of the link-capacity graph (``inf``: unbounded)."""
    edges = []
    for c, cluster in enumerate(grid.clusters):
        bw = cluster.lan.bandwidth
        for rank in grid.members[c]:
            edges.append((("rank", rank), ("switch", c), bw))  # NIC out
            edges.append((("switch", c), ("rank", rank), bw))  # NIC in
        if grid.nclusters > 1:
            edges.append((("switch", c), ("gw_out", c), bw))  # gateway's LAN side, outbound
            edges.append((("gw_in", c), ("switch", c), bw))  # gateway's LAN side, inbound
    for name, link in grid.links.items():
        edges.append((("link_in", name), ("link_out", name), link.bandwidth))
    seen = set()
    for (a, b), route in grid.routes.items():
        hops = [("gw_out", a)]
        for name in route.links:
            hops += [("link_in", name), ("link_out", name)]
        hops.append(("gw_in", b))
        for u, v in zip(hops[0::2], hops[1::2], strict=True):
            if (u, v) not in seen:
                seen.add((u, v))
                edges.append((u, v, math.inf))
    return edges


def capacity_graph(grid: Grid) -> nx.DiGraph:
    """The link-capacity graph of ``grid`` (bytes/s on edges; missing = unbounded)."""
    import networkx as nx

    graph = nx.DiGraph()
    for u, v, capacity in _capacity_edges(grid):
        _add(graph, u, v, capacity)
    return graph


def _reaching(residual: dict[tuple, dict[tuple, float]], sink: tuple, eps: float) -> set[tuple]:
    """The nodes with a residual path to ``sink`` (every edge has its reverse entry)."""
    seen, queue = {sink}, deque([sink])
    while queue:
        v = queue.popleft()
        for u in residual[v]:
            if u not in seen and residual[u][v] > eps:
                seen.add(u)
                queue.append(u)
    return seen


def _min_cut(
    residual: dict[tuple, dict[tuple, float]], source: tuple, sink: tuple
) -> tuple[float, set[tuple]]:
    """Edmonds-Karp on ``residual`` (modified in place): the max-flow value from
    ``source`` to ``sink`` and the source side of the minimum cut nearest the sink
    (every node that cannot reach the sink in the residual network, as
    ``networkx.minimum_cut`` returns it). O(V E^2); a residual below ``1e-12`` of the
    flow pushed so far counts as saturated (float capacities)."""
    total = 0.0
    while True:
        parent = {source: None}
        queue = deque([source])
        while queue and sink not in parent:
            u = queue.popleft()
            for v, left in residual[u].items():
                if v not in parent and left > 1e-12 * total:
                    parent[v] = u
                    queue.append(v)
        if sink not in parent:
            return total, set(residual) - _reaching(residual, sink, 1e-12 * total)
        path, v = [], sink
        while parent[v] is not None:
            path.append((parent[v], v))
            v = parent[v]
        push = min(residual[u][v] for u, v in path)
        if math.isinf(push):
            return math.inf, set(parent)
        for u, v in path:
            residual[u][v] -= push
            residual[v][u] += push
        total += push


def _receiver_flows(grid: Grid, root: int) -> list[tuple[float, float]]:
    """For every cluster: ``(max-flow from root to a non-root rank of it, least latency
    still to pay after its min cut)``.

    Every byte crosses the min cut; a byte crossing a wide-area link then pays the
    latency of a route through that link, one crossing a LAN edge the LAN's latency.
    The result depends only on the (immutable) grid and the root, so it is memoised on
    the grid object: a cold plan for a new message size costs no max-flow.
    """
    memo = grid.__dict__.setdefault("_receiver_flows", {})
    if root not in memo:
        memo[root] = _compute_receiver_flows(grid, root)
    return memo[root]


def _compute_receiver_flows(grid: Grid, root: int) -> list[tuple[float, float]]:
    base: dict[tuple, dict[tuple, float]] = {}  # residual capacities, reverse edges at 0
    successors: dict[tuple, list[tuple]] = {}
    for u, v, capacity in _capacity_edges(grid):
        base.setdefault(u, {})[v] = base.get(u, {}).get(v, 0.0) + capacity
        base.setdefault(v, {}).setdefault(u, 0.0)
        successors.setdefault(u, []).append(v)
        successors.setdefault(v, [])
    link_latency: dict[str, float] = {}
    for route in grid.routes.values():
        for name in route.links:
            link_latency[name] = min(link_latency.get(name, math.inf), route.plogp.L)

    def after(u: tuple, v: tuple) -> float:
        if u[0] == "link_in":
            return link_latency[u[1]]
        cluster = grid.cluster_of[u[1]] if u[0] == "rank" else u[1]
        if v[0] == "rank":
            cluster = grid.cluster_of[v[1]]
        return grid.clusters[cluster].lan.L

    out = []
    for ranks in grid.members:
        receiver = next((r for r in ranks if r != root), None)
        if receiver is None:
            continue
        residual = {u: dict(vs) for u, vs in base.items()}
        flow, side = _min_cut(residual, ("rank", root), ("rank", receiver))
        cut = [(u, v) for u in side for v in successors[u] if v not in side]
        out.append((flow, min(after(u, v) for u, v in cut)))
    return out


def throughput_rate(grid: Grid, root: int = 0) -> float:
    """Maximum broadcast rate (bytes/s) from ``root``: min over receivers of max-flow."""
    grid.check_rank(root, "root")
    if grid.nranks == 1:
        return math.inf
    return min(flow for flow, _ in _receiver_flows(grid, root))


def _cluster_distances(grid: Grid, root: int, hop_cost) -> list[float]:
    """Dijkstra over clusters from the root's cluster, edge (a, b) weighing hop_cost."""
    start = grid.cluster_of[root]
    dist = [math.inf] * grid.nclusters
    dist[start] = 0.0
    heap = [(0.0, start)]
    while heap:
        d, a = heapq.heappop(heap)
        if d > dist[a]:
            continue
        for b in range(grid.nclusters):
            if b != a and d + hop_cost(grid.wan(a, b)) < dist[b]:
                dist[b] = d + hop_cost(grid.wan(a, b))
                heapq.heappush(heap, (dist[b], b))
    return dist


def _farthest(grid: Grid, root: int, hop_cost) -> float:
    dist = _cluster_distances(grid, root, hop_cost)
    home = grid.cluster_of[root]
    lan_hop = hop_cost(grid.clusters[home].lan) if grid.clusters[home].nranks > 1 else 0.0
    return max(lan_hop if c == home else d for c, d in enumerate(dist))


def latency_bound(grid: Grid, root: int = 0, m: float = 1.0) -> float:
    """Earliest time the farthest rank can hold a byte: max over ranks of the least
    ``sum(L + os(m))`` over the hops of a path from the root (seconds)."""
    grid.check_rank(root, "root")
    if grid.nranks == 1:
        return 0.0
    return _farthest(grid, root, lambda p: p.L + p.os(m))


@dataclass(frozen=True, slots=True)
class Bound:
    """The physical limit of one broadcast (all times in seconds)."""

    rate: float
    """Throughput bound: best possible broadcast rate in bytes/s."""
    latency_s: float
    """Latency bound: shortest path to the farthest rank, with send overheads."""
    throughput_s: float
    """Streaming bound: max over receivers x of ``nbytes / maxflow(root, x)`` plus the
    least latency of the hops across x's min cut (the last byte still pays it)."""

    @property
    def time_s(self) -> float:
        """The bound on completion time: the larger of the two."""
        return max(self.latency_s, self.throughput_s)


def broadcast_bound(grid: Grid, nbytes: int, root: int = 0) -> Bound:
    """Lower bound on the completion time of an ``nbytes`` broadcast from ``root``.

    Every byte reaches receiver x through its min cut, at most ``maxflow(root, x)``
    bytes/s, and then pays the latency of the hop it crossed the cut on; so x cannot
    finish before ``nbytes / maxflow(root, x) + (least L of the cut's hops)``. Cost: one
    max-flow per cluster.
    """
    grid.check_rank(root, "root")
    if grid.nranks == 1:
        return Bound(math.inf, 0.0, 0.0)
    flows = _receiver_flows(grid, root)
    streaming = max(nbytes / flow + latency for flow, latency in flows)
    return Bound(min(f for f, _ in flows), latency_bound(grid, root), streaming)


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
)
"""The collectives :func:`collective_bound` knows."""


def set_flow(grid: Grid, sources: frozenset[int], sinks: frozenset[int]) -> float:
    """Max-flow (bytes/s) from the ranks ``sources`` to the ranks ``sinks`` together.

    A super-source feeds every source and every sink drains into a super-sink, both
    unbounded; memoised on the grid. Infinite when the sets share a rank.
    """
    if sources & sinks:
        return math.inf
    memo = grid.__dict__.setdefault("_set_flows", {})
    key = (sources, sinks)
    if key not in memo:
        import networkx as nx

        graph = capacity_graph(grid).copy()
        for r in sources:
            graph.add_edge("source", ("rank", r))
        for r in sinks:
            graph.add_edge(("rank", r), "sink")
        memo[key] = nx.maximum_flow_value(graph, "source", "sink")
    return memo[key]


def _entry_latency(grid: Grid, cluster: int, inside: bool) -> float:
    """The least latency of a hop that ends in ``cluster``: its LAN's if the data may
    come from inside it, else the least over the routes into it."""
    lan = grid.clusters[cluster].lan.L
    routes = [r.plogp.L for (a, b), r in grid.routes.items() if b == cluster]
    if inside or not routes:
        return min([lan, *routes])
    return min(routes)


def _distances_to(grid: Grid, target: int, hop_cost) -> list[float]:
    """Least ``sum hop_cost`` from every cluster to cluster ``target`` (Dijkstra on the
    reversed cluster graph)."""
    dist = [math.inf] * grid.nclusters
    dist[target] = 0.0
    heap = [(0.0, target)]
    while heap:
        d, b = heapq.heappop(heap)
        if d > dist[b]:
            continue
        for a in range(grid.nclusters):
            if a != b and d + hop_cost(grid.wan(a, b)) < dist[a]:
                dist[a] = d + hop_cost(grid.wan(a, b))
                heapq.heappush(heap, (dist[a], a))
    return dist


def _latency_to(grid: Grid, root: int) -> float:
    """The farthest rank's least ``sum (L + os(1))`` to ``root`` (gather, reduce)."""
    hop = lambda p: p.L + p.os(1)  # noqa: E731
    dist = _distances_to(grid, grid.cluster_of[root], hop)
    home = grid.cluster_of[root]
    lan_hop = hop(grid.clusters[home].lan) if grid.clusters[home].nranks > 1 else 0.0
    return max(lan_hop if c == home else d for c, d in enumerate(dist))


def _latency_all(grid: Grid) -> float:
    """The largest over ordered pairs of ranks of the least latency between them: every
    rank must hear from every other (allgather, alltoall, allreduce, barrier)."""
    return max(latency_bound(grid, ranks[0]) for ranks in grid.members)


def _cut(grid: Grid, need: float, sources, sinks, cluster: int, inside: bool):
    """``(seconds, flow)`` for ``need`` bytes crossing into ``sinks``."""
    sources, sinks = frozenset(sources), frozenset(sinks)
    if need <= 0 or not sources or not sinks:
        return 0.0, math.inf
    flow = set_flow(grid, sources, sinks)
    return need / flow + _entry_latency(grid, cluster, inside), flow


def collective_bound(grid: Grid, op: str, nbytes: int, root: int = 0) -> Bound:
    """Lower bound on the completion time of one collective call (seconds).

    ``nbytes`` is what the call's ``--size`` means: the message of a broadcast, the
    block of one rank per peer for scatter, gather, allgather and all-to-all (MPI's
    count), the vector of a reduction (ignored by a barrier). The cuts, each needing
    ``bytes / max-flow`` plus the least latency of a hop into its receiving side:

    =========  ===================================================================
    bcast      :func:`broadcast_bound` (Edmonds' arborescence packing)
    scatter    each cluster's non-root ranks receive ``N_c b`` from the root; the
               ranks outside the root's cluster ``(P - N_root) b``; all others
               ``(P-1) b`` through the root's NIC
    gather     the same towards the root
    allgather  each cluster receives ``(P - N_c) b`` from outside; a rank ``(P-1) b``
    alltoall   each cluster receives ``N_c (P - N_c) b``; a rank ``(P-1) b``
    reduce     each cluster without the root, and all of them together, send the
               root ``M`` (any operation: a partial result is ``M`` bytes); the root
               receives ``M``
    allreduce  each cluster receives ``M`` and sends ``M``; a rank receives ``M``
    barrier    latency only
    =========  ===================================================================

    The latency part is the farthest rank's shortest path (``sum (L + os(1))``) from the
    root (scatter), to it (gather, reduce), or between any two ranks (the rest).
    ``Bound.rate`` is the smallest flow of the cuts (bytes/s; ``inf`` if none).
    Cost: one max-flow per cluster and cut kind, memoised per grid.

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
    P = grid.nranks
    if P == 1:
        return Bound(math.inf, 0.0, 0.0)
    everyone = set(range(P))
    cuts = []
    home = grid.cluster_of[root]
    for c, members in enumerate(grid.members):
        inside = set(members)
        outside = everyone - inside
        if op == "scatter":
            receivers = inside - {root}
            cuts.append(_cut(grid, len(receivers) * nbytes, {root}, receivers, c, c == home))
        elif op == "gather":
            senders = inside - {root}
            cuts.append(_cut(grid, len(senders) * nbytes, senders, {root}, home, c == home))
        elif op == "allgather":
            cuts.append(_cut(grid, len(outside) * nbytes, outside, inside, c, False))
        elif op == "alltoall":
            cuts.append(_cut(grid, len(inside) * len(outside) * nbytes, outside, inside, c, False))
        elif op == "reduce" and c != home:
            cuts.append(_cut(grid, nbytes, inside, {root}, home, False))
        elif op == "allreduce" and outside:
            cuts.append(_cut(grid, nbytes, outside, inside, c, False))
            for other in range(grid.nclusters):
                if other != c:
                    cuts.append(_cut(grid, nbytes, inside, outside, other, False))
                    break
    rep = {"scatter": root, "gather": root, "reduce": root}.get(op, grid.members[0][0])
    need = {"scatter": (P - 1) * nbytes, "gather": (P - 1) * nbytes, "reduce": nbytes}.get(
        op, (P - 1) * nbytes if op in ("allgather", "alltoall") else nbytes
    )
    away = everyone - set(grid.members[home])  # every rank outside the root's cluster
    if op == "scatter":
        cuts.append(_cut(grid, need, {rep}, everyone - {rep}, home, True))
        cuts.append(_cut(grid, len(away) * nbytes, {root}, away, home, False))
    elif op == "gather":
        cuts.append(_cut(grid, len(away) * nbytes, away, {root}, home, False))
    elif op == "reduce":
        cuts.append(_cut(grid, nbytes if away else 0, away, {root}, home, False))
    if op in ("gather", "reduce", "allgather", "alltoall", "allreduce"):
        cuts.append(_cut(grid, need, everyone - {rep}, {rep}, grid.cluster_of[rep], True))
    if op == "scatter":
        latency = latency_bound(grid, root)
    elif op in ("gather", "reduce"):
        latency = _latency_to(grid, root)
    else:
        latency = _latency_all(grid)
    throughput = max((t for t, _ in cuts), default=0.0)
    rate = min((f for _, f in cuts), default=math.inf)
    return Bound(rate, latency, throughput)
