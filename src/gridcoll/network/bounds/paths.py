"""Least latencies along paths between clusters: the latency side of the physical bounds.

A message sent at ``t`` arrives no earlier than ``t + occ(m) + L``, ``occ`` the
occupancy of the message's busiest resource (its tail leaves that resource no earlier
than ``occ`` after its head entered; docs/architecture.md, "Simulator semantics"), and a
rank forwards nothing before it holds it. So a hop costs at least ``w = L + min(os(m),
occ(m))``; on every preset ``occ(1) >= os(1)``, so this is seed 000's ``L + os`` per hop
(P-LogP, sec. 2.1). :class:`Hops` holds ``w`` for every pair of clusters and the least
sums ``D`` along cluster paths; :func:`home_loop` is the least from one rank of a cluster
to another. The latency bounds (:func:`gridcoll.network.bounds.broadcast.latency_bound`,
those of :func:`gridcoll.network.bounds.collectives.collective_bound`) and the windows
of the windowed-cut bound are read off them. Memoised in ``grid.memo``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from gridcoll.network.bounds.flows import MEMO_SIZE, wan_graph
from gridcoll.network.grid import Grid

__all__ = ["Hops", "home_loop", "hops"]


# -- latencies along paths -------------------------------------------------------------
@dataclass(frozen=True, eq=False)
class Hops:
    """Per-hop latencies of one-message hops between clusters at a message size ``m``.

    ``L[a, b]`` is the route's ``L`` (``inf`` on the diagonal); ``w[a, b] = L + min(os(m),
    occ(m))`` with ``occ(m)`` the largest occupancy of the route's resources (a message's
    tail leaves its busiest resource no earlier than that after its head entered, and
    arrives ``L`` later); ``D`` the least sum of ``w`` over cluster paths (0 on the
    diagonal); ``lan_L``, ``lan_w`` the same for one LAN hop (``inf`` on one-rank
    clusters, where no such hop exists)."""

    L: np.ndarray
    w: np.ndarray
    D: np.ndarray
    lan_L: np.ndarray
    lan_w: np.ndarray


def hops(grid: Grid, m: float = 1.0) -> Hops:
    """:class:`Hops` at ``m`` (memoised). Floyd-Warshall on the cluster graph: O(C^3)
    numpy operations, C^2 route evaluations."""
    return grid.memo.get("bounds.hops", m, lambda: _compute_hops(grid, m), maxsize=MEMO_SIZE)


def _compute_hops(grid: Grid, m: float) -> Hops:
    C = grid.nclusters
    lan_g = np.array([c.lan.g(m) for c in grid.clusters])
    lat = np.full((C, C), math.inf)
    w = np.full((C, C), math.inf)
    if C > 1:
        wan = wan_graph(grid)
        by_id: dict[int, float] = {}  # os(m) by function object: routes share them
        os_m = np.array(
            [
                by_id[id(r.plogp.os_fn)]
                if id(r.plogp.os_fn) in by_id
                else by_id.setdefault(id(r.plogp.os_fn), r.plogp.os(m))
                for r in grid.routes.values()
            ]
        )
        occ = np.maximum(lan_g[wan.src], lan_g[wan.dst])
        if len(wan.route_links):
            gs: dict[int, float] = {}
            link_g = np.array(
                [
                    gs[id(link.g)] if id(link.g) in gs else gs.setdefault(id(link.g), link.g(m))
                    for link in grid.links.values()
                ]
            )
            has = np.flatnonzero(np.diff(wan.route_ptr))
            occ[has] = np.maximum(
                occ[has], np.maximum.reduceat(link_g[wan.route_links], wan.route_ptr[has])
            )
        lat[wan.src, wan.dst] = wan.lat
        w[wan.src, wan.dst] = wan.lat + np.minimum(os_m, occ)
    D = w.copy()
    np.fill_diagonal(D, 0.0)
    for k in range(C):
        np.minimum(D, D[:, k : k + 1] + D[k : k + 1, :], out=D)
    lan_L = np.array([c.lan.L if c.nranks > 1 else math.inf for c in grid.clusters])
    lan_w = np.array(
        [
            c.lan.L + min(c.lan.os(m), lan_g[i]) if c.nranks > 1 else math.inf
            for i, c in enumerate(grid.clusters)
        ]
    )
    return Hops(lat, w, D, lan_L, lan_w)


def home_loop(h: Hops, c: int) -> float:
    """The least ``sum w`` from one rank of cluster ``c`` to another rank of it: one LAN
    hop, or out over the wide area and back (``inf`` on a one-rank cluster)."""
    if not math.isfinite(h.lan_w[c]):
        return math.inf
    if len(h.D) == 1:
        return float(h.lan_w[c])
    out = h.D[c] + h.w[:, c]  # to cluster a, then a -> c (a = c: inf)
    return float(min(h.lan_w[c], out.min()))
