"""Phoenix (seed 004): the messages processes send each other, each defined once.

Every message is a frozen dataclass whose fields say, each in one place, how the field
travels (its *wire spec*, read by the codec of :mod:`gridcoll.phoenix.wire`) and what
the simulator's link model charges for it (its *charge*, summed by
:func:`message_bytes`). Adding a field means writing it once, with both.

Wire specs
----------
An :class:`Atom` (``U8``, ``U32``, ``U64``, ``F64``, ``FLAG``, ``KIND``, ``VALUE``,
``OPID``, ``OP``, ``NODESET``, ``PIDS``, ``PIDSET``, ``OPIDS``), or built from specs:
:class:`Seq` (a count and the items), :class:`Tup` (a fixed tuple), :class:`Opt` (a
flag and the item if present), :class:`Map` (a count and key/value pairs), a message
or item dataclass of this module (its fields in order), or :class:`Rec` for a
dataclass defined elsewhere (:class:`~gridcoll.phoenix.trees.Summary`,
:class:`~gridcoll.phoenix.vnodes.VNodeState`). :mod:`gridcoll.phoenix.wire` gives each
atom its bytes.

Charges
-------
The link model charges :data:`HEADER_BYTES` per message plus each field's charge (a
field without one rides in the header: operation id, root, hops, flags). The charges
are the model's compact sizes (4-byte process ids, a node set's
:attr:`~gridcoll.phoenix.nodesets.NodeSet.nbytes`, the ``nbytes`` a payload stands
for), not the codec's, whose ids are 8 bytes and whose payloads are the real ones: the
seeded simulated figures of seed 004's experiments rest on these charges
(docs/phoenix.md, "Charged sizes and encoded sizes").

References
----------
H. Saito, K. Taura, T. Chikayama, *Collective operations for wide-area message passing
systems using adaptive spanning trees* (seed 004), sec. III (messages to virtual
nodes), IV-A and IV-B (probes), IV-D (the broadcast header's target set), IV-E
(partial sums).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field, fields
from enum import Enum
from operator import attrgetter
from typing import Any

from gridcoll.phoenix.nodesets import NodeSet
from gridcoll.phoenix.trees import Summary
from gridcoll.phoenix.vnodes import VNodeState

# The wire-spec language (Atom, Seq, Tup, Opt, Map, Rec, wire_fields) is for the codec
# (gridcoll.phoenix.wire), not re-exported by the package.
__all__ = [
    "HEADER_BYTES",
    "KINDS",
    "Adopt",
    "AdoptItem",
    "Bcast",
    "ChildItem",
    "ChildUpdates",
    "Handover",
    "Info",
    "InfoRequest",
    "JoinRefused",
    "JoinRequest",
    "LeaveAck",
    "Leaving",
    "Message",
    "Near",
    "ParentUpdates",
    "Partial",
    "Position",
    "RootSum",
    "Update",
    "Want",
    "Welcome",
    "message_bytes",
]

HEADER_BYTES = 16
"""Fixed header of every protocol message (type, op id, root, hops), for the link model."""

KINDS = ("latency", "bandwidth")
"""The two tree kinds, one of each per root (sec. IV-A)."""


# -- wire specs ------------------------------------------------------------------------
class Atom(Enum):
    """A field's wire encoding (bytes: :mod:`gridcoll.phoenix.wire`)."""

    U8 = "u8"
    U32 = "u32"
    U64 = "u64"
    F64 = "f64"
    FLAG = "flag"
    """A bool as one byte, 0 or 1."""
    KIND = "kind"
    """A tree kind, its index in :data:`KINDS` as one byte."""
    VALUE = "value"
    """A tagged application value (payload, reduction data)."""
    OPID = "opid"
    """An operation id: a tagged value that must be hashable."""
    OP = "op"
    """A reduction operator, by name."""
    NODESET = "nodeset"
    """A :class:`~gridcoll.phoenix.nodesets.NodeSet`."""
    PIDS = "pids"
    """A tuple of process ids, in order."""
    PIDSET = "pidset"
    """A frozenset of process ids, sorted on the wire."""
    OPIDS = "opids"
    """A frozenset of operation ids, sorted by ``repr`` on the wire."""


