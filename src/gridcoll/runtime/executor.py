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

Rule 4: every first message between two ranks in a call carries a 128-byte header: the
call's sequence number, collective, root, size, item size, datatype signature, reduction
operation, algorithm and grid, the digest of the calls without a message before it (they
complete on each rank alone, so their arguments are checked here), the message's byte
count and its emulated delivery time. The receiver checks it against its own call, so
mismatched arguments across ranks raise :class:`MismatchError` instead of corrupting
data. On the LAN the header is a small message of its own on the header tag (the data
stays zero-copy); an emulated WAN message carries the header in front of its data in one
message (one copy each side, negligible beside the emulated link, and half the messages
of a separate header). A rank that only sends never sees a header, so a rank that finds
a mismatch (or whose reduction operation raised) sends a small *notice* to every other
rank of the communicator on a tag of its own (:func:`send_notice`); the others find it
while they wait (:func:`take_notice`, probed at most every :data:`PROBE_EVERY` seconds
of waiting, with the call's own tags: a message there that no posted receive takes is a
stray of a mismatched call), or right after it. A notice of a call after the one a rank
is in (a peer that already finished it failed in the next) is held until the rank
reaches that call, which then fails at once. A notice of a call the rank has completed
is dropped: every message the rank took in that call passed its header's check, so its
result stands (as in MPI, where a collective's completion is local; fault-tolerant MPI,
ULFM, reports a failure likewise only where the call could not complete). A failed call
leaves the communicator usable: every rank numbered the call, failed or not, so the next
call's tags and headers agree, and the failed call's strays are drained
(:class:`Ledger`). The call that matches costs nothing more.

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
"""

from __future__ import annotations

import os as _os
import struct as _struct
import time as _time
import zlib as _zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
from mpi4py import MPI

from gridcoll.errors import GridcollError
from gridcoll.runtime.doorbell import Doorbells
from gridcoll.runtime.emulation import Emulator
from gridcoll.schedule.ir import CONTROL_BYTES, Recv, Schedule, Send

__all__ = [
    "BACKOFF_MAX",
    "BACKOFF_START",
    "DEFAULT_TIMEOUT",
    "EMPTY_KEPT",
    "FAILED_DRAINS",
    "IDLE_NAP_MAX",
    "NOTICE_BYTES",
    "NOTICE_ERROR",
    "NOTICE_MISMATCH",
    "NOTICE_TIMEOUT",
    "PROBE_EVERY",
    "YIELD_POLL_S",
    "CallInfo",
    "CollectiveError",
    "CollectiveTimeout",
    "Ledger",
    "MismatchError",
    "Program",
    "compile_program",
    "drain",
    "empty_digest",
    "execute",
    "held_notice",
    "send_notice",
    "sleep_until",
    "take_notice",
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


class CollectiveError(GridcollError):
    """A collective failed while running; ``rank`` is where, ``peer`` the rank involved.

    The communicator stays usable: the next call runs as if the failed one had not
    happened (its stray messages are drained, :class:`Ledger`).
    """

    def __init__(
        self,
        message: str,
        *,
        rank: int | None = None,
        peer: int | None = None,
        relayed: bool = False,
    ):
        super().__init__(message)
        self.rank = rank
        self.peer = peer
        self.relayed = relayed
        """Raised on a peer's notice: that peer has told every rank already."""


class CollectiveTimeout(CollectiveError, TimeoutError):
    """A rank waited longer than the timeout: a peer died, never joined, or the ranks
    called the collective with mismatched arguments."""


class MismatchError(CollectiveError, ValueError):
    """A message belongs to a call with other arguments (collective, size, datatype,
    reduction operation, root, algorithm, grid or call order) than the receiver's own
    call, or a peer found such a mismatch and said so (a notice)."""


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


# -- the call's identity, checked by every receiver ----------------------------------

_HEADER = _struct.Struct("<4sIQqQIIQd20s12s16s16sII")
_MAGIC = b"GCH3"
HEADER_BYTES = _HEADER.size  # 128
_NAME = 20  # bytes of the algorithm's name in a header (its parameters' CRC follows)
_DELIVER_AT = 48  # offset of deliver_at in the header; the algorithm name follows it
_NAME_AT = 56
_DOUBLE = _struct.Struct("<d")
_TEXT = 16  # bytes of the datatype's and the reduction operation's names in a header


def _crc(text: str) -> int:
    return _zlib.crc32(text.encode())


def _text(raw: bytes) -> str:
    return raw.rstrip(b"\0").decode(errors="replace")


