"""Replay a schedule on a grid, message by message: the event-driven executor.

Timing semantics (P-LogP, seed 000 sec. 2.1; shared by every part of gridcoll)
------------------------------------------------------------------------------
Every rank runs its program in order from ``t = 0``; ``now`` is when its previous
operation completed.

Send ``(peer, segments)`` reached at ``t``
    ``m`` bytes, ``p = grid.plogp(a, peer)``. The CPU is busy ``os(m)``: the next
    operation starts at ``t + os(m)``. The head enters the path
    ``grid.path(a, peer)`` at ``t``.

Path traversal: cut-through with a FIFO queue on every resource
    Hop ``i`` occupies its resource for ``occ_i``: ``g_l(m)`` of the rank's or the
    gateway's cluster LAN for NICs and gateways, ``g_link(m)`` for a WAN link. With
    ``h_{-1} = e_{-1} = t``::

        h_i = max(h_{i-1}, free[res_i]);  free[res_i] = h_i + occ_i
        e_i = max(h_i + occ_i, e_{i-1})

    and the message arrives at ``e_last + p.L``. Hop ``i`` is one event at time
    ``h_{i-1}``, so each resource serves messages in the order their heads reach it.
    Uncontended, a message arrives at ``t + g(m) + L = r(m)``; a rank sending twice in
    a row puts the second head in at ``max(t + os, t + g_l)``: ``s_w = max(g_l, os_w)``.

Recv ``(peer, segments)`` reached at ``t``
    Takes the next message of the channel ``peer -> b`` (FIFO, matched in program
    order, as MPI's non-overtaking rule). If it arrives at ``A``, the receive completes
    at ``max(A, t + or(m))``: ``or`` overlaps the tail of the transfer.

Ties between events at the same time are broken by their sequence number, that is by
the order they were created: ranks start in rank order at t = 0, and a rank runs on
(sending without waiting) until it reaches a Recv whose message has not yet arrived.

Fair links (``Link.sharing == "fair"``; :mod:`gridcoll.simulate.fairshare`)
    NICs, gateways and FIFO links keep the rules above. A message whose path crosses
    fair links is one *flow* over all of them (one message = one flow, as one TCP
    connection's transfer). On fair link ``l`` an m-byte flow costs
    ``c_l = g_l(m) / m`` seconds per byte (``m`` taken as at least 1): it needs
    ``g_l(m)`` seconds of exclusive-equivalent service, and at ``x`` bytes/s it uses
    the fraction ``x c_l`` of the link. The flows in progress get their max-min fair
    rates (progressive filling over the links, ``sum_f x_f c_{f,l} <= 1``; Bertsekas &
    Gallager, *Data Networks*, sec. 6.5.2), recomputed whenever a flow starts or ends.
    A flow that starts at ``s`` ends at the ``F`` where ``int_s^F x_f(t) dt = m``;
    alone it runs at ``min_l m / g_l(m)`` and ``F = s + max_l g_l(m)``, exactly its FIFO
    occupancy. The head passes a fair link at once (``h_i = h_{i-1}``; a fair link
    holds no queue); the flow starts when the head reaches the first fair link, and
    the message arrives at ``max(e_fifo, F) + p.L``, ``e_fifo`` the FIFO hops' tail.
    A FIFO hop between fair links reserves its ``occ_i`` as before and does not limit
    the flow's rate.

    Messages of one ordered rank pair keep their order, as on one connection: a
    pair's next message starts its flow (and its head goes on) only when the previous
    message's flow has ended, that is when its last byte has crossed the fair links.
    So a pair holds one share of a link at a time, however its data is segmented, and
    its arrivals keep the send order. A pair's pipeline alone on its links therefore
    takes exactly its FIFO times: flow ``k+1`` starts at ``max(h, F_k)`` as the FIFO
    link's ``max(h, free)``. The rate recomputation runs after every other event at
    the same time (priority ``_RESHARE``), so flows that start together are shared
    out once. Cost per start or end: one progressive filling, O(K (R + F)) for R fair
    links, F flow-link pairs and K distinct saturation levels.

Load (``simulate(..., load=trace, offset=t)``; :mod:`gridcoll.network.load`)
    Cross traffic takes the fraction ``f(t)`` of a link (seed 001, sec. 3). A FIFO
    link's hop ends at ``occupancy_end(occ_i, h_i, profile)``, the ``E`` with
    ``int_{h_i}^E (1 - f) dt = occ_i``, instead of ``h_i + occ_i``; a fair link's
    capacity for the application's flows is ``1 - f(t)``, re-shared at every step of
    the load. A lone message's time on a 50%-loaded link doubles in both modes.

Cost: O(E log E) for E hop events (one per hop after the first, per message); paths,
P-LogP values and occupancies are computed once per (sender, receiver, size).

Two evaluations, one result
---------------------------
Without ``record``, a schedule whose every resource serves a single stream (every tree
broadcast) and whose messages cross no fair link is evaluated by
:func:`gridcoll.simulate.streams.replay_streams`: the same arithmetic in dataflow order,
without the heap, O(E) -- bit for bit the same times (that module proves it;
``tests/test_simulate.py`` checks it on random schedules). Any other schedule, a faulty
one, or ``record=True`` runs the event loop below (``_FairReplay`` on a grid with fair
links; on a grid without them every time is what it was before fair links existed).
"""

