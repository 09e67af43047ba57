"""Tree packing on the cluster graph: allgather, reduce-scatter, reduce and allreduce
with every wide-area link busy.

One tree over the clusters sends every byte it carries down each of its edges, so its
rate is one route's bandwidth; the physical limit of a collective
(:func:`gridcoll.network.collective_bound`) is set by cuts, which many trees together
can fill. The broadcast's multi-tree (:mod:`gridcoll.algorithms.multitree`) packs one
two-level tree per remote cluster for one source; this module packs trees for *every*
source cluster at once (allgather: each cluster's blocks), on any WAN: asymmetric
routes, links that several routes share (a site's access link), routes through
transit links.

The packing (:func:`cluster_trees`)
    Each source cluster's data is cut into ``K`` equal parts (:func:`tree_count`), and
    every part gets a spanning arborescence over the clusters, grown from its source
    (Prim's order) by always adding the cluster whose cheapest attachment leaves the
    busiest resource least busy: every resource of a route (the coordinators' NICs, the
    gateways, each wide-area link, :meth:`Grid.path`) accumulates ``bytes / bandwidth``
    as the trees claim it, and an attachment costs the largest such load it would
    leave on its route (ties: a relay before the source itself, then the shorter path
    from the source; so on a uniform mesh each part leaves its source once and is
    relayed by the cluster it reached, the multi-tree's shape). With several sources
    (allgather, the reduce-scatters) an attachment costs that load at the call's size
    plus its path's latency, and ties go to the shorter path first: where every
    cluster sends, direct routes load the links as evenly as relays and save a hop.
    The parts of all sources are packed in turn, one part of each source per round,
    so early trees do not take all the fast links. This is the greedy step of the
    multiplicative-weights method for fractional tree packing (Garg and Konemann
    1998): on a full mesh it gives the multi-tree's relays, on a site's shared access
    link it enters the site once and fans out inside it.

Schedules
    Every block is cut into segments of ``m`` bytes; a segment travels down the tree of
    its part: from its owner to its cluster's coordinator (the lowest rank), down a
    pipelined chain over the rest of its cluster (on a LAN the chain is the
    bandwidth-optimal tree: every rank sends each segment once), across the part's
    tree of coordinators, and down each remote cluster's chain. Every rank gets every
    segment exactly once (an arborescence per segment), so the same flows run
    backwards are reductions, each contribution combined once on the way: a rank
    sends its partial result to its parent once it has its children's. So a
    reduce-scatter is the allgather's flows reduced towards the owners, a reduce the
    broadcast's towards the root, and an allreduce both (Rabenseifner 2004), each
    segment's allgather starting as soon as its reduction is complete. Reductions are
    packed on the transposed routes (a tree edge ``a -> b`` carries ``b -> a``) and
    reorder operands: commutative operations only. The segments of all blocks are
    interleaved (by their position in their block), so every owner's trees progress
    together. A reduce first sends :func:`direct_prefix` bytes straight to the root,
    every cluster its own values, while the relays still wait for theirs; the rest is
    cut into a multiple of ``K`` segments, so that the trees carry equal shares.

    Each rank's program is the order of an estimated replay (:func:`_programs`): every
    message charged ``os(m)`` on its sender, ``g(m)`` on each resource of its path in
    the order heads reach it, ``L`` and ``or(m)``; a rank forwards a segment as soon
    as it has it. A reduction's leaves release their own contributions at
    :data:`PACE` of the busiest resource's rate, each after the receive that precedes
    it in the rank's program: released all at once, they would queue on FIFO links
    ahead of the partial results that relays forward (a rank that never receives has
    nothing to wait on, and sends at once). The replay is causal, so its order is an
    execution of the schedule (deadlock-free), and messages of one ordered pair arrive
    in the order they are sent (FIFO resources).

References: seed 000, sec. 3.1.2-3.4 (segmented two-layer trees, "all available
wide-area links in parallel"); Garg and Konemann, FOCS 1998 (fractional packing);
Rabenseifner, ICCS 2004 (reduce-scatter + allgather); ForestColl and Blink
(throughput-optimal tree packing for allgather and allreduce).
"""

from __future__ import annotations

