"""Phoenix (seed 004): which process owns which vnode, and failover.

Messages are addressed to virtual nodes (seed 004, sec. III). This collaborator of
:class:`~gridcoll.phoenix.protocol.Process` moves vnodes between owners: handovers (to a
joiner, by a leaver, on request), the routing entries learnt from Updates and Leavings,
and, beyond the paper, failover when a process dies (module doc of
:mod:`~gridcoll.phoenix.protocol`, "Failures"): the heir takes the dead process's
vnodes at the next epoch and claims them; what was sent to the dead process is sent
again. The table itself, with its epochs and pointers, is
:class:`~gridcoll.phoenix.vnodes.VNodeTable`.

The coordinator (``p``) is the process: its table, members, ``failed`` set, ``send``
and the other collaborators are reached through it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace
from typing import TYPE_CHECKING

from gridcoll.errors import LocalProtocolError, RemoteProtocolError
from gridcoll.phoenix.events import (
    Abandoned,
    MigrateRequested,
    PeerFailed,
    PeerLost,
)
from gridcoll.phoenix.messages import (
    Handover,
    Update,
)
from gridcoll.phoenix.nodesets import NodeSet
from gridcoll.phoenix.states import State

if TYPE_CHECKING:
    from gridcoll.phoenix.protocol import Process


SITE_SHIFT = 52
"""A process id's bits from this one up name its *site* (a cluster, a LAN; 0 if unsaid):
a dead process's heir is taken in its site while one of it lives (``_successor``), so
its vnodes, and the broadcasts sent again to them, stay off the wide area. The driver
draws ids (rule 2) with the site in these bits; the simulator's small ids are all of
site 0."""


def _successor(dead: int, members: Iterable[int]) -> int | None:
    """The heir of a dead process's vnodes: the next member id after ``dead``, cyclically,
    among the members of its site (:data:`SITE_SHIFT`) if any, else among all (one rule
    every survivor applies alike; module doc, "Failures")."""
    ids = sorted(members)
    pool = [m for m in ids if m >> SITE_SHIFT == dead >> SITE_SHIFT] or ids
    return next((m for m in pool if m > dead), pool[0] if pool else None)


class Ownership:
    """Handovers, routing entries and failover of vnodes (seed 004, sec. III; module doc,
    "Failures")."""

    def __init__(self, p: Process) -> None:
        self.p = p
        self.doubts: dict[int, list[tuple[int, int, int]]] = {}  # pid -> (v, epoch, src)
        self.owed: dict[int, set[int]] = {}  # claimant not yet a member -> vnodes to correct
        self.told: dict[int, int] = {}  # dead process -> the heir we sent its entries

    def learn_routes(
        self, entries: Iterable[tuple[int, int, int]], claimant: int | None = None
    ) -> None:
        """Take newer routing entries. An owned vnode goes to a newer or winning
        failover claim (:meth:`VNodeTable.learn`); a ``claimant`` claiming for itself
        a vnode we hold at a newer or winning epoch is told so (module doc, "Failures")."""
        table = self.p.require_table()
        corrections, dead = [], set()
        for v, pid, epoch in entries:
            ours = table.route.get(v, (None, -1))
            if ours[0] == claimant != pid and ours[1] > epoch and pid not in self.p.failed:
                self.doubts.setdefault(pid, []).append((v, epoch, claimant))  # see below
            elif ours[0] == claimant != pid and ours[1] > epoch:
                # our owner of v says it had v at dead ``pid``: the handover of v from
                # ``pid`` to it died with ``pid``, so v fails over from ``pid``
                table.learn(v, pid, ours[1] + 1)
                dead.add(pid)
            elif pid in self.p.failed and (
                table.learn(v, pid, epoch) or self._heir(pid) == self.p.pid
            ):
                dead.add(pid)  # v fails over from it: passed on if news to us, or ours
            if (
                pid == self.p.pid
                and ours[0] in self.p.failed
                and epoch > ours[1]
                and v not in table.owned
            ):
                # said to be ours: the handover to us died with its sender
                if self.p.state is State.ACTIVE:
                    table.take_over([v], after=epoch)
                    self._claim([v])
                    self.p.forest.mark_all_up()
                continue
            if pid in self.p.departed:
                continue
            owned = v in table.owned
            if table.learn(v, pid, epoch, claimed=pid == claimant):
                if owned:
                    self.p.forest.mark_all_up()
            elif owned and pid == claimant:
                corrections.append(v)
        if claimant in self.p.members:
            self.correct(claimant, corrections)
        elif corrections and claimant is not None and claimant not in self.p.departed:
            self.owed.setdefault(claimant, set()).update(corrections)  # when we know it
        for pid in sorted(dead):
            self._fail_over(pid)

    def correct(self, claimant: int, vnodes: Iterable[int]) -> None:
        """Tell ``claimant``, which claimed these vnodes, that we own them at a newer or
        winning epoch (one that claimed before we knew it is a member is told once we
        do: else it keeps them too, module doc, "Failures")."""
        table = self.p.require_table()
        if entries := tuple(
            (v, self.p.pid, table.owned[v].epoch) for v in sorted(vnodes) if v in table.owned
        ):
            self.p.send(claimant, Update(frozenset(), entries))

    def on_peer_failed(self, dead: int, received: int | None, delivered: int | None) -> None:
        """``dead`` died (module doc, "Failures"): drop it, re-map its vnodes to the
        heir, send again what we sent it after the ``received`` it passed on (for its
        own vnodes, after the ``delivered`` it took in), report what cannot complete."""
        if dead == self.p.pid:
            raise LocalProtocolError(f"process {self.p.pid} was told that it died")
        if dead in self.p.failed:
            return
        if self.p.state is State.JOINING and dead == self.p.membership.contact:
            raise RemoteProtocolError(f"contact {dead} died before welcoming us: join again")
        self.p.failed.add(dead)
        self.owed.pop(dead, None)
        self.p.membership.remove_member(dead, crashed=True)
        self.p.measured.pop(dead, None)
        self.p.membership.awaiting.discard(dead)
        self.p.membership.maybe_left(PeerFailed)
        if self.p.table is None:
            return  # joining: nothing is mapped here yet
        table = self.p.table
        heir, moved = self._fail_over(dead)
        for v, epoch, src in self.doubts.pop(dead, ()):  # told before we knew it died
            self.learn_routes([(v, dead, epoch)], claimant=src)
        self.claim_orphans()
        after = -1 if received is None else received
        took = after if delivered is None else max(after, delivered)
        own = NodeSet.of(moved)  # they go to the heir, who needs a whole broadcast
        resend = []
        for sends in self.p.broadcast.sent.values():
            to_dead = [(n, m) for dst, n, m in sends if dst == dead]
            whole = any(n > took for n, _ in to_dead)  # else it had every segment
            for n, m in to_dead:
                targets = (m.targets if n > after else NodeSet()) - own  # its subtree
                if whole:
                    targets = targets | (m.targets & own)  # its own vnodes, at the heir
                if targets:
                    resend.append(replace(m, targets=targets))
        for m in resend:  # through the owners now: the dead's subtree is being repaired
            self.p.broadcast.spread(replace(m, via_tree=False, resent=True))
        for op_id in [op for op, (_, root, _) in self.p.broadcast.origins.items() if root == dead]:
            del self.p.broadcast.origins[op_id]
            if stuck := table.abandon(op_id):
                self.p.out.append(Abandoned(op_id, frozenset(stuck)))
        for op_id in self.p.broadcast.origins:  # broadcasts under way: they may stop coming
            self.p.broadcast.watch(op_id)
        for s in list(self.p.reduction.sums.values()):  # the dead's data will not come
            if not s.done and s.root in table.owned:
                self.p.reduction.lacking[s.op_id] = self.p.reduction.lacking.get(
                    s.op_id, NodeSet()
                ) | NodeSet.of(moved)
                self.p.reduction.finish(s)
        for r in list(self.p.reduction.reduces.values()):  # nor will a dead child's
            if r.covered and not r.expired and self.p.state is State.ACTIVE:
                self.p.reduction.flush_if_complete(r)
        self.p.out.append(
            PeerLost(dead, heir, frozenset(moved), frozenset(m.op_id for m in resend))
        )

    def _fail_over(self, dead: int, heir: int | None = None) -> tuple[int | None, list[int]]:
        """Map the vnodes our table gives dead ``dead`` to its heir (module doc,
        "Failures"). The heir claims them to every member (settling stale pointers and
        disagreeing heirs); anyone else tells the heir where it had them, since the
        heir's own table may not give them to ``dead``. ``heir``: who takes them (None:
        :meth:`_heir`; this process after a routing cycle, :meth:`route`). The heir and
        the vnodes."""
        table = self.p.require_table()
        heir = self._heir(dead) if heir is None else heir
        moved = table.routed_to(dead)
        if heir is None or not moved:
            return heir, moved
        if heir == self.p.pid:
            under_way = {
                op
                for s in table.owned.values()
                for op in s.partial
                if op in self.p.broadcast.origins
            }
            table.take_over(moved, under_way=under_way)
            for op_id in under_way:  # it may have had them whole: none resends them
                self.p.broadcast.watch(op_id)
            self._claim(moved)
            self.p.forest.mark_all_up()
            for r in list(self.p.reduction.reduces.values()):  # a root sum lost with it starts anew
                if r.root in moved and r.op_id not in self.p.reduction.sums:
                    self.p.reduction.merge_root(r.op_id, r.root, r.op, None, NodeSet(), r.nbytes)
                self.p.reduction.contribute(r)
        else:
            had = tuple((v, dead, table.route[v][1]) for v in moved)
            self.p.send(heir, Update(frozenset(), had))
            self.told[dead] = heir
        return heir, moved

    def _claim(self, vnodes: list[int]) -> None:
        """Tell every member we own these recovered vnodes: two processes that both took
        one over learn of each other, and the epochs settle it (module doc, "Failures")."""
        table = self.p.require_table()
        if claims := tuple((v, self.p.pid, table.owned[v].epoch) for v in vnodes):
            for other in self.p.others():
                self.p.send(other, Update(frozenset(), claims))

    def claim_orphans(self) -> None:
        """After a membership change, take over the vnodes of dead processes whose heir
        we have become, or tell their new heir (the one before left or died)."""
        for dead in sorted(self.p.failed):
            heir = self._heir(dead)
            if heir != self.p.pid and heir == self.told.get(dead):
                continue  # told already
            if self.p.require_table().routed_to(dead):
                self._fail_over(dead)

    def _heir(self, dead: int) -> int | None:
        """Who takes over a dead process's vnodes, as far as we know: the next member id
        after it, in its site if any is left (an active member: a leaver does not take
        vnodes)."""
        return _successor(
            dead, self.p.members if self.p.state is State.ACTIVE else self.p.members - {self.p.pid}
        )

    def route(self, v: int, hops: int = 0) -> int:
        """Where a message for vnode ``v`` goes: its owner by our table, or, for a dead
        owner, its heir; if that is us, we take the dead owner's vnodes over first. So
        do we if the message has made more than ``2 P + 2`` hops: it is going round a
        cycle of tables that disagree about a dead owner, which only a failure causes
        (the routing invariant of :mod:`~gridcoll.phoenix.vnodes` holds otherwise)."""
        owner = self.p.require_table().owner(v)
        if owner not in self.p.failed:
            return owner
        heir = self._heir(owner)
        if hops > 2 * len(self.p.members) + 2 and self.p.state is State.ACTIVE:
            heir = self.p.pid
        if heir == self.p.pid:
            self._fail_over(owner, heir)
        return owner if heir is None else heir

    def hand_over(self, vnodes: list[int], to: int) -> None:
        if not vnodes:
            return
        table = self.p.require_table()
        states = table.give(vnodes, to)
        if self.p.state is State.LEAVING:
            self.p.membership.gave.update(states)
        sums = tuple(
            self.p.reduction.sums.pop(op)
            for op, s in list(self.p.reduction.sums.items())
            if s.root in states
        )
        values = tuple(
            (r.op_id, r.root, r.op, v, r.values[v], r.nbytes)
            for r in self.p.reduction.reduces.values()
            for v in states
            if v in r.values and r.op_id not in states[v].contributed
        )
        self.p.send(
            to, Handover(tuple(states.items()), sums, self.p.state is State.LEAVING, values)
        )
        entries = tuple((v, to, s.epoch) for v, s in states.items())
        if self.p.state is State.LEAVING and self.p.membership.awaiting | self.p.membership.acked:
            # Members that acked our Leaving may point at us for these vnodes: they must
            # learn the new owner before we may leave, so ask every member again.
            self.p.membership.acked.clear()
            self.p.membership.awaiting.clear()  # departed ones will not hear this round
            self.p.membership.round += 1
            for other in self.p.others():
                self.p.membership.ask_to_ack(other, again=True)
        else:
            for other in self.p.others():
                if other != to:
                    self.p.send(other, Update(frozenset(), entries))
        self.p.forest.mark_all_up()

    def on_migrate(self, event: MigrateRequested) -> None:
        if event.dst == self.p.pid:
            return
        if event.dst not in self.p.members:
            raise LocalProtocolError(f"cannot migrate to {event.dst!r}: not a member")
        give = sorted(set(event.vnodes) & set(self.p.require_table().owned))
        self.hand_over(give, event.dst)

    def on_handover(self, src: int, m: Handover) -> None:
        table = self.p.require_table()
        states = dict(m.states)
        contested = [  # someone may have taken it over: settle it (module doc, "Failures")
            v
            for v, st in states.items()
            if (self.p.failed and table.route.get(v, (src, 0))[0] not in (src, self.p.pid))
            or table.route.get(v, (src, -1))[1] >= st.epoch
        ]
        table.take(states)
        for op_id, root, op, v, value, nbytes in m.values:
            self.p.reduction.reduce_state(op_id, root, op, nbytes).values.setdefault(v, value)
        if self.p.state is not State.ACTIVE:  # leaving: pass them on at once
            heirs = [p for p in self.p.others() if not (m.from_leaving and p == src)]
            if not heirs:
                raise LocalProtocolError(f"process {self.p.pid} is leaving and has no heir")
            for s in m.sums:
                self.p.reduction.sums[s.op_id] = s
            self.hand_over(sorted(states), self.p.rng.choice(heirs))
            return
        self._claim([v for v in sorted(states) if table.owned[v].recovered or v in contested])
        for s in m.sums:
            self.p.reduction.merge_root(
                s.op_id, s.root, s.op, s.value, s.covered, s.nbytes, done=s.done
            )
            for v, x in s.aside:
                self.p.reduction.merge_root(
                    s.op_id, s.root, s.op, x, NodeSet.of([v]), s.nbytes, recovered=True
                )
        for r in self.p.reduction.reduces.values():
            if r.root in states and r.covered:  # our partial sum joins the root's
                value, covered, r.value, r.covered = r.value, r.covered, None, NodeSet()
                self.p.reduction.merge_root(r.op_id, r.root, r.op, value, covered, r.nbytes)
            self.p.reduction.contribute(r)
        self.p.forest.mark_all_up()
