"""Phoenix (seed 004): the random probes that find each tree's parents.

Each process measures the network with random probes (seed 004, sec. IV-A): a 1-byte
ping-pong and a 128 KiB download, then an InfoRequest for the prober's position in
every tree; the answers are judged by the rules of :mod:`gridcoll.phoenix.trees`
(:meth:`~gridcoll.phoenix.forest.Forest.judge`). This collaborator of
:class:`~gridcoll.phoenix.protocol.Process` decides whom to probe and when to stop: the
extra probes once every tree has a parent, the chain probes of a LAN gateway, the
sweeps after a loss and the shortcuts of a joiner near its sponsor (module doc of
:mod:`~gridcoll.phoenix.protocol`, "Repair", "Joins", "Probes after a loss").

The coordinator (``p``) is the process: its ``measured`` figures, ``trees``, members,
options, ``send`` and the other collaborators are reached through it.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from gridcoll.phoenix.events import (
    PROBE_BYTES,
    Probe,
    ProbeResult,
)
from gridcoll.phoenix.forest import TreeState
from gridcoll.phoenix.messages import (
    KINDS,
    Info,
    InfoRequest,
    Near,
)
from gridcoll.phoenix.states import State
from gridcoll.phoenix.trees import (
    NEAR_RATIO,
    NOISE_SLACK,
    bandwidth_bar,
    bandwidth_better,
    chained,
    latency_bar,
)

if TYPE_CHECKING:
    from gridcoll.phoenix.protocol import Process


class Prober:
    """Whom to probe, when, and what a probe's answer says (seed 004, sec. IV-A)."""

    def __init__(self, p: Process) -> None:
        self.p = p
        self.probes_made = 0
        self.extra_left = p.extra_probes
        self.chain_left = p.chain_probes
        self.lan_rtt = math.inf
        self.borrow: tuple[int, float, tuple] | None = None  # sponsor, its lan_rtt, measured
        self.lan_bw = 0.0  # the fastest rate measured: the LAN's (trees.bandwidth_offer)
        self.probing: int | None = None
        self.probe_result: ProbeResult | None = None
        self.probe_info: Info | None = None
        self.pinging = False  # the probe under way is pings only (a climbed-to ancestor)
        self.sponsor: int | None = None  # a joiner's first probe: the member it joined by
        self.misses = 0  # probes of measured peers that left a tree without a parent
        self.unmeasured: set[int] = set()  # parents taken on bounds (climb): probe next
        self.recheck: set[int] = set()  # measured faster since (Remeasured): probe again
        self.revisit = False  # after a loss or a join, probe only peers already measured
        self.explored = 0  # random probes among every member (before revisiting)
        self.focus: set[int] | None = None  # roots the probes ask about (None: all)
        self.swept: dict[int, set[int]] = {}  # root: peers asked about it since a loss
        self.moved: set[int] = set()  # roots whose trees moved since a loss
        self.settled = False  # has had a parent in every tree
        self.joined: set[int] = set()  # members that joined since: their trees are new
        self.newcomers: set[int] = set()  # members that joined since we first settled
        self.lan_only = False  # a joiner near its sponsor: probe its LAN ("Joins")
        self.lan_misses = 0  # its probes in a row that gave no orphan tree a parent

    def wants_probe(self) -> bool:
        if self.p.state is not State.ACTIVE or len(self.p.members) < 2:
            return False
        if self.extra_left > 0 or self.recheck or self.unmeasured:
            return True
        if not self._complete():
            return True
        if self._sweep():
            return True
        if self.chain_left <= 0:
            return False
        return bool(self._chain_roots())

    def _chain_roots(self) -> set[int]:
        """The roots of the trees the chain probes are for: latency trees where we are a
        LAN's gateway behind another remote LAN (:func:`~gridcoll.phoenix.trees.chained`)
        and, with the ``remote_probes`` option, trees (either kind) whose parent is
        clearly further than the nearest peer measured (a LAN member hanging on a
        wide-area edge)."""
        return {
            r
            for (kind, r), t in self.p.trees.items()
            if (
                kind == "latency"
                and chained(
                    rtt_parent=t.rtt, dist=t.dist, lan_rtt=self.lan_rtt, lan_known=self.lan_only
                )
            )
            or (self.p.remote_probes and not self._in_lan(t.rtt) and t.rtt < math.inf)
        }

    def maybe_probe(self) -> None:
        if self.probing is not None or not self.wants_probe():
            return
        peer, self.sponsor = self.sponsor, None
        ping = False
        if peer is None and self.unmeasured:  # a parent known only by bounds: measure it
            peer, ping = self.unmeasured.pop(), bool(self.p.measured)
        self.p.membership.lent_nothing &= self.p.members - self.p.measured.keys()
        if peer is None and self.p.membership.lent_nothing:  # a joiner we lent nothing: our LAN?
            peer = min(self.p.membership.lent_nothing)
            self.p.membership.lent_nothing.discard(peer)
        recheck = peer is None and bool(self.recheck)
        if recheck:  # measured faster than we held: judge every tree again
            peer = self.recheck.pop()
        hung: set[int] = set()
        if peer not in self.p.members or peer == self.p.pid:
            sweep = self._sweep()
            peer = self.p.rng.choice(sorted(sweep) or self._probe_candidates())
            # a joiner that borrowed, or a member probing a process that joined since it
            # settled, measures a new peer by pings if it can ("Joins" (3))
            ping = (
                (self.lan_only or peer in self.newcomers)
                and peer not in self.p.measured
                and bool(self.p.measured)
            )
            if sweep:
                hung = sweep[peer]
                for root in hung:
                    self.swept.setdefault(root, set()).add(peer)
        self.probing, self.probe_result, self.probe_info = peer, None, None
        self.probes_made += 1
        self.probe_result = self.p.measured.get(peer) if self.p.remember else None
        self.pinging = ping and self.probe_result is None
        if self.probe_result is None:
            self.p.out.append(Probe(peer, 0 if self.pinging else PROBE_BYTES))
        roots = tuple(sorted(hung or self._wanted(peer, recheck)))
        self.p.send(peer, InfoRequest(roots, self._bars(peer, roots)))

    def _bars(self, peer: int, roots: tuple[int, ...]) -> tuple[tuple[int, float, float], ...]:
        """``InfoRequest.bars`` for a probe of ``peer``: in each tree asked about that has
        a parent other than ``peer`` (whose position replaces bounds,
        :meth:`Forest.judge <gridcoll.phoenix.forest.Forest.judge>`), the worst position
        the rules could take; for a peer already measured (the probe judges with those
        figures), the worst they could take through that link."""
        link = self.p.measured.get(peer) if self.p.remember else None
        rtt, bw_pq = (0.0, None) if link is None else (link.rtt_s, link.bw_Bps)
        bars = []
        for root in roots or sorted({r for _, r in self.p.trees}):
            lat, bw = self.p.trees.get(("latency", root)), self.p.trees.get(("bandwidth", root))
            dist, est = math.inf, -math.inf
            if lat is not None and lat.parent not in (None, peer):
                dist = latency_bar(
                    dist=lat.dist, rtt_parent=lat.rtt, lan_rtt=self.lan_rtt, rtt_cand=rtt
                )
            if bw is not None and bw.parent not in (None, peer):
                est = bandwidth_bar(bw.est, bw_pq, bw.bw)
            if dist < math.inf or est > -math.inf:
                bars.append((root, dist, est))
        return tuple(bars)

    def _sweep(self) -> dict[int, set[int]]:
        """After a loss, the measured peers that could be a better parent in a repaired
        tree we now hang on a remote parent by (a climb, an Adopt or a move across the
        wide area), each with the roots of those trees it was not asked about since
        (``_swept``; a tree that moves starts afresh): the LAN peers, while extra probes
        are left or about trees that moved since the loss (``_moved``); if there are
        none, the remote peers whose measured rate alone beats such a bandwidth tree's
        rate by the hysteresis (an offer is at most that rate,
        :func:`~gridcoll.phoenix.trees.bandwidth_offer`) (module doc, "Probes after a
        loss"). The same sweep ends a round of probes that asked about every tree
        (settling, or a join's), about the trees it left on a remote parent. Empty while
        the probes ask about every tree."""
        if not self.focus:
            return {}
        hung = {
            (kind, r): t
            for (kind, r), t in self.p.trees.items()
            if r in self.focus and t.parent is not None and not self._in_lan(t.rtt)
        }
        if not hung:
            return {}
        peers = {
            p: m for p, m in self.p.measured.items() if p in self.p.members and p != self.p.pid
        }
        roots = {r for _, r in hung}
        if self.extra_left <= 0:  # the LAN again only about trees that moved since
            roots = roots & self.moved
        near = {
            p: {r for r in roots if p not in self.swept.get(r, ())}
            for p, m in peers.items()
            if self._in_lan(m.rtt_s)
        }
        near = {p: rs for p, rs in near.items() if rs}
        if near:
            return near
        bandwidth = [(r, t.est) for (kind, r), t in hung.items() if kind == "bandwidth"]
        remote = {
            p: {
                r
                for r, est in bandwidth
                if bandwidth_better(m.bw_Bps, est) and p not in self.swept.get(r, ())
            }
            for p, m in peers.items()
            if not self._in_lan(m.rtt_s)
        }
        return {p: rs for p, rs in remote.items() if rs}

    def _wanted(self, peer: int, recheck: bool) -> set[int]:
        """The roots whose trees a probe of ``peer`` asks about (none: every tree).
        While only joiners' new trees lack a parent, those ("Joins"). After a loss
        ("Probes after a loss"): of a climbed-to ancestor, the trees we hang on it by; a
        chain probe, the trees it is for; an extra probe, the trees the loss repaired."""
        if not self._complete():
            return self._orphans() if self._joins_only() else set()
        if recheck or self.focus is None:
            return set()
        if hanging := {r for (_, r), t in self.p.trees.items() if t.parent == peer and t.estimated}:
            return hanging
        if self.extra_left <= 0:
            return self._chain_roots()
        return self.focus & self.p.members

    def _probe_candidates(self) -> list[int]:
        """Whom a random probe picks from (module doc, "Repair", "Joins"). With trees we
        have no parent in: their measured roots (a root is in its tree), else peers
        already measured (they may be in it by now), as many times as there are such
        peers, then anyone. With a parent in every tree: every other member, but after
        a loss or a join only those already measured, once we have made ``extra_probes``
        probes among every member ("Probes after a loss"). A measured peer's probe costs one
        InfoRequest; anyone else's a 128 KiB download. A joiner that borrowed its
        sponsor's measurements picks from its LAN among these, if any is there; after
        as many probes in a row as it has measured peers that gave no tree a parent
        (its LAN may not reach one: all of it joined so), it probes those trees' roots."""
        pool = self._probe_pool()
        if not self.lan_only:
            return pool
        if self.lan_misses > len(self.p.measured):
            return sorted(self._orphans() & self.p.members - {self.p.pid}) or pool
        near = [p for p in pool if p in self.p.measured and self._in_lan(self.p.measured[p].rtt_s)]
        return near or pool

    def _probe_pool(self) -> list[int]:
        """:meth:`_probe_candidates` before the joiner's LAN rule."""
        others = self.p.others()
        known = [p for p in others if p in self.p.measured]
        orphans = self._orphans()
        if not orphans:
            self.misses = 0
            if self.revisit and self.explored >= self.p.extra_probes:
                return known or others
            self.explored += 1  # the paper's random probes, once, before any revisit
            return others
        roots = sorted(r for r in orphans if r in self.p.measured)
        if roots:
            return roots
        self.misses += 1
        return known if self.misses <= len(known) else others

    def on_remeasured(self, peer: int, rtt: float, bw: float | None) -> None:
        """A lower RTT for a measured member (module doc, "Trees"): keep it (and a
        higher rate recomputed with it), and probe the peer again (its Info only) so the
        trees are judged with them."""
        old = self.p.measured.get(peer)
        if old is None or peer not in self.p.members or not 0 < rtt < old.rtt_s:
            return
        bw = old.bw_Bps if bw is None else max(bw, old.bw_Bps)
        self.p.measured[peer] = ProbeResult(peer, rtt, bw)
        self.lan_rtt = min(self.lan_rtt, rtt)
        self.recheck.add(peer)
        self._borrow_from_sponsor(peer, rtt)

    def _in_lan(self, rtt: float) -> bool:
        """An RTT within ``NEAR_RATIO`` of the smallest we measured: our LAN's class."""
        return rtt <= NEAR_RATIO * self.lan_rtt

    def on_probe_result(self, event: ProbeResult) -> None:
        if event.peer != self.probing:
            return  # a probe of a process that has left meanwhile
        if self.pinging and math.isfinite(event.rtt_s):  # module doc, "Repair"
            self.pinging = False
            like = self._same_class(event.peer, event.rtt_s)
            if like is None:
                self.p.out.append(Probe(event.peer, PROBE_BYTES))  # nothing to go by: download
                return
            event = ProbeResult(event.peer, event.rtt_s, like.bw_Bps)
        if math.isfinite(event.rtt_s):
            self.p.measured[event.peer] = event
            self._borrow_from_sponsor(event.peer, event.rtt_s)
        if self.p.membership.unannounced is not None:  # not near the sponsor (or it is gone)
            self.p.membership.announce()
        self.probe_result = event
        self._decide()

    def _same_class(self, peer: int, rtt: float) -> ProbeResult | None:
        """The measured peer whose RTT is nearest ``rtt``, if within ``NOISE_SLACK`` of
        it: a peer behind the same links, whose bandwidth ``peer``'s stands for."""
        near = [
            m
            for q, m in self.p.measured.items()
            if q != peer and abs(m.rtt_s - rtt) <= NOISE_SLACK * rtt
        ]
        return min(near, key=lambda m: (abs(m.rtt_s - rtt), m.peer), default=None)

    def _borrow_from_sponsor(self, peer: int, rtt: float) -> None:
        """A joiner measured its sponsor (its first probe, or a faster round trip since:
        ``Remeasured``): if it is in our LAN (an RTT within ``NEAR_RATIO`` of the
        sponsor's own smallest), take what the sponsor measured as ours, and probe only
        measured peers (module doc, "Joins"). Until then the offer stands."""
        if self.borrow is None or peer != self.borrow[0]:
            return
        sponsor, lan_rtt, measured = self.borrow
        if not rtt <= NEAR_RATIO * lan_rtt:
            return
        self.borrow = None
        for q, q_rtt, bw in measured:
            if q != self.p.pid and q not in self.p.measured and q not in self.p.departed:
                self.p.measured[q] = ProbeResult(q, q_rtt, bw)
                self.lan_rtt, self.lan_bw = min(self.lan_rtt, q_rtt), max(self.lan_bw, bw)
        self.revisit = self.lan_only = True
        link = self.p.measured[sponsor]
        near = Near(sponsor, link.rtt_s, link.bw_Bps)
        told = self.p.membership.unannounced or set()
        self.p.membership.announce(near)
        for q in self.p.others():
            if q not in told:
                self.p.send(q, near)

    def on_near(self, src: int, m: Near) -> None:
        """``src`` is in ``m.sponsor``'s LAN: what we measured to the sponsor stands for
        it, so probing it costs one InfoRequest, and its trees start as copies of the
        sponsor's (module doc, "Joins"). The sponsor takes the joiner's figures for the
        link between them: it may have measured none of its LAN (its LAN joined
        through it), and its probes after a join go only to peers it measured."""
        mine = m.sponsor == self.p.pid
        if mine:  # the joiner's figures for our link, if it sent usable ones
            usable = 0 < m.rtt_s < math.inf and m.bw_Bps > 0
            link = ProbeResult(src, m.rtt_s, m.bw_Bps) if usable else None
        else:  # ours for the sponsor
            known = self.p.measured.get(m.sponsor)
            link = None if known is None else ProbeResult(src, known.rtt_s, known.bw_Bps)
        if link is not None and src not in self.p.measured and src in self.p.members:
            self.p.measured[src] = link
            if mine:  # (a member's figures for the sponsor are in its classes already)
                self.lan_rtt = min(self.lan_rtt, link.rtt_s)
                self.lan_bw = max(self.lan_bw, link.bw_Bps)
        if self.p.state is State.ACTIVE:
            self._copy_trees(src, m.sponsor)

    def _copy_trees(self, joiner: int, sponsor: int) -> None:
        """In each of ``joiner``'s trees we have no parent in, take the parent we have
        in ``sponsor``'s tree of that kind; the sponsor takes the joiner. The joiner's
        trees start as its sponsor's, with the joiner above the sponsor (one LAN hop
        more), and need no probe. The hop's figures are those of the sponsor's tree (the
        same hop), the sponsor's the fastest it measured (bounds, ``estimated``); the
        distance and rate are the sponsor tree's plus that LAN hop until the parent
        sends its position."""
        for kind in KINDS:
            tree, model = self.p.trees.get((kind, joiner)), self.p.trees.get((kind, sponsor))
            if tree is None or tree.parent is not None or model is None:
                continue
            if self.p.pid == sponsor:  # below the joiner
                parent, rtt, bw, estimated = joiner, self.lan_rtt, self.lan_bw, True
                path, dist, est = (joiner,), self.lan_rtt, self.lan_bw
            elif model.parent is not None and joiner not in model.path:
                parent, rtt, bw, estimated = model.parent, model.rtt, model.bw, model.estimated
                path, dist, est = (joiner, *model.path), model.dist + self.lan_rtt, model.est
            else:
                continue
            tree.parent, tree.rtt, tree.bw, tree.estimated = parent, rtt, bw, estimated
            tree.path, tree.dist, tree.est = path, dist, est
            tree.sent_up = None  # the parent must hear from us
            self.p.forest.up.add((kind, joiner))
            self.p.forest.down.add((kind, joiner))

    def on_info_request(self, src: int, m: InfoRequest) -> None:
        wanted, bars = set(m.roots), {root: (dist, est) for root, dist, est in m.bars}
        positions = tuple(
            t.position(self.p.pid)
            for t in self.p.trees.values()
            if (not wanted or t.root in wanted) and not self._barred(t, bars.get(t.root))
        )
        leaving = self.p.state is not State.ACTIVE
        self.p.send(src, Info(positions, leaving))

    @staticmethod
    def _barred(tree: TreeState, bar: tuple[float, float] | None) -> bool:
        """Whether a prober's bar (``InfoRequest.bars``) leaves out our position."""
        if bar is None:
            return False
        dist, est = bar
        return tree.dist >= dist if tree.kind == "latency" else tree.est <= est

    def on_info(self, src: int, m: Info) -> None:
        if src in self.p.departed:
            return
        if src != self.probing:
            return
        self.probe_info = m
        self._decide()

    def _decide(self) -> None:
        result, info = self.probe_result, self.probe_info
        if result is None or info is None:
            return
        self.probing = None
        complete, joins, orphans = self._complete(), self._joins_only(), len(self._orphans())
        if self.p.state is State.ACTIVE and not info.leaving and math.isfinite(result.rtt_s):
            self.lan_rtt = min(self.lan_rtt, result.rtt_s)
            self.lan_bw = max(self.lan_bw, result.bw_Bps)
            for pos in info.positions:
                tree = self.p.trees.get((pos.kind, pos.root))
                if tree is not None and tree.root != self.p.pid:
                    self.p.forest.judge(tree, result.peer, pos, result.rtt_s, result.bw_Bps)
        if self.lan_only:
            stuck = orphans and len(self._orphans()) == orphans
            self.lan_misses = self.lan_misses + 1 if stuck else 0
        if not complete and self._complete() and (joins or not self.settled):
            # probed until a parent in every tree new to us: then the extra probes (IV-A)
            self.extra_left, self.chain_left = self.p.extra_probes, self.p.chain_probes
            self.focus = None  # of every tree (a joiner may be a better parent anywhere)
        elif complete and self.extra_left > 0:
            self.extra_left -= 1
        elif complete and self.chain_left > 0:
            self.chain_left -= 1
        if self.focus is None and not self.wants_probe():
            # the end of a round that asked about every tree: sweep those we hang on a
            # remote parent by, as after a loss ("Probes after a loss")
            roots = self._remote_roots()
            self.focus, self.moved, self.swept = roots, set(roots), {}
        if not self.wants_probe():
            self.focus = set()  # the next loss's probes ask about the trees it repairs
            self.swept, self.moved = {}, set()
        if self._complete():
            self.settled, self.joined = True, set()

    def _remote_roots(self) -> set[int]:
        """The roots of the trees we hang on a parent outside our LAN class by."""
        return {
            r
            for (_, r), t in self.p.trees.items()
            if t.parent is not None and not self._in_lan(t.rtt)
        }

    def _orphans(self) -> set[int]:
        """The roots of the trees we have no parent in (but our own)."""
        return {r for (_, r), t in self.p.trees.items() if t.parent is None} - {self.p.pid}

    def _complete(self) -> bool:
        """Whether we have a parent in every tree but our own."""
        return not self._orphans()

    def _joins_only(self) -> bool:
        """Whether every tree we have no parent in is a new tree of a member that joined
        since we first had a parent everywhere (true when there is none)."""
        return self._orphans() <= self.joined

    def renew_after_loss(self, root: int, chain: bool = False) -> None:
        """A tree of ``root`` lost its parent: renew the extra probes (sec. IV-A's
        repair; with ``chain``, the chain probes too), to peers already measured, asking
        about the trees repaired since only (module doc, "Probes after a loss")."""
        self.extra_left = self.p.extra_probes
        if chain:
            self.chain_left = self.p.chain_probes
        self.revisit = self.revisit or bool(self.p.measured)
        if self.focus is not None:  # (None: probes under way for every tree go on so)
            self.focus.add(root)
