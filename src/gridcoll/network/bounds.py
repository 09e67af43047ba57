"""Physical limits of a collective on a grid: the figures every benchmark reports against.

Three lower bounds on the completion time of an ``M``-byte broadcast; ``Bound.time_s``
is the largest (each is valid alone, against the simulator's semantics of
docs/architecture.md: cut-through FIFO resources, ``os``/``or``, ``L``):

* **Latency bound** (:func:`latency_bound`). Any byte reaches the farthest rank no
  earlier than the shortest path to it: per hop ``L + min(os(1), occ(1))``, ``occ`` the
  occupancy of the message's busiest resource (its tail leaves that resource no earlier
  than ``occ`` after its head entered; on every preset ``occ(1) >= os(1)``, so this is
  seed 000's ``L + os`` per hop).
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

The flows run on the **cluster quotient** of the capacity graph (:func:`quotient_graph`):
ranks of one cluster with the same role (the root, the receiver, the others; a source, a
sink, neither) are interchangeable, so each such class is one node whose NIC edges carry
its multiplicity times one NIC's capacity. When every wide-area link serves one route,
clusters that a transposition maps onto each other (equal LAN, size, and rows and columns
of route parameters) give equal flows, and one of them is computed
(:func:`cluster_classes`). Everything derived from the grid is memoised in ``grid.memo``.

The other collectives (:func:`collective_bound`) are bounded by cuts: a set of ranks
that must receive ``B`` bytes from outside it, all of which cross the max-flow min cut
between the two sides (:func:`set_flow`), needs at least ``B / flow`` plus the latency
of a hop into the set; and by the latency of the longest shortest path some byte or
signal must travel. Each op's cuts are listed in :func:`collective_bound`.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from gridcoll.network.grid import Grid
from gridcoll.network.plogp import PiecewiseLinear

if TYPE_CHECKING:  # networkx is imported only by capacity_graph (it is slow to load)
    import networkx as nx

__all__ = [
    "BOUND_OPS",
    "PREFIX_CUTS",
    "Bound",
    "FlowGraph",
    "RankClass",
    "broadcast_bound",
    "capacity_graph",
    "cluster_classes",
    "collective_bound",
    "latency_bound",
    "peak_rate",
    "quotient_graph",
    "set_flow",
    "throughput_rate",
    "windowed_time",
]

MEMO_SIZE = 64
"""Entries each of this module's ``grid.memo`` tables keeps."""

NEWTON_STEPS = 16
"""Most minimum cuts :func:`windowed_time` solves per receiver (every step is valid)."""

_REL = 1e-12  # residual capacities below this fraction of the largest count as zero


# -- capacities ------------------------------------------------------------------------
def peak_rate(g: PiecewiseLinear) -> float:
    """The most bytes per second a resource with occupancy ``g(m)`` can carry:
    ``sup_m m / g(m)`` (bytes/s; ``inf`` if some ``g(m) = 0``).

    A message of ``m`` bytes holds the resource ``g(m)``, so over any interval the
    resource carries at most this rate. ``g`` is piecewise linear, so ``m / g(m)`` is
    monotone on each piece and the supremum is at a point or at infinity
    (``1 / slope``, LogGP's ``1/G``: the only term on affine ``g`` with ``g(0) > 0``).
    O(points).

    >>> peak_rate(PiecewiseLinear((0.0, 1e6), (1e-5, 1.00001)))
    1000000.0
    """
    slope = g.slope
    best = 1.0 / slope if slope > 0 else math.inf
    for m, y in zip(g.sizes, g.values, strict=True):
        if m > 0:
            best = max(best, m / y if y > 0 else math.inf)
    return best


def _add(graph: nx.DiGraph, u: object, v: object, capacity: float) -> None:
    if math.isinf(capacity):
        graph.add_edge(u, v)  # networkx: no capacity attribute means infinite capacity
    else:
        graph.add_edge(u, v, capacity=capacity)


