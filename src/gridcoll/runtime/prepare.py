"""The one path from a collective call to what runs: plan, compile, execute.

Every collective of :class:`gridcoll.Comm`, the broadcast included, goes through
:func:`prepare`: from (communicator state, op, size, root, item size, commutative,
in place) to a :class:`~gridcoll.runtime.state.Prepared` holding the plan
(:func:`plan_call`, one call of :func:`gridcoll.tune.plan` on the effective grid), the
rank's compiled program (:func:`gridcoll.runtime.executor.compile_program`) and its
buffer layout (:func:`gridcoll.runtime.layout.layout_for`), cached per call signature in
the communicator's memo. Then :func:`run` executes a program as the communicator's
next call (its own sequence number and tag) and checks for strays; :func:`run_native`
calls the MPI library's own collective, blocking, under the watchdog.

Mismatches across ranks: every header carries the collective, root, size, datatype
signature, reduction operation and algorithm (:class:`~gridcoll.runtime.header.CallInfo`),
so a receiver that sees another call's message raises
:class:`~gridcoll.errors.MismatchError` in that call. A rank that raises one
(or whose call failed otherwise: a user's reduction operation raised) then sends a
notice to every other rank (:func:`~gridcoll.runtime.notices.send_notice`), which
they find while they wait in that call, or in their next call, their ``Free``
(:meth:`~gridcoll.runtime.state.State.close`) or at the program's exit; so a rank that
only sent (a broadcast root, a gather leaf) learns that its call went wrong too. A call
that matches sends nothing more and probes nothing more: the probe after each call
(:func:`_check_strays`) finds a notice as it finds a stray.

Where this sits in :mod:`gridcoll.runtime`: after ``buffers`` and ``state``, before
``collectives`` (one helper per collective over :func:`prepare`) and ``comm``.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable
from contextlib import suppress
from dataclasses import replace

import numpy as _np
from mpi4py import MPI

from gridcoll.errors import CollectiveError, CollectiveTimeout, MismatchError
from gridcoll.runtime.executor import Program, WanTimes, compile_program, execute, wait
from gridcoll.runtime.header import CallInfo, empty_digest
from gridcoll.runtime.layout import layout_for
from gridcoll.runtime.notices import (
    NOTICE_ERROR,
    NOTICE_MISMATCH,
    NOTICE_TIMEOUT,
    drain,
    held_notice,
    send_notice,
    take_notice,
)
from gridcoll.runtime.state import PROCESS, Prepared, State, note_failure
from gridcoll.runtime.watchdog import MAIN, PROGRESS
from gridcoll.schedule.ir import Schedule
from gridcoll.tune import FRUGAL, NATIVE, Call, Plan, PlanOptions, native_reason, plan

__all__ = [
    "Uneven",
    "check_agreement",
    "compiled",
    "last_plan",
    "native_plan",
    "plan_call",
    "prepare",
    "refuse",
    "run",
    "run_native",
    "serves_natively",
    "skip_empty",
]

UNLAID = ("bcast", "barrier")
"""Collectives whose program runs on the caller's buffer as it is (no layout)."""

Uneven = tuple[tuple[int, ...], tuple[int, ...] | None, tuple[int, ...] | None]
"""A v-variant call's (counts of every block, the rank's send displacements, its
receive displacements), in bytes (:func:`prepare`, :mod:`gridcoll.runtime.layout`)."""


# -- which plan ------------------------------------------------------------------------


def plan_call(
    state: State,
    op: str,
    nbytes: int,
    root: int,
    itemsize: int,
    commutative: bool = True,
    counts: tuple[int, ...] | None = None,
) -> Plan:
    """The plan of one call of ``op``: one call of :func:`gridcoll.tune.plan`.

    The communicator's algorithm and fixed parameters for ``op``
    (:func:`~gridcoll.runtime.choice.algo_table`), ``native=True`` (the MPI library's
    own collective may serve it: ``auto`` on one cluster, or ``algo="native"``), the
    runtime's host overhead (the plan is made on ``grid.with_host_overhead(h)``,
    :mod:`gridcoll.runtime.host`), and the process's plan cache (a hit costs a few
    microseconds); frugal (:data:`gridcoll.tune.FRUGAL`: fewer messages for at most 1 %
    more predicted time, since every message costs CPU the ranks' own work needs). A
    builder that reorders operands, named for a non-commutative
    operation, raises :class:`~gridcoll.errors.ParameterError` there. ``counts``: an
    uneven call's bytes per block, ``nbytes`` their largest (:func:`gridcoll.tune.plan`).
    """
    name, params = state.algos.get(op, ("auto", None))
    return plan(
        state.grid,
        Call(op, nbytes, root, itemsize=itemsize, commutative=commutative, counts=counts),
        PlanOptions(
            algo=name, params=params, host_overhead=state.host_overhead, native=True, frugal=FRUGAL
        ),
        cache=PROCESS.plans,
    )


