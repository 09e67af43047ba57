"""Run one rank's program of a schedule over MPI (the third executor).

Theory of operation
-------------------
Rule 1: the program is the semantics (:mod:`gridcoll.schedule.ir`). A rank runs its
operations in order: a :class:`~gridcoll.schedule.ir.Send` starts an ``MPI_Isend`` and
moves on; a :class:`~gridcoll.schedule.ir.Recv` waits until the next message from that
peer has arrived. A rank that receives segment ``s`` and then sends it forwards each
segment as soon as it has arrived, with parallel sends to its children (seed 003's
packet-level transfer).

Rule 2: receives are posted up front, into views of the user's buffer. Every ``Irecv``
of the program is posted before the first operation runs, so data lands where it
belongs as early as MPI can put it there; a message whose segments are contiguous and
in order is received in place (zero-copy), any other into a temporary buffer unpacked
when its ``Recv`` completes. Sends are views of the buffer too.

Rule 3: one tag per call, and MPI's non-overtaking order. All data messages of one
call use one tag (its header messages the next one), so the k-th message from a peer
matches the k-th receive posted for that peer. The caller gives each call its own tag
(:class:`gridcoll.Comm` cycles them with the call number), so a stray message of a
failed call can never be taken for a message of a later one.

Rule 4: every first message between two ranks in a call carries a 128-byte header
(:mod:`gridcoll.runtime.header`): the call's sequence number, collective, root, size,
item size, datatype signature, reduction operation, algorithm and grid, the digest of
the calls without a message before it, the message's byte count and its emulated
delivery time. The receiver checks it against its own call, so mismatched arguments
across ranks raise :class:`~gridcoll.errors.MismatchError` instead of corrupting data.
On the LAN the header is a small message of its own on the header tag (the data stays
zero-copy); an emulated WAN message carries the header in front of its data in one
message (one copy each side, negligible beside the emulated link, and half the messages
of a separate header). A rank that only sends never sees a header, so a rank that finds
a mismatch (or whose reduction operation raised) sends a small *notice* to every other
rank (:mod:`gridcoll.runtime.notices`); a waiting rank looks for one at most every
:data:`PROBE_EVERY` seconds of waiting, with the call's own tags (a message there that
no posted receive takes is a stray of a mismatched call). A failed call leaves the
communicator usable: every rank numbered the call, failed or not, so the next call's
tags and headers agree, and the failed call's strays are drained
(:class:`~gridcoll.runtime.notices.Ledger`). The call that matches costs nothing more.

Rule 5: never spin. The machine may run 16-40 ranks on two cores, and MPICH's blocking
waits poll, so every wait here is ``Request.Test`` with a sleep that starts at
:data:`BACKOFF_START` and doubles up to :data:`BACKOFF_MAX`. When the ranks share one
machine the sleep is on a doorbell (:mod:`gridcoll.runtime.doorbell`): a sender rings
its receiver after each ``Isend`` (and a receiver rings the sender of a large message
when it has taken it), so a sleeping rank wakes as soon as there is something to do.
While it has sends in flight a rank tests them at every wake-up and rings the receiver
of the oldest one (MPICH moves a large message only while both ends are inside MPI);
a rank with nothing in flight lets its backoff grow to :data:`IDLE_NAP_MAX` (back to
:data:`BACKOFF_START` when its doorbell rings), and sleeps until rung while it waits
out an emulated delivery, instead of waking every millisecond (with frugal plans,
``bench/overlap.py``'s 4 MiB ``Iallreduce`` on ``das2:4`` costs its 16 ranks about
1.4 CPU-s instead of 4.8: what a non-blocking call takes from the computation it
overlaps). :func:`wait` (native calls, barriers, the
set-up) first tests and yields the CPU (``sched_yield``) for up to
:data:`YIELD_POLL_S`, so a short request completes without a sleep's latency while any
runnable peer gets the core.

Rule 7: the timeout is per call, counted from the rank's last progress. Progress is a
step of its program (a send started, a receive completed), a send of the call found
complete, or the end of an emulated delay. A rank that waits for a message, or for its
sends to complete, ``timeout`` seconds after its last progress raises
:class:`CollectiveTimeout` naming the peer it waits for; and a send still in flight
``timeout`` seconds after it started raises it too, naming its receiver, even while the
rank progresses otherwise (a rank forwarding a pipeline to a child that died or never
joined learns it then, not at the end of the call).

Rule 6: the WAN emulation (:mod:`gridcoll.runtime.emulation`) sits below all of this:
a cross-cluster send reserves the emulated links and carries ``deliver_at`` in its
inline header (on fair links, the stamp of its flow, whose delivery time the receiver
asks the shared flow table for, as it moves with the other flows: ``Emulator.wait``);
the receive does not complete before then, and the sender's CPU is
busy for the WAN send overhead ``os_w(m)`` of each such message on top of its own work
(a debt paid by sleeping once it exceeds :data:`BUSY_SLACK`, so short messages cost no
sleep each). Without an emulator nothing of this runs.

Timing: given a :class:`WanTimes` (an adaptive broadcast on a real network), the rank
reads the clock once per wide-area message, before its ``Isend`` and when its receive
completes; other messages and calls without it read no clock for this.
"""

