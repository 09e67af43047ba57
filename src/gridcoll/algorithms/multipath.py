"""Scatter, gather and all-to-all over several wide-area paths per pair of clusters:
blocks relayed through another cluster where the direct route is the bottleneck.

A flat or cluster-aware scatter sends every block of cluster ``c`` over the one route
from the root's cluster to ``c``; on an asymmetric WAN (``das2``: VU -> Leiden
0.625 MB/s, VU -> UvA 3.25 MB/s, UvA -> Leiden 0.75 MB/s) the physical limit is set by
a max-flow that also runs through the other clusters. Here the data between two
clusters (the root's and another, or any two for all-to-all) is cut into units and
every unit takes the direct route or a two-hop route through a third cluster's
coordinator, whichever leaves the busiest resource least busy (:func:`relay_plan`: the
greedy step of fractional path packing, as :mod:`gridcoll.algorithms.packing` packs
trees). A gather is the scatter's routes reversed.

Schedules
    Every block is cut into segments of ``m`` bytes; the segments of all blocks are
    interleaved (segment ``j`` of every block before segment ``j+1`` of any), so that
    every route carries data at once (an all-to-all's rank ``s`` in the rotated order,
    ``s+1, s+2, ...``). A segment goes from its source to its destination directly, or
    to the coordinator of its relay cluster, which forwards it as soon as it arrives.
    Each rank takes its messages in the order of an estimated replay
    (:class:`gridcoll.algorithms.replay.Replay`).

References: seed 000, sec. 3.2-3.3 (segmented WAN-aware scatter and gather); Garg and
Konemann, FOCS 1998 (fractional packing).
"""

from __future__ import annotations

import itertools
import math

from gridcoll.algorithms._collective import (
    Blocks,
    check_blocks,
    check_segment_count,
    check_segment_size,
    finish,
)
from gridcoll.algorithms.replay import Replay, Resource, occupancy
from gridcoll.errors import ParameterError
from gridcoll.network.grid import Grid
from gridcoll.schedule.ir import Op, Schedule

__all__ = [
    "MAX_ROUTES",
    "RELAY_SEGMENT",
    "RELAY_UNITS",
    "check_relayable",
    "multipath_alltoall",
    "multipath_gather",
    "multipath_scatter",
    "relay_plan",
    "segment_loads",
    "segment_paths",
]

RELAY_UNITS = 32
"""Units each pair's data is cut into for the choice of routes."""

RELAY_SEGMENT = 65536
"""The segment size the routes are weighed on (:func:`relay_plan`)."""

MAX_ROUTES = 1024
"""The most (pair, route) choices the builders weigh: all-to-all on up to 10 clusters,
scatter and gather on up to 33 (:func:`check_relayable`); above, they decline (the
single-route builders serve such grids)."""


def relay_plan(grid: Grid, pairs: tuple[tuple[int, int, int], ...]) -> tuple[tuple[int, ...], ...]:
    """Per pair ``(a, b, n)`` of ranks exchanging ``n`` blocks, the rank that relays each
    of its :data:`RELAY_UNITS` units (-1: the direct route ``a -> b``; else the
    coordinator of a cluster other than ``a``'s and ``b``'s), weighed on segments of
    :data:`RELAY_SEGMENT` bytes (a choice of routes by their rates, the same for every
    segment size).

    Units are placed one per pair in turn (the pairs of most blocks first), each on the
    route whose busiest resource, with the unit's load added, is least busy (ties: the
    direct route); a unit weighs ``n`` segments and loads every resource of its one or
    two hops. O(pairs C RELAY_UNITS |path|). Memoised in ``grid.memo``.
    """

    def compute() -> tuple[tuple[int, ...], ...]:
        coords = grid.coordinators(0)
        m = RELAY_SEGMENT
        load: dict[Resource, float] = {}
        routes = []
        for a, b, _ in pairs:
            ends = {grid.cluster_of[a], grid.cluster_of[b]}
            via = [coords[x] for x in range(grid.nclusters) if x not in ends]
            routes.append(
                [(-1, occupancy(grid, a, b, m))]
                + [(r, occupancy(grid, a, r, m) + occupancy(grid, r, b, m)) for r in via]
            )
        plan: list[list[int]] = [[] for _ in pairs]
        order = sorted(range(len(pairs)), key=lambda i: -pairs[i][2])
        for _ in range(RELAY_UNITS):
            for i in order:
                n = pairs[i][2]
                best = min(
                    routes[i],
                    key=lambda route: (
                        max(load.get(x, 0.0) + n * g for x, g in route[1]),
                        route[0] != -1,
                    ),
                )
                for x, g in best[1]:
                    load[x] = load.get(x, 0.0) + n * g
                plan[i].append(best[0])
        return tuple(tuple(relays) for relays in plan)

    return grid.memo.get("multipath.relays", pairs, compute, maxsize=64)


