"""gridcoll's scatter, gather, allgather, all-to-all, reduce, allreduce and barrier:
the helpers behind :class:`gridcoll.Comm`'s methods of the same names.

Every buffer method parses mpi4py's buffer specs (``buf``, ``[buf, datatype]``,
``[buf, count, datatype]``...; :func:`gridcoll.runtime.comm._spec`), checks what it can
check locally (the root, the counts of its own send and receive buffers, the
operation and its datatype), plans the call (:func:`op_plan`: the tuner, or the
caller's fixed algorithm), and runs the rank's program on its local buffer
(:mod:`gridcoll.runtime.layout`): every error of the arguments is raised before any
message is sent. Counts that differ *across* ranks are caught by the headers every
receiver checks (:class:`~gridcoll.runtime.executor.CallInfo`), which raise
:class:`~gridcoll.runtime.MismatchError`.

Reductions apply the MPI operation to each received segment with
``Op.Reduce_local(inbuf, inoutbuf)``, which computes ``inoutbuf = inbuf (op)
inoutbuf``: a receive with ``incoming_first`` (``held = incoming (op) held``) is
``Reduce_local(incoming, held)``; a default one (``held = held (op) incoming``) is
``Reduce_local(held, incoming)`` followed by a copy of the result into ``held``, the
operand order :func:`gridcoll.schedule.validate` proves for non-commutative operations
(the result is ``x_0 (op) x_1 (op) ... (op) x_{P-1}``, as MPI defines it). For a
commutative operation the copy is skipped.

The lower-case object methods pickle: ``scatter``, ``gather``, ``allgather`` and
``alltoall`` agree on the largest pickle (a gridcoll broadcast or allreduce of one
integer), then move padded blocks with the buffer method; ``reduce`` and ``allreduce``
gather (allgather) the objects and fold them in rank order, ``op(res, x_i)``, as
mpi4py's own reduction of objects does.

A datatype with holes, ``algo="native"``, or ``auto`` on a one-cluster communicator
(no wide-area link to plan around) hand the call to the MPI library's own collective,
called blocking under the watchdog (:mod:`gridcoll.runtime.watchdog`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from mpi4py import MPI

from gridcoll.algorithms.registry import get_builder, list_builders
from gridcoll.errors import ParameterError
from gridcoll.runtime import comm as _c
from gridcoll.runtime.choice import NATIVE, algo_table
from gridcoll.tune import plan

__all__ = [
    "algo_table",
    "allgather",
    "allgather_obj",
    "allreduce",
    "allreduce_obj",
    "alltoall",
    "alltoall_obj",
    "barrier",
    "gather",
    "gather_obj",
    "op_plan",
    "reduce",
    "reduce_obj",
    "scatter",
    "scatter_obj",
]

REDUCTIONS = ("reduce", "allreduce")


# -- which algorithm -------------------------------------------------------------------


def op_plan(state: Any, op: str, nbytes: int, root: int, itemsize: int, commutative: bool) -> Any:
    """The plan of one call of ``op`` on the effective grid (``state.plan_grid``).

    ``native`` (asked for, or ``auto`` on one cluster) is a :class:`FixedPlan` with no
    schedule; fixed parameters a :class:`FixedPlan` of that builder; otherwise the
    tuner's :func:`gridcoll.tune.plan` (which drops, or refuses by name, the builders
    that reorder operands when ``commutative`` is False).
    """
    name, params = state.algos.get(op, ("auto", None))
    extra = {"commutative": commutative} if op in REDUCTIONS else {}
    if name == NATIVE or (name == "auto" and state.grid.is_single_cluster):
        reason = (
            "the caller asked for the MPI library's own collective"
            if name == NATIVE
            else "the communicator is one cluster (no wide-area link to plan around): the "
            "MPI library's own collective is faster than any schedule run from Python"
        )
        return _c.FixedPlan(op, state.plan_grid.name, nbytes, root, itemsize, NATIVE, reason=reason)
    if params is not None:
        builder = get_builder(op, name)
        if builder.commutative_only and not commutative:
            ordered = [b.name for b in list_builders(op) if not b.commutative_only]
            raise ParameterError(
                f"{op} algorithm {name!r} reorders operands and needs a commutative "
                f"operation; for a non-commutative one use one of: {', '.join(ordered)}"
            )
        fixed = {**params, **extra}
        m = int(fixed.get("segment_size", nbytes))
        why = f"the caller fixed algo={name!r} with params={params!r}"
        return _c.FixedPlan(
            op, state.plan_grid.name, nbytes, root, itemsize, name, fixed, m, reason=why
        )
    if state.plan_cache is None:
        state.plan_cache = _c._shared_cache()
    return plan(
        state.plan_grid,
        op,
        nbytes,
        root,
        algo=name,
        itemsize=itemsize,
        cache=state.plan_cache,
        commutative=commutative,
    )


# -- running one call ------------------------------------------------------------------


def _is_in_place(buf: Any) -> bool:
    """mpi4py's rule: ``None`` or ``MPI.IN_PLACE``."""
    return buf is None or buf is MPI.IN_PLACE