from __future__ import annotations

import gc
from collections import deque
from dataclasses import dataclass
from heapq import heappop, heappush

from gridcoll.errors import ScheduleError
from gridcoll.network.grid import Grid
from gridcoll.network.load import LoadTrace, fraction_in, occupancy_end
from gridcoll.schedule.ir import PeriodicProgram, Recv, Schedule, Send
from gridcoll.simulate.engine import NORMAL, Environment
from gridcoll.simulate.fairshare import FairShare
from gridcoll.simulate.streams import occupancies, replay_streams, resource_gap
from gridcoll.simulate.timeline import Interval, MessageRecord, Timeline

__all__ = ["SimResult", "simulate"]


@dataclass(frozen=True, slots=True)
class SimResult:
    """The outcome of one simulated collective call (times in seconds)."""

    total_s: float
    """Completion time of the call: the latest rank's finish."""
    finish_s: tuple[float, ...]
    """Completion time of every rank's last operation (0 for a rank with none)."""
    nmessages: int
    """Number of messages sent."""
    timeline: Timeline | None = None
    """Every message and resource occupancy, with ``record=True``; else None."""
    nevents: int = 0
    """Number of hop events: every hop of every message after its first."""


def simulate(
    schedule: Schedule,
    grid: Grid,
    *,
    record: bool = False,
    load: LoadTrace | None = None,
    offset: float = 0.0,
) -> SimResult:
    """Execute ``schedule`` on ``grid`` in virtual time.

    Parameters
    ----------
    schedule : Schedule
        The programs of one collective call, one per rank of ``grid``.
    grid : Grid
        The network: P-LogP parameters and the shared resources of every path.
    record : bool
        Keep a :class:`~gridcoll.simulate.timeline.Timeline` of every message and
        resource occupancy (slower, and memory proportional to the messages).
    load : LoadTrace, optional
        Cross traffic on the wide-area links (:mod:`gridcoll.network.load`, seed 001
        sec. 3): a FIFO link serves a message at ``1 - f(t)`` of its speed, a fair
        link gives the application's flows ``1 - f(t)`` of its capacity. A loaded run
        always uses the event loop.
    offset : float
        Trace time at which the call starts (its time 0 is ``offset`` in the trace).

    Returns
    -------
    SimResult

    Raises
    ------
    ScheduleError
        If the schedule does not fit the grid, names a bad peer or segment, a receive
        expects other segments than the matched send carries, the programs deadlock
        (the error names a stuck rank), or a message is never received.

    Notes
    -----
    The timing rules are in this module's docstring; they realise seed 000's
    ``s(m) = g(m)``, ``r(m) = L + g(m)``, ``s_w(m) = max(g_l(m), os_w(m))`` and
    ``r_w(m) = L_w + g_w(m)`` and serialise messages that share a NIC, a gateway or a
    FIFO wide-area link; a fair link (``Link.sharing == "fair"``) divides its capacity
    max-min fairly among the messages crossing it (module docstring). The event loop
    costs O(E log E) for E hop events; a tree broadcast without ``record`` is replayed
    without the heap in O(E) (module notes), over a million messages a second
    (``bench/simulator_speed.py``).

    References
    ----------
    Kielmann et al., *Network performance-aware collective communication for
    clustered wide area systems* (seed 000), sec. 2.1.

    Examples
    --------
    >>> from gridcoll.network import magpie
    >>> from gridcoll.algorithms.flat_tree import flat
    >>> result = simulate(flat(magpie(2, 1), 1000), magpie(2, 1))
    >>> round(result.total_s, 6)  # L_w + g_w(1000) = 10 ms + 8 us + 1 ms
    0.011008
    """
    if schedule.nranks != grid.nranks:
        raise ScheduleError(
            f"schedule {schedule.algorithm!r} has {schedule.nranks} ranks but grid "
            f"{grid.name!r} has {grid.nranks}"
        )
    try:
        message_bytes = schedule.message_bytes
    except IndexError as err:
        raise ScheduleError(
            f"schedule {schedule.algorithm!r} names a segment it does not define"
        ) from err
    profiles: dict = {}
    if load is not None and load.loads:
        load.check(grid)
        for name in sorted(load.links):
            profiles[name] = tuple((b - offset, f) for b, f in load.profile(name))
    if not record and not profiles:
        streams = replay_streams(schedule, grid, message_bytes)
        if streams is not None:
            finish, nmessages, nevents = streams
            return SimResult(max(finish, default=0.0), finish, nmessages, None, nevents)
    replay = (_FairReplay if grid.fair_links else _Replay)(
        schedule, grid, message_bytes, record, profiles
    )
    if not record:
        return replay.run()
    # A recorded run keeps every message alive; pausing the cyclic garbage collector
    # saves it rescanning them again and again (about 30% of the time on large runs).
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        return replay.run()
    finally:
        if was_enabled:
            gc.enable()


