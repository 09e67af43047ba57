"""gridcoll's collectives: the helpers behind :class:`gridcoll.Comm`'s methods.

One helper per collective (``bcast``, ``scatter``, ``gather``, ``allgather``,
``alltoall``, ``reduce``, ``allreduce``, ``barrier``, and the object forms), all over one
path: parse mpi4py's buffer specs (:mod:`gridcoll.runtime.buffers`), check what can be
checked locally (the root, the counts of the rank's own send and receive buffers, the
operation and its datatype), then :func:`_call`: the communicator made ready
(:func:`gridcoll.runtime.state.ready`), the call's plan, program and layout
(:func:`gridcoll.runtime.prepare.prepare`, cached per call signature), the rank's blocks
copied into the local buffer the program runs on (:mod:`gridcoll.runtime.layout`), the
program run (:func:`gridcoll.runtime.prepare.run`), the blocks copied out. Every error
of the arguments is raised before any message is sent. Counts that differ *across*
ranks are caught by the headers every receiver checks
(:class:`~gridcoll.runtime.executor.CallInfo`), which raise
:class:`~gridcoll.runtime.MismatchError`.

A plan whose algorithm is ``native`` (``algo="native"``, or ``auto`` on a one-cluster
communicator: no wide-area link to plan around) hands the call to the MPI library's own
collective, called blocking under the watchdog (:mod:`gridcoll.runtime.watchdog`); so
does a buffer in device memory or a datatype with holes (no schedule can read those
bytes from the CPU, or say where they are). The broadcast of
a one-cluster communicator has a hot path (:func:`bcast`): a type check, the call's
record for ``explain()``, the watchdog's arm and disarm around ``MPI_Bcast`` (about
1 us over mpi4py's own ``Bcast``, ``bench/native.py``).

Reductions apply the MPI operation to each received segment with
``Op.Reduce_local(inbuf, inoutbuf)``, which computes ``inoutbuf = inbuf (op)
inoutbuf``: a receive with ``incoming_first`` (``held = incoming (op) held``) is
``Reduce_local(incoming, held)``; a default one (``held = held (op) incoming``) is
``Reduce_local(held, incoming)`` followed by a copy of the result into ``held``, the
operand order :func:`gridcoll.schedule.validate` proves for non-commutative operations
(the result is ``x_0 (op) x_1 (op) ... (op) x_{P-1}``, as MPI defines it). For a
commutative operation the copy is skipped.

The lower-case object methods pickle: ``bcast`` sends a 256-byte head (the length and
the first bytes) then the rest; ``scatter``, ``gather``, ``allgather`` and ``alltoall``
agree on the largest pickle (a gridcoll broadcast or allreduce of one integer), then
move padded blocks with the buffer method; ``reduce`` and ``allreduce`` gather
(allgather) the objects and fold them in rank order, ``op(res, x_i)``, as mpi4py's own
reduction of objects does.

With a log (``GRIDCOLL_LOG``, ``Comm(log=...)``), every call that reaches a plan
(:func:`_call`, and a datatype with holes) writes its line after it returns
(:mod:`gridcoll.runtime.record`): ``measured_s`` is ``time.monotonic`` from after
the plan's lookup to the last copy out, ``prepare_s`` the lookup (planning and
compiling on a signature's first call). Without one the cost is one attribute test
per call, and the broadcast's hot path (taken only without a log) is as it was.

Where this sits in :mod:`gridcoll.runtime`: after ``buffers``, ``state`` and
``prepare``, before ``comm`` (whose methods are one-liners over these helpers).
"""

from __future__ import annotations

import time as _time
import zlib as _zlib
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from mpi4py import MPI

from gridcoll.errors import MismatchError, ParameterError
from gridcoll.memo import Memo
from gridcoll.runtime import adaptive as _adaptive
from gridcoll.runtime.buffers import (
    bytes_of,
    check_counts,
    check_root,
    data_bytes,
    datatype_of,
    is_in_place,
    parse,
    parse_vector,
    signature,
)
from gridcoll.runtime.prepare import (
    Uneven,
    compiled,
    last_plan,
    native_plan,
    plan_call,
    prepare,
    refuse,
    run,
    run_native,
    serves_natively,
    skip_empty,
)
from gridcoll.runtime.state import placement_note, ready, state_of
from gridcoll.schedule.ir import Schedule

__all__ = [
    "allgather",
    "allgather_obj",
    "allgatherv",
    "allreduce",
    "allreduce_obj",
    "alltoall",
    "alltoall_obj",
    "alltoallv",
    "barrier",
    "bcast",
    "bcast_obj",
    "check_op",
    "execute",
    "explain",
    "exscan",
    "exscan_obj",
    "gather",
    "gather_obj",
    "gatherv",
    "op_label",
    "reduce",
    "reduce_obj",
    "reduce_scatter",
    "reduce_scatter_block",
    "reducer",
    "scan",
    "scan_obj",
    "scatter",
    "scatter_obj",
    "scatterv",
]


# -- running one call ------------------------------------------------------------------


_NOTHING = np.empty(0, dtype=np.uint8)


def _local(prepared: Any, send: np.ndarray | None, recv: np.ndarray | None) -> Any:
    layout = prepared.layout
    if layout.run_on == "recv" and recv is not None:
        return recv
    if layout.run_on == "send" and send is not None:
        return send
    if layout.size == 0:  # a rank with nothing of its own (an uneven call's zero block)
        return _NOTHING
    if prepared.staging is None or prepared.staging.size != layout.size:
        prepared.staging = np.empty(layout.size, dtype=np.uint8)
    return prepared.staging


def _call(
    comm: Any,
    op: str,
    *,
    root: int,
    nbytes: int,
    itemsize: int,
    send: np.ndarray | None,
    recv: np.ndarray | None,
    inplace: bool,
    native: Callable[[MPI.Intracomm], object],
    reducer: Callable | None = None,
    commutative: bool = True,
    dtype: str = "",
    redop: str = "",
    uneven: Uneven | None = None,
) -> None:
    """Prepare (cached), lay out, run. ``send``/``recv``: the rank's byte views (None
    where MPI ignores them); with ``MPI.IN_PLACE`` (``inplace``) ``send`` is the receive
    buffer, which then holds the rank's input where MPI says (layout's send map). A
    broadcast or barrier runs on ``send`` itself (the message; empty for a barrier).
    ``dtype`` (:func:`~gridcoll.runtime.buffers.signature`) and ``redop``
    (:func:`op_label`) go into every header, so ranks that disagree on them fail.
    ``uneven``: a v-variant's counts and this rank's displacements
    (:data:`~gridcoll.runtime.prepare.Uneven`)."""
    state = ready(comm)
    logged = state.log is not None
    start = _time.monotonic() if logged else 0.0
    rank = comm.Get_rank()
    prepared = prepare(state, rank, op, nbytes, root, itemsize, commutative, inplace, uneven)
    state.last = prepared.plan

    def run_call() -> None:
        ran = _time.monotonic() if logged else 0.0
        if prepared.program is None:
            agree = {
                "collective": op,
                "root": root,
                "size": nbytes,
                "itemsize": itemsize,
                "datatype": dtype,
                "reduction operation": redop,
            }
            run_native(state, native, f"rank {rank}: native {op} (root {root})", agree)
        elif prepared.layout is None:
            run(state, prepared.program, send, reducer, dtype, redop)
        else:
            local = _local(prepared, send, recv)
            for a, d, n in prepared.layout.copy_in:
                local[d : d + n] = send[a : a + n]
            run(state, prepared.program, local, reducer, dtype, redop)
            for a, d, n in prepared.layout.copy_out:
                recv[d : d + n] = local[a : a + n]
        if logged:
            _record(comm, state, prepared.plan, start, ran)

    _now_or_deferred(state, run_call)


