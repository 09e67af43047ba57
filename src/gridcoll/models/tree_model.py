"""Seed 000's gamma/lambda evaluated edge by edge on any tree of a heterogeneous grid.

Seed 000 (sec. 3.1.1) models a segmented broadcast down a tree by the time
``T = (k-1) gamma(m) + lam(m)``, where ``lam(m)`` is the time one segment takes to reach
every node and ``gamma(m)`` the interval between consecutive segments. With identical
links it bounds both by the degree ``d`` and height ``h``; here the tree and the links
are arbitrary, so both are computed from the tree itself (the "per-edge model"):

* each node ``v`` sends every segment to its children in order; the send to child ``c``
  keeps ``v`` busy for ``s = max(g_l(m), os_(v,c)(m))``, with ``g_l`` the gap of v's own
  LAN: the ``s_w`` composition of seed 000, sec. 2.1, which is ``g(m)`` on a LAN;
* the segment reaches ``c`` at ``r = L_(v,c) + g_(v,c)(m)`` after the send starts;
* ``lam(m)`` is the latest arrival over all nodes;
* ``gamma(m)`` is the largest of, over edges, ``g_(v,c)(m)`` and, over nodes, the busier
  of the node's two resources per segment: its NIC, ``sum of its sends' s``, and its
  CPU, ``or_in(m) + sum of its sends' os`` (``or_in`` is the receive overhead of the
  edge into the node, 0 at the root). Seed 000 bounds this by ``or(m) + d s(m)``, which
  is the same value when the CPU drives the NIC (``os = g``); with ``or + os <= g`` the
  refinement makes the pipelined chain exact (seed 002, Table 1).

Shared links (our extension, no effect when no two tree edges cross one link, as inside
a cluster or in MagPIe's WAN trees on pair links): a message leaves the sender's gateway
only when every link of its route is free, and occupies each for that link's ``g(m)``,
so it may arrive later than ``r``; and ``gamma(m)`` is at least the total occupancy of
the busiest link, the sum of ``g_link(m)`` over the edges crossing it. Without this a
single-layer tree that sends many copies over one wide-area link would be modelled as
if each copy had a link of its own. The sends take the links in the order of their
nominal start (each node's sends back to back from its arrival), so a send never waits
for one that starts later (booking them breadth first made ``phoenix-latency`` on
``das2:50`` at 1 B 60% slower than its simulation).

Rendezvous (seed 002, Table 1, used for the rendezvous builders on multi-cluster grids):
every edge additionally pays its handshake ``2 g_(v,c)(1) + 2 L_(v,c)`` before the data.

Evaluation: a tree is compiled once (O(P) Python, memoised by the tree object); then,
per segment size, the ordered cluster pairs' costs come from one table per ``m`` (O(C^2)
numpy, memoised) and the arrivals from a scan over the edges: O(E log h) numpy without
contended links, O(E log E) Python with them.

:func:`tree_lower_bound` bounds the model of *every* tree from below on the cluster
quotient (the tuner's optimistic bound, :func:`gridcoll.models.registry.optimistic_s`).

References
----------
Kielmann et al., *Network performance-aware collective communication for clustered
wide area systems* (seed 000), sec. 2.1 and 3.1.1.
"""

from __future__ import annotations

import heapq
import math
import weakref
from dataclasses import dataclass

import numpy as np

from gridcoll.algorithms.trees import Tree
from gridcoll.network.grid import Grid
from gridcoll.network.plogp import PiecewiseBatch

__all__ = ["link_batch", "route_links", "tree_gamma_lambda", "tree_lower_bound", "tree_time"]


@dataclass(frozen=True, slots=True)
class _Edge:
    """The costs of one edge (by its ordered cluster pair) at segment size m."""

    s: float  # sender's NIC busy: max(g_l(m), os(m))
    os: float  # sender's CPU busy: os(m)
    r: float  # arrival after the send starts: L + g(m) (+ handshake)
    g: float  # the edge's own gap g(m)
    or_: float  # receive overhead at the child
    links: tuple[tuple[str, float], ...]  # shared links crossed and their g_link(m)


