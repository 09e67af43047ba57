"""Scatter and gather over several wide-area paths per cluster: blocks relayed through
another cluster where the direct route is the bottleneck.

A flat or cluster-aware scatter sends every block of cluster ``c`` over the one route
from the root's cluster to ``c``; on an asymmetric WAN (``das2``: VU -> Leiden
0.625 MB/s, VU -> UvA 3.25 MB/s, UvA -> Leiden 0.75 MB/s) the physical limit is set by
a max-flow that also runs through the other clusters. Here each remote cluster's data
is cut into units and every unit takes the direct route or a two-hop route through
another cluster's coordinator, whichever leaves the busiest resource least busy
(:func:`relay_plan`: the greedy step of fractional path packing, as
:mod:`gridcoll.algorithms.packing` packs trees). A gather is the same routes reversed.

Schedules
    Every block is cut into segments of ``m`` bytes; the segments of all blocks are
    interleaved (segment ``j`` of every block before segment ``j+1`` of any), so that
    every route carries data at once. A segment of rank ``d`` (in cluster ``c``) goes
    from the root to ``d`` directly, or to the coordinator of its relay cluster, which
    forwards it to ``d`` as soon as it arrives (a gather: the reverse). Each rank takes
    its messages in the order of an estimated replay (:func:`_replayed`).

References: seed 000, sec. 3.2-3.3 (segmented WAN-aware scatter and gather); Garg and
Konemann, FOCS 1998 (fractional packing).
"""

from __future__ import annotations

import heapq
import itertools
import math

from gridcoll.algorithms._collective import Blocks, check_blocks, check_segment_size, finish
from gridcoll.network.grid import Grid
from gridcoll.schedule.ir import Op, Recv, Schedule, Send

__all__ = ["RELAY_UNITS", "multipath_gather", "multipath_scatter", "relay_plan", "segment_routes"]

RELAY_UNITS = 32
"""Units each remote cluster's data is cut into for the choice of routes."""

Resource = tuple[str, int | str]


def _occupancy(grid: Grid, src: int, dst: int, m: int) -> list[tuple[Resource, float]]:
    """The resources an ``m``-byte message ``src -> dst`` occupies, each for its
    ``g(m)`` (a link's own, a NIC's or gateway's LAN's)."""
    out = []
    for kind, key in grid.path(src, dst):
        if kind == "link":
            out.append(((kind, key), grid.links[key].g(m)))
        else:
            side = src if kind in ("nic_out", "gw_out") else dst
            out.append(((kind, key), grid.lan(side).g(m)))
    return out


def relay_plan(grid: Grid, root: int, m: int, inward: bool = False) -> dict[int, tuple[int, ...]]:
    """Per remote cluster ``c``, the relay cluster of each of its :data:`RELAY_UNITS`
    units (``c`` itself: the direct route), for ``m``-byte segments between the root
    and ``c``'s coordinator (``inward``: towards the root, a gather).

    Units are placed one per cluster in turn (the clusters of most ranks first), each
    on the route whose busiest resource, with the unit's load added, is least busy
    (ties: the direct route); a unit of cluster ``c`` weighs ``N_c`` segments of ``m``
    bytes and loads every resource of its one or two hops. O(C^2 RELAY_UNITS |path|).
    Memoised in ``grid.memo``.
    """

    def compute() -> dict[int, tuple[int, ...]]:
        home = grid.cluster_of[root]
        coords = grid.coordinators(root)
        remote = sorted(
            (c for c in range(grid.nclusters) if c != home), key=lambda c: -grid.clusters[c].nranks
        )
        load: dict[Resource, float] = {}

        def hop(a: int, b: int) -> list[tuple[Resource, float]]:
            return _occupancy(grid, b, a, m) if inward else _occupancy(grid, a, b, m)

        routes = {
            c: [(c, hop(root, coords[c]))]
            + [(x, hop(root, coords[x]) + hop(coords[x], coords[c])) for x in remote if x != c]
            for c in remote
        }
        plan: dict[int, list[int]] = {c: [] for c in remote}
        for _ in range(RELAY_UNITS):
            for c in remote:
                n = grid.clusters[c].nranks
                best = min(
                    routes[c],
                    key=lambda route: (
                        max(load.get(x, 0.0) + n * g for x, g in route[1]),
                        route[0] != c,
                    ),
                )
                for x, g in best[1]:
                    load[x] = load.get(x, 0.0) + n * g
                plan[c].append(best[0])
        return {c: tuple(relays) for c, relays in plan.items()}

    key = (root, m, inward)
    return grid.memo.get("multipath.relays", key, compute, maxsize=64)


def segment_routes(
    grid: Grid, root: int, blocks: Blocks, m: int, inward: bool = False
) -> list[tuple[int, int, int | None]]:
    """``(segment, rank, relay)`` for every segment of every rank but the root, in the
    interleaved order (module docstring): ``relay`` is the coordinator that forwards it,
    None for the direct route. A remote cluster's segments take its units' routes
    (:func:`relay_plan`) in turn."""
    plan = relay_plan(grid, root, m, inward)
    coords = grid.coordinators(root)
    dealt = dict.fromkeys(plan, 0)
    out = []
    for j in range(blocks.k):
        for d in range(grid.nranks):
            if d == root:
                continue
            c = grid.cluster_of[d]
            relay = None
            if c in plan:
                x = plan[c][dealt[c] % len(plan[c])]
                dealt[c] += 1
                relay = None if x == c else coords[x]
            out.append((blocks.seg(d, j), d, relay))
    return out


