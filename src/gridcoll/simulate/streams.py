"""The simulator without an event heap, for schedules whose resources each serve one stream.

Theory of operation
-------------------
The event loop of :mod:`gridcoll.simulate.executor` depends on the global order of its
events in one way only: the order in which each resource serves the messages that
reach it (FIFO by head time ``h_{i-1}``, ties by creation order). Everything else -- a
rank's clock, ``h_i = max(h_{i-1}, free_i)``, ``e_i = max(h_i + occ_i, e_{i-1})``, the
arrival ``e_last + L``, a receive's ``max(A, t + or(m))`` -- is a function of values,
whatever order they are computed in.

Call a resource *single-stream* when every message crossing it has the same sender
and the same previous resource on its path. Then it serves messages in the sender's
send order. By induction along the path: the first resource (``nic_out`` of the
sender) takes them in program order; if resource ``i - 1`` served X before Y, then
``h_{i-1}(X) <= h_{i-1}(Y)`` and X's event for resource ``i`` was created first, so
the heap hands X to resource ``i`` first, times equal or not.

When every resource of a schedule is single-stream -- every tree broadcast, on every
grid whose routes between two clusters are fixed -- a message's whole path can be
computed when it is sent, and a rank can run as soon as the messages it waits for have
been computed: a dataflow evaluation. It performs the same floating-point operations
on the same values as the event loop, so every time is identical bit for bit; it needs
no heap and no per-message object: O(E) for E hops instead of O(E log E).

:func:`replay_streams` is that evaluation. It returns None, and the caller falls back
on the event loop, when some resource carries two streams or when anything is wrong
with the schedule (a bad peer, mismatched segments, a deadlock, a message never
received): the event loop names the fault. It keeps no timeline. It never replays a
schedule whose messages cross a fair link (``Link.sharing == "fair"``): those are
not served one at a time, and only the event loop shares them out.
"""

from __future__ import annotations

import itertools
from collections import deque
from collections.abc import Callable, Sequence

from gridcoll.errors import GridError
from gridcoll.network.grid import Grid
from gridcoll.schedule.ir import PeriodicProgram, Recv, Schedule, Send

__all__ = [
    "StreamResult",
    "occupancies",
    "replay_streams",
    "resource_gap",
    "single_stream_paths",
]

Resource = tuple[str, int | str]

StreamResult = tuple[tuple[float, ...], int, int]
"""``(finish_s, nmessages, nevents)`` of a replay."""


def occupancies(
    memo: dict[tuple[int, int], float], gap_fns: tuple[Callable[[float], float], ...], m: int
) -> tuple[float, ...]:
    """Each resource's occupancy ``g(m)`` of an m-byte message, memoised in ``memo`` by
    (function, size): both simulator paths ask the same few sizes over and over."""
    occs = []
    for fn in gap_fns:
        key = (id(fn), m)  # the grid keeps fn alive, so its id is stable
        occ = memo.get(key)
        if occ is None:
            occ = memo[key] = fn(m)
        occs.append(occ)
    return tuple(occs)


def resource_gap(grid: Grid, resource: Resource) -> Callable[[float], float]:
    """The occupancy function ``g(m)`` of one resource of :meth:`Grid.path`: ``g_l(m)``
    of the rank's or the gateway's LAN for NICs and gateways, the link's ``g(m)``."""
    kind, key = resource
    if kind in ("nic_out", "nic_in"):
        return grid.lan(key).g_fn
    if kind in ("gw_out", "gw_in"):
        return grid.clusters[key].lan.g_fn
    if kind == "link":
        return grid.links[key].g
    raise GridError(f"unknown resource kind {kind!r} in a path of grid {grid.name!r}")


def single_stream_paths(
    grid: Grid, pairs: Sequence[tuple[int, int]]
) -> dict[tuple[int, int], tuple[Resource, ...]] | None:
    """``grid.path(a, b)`` of every sending pair, or None if some resource is fed by
    two streams (two senders, or one sender through two different previous resources).

    O(pairs x path length).
    """
    feeder: dict[Resource, tuple[int, Resource]] = {}
    paths = {}
    for a, b in pairs:
        path = paths[(a, b)] = grid.path(a, b)
        for previous, resource in itertools.pairwise(path):
            stream = (a, previous)
            if feeder.setdefault(resource, stream) != stream:
                return None
    return paths