def _check_counts(what: str, send: Any, recv: Any) -> None:
    """The bytes of one block must agree on both sides of a rank's own call."""
    sb, rb = send.count * send.itemsize, recv.count * recv.itemsize
    if sb != rb:
        raise ValueError(
            f"{what}: mismatch in send count {send.count} ({sb} B) and receive count "
            f"{recv.count} ({rb} B) per block"
        )


def _local(state: Any, prepared: Any, send: np.ndarray | None, recv: np.ndarray | None) -> Any:
    layout = prepared.layout
    if layout.run_on == "recv":
        return recv
    if layout.run_on == "send":
        return send
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
) -> None:
    """Plan (cached), lay out, run. ``send``/``recv``: the rank's byte views (None where
    MPI ignores them); with ``MPI.IN_PLACE`` (``inplace``) ``send`` is the receive
    buffer, which then holds the rank's input where MPI says (layout's send map)."""
    state = _c._ready(comm)
    rank = comm.Get_rank()
    prepared = _c._prepare(state, rank, nbytes, root, itemsize, op, commutative, inplace)
    state.last_plan = prepared.plan
    if prepared.program is None:
        _c._native_call(state, native, f"rank {rank}: native {op} (root {root})")
        return
    local = _local(state, prepared, send, recv)
    for a, d, n in prepared.layout.copy_in:
        local[d : d + n] = send[a : a + n]
    _c._execute(state, prepared.program, local, reducer)
    for a, d, n in prepared.layout.copy_out:
        recv[d : d + n] = local[a : a + n]


def _copy_local(send: np.ndarray, recv: np.ndarray | None) -> None:
    """A one-rank collective: the rank's send bytes are its result."""
    if recv is not None and send is not None and recv is not send:
        recv[: send.size] = send


# -- scatter, gather, allgather, all-to-all ------------------------------------------


def scatter(comm: Any, sendbuf: Any, recvbuf: Any, root: int) -> None:
    """``MPI_Scatter``: block ``i`` of the root's ``sendbuf`` to rank ``i``'s ``recvbuf``."""
    rank, size = comm.Get_rank(), comm.Get_size()
    _c._check_root(comm, root)
    inplace = rank == root and _is_in_place(recvbuf)
    send = _c._spec(sendbuf, True, size) if rank == root else None
    recv = None if inplace else _c._spec(recvbuf, False)
    if (rank == root and send is None) or (not inplace and recv is None):
        return _native_only(comm, "scatter", lambda c: c.Scatter(sendbuf, recvbuf, root))
    if send is not None and recv is not None:
        _check_counts("Scatter", send, recv)
    block = send if rank == root else recv
    nbytes = block.count * block.itemsize
    if nbytes == 0:
        return None
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
    )


def gather(comm: Any, sendbuf: Any, recvbuf: Any, root: int) -> None:
    """``MPI_Gather``: every rank's ``sendbuf`` to block ``i`` of the root's ``recvbuf``."""
    rank, size = comm.Get_rank(), comm.Get_size()
    _c._check_root(comm, root)
    inplace = rank == root and _is_in_place(sendbuf)
    recv = _c._spec(recvbuf, False, size) if rank == root else None
    send = None if inplace else _c._spec(sendbuf, True)
    if (rank == root and recv is None) or (not inplace and send is None):
        return _native_only(comm, "gather", lambda c: c.Gather(sendbuf, recvbuf, root))
    if send is not None and recv is not None:
        _check_counts("Gather", send, recv)
    block = recv if rank == root else send
    nbytes = block.count * block.itemsize
    if nbytes == 0:
        return None
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
    )


def allgather(comm: Any, sendbuf: Any, recvbuf: Any) -> None:
    """``MPI_Allgather``: every rank's ``sendbuf`` to block ``i`` of every ``recvbuf``."""
    size = comm.Get_size()
    inplace = _is_in_place(sendbuf)
    recv = _c._spec(recvbuf, False, size)
    send = None if inplace else _c._spec(sendbuf, True)
    if recv is None or (not inplace and send is None):
        return _native_only(comm, "allgather", lambda c: c.Allgather(sendbuf, recvbuf))
    if send is not None:
        _check_counts("Allgather", send, recv)
    return _rootless(
        comm, "allgather", send, recv, inplace, lambda c: c.Allgather(sendbuf, recvbuf)
    )