def _capacity_edges(grid: Grid) -> list[tuple[tuple, tuple, float]]:
    """The edges ``(u, v, bytes/s)`` of the per-rank link-capacity graph (``inf``:
    unbounded): a node per rank, cluster switch, gateway side and link end."""
    edges = []
    for c, cluster in enumerate(grid.clusters):
        bw = peak_rate(cluster.lan.g_fn)
        for rank in grid.members[c]:
            edges.append((("rank", rank), ("switch", c), bw))  # NIC out
            edges.append((("switch", c), ("rank", rank), bw))  # NIC in
        if grid.nclusters > 1:
            edges.append((("switch", c), ("gw_out", c), bw))  # gateway's LAN side, outbound
            edges.append((("gw_in", c), ("switch", c), bw))  # gateway's LAN side, inbound
    for name, link in grid.links.items():
        edges.append((("link_in", name), ("link_out", name), peak_rate(link.g)))
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
    """The per-rank link-capacity graph of ``grid`` as a networkx graph (bytes/s on
    edges; missing = unbounded): the reference the quotient graph is tested against."""
    import networkx as nx

    graph = nx.DiGraph()
    for u, v, capacity in _capacity_edges(grid):
        _add(graph, u, v, capacity)
    return graph


# -- latencies along paths -------------------------------------------------------------
@dataclass(frozen=True, eq=False)
class _Hops:
    """Per-hop latencies of one-message hops between clusters at a message size ``m``.

    ``L[a, b]`` is the route's ``L`` (``inf`` on the diagonal); ``w[a, b] = L + min(os(m),
    occ(m))`` with ``occ(m)`` the largest occupancy of the route's resources (a message's
    tail leaves its busiest resource no earlier than that after its head entered, and
    arrives ``L`` later); ``D`` the least sum of ``w`` over cluster paths (0 on the
    diagonal); ``lan_L``, ``lan_w`` the same for one LAN hop (``inf`` on one-rank
    clusters, where no such hop exists)."""

    L: np.ndarray
    w: np.ndarray
    D: np.ndarray
    lan_L: np.ndarray
    lan_w: np.ndarray


def _hops(grid: Grid, m: float = 1.0) -> _Hops:
    """:class:`_Hops` at ``m`` (memoised). Floyd-Warshall on the cluster graph: O(C^3)
    numpy operations, C^2 route evaluations."""
    return grid.memo.get("bounds.hops", m, lambda: _compute_hops(grid, m), maxsize=MEMO_SIZE)


def _compute_hops(grid: Grid, m: float) -> _Hops:
    C = grid.nclusters
    lan_g = np.array([c.lan.g(m) for c in grid.clusters])
    lat = np.full((C, C), math.inf)
    w = np.full((C, C), math.inf)
    if C > 1:
        wan = _wan(grid)
        by_id: dict[int, float] = {}  # os(m) by function object: routes share them
        os_m = np.array(
            [
                by_id[id(r.plogp.os_fn)]
                if id(r.plogp.os_fn) in by_id
                else by_id.setdefault(id(r.plogp.os_fn), r.plogp.os(m))
                for r in grid.routes.values()
            ]
        )
        occ = np.maximum(lan_g[wan.src], lan_g[wan.dst])
        if len(wan.route_links):
            gs: dict[int, float] = {}
            link_g = np.array(
                [
                    gs[id(link.g)] if id(link.g) in gs else gs.setdefault(id(link.g), link.g(m))
                    for link in grid.links.values()
                ]
            )
            has = np.flatnonzero(np.diff(wan.route_ptr))
            occ[has] = np.maximum(
                occ[has], np.maximum.reduceat(link_g[wan.route_links], wan.route_ptr[has])
            )
        lat[wan.src, wan.dst] = wan.lat
        w[wan.src, wan.dst] = wan.lat + np.minimum(os_m, occ)
    D = w.copy()
    np.fill_diagonal(D, 0.0)
    for k in range(C):
        np.minimum(D, D[:, k : k + 1] + D[k : k + 1, :], out=D)
    lan_L = np.array([c.lan.L if c.nranks > 1 else math.inf for c in grid.clusters])
    lan_w = np.array(
        [
            c.lan.L + min(c.lan.os(m), lan_g[i]) if c.nranks > 1 else math.inf
            for i, c in enumerate(grid.clusters)
        ]
    )
    return _Hops(lat, w, D, lan_L, lan_w)


def _home_loop(h: _Hops, c: int) -> float:
    """The least ``sum w`` from one rank of cluster ``c`` to another rank of it: one LAN
    hop, or out over the wide area and back (``inf`` on a one-rank cluster)."""
    if not math.isfinite(h.lan_w[c]):
        return math.inf
    if len(h.D) == 1:
        return float(h.lan_w[c])
    out = h.D[c] + h.w[:, c]  # to cluster a, then a -> c (a = c: inf)
    return float(min(h.lan_w[c], out.min()))


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
    h = _hops(grid, m)
    home = grid.cluster_of[root]
    dist = h.D[home].copy()
    dist[home] = _home_loop(h, home) if grid.clusters[home].nranks > 1 else 0.0
    return float(dist.max())


