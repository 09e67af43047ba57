"""The object (pickle) forms of gridcoll's collectives: ``comm.bcast(obj)``...

The lower-case methods of :class:`gridcoll.Comm` pickle, as mpi4py's do, and move the
pickles with gridcoll's buffer collectives (:mod:`gridcoll.runtime.collectives`):

* ``bcast`` sends a 256-byte head (the length and the first bytes), then the rest;
* ``scatter``, ``gather``, ``allgather`` and ``alltoall`` agree on the largest pickle
  (a gridcoll broadcast or allreduce of one integer), then move padded blocks, each
  the pickle's length then the pickle;
* ``reduce``, ``allreduce``, ``scan`` and ``exscan`` gather (allgather) the objects and
  fold them in rank order, ``op(res, x_i)``, as mpi4py's own reduction of objects does.

On a communicator whose collective the MPI library serves (one cluster, or
``algo="native"``), the call is mpi4py's own object collective on the private
communicator instead (one pickle, one or two MPI calls, as in a plain mpi4py program),
under the watchdog. Which arguments each form checks first, whether it runs under
mpi4py's per-communicator lock, and its gridcoll body are one row of
:data:`OBJECT_FORMS`; :func:`call` is the one path every form takes.

Where this sits in :mod:`gridcoll.runtime`: after ``collectives``, before ``comm``.
"""

from __future__ import annotations

import time as _time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from mpi4py import MPI

from gridcoll.runtime import collectives as _coll
from gridcoll.runtime.buffers import check_root
from gridcoll.runtime.mpi_ops import check_callable
from gridcoll.runtime.prepare import plan_call, run_native, serves_natively
from gridcoll.runtime.state import ready

__all__ = ["OBJECT_FORMS", "ObjectForm", "call"]

_LEN = 8  # bytes of the length in front of every pickled block
_HEAD = 256  # bytes of bcast's first broadcast: 8-byte length, then the first bytes


# -- the gridcoll bodies -----------------------------------------------------------------


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
    _coll.allreduce(comm, mine, out, MPI.MAX)
    return int(out[0])


def _items(sendobj: Any, size: int, what: str) -> list[Any]:
    items = list(sendobj) if sendobj is not None else []
    if len(items) != size:
        raise ValueError(f"{what}: expecting {size} items, got {len(items)}")
    return items


def _bcast(comm: Any, obj: Any, root: int) -> Any:
    """``comm.bcast``: the root's object, pickled, to every rank (one 256-byte head
    with the length and the first bytes, then the rest if any)."""
    rank = comm.Get_rank()
    head = np.zeros(_HEAD, dtype=np.uint8)
    data = b""
    if rank == root:
        data = MPI.pickle.dumps(obj)
        inline = min(len(data), _HEAD - 8)
        head[:8] = np.frombuffer(len(data).to_bytes(8, "little"), dtype=np.uint8)
        head[8 : 8 + inline] = np.frombuffer(data[:inline], dtype=np.uint8)
    if comm.Get_size() > 1:
        _coll.bcast(comm, head, root)
    if rank == root:
        if len(data) > _HEAD - 8 and comm.Get_size() > 1:
            _coll.bcast(comm, np.frombuffer(data, dtype=np.uint8)[_HEAD - 8 :], root)
        return MPI.pickle.loads(data)
    n = int.from_bytes(head[:8].tobytes(), "little")
    inline = min(n, _HEAD - 8)
    whole = np.empty(n, dtype=np.uint8)
    whole[:inline] = head[8 : 8 + inline]
    if n > inline:
        _coll.bcast(comm, whole[inline:], root)
    return MPI.pickle.loads(whole)


def _scatter(comm: Any, sendobj: Any, root: int) -> Any:
    """``comm.scatter``: item ``i`` of the root's sequence to rank ``i``."""
    rank, size = comm.Get_rank(), comm.Get_size()
    width = np.zeros(1, dtype=np.int64)
    pickles: list[bytes] = []
    if rank == root:
        pickles = [MPI.pickle.dumps(x) for x in _items(sendobj, size, "scatter")]
        width[0] = max(len(p) for p in pickles)
    if size > 1:
        _coll.bcast(comm, width, root)
    recv = np.empty(_LEN + int(width[0]), dtype=np.uint8)
    send = _pack(pickles, int(width[0])) if rank == root else None
    _coll.scatter(comm, send, recv, root)
    return _unpack(recv, 1)[0]


def _gather(comm: Any, sendobj: Any, root: int) -> list[Any] | None:
    """``comm.gather``: every rank's object, in rank order, at the root (None elsewhere)."""
    rank, size = comm.Get_rank(), comm.Get_size()
    mine = [MPI.pickle.dumps(sendobj)]
    width = _widest(comm, mine)
    recv = np.empty(size * (_LEN + width), dtype=np.uint8) if rank == root else None
    _coll.gather(comm, _pack(mine, width), recv, root)
    return _unpack(recv, size) if rank == root else None


def _allgather(comm: Any, sendobj: Any) -> list[Any]:
    """``comm.allgather``: every rank's object, in rank order, on every rank."""
    size = comm.Get_size()
    mine = [MPI.pickle.dumps(sendobj)]
    width = _widest(comm, mine)
    recv = np.empty(size * (_LEN + width), dtype=np.uint8)
    _coll.allgather(comm, _pack(mine, width), recv)
    return _unpack(recv, size)