def _now_or_deferred(state: Any, job: Callable[[], None]) -> None:
    """Run ``job`` (the call's messages), or hand it to the non-blocking call being
    started (:mod:`gridcoll.runtime.nonblocking`). On the progress thread (a job that
    makes calls of its own: a v-variant agreeing on its counts) it runs at once, even
    while the caller's thread starts another non-blocking call."""
    deferring = state.deferring
    if deferring is None or (state.progress is not None and state.progress.runs_here()):
        job()
    else:
        deferring(job)


def _record(comm: Any, state: Any, plan: Any, start: float, ran: float) -> None:
    """The call's line in the communicator's log (:mod:`gridcoll.runtime.record`):
    its ``plan``, the seconds from ``ran`` to now (the call itself) and from ``start``
    to ``ran`` (its preparation: a plan, build and compile on a signature's first call,
    a cache lookup after; for a non-blocking call, also its wait for the calls started
    before it), on this rank."""
    end = _time.monotonic()
    state.log.write(plan, end - ran, ran - start, comm.Get_size(), state.grid.name)


_NATIVE_ONLY = (
    "its buffer is in device memory, or its datatype is not contiguous: only the MPI "
    "library can move its bytes"
)


def _native_only(
    comm: Any, op: str, call: Callable[[MPI.Intracomm], object], buf: Any, root: int = 0
) -> None:
    """A buffer in device memory or a datatype with holes: the MPI library's own
    collective (no schedule can read those bytes, or say where they are, from the
    CPU), as a plain mpi4py program calls it; ``buf`` sizes its plan
    (:func:`~gridcoll.runtime.buffers.data_bytes`)."""
    state = ready(comm)
    logged = state.log is not None
    start = _time.monotonic() if logged else 0.0
    reason = _NATIVE_ONLY
    state.last = native_plan(state, op, data_bytes(buf), root, reason)
    what = f"rank {comm.Get_rank()}: native {op}"
    plan = state.last
    agree = {"collective": op, "root": root, "size": data_bytes(buf)}

    def run_call() -> None:
        ran = _time.monotonic() if logged else 0.0
        run_native(state, call, what, agree)
        if logged:
            _record(comm, state, plan, start, ran)

    _now_or_deferred(state, run_call)


def _empty(comm: Any, op: str, root: int, itemsize: int, dtype: str, redop: str = "") -> None:
    """A call that moves no byte on this rank completes here, without a message, as
    MPI lets it (:func:`~gridcoll.runtime.prepare.skip_empty`: it takes its call
    number, and its arguments are checked in the next call's headers); in order after
    the non-blocking calls started before it. On one process, nothing."""
    if comm.Get_size() == 1:
        return
    state = ready(comm)
    _now_or_deferred(state, lambda: skip_empty(state, op, root, itemsize, dtype, redop))


def _copy_local(send: np.ndarray, recv: np.ndarray | None) -> None:
    """A one-rank collective: the rank's send bytes are its result."""
    if recv is not None and send is not None and recv is not send:
        recv[: send.size] = send


# -- broadcast -------------------------------------------------------------------------


def bcast(comm: Any, buf: Any, root: int) -> None:
    """``MPI_Bcast``: the root's ``buf`` to every rank's."""
    state = comm.gridcoll_state  # state_of(comm), inlined for speed
    if (
        state is not None
        and state.native_bcast
        and state.private is not None
        and state.progress is None  # no non-blocking call ever: none outstanding
        and type(buf) is np.ndarray
        and buf.size
    ):
        # The hot path of a one-cluster communicator: straight to MPI_Bcast, whose
        # mpi4py wrapper checks the buffer and the root (bench/native.py); the plan is
        # made only if explain() asks (prepare.last_plan). run_native, inlined for speed.
        state.last = (buf.nbytes, root, buf.itemsize)
        dog = state.watchdog
        dog.arm(state.timeout, "native broadcast")
        try:
            state.private.Bcast(buf, root)
        finally:
            dog.disarm()
        return
    spec = parse(buf, root == comm.Get_rank())
    check_root(comm, root)
    if spec is None:
        return _native_only(comm, "bcast", lambda c: c.Bcast(buf, root), buf, root)
    view, itemsize = spec.view, spec.itemsize
    if comm.Get_size() == 1:
        return None
    if view.size == 0:
        return _empty(comm, "bcast", root, itemsize, signature(spec))
    if state is not None and state.adaptive_on and state.deferring is None:
        state = ready(comm)
        return _adaptive.of(state).bcast(view, root, itemsize, signature(spec))
    return _call(
        comm,
        "bcast",
        root=root,
        nbytes=view.size,
        itemsize=itemsize,
        send=view,
        recv=view,
        inplace=False,
        native=lambda c: c.Bcast([view, MPI.BYTE], root),
        dtype=signature(spec),
    )


# -- scatter, gather, allgather, all-to-all ------------------------------------------


def scatter(comm: Any, sendbuf: Any, recvbuf: Any, root: int) -> None:
    """``MPI_Scatter``: block ``i`` of the root's ``sendbuf`` to rank ``i``'s ``recvbuf``."""
    rank, size = comm.Get_rank(), comm.Get_size()
    check_root(comm, root)
    inplace = rank == root and is_in_place(recvbuf)
    send = parse(sendbuf, True, size) if rank == root else None
    recv = None if inplace else parse(recvbuf, False)
    if (rank == root and send is None) or (not inplace and recv is None):
        return _native_only(
            comm,
            "scatter",
            lambda c: c.Scatter(sendbuf, recvbuf, root),
            sendbuf if rank == root else recvbuf,
            root,
        )
    if send is not None and recv is not None:
        check_counts("Scatter", send, recv)
    block = send if rank == root else recv
    nbytes = block.count * block.itemsize
    if nbytes == 0:
        return _empty(comm, "scatter", root, block.itemsize, signature(block))
    if size == 1:
        return _copy_local(send.view, None if recv is None else recv.view)
    return _call(
        comm,
        "scatter",
        root=root,
        nbytes=nbytes,
        itemsize=block.itemsize,
        send=None if send is None else send.view,
        recv=None if recv is None else recv.view,
        inplace=inplace,  # the root's block stays in sendbuf: no receive map (layout)
        native=lambda c: c.Scatter(sendbuf, recvbuf, root),
        dtype=signature(block),
    )


