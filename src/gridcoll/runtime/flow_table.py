"""Fair links on the emulated WAN: the flows in progress, shared by every rank.

Theory of operation
-------------------
The simulator shares a fair link (``Link.sharing == "fair"``) max-min fairly among the
messages crossing it at once (:mod:`gridcoll.simulate.fairshare`, with the rules of
:mod:`gridcoll.simulate.executor`, "Fair links"). The emulator applies the same rules
to real messages:

* a message whose route crosses fair links is one *flow* over all of them; on fair
  link ``l`` an m-byte flow costs ``c_l = g_l(m) / m`` seconds per byte, and the flows
  in progress run at their max-min fair rates (progressive filling,
  :func:`~gridcoll.simulate.fairshare.max_min_rates`), recomputed whenever a flow
  starts or ends and at every step of a load trace (a load ``f`` leaves ``1 - f`` of
  the link: seed 001, sec. 3);
* the flow starts when the message's head reaches its first fair link, and the
  message is delivered at ``max(e_fifo, F) + L``, ``F`` the flow's end and ``e_fifo``
  the tail of its FIFO hops;
* the messages of one ordered rank pair keep their order, as on one connection: a
  pair's next flow starts only when its previous flow has ended.

Unlike a FIFO link, where the sender fixes the delivery time when it reserves the
route, a flow's end moves whenever another flow starts or ends on its links. So the
sender only *registers* the flow in a table in shared memory (beside the FIFO links'
free-times, in the same file: :mod:`gridcoll.runtime.emulation`) and sends the
flow's *stamp* (its table, slot and serial number, as a negative float) in place of
the delivery time. The table is a fluid simulation advanced lazily, under its record
lock, by whichever process touches it (a sender registering, a receiver asking):

``advance(now)``
    processes, in time order, every event up to ``now``: flows ending (their end time
    is kept for the receiver), flows starting (a pair's next flow, a flow whose head
    reaches its first fair link later), load steps; the rates are re-shared after each.
``delivery(stamp, now)``
    advances to ``now``; if the flow has ended, returns its delivery time, final.
    Otherwise it runs the same fluid forward, on a copy, until the flow ends: that
    *projected* delivery time is exact unless a new flow is registered meanwhile, so
    it comes with the table's *generation*, which every registration increments.

Every event of the future is known but new flows, so a flow ending early, a pair's
next flow starting or a load step never leave a receiver oversleeping. A new flow
usually delays the others, and a receiver that wakes at its projection to find its
flow still running just asks again; on routes of several fair links, though, a new
flow that slows a competitor elsewhere can speed a flow up (max-min is not monotone).
So the receiver (:meth:`gridcoll.runtime.emulation.Emulator.wait`) also looks at the
generation (one shared integer, read without the lock) after half the time left to
its projection, and asks again if it changed. The receiver frees the flow's slot once
it has its final delivery time. A table holds
:data:`MAX_FLOWS` flows; when full, the flow that ended longest ago is reclaimed (its
receiver, if it ever asks, gets a clear error).

Costs. Registering only writes a slot under the lock (the next advance, which starts
at the table's ``now``, admits the flow at its ``start_at``), and a receiver first
sleeps, without the lock, until its flow could end at the earliest
(:meth:`FlowTable.earliest`: alone at its links' full speed), so an uncontended message
costs one short locked registration and one locked question. Flows couple only through
the links they share, so the emulator keeps one table, with its own lock, per *sharing
domain*: the fair links that routes join (on ``magpie`` presets, whose cluster pairs
have links of their own, every link is its own domain; on ``teragrid``, whose routes
cross an uplink and a downlink, all are one). With many more ranks than cores, a lock
holder preempted by the scheduler still makes the others of its domain wait: a
pipeline of small segments pays for it (see the README, "Fair links").

Layout (8-byte fields, native order): a head ``now, generation, next serial, live
count, allocation cursor`` and the list of live slots, then :data:`MAX_FLOWS` slots of
``state, serial, src, dst, start_at, size, remaining, end_at, tail, latency, sent,
nlinks, links[MAX_FAIR_HOPS], costs[MAX_FAIR_HOPS]``.
"""

from __future__ import annotations

import array
import bisect
import fcntl as _fcntl
import math
from collections import deque
from collections.abc import Mapping, Sequence