import itertools
import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from gridcoll.algorithms._collective import (
    check_blocks,
    check_reduction,
    check_segment_size,
    reduction_params,
)
from gridcoll.algorithms.replay import Replay, Resource, occupancy
from gridcoll.errors import ParameterError
from gridcoll.network.bounds import set_flow, site_groups
from gridcoll.network.grid import Grid
from gridcoll.schedule.ir import Op, Schedule, split_segments

__all__ = [
    "MAX_PACKED_CLUSTERS",
    "PackedTree",
    "allreduce_shares",
    "check_packable",
    "cluster_trees",
    "direct_prefix",
    "multitree_allgather",
    "multitree_allreduce",
    "multitree_reduce",
    "multitree_reduce_scatter",
    "owned_chunks",
    "replay_time",
    "tree_count",
]

MAX_PACKED_CLUSTERS = 24
"""The packing grows ``C K`` trees of ``C`` steps, each weighing ``O(C^2)``
attachments: above this many clusters the builders decline (a cold plan stays within
its planning time; the WAN-aware two-level builders serve such grids)."""


PACE = 0.8
"""A reduction's leaves release their own contributions at this fraction of the busiest
resource's rate (:func:`_programs`): a little ahead of it, so that it never starves."""


def tree_count(nclusters: int) -> int:
    """``K``, the trees per source cluster: on up to 8 clusters a multiple of ``C - 1``
    (on a uniform mesh one per relay, as the multi-tree broadcast's; up to four per
    relay on small grids, to weigh routes of different speeds); above, ``96 / C`` (the
    packing weighs ``C K`` trees of ``C`` steps each)."""
    C = max(nclusters, 1)
    if C > 8:
        return max(1, 96 // C)
    return max(1, (C - 1) * max(1, min(4, 48 // max(C * (C - 1), 1))))


def allreduce_shares(grid: Grid) -> tuple[float, ...]:
    """The share of the vector each cluster owns in the packed allreduce
    (:func:`multitree_allreduce`), by water-filling on the groups of clusters (the
    sites of :func:`gridcoll.network.bounds.site_groups`, the other clusters alone).

    A group ``g`` that owns ``f_g`` of the vector receives ``(k-1) f_g M`` in the
    reduce-scatter (every other group's partial result of its chunks) and
    ``(1 - f_g) M`` in the allgather, through its cut of max-flow ``I_g``; it sends
    about ``M`` whatever ``f_g``. So ``T >= M (1 + (k-2) f_g) / I_g``: the least ``T``
    for which ``sum_g max(0, (T I_g / M - 1) / (k-2)) >= 1`` gives
    ``f_g ∝ max(0, T I_g / M - 1)`` (a group with little capacity owns nothing and
    only contributes and receives). Equal shares when ``k <= 2``. Within a group,
    shares follow the clusters' rank counts. Memoised.
    """
    return grid.memo.get("packing.shares", None, lambda: _shares(grid), maxsize=1)


def _shares(grid: Grid) -> tuple[float, ...]:
    C = grid.nclusters
    sizes = [c.nranks for c in grid.clusters]
    grouped = {c for g in site_groups(grid) for c in g}
    groups = list(site_groups(grid)) + [(c,) for c in range(C) if c not in grouped]
    k = len(groups)
    if k <= 2:
        weights = [1.0] * k
    else:
        flows = []
        for g in groups:
            inside = frozenset(r for c in g for r in grid.members[c])
            flows.append(set_flow(grid, frozenset(range(grid.nranks)) - inside, inside))
        active = sorted(range(k), key=lambda i: -flows[i])
        while True:  # T sum_{active} I = k - 2 + |active|, dropping groups with T I < 1
            T = (k - 2 + len(active)) / sum(flows[i] for i in active)
            if T * flows[active[-1]] >= 1 or len(active) == 1:
                break
            active.pop()
        weights = [max(0.0, T * flows[i] - 1) if i in active else 0.0 for i in range(k)]
        if not any(weights):
            weights = [1.0] * k
    shares = [0.0] * C
    total = sum(weights)
    for w, g in zip(weights, groups, strict=True):
        ranks = sum(sizes[c] for c in g)
        for c in g:
            shares[c] = w / total * sizes[c] / ranks
    return tuple(shares)


def owned_chunks(grid: Grid, nbytes: int, itemsize: int) -> list[tuple[int, int]]:
    """Every rank's chunk ``(offset, length)`` of the allreduce's vector: the cluster's
    :func:`allreduce_shares` split evenly among its ranks, in whole items (largest
    remainders), in rank order."""
    shares = allreduce_shares(grid)
    weight = [shares[c] / grid.clusters[c].nranks for c in grid.cluster_of]
    items = nbytes // itemsize
    quotas = [items * w for w in weight]
    counts = [math.floor(q) for q in quotas]
    spare = items - sum(counts)
    for r in sorted(range(len(counts)), key=lambda r: (counts[r] - quotas[r], r))[:spare]:
        counts[r] += 1
    out, offset = [], 0
    for n in counts:
        out.append((offset, n * itemsize))
        offset += n * itemsize
    return out


@dataclass(frozen=True)
class PackedTree:
    """One part's arborescence over the clusters, rooted at its source cluster.

    ``children[c]`` are the clusters ``c`` forwards the part to; ``order`` the clusters
    in the order the packing added them (the source first)."""

    source: int
    children: dict[int, tuple[int, ...]]
    order: tuple[int, ...]

    def edges(self) -> list[tuple[int, int]]:
        """``(parent, child)`` in the order the packing added them."""
        parent = {c: p for p, kids in self.children.items() for c in kids}
        return [(parent[c], c) for c in self.order[1:]]


def route_resources(grid: Grid, a: int, b: int, up: bool) -> list[tuple[Resource, float]]:
    """The resources a message between the coordinators of clusters ``a -> b`` occupies
    and their seconds per byte; on the route ``b -> a`` for a reduction (``up``)."""
    coords = grid.coordinators(0)
    src, dst = (coords[b], coords[a]) if up else (coords[a], coords[b])
    out = []
    for kind, key in grid.path(src, dst):
        if kind == "link":
            bandwidth = grid.links[key].bandwidth
        else:  # a NIC (keyed by rank) or a gateway (by cluster): the LAN's g_l
            cluster = grid.cluster_of[key] if kind.startswith("nic") else key
            bandwidth = grid.clusters[cluster].lan.bandwidth
        out.append(((kind, key), 0.0 if math.isinf(bandwidth) else 1.0 / bandwidth))
    return out


def cluster_trees(
    grid: Grid, weights: Sequence[float], phases: tuple[bool, ...] = (False,)
) -> tuple[tuple[tuple[PackedTree, ...], ...], ...]:
    """``K`` (:func:`tree_count`) arborescences per source cluster and phase (module
    docstring).

    Parameters
    ----------
    grid : Grid
    weights : sequence of float
        Bytes (or any proportional quantity) each cluster sources; 0: none.
    phases : tuple of bool
        One entry per phase that carries the data, True for a reduction (its edges
        ``a -> b`` are the messages ``b -> a`` of a time-reversed flow: charged on the
        route ``b -> a``). The phases are packed together, on one account of the
        resources' loads: the allreduce's reduce-scatter and allgather run at once.

    Returns
    -------
    tuple
        Per phase, per cluster, its parts' trees (empty for a cluster that sources
        nothing).

    Notes
    -----
    O(phases C K * C^2 |path|) the first time, memoised in ``grid.memo`` by the
    normalised weights and the phases.
    """
    total = float(sum(weights)) or 1.0
    scale = 2.0 ** round(math.log2(total))
    key = (tuple(round(w / total, 12) for w in weights), tuple(phases), scale)
    return grid.memo.get("packing.trees", key, lambda: _pack(grid, *key), maxsize=64)


def _pack(
    grid: Grid, weights: tuple[float, ...], phases: tuple[bool, ...], scale: float
) -> tuple[tuple[tuple[PackedTree, ...], ...], ...]:
    C = grid.nclusters
    K = tree_count(C)
    pairs = [(a, b) for a in range(C) for b in range(C) if a != b]
    number: dict[Resource, int] = {}
    routes = [{ab: route_resources(grid, *ab, up) for ab in pairs} for up in phases]
    for phase in routes:
        for resources in phase.values():
            for x, _ in resources:
                number.setdefault(x, len(number))
    J = max((len(r) for phase in routes for r in phase.values()), default=1)
    dummy = len(number)  # pads the shorter routes: never loaded
    tables = []
    for up, phase in zip(phases, routes, strict=True):
        index = np.full((C, C, J), dummy)
        per_byte = np.zeros((C, C, J))
        latency = np.zeros((C, C))
        for (a, b), resources in phase.items():
            for j, (x, cost) in enumerate(resources):
                index[a, b, j], per_byte[a, b, j] = number[x], cost
            latency[a, b] = (grid.wan(b, a) if up else grid.wan(a, b)).L
        tables.append((index, per_byte, latency))
    load = np.zeros(len(number) + 1)
    trees: list[list[list[PackedTree]]] = [[[] for _ in range(C)] for _ in phases]
    sources = [c for c in range(C) if weights[c] > 0]
    for _ in range(K):
        for s in sources:
            for i, table in enumerate(tables):
                trees[i][s].append(
                    _grow(C, s, weights[s] / K, *table, load, len(sources) > 1, scale)
                )
    return tuple(tuple(tuple(t) for t in phase) for phase in trees)


def _grow(
    C: int,
    source: int,
    share: float,
    index: np.ndarray,
    per_byte: np.ndarray,
    latency: np.ndarray,
    load: np.ndarray,
    direct: bool,
    scale: float,
) -> PackedTree:
    """One arborescence from ``source`` carrying ``share``, Prim's order, bottleneck
    cost (module docstring); ``load`` (seconds per resource) is updated with its edges.
    Each step weighs every (tree cluster, other cluster) attachment at once: O(C^2 J)
    numpy per step for routes of up to ``J`` resources."""
    depth = np.zeros(C)
    inside = np.zeros(C, dtype=bool)
    inside[source] = True
    order = [source]
    children: dict[int, list[int]] = defaultdict(list)
    for _ in range(C - 1):
        U, V = np.array(order), np.flatnonzero(~inside)
        at = np.ix_(U, V)
        worst = (load[index[at]] + share * per_byte[at]).max(axis=2)
        relay = np.broadcast_to((source == U)[:, None], worst.shape)
        reach = depth[U][:, None] + latency[at]
        if direct:
            worst = worst * scale + reach
        uu, vv = np.meshgrid(U, V, indexing="ij")
        # (worst, a relay before the source, the shorter path, u, v), smallest first;
        # with several sources, the shorter path before a relay
        ties = (relay, reach) if direct else (reach, relay)
        best = np.lexsort((vv.ravel(), uu.ravel(), *(x.ravel() for x in ties), worst.ravel()))[0]
        u, v = int(uu.ravel()[best]), int(vv.ravel()[best])
        np.add.at(load, index[u, v], share * per_byte[u, v])
        depth[v] = reach.ravel()[best]
        inside[v] = True
        order.append(v)
        children[u].append(v)
    return PackedTree(source, {u: tuple(k) for u, k in children.items()}, tuple(order))


# -- programs ------------------------------------------------------------------------
@dataclass(frozen=True)
class _Flow:
    """Where one segment goes: between ``owner`` and every other rank along ``tree``."""

    owner: int
    tree: PackedTree


class _Routes:
    """The rank-level arborescence of a flow: owner -> its coordinator (if another
    rank), a chain over the rest of the owner's cluster, the part's tree of
    coordinators, and a chain over each remote cluster from its coordinator."""

    def __init__(self, grid: Grid):
        self.grid = grid
        self.coords = grid.coordinators(0)
        self._lan: dict[tuple[int, int], dict[int, tuple[int, ...]]] = {}
        self._parents: dict[tuple[int, int], dict[int, int]] = {}

    def lan(self, c: int, owner: int) -> dict[int, tuple[int, ...]]:
        """Cluster ``c``'s chain from its coordinator over every rank but ``owner``."""
        key = (c, owner)
        if key not in self._lan:
            coordinator = self.coords[c]
            ranks = [coordinator] + [
                r for r in self.grid.members[c] if r not in (coordinator, owner)
            ]
            self._lan[key] = {a: (b,) for a, b in itertools.pairwise(ranks)}
        return self._lan[key]

    def children(self, rank: int, flow: _Flow) -> list[int]:
        """The ranks ``rank`` hands the flow's segment to (away from the owner)."""
        c = self.grid.cluster_of[rank]
        home = self.grid.cluster_of[flow.owner]
        coordinator = self.coords[c]
        if rank == flow.owner and rank != coordinator:
            return [coordinator]
        out = list(self.lan(c, flow.owner if c == home else -1).get(rank, ()))
        if rank == coordinator:
            out = [self.coords[k] for k in flow.tree.children.get(c, ())] + out
        return out

    def parents(self, flow: _Flow) -> dict[int, int]:
        """Every rank's parent in the flow's arborescence (memoised per owner and tree)."""
        key = (flow.owner, id(flow.tree))
        if key not in self._parents:
            parent, stack = {}, [flow.owner]
            while stack:
                v = stack.pop()
                for child in self.children(v, flow):
                    parent[child] = v
                    stack.append(child)
            self._parents[key] = parent
        return self._parents[key]


def _programs(
    grid: Grid,
    segments: Sequence[tuple[int, int]],
    up: Sequence[_Flow] | None,
    down: Sequence[_Flow] | None,
) -> tuple[list[list[Op]], float]:
    """Every rank's program, in the order of an estimated replay
    (:class:`gridcoll.algorithms.replay.Replay`), and the replay's end
    (:func:`replay_time`).

    ``up[s]``: segment ``s`` is reduced towards its flow's owner (a rank sends its
    partial result to its parent once it has combined its children's); ``down[s]``:
    it is spread from the owner to every rank, starting when its reduction is complete
    at the owner (at once without ``up``). O(messages * path log messages)."""
    P = grid.nranks
    routes = _Routes(grid)
    heard = [0.0] * P  # each rank's last receive
    pending: dict[tuple[int, int], int] = {}

    def spread(replay: Replay, rank: int, s: int, ready: float) -> None:
        for dst in routes.children(rank, down[s]):
            replay.send(rank, dst, s, ready, False)

    def reduced(replay: Replay, rank: int, s: int, ready: float) -> None:
        """``rank`` holds its subtree's partial result of ``s``: on to its parent, or,
        at the owner, the reduction is complete."""
        parent = routes.parents(up[s]).get(rank)
        if parent is not None:
            replay.send(rank, parent, s, ready, True)
        elif down is not None:
            spread(replay, rank, s, ready)

    def arrived(replay: Replay, rank: int, sender: int, s: int, done: float, combine) -> None:
        heard[rank] = done
        replay.receive(rank, sender, s, combine=combine)
        if not combine:
            spread(replay, rank, s, done)
            return
        pending[(rank, s)] -= 1
        if not pending[(rank, s)]:
            reduced(replay, rank, s, done)

    def due(replay: Replay, t: float, leaf: tuple[int, int]) -> None:
        """A leaf's contribution is due: it follows the rank's last receive."""
        rank, s = leaf
        reduced(replay, rank, s, heard[rank])

    replay = Replay(grid, segments, arrived, due)
    if up is None:
        for s in range(len(segments)):
            spread(replay, down[s].owner, s, 0.0)
    else:
        leaves = []
        for s in range(len(segments)):
            for rank in range(P):
                waiting = len(routes.children(rank, up[s]))
                if waiting:
                    pending[(rank, s)] = waiting
                else:
                    leaves.append((rank, s))
        # A leaf's own contribution is due at the pace of the busiest resource, so that
        # FIFO resources do not queue every contribution ahead of the partial results;
        # a rank that never receives cannot wait (its program has nothing to follow),
        # nor do the leading segments sent straight to their owner (direct_prefix).
        listens = {rank for rank, _ in pending} | (set(range(P)) if down is not None else set())
        lead = next((s for s, flow in enumerate(up) if len(flow.tree.children) > 1), len(up))
        rest = slice(lead, None)
        busiest = _busiest(grid, routes, segments[rest], up[rest], down and down[rest])
        pace = PACE * busiest / max(len(segments) - lead, 1)
        for rank, s in leaves:
            replay.at(max(s - lead, 0) * pace if rank in listens else 0.0, (rank, s))
    end = replay.run()
    return replay.programs, end


def direct_prefix(grid: Grid, home: int) -> float:
    """The bytes a packed reduce towards cluster ``home`` sends straight to it, every
    cluster its own values, before the trees take over: ``F tau / k``.

    A relayed partial result cannot leave its relay before the values it combines
    arrive, ``tau`` (the least ``L`` between two of the ``k`` other clusters), so the
    links into ``home`` would idle until then; the values each cluster sends them
    meanwhile (``F tau`` bytes at their total rate ``F``) reduce ``F tau / k``
    elements at the root. The cut bound's ``(1 - 1/k) tau``
    (:func:`gridcoll.network.collective_bound`, a reduction's mixing) is this
    schedule's wait."""
    others = [c for c in range(grid.nclusters) if c != home]
    if len(others) < 2:
        return 0.0
    rate = sum(1.0 / max(cost for _, cost in route_resources(grid, home, c, True)) for c in others)
    tau = min(grid.wan(a, b).L for a in others for b in others if a != b)
    return rate * tau / len(others)


def _busiest(
    grid: Grid,
    routes: _Routes,
    segments: Sequence[tuple[int, int]],
    up: Sequence[_Flow],
    down: Sequence[_Flow] | None,
) -> float:
    """The largest total occupancy ``sum g(m)`` of one resource over every message of
    the flows: the time the busiest resource needs."""
    load: dict[Resource, float] = defaultdict(float)
    for s, (_, m) in enumerate(segments):
        for flows, reverse in ((up, True), (down, False)):
            if flows is None:
                continue
            for child, parent in routes.parents(flows[s]).items():
                src, dst = (child, parent) if reverse else (parent, child)
                for x, g in occupancy(grid, src, dst, m):
                    load[x] += g
    return max(load.values(), default=0.0)


def _block_flows(
    grid: Grid, blocks: Sequence[tuple[int, int]], segment_size: int, itemsize: int,
    phases: tuple[bool, ...], phase: int = 0,
) -> tuple[list[tuple[int, int]], list[_Flow]]:  # fmt: skip
    """Segments of every rank's block (``blocks[r] = (offset, length)``) and their flows
    in phase ``phase`` of ``phases`` (:func:`cluster_trees`): the segments of cluster
    ``c`` dealt to its ``K`` trees in turn (block by block)."""
    weights = [sum(blocks[r][1] for r in grid.members[c]) for c in range(grid.nclusters)]
    if not any(weights):
        weights = [len(m) for m in grid.members]
    trees = cluster_trees(grid, weights, phases)[phase]
    dealt = [0] * grid.nclusters
    paired = []  # (fraction of its block before it, rank, segment, flow)
    for r, (offset, length) in enumerate(blocks):
        c = grid.cluster_of[r]
        pieces = split_segments(length, segment_size, itemsize, offset) if length else []
        for i, seg in enumerate(pieces):
            paired.append((i / len(pieces), r, seg, _Flow(r, trees[c][dealt[c] % len(trees[c])])))
            dealt[c] += 1
    paired.sort(key=lambda x: x[:2])
    return [seg for _, _, seg, _ in paired], [flow for *_, flow in paired]


def _flows(
    op: str, grid: Grid, nbytes: int, root: int, segment_size: int, itemsize: int
) -> tuple[list[tuple[int, int]], list[_Flow] | None, list[_Flow] | None]:
    """The segments of one call and their flows up (reduced) and down (spread), as the
    builders below make them."""
    if op == "reduce":
        home = grid.cluster_of[root]
        weights = [float(nbytes) if c == home else 0.0 for c in range(grid.nclusters)]
        trees = cluster_trees(grid, weights, (True,))[0][home]
        others = tuple(c for c in range(grid.nclusters) if c != home)
        star = PackedTree(home, {home: others}, (home, *others))
        direct = min(nbytes, itemsize * math.ceil(direct_prefix(grid, home) / itemsize))
        segments = list(split_segments(direct, segment_size, itemsize) if direct else ())
        flows = [_Flow(root, star)] * len(segments)
        if direct < nbytes:  # the rest in a multiple of K segments: the trees carry equal shares
            rest = nbytes - direct
            n = len(trees) * math.ceil(math.ceil(rest / segment_size) / len(trees))
            m = itemsize * math.ceil(rest / (n * itemsize))
            tail = split_segments(rest, m, itemsize, direct)
            segments += tail
            flows += [_Flow(root, trees[s % len(trees)]) for s in range(len(tail))]
        return segments, flows, None
    if op == "allreduce":
        chunks = owned_chunks(grid, nbytes, itemsize)
        segments, up = _block_flows(grid, chunks, segment_size, itemsize, (True, False), 0)
        _, down = _block_flows(grid, chunks, segment_size, itemsize, (True, False), 1)
        return segments, up, down
    blocks = [(r * nbytes, nbytes) for r in range(grid.nranks)]
    up = op == "reduce_scatter"
    segments, flows = _block_flows(grid, blocks, segment_size, itemsize, (up,))
    return (segments, flows, None) if up else (segments, None, flows)


def replay_time(
    op: str, grid: Grid, nbytes: int, root: int, segment_size: int, itemsize: int = 1
) -> float:
    """The estimated replay's end for one packed call (:func:`_programs`): the time the
    programs were ordered by, an event replay of every message on the P-LogP
    parameters (O(messages log messages); the models use it for small calls)."""
    return _programs(grid, *_flows(op, grid, nbytes, root, segment_size, itemsize))[1]


def check_packable(grid: Grid) -> None:
    """Raise :class:`ParameterError` on a grid of more than :data:`MAX_PACKED_CLUSTERS`
    clusters (the builders and their models decline it)."""
    if grid.nclusters > MAX_PACKED_CLUSTERS:
        raise ParameterError(
            f"the tree packing handles up to {MAX_PACKED_CLUSTERS} clusters, "
            f"the grid has {grid.nclusters}"
        )


def _check(grid: Grid, segment_size: int, itemsize: int) -> None:
    check_segment_size(segment_size, itemsize)
    check_packable(grid)


def _schedule(op: str, grid: Grid, root: int, nbytes: int, segments, programs, params) -> Schedule:
    return Schedule(
        op, "multitree", grid.nranks, root, nbytes, tuple(segments),
        tuple(tuple(p) for p in programs), params,
    )  # fmt: skip


def multitree_allgather(
    grid: Grid,
    nbytes: int,
    root: int = 0,
    *,
    segment_size: int,
    itemsize: int = 1,
) -> Schedule:
    """Allgather over packed trees: each cluster's blocks spread over ``K`` trees on the
    cluster graph (:func:`cluster_trees`), pipelined in segments.

    Parameters
    ----------
    grid : Grid
    nbytes : int
        ``b``, bytes per rank.
    root : int
        Checked, otherwise ignored.
    segment_size : int
        ``m``, per block (a multiple of ``itemsize``).
    itemsize : int

    Notes
    -----
    Cluster ``c`` must receive ``(P - N_c) b`` bytes; the trees of all sources together
    keep every wide-area resource they reach busy, so the time approaches the largest
    ``load / capacity`` of a resource plus the latency of the deepest tree
    (:func:`gridcoll.models.packing.multitree_allgather_model`). Builds in
    O(P^2 k |path| log(P^2 k)) for ``k = ceil(b/m)`` (the replay), plus the packing
    once per grid.

    References
    ----------
    Module docstring: seed 000, sec. 3.4 (the allgather's WAN exchange, here spread
    over many trees); Garg and Konemann 1998.
    """
    check_blocks(grid, nbytes, root, itemsize)
    _check(grid, segment_size, itemsize)
    segments, up, down = _flows("allgather", grid, nbytes, root, segment_size, itemsize)
    programs, _ = _programs(grid, segments, up, down)
    params = {"segment_size": segment_size}
    return _schedule("allgather", grid, 0, nbytes, segments, programs, params)


def multitree_reduce_scatter(
    grid: Grid,
    nbytes: int,
    root: int = 0,
    *,
    segment_size: int,
    itemsize: int = 1,
    commutative: bool = True,
) -> Schedule:
    """Reduce-scatter over packed trees: block ``i``'s partial results combine up the
    trees towards rank ``i`` (the allgather's flows reversed, packed on the transposed
    routes). Commutative operations only (the trees interleave ranks).

    Parameters are those of :func:`multitree_allgather`, plus ``commutative`` (must be
    True).

    Notes
    -----
    Each segment's flow is an arborescence, so every contribution is combined exactly
    once; the allgather's cost on the transposed routes
    (:func:`gridcoll.models.packing.multitree_reduce_scatter_model`).
    """
    check_reduction(
        grid, nbytes, root, "multitree", commutative, itemsize=itemsize,
        segment_size=segment_size, supported=False,
    )  # fmt: skip
    _check(grid, segment_size, itemsize)
    segments, up, down = _flows("reduce_scatter", grid, nbytes, root, segment_size, itemsize)
    programs, _ = _programs(grid, segments, up, down)
    params = reduction_params(commutative, segment_size=segment_size)
    return _schedule("reduce_scatter", grid, 0, nbytes, segments, programs, params)


def multitree_reduce(
    grid: Grid,
    nbytes: int,
    root: int = 0,
    *,
    segment_size: int,
    itemsize: int = 1,
    commutative: bool = True,
) -> Schedule:
    """Reduce over packed trees from the root's cluster (:func:`cluster_trees` with one
    source, on the transposed routes): the segments are dealt to the trees in turn and
    a partial result crosses each tree edge once, combined on the way. Commutative
    operations only.

    Parameters
    ----------
    grid : Grid
    nbytes : int
        ``M``, the vector.
    root : int
    segment_size : int
        ``m``.
    itemsize : int
    commutative : bool
        Must be True.

    Notes
    -----
    The multi-tree broadcast backwards: on a full mesh, part ``i`` of ``M / (C-1)``
    bytes combines at cluster ``i`` from every other remote cluster and crosses
    ``i -> root`` once, so the root's cluster receives ``M`` over ``C - 1`` links at
    once (``M / sum_i rate_i``, seed 000 sec. 3.1.2-3.1.3).
    """
    check_reduction(
        grid, nbytes, root, "multitree", commutative, itemsize=itemsize,
        segment_size=segment_size, supported=False,
    )  # fmt: skip
    _check(grid, segment_size, itemsize)
    segments, up, down = _flows("reduce", grid, nbytes, root, segment_size, itemsize)
    programs, _ = _programs(grid, segments, up, down)
    params = reduction_params(commutative, segment_size=segment_size)
    return _schedule("reduce", grid, root, nbytes, segments, programs, params)


def multitree_allreduce(
    grid: Grid,
    nbytes: int,
    root: int = 0,
    *,
    segment_size: int,
    itemsize: int = 1,
    commutative: bool = True,
) -> Schedule:
    """Allreduce as reduce-scatter then allgather over packed trees (Rabenseifner's
    decomposition on the cluster graph): the vector is cut into ``P`` chunks, sized by
    the capacity of their owners' clusters (:func:`owned_chunks`), chunk ``i`` is
    reduced to rank ``i`` up :func:`multitree_reduce_scatter`'s trees, then
    spread from it down :func:`multitree_allgather`'s. Commutative operations only.

    Parameters
    ----------
    grid : Grid
    nbytes : int
        ``M``, the vector.
    root : int
        Checked, otherwise ignored.
    segment_size : int
        ``m``, per chunk.
    itemsize : int
    commutative : bool
        Must be True.

    Notes
    -----
    Each element crosses between clusters ``2 (C-1)`` times at least in any allreduce
    (:func:`gridcoll.network.collective_bound`); the two phases do exactly that, and a
    segment's allgather starts as soon as its reduction is complete at its owner, so
    the phases overlap (the slow links of one phase carry the other's data meanwhile).
    """
    check_reduction(
        grid, nbytes, root, "multitree", commutative, itemsize=itemsize,
        segment_size=segment_size, supported=False,
    )  # fmt: skip
    _check(grid, segment_size, itemsize)
    segments, up, down = _flows("allreduce", grid, nbytes, root, segment_size, itemsize)
    programs, _ = _programs(grid, segments, up, down)
    params = reduction_params(commutative, segment_size=segment_size)
    return _schedule("allreduce", grid, 0, nbytes, segments, programs, params)
