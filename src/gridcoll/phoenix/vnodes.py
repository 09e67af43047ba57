"""Phoenix (seed 004): virtual nodes, who owns what, and the routing table (sec. III).

Messages are addressed to virtual nodes (vnodes), ``0 .. size - 1``, fixed when the
computation is founded. Each vnode is mapped to exactly one process at any instant;
a message to a vnode is delivered wherever it is mapped when the message arrives
(fig. 2). A joining process receives vnodes from the member it contacts; a leaving
process gives its vnodes away first.

Every vnode carries an **epoch**, which grows each time it changes owner: by 2 on a
handover (the owner gives it away, with its state), by 1 on a *failover* (its owner
died and a survivor takes it with a fresh state, :meth:`VNodeTable.take_over`). A
:class:`VNodeTable` is one process's view:

* ``owned``: the vnodes mapped to this process, with their :class:`VNodeState`
  (epoch, the broadcast ids already delivered to it whole, the segments it holds of
  pipelined broadcasts still under way, the reduction ids it has already contributed
  to). That state travels with the vnode, so a vnode handed over while a
  message for it is in flight is served by exactly one of the two processes.
* ``route``: vnode -> (process, epoch), the owner this process last heard of. Entries
  only ever name a process that owned the vnode at that epoch, and are only replaced
  by newer epochs. A former owner's entry names the process it handed the vnode to,
  so it works as a forwarding pointer.

Routing invariant (why point-to-point forwarding terminates): a message for vnode v
sent along ``route`` reaches a process that owned v at some epoch e. If it still owns
v, it delivers. If it handed v over, its route entry has an epoch > e, so the next
hop is strictly later in v's history. If it is a future owner whose handover has not
arrived yet, it forwards along its older entry to the process that is handing v over,
which sends it back *after* the handover (channels are FIFO per pair), and v is then
owned. So every message reaches the current owner in at most (changes of owner while
it travels) + 2 hops.

Failover (beyond the paper, which assumes polite leaves): when a process dies, every
survivor sends what its table gives the dead process to one heir (the protocol picks
it), which takes them at the next epoch with a fresh state
(:meth:`VNodeTable.take_over`). Two survivors may disagree (a stale pointer: the dead
process had handed the vnode on; or different member lists, so different heirs). The
epochs settle them (with the protocol's help: its "Failures"): a handover's epoch (+2)
beats a failover from the pointer before it (+1), and of two failover claims at one
epoch the lower process id wins, in every table whichever claim it heard first
(:meth:`VNodeTable.learn`; it makes an owner give its vnode up to a newer or winning
entry: one it took over to any, one with its history only to the claimant's own;
:meth:`VNodeTable.take` merges two take-overs' states). So when the winner dies too,
every survivor's table gives its heir the vnode.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping
from dataclasses import dataclass, field, replace

from gridcoll.phoenix.nodesets import NodeSet

__all__ = ["HANDOVER_STEP", "VNodeState", "VNodeTable"]

HANDOVER_STEP = 2
"""A handover's epoch step; a failover steps by 1, so it loses to a handover from the
same epoch (module doc, "Failover")."""


@dataclass(frozen=True, slots=True)
class VNodeState:
    """What travels with a vnode when it changes owner."""

    epoch: int = 0
    delivered: frozenset[Hashable] = frozenset()
    """Broadcasts this vnode has every segment of."""
    contributed: frozenset[Hashable] = frozenset()
    partial: Mapping[Hashable, NodeSet] = field(default_factory=dict)
    """Pipelined broadcasts under way: op id -> the segment indices delivered so far
    (a :class:`NodeSet` of indices: segments arrive mostly in order, so a range or
    two). Never mutated: a delivery makes a new mapping."""
    recovered: bool = False
    """Taken over from a dead owner (:meth:`VNodeTable.take_over`): its history is lost,
    so its reduction data is counted only where no other contribution covers it (the
    protocol's "Failures")."""


def _merged(a: VNodeState, b: VNodeState) -> VNodeState:
    """One vnode's two histories after two survivors both took it over: what either
    delivered or contributed counts as done (no second time from now on)."""
    partial = dict(a.partial)
    for op, segments in b.partial.items():
        partial[op] = partial.get(op, NodeSet()) | segments
    delivered = a.delivered | b.delivered
    return VNodeState(
        max(a.epoch, b.epoch),
        delivered,
        a.contributed | b.contributed,
        {op: ns for op, ns in partial.items() if op not in delivered},
        recovered=True,
    )


@dataclass
class VNodeTable:
    """One process's view of the vnode namespace (see the module doc)."""

    me: int
    size: int
    owned: dict[int, VNodeState] = field(default_factory=dict)
    route: dict[int, tuple[int, int]] = field(default_factory=dict)

    @classmethod
    def founded(cls, me: int, mapping: Mapping[int, Iterable[int]]) -> VNodeTable:
        """The table of founder ``me`` given every founder's vnodes, which must cover
        ``0 .. size - 1`` exactly once."""
        route: dict[int, tuple[int, int]] = {}
        for pid, vnodes in mapping.items():
            for v in vnodes:
                if v in route:
                    raise ValueError(f"vnode {v!r} is mapped to {route[v][0]!r} and {pid!r}")
                route[v] = (pid, 0)
        size = len(route)
        if set(route) != set(range(size)):
            raise ValueError(
                f"founder vnodes must be 0 .. {size - 1} exactly, got {sorted(route)!r}"
            )
        table = cls(me, size, route=route)
        table.owned = {v: VNodeState() for v, (pid, _) in route.items() if pid == me}
        return table

    @property
    def everything(self) -> NodeSet:
        return NodeSet.span(0, self.size)

    def mine(self) -> NodeSet:
        return NodeSet.of(self.owned)

    def owner(self, v: int) -> int:
        """The process to send a message for v to (this one if v is owned here)."""
        if v in self.owned:
            return self.me
        return self.route[v][0]

    def learn(self, v: int, pid: int, epoch: int, claimed: bool = False) -> bool:
        """Take ``v -> pid`` at ``epoch`` if newer than what we know, or as new with a
        lower process id (of two failover claims at one epoch the lower wins, here as
        for an owned vnode, so every table ends naming the same winner); True if taken.

        An owned vnode is given up (its state dropped) to a newer epoch, or to the same
        epoch with a lower process id: both happen only after a failover (module doc),
        since otherwise the owner holds the vnode's latest epoch. A vnode with its real
        history (not ``recovered``) only to ``pid``'s own claim (``claimed``: a third
        party's entry may name a handover that died with its sender)."""
        if pid == self.me:
            return False  # only a handover or a failover makes a vnode ours
        if v in self.owned and not claimed and not self.owned[v].recovered:
            return False
        if v in self.owned:
            mine = self.owned[v].epoch
            if epoch < mine or (epoch == mine and pid > self.me):
                return False
            del self.owned[v]
            self.route[v] = (pid, epoch)
            return True
        old = self.route.get(v)
        if old is None or (epoch, -pid) > (old[1], -old[0]):
            self.route[v] = (pid, epoch)
            return True
        return False

    def give(self, vnodes: Iterable[int], to: int) -> dict[int, VNodeState]:
        """Hand ``vnodes`` (all owned) to ``to``: their states, epochs bumped; our route
        entries become forwarding pointers."""
        out = {}
        for v in sorted(vnodes):
            state = self.owned.pop(v)
            state = replace(state, epoch=state.epoch + HANDOVER_STEP)
            self.route[v] = (to, state.epoch)
            out[v] = state
        return out

    def take(self, states: Mapping[int, VNodeState]) -> None:
        """Receive handed-over vnodes. A vnode owned already can only be one that two
        survivors both took over (module doc, "Failover"): the two histories merge."""
        for v, state in states.items():
            if v in self.owned:
                mine = self.owned[v]
                if not (mine.recovered or state.recovered):
                    raise ValueError(f"vnode {v!r} handed to {self.me!r}, which already owns it")
                state = _merged(mine, state)
            self.owned[v] = state
            self.route[v] = (self.me, state.epoch)

    def routed_to(self, pid: int) -> list[int]:
        """The vnodes our table maps to process ``pid`` (not owned here)."""
        return sorted(v for v, (q, _) in self.route.items() if q == pid and v not in self.owned)

    def take_over(
        self, vnodes: Iterable[int], after: int = 0, under_way: Iterable[Hashable] = ()
    ) -> None:
        """Take vnodes whose owner died (module doc, "Failover"): a fresh, recovered
        state at the epoch after the one our table had (or ``after``, if later), holding
        none of the pipelined broadcasts ``under_way`` (so the rest of each is asked for
        if it stops coming: the protocol's "Failures")."""
        partial = dict.fromkeys(under_way, NodeSet())
        for v in vnodes:
            epoch = max(self.route[v][1], after) + 1
            self.owned[v] = VNodeState(epoch, partial=partial, recovered=True)
            self.route[v] = (self.me, epoch)

    def mark_delivered(self, v: int, op_id: Hashable, segment: int = 0, nsegments: int = 1) -> bool:
        """Record segment ``segment`` of an ``nsegments``-segment broadcast delivered to
        owned v; False if it had been already. The op moves to ``delivered`` once v has
        every segment."""
        s = self.owned[v]
        if op_id in s.delivered:
            return False
        got = s.partial.get(op_id, NodeSet())
        if segment in got:
            return False
        got = got | NodeSet.span(segment, segment + 1)
        partial = {k: ns for k, ns in s.partial.items() if k != op_id}
        delivered = s.delivered
        if len(got) >= nsegments:
            delivered = delivered | {op_id}
        else:
            partial[op_id] = got
        self.owned[v] = replace(s, delivered=delivered, partial=partial)
        return True

    def abandon(self, op_id: Hashable) -> list[int]:
        """End a pipelined broadcast that will not complete (its root died) for the
        owned vnodes holding some of its segments: it counts as delivered (no more of
        its segments are taken); the vnodes."""
        stuck = []
        for v, s in self.owned.items():
            if op_id in s.partial:
                partial = {k: ns for k, ns in s.partial.items() if k != op_id}
                self.owned[v] = replace(s, partial=partial, delivered=s.delivered | {op_id})
                stuck.append(v)
        return sorted(stuck)

    def mark_contributed(self, v: int, op_id: Hashable) -> bool:
        """Record owned v's contribution to a reduction; False if it had been already."""
        s = self.owned[v]
        if op_id in s.contributed:
            return False
        self.owned[v] = replace(s, contributed=s.contributed | {op_id})
        return True