from gridcoll.errors import GridcollError
from gridcoll.network.load import fraction_in
from gridcoll.simulate.fairshare import FairShare, Flow

__all__ = [
    "MAX_FAIR_HOPS",
    "MAX_FLOWS",
    "FlowTable",
    "is_flow_stamp",
    "stamp_table",
    "table_bytes",
]

MAX_FLOWS = 1024
"""Flows a table holds at once (in progress, waiting, or ended and not yet received)."""

MAX_FAIR_HOPS = 8
"""Fair links one route may cross."""

_FREE, _WAITING, _ACTIVE, _DONE = 0, 1, 2, 3
# slot fields
_STATE, _SERIAL, _SRC, _DST, _START, _SIZE, _REMAINING, _END, _TAIL, _LATENCY, _SENT = range(11)
_NLINKS = 11
_LINKS = 12
_COSTS = _LINKS + MAX_FAIR_HOPS
_NFIELDS = _COSTS + MAX_FAIR_HOPS
# head fields
_NOW, _GEN, _NEXT_SERIAL, _NLIVE, _CURSOR = range(5)
_LIVE = 5
_HEAD_FIELDS = _LIVE + MAX_FLOWS


def table_bytes() -> int:
    """Bytes of a flow table in the link-state file."""
    return 8 * (_HEAD_FIELDS + MAX_FLOWS * _NFIELDS)


def is_flow_stamp(stamp: float) -> bool:
    """True when a header's delivery field names a flow (negative), not a time."""
    return stamp < 0


def stamp_table(stamp: float, count: int) -> int:
    """Which of ``count`` tables a flow stamp belongs to."""
    return (int(-stamp) - 1) % count


