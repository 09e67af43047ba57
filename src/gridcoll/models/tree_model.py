"""Seed 000's gamma/lambda evaluated edge by edge on any tree of a heterogeneous grid.

Seed 000 (sec. 3.1.1) models a segmented broadcast down a tree by the time
``T = (k-1) gamma(m) + lam(m)``, where ``lam(m)`` is the time one segment takes to reach
every node and ``gamma(m)`` the interval between consecutive segments. With identical
links it bounds both by the degree ``d`` and height ``h``; here the tree and the links
are arbitrary, so both are computed from the tree itself (the "per-edge model"):

* each node ``v`` sends every segment to its children in order; the send to child ``c``
  keeps ``v`` busy for ``s = max(g_l(m), os_(v,c)(m))``, with ``g_l`` the gap of v's own
  LAN: the ``s_w`` composition of seed 000, sec. 2.1, which is ``g(m)`` on a LAN;
* the segment reaches ``c`` at ``r = L_(v,c) + g_(v,c)(m)`` after the send starts;
* ``lam(m)`` is the latest arrival over all nodes;
* ``gamma(m)`` is the largest of, over edges, ``g_(v,c)(m)`` and, over nodes, the busier
  of the node's two resources per segment: its NIC, ``sum of its sends' s``, and its
  CPU, ``or_in(m) + sum of its sends' os`` (``or_in`` is the receive overhead of the
  edge into the node, 0 at the root). Seed 000 bounds this by ``or(m) + d s(m)``, which
  is the same value when the CPU drives the NIC (``os = g``); with ``or + os <= g`` the
  refinement makes the pipelined chain exact (seed 002, Table 1).

Shared links (our extension, no effect when no two tree edges cross one link, as inside
a cluster or in MagPIe's WAN trees on pair links): a message leaves the sender's gateway
only when every link of its route is free, and occupies each for that link's ``g(m)``,
so it may arrive later than ``r``; and ``gamma(m)`` is at least the total occupancy of
the busiest link, the sum of ``g_link(m)`` over the edges crossing it. Without this a
single-layer tree that sends many copies over one wide-area link would be modelled as
if each copy had a link of its own.

Rendezvous (seed 002, Table 1, used for the rendezvous builders on multi-cluster grids):
every edge additionally pays its handshake ``2 g_(v,c)(1) + 2 L_(v,c)`` before the data.

Evaluation is O(P + E) per segment size: each ordered cluster pair's costs are computed
once per call.

References
----------
Kielmann et al., *Network performance-aware collective communication for clustered
wide area systems* (seed 000), sec. 2.1 and 3.1.1.
"""

from __future__ import annotations

from dataclasses import dataclass

from gridcoll.algorithms.trees import Tree
from gridcoll.network.grid import Grid

__all__ = ["tree_gamma_lambda", "tree_time"]


@dataclass(frozen=True, slots=True)
class _Edge:
    """The costs of one edge (by its ordered cluster pair) at segment size m."""

    s: float  # sender's NIC busy: max(g_l(m), os(m))
    os: float  # sender's CPU busy: os(m)
    r: float  # arrival after the send starts: L + g(m) (+ handshake)
    g: float  # the edge's own gap g(m)
    or_: float  # receive overhead at the child
    links: tuple[tuple[str, float], ...]  # shared links crossed and their g_link(m)


def _edge(grid: Grid, ca: int, cb: int, m: float, rendezvous: bool) -> _Edge:
    """The costs of a message of m bytes from cluster ``ca`` to cluster ``cb``."""
    lan = grid.clusters[ca].lan
    if ca == cb:
        g = lan.g(m)
        s, net, links = max(g, lan.os(m)), lan, ()
    else:
        route = grid.routes[(ca, cb)]
        net = route.plogp
        g = net.g(m)
        s = max(lan.g(m), net.os(m))  # s_w(m) = max(g_l(m), os_w(m)), seed 000 sec. 2.1
        links = tuple((name, grid.links[name].g(m)) for name in route.links)
    r = net.L + g  # r(m) = L + g(m), seed 000 sec. 2.1
    if rendezvous:
        r += 2 * net.g(1) + 2 * net.L  # Table 1's 2 g(1) + 3 L, minus the data's own L
    return _Edge(s, net.os(m), r, g, net.or_(m), links)