from __future__ import annotations

import os as _os
import time as _time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
from mpi4py import MPI

from gridcoll.errors import CollectiveError, CollectiveTimeout, GridcollError, MismatchError
from gridcoll.runtime.doorbell import Doorbells
from gridcoll.runtime.emulation import Emulator
from gridcoll.runtime.header import HEADER_BYTES, CallInfo
from gridcoll.runtime.notices import NOTICE_WAITING, NUDGE_AFTER, Ledger, pack_notice, take_notice
from gridcoll.schedule.ir import CONTROL_BYTES, Recv, Schedule, Send

__all__ = [
    "BACKOFF_MAX",
    "BACKOFF_START",
    "DEFAULT_TIMEOUT",
    "IDLE_NAP_MAX",
    "PROBE_EVERY",
    "YIELD_POLL_S",
    "Program",
    "WanTimes",
    "compile_program",
    "execute",
    "sleep_until",
    "wait",
]

BACKOFF_START = 20e-6
"""First sleep (seconds) of a wait that found its request not yet complete."""
BACKOFF_MAX = 1e-3
"""Longest sleep (seconds) between two tests of a request while the rank has sends in
flight, or has no doorbell to be woken by."""
IDLE_NAP_MAX = 20e-3
"""Longest sleep (seconds) of a rank with a doorbell and no send in flight: a sender
rings it after every ``Isend`` to it, so its backoff may grow past :data:`BACKOFF_MAX`
(Rule 5), and starts again from :data:`BACKOFF_START` when the doorbell rings."""
YIELD_POLL_S = 200e-6
"""How long :func:`wait` tests and yields the CPU before it starts sleeping."""
DEFAULT_TIMEOUT = 60.0
"""Seconds a call may go without progress before the rank gives up (``GRIDCOLL_TIMEOUT``;
Rule 7 of the module notes)."""
BUSY_SLACK = 100e-6
"""The emulated WAN send overhead a sender owes before it sleeps it off (seconds)."""
RING_BACK_BYTES = 8192
"""A receiver rings the sender of a message larger than this when it has taken it
(MPICH sends such messages by rendezvous: the send completes only then)."""
PROBE_EVERY = 5e-3
"""A waiting rank probes for notices and strays at most this often (seconds): a
mismatch is seen within about this much, and a call that does not wait pays nothing."""


# -- waiting without spinning --------------------------------------------------------

_sched_yield = getattr(_os, "sched_yield", lambda: _time.sleep(0))


def wait(
    request: MPI.Request,
    timeout: float | None = None,
    *,
    what: str = "an MPI request",
    status: MPI.Status | None = None,
    poll: float = YIELD_POLL_S,
) -> None:
    """Complete ``request`` without spinning: test it, yielding the CPU in between, for
    ``poll`` seconds, then with sleeps that back off.

    The yielding phase (``os.sched_yield`` between two tests) lets a short request (a
    small native broadcast, a barrier among ranks that are all there) complete without
    a sleep's tens of microseconds, and lets an MPI-driven collective progress at every
    test; it hands the core to any runnable peer, so on an oversubscribed machine it
    does not take time from the ranks that have work. Raises
    :class:`CollectiveTimeout` naming ``what`` after ``timeout`` seconds.
    """
    if request.Test(status):
        return
    now = _time.monotonic()
    deadline = None if timeout is None else now + timeout
    until = now + poll
    while now < until:
        _sched_yield()
        if request.Test(status):
            return
        now = _time.monotonic()
    delay = BACKOFF_START
    while True:
        _time.sleep(delay)
        if request.Test(status):
            return
        delay = min(2 * delay, BACKOFF_MAX)
        if deadline is not None and _time.monotonic() > deadline:
            raise CollectiveTimeout(f"{what} did not complete within {timeout:g} s")


def sleep_until(deadline: float, poke: Callable[[], object] | None = None) -> None:
    """Sleep until ``time.monotonic() >= deadline``, calling ``poke`` (to drive MPI's
    progress) at least every :data:`BACKOFF_MAX` seconds."""
    while True:
        left = deadline - _time.monotonic()
        if left <= 0:
            return
        if poke is not None:
            poke()
        _time.sleep(min(left, BACKOFF_MAX))


