"""mpi4py's buffer specs, parsed into byte views before any message is sent.

The forms mpi4py accepts for a collective's buffer: ``buf``, ``[buf, datatype]``,
``[buf, count]``, ``[buf, count, datatype]``, ``[buf, (count, displ), datatype]`` and
``[buf, count, displ, datatype]``; for a per-rank row (mpi4py's ``BufSpecB``) an explicit
count is per block. :func:`parse` returns the bytes the call moves as a ``uint8`` view
of the caller's memory (no copy), or None for a datatype with holes, which only the MPI
library's own collective can place. The errors are mpi4py's own.

The vector forms of the v-variants (mpi4py's ``BufSpecV``): ``buf`` (equal blocks),
``[buf, counts]``, ``[buf, counts, displs]``, ``[buf, (counts, displs)]``, each with a
datatype last; ``counts`` a sequence (or one integer for every block, or None: equal
blocks), ``displs`` a sequence (or None: packed in order). :func:`parse_vector`
returns a :class:`VectorSpec` (byte view of the whole buffer, counts and
displacements in items).

The buffer objects are mpi4py's too (``mpi4py.MPI.buffer``, tried in its order): the
buffer protocol (numpy, ``array.array``, ``bytearray``, ``memoryview``...), then DLPack
(``__dlpack__`` with ``__dlpack_device__``), then the CUDA array interface
(``__cuda_array_interface__``). An object without the buffer protocol is viewed
through mpi4py's own conversion (:func:`host_array`: its checks of contiguity and
writability, its errors; its element type, which a bare buffer's datatype follows), and
refused with :class:`~gridcoll.errors.DeviceBufferError` when its memory is not
CPU-accessible (a CUDA array interface, a DLPack tensor on a GPU), where mpi4py would
hand a device pointer to a CUDA-aware MPI. An object with only ``__array_interface__``
is refused as mpi4py refuses it (``TypeError``).

Where this sits in :mod:`gridcoll.runtime`: below :mod:`~gridcoll.runtime.collectives`
(which parses every argument here first); it imports nothing of the runtime. Every
function is O(1) besides mpi4py's own check of an unusual spec.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as _np
from mpi4py import MPI

from gridcoll.errors import DeviceBufferError

__all__ = [
    "Spec",
    "VectorSpec",
    "bytes_of",
    "check_counts",
    "check_root",
    "data_bytes",
    "datatype_of",
    "host_array",
    "is_in_place",
    "message",
    "parse",
    "parse_vector",
    "per_block",
    "signature",
]


@dataclass(slots=True)
class Spec:
    """A parsed mpi4py buffer spec."""

    view: _np.ndarray
    """The message's bytes (every block)."""
    itemsize: int
    """The datatype's extent."""
    count: int
    """Elements per block (of the whole message for fewer than 2 blocks)."""
    datatype: MPI.Datatype | None
    """The spec's datatype; None: the buffer's own format."""
    data: Any
    """The buffer object."""