def _latency_to(grid: Grid, root: int) -> float:
    """The farthest rank's least ``sum w`` to ``root`` (gather, reduce)."""
    h = _hops(grid, 1.0)
    home = grid.cluster_of[root]
    dist = h.D[:, home].copy()
    dist[home] = _home_loop(h, home) if grid.clusters[home].nranks > 1 else 0.0
    return float(dist.max())


def _latency_all(grid: Grid) -> float:
    """The largest over ordered pairs of ranks of the least latency between them: every
    rank must hear from every other (allgather, alltoall, allreduce, barrier)."""
    h = _hops(grid, 1.0)
    far = float(h.D.max())
    loops = [_home_loop(h, c) for c in range(grid.nclusters) if grid.clusters[c].nranks > 1]
    return max([far, *loops])


# -- the cluster quotient of the capacity graph ----------------------------------------
@dataclass(frozen=True, slots=True)
class RankClass:
    """Interchangeable ranks of one cluster: one node of the quotient graph.

    ``role`` says what the ranks are to the flow problem: ``root``, ``one`` (a
    broadcast's receiver, when its cluster's turn comes) or ``rest``; ``source``,
    ``sink`` or ``other`` for :func:`set_flow`."""

    cluster: int
    count: int
    role: str


@dataclass(frozen=True, eq=False)
class FlowGraph:
    """A capacity graph in arrays: edge ``e`` runs ``tails[e] -> heads[e]`` with
    ``caps[e]`` bytes/s (``inf``: unbounded). ``adj`` lists each node's arcs (arc
    ``2e`` is edge ``e``, ``2e + 1`` its reverse) for :func:`_max_flow`; ``after[e]`` is
    the least latency a byte still pays once it crossed ``e``; ``kind``/``key`` say
    which resource an edge is (for the windows of :func:`windowed_time`)."""

    names: tuple[tuple, ...]
    index: dict[tuple, int]
    tails: tuple[int, ...]
    heads: tuple[int, ...]
    caps: np.ndarray
    after: tuple[float, ...]
    kind: tuple[str, ...]
    key: tuple[int, ...]
    adj: tuple[tuple[int, ...], ...]
    to: tuple[int, ...]
    tail_ids: np.ndarray
    head_ids: np.ndarray


@dataclass(frozen=True, eq=False)
class _Wan:
    """The part of the capacity graph every quotient shares: switches, gateway sides,
    links (a private single-link route contracted to one edge ``gw_out -> gw_in``), and
    for each edge the routes that cross it (CSR ``ptr``/``routes``), which fix its
    windows."""

    names: list[tuple]
    index: dict[tuple, int]
    edges: list[tuple[int, int, float, float, str, int]]  # u, v, cap, after, kind, key
    ptr: np.ndarray
    routes: np.ndarray
    src: np.ndarray  # route -> sending cluster
    dst: np.ndarray
    lat: np.ndarray  # route -> L
    route_ptr: np.ndarray  # CSR: the links of each route, as indices into grid.links
    route_links: np.ndarray
    gw_out_e: np.ndarray  # the gateway-side edges and their clusters
    gw_out_c: np.ndarray
    gw_in_e: np.ndarray
    gw_in_c: np.ndarray
    adj: tuple[tuple[int, ...], ...] = ()  # :class:`FlowGraph`'s arrays of these edges
    to: tuple[int, ...] = ()


def _wan(grid: Grid) -> _Wan:
    return grid.memo.get("bounds.wan", None, lambda: _build_wan(grid), maxsize=1)