class FlowTable:
    """The flow table at ``offset`` of an open link-state file (module docstring).

    Parameters
    ----------
    fd, mm
        The link-state file's descriptor (for the record lock) and its ``mmap``.
    offset : int
        Where the table starts (a multiple of 8).
    profiles : mapping link id -> profile, optional
        The load on fair links, in ``time.monotonic`` seconds
        (:meth:`~gridcoll.network.load.LoadTrace.profile`, shifted); every process of a
        launch passes the same.
    index, count : int
        This table is number ``index`` of the file's ``count`` (one per sharing
        domain); its stamps say so (:func:`stamp_table`).
    """

    def __init__(
        self,
        fd: int,
        mm,
        offset: int,
        profiles: Mapping[int, Sequence] | None = None,
        *,
        index: int = 0,
        count: int = 1,
    ):
        self._fd, self._offset = fd, offset
        self.index, self.count = index, count
        end = offset + table_bytes()
        self._head_q = memoryview(mm)[offset : offset + 8 * _HEAD_FIELDS].cast("q")
        self._head_d = memoryview(mm)[offset : offset + 8 * _HEAD_FIELDS].cast("d")
        self._q = memoryview(mm)[offset + 8 * _HEAD_FIELDS : end].cast("q")
        self._d = memoryview(mm)[offset + 8 * _HEAD_FIELDS : end].cast("d")
        self._share = FairShare()  # its allocation cache is kept across calls
        self.set_load(profiles or {})

    def set_load(self, profiles: Mapping[int, Sequence]) -> None:
        """The load on fair links (constructor's ``profiles``)."""
        self._profiles = {k: tuple(p) for k, p in profiles.items() if p}
        self._steps = sorted({b for p in self._profiles.values() for b, _ in p})

    def close(self) -> None:
        for view in (self._head_q, self._head_d, self._q, self._d):
            view.release()

    # -- the two operations -----------------------------------------------------------

    def start(
        self,
        pair: tuple[int, int],
        costs: tuple[tuple[int, float], ...],
        size: float,
        *,
        start_at: float,
        tail: float,
        latency: float,
        sent: float,
        now: float,
    ) -> float:
        """Register a flow of ``size`` bytes of ``pair`` whose head reaches its first
        fair link at ``start_at``; return its stamp (for the message header)."""
        if len(costs) > MAX_FAIR_HOPS:
            raise GridcollError(
                f"a route crosses {len(costs)} fair links; the emulator handles {MAX_FAIR_HOPS}"
            )
        with self._locked():  # short: the next advance, from the table's now, admits it
            slot = self._allocate(now)
            live = self._live()
            t = self._head_d[_NOW]
            serial = self._head_q[_NEXT_SERIAL]
            self._head_q[_NEXT_SERIAL] = serial + 1
            q, d, base = self._q, self._d, slot * _NFIELDS
            q[base + _STATE], q[base + _SERIAL] = _WAITING, serial
            q[base + _SRC], q[base + _DST] = pair
            d[base + _START] = max(start_at, t)
            d[base + _SIZE] = d[base + _REMAINING] = size
            d[base + _END] = math.inf
            d[base + _TAIL], d[base + _LATENCY], d[base + _SENT] = tail, latency, sent
            q[base + _NLINKS] = len(costs)
            for i, (link, c) in enumerate(costs):
                q[base + _LINKS + i], d[base + _COSTS + i] = link, c
            live.append(slot)
            self._set_live(live)
            self._head_q[_GEN] += 1
            return self._stamp(slot, serial)

    def earliest(self, stamp: float) -> float:
        """A lower bound of the delivery time of flow ``stamp``, read without the lock
        (the sender wrote the slot before it sent the message): the flow alone at the
        full speed of its links, ``max(tail, start_at + max_l g_l(m)) + L``."""
        slot, _ = self._unstamp(stamp)
        q, d, base = self._q, self._d, slot * _NFIELDS
        n = q[base + _NLINKS]
        worst = max((d[base + _COSTS + i] for i in range(n)), default=0.0)
        alone = d[base + _START] + d[base + _SIZE] * worst
        return max(d[base + _TAIL], alone) + d[base + _LATENCY]

    def delivery(self, stamp: float, now: float) -> tuple[float, int | None, float]:
        """When the message of flow ``stamp`` is delivered, and when it was sent:
        ``(time, None, sent)`` once its flow has ended (the slot is then freed: that
        answer is given once), else ``(projection, generation, sent)``, the projection
        exact while :meth:`generation` stays the same."""
        slot, serial = self._unstamp(stamp)
        base = slot * _NFIELDS
        q, d = self._q, self._d
        with self._locked():
            if q[base + _SERIAL] != serial or q[base + _STATE] == _FREE:
                raise GridcollError(
                    f"emulated flow {serial} is gone from the flow table (more than "
                    f"{MAX_FLOWS} flows were in flight or unreceived)"
                )
            live = self._advance(now)
            tail, latency, sent = d[base + _TAIL], d[base + _LATENCY], d[base + _SENT]
            if q[base + _STATE] == _DONE:
                q[base + _STATE] = _FREE
                return max(tail, d[base + _END]) + latency, None, sent
            _, ended = self._fluid(live, self._head_d[_NOW], math.inf, slot)
            return max(tail, ended[slot]) + latency, self._head_q[_GEN], sent

    def _stamp(self, slot: int, serial: int) -> float:
        return -float((serial * MAX_FLOWS + slot) * self.count + self.index + 1)

    def _unstamp(self, stamp: float) -> tuple[int, int]:
        ref, index = divmod(int(-stamp) - 1, self.count)
        if index != self.index:
            raise GridcollError(f"flow stamp {stamp} belongs to another table than {self.index}")
        return ref % MAX_FLOWS, ref // MAX_FLOWS

    def generation(self) -> int:
        """How many flows were registered so far (read without the lock)."""
        return self._head_q[_GEN]

    # -- the fluid --------------------------------------------------------------------

    def _advance(self, now: float) -> list[int]:
        """Process every event up to ``now`` and store the result; the live slots."""
        live = self._live()
        t = self._head_d[_NOW]
        if now <= t:
            return live
        share, ended = self._fluid(live, t, now)
        q, d = self._q, self._d
        for slot, end in ended.items():
            base = slot * _NFIELDS
            q[base + _STATE], d[base + _END] = _DONE, end
        for slot, flow in share.flows.items():
            base = slot * _NFIELDS
            q[base + _STATE], d[base + _REMAINING] = _ACTIVE, flow.remaining
        if ended:
            live = [slot for slot in live if slot not in ended]
            self._set_live(live)
        self._head_d[_NOW] = now
        return live

    def _fluid(
        self, live: list[int], t: float, until: float, target: int | None = None
    ) -> tuple[FairShare, dict[int, float]]:
        """Run the live flows from ``t`` to ``until`` (or until ``target`` ends): the
        share (the flows still running, their remaining bytes as of the end) and the end
        time of every flow that ended. ``live`` is in registration order, so each pair's
        waiting flows queue in their send order."""
        q, d = self._q, self._d
        share = self._share
        share.flows.clear()
        share.now = t
        queues: dict[tuple[int, int], deque[int]] = {}  # idle or busy pair -> waiting
        busy: dict[int, tuple[int, int]] = {}  # running flow -> its pair
        for slot in live:
            base = slot * _NFIELDS
            pair = (q[base + _SRC], q[base + _DST])
            if q[base + _STATE] == _ACTIVE:
                share.flows[slot] = Flow(self._costs(slot), d[base + _SIZE], d[base + _REMAINING])
                busy[slot] = pair
            else:
                queues.setdefault(pair, deque()).append(slot)
        running = set(busy.values())
        ended: dict[int, float] = {}
        while target is None or target not in ended:
            # a pair's first waiting flow starts once the pair is idle and its head is here
            next_start = math.inf
            for pair, queue in queues.items():
                if pair in running or not queue:
                    continue
                slot = queue[0]
                base = slot * _NFIELDS
                if d[base + _START] <= t:
                    queue.popleft()
                    share.flows[slot] = Flow(self._costs(slot), d[base + _SIZE], d[base + _SIZE])
                    busy[slot] = pair
                    running.add(pair)
                elif d[base + _START] < next_start:
                    next_start = d[base + _START]
            if self._profiles:
                share.capacity = {
                    link: 1.0 - fraction_in(p, t) for link, p in self._profiles.items()
                }
            first_end = share.reshare()
            step = bisect.bisect_right(self._steps, t)
            next_step = self._steps[step] if step < len(self._steps) else math.inf
            e = min(first_end, next_start, next_step)
            if e > until:
                share.advance(until)
                break
            if e == math.inf:
                raise GridcollError(f"emulated flow in slot {target} never ends")
            t = max(e, t)
            for slot in share.pop_finished(t):
                ended[slot] = t
                running.discard(busy.pop(slot))
        return share, ended

    # -- the table --------------------------------------------------------------------

    def _costs(self, slot: int) -> tuple[tuple[int, float], ...]:
        q, d, base = self._q, self._d, slot * _NFIELDS
        return tuple((q[base + _LINKS + i], d[base + _COSTS + i]) for i in range(q[base + _NLINKS]))

    def _live(self) -> list[int]:
        n = self._head_q[_NLIVE]
        return list(self._head_q[_LIVE : _LIVE + n])

    def _set_live(self, live: list[int]) -> None:
        self._head_q[_NLIVE] = len(live)
        self._head_q[_LIVE : _LIVE + len(live)] = memoryview(array.array("q", live))

    def _allocate(self, now: float) -> int:
        q, cursor = self._q, self._head_q[_CURSOR]
        for k in range(MAX_FLOWS):
            slot = (cursor + k) % MAX_FLOWS
            if q[slot * _NFIELDS + _STATE] == _FREE:
                self._head_q[_CURSOR] = (slot + 1) % MAX_FLOWS
                return slot
        self._advance(now)  # flows that ended unreceived are reclaimed, oldest first
        done = [s for s in range(MAX_FLOWS) if q[s * _NFIELDS + _STATE] == _DONE]
        if not done:
            raise GridcollError(f"more than {MAX_FLOWS} emulated flows are in flight on fair links")
        return min(done, key=lambda s: self._d[s * _NFIELDS + _END])

    def _locked(self):
        return _RecordLock(self._fd, self._offset)


class _RecordLock:
    """The table's POSIX record lock (on its first 8 bytes), as a context manager."""

    __slots__ = ("fd", "offset")

    def __init__(self, fd: int, offset: int):
        self.fd, self.offset = fd, offset

    def __enter__(self) -> None:
        _fcntl.lockf(self.fd, _fcntl.LOCK_EX, 8, self.offset)

    def __exit__(self, *exc) -> None:
        _fcntl.lockf(self.fd, _fcntl.LOCK_UN, 8, self.offset)
