"""mpi4py's buffer specs, parsed into byte views before any message is sent.

The parsing mirrors mpi4py 4.1.2's own (``src/mpi4py/MPI.src/msgbuffer.pxi``): the
forms, the unpacking rules and the errors (their classes and messages) are mpi4py's, so
a spec :class:`gridcoll.Comm` takes is one mpi4py takes, and a spec mpi4py refuses is
refused with mpi4py's error before any message is sent.

A block collective's buffer (mpi4py's ``message_simple``): ``buf``, ``[buf, datatype]``,
``[buf, count]``, ``[buf, count, datatype]``, ``[buf, (count, displ)]``,
``[buf, (count, displ), datatype]`` (a list or a tuple) and ``[buf, count, displ,
datatype]``; ``count`` None: inferred, ``displ`` None: 0. For a per-rank row
(mpi4py's ``BufSpecB``) an explicit count is per block. :func:`parse` returns the bytes
the call moves as a ``uint8`` view of the caller's memory (no copy), or None for what
only the MPI library can place: a datatype with holes, or a nonzero count from
``MPI.BOTTOM`` (absolute addresses). A ``None`` or ``MPI.BOTTOM`` buffer needs a
datatype (mpi4py's ``message_basic``); with a zero count it gives an empty spec that
keeps the datatype (its extent is the item size), and ``None`` with a nonzero count is
mpi4py's ``ValueError``.

The vector forms of the v-variants (mpi4py's ``message_vector``, ``BufSpecV``):
``buf``, ``[buf, counts]``, ``[buf, datatype]``, ``[buf, counts, datatype]``,
``[buf, counts, displs, datatype]``, and ``[buf, (counts, displs)]``,
``[buf, (counts, displs), datatype]``. A *tuple* in the second place of the 2- and
3-item forms is always ``(counts, displs)`` (any other length is Cython's unpacking
``ValueError``); a list (or any other sequence) is the counts. ``counts``: a sequence
of ``blocks`` integers (else ``ValueError: expecting {n} items, got {size}``), one
integer for every block, or None: the buffer's items spread over the blocks, the first
``items % blocks`` blocks one item longer. ``displs``: a sequence, one integer (a
stride: block ``i`` at ``i * displ``) or None (packed in order). A ``None`` or
``MPI.BOTTOM`` buffer takes an explicit datatype: every count zero gives an empty
:class:`VectorSpec`, any other count None (MPI's own call, which places or refuses
it). mpi4py checks no block against the buffer; here a negative count, and a block with
items outside the buffer, raise ``MPI.Exception(ERR_COUNT)`` (MPI's class for a bad
count) before any message. :func:`parse_vector` returns a :class:`VectorSpec` (byte
view of the whole buffer, counts and displacements in items).

A datatype given as a string is looked up as mpi4py looks it up (``MPI._typedict``:
``'i'``, ``'f8'``, ``'Zd'``...; ``KeyError: cannot map ... to MPI datatype``); a bare
buffer's datatype is the one mpi4py maps its format to (``KeyError`` for a format it
cannot map, such as a numpy structured type).

The buffer objects are mpi4py's too (``mpi4py.MPI.buffer``, tried in its order): the
buffer protocol (numpy, ``array.array``, ``bytearray``, ``memoryview``...), then DLPack
(``__dlpack__`` with ``__dlpack_device__``), then the CUDA array interface
(``__cuda_array_interface__``). An object without the buffer protocol is viewed through
mpi4py's own conversion (:func:`host_array`: its checks of contiguity and writability,
its errors; its element type, which a bare buffer's datatype follows). Memory the CPU
cannot read (a CUDA array interface, a DLPack tensor on a GPU) has no host view: the
call goes to the MPI library's own collective, which mpi4py hands the device pointer, as
a plain mpi4py program does (a CUDA-aware MPI moves it). A DLPack tensor's element type
is read from its ``DLTensor`` as mpi4py reads it (``dlpack_get_format`` in
``asdlpack.pxi``): bool, the C integer types, float16, float, double, long double and
their complex types; any other type (complex32, bfloat16, vector lanes) is bytes, as
mpi4py then uses ``MPI.BYTE``. An object with only ``__array_interface__`` is refused as
mpi4py refuses it (``TypeError``).

Where this sits in :mod:`gridcoll.runtime`: below :mod:`~gridcoll.runtime.collectives`
(which parses every argument here first); it imports nothing of the runtime. Every
function is O(1) besides mpi4py's own check of an unusual spec and the O(blocks)
counts and displacements of a vector spec.
"""

