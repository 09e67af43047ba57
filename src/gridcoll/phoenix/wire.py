"""Phoenix (seed 004): a versioned binary codec for the protocol core's messages.

:mod:`gridcoll.phoenix.protocol` exchanges Python dataclasses; a real transport
(:mod:`gridcoll.group`) moves bytes between processes that need not trust each
other's bytes. This module turns every message type of the core into bytes and back.

Format
------
Every message is ``MAGIC`` (2 bytes ``b"GW"``), ``VERSION`` (1 byte), the message
type (1 byte, :data:`TYPE_CODES`), then the type's fields in order, little-endian:
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

import numpy as np

from gridcoll.errors import WireError
from gridcoll.phoenix.nodesets import NodeSet
from gridcoll.phoenix.protocol import (
    KINDS,
    Adopt,
    AdoptItem,
    Bcast,
    ChildItem,
    ChildUpdates,
    Handover,
    Info,
    InfoRequest,
    JoinRefused,
    JoinRequest,
    LeaveAck,
    Leaving,
    Message,
    Near,
    ParentUpdates,
    Partial,
    Position,
    RootSum,
    Update,
    Want,
    Welcome,
)
from gridcoll.phoenix.trees import Summary
from gridcoll.phoenix.vnodes import VNodeState

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


# -- per-type fields ----------------------------------------------------------------------
def _kind(k: int) -> str:
    """Tree kind number ``k`` (``KINDS``), or WireError."""
    if k >= len(KINDS):
        raise WireError(f"unknown tree kind {k}")
    return KINDS[k]


_BAR = struct.Struct("<Qdd")  # InfoRequest.bars: root, dist, est
_POSITION = struct.Struct("<BQddI")  # kind, root, dist, est, nchildren; then the path


def _w_position(w: Writer, p: Position) -> None:
    w.out += _POSITION.pack(KINDS.index(p.kind), p.root, p.dist, p.est, p.nchildren)
    w.pids(p.path)


def _r_position(r: Reader) -> Position:
    k, root, dist, est, nchildren = r.fields(_POSITION)
    return Position(_kind(k), root, dist, est, nchildren, r.pids())


def _w_entries(w: Writer, entries: tuple[tuple[int, int, int], ...]) -> None:
    w.u32(len(entries))
    for v, pid, epoch in entries:
        w.u32(v)
        w.u64(pid)
        w.u32(epoch)


def _r_entries(r: Reader) -> tuple[tuple[int, int, int], ...]:
    return tuple((r.u32(), r.u64(), r.u32()) for _ in range(r.count(16)))


def _w_summary(w: Writer, s: Summary) -> None:
    w.f64(s.a)
    w.f64(s.b)
    w.u32(s.descendants)
    w.f64(s.path_b)
    w.u32(s.depth)


def _r_summary(r: Reader) -> Summary:
    return Summary(r.f64(), r.f64(), r.u32(), r.f64(), r.u32())


def _w_opids(w: Writer, ops: frozenset[Hashable]) -> None:
    items = sorted(ops, key=repr)
    w.u32(len(items))
    for op in items:
        w.value(op)


def _r_opids(r: Reader) -> frozenset[Hashable]:
    return frozenset(_hashable(r.value()) for _ in range(r.count()))


def _hashable(v: object) -> Hashable:
    if not isinstance(v, Hashable) or isinstance(v, np.ndarray):
        raise WireError(f"operation id of type {type(v).__name__} is not hashable")
    try:
        hash(v)
    except TypeError:
        raise WireError("operation id is not hashable") from None
    return v


def _w_vstate(w: Writer, s: VNodeState) -> None:
    w.u32(s.epoch)
    _w_opids(w, s.delivered)
    _w_opids(w, s.contributed)
    items = sorted(s.partial.items(), key=lambda kv: repr(kv[0]))
    w.u32(len(items))
    for op, ns in items:
        w.value(op)
        w.nodeset(ns)
    w.u8(s.recovered)


def _r_vstate(r: Reader) -> VNodeState:
    epoch, delivered, contributed = r.u32(), _r_opids(r), _r_opids(r)
    partial = {_hashable(r.value()): r.nodeset() for _ in range(r.count(5))}
    return VNodeState(epoch, delivered, contributed, partial, r.flag())


def _w_rootsum(w: Writer, s: RootSum) -> None:
    w.value(s.op_id)
    w.u32(s.root)
    w.text(op_name(s.op))
    w.value(s.value)
    w.nodeset(s.covered)
    w.u8(s.done)
    w.u64(s.nbytes)
    w.u32(len(s.aside))
    for v, value in s.aside:
        w.u32(v)
        w.value(value)


def _r_rootsum(r: Reader) -> RootSum:
    op_id = _hashable(r.value())
    root, op, value, covered, done, nbytes = (
        r.u32(),
        r.op(),
        r.value(),
        r.nodeset(),
        r.flag(),
        r.u64(),
    )
    aside = tuple((r.u32(), r.value()) for _ in range(r.count(5)))
    return RootSum(op_id, root, op, value, covered, done, nbytes, aside)


def _w_message(w: Writer, m: Message) -> None:
    if isinstance(m, JoinRequest):
        return
    if isinstance(m, InfoRequest):
        w.pids(m.roots)
        w.u32(len(m.bars))
        for root, dist, est in m.bars:
            w.out += _BAR.pack(root, dist, est)
    elif isinstance(m, Info):
        w.u32(len(m.positions))
        for p in m.positions:
            _w_position(w, p)
        w.u8(m.leaving)
    elif isinstance(m, ChildUpdates):
        w.u32(len(m.items))
        for i in m.items:
            w.u8(KINDS.index(i.kind))
            w.u64(i.root)
            w.u8(i.attach)
            w.nodeset(i.reach)
            _w_summary(w, i.summary)
            w.f64(i.rtt)
            w.f64(i.bw)
    elif isinstance(m, ParentUpdates):
        w.u32(len(m.items))
        for p in m.items:
            _w_position(w, p)
    elif isinstance(m, Adopt):
        w.u32(len(m.items))
        for a in m.items:
            w.u8(KINDS.index(a.kind))
            w.u64(a.root)
            w.u64(a.parent)
            w.f64(a.rtt)
            w.f64(a.bw)
            w.pids(a.fallback)
    elif isinstance(m, Bcast):
        w.value(m.op_id)
        w.u32(m.root)
        w.u8(KINDS.index(m.kind))
        w.u64(m.tree_root)
        w.nodeset(m.targets)
        w.u8(m.via_tree)
        w.u32(m.hops)
        w.u64(m.nbytes)
        w.value(m.payload)
        w.u32(m.segment)
        w.u32(m.nsegments)
        w.u8(m.resent)
    elif isinstance(m, Want):
        w.value(m.op_id)
        w.u8(KINDS.index(m.kind))
        w.u64(m.tree_root)
        w.nodeset(m.segments)
        w.nodeset(m.targets)
        w.u32(m.hops)
    elif isinstance(m, Partial):
        w.value(m.op_id)
        w.u32(m.root)
        w.text(op_name(m.op))
        w.value(m.value)
        w.nodeset(m.covered)
        w.u8(m.via_tree)
        w.u32(m.hops)
        w.u64(m.nbytes)
        w.u8(m.recovered)
    elif isinstance(m, JoinRefused):
        w.pids(m.members)
    elif isinstance(m, Welcome):
        w.u32(m.size)
        w.pids(m.members)
        _w_entries(w, m.route)
        w.u32(len(m.measured))
        for q, rtt, bw in m.measured:
            w.u64(q)
            w.f64(rtt)
            w.f64(bw)
        w.f64(m.lan_rtt)
    elif isinstance(m, Handover):
        w.u32(len(m.states))
        for v, s in m.states:
            w.u32(v)
            _w_vstate(w, s)
        w.u32(len(m.sums))
        for s in m.sums:
            _w_rootsum(w, s)
        w.u8(m.from_leaving)
        w.u32(len(m.values))
        for op_id, root, op, v, value, nbytes in m.values:
            w.value(op_id)
            w.u32(root)
            w.text(op_name(op))
            w.u32(v)
            w.value(value)
            w.u64(nbytes)
    elif isinstance(m, Update):
        w.pids(m.members)
        _w_entries(w, m.entries)
        w.u8(m.near is not None)
        if m.near is not None:
            w.u64(m.near.sponsor)
            w.f64(m.near.rtt_s)
            w.f64(m.near.bw_Bps)
    elif isinstance(m, Leaving):
        _w_entries(w, m.entries)
        w.u32(m.round)
    elif isinstance(m, LeaveAck):
        w.pids(m.members)
        w.u32(m.round)
    elif isinstance(m, Near):
        w.u64(m.sponsor)
        w.f64(m.rtt_s)
        w.f64(m.bw_Bps)
    else:
        raise WireError(f"not a protocol message: {type(m).__name__}")


def _r_message(r: Reader, t: type) -> Message:
    if t is InfoRequest:
        roots = r.pids()
        return InfoRequest(roots, tuple(r.fields(_BAR) for _ in range(r.count(_BAR.size))))
    if t is JoinRequest:
        return JoinRequest()
    if t is Info:
        positions = tuple(_r_position(r) for _ in range(r.count(33)))
        return Info(positions, r.flag())
    if t is ChildUpdates:
        items = []
        for _ in range(r.count(58)):
            kind, root, attach, reach = r.kind(), r.u64(), r.flag(), r.nodeset()
            items.append(ChildItem(kind, root, attach, reach, _r_summary(r), r.f64(), r.f64()))
        return ChildUpdates(tuple(items))
    if t is ParentUpdates:
        return ParentUpdates(tuple(_r_position(r) for _ in range(r.count(33))))
    if t is Adopt:
        return Adopt(
            tuple(
                AdoptItem(r.kind(), r.u64(), r.u64(), r.f64(), r.f64(), r.pids())
                for _ in range(r.count(37))
            )
        )
    if t is Bcast:
        op_id = _hashable(r.value())
        root, kind, tree_root, targets = r.u32(), r.kind(), r.u64(), r.nodeset()
        via_tree, hops, nbytes, payload = r.flag(), r.u32(), r.u64(), r.value()
        segment, nsegments, resent = r.u32(), r.u32(), r.flag()
        if nsegments < 1 or segment >= nsegments:
            raise WireError(f"segment {segment} of {nsegments}")
        return Bcast(
            op_id,
            root,
            kind,
            tree_root,
            targets,
            via_tree,
            hops,
            nbytes,
            payload,
            segment,
            nsegments,
            resent,
        )
    if t is Want:
        op_id = _hashable(r.value())
        return Want(op_id, r.kind(), r.u64(), r.nodeset(), r.nodeset(), r.u32())
    if t is Partial:
        op_id = _hashable(r.value())
        root, op, value, covered = r.u32(), r.op(), r.value(), r.nodeset()
        return Partial(op_id, root, op, value, covered, r.flag(), r.u32(), r.u64(), r.flag())
    if t is JoinRefused:
        return JoinRefused(frozenset(r.pids()))
    if t is Welcome:
        size, members, route = r.u32(), frozenset(r.pids()), _r_entries(r)
        measured = tuple((r.u64(), r.f64(), r.f64()) for _ in range(r.count(24)))
        return Welcome(size, members, route, measured, r.f64())
    if t is Handover:
        states = tuple((r.u32(), _r_vstate(r)) for _ in range(r.count(17)))
        sums = tuple(_r_rootsum(r) for _ in range(r.count(24)))
        from_leaving = r.flag()
        values = []
        for _ in range(r.count(22)):
            op_id = _hashable(r.value())
            values.append((op_id, r.u32(), r.op(), r.u32(), r.value(), r.u64()))
        return Handover(states, sums, from_leaving, tuple(values))
    if t is Update:
        members, entries = frozenset(r.pids()), _r_entries(r)
        return Update(members, entries, Near(r.u64(), r.f64(), r.f64()) if r.flag() else None)
    if t is Leaving:
        return Leaving(_r_entries(r), r.u32())
    if t is LeaveAck:
        return LeaveAck(frozenset(r.pids()), r.u32())
    if t is Near:
        return Near(r.u64(), r.f64(), r.f64())
    raise WireError(f"no decoder for {t.__name__}")  # pragma: no cover (TYPE_CODES is total)


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
            _w_message(w, m)
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
            m = _r_message(r, t)
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