@dataclass(frozen=True, slots=True)
class Seq:
    """A count, then that many ``item``; decodes to a tuple."""

    item: Any


@dataclass(frozen=True, slots=True)
class Tup:
    """A fixed tuple, one spec per place."""

    items: tuple[Any, ...]


@dataclass(frozen=True, slots=True)
class Opt:
    """A flag, then ``item`` if the value is not None."""

    item: Any


@dataclass(frozen=True, slots=True)
class Map:
    """A count, then ``key`` and ``value`` per entry, keys sorted by ``repr``."""

    key: Any
    value: Any


@dataclass(frozen=True, slots=True)
class Rec:
    """A dataclass defined outside this module: its ``fields`` as ``(name, spec)``,
    in the order of its constructor."""

    cls: type
    fields: tuple[tuple[str, Any], ...]


def _wire(spec: Any, charge: Callable[[Any], int] | None = None) -> dict[str, Any]:
    """A field's metadata: it travels as ``spec`` and the link model charges
    ``charge(value)`` bytes for it (None: nothing, it rides in :data:`HEADER_BYTES`)."""
    return {"wire": spec, "charge": charge}


def wire_fields(spec: type | Rec) -> tuple[tuple[str, Any], ...]:
    """``(name, spec)`` of each field of a message or item dataclass (or a
    :class:`Rec`), in order."""
    if isinstance(spec, Rec):
        return spec.fields
    return tuple((f.name, f.metadata["wire"]) for f in fields(spec))


_SUMMARY = Rec(
    Summary,
    (
        ("a", Atom.F64),
        ("b", Atom.F64),
        ("descendants", Atom.U32),
        ("path_b", Atom.F64),
        ("depth", Atom.U32),
    ),
)
_VNODE_STATE = Rec(
    VNodeState,
    (
        ("epoch", Atom.U32),
        ("delivered", Atom.OPIDS),
        ("contributed", Atom.OPIDS),
        ("partial", Map(Atom.OPID, Atom.NODESET)),
        ("recovered", Atom.FLAG),
    ),
)
_ENTRIES = Seq(Tup((Atom.U32, Atom.U64, Atom.U32)))
"""Routing entries ``(vnode, owner, epoch)``."""


# -- charges ---------------------------------------------------------------------------
def _per_item(n: int) -> Callable[[Any], int]:
    """``n`` bytes per item of a sequence or set."""
    return lambda items: n * len(items)


def _nodeset(ns: NodeSet) -> int:
    return ns.nbytes


def _itself(nbytes: int) -> int:
    """The field is the size of data the message carries (a payload, a term)."""
    return nbytes


def _positions(ps: tuple[Position, ...]) -> int:
    return sum(20 + 4 * len(p.path) for p in ps)


def _child_items(items: tuple[ChildItem, ...]) -> int:
    return sum(32 + i.reach.nbytes for i in items)


def _vnode_states(states: tuple[tuple[int, VNodeState], ...]) -> int:
    return sum(
        8
        + 8 * (len(s.delivered) + len(s.contributed))
        + sum(8 + ns.nbytes for ns in s.partial.values())
        for _, s in states
    )


def _data_sizes(values: tuple[tuple[Any, ...], ...]) -> int:
    return sum(nbytes for *_, nbytes in values)


def _near(near: Near | None) -> int:
    return 20 if near is not None else 0


# -- messages (process to process) -----------------------------------------------------
@dataclass(frozen=True, slots=True)
class InfoRequest:
    """Asks a probed peer for its place in the trees of ``roots`` (every tree if empty;
    sec. IV-B: sent with the probe). ``bars``: ``(root, dist, est)``, the prober's
    :func:`~gridcoll.phoenix.trees.latency_bar` and
    :func:`~gridcoll.phoenix.trees.bandwidth_bar` in that root's trees (through the
    link to the peer, if measured); the peer leaves out a latency position at or beyond
    ``dist`` and a bandwidth one at or below ``est``, which the prober's rules would not
    take (:mod:`~gridcoll.phoenix.protocol`, "Probes after a loss")."""

    roots: tuple[int, ...] = field(default=(), metadata=_wire(Atom.PIDS, _per_item(4)))
    bars: tuple[tuple[int, float, float], ...] = field(
        default=(), metadata=_wire(Seq(Tup((Atom.U64, Atom.F64, Atom.F64))), _per_item(12))
    )