# -- compiled programs ----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Step:
    send: bool
    peer: int
    pieces: tuple[tuple[int, int], ...]  # (offset, length) runs, merged; () = control
    nbytes: int  # bytes on the wire
    header: bool  # a separate header message precedes this one (first LAN message)
    wan: bool  # crosses clusters under emulation: header inline, in front of the data
    combine: bool
    index: int  # position in the schedule's program
    incoming_first: bool = False  # a combine computing held = incoming (op) held
    inplace: bool = False  # a receive that lands in the buffer itself (zero-copy)
    snapshot: bool = False  # a send copied at Isend: a later step of this rank rewrites it

    def describe(self) -> str:
        kind = "send to" if self.send else "receive from"
        what = "control message" if not self.pieces else f"{self.nbytes} B"
        return f"op {self.index} ({kind} rank {self.peer}, {what})"


@dataclass(frozen=True, slots=True)
class Program:
    """One rank's program, compiled for execution (see :func:`compile_program`)."""

    rank: int
    steps: tuple[_Step, ...]
    extent: int
    """Bytes of the buffer the program touches (``max(offset + length)``)."""
    call: CallInfo
    emulated: bool


def _pieces(
    schedule: Schedule, segments: tuple[int, ...], layout: Sequence[int] | None = None
) -> tuple[tuple[int, int], ...]:
    runs: list[list[int]] = []
    for s in segments:
        offset, length = schedule.segments[s]
        if layout is not None:
            offset = layout[s]
            if offset < 0:
                raise GridcollError(f"segment {s} has no place in the rank's local layout")
        if runs and runs[-1][0] + runs[-1][1] == offset:
            runs[-1][1] += length
        else:
            runs.append([offset, length])
    return tuple((o, n) for o, n in runs)


def compile_program(
    schedule: Schedule,
    rank: int,
    *,
    emulator: Emulator | None = None,
    call: CallInfo | None = None,
    layout: Sequence[int] | None = None,
) -> Program:
    """Compile ``schedule.programs[rank]``: merged byte ranges, headers, WAN flags.

    ``layout`` (optional) gives every segment's offset in this rank's *local* buffer
    (``-1`` for segments the rank never touches; :mod:`gridcoll.runtime.layout`), so a
    rank holds only the blocks its program touches, packed; default: the data space.

    Hazards (Rule 2 with writes): a rank may rewrite bytes it sent or received earlier
    in its program (recursive doubling sends its vector, then combines into it). Such
    a send is copied when it starts (``snapshot``), so a later write cannot change what
    is in flight; such a receive is not posted into the buffer up front (it could land
    before the earlier step used those bytes) but into a temporary buffer unpacked when
    its ``Recv`` completes. Segments are disjoint byte ranges (every builder cuts them
    so), so the hazards are found on segment indices: O(operations x segments).

    Cost O(operations x segments per message); :class:`gridcoll.Comm` caches the result.
    """
    if not 0 <= rank < schedule.nranks:
        raise GridcollError(f"rank {rank} has no program in a {schedule.nranks}-rank schedule")
    program = schedule.programs[rank]
    last_write = _last_writes(program)
    touched: set[int] = set()
    seen: set[tuple[bool, int]] = set()
    steps = []
    for index, op in enumerate(program):
        if not isinstance(op, Send | Recv):
            raise GridcollError(f"rank {rank} op {index} is not a Send or Recv: {op!r}")
        send = isinstance(op, Send)
        wan = emulator is not None and emulator.crosses(rank, op.peer)
        first = (send, op.peer) not in seen
        seen.add((send, op.peer))
        pieces = _pieces(schedule, op.segments, layout)
        combine = (not send) and op.combine
        fresh = touched.isdisjoint(op.segments)
        touched.update(op.segments)
        steps.append(
            _Step(
                send,
                op.peer,
                pieces,
                schedule.nbytes_of(op),
                first and not wan,
                wan,
                combine,
                index,
                incoming_first=combine and op.incoming_first,
                inplace=(not send) and not wan and not combine and len(pieces) == 1 and fresh,
                snapshot=send and any(last_write.get(s, -1) > index for s in op.segments),
            )
        )
    if layout is None:
        extent = max((o + n for o, n in schedule.segments), default=0)
    else:
        extent = max((layout[s] + schedule.segments[s][1] for s in touched), default=0)
    return Program(rank, tuple(steps), extent, call or CallInfo.of(schedule), emulator is not None)


