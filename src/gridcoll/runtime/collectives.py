"""gridcoll's buffer collectives: the helpers behind :class:`gridcoll.Comm`'s methods.

One helper per collective (``bcast``, ``scatter``, ``gather``, ``allgather``,
``alltoall``, ``reduce``, ``allreduce``, ``scan``, ``exscan``, the reduce-scatters,
``barrier`` and the v-forms), all over one path:

1. :func:`_arguments`, the preamble every call shares, driven by the call's row of
   :data:`COLLECTIVES` (which ranks pass which buffer, which one takes
   ``MPI.IN_PLACE``, whether a buffer holds one block per rank, a root, an
   operation): the root checked, mpi4py's buffer specs parsed
   (:mod:`gridcoll.runtime.buffers`), the counts of the rank's own send and receive
   buffers compared, the operation checked (:mod:`gridcoll.runtime.mpi_ops`); a buffer
   in device memory or a datatype with holes goes to the MPI library's own collective
   (no schedule can read those bytes from the CPU, or say where they are);
2. the family's body: the equal-block collectives and the reductions
   (:func:`_equal`), the reduce-scatters, the v-forms (which first agree on the counts);
3. :func:`_call`: the communicator made ready (:func:`gridcoll.runtime.state.ready`),
   the call's plan, program and layout (:func:`gridcoll.runtime.prepare.prepare`,
   cached per call signature), the rank's blocks copied into the local buffer the
   program runs on (:mod:`gridcoll.runtime.layout`), the program run
   (:func:`gridcoll.runtime.prepare.run`), the blocks copied out.

Every error of the arguments is raised before any message is sent. Counts that
differ *across* ranks are caught by the headers every receiver checks
(:mod:`gridcoll.runtime.header`), which raise :class:`~gridcoll.errors.MismatchError`.

A plan whose algorithm is ``native`` (``algo="native"``, or ``auto`` on a one-cluster
communicator: no wide-area link to plan around) hands the call to the MPI library's own
collective, called blocking under the watchdog (:mod:`gridcoll.runtime.watchdog`). The
broadcast of a one-cluster communicator has a hot path (:func:`bcast`): a type check,
the call's record for ``explain()``, the watchdog's arm and disarm around
``MPI_Bcast`` (about 1 us over mpi4py's own ``Bcast``, ``bench/native.py``).

With a log (``GRIDCOLL_LOG``, ``Comm(log=...)``), every call that reaches a plan
(:func:`_call`, and a datatype with holes) writes its line after it returns
(:mod:`gridcoll.runtime.record`): ``measured_s`` is ``time.monotonic`` from after
the plan's lookup to the last copy out, ``prepare_s`` the lookup (planning and
compiling on a signature's first call). Without one the cost is one attribute test
per call, and the broadcast's hot path (taken only without a log) is as it was.

The object (pickle) forms are :mod:`gridcoll.runtime.objects`, over these helpers.

Where this sits in :mod:`gridcoll.runtime`: after ``buffers``, ``state``, ``prepare``
and ``mpi_ops``, before ``objects`` and ``comm`` (whose methods are one-liners over
these helpers).
"""

from __future__ import annotations

import time as _time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from mpi4py import MPI

from gridcoll.errors import MismatchError, ParameterError
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
from gridcoll.runtime.mpi_ops import check_op, op_label, reducer
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
    "COLLECTIVES",
    "Collective",
    "allgather",
    "allgatherv",
    "allreduce",
    "alltoall",
    "alltoallv",
    "barrier",
    "bcast",
    "execute",
    "explain",
    "exscan",
    "gather",
    "gatherv",
    "log_call",
    "reduce",
    "reduce_scatter",
    "reduce_scatter_block",
    "scan",
    "scatter",
    "scatterv",
]