@dataclass(frozen=True, slots=True)
class Position:
    """A process's place in one tree: distance, rate, child count, ancestors."""

    kind: str = field(metadata=_wire(Atom.KIND))
    root: int = field(metadata=_wire(Atom.U64))
    dist: float = field(metadata=_wire(Atom.F64))
    est: float = field(metadata=_wire(Atom.F64))
    nchildren: int = field(metadata=_wire(Atom.U32))
    path: tuple[int, ...] = field(metadata=_wire(Atom.PIDS))


@dataclass(frozen=True, slots=True)
class Info:
    """A probe's answer: our position in the trees asked about (no member list:
    membership news goes by Welcome and Update alone; :mod:`~gridcoll.phoenix.protocol`,
    "Membership")."""

    positions: tuple[Position, ...] = field(metadata=_wire(Seq(Position), _positions))
    leaving: bool = field(metadata=_wire(Atom.FLAG))


@dataclass(frozen=True, slots=True)
class ChildItem:
    """Child to parent: attach (with the vnodes it reaches and its subtree) or detach."""

    kind: str = field(metadata=_wire(Atom.KIND))
    root: int = field(metadata=_wire(Atom.U64))
    attach: bool = field(metadata=_wire(Atom.FLAG))
    reach: NodeSet = field(default_factory=NodeSet, metadata=_wire(Atom.NODESET))
    summary: Summary = field(default_factory=Summary, metadata=_wire(_SUMMARY))
    rtt: float = field(default=math.inf, metadata=_wire(Atom.F64))
    bw: float = field(default=0.0, metadata=_wire(Atom.F64))


@dataclass(frozen=True, slots=True)
class ChildUpdates:
    items: tuple[ChildItem, ...] = field(metadata=_wire(Seq(ChildItem), _child_items))


@dataclass(frozen=True, slots=True)
class ParentUpdates:
    items: tuple[Position, ...] = field(metadata=_wire(Seq(Position), _positions))


@dataclass(frozen=True, slots=True)
class AdoptItem:
    """Re-attach to ``parent`` (the sender's own parent) in one tree; ``rtt`` and ``bw``
    are what the sender measured to it. ``fallback``: the parents to take instead, in
    order, if ``parent`` has left too (:mod:`~gridcoll.phoenix.protocol`, "Repair")."""

    kind: str = field(metadata=_wire(Atom.KIND))
    root: int = field(metadata=_wire(Atom.U64))
    parent: int = field(metadata=_wire(Atom.U64))
    rtt: float = field(metadata=_wire(Atom.F64))
    bw: float = field(metadata=_wire(Atom.F64))
    fallback: tuple[int, ...] = field(default=(), metadata=_wire(Atom.PIDS))


@dataclass(frozen=True, slots=True)
class Adopt:
    """A leaver to its children (or a LEAVING or LEFT process to a child that attached
    to it meanwhile): re-attach to my parent, your grandparent
    (:mod:`~gridcoll.phoenix.protocol`, "Repair")."""

    items: tuple[AdoptItem, ...] = field(metadata=_wire(Seq(AdoptItem), _per_item(28)))


@dataclass(frozen=True, slots=True)
class Bcast:
    """One segment of a broadcast, for the vnodes ``targets`` (sec. IV-D)."""

    op_id: Hashable = field(metadata=_wire(Atom.OPID))
    root: int = field(metadata=_wire(Atom.U32))
    kind: str = field(metadata=_wire(Atom.KIND))
    tree_root: int = field(metadata=_wire(Atom.U64))
    targets: NodeSet = field(metadata=_wire(Atom.NODESET, _nodeset))
    via_tree: bool = field(metadata=_wire(Atom.FLAG))
    hops: int = field(metadata=_wire(Atom.U32))
    nbytes: int = field(metadata=_wire(Atom.U64, _itself))
    """The segment's size; what the link model charges for the payload."""
    payload: object = field(default=None, metadata=_wire(Atom.VALUE))
    segment: int = field(default=0, metadata=_wire(Atom.U32))
    """This message's segment of a pipelined broadcast, ``0 .. nsegments - 1``."""
    nsegments: int = field(default=1, metadata=_wire(Atom.U32))
    """How many segments the broadcast was cut into (1: not pipelined)."""
    resent: bool = field(default=False, metadata=_wire(Atom.FLAG))
    """Sent again after a process it was sent to died (:mod:`~gridcoll.phoenix.protocol`,
    "Failures"): a vnode that already has the segment drops it."""