def native_plan(state: State, op: str, nbytes: int, root: int, reason: str) -> Plan:
    """The plan of a call only the MPI library's own collective can make (a datatype
    with holes: no schedule can say where its bytes are): ``tune.plan`` with
    ``algo="native"``, its reason replaced by ``reason``."""
    chosen = plan(
        state.grid,
        Call(op, 0 if op == "barrier" else max(nbytes, 1), root),
        PlanOptions(algo=NATIVE, host_overhead=state.host_overhead, native=True),
        cache=PROCESS.plans,
    )
    return replace(chosen, reason=reason)


def serves_natively(state: State, op: str) -> bool:
    """Whether the communicator hands every call of ``op`` to the MPI library
    (``algo="native"``, or ``auto`` on one cluster: :func:`gridcoll.tune.native_reason`),
    whatever its size: a v-variant then needs no agreement on counts first."""
    return bool(native_reason(state.grid, state.algos.get(op, ("auto", None))[0]))


def last_plan(state: State) -> Plan | None:
    """The plan of the communicator's last call (None before the first); a hot-path
    native broadcast's is made now, from its recorded (nbytes, root, itemsize)."""
    if isinstance(state.last, tuple):
        state.last = plan_call(state, "bcast", *state.last)
    return state.last


# -- one call signature, made ready ------------------------------------------------------


def prepare(
    state: State,
    rank: int,
    op: str,
    nbytes: int,
    root: int,
    itemsize: int,
    commutative: bool = True,
    inplace: bool = False,
    uneven: Uneven | None = None,
) -> Prepared:
    """The plan, compiled program and layout of one call (cached per signature in the
    communicator's memo, table ``prepared``, LRU-bounded by ``Comm.CACHE_SIZE``).

    ``inplace``: the rank passed ``MPI.IN_PLACE`` (its layout differs). ``uneven``: a
    v-variant's (counts, sdispls, rdispls) in bytes (:data:`Uneven`; ``nbytes`` the
    largest count). A hit costs a dictionary lookup; a miss a plan (a cache hit in the
    process's plan cache for a signature another communicator met), a build, a layout
    and a compile, O(messages of the rank).
    """
    key = (op, nbytes, root, itemsize, commutative, inplace, uneven)
    return state.memo.get(
        "prepared",
        key,
        lambda: _make(state, rank, op, nbytes, root, itemsize, commutative, inplace, uneven),
        maxsize=state.cache_size,
    )


def _make(
    state: State,
    rank: int,
    op: str,
    nbytes: int,
    root: int,
    itemsize: int,
    commutative: bool,
    inplace: bool,
    uneven: Uneven | None = None,
) -> Prepared:
    counts, sdispls, rdispls = uneven or (None, None, None)
    chosen = plan_call(state, op, nbytes, root, itemsize, commutative, counts)
    if chosen.native:
        return Prepared(chosen, None)
    schedule = chosen.build()  # on the grid it was planned on: the effective grid
    call = CallInfo.of(schedule, itemsize=itemsize, grid_id=state.grid_id)
    layout = None
    if op not in UNLAID:
        layout = layout_for(schedule, rank, inplace=inplace, sdispls=sdispls, rdispls=rdispls)
    program = compile_program(
        schedule,
        rank,
        emulator=state.emulator,
        call=call,
        layout=None if layout is None else layout.offsets,
    )
    return Prepared(chosen, program, layout)


def compiled(state: State, schedule: Schedule, rank: int) -> Program:
    """The rank's program of a caller's schedule (``Comm.execute``), cached per schedule
    object in the memo's ``programs`` table (the entry holds the schedule, so its id is
    not reused while cached)."""

    def compile_it() -> tuple[Schedule, Program]:
        call = CallInfo.of(schedule, grid_id=state.grid_id)
        return schedule, compile_program(schedule, rank, emulator=state.emulator, call=call)

    return state.memo.get("programs", id(schedule), compile_it, maxsize=state.cache_size)[1]


# -- running -------------------------------------------------------------------------------


