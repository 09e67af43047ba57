"""Phoenix (seed 004): the spanning-tree rules as pure functions (sec. IV-B, IV-C, IV-D, VI).

A process that probed a candidate ``cand`` (a 1-byte ping-pong for ``rtt``, a 128 KiB
download for ``bw``) and learnt cand's place in a tree (its distance to the root, its
estimated rate, its number of children) decides here, with no state of its own, whether
cand is a better parent. :mod:`gridcoll.phoenix.protocol` keeps the state and calls
these functions for each of its trees.

Latency-aware tree (sec. IV-B) and how Property I is made to hold
-------------------------------------------------------------------
The paper moves p below cand when (I) ``RTT_p,cand < RTT_p,parent`` and
(II) ``dist_cand < dist_p``. With noisy measurements and only 10 extra probes this
leaves many wide-area edges: two processes of one LAN that both hang directly below
a remote parent have equal distances up to the noise, so condition II holds between
them only half the time, and a LAN whose first parent was chained through a third LAN
keeps it because condition I forbids a move to a parent with a larger RTT even when it
is much nearer the root. :func:`latency_better` therefore takes the paper's rule and
adds two rules that compare routes, not single hops, with tolerances relative to the
RTTs involved:

* ``via = dist_cand + RTT_p,cand + o * n_children(cand)`` is p's distance through cand,
  the forwarding overhead counted as the paper's future work asks (sec. VI): cand sends
  to its existing children first, each costing a send overhead ``o``.
* ``slack(x) = NOISE_SLACK * x + LAN_HOPS * lan_rtt``, ``lan_rtt`` the smallest RTT p
  ever measured: what measurement noise on an RTT ``x`` (our probes' noise is a few
  percent) and a few LAN hops can account for. A chained route through a third LAN is
  longer than the direct one by a whole wide-area RTT less a triangle's slack (2 ms
  or more on DAS-2's 3-8 ms RTTs), well above ``slack``.
* **Rule N (nearer class, Property I).** If cand is in a strictly nearer latency class
  than p's parent (``NEAR_RATIO * RTT_p,cand < RTT_p,parent``: a LAN neighbour against
  a remote parent), p moves when ``via < dist_p + slack(RTT_p,parent)``. A LAN
  neighbour whose own route to the root is as good as p's, up to the noise and a few
  LAN hops, is preferred to the remote parent (the paper's condition II alone
  refuses it half the time, on noise); one whose route is chained through another
  LAN is not. Each such move replaces a wide-area edge by a LAN edge and cannot be
  undone by rule N, so the wide-area edges into a LAN fall to one once each of its
  processes has probed a LAN member outside its own subtree.
* **Rule S (shortcut, no chained WAN latencies).** If p's parent or cand is remote
  (RTT above ``NEAR_RATIO * lan_rtt``), p moves when
  ``via < dist_p - slack(max(RTT_p,cand, RTT_p,parent))``. A LAN's gateway hanging
  below a LAN that is itself remote from the root moves straight below the root's LAN
  when that is clearly shorter, even if the single hop is longer (which condition I
  alone forbids); and any member of a LAN whose whole subtree hangs on a chained route
  may become the LAN's new, direct gateway, after which rule N pulls the rest of its
  LAN below it. A LAN already reached directly is never split up: there the saving is
  at most a few LAN hops and the noise, which ``slack`` covers.
* **Rule P (the paper's, Property II).** ``RTT_p,cand < RTT_p,parent`` and
  ``dist_cand < dist_p``, and also ``via < dist_p + slack(RTT_p,parent)``. The last
  clause never binds inside a LAN (there ``via`` exceeds ``dist_cand`` by one LAN
  RTT), but between LANs it refuses the paper's move onto a remote parent with a
  smaller RTT that is itself behind another remote LAN (on DAS-2, a Leiden process
  would otherwise swap a direct 5 ms edge to VU for a 4 ms edge to a UvA process that
  is 3 ms from VU: chained, and 2 ms longer). Inside a LAN only rule P fires (rule S
  needs a remote parent or candidate; rule N a candidate twice as near), so the LAN
  part of the tree keeps the paper's random shape, neither a chain nor a star
  (sec. IV-B's argument: Property II).

Bandwidth-aware tree (sec. IV-C)
--------------------------------
``est_p,cand = min(est_cand, bw_p2p / n_children)`` with ``n_children`` counting p among
cand's children; p moves when that beats ``est_p,parent`` by :data:`BW_HYSTERESIS`
(a relative margin so measurement noise does not make processes flap). Two additions:

* **Which rate the children share** (:func:`bandwidth_offer`). ``bw_p2p / n_children``
  takes cand's children to share the rate p measured to cand. They share cand's network
  interface, whose rate is its LAN's; a wide-area hop's measured rate is the wide-area
  link's, which cand's LAN children do not load. So with ``lan_bw`` the fastest rate p
  has measured (its own LAN's; the LANs are taken alike),
  ``est_p,cand = min(est_cand, bw_p2p, max(bw_p2p, lan_bw) / n_children)``: the paper's
  formula for a LAN hop (``bw_p2p = lan_bw``), and for a wide-area hop the link's rate
  unless cand fans out to so many children that its interface is slower. With the
  paper's formula alone a LAN's gateway below a remote process with five LAN children
  sees a sixth of the wide-area rate, and the stable tree needs every wide-area edge to
  hang from a leaf; repairs break that: in fig. 9's leave (``das2-spread:64,4``,
  simulated, seed 0) adoptions gave one process of cluster 2 three children in cluster
  1, each then rated at a third of the 0.75 MB/s link or less, and at 160 processes the
  broadcasts after the leave stayed 1.3x slower. :func:`bandwidth_summary` counts hops
  the same way.
* **Property I for the bandwidth tree** (:func:`bandwidth_better`, ``remote``). A
  process whose parent is in a faster class (a LAN neighbour) moves to a remote
  candidate (its rate ``NEAR_RATIO`` times slower) only for ``NEAR_RATIO`` times its
  rate. Below a LAN's gateway every process's rate is the gateway's wide-area rate, up
  to the noise and the LAN's fan-out; a second wide-area edge into the LAN offers the
  same figure, but its flow would share the wide-area link with the gateway's, which
  ``est`` cannot see, and halve both. A better link into the LAN is taken by its
  gateway (whose parent is remote, so the paper's rule applies), and the LAN follows by
  the nearer-class rule. After fig. 9's rejoin on ``das2-spread:64,4`` (simulated,
  seed 0, without this rule) members of cluster 2 left their LAN parents for processes
  of cluster 0 that had just joined, and the 0 -> 2 link carried five of root 0's
  flows at once.

Model for the switch-over and the segment size (sec. IV-D, "ultimately ... use the measured values")
------------------------------------------------------------------------------------------------------
Each node summarises its subtree (:class:`Summary`) from what its children report and
what it measured to them, and the root decides from its own summaries alone:

* latency tree, store and forward (:func:`latency_summary`): ``T_lat(M) = a + b M``,
  the whole message forwarded child after child (``b`` adds ``1 / bw`` per earlier
  sibling and hop);
* bandwidth tree, pipelined (:func:`bandwidth_summary`, sec. IV-D: "long messages are
  pipelined along the spanning trees"): the message is cut into ``n = ceil(M / s)``
  segments; a node forwards each to its children as soon as it has it. ``b`` is the
  steady-state time per byte, the narrowest ``n_children / bw`` on any path (sec.
  IV-C's ``est``); ``f`` (``path_b``) the time per byte of one segment to the deepest
  descendant (the sum of ``n_children / bw`` along the path: the pipeline's fill);
  ``d`` the depth. With ``c`` the fixed cost of one segment message (per-message
  overhead and header), :func:`pipelined_time` is the classic pipeline model::

      T_bw(M, s) = a + d c + s f + (ceil(M / s) - 1) (s b + c)

  minimal, for continuous ``n``, at ``s* = sqrt(M c / (f - b))`` (set ``dT/ds = 0``
  in ``a + d c + s (f - b) + M b + c (M / s - 1)``; the same square-root law as the
  segment size of a pipelined chain in the Hockney model, e.g. Pjesivac-Grbovic et
  al., "Performance analysis of MPI collective operations", 2007, sec. 3).
  :func:`segment_size` takes ``s*``, clamped to ``[MIN_SEGMENT, MAX_SEGMENT]``
  (:data:`MAX_SEGMENT` is the bandwidth probe's size: the rates were measured with
  messages that large, and say nothing of larger ones, e.g. a rendezvous protocol),
  and evens the segments out (``s = ceil(M / n)``). A one-hop tree (``f = b``) gains
  nothing from cutting and sends one segment up to ``MAX_SEGMENT``.

The root broadcasts on the tree with the smaller prediction (:func:`choose_tree`,
``T_lat(M)`` against ``T_bw(M, segment_size(M))``), in place of the paper's fixed
256 KB. Short messages always go in one segment (``M <= MIN_SEGMENT``). In the
simulator (:mod:`gridcoll.simulate.phoenix`, seed 0, once settled) the root of
``das2-spread:137,4`` picks the latency tree below 32,769 bytes and the bandwidth tree
from there (``gridcoll phoenix --experiment bandwidth --json``: ``switch_nbytes``); its
64 MiB broadcast goes in 1,166 segments and takes 89.6 s.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import astuple, dataclass

__all__ = [
    "BW_HYSTERESIS",
    "CHAIN_RATIO",
    "LAN_HOPS",
    "MAX_SEGMENT",
    "MIN_SEGMENT",
    "NEAR_RATIO",
    "NOISE_SLACK",
    "Edge",
    "Summary",
    "bandwidth_bar",
    "bandwidth_better",
    "bandwidth_offer",
    "bandwidth_summary",
    "chained",
    "child_order",
    "choose_tree",
    "latency_bar",
    "latency_better",
    "latency_summary",
    "pipelined_time",
    "segment_size",
    "summary_moved",
]

NEAR_RATIO = 2.0
"""A candidate is in a nearer latency class when its RTT is this many times smaller."""

NOISE_SLACK = 0.1
"""``slack``: the relative measurement noise a distance comparison forgives."""

LAN_HOPS = 8
"""``slack``: the LAN hops a distance comparison forgives (in units of ``lan_rtt``)."""

CHAIN_RATIO = 10.0
""":func:`chained`: a parent hop within this factor of the parent's own distance is
taken as remote when no LAN peer has been measured."""

BW_HYSTERESIS = 0.05
"""Bandwidth tree: a candidate must offer this much more (relative) to be taken."""

MIN_SEGMENT = 16 * 1024
"""The smallest pipelined segment (bytes); a broadcast this short is one segment."""

MAX_SEGMENT = 128 * 1024
"""The largest pipelined segment: the bandwidth probe's size (sec. IV-A), the largest
message the measured rates speak for."""


def _lan(lan_rtt: float, remote: float) -> float:
    """``lan_rtt`` if it is a LAN RTT below ``remote``; 0 if p has not measured any
    peer clearly nearer than ``remote`` (its smallest RTT is then a remote one, and
    forgiving "LAN hops" of that size would forgive whole wide-area hops)."""
    return lan_rtt if math.isfinite(lan_rtt) and NEAR_RATIO * lan_rtt < remote else 0.0


def _slack(x: float, lan: float) -> float:
    """``slack(x)``: what a distance comparison forgives, the noise of a measured RTT
    ``x`` (``NOISE_SLACK``) plus ``LAN_HOPS`` LAN hops of ``lan``."""
    return NOISE_SLACK * x + LAN_HOPS * lan


def latency_better(
    *,
    rtt_cand: float,
    cand_dist: float,
    cand_children: int,
    rtt_parent: float,
    dist: float,
    lan_rtt: float,
    overhead: float = 0.0,
) -> bool:
    """True if p should move below cand in a latency-aware tree (rules P, N, S above).

    ``cand_children`` counts cand's children without p; ``lan_rtt`` is the smallest RTT
    p has measured; ``overhead`` the per-child send overhead ``o``.
    """
    if not math.isfinite(cand_dist) or not math.isfinite(rtt_cand):
        return False
    if not math.isfinite(dist) or not math.isfinite(rtt_parent):
        return True  # any parent connected to the tree beats none (sec. IV-B)
    via = cand_dist + rtt_cand + overhead * cand_children
    lan = _lan(lan_rtt, max(rtt_cand, rtt_parent))
    if NEAR_RATIO * rtt_cand < rtt_parent and via < dist + _slack(rtt_parent, lan):
        return True  # rule N
    remote = max(rtt_cand, rtt_parent)
    if remote > NEAR_RATIO * lan_rtt and via < dist - _slack(remote, lan):
        return True  # rule S
    # rule P: the paper's I and II, but never onto a route longer by more than slack
    return rtt_cand < rtt_parent and cand_dist < dist and via < dist + _slack(rtt_parent, lan)


def chained(*, rtt_parent: float, dist: float, lan_rtt: float, lan_known: bool = False) -> bool:
    """True if p's parent is remote and is itself further than ``slack`` from the root:
    p is the gateway of a LAN reached through another remote LAN (Property I broken,
    as p can see it alone). The protocol keeps probing while this holds.

    ``lan_known``: ``lan_rtt`` is known to be a LAN RTT (a joiner that took its LAN's
    figures from its sponsor), so a parent within ``NEAR_RATIO`` of it is in p's LAN,
    and not remote: without it, a parent as near as the nearest peer p measured may be
    a remote one (p measured no LAN peer yet), and a hop comparable to the parent's own
    distance counts as remote. On fig. 9's rejoin simulated on ``das2-spread:32,4``, the
    16 joiners made 820 chain probes for trees whose root was a few LAN hops away."""
    if not (math.isfinite(rtt_parent) and math.isfinite(dist)):
        return False
    if lan_known and rtt_parent <= NEAR_RATIO * lan_rtt:
        return False
    lan = _lan(lan_rtt, rtt_parent)
    above = dist - rtt_parent  # the parent's own distance to the root
    if above <= _slack(rtt_parent, lan):
        return False
    # The parent is remote: clearly further than the nearest peer measured, or, when
    # no LAN peer has been measured yet (lan_rtt is then itself a remote RTT), a hop
    # comparable to the parent's own distance (a LAN hop is far below a WAN distance).
    return rtt_parent > NEAR_RATIO * lan_rtt or CHAIN_RATIO * rtt_parent >= above


def latency_bar(*, dist: float, rtt_parent: float, lan_rtt: float, rtt_cand: float = 0.0) -> float:
    """The candidate distance from which :func:`latency_better` is false whatever the
    candidate's children: every rule needs ``via < dist + slack(rtt_parent)`` or less,
    and ``via >= cand_dist + rtt_cand``. ``rtt_cand``: what p measured to the candidate,
    if it did (0: any). A prober sends it so that a peer leaves out the positions that
    cannot win (``InfoRequest.bars``). Infinite without a measured parent.
    """
    if not (math.isfinite(dist) and math.isfinite(rtt_parent)):
        return math.inf
    lan = lan_rtt if math.isfinite(lan_rtt) else 0.0  # the most _lan can give
    return dist + _slack(rtt_parent, lan) - rtt_cand


def bandwidth_offer(est_cand: float, bw: float, n_children: int, lan_bw: float = 0.0) -> float:
    """``est_p,cand = min(est_cand, bw, max(bw, lan_bw) / n_children)``, n_children
    counting p: sec. IV-C's ``min(est_cand, bw / n_children)`` with the children sharing
    cand's interface (``lan_bw``, the fastest rate p measured), not a wide-area link's
    rate (module doc). ``lan_bw <= bw`` (a LAN hop, or nothing faster known) gives the
    paper's formula."""
    if n_children < 1:
        raise ValueError(f"n_children counts p itself, so it is >= 1, got {n_children!r}")
    return min(est_cand, bw, max(bw, lan_bw) / n_children)


