"""MPI reduction operations in gridcoll's collectives: checks, labels, and the combine.

A reduction applies the MPI operation to each received segment with
``Op.Reduce_local(inbuf, inoutbuf)``, which computes ``inoutbuf = inbuf (op)
inoutbuf``: a receive with ``incoming_first`` (``held = incoming (op) held``) is
``Reduce_local(incoming, held)``; a default one (``held = held (op) incoming``) is
``Reduce_local(held, incoming)`` followed by a copy of the result into ``held``, the
operand order :func:`gridcoll.schedule.validate` proves for non-commutative operations
(the result is ``x_0 (op) x_1 (op) ... (op) x_{P-1}``, as MPI defines it). For a
commutative operation the copy is skipped (:func:`reducer`).

A user's operation (``MPI.Op.Create(function, commute)``) is called directly, on
``MPI.buffer`` objects of the segment's bytes as mpi4py hands them, so an exception in
it propagates from the collective on this rank instead of aborting the job.

Every operation is checked before any message is sent (:func:`check_op`), and each
call's headers carry its name (:func:`op_label`), so ranks that reduce with different
operations fail instead of returning different results.
"""

from __future__ import annotations

import zlib as _zlib
from collections.abc import Callable
from typing import Any

import numpy as np
from mpi4py import MPI

from gridcoll.errors import ParameterError
from gridcoll.memo import Memo

__all__ = ["check_callable", "check_op", "op_label", "reducer"]


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


def check_callable(op: Any) -> None:
    """The object reductions' check (``comm.reduce(obj, op)``): ``op`` is an
    ``MPI.Op`` other than ``MPI.OP_NULL``, or any callable ``op(x, y)``."""
    if not callable(op):
        raise TypeError(f"op must be an MPI.Op or a callable op(x, y), not {op!r}")
    if isinstance(op, MPI.Op) and op == MPI.OP_NULL:
        raise ParameterError("op is MPI.OP_NULL: no reduction operation")