def gather(comm: Any, sendbuf: Any, recvbuf: Any, root: int) -> None:
    """``MPI_Gather``: every rank's ``sendbuf`` to block ``i`` of the root's ``recvbuf``."""
    rank, size = comm.Get_rank(), comm.Get_size()
    check_root(comm, root)
    inplace = rank == root and is_in_place(sendbuf)
    recv = parse(recvbuf, False, size) if rank == root else None
    send = None if inplace else parse(sendbuf, True)
    if (rank == root and recv is None) or (not inplace and send is None):
        return _native_only(
            comm,
            "gather",
            lambda c: c.Gather(sendbuf, recvbuf, root),
            recvbuf if inplace else sendbuf,
            root,
        )
    if send is not None and recv is not None:
        check_counts("Gather", send, recv)
    block = recv if rank == root else send
    nbytes = block.count * block.itemsize
    if nbytes == 0:
        return _empty(comm, "gather", root, block.itemsize, signature(block))
    if size == 1:
        return None if inplace else _copy_local(send.view, recv.view)
    return _call(
        comm,
        "gather",
        root=root,
        nbytes=nbytes,
        itemsize=block.itemsize,
        send=recv.view if inplace else send.view,
        recv=None if recv is None else recv.view,
        inplace=inplace,
        native=lambda c: c.Gather(sendbuf, recvbuf, root),
        dtype=signature(block),
    )


def allgather(comm: Any, sendbuf: Any, recvbuf: Any) -> None:
    """``MPI_Allgather``: every rank's ``sendbuf`` to block ``i`` of every ``recvbuf``."""
    size = comm.Get_size()
    inplace = is_in_place(sendbuf)
    recv = parse(recvbuf, False, size)
    send = None if inplace else parse(sendbuf, True)
    if recv is None or (not inplace and send is None):
        return _native_only(comm, "allgather", lambda c: c.Allgather(sendbuf, recvbuf), recvbuf)
    if send is not None:
        check_counts("Allgather", send, recv)
    return _rootless(
        comm, "allgather", send, recv, inplace, lambda c: c.Allgather(sendbuf, recvbuf)
    )


def alltoall(comm: Any, sendbuf: Any, recvbuf: Any) -> None:
    """``MPI_Alltoall``: block ``j`` of rank ``i``'s ``sendbuf`` to block ``i`` of rank
    ``j``'s ``recvbuf``."""
    size = comm.Get_size()
    inplace = is_in_place(sendbuf)
    recv = parse(recvbuf, False, size)
    send = None if inplace else parse(sendbuf, True, size)
    if recv is None or (not inplace and send is None):
        return _native_only(comm, "alltoall", lambda c: c.Alltoall(sendbuf, recvbuf), recvbuf)
    if send is not None:
        check_counts("Alltoall", send, recv)
    return _rootless(comm, "alltoall", send, recv, inplace, lambda c: c.Alltoall(sendbuf, recvbuf))


def _rootless(comm: Any, op: str, send: Any, recv: Any, inplace: bool, native: Callable) -> None:
    nbytes = recv.count * recv.itemsize
    if nbytes == 0:
        return _empty(comm, op, 0, recv.itemsize, signature(recv))
    if comm.Get_size() == 1:
        return None if inplace else _copy_local(send.view, recv.view)
    return _call(
        comm,
        op,
        root=0,
        nbytes=nbytes,
        itemsize=recv.itemsize,
        send=recv.view if inplace else send.view,
        recv=recv.view,
        inplace=inplace,
        native=native,
        dtype=signature(recv),
    )


# -- the uneven (v) forms ------------------------------------------------------------
#
# Each is its equal-block collective's schedule trimmed to the counts
# (gridcoll.schedule.transform.trimmed), so every builder serves it. Relays need every
# block's size, which MPI gives only to some ranks: Scatterv's and Gatherv's counts are
# the root's (a gridcoll broadcast of P integers first), Alltoallv's are spread over
# the ranks (a gridcoll allgather of each rank's send and receive counts), Allgatherv's
# every rank has. A rank whose own buffer disagrees with the agreed counts fails its
# call and tells the others (prepare.refuse). On a communicator served by the MPI
# library (one cluster, algo="native") the call goes there at once, with no agreement.


def _native_v(comm: Any, op: str, call: Callable[[MPI.Intracomm], object], root: int) -> None:
    """A v-variant served by the MPI library (one cluster, ``algo="native"``, device
    memory, a datatype with holes); its plan (for ``explain()``) is sized by nothing
    (counts differ)."""
    state = ready(comm)
    logged = state.log is not None
    start = _time.monotonic() if logged else 0.0
    if serves_natively(state, op):
        plan = plan_call(state, op, 1, root, 1)  # its reason: one cluster, or algo=native
    else:
        plan = native_plan(state, op, 1, root, _NATIVE_ONLY)
    state.last = plan

    def run_call() -> None:
        ran = _time.monotonic() if logged else 0.0
        run_native(state, call, f"rank {comm.Get_rank()}: native {op}v", {"collective": op + "v"})
        if logged:
            _record(comm, state, plan, start, ran)

    _now_or_deferred(state, run_call)


def _agreed(comm: Any, mine: np.ndarray, root: int | None) -> np.ndarray:
    """The counts every rank plans with: the root's ``mine`` broadcast (``root`` given),
    or every rank's ``mine`` gathered in rank order (``root`` None)."""
    if root is not None:
        bcast(comm, mine, root)
        return mine
    out = np.empty(comm.Get_size() * mine.size, dtype=np.int64)
    allgather(comm, mine, out)
    return out


def _disagree(comm: Any, what: str) -> None:
    """This rank's buffer disagrees with the agreed counts: fail here and tell the others."""
    rank = comm.Get_rank()
    refuse(state_of(comm), MismatchError(f"rank {rank}: {what}", rank=rank))