@dataclass(frozen=True, slots=True)
class CallInfo:
    """What identifies one collective call; every header carries it.

    ``op`` is the collective (``schedule.op``), ``dtype`` the signature of the
    datatype (``gridcoll.runtime.buffers.signature``: a numpy type string such as
    ``'<f8'``, so ``float64`` and ``int64`` differ although their size does not),
    ``redop`` the reduction operation (``'SUM'``, ``'MAX'``..., ``'user:<crc>'`` for a
    user's, ``''`` for a collective that does not reduce). Headers carry the first 16
    bytes of ``dtype`` and its CRC-32 (a long structured signature is compared whole).
    ``prior`` is the digest of the calls that moved no byte since the communicator's
    last call that did (:func:`empty_digest`): they complete without a message, so
    their arguments are checked in this call's headers.
    """

    seq: int
    root: int
    nbytes: int
    itemsize: int
    algorithm: str
    algo_id: int
    grid_id: int
    op: str = ""
    dtype: str = ""
    redop: str = ""
    prior: int = 0
    _expect: dict = field(default_factory=dict, compare=False, repr=False)
    """Per message size: the header bytes a matching message carries (fast check)."""

    @classmethod
    def of(
        cls, schedule: Schedule, *, seq: int = 0, itemsize: int = 1, grid_id: int = 0
    ) -> CallInfo:
        """The identity of a call running ``schedule``."""
        params = ",".join(f"{k}={schedule.params[k]}" for k in sorted(schedule.params))
        algo_id = _crc(f"{schedule.op}|{schedule.algorithm}|{params}")
        return cls(
            seq,
            schedule.root,
            schedule.nbytes,
            itemsize,
            schedule.algorithm,
            algo_id,
            grid_id,
            schedule.op,
        )

    def numbered(
        self, seq: int, dtype: str | None = None, redop: str | None = None, prior: int = 0
    ) -> CallInfo:
        """The same call with sequence number ``seq`` (and the caller's datatype
        signature, reduction operation and digest of the empty calls before it, which
        the cached program does not know)."""
        return CallInfo(
            seq,
            self.root,
            self.nbytes,
            self.itemsize,
            self.algorithm,
            self.algo_id,
            self.grid_id,
            self.op,
            self.dtype if dtype is None else dtype,
            self.redop if redop is None else redop,
            prior,
        )

    def pack(self, msg_nbytes: int, deliver_at: float) -> np.ndarray:
        """The header of one message."""
        raw = _HEADER.pack(
            _MAGIC,
            self.grid_id,
            self.seq,
            self.root,
            self.nbytes,
            self.itemsize,
            self.algo_id,
            msg_nbytes,
            deliver_at,
            self.algorithm.encode()[:_NAME],
            self.op.encode()[:12],
            self.dtype.encode()[:_TEXT],
            self.redop.encode()[:_TEXT],
            _crc(self.dtype),
            self.prior,
        )
        return np.frombuffer(raw, dtype=np.uint8).copy()

    def check(self, raw: np.ndarray, step: _Step, rank: int) -> float:
        """Check a received header against this call; return its ``deliver_at``.

        Fast path (every emulated message carries a header): the bytes of a matching
        header are known but for ``deliver_at``, so one comparison accepts it; only a
        mismatch is unpacked field by field to say what differs.
        """
        data = raw.tobytes()
        expect = self._expect.get(step.nbytes)
        if expect is None:
            packed = self.pack(step.nbytes, 0.0).tobytes()
            expect = self._expect[step.nbytes] = (packed[:_DELIVER_AT], packed[_NAME_AT:])
        if data[:_DELIVER_AT] == expect[0] and data[_NAME_AT:] == expect[1]:
            return _DOUBLE.unpack_from(data, _DELIVER_AT)[0]
        return self._check_fields(data, step, rank)

    def _fields(self) -> dict:
        return {
            "call number": self.seq & 0xFFFFFFFF,
            "collective": self.op[:12],
            "root": self.root,
            "size": self.nbytes,
            "itemsize": self.itemsize,
            "datatype": self.dtype[:_TEXT],
            "reduction operation": self.redop[:_TEXT],
            "algorithm": self.algorithm[:_NAME],
            "empty calls before": self.prior,
        }

    def _check_fields(self, data: bytes, step: _Step, rank: int) -> float:
        differ, detail, deliver_at = self._differences(data, step.nbytes)
        if differ == ["communicator"]:
            raise MismatchError(
                f"rank {rank}: the message from rank {step.peer} (op {step.index}) belongs "
                "to another communicator (a stray message of a failed call)",
                rank=rank,
                peer=step.peer,
            )
        if differ:
            raise MismatchError(
                f"rank {rank}: the message from rank {step.peer} (op {step.index}) belongs to "
                f"a call with other arguments ({detail}, sender's vs this rank's): all ranks "
                f"must call the collective in the same order with the same root, size, "
                f"datatype and reduction operation",
                rank=rank,
                peer=step.peer,
            )
        return deliver_at

    def compare_waiting(self, data: bytes, peer: int, rank: int) -> None:
        """Raise :class:`MismatchError` if ``peer``, waiting for this rank in this call
        (a :data:`NOTICE_WAITING` notice carrying its header), runs it with other
        arguments. Two ranks whose schedules wait for each other (the roots of a gather
        that differ) send each other no message, so no header: this is how they learn."""
        differ, detail, _ = self._differences(data, None)
        if differ and differ != ["communicator"]:
            raise MismatchError(
                f"rank {rank}: rank {peer} waits for this rank in a call with other "
                f"arguments ({detail}, that rank's vs this rank's): all ranks must call the "
                "collective in the same order with the same root, size, datatype and "
                "reduction operation",
                rank=rank,
                peer=peer,
            )

    def _differences(self, data: bytes, expected: int | None) -> tuple[list, str, float]:
        """Where header ``data`` differs from this call: the fields' names (or
        ``["communicator"]`` for another communicator's), as text (``field theirs vs
        mine``), and the header's ``deliver_at``. ``expected``: the message size this
        rank expects (None: not compared)."""
        if len(data) != HEADER_BYTES or data[:4] != _MAGIC:
            return ["header"], "header '?' vs '?'", 0.0
        (
            _magic,
            grid_id,
            seq,
            root,
            nbytes,
            itemsize,
            algo_id,
            msg_nbytes,
            deliver_at,
            name,
            op,
            dtype,
            redop,
            dtype_id,
            prior,
        ) = _HEADER.unpack(data)
        if seq >> 32 != self.seq >> 32:
            return ["communicator"], "", deliver_at
        theirs = {
            "call number": seq & 0xFFFFFFFF,
            "collective": _text(op),
            "root": root,
            "size": nbytes,
            "itemsize": itemsize,
            "datatype": _text(dtype),
            "reduction operation": _text(redop),
            "algorithm": _text(name),
            "empty calls before": prior,
        }
        mine = self._fields()
        differ = [k for k in mine if mine[k] != theirs[k]]
        if not differ and dtype_id != _crc(self.dtype):
            differ = ["datatype"]
        elif not differ and algo_id != self.algo_id:
            differ = ["algorithm parameters"]
        elif not differ and grid_id != self.grid_id:
            differ = ["grid"]
        elif not differ and expected is not None and msg_nbytes != expected:
            differ = ["message size"]
        detail = ", ".join(f"{k} {theirs.get(k, '?')!r} vs {mine.get(k, '?')!r}" for k in differ)
        return differ, detail, deliver_at