def run(
    state: State,
    program: Program,
    view: _np.ndarray,
    reduce: Callable | None = None,
    dtype: str = "",
    redop: str = "",
    timing: WanTimes | None = None,
) -> None:
    """Run a compiled program on ``view`` as the communicator's next call (its own
    sequence number and tag), then look for strays and notices; ``timing`` notes its
    wide-area messages' times (:class:`~gridcoll.runtime.executor.WanTimes`).

    ``dtype`` (the datatype's signature) and ``redop`` (the reduction operation's name)
    go into every header with the program's own identity and the digest of the empty
    calls before this one. A notice that this call failed elsewhere, held since an
    earlier call, fails it before it sends anything. A failure is noted in the ledger
    (the call's strays are drained later); unless the error came from another rank's
    notice, this rank then sends one to every other rank (a :class:`MismatchError`, or
    any exception of the call itself, such as a user's reduction operation that
    raised: that exception propagates unchanged here). The communicator stays usable.
    """
    state.seq += 1
    call = program.call.numbered(state.seq, dtype, redop, state.prior)
    state.prior = 0
    tag = _tag(state, state.seq)
    ledger = state.ledger
    try:
        if ledger.failed:
            _drain_failed(state)
        if ledger.held:
            told = held_notice(state.private, state.seq, ledger)
            if told is not None:
                raise told
        execute(
            program,
            state.private,
            view,
            emulator=state.emulator,
            timeout=state.timeout,
            tag=tag,
            reduce=reduce,
            doorbells=state.bells,
            call=call,
            notice_tag=state.notice_tag,
            ledger=ledger,
            timing=timing,
        )
        stray = _check_strays(state)
    except CollectiveError as err:
        _failed(state, err, None if err.relayed else _notice_kind(err), str(err))
        raise
    except BaseException as err:
        text = f"{type(err).__name__}: {err}"
        rank = state.private.Get_rank()
        _failed(state, CollectiveError(text, rank=rank), NOTICE_ERROR, f"rank {rank}: {text}")
        raise
    if stray is not None:  # this call, or the one before, ran with other arguments
        err, seq = stray
        _failed(state, err, NOTICE_MISMATCH, str(err), seq)
        raise err


def skip_empty(
    state: State, op: str, root: int, itemsize: int, dtype: str = "", redop: str = ""
) -> None:
    """A call of ``op`` that moves no byte on this rank (a zero-length buffer): it
    completes here without a message, as MPI lets it, and takes its call number, so
    the ranks' numbers stay in step. Its arguments go into the digest the next call's
    headers carry (:func:`~gridcoll.runtime.header.empty_digest`), so ranks that
    disagree on them fail there; a peer that waits for this rank in this call (it
    moves data in it) is told by a notice (:func:`~gridcoll.runtime.notices.take_notice`)."""
    state.seq += 1
    call = CallInfo(state.seq, root, 0, itemsize, "", 0, state.grid_id, op, dtype, redop)
    state.ledger.note_empty(call)
    state.prior = empty_digest(state.prior, call)
    if state.ledger.held:
        told = held_notice(state.private, state.seq, state.ledger)
        if told is not None:
            raise told


def _failed(
    state: State, err: CollectiveError, kind: int | None, text: str, seq: int | None = None
) -> None:
    """Call ``seq`` (default: the last, ``state.seq``) failed here with ``err``: note it
    (its strays are drained later) and, with a notice ``kind``, tell every other rank."""
    seq = state.seq if seq is None else seq
    state.ledger.note_failed(seq)
    if kind is not None:
        _notify(state, kind, text, seq)
    note_failure(state, err)


def _drain_failed(state: State) -> None:
    """Drop the strays of the recent failed calls (:func:`~gridcoll.runtime.notices.drain`)."""
    tags = []
    for seq in state.ledger.failed:
        tag = _tag(state, seq)
        tags += [tag, tag + 1]
    drain(state.private, tags)
    state.ledger.forget_failed(state.seq)


def _notice_kind(err: CollectiveError) -> int:
    if isinstance(err, MismatchError):
        return NOTICE_MISMATCH
    if isinstance(err, CollectiveTimeout):
        return NOTICE_TIMEOUT
    return NOTICE_ERROR


def refuse(state: State, err: CollectiveError) -> None:
    """Fail this rank's next call before its program runs (a v-variant whose own buffer
    disagrees with the counts the ranks agreed on): the call takes its number, as the
    others' does, and every other rank gets a notice, as when a program fails
    (:func:`run`), so they raise too instead of waiting for this rank. Raises ``err``."""
    state.seq += 1
    state.prior = 0
    _failed(state, err, _notice_kind(err), str(err))
    raise err


def _notify(state: State, kind: int, text: str, seq: int) -> None:
    """Tell every other rank that this call failed here (kept in the ledger's orphans
    until sent: :meth:`~gridcoll.runtime.state.State.close` completes them)."""
    comm = state.private
    if comm is None or comm.Get_size() < 2:
        return
    with suppress(MPI.Exception):  # best effort: else the others time out
        state.ledger.orphans.append(
            send_notice(comm, state.notice_tag, seq, kind, text, state.bells)
        )