def bandwidth_class(bw: float, parent_bw: float) -> tuple[bool, bool]:
    """``(nearer, remote)`` for :func:`bandwidth_better`: a candidate p measured at
    ``bw`` against a parent measured at ``parent_bw``, ``NEAR_RATIO`` times faster, or
    ``NEAR_RATIO`` times slower."""
    return bw > NEAR_RATIO * parent_bw, NEAR_RATIO * bw < parent_bw


def _bandwidth_need(current: float, nearer: bool, remote: bool) -> float:
    """The offer :func:`bandwidth_better` must exceed."""
    if nearer:
        return current * (1 - NOISE_SLACK)
    if remote:
        return current * NEAR_RATIO
    return current * (1 + BW_HYSTERESIS)


def bandwidth_better(
    offer: float, current: float, *, nearer: bool = False, remote: bool = False
) -> bool:
    """True if an offered rate beats the current ``est_p,parent`` by the hysteresis, or,
    for a candidate in a nearer bandwidth class (``nearer``: its point-to-point
    bandwidth ``NEAR_RATIO`` times the parent's), if it is no worse than the noise
    (``NOISE_SLACK``). Below a wide-area bottleneck a LAN neighbour offers the same
    rate as the remote parent, and taking it spares the wide-area link a branch
    (sec. IV-C, property II: few branches). A candidate in a farther class
    (``remote``: the parent's bandwidth ``NEAR_RATIO`` times its own) must offer
    ``NEAR_RATIO`` times the current rate (module doc, Property I for the bandwidth
    tree)."""
    return offer > _bandwidth_need(current, nearer, remote)


