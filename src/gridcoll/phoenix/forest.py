"""Phoenix (seed 004): one process's spanning trees, two per root.

For every root each process keeps a latency-aware and a bandwidth-aware spanning tree
(seed 004, sec. IV-B and IV-C). This collaborator of
:class:`~gridcoll.phoenix.protocol.Process` keeps its place in them: moves to a better
parent (make before break), the ChildUpdates and ParentUpdates that carry reach sets,
summaries and positions (batched per neighbour, :meth:`Forest.flush`), the Adopt of a
leaver's children and the climb to the nearest live ancestor (module doc of
:mod:`~gridcoll.phoenix.protocol`, "Repair"). The rules themselves are the pure
functions of :mod:`gridcoll.phoenix.trees`.

The coordinator (``p``) is the process: the trees (``p.trees``), members, ``send`` and
the other collaborators are reached through it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from gridcoll.phoenix.messages import (
    Adopt,
    ChildItem,
    ChildUpdates,
    ParentUpdates,
    Position,
)
from gridcoll.phoenix.nodesets import NodeSet
from gridcoll.phoenix.states import State
from gridcoll.phoenix.trees import (
    Edge,
    Summary,
    bandwidth_better,
    bandwidth_class,
    bandwidth_offer,
    bandwidth_summary,
    child_order,
    latency_better,
    latency_summary,
    summary_moved,
)

if TYPE_CHECKING:
    from gridcoll.phoenix.protocol import Process


@dataclass
class ChildState:
    """A child in one tree: the vnodes it reaches, its subtree's summary, the hop's
    RTT and rate."""

    reach: NodeSet
    summary: Summary
    rtt: float
    bw: float


@dataclass
class TreeState:
    """This process's place in one tree (``kind``, ``root``): its parent and the hop's
    figures, its distance and rate, its children (seed 004, sec. IV-B, IV-C)."""

    kind: str
    root: int
    parent: int | None = None
    rtt: float = math.inf
    bw: float = 0.0
    dist: float = math.inf
    est: float = 0.0
    path: tuple[int, ...] = ()
    children: dict[int, ChildState] = field(default_factory=dict)
    sent_up: tuple[NodeSet, Summary] | None = None
    sent_down: tuple[float, float, int, tuple[int, ...]] | None = None
    estimated: bool = False  # rtt and bw to the parent are bounds from an Adopt
    old_parent: int | None = None  # to detach from once the new parent took us
    adopted: int = 0  # adoptions since the last move by probing
    former: dict[int, NodeSet] = field(default_factory=dict)  # moved-away child -> reach
    fallback: tuple[int, ...] = ()  # the Adopt's next parents, if this one leaves too

    def connected(self) -> bool:
        return self.dist < math.inf if self.kind == "latency" else self.est > 0

    def position(self, me: int) -> Position:
        return Position(self.kind, self.root, self.dist, self.est, len(self.children), self.path)

    def reached(self, child: int, reach: NodeSet) -> None:
        """``child`` reaches (or last reached) ``reach``: no other former child is
        remembered for those vnodes (module doc, "Repair")."""
        for other, had in list(self.former.items()):
            if other != child and not had.isdisjoint(reach):
                if rest := had - reach:
                    self.former[other] = rest
                else:
                    del self.former[other]

    def disconnect(self) -> None:
        self.parent, self.rtt, self.bw = None, math.inf, 0.0
        self.dist, self.est, self.path = math.inf, 0.0, ()
        self.estimated, self.adopted, self.fallback = False, 0, ()


class Forest:
    """This process's place in every tree, and the updates that keep it (seed 004, sec.
    IV-B, IV-C)."""

    def __init__(self, p: Process) -> None:
        self.p = p
        self.up: set[tuple[str, int]] = set()
        self.down: set[tuple[str, int]] = set()
        self.new_children: dict[tuple[str, int], set[int]] = {}
        self.child_batch: dict[int, list[ChildItem]] = {}
        self.lent: dict[int, NodeSet] = {}  # joiner -> vnodes handed to it, in our reach

    def climb(self, key: tuple[str, int], tree: TreeState) -> None:
        """Our parent is gone and no Adopt moved us on (module doc, "Repair"): attach
        at once to the next parent the Adopt that brought us there named
        (``fallback``: a nearer sibling, so a LAN stays one subtree), else to the
        nearest ancestor on our path still a member, so the subtree stays connected;
        disconnect (and probe) only if none is. The hop is measured if we ever probed
        that process; to a sibling nearer the leaver than we are the old hop's figures
        stand as bounds, as an Adopt's; to an ancestor or the leaver's parent (the last
        fallback, often across the wide area) the route we had from it (our distance,
        our rate) stands as bounds (``estimated``) until it is probed, which it is
        next."""
        ancestors = tree.path[-2::-1]  # the grandparent first
        options = (*tree.fallback, *ancestors) if self.p.state is State.ACTIVE else ()
        j = next(
            (j for j, q in enumerate(options) if q in self.p.members and q != self.p.pid), None
        )
        if j is None:
            tree.disconnect()
            return
        parent = options[j]
        fallback = j < len(tree.fallback)
        sibling = j < len(tree.fallback) - 1  # the last fallback is the leaver's parent
        if fallback and parent in tree.path[:-1]:  # the leaver's parent, on our route
            tree.path, tree.fallback = tree.path[: tree.path.index(parent) + 1], ()
        elif fallback:
            tree.path, tree.fallback = (*tree.path[:-1], parent), tree.fallback[j + 1 :]
        else:
            depth = len(tree.path) - 2 - (j - len(tree.fallback))
            tree.path, tree.fallback = tree.path[: depth + 1], ()
        tree.parent = parent
        known = self.p.measured.get(parent)
        if known is not None:
            tree.rtt, tree.bw, tree.estimated = known.rtt_s, known.bw_Bps, False
        else:
            tree.estimated = True
            if not sibling:  # a sibling is nearer the leaver: our hop to it bounds it
                # an ancestor (or the leaver's parent, our ancestor through the leaver):
                # the route we had from it stands for the hop, as an Adopt's
                if math.isfinite(tree.dist):  # our distance: at least the route's RTT
                    tree.rtt = max(tree.rtt, tree.dist)
                if tree.est > 0:  # our rate: at most the route's narrowest hop
                    tree.bw = min(tree.bw, tree.est)
                self.p.prober.unmeasured.add(parent)
        tree.adopted += 1
        tree.sent_up = None  # the new parent must hear from us
        self.up.add(key)

    def mark_all_up(self) -> None:
        self.up.update(self.p.trees)

    def judge(self, tree: TreeState, cand: int, pos: Position, rtt: float, bw: float) -> None:
        if tree.parent == cand:
            if tree.estimated and self.p.pid not in pos.path:  # measured now: replace bounds
                tree.rtt, tree.bw, tree.estimated = rtt, bw, False
                self._position_from(tree, pos.dist, pos.est, pos.nchildren, (*pos.path, cand))
                self.down.add((tree.kind, tree.root))
            return
        if self.p.pid in pos.path:
            return
        if pos.root != cand and not pos.path:
            return  # cand is not connected to this tree
        if tree.kind == "latency":
            if not latency_better(
                rtt_cand=rtt,
                cand_dist=pos.dist,
                cand_children=pos.nchildren,
                rtt_parent=tree.rtt,
                dist=tree.dist,
                lan_rtt=self.p.prober.lan_rtt,
                overhead=self.p.send_overhead_s,
            ):
                return
        else:
            if pos.est <= 0:
                return
            offer = bandwidth_offer(pos.est, bw, pos.nchildren + 1, self.p.prober.lan_bw)
            nearer, remote = bandwidth_class(bw, tree.bw)
            if tree.parent is not None and not bandwidth_better(
                offer, tree.est, nearer=nearer, remote=remote
            ):
                return
        self._move(tree, cand, pos, rtt, bw)

    def _move(self, tree: TreeState, cand: int, pos: Position, rtt: float, bw: float) -> None:
        """Attach to ``cand``; detach from the old parent once ``cand`` has taken us
        (its first position update): make before break, so that a broadcast passing
        meanwhile still finds our subtree in one of the two parents' reach sets."""
        key = (tree.kind, tree.root)
        self.detach_old(tree, keep=cand)
        if tree.parent is not None and tree.parent != cand:
            tree.old_parent = tree.parent
        tree.parent, tree.rtt, tree.bw, tree.estimated, tree.adopted = cand, rtt, bw, False, 0
        tree.fallback = ()
        self._position_from(tree, pos.dist, pos.est, pos.nchildren + 1, (*pos.path, cand))
        tree.sent_up = None  # the new parent must hear from us
        if self.p.prober.focus is not None:  # a tree that moved since a loss is repaired too:
            self.p.prober.focus.add(tree.root)  # its sweep starts afresh ("Probes after a loss")
            self.p.prober.swept[tree.root] = set()
            self.p.prober.moved.add(tree.root)
        self.up.add(key)
        self.down.add(key)

    def detach_old(self, tree: TreeState, keep: int | None = None) -> None:
        """Send the detach a move left pending (see :meth:`_move`)."""
        old, tree.old_parent = tree.old_parent, None
        if old is not None and old != keep:
            self.batch_child(old, ChildItem(tree.kind, tree.root, attach=False))

    def _position_from(self, tree: TreeState, dist: float, est: float, n: int, path: tuple) -> None:
        tree.dist = dist + tree.rtt + self.p.send_overhead_s * (n - 1)
        tree.est = bandwidth_offer(est, tree.bw, max(n, 1), self.p.prober.lan_bw)
        tree.path = path

    def batch_child(self, parent: int, item: ChildItem) -> None:
        self.child_batch.setdefault(parent, []).append(item)

    def on_child_updates(self, src: int, m: ChildUpdates) -> None:
        if self.p.state is not State.ACTIVE:
            self.redirect(src, m)  # leaving: send the child up to our parent
            return
        self.end_loan(src)
        for item in m.items:
            key = (item.kind, item.root)
            tree = self.p.trees.get(key)
            if tree is None:
                continue
            if not item.attach:
                old = tree.children.pop(src, None)
                if old is not None:
                    tree.former[src] = old.reach  # for late broadcasts (module doc)
                    tree.reached(src, old.reach)
                    self.up.add(key)
                    self.down.add(key)
                continue
            old = tree.children.get(src)  # None: it came back, its reach is current
            lost = (tree.former.get(src, NodeSet()) | old.reach) - item.reach if old else None
            if lost:  # vnodes it no longer reaches (module doc, "Repair")
                tree.former[src] = lost
            else:
                tree.former.pop(src, None)
            tree.reached(src, item.reach)
            new = old is None
            tree.children[src] = ChildState(item.reach, item.summary, item.rtt, item.bw)
            self.up.add(key)
            if new:
                self.down.add(key)
                self.new_children.setdefault(key, set()).add(src)

    def redirect(self, src: int, m: ChildUpdates) -> None:
        """A child attached to us after we left its tree: re-attach to our parent then
        (module doc, "Repair")."""
        items = [
            self.p.membership.former[i.kind, i.root]
            for i in m.items
            if i.attach and (i.kind, i.root) in self.p.membership.former
        ]
        if items:
            self.p.send(src, Adopt(tuple(items)))

    def on_adopt(self, src: int, m: Adopt) -> None:
        """Our parent ``src`` leaves: move at once, without probing, to the parent it
        names (module doc, "Repair"); at most as many adoptions in a row as there are
        members, so redirects among leavers end."""
        if self.p.state is not State.ACTIVE or src in self.p.departed:
            return
        for item in m.items:
            key = (item.kind, item.root)
            tree = self.p.trees.get(key)
            named = (item.parent, *item.fallback)
            j = next((j for j, p in enumerate(named) if p not in self.p.departed), None)
            if tree is None or tree.parent != src or j is None:
                continue  # moved away meanwhile, or every parent named left: climb (Leaving)
            parent = named[j]
            if parent == self.p.pid or tree.adopted >= len(self.p.members):
                continue
            tree.fallback = named[j + 1 :]
            if tree.old_parent == parent:
                tree.old_parent = None  # back to where we were: no detach
            up = len(tree.path) >= 2 and tree.path[-2] == parent
            tree.path = tree.path[:-1] if up else (*tree.path[:-1], parent)
            tree.parent, tree.estimated = parent, True
            tree.adopted += 1
            tree.rtt += item.rtt  # bounds through the leaver, until the next probe of it
            tree.bw = min(tree.bw, item.bw)
            tree.sent_up = None  # the new parent must hear from us
            self.up.add(key)
            self.down.add(key)
            self.p.prober.renew_after_loss(item.root)  # then improve, as the paper's repair

    def on_parent_updates(self, src: int, m: ParentUpdates) -> None:
        if self.p.state is not State.ACTIVE:
            return
        for pos in m.items:
            key = (pos.kind, pos.root)
            tree = self.p.trees.get(key)
            if tree is None or tree.parent != src:
                continue  # stale: we moved away meanwhile
            self.detach_old(tree)  # the new parent has taken us
            path = (*pos.path, src)
            if self.p.pid in path and self._breaks_cycle(path):
                # crossing moves made a cycle: its highest id leaves it (sec. IV-B repair)
                self.batch_child(src, ChildItem(pos.kind, pos.root, attach=False))
                self.detach_old(tree)
                tree.disconnect()
                self.p.prober.extra_left = self.p.extra_probes  # (not the chain budget)
                self.p.prober.focus = None  # no one left: every tree may do better
            else:
                self._position_from(tree, pos.dist, pos.est, pos.nchildren, path)
            self.down.add(key)

    def _breaks_cycle(self, path: tuple[int, ...]) -> bool:
        """True if we leave the cycle ``path`` shows us in: we have the highest id of
        the ancestors since our last place on it (the cycle as it stands; earlier
        places are older rounds or a stale prefix), or the path is longer than the
        members (a cycle whose highest id does not act: anyone ends it then)."""
        last = len(path) - 1 - path[::-1].index(self.p.pid)
        return self.p.pid == max(path[last:]) or len(path) > len(self.p.members) + 1

    def reach(self, tree: TreeState) -> NodeSet:
        ranges = [r for c in tree.children.values() for r in c.reach.ranges]
        ranges += [r for lent in self.lent.values() for r in lent.ranges]
        return NodeSet(tuple(ranges) + self.p.require_table().mine().ranges)  # one normalisation

    def end_loan(self, joiner: int) -> None:
        """The vnodes handed to ``joiner`` leave our reach: it attached (below us, where
        its reach brings them back), left, or did not attach in time ("Joins")."""
        if self.lent.pop(joiner, None) is not None:
            self.mark_all_up()

    def summary(self, tree: TreeState) -> Summary:
        edges = [Edge(c.rtt, c.bw, c.summary) for c in tree.children.values()]
        if tree.kind == "latency":
            return latency_summary(edges, self.p.send_overhead_s)
        return bandwidth_summary(edges, self.p.prober.lan_bw)

    def ordered_children(self, tree: TreeState) -> list[int]:
        kids = sorted(tree.children)
        return child_order(kids, [tree.children[c].summary.descendants for c in kids])

    def flush(self) -> None:
        """Send the tree updates this event caused (batched per neighbour), then probe."""
        if self.p.state is State.ACTIVE:
            for key in sorted(self.up, key=repr):
                tree = self.p.trees.get(key)
                if tree is None or tree.parent is None:
                    continue
                now = (self.reach(tree), self.summary(tree))
                sent = tree.sent_up
                if sent is None or now[0] != sent[0] or summary_moved(now[1], sent[1]):
                    tree.sent_up = now
                    item = ChildItem(key[0], key[1], True, now[0], now[1], tree.rtt, tree.bw)
                    self.batch_child(tree.parent, item)
            down: dict[int, list[Position]] = {}
            for key in sorted(self.down, key=repr):
                tree = self.p.trees.get(key)
                if tree is None:
                    continue
                pos = tree.position(self.p.pid)
                now = (pos.dist, pos.est, pos.nchildren, pos.path)
                new = self.new_children.get(key, set())
                targets = tree.children if now != tree.sent_down else new
                tree.sent_down = now
                for c in sorted(targets):
                    if c in tree.children:
                        down.setdefault(c, []).append(pos)
            for c, items in sorted(down.items()):
                self.p.send(c, ParentUpdates(tuple(items)))
        for parent, items in sorted(self.child_batch.items()):
            if parent in self.p.members:
                self.p.send(parent, ChildUpdates(tuple(items)))
        self.up.clear()
        self.down.clear()
        self.new_children.clear()
        self.child_batch.clear()
        self.p.prober.maybe_probe()