# Layout of a message in flight: a plain list, indexed by these constants (a list is
# the cheapest mutable record to create; a message is also its own hop event, since it
# has at most one pending at a time).
_HOP = 0  # index of the next hop to enter
_TAIL = 1  # e_{i-1}: when the tail left the previous hop
_RES = 2  # resource ids of the path
_OCC = 3  # occupancy of each hop
_L = 4  # end-to-end latency of the route
_OR = 5  # receive overhead or(m)
_DST = 6
_CHAN = 7  # the channel deque src -> dst
_SEGS = 8
_ARRIVAL = 9  # None until the last hop is granted
_SRC = 10
_NBYTES = 11
_START = 12  # send_start
_DONE = 13  # recv_done
_INDEX = 14  # message number (send order)
_FAIR = 15  # None, or (first fair hop, fair mask, ((link id, s per byte), ...), bytes)


class _Replay:
    """One run of :func:`simulate`: per-rank state, resources, channels, the heap."""

    def __init__(
        self,
        schedule: Schedule,
        grid: Grid,
        message_bytes: dict,
        record: bool,
        profiles: dict | None = None,
    ):
        self.schedule = schedule
        self.profiles = profiles or {}  # link name -> load profile (simulation time)
        self.loaded: dict[int, tuple] = {}  # FIFO link id -> its load profile
        self.grid = grid
        self.message_bytes = message_bytes
        self.record = record
        # Every program as a tuple of ops (a PeriodicProgram makes its ops once, here).
        self.programs = [
            p.ops() if isinstance(p, PeriodicProgram) else p for p in schedule.programs
        ]
        P = schedule.nranks
        self.now = [0.0] * P  # when the rank's previous op completed (or it reached a Recv)
        self.pc = [0] * P  # the rank's next op
        self.waiting: list[deque | None] = [None] * P  # channel a blocked rank waits on
        self.free: list[float] = []  # resource id -> when it is next free
        self.resource_ids: dict[tuple, int] = {}
        self.resources: list[tuple] = []
        self.channels: dict[tuple[int, int], deque] = {}  # (src, dst) -> sent, not taken
        self.pairs: dict[tuple[int, int], tuple] = {}  # (a, b) -> (ids, gaps, plogp, chan)
        self.gaps: dict[tuple[int, float], float] = {}  # (id(g_fn), m) -> g(m)
        self.info: dict[tuple[int, int, int], tuple] = {}  # (a, b, m) -> per-send constants
        self.nmessages = 0
        self.nevents = 0
        self.messages: list[list] = []  # only with record
        self.intervals: list[tuple[int, float, float, int]] = []  # only with record
        self.env = Environment()

    # -- memoised constants ------------------------------------------------------------
    def channel(self, src: int, dst: int, op_index: int) -> deque:
        """The FIFO of messages ``src -> dst`` sent and not yet received."""
        chan = self.channels.get((src, dst))
        if chan is None:
            P = self.schedule.nranks
            if not isinstance(src, int) or not 0 <= src < P or src == dst:
                who, peer = (dst, src)
                raise ScheduleError(
                    f"rank {who} op {op_index} names peer {peer!r}, not another rank", rank=who
                )
            chan = self.channels[(src, dst)] = deque()
        return chan

    def send_info(self, a: int, b: int, m: int, op_index: int) -> tuple:
        """``(resource ids, occupancies, os, L, or, channel, fair)`` of an m-byte send
        a -> b; ``fair`` is None here (:class:`_FairReplay` fills it)."""
        pair = self.pairs.get((a, b))
        if pair is None:
            P = self.schedule.nranks
            if not isinstance(b, int) or not 0 <= b < P or b == a:
                raise ScheduleError(
                    f"rank {a} op {op_index} names peer {b!r}, not another rank", rank=a
                )
            path = self.grid.path(a, b)
            ids = []
            for resource in path:
                rid = self.resource_ids.get(resource)
                if rid is None:
                    rid = self.resource_ids[resource] = len(self.resources)
                    self.resources.append(resource)
                    self.free.append(0.0)
                    kind, key = resource
                    if kind == "link" and key in self.profiles and not self.grid.is_fair(resource):
                        self.loaded[rid] = self.profiles[key]
                ids.append(rid)
            gaps = tuple(resource_gap(self.grid, r) for r in path)
            pair = (tuple(ids), gaps, self.grid.plogp(a, b), self.channel(a, b, op_index))
            self.pairs[(a, b)] = pair
        ids, gap_fns, p, chan = pair
        info = (ids, occupancies(self.gaps, gap_fns, m), p.os(m), p.L, p.or_(m), chan, None)
        self.info[(a, b, m)] = info
        return info

    # -- the run -----------------------------------------------------------------------
    def run(self) -> SimResult:
        queue = self.env._queue
        eid = self.env._eid
        free, waiting, record = self.free, self.waiting, self.record
        intervals, loaded = self.intervals, self.loaded
        advance = self.advance
        for rank in range(self.schedule.nranks):  # start-up: every rank at t = 0
            advance(rank)
        # The event loop, inlined from Environment.step() for speed: the events are
        # messages whose head reaches their next hop at the event's time h_{i-1}.
        t = 0.0
        while queue:
            t, _, _, msg = heappop(queue)
            i = msg[_HOP]
            res = msg[_RES]
            rid = res[i]
            f = free[rid]
            h = t if t > f else f
            end = h + msg[_OCC][i]
            if loaded and rid in loaded:  # seed 001 sec. 3: served at 1 - f(t)
                end = occupancy_end(msg[_OCC][i], h, loaded[rid])
            free[rid] = end
            if record:
                intervals.append((rid, h, end, msg[_INDEX]))
            tail = msg[_TAIL]
            if end > tail:
                tail = end
            i += 1
            if i < len(res):
                msg[_HOP] = i
                msg[_TAIL] = tail
                heappush(queue, (h, NORMAL, next(eid), msg))
                continue
            msg[_ARRIVAL] = tail + msg[_L]
            dst = msg[_DST]
            chan = msg[_CHAN]
            if waiting[dst] is chan and chan[0] is msg:
                waiting[dst] = None
                advance(dst)
        self.env._now = t
        self.check_finished()
        finish = tuple(self.now)
        timeline = self.timeline() if record else None
        return SimResult(max(finish, default=0.0), finish, self.nmessages, timeline, self.nevents)

    def advance(self, r: int) -> None:
        """Run rank r's program from its current op until it ends or must wait."""
        program = self.programs[r]
        n = len(program)
        i = self.pc[r]
        t = self.now[r]
        # Locals inlined for speed: this loop runs once per operation.
        message_bytes, info_cache, free = self.message_bytes, self.info, self.free
        queue, eid, record = self.env._queue, self.env._eid, self.record
        while i < n:
            op = program[i]
            peer = op.peer
            segs = op.segments
            if op.__class__ is Send:
                m = message_bytes[segs]
                info = info_cache.get((r, peer, m))
                if info is None:
                    info = self.send_info(r, peer, m, i)
                res, occs, os_, L, or_, chan, fair = info
                # Hop 0, inlined: nic_out(r) carries only r's messages, which reach it in
                # program order at non-decreasing times, so no event is needed.
                rid = res[0]
                f = free[rid]
                h = t if t > f else f
                tail = h + occs[0]
                free[rid] = tail
                index = self.nmessages
                self.nmessages = index + 1
                self.nevents += len(res) - 1
                msg = [
                    1,
                    tail,
                    res,
                    occs,
                    L,
                    or_,
                    peer,
                    chan,
                    segs,
                    None,
                    r,
                    m,
                    t,
                    0.0,
                    index,
                    fair,
                ]
                chan.append(msg)
                if record:
                    self.intervals.append((rid, h, tail, index))
                    self.messages.append(msg)
                heappush(queue, (h, NORMAL, next(eid), msg))
                t += os_
            elif op.__class__ is Recv:
                chan = self.channels.get((peer, r))
                if chan is None:
                    chan = self.channel(peer, r, i)
                if not chan or chan[0][_ARRIVAL] is None:
                    self.waiting[r] = chan
                    break
                msg = chan.popleft()
                if msg[_SEGS] != segs:
                    raise ScheduleError(
                        f"rank {r} op {i} expects segments {segs} from rank {peer}, which "
                        f"sends {msg[_SEGS]}",
                        rank=r,
                        segment=(segs or msg[_SEGS] or (None,))[0],
                    )
                done = t + msg[_OR]
                arrival = msg[_ARRIVAL]
                if arrival > done:
                    done = arrival
                if record:
                    msg[_DONE] = done
                t = done
            else:
                raise ScheduleError(f"rank {r} op {i} is {op!r}, not a Send or Recv", rank=r)
            i += 1
        self.now[r] = t
        self.pc[r] = i

    # -- the end -----------------------------------------------------------------------
    def check_finished(self) -> None:
        """Raise ScheduleError if a rank is stuck or a message was never received."""
        programs = self.programs
        stuck = [r for r, program in enumerate(programs) if self.pc[r] < len(program)]
        if stuck:
            r = stuck[0]
            op = programs[r][self.pc[r]]
            raise ScheduleError(
                f"deadlock: rank {r} waits forever at op {self.pc[r]} ({op!r}) for a "
                f"message from rank {op.peer} ({len(stuck)} rank(s) stuck: "
                f"{stuck[:8]}{'...' if len(stuck) > 8 else ''})",
                rank=r,
            )
        for (src, dst), chan in sorted(self.channels.items()):
            if chan:
                raise ScheduleError(
                    f"rank {dst} never receives {len(chan)} message(s) rank {src} sends it",
                    rank=dst,
                )

    def timeline(self) -> Timeline:
        resources = self.resources
        messages = tuple(
            MessageRecord(
                msg[_SRC],
                msg[_DST],
                msg[_SEGS],
                msg[_NBYTES],
                msg[_START],
                msg[_ARRIVAL],
                msg[_DONE],
            )
            for msg in self.messages
        )
        intervals = tuple(
            Interval(resources[rid], start, end, index) for rid, start, end, index in self.intervals
        )
        return Timeline(messages, intervals)