def _edge(grid: Grid, ca: int, cb: int, m: float, rendezvous: bool) -> _Edge:
    """The costs of a message of m bytes from cluster ``ca`` to cluster ``cb``."""
    lan = grid.clusters[ca].lan
    if ca == cb:
        g = lan.g(m)
        s, net, links = max(g, lan.os(m)), lan, ()
    else:
        route = grid.routes[(ca, cb)]
        net = route.plogp
        g = net.g(m)
        s = max(lan.g(m), net.os(m))  # s_w(m) = max(g_l(m), os_w(m)), seed 000 sec. 2.1
        links = tuple((name, grid.links[name].g(m)) for name in route.links)
    r = net.L + g  # r(m) = L + g(m), seed 000 sec. 2.1
    if rendezvous:
        r += 2 * net.g(1) + 2 * net.L  # Table 1's 2 g(1) + 3 L, minus the data's own L
    return _Edge(s, net.os(m), r, g, net.or_(m), links)


EDGE_MEMO_SIZES = 64
"""Segment sizes whose edge costs are kept per grid (least recently used dropped)."""


def _edge_costs(grid: Grid, m: float, rendezvous: bool) -> dict[tuple[int, int], _Edge]:
    """The :class:`_Edge` of every cluster pair met so far at ``m``, memoised in
    ``grid.memo``: the tuner evaluates many trees at the same segment sizes
    (``M / 2^i``), and on a grid of single-rank clusters every edge is its own pair."""
    return grid.memo.get("tree_model.edges", (float(m), rendezvous), dict, EDGE_MEMO_SIZES)


# -- the same model, vectorised over a compiled tree --------------------------------------
class _Shape:
    """A tree's ``(root, children)`` as nested tuples, its hash computed once (a
    memo key that is hashed at every evaluation)."""

    __slots__ = ("_hash", "value")

    def __init__(self, value: tuple) -> None:
        self.value = value
        self._hash = hash(value)

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Shape) and self._hash == other._hash and self.value == other.value


@dataclass(frozen=True, slots=True)
class _Compiled:
    """A tree flattened for :func:`_vector_gamma_lambda`: its edges in the order
    :func:`_loop_gamma_lambda` serves them (nodes breadth first, children in send
    order), each with its parent's and child's positions in ``nodes`` and clusters."""

    nodes: int
    parent: np.ndarray  # position of each edge's sender
    child: np.ndarray  # position of each edge's receiver
    src: np.ndarray  # cluster of the sender
    dst: np.ndarray  # cluster of the receiver
    rank: np.ndarray  # index of the edge among its sender's edges
    up: np.ndarray  # position of every node's parent (the root: itself)
    steps: int  # pointer-jumping rounds: ceil(log2(height + 1))
    width: int  # scan rounds: ceil(log2(largest degree))
    contended: bool  # some shared link is crossed by two edges: departures may wait
    links: tuple[tuple[int, ...], ...]  # per edge, its route's shared links (contended)
    first: np.ndarray  # per node, its first edge (edges are grouped by sender)
    out: np.ndarray  # per node, its number of children
    shape: _Shape  # the tree itself, hashable: equal trees share their evaluations
    lists: tuple[list[int], list[int], list[int], list[tuple[int, int]]]  # parent,
    # child, rank and cluster pair of every edge, as Python lists (small trees)