def check_relayable(op: str, grid: Grid, nbytes: int, m: int) -> None:
    """Raise :class:`ParameterError` where the routes would take too long to weigh
    (:data:`MAX_ROUTES`) or an all-to-all would need more than
    :data:`~gridcoll.limits.MAX_SEGMENTS` segments (``P^2 ceil(b/m)``)."""

    def routes(C: int) -> int:
        return (C * (C - 1) if op == "alltoall" else C - 1) * max(C - 1, 1)

    if routes(grid.nclusters) > MAX_ROUTES:
        most = max(C for C in range(1, grid.nclusters) if routes(C) <= MAX_ROUTES)
        raise ParameterError(
            f"relayed routes are weighed for {op} on up to {most} clusters, "
            f"the grid has {grid.nclusters}"
        )
    check_segment_count(op, grid, nbytes, m)


def _pairs(op: str, grid: Grid, root: int) -> tuple[tuple[tuple[int, int, int], ...], list[int]]:
    """The cluster-level pairs of :func:`relay_plan` for one call, and each block's pair
    (-1: a block that stays inside a cluster or at the root). Blocks: rank ``d``'s for
    scatter and gather, ``s * P + d`` for all-to-all."""
    P, C = grid.nranks, grid.nclusters
    coords = grid.coordinators(0)
    sizes = [c.nranks for c in grid.clusters]
    of = grid.cluster_of
    if op == "alltoall":
        index = {}
        pairs = []
        for A in range(C):
            for B in range(C):
                if A != B:
                    index[(A, B)] = len(pairs)
                    pairs.append((coords[A], coords[B], sizes[A] * sizes[B]))
        which = [index.get((of[s], of[d]), -1) for s in range(P) for d in range(P)]
        return tuple(pairs), which
    home = of[root]
    remote = [c for c in range(C) if c != home]
    index = {c: i for i, c in enumerate(remote)}
    if op == "scatter":
        pairs = [(root, coords[c], sizes[c]) for c in remote]
    else:
        pairs = [(coords[c], root, sizes[c]) for c in remote]
    return tuple(pairs), [index.get(of[d], -1) for d in range(P)]


def _ends(op: str, grid: Grid, root: int, block: int) -> tuple[int, int]:
    if op == "alltoall":
        return divmod(block, grid.nranks)
    return (root, block) if op == "scatter" else (block, root)


def segment_paths(
    op: str, grid: Grid, root: int, blocks: Blocks
) -> list[tuple[int, tuple[int, ...]]]:
    """``(segment, path)`` for every segment that moves, in the interleaved order
    (module docstring): a path is ``(source, destination)`` or ``(source, relay,
    destination)``; a pair's segments take its units' routes (:func:`relay_plan`) in
    turn."""
    pairs, which = _pairs(op, grid, root)
    plan = relay_plan(grid, pairs)
    dealt = [0] * len(pairs)
    P = grid.nranks
    if op == "alltoall":  # rank s sends to s+1, s+2, ... (the rotated order)
        order = [s * P + (s + i) % P for s in range(P) for i in range(1, P)]
    else:
        order = [d for d in range(P) if d != root]
    out = []
    for j in range(blocks.k):
        for block in order:
            src, dst = _ends(op, grid, root, block)
            path: tuple[int, ...] = (src, dst)
            i = which[block]
            if i >= 0:
                relay = plan[i][dealt[i] % RELAY_UNITS]
                dealt[i] += 1
                if relay >= 0:
                    path = (src, relay, dst)
            out.append((blocks.seg(block, j), path))
    return out