def _build_wan(grid: Grid) -> _Wan:
    C = grid.nclusters
    names: list[tuple] = []
    index: dict[tuple, int] = {}

    def node(name: tuple) -> int:
        if name not in index:
            index[name] = len(names)
            names.append(name)
        return index[name]

    rates: dict[int, float] = {}  # peak_rate by function object: presets share them

    def rate(g: PiecewiseLinear) -> float:
        found = rates.get(id(g))
        if found is None:
            found = rates[id(g)] = peak_rate(g)
        return found

    edges: list[tuple[int, int, float, float, str, int]] = []
    members: list[list[int]] = []  # edge -> routes crossing it (route-set edges only)
    for c, cluster in enumerate(grid.clusters):
        node(("switch", c))
        if C > 1:
            bw, L = rate(cluster.lan.g_fn), cluster.lan.L
            edges.append((node(("switch", c)), node(("gw_out", c)), bw, L, "gw_out", c))
            edges.append((node(("gw_in", c)), node(("switch", c)), bw, L, "gw_in", c))
            members += [[], []]
    keys = list(grid.routes)
    uses: dict[str, list[int]] = {}
    for i, key in enumerate(keys):
        for name in grid.routes[key].links:
            uses.setdefault(name, []).append(i)
    lats = [grid.routes[key].plogp.L for key in keys]
    link_after = {name: min(lats[i] for i in rs) for name, rs in uses.items()}
    hop_edges: dict[tuple[int, int], int] = {}
    for name, link in grid.links.items():
        rs = uses.get(name, [])
        route = grid.routes[keys[rs[0]]] if len(rs) == 1 else None
        if route is not None and route.links == (name,):  # a private pair link: one edge
            a, b = keys[rs[0]]
            u, v = index[("gw_out", a)], index[("gw_in", b)]
        else:
            u, v = node(("link_in", name)), node(("link_out", name))
        edges.append((u, v, rate(link.g), link_after.get(name, math.inf), "link", 0))
        members.append(rs)
    gw_out = [node(("gw_out", c)) for c in range(C)] if C > 1 else []
    gw_in = [node(("gw_in", c)) for c in range(C)] if C > 1 else []
    link_in = {name: index.get(("link_in", name)) for name in grid.links}
    link_out = {name: index.get(("link_out", name)) for name in grid.links}
    for i, (a, b) in enumerate(keys):
        links = grid.routes[(a, b)].links
        if len(links) == 1 and len(uses[links[0]]) == 1:
            continue  # contracted above
        heads = [link_in[name] for name in links] + [gw_in[b]]
        tails = [gw_out[a]] + [link_out[name] for name in links]
        for u, v in zip(tails, heads, strict=True):
            e = hop_edges.get((u, v))
            if e is None:
                e = hop_edges[(u, v)] = len(edges)
                edges.append((u, v, math.inf, lats[i], "hop", 0))
                members.append([])
            members[e].append(i)
    ptr = np.zeros(len(edges) + 1, dtype=np.int64)
    ptr[1:] = np.cumsum([len(rs) for rs in members])
    routes = np.array([r for rs in members for r in rs], dtype=np.int64)
    src = np.array([a for a, _ in keys], dtype=np.int64)
    dst = np.array([b for _, b in keys], dtype=np.int64)
    lat = np.array(lats)
    link_index = {name: j for j, name in enumerate(grid.links)}
    route_ptr = np.zeros(len(keys) + 1, dtype=np.int64)
    route_ptr[1:] = np.cumsum([len(grid.routes[k].links) for k in keys])
    route_links = np.array(
        [link_index[name] for k in keys for name in grid.routes[k].links], dtype=np.int64
    )
    gw = {
        kind: [(e, edge[5]) for e, edge in enumerate(edges) if edge[4] == kind]
        for kind in ("gw_out", "gw_in")
    }
    arrays = [
        np.array([x[i] for x in gw[kind]], dtype=np.int64)
        for kind in ("gw_out", "gw_in")
        for i in (0, 1)
    ]
    adj: list[list[int]] = [[] for _ in names]
    to = [0] * (2 * len(edges))
    for e, (u, v, *_rest) in enumerate(edges):
        to[2 * e], to[2 * e + 1] = v, u
        adj[u].append(2 * e)
        adj[v].append(2 * e + 1)
    return _Wan(
        names,
        index,
        edges,
        ptr,
        routes,
        src,
        dst,
        lat,
        route_ptr,
        route_links,
        *arrays,
        tuple(map(tuple, adj)),
        tuple(to),
    )