def _compile(grid: Grid, tree: Tree) -> _Compiled:
    """Flatten ``tree`` (O(P))."""
    order = tree.nodes()
    position = {v: i for i, v in enumerate(order)}
    children, cluster_of = tree.children, grid.cluster_of
    parent, child, rank = [], [], []
    for v in order:
        for j, c in enumerate(children.get(v, ())):
            parent.append(position[v])
            child.append(position[c])
            rank.append(j)
    parent_a, child_a = np.array(parent, dtype=np.intp), np.array(child, dtype=np.intp)
    clusters = np.array([cluster_of[v] for v in order], dtype=np.intp)
    src, dst = clusters[parent_a], clusters[child_a]
    up = np.arange(len(order))
    up[child_a] = parent_a
    depth = np.zeros(len(order), dtype=np.intp)
    for p_, c_ in zip(parent, child, strict=True):  # parents come first (breadth first)
        depth[c_] = depth[p_] + 1
    out = np.bincount(parent_a, minlength=len(order)).astype(np.intp)
    first = np.zeros(len(order), dtype=np.intp)
    senders, where = np.unique(parent_a, return_index=True)
    first[senders] = where
    crossings: dict[str, int] = {}
    for a, b in set(zip(src.tolist(), dst.tolist(), strict=True)):
        if a != b:
            for name in grid.routes[(a, b)].links:
                crossings[name] = crossings.get(name, 0) + 1
    contended = any(n > 1 for n in crossings.values()) or _repeated_links(grid, src, dst)
    links: tuple[tuple[int, ...], ...] = ((),) * len(parent)
    if contended:  # per edge, the links it shares with another edge (only they wait)
        index = {name: i for i, name in enumerate(grid.links)}
        edges = list(zip(src.tolist(), dst.tolist(), strict=True))
        uses: dict[str, int] = {}
        for a, b in edges:
            if a != b:
                for x in grid.routes[(a, b)].links:
                    uses[x] = uses.get(x, 0) + 1
        per_pair = {
            (a, b): tuple(index[x] for x in grid.routes[(a, b)].links if uses[x] > 1)
            if a != b
            else ()
            for a, b in set(edges)
        }
        links = tuple(per_pair[pair] for pair in edges)
    return _Compiled(
        len(order),
        parent_a,
        child_a,
        src,
        dst,
        np.array(rank, dtype=np.intp),
        up,
        int(depth.max(initial=0)).bit_length(),
        max(0, max(rank, default=0)).bit_length(),
        contended,
        links,
        first,
        out,
        _Shape((tree.root, tuple(sorted((v, tuple(k)) for v, k in children.items() if k)))),
        (parent, child, rank, list(zip(src.tolist(), dst.tolist(), strict=True))),
    )


def _repeated_links(grid: Grid, src: np.ndarray, dst: np.ndarray) -> bool:
    """True if one route with shared links is used by two edges of the tree."""
    wide = src != dst
    if not wide.any() or not grid.links:
        return False
    pairs = src[wide] * grid.nclusters + dst[wide]
    unique, counts = np.unique(pairs, return_counts=True)
    for code, n in zip(unique.tolist(), counts.tolist(), strict=True):
        if n > 1 and grid.routes[divmod(code, grid.nclusters)].links:
            return True
    return False


TREE_RESULTS = 4096
"""``(gamma, lam)`` kept per grid, by tree and segment size."""

COMPILED_TREES = 256
"""Compiled trees kept per grid (least recently used dropped)."""


def _compiled(grid: Grid, tree: Tree) -> _Compiled:
    """The :class:`_Compiled` of ``tree``, memoised in ``grid.memo`` by the tree's
    identity (a weak reference guards against a reused ``id``)."""
    held = grid.memo.get(
        "tree_model.compiled",
        id(tree),
        lambda: (weakref.ref(tree), _compile(grid, tree)),
        COMPILED_TREES,
    )
    if held[0]() is not tree:  # another tree now has this id: compile it afresh
        held = (weakref.ref(tree), _compile(grid, tree))
        grid.memo.clear("tree_model.compiled")
        grid.memo.get("tree_model.compiled", id(tree), lambda: held, COMPILED_TREES)
    return held[1]


@dataclass(frozen=True, slots=True)
class _PairTables:
    """Per ordered cluster pair ``(a, b)`` at one ``m`` (the diagonal: a's LAN): ``s =
    max(g_l(m), os(m))``, ``os(m)``, ``r = L + g(m)``, ``g(m)``, ``or(m)``, the
    handshake ``2 g(1) + 2 L``, and the largest ``g_link(m)`` of the route's links."""

    s: np.ndarray
    os: np.ndarray
    r: np.ndarray
    g: np.ndarray
    or_: np.ndarray
    hand: np.ndarray
    link: np.ndarray


