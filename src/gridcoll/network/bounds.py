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
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from gridcoll.network.grid import Grid

if TYPE_CHECKING:  # networkx is imported when a bound is first computed (it is slow to load)
    import networkx as nx

__all__ = ["Bound", "broadcast_bound", "capacity_graph", "latency_bound", "throughput_rate"]


def _add(graph: nx.DiGraph, u: object, v: object, capacity: float) -> None:
    if math.isinf(capacity):
        graph.add_edge(u, v)  # networkx: no capacity attribute means infinite capacity
    else:
        graph.add_edge(u, v, capacity=capacity)


def capacity_graph(grid: Grid) -> nx.DiGraph:
    """The link-capacity graph of ``grid`` (bytes/s on edges; missing = unbounded)."""
    import networkx as nx

    graph = nx.DiGraph()
    for c, cluster in enumerate(grid.clusters):
        bw = cluster.lan.bandwidth
        for rank in grid.members[c]:
            _add(graph, ("rank", rank), ("switch", c), bw)  # NIC out
            _add(graph, ("switch", c), ("rank", rank), bw)  # NIC in
        if grid.nclusters > 1:
            _add(graph, ("switch", c), ("gw_out", c), bw)  # gateway's LAN side, outbound
            _add(graph, ("gw_in", c), ("switch", c), bw)  # gateway's LAN side, inbound
    for name, link in grid.links.items():
        _add(graph, ("link_in", name), ("link_out", name), link.bandwidth)
    for (a, b), route in grid.routes.items():
        hops = [("gw_out", a)]
        for name in route.links:
            hops += [("link_in", name), ("link_out", name)]
        hops.append(("gw_in", b))
        for u, v in zip(hops[0::2], hops[1::2], strict=True):
            graph.add_edge(u, v)
    return graph


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
    import networkx as nx

    graph = capacity_graph(grid)
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
        flow, (side, _) = nx.minimum_cut(graph, ("rank", root), ("rank", receiver))
        cut = [(u, v) for u in side for v in graph.successors(u) if v not in side]
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