EDGE_MEMO_SIZES = 64
"""Segment sizes whose edge costs are kept per grid object (oldest dropped first)."""


def _edge_costs(grid: Grid, m: float, rendezvous: bool) -> dict[tuple[int, int], _Edge]:
    """The :class:`_Edge` of every cluster pair met so far at ``m``, memoised on the
    (immutable) grid object: the tuner evaluates many trees at the same segment sizes
    (``M / 2^i``), and on a grid of single-rank clusters every edge is its own pair."""
    memo = grid.__dict__.setdefault("_tree_edges", {})
    key = (float(m), rendezvous)
    found = memo.get(key)
    if found is None:
        if len(memo) >= EDGE_MEMO_SIZES:
            memo.pop(next(iter(memo)))
        found = memo[key] = {}
    return found


def tree_gamma_lambda(
    grid: Grid, tree: Tree, m: float, *, rendezvous: bool = False
) -> tuple[float, float]:
    """``(gamma(m), lam(m))`` of broadcasting segments of ``m`` bytes down ``tree``.

    Parameters
    ----------
    grid : Grid
        Supplies the P-LogP parameters of every edge (its LAN, or the route between
        the two clusters) and the shared links.
    tree : Tree
        Any rooted tree over ranks of ``grid``; children are served in their order.
    m : float
        The segment size in bytes.
    rendezvous : bool
        Add each edge's handshake ``2 g(1) + 2 L`` (seed 002, Table 1).

    Returns
    -------
    (gamma, lam) : tuple of float
        Seconds. A tree of one node gives ``(0.0, 0.0)``.
    """
    cluster_of, children = grid.cluster_of, tree.children
    costs = _edge_costs(grid, m, rendezvous)  # per ordered cluster pair, filled lazily
    arrival = {tree.root: 0.0}
    or_in = {tree.root: 0.0}  # the root receives nothing
    link_free: dict[str, float] = {}
    link_busy: dict[str, float] = {}
    gamma = 0.0
    for v in tree.nodes():
        start, cv = arrival[v], cluster_of[v]
        nic, cpu = 0.0, or_in[v]
        for c in children.get(v, ()):
            pair = (cv, cluster_of[c])
            edge = costs.get(pair)
            if edge is None:
                edge = costs[pair] = _edge(grid, pair[0], pair[1], m, rendezvous)
            depart = start
            if edge.links:  # wait until every link of the route is free
                depart = max(depart, *(link_free.get(name, 0.0) for name, _ in edge.links))
                for name, g_link in edge.links:
                    link_free[name] = depart + g_link
                    link_busy[name] = link_busy.get(name, 0.0) + g_link
            arrival[c] = depart + edge.r
            or_in[c] = edge.or_
            start += edge.s
            nic += edge.s
            cpu += edge.os
            if edge.g > gamma:
                gamma = edge.g  # the gap of the edge itself
        gamma = max(gamma, nic, cpu)  # the node's busier resource per segment
    if link_busy:
        gamma = max(gamma, max(link_busy.values()))
    return gamma, max(arrival.values())


def tree_time(
    grid: Grid,
    tree: Tree,
    nbytes: int,
    segment_size: int | None = None,
    *,
    rendezvous: bool = False,
) -> float:
    """``T = (k-1) gamma(m) + lam(m)`` for ``nbytes`` in segments of ``segment_size``.

    ``m = min(segment_size, nbytes)`` (``None``: one segment) and ``k = ceil(M/m)``;
    like the papers, every segment is charged as a full ``m`` bytes.
    """
    m = nbytes if segment_size is None else min(segment_size, nbytes)
    k = -(-nbytes // m)
    gamma, lam = tree_gamma_lambda(grid, tree, m, rendezvous=rendezvous)
    return (k - 1) * gamma + lam