def _pair_tables(grid: Grid, m: float) -> _PairTables:
    """The :class:`_PairTables` at ``m``, bit for bit :func:`_edge`'s values; memoised
    in ``grid.memo``. O(C^2) numpy (:attr:`Grid.route_batch`)."""

    def make() -> _PairTables:
        n = grid.nclusters
        lans = [c.lan for c in grid.clusters]
        tabs = {name: np.zeros((n, n)) for name in ("s", "os", "r", "g", "or_", "hand", "link")}
        lan_g = np.array([lan.g(m) for lan in lans])
        diag = np.arange(n)
        lan_os = np.array([lan.os(m) for lan in lans])
        lan_L = np.array([lan.L for lan in lans])
        tabs["g"][diag, diag] = lan_g
        tabs["s"][diag, diag] = np.maximum(lan_g, lan_os)
        tabs["os"][diag, diag] = lan_os
        tabs["r"][diag, diag] = lan_L + lan_g
        tabs["or_"][diag, diag] = [lan.or_(m) for lan in lans]
        tabs["hand"][diag, diag] = [2 * lan.g(1) + 2 * lan.L for lan in lans]
        if grid.routes:
            batch = grid.route_batch
            a, b = batch.src, batch.dst
            g, os = batch.g(m), batch.os(m)
            tabs["g"][a, b] = g
            tabs["s"][a, b] = np.maximum(lan_g[a], os)
            tabs["os"][a, b] = os
            tabs["r"][a, b] = batch.latency + g
            tabs["or_"][a, b] = batch.or_(m)
            tabs["hand"][a, b] = grid.memo.get(
                "tree_model.handshake", None, lambda: 2 * batch.g(1) + 2 * batch.latency, 1
            )
            if grid.links:
                link_g = link_batch(grid)(m)
                route, link = route_links(grid)
                flat = np.zeros(len(a))
                np.maximum.at(flat, route, link_g[link])
                tabs["link"][a, b] = flat
        return _PairTables(**tabs)

    return grid.memo.get("tree_model.tables", float(m), make, EDGE_MEMO_SIZES)


def link_batch(grid: Grid) -> PiecewiseBatch:
    """Every link's ``g`` as one batch (``grid.links`` order), memoised."""
    return grid.memo.get(
        "tree_model.link_batch", None, lambda: PiecewiseBatch([x.g for x in grid.links.values()]), 1
    )


def route_links(grid: Grid) -> tuple[np.ndarray, np.ndarray]:
    """(route index, link index) of every link of every route, memoised."""

    def make() -> tuple[np.ndarray, np.ndarray]:
        index = {name: i for i, name in enumerate(grid.links)}
        pairs = [(r, index[x]) for r, route in enumerate(grid.routes.values()) for x in route.links]
        arr = np.array(pairs, dtype=np.intp).reshape(-1, 2)
        return arr[:, 0], arr[:, 1]

    return grid.memo.get("tree_model.route_links", None, make, 1)


def _vector_gamma_lambda(
    grid: Grid, tree: _Compiled, m: float, rendezvous: bool
) -> tuple[float, float]:
    """:func:`_loop_gamma_lambda` on a compiled tree without contended links, in numpy:
    O(E log h) with ``h`` the height. The sums are grouped differently (a few ulps)."""
    if tree.nodes < 2:
        return 0.0, 0.0
    tab = _pair_tables(grid, m)
    a, b = tree.src, tree.dst
    s, r = tab.s[a, b], tab.r[a, b]
    if rendezvous:
        r = r + tab.hand[a, b]
    # each edge departs after its sender's earlier sends: an exclusive scan of s per
    # sender (Hillis-Steele over the send ranks)
    before = np.zeros_like(s)
    before[1:] = s[:-1]
    before[tree.rank == 0] = 0.0
    shift = 1
    for _ in range(tree.width):
        later = np.flatnonzero(tree.rank >= shift)
        add = before[later - shift]
        before = before.copy()
        before[later] += add
        shift *= 2
    # arrival = the sum of (earlier sends + r) over the path: pointer jumping
    arrival = np.zeros(tree.nodes)
    arrival[tree.child] = before + r
    up = tree.up
    for _ in range(tree.steps):
        arrival = arrival + arrival[up]
        up = up[up]
    # gamma: every edge's g, every node's NIC (sum s) and CPU (or_in + sum os), links
    nic = np.bincount(tree.parent, weights=s, minlength=tree.nodes)
    cpu = np.bincount(tree.parent, weights=tab.os[a, b], minlength=tree.nodes)
    cpu[tree.child] += tab.or_[a, b]
    gamma = max(float(tab.g[a, b].max()), float(nic.max()), float(cpu.max()))
    if grid.links:
        gamma = max(gamma, float(tab.link[a, b].max()))
    return gamma, float(arrival.max())