_RESHARE = 2
"""Priority of the fair links' rate recomputation: after every other event at the same
time, so flows that start or end together are shared out once."""


class _Reshare:
    """The heap entry that recomputes the fair rates (one pending at a time)."""

    __slots__ = ()


_RESHARE_EVENT = _Reshare()


class _FairReplay(_Replay):
    """:class:`_Replay` on a grid with fair links (module docstring, "Fair links").

    FIFO hops are granted exactly as in :class:`_Replay`. A message whose path crosses
    fair links is one flow of :class:`~gridcoll.simulate.fairshare.FairShare` over all
    of them; its head passes a fair link at once, and it arrives ``L`` after both its
    FIFO hops and its flow are done. The heap also holds :data:`_RESHARE` entries and
    the end of the next flow (stale ends are skipped: ``self.token`` names the live one).
    """

    def __init__(
        self,
        schedule: Schedule,
        grid: Grid,
        message_bytes: dict,
        record: bool,
        profiles: dict | None = None,
    ):
        super().__init__(schedule, grid, message_bytes, record, profiles)
        self.share = FairShare()
        self.fair_loaded: dict[int, tuple] = {}  # fair link id -> its load profile
        self.token: object | None = None  # the live flow-end entry
        self.reshare_due = False
        self.gates: dict[tuple[int, int], deque] = {}  # pair with a flow -> messages held
        self.admitted: set[int] = set()
        self.flowing: dict[int, list] = {}  # message index -> message, while its flow runs
        self.flow_end: dict[int, float] = {}
        self.parts: dict[int, int] = {}  # message index -> parts (hops, flow) still to end
        self.open: dict[int, list[int]] = {}  # message index -> its fair intervals (record)

    def send_info(self, a: int, b: int, m: int, op_index: int) -> tuple:
        ids, occs, os_, L, or_, chan, _ = super().send_info(a, b, m, op_index)
        mask = tuple(self.grid.is_fair(self.resources[rid]) for rid in ids)
        for rid, f in zip(ids, mask, strict=True):
            name = self.resources[rid][1]
            if f and name in self.profiles:
                self.fair_loaded[rid] = self.profiles[name]
        fair = None
        if any(mask):
            size = float(max(m, 1))
            costs = tuple(
                (rid, occ / size) for rid, occ, f in zip(ids, occs, mask, strict=True) if f
            )
            fair = (mask.index(True), mask, costs, size)
        info = self.info[(a, b, m)] = (ids, occs, os_, L, or_, chan, fair)
        return info

    def run(self) -> SimResult:
        queue = self.env._queue
        for rank in range(self.schedule.nranks):  # start-up: every rank at t = 0
            self.advance(rank)
        # A fair link's capacity changes at every step of its load: re-share there.
        steps = {b for name in self.grid.fair_links for b, _ in self.profiles.get(name, ())}
        for b in sorted(steps):
            if b > 0:
                heappush(queue, (b, _RESHARE, next(self.env._eid), _RESHARE_EVENT))
        t = 0.0
        while queue:
            t, _, _, event = heappop(queue)
            if event.__class__ is list:
                self.hop(t, event)
            elif event is _RESHARE_EVENT:
                self.reshare(t)
            elif event is self.token:
                self.flows_end(t)
        self.env._now = t
        self.check_finished()
        finish = tuple(self.now)
        timeline = self.timeline() if self.record else None
        return SimResult(max(finish, default=0.0), finish, self.nmessages, timeline, self.nevents)

    def hop(self, t: float, msg: list) -> None:
        """The head of ``msg`` reaches its next hop at ``t``."""
        i = msg[_HOP]
        res = msg[_RES]
        fair = msg[_FAIR]
        tail = msg[_TAIL]
        if fair is not None and fair[1][i]:
            if i == fair[0] and msg[_INDEX] not in self.admitted:
                pair = (msg[_SRC], msg[_DST])
                held = self.gates.get(pair)
                if held is not None:  # the pair's previous message is still flowing
                    held.append(msg)
                    return
                self.gates[pair] = deque()
                self.admit(t, msg)
            h = t  # a fair link never holds the head back
        else:
            rid = res[i]
            f = self.free[rid]
            h = t if t > f else f
            end = h + msg[_OCC][i]
            if rid in self.loaded:
                end = occupancy_end(msg[_OCC][i], h, self.loaded[rid])
            self.free[rid] = end
            if self.record:
                self.intervals.append((rid, h, end, msg[_INDEX]))
            if end > tail:
                tail = end
        msg[_TAIL] = tail
        i += 1
        if i < len(res):
            msg[_HOP] = i
            heappush(self.env._queue, (h, NORMAL, next(self.env._eid), msg))
        else:
            self.part_done(msg)

    def admit(self, t: float, msg: list) -> None:
        """Start the flow of ``msg`` over its fair links at ``t``."""
        _, _, costs, size = msg[_FAIR]
        index = msg[_INDEX]
        self.admitted.add(index)
        self.flowing[index] = msg
        self.share.start(t, index, costs, size)
        if self.record:
            self.open[index] = [len(self.intervals) + k for k in range(len(costs))]
            self.intervals.extend((rid, t, t, index) for rid, _ in costs)
        self.due(t)

    def due(self, t: float) -> None:
        """Recompute the rates at ``t``, once, after the other events at ``t``."""
        if not self.reshare_due:
            self.reshare_due = True
            heappush(self.env._queue, (t, _RESHARE, next(self.env._eid), _RESHARE_EVENT))

    def reshare(self, t: float) -> None:
        self.reshare_due = False
        self.share.advance(t)
        if self.fair_loaded:  # the load holds f(t) of the link (network.load)
            self.share.capacity = {
                rid: 1.0 - fraction_in(profile, t) for rid, profile in self.fair_loaded.items()
            }
        first = self.share.reshare()
        self.token = None
        if first < float("inf"):
            self.token = object()
            heappush(self.env._queue, (first, NORMAL, next(self.env._eid), self.token))

    def flows_end(self, t: float) -> None:
        """The next flows end at ``t``: each releases its pair's next message."""
        self.token = None
        for index in self.share.pop_finished(t):
            msg = self.flowing.pop(index)
            self.flow_end[index] = t
            if self.record:
                for pos in self.open.pop(index):
                    rid, start, _, _ = self.intervals[pos]
                    self.intervals[pos] = (rid, start, t, index)
            pair = (msg[_SRC], msg[_DST])
            held = self.gates[pair]
            if held:
                nxt = held.popleft()
                self.admit(t, nxt)
                heappush(self.env._queue, (t, NORMAL, next(self.env._eid), nxt))
            else:
                del self.gates[pair]
            self.part_done(msg)
        self.due(t)

    def part_done(self, msg: list) -> None:
        """One part of ``msg`` (its hops, or its flow) is done; deliver it after both."""
        if msg[_FAIR] is not None:
            index = msg[_INDEX]
            left = self.parts.pop(index, 2) - 1
            if left:
                self.parts[index] = left
                return
            end = self.flow_end.pop(index)
            msg[_ARRIVAL] = (end if end > msg[_TAIL] else msg[_TAIL]) + msg[_L]
        else:
            msg[_ARRIVAL] = msg[_TAIL] + msg[_L]
        dst = msg[_DST]
        chan = msg[_CHAN]
        if self.waiting[dst] is chan and chan[0] is msg:
            self.waiting[dst] = None
            self.advance(dst)
