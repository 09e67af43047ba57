"""Closed-form P-LogP model of the multi-tree broadcast (:mod:`gridcoll.algorithms.multitree`).

Each remote cluster ``i`` owns a part of ``k_i`` segments of ``m`` bytes
(:func:`~gridcoll.algorithms.multitree.multitree_parts`) that flows through a two-level
pipeline: root -> coordinator ``i`` -> every other remote coordinator -> each LAN tree.
Seed 000's segmented-tree form ``T = (k-1) gamma(m) + lam(m)`` (sec. 3.1.1) is applied
to each part and to each resource the parts share, and the largest counts:

``T = max( max_i (k_i - 1) gamma_i(m) + lam_i(m),  max_x B_x(m) - b_x(m) + lam(m) )``

with ``h`` the root's cluster, ``R`` the remote clusters (``|R| = P_w - 1``), ``s_ab``
and ``r_ab`` the WAN sender and receiver completion times of route ``a -> b``
(``s_w = max(g_l, os_w)``, ``r_w = L_w + g_w``, sec. 2.1), ``d_c`` the LAN degree of the
root or coordinator of cluster ``c`` and ``s_l = g_l``:

* ``gamma_i(m) = max(g_hi(m), max_{j != i} g_ij(m))``: the largest WAN gap of part
  ``i``'s own routes (its pipeline's bottleneck, the rate its size is chosen by);
* ``lam_i(m) = (P_w - 2) s_h(m) + r_hi(m) + (P_w - 3) s_i(m) + max_j r_ij(m) +
  lam_l(m)``: the root's other WAN sends of the round, the hop to ``i``, ``i``'s other
  forwards, the hop to the farthest coordinator, and the LAN tree's
  ``lam_l <= h_l ((d_l - 1) s_l + r_l)`` (the second hop vanishes when ``P_w = 2``);
  ``lam = max_i lam_i``;
* the shared resources ``x``, with total work ``B_x`` and largest single occupancy
  ``b_x`` (so that a resource used by one part alone gives ``(k_i - 1) g + lam``):

  - a WAN link: ``B = sum g_link(m)`` over all segments of all routes that cross it
    (on pair links a link carries one part: nothing beyond ``gamma_i``; on shared
    access links, as ``teragrid``'s, the parts compete);
  - the root: ``B = sum_i k_i (s_hi(m) + d_h s_l(m))``;
  - coordinator ``i``: ``B = k_i (or(m) + sum_{j != i} s_ij(m) + d_i s_l(m)) +
    sum_{j != i} k_j (or(m) + d_i s_l(m))``;
  - a LAN tree, which carries all ``k`` segments: ``B = k max(g_l(m), or_l(m) + d
    s_l(m))`` (sec. 3.1.1's ``gamma`` bound).

A single-cluster grid runs a pipelined d-ary tree: ``(k-1) gamma(m) + lam(m)`` with
sec. 3.1.1's bounds. Every segment is charged as ``m`` bytes, as the papers do.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from gridcoll.algorithms.magpie import check_degree
from gridcoll.algorithms.multitree import multitree_parts
from gridcoll.models.single_layer import (
    check_model_call,
    dary_gamma,
    dary_lam,
    dary_segmented_time,
    nsegments,
)
from gridcoll.network.grid import Grid

__all__ = ["MODELS", "multitree_model"]


def multitree_model(
    grid: Grid,
    nbytes: int,
    root: int = 0,
    *,
    segment_size: int,
    lan_degree: int,
    itemsize: int = 1,
) -> float:
    """Model of :func:`gridcoll.algorithms.multitree.multitree` (seconds); see the notes
    of this module."""
    m = check_model_call(grid, nbytes, root, itemsize, segment_size)
    check_degree(lan_degree, "lan_degree")
    k = nsegments(nbytes, m)
    home = grid.cluster_of[root]
    sizes = [c.nranks for c in grid.clusters]
    degree = [min(lan_degree, n - 1) for n in sizes]
    if grid.is_single_cluster:
        return dary_segmented_time(grid.clusters[0].lan, sizes[0], nbytes, m, degree[0])
    parts = multitree_parts(grid, root, k)
    remotes = sorted(parts)
    active = [i for i in remotes if parts[i]]
    t = _route_tables(grid, m)
    lans = [c.lan for c in grid.clusters]
    lan_out = [d * lan.s(m) for d, lan in zip(degree, lans, strict=True)]  # d_c s_l(m)

    lam_l = max(
        (dary_lam(lans[c], n, degree[c], m) for c, n in enumerate(sizes) if n > 1), default=0.0
    )
    # the largest s_ij, r_ij, g_ij over j in R - {i}, once per i (O(P_w^2) per size m)
    others = {i: [j for j in remotes if j != i] for i in remotes}
    send_max = {i: max((t.send[i][j] for j in others[i]), default=0.0) for i in remotes}
    recv_max = {i: max((t.recv[i][j] for j in others[i]), default=0.0) for i in remotes}
    gap_max = {i: max((t.gap[i][j] for j in others[i]), default=0.0) for i in remotes}
    home_send = max(t.send[home][j] for j in remotes)
    lam = {}
    for i in active:
        lam[i] = (len(remotes) - 1) * home_send + t.recv[home][i]
        if others[i]:
            lam[i] += (len(others[i]) - 1) * send_max[i] + recv_max[i]
        lam[i] += lam_l
    # (a) each part's own pipeline, paced by the gaps of its routes
    times = [(len(parts[i]) - 1) * max(t.gap[home][i], gap_max[i]) + lam[i] for i in active]
    # (b) every shared resource's total work: links, the root, coordinators, LAN trees
    work: list[tuple[float, float]] = []  # (total busy, largest single occupancy)
    if grid.links:  # a link's segments: sum_i k_i over the part routes crossing it
        count = np.zeros(grid.nclusters)
        count[list(parts)] = [len(part) for part in parts.values()]
        batch = grid.route_batch
        per_route = np.where(batch.src == home, count[batch.dst], count[batch.src])
        per_route[batch.dst == home] = 0.0  # no part returns to the root's cluster
        entry_route, entry_link = _link_incidence(grid)
        uses = np.bincount(entry_link, weights=per_route[entry_route], minlength=len(t.link_gap))
        work += [(n * g, g) for n, g in zip(uses, t.link_gap, strict=True) if n > 0]
    root_costs = [(len(parts[j]), t.send[home][j] + lan_out[home]) for j in active]
    work.append((sum(n * c for n, c in root_costs), max(c for _, c in root_costs)))
    for i in remotes:
        own = t.recv_overhead[home][i] + sum(t.send[i][j] for j in others[i])
        costs = [(len(parts[i]), own + lan_out[i])]
        costs += [(len(parts[j]), t.recv_overhead[j][i] + lan_out[i]) for j in active if j != i]
        work.append((sum(n * c for n, c in costs), max(c for _, c in costs)))
    for c, n in enumerate(sizes):
        if n > 1:
            one = dary_gamma(lans[c], degree[c], m)
            work.append((k * one, one))
    latency = max(lam.values())
    times += [busy - one + latency for busy, one in work]
    return max(times)


@dataclass(frozen=True, slots=True)
class _RouteTables:
    """Per ordered cluster pair ``(a, b)``, at one segment size ``m``: ``send`` is
    ``s_w(m) = max(g_l(m), os_w(m))``, ``recv`` is ``r_w(m) = L_w + g_w(m)`` (seed 000,
    sec. 2.1), ``gap`` is ``g_w(m)``, ``recv_overhead`` is ``or_w(m)`` (0 on the diagonal);
    ``link_gap`` is every shared link's ``g(m)``, in ``grid.links`` order."""

    send: list[list[float]]
    recv: list[list[float]]
    gap: list[list[float]]
    recv_overhead: list[list[float]]
    link_gap: list[float]