def _is_peer(peer: object, rank: int, nranks: int) -> bool:
    """The event loop's own test of a peer (which raises where this says False)."""
    return isinstance(peer, int) and 0 <= peer < nranks and peer != rank


class _Streams:
    """One dataflow replay: per-channel FIFOs of arrival times, per-resource free times.

    A channel ``c`` (one ordered pair of ranks) holds ``arrivals[c]``, the arrival
    times of the messages sent on it and not yet received, and ``carried[c]`` their
    segment tuples -- except on an *aligned* channel, whose both ends are periodic
    programs over the same messages naming each other once per period, so message q
    carries ``messages[q]`` by construction. ``waiting[r]`` is the channel rank ``r``
    is blocked on (-1: none).
    """

    def __init__(self, schedule: Schedule, grid: Grid, message_bytes: dict):
        self.schedule = schedule
        self.grid = grid
        self.message_bytes = message_bytes
        P = schedule.nranks
        self.now = [0.0] * P
        self.pc = [0] * P
        self.waiting = [-1] * P
        self.ready: list[int] = []
        self.channel_ids: dict[tuple[int, int], int] = {}
        self.sent: dict[tuple[int, int], int] = {}  # messages per sending pair
        self.arrivals: list[deque] = []
        self.carried: list[deque] = []
        self.free: list[float] = []
        self.paths: dict[tuple[int, int], tuple] = {}  # pair -> (resource ids, gaps, plogp)
        self.gaps: dict[tuple[int, float], float] = {}  # (id(g_fn), m) -> g(m)
        self.classes: dict[int, tuple[list[int], list[int]]] = {}  # id(messages) -> sizes
        self.entries: list[list[tuple] | None] = [None] * P  # periodic patterns, resolved
        self.failed = False

    # -- set-up ------------------------------------------------------------------------
    def channel(self, src: int, dst: int) -> int:
        cid = self.channel_ids.get((src, dst))
        if cid is None:
            cid = self.channel_ids[(src, dst)] = len(self.arrivals)
            self.arrivals.append(deque())
            self.carried.append(deque())
        return cid

    def collect(self) -> bool:
        """Register every channel and count the messages of every sending pair; False
        for a bad peer or op."""
        P = self.schedule.nranks
        sent = self.sent
        for r, program in enumerate(self.schedule.programs):
            if isinstance(program, PeriodicProgram):
                k = len(program.messages)
                for send, peer in program.pattern:
                    if not _is_peer(peer, r, P):
                        return False
                    if send:
                        self.channel(r, peer)
                        sent[(r, peer)] = sent.get((r, peer), 0) + k
                    else:
                        self.channel(peer, r)
                continue
            for op in program:
                kind, peer = op.__class__, op.peer
                if (kind is not Send and kind is not Recv) or not _is_peer(peer, r, P):
                    return False
                if kind is Send:
                    self.channel(r, peer)
                    sent[(r, peer)] = sent.get((r, peer), 0) + 1
                else:
                    self.channel(peer, r)
        return True

    def prepare(self) -> bool:
        """Resource ids of every path; False if some resource carries two streams or
        shares fairly (a fair link's messages are not served one at a time)."""
        paths = single_stream_paths(self.grid, list(self.sent))
        if paths is None:
            return False
        if self.grid.fair_links and any(
            self.grid.is_fair(resource) for path in paths.values() for resource in path
        ):
            return False
        ids: dict[Resource, int] = {}
        for pair, path in paths.items():
            self.paths[pair] = (
                tuple(ids.setdefault(resource, len(ids)) for resource in path),
                tuple(resource_gap(self.grid, resource) for resource in path),
                self.grid.plogp(*pair),
            )
        self.free = [0.0] * len(ids)
        return True

    def aligned(self, src: int, dst: int) -> bool:
        """True if channel src -> dst carries ``messages[q]`` as its message q on both
        ends (each end periodic over the same messages, naming the other once)."""
        programs = self.schedule.programs
        a, b = programs[src], programs[dst]
        return (
            isinstance(a, PeriodicProgram)
            and isinstance(b, PeriodicProgram)
            and a.messages is b.messages
            and a.pattern.count((True, dst)) == 1
            and b.pattern.count((False, src)) == 1
        )

    def send_info(self, a: int, b: int, m: int) -> tuple:
        """``(resource ids, occupancies, os(m), L, channel, b)`` of an m-byte send a -> b."""
        ids, gap_fns, p = self.paths[(a, b)]
        occs = occupancies(self.gaps, gap_fns, m)
        return (ids, occs, p.os(m), p.L, self.channel_ids[(a, b)], b)

    def size_classes(self, messages: tuple[tuple[int, ...], ...]) -> tuple[list[int], list[int]]:
        """``(class of each message, size of each class)``: a periodic program's sends
        are looked up per class (usually one: every segment of size m)."""
        found = self.classes.get(id(messages))
        if found is None:
            message_bytes = self.message_bytes
            sizes: list[int] = []
            index: dict[int, int] = {}
            of = [index.setdefault(message_bytes[s], len(index)) for s in messages]
            sizes = sorted(index, key=index.__getitem__)
            found = self.classes[id(messages)] = (of, sizes)
        return found

    def resolve(self, r: int, program: PeriodicProgram) -> list[tuple]:
        """Rank r's pattern with everything looked up per message size class:
        ``(hops, [send info per class], aligned)`` for a send (hops = path length),
        ``(0, [or(m) per class], channel, aligned)`` for a receive."""
        _, sizes = self.size_classes(program.messages)
        entries: list[tuple] = []
        for send, peer in program.pattern:
            if send:
                infos = [self.send_info(r, peer, m) for m in sizes]
                entries.append((len(infos[0][0]), infos, self.aligned(r, peer)))
            else:
                p = self.grid.plogp(peer, r)
                ors = [p.or_(m) for m in sizes]
                entries.append((0, ors, self.channel_ids[(peer, r)], self.aligned(peer, r)))
        return entries

    # -- the run -----------------------------------------------------------------------
    def run(self) -> StreamResult | None:
        if not self.collect() or not self.prepare():
            return None
        programs = self.schedule.programs
        for r, program in enumerate(programs):
            if isinstance(program, PeriodicProgram) and len(program):
                self.entries[r] = self.resolve(r, program)
        ready = self.ready
        ready.extend(range(len(programs) - 1, -1, -1))  # rank 0 first
        while ready and not self.failed:
            r = ready.pop()
            entries = self.entries[r]
            if entries is None:
                self.run_ops(r)
            elif len(entries) == 1 and not entries[0][0]:
                self.run_leaf(r)
            else:
                self.run_periodic(r)
        if self.failed or any(self.pc[r] < len(p) for r, p in enumerate(programs)):
            return None  # a mismatch or a deadlock: the event loop names it
        if any(self.arrivals):
            return None  # a message never received
        nevents = sum(n * (len(self.paths[pair][0]) - 1) for pair, n in self.sent.items())
        return tuple(self.now), sum(self.sent.values()), nevents

    def run_periodic(self, r: int) -> None:
        """Run rank r's :class:`PeriodicProgram` until it ends or waits for a message.

        The executor's Send and Recv, inlined (this loop runs once per operation), with
        a LAN message's two hops (``nic_out``, ``nic_in``) unrolled.
        """
        program = self.schedule.programs[r]
        entries = self.entries[r]
        messages = program.messages
        classes, _ = self.size_classes(messages)
        n, k = len(entries), len(messages)
        q, j = divmod(self.pc[r], n)
        t = self.now[r]
        free, arrivals, carried, waiting = self.free, self.arrivals, self.carried, self.waiting
        ready = self.ready
        while q < k:
            segs = messages[q]
            c = classes[q]
            for j in range(j, n):  # noqa: B020 - the first message resumes at the saved op
                entry = entries[j]
                hops = entry[0]
                if hops:
                    res, occs, os_, L, cid, dst = entry[1][c]
                    rid = res[0]
                    f = free[rid]
                    h = t if t > f else f
                    tail = h + occs[0]
                    free[rid] = tail
                    if hops == 2:
                        rid = res[1]
                        f = free[rid]
                        h = h if h > f else f
                        end = h + occs[1]
                        free[rid] = end
                        if end > tail:
                            tail = end
                    else:
                        for i in range(1, hops):
                            rid = res[i]
                            f = free[rid]
                            h = h if h > f else f
                            end = h + occs[i]
                            free[rid] = end
                            if end > tail:
                                tail = end
                    arrivals[cid].append(tail + L)
                    if not entry[2]:
                        carried[cid].append(segs)
                    if waiting[dst] == cid:
                        waiting[dst] = -1
                        ready.append(dst)
                    t += os_
                else:
                    cid = entry[2]
                    queue = arrivals[cid]
                    if not queue:
                        self.pc[r] = q * n + j
                        self.now[r] = t
                        waiting[r] = cid
                        return
                    arrival = queue.popleft()
                    if not entry[3]:
                        got = carried[cid].popleft()
                        if got is not segs and got != segs:
                            self.failed = True
                            return
                    done = t + entry[1][c]
                    if arrival > done:
                        done = arrival
                    t = done
            j = 0
            q += 1
        self.pc[r] = k * n
        self.now[r] = t

    def run_leaf(self, r: int) -> None:
        """:meth:`run_periodic` for a program of one receive per message (a leaf of a
        tree broadcast: most ranks)."""
        program = self.schedule.programs[r]
        _, ors, cid, aligned = self.entries[r][0]
        messages = program.messages
        classes, _ = self.size_classes(messages)
        queue, carried = self.arrivals[cid], self.carried[cid]
        q, k = self.pc[r], len(messages)
        t = self.now[r]
        while q < k:
            if not queue:
                self.pc[r] = q
                self.now[r] = t
                self.waiting[r] = cid
                return
            arrival = queue.popleft()
            if not aligned:
                got = carried.popleft()
                segs = messages[q]
                if got is not segs and got != segs:
                    self.failed = True
                    return
            done = t + ors[classes[q]]
            if arrival > done:
                done = arrival
            t = done
            q += 1
        self.pc[r] = k
        self.now[r] = t

    def run_ops(self, r: int) -> None:
        """Run rank r's program of explicit ops until it ends or waits for a message."""
        program = self.schedule.programs[r]
        n = len(program)
        i = self.pc[r]
        t = self.now[r]
        free, arrivals, carried, waiting = self.free, self.arrivals, self.carried, self.waiting
        message_bytes, channel_ids, infos = self.message_bytes, self.channel_ids, {}
        while i < n:
            op = program[i]
            peer = op.peer
            segs = op.segments
            m = message_bytes[segs]
            if op.__class__ is Send:
                info = infos.get((peer, m))
                if info is None:
                    info = infos[(peer, m)] = self.send_info(r, peer, m)
                res, occs, os_, L, cid, dst = info
                rid = res[0]
                f = free[rid]
                h = t if t > f else f
                tail = h + occs[0]
                free[rid] = tail
                for k in range(1, len(res)):
                    rid = res[k]
                    f = free[rid]
                    h = h if h > f else f
                    end = h + occs[k]
                    free[rid] = end
                    if end > tail:
                        tail = end
                arrivals[cid].append(tail + L)
                carried[cid].append(segs)
                if waiting[dst] == cid:
                    waiting[dst] = -1
                    self.ready.append(dst)
                t += os_
            else:
                cid = channel_ids[(peer, r)]
                queue = arrivals[cid]
                if not queue:
                    waiting[r] = cid
                    break
                arrival = queue.popleft()
                got = carried[cid].popleft()
                if got is not segs and got != segs:
                    self.failed = True
                    return
                done = t + self.grid.plogp(peer, r).or_(m)
                if arrival > done:
                    done = arrival
                t = done
            i += 1
        self.pc[r] = i
        self.now[r] = t


def replay_streams(schedule: Schedule, grid: Grid, message_bytes: dict) -> StreamResult | None:
    """Replay ``schedule`` as a dataflow (module docstring), or None if it cannot be.

    ``message_bytes`` is ``schedule.message_bytes``. Returns ``(finish_s, nmessages,
    nevents)``, bit for bit what the event loop computes, or None when some resource
    carries two streams or the schedule is faulty (the event loop then raises).

    Cost O(P + E + pairs x path length) for E hops: no heap, and no object per message
    of a :class:`~gridcoll.schedule.ir.PeriodicProgram`.
    """
    return _Streams(schedule, grid, message_bytes).run()