def _alltoall(comm: Any, sendobj: Any) -> list[Any]:
    """``comm.alltoall``: item ``j`` of rank ``i``'s sequence is item ``i`` of rank
    ``j``'s result."""
    size = comm.Get_size()
    pickles = [MPI.pickle.dumps(x) for x in _items(sendobj, size, "alltoall")]
    width = _widest(comm, pickles)
    recv = np.empty(size * (_LEN + width), dtype=np.uint8)
    _coll.alltoall(comm, _pack(pickles, width), recv)
    return _unpack(recv, size)


def _fold(items: list[Any] | None, op: Callable[[Any, Any], Any]) -> Any:
    """mpi4py's reduction of objects: ``op(... op(op(x_0, x_1), x_2) ..., x_{P-1})``."""
    if items is None:
        return None
    result = items[0]
    for item in items[1:]:
        result = op(result, item)
    return result


def _scan(comm: Any, sendobj: Any, op: Any) -> Any:
    """``comm.scan``: the objects of ranks ``0..i`` folded with ``op`` in rank order."""
    items = call(comm, "allgather", sendobj)
    return _fold(items[: comm.Get_rank() + 1], op)


def _exscan(comm: Any, sendobj: Any, op: Any) -> Any:
    """``comm.exscan``: the objects of ranks ``0..i-1`` folded with ``op`` (None on
    rank 0, as mpi4py)."""
    items = call(comm, "allgather", sendobj)
    rank = comm.Get_rank()
    return None if rank == 0 else _fold(items[:rank], op)


def _reduce(comm: Any, sendobj: Any, op: Any, root: int) -> Any:
    """``comm.reduce``: the objects folded with ``op`` in rank order, at the root."""
    return _fold(call(comm, "gather", sendobj, root), op)


def _allreduce(comm: Any, sendobj: Any, op: Any) -> Any:
    """``comm.allreduce``: the objects folded with ``op`` in rank order, on every rank."""
    return _fold(call(comm, "allgather", sendobj), op)


# -- the table and the one path ----------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ObjectForm:
    """One object collective: its mpi4py name, arguments and gridcoll body."""

    name: str
    """mpi4py's method (``comm.bcast``...): the native call, the plan's collective."""
    body: Callable[..., Any]
    """gridcoll's own: ``body(comm, *args)`` with mpi4py's arguments."""
    rooted: bool = False
    """The last argument is a root, checked first (mpi4py's errors)."""
    reduces: bool = False
    """The second argument is an operation, checked first, before the root (an
    ``MPI.Op`` or a callable)."""
    locked: bool = False
    """Runs under mpi4py's per-communicator lock of ``name`` (``MPI._comm_lock``, what
    mpi4py's ``comm.bcast``... take): its two or more calls (a size, then the pickles)
    are not interleaved with another thread's same call. The reductions are not locked
    themselves: the gather they make is."""


OBJECT_FORMS: dict[str, ObjectForm] = {
    form.name: form
    for form in (
        ObjectForm("bcast", _bcast, rooted=True, locked=True),
        ObjectForm("scatter", _scatter, rooted=True, locked=True),
        ObjectForm("gather", _gather, rooted=True, locked=True),
        ObjectForm("allgather", _allgather, locked=True),
        ObjectForm("alltoall", _alltoall, locked=True),
        ObjectForm("reduce", _reduce, rooted=True, reduces=True),
        ObjectForm("allreduce", _allreduce, reduces=True),
        ObjectForm("scan", _scan, reduces=True),
        ObjectForm("exscan", _exscan, reduces=True),
    )
}
"""The object collectives by mpi4py name (``comm.barrier`` is the buffer barrier)."""


def call(comm: Any, name: str, *args: Any) -> Any:
    """``comm.<name>(*args)``, mpi4py's object collective: its checks (a root, an
    operation), then mpi4py's own on the private communicator if the MPI library
    serves ``name`` here, else gridcoll's body (:data:`OBJECT_FORMS`)."""
    form = OBJECT_FORMS[name]
    if not form.locked:
        return _run(comm, form, args)
    with MPI._comm_lock(comm, name):
        return _run(comm, form, args)


def _run(comm: Any, form: ObjectForm, args: tuple) -> Any:
    root = args[-1] if form.rooted else 0
    if form.reduces:
        check_callable(args[1])
    if form.rooted:
        check_root(comm, root)
    if comm.Get_size() > 1:
        state = ready(comm)
        if serves_natively(state, form.name):
            return _natively(comm, state, form.name, args, root)
    return form.body(comm, *args)


def _natively(comm: Any, state: Any, name: str, args: tuple, root: int) -> Any:
    """mpi4py's own ``name`` on the private communicator, under the watchdog; with a
    log, the call's line (:mod:`gridcoll.runtime.record`)."""
    logged = state.log is not None
    start = _time.monotonic() if logged else 0.0
    agree = {"collective": f"{name} of objects", "root": root}
    what = f"rank {comm.Get_rank()}: native {name} of objects"
    result = run_native(state, lambda c: getattr(c, name)(*args), what, agree)
    if logged:
        state.last = plan_call(state, name, 1, root, 1)
        _coll.record(comm, state, state.last, start, start)
    return result