def alltoall(comm: Any, sendbuf: Any, recvbuf: Any) -> None:
    """``MPI_Alltoall``: block ``j`` of rank ``i``'s ``sendbuf`` to block ``i`` of rank
    ``j``'s ``recvbuf``."""
    size = comm.Get_size()
    inplace = _is_in_place(sendbuf)
    recv = _c._spec(recvbuf, False, size)
    send = None if inplace else _c._spec(sendbuf, True, size)
    if recv is None or (not inplace and send is None):
        return _native_only(comm, "alltoall", lambda c: c.Alltoall(sendbuf, recvbuf))
    if send is not None:
        _check_counts("Alltoall", send, recv)
    return _rootless(comm, "alltoall", send, recv, inplace, lambda c: c.Alltoall(sendbuf, recvbuf))


def _rootless(comm: Any, op: str, send: Any, recv: Any, inplace: bool, native: Callable) -> None:
    nbytes = recv.count * recv.itemsize
    if nbytes == 0:
        return None
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
    )


def _native_only(comm: Any, op: str, call: Callable[[MPI.Intracomm], object]) -> None:
    """A datatype with holes: the MPI library's own collective (no schedule can say
    where its bytes are)."""
    state = _c._ready(comm)
    state.last_plan = _c.FixedPlan(
        op, state.plan_grid.name, 0, 0, 1, NATIVE, reason="its datatype is not contiguous"
    )
    _c._native_call(state, call, f"rank {comm.Get_rank()}: native {op}")


# -- reductions ------------------------------------------------------------------------


_CHECKED: dict[tuple[int, int], None] = {}


def check_op(op: Any, datatype: MPI.Datatype) -> bool:
    """Return whether ``op`` commutes; raise before any message if it cannot reduce
    ``datatype`` (not an ``MPI.Op``, ``MPI.OP_NULL``, or a predefined operation the MPI
    library refuses for that type, found by reducing one zero element locally)."""
    if not isinstance(op, MPI.Op):
        raise TypeError(f"op must be an mpi4py MPI.Op (MPI.SUM, MPI.Op.Create(...)), not {op!r}")
    if op == MPI.OP_NULL:
        raise ParameterError("op is MPI.OP_NULL: no reduction operation")
    key = (MPI._handleof(op), MPI._handleof(datatype))
    if op.is_predefined and key not in _CHECKED:
        a = np.zeros(datatype.Get_extent()[1], dtype=np.uint8)
        b = a.copy()
        try:
            op.Reduce_local([a, 1, datatype], [b, 1, datatype])
        except MPI.Exception as err:
            raise ParameterError(
                f"the MPI library refuses reduction operation {_op_name(op)} on datatype "
                f"{datatype.Get_name() or datatype!r}: {err.Get_error_string()}"
            ) from err
        _CHECKED[key] = None
    return bool(op.Is_commutative())


def _op_name(op: MPI.Op) -> str:
    for name in ("SUM", "PROD", "MAX", "MIN", "LAND", "LOR", "LXOR", "BAND", "BOR", "BXOR"):
        if op == getattr(MPI, name):
            return f"MPI.{name}"
    for name in ("MAXLOC", "MINLOC", "REPLACE", "NO_OP"):
        if op == getattr(MPI, name):
            return f"MPI.{name}"
    return repr(op)


def reducer(op: MPI.Op, datatype: MPI.Datatype, itemsize: int, commutative: bool) -> Callable:
    """The executor's ``reduce(held, incoming, incoming_first)`` for ``op`` (module notes)."""

    def combine(held: np.ndarray, incoming: np.ndarray, incoming_first: bool) -> None:
        n = held.size // itemsize
        if incoming_first or commutative:
            op.Reduce_local([incoming, n, datatype], [held, n, datatype])
        else:
            op.Reduce_local([held, n, datatype], [incoming, n, datatype])
            held[:] = incoming

    return combine


def _datatype(spec: Any) -> MPI.Datatype:
    """The spec's datatype; for a bare buffer, mpi4py's own choice for its format (the
    predefined type, on which MPI's predefined operations are defined)."""
    if spec.datatype is not None:
        return spec.datatype
    fmt = memoryview(spec.data).format.lstrip("@=<")
    found = MPI._typedict.get(fmt)
    if found is not None:
        return found
    from mpi4py.util.dtlib import from_numpy_dtype

    return from_numpy_dtype(np.dtype(fmt))


def reduce(comm: Any, sendbuf: Any, recvbuf: Any, op: Any, root: int) -> None:
    """``MPI_Reduce``: ``x_0 (op) ... (op) x_{P-1}`` element-wise into the root's ``recvbuf``."""
    rank = comm.Get_rank()
    _c._check_root(comm, root)
    _reduction(comm, "reduce", sendbuf, recvbuf if rank == root else None, op, root)


def allreduce(comm: Any, sendbuf: Any, recvbuf: Any, op: Any) -> None:
    """``MPI_Allreduce``: ``x_0 (op) ... (op) x_{P-1}`` element-wise into every ``recvbuf``."""
    _reduction(comm, "allreduce", sendbuf, recvbuf, op, 0)