def _tag(state: State, seq: int) -> int:
    return 2 * ((seq + state.tag_offset) % state.ntags)


def _check_strays(state: State) -> tuple[MismatchError, int] | None:
    """After a call, no message of it (or of the one before) may still be waiting here:
    all this rank expected has been received, so another rank ran a different schedule
    (a root, size or datatype that does not match, or a call this rank did not make).
    Returns the :class:`MismatchError` and the number of the call it is about; raises
    what a notice of this call says.

    Fast path: one probe for any message; usually nothing is waiting. Otherwise the
    first waiting message proves nothing (a message of a later call from a rank that is
    already ahead is fine, and so is a stale one of an earlier communicator whose
    context MPI recycled: its tags differ), and it may hide a stray behind it, so the
    tags of this call and the one before are probed by name (not those of a failed
    call: its strays are expected, and drained). A stray from a peer this rank
    received from in this call was sent before that peer's message of this call, and
    the library delivers one pair's messages in order (MPICH's queues do), so it is
    waiting here and found without fail; one from a rank that only sent to others may
    still be on its way, and is found after the next call (the ranks all completed
    that call, so this one is reported as the previous call's: the ranks that
    completed it drop the notice and drain its strays).
    """
    comm = state.private
    if not state.ledger.held and not comm.Iprobe(MPI.ANY_SOURCE, MPI.ANY_TAG):
        return None
    err = take_notice(comm, state.notice_tag, state.seq, ledger=state.ledger)
    if err is None:
        err = held_notice(comm, state.seq, state.ledger)
    if err is not None:
        raise err
    status = MPI.Status()
    for seq in (state.seq, state.seq - 1):
        if seq in state.ledger.failed:
            continue
        tag = _tag(state, seq)
        for t in (tag + 1, tag):  # a stray's header precedes its data
            if comm.Iprobe(MPI.ANY_SOURCE, t, status):
                src, rank = status.Get_source(), comm.Get_rank()
                which = "" if seq == state.seq else " (the call before this one)"
                return MismatchError(
                    f"rank {rank}: rank {src} sent a message this rank does not expect in "
                    f"call {seq & 0xFFFFFFFF}{which}: the ranks called the collective with "
                    "mismatched arguments (roots, sizes, datatypes or call order)",
                    rank=rank,
                    peer=src,
                ), seq
    return None


def run_native(
    state: State,
    call: Callable[[MPI.Intracomm], object],
    what: str,
    agree: dict | None = None,
) -> object:
    """``call(private communicator)``: one of the MPI library's own collectives (or
    mpi4py's object collective over them), its result returned, called
    blocking as a plain mpi4py program calls it (bench/native.py: a request and a test
    loop cost 2-7x on small messages), under the process's watchdog: a rank that never
    joins ends the job after the timeout instead of hanging it
    (:mod:`gridcoll.runtime.watchdog`; in the watchdog's slot of the progress thread
    when a non-blocking call runs it there). With ``GRIDCOLL_CHECK`` (``state.check``),
    the ranks first check that they agree on ``agree`` (:func:`check_agreement`)."""
    if state.check and agree is not None:
        check_agreement(state, agree)
    dog, progress = state.watchdog, state.progress
    slot = PROGRESS if progress is not None and progress.runs_here() else MAIN
    dog.arm(state.timeout, what, slot)
    try:
        return call(state.private)
    finally:
        dog.disarm(slot)


def check_agreement(state: State, fields: dict) -> None:
    """Raise :class:`MismatchError` on every rank unless all ranks give the same
    ``fields`` (the collective, root, size, datatype and operation of a call the MPI
    library runs itself, with no gridcoll header to carry them). One
    ``MPI_Iallreduce`` (``MAX``) of each field's CRC-32 and its negation: a field
    differs somewhere iff its maximum and minimum differ, and every rank sees the same
    result, so all raise in the same call (the cost of ``GRIDCOLL_CHECK``)."""
    names = list(fields)
    crcs = [zlib.crc32(repr(fields[k]).encode()) for k in names]
    mine = _np.array(crcs + [-c for c in crcs], dtype=_np.int64)
    out = _np.empty_like(mine)
    comm = state.private
    wait(comm.Iallreduce(mine, out, MPI.MAX), state.timeout, what="checking the call")
    differ = [k for i, k in enumerate(names) if out[i] != -out[len(names) + i]]
    if differ:  # every rank sees the same result: all raise, none calls the library
        raise MismatchError(
            f"rank {comm.Get_rank()}: the ranks called a native {fields.get('collective')} "
            f"with different {', '.join(differ)} (this rank: "
            + ", ".join(f"{k} {fields[k]!r}" for k in differ)
            + "); found by GRIDCOLL_CHECK",
            rank=comm.Get_rank(),
        )
