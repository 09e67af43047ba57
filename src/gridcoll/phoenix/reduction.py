"""Phoenix (seed 004): reduction up the latency trees, with a timeout.

A reduction waits for its children's partial sums only until a timeout (seed 004, sec.
IV-E), then sends what it has up the latency tree of the root vnode's owner; the
owner's :class:`~gridcoll.phoenix.protocol.RootSum` completes it (ReduceDone). This
collaborator of :class:`~gridcoll.phoenix.protocol.Process` keeps the reductions under
way, the root sums, and what a failure means for them (module doc of
:mod:`~gridcoll.phoenix.protocol`, "Failures").

The coordinator (``p``) is the process: its table, trees, ``send`` and the other
collaborators are reached through it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from gridcoll.errors import LocalProtocolError, RemoteProtocolError
from gridcoll.phoenix.events import (
    ReduceDone,
    ReduceRequested,
    SetTimer,
)
from gridcoll.phoenix.messages import (
    Partial,
    RootSum,
)
from gridcoll.phoenix.nodesets import NodeSet
from gridcoll.phoenix.states import State

if TYPE_CHECKING:
    from gridcoll.phoenix.protocol import Process


@dataclass
class ReduceState:
    """One reduction under way here: our vnodes' values and the partial sum of what
    reached us so far (seed 004, sec. IV-E)."""

    op_id: Hashable
    root: int
    op: Callable[[object, object], object]
    nbytes: int = 8
    values: dict[int, object] = field(default_factory=dict)
    value: object = None
    covered: NodeSet = field(default_factory=NodeSet)
    expired: bool = False


def _combine(op: Callable, a: object, a_cov: NodeSet, b: object, b_cov: NodeSet) -> object:
    if not a_cov:
        return b
    if not b_cov:
        return a
    return op(a, b)


class Reduction:
    """Reductions in and out of this process (seed 004, sec. IV-E)."""

    def __init__(self, p: Process) -> None:
        self.p = p
        self.lacking: dict[Hashable, NodeSet] = {}  # reduction -> vnodes whose owner died
        self.reduces: dict[Hashable, ReduceState] = {}
        self.sums: dict[Hashable, RootSum] = {}

    def timeout(self, nbytes: int = 0) -> float:
        """How long this process waits for its children's ``nbytes`` of data: its largest
        estimated distance to any root (sec. IV-E, a 1-byte figure), plus the time its
        own latency subtrees' summaries predict for ``nbytes`` to cross them
        (``b * nbytes``: an array takes longer than the paper's integers)."""
        lat = [t for (k, _), t in self.p.trees.items() if k == "latency"]
        dists = [t.dist for t in lat if 0 < t.dist < math.inf]
        if not dists:
            return self.p.default_timeout_s
        per_byte = max((self.p.forest.summary(t).b for t in lat if t.children), default=0.0)
        return max(dists) + per_byte * nbytes

    def reduce_state(self, op_id: Hashable, root: int, op: Callable, nbytes: int) -> ReduceState:
        r = self.reduces.get(op_id)
        if r is None:
            r = self.reduces[op_id] = ReduceState(op_id, root, op, nbytes)
            self.p.out.append(SetTimer(("reduce", op_id), self.timeout(nbytes)))
        return r

    def on_reduce_requested(self, event: ReduceRequested) -> None:
        if event.nbytes < 0:
            raise LocalProtocolError(f"nbytes must be >= 0, got {event.nbytes!r}")
        r = self.reduce_state(event.op_id, event.root, event.op, event.nbytes)
        r.values.update(event.values)
        self.contribute(r)

    def contribute(self, r: ReduceState) -> None:
        table = self.p.require_table()
        self.p.ownership.route(r.root)  # (takes a dead root owner's vnodes over first, if ours)
        value, covered = None, []
        for v in sorted(set(r.values) & set(table.owned)):
            if not table.mark_contributed(v, r.op_id):
                continue
            if table.owned[v].recovered:  # counted only where nothing else covers it
                one = NodeSet.of([v])
                m = Partial(r.op_id, r.root, r.op, r.values[v], one, False, 0, r.nbytes, True)
                self.on_partial(self.p.pid, m)
                continue
            value = r.values[v] if not covered else r.op(value, r.values[v])
            covered.append(v)
        if covered:
            self._absorb(r, value, NodeSet.of(covered), hops=0)

    def _absorb(self, r: ReduceState, value: object, covered: NodeSet, hops: int) -> None:
        if r.root in self.p.require_table().owned:
            self.merge_root(r.op_id, r.root, r.op, value, covered, r.nbytes)
        elif not r.expired and self.p.state is State.ACTIVE:
            if not r.covered.isdisjoint(covered):
                raise RemoteProtocolError(
                    f"reduction {r.op_id!r} counted {r.covered & covered} twice"
                )
            r.value = _combine(r.op, r.value, r.covered, value, covered)
            r.covered = r.covered | covered
            self.flush_if_complete(r)
        else:
            self._send_up(r, value, covered, hops, force_p2p=self.p.state is not State.ACTIVE)

    def flush_if_complete(self, r: ReduceState) -> None:
        """Send our partial sum up once every child has reported: no need to wait."""
        tree = self.p.trees.get(("latency", self.p.ownership.route(r.root)))
        if (
            tree is not None
            and tree.parent is not None
            and not self.p.forest.reach(tree) - r.covered
        ):
            self.flush_reduce(r)

    def _send_up(
        self, r: ReduceState, value: object, covered: NodeSet, hops: int, force_p2p: bool
    ) -> None:
        owner = self.p.ownership.route(r.root)
        if owner == self.p.pid:  # the root vnode was a dead process's: ours now
            self.merge_root(r.op_id, r.root, r.op, value, covered, r.nbytes)
            return
        tree = self.p.trees.get(("latency", owner))
        if (
            not force_p2p
            and tree is not None
            and tree.parent is not None
            and hops <= len(self.p.members)
        ):
            dst, via_tree = tree.parent, True
        else:
            dst, via_tree = owner, False
        self.p.send(
            dst, Partial(r.op_id, r.root, r.op, value, covered, via_tree, hops + 1, r.nbytes)
        )

    def flush_reduce(self, r: ReduceState, force_p2p: bool = False) -> None:
        r.expired = True
        if r.covered:
            value, covered, r.value, r.covered = r.value, r.covered, None, NodeSet()
            self._send_up(r, value, covered, 0, force_p2p or self.p.state is not State.ACTIVE)

    def on_partial(self, src: int, m: Partial) -> None:
        table = self.p.require_table()
        dst = self.p.ownership.route(m.root, m.hops)
        if m.root in table.owned:
            self.merge_root(
                m.op_id, m.root, m.op, m.value, m.covered, m.nbytes, recovered=m.recovered
            )
        elif m.via_tree and self.p.state is State.ACTIVE and not m.recovered:
            r = self.reduce_state(m.op_id, m.root, m.op, m.nbytes)
            self._absorb(r, m.value, m.covered, m.hops)
        else:
            self.p.send(dst, replace(m, via_tree=False, hops=m.hops + 1))

    def merge_root(
        self,
        op_id: Hashable,
        root: int,
        op: Callable,
        value: object,
        covered: NodeSet,
        nbytes: int,
        done: bool = False,
        recovered: bool = False,
    ) -> None:
        s = self.sums.get(op_id)
        if s is None:
            s = RootSum(op_id, root, op, None, NodeSet(), done, nbytes)
            r = self.reduces.get(op_id)
            self.p.out.append(
                SetTimer(("reduce-give-up", op_id), self.p.give_up_factor * self.timeout(nbytes))
            )
            if r is not None and r.covered:  # what we held as an inner node
                s = replace(s, value=r.value, covered=r.covered)
                r.value, r.covered = None, NodeSet()
            self.sums[op_id] = s
        if s.done or done:
            self.sums[op_id] = replace(s, done=True)
            return  # data after ReduceDone is dropped (module doc)
        if recovered:
            if len(covered) != 1:
                raise RemoteProtocolError(f"recovered data of reduction {op_id!r} for {covered}")
            (v,) = covered
            if v not in dict(s.aside):
                s = self.sums[op_id] = replace(s, aside=(*s.aside, (v, value)))
        else:
            if not s.covered.isdisjoint(covered):
                raise RemoteProtocolError(
                    f"reduction {op_id!r} counted {s.covered & covered} twice"
                )
            total = _combine(op, s.value, s.covered, value, covered)
            s = self.sums[op_id] = replace(s, value=total, covered=s.covered | covered)
        self.finish(s)

    def finish(self, s: RootSum, give_up: bool = False) -> None:
        """Emit ReduceDone once the root's sum and the recovered data aside cover the
        namespace but for the vnodes whose owners died while it ran (their data will
        not come: module doc, "Failures"), or when giving up; the aside data is
        counted for the vnodes ``covered`` lacks."""
        total, covered = s.value, s.covered
        for v, x in sorted(s.aside, key=lambda item: item[0]):
            if v not in covered:
                total = _combine(s.op, total, covered, x, NodeSet.of([v]))
                covered = covered | NodeSet.of([v])
        everything = self.p.require_table().everything
        if not give_up and (everything - covered) - self.lacking.get(s.op_id, NodeSet()):
            return
        self.lacking.pop(s.op_id, None)
        self.sums[s.op_id] = replace(s, done=True)
        self.p.out.append(ReduceDone(s.op_id, total, frozenset(everything - covered)))