@dataclass(frozen=True, slots=True)
class Want:
    """The segments ``segments`` of pipelined broadcast ``op_id``, which stopped coming
    after a failure, asked of the parent in its tree (``kind``, ``tree_root``)
    (:mod:`~gridcoll.phoenix.protocol`, "Failures"): send them down the tree to
    ``targets`` (the asker's vnodes and its subtree's). A parent without a copy asks its
    own parent (``hops``)."""

    op_id: Hashable = field(metadata=_wire(Atom.OPID))
    kind: str = field(metadata=_wire(Atom.KIND))
    tree_root: int = field(metadata=_wire(Atom.U64))
    segments: NodeSet = field(metadata=_wire(Atom.NODESET, _nodeset))
    targets: NodeSet = field(metadata=_wire(Atom.NODESET, _nodeset))
    hops: int = field(default=0, metadata=_wire(Atom.U32))


@dataclass(frozen=True, slots=True)
class Partial:
    """A partial sum of a reduction, covering the vnodes ``covered`` (sec. IV-E)."""

    op_id: Hashable = field(metadata=_wire(Atom.OPID))
    root: int = field(metadata=_wire(Atom.U32))
    op: Callable[[object, object], object] = field(metadata=_wire(Atom.OP))
    value: object = field(metadata=_wire(Atom.VALUE))
    covered: NodeSet = field(metadata=_wire(Atom.NODESET, _nodeset))
    via_tree: bool = field(metadata=_wire(Atom.FLAG))
    hops: int = field(metadata=_wire(Atom.U32))
    nbytes: int = field(default=8, metadata=_wire(Atom.U64, _itself))
    """The size of one vnode's data (a partial sum is as large as each term)."""
    recovered: bool = field(default=False, metadata=_wire(Atom.FLAG))
    """One recovered vnode's data (:mod:`~gridcoll.phoenix.protocol`, "Failures"): goes
    point-to-point to the root vnode, which counts it only if nothing else covers that
    vnode."""


@dataclass(frozen=True, slots=True)
class JoinRequest:
    """A joiner to its contact: let me in."""


@dataclass(frozen=True, slots=True)
class JoinRefused:
    """A LEFT contact's answer to a JoinRequest: the members it knew, to try instead."""

    members: frozenset[int] = field(metadata=_wire(Atom.PIDSET))


@dataclass(frozen=True, slots=True)
class Welcome:
    """The answer to a JoinRequest: the vnode namespace's size, the members, the routing
    table, and what the member measured (``measured``: ``(peer, rtt_s, bw_Bps)``; its
    smallest RTT ``lan_rtt``), for a joiner in its LAN to borrow
    (:mod:`~gridcoll.phoenix.protocol`, "Joins")."""

    size: int = field(metadata=_wire(Atom.U32))
    members: frozenset[int] = field(metadata=_wire(Atom.PIDSET, _per_item(4)))
    route: tuple[tuple[int, int, int], ...] = field(metadata=_wire(_ENTRIES, _per_item(12)))
    measured: tuple[tuple[int, float, float], ...] = field(
        default=(), metadata=_wire(Seq(Tup((Atom.U64, Atom.F64, Atom.F64))), _per_item(20))
    )
    lan_rtt: float = field(default=math.inf, metadata=_wire(Atom.F64))


@dataclass(frozen=True, slots=True)
class RootSum:
    """A reduction's partial sum at the root vnode, moved with it."""

    op_id: Hashable = field(metadata=_wire(Atom.OPID))
    root: int = field(metadata=_wire(Atom.U32))
    op: Callable[[object, object], object] = field(metadata=_wire(Atom.OP))
    value: object = field(metadata=_wire(Atom.VALUE))
    covered: NodeSet = field(metadata=_wire(Atom.NODESET))
    done: bool = field(metadata=_wire(Atom.FLAG))
    nbytes: int = field(default=8, metadata=_wire(Atom.U64))
    aside: tuple[tuple[int, object], ...] = field(
        default=(), metadata=_wire(Seq(Tup((Atom.U32, Atom.VALUE))))
    )
    """Recovered vnodes' data, ``(vnode, value)``, counted at the end for the vnodes
    ``covered`` lacks (:mod:`~gridcoll.phoenix.protocol`, "Failures")."""