# -- the table of collectives ----------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Collective:
    """What the preamble of a buffer collective needs to know about it (one row of
    :data:`COLLECTIVES`); its arguments are mpi4py's, ``(sendbuf, recvbuf, ...)``."""

    name: str
    """The collective its plan is made for (a v-form's is its equal-block one)."""
    mpi: str
    """mpi4py's method (``"Scatterv"``): the native call, and the prefix of errors."""
    rooted: bool = False
    """It takes a root (checked first: mpi4py's errors)."""
    send_at_root: bool = False
    """Only the root's ``sendbuf`` is read (scatter); else every rank's."""
    recv_at_root: bool = False
    """Only the root's ``recvbuf`` is written (gather, reduce); else every rank's."""
    send_blocks: bool = False
    """``sendbuf`` holds one block per rank (a count is per block)."""
    recv_blocks: bool = False
    """``recvbuf`` holds one block per rank."""
    in_place: str | None = "send"
    """The argument that may be ``MPI.IN_PLACE`` on a rank with both buffers
    (``"send"`` or ``"recv"``); None: ``MPI.IN_PLACE`` goes to the MPI library."""
    whole_in_place: bool = False
    """In place, ``recvbuf`` holds every rank's block (``Reduce_scatter_block``)."""
    sized_by: str = "send"
    """The buffer that sizes the plan of a call the MPI library serves (``explain()``),
    if this rank has it and it is not in place; else the other."""
    reduces: bool = False
    """It takes a reduction operation (checked before any message)."""
    uneven: bool = False
    """A v-form: its buffers with one block per rank take counts and displacements."""


COLLECTIVES: dict[str, Collective] = {
    c.mpi: c
    for c in (
        Collective("scatter", "Scatter", True, send_at_root=True, send_blocks=True,
                   in_place="recv"),
        Collective("gather", "Gather", True, recv_at_root=True, recv_blocks=True),
        Collective("allgather", "Allgather", recv_blocks=True, sized_by="recv"),
        Collective("alltoall", "Alltoall", send_blocks=True, recv_blocks=True,
                   sized_by="recv"),
        Collective("reduce", "Reduce", True, recv_at_root=True, reduces=True),
        Collective("allreduce", "Allreduce", reduces=True),
        Collective("scan", "Scan", reduces=True),
        Collective("exscan", "Exscan", reduces=True),
        Collective("reduce_scatter", "Reduce_scatter_block", send_blocks=True,
                   whole_in_place=True, reduces=True),
        Collective("reduce_scatter", "Reduce_scatter", reduces=True, uneven=True),
        Collective("scatter", "Scatterv", True, send_at_root=True, send_blocks=True,
                   in_place="recv", uneven=True),
        Collective("gather", "Gatherv", True, recv_at_root=True, recv_blocks=True,
                   uneven=True),
        Collective("allgather", "Allgatherv", recv_blocks=True, uneven=True),
        Collective("alltoall", "Alltoallv", send_blocks=True, recv_blocks=True,
                   in_place=None, uneven=True),
    )
}  # fmt: skip
"""The buffer collectives by mpi4py method, but ``Bcast`` and ``Barrier`` (one buffer,
or none: :func:`bcast`, :func:`barrier`)."""


@dataclass(frozen=True, slots=True)
class _Args:
    """A call's arguments as the preamble found them."""

    rank: int
    size: int
    inplace: bool
    send: Any  # buffers.Spec (VectorSpec for a v-form's blocks), None where not read
    recv: Any
    native: Callable[[MPI.Intracomm], object]  # the MPI library's own call, as given