def quotient_graph(
    grid: Grid, classes: Sequence[RankClass], *, terminals: bool = False
) -> FlowGraph:
    """The capacity graph with one node per :class:`RankClass` (``("class", i)``).

    A class of ``k`` ranks has a NIC-out edge to its cluster's switch and a NIC-in edge
    back, each ``k`` times one NIC's :func:`peak_rate`; the rest is the grid's switches,
    gateway sides (the LAN's rate) and links (their rate), joined by unbounded hops along
    every route. With ``terminals``, a node ``"source"`` feeds every class of role
    ``source`` and every class of role ``sink`` drains into ``"sink"`` (unbounded).

    **The quotient has the per-rank graph's max-flows.** Take the per-rank graph
    (:func:`capacity_graph`) and any max-flow problem whose capacities and terminals are
    invariant under permuting the ranks of each class (e.g. root ``s``, receiver ``x``:
    the classes ``{s}``, ``{x}`` and the other ranks of each cluster; a rank's edges are
    its NIC's ``out`` and ``in``, the same for all ranks of a cluster). (<=) A per-rank
    flow summed over the ranks of each class is a quotient flow of the same value: the
    summed NIC flows of a class stay within ``k`` times a NIC's capacity and
    conservation holds at the class node because it holds at each rank. (>=) A quotient
    flow divided equally among the ``k`` ranks of each class is a per-rank flow of the
    same value: each rank carries ``1/k`` of the class's in- and out-flow, within one
    NIC's capacity, and conserves it. So the max-flow values are equal, and a minimum
    cut of the quotient is one of the per-rank graph (a class on one side is all its
    ranks on that side). The same holds for time-windowed capacities that are equal on
    the ranks of a class (:func:`windowed_time`). Size: ``O(classes + C + links +
    route hops)`` instead of ``O(P + ...)``; built in that time.
    """
    wan = _wan(grid)
    names = list(wan.names)
    edges: list[tuple[int, int, float, float, str, int]] = []  # beyond the wan part
    ids = []
    for i, cls in enumerate(classes):
        lan = grid.clusters[cls.cluster].lan
        bw = peak_rate(lan.g_fn) * cls.count
        v = len(names)
        ids.append(v)
        names.append(("class", i))
        switch = wan.index[("switch", cls.cluster)]
        edges.append((v, switch, bw, lan.L, "nic_out", i))
        edges.append((switch, v, bw, lan.L, "nic_in", i))
    if terminals:
        s, t = len(names), len(names) + 1
        names += [("source",), ("sink",)]
        for i, cls in enumerate(classes):
            if cls.role == "source":
                edges.append((s, ids[i], math.inf, 0.0, "term", i))
            elif cls.role == "sink":
                edges.append((ids[i], t, math.inf, 0.0, "term", i))
    adj = list(wan.adj) + [() for _ in range(len(names) - len(wan.names))]
    extra: dict[int, list[int]] = {}
    to = list(wan.to)
    first = len(wan.edges)
    for e, (u, v, *_rest) in enumerate(edges, start=first):
        to += [v, u]
        extra.setdefault(u, []).append(2 * e)
        extra.setdefault(v, []).append(2 * e + 1)
    for node, arcs in extra.items():
        adj[node] = (*adj[node], *arcs)
    everything = wan.edges + edges
    index = dict(wan.index)
    index.update((name, i) for i, name in enumerate(names[len(wan.names) :], len(wan.names)))
    tails = [e[0] for e in everything]
    heads = [e[1] for e in everything]
    return FlowGraph(
        tuple(names),
        index,
        tuple(tails),
        tuple(heads),
        np.array([e[2] for e in everything]),
        tuple(e[3] for e in everything),
        tuple(e[4] for e in everything),
        tuple(e[5] for e in everything),
        tuple(adj),
        tuple(to),
        np.array(tails, dtype=np.int64),
        np.array(heads, dtype=np.int64),
    )