@dataclass(frozen=True, slots=True)
class Handover:
    """Vnodes changing owner, with the root sums of the reductions rooted at them and the
    application data of reductions they have not contributed to yet."""

    states: tuple[tuple[int, VNodeState], ...] = field(
        metadata=_wire(Seq(Tup((Atom.U32, _VNODE_STATE))), _vnode_states)
    )
    sums: tuple[RootSum, ...] = field(metadata=_wire(Seq(RootSum)))
    from_leaving: bool = field(metadata=_wire(Atom.FLAG))
    values: tuple[
        tuple[Hashable, int, Callable[[object, object], object], int, object, int], ...
    ] = field(
        default=(),
        metadata=_wire(
            Seq(Tup((Atom.OPID, Atom.U32, Atom.OP, Atom.U32, Atom.VALUE, Atom.U64))), _data_sizes
        ),
    )
    """``(op_id, root, op, vnode, value, nbytes)`` per reduction a vnode has not joined."""


@dataclass(frozen=True, slots=True)
class Near:
    """A joiner in its sponsor's LAN, to every member: take what you measured to the
    sponsor as measured to me, and start my trees as copies of the sponsor's
    (:mod:`~gridcoll.phoenix.protocol`, "Joins"). It carries what the joiner measured to
    the sponsor (``rtt_s``, ``bw_Bps``), which the sponsor takes as measured to the
    joiner: the same link."""

    sponsor: int = field(metadata=_wire(Atom.U64))
    rtt_s: float = field(default=math.inf, metadata=_wire(Atom.F64))
    bw_Bps: float = field(default=0.0, metadata=_wire(Atom.F64))


@dataclass(frozen=True, slots=True)
class Update:
    """Gossip: members, and routing entries ``(vnode, owner, epoch)``. A joiner's own
    (naming itself) carries its :class:`Near` when it is near its sponsor
    (:mod:`~gridcoll.phoenix.protocol`, "Joins")."""

    members: frozenset[int] = field(metadata=_wire(Atom.PIDSET, _per_item(4)))
    entries: tuple[tuple[int, int, int], ...] = field(
        default=(), metadata=_wire(_ENTRIES, _per_item(12))
    )
    near: Near | None = field(default=None, metadata=_wire(Opt(Near), _near))


@dataclass(frozen=True, slots=True)
class Leaving:
    """A leaver to every member: forget me, with the routing entries of the vnodes I
    handed over while leaving; ``round`` counts the rounds of acks asked."""

    entries: tuple[tuple[int, int, int], ...] = field(metadata=_wire(_ENTRIES, _per_item(12)))
    round: int = field(default=0, metadata=_wire(Atom.U32))


@dataclass(frozen=True, slots=True)
class LeaveAck:
    """A member's ack of a Leaving round, with its members (the leaver asks the ones it
    did not know)."""

    members: frozenset[int] = field(metadata=_wire(Atom.PIDSET, _per_item(4)))
    round: int = field(default=0, metadata=_wire(Atom.U32))


Message = (
    InfoRequest
    | Info
    | ChildUpdates
    | ParentUpdates
    | Adopt
    | Bcast
    | Want
    | Partial
    | JoinRequest
    | JoinRefused
    | Welcome
    | Handover
    | Update
    | Leaving
    | LeaveAck
    | Near
)

_CHARGED: dict[type, tuple[tuple[Callable[[Any], Any], Callable[[Any], int]], ...]] = {
    t: tuple((attrgetter(f.name), f.metadata["charge"]) for f in fields(t) if f.metadata["charge"])
    for t in Message.__args__  # type: ignore[attr-defined]
}
"""Per message type, its charged fields (a getter) and their charges (from the field
specs)."""


def message_bytes(m: Message) -> int:
    """The wire size the link model charges: :data:`HEADER_BYTES` plus each field's
    charge (module doc, "Charges")."""
    size = HEADER_BYTES
    for get, charge in _CHARGED.get(type(m), ()):
        size += charge(get(m))
    return size