def _last_writes(program: Sequence[Send | Recv]) -> dict[int, int]:
    """Per segment: the index of the last receive of ``program`` that writes it."""
    last: dict[int, int] = {}
    for index, op in enumerate(program):
        if isinstance(op, Recv):
            for s in op.segments:
                last[s] = index
    return last


# -- execution ------------------------------------------------------------------------


def _byte_view(buf: object) -> np.ndarray:
    if isinstance(buf, np.ndarray):
        arr = buf if buf.flags.c_contiguous else buf.T
        if not arr.flags.c_contiguous:
            raise GridcollError("the buffer of a collective must be contiguous")
        return arr.reshape(-1).view(np.uint8)
    return np.frombuffer(memoryview(buf).cast("B"), dtype=np.uint8)


def execute(
    schedule: Schedule | Program,
    comm: MPI.Comm,
    buf: object,
    *,
    emulator: Emulator | None = None,
    timeout: float | None = None,
    tag: int = 0,
    reduce: Callable[[np.ndarray, np.ndarray, bool], None] | None = None,
    doorbells: Doorbells | None = None,
    call: CallInfo | None = None,
    notice_tag: int | None = None,
    ledger: Ledger | None = None,
    timing: WanTimes | None = None,
) -> None:
    """Run this rank's program of ``schedule`` on ``buf`` over ``comm``.

    Parameters
    ----------
    schedule : Schedule or Program
        The schedule, or this rank's program already compiled by :func:`compile_program`
        (with the same ``emulator``).
    comm : MPI.Comm
        A communicator reserved for gridcoll (messages use tags ``tag`` and ``tag + 1``).
    buf : buffer
        The data space: any contiguous buffer of at least ``schedule.nbytes`` bytes.
    emulator : Emulator, optional
        Emulate the WAN of its grid for cross-cluster messages.
    timeout : float, optional
        Seconds the call may go without progress, and a send may stay in flight
        (Rule 7; default :data:`DEFAULT_TIMEOUT`).
    reduce : callable, optional
        ``reduce(held, incoming, incoming_first)`` combines incoming bytes into held
        ones, for programs with combining receives: ``held = held (op) incoming``, or
        ``held = incoming (op) held`` when ``incoming_first`` (:class:`~gridcoll.schedule.ir.Recv`).
        ``incoming`` is a scratch buffer the callback may overwrite.
    doorbells : Doorbells, optional
        Wake-ups between the ranks of ``comm`` (all on one machine); see
        :meth:`gridcoll.runtime.doorbell.Doorbells.open_for`.
    call : CallInfo, optional
        The identity the headers carry (default: the program's); a communicator gives
        each call its own sequence number (:meth:`CallInfo.numbered`).
    notice_tag : int, optional
        The tag of notices (:func:`send_notice`): while it waits, at most every
        :data:`PROBE_EVERY` seconds, the rank looks for a notice (raising what it says)
        and for a stray on this call's tags (a message no posted receive takes).
    ledger : Ledger, optional
        The communicator's :class:`Ledger`: if the call fails, its sends still in flight
        go with their buffers to ``ledger.orphans`` (a peer may still be reading them:
        MPICH copies a large message straight out of the sender's memory), and
        notices of later calls that arrive while it runs are held there
        (:func:`take_notice`); without it, any notice fails this call.
    timing : WanTimes, optional
        Note the send and receive times of the wide-area messages there (one clock
        read per such message; none for the others).

    Raises
    ------
    CollectiveTimeout
        No progress for ``timeout`` seconds, or a send in flight for that long.
    MismatchError
        A message belongs to a call with other arguments than this rank's, or a
        notice says another rank found a mismatch.
    CollectiveError
        A notice says the call failed on another rank.
    """
    program = (
        schedule
        if isinstance(schedule, Program)
        else compile_program(schedule, comm.Get_rank(), emulator=emulator)
    )
    view = _byte_view(buf)
    if view.size < program.extent:
        raise GridcollError(
            f"buffer of {view.size} B is smaller than the {program.extent} B the schedule uses"
        )
    if program.emulated and emulator is None:
        raise GridcollError("the program was compiled for an emulator; pass it to execute()")
    limit = DEFAULT_TIMEOUT if timeout is None else timeout
    run = _Run(program, comm, view, emulator, limit, tag, reduce, doorbells, call, notice_tag)
    run.ledger = ledger
    run.timing = timing
    run.run()