def _uneven_call(
    comm: Any,
    op: str,
    counts: Sequence[int],
    root: int,
    itemsize: int,
    send: np.ndarray | None,
    recv: np.ndarray | None,
    inplace: bool,
    native: Callable[[MPI.Intracomm], object],
    dtype: str,
    sdispls: Sequence[int] | None = None,
    rdispls: Sequence[int] | None = None,
) -> None:
    """The trimmed schedule's call (:func:`_call`); nothing to move is an empty call."""
    counts = tuple(int(c) for c in counts)
    nbytes = max(counts)
    if nbytes == 0:
        return _empty(comm, op, root, itemsize, dtype)
    uneven = (
        counts,
        None if sdispls is None else tuple(sdispls),
        None if rdispls is None else tuple(rdispls),
    )
    return _call(
        comm,
        op,
        root=root,
        nbytes=nbytes,
        itemsize=itemsize,
        send=send,
        recv=recv,
        inplace=inplace,
        native=native,
        dtype=dtype,
        uneven=uneven,
    )


def _deferred_whole(comm: Any, body: Callable[[], None]) -> None:
    """Run ``body`` (agreement, then the call) now, or as one job of the non-blocking
    call being started: the agreement's own calls then run on the progress thread."""
    _now_or_deferred(ready(comm), body)


def scatterv(comm: Any, sendbuf: Any, recvbuf: Any, root: int) -> None:
    """``MPI_Scatterv``: block ``i`` of the root's ``sendbuf`` (``counts[i]`` items at
    ``displs[i]``) to rank ``i``'s ``recvbuf``."""
    rank, size = comm.Get_rank(), comm.Get_size()
    check_root(comm, root)
    inplace = rank == root and is_in_place(recvbuf)
    send = parse_vector(sendbuf, True, size) if rank == root else None
    recv = None if inplace else parse(recvbuf, False)

    def native(c):
        return c.Scatterv(sendbuf, recvbuf, root)

    if (rank == root and send is None) or (not inplace and recv is None):
        return _native_v(comm, "scatter", native, root)
    if size == 1:
        n = send.counts[0] * send.itemsize
        start = send.displs[0] * send.itemsize
        return None if inplace else _copy_local(send.view[start : start + n], recv.view)
    if serves_natively(ready(comm), "scatter"):
        return _native_v(comm, "scatter", native, root)
    itemsize = (send or recv).itemsize
    dtype = signature(recv) if recv is not None else signature(send.block_spec())

    def body() -> None:
        mine = np.zeros(size, dtype=np.int64)
        if rank == root:
            mine[:] = send.byte_counts()
        counts = _agreed(comm, mine, root)
        if recv is not None and counts[rank] > recv.view.size:
            _disagree(comm, f"Scatterv: receive buffer of {recv.view.size} B for a block of "
                      f"{counts[rank]} B")  # fmt: skip
        _uneven_call(
            comm,
            "scatter",
            counts,
            root,
            itemsize,
            None if send is None else send.view,
            None if recv is None else recv.view,
            inplace,
            native,
            dtype,
            sdispls=None if send is None else send.byte_displs(),
        )

    _deferred_whole(comm, body)


def gatherv(comm: Any, sendbuf: Any, recvbuf: Any, root: int) -> None:
    """``MPI_Gatherv``: every rank's ``sendbuf`` to block ``i`` of the root's
    ``recvbuf`` (``counts[i]`` items at ``displs[i]``)."""
    rank, size = comm.Get_rank(), comm.Get_size()
    check_root(comm, root)
    inplace = rank == root and is_in_place(sendbuf)
    recv = parse_vector(recvbuf, False, size) if rank == root else None
    send = None if inplace else parse(sendbuf, True)

    def native(c):
        return c.Gatherv(sendbuf, recvbuf, root)

    if (rank == root and recv is None) or (not inplace and send is None):
        return _native_v(comm, "gather", native, root)
    if size == 1:
        n = recv.counts[0] * recv.itemsize
        start = recv.displs[0] * recv.itemsize
        return None if inplace else _copy_local(send.view[:n], recv.view[start : start + n])
    if serves_natively(ready(comm), "gather"):
        return _native_v(comm, "gather", native, root)
    itemsize = (send or recv).itemsize
    dtype = signature(send) if send is not None else signature(recv.block_spec())

    def body() -> None:
        mine = np.zeros(size, dtype=np.int64)
        if rank == root:
            mine[:] = recv.byte_counts()
        counts = _agreed(comm, mine, root)
        if send is not None and send.view.size != counts[rank]:
            _disagree(comm, f"Gatherv: send buffer of {send.view.size} B for a block of "
                      f"{counts[rank]} B")  # fmt: skip
        _uneven_call(
            comm,
            "gather",
            counts,
            root,
            itemsize,
            recv.view if inplace else send.view,
            None if recv is None else recv.view,
            inplace,
            native,
            dtype,
            rdispls=None if recv is None else recv.byte_displs(),
        )

    _deferred_whole(comm, body)


def allgatherv(comm: Any, sendbuf: Any, recvbuf: Any) -> None:
    """``MPI_Allgatherv``: every rank's ``sendbuf`` to block ``i`` of every ``recvbuf``
    (``counts[i]`` items at ``displs[i]``; every rank has the counts)."""
    rank, size = comm.Get_rank(), comm.Get_size()
    inplace = is_in_place(sendbuf)
    recv = parse_vector(recvbuf, False, size)
    send = None if inplace else parse(sendbuf, True)

    def native(c):
        return c.Allgatherv(sendbuf, recvbuf)

    if recv is None or (not inplace and send is None):
        return _native_v(comm, "allgather", native, 0)
    counts = recv.byte_counts()
    if send is not None and send.view.size != counts[rank]:
        raise ValueError(
            f"Allgatherv: send buffer of {send.view.size} B for a block of {counts[rank]} B"
        )
    if size == 1:
        start = recv.displs[0] * recv.itemsize
        return None if inplace else _copy_local(send.view, recv.view[start:])
    if serves_natively(ready(comm), "allgather"):
        return _native_v(comm, "allgather", native, 0)
    _uneven_call(
        comm,
        "allgather",
        counts,
        0,
        recv.itemsize,
        recv.view if inplace else send.view,
        recv.view,
        inplace,
        native,
        signature(recv.block_spec()),
        rdispls=recv.byte_displs(),
    )