SMALL_TREE = 96
"""Up to this many nodes an uncontended tree is evaluated in plain Python
(:func:`_small_gamma_lambda`): cheaper than numpy's per-call overhead."""


def _small_gamma_lambda(
    grid: Grid, tree: _Compiled, m: float, rendezvous: bool
) -> tuple[float, float]:
    """:func:`_vector_gamma_lambda` for a small tree: its edges in serving order, the
    costs per cluster pair from :func:`_edge` (memoised per ``m``). O(E), the same
    additions in the same order as :func:`_loop_gamma_lambda` (bit for bit)."""
    if tree.nodes < 2:
        return 0.0, 0.0
    costs = _edge_costs(grid, m, rendezvous)
    arrival = [0.0] * tree.nodes
    or_in = [0.0] * tree.nodes
    gamma = start = nic = cpu = 0.0
    parent, child, rank, pairs = tree.lists
    for e, pair in enumerate(pairs):
        edge = costs.get(pair)
        if edge is None:
            edge = costs[pair] = _edge(grid, pair[0], pair[1], m, rendezvous)
        if rank[e] == 0:  # the sender's first send: its arrival, its receive overhead
            gamma = max(gamma, nic, cpu)
            start, nic, cpu = arrival[parent[e]], 0.0, or_in[parent[e]]
        arrival[child[e]] = start + edge.r
        or_in[child[e]] = edge.or_
        start += edge.s
        nic += edge.s
        cpu += edge.os
        if edge.g > gamma:
            gamma = edge.g  # the gap of the edge itself
        for _, g_link in edge.links:  # each crossed by this edge alone
            if g_link > gamma:
                gamma = g_link
    return max(gamma, nic, cpu, max(or_in)), max(arrival)


def _linked_gamma_lambda(
    grid: Grid, tree: _Compiled, m: float, rendezvous: bool
) -> tuple[float, float]:
    """:func:`_loop_gamma_lambda` on a compiled tree whose edges share links: the
    departures, which wait for the links, send by send in the order of their nominal
    start (O(E log E) float arithmetic, the costs read from :func:`_pair_tables`);
    the resources' sums in numpy."""
    if tree.nodes < 2:
        return 0.0, 0.0
    tab = _pair_tables(grid, m)
    a, b = tree.src, tree.dst
    s_arr, r_arr = tab.s[a, b], tab.r[a, b]
    if rendezvous:
        r_arr = r_arr + tab.hand[a, b]
    link_g = link_batch(grid)(m).tolist()
    s, r = s_arr.tolist(), r_arr.tolist()
    child, first, out = tree.child.tolist(), tree.first.tolist(), tree.out.tolist()
    arrival = [0.0] * tree.nodes
    free = [0.0] * len(link_g)  # when each link is free again
    busy = [0.0] * len(link_g)
    push, pop, edge_links = heapq.heappush, heapq.heappop, tree.links
    sends: list[tuple[float, int]] = []  # (nominal start, edge): edges in serving order
    start = 0.0
    for e in range(first[0], first[0] + out[0]):  # the root's sends, back to back
        push(sends, (start, e))
        start += s[e]
    while sends:
        depart, e = pop(sends)
        links = edge_links[e]
        if links:  # wait until every shared link of the route is free
            for x in links:
                if free[x] > depart:
                    depart = free[x]
            for x in links:
                free[x] = depart + link_g[x]
                busy[x] += link_g[x]
        c = child[e]
        start = arrival[c] = depart + r[e]
        for f in range(first[c], first[c] + out[c]):  # c's sends, back to back
            push(sends, (start, f))
            start += s[f]
    nic = np.bincount(tree.parent, weights=s_arr, minlength=tree.nodes)
    cpu = np.bincount(tree.parent, weights=tab.os[a, b], minlength=tree.nodes)
    cpu[tree.child] += tab.or_[a, b]
    gamma = max(
        float(tab.g[a, b].max()), float(nic.max()), float(cpu.max()), max(busy, default=0.0)
    )
    gamma = max(gamma, float(tab.link[a, b].max()))  # the links one edge crosses alone
    return gamma, max(arrival)


