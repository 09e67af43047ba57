"""Phoenix (seed 004): broadcast along the trees, with point-to-point fallback.

A broadcast carries, per child, the set of virtual nodes to reach through it and falls
back to point-to-point messages for the rest (seed 004, sec. IV-D, rules I to III); a
long one is cut into segments that go down the tree as soon as they are cut. This
collaborator of :class:`~gridcoll.phoenix.protocol.Process` also keeps the copies it
may have to send again if a process dies, and asks for the rest of a broadcast that
stopped coming (Want; module doc of :mod:`~gridcoll.phoenix.protocol`, "Failures").

The coordinator (``p``) is the process: its table, trees, ``send`` and the other
collaborators are reached through it.
"""

from __future__ import annotations

import math
from collections.abc import Hashable
from dataclasses import replace
from typing import TYPE_CHECKING

from gridcoll.errors import LocalProtocolError, RemoteProtocolError
from gridcoll.phoenix.events import (
    Abandoned,
    BcastRequested,
    Deliver,
    SetTimer,
)
from gridcoll.phoenix.messages import (
    HEADER_BYTES,
    KINDS,
    Bcast,
    Want,
)
from gridcoll.phoenix.nodesets import NodeSet
from gridcoll.phoenix.states import State
from gridcoll.phoenix.trees import (
    Summary,
    choose_tree,
    segment_size,
)

if TYPE_CHECKING:
    from gridcoll.phoenix.protocol import Process


_ORIGINS_KEPT = 1024
"""Pipelined broadcasts whose root process is remembered (for :class:`Abandoned`)."""

WANTS = 3
"""How many times a process asks for the rest of a broadcast that stopped coming after a
failure before it abandons it (module doc, "Failures")."""


def _replace_targets(m: Bcast, targets: NodeSet, via_tree: bool) -> Bcast:
    """``m`` one hop further, for ``targets`` (the same op and segment)."""
    return replace(m, targets=targets, via_tree=via_tree, hops=m.hops + 1)