def _build(
    op: str, grid: Grid, nbytes: int, root: int, segment_size: int, itemsize: int
) -> Schedule:
    """The multi-path schedule of ``op`` (scatter, gather or alltoall)."""
    check_blocks(grid, nbytes, root, itemsize)
    check_segment_size(segment_size, itemsize)
    check_relayable(op, grid, nbytes, segment_size)
    P = grid.nranks
    blocks = Blocks.cut(P * P if op == "alltoall" else P, nbytes, segment_size, itemsize)
    paths = segment_paths(op, grid, root, blocks)
    programs = _replayed(grid, blocks.segments, paths)
    params = {"segment_size": segment_size}
    return finish(op, "multipath", grid, root, nbytes, blocks.segments, programs, params)


def _replayed(
    grid: Grid, segments: tuple[tuple[int, int], ...], paths: list[tuple[int, tuple[int, ...]]]
) -> list[list[Op]]:
    """Every rank's program in the order of an estimated replay
    (:class:`gridcoll.algorithms.replay.Replay`): each segment leaves the first rank of
    its path in the listed order and a relay forwards it as soon as it has it, so a
    relay takes its messages in the order they arrive, not in an order that would stall
    it behind a slower route. O(messages log messages)."""

    def arrived(replay: Replay, rank: int, sender: int, s: int, done: float, tag) -> None:
        path, hop = tag
        replay.receive(rank, sender, s)
        if hop + 2 < len(path):
            replay.send(rank, path[hop + 2], s, done, (path, hop + 1))

    replay = Replay(grid, segments, arrived)
    for s, path in paths:
        replay.send(path[0], path[1], s, 0.0, (path, 0))
    replay.run()
    return replay.programs


def multipath_scatter(
    grid: Grid, nbytes: int, root: int = 0, *, segment_size: int, itemsize: int = 1
) -> Schedule:
    """Scatter whose remote clusters' segments take the direct route or a relay through
    another cluster's coordinator (module docstring).

    Parameters
    ----------
    grid : Grid
    nbytes : int
        ``b``, bytes per rank.
    root : int
    segment_size : int
        ``m``, bytes per message.
    itemsize : int

    Returns
    -------
    Schedule
        ``(P-1) ceil(b/m)`` segments, each in one or two messages.

    Notes
    -----
    ``T`` is about the busiest resource's load (the root's NIC, a gateway, a
    wide-area link) plus one segment's two hops
    (:func:`gridcoll.models.multipath.multipath_model`); on ``das2:4`` the relays
    through UvA add Leiden's and Delft's second routes. Builds in O(P b/m) after
    :func:`relay_plan`.
    """
    return _build("scatter", grid, nbytes, root, segment_size, itemsize)


def multipath_alltoall(
    grid: Grid, nbytes: int, root: int = 0, *, segment_size: int, itemsize: int = 1
) -> Schedule:
    """All-to-all in segments dealt to the peers in turn (as
    :func:`gridcoll.algorithms.alltoall.segmented_alltoall`), each cluster pair's
    segments over the direct route or a relay cluster's coordinator (module docstring):
    on ``das2`` the pairs into Leiden add the routes through UvA. Builds in
    O(P^2 b/m log) after :func:`relay_plan`."""
    return _build("alltoall", grid, nbytes, root, segment_size, itemsize)


