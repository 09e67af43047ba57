"""Phoenix (seed 004): a versioned binary codec for the protocol core's messages.

:mod:`gridcoll.phoenix.protocol` exchanges Python dataclasses; a real transport
(:mod:`gridcoll.group`) moves bytes between processes that need not trust each
other's bytes. This module turns every message type of the core into bytes and back.

Format
------
Every message is ``MAGIC`` (2 bytes ``b"GW"``), ``VERSION`` (1 byte), the message
type (1 byte, :data:`TYPE_CODES`), then the type's fields in order (each field's wire
spec in :mod:`gridcoll.phoenix.messages`, from which this module compiles one writer and
one reader per type, as h11's ``WRITERS`` and ``READERS`` tables), little-endian:
``u8``/``u32``/``u64`` integers, ``f64`` floats, strings and byte strings as a ``u32``
length and the bytes, sets of virtual nodes as a ``u32`` length and
:meth:`~gridcoll.phoenix.nodesets.NodeSet.encode`, sequences as a ``u32`` count and
the items. Process ids are ``u64``, vnodes and epochs ``u32``.

Values (operation ids, broadcast payloads, reduction data) are tagged: ``None``,
``bool``, ``int`` (``i64``, or a signed big integer of at most 1 KiB), ``float``,
``bytes`` (bytes, bytearray, memoryview and any C-contiguous buffer are sent as raw
bytes and arrive as ``bytes``), ``str``, ``tuple`` (nested at most
:data:`MAX_DEPTH` deep), a numpy array of a numeric dtype (dtype string, shape, raw
bytes; arrives as a new writable array) and, only with ``trusted_pickle=True`` on
*both* sides, a pickle of anything else.

Reduction operators travel by name (:data:`OPS`: ``sum``, ``prod``, ``min``, ``max``,
``band``, ``bor``): a callable cannot cross the network without pickle.

Rules
-----
1. :func:`decode` raises :class:`WireError`, and nothing else, on input that is
   malformed, truncated, has trailing bytes, is larger than ``max_size``, or names an
   unknown version, type, tag, dtype or operator. It never executes code from the
   input unless the codec was built with ``trusted_pickle=True``.
2. :func:`encode` raises :class:`WireError` for a value it cannot carry (an arbitrary
   object without ``trusted_pickle``, an unnamed operator) or a result above
   ``max_size``.
3. ``decode(encode(m)) == m`` for every message, payloads compared as bytes (a
   ``bytearray`` payload comes back as ``bytes``).

Security
--------
Pickle runs code chosen by whoever made the bytes: enable ``trusted_pickle`` only
among peers you trust as yourself (the group's secret authenticates peers, it does not
make their data safe). Sizes are checked against the bytes actually present before
anything is allocated.

References
----------
H. Saito, K. Taura, T. Chikayama, seed 004, sec. III (messages to virtual nodes),
IV-D (the broadcast header's target set), IV-E (partial sums).
"""

from __future__ import annotations

import math
import operator
import pickle
import struct
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any

import numpy as np

from gridcoll.errors import WireError
from gridcoll.phoenix.messages import (
    KINDS,
    Adopt,
    Atom,
    Bcast,
    ChildUpdates,
    Handover,
    Info,
    InfoRequest,
    JoinRefused,
    JoinRequest,
    LeaveAck,
    Leaving,
    Map,
    Message,
    Near,
    Opt,
    ParentUpdates,
    Partial,
    Rec,
    Seq,
    Tup,
    Update,
    Want,
    Welcome,
    wire_fields,
)
from gridcoll.phoenix.nodesets import NodeSet

__all__ = [
    "MAGIC",
    "MAX_DEPTH",
    "MAX_MESSAGE",
    "OPS",
    "TYPE_CODES",
    "VERSION",
    "Codec",
    "Reader",
    "Writer",
    "decode",
    "encode",
    "op_name",
]

MAGIC = b"GW"
VERSION = 6
MAX_MESSAGE = 64 * 1024 * 1024
"""Default largest encoded message (bytes)."""
MAX_DEPTH = 8
"""Deepest nesting of tuples in a value."""
_MAX_BIGINT = 1024


def _vmin(a: object, b: object) -> object:
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return np.minimum(a, b)
    return min(a, b)  # type: ignore[type-var]