def _max_flow(graph: FlowGraph, caps: np.ndarray, s: int, t: int) -> tuple[float, list[bool]]:
    """Dinic's algorithm: the max-flow value from ``s`` to ``t`` under ``caps`` and, for
    every node, whether it still reaches ``t`` in the residual network (the source side
    of the minimum cut nearest the sink is the rest, as ``networkx.minimum_cut`` returns
    it). Residuals below ``1e-12`` of the largest finite capacity count as saturated
    (float capacities). ``inf`` when an unbounded path joins them. O(V^2 E)."""
    adj, to = graph.adj, graph.to
    n = len(adj)
    finite = caps[np.isfinite(caps)]
    eps = _REL * float(finite.max()) if len(finite) else _REL
    res = [0.0] * (2 * len(caps))
    res[0::2] = caps.tolist()
    total = 0.0
    while True:
        level = [-1] * n
        level[s] = 0
        queue = [s]
        for u in queue:
            nxt = level[u] + 1
            if nxt > level[t] >= 0:
                break  # the level graph needs nothing beyond the sink's level
            for a in adj[u]:
                v = to[a]
                if level[v] < 0 and res[a] > eps:
                    level[v] = nxt
                    queue.append(v)
        if level[t] < 0:
            break
        it = [0] * n
        path: list[int] = []
        u = s
        while True:  # blocking flow: advance along the level graph, retreat from dead ends
            if u == t:
                push = min(res[a] for a in path)
                if push == math.inf:
                    return math.inf, [True] * n
                for a in path:
                    res[a] -= push
                    res[a ^ 1] += push
                total += push
                path.clear()
                u = s
                continue
            arcs, i, want = adj[u], it[u], level[u] + 1
            while i < len(arcs) and not (res[arcs[i]] > eps and level[to[arcs[i]]] == want):
                i += 1
            it[u] = i
            if i < len(arcs):
                path.append(arcs[i])
                u = to[arcs[i]]
            elif u == s:
                break
            else:
                level[u] = -1
                u = to[path.pop() ^ 1]
                it[u] += 1
    reach = [False] * n
    reach[t] = True
    queue = [t]
    for v in queue:
        for a in adj[v]:
            u = to[a]
            if not reach[u] and res[a ^ 1] > eps:
                reach[u] = True
                queue.append(u)
    return total, reach


def _cut_edges(graph: FlowGraph, reach: list[bool]) -> list[int]:
    """The edges from the source side (not reaching the sink) to the sink side."""
    side = np.array(reach, dtype=bool)
    return np.flatnonzero(side[graph.head_ids] & ~side[graph.tail_ids]).tolist()


def _first_time(caps: Sequence[float], lams: Sequence[float], nbytes: float) -> float:
    """The least ``T`` with ``sum_e caps[e] (T - lams[e])^+ >= nbytes``: below it the cut
    lets fewer than ``nbytes`` bytes through. An unbounded edge passes everything once
    ``T > lam``. O(n log n)."""
    unbounded = min(
        (lam for c, lam in zip(caps, lams, strict=True) if c == math.inf), default=math.inf
    )
    slope = acc = 0.0
    found = math.inf
    for lam, c in sorted(
        (lam, c) for c, lam in zip(caps, lams, strict=True) if 0 < c < math.inf and lam < math.inf
    ):
        if slope > 0 and (nbytes + acc) / slope <= lam:
            found = (nbytes + acc) / slope
            break
        slope += c
        acc += c * lam
    else:
        if slope > 0:
            found = (nbytes + acc) / slope
    return min(found, unbounded)


# -- symmetric clusters ----------------------------------------------------------------
def _route_keys(grid: Grid) -> np.ndarray | None:
    """``K[a, b]``: an integer naming route ``(a, b)``'s parameters and its links'
    occupancies (equal integers: equal routes; -1 on the diagonal), or None when some
    link serves more than one route (then a permutation of clusters would also have to
    map shared links, which this check does not attempt)."""

    def compute() -> np.ndarray | None:
        seen: set[str] = set()
        for route in grid.routes.values():
            for name in route.links:
                if name in seen:
                    return None
                seen.add(name)
        C = grid.nclusters
        K = np.full((C, C), -1, dtype=np.int64)
        by_id: dict[tuple, int] = {}
        by_value: dict[tuple, int] = {}
        for (a, b), route in grid.routes.items():
            gs = tuple(grid.links[name].g for name in route.links)
            ident = (id(route.plogp), *map(id, gs))
            k = by_id.get(ident)
            if k is None:
                k = by_id[ident] = by_value.setdefault((route.plogp, gs), len(by_value))
            K[a, b] = k
        return K

    return grid.memo.get("bounds.route_keys", None, compute, maxsize=1)