# -- notices: a rank that found a mismatch tells every other rank ---------------------

_NOTICE = _struct.Struct("<4sQB")
_NOTICE_MAGIC = b"GCN1"
NOTICE_BYTES = 256
"""Bytes of a notice: magic, the failed call's number (with the epoch), its kind, and
the start of the detecting rank's error message."""
NOTICE_MISMATCH = 1
"""A notice's kind: the sender found mismatched arguments (receivers raise
:class:`MismatchError`)."""
NOTICE_ERROR = 2
"""A notice's kind: the call failed on the sender otherwise (a user's reduction
operation raised...; receivers raise :class:`CollectiveError`)."""
NOTICE_TIMEOUT = 3
"""A notice's kind: the sender timed out (a rank died or never joined; receivers raise
:class:`CollectiveTimeout`)."""
NOTICE_WAITING = 4
"""A notice's kind, sent to one peer, not a failure: the sender has waited
:data:`NUDGE_AFTER` for that peer in a call, and the notice's body is the call's header.
The peer, if it runs that call with other arguments, raises :class:`MismatchError`
(:meth:`CallInfo.compare_waiting`); else it drops the notice."""
NUDGE_AFTER = 0.2
"""Seconds a rank waits for a peer without progress before it sends that peer a
:data:`NOTICE_WAITING` (at most ``timeout / 4``; once per receive)."""


def pack_notice(seq: int, kind: int, text: str | bytes) -> np.ndarray:
    """The bytes of one notice (its text, or raw body, cut to fit)."""
    raw = np.zeros(NOTICE_BYTES, dtype=np.uint8)
    head = _NOTICE.pack(_NOTICE_MAGIC, seq, kind)
    body = text if isinstance(text, bytes) else text.encode(errors="replace")
    body = body[: NOTICE_BYTES - _NOTICE.size]
    raw[: len(head)] = np.frombuffer(head, dtype=np.uint8)
    raw[len(head) : len(head) + len(body)] = np.frombuffer(body, dtype=np.uint8)
    return raw