def bandwidth_bar(current: float, bw: float | None = None, parent_bw: float = 0.0) -> float:
    """The candidate rate at or below which :func:`bandwidth_better` is false for every
    offer it can make: the :func:`latency_bar` of the bandwidth tree. An offer is at
    most ``est_cand``; without ``bw`` the loosest test, a nearer candidate's, needs more
    than ``current * (1 - NOISE_SLACK)``. With ``bw``, the rate p measured to the
    candidate, and ``parent_bw``, to its parent, the candidate's class is known and its
    own test's threshold is the bar, infinite if ``bw`` itself (an offer is at most
    ``bw``) cannot pass it."""
    if bw is None:
        return _bandwidth_need(current, nearer=True, remote=False)
    need = _bandwidth_need(current, *bandwidth_class(bw, parent_bw))
    return need if bw > need else math.inf


def summary_moved(new: Summary, old: Summary) -> bool:
    """True if a subtree's summary moved far enough from ``old``, the one last reported
    to the parent, for the parent to hear ``new``: a figure (``a``, ``b``, ``path_b``,
    the depth, the descendant count) changed by more than ``NOISE_SLACK`` of itself.
    The figures come from measurements of that noise, and the count only orders
    children (:func:`child_order`); reporting every change sends one update to the
    root in every tree per member that joins below (module doc of
    :mod:`gridcoll.phoenix.protocol`, "Joins")."""

    def far(x: float, y: float) -> bool:
        if x == y:
            return False
        if not (math.isfinite(x) and math.isfinite(y)):
            return True
        return abs(x - y) > NOISE_SLACK * max(abs(x), abs(y))

    return any(far(x, y) for x, y in zip(astuple(new), astuple(old), strict=True))


