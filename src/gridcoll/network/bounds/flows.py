"""The flows of the physical bounds: the link-capacity graph, its cluster quotient,
max-flow and minimum cuts, and the clusters that carry equal flows.

Every bandwidth term of :mod:`gridcoll.network.bounds` is a cut of the **link-capacity
graph** (:func:`capacity_graph`): a node per rank, cluster switch, gateway side and link
end, each edge carrying the most bytes per second its resource can (:func:`peak_rate`,
LogGP's ``1/G`` on an affine occupancy). A max-flow (:func:`max_flow`, Dinic's
algorithm) is the capacity of the least such cut (:func:`cut_edges`);
:func:`first_time` is when a cut whose edges open one by one has let a message through.

The flows run on the **cluster quotient** of the capacity graph (:func:`quotient_graph`):
ranks of one cluster with the same role (the root, the receiver, the others; a source, a
sink, neither) are interchangeable, so each such class is one node whose NIC edges carry
its multiplicity times one NIC's capacity. When every wide-area link serves one route,
clusters that a transposition maps onto each other (equal LAN, size, and rows and columns
of route parameters) give equal flows, and one of them is computed
(:func:`cluster_classes`). Everything derived from the grid is memoised in ``grid.memo``.

These bounds are gridcoll's own (docs/architecture.md, "Where each paper formula
lives"), on seed 000's P-LogP parameters (sec. 2.1).
"""

from __future__ import annotations

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
    "MEMO_SIZE",
    "FlowGraph",
    "RankClass",
    "WanGraph",
    "capacity_graph",
    "cluster_classes",
    "cut_edges",
    "first_time",
    "max_flow",
    "peak_rate",
    "quotient_graph",
    "wan_graph",
]

MEMO_SIZE = 64
"""Entries each of the bounds' ``grid.memo`` tables keeps."""

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
    ``2e`` is edge ``e``, ``2e + 1`` its reverse) for :func:`max_flow`; ``after[e]`` is
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
class WanGraph:
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


def wan_graph(grid: Grid) -> WanGraph:
    return grid.memo.get("bounds.wan", None, lambda: _build_wan(grid), maxsize=1)


def _build_wan(grid: Grid) -> WanGraph:
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
    return WanGraph(
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
    wan = wan_graph(grid)
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


def max_flow(graph: FlowGraph, caps: np.ndarray, s: int, t: int) -> tuple[float, list[bool]]:
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


def cut_edges(graph: FlowGraph, reach: list[bool]) -> list[int]:
    """The edges from the source side (not reaching the sink) to the sink side."""
    side = np.array(reach, dtype=bool)
    return np.flatnonzero(side[graph.head_ids] & ~side[graph.tail_ids]).tolist()


def first_time(caps: Sequence[float], lams: Sequence[float], nbytes: float) -> float:
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
