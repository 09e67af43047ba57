"""Phoenix (seed 004): membership, joins and polite leaves of one process.

Saito, Taura and Chikayama (seed 004, sec. III) let processes join and leave while
collectives go on. This collaborator of :class:`~gridcoll.phoenix.protocol.Process` keeps
who the members are: a joiner's JoinRequest, the sponsor's Welcome, the Updates that
spread a join (module doc of :mod:`~gridcoll.phoenix.protocol`, "Membership"), and a
leave: the leaver's vnodes to an heir, its children to new parents (Adopt), and the
rounds of Leaving and LeaveAck until every member it knows of has acknowledged.

The coordinator (``p``) is the process: its ``members``, ``departed``, ``trees``,
``measured``, ``state``, ``send`` and the other collaborators are reached through it.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from gridcoll.errors import LocalProtocolError, RemoteProtocolError
from gridcoll.phoenix.events import (
    LeaveRequested,
    PeerFailed,
    SetTimer,
)
from gridcoll.phoenix.forest import TreeState
from gridcoll.phoenix.messages import (
    KINDS,
    Adopt,
    AdoptItem,
    ChildItem,
    JoinRequest,
    LeaveAck,
    Leaving,
    Message,
    Near,
    Update,
    Welcome,
)
from gridcoll.phoenix.nodesets import NodeSet
from gridcoll.phoenix.states import State, transition
from gridcoll.phoenix.vnodes import VNodeTable

if TYPE_CHECKING:
    from gridcoll.phoenix.protocol import Process


class Membership:
    """Joins and leaves of one process (seed 004, sec. III; module doc)."""

    def __init__(self, p: Process) -> None:
        self.p = p
        self.unannounced: set[int] | None = None  # members to tell we joined ("Joins")
        self.awaiting: set[int] = set()
        self.acked: set[int] = set()
        self.early: list[tuple[int, Message]] = []
        self.round = 0
        self.former: dict[tuple[str, int], AdoptItem] = {}  # our parents when we left
        self.gave: set[int] = set()  # the vnodes we handed over while leaving
        self.contact: int | None = None  # the member a JOINING process asked
        self.sponsored: set[int] = set()  # joiners we welcomed ("Membership")
        self.lent_nothing: set[int] = set()  # welcomed with nothing measured: probe ("Joins")

    def _keeps(self, root: int) -> bool:
        """True if this process keeps ``root``'s trees (the ``roots`` option)."""
        return self.p.roots is None or root in self.p.roots

    def add_member(self, pid: int) -> bool:
        known = (KINDS[0], pid) in self.p.trees or not self._keeps(pid)
        if pid in self.p.departed or (pid in self.p.members and known):
            return False
        self.p.members.add(pid)
        for kind in KINDS if self._keeps(pid) else ():
            tree = TreeState(kind, pid)
            if pid == self.p.pid:
                tree.dist, tree.est = 0.0, math.inf
            self.p.trees[kind, pid] = tree
        if self.p.prober.settled and pid != self.p.pid:
            self.p.prober.joined.add(pid)
            self.p.prober.newcomers.add(pid)
        self.p.prober.revisit = bool(self.p.measured)  # measured peers only (module doc, "Joins")
        if owed := self.p.ownership.owed.pop(pid, None):
            self.p.ownership.correct(pid, owed)
        return True

    def _learn_members(self, src: int, members: frozenset[int]) -> None:
        """Add ``members``; tell each new one (but ``src``) that we are one, and each
        joiner we welcomed of them all (module doc, "Membership")."""
        new = [m for m in sorted(members - self.p.members) if self.add_member(m)]
        for joiner in sorted(self.sponsored & self.p.members - {src}):
            if told := frozenset(new) - {joiner}:
                self.p.send(joiner, Update(told))
        if self.p.state is State.LEAVING:
            for m in new:
                self.ask_to_ack(m)
            return
        owned = self.p.table.owned if self.p.table else {}
        # our recovered vnodes: a new member may have taken them over too ("Failures")
        claims = tuple((v, self.p.pid, s.epoch) for v, s in sorted(owned.items()) if s.recovered)
        for m in new:
            if m == src and not claims:
                continue
            if self.unannounced is not None and not claims:
                self.unannounced.add(m)
            else:
                self.p.send(m, Update(frozenset({self.p.pid}), claims))

    def announce(self, near: Near | None = None) -> None:
        """Tell the members a joiner held back that it joined (with ``near``, that it is
        near its sponsor: module doc, "Joins")."""
        held, self.unannounced = self.unannounced or set(), None
        for q in sorted(held & self.p.members - {self.p.pid}):
            self.p.send(q, Update(frozenset({self.p.pid}), near=near))

    def on_join_request(self, src: int, m: JoinRequest) -> None:
        if src in self.p.departed:
            raise RemoteProtocolError(f"departed process {src} asked to join (ids are not reused)")
        table = self.p.require_table()
        self.add_member(src)
        route = tuple((v, *table.route[v]) for v in range(table.size))
        measured = tuple((q, r.rtt_s, r.bw_Bps) for q, r in sorted(self.p.measured.items()))
        welcome = Welcome(
            table.size, frozenset(self.p.members), route, measured, self.p.prober.lan_rtt
        )
        self.p.send(src, welcome)
        if not measured:  # it sends no Near: we measure it ourselves, first ("Joins")
            self.lent_nothing.add(src)
        mine = sorted(table.owned)
        give = mine[len(mine) - len(mine) // 2 :] if self.p.state is State.ACTIVE else []
        self.p.ownership.hand_over(give, src)
        if give:  # in our reach until the joiner attaches below us ("Joins")
            self.p.forest.lent[src] = NodeSet.of(give)
            self.p.out.append(SetTimer(("lent", src), self.p.stall_s))
        if self.p.state is State.LEAVING:
            self.ask_to_ack(src)
        self.sponsored.add(src)  # we introduce it to the members we learn of later

    def on_welcome(self, src: int, m: Welcome) -> None:
        if self.p.state is not State.JOINING:
            raise RemoteProtocolError(f"Welcome from {src} in state {self.p.state.name}")
        self.p.table = VNodeTable(self.p.pid, m.size)
        for v, pid, epoch in m.route:
            self.p.table.route[v] = (pid, epoch)
        self.p.state = transition(self.p.state, Welcome)
        self.p.prober.sponsor = src  # first probe: a parent in every tree at once
        if m.measured:  # if the sponsor is in our LAN; one that measured nothing can't say
            self.p.prober.borrow = (src, m.lan_rtt, m.measured)
            self.unannounced = set()  # told once the first probe says if we are near it
        self.add_member(self.p.pid)
        self._learn_members(src, m.members)
        early, self.early = self.early, []
        for s, message in early:
            self.p._receive(s, message)
        self.p.ownership.claim_orphans()

    def on_update(self, src: int, m: Update) -> None:
        self.p.ownership.learn_routes(m.entries, claimant=src)
        self._learn_members(src, m.members)
        if m.near is not None:  # a joiner near its sponsor: before we probe for its trees
            self.p.prober.on_near(src, m.near)

    def on_leave(self, heir: int | None) -> None:
        others = [p for p in self.p.others()]
        if not others:
            raise LocalProtocolError(f"process {self.p.pid} is the last member and cannot leave")
        if heir is None:
            heir = self.p.rng.choice(others)
        elif heir not in others:
            raise LocalProtocolError(f"heir {heir!r} is not another member")
        if self.unannounced is not None:  # a member must know of us to take our Leaving
            self.announce()
        self.p.state = transition(self.p.state, LeaveRequested)
        self.p.ownership.hand_over(sorted(self.p.require_table().owned), heir)
        for r in list(self.p.reduction.reduces.values()):
            self.p.reduction.flush_reduce(r, force_p2p=True)
        adopt: dict[int, list[AdoptItem]] = {}
        for key, tree in self.p.trees.items():
            self.p.forest.detach_old(tree)
            if tree.parent is not None:
                self.p.forest.batch_child(tree.parent, ChildItem(key[0], key[1], attach=False))
                self.former[key] = AdoptItem(*key, tree.parent, tree.rtt, tree.bw)
                for c, item in self._adoptions(tree).items():
                    adopt.setdefault(c, []).append(item)
        for c, items in sorted(adopt.items()):  # before Leaving: FIFO, so it acts first
            self.p.send(c, Adopt(tuple(items)))
        for p in others:
            self.ask_to_ack(p)

    def _adoptions(self, tree: TreeState) -> dict[int, AdoptItem]:
        """Where a leaver's children go (module doc, "Repair"): the nearest one (the
        smallest RTT to us, then the most descendants) takes our place below our
        parent, the others move below it, so our subtree stays one subtree (a LAN
        reached through us keeps one wide-area edge, Property I)."""
        kids = tree.children
        if not kids:
            return {}
        order = sorted(kids, key=lambda c: (kids[c].rtt, -kids[c].summary.descendants, c))
        first, key = order[0], (tree.kind, tree.root)
        up = self.former[key]
        out = {first: up}
        for i, c in enumerate(order[1:], 1):  # if the nearer ones leave too: the next
            fallback = (*order[1:i], up.parent)
            out[c] = AdoptItem(*key, first, kids[first].rtt, kids[first].bw, fallback)
        return out

    def ask_to_ack(self, pid: int, again: bool = False) -> None:
        if (not again and (pid in self.acked or pid in self.awaiting)) or pid == self.p.pid:
            return
        self.awaiting.add(pid)
        table = self.p.require_table()
        entries = tuple((v, *table.route[v]) for v in sorted(self.gave))
        self.p.send(pid, Leaving(entries, self.round))

    def on_leaving(self, src: int, m: Leaving) -> None:
        self.p.ownership.learn_routes(m.entries)
        self.remove_member(src)
        self.ack_leaving(src, m.round)
        self.p.ownership.claim_orphans()  # the leaver may have been a dead process's heir

    def ack_leaving(self, leaver: int, round_: int) -> None:
        """Ack a Leaving with the members the leaver may not know: not the founders,
        if it was founded with us (fig. 9's leave on ``das2-spread:160,4``: 0.3-0.4 MB
        of member lists per wide-area link in the 10 s after it otherwise)."""
        known = self.p.founders.keys() if self.p.founders and leaver in self.p.founders else set()
        self.p.send(leaver, LeaveAck(frozenset(self.p.members - known), round_))

    def on_leave_ack(self, src: int, m: LeaveAck) -> None:
        if self.p.state is not State.LEAVING:
            raise RemoteProtocolError(f"LeaveAck from {src} in state {self.p.state.name}")
        if m.round != self.round:
            return  # an ack of an earlier round; the current one is still to come
        self.awaiting.discard(src)
        self.acked.add(src)
        self._learn_members(src, m.members)  # asks the new ones; our joiners hear of them
        self.maybe_left(LeaveAck)

    def maybe_left(self, trigger: type[LeaveAck | PeerFailed]) -> None:
        """LEAVING -> LEFT once every member we know of acked the current round (or
        died)."""
        if self.p.state is State.LEAVING and not self.awaiting:
            self.p.state = transition(self.p.state, trigger)

    def remove_member(self, pid: int, crashed: bool = False) -> None:
        """``pid`` left (or, ``crashed``, died: then it forwards nothing any more, so it
        is no former child, and a leaver drops it from the children it kept)."""
        self.p.departed.add(pid)
        self.p.prober.newcomers.discard(pid)
        self.p.members.discard(pid)
        self.sponsored.discard(pid)
        self.p.prober.recheck.discard(pid)
        self.p.forest.end_loan(pid)
        if self.p.prober.probing == pid:
            self.p.prober.probing, self.p.prober.probe_result, self.p.prober.probe_info = (
                None,
                None,
                None,
            )
        for kind in KINDS:
            self.p.trees.pop((kind, pid), None)
        for key, tree in self.p.trees.items():
            if tree.old_parent == pid and crashed:
                tree.old_parent = None
            if tree.parent == pid:
                self.p.forest.detach_old(tree)
                self.p.forest.climb(key, tree)
                self.p.forest.down.add(key)
                self.p.prober.renew_after_loss(key[1], chain=True)
            if crashed:
                tree.former.pop(pid, None)
            keep = self.p.state is not State.ACTIVE and not crashed
            old = tree.children.pop(pid, None) if not keep else None
            if old is not None:  # (a leaver keeps the children it had: module doc)
                if not crashed:
                    tree.former[pid] = old.reach  # it forwards along its own old children
                    tree.reached(pid, old.reach)
                self.p.forest.up.add(key)
                self.p.forest.down.add(key)