from __future__ import annotations

import ctypes
import operator
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as _np
from mpi4py import MPI

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
    """Parse an mpi4py buffer spec (mpi4py's ``message_simple``); None: what only the
    MPI library can place (a datatype with holes, a nonzero count from ``MPI.BOTTOM``).

    With ``blocks >= 2`` (a collective's per-rank row, mpi4py's ``BufSpecB``) an
    explicit count is per block and an inferred one the entries divided by ``blocks``.
    Errors are mpi4py's own: an unusual spec first goes through ``MPI.COMM_SELF.Bcast``,
    a no-op on one process that raises exactly what mpi4py raises for a bad buffer.
    A count reaching past the buffer raises ``MPI.Exception(ERR_COUNT)``.
    """
    if (
        type(buf) is _np.ndarray  # the common case, first: a plain contiguous array
        and buf.flags.c_contiguous
        and (readonly or buf.flags.writeable)
        and _mapped_dtype(buf.dtype)
    ):
        itemsize = max(buf.itemsize, 1)
        count = per_block(buf.size, blocks)
        return Spec(buf.reshape(-1).view(_np.uint8), itemsize, count, None, buf)
    head = buf[0] if isinstance(buf, list | tuple) and buf else buf
    if head is not None and host_array(head, True) is None:
        return None  # device memory: the MPI library's own collective
    MPI.COMM_SELF.Bcast(buf, 0)  # mpi4py's checks and errors (readonly, one block)
    data, o_count, o_displ, o_type = _unpack_simple(buf)
    dtype = None if o_type is None else _asdatatype(o_type)
    count = None if o_count is None else operator.index(o_count)
    displ = 0 if o_displ is None else operator.index(o_displ)
    if _is_bottom(data) or data is MPI.IN_PLACE:
        if count:
            return None  # absolute addresses from MPI_BOTTOM: MPI's own call
        extent = 1 if dtype is None else max(dtype.Get_extent()[1], 1)
        return Spec(_np.empty(0, _np.uint8), extent, 0, dtype, data)
    data = host_array(data, readonly)
    itemsize = None if data is None else _itemsize(data, dtype)
    if itemsize is None:
        return None  # device memory, a datatype with holes: MPI's own collective
    view = bytes_of(data)
    if count is None:
        count = per_block(view.size // itemsize - displ, blocks) if itemsize else 0
    start, nbytes = displ * itemsize, count * itemsize * max(blocks, 1)
    if start < 0 or start + nbytes > view.size:
        raise MPI.Exception(MPI.ERR_COUNT)
    return Spec(view[start : start + nbytes], itemsize, count, dtype, data)


def _unpack_simple(msg: Any) -> tuple[Any, Any, Any, Any]:
    """mpi4py's ``message_simple`` unpacking of a spec it has accepted: (buffer, count,
    displacement, datatype), None where left out. A list or tuple in the second place
    of the 2- and 3-item forms is ``(count, displ)``."""
    if not isinstance(msg, list | tuple) or _is_buffer(msg):
        return msg, None, None, None
    if len(msg) == 4:
        o_buf, o_count, o_displ, o_type = msg
        return o_buf, o_count, o_displ, o_type
    o_buf, o_count, o_displ, o_type = msg[0], msg[1], None, None
    if len(msg) == 2 and _is_datatype(o_count):
        o_count, o_type = None, o_count
    else:
        if len(msg) == 3:
            o_type = msg[2]
        if isinstance(o_count, list | tuple):
            o_count, o_displ = _unpack_two(o_count)
    return o_buf, o_count, o_displ, o_type


@dataclass(slots=True)
class VectorSpec:
    """A parsed mpi4py vector buffer spec (a v-variant's uneven blocks)."""

    view: _np.ndarray
    """The whole buffer's bytes (none for a ``None`` or ``MPI.BOTTOM`` buffer)."""
    itemsize: int
    """The datatype's extent."""
    counts: tuple[int, ...]
    """Elements of every block."""
    displs: tuple[int, ...]
    """Where every block starts, in elements from the buffer's start."""
    datatype: MPI.Datatype | None
    """The spec's datatype; None: the buffer's own format."""
    data: Any
    """The buffer object."""

    def block_spec(self) -> Spec:
        """A :class:`Spec` of the same datatype (for :func:`signature`)."""
        return Spec(self.view, self.itemsize, 0, self.datatype, self.data)

    def byte_counts(self) -> tuple[int, ...]:
        return tuple(c * self.itemsize for c in self.counts)

    def byte_displs(self) -> tuple[int, ...]:
        return tuple(d * self.itemsize for d in self.displs)


def parse_vector(buf: Any, readonly: bool, blocks: int) -> VectorSpec | None:
    """Parse an mpi4py vector spec of ``blocks`` blocks (mpi4py's ``message_vector``;
    the forms in the module notes); None: what only the MPI library can place (a
    datatype with holes; a ``None`` or ``MPI.BOTTOM`` buffer with a nonzero count).

    Raises mpi4py's errors (``TypeError``/``ValueError``/``KeyError``/``OverflowError``
    with its messages, ``BufferError`` from its buffer conversion), and
    ``MPI.Exception(ERR_COUNT)`` for a negative count or a block with items outside
    the buffer. O(blocks).
    """
    o_buf, o_counts, o_displs, o_type = _unpack_vector(buf)
    data, btype, nbytes = _message_basic(o_buf, o_type, readonly)
    if data is None and o_buf is not None:
        return None  # device memory: the MPI library's own collective
    counts, displs = _vector_counts(o_counts, o_displs, blocks, btype, nbytes)
    if _is_bottom(data):
        extent = _itemsize(None, btype)
        if extent is None or any(counts):
            return None  # absolute addresses from MPI_BOTTOM: MPI's own call
        return VectorSpec(_np.empty(0, _np.uint8), max(extent, 1), counts, displs, btype, data)
    dtype = None if o_type is None else btype
    itemsize = _itemsize(data, dtype)
    if itemsize is None:
        return None  # a datatype with holes: MPI's own collective handles it
    view = bytes_of(data)
    for c, d in zip(counts, displs, strict=True):
        if c < 0 or (c and (d < 0 or (d + c) * itemsize > view.size)):
            raise MPI.Exception(MPI.ERR_COUNT)
    return VectorSpec(view, itemsize, counts, displs, dtype, data)


def _unpack_vector(msg: Any) -> tuple[Any, Any, Any, Any]:
    """mpi4py's ``message_vector`` unpacking: (buffer, counts, displacements,
    datatype), None where left out. Only a *tuple* in the second place of the 2- and
    3-item forms is ``(counts, displs)``; a list there is the counts."""
    if _is_buffer(msg):
        return msg, None, None, None
    if isinstance(msg, list | tuple):
        nargs = len(msg)
        o_displs = o_type = None
        if nargs == 2:
            o_buf, o_counts = msg
            if _is_datatype(o_counts):
                o_counts, o_type = None, o_counts
            elif isinstance(o_counts, tuple):
                o_counts, o_displs = _unpack_two(o_counts)
        elif nargs == 3:
            o_buf, o_counts, o_type = msg
            if isinstance(o_counts, tuple):
                o_counts, o_displs = _unpack_two(o_counts)
        elif nargs == 4:
            o_buf, o_counts, o_displs, o_type = msg
        else:
            raise ValueError("message: expecting 2 to 4 items")
        return o_buf, o_counts, o_displs, o_type
    if hasattr(msg, "__dlpack__") or hasattr(msg, "__cuda_array_interface__"):
        return msg, None, None, None
    raise TypeError("message: expecting buffer or list/tuple")


def _unpack_two(pair: list | tuple) -> tuple[Any, Any]:
    """Cython's unpacking of a pair, with its messages (``msgbuffer.pxi`` is Cython)."""
    if len(pair) > 2:
        raise ValueError("too many values to unpack (expected 2)")
    if len(pair) < 2:
        n = len(pair)
        raise ValueError(f"need more than {n} value{'' if n == 1 else 's'} to unpack")
    return pair[0], pair[1]


def _message_basic(o_buf: Any, o_type: Any, readonly: bool) -> tuple[Any, MPI.Datatype, int]:
    """mpi4py's ``message_basic``: (buffer, datatype, bytes); a ``None`` or
    ``MPI.BOTTOM`` buffer has no bytes and needs a datatype. An unusual buffer first
    goes through ``MPI.COMM_SELF.Bcast`` with a zero count, which runs mpi4py's own
    ``message_basic`` on it (its conversion, checks and errors) and moves nothing."""
    if _is_bottom(o_buf):
        return o_buf, _asdatatype(o_type), 0
    data = host_array(o_buf, readonly)  # mpi4py's writability check
    if data is None:
        return None, _asdatatype(MPI.BYTE if o_type is None else o_type), 0  # device memory
    plain = (
        type(o_buf) is _np.ndarray
        and (o_buf.flags.c_contiguous or o_buf.flags.f_contiguous)
        and not o_buf.dtype.hasobject
        and (o_type is not None or _mapped_dtype(o_buf.dtype))
    )
    if not plain:  # a datatype object plays no part in the checks: MPI.BYTE stands in
        MPI.COMM_SELF.Bcast([o_buf, 0] if o_type is None else [o_buf, 0, MPI.BYTE], 0)
    btype = _asdatatype(o_type) if o_type is not None else _format_datatype(data)
    return data, btype, memoryview(data).nbytes


def _vector_counts(
    o_counts: Any, o_displs: Any, blocks: int, btype: MPI.Datatype, nbytes: int
) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """mpi4py's ``message_vector`` counts and displacements, with its errors (and
    ``chkarray``'s, ``asarray.pxi``): counts inferred from the buffer's ``nbytes``
    (remainder to the first blocks), one integer, or ``blocks`` of them; displacements
    packed, a stride, or ``blocks`` of them."""
    if o_counts is None:
        csize = 0
        if nbytes > 0:
            lb, extent = _inference_extent(btype)
            if nbytes % extent:
                raise ValueError(
                    f"message: cannot infer count, buffer length {nbytes} is not a "
                    f"multiple of datatype extent {extent} (lb:{lb}, ub:{lb + extent})"
                )
            csize = nbytes // extent
        counts = [csize // blocks + (csize % blocks > i) for i in range(blocks)]
    elif _is_integral(o_counts):
        counts = [_c_integer(o_counts)] * blocks
    else:
        counts = _chkarray(o_counts, blocks)
    if o_displs is None:  # contiguous
        displs, at = [], 0
        for c in counts:
            displs.append(at)
            at += c
    elif _is_integral(o_displs):  # strided
        stride = _c_integer(o_displs)
        displs = [stride * i for i in range(blocks)]
    else:  # general
        displs = _chkarray(o_displs, blocks)
    return tuple(counts), tuple(displs)


def _inference_extent(btype: MPI.Datatype) -> tuple[int, int]:
    """(lb, extent) of the datatype a count is inferred with, or mpi4py's error."""
    if btype == MPI.DATATYPE_NULL:
        raise ValueError("message: cannot infer count, datatype is null")
    lb, extent = btype.Get_extent()
    if extent <= 0:
        raise ValueError(
            f"message: cannot infer count, datatype extent {extent} (lb:{lb}, ub:{lb + extent})"
        )
    return lb, extent


def _chkarray(ob: Any, n: int) -> list[int]:
    """mpi4py's ``chkarray``: ``len``, every item through ``__index__``, then the
    length against ``n`` (``ValueError: expecting {n} items, got {size}``)."""
    size = len(ob)
    out = [_c_integer(ob[i]) for i in range(size)]
    if size != n:
        raise ValueError(f"expecting {n} items, got {size}")
    return out


def _c_integer(value: Any) -> int:
    """``PyNumber_Index`` into a C ``MPI_Count``/``MPI_Aint`` (64 bits), as Cython
    converts it."""
    out = operator.index(value)
    if not -(2**63) <= out < 2**63:
        raise OverflowError("Python int too large to convert to C long")
    return out


def _asdatatype(o_type: Any) -> MPI.Datatype:
    """mpi4py's ``asdatatype``: a datatype, or a key of ``MPI._typedict`` (a format
    character such as ``'i'``, ``'f8'``, ``'Zd'``)."""
    if isinstance(o_type, MPI.Datatype):
        return o_type
    try:
        return MPI._typedict[o_type]
    except KeyError:
        raise KeyError(f"cannot map {o_type!r} to MPI datatype") from None


def _format_datatype(data: Any) -> MPI.Datatype:
    """mpi4py's ``getdatatype``: the datatype of a buffer's format (its byte order
    already checked by mpi4py)."""
    fmt = memoryview(data).format
    if fmt[:1] in ("@", "<", ">"):
        fmt = fmt[1:]
    return _asdatatype(fmt)


@lru_cache(maxsize=256)
def _mapped_dtype(dtype: _np.dtype) -> bool:
    """Whether mpi4py maps a numpy array's format to a datatype (not: structured and
    object types, a non-native byte order...): only those take the fast paths."""
    if dtype.hasobject:
        return False
    try:
        MPI.COMM_SELF.Bcast(_np.empty(0, dtype), 0)
    except (KeyError, BufferError, ValueError, TypeError):
        return False
    return True


def _is_bottom(obj: Any) -> bool:
    """mpi4py's ``is_BOTTOM`` (``constant.pxi``): ``None`` or ``MPI.BOTTOM``."""
    return obj is None or obj is MPI.BOTTOM


def _is_datatype(obj: Any) -> bool:
    """mpi4py's ``is_datatype``: a datatype or a string naming one."""
    return isinstance(obj, MPI.Datatype | str)


def _itemsize(data: Any, dtype: MPI.Datatype | None) -> int | None:
    """The element's extent: the datatype's, or the buffer's format; None for a
    datatype with holes (only the MPI library can place its bytes) and for an array of
    Python objects given a datatype (mpi4py hands its raw bytes to MPI; numpy gives no
    byte view of it)."""
    if isinstance(data, _np.ndarray) and data.dtype.hasobject:
        return None
    if dtype is None:
        return max(memoryview(data).itemsize, 1)
    lb, extent = dtype.Get_extent()
    tlb, textent = dtype.Get_true_extent()
    if not (lb == 0 and tlb == 0 and dtype.Get_size() == extent == textent):
        return None
    return extent


# The C API mpi4py calls (through its own handle, so no other user of
# ``ctypes.pythonapi`` sees these argument types).
_capi = ctypes.PyDLL(None, handle=ctypes.pythonapi._handle)


def _c_function(name: str, restype: Any, *argtypes: Any) -> Any:
    function = getattr(_capi, name)
    function.restype, function.argtypes = restype, argtypes
    return function


_PyObject_CheckBuffer = _c_function("PyObject_CheckBuffer", ctypes.c_int, ctypes.py_object)
_PyIndex_Check = _c_function("PyIndex_Check", ctypes.c_int, ctypes.py_object)
_PySequence_Check = _c_function("PySequence_Check", ctypes.c_int, ctypes.py_object)
_PySequence_Size = _c_function("PySequence_Size", ctypes.c_ssize_t, ctypes.py_object)
_PyCapsule_IsValid = _c_function(
    "PyCapsule_IsValid", ctypes.c_int, ctypes.py_object, ctypes.c_char_p
)
_PyCapsule_GetPointer = _c_function(
    "PyCapsule_GetPointer", ctypes.c_void_p, ctypes.py_object, ctypes.c_char_p
)


def _is_buffer(obj: Any) -> bool:
    """mpi4py's ``is_buffer``: the object has the buffer protocol."""
    return bool(_PyObject_CheckBuffer(obj))


def _is_integral(obj: Any) -> bool:
    """mpi4py's ``is_integral`` (``asarray.pxi``): has ``__index__`` and is not a
    sized sequence (a 0-d numpy array is integral, a 1-item array is not)."""
    if type(obj) is int:
        return True
    if not _PyIndex_Check(obj):
        return False
    if not _PySequence_Check(obj):
        return True
    try:
        _PySequence_Size(obj)
    except Exception:
        pass
    else:
        return False
    try:
        operator.index(obj)
    except Exception:
        return False
    return True


def host_array(data: Any, readonly: bool) -> Any:
    """``data`` as the buffer object the collective reads and writes: itself if it has
    the buffer protocol, else a numpy array over its memory made through mpi4py's own
    conversion (``MPI.buffer``: DLPack, then the CUDA array interface).

    mpi4py's checks and errors apply (``BufferError``: not contiguous; not writable,
    unless ``readonly``); None for memory the CPU cannot read (mpi4py's
    ``buffer.cast`` refuses it: device memory, which only the MPI library can move).
    The element type is the
    one mpi4py infers (a DLPack tensor's dtype, read from the capsule mpi4py holds;
    bytes where mpi4py formats it as bytes). An object mpi4py does not take is
    returned unchanged, for mpi4py's own error to be raised where it is used. O(1)
    besides the conversion.
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
    except BufferError:
        return None  # not CPU-accessible
    element = _element_type(memory.obj, memory.nbytes)
    if not readonly:  # mpi4py's error if not writable; else a writable view
        raw = MPI.buffer.frombuffer(data, readonly=False)
    return _np.frombuffer(raw, dtype=_np.uint8).view(element)


class _DLDataType(ctypes.Structure):
    _fields_ = (("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16))


class _DLTensor(ctypes.Structure):
    _fields_ = (
        ("data", ctypes.c_void_p),
        ("device_type", ctypes.c_int),  # DLDevice: an enum, then an int32 id
        ("device_id", ctypes.c_int32),
        ("ndim", ctypes.c_int32),
        ("dtype", _DLDataType),
        ("shape", ctypes.c_void_p),
        ("strides", ctypes.c_void_p),
        ("byte_offset", ctypes.c_uint64),
    )


class _DLManagedTensor(ctypes.Structure):  # DLPack v0: the tensor first
    _fields_ = (
        ("dl_tensor", _DLTensor),
        ("manager_ctx", ctypes.c_void_p),
        ("deleter", ctypes.c_void_p),
    )


class _DLManagedTensorVersioned(ctypes.Structure):  # DLPack v1: the tensor last
    _fields_ = (
        ("version_major", ctypes.c_uint32),
        ("version_minor", ctypes.c_uint32),
        ("manager_ctx", ctypes.c_void_p),
        ("deleter", ctypes.c_void_p),
        ("flags", ctypes.c_uint64),
        ("dl_tensor", _DLTensor),
    )


_CAPSULES = ((b"dltensor_versioned", _DLManagedTensorVersioned), (b"dltensor", _DLManagedTensor))
_DL_INT, _DL_UINT, _DL_FLOAT, _DL_COMPLEX, _DL_BOOL = 0, 1, 2, 5, 6
_C_BITS = {
    fmt: 8 * ctypes.sizeof(ctype)
    for fmt, ctype in (
        ("b", ctypes.c_byte),
        ("h", ctypes.c_short),
        ("i", ctypes.c_int),
        ("l", ctypes.c_long),
        ("q", ctypes.c_longlong),
        ("f", ctypes.c_float),
        ("d", ctypes.c_double),
        ("g", ctypes.c_longdouble),
    )
}
_NUMPY_OF_FORMAT = {  # mpi4py's format -> numpy's type; others: bytes (MPI.BYTE)
    **{fmt: _np.dtype(fmt) for fmt in "?bhilqBHILQefdg"},
    "Zf": _np.dtype(_np.complex64),
    "Zd": _np.dtype(_np.complex128),
    "Zg": _np.dtype(_np.clongdouble),
}


def _dlpack_format(code: int, bits: int, lanes: int) -> str:
    """mpi4py's ``dlpack_get_format`` (``asdlpack.pxi``), in its order of tests: the
    buffer format of a DLPack element type; ``'B'`` (bytes) for one it does not name."""
    if lanes != 1:
        if code == _DL_FLOAT and lanes == 2:  # a complex number as two float lanes
            for fmt in "fdg":
                if bits == _C_BITS[fmt]:
                    return "Z" + fmt
        return "B"
    if code == _DL_BOOL and bits == 8:
        return "?"
    if code in (_DL_INT, _DL_UINT):
        for fmt in "bhilq":
            if bits == _C_BITS[fmt]:
                return fmt if code == _DL_INT else fmt.upper()
    if code == _DL_FLOAT:
        if bits == _C_BITS["f"] // 2:
            return "e"
        for fmt in "fdg":
            if bits == _C_BITS[fmt]:
                return fmt
    if code == _DL_COMPLEX:
        if bits == _C_BITS["f"]:
            return "Ze"  # complex32: no numpy type, bytes here
        for fmt in "fdg":
            if bits == 2 * _C_BITS[fmt]:
                return "Z" + fmt
    return "B"


def _element_type(capsule: Any, nbytes: int) -> _np.dtype:
    """The element type mpi4py infers for a DLPack buffer, as a numpy dtype: read from
    the ``DLTensor`` in ``capsule`` (the one mpi4py's ``buffer.obj`` holds, named
    ``dltensor_versioned`` or ``dltensor`` by the protocol version; neither renamed
    nor consumed: its destructor frees the tensor), mapped as ``dlpack_get_format``
    does; ``uint8`` (mpi4py: ``MPI.BYTE``) for a type it does not name."""
    for name, layout in _CAPSULES:
        if _PyCapsule_IsValid(capsule, name):
            pointer = _PyCapsule_GetPointer(capsule, name)
            dtype = layout.from_address(pointer).dl_tensor.dtype
            fmt = _dlpack_format(dtype.code, dtype.bits, dtype.lanes)
            out = _NUMPY_OF_FORMAT.get(fmt, _np.dtype(_np.uint8))
            return out if nbytes % out.itemsize == 0 else _np.dtype(_np.uint8)
    return _np.dtype(_np.uint8)


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