@dataclass(slots=True)
class WanTimes:
    """The wide-area messages of one call as this rank timed them, for an adaptive
    broadcast's monitor on a real network (:mod:`gridcoll.runtime.adaptive`): every
    message between ranks of different ``cluster`` (the cluster of every rank) is
    noted in ``sent`` as ``(receiver, bytes, time.monotonic() at its Isend)`` and in
    ``received`` as ``(sender, bytes, time.monotonic() when its receive completed)``,
    in program order (MPI's non-overtaking rule matches the two lists pair by pair)."""

    cluster: Sequence[int]
    sent: list = field(default_factory=list)
    received: list = field(default_factory=list)


@dataclass(slots=True)
class _Posted:
    header_req: MPI.Request | None
    header_buf: np.ndarray | None
    req: MPI.Request
    target: np.ndarray


class _Run:
    """One execution of one program; see the module docstring for the rules."""

    def __init__(
        self, program, comm, view, emulator, timeout, tag, reduce, bells, call, notice_tag=None
    ):
        self.program = program
        self.call = call or program.call
        self.comm = comm
        self.view = view
        self.emulator = emulator
        self.timeout = timeout
        self.tag = tag
        self.reduce = reduce
        self.bells = bells
        self.rank = program.rank
        self.sends: list[MPI.Request] = []
        self.started: list[float] = []  # when each of ``sends`` started (Rule 7)
        self.receivers: list[int] = []  # the peer of each of ``sends``
        self.progress_at = _time.monotonic()  # the rank's last progress (Rule 7)
        self.keep: list[np.ndarray] = []  # send buffers that must outlive their Isend
        self.oldest = 0  # first send not known to be complete
        self.busy_until = 0.0  # the emulated WAN send overhead owed (Rule 6)
        self.control = np.zeros(CONTROL_BYTES, dtype=np.uint8)
        self.notice_tag = notice_tag
        self.next_probe = 0.0  # when a wait may next probe for notices and strays
        self.ledger: Ledger | None = None  # notices of later calls, orphaned sends
        self.at = 0  # the step running
        self.nudged = -1  # the step whose peer was sent a NOTICE_WAITING
        self.nudges: list[tuple[np.ndarray, MPI.Request]] = []
        self.timing: WanTimes | None = None  # wide-area messages timed (adaptive)

    def run(self) -> None:
        posted = self._post_all()
        done = 0
        try:
            for at, step in enumerate(self.program.steps):
                self.at = at
                if step.send:
                    self._send(step)
                else:
                    self._recv(step, posted[done])
                    done += 1
            self._finish_sends()
        except BaseException as err:
            self._abort(posted[done:])
            if self.ledger is not None and self.oldest < len(self.sends):
                self.ledger.orphans.append(
                    ((self.view, list(self.keep)), self.sends[self.oldest :])
                )
            if isinstance(err, MPI.Exception):
                told = self._told()
                if told is not None:  # the peers gave up on this call: say why
                    raise told from err
                raise CollectiveError(
                    f"rank {self.rank}: MPI failed in call {self.call.seq & 0xFFFFFFFF} of "
                    f"{self.call.algorithm!r} ({err.Get_error_string().splitlines()[-1]}): "
                    "a peer may have died or left the call after an error",
                    rank=self.rank,
                ) from err
            raise
        finally:
            if self.nudges:
                self._settle_nudges()

    def _settle_nudges(self) -> None:
        """The :data:`NOTICE_WAITING` sends still in flight (a small message MPI sends
        at once, unless the peer's queue is full) go with their buffers to
        ``orphans``, else they are given a second to leave."""
        reqs = [req for _raw, req in self.nudges]
        if self.ledger is not None:
            orphans = self.ledger.orphans
            orphans[:] = [o for o in orphans if not MPI.Request.Testall(o[1])]
            if not MPI.Request.Testall(reqs):
                orphans.append(([raw for raw, _req in self.nudges], reqs))
        else:
            until = _time.monotonic() + 1.0
            while not MPI.Request.Testall(reqs) and _time.monotonic() < until:
                _time.sleep(BACKOFF_MAX)

    # Rule 2: every receive is posted before the first operation runs.
    def _post_all(self) -> list[_Posted]:
        comm, tag, view = self.comm, self.tag, self.view
        steps = [s for s in self.program.steps if not s.send]
        ncontrol = sum(1 for s in steps if not s.pieces)
        scratch = np.empty(ncontrol * CONTROL_BYTES, dtype=np.uint8)
        posted, c = [], 0
        for step in steps:
            header_req = header_buf = None
            if step.header:
                header_buf = np.empty(HEADER_BYTES, dtype=np.uint8)
                header_req = comm.Irecv([header_buf, MPI.BYTE], step.peer, tag + 1)
            if step.wan:
                target = np.empty(HEADER_BYTES + step.nbytes, dtype=np.uint8)
            elif not step.pieces:
                target = scratch[c * CONTROL_BYTES : (c + 1) * CONTROL_BYTES]
                c += 1
            elif step.inplace:
                offset, length = step.pieces[0]
                target = view[offset : offset + length]
            else:
                target = np.empty(step.nbytes, dtype=np.uint8)
            req = comm.Irecv([target, MPI.BYTE], step.peer, tag)
            posted.append(_Posted(header_req, header_buf, req, target))
        return posted

    def _send(self, step: _Step) -> None:
        comm, view = self.comm, self.view
        deliver_at = 0.0
        if step.wan:
            deliver_at = self.emulator.reserve(self.rank, step.peer, step.nbytes, _time.monotonic())
        if step.header:
            header = self.call.pack(step.nbytes, deliver_at)
            self.keep.append(header)
            self.sends.append(comm.Isend([header, MPI.BYTE], step.peer, self.tag + 1))
            self.started.append(_time.monotonic())
            self.receivers.append(step.peer)
        if step.wan:
            data = np.empty(HEADER_BYTES + step.nbytes, dtype=np.uint8)
            data[:HEADER_BYTES] = self.call.pack(step.nbytes, deliver_at)
            at = HEADER_BYTES
            for o, n in step.pieces:
                data[at : at + n] = view[o : o + n]
                at += n
            if not step.pieces:
                data[at:] = 0
            self.keep.append(data)
        elif not step.pieces:
            data = self.control
        elif len(step.pieces) == 1 and not step.snapshot:
            offset, length = step.pieces[0]
            data = view[offset : offset + length]
        else:
            data = np.concatenate([view[o : o + n] for o, n in step.pieces])
            self.keep.append(data)
        timing = self.timing
        if timing is not None and timing.cluster[self.rank] != timing.cluster[step.peer]:
            timing.sent.append((step.peer, step.nbytes, _time.monotonic()))
        self.sends.append(comm.Isend([data, MPI.BYTE], step.peer, self.tag))
        now = self.progress_at = _time.monotonic()
        self.started.append(now)
        self.receivers.append(step.peer)
        if self.bells is not None:
            self.bells.ring(step.peer)
        if step.wan:
            busy = self.emulator.send_busy(self.rank, step.peer, step.nbytes)
            self.busy_until = max(self.busy_until, now) + busy
            if self.busy_until - now > BUSY_SLACK:
                self._sleep_until(self.busy_until)

    def _recv(self, step: _Step, posted: _Posted) -> None:
        deliver_at = 0.0
        if posted.header_req is not None:
            self._wait(posted.header_req, step, None)
            posted.header_req = None
            deliver_at = self.call.check(posted.header_buf, step, self.rank)
        status = MPI.Status()
        self._wait(posted.req, step, status)
        posted.req = None
        timing = self.timing
        if timing is not None and timing.cluster[self.rank] != timing.cluster[step.peer]:
            timing.received.append((step.peer, step.nbytes, _time.monotonic()))
        count = status.Get_count(MPI.BYTE)
        data = posted.target
        if step.wan:
            if count >= HEADER_BYTES:
                deliver_at = self.call.check(data[:HEADER_BYTES], step, self.rank)
            count -= HEADER_BYTES
            data = data[HEADER_BYTES:]
        if count != step.nbytes:
            raise MismatchError(
                f"rank {self.rank}: {step.describe()} got {max(count, 0)} B instead of "
                f"{step.nbytes} B: mismatched sizes or datatypes across ranks",
                rank=self.rank,
                peer=step.peer,
            )
        if self.bells is not None and step.nbytes > RING_BACK_BYTES:
            self.bells.ring(step.peer)  # its send completes now: let it know
        if step.pieces and not step.inplace:
            self._unpack(step, data)
        if step.wan:
            self.emulator.wait(deliver_at, step.peer, self.rank, step.nbytes, self._sleep_until)
        self.progress_at = _time.monotonic()

    def _unpack(self, step: _Step, data: np.ndarray) -> None:
        view, at = self.view, 0
        for offset, length in step.pieces:
            if step.combine:
                if self.reduce is None:
                    raise GridcollError(
                        f"rank {self.rank}: {step.describe()} combines data but no reduce "
                        "function was given"
                    )
                self.reduce(
                    view[offset : offset + length], data[at : at + length], step.incoming_first
                )
            else:
                view[offset : offset + length] = data[at : at + length]
            at += length

    def _wait(self, req, step, status) -> None:
        """Complete a receive; between tests, push our own pending sends and sleep."""
        bells = self.bells
        try:
            delay = BACKOFF_START
            while True:
                seen = bells.seen() if bells is not None else 0
                if req.Test(status):
                    return
                now = _time.monotonic()
                deadline = self.progress_at + self.timeout
                if now > deadline:
                    raise CollectiveTimeout(
                        f"rank {self.rank}: {step.describe()} of {self.call.algorithm!r}"
                        f" got no message from rank {step.peer} in {self.timeout:g} s without "
                        f"progress: {self._why_silent(step.peer)}",
                        rank=self.rank,
                        peer=step.peer,
                    )
                self._check_sends(now)
                self._probe(now)
                if self.nudged != self.at and now - self.progress_at > self.nudge_after:
                    self._nudge(step.peer)
                if self._progress():
                    delay = BACKOFF_START
                else:  # nothing of ours in flight: up to IDLE_NAP_MAX, until rung
                    idle = self.bells is not None and self.oldest >= len(self.sends)
                    delay = min(2 * delay, IDLE_NAP_MAX if idle else BACKOFF_MAX)
                self._nap(seen, min(delay, deadline - now + 1e-6, self.nudge_after))
                if self.bells is not None and self.bells.seen() != seen:
                    delay = BACKOFF_START  # rung: a message is coming, test it soon
        except MPI.Exception as err:
            if err.Get_error_class() == MPI.ERR_TRUNCATE:
                raise MismatchError(
                    f"rank {self.rank}: {step.describe()}: rank {step.peer} sent a larger "
                    "message than expected: mismatched sizes or datatypes across ranks",
                    rank=self.rank,
                    peer=step.peer,
                ) from err
            raise

    @property
    def nudge_after(self) -> float:
        return min(NUDGE_AFTER, self.timeout / 4)

    def _nudge(self, peer: int) -> None:
        """Tell ``peer`` this rank waits for it in this call (:data:`NOTICE_WAITING`)."""
        self.nudged = self.at
        if self.notice_tag is None:
            return
        raw = pack_notice(self.call.seq, NOTICE_WAITING, self.call.pack(0, 0.0).tobytes())
        self.nudges.append((raw, self.comm.Isend([raw, MPI.BYTE], peer, self.notice_tag)))
        if self.bells is not None:
            self.bells.ring(peer)

    def _why_silent(self, peer: int) -> str:
        """What a peer's silence may mean, for a timeout's message."""
        for step in self.program.steps[: self.at]:
            if not step.send and step.peer == peer:  # it took part, then stopped
                return (
                    f"rank {peer} sent part of this call, then stopped: it died or gave "
                    "up on the call (was this rank late to join it?)"
                )
        why = (
            f"rank {peer} may have died or not joined, or the ranks called the "
            "collective with mismatched arguments (sizes, datatypes, roots or call order)"
        )
        if self.ledger is not None and self.ledger.last_failure:
            why += (
                f"; an earlier call failed elsewhere ({self.ledger.last_failure}): a rank "
                "that raised there may not have made this call"
            )
        return why

    def _told(self) -> CollectiveError | None:
        """A notice waiting for this rank, if any (best effort: MPI may be failing)."""
        if self.notice_tag is None:
            return None
        try:
            return take_notice(self.comm, self.notice_tag, self.call.seq, ledger=self.ledger)
        except MPI.Exception:
            return None

    def _probe(self, now: float) -> None:
        """While waiting, at most every :data:`PROBE_EVERY` seconds (the first time
        after that long): raise what a notice says, or :class:`MismatchError` for a
        stray on this call's tags.

        Every receive of the call was posted before its first send, each for one
        source, so a message waiting unmatched on the call's data or header tag is one
        no receive of this rank will ever take: another rank runs a different schedule
        (a root or size that does not match). Finding it here, not after the call,
        ends a deadlock of two roots whose rendezvous sends wait for each other.
        """
        if self.notice_tag is None:
            return
        if self.next_probe == 0.0:  # the call's first wait: not before PROBE_EVERY
            self.next_probe = now + PROBE_EVERY
            return
        if now < self.next_probe:
            return
        self.next_probe = now + PROBE_EVERY
        comm = self.comm
        err = take_notice(comm, self.notice_tag, self.call.seq, self.call, self.ledger)
        if err is not None:
            raise err
        status = MPI.Status()
        for tag in (self.tag + 1, self.tag):
            if comm.Iprobe(MPI.ANY_SOURCE, tag, status):
                src = status.Get_source()
                raise MismatchError(
                    f"rank {self.rank}: rank {src} sent a message no step of this rank's "
                    f"call {self.call.seq & 0xFFFFFFFF} ({self.call.op or 'a collective'}, "
                    f"root {self.call.root}, {self.call.nbytes} B) takes: the ranks called "
                    "the collective with mismatched arguments (roots, sizes, datatypes or "
                    "call order)",
                    rank=self.rank,
                    peer=src,
                )

    def _progress(self) -> bool:
        """Test our pending sends, oldest first; True if any completed.

        MPICH moves a message only while one of its ends is inside MPI (its shared-memory
        queue holds 64 cells per sender), so a rank with sends in flight tests them at
        every wake-up, and while they complete it keeps its sleeps short.
        """
        sends, start = self.sends, self.oldest
        while self.oldest < len(sends) and sends[self.oldest].Test():
            self.oldest += 1
        if self.oldest > start:
            self.progress_at = _time.monotonic()
            return True
        if self.bells is not None and self.oldest < len(sends):
            # a large message moves only while its receiver is inside MPI too, and an
            # idle receiver sleeps until its doorbell rings: ring it at every wake-up
            self.bells.ring(self.receivers[self.oldest])
        return False

    def _check_sends(self, now: float) -> None:
        """Rule 7: raise :class:`CollectiveTimeout` if the oldest send in flight started
        more than ``timeout`` seconds ago (its receiver died, never joined, or runs
        another call)."""
        if self.oldest < len(self.sends) and now - self.started[self.oldest] > self.timeout:
            peers = self._pending_send_peers(self.started[self.oldest])
            if peers:
                raise self._send_timeout(peers)

    def _send_timeout(self, peers: list[int]) -> CollectiveTimeout:
        return CollectiveTimeout(
            f"rank {self.rank}: {_ranks(peers)} did not take this rank's message of call "
            f"{self.call.seq & 0xFFFFFFFF} ({self.call.algorithm!r}) within "
            f"{self.timeout:g} s: {'it' if len(peers) == 1 else 'they'} may have died or "
            "not joined, or the ranks called the collective with mismatched arguments",
            rank=self.rank,
            peer=peers[0],
        )

    def _sleep_until(self, deadline: float) -> None:
        """Sleep until ``deadline`` (an emulated delivery or send overhead), driving
        progress all along."""
        delay = BACKOFF_START
        while True:
            now = _time.monotonic()
            left = deadline - now
            if left <= 0:
                self.progress_at = now
                return
            self._check_sends(now)
            if self._progress():
                delay = BACKOFF_START
            elif self.oldest >= len(self.sends):
                # nothing of ours to push: only incoming traffic to drain (Iprobe moves
                # it), so no backoff from 20 us; with a doorbell, sleep until it rings
                self.comm.Iprobe(MPI.ANY_SOURCE, MPI.ANY_TAG)
                delay = BACKOFF_MAX if self.bells is None else IDLE_NAP_MAX
            else:
                delay = min(2 * delay, BACKOFF_MAX)
            if self.bells is None:
                _time.sleep(min(delay, left))
            else:
                self.bells.sleep(self.bells.seen(), min(delay, left))

    def _finish_sends(self) -> None:
        delay = BACKOFF_START
        while self.oldest < len(self.sends):
            seen = self.bells.seen() if self.bells is not None else 0
            if self._progress():
                delay = BACKOFF_START
                continue
            now = _time.monotonic()
            self._probe(now)
            self._check_sends(now)
            if now > self.progress_at + self.timeout:
                raise self._send_timeout(self._pending_send_peers(now))
            self._nap(seen, delay)
            delay = min(2 * delay, BACKOFF_MAX)
        self.keep.clear()

    def _nap(self, seen: int, seconds: float) -> None:
        if self.bells is not None:
            self.bells.sleep(seen, seconds)
        else:
            _time.sleep(seconds)

    def _pending_send_peers(self, started_by: float) -> list[int]:
        """The receivers of the sends in flight that started no later than ``started_by``."""
        peers = []
        i = 0
        for step in self.program.steps:
            if not step.send:
                continue
            for _ in range(2 if step.header else 1):
                if i >= len(self.sends):
                    return sorted(peers)
                if (
                    i >= self.oldest
                    and self.started[i] <= started_by
                    and step.peer not in peers
                    and not self.sends[i].Test()
                ):
                    peers.append(step.peer)
                i += 1
        return sorted(peers)

    def _abort(self, posted: list[_Posted]) -> None:
        """Cancel the receives still posted (best effort); their buffers are abandoned."""
        for p in posted:
            for req in (p.header_req, p.req):
                if req is None:
                    continue
                try:
                    req.Cancel()
                    req.Free()
                except MPI.Exception:
                    pass


def _ranks(ranks: Sequence[int]) -> str:
    """``rank 3`` or ``ranks 2, 3``."""
    if len(ranks) == 1:
        return f"rank {ranks[0]}"
    return "ranks " + ", ".join(str(r) for r in ranks)