def _vmax(a: object, b: object) -> object:
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return np.maximum(a, b)
    return max(a, b)  # type: ignore[type-var]


OPS: dict[str, Callable[[object, object], object]] = {
    "sum": operator.add,
    "prod": operator.mul,
    "min": _vmin,
    "max": _vmax,
    "band": operator.and_,
    "bor": operator.or_,
}
"""Reduction operators by wire name (numpy arrays element-wise)."""
_OP_NAMES = {id(f): name for name, f in OPS.items()}


def op_name(op: Callable[[object, object], object]) -> str:
    """The wire name of a registered operator; WireError otherwise."""
    name = _OP_NAMES.get(id(op))
    if name is None:
        raise WireError(f"reduction operator {op!r} has no wire name (use one of {list(OPS)})")
    return name


TYPE_CODES: dict[type, int] = {
    InfoRequest: 1,
    Info: 2,
    ChildUpdates: 3,
    ParentUpdates: 4,
    Bcast: 5,
    Partial: 6,
    JoinRequest: 7,
    JoinRefused: 8,
    Welcome: 9,
    Handover: 10,
    Update: 11,
    Leaving: 12,
    LeaveAck: 13,
    Adopt: 14,
    Near: 15,
    Want: 16,
}
_TYPES = {code: t for t, code in TYPE_CODES.items()}

_U8, _U32, _U64, _I64, _F64 = (struct.Struct(f) for f in ("<B", "<I", "<Q", "<q", "<d"))
_T_NONE, _T_FALSE, _T_TRUE, _T_INT, _T_BIG, _T_FLOAT = 0, 1, 2, 3, 4, 5
_T_BYTES, _T_STR, _T_TUPLE, _T_ARRAY, _T_PICKLE = 6, 7, 8, 9, 10