def tree_gamma_lambda(
    grid: Grid, tree: Tree, m: float, *, rendezvous: bool = False
) -> tuple[float, float]:
    """``(gamma(m), lam(m))`` of broadcasting segments of ``m`` bytes down ``tree``.

    Parameters
    ----------
    grid : Grid
        Supplies the P-LogP parameters of every edge (its LAN, or the route between
        the two clusters) and the shared links.
    tree : Tree
        Any rooted tree over ranks of ``grid``; children are served in their order.
    m : float
        The segment size in bytes.
    rendezvous : bool
        Add each edge's handshake ``2 g(1) + 2 L`` (seed 002, Table 1).

    Returns
    -------
    (gamma, lam) : tuple of float
        Seconds. A tree of one node gives ``(0.0, 0.0)``.

    Notes
    -----
    O(P + E) Python to compile a tree (once, memoised by the tree object), then
    O(E log h) numpy per segment size; with contended shared links (two edges on one
    link) the loop of :func:`_loop_gamma_lambda`, O(P + E) Python per call.
    """
    compiled = _compiled(grid, tree)
    if compiled.contended:
        fast = _linked_gamma_lambda
    else:
        fast = _small_gamma_lambda if compiled.nodes <= SMALL_TREE else _vector_gamma_lambda
    key = (compiled.shape, float(m), rendezvous)  # builders often share a tree
    return grid.memo.get(
        "tree_model.results", key, lambda: fast(grid, compiled, m, rendezvous), TREE_RESULTS
    )


def _loop_gamma_lambda(grid: Grid, tree: Tree, m: float, rendezvous: bool) -> tuple[float, float]:
    """The per-edge model edge by edge, as the module notes state it: the reference
    that :func:`_vector_gamma_lambda` and :func:`_linked_gamma_lambda` equal (tests).

    The sends take the shared links in the order of their nominal start (a heap), so
    a send never waits for one that starts later (O(E log E))."""
    cluster_of, children = grid.cluster_of, tree.children
    costs = _edge_costs(grid, m, rendezvous)  # per ordered cluster pair, filled lazily
    arrival = {tree.root: 0.0}
    or_in = {tree.root: 0.0}  # the root receives nothing
    link_free: dict[str, float] = {}
    link_busy: dict[str, float] = {}
    gamma = 0.0
    sends: list[tuple[float, int, int, _Edge]] = []  # (nominal start, order, child, edge)
    for v in tree.nodes():
        cv = cluster_of[v]
        nic, cpu = 0.0, 0.0
        for c in children.get(v, ()):
            pair = (cv, cluster_of[c])
            edge = costs.get(pair)
            if edge is None:
                edge = costs[pair] = _edge(grid, pair[0], pair[1], m, rendezvous)
            or_in[c] = edge.or_
            nic += edge.s
            cpu += edge.os
            if edge.g > gamma:
                gamma = edge.g  # the gap of the edge itself
        gamma = max(gamma, nic, or_in[v] + cpu)  # the node's busier resource per segment
    order = {v: i for i, v in enumerate(tree.nodes())}

    def post(v: int) -> None:  # v's sends, back to back from its arrival
        start = arrival[v]
        for c in children.get(v, ()):
            edge = costs[(cluster_of[v], cluster_of[c])]
            heapq.heappush(sends, (start, order[c], c, edge))
            start += edge.s

    post(tree.root)
    while sends:
        depart, _, c, edge = heapq.heappop(sends)
        if edge.links:  # wait until every link of the route is free
            depart = max(depart, *(link_free.get(name, 0.0) for name, _ in edge.links))
            for name, g_link in edge.links:
                link_free[name] = depart + g_link
                link_busy[name] = link_busy.get(name, 0.0) + g_link
        arrival[c] = depart + edge.r
        post(c)
    if link_busy:
        gamma = max(gamma, max(link_busy.values()))
    return gamma, max(arrival.values())