def alltoallv(comm: Any, sendbuf: Any, recvbuf: Any) -> None:
    """``MPI_Alltoallv``: block ``j`` of rank ``i``'s ``sendbuf`` to block ``i`` of
    rank ``j``'s ``recvbuf`` (each side with its own counts and displacements).
    ``MPI.IN_PLACE`` goes to the MPI library."""
    size = comm.Get_size()

    def native(c):
        return c.Alltoallv(sendbuf, recvbuf)

    if is_in_place(sendbuf):
        return _native_v(comm, "alltoall", native, 0)
    send = parse_vector(sendbuf, True, size)
    recv = parse_vector(recvbuf, False, size)
    if send is None or recv is None:
        return _native_v(comm, "alltoall", native, 0)
    if size == 1:
        n, a = send.counts[0] * send.itemsize, send.displs[0] * send.itemsize
        b = recv.displs[0] * recv.itemsize
        if recv.counts[0] * recv.itemsize != n:
            raise ValueError("Alltoallv: send and receive counts differ on one rank")
        return _copy_local(send.view[a : a + n], recv.view[b : b + n])
    if serves_natively(ready(comm), "alltoall"):
        return _native_v(comm, "alltoall", native, 0)

    def body() -> None:
        mine = np.array([*send.byte_counts(), *recv.byte_counts()], dtype=np.int64)
        both = _agreed(comm, mine, None).reshape(size, 2, size)
        sent, expected = both[:, 0, :], both[:, 1, :].T  # [src, dst] each
        if not np.array_equal(sent, expected):
            src, dst = map(int, np.argwhere(sent != expected)[0])
            raise MismatchError(
                f"Alltoallv: rank {src} sends {sent[src, dst]} B to rank {dst}, which "
                f"expects {expected[src, dst]} B",
                rank=comm.Get_rank(),
            )
        _uneven_call(
            comm,
            "alltoall",
            sent.reshape(-1),
            0,
            send.itemsize,
            send.view,
            recv.view,
            False,
            native,
            signature(send.block_spec()),
            sdispls=send.byte_displs(),
            rdispls=recv.byte_displs(),
        )

    _deferred_whole(comm, body)


# -- reductions ------------------------------------------------------------------------


def check_op(op: Any, datatype: MPI.Datatype, memo: Memo | None = None) -> bool:
    """Return whether ``op`` commutes; raise before any message if it cannot reduce
    ``datatype`` (not an ``MPI.Op``, ``MPI.OP_NULL``, or a predefined operation the MPI
    library refuses for that type, found by reducing one zero element locally; with
    ``memo``, once per operation and datatype, in its table ``op_checks``)."""
    if not isinstance(op, MPI.Op):
        raise TypeError(f"op must be an mpi4py MPI.Op (MPI.SUM, MPI.Op.Create(...)), not {op!r}")
    if op == MPI.OP_NULL:
        raise ParameterError("op is MPI.OP_NULL: no reduction operation")
    if op.is_predefined:
        if memo is None:
            _try_op(op, datatype)
        else:
            key = (MPI._handleof(op), MPI._handleof(datatype))
            memo.get("op_checks", key, lambda: _try_op(op, datatype), maxsize=256)
    return bool(op.Is_commutative())


def _try_op(op: MPI.Op, datatype: MPI.Datatype) -> bool:
    """Reduce one zero element of ``datatype`` with ``op`` locally; raise if refused."""
    a = np.zeros(datatype.Get_extent()[1], dtype=np.uint8)
    b = a.copy()
    try:
        op.Reduce_local([a, 1, datatype], [b, 1, datatype])
    except MPI.Exception as err:
        raise ParameterError(
            f"the MPI library refuses reduction operation {_op_name(op)} on datatype "
            f"{datatype.Get_name() or datatype!r}: {err.Get_error_string()}"
        ) from err
    return True


def _op_name(op: MPI.Op) -> str:
    for name in ("SUM", "PROD", "MAX", "MIN", "LAND", "LOR", "LXOR", "BAND", "BOR", "BXOR"):
        if op == getattr(MPI, name):
            return f"MPI.{name}"
    for name in ("MAXLOC", "MINLOC", "REPLACE", "NO_OP"):
        if op == getattr(MPI, name):
            return f"MPI.{name}"
    return repr(op)


_PREDEFINED_OPS = (
    "SUM", "PROD", "MAX", "MIN", "LAND", "LOR", "LXOR", "BAND", "BOR", "BXOR",
    "MAXLOC", "MINLOC", "REPLACE", "NO_OP",
)  # fmt: skip


def op_label(op: MPI.Op) -> str:
    """The reduction operation's name in a header: ``'SUM'``, ``'MAX'``... for MPI's
    predefined operations, ``'user:<crc>'`` for a user's (the CRC-32 of its function's
    module and qualified name, the same on every rank running the same code; ``'user'``
    if mpi4py does not say which function), so SUM on some ranks and MAX on others
    fail instead of returning different results."""
    if op.is_predefined:
        for name in _PREDEFINED_OPS:
            if op == getattr(MPI, name):
                return name
        return f"predefined:{op.toint()}"
    function = _user_function(op)
    if function is None:
        return "user"
    where = f"{getattr(function, '__module__', '')}.{getattr(function, '__qualname__', '')}"
    return f"user:{_zlib.crc32(where.encode()):08x}"


def _user_function(op: MPI.Op) -> Callable | None:
    """The Python function of a user's ``MPI.Op.Create(function, commute)`` (mpi4py
    keeps it for pickling: ``op.__reduce__()``), or None."""
    try:
        _create, args = op.__reduce__()[:2]
        function = args[0]
    except (TypeError, ValueError, IndexError, AttributeError):
        return None
    return function if callable(function) else None


def reducer(op: MPI.Op, datatype: MPI.Datatype, itemsize: int, commutative: bool) -> Callable:
    """The executor's ``reduce(held, incoming, incoming_first)`` for ``op`` (module notes).

    A user's operation is called directly, ``function(inbuf, inoutbuf, datatype)`` as
    MPI calls it, not through ``Op.Reduce_local``: an exception in a function MPI calls
    makes mpi4py abort the whole job, while here it propagates from the collective on
    this rank (and :func:`~gridcoll.runtime.prepare.run` tells the other ranks)."""
    function = None if op.is_predefined else _user_function(op)
    if function is not None:
        return _user_combine(function, datatype, commutative)

    def combine(held: np.ndarray, incoming: np.ndarray, incoming_first: bool) -> None:
        n = held.size // itemsize
        if incoming_first or commutative:
            op.Reduce_local([incoming, n, datatype], [held, n, datatype])
        else:
            op.Reduce_local([held, n, datatype], [incoming, n, datatype])
            held[:] = incoming

    return combine


def _user_combine(function: Callable, datatype: MPI.Datatype, commutative: bool) -> Callable:
    """The user's ``function(inbuf, inoutbuf, datatype)`` on ``MPI.buffer`` objects of
    the segment's bytes, what mpi4py hands it (``op_user_call_mpi``: ``mpibuf``)."""
    view = MPI.buffer.frombuffer

    def combine(held: np.ndarray, incoming: np.ndarray, incoming_first: bool) -> None:
        if incoming_first or commutative:
            function(view(incoming), view(held), datatype)
        else:
            function(view(held), view(incoming), datatype)
            held[:] = incoming

    return combine