class Writer:
    """Appends fields to a bytearray (the module doc's encodings)."""

    def __init__(self, trusted_pickle: bool = False) -> None:
        self.out = bytearray()
        self.trusted_pickle = trusted_pickle

    def u8(self, v: int) -> None:
        self.out += _U8.pack(v)

    def u32(self, v: int) -> None:
        self.out += _U32.pack(v)

    def u64(self, v: int) -> None:
        self.out += _U64.pack(v)

    def f64(self, v: float) -> None:
        self.out += _F64.pack(v)

    def raw(self, data: bytes | bytearray | memoryview) -> None:
        self.u32(len(data))
        self.out += data

    def text(self, s: str) -> None:
        self.raw(s.encode())

    def nodeset(self, ns: NodeSet) -> None:
        self.raw(ns.encode())

    def pids(self, pids: frozenset[int] | tuple[int, ...]) -> None:
        items = sorted(pids) if isinstance(pids, frozenset) else pids
        self.out += struct.pack(f"<I{len(items)}Q", len(items), *items)

    def value(self, v: object, depth: int = 0) -> None:
        if depth > MAX_DEPTH:
            raise WireError(f"value nested deeper than {MAX_DEPTH}")
        if v is None:
            self.u8(_T_NONE)
        elif isinstance(v, bool):
            self.u8(_T_TRUE if v else _T_FALSE)
        elif isinstance(v, int):
            if -(2**63) <= v < 2**63:
                self.u8(_T_INT)
                self.out += _I64.pack(v)
            else:
                data = v.to_bytes((v.bit_length() + 8) // 8, "little", signed=True)
                if len(data) > _MAX_BIGINT:
                    raise WireError("integer too large for the wire")
                self.u8(_T_BIG)
                self.raw(data)
        elif isinstance(v, float):
            self.u8(_T_FLOAT)
            self.f64(v)
        elif isinstance(v, str):
            self.u8(_T_STR)
            self.text(v)
        elif isinstance(v, tuple):
            self.u8(_T_TUPLE)
            self.u32(len(v))
            for item in v:
                self.value(item, depth + 1)
        elif isinstance(v, np.ndarray) and v.dtype.kind in "biufc":
            self.u8(_T_ARRAY)
            self.text(v.dtype.str)
            self.u8(v.ndim)
            for n in v.shape:
                self.u64(n)
            self.raw(np.ascontiguousarray(v).tobytes())
        elif isinstance(v, bytes | bytearray | memoryview):
            self.u8(_T_BYTES)
            self.raw(memoryview(v).cast("B") if isinstance(v, memoryview) else v)
        elif self.trusted_pickle:
            self.u8(_T_PICKLE)
            self.raw(pickle.dumps(v, protocol=pickle.HIGHEST_PROTOCOL))
        else:
            raise WireError(
                f"cannot send a {type(v).__name__} without trusted_pickle=True "
                "(send bytes, numbers, strings, tuples or numeric numpy arrays)"
            )


class Reader:
    """Reads fields back, raising :class:`WireError` on anything out of place."""

    def __init__(self, data: bytes | memoryview, trusted_pickle: bool = False) -> None:
        self.data = memoryview(data).cast("B") if not isinstance(data, bytes) else data
        self.pos = 0
        self.trusted_pickle = trusted_pickle

    def take(self, n: int) -> bytes | memoryview:
        end = self.pos + n
        if n < 0 or end > len(self.data):
            raise WireError(f"truncated: {n} bytes wanted at offset {self.pos}")
        chunk = self.data[self.pos : end]
        self.pos = end
        return chunk

    def _unpack(self, s: struct.Struct) -> int | float:
        return self.fields(s)[0]  # type: ignore[no-any-return]

    def fields(self, s: struct.Struct) -> tuple:
        """The next ``s.size`` bytes unpacked by ``s``."""
        if self.pos + s.size > len(self.data):
            raise WireError(f"truncated: {s.size} bytes wanted at offset {self.pos}")
        out = s.unpack_from(self.data, self.pos)
        self.pos += s.size
        return out

    def u8(self) -> int:
        return int(self._unpack(_U8))

    def u32(self) -> int:
        return int(self._unpack(_U32))

    def u64(self) -> int:
        return int(self._unpack(_U64))

    def f64(self) -> float:
        return float(self._unpack(_F64))

    def flag(self) -> bool:
        v = self.u8()
        if v > 1:
            raise WireError(f"boolean field is {v}")
        return bool(v)

    def raw(self) -> bytes:
        return bytes(self.take(self.u32()))

    def text(self) -> str:
        try:
            return self.raw().decode()
        except UnicodeDecodeError as err:
            raise WireError(f"bad UTF-8 string: {err}") from None

    def count(self, min_item: int = 1) -> int:
        """A sequence length, checked against the bytes left (each item ``>= min_item``)."""
        n = self.u32()
        if n * min_item > len(self.data) - self.pos:
            raise WireError(f"count {n} exceeds the bytes left")
        return n

    def nodeset(self) -> NodeSet:
        data = self.raw()
        try:
            ns = NodeSet.decode(data)
        except ValueError as err:
            raise WireError(f"bad node set: {err}") from None
        if ns and ns.ranges[-1][1] > 2**32:
            raise WireError("node set beyond the vnode range")
        return ns

    def pids(self) -> tuple[int, ...]:
        n = self.count(8)
        out = struct.unpack_from(f"<{n}Q", self.data, self.pos)
        self.pos += 8 * n
        return out

    def kind(self) -> str:
        return _kind(self.u8())

    def op(self) -> Callable[[object, object], object]:
        name = self.text()
        if name not in OPS:
            raise WireError(f"unknown reduction operator {name!r}")
        return OPS[name]

    def value(self, depth: int = 0) -> object:
        if depth > MAX_DEPTH:
            raise WireError(f"value nested deeper than {MAX_DEPTH}")
        tag = self.u8()
        if tag == _T_NONE:
            return None
        if tag in (_T_FALSE, _T_TRUE):
            return tag == _T_TRUE
        if tag == _T_INT:
            return int(self._unpack(_I64))
        if tag == _T_BIG:
            data = self.raw()
            if not data or len(data) > _MAX_BIGINT:
                raise WireError("bad big integer")
            return int.from_bytes(data, "little", signed=True)
        if tag == _T_FLOAT:
            return self.f64()
        if tag == _T_BYTES:
            return self.raw()
        if tag == _T_STR:
            return self.text()
        if tag == _T_TUPLE:
            return tuple(self.value(depth + 1) for _ in range(self.count()))
        if tag == _T_ARRAY:
            return self._array()
        if tag == _T_PICKLE:
            if not self.trusted_pickle:
                raise WireError("pickled value refused (trusted_pickle is off)")
            try:
                return pickle.loads(self.raw())
            except Exception as err:
                raise WireError(f"bad pickle: {type(err).__name__}") from None
        raise WireError(f"unknown value tag {tag}")

    def _array(self) -> np.ndarray:
        spec = self.text()
        try:
            dtype = np.dtype(spec)
        except Exception:
            raise WireError(f"unknown dtype {spec[:40]!r}") from None
        if dtype.kind not in "biufc" or dtype.str != spec:
            raise WireError(f"dtype {spec[:40]!r} is not a plain numeric dtype")
        ndim = self.u8()
        if ndim > 32:
            raise WireError(f"array of {ndim} dimensions")
        shape = tuple(self.u64() for _ in range(ndim))
        data = self.raw()
        if math.prod(shape) * dtype.itemsize != len(data):
            raise WireError(f"array of shape {shape} and dtype {spec} has {len(data)} bytes")
        return np.frombuffer(data, dtype=dtype).reshape(shape).copy()

    def end(self) -> None:
        if self.pos != len(self.data):
            raise WireError(f"{len(self.data) - self.pos} trailing bytes")


# -- per-type fields, from the messages' wire specs -----------------------------------------
def _kind(k: int) -> str:
    """Tree kind number ``k`` (``KINDS``), or WireError."""
    if k >= len(KINDS):
        raise WireError(f"unknown tree kind {k}")
    return KINDS[k]


def _hashable(v: object) -> Hashable:
    if not isinstance(v, Hashable) or isinstance(v, np.ndarray):
        raise WireError(f"operation id of type {type(v).__name__} is not hashable")
    try:
        hash(v)
    except TypeError:
        raise WireError("operation id is not hashable") from None
    return v


def _w_opids(w: Writer, ops: frozenset[Hashable]) -> None:
    items = sorted(ops, key=repr)
    w.u32(len(items))
    for op in items:
        w.value(op)


def _r_opids(r: Reader) -> frozenset[Hashable]:
    return frozenset(_hashable(r.value()) for _ in range(r.count()))


_Write = Callable[[Writer, Any], None]
_Read = Callable[[Reader], Any]

_ATOMS: dict[Atom, tuple[_Write, _Read, int]] = {
    Atom.U8: (Writer.u8, Reader.u8, 1),
    Atom.U32: (Writer.u32, Reader.u32, 4),
    Atom.U64: (Writer.u64, Reader.u64, 8),
    Atom.F64: (Writer.f64, Reader.f64, 8),
    Atom.FLAG: (Writer.u8, Reader.flag, 1),
    Atom.KIND: (lambda w, k: w.u8(KINDS.index(k)), Reader.kind, 1),
    Atom.VALUE: (Writer.value, Reader.value, 1),
    Atom.OPID: (Writer.value, lambda r: _hashable(r.value()), 1),
    Atom.OP: (lambda w, op: w.text(op_name(op)), Reader.op, 4),
    Atom.NODESET: (Writer.nodeset, Reader.nodeset, 4),
    Atom.PIDS: (Writer.pids, Reader.pids, 4),
    Atom.PIDSET: (Writer.pids, lambda r: frozenset(r.pids()), 4),
    Atom.OPIDS: (_w_opids, _r_opids, 4),
}
"""Per atom of :mod:`~gridcoll.phoenix.messages`: its writer, its reader, and the fewest
bytes it takes (to check a count against the bytes left before reading)."""


def _compile(spec: Any) -> tuple[_Write, _Read, int]:
    """The writer, reader and smallest size of a wire spec (:mod:`~gridcoll.phoenix.messages`,
    "Wire specs")."""
    if isinstance(spec, Atom):
        return _ATOMS[spec]
    if isinstance(spec, Seq):
        w_item, r_item, n_item = _compile(spec.item)

        def w_seq(w: Writer, items: Any) -> None:
            w.u32(len(items))
            for x in items:
                w_item(w, x)

        return w_seq, lambda r: tuple(r_item(r) for _ in range(r.count(n_item))), 4
    if isinstance(spec, Tup):
        parts = [_compile(item) for item in spec.items]

        def w_tup(w: Writer, v: Any) -> None:
            for (w_part, _, _), x in zip(parts, v, strict=True):
                w_part(w, x)

        return (
            w_tup,
            lambda r: tuple(r_part(r) for _, r_part, _ in parts),
            sum(n for *_, n in parts),
        )
    if isinstance(spec, Opt):
        w_item, r_item, _ = _compile(spec.item)

        def w_opt(w: Writer, v: Any) -> None:
            w.u8(v is not None)
            if v is not None:
                w_item(w, v)

        return w_opt, lambda r: r_item(r) if r.flag() else None, 1
    if isinstance(spec, Map):
        w_key, r_key, n_key = _compile(spec.key)
        w_val, r_val, n_val = _compile(spec.value)

        def w_map(w: Writer, m: Any) -> None:
            items = sorted(m.items(), key=lambda kv: repr(kv[0]))
            w.u32(len(items))
            for k, v in items:
                w_key(w, k)
                w_val(w, v)

        def r_map(r: Reader) -> dict:
            return {r_key(r): r_val(r) for _ in range(r.count(n_key + n_val))}

        return w_map, r_map, 4
    return _record(spec)


def _record(spec: type | Rec) -> tuple[_Write, _Read, int]:
    """A dataclass's fields in order (a message or item of
    :mod:`~gridcoll.phoenix.messages`, or a :class:`~gridcoll.phoenix.messages.Rec`)."""
    cls = spec.cls if isinstance(spec, Rec) else spec
    parts = [(name, *_compile(field_spec)) for name, field_spec in wire_fields(spec)]

    def w_record(w: Writer, v: Any) -> None:
        for name, w_part, _, _ in parts:
            w_part(w, getattr(v, name))

    def r_record(r: Reader) -> Any:
        return cls(*[r_part(r) for _, _, r_part, _ in parts])

    return w_record, r_record, sum(n for *_, n in parts)


_CODECS: dict[type, tuple[_Write, _Read, int]] = {t: _record(t) for t in TYPE_CODES}
"""Each message type's writer and reader, compiled from its fields' wire specs."""


def _check_bcast(m: Bcast) -> None:
    if m.nsegments < 1 or m.segment >= m.nsegments:
        raise WireError(f"segment {m.segment} of {m.nsegments}")


_CHECKS: dict[type, Callable[[Any], None]] = {Bcast: _check_bcast}
"""Checks of a decoded message beyond its fields' own."""


@dataclass(frozen=True)
class Codec:
    """Encodes and decodes protocol messages (module doc).

    Args:
        trusted_pickle: carry arbitrary Python objects as pickles (trusted peers only).
        max_size: the largest encoded message accepted or produced, in bytes.
    """

    trusted_pickle: bool = False
    max_size: int = MAX_MESSAGE

    def encode(self, m: Message) -> bytes:
        code = TYPE_CODES.get(type(m))
        if code is None:
            raise WireError(f"not a protocol message: {type(m).__name__}")
        w = Writer(self.trusted_pickle)
        w.out += MAGIC + bytes((VERSION, code))
        try:
            _CODECS[type(m)][0](w, m)
        except (struct.error, ValueError, OverflowError, TypeError) as err:
            if isinstance(err, WireError):
                raise
            raise WireError(f"cannot encode {type(m).__name__}: {err}") from None
        if len(w.out) > self.max_size:
            raise WireError(f"message of {len(w.out)} bytes exceeds {self.max_size}")
        return bytes(w.out)

    def decode(self, data: bytes | memoryview) -> Message:
        if len(data) > self.max_size:
            raise WireError(f"message of {len(data)} bytes exceeds {self.max_size}")
        r = Reader(data, self.trusted_pickle)
        if bytes(r.take(2)) != MAGIC:
            raise WireError("bad magic")
        version, code = r.u8(), r.u8()
        if version != VERSION:
            raise WireError(f"unknown wire version {version}")
        t = _TYPES.get(code)
        if t is None:
            raise WireError(f"unknown message type {code}")
        try:
            m = _CODECS[t][1](r)
            if check := _CHECKS.get(t):
                check(m)
        except WireError:
            raise
        except (ValueError, TypeError, OverflowError, MemoryError, RecursionError) as err:
            raise WireError(f"malformed {t.__name__}: {type(err).__name__}: {err}") from None
        r.end()
        return m


_DEFAULT = Codec()


def encode(m: Message) -> bytes:
    """:meth:`Codec.encode` with the defaults (no pickle, :data:`MAX_MESSAGE`)."""
    return _DEFAULT.encode(m)


def decode(data: bytes | memoryview) -> Message:
    """:meth:`Codec.decode` with the defaults (no pickle, :data:`MAX_MESSAGE`)."""
    return _DEFAULT.decode(data)