def cluster_classes(grid: Grid, fixed: Sequence[int] = ()) -> tuple[tuple[int, ...], ...]:
    """Clusters that some permutation of clusters fixing ``fixed`` maps onto each other,
    so that every flow and window of this module is equal on them.

    Two clusters ``b, b'`` go together when swapping them is an automorphism of the
    grid: equal rank counts and LAN, ``K[a, b] = K[a, b']`` and ``K[b, a] = K[b', a]``
    for every other ``a`` and ``K[b, b'] = K[b', b]`` (:func:`_route_keys`; links
    private to routes, so the swap maps links along). Swaps that are automorphisms
    generate a group, so the relation is an equivalence. Grids with shared links get
    singletons. O(C^2 * classes) numpy comparisons; memoised.

    >>> from gridcoll.network.presets import magpie
    >>> cluster_classes(magpie(4, 2), fixed=(0,))
    ((0,), (1, 2, 3))
    """
    fixed = tuple(sorted(set(fixed)))
    return grid.memo.get(
        "bounds.classes", fixed, lambda: _cluster_classes(grid, fixed), maxsize=MEMO_SIZE
    )


def _cluster_classes(grid: Grid, fixed: tuple[int, ...]) -> tuple[tuple[int, ...], ...]:
    C = grid.nclusters
    K = _route_keys(grid)
    if K is None:
        return tuple((c,) for c in range(C))
    classes: list[list[int]] = []
    for c in range(C):
        if c in fixed:
            classes.append([c])
            continue
        for cls in classes:
            r = cls[0]
            if r in fixed or grid.clusters[r].nranks != grid.clusters[c].nranks:
                continue
            if grid.clusters[r].lan != grid.clusters[c].lan:
                continue
            mask = np.ones(C, dtype=bool)
            mask[[r, c]] = False
            if (
                K[r, c] == K[c, r]
                and np.array_equal(K[r, mask], K[c, mask])
                and np.array_equal(K[mask, r], K[mask, c])
            ):
                cls.append(c)
                break
        else:
            classes.append([c])
    return tuple(tuple(cls) for cls in classes)


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
    h, wan, graph = _hops(grid, 1.0), _wan(grid), b.graph
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
    loop_h, loop_x = _home_loop(h, H), _home_loop(h, X)
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
            flow, reach = _max_flow(graph, graph.caps, b.source, t)
            cut = _cut_edges(graph, reach)
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
    ``T_C`` (:func:`_first_time` of ``C``) is then too early as well, so ``T_C`` is a
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
        value, reach = _max_flow(graph, now, b.source, receiver.sink)
        if value >= nbytes * (1 - 1e-9):
            return T
        cut = _cut_edges(graph, reach)
        nxt = _first_time(caps[cut].tolist(), lams[cut].tolist(), nbytes)
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
    h = _hops(grid, 1.0)
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
        start = _first_time(caps[cut].tolist(), lams[cut].tolist(), nbytes)
        start = max(start, float(lams[b.out_e[0]]), worst)  # the root's NIC: d(root, x)
        worst = max(worst, _newton(b, receiver, lams, nbytes, start))
    return worst