def _arguments(
    comm: Any, coll: Collective, args: tuple, root: int = 0, op: Any = None
) -> _Args | None:
    """The preamble of every buffer collective but ``Bcast`` and ``Barrier``: check
    the root, parse the buffers this rank passes (the one that cannot be in place
    first: mpi4py's order of errors), compare their counts. None: the call went to
    the MPI library (a buffer in device memory, a datatype with holes, a v-form's
    ``MPI.IN_PLACE`` it does not take)."""
    sendbuf, recvbuf = args[0], args[1]
    rank, size = comm.Get_rank(), comm.Get_size()
    if coll.rooted:
        check_root(comm, root)
    native = _native(coll.mpi, args)
    has_send = rank == root or not coll.send_at_root
    has_recv = rank == root or not coll.recv_at_root
    inplace = False
    if coll.in_place is None:
        if is_in_place(sendbuf):
            _native_v(comm, coll.name, native, root)
            return None
    elif has_send and has_recv:
        inplace = is_in_place(sendbuf if coll.in_place == "send" else recvbuf)
    send_in_place = inplace and coll.in_place == "send"
    recv_in_place = inplace and coll.in_place == "recv"

    def parse_send() -> Any:
        if not has_send or send_in_place:
            return None
        if coll.uneven and coll.send_blocks:
            return parse_vector(sendbuf, True, size)
        return parse(sendbuf, True, size if coll.send_blocks else 0)

    def parse_recv() -> Any:
        if not has_recv or recv_in_place:
            return None
        if coll.uneven and coll.recv_blocks:
            return parse_vector(recvbuf, False, size)
        whole = coll.recv_blocks or (inplace and coll.whole_in_place)
        return parse(recvbuf, False, size if whole else 0)

    if coll.in_place == "send":
        recv = parse_recv()
        send = parse_send()
    else:
        send = parse_send()
        recv = parse_recv()
    if (has_send and not send_in_place and send is None) or (
        has_recv and not recv_in_place and recv is None
    ):
        if coll.reduces and not isinstance(op, MPI.Op):
            check_op(op, MPI.BYTE)
        if coll.uneven:
            _native_v(comm, coll.name, native, root)
        else:
            sends = coll.sized_by == "send" and has_send and not send_in_place
            _native_only(comm, coll.name, native, sendbuf if sends else recvbuf, root)
        return None
    if not coll.uneven and send is not None and recv is not None:
        check_counts(coll.mpi, send, recv)
    return _Args(rank, size, inplace, send, recv, native)


def _native(method: str, args: tuple) -> Callable[[MPI.Intracomm], object]:
    """The MPI library's own collective with the caller's arguments, on a
    communicator given later (the private one)."""
    return lambda c: getattr(c, method)(*args)


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
    start = _time.monotonic() if state.log is not None else 0.0
    rank = comm.Get_rank()
    prepared = prepare(state, rank, op, nbytes, root, itemsize, commutative, inplace, uneven)
    state.last = prepared.plan

    def work() -> None:
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

    _start(comm, state, prepared.plan, start, work)


def _start(comm: Any, state: Any, plan: Any, start: float, work: Callable[[], None]) -> None:
    """Run a call's ``work`` now or deferred (:func:`_now_or_deferred`); with a log, its
    line after it returns (:func:`log_call`: ``start`` is when its preparation began)."""
    if state.log is None:
        return _now_or_deferred(state, work)

    def job() -> None:
        ran = _time.monotonic()
        work()
        log_call(comm, state, plan, start, ran)

    _now_or_deferred(state, job)


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


def log_call(comm: Any, state: Any, plan: Any, start: float, ran: float) -> None:
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
    start = _time.monotonic() if state.log is not None else 0.0
    plan = state.last = native_plan(state, op, data_bytes(buf), root, _NATIVE_ONLY)
    what = f"rank {comm.Get_rank()}: native {op}"
    agree = {"collective": op, "root": root, "size": data_bytes(buf)}
    _start(comm, state, plan, start, lambda: run_native(state, call, what, agree))


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


# -- scatter, gather, allgather, all-to-all and the reductions -------------------------


def scatter(comm: Any, sendbuf: Any, recvbuf: Any, root: int) -> None:
    """``MPI_Scatter``: block ``i`` of the root's ``sendbuf`` to rank ``i``'s ``recvbuf``."""
    _equal(comm, COLLECTIVES["Scatter"], (sendbuf, recvbuf, root), root)


def gather(comm: Any, sendbuf: Any, recvbuf: Any, root: int) -> None:
    """``MPI_Gather``: every rank's ``sendbuf`` to block ``i`` of the root's ``recvbuf``."""
    _equal(comm, COLLECTIVES["Gather"], (sendbuf, recvbuf, root), root)