def reduce(comm: Any, sendbuf: Any, recvbuf: Any, op: Any, root: int) -> None:
    """``MPI_Reduce``: ``x_0 (op) ... (op) x_{P-1}`` element-wise into the root's ``recvbuf``."""
    rank = comm.Get_rank()
    check_root(comm, root)
    _reduction(comm, "reduce", sendbuf, recvbuf if rank == root else None, op, root)


def allreduce(comm: Any, sendbuf: Any, recvbuf: Any, op: Any) -> None:
    """``MPI_Allreduce``: ``x_0 (op) ... (op) x_{P-1}`` element-wise into every ``recvbuf``."""
    _reduction(comm, "allreduce", sendbuf, recvbuf, op, 0)


def scan(comm: Any, sendbuf: Any, recvbuf: Any, op: Any) -> None:
    """``MPI_Scan``: ``x_0 (op) ... (op) x_i`` element-wise into rank ``i``'s ``recvbuf``."""
    _reduction(comm, "scan", sendbuf, recvbuf, op, 0)


def exscan(comm: Any, sendbuf: Any, recvbuf: Any, op: Any) -> None:
    """``MPI_Exscan``: ``x_0 (op) ... (op) x_{i-1}`` into rank ``i``'s ``recvbuf``
    (rank 0's is left as it was: MPI leaves it undefined)."""
    _reduction(comm, "exscan", sendbuf, recvbuf, op, 0)


_NATIVE_REDUCTIONS = {
    "reduce": lambda c, s, r, op, root: c.Reduce(s, r, op, root),
    "allreduce": lambda c, s, r, op, root: c.Allreduce(s, r, op),
    "scan": lambda c, s, r, op, root: c.Scan(s, r, op),
    "exscan": lambda c, s, r, op, root: c.Exscan(s, r, op),
}


def _reduction(comm: Any, which: str, sendbuf: Any, recvbuf: Any, op: Any, root: int) -> None:
    rank, size = comm.Get_rank(), comm.Get_size()
    has_recv = which in ("allreduce", "scan", "exscan") or rank == root
    inplace = has_recv and is_in_place(sendbuf)
    recv = parse(recvbuf, False) if has_recv else None
    send = None if inplace else parse(sendbuf, True)
    call = _NATIVE_REDUCTIONS[which]

    def native(c):
        return call(c, sendbuf, recvbuf, op, root)

    if (has_recv and recv is None) or (not inplace and send is None):
        if not isinstance(op, MPI.Op):
            check_op(op, MPI.BYTE)
        return _native_only(comm, which, native, recvbuf if inplace else sendbuf, root)
    if send is not None and recv is not None:
        check_counts(which.capitalize(), send, recv)
        if (
            send.datatype is not None
            and recv.datatype is not None
            and send.datatype != recv.datatype
        ):
            raise ValueError(f"{which.capitalize()}: mismatch in send and receive MPI datatypes")
    spec = send if send is not None else recv
    datatype = datatype_of(spec)
    commutative = check_op(op, datatype, state_of(comm).memo)
    nbytes = spec.count * spec.itemsize
    if nbytes == 0:
        return _empty(comm, which, root, spec.itemsize, signature(spec), op_label(op))
    if size == 1:
        if inplace or recv is None or which == "exscan":
            return None
        return _copy_local(send.view, recv.view)
    return _call(
        comm,
        which,
        root=root,
        nbytes=nbytes,
        itemsize=spec.itemsize,
        send=recv.view if inplace else send.view,
        recv=None if recv is None else recv.view,
        inplace=inplace,
        native=native,
        reducer=reducer(op, datatype, spec.itemsize, commutative),
        commutative=commutative,
        dtype=signature(spec),
        redop=op_label(op),
    )


def reduce_scatter_block(comm: Any, sendbuf: Any, recvbuf: Any, op: Any) -> None:
    """``MPI_Reduce_scatter_block``: block ``i`` of ``x_0 (op) ... (op) x_{P-1}`` into
    rank ``i``'s ``recvbuf`` (``MPI.IN_PLACE``: the vector is ``recvbuf``, the result
    goes to its start)."""
    size = comm.Get_size()
    inplace = is_in_place(sendbuf)
    recv = parse(recvbuf, False, size if inplace else 0)
    send = None if inplace else parse(sendbuf, True, size)

    def native(c):
        return c.Reduce_scatter_block(sendbuf, recvbuf, op)

    if recv is None or (not inplace and send is None):
        if not isinstance(op, MPI.Op):
            check_op(op, MPI.BYTE)
        return _native_only(comm, "reduce_scatter", native, recvbuf if inplace else sendbuf)
    if send is not None:
        check_counts("Reduce_scatter_block", send, recv)
    spec = send if send is not None else recv
    counts = (spec.count * spec.itemsize,) * size
    whole = recv.view if inplace else send.view
    _reduce_scatter(comm, whole, recv.view, inplace, counts, spec, op, native)


def reduce_scatter(
    comm: Any, sendbuf: Any, recvbuf: Any, recvcounts: Sequence[int] | None, op: Any
) -> None:
    """``MPI_Reduce_scatter``: the element-wise ``x_0 (op) ... (op) x_{P-1}`` of every
    rank's vector, cut into blocks of ``recvcounts`` (every rank passes the same),
    block ``i`` into rank ``i``'s ``recvbuf``. ``recvcounts=None``: each rank's
    ``recvbuf`` count, gathered first (as mpi4py does). ``MPI.IN_PLACE``: the vector is
    ``recvbuf``, the result goes to its start."""
    rank, size = comm.Get_rank(), comm.Get_size()
    inplace = is_in_place(sendbuf)
    recv = parse(recvbuf, False)
    send = None if inplace else parse(sendbuf, True)

    def native(c):
        return c.Reduce_scatter(sendbuf, recvbuf, recvcounts, op)

    if recv is None or (not inplace and send is None):
        if not isinstance(op, MPI.Op):
            check_op(op, MPI.BYTE)
        return _native_v(comm, "reduce_scatter", native, 0)
    spec = send if send is not None else recv
    whole = recv.view if inplace else send.view

    def run_with(counts: list[int]) -> None:
        if len(counts) != size or min(counts) < 0:
            raise ValueError(f"Reduce_scatter: expecting {size} counts >= 0, got {counts!r}")
        if sum(counts) * spec.itemsize > whole.size or counts[rank] > recv.count:
            raise ValueError(
                f"Reduce_scatter: counts {counts} need {sum(counts)} items in the vector "
                f"and {counts[rank]} in this rank's receive buffer"
            )
        byte_counts = tuple(c * spec.itemsize for c in counts)
        _reduce_scatter(comm, whole, recv.view, inplace, byte_counts, spec, op, native)

    if recvcounts is not None:
        return run_with([int(c) for c in recvcounts])
    if size == 1:
        return run_with([recv.count])
    if serves_natively(ready(comm), "reduce_scatter"):
        return _native_v(comm, "reduce_scatter", native, 0)
    mine = np.array([recv.count], dtype=np.int64)
    _deferred_whole(comm, lambda: run_with([int(c) for c in _agreed(comm, mine, None)]))