def send_notice(
    comm: MPI.Comm,
    tag: int,
    seq: int,
    kind: int,
    text: str,
    bells: Doorbells | None = None,
) -> tuple[np.ndarray, list[MPI.Request]]:
    """Tell every other rank of ``comm`` that call ``seq`` failed here (``Isend`` on
    ``tag``, then each rank's doorbell, so a sleeping waiter wakes at once).

    Every rank, not only this call's peers: in a mismatched call the ranks may run
    different schedules, and a rank that only sent (a broadcast root, a gather leaf)
    has no other way to learn. Returns the buffer and the requests, which the caller
    keeps until they complete. Only a failed call sends notices.
    """
    raw = pack_notice(seq, kind, text)
    me, size = comm.Get_rank(), comm.Get_size()
    reqs = []
    for peer in range(size):
        if peer == me:
            continue
        reqs.append(comm.Isend([raw, MPI.BYTE], peer, tag))
        if bells is not None:
            bells.ring(peer)
    return raw, reqs


FAILED_DRAINS = 8
"""Calls after a failed one that drain its strays (:class:`Ledger`): a stray is a
message sent before its sender learnt of the failure, so it has arrived by then."""
EMPTY_KEPT = 64
"""Calls without a message a :class:`Ledger` remembers (a peer waiting in one is told)."""


@dataclass
class Ledger:
    """What a communicator keeps between calls about calls that failed or moved nothing.

    A failed call leaves messages behind (a peer's sends this rank no longer receives,
    this rank's sends no peer will take), and notices may arrive after the call they
    are about. The ledger lets the next calls run as if nothing happened: the calls'
    numbers stay in step on every rank (every call, failed or empty, takes one), the
    strays of a failed call are received and dropped (:func:`drain`) instead of being
    taken for a mismatch, and the buffers of sends still in flight live until they
    complete.
    """

    held: list[tuple[int, bytes]] = field(default_factory=list)
    """``(source, notice)`` of failures of calls this rank has not reached yet."""
    failed: dict[int, int] = field(default_factory=dict)
    """Recent calls that failed here or elsewhere: number -> the last call number
    that drains its strays (:data:`FAILED_DRAINS` calls later)."""
    empty: dict[int, CallInfo] = field(default_factory=dict)
    """Recent calls this rank completed without a message, by number (at most
    :data:`EMPTY_KEPT`): a peer that waits in one ran it with other arguments."""
    orphans: list = field(default_factory=list)
    """``(buffers, requests)``: sends of failed calls and notices still in flight."""
    last_failure: str = ""
    """What the last notice this rank dropped said (a call it had completed failed
    elsewhere): a later timeout names it, the likely cause."""

    def note_failed(self, seq: int) -> None:
        self.failed[seq] = seq + FAILED_DRAINS

    def forget_failed(self, seq: int) -> None:
        """Forget the failed calls whose strays call ``seq`` no longer drains, and the
        orphaned sends that have completed."""
        for failed, until in list(self.failed.items()):
            if until < seq:
                del self.failed[failed]
        self.orphans[:] = [o for o in self.orphans if not MPI.Request.Testall(o[1])]

    def note_empty(self, call: CallInfo) -> None:
        self.empty[call.seq] = call
        while len(self.empty) > EMPTY_KEPT:
            del self.empty[next(iter(self.empty))]