def child_order(children: Sequence[int], descendants: Sequence[int]) -> list[int]:
    """Children most-descendants-first, ties by id (sec. VI: overlap more communication)."""
    return [
        c for _, c in sorted(zip(descendants, children, strict=True), key=lambda t: (-t[0], t[1]))
    ]


@dataclass(frozen=True, slots=True)
class Summary:
    """A subtree's predicted completion time ``a + b m`` for an m-byte message, and its
    number of descendants; for a pipelined (bandwidth) tree also the fill's time per
    byte ``path_b`` and the depth (module doc, "Model")."""

    a: float = 0.0
    b: float = 0.0
    descendants: int = 0
    path_b: float = 0.0
    depth: int = 0

    def time(self, nbytes: int) -> float:
        return self.a + self.b * nbytes


@dataclass(frozen=True, slots=True)
class Edge:
    """What a parent knows of one child: the child's measured RTT and bandwidth to it
    and the child's own summary."""

    rtt: float
    bw: float
    below: Summary


def latency_summary(edges: Sequence[Edge], overhead: float = 0.0) -> Summary:
    """Store-and-forward: the i-th child (most descendants first) gets the message
    after the i previous sends, each ``o + m / bw`` (sec. IV-D, VI)."""
    order = sorted(edges, key=lambda e: -e.below.descendants)
    a = b = 0.0
    per_byte = 0.0
    for i, e in enumerate(order):
        per_byte += 1.0 / e.bw if e.bw > 0 else math.inf
        a = max(a, (i + 1) * overhead + e.rtt / 2 + e.below.a)
        b = max(b, per_byte + e.below.b)
    return Summary(a, b, sum(1 + e.below.descendants for e in edges))