def parse(buf: Any, readonly: bool, blocks: int = 0) -> Spec | None:
    """Parse an mpi4py buffer spec; None: a datatype with holes (use native MPI).

    With ``blocks >= 2`` (a collective's per-rank row, mpi4py's ``BufSpecB``) an
    explicit count is per block and an inferred one the entries divided by ``blocks``.
    Errors are mpi4py's own: an unusual spec first goes through ``MPI.COMM_SELF.Bcast``,
    a no-op on one process that raises exactly what mpi4py raises for a bad buffer.
    """
    if (
        type(buf) is _np.ndarray  # the common case, first: a plain contiguous array
        and buf.flags.c_contiguous
        and (readonly or buf.flags.writeable)
        and not buf.dtype.hasobject
    ):
        itemsize = max(buf.itemsize, 1)
        count = per_block(buf.size, blocks)
        return Spec(buf.reshape(-1).view(_np.uint8), itemsize, count, None, buf)
    head = buf[0] if isinstance(buf, list | tuple) and buf else buf
    host_array(head, True)  # device memory: refused before mpi4py sees it
    MPI.COMM_SELF.Bcast(buf, 0)
    data, count, displ, dtype = buf, None, 0, None
    if isinstance(buf, list | tuple):
        data, rest = buf[0], list(buf[1:])
        if rest and (isinstance(rest[-1], MPI.Datatype | str)):
            dtype = rest.pop()
        if len(rest) == 2:
            count, displ = rest
        elif len(rest) == 1:
            count = rest[0]
            if isinstance(count, list | tuple):
                count, displ = count
    if isinstance(dtype, str):
        from mpi4py.util.dtlib import from_numpy_dtype

        dtype = from_numpy_dtype(dtype)
    if data is None or data is MPI.IN_PLACE or data is MPI.BOTTOM:
        if count:
            return None
        return Spec(_np.empty(0, _np.uint8), 1, 0, dtype, data)
    data = host_array(data, readonly)
    view = bytes_of(data)
    itemsize = _itemsize(data, dtype)
    if itemsize is None:
        return None  # a datatype with holes: MPI's own collective handles it
    if count is None:
        count = per_block(view.size // itemsize - displ, blocks)
    start, nbytes = displ * itemsize, count * itemsize * max(blocks, 1)
    if start < 0 or start + nbytes > view.size:
        raise MPI.Exception(MPI.ERR_COUNT)
    return Spec(view[start : start + nbytes], itemsize, count, dtype, data)


@dataclass(slots=True)
class VectorSpec:
    """A parsed mpi4py vector buffer spec (a v-variant's uneven blocks)."""

    view: _np.ndarray
    """The whole buffer's bytes."""
    itemsize: int
    """The datatype's extent."""
    counts: tuple[int, ...]
    """Elements of every block."""
    displs: tuple[int, ...]
    """Where every block starts, in elements from the buffer's start."""
    datatype: MPI.Datatype | None
    data: Any

    def block_spec(self) -> Spec:
        """A :class:`Spec` of the same datatype (for :func:`signature`)."""
        return Spec(self.view, self.itemsize, 0, self.datatype, self.data)

    def byte_counts(self) -> tuple[int, ...]:
        return tuple(c * self.itemsize for c in self.counts)

    def byte_displs(self) -> tuple[int, ...]:
        return tuple(d * self.itemsize for d in self.displs)


def _itemsize(data: Any, dtype: MPI.Datatype | None) -> int | None:
    """The element's extent: the datatype's, or the buffer's format; None for a
    datatype with holes (only the MPI library can place its bytes)."""
    if dtype is None:
        return max(memoryview(data).itemsize, 1)
    lb, extent = dtype.Get_extent()
    tlb, textent = dtype.Get_true_extent()
    if not (lb == 0 and tlb == 0 and dtype.Get_size() == extent == textent):
        return None
    return extent


def _is_int(value: Any) -> bool:
    return isinstance(value, int | _np.integer) and not isinstance(value, bool)


def _int_list(value: Any, blocks: int, what: str) -> list[int]:
    """mpi4py's counts or displacements: a sequence of ``blocks`` integers, or one."""
    if _is_int(value):
        return [int(value)] * blocks
    try:
        out = [int(v) for v in value]
    except TypeError as err:
        raise TypeError(f"message: {what} must be an integer or a sequence of them") from err
    if len(out) != blocks:
        raise ValueError(f"message: expecting {blocks} {what}, got {len(out)}")
    return out


def parse_vector(buf: Any, readonly: bool, blocks: int) -> VectorSpec | None:
    """Parse an mpi4py vector spec of ``blocks`` blocks (module notes); None: a
    datatype with holes (native MPI). Raises ``MPI.Exception(ERR_COUNT)`` for a block
    outside the buffer, ``ValueError`` for counts that cannot be inferred or have the
    wrong length, ``TypeError`` for a bad form, as mpi4py does."""
    data, counts, displs, dtype = buf, None, None, None
    if isinstance(buf, list | tuple):
        if not 1 <= len(buf) <= 4:
            raise ValueError("message: expecting 2 to 4 items")
        data, rest = buf[0], list(buf[1:])
        if rest and isinstance(rest[-1], MPI.Datatype | str):
            dtype = rest.pop()
        if len(rest) == 2:
            counts, displs = rest
        elif len(rest) == 1:
            counts = rest[0]
            if isinstance(counts, tuple) and len(counts) == 2 and not _is_int(counts[0]):
                counts, displs = counts  # (counts, displs), not two counts
    if isinstance(dtype, str):
        from mpi4py.util.dtlib import from_numpy_dtype

        dtype = from_numpy_dtype(dtype)
    if data is None or data is MPI.BOTTOM:
        raise TypeError("message: the buffer of a v-collective cannot be None or MPI.BOTTOM")
    data = host_array(data, readonly)
    view = bytes_of(data)
    itemsize = _itemsize(data, dtype)
    if itemsize is None:
        return None
    if counts is None:
        counts = [per_block(view.size // itemsize, blocks)] * blocks
    counts = _int_list(counts, blocks, "counts")
    if displs is None:
        displs = [sum(counts[:i]) for i in range(blocks)]
    elif _is_int(displs):
        displs = [i * int(displs) for i in range(blocks)]
    displs = _int_list(displs, blocks, "displacements")
    for c, d in zip(counts, displs, strict=True):
        if c < 0 or d < 0 or (c and (d + c) * itemsize > view.size):
            raise MPI.Exception(MPI.ERR_COUNT)
    return VectorSpec(view, itemsize, tuple(counts), tuple(displs), dtype, data)


def host_array(data: Any, readonly: bool) -> Any:
    """``data`` as the buffer object the collective reads and writes: itself if it has
    the buffer protocol, else a numpy array over its memory made through mpi4py's own
    conversion (``MPI.buffer``: DLPack, then the CUDA array interface).

    mpi4py's checks and errors apply (``BufferError``: not contiguous; not writable,
    unless ``readonly``); memory the CPU cannot read (mpi4py's ``buffer.cast`` refuses
    it) raises :class:`~gridcoll.errors.DeviceBufferError`. The element type is the
    one mpi4py infers (DLPack's dtype; bytes where numpy has no such type, as mpi4py
    then uses ``MPI.BYTE``). An object mpi4py does not take is returned unchanged, for
    mpi4py's own error to be raised where it is used. O(1) besides the conversion.
    """
    if data is None or data is MPI.IN_PLACE or data is MPI.BOTTOM:
        return data
    try:
        fixed = memoryview(data).readonly
    except TypeError:
        pass  # no buffer protocol
    else:
        if fixed and not readonly:
            MPI.buffer.frombuffer(data, readonly=False)  # raises mpi4py's own error
            raise BufferError("Object is not writable.")
        return data
    if not hasattr(data, "__dlpack__") and not hasattr(data, "__cuda_array_interface__"):
        return data
    try:
        memory = MPI.buffer.frombuffer(data, readonly=True)
    except (TypeError, NotImplementedError, AttributeError, KeyError):
        return data  # not a buffer mpi4py takes: its error comes where it is used
    try:
        raw = memory.cast("B")
    except BufferError as err:
        raise DeviceBufferError(
            f"a {type(data).__name__} buffer in device memory (mpi4py: {err}): gridcoll's "
            "schedules read and write buffers from the CPU; copy it to host memory "
            "(numpy.asarray, .get(), .cpu()) or call mpi4py's own collective on a "
            "CUDA-aware MPI"
        ) from err
    if not readonly:  # mpi4py's error if not writable; else a writable view
        raw = MPI.buffer.frombuffer(data, readonly=False)
    out = _np.frombuffer(raw, dtype=_np.uint8)
    return out.view(_element_type(data, out.size))


def _element_type(data: Any, nbytes: int) -> _np.dtype:
    """The element type mpi4py infers for a DLPack buffer (its format), as a numpy
    dtype; ``uint8`` (mpi4py: ``MPI.BYTE``) where numpy cannot say."""
    try:
        dtype = _np.from_dlpack(data).dtype
    except (TypeError, ValueError, BufferError, RuntimeError, AttributeError):
        return _np.dtype(_np.uint8)
    if dtype.itemsize == 0 or nbytes % dtype.itemsize:
        return _np.dtype(_np.uint8)
    return dtype


def message(buf: Any, root_side: bool) -> tuple[_np.ndarray | None, int]:
    """A broadcast's buffer spec: (byte view, item size); view None: native MPI."""
    spec = parse(buf, root_side)
    return (None, 1) if spec is None else (spec.view, spec.itemsize)


def per_block(entries: int, blocks: int) -> int:
    """Elements per block of a row of ``entries`` elements (mpi4py's rule and error)."""
    if blocks < 2:
        return entries
    if entries % blocks:
        raise ValueError(
            f"message: cannot infer count, number of entries {entries} is not a multiple "
            f"of required number of blocks {blocks}"
        )
    return entries // blocks


def bytes_of(data: Any) -> _np.ndarray:
    """The bytes of a buffer in memory order, as a ``uint8`` view (a copy only for a
    non-contiguous buffer that is not a numpy array's transpose)."""
    if isinstance(data, _np.ndarray):
        arr = data if data.flags.c_contiguous else data.T
        return arr.reshape(-1).view(_np.uint8)
    mv = memoryview(data)
    if not mv.c_contiguous:
        arr = _np.asarray(data)
        return bytes_of(arr)
    return _np.frombuffer(mv.cast("B"), dtype=_np.uint8)


def data_bytes(buf: Any) -> int:
    """The bytes of a spec :func:`parse` cannot view (a datatype with holes) as MPI
    counts them: ``count x datatype size`` when the spec names both (per block), else
    the buffer's size; 0 if unknown. For the plan of a call only MPI can place."""
    data, count, dtype = buf, None, None
    if isinstance(buf, list | tuple) and buf:
        data, rest = buf[0], list(buf[1:])
        if rest and isinstance(rest[-1], MPI.Datatype):
            dtype = rest.pop()
        if rest:
            count = rest[0][0] if isinstance(rest[0], list | tuple) else rest[0]
    if isinstance(count, int) and dtype is not None:
        return count * dtype.Get_size()
    try:
        return memoryview(data).nbytes
    except TypeError:
        pass
    try:
        return MPI.buffer.frombuffer(data, readonly=True).nbytes  # DLPack, CAI
    except (TypeError, BufferError, NotImplementedError, AttributeError, KeyError):
        return 0


def datatype_of(spec: Spec) -> MPI.Datatype:
    """The spec's datatype; for a bare buffer, mpi4py's own choice for its format (the
    predefined type, on which MPI's predefined operations are defined)."""
    if spec.datatype is not None:
        return spec.datatype
    fmt = memoryview(spec.data).format.lstrip("@=<")
    found = MPI._typedict.get(fmt)
    if found is not None:
        return found
    from mpi4py.util.dtlib import from_numpy_dtype

    return from_numpy_dtype(_np.dtype(fmt))


def signature(spec: Spec) -> str:
    """The type signature of the spec's elements, as every header carries it: the numpy
    type string of its datatype (``'<f8'``, ``'<i8'``, ``'|u1'``; for a derived type
    numpy's text of it, ``"('<f8', (4,))"``).

    Through numpy, not the MPI datatype's name, so the forms mpi4py treats alike agree
    (a ``float64`` array, ``[a, MPI.DOUBLE]`` and ``[a, 'd']``; ``MPI.LONG`` and
    ``MPI.INT64_T``) while types of one size that MPI would reduce differently
    (``float64`` and ``int64``) do not. A type numpy cannot describe is named by its
    MPI name and size; an empty spec (``None``, ``MPI.IN_PLACE``) by ``''``. O(1) for
    a bare array (the common case); a derived datatype is decoded each call (its
    handle may be freed and reused, so it is not cached).
    """
    data = spec.data
    if spec.datatype is None:
        if type(data) is _np.ndarray:
            return _dtype_text(data.dtype)
        if data is None or data is MPI.IN_PLACE or data is MPI.BOTTOM:
            return ""
        try:
            return _dtype_text(_np.dtype(memoryview(data).format))
        except (TypeError, ValueError):
            return f"bytes:{spec.itemsize}"
    from mpi4py.util.dtlib import to_numpy_dtype

    try:
        return _dtype_text(to_numpy_dtype(spec.datatype))
    except (TypeError, ValueError, KeyError, MPI.Exception):
        name = spec.datatype.Get_name() or "derived"
        return f"{name}:{spec.datatype.Get_size()}"


def _dtype_text(dtype: _np.dtype) -> str:
    if dtype.fields is None and dtype.subdtype is None:
        return dtype.str
    return str(dtype)


def check_root(comm: MPI.Intracomm, root: Any) -> None:
    """mpi4py's errors for a bad root: ``TypeError``, or ``MPI.Exception(ERR_ROOT)``."""
    if not isinstance(root, int) or isinstance(root, bool):
        raise TypeError("an integer is required")
    if not 0 <= root < comm.Get_size():
        raise MPI.Exception(MPI.ERR_ROOT)


def is_in_place(buf: Any) -> bool:
    """mpi4py's rule: ``None`` or ``MPI.IN_PLACE``."""
    return buf is None or buf is MPI.IN_PLACE


def check_counts(what: str, send: Spec, recv: Spec) -> None:
    """The bytes of one block must agree on both sides of a rank's own call."""
    sb, rb = send.count * send.itemsize, recv.count * recv.itemsize
    if sb != rb:
        raise ValueError(
            f"{what}: mismatch in send count {send.count} ({sb} B) and receive count "
            f"{recv.count} ({rb} B) per block"
        )