def tree_time(
    grid: Grid,
    tree: Tree,
    nbytes: int,
    segment_size: int | None = None,
    *,
    rendezvous: bool = False,
) -> float:
    """``T = (k-1) gamma(m) + lam(m)`` for ``nbytes`` in segments of ``segment_size``.

    ``m = min(segment_size, nbytes)`` (``None``: one segment) and ``k = ceil(M/m)``;
    like the papers, every segment is charged as a full ``m`` bytes.
    """
    m = nbytes if segment_size is None else min(segment_size, nbytes)
    k = -(-nbytes // m)
    gamma, lam = tree_gamma_lambda(grid, tree, m, rendezvous=rendezvous)
    return (k - 1) * gamma + lam


# -- a lower bound on every tree ------------------------------------------------------------
BOUND_STEPS_PER_OCTAVE = 8
"""Segment sizes :func:`tree_lower_bound` tries per factor of two of ``m``: the bound
is within ``2^(1/8)`` (9%) of its minimum over every ``m``."""


def _cluster_distances(grid: Grid, home: int, m: float) -> tuple[float, float]:
    """``(D(m), G(m))`` on the cluster quotient: ``D`` the largest shortest-path
    distance from cluster ``home`` with hop weights ``r(m) = L + g(m)`` of the routes
    (seed 000 sec. 2.1), ``G`` the largest over remote clusters ``c`` of the least
    ``g_(a,c)(m)`` into ``c``. On one cluster: ``r_l(m)`` and ``g_l(m)`` (0, 0 for one
    rank). O(C^2) numpy per relaxation round, at most C rounds."""
    if grid.nclusters < 2:
        lan = grid.clusters[0].lan
        return (lan.r(m), lan.g(m)) if grid.nranks > 1 else (0.0, 0.0)
    batch, n = grid.route_batch, grid.nclusters
    gap = np.full((n, n), np.inf)
    gap[batch.src, batch.dst] = batch.g(m)
    weight = gap.copy()
    weight[batch.src, batch.dst] += batch.latency
    dist = weight[home].copy()
    dist[home] = 0.0
    for _ in range(n):  # Bellman-Ford by min-plus rounds: stops at the fixed point
        relaxed = np.minimum(dist, (dist[:, None] + weight).min(axis=0))
        if np.array_equal(relaxed, dist):
            break
        dist = relaxed
    remote = np.arange(n) != home
    return float(dist[remote].max()), float(gap.min(axis=0)[remote].max())


def tree_lower_bound(
    grid: Grid, nbytes: int, root: int = 0, *, segmented: bool, itemsize: int = 1
) -> float:
    """A lower bound on :func:`tree_time` over every tree and every segment size.

    For any tree that reaches every cluster and any segment size ``m`` (``k =
    ceil(M/m)`` segments), ``T = (k-1) gamma(m) + lam(m) >= (k-1) G(m) + D(m)``: some
    tree edge enters each remote cluster ``c`` from another one, so ``gamma(m)``, at
    least the gap ``g(m)`` of every edge (seed 000 sec. 3.1.1), is at least the least
    gap into ``c``, ``G(m)``; and the first rank of ``c`` to be reached has its
    message after the hops ``r(m) = L + g(m)`` of its path, at least the shortest
    distance ``D(m)`` (:func:`_cluster_distances`). Handshakes and shared links only add
    to both. It holds for the trees of every single-tree broadcast builder, whatever
    its rule, and for the WAN phase of a sequential two-layer broadcast.

    Unsegmented: ``D(M)``. Segmented: ``m`` ranges over ``[itemsize, M]``; on each
    interval ``[a, b]`` of ratio ``2^(1/8)`` the bound takes ``k >= ceil(M/b)`` and
    ``G(a)``, ``D(a)`` (``g`` never decreases with ``m``, :class:`PLogP`), and the least
    over the intervals counts. Memoised in ``grid.memo``; O(C^2 log M) numpy.
    """

    def compute() -> float:
        home = grid.cluster_of[root]
        if not segmented:
            return _cluster_distances(grid, home, nbytes)[0]
        floor_dist, floor_gap = _cluster_distances(grid, home, itemsize)  # D, G at least
        best, b = math.inf, float(nbytes)
        step = 2.0 ** (-1.0 / BOUND_STEPS_PER_OCTAVE)
        while True:
            a = max(float(itemsize), b * step)
            k = math.ceil(nbytes / b)
            if (k - 1) * floor_gap + floor_dist < best:  # else this interval cannot win
                dist, gap = _cluster_distances(grid, home, a)
                best = min(best, (k - 1) * gap + dist)
            if a <= itemsize:
                return best
            b = a

    key = (nbytes, grid.cluster_of[root], segmented, itemsize)
    return grid.memo.get("tree_model.lower_bound", key, compute, maxsize=256)