def _reduce_scatter(
    comm: Any,
    whole: np.ndarray,
    recv: np.ndarray,
    inplace: bool,
    counts: tuple[int, ...],
    spec: Any,
    op: Any,
    native: Callable[[MPI.Intracomm], object],
) -> None:
    """The call of both reduce-scatters: ``whole`` the rank's vector (blocks packed
    in rank order), ``counts`` the bytes of every block."""
    size = comm.Get_size()
    datatype = datatype_of(spec)
    commutative = check_op(op, datatype, state_of(comm).memo)
    if size == 1:
        return None if inplace else _copy_local(whole[: counts[0]], recv)
    nbytes = max(counts)
    if nbytes == 0:
        return _empty(comm, "reduce_scatter", 0, spec.itemsize, signature(spec), op_label(op))
    equal = len(set(counts)) == 1
    displs = tuple(int(sum(counts[:i])) for i in range(size))
    return _call(
        comm,
        "reduce_scatter",
        root=0,
        nbytes=nbytes,
        itemsize=spec.itemsize,
        send=whole,
        recv=recv,
        inplace=inplace,
        native=native,
        reducer=reducer(op, datatype, spec.itemsize, commutative),
        commutative=commutative,
        dtype=signature(spec),
        redop=op_label(op),
        uneven=None if equal else (counts, displs, None),
    )


def barrier(comm: Any) -> None:
    """``MPI_Barrier`` as a gridcoll schedule (one WAN round with ``two-level``), or the
    library's own on one cluster or with ``algo="native"``."""
    if comm.Get_size() == 1:
        return
    empty = np.empty(0, dtype=np.uint8)
    _call(
        comm,
        "barrier",
        root=0,
        nbytes=0,
        itemsize=1,
        send=empty,
        recv=empty,
        inplace=False,
        native=lambda c: c.Barrier(),
    )


def execute(comm: Any, schedule: Schedule, buf: Any, reduce: Callable | None = None) -> None:
    """Run any gridcoll schedule on ``buf`` (every rank calls it with the same one)."""
    state = ready(comm)
    if schedule.nranks != comm.Get_size():
        raise ParameterError(
            f"the schedule is for {schedule.nranks} ranks, the communicator has {comm.Get_size()}"
        )
    program = compiled(state, schedule, comm.Get_rank())
    state.last = None
    run(state, program, bytes_of(buf), reduce)


def explain(comm: Any) -> str:
    """Why the last gridcoll collective chose its algorithm (:meth:`gridcoll.tune.Plan.explain`:
    the choice, the prediction, the host overhead planned with, a native call's reason),
    then where the ranks were placed by host, if they were (:func:`placement_note`)."""
    state = state_of(comm)
    chosen = last_plan(state)
    text = "no gridcoll collective has run on this communicator yet"
    if chosen is not None:
        text = chosen.explain()
    note = placement_note(state)
    return f"{text}\n{note}" if note else text


# -- the object (pickle) forms ---------------------------------------------------------

_LEN = 8  # bytes of the length in front of every pickled block


def _pack(pickles: Sequence[bytes], width: int) -> np.ndarray:
    """Blocks of ``_LEN + width`` bytes: each pickle's length, then the pickle."""
    out = np.zeros((len(pickles), _LEN + width), dtype=np.uint8)
    for i, data in enumerate(pickles):
        out[i, :_LEN] = np.frombuffer(len(data).to_bytes(_LEN, "little"), dtype=np.uint8)
        out[i, _LEN : _LEN + len(data)] = np.frombuffer(data, dtype=np.uint8)
    return out.reshape(-1)


def _unpack(blocks: np.ndarray, n: int) -> list[Any]:
    rows = blocks.reshape(n, -1)
    out = []
    for row in rows:
        length = int.from_bytes(row[:_LEN].tobytes(), "little")
        out.append(MPI.pickle.loads(row[_LEN : _LEN + length].tobytes()))
    return out


def _widest(comm: Any, pickles: Sequence[bytes]) -> int:
    """The largest pickle of any rank (a gridcoll allreduce of one integer)."""
    mine = np.array([max((len(p) for p in pickles), default=0)], dtype=np.int64)
    out = np.empty_like(mine)
    allreduce(comm, mine, out, MPI.MAX)
    return int(out[0])


def _items(sendobj: Any, size: int, what: str) -> list[Any]:
    items = list(sendobj) if sendobj is not None else []
    if len(items) != size:
        raise ValueError(f"{what}: expecting {size} items, got {len(items)}")
    return items


_HEAD = 256  # bytes of bcast_obj's first broadcast: 8-byte length, then the first bytes


_UNSERVED = object()
"""What :func:`_object_natively` returns when gridcoll's own schedules serve the call."""


def _object_natively(
    comm: Any, op: str, call: Callable[[MPI.Intracomm], Any], root: int = 0
) -> Any:
    """On a communicator whose ``op`` the MPI library serves (one cluster, or
    ``algo="native"``): mpi4py's own object collective on the private communicator
    (one pickle, one or two MPI calls, as in a plain mpi4py program), under the
    watchdog, its result returned; else :data:`_UNSERVED`."""
    if comm.Get_size() == 1:
        return _UNSERVED
    state = ready(comm)
    if not serves_natively(state, op):
        return _UNSERVED
    logged = state.log is not None
    start = _time.monotonic() if logged else 0.0
    agree = {"collective": f"{op} of objects", "root": root}
    result = run_native(state, call, f"rank {comm.Get_rank()}: native {op} of objects", agree)
    if logged:
        state.last = plan_call(state, op, 1, root, 1)
        _record(comm, state, state.last, start, start)
    return result


def _locked(name: str) -> Callable:
    """Run an object collective under mpi4py's own per-communicator lock of ``name``
    (``MPI._comm_lock``, what mpi4py's ``comm.bcast``... take): its two or more calls
    (a size, then the pickles) are not interleaved with another thread's same call."""

    def wrap(helper: Callable) -> Callable:
        def locked(comm: Any, *args: Any) -> Any:
            with MPI._comm_lock(comm, name):
                return helper(comm, *args)

        locked.__name__, locked.__doc__ = helper.__name__, helper.__doc__
        return locked

    return wrap