class Broadcast:
    """Broadcasts in and out of this process (seed 004, sec. IV-D)."""

    def __init__(self, p: Process) -> None:
        self.p = p
        self.sent_bytes = 0
        self.duplicates = 0  # resent segments a vnode already had (dropped)
        self.sent: dict[Hashable, list[tuple[int, int, Bcast]]] = {}  # op -> (dst, n, m)
        self.resent_ops: set[Hashable] = set()
        self.origins: dict[Hashable, tuple[str, int, int]] = {}  # pipelined op -> its
        # tree's kind, its root process, its number of segments
        self.stalls: dict[Hashable, tuple[int, int]] = {}  # op -> segments held, asks made

    def on_bcast_requested(self, event: BcastRequested) -> None:
        table = self.p.require_table()
        if event.root not in table.owned:
            raise LocalProtocolError(f"root vnode {event.root!r} is not mapped to {self.p.pid}")
        if event.nbytes < 0:
            raise LocalProtocolError(f"nbytes must be >= 0, got {event.nbytes!r}")
        kind = event.kind or self.choose_kind(event.nbytes)
        if kind not in KINDS:
            raise LocalProtocolError(f"tree kind must be one of {KINDS}, got {kind!r}")
        size = self.segment_size(event.nbytes)
        n = max(1, math.ceil(event.nbytes / size)) if size > 0 else 1
        sliceable = (
            isinstance(event.payload, bytes | bytearray | memoryview)
            and len(event.payload) == event.nbytes
        )
        for i in range(n):  # each segment goes down the tree as soon as it is cut
            lo, hi = i * size, min(event.nbytes, (i + 1) * size)
            payload = event.payload[lo:hi] if sliceable and n > 1 else event.payload
            m = Bcast(
                event.op_id,
                event.root,
                kind,
                self.p.pid,
                table.everything,
                True,
                0,
                hi - lo,
                payload,
                i,
                n,
            )
            self.spread(m)

    def _segment_cost(self, summary: Summary) -> float:
        """``c``: a segment message's fixed cost, its header at the tree's rate included."""
        header = HEADER_BYTES + self.p.require_table().everything.nbytes
        return self.p.segment_cost_s + header * (summary.b if math.isfinite(summary.b) else 0.0)

    def segment_size(self, nbytes: int) -> int:
        """The model's segment size for an ``nbytes`` broadcast on this process's own
        bandwidth tree (:func:`~gridcoll.phoenix.trees.segment_size`)."""
        tree = self.p.trees.get(("bandwidth", self.p.pid))
        if tree is None:
            return nbytes
        summary = self.p.forest.summary(tree)
        return segment_size(summary, nbytes, self._segment_cost(summary))

    def choose_kind(self, nbytes: int) -> str:
        """The tree the model predicts faster for an ``nbytes`` broadcast from here."""
        lat, bw = (
            self.p.trees.get(("latency", self.p.pid)),
            self.p.trees.get(("bandwidth", self.p.pid)),
        )
        if lat is None or bw is None:
            return "latency"
        summary = self.p.forest.summary(bw)
        return choose_tree(self.p.forest.summary(lat), summary, nbytes, self._segment_cost(summary))

    def on_bcast(self, src: int, m: Bcast) -> None:
        self.spread(m)

    def spread(self, m: Bcast) -> None:
        """Rules I, II and III of sec. IV-D, for one segment."""
        table = self.p.require_table()
        mine = m.targets & table.mine()
        if m.resent:
            self.resent_ops.add(m.op_id)
        fresh = []
        for v in mine:
            if table.mark_delivered(v, m.op_id, m.segment, m.nsegments):
                fresh.append(v)
            elif m.op_id in self.resent_ops or self.p.failed or m.op_id in table.owned[v].delivered:
                self.duplicates += 1  # a copy after a failure (module doc, "Failures")
            else:
                raise RemoteProtocolError(
                    f"broadcast {m.op_id!r} segment {m.segment} reached vnode {v} twice"
                )
        if fresh:
            self.p.out.append(Deliver(m.op_id, frozenset(fresh), m.payload, m.segment, m.nsegments))
            if m.nsegments > 1 and m.op_id not in self.origins:
                self.origins[m.op_id] = (m.kind, m.tree_root, m.nsegments)
                if len(self.origins) > _ORIGINS_KEPT:
                    del self.origins[next(iter(self.origins))]
            if m.resent and m.nsegments > 1:  # a vnode taken over starts afresh
                self.watch(m.op_id)
        rest = m.targets - mine
        tree = self.p.trees.get((m.kind, m.tree_root))
        if (
            m.via_tree
            and tree is not None
            and self.p.state in (State.ACTIVE, State.LEAVING, State.LEFT)  # see "Repair"
            and m.hops <= len(self.p.members)
        ):
            kids = [(c, tree.children[c].reach) for c in self.p.forest.ordered_children(tree)]
            share: dict[int, NodeSet] = {}
            for c, reach in [*kids, *sorted(tree.former.items())]:  # "Repair"
                if sub := rest & reach:
                    share[c] = share.get(c, NodeSet()) | sub  # one message per child
                    rest = rest - sub
            for c, sub in share.items():
                self._send_bcast(c, _replace_targets(m, sub, True))
        by_owner: dict[int, list[int]] = {}
        for v in rest:
            owner = self.p.ownership.route(v, m.hops) if self.p.failed else table.owner(v)
            by_owner.setdefault(owner, []).append(v)
        if taken := by_owner.pop(self.p.pid, None):  # a dead owner's, taken over just now
            self.spread(replace(m, targets=NodeSet.of(taken)))
        for owner in [o for o in by_owner if o in self.p.failed]:  # and no heir: report it
            self.p.out.append(Abandoned(m.op_id, frozenset(by_owner.pop(owner))))
        groups = sorted(by_owner.items())
        if m.resent and groups:  # a chain, nearest first (module doc, "Failures")
            nearest = min(groups, key=lambda g: (self._rtt(g[0]), g[0]))[0]
            targets = NodeSet.of(v for _, vs in groups for v in vs)
            self._send_bcast(nearest, _replace_targets(m, targets, False))
            return
        while groups:  # rule III as a binomial relay: log2(owners) + 1 sends from here
            half = groups[len(groups) // 2 :] if len(groups) > 1 else groups
            targets = NodeSet.of(v for _, vs in half for v in vs)
            self._send_bcast(half[0][0], _replace_targets(m, targets, False))
            groups = groups[: len(groups) // 2] if len(groups) > 1 else []

    def watch(self, op_id: Hashable) -> None:
        """Watch pipelined broadcast ``op_id`` every ``stall_s`` while our vnodes have
        only part of it (module doc, "Failures")."""
        if op_id not in self.stalls and (held := self._held(op_id))[1]:
            self.stalls[op_id] = (held[0], 0)
            self.p.out.append(SetTimer(("stall", op_id), self.p.stall_s))

    def _held(self, op_id: Hashable) -> tuple[int, NodeSet]:
        """Pipelined broadcast ``op_id`` at our vnodes: the segments they hold (summed)
        and those that some vnode holding part of it lacks (none if forgotten)."""
        held, lacking = 0, NodeSet()
        if op_id not in self.origins:
            return held, lacking
        n = self.origins[op_id][2]
        for s in self.p.require_table().owned.values():
            if (got := s.partial.get(op_id)) is not None:
                held += len(got)
                lacking = lacking | (NodeSet.span(0, n) - got)
        return held, lacking

    def on_stall(self, op_id: Hashable) -> None:
        """A watched broadcast's look: if no segment came since the last, take what our
        vnodes lack from the copies we kept of what we sent, and ask our parent in its
        tree for the rest (``Want``, down to our whole subtree), looking again after
        twice as long; after ``WANTS`` asks in vain, abandon it
        (:class:`~gridcoll.phoenix.events.Abandoned`)."""
        last, asked = self.stalls.pop(op_id, (0, 0))
        held, lacking = self._held(op_id)
        if not lacking:
            return
        if held == last:
            if asked == WANTS:
                self.p.out.append(
                    Abandoned(op_id, frozenset(self.p.require_table().abandon(op_id)))
                )
                return
            copies = self._copies(op_id, lacking)
            mine = NodeSet.of(
                v for v, s in self.p.require_table().owned.items() if op_id in s.partial
            )
            for segment in sorted(copies):
                self.spread(replace(copies[segment], targets=mine, via_tree=False, resent=True))
            kind, root, _ = self.origins[op_id]
            tree = self.p.trees.get((kind, root))
            rest = lacking - NodeSet.of(copies)
            if rest and tree is not None and tree.parent is not None:
                self.p.send(tree.parent, Want(op_id, kind, root, rest, self.p.forest.reach(tree)))
            asked += 1
        self.stalls[op_id] = (held, asked)
        self.p.out.append(SetTimer(("stall", op_id), self.p.stall_s * 2**asked))

    def _copies(self, op_id: Hashable, segments: NodeSet) -> dict[int, Bcast]:
        """A kept copy (``resend_ops``) of each of these segments we sent, by segment."""
        copies: dict[int, Bcast] = {}
        for _, _, sent in self.sent.get(op_id, ()):
            if sent.segment in segments:
                copies.setdefault(sent.segment, sent)
        return copies

    def on_want(self, src: int, m: Want) -> None:
        """Send ``src`` the segments it asks for that we kept copies of, down the tree;
        ask our own parent for the rest, unless we lack them too (our own ask covers
        our subtree, ``src``'s with it)."""
        copies = self._copies(m.op_id, m.segments)
        for segment in sorted(copies):
            again = replace(copies[segment], targets=m.targets, via_tree=True, hops=0, resent=True)
            self._send_bcast(src, again)
        rest = m.segments - NodeSet.of(copies)
        if m.op_id in self.stalls:
            rest = rest - self._held(m.op_id)[1]
        tree = self.p.trees.get((m.kind, m.tree_root))
        if rest and tree is not None and tree.parent is not None and m.hops < len(self.p.members):
            self.p.send(tree.parent, replace(m, segments=rest, hops=m.hops + 1))

    def _rtt(self, pid: int) -> float:
        """What we measured of the round trip to ``pid`` (inf: never measured)."""
        known = self.p.measured.get(pid)
        return math.inf if known is None else known.rtt_s

    def _send_bcast(self, dst: int, m: Bcast) -> None:
        """Send, and keep the message (``resend_ops``, ``resend_bytes``) in case ``dst``
        dies."""
        self.p.send(dst, m)
        if not self.p.resend_ops:
            return
        self.sent.setdefault(m.op_id, []).append((dst, self.p.sends_to[dst], m))
        self.sent_bytes += m.nbytes
        while len(self.sent) > 1 and (
            len(self.sent) > self.p.resend_ops or self.sent_bytes > self.p.resend_bytes
        ):
            oldest = next(iter(self.sent))
            self.sent_bytes -= sum(old.nbytes for *_, old in self.sent.pop(oldest))