def _route_tables(grid: Grid, m: int) -> _RouteTables:
    """The :class:`_RouteTables` of ``grid`` at ``m``, memoised on the grid object. A
    grid of C single-rank clusters has C(C-1) routes, evaluated here in one batch per
    P-LogP function (:attr:`Grid.route_batch`)."""
    memo: dict[int, _RouteTables] = grid.__dict__.setdefault("_multitree_tables", {})
    found = memo.get(m)
    if found is None:
        n = grid.nclusters
        batch = grid.route_batch
        a, b = batch.src, batch.dst
        lan_gap = np.array([c.lan.g(m) for c in grid.clusters])
        gap = batch.g(m)
        values = (np.maximum(lan_gap[a], batch.os(m)), batch.latency + gap, gap, batch.or_(m))
        tables = []
        for value in values:  # s_w = max(g_l, os_w), r_w = L_w + g_w, g_w, or_w
            table = np.zeros((n, n))
            table[a, b] = value
            tables.append(table.tolist())
        links = [link.g(m) for link in grid.links.values()]
        if len(memo) >= 64:
            memo.clear()
        found = memo[m] = _RouteTables(*tables, links)
    return found


def _link_incidence(grid: Grid) -> tuple[np.ndarray, np.ndarray]:
    """(route index, link index) of every link crossed by every route (``grid.routes``
    and ``grid.links`` order), memoised on the grid object."""
    found = grid.__dict__.get("_multitree_incidence")
    if found is None:
        index = {name: i for i, name in enumerate(grid.links)}
        pairs = [
            (r, index[name]) for r, route in enumerate(grid.routes.values()) for name in route.links
        ]
        arr = np.array(pairs, dtype=int).reshape(-1, 2)
        found = grid.__dict__["_multitree_incidence"] = (arr[:, 0], arr[:, 1])
    return found


MODELS: dict[tuple[str, str], Callable[..., float]] = {("bcast", "multitree"): multitree_model}
"""The model of the multi-tree broadcast, by ``(op, name)``."""
