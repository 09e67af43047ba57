"""The spanning-tree rules of seed 004 as pure functions (sec. IV-B, IV-C, IV-D, VI).

A process that probed a candidate ``cand`` (a 1-byte ping-pong for ``rtt``, a 128 KiB
download for ``bw``) and learnt cand's place in a tree (its distance to the root, its
estimated rate, its number of children) decides here, with no state of its own, whether
cand is a better parent. :mod:`gridcoll.dynamic.protocol` keeps the state and calls
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
* **Rule N (nearer class, Property I).** If cand is in a strictly nearer latency class
  than p's parent (``NEAR_RATIO * RTT_p,cand < RTT_p,parent``: a LAN neighbour against
  a remote parent), p moves when ``via < dist_p + NEAR_TOLERANCE * RTT_p,parent``. A
  LAN neighbour whose own route to the root is no worse than p's (up to half a
  wide-area RTT: the measurement noise and a few LAN hops) is preferred to the remote
  parent; one whose route is chained through another LAN (worse by a whole wide-area
  RTT) is not. Each move replaces a wide-area edge by a LAN edge and the move cannot
  be undone by rule N (the parent is now in the nearest class), so the wide-area
  edges into a LAN fall to one per LAN once every process has probed one LAN member
  outside its own subtree.
* **Rule S (shortcut, no chained WAN latencies).** If p's parent is remote
  (``RTT_p,parent > NEAR_RATIO * lan_rtt``, ``lan_rtt`` the smallest RTT p ever
  measured), p moves when ``via < dist_p - SHORTCUT_MARGIN * RTT_p,parent``: a LAN's
  gateway hanging below a LAN that is itself remote from the root moves straight
  below the root's LAN when that saves at least half a wide-area RTT, even if the
  single hop is longer (which condition I alone forbids).
* **Rule P (the paper's, Property II).** ``RTT_p,cand < RTT_p,parent`` and
  ``dist_cand < dist_p``. Inside a LAN this is the only rule that fires (rule S needs a
  remote parent; rule N a candidate twice as near), so the LAN part of the tree keeps
  the paper's random shape, neither a chain nor a star (sec. IV-B's argument).

Bandwidth-aware tree (sec. IV-C)
--------------------------------
``est_p,cand = min(est_cand, bw_p2p / n_children)`` with ``n_children`` counting p among
cand's children; p moves when that beats ``est_p,parent`` by :data:`BW_HYSTERESIS`
(a relative margin so measurement noise does not make processes flap).

Model for the switch-over (sec. IV-D, "ultimately ... use the measured values")
---------------------------------------------------------------------------------
Each node summarises its subtree as ``T(m) = a + b m``, the predicted time for an
``m``-byte message to reach its last descendant: :func:`latency_summary` (whole
messages forwarded child after child) and :func:`bandwidth_summary` (pipelined, the
rate the narrowest of ``bw / n_children`` along any path). The root broadcasts on the
tree with the smaller prediction (:func:`choose_tree`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = [
    "BW_HYSTERESIS",
    "NEAR_RATIO",
    "NEAR_TOLERANCE",
    "SHORTCUT_MARGIN",
    "Edge",
    "Summary",
    "bandwidth_better",
    "bandwidth_offer",
    "bandwidth_summary",
    "child_order",
    "choose_tree",
    "latency_better",
    "latency_summary",
]

NEAR_RATIO = 2.0
"""A candidate is in a nearer latency class when its RTT is this many times smaller."""

NEAR_TOLERANCE = 0.5
"""Rule N: a nearer candidate may lengthen p's route by this fraction of RTT_p,parent."""

SHORTCUT_MARGIN = 0.5
"""Rule S: a remote-parented p moves when this fraction of RTT_p,parent is saved."""

BW_HYSTERESIS = 0.05
"""Bandwidth tree: a candidate must offer this much more (relative) to be taken."""


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
    if NEAR_RATIO * rtt_cand < rtt_parent and via < dist + NEAR_TOLERANCE * rtt_parent:
        return True  # rule N
    if rtt_parent > NEAR_RATIO * lan_rtt and via < dist - SHORTCUT_MARGIN * rtt_parent:
        return True  # rule S
    return rtt_cand < rtt_parent and cand_dist < dist  # rule P (the paper's I and II)


def bandwidth_offer(est_cand: float, bw: float, n_children: int) -> float:
    """``est_p,cand = min(est_cand, bw / n_children)``, n_children counting p (sec. IV-C)."""
    if n_children < 1:
        raise ValueError(f"n_children counts p itself, so it is >= 1, got {n_children!r}")
    return min(est_cand, bw / n_children)


def bandwidth_better(offer: float, current: float) -> bool:
    """True if an offered rate beats the current ``est_p,parent`` by the hysteresis."""
    return offer > current * (1 + BW_HYSTERESIS)


def child_order(children: Sequence[int], descendants: Sequence[int]) -> list[int]:
    """Children most-descendants-first, ties by id (sec. VI: overlap more communication)."""
    return [c for _, c in sorted(zip(descendants, children, strict=True), key=lambda t: (-t[0], t[1]))]


@dataclass(frozen=True, slots=True)
class Summary:
    """A subtree's predicted completion time ``a + b m`` for an m-byte message, and its
    number of descendants."""

    a: float = 0.0
    b: float = 0.0
    descendants: int = 0

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


def bandwidth_summary(edges: Sequence[Edge]) -> Summary:
    """Pipelined: the rate is the narrowest ``bw / n_children`` on any path (sec. IV-C)."""
    a = b = 0.0
    k = len(edges)
    for e in edges:
        a = max(a, e.rtt / 2 + e.below.a)
        b = max(b, (k / e.bw if e.bw > 0 else math.inf), e.below.b)
    return Summary(a, b, sum(1 + e.below.descendants for e in edges))


def choose_tree(latency: Summary, bandwidth: Summary, nbytes: int) -> str:
    """``"latency"`` or ``"bandwidth"``: the tree the model predicts is faster."""
    return "bandwidth" if bandwidth.time(nbytes) < latency.time(nbytes) else "latency"