def allgather(comm: Any, sendbuf: Any, recvbuf: Any) -> None:
    """``MPI_Allgather``: every rank's ``sendbuf`` to block ``i`` of every ``recvbuf``."""
    _equal(comm, COLLECTIVES["Allgather"], (sendbuf, recvbuf))


def alltoall(comm: Any, sendbuf: Any, recvbuf: Any) -> None:
    """``MPI_Alltoall``: block ``j`` of rank ``i``'s ``sendbuf`` to block ``i`` of rank
    ``j``'s ``recvbuf``."""
    _equal(comm, COLLECTIVES["Alltoall"], (sendbuf, recvbuf))


def reduce(comm: Any, sendbuf: Any, recvbuf: Any, op: Any, root: int) -> None:
    """``MPI_Reduce``: ``x_0 (op) ... (op) x_{P-1}`` element-wise into the root's ``recvbuf``."""
    _equal(comm, COLLECTIVES["Reduce"], (sendbuf, recvbuf, op, root), root, op)


def allreduce(comm: Any, sendbuf: Any, recvbuf: Any, op: Any) -> None:
    """``MPI_Allreduce``: ``x_0 (op) ... (op) x_{P-1}`` element-wise into every ``recvbuf``."""
    _equal(comm, COLLECTIVES["Allreduce"], (sendbuf, recvbuf, op), 0, op)


def scan(comm: Any, sendbuf: Any, recvbuf: Any, op: Any) -> None:
    """``MPI_Scan``: ``x_0 (op) ... (op) x_i`` element-wise into rank ``i``'s ``recvbuf``."""
    _equal(comm, COLLECTIVES["Scan"], (sendbuf, recvbuf, op), 0, op)


def exscan(comm: Any, sendbuf: Any, recvbuf: Any, op: Any) -> None:
    """``MPI_Exscan``: ``x_0 (op) ... (op) x_{i-1}`` into rank ``i``'s ``recvbuf``
    (rank 0's is left as it was: MPI leaves it undefined)."""
    _equal(comm, COLLECTIVES["Exscan"], (sendbuf, recvbuf, op), 0, op)


def _equal(comm: Any, coll: Collective, args: tuple, root: int = 0, op: Any = None) -> None:
    """A collective of equal blocks, or a reduction: the preamble, then the call on the
    block's bytes (a call moving nothing is an empty call, one rank copies locally)."""
    a = _arguments(comm, coll, args, root, op)
    if a is None:
        return None
    send, recv = a.send, a.recv
    if coll.recv_blocks and recv is not None:
        block = recv
    elif coll.send_blocks and send is not None:
        block = send
    else:
        block = send if send is not None else recv
    redop, combine, commutative = "", None, True
    if coll.reduces:
        if send is not None and recv is not None and _datatypes_differ(send, recv):
            raise ValueError(f"{coll.mpi}: mismatch in send and receive MPI datatypes")
        datatype = datatype_of(block)
        commutative = check_op(op, datatype, state_of(comm).memo)
        redop = op_label(op)
    nbytes = block.count * block.itemsize
    if nbytes == 0:
        return _empty(comm, coll.name, root, block.itemsize, signature(block), redop)
    if a.size == 1:
        if a.inplace or recv is None or coll.name == "exscan":
            return None
        return _copy_local(send.view, recv.view)
    if coll.reduces:
        combine = reducer(op, datatype, block.itemsize, commutative)
    return _call(
        comm,
        coll.name,
        root=root,
        nbytes=nbytes,
        itemsize=block.itemsize,
        send=recv.view if a.inplace and coll.in_place == "send" else _view(send),
        recv=_view(recv),
        inplace=a.inplace,  # scatter's root keeps its block in sendbuf: no receive map
        native=a.native,
        reducer=combine,
        commutative=commutative,
        dtype=signature(block),
        redop=redop,
    )


def _datatypes_differ(send: Any, recv: Any) -> bool:
    return (
        send.datatype is not None and recv.datatype is not None and send.datatype != recv.datatype
    )