def _build(
    op: str, grid: Grid, nbytes: int, root: int, segment_size: int, itemsize: int
) -> Schedule:
    check_blocks(grid, nbytes, root, itemsize)
    check_segment_size(segment_size, itemsize)
    P = grid.nranks
    blocks = Blocks.cut(P, nbytes, segment_size, itemsize)
    inward = op == "gather"
    paths = []
    for s, d, relay in segment_routes(grid, root, blocks, min(segment_size, nbytes), inward):
        path = (root, d) if relay is None else (root, relay, d)
        paths.append((s, path[::-1] if inward else path))
    programs = _replayed(grid, blocks.segments, paths)
    params = {"segment_size": segment_size}
    return finish(op, "multipath", grid, root, nbytes, blocks.segments, programs, params)


def _replayed(
    grid: Grid, segments: tuple[tuple[int, int], ...], paths: list[tuple[int, tuple[int, ...]]]
) -> list[list[Op]]:
    """Every rank's program in the order of an estimated replay: each segment leaves the
    first rank of its path in the listed order, ``os(m)`` on the sender's CPU, ``g(m)``
    on each resource of the hop in the order heads reach it, ``L``, ``or(m)``, and a
    relay forwards it as soon as it has it. The replay is causal, so its order is an
    execution of the schedule (deadlock-free); a relay takes its messages in the order
    they arrive, not in an order that would stall it behind a slower route.
    O(messages log messages)."""
    P = grid.nranks
    programs: list[list[Op]] = [[] for _ in range(P)]
    cpu = [0.0] * P
    free: dict[Resource, float] = {}
    heap: list = []
    seq = itertools.count()

    def send(path: tuple[int, ...], hop: int, s: int, ready: float) -> None:
        src, dst = path[hop], path[hop + 1]
        m = segments[s][1]
        t = max(ready, cpu[src])
        cpu[src] = t + grid.plogp(src, dst).os(m)
        programs[src].append(Send(dst, (s,)))
        occupied = _occupancy(grid, src, dst, m)
        heapq.heappush(heap, (t, next(seq), 0, (path, hop, s, occupied)))

    for s, path in paths:
        send(path, 0, s, 0.0)
    while heap:
        t, _, i, message = heapq.heappop(heap)
        path, hop, s, occupied = message
        src, dst = path[hop], path[hop + 1]
        if i < len(occupied):
            resource, g = occupied[i]
            t = max(t, free.get(resource, 0.0)) + g
            free[resource] = t
            last = i == len(occupied) - 1
            heapq.heappush(
                heap, (t + (grid.plogp(src, dst).L if last else 0.0), next(seq), i + 1, message)
            )
            continue
        cpu[dst] = max(t, cpu[dst]) + grid.plogp(src, dst).or_(segments[s][1])
        programs[dst].append(Recv(src, (s,)))
        if hop + 2 < len(path):
            send(path, hop + 1, s, cpu[dst])
    return programs


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


def multipath_gather(
    grid: Grid, nbytes: int, root: int = 0, *, segment_size: int, itemsize: int = 1
) -> Schedule:
    """Gather over the routes of :func:`multipath_scatter` reversed: each segment goes to
    the root directly or through a relay cluster's coordinator. Builds in O(P b/m)."""
    return _build("gather", grid, nbytes, root, segment_size, itemsize)


def segment_loads(
    grid: Grid, root: int, nbytes: int, m: int, inward: bool
) -> tuple[dict[Resource, float], float]:
    """The total occupancy of every resource over one call's messages (``m``-byte
    segments, the last of each block shorter; a rank's CPU ``os`` per send and ``or``
    per receive), and the longest route's way for one segment (its ``L``s and its
    hops' largest ``g``): the figures of the model. O(P C)."""
    k = math.ceil(nbytes / m)
    last = nbytes - (k - 1) * m
    plan = relay_plan(grid, root, min(m, nbytes), inward)
    coords = grid.coordinators(root)
    load: dict[Resource, float] = {}
    way = 0.0
    for d in range(grid.nranks):
        if d == root:
            continue
        c = grid.cluster_of[d]
        relays = plan.get(c, (c,))
        for x in set(relays):
            share = relays.count(x) / len(relays)
            path = [root, d] if x == c else [root, coords[x], d]
            if inward:
                path.reverse()
            hops = list(itertools.pairwise(path))
            for a, b in hops:
                plogp = grid.plogp(a, b)
                for size, times in ((m, (k - 1) * share), (last, share)):
                    work = [*_occupancy(grid, a, b, size), (("cpu", a), plogp.os(size))]
                    for r, g in [*work, (("cpu", b), plogp.or_(size))]:
                        load[r] = load.get(r, 0.0) + times * g
            way = max(
                way,
                sum(grid.plogp(a, b).L for a, b in hops)
                + max(g for a, b in hops for _, g in _occupancy(grid, a, b, min(m, nbytes))),
            )
    return load, way