def _reduction(comm: Any, which: str, sendbuf: Any, recvbuf: Any, op: Any, root: int) -> None:
    rank, size = comm.Get_rank(), comm.Get_size()
    has_recv = which == "allreduce" or rank == root
    inplace = has_recv and _is_in_place(sendbuf)
    recv = _c._spec(recvbuf, False) if has_recv else None
    send = None if inplace else _c._spec(sendbuf, True)
    if which == "reduce":

        def native(c):
            return c.Reduce(sendbuf, recvbuf, op, root)
    else:

        def native(c):
            return c.Allreduce(sendbuf, recvbuf, op)

    if (has_recv and recv is None) or (not inplace and send is None):
        if not isinstance(op, MPI.Op):
            check_op(op, MPI.BYTE)
        return _native_only(comm, which, native)
    if send is not None and recv is not None:
        _check_counts(which.capitalize(), send, recv)
        if (
            send.datatype is not None
            and recv.datatype is not None
            and send.datatype != recv.datatype
        ):
            raise ValueError(f"{which.capitalize()}: mismatch in send and receive MPI datatypes")
    spec = send if send is not None else recv
    datatype = _datatype(spec)
    commutative = check_op(op, datatype)
    nbytes = spec.count * spec.itemsize
    if nbytes == 0:
        return None
    if size == 1:
        return None if inplace or recv is None else _copy_local(send.view, recv.view)
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
    )


def barrier(comm: Any) -> None:
    """``MPI_Barrier`` as a gridcoll schedule (one WAN round with ``two-level``), or the
    library's own on one cluster or with ``algo="native"``."""
    if comm.Get_size() == 1:
        return
    state = _c._ready(comm)
    prepared = _c._prepare(state, comm.Get_rank(), 0, 0, 1, "barrier")
    state.last_plan = prepared.plan
    if prepared.program is None:
        what = f"rank {comm.Get_rank()}: Barrier (some rank died or never joined)"
        _c._native_call(state, lambda c: c.Barrier(), what)
        return
    _c._execute(state, prepared.program, np.empty(0, dtype=np.uint8))


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


def scatter_obj(comm: Any, sendobj: Any, root: int) -> Any:
    """``comm.scatter``: item ``i`` of the root's sequence to rank ``i``."""
    rank, size = comm.Get_rank(), comm.Get_size()
    _c._check_root(comm, root)
    width = np.zeros(1, dtype=np.int64)
    pickles: list[bytes] = []
    if rank == root:
        pickles = [MPI.pickle.dumps(x) for x in _items(sendobj, size, "scatter")]
        width[0] = max(len(p) for p in pickles)
    if size > 1:
        _c._bcast(comm, width, root)
    recv = np.empty(_LEN + int(width[0]), dtype=np.uint8)
    send = _pack(pickles, int(width[0])) if rank == root else None
    scatter(comm, send, recv, root)
    return _unpack(recv, 1)[0]


def gather_obj(comm: Any, sendobj: Any, root: int) -> list[Any] | None:
    """``comm.gather``: every rank's object, in rank order, at the root (None elsewhere)."""
    rank, size = comm.Get_rank(), comm.Get_size()
    _c._check_root(comm, root)
    mine = [MPI.pickle.dumps(sendobj)]
    width = _widest(comm, mine)
    recv = np.empty(size * (_LEN + width), dtype=np.uint8) if rank == root else None
    gather(comm, _pack(mine, width), recv, root)
    return _unpack(recv, size) if rank == root else None


def allgather_obj(comm: Any, sendobj: Any) -> list[Any]:
    """``comm.allgather``: every rank's object, in rank order, on every rank."""
    size = comm.Get_size()
    mine = [MPI.pickle.dumps(sendobj)]
    width = _widest(comm, mine)
    recv = np.empty(size * (_LEN + width), dtype=np.uint8)
    allgather(comm, _pack(mine, width), recv)
    return _unpack(recv, size)


def alltoall_obj(comm: Any, sendobj: Any) -> list[Any]:
    """``comm.alltoall``: item ``j`` of rank ``i``'s sequence is item ``i`` of rank ``j``'s
    result."""
    size = comm.Get_size()
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


def reduce_obj(comm: Any, sendobj: Any, op: Any, root: int) -> Any:
    """``comm.reduce``: the objects folded with ``op`` in rank order, at the root."""
    _check_callable(op)
    return _fold(gather_obj(comm, sendobj, root), op)


def allreduce_obj(comm: Any, sendobj: Any, op: Any) -> Any:
    """``comm.allreduce``: the objects folded with ``op`` in rank order, on every rank."""
    _check_callable(op)
    return _fold(allgather_obj(comm, sendobj), op)