def multipath_gather(
    grid: Grid, nbytes: int, root: int = 0, *, segment_size: int, itemsize: int = 1
) -> Schedule:
    """Gather over the routes of :func:`multipath_scatter` reversed: each segment goes to
    the root directly or through a relay cluster's coordinator. Builds in O(P b/m)."""
    return _build("gather", grid, nbytes, root, segment_size, itemsize)


def segment_loads(
    op: str, grid: Grid, root: int, nbytes: int, m: int
) -> tuple[dict[Resource, float], float]:
    """The total occupancy of every resource over one call's messages (``m``-byte
    segments, the last of each block shorter; a rank's CPU ``os`` per send and ``or``
    per receive), and the longest route's way for one segment (its ``L``s and its
    hops' largest ``g``): the figures of the model.

    The blocks between two clusters (or the root and a cluster) take the same routes in
    the same shares, so they are counted once, on the coordinators: a sender's NIC and
    CPU carry its blocks to every rank of the other side, a receiver's from every rank
    of the sending side, a relay and the shared resources (gateways, links) all of
    them. O(C^2 C |path|)."""
    k = math.ceil(nbytes / m)
    last = nbytes - (k - 1) * m
    m = min(m, nbytes)
    pairs, _ = _pairs(op, grid, root)
    plan = relay_plan(grid, pairs)
    load: dict[Resource, float] = {}
    way = 0.0
    for (src, dst, n_src, n_dst), i in _groups(op, grid, root):
        relays = plan[i] if i >= 0 else (-1,)
        for relay in set(relays):
            share = relays.count(relay) / len(relays)
            path = (src, dst) if relay < 0 else (src, relay, dst)
            latency = biggest = 0.0
            for a, b in itertools.pairwise(path):
                plogp = grid.plogp(a, b)
                for size, times in ((m, (k - 1) * share), (last, share)):
                    work = [*occupancy(grid, a, b, size)]
                    work += [(("cpu", a), plogp.os(size)), (("cpu", b), plogp.or_(size))]
                    for x, t in work:
                        mine = x[1] == src and a == src and x[0] in ("nic_out", "cpu")
                        theirs = x[1] == dst and b == dst and x[0] in ("nic_in", "cpu")
                        n = n_dst if mine else n_src if theirs else n_src * n_dst
                        load[x] = load.get(x, 0.0) + n * times * t
                latency += plogp.L
                biggest = max(biggest, max(g for _, g in occupancy(grid, a, b, m)))
            way = max(way, latency + biggest)
    return load, way


def _groups(op: str, grid: Grid, root: int) -> list[tuple[tuple[int, int, int, int], int]]:
    """``((sender, receiver, senders, receivers), pair)`` for every set of blocks that
    move alike (:func:`segment_loads`): between two clusters (``pair`` their index in
    :func:`_pairs`), or inside one (-1, direct)."""
    coords = grid.coordinators(0)
    sizes = [c.nranks for c in grid.clusters]
    members = grid.members
    home = grid.cluster_of[root]
    out = []
    if op == "alltoall":
        i = 0
        for A in range(grid.nclusters):
            if sizes[A] > 1:
                out.append(((members[A][0], members[A][1], sizes[A], sizes[A] - 1), -1))
            for B in range(grid.nclusters):
                if A != B:
                    out.append(((coords[A], coords[B], sizes[A], sizes[B]), i))
                    i += 1
        return out
    local = next((r for r in members[home] if r != root), None)
    remote = [c for c in range(grid.nclusters) if c != home]
    if op == "scatter":
        if local is not None:
            out.append(((root, local, 1, sizes[home] - 1), -1))
        out += [((root, coords[c], 1, sizes[c]), i) for i, c in enumerate(remote)]
    else:
        if local is not None:
            out.append(((local, root, sizes[home] - 1, 1), -1))
        out += [((coords[c], root, sizes[c], 1), i) for i, c in enumerate(remote)]
    return out