def _latest(grid: Grid, h: _Hops, root: int, receiver: _Receiver, nbytes: float) -> float:
    """An upper bound on one receiver's windowed time: every window of
    :func:`_windows` opens by ``lam_max = max from + max L + max to`` (the largest
    latency from the root to any rank, of one hop, and from any rank to ``x``), and at
    ``T = lam_max + nbytes / maxflow`` every cut lets ``sum cap (T - lam) >= maxflow *
    nbytes / maxflow`` through. O(C)."""
    H, X = grid.cluster_of[root], receiver.cluster
    finite = h.L[np.isfinite(h.L)]
    far = max(float(h.D[H].max()), _home_loop(h, H) if grid.clusters[H].nranks > 1 else 0.0)
    back = max(float(h.D[:, X].max()), _home_loop(h, X) if grid.clusters[X].nranks > 1 else 0.0)
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
    least latency a byte still pays after crossing its min cut (the least ``after`` of
    the cut's edges: a route's ``L`` for a link, the LAN's for a NIC or gateway side):
    on the quotient with one class per cluster and role (:func:`quotient_graph`,
    terminals), which depends only on the counts; memoised."""

    def compute() -> tuple[float, float]:
        classes = []
        for c, (n_src, n_sink) in enumerate(counts):
            rest = grid.clusters[c].nranks - n_src - n_sink
            for role, n in (("source", n_src), ("sink", n_sink), ("other", rest)):
                if n > 0:
                    classes.append(RankClass(c, n, role))
        graph = quotient_graph(grid, classes, terminals=True)
        flow, reach = _max_flow(graph, graph.caps, graph.index[("source",)], graph.index[("sink",)])
        after = min((graph.after[e] for e in _cut_edges(graph, reach)), default=0.0)
        return flow, after

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
    L = _hops(grid, 1.0).L
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


def _cut(grid: Grid, need: float, counts: _Counts) -> tuple[float, float]:
    """``(seconds, flow)`` for ``need`` bytes crossing from the counted sources into the
    counted sinks: ``need / flow`` plus the latency still paid after the min cut, the
    larger of the cut edges' least ``L`` (the message crossing pays its own) and
    :func:`_entry_latency` (the message entering the sinks, the same one or later)."""
    if need <= 0 or not any(s for s, _ in counts) or not any(k for _, k in counts):
        return 0.0, math.inf
    flow, after = _count_flow(grid, counts)
    return need / flow + max(after, _entry_latency(grid, counts)), flow


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
        for i, c in enumerate(counts):
            src, dst = divmod(i, P)
            if cluster_of[src] != cluster_of[dst]:
                into[cluster_of[dst]] += c
        rank = sum(counts[s * P + rep] for s in range(P) if s != rep)
        return {"cluster": into, "rank": rank}
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
    alltoall   each cluster receives ``N_c (P - N_c) b``; a rank ``(P-1) b``
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
        if op in ("allgather", "alltoall"):
            return [_cut(grid, sent["cluster"][c], _counts(C, outside, {c: n}))]
        if op == "reduce" and c != home:
            return [_cut(grid, nbytes, _counts(C, {c: n}, {home: 1}))]
        if op == "allreduce" and outside:
            return [
                _cut(grid, nbytes, _counts(C, outside, {c: n})),
                _cut(grid, nbytes, _counts(C, {c: n}, outside)),
            ]
        if op == "reduce_scatter" and outside:
            return [
                _cut(grid, sent["cluster_in"][c], _counts(C, outside, {c: n})),
                _cut(grid, sent["cluster_out"][c], _counts(C, {c: n}, outside)),
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
        cuts.append(_cut(grid, nbytes if away else 0, _counts(C, away, {home: 1})))
    elif op == "reduce_scatter":
        cuts.append(_cut(grid, sent["rank_in"], _counts(C, all_but_rep, {R: 1})))
        cuts.append(_cut(grid, sent["rank_out"], _counts(C, {R: 1}, all_but_rep)))
    if op in ("gather", "reduce", "allgather", "alltoall", "allreduce"):
        cuts.append(_cut(grid, need, _counts(C, all_but_rep, {R: 1})))
    if op == "scatter":
        latency = latency_bound(grid, root)
    elif op in ("gather", "reduce"):
        latency = _latency_to(grid, root)
    else:
        latency = _latency_all(grid)
    throughput = max((t for t, _ in cuts), default=0.0)
    rate = min((f for _, f in cuts), default=math.inf)
    return Bound(rate, latency, throughput)


def _latency_prefix(grid: Grid) -> float:
    """The largest over ranks ``r' < r`` of the least latency from ``r'`` to ``r``
    (``sum w``): scan's rank ``r`` needs ``x_{r'}``. On the cluster graph: a pair of
    clusters ``(a, b)`` counts if the lowest rank of ``a`` is below the highest of
    ``b``; a cluster with two ranks counts its own loop. O(C^2)."""
    h = _hops(grid, 1.0)
    lo = np.array([min(ranks) for ranks in grid.members])
    hi = np.array([max(ranks) for ranks in grid.members])
    pairs = lo[:, None] < hi[None, :]
    np.fill_diagonal(pairs, False)
    far = float(h.D[pairs].max()) if pairs.any() else 0.0
    loops = [_home_loop(h, c) for c in range(grid.nclusters) if grid.clusters[c].nranks > 1]
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
    cuts = [_cut(grid, nbytes, counts) for _, _, counts in chosen]
    last, first = grid.cluster_of[P - 1], grid.cluster_of[0]
    but_last = {a: k - (a == last) for a, k in enumerate(sizes)}
    but_first = {a: k - (a == first) for a, k in enumerate(sizes)}
    cuts.append(_cut(grid, nbytes, _counts(C, but_last, {last: 1})))
    cuts.append(_cut(grid, nbytes, _counts(C, {first: 1}, but_first)))
    throughput = max((t for t, _ in cuts), default=0.0)
    rate = min((f for _, f in cuts), default=math.inf)
    return Bound(rate, _latency_prefix(grid), throughput)
