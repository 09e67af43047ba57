"""Notices: how a rank that found a failure tells the others, and the ledger of calls.

Rule 4 of :mod:`gridcoll.runtime.executor`: a rank that only sends never sees a
header, so a rank that finds a mismatch (or whose reduction operation raised, or that
timed out) sends a small *notice* to every other rank of the communicator on a tag of
its own (:func:`send_notice`). The others find it while they wait
(:func:`take_notice`, probed by the executor at most every
:data:`~gridcoll.runtime.executor.PROBE_EVERY` seconds of waiting), or right after it.

* A notice of the call a rank is in fails that call on the rank.
* A notice of a later call (a peer that already finished this one failed in its next)
  is held (:class:`Ledger`, ``held``) until the rank reaches that call
  (:func:`held_notice`), which then fails at once.
* A notice of a call the rank has completed is dropped: every message the rank took in
  that call passed its header's check, so its result stands (as in MPI, where a
  collective's completion is local; ULFM reports a failure likewise only where the
  call could not complete).
* A :data:`NOTICE_WAITING` is not a failure: a rank that waits for a peer without
  progress sends that peer the call's header, so two ranks whose schedules wait for
  each other (and send each other no header) learn of a mismatch.

A failed call leaves the communicator usable: every rank numbered the call, failed or
not, so the next call's tags and headers agree, and the failed call's strays are
received and dropped (:func:`drain`).

Layout of a notice (:data:`NOTICE_BYTES` bytes): magic ``"GCN1"``, the call number
(with the epoch), the kind, then the start of the detecting rank's error message (or,
for :data:`NOTICE_WAITING`, the waiting rank's header).
"""

from __future__ import annotations

import struct as _struct
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
from mpi4py import MPI

from gridcoll.errors import CollectiveError, CollectiveTimeout, MismatchError
from gridcoll.runtime.doorbell import Doorbells
from gridcoll.runtime.header import HEADER_BYTES, CallInfo

__all__ = [
    "EMPTY_KEPT",
    "FAILED_DRAINS",
    "NOTICE_BYTES",
    "NOTICE_ERROR",
    "NOTICE_MISMATCH",
    "NOTICE_TIMEOUT",
    "NOTICE_WAITING",
    "NUDGE_AFTER",
    "Ledger",
    "drain",
    "held_notice",
    "pack_notice",
    "send_notice",
    "take_notice",
]

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


def _text(raw: bytes) -> str:
    return raw.rstrip(b"\0").decode(errors="replace")


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
    _differ, detail, _ = mine.differences(header, None)
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