@_locked("bcast")
def bcast_obj(comm: Any, obj: Any, root: int) -> Any:
    """``comm.bcast``: the root's object, pickled, to every rank (one 256-byte head
    with the length and the first bytes, then the rest if any)."""
    rank = comm.Get_rank()
    check_root(comm, root)
    native = _object_natively(comm, "bcast", lambda c: c.bcast(obj, root), root)
    if native is not _UNSERVED:
        return native
    head = np.zeros(_HEAD, dtype=np.uint8)
    data = b""
    if rank == root:
        data = MPI.pickle.dumps(obj)
        inline = min(len(data), _HEAD - 8)
        head[:8] = np.frombuffer(len(data).to_bytes(8, "little"), dtype=np.uint8)
        head[8 : 8 + inline] = np.frombuffer(data[:inline], dtype=np.uint8)
    if comm.Get_size() > 1:
        bcast(comm, head, root)
    if rank == root:
        if len(data) > _HEAD - 8 and comm.Get_size() > 1:
            bcast(comm, np.frombuffer(data, dtype=np.uint8)[_HEAD - 8 :], root)
        return MPI.pickle.loads(data)
    n = int.from_bytes(head[:8].tobytes(), "little")
    inline = min(n, _HEAD - 8)
    whole = np.empty(n, dtype=np.uint8)
    whole[:inline] = head[8 : 8 + inline]
    if n > inline:
        bcast(comm, whole[inline:], root)
    return MPI.pickle.loads(whole)


@_locked("scatter")
def scatter_obj(comm: Any, sendobj: Any, root: int) -> Any:
    """``comm.scatter``: item ``i`` of the root's sequence to rank ``i``."""
    rank, size = comm.Get_rank(), comm.Get_size()
    check_root(comm, root)
    native = _object_natively(comm, "scatter", lambda c: c.scatter(sendobj, root), root)
    if native is not _UNSERVED:
        return native
    width = np.zeros(1, dtype=np.int64)
    pickles: list[bytes] = []
    if rank == root:
        pickles = [MPI.pickle.dumps(x) for x in _items(sendobj, size, "scatter")]
        width[0] = max(len(p) for p in pickles)
    if size > 1:
        bcast(comm, width, root)
    recv = np.empty(_LEN + int(width[0]), dtype=np.uint8)
    send = _pack(pickles, int(width[0])) if rank == root else None
    scatter(comm, send, recv, root)
    return _unpack(recv, 1)[0]


@_locked("gather")
def gather_obj(comm: Any, sendobj: Any, root: int) -> list[Any] | None:
    """``comm.gather``: every rank's object, in rank order, at the root (None elsewhere)."""
    rank, size = comm.Get_rank(), comm.Get_size()
    check_root(comm, root)
    native = _object_natively(comm, "gather", lambda c: c.gather(sendobj, root), root)
    if native is not _UNSERVED:
        return native
    mine = [MPI.pickle.dumps(sendobj)]
    width = _widest(comm, mine)
    recv = np.empty(size * (_LEN + width), dtype=np.uint8) if rank == root else None
    gather(comm, _pack(mine, width), recv, root)
    return _unpack(recv, size) if rank == root else None


@_locked("allgather")
def allgather_obj(comm: Any, sendobj: Any) -> list[Any]:
    """``comm.allgather``: every rank's object, in rank order, on every rank."""
    size = comm.Get_size()
    native = _object_natively(comm, "allgather", lambda c: c.allgather(sendobj))
    if native is not _UNSERVED:
        return native
    mine = [MPI.pickle.dumps(sendobj)]
    width = _widest(comm, mine)
    recv = np.empty(size * (_LEN + width), dtype=np.uint8)
    allgather(comm, _pack(mine, width), recv)
    return _unpack(recv, size)


@_locked("alltoall")
def alltoall_obj(comm: Any, sendobj: Any) -> list[Any]:
    """``comm.alltoall``: item ``j`` of rank ``i``'s sequence is item ``i`` of rank ``j``'s
    result."""
    size = comm.Get_size()
    native = _object_natively(comm, "alltoall", lambda c: c.alltoall(sendobj))
    if native is not _UNSERVED:
        return native
    pickles = [MPI.pickle.dumps(x) for x in _items(sendobj, size, "alltoall")]
    width = _widest(comm, pickles)
    recv = np.empty(size * (_LEN + width), dtype=np.uint8)
    alltoall(comm, _pack(pickles, width), recv)
    return _unpack(recv, size)


def _fold(items: list[Any] | None, op: Callable[[Any, Any], Any]) -> Any:
    """mpi4py's reduction of objects: ``op(... op(op(x_0, x_1), x_2) ..., x_{P-1})``."""
    if items is None:
        return None
    result = items[0]
    for item in items[1:]:
        result = op(result, item)
    return result


def _check_callable(op: Any) -> None:
    if not callable(op):
        raise TypeError(f"op must be an MPI.Op or a callable op(x, y), not {op!r}")
    if isinstance(op, MPI.Op) and op == MPI.OP_NULL:
        raise ParameterError("op is MPI.OP_NULL: no reduction operation")


def scan_obj(comm: Any, sendobj: Any, op: Any) -> Any:
    """``comm.scan``: the objects of ranks ``0..i`` folded with ``op`` in rank order."""
    _check_callable(op)
    native = _object_natively(comm, "scan", lambda c: c.scan(sendobj, op))
    if native is not _UNSERVED:
        return native
    items = allgather_obj(comm, sendobj)
    return _fold(items[: comm.Get_rank() + 1], op)


def exscan_obj(comm: Any, sendobj: Any, op: Any) -> Any:
    """``comm.exscan``: the objects of ranks ``0..i-1`` folded with ``op`` (None on
    rank 0, as mpi4py)."""
    _check_callable(op)
    native = _object_natively(comm, "exscan", lambda c: c.exscan(sendobj, op))
    if native is not _UNSERVED:
        return native
    items = allgather_obj(comm, sendobj)
    rank = comm.Get_rank()
    return None if rank == 0 else _fold(items[:rank], op)


def reduce_obj(comm: Any, sendobj: Any, op: Any, root: int) -> Any:
    """``comm.reduce``: the objects folded with ``op`` in rank order, at the root."""
    _check_callable(op)
    native = _object_natively(comm, "reduce", lambda c: c.reduce(sendobj, op, root), root)
    if native is not _UNSERVED:
        return native
    return _fold(gather_obj(comm, sendobj, root), op)


def allreduce_obj(comm: Any, sendobj: Any, op: Any) -> Any:
    """``comm.allreduce``: the objects folded with ``op`` in rank order, on every rank."""
    _check_callable(op)
    native = _object_natively(comm, "allreduce", lambda c: c.allreduce(sendobj, op))
    if native is not _UNSERVED:
        return native
    return _fold(allgather_obj(comm, sendobj), op)