def _view(spec: Any) -> np.ndarray | None:
    return None if spec is None else spec.view


# -- the reduce-scatters ---------------------------------------------------------------


def reduce_scatter_block(comm: Any, sendbuf: Any, recvbuf: Any, op: Any) -> None:
    """``MPI_Reduce_scatter_block``: block ``i`` of ``x_0 (op) ... (op) x_{P-1}`` into
    rank ``i``'s ``recvbuf`` (``MPI.IN_PLACE``: the vector is ``recvbuf``, the result
    goes to its start)."""
    a = _arguments(comm, COLLECTIVES["Reduce_scatter_block"], (sendbuf, recvbuf, op), 0, op)
    if a is None:
        return
    spec = a.send if a.send is not None else a.recv
    counts = (spec.count * spec.itemsize,) * a.size
    whole = a.recv.view if a.inplace else a.send.view
    _reduce_scatter(comm, whole, a.recv.view, a.inplace, counts, spec, op, a.native)


def reduce_scatter(
    comm: Any, sendbuf: Any, recvbuf: Any, recvcounts: Sequence[int] | None, op: Any
) -> None:
    """``MPI_Reduce_scatter``: the element-wise ``x_0 (op) ... (op) x_{P-1}`` of every
    rank's vector, cut into blocks of ``recvcounts`` (every rank passes the same),
    block ``i`` into rank ``i``'s ``recvbuf``. ``recvcounts=None``: each rank's
    ``recvbuf`` count, gathered first (as mpi4py does). ``MPI.IN_PLACE``: the vector is
    ``recvbuf``, the result goes to its start."""
    args = (sendbuf, recvbuf, recvcounts, op)
    a = _arguments(comm, COLLECTIVES["Reduce_scatter"], args, 0, op)
    if a is None:
        return None
    rank, size, recv = a.rank, a.size, a.recv
    spec = a.send if a.send is not None else recv
    whole = recv.view if a.inplace else a.send.view

    def run_with(counts: list[int]) -> None:
        if len(counts) != size or min(counts) < 0:
            raise ValueError(f"Reduce_scatter: expecting {size} counts >= 0, got {counts!r}")
        if sum(counts) * spec.itemsize > whole.size or counts[rank] > recv.count:
            raise ValueError(
                f"Reduce_scatter: counts {counts} need {sum(counts)} items in the vector "
                f"and {counts[rank]} in this rank's receive buffer"
            )
        byte_counts = tuple(c * spec.itemsize for c in counts)
        _reduce_scatter(comm, whole, recv.view, a.inplace, byte_counts, spec, op, a.native)

    if recvcounts is not None:
        return run_with([int(c) for c in recvcounts])
    if size == 1:
        return run_with([recv.count])
    if serves_natively(ready(comm), "reduce_scatter"):
        return _native_v(comm, "reduce_scatter", a.native, 0)
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
    start = _time.monotonic() if state.log is not None else 0.0
    if serves_natively(state, op):
        plan = plan_call(state, op, 1, root, 1)  # its reason: one cluster, or algo=native
    else:
        plan = native_plan(state, op, 1, root, _NATIVE_ONLY)
    state.last = plan
    what, agree = f"rank {comm.Get_rank()}: native {op}v", {"collective": op + "v"}
    _start(comm, state, plan, start, lambda: run_native(state, call, what, agree))


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
    coll = COLLECTIVES["Scatterv"]
    a = _arguments(comm, coll, (sendbuf, recvbuf, root), root)
    if a is None:
        return None
    rank, size, send, recv, inplace = a.rank, a.size, a.send, a.recv, a.inplace
    if size == 1:
        n = send.counts[0] * send.itemsize
        start = send.displs[0] * send.itemsize
        return None if inplace else _copy_local(send.view[start : start + n], recv.view)
    if serves_natively(ready(comm), coll.name):
        return _native_v(comm, coll.name, a.native, root)
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
            coll.name,
            counts,
            root,
            itemsize,
            _view(send),
            _view(recv),
            inplace,
            a.native,
            dtype,
            sdispls=None if send is None else send.byte_displs(),
        )

    _deferred_whole(comm, body)