def take_notice(
    comm: MPI.Comm,
    tag: int,
    seq: int,
    call: CallInfo | None = None,
    ledger: Ledger | None = None,
) -> CollectiveError | None:
    """The error a waiting notice says this rank's call ``seq`` has (None if none).

    ``seq`` is the number (with the epoch) of the call this rank is in, or made last.
    A notice of another epoch (a freed communicator whose context MPI recycled) is
    received and dropped. A :data:`NOTICE_WAITING` is this rank's own
    :class:`MismatchError` if it is about ``call``, the call this rank runs, with
    other arguments; if it is about a call this rank completed without a message
    (``ledger.empty``), the waiting peer is told (a mismatch notice to it alone:
    this rank's own call is complete); else it is dropped. A failure of call ``seq``
    is returned. A failure of an earlier call, one this rank completed, is dropped:
    its result here stands, since every message it took passed its header's check
    (the call is noted as failed, so its strays are drained). A failure of a later
    call (a peer that already finished this one failed in its next) is kept in
    ``ledger.held`` until ``seq`` reaches it (without a ledger it is returned). Cost
    without a notice: one ``Iprobe``.
    """
    me = comm.Get_rank()
    status = MPI.Status()
    while comm.Iprobe(MPI.ANY_SOURCE, tag, status):
        src = status.Get_source()
        raw = np.empty(NOTICE_BYTES, dtype=np.uint8)
        comm.Recv([raw, MPI.BYTE], src, tag)
        data = raw.tobytes()
        magic, their_seq, kind = _NOTICE.unpack_from(data)
        if magic != _NOTICE_MAGIC or their_seq >> 32 != seq >> 32:
            continue
        if kind == NOTICE_WAITING:
            header = data[_NOTICE.size : _NOTICE.size + HEADER_BYTES]
            if call is not None and their_seq == call.seq:
                try:
                    call.compare_waiting(header, src, me)
                except MismatchError as err:
                    return err
            elif ledger is not None and their_seq in ledger.empty:
                _answer_waiting(comm, tag, ledger, ledger.empty[their_seq], header, src)
            continue
        if their_seq == seq or (ledger is None and their_seq > seq):
            return _notice_error(me, src, data)
        if ledger is None:
            continue
        if their_seq > seq:
            ledger.held.append((src, data))
        else:
            ledger.note_failed(their_seq)
            ledger.last_failure = str(_notice_error(me, src, data))
    return None


def held_notice(
    comm: MPI.Comm, seq: int, ledger: Ledger, later: bool = False
) -> CollectiveError | None:
    """The error of call ``seq`` (with ``later``, of any call from ``seq`` on) that a
    notice held in ``ledger`` says (it came while an earlier call ran), else None;
    held notices of calls before ``seq`` are dropped."""
    for src, data in list(ledger.held):
        their_seq = _NOTICE.unpack_from(data)[1]
        if their_seq == seq or (later and their_seq > seq):
            ledger.held.remove((src, data))
            return _notice_error(comm.Get_rank(), src, data)
        if their_seq < seq:
            ledger.held.remove((src, data))
            ledger.note_failed(their_seq)
    return None


def _answer_waiting(
    comm: MPI.Comm, tag: int, ledger: Ledger, mine: CallInfo, header: bytes, peer: int
) -> None:
    """Tell ``peer``, waiting for this rank in a call this rank ran without a message,
    that the two ran it with other arguments (a mismatch notice to it alone)."""
    _differ, detail, _ = mine._differences(header, None)
    text = (
        f"rank {comm.Get_rank()} ran call {mine.seq & 0xFFFFFFFF} moving no byte "
        f"({detail or 'the same arguments'}, the waiting rank's vs that rank's)"
    )
    raw = pack_notice(mine.seq, NOTICE_MISMATCH, text)
    ledger.orphans.append(([raw], [comm.Isend([raw, MPI.BYTE], peer, tag)]))


def drain(comm: MPI.Comm, tags: Sequence[int]) -> None:
    """Receive and drop every message waiting on ``tags`` (a failed call's data and
    header tags): a peer's send this rank no longer receives completes, and nothing of
    the call stays in the library's queue of unexpected messages."""
    status = MPI.Status()
    for tag in tags:
        while comm.Iprobe(MPI.ANY_SOURCE, tag, status):
            count = status.Get_count(MPI.BYTE)
            comm.Recv([np.empty(max(count, 1), dtype=np.uint8), MPI.BYTE], status.Get_source(), tag)


def empty_digest(prior: int, call: CallInfo) -> int:
    """The digest of the empty calls so far (``prior``) extended by ``call``: CRC-32
    of its collective, root, item size, datatype and reduction operation, chained."""
    text = f"{call.op}|{call.root}|{call.itemsize}|{call.dtype}|{call.redop}"
    return _zlib.crc32(text.encode(), prior)


def _notice_error(me: int, src: int, data: bytes) -> CollectiveError:
    """The error a failure notice from ``src`` says this rank has."""
    _magic, seq, kind = _NOTICE.unpack_from(data)
    text = _text(data[_NOTICE.size :])
    what = f"rank {me}: rank {src} reports that call {seq & 0xFFFFFFFF} failed there ({text})"
    if kind == NOTICE_MISMATCH:
        return MismatchError(
            what + ": the ranks called the collective with mismatched arguments; this "
            "rank's result of that call may differ from the others'",
            rank=me,
            peer=src,
            relayed=True,
        )
    if kind == NOTICE_TIMEOUT:
        return CollectiveTimeout(
            what + ": a rank died or never joined", rank=me, peer=src, relayed=True
        )
    return CollectiveError(
        what + ": the collective failed on that rank", rank=me, peer=src, relayed=True
    )


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
    run.run()


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