def bandwidth_summary(edges: Sequence[Edge], lan_bw: float = 0.0) -> Summary:
    """Pipelined: the rate is the narrowest hop offer on any path (sec. IV-C,
    :func:`bandwidth_offer`: ``min(bw, max(bw, lan_bw) / n_children)``); one segment's
    fill adds a hop's time per byte along the path (module doc)."""
    a = b = path_b = 0.0
    depth = 0
    k = len(edges)
    for e in edges:
        hop = 1 / bandwidth_offer(math.inf, e.bw, k, lan_bw) if e.bw > 0 else math.inf
        a = max(a, e.rtt / 2 + e.below.a)
        b = max(b, hop, e.below.b)
        path_b = max(path_b, hop + max(e.below.path_b, e.below.b))
        depth = max(depth, 1 + e.below.depth)
    return Summary(a, b, sum(1 + e.below.descendants for e in edges), path_b, depth)


def segment_size(summary: Summary, nbytes: int, cost_s: float) -> int:
    """The model's segment size for an ``nbytes`` broadcast pipelined on a tree with
    this (bandwidth) summary, ``cost_s`` the fixed cost of one segment message:
    ``s* = sqrt(M c / (f - b))`` clamped to ``[MIN_SEGMENT, MAX_SEGMENT]``, evened out
    over ``ceil(M / s*)`` segments (module doc, "Model"). ``nbytes`` itself (one
    segment) when ``nbytes <= MIN_SEGMENT``."""
    if nbytes <= MIN_SEGMENT:
        return max(nbytes, 0)
    fill = max(summary.path_b, summary.b) - summary.b
    if fill > 0 and math.isfinite(fill) and cost_s > 0:
        s = math.sqrt(nbytes * cost_s / fill)
    elif fill > 0 and math.isfinite(fill):
        s = MIN_SEGMENT  # free segments: as fine as allowed
    else:
        s = MAX_SEGMENT  # one hop, or nothing known: cutting gains nothing
    s = min(max(s, MIN_SEGMENT), MAX_SEGMENT, nbytes)
    n = math.ceil(nbytes / s)
    return math.ceil(nbytes / n)


def pipelined_time(summary: Summary, nbytes: int, segment: int, cost_s: float) -> float:
    """``T_bw(M, s) = a + d c + s f + (ceil(M / s) - 1) (s b + c)`` (module doc)."""
    if nbytes <= 0 or segment <= 0:
        return summary.a + summary.depth * cost_s
    n = math.ceil(nbytes / segment)
    s = min(segment, nbytes)
    fill = max(summary.path_b, summary.b)
    return summary.a + summary.depth * cost_s + s * fill + (n - 1) * (s * summary.b + cost_s)


def choose_tree(latency: Summary, bandwidth: Summary, nbytes: int, cost_s: float = 0.0) -> str:
    """``"latency"`` or ``"bandwidth"``: the tree the model predicts is faster, the
    latency tree store and forward, the bandwidth tree pipelined with the segment size
    of :func:`segment_size` (module doc, "Model")."""
    s = segment_size(bandwidth, nbytes, cost_s)
    t_bw = pipelined_time(bandwidth, nbytes, s, cost_s)
    return "bandwidth" if t_bw < latency.time(nbytes) else "latency"