def gatherv(comm: Any, sendbuf: Any, recvbuf: Any, root: int) -> None:
    """``MPI_Gatherv``: every rank's ``sendbuf`` to block ``i`` of the root's
    ``recvbuf`` (``counts[i]`` items at ``displs[i]``)."""
    coll = COLLECTIVES["Gatherv"]
    a = _arguments(comm, coll, (sendbuf, recvbuf, root), root)
    if a is None:
        return None
    rank, size, send, recv, inplace = a.rank, a.size, a.send, a.recv, a.inplace
    if size == 1:
        n = recv.counts[0] * recv.itemsize
        start = recv.displs[0] * recv.itemsize
        return None if inplace else _copy_local(send.view[:n], recv.view[start : start + n])
    if serves_natively(ready(comm), coll.name):
        return _native_v(comm, coll.name, a.native, root)
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
            coll.name,
            counts,
            root,
            itemsize,
            recv.view if inplace else send.view,
            _view(recv),
            inplace,
            a.native,
            dtype,
            rdispls=None if recv is None else recv.byte_displs(),
        )

    _deferred_whole(comm, body)


def allgatherv(comm: Any, sendbuf: Any, recvbuf: Any) -> None:
    """``MPI_Allgatherv``: every rank's ``sendbuf`` to block ``i`` of every ``recvbuf``
    (``counts[i]`` items at ``displs[i]``; every rank has the counts)."""
    coll = COLLECTIVES["Allgatherv"]
    a = _arguments(comm, coll, (sendbuf, recvbuf))
    if a is None:
        return None
    rank, size, send, recv, inplace = a.rank, a.size, a.send, a.recv, a.inplace
    counts = recv.byte_counts()
    if send is not None and send.view.size != counts[rank]:
        raise ValueError(
            f"Allgatherv: send buffer of {send.view.size} B for a block of {counts[rank]} B"
        )
    if size == 1:
        start = recv.displs[0] * recv.itemsize
        return None if inplace else _copy_local(send.view, recv.view[start:])
    if serves_natively(ready(comm), coll.name):
        return _native_v(comm, coll.name, a.native, 0)
    _uneven_call(
        comm,
        coll.name,
        counts,
        0,
        recv.itemsize,
        recv.view if inplace else send.view,
        recv.view,
        inplace,
        a.native,
        signature(recv.block_spec()),
        rdispls=recv.byte_displs(),
    )


def alltoallv(comm: Any, sendbuf: Any, recvbuf: Any) -> None:
    """``MPI_Alltoallv``: block ``j`` of rank ``i``'s ``sendbuf`` to block ``i`` of
    rank ``j``'s ``recvbuf`` (each side with its own counts and displacements).
    ``MPI.IN_PLACE`` goes to the MPI library."""
    coll = COLLECTIVES["Alltoallv"]
    a = _arguments(comm, coll, (sendbuf, recvbuf))
    if a is None:
        return None
    size, send, recv = a.size, a.send, a.recv
    if size == 1:
        n, at = send.counts[0] * send.itemsize, send.displs[0] * send.itemsize
        b = recv.displs[0] * recv.itemsize
        if recv.counts[0] * recv.itemsize != n:
            raise ValueError("Alltoallv: send and receive counts differ on one rank")
        return _copy_local(send.view[at : at + n], recv.view[b : b + n])
    if serves_natively(ready(comm), coll.name):
        return _native_v(comm, coll.name, a.native, 0)

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
            coll.name,
            sent.reshape(-1),
            0,
            send.itemsize,
            send.view,
            recv.view,
            False,
            a.native,
            signature(send.block_spec()),
            sdispls=send.byte_displs(),
            rdispls=recv.byte_displs(),
        )

    _deferred_whole(comm, body)


# -- barrier, any schedule, explanations ------------------------------------------------


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
