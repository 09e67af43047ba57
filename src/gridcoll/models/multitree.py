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
from gridcoll.models.tree_model import link_batch, route_links
from gridcoll.network.grid import Grid
from gridcoll.network.plogp import PLogP

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
    of this module.

    O(P_w^2) numpy per evaluation (the route tables are memoised per ``m``) plus one
    LAN term per distinct (LAN, cluster size): independent of the rank count.
    """
    m = check_model_call(grid, nbytes, root, itemsize, segment_size)
    check_degree(lan_degree, "lan_degree")
    k = nsegments(nbytes, m)
    if grid.is_single_cluster:
        n = grid.clusters[0].nranks
        return dary_segmented_time(grid.clusters[0].lan, n, nbytes, m, min(lan_degree, n - 1))
    home = grid.cluster_of[root]
    t = _route_tables(grid, m)
    w = _remote_terms(grid, m, home)
    lan_out, lan_gamma, lam_l = _lan_terms(grid, m, lan_degree)
    count = _part_counts(grid, root, k)  # k_i, the segments of part i (0 at home)
    active = count > 0
    lam = w.lam + lam_l
    latency = lam[active].max()
    # (a) each part's own pipeline, paced by the gaps of its routes
    times = [((count - 1) * w.part_gap + lam)[active].max()]
    # (b) every shared resource's total work: links, the root, coordinators, LAN trees
    if grid.links:  # a link's segments: sum_i k_i over the part routes crossing it
        used, uses = _link_uses(grid, home, k, count)
        if used.size:
            gap = t.link_gap[used]
            times.append((uses * gap - gap).max() + latency)
    root_cost = t.send[home] + lan_out[home]  # per segment of part j
    times.append((count * root_cost)[active].sum() - root_cost[active].max() + latency)
    # coordinator i: its own part's k_i (or + sum_j s_ij + d_i s_l), then every other
    # active part j's k_j (or_ji + d_i s_l)
    own = w.own + lan_out
    busy = count * own + count @ w.relay_or + lan_out * (count.sum() - count)
    one = np.maximum(own, w.relay_or_max[active].max(axis=0) + lan_out)
    times.append((busy - one)[w.remote].max() + latency)
    if lan_gamma.size:  # a LAN tree carries all k segments: k one - one + latency
        times.append((k - 1) * lan_gamma.max() + latency)
    return float(max(times))


def _part_counts(grid: Grid, root: int, k: int) -> np.ndarray:
    """``k_i`` of every cluster (:func:`multitree_parts`; 0 at the root's), memoised."""

    def make() -> np.ndarray:
        count = np.zeros(grid.nclusters)
        for i, part in multitree_parts(grid, root, k).items():
            count[i] = len(part)
        count.flags.writeable = False
        return count

    return grid.memo.get("multitree.counts", (grid.cluster_of[root], k), make, maxsize=256)


@dataclass(frozen=True, slots=True)
class _RemoteTerms:
    """The terms of :func:`multitree_model` that depend on ``m`` and the root's
    cluster only (over the remote clusters ``R``; entries outside ``R`` unused):
    ``lam`` without ``lam_l``, ``part_gap = max(g_hi, max_j g_ij)`` (``gamma_i``),
    ``own = or_hi + sum_j s_ij``, ``relay_or[j, i] = or_ji`` for ``j != i`` in ``R``
    (else 0) and ``relay_or_max`` the same with ``-inf``."""

    remote: np.ndarray
    lam: np.ndarray
    part_gap: np.ndarray
    own: np.ndarray
    relay_or: np.ndarray
    relay_or_max: np.ndarray


def _remote_terms(grid: Grid, m: int, home: int) -> _RemoteTerms:
    """The :class:`_RemoteTerms` at ``m`` from cluster ``home``, memoised in
    ``grid.memo``: O(P_w^2) numpy once per segment size, shared by every LAN degree."""

    def make() -> _RemoteTerms:
        t = _route_tables(grid, m)
        remote = np.ones(grid.nclusters, dtype=bool)
        remote[home] = False
        nr = int(remote.sum())  # |R| = P_w - 1
        pair = remote[:, None] & remote[None, :]
        np.fill_diagonal(pair, False)  # (i, j), i != j, both remote
        # the largest s_ij, r_ij, g_ij over j in R - {i} (0 when R = {i}; all >= 0)
        send_max = np.where(pair, t.send, 0.0).max(axis=1)
        recv_max = np.where(pair, t.recv, 0.0).max(axis=1)
        gap_max = np.where(pair, t.gap, 0.0).max(axis=1)
        home_send = t.send[home][remote].max()
        lam = (nr - 1) * home_send + t.recv[home]
        if nr > 1:
            lam = lam + (nr - 2) * send_max + recv_max
        own = t.recv_overhead[home] + np.where(pair, t.send, 0.0).sum(axis=1)
        relay_or = np.where(pair, t.recv_overhead, 0.0)
        relay_or_max = np.where(pair, t.recv_overhead, -np.inf)
        part_gap = np.maximum(t.gap[home], gap_max)
        return _RemoteTerms(remote, lam, part_gap, own, relay_or, relay_or_max)

    return grid.memo.get("multitree.remote", (m, home), make, maxsize=64)


def _lan_terms(grid: Grid, m: int, lan_degree: int) -> tuple[np.ndarray, np.ndarray, float]:
    """Per cluster ``d_c s_l(m)`` (the coordinator's LAN sends per segment), the
    ``gamma_l(m) = max(g_l(m), or_l(m) + d s_l(m))`` of every cluster of two or more
    ranks, and the largest ``lam_l(m) <= h ((d - 1) s_l + r_l)`` (seed 000, sec. 3.1.1);
    one evaluation per distinct (LAN, size) (:func:`_lan_groups`)."""
    lan_out = np.zeros(grid.nclusters)
    gammas, lam_l = [], 0.0
    for lan, n, members in _lan_groups(grid):
        d = min(lan_degree, n - 1)
        lan_out[members] = d * lan.s(m)
        if n > 1:
            gammas.append(dary_gamma(lan, d, m))
            lam_l = max(lam_l, dary_lam(lan, n, d, m))
    return lan_out, np.array(gammas), lam_l


def _lan_groups(grid: Grid) -> list[tuple[PLogP, int, np.ndarray]]:
    """The clusters grouped by (LAN, size): ``(lan, n, cluster indices)``, memoised."""

    def make() -> list[tuple[PLogP, int, np.ndarray]]:
        groups: dict[tuple[PLogP, int], list[int]] = {}
        for c, cluster in enumerate(grid.clusters):
            groups.setdefault((cluster.lan, cluster.nranks), []).append(c)
        return [(lan, n, np.array(cs)) for (lan, n), cs in groups.items()]

    return grid.memo.get("multitree.lan_groups", None, make, maxsize=1)


@dataclass(frozen=True, slots=True)
class _RouteTables:
    """Per ordered cluster pair ``(a, b)``, at one segment size ``m``: ``send`` is
    ``s_w(m) = max(g_l(m), os_w(m))``, ``recv`` is ``r_w(m) = L_w + g_w(m)`` (seed 000,
    sec. 2.1), ``gap`` is ``g_w(m)``, ``recv_overhead`` is ``or_w(m)`` (0 on the diagonal);
    ``link_gap`` is every shared link's ``g(m)``, in ``grid.links`` order."""

    send: np.ndarray
    recv: np.ndarray
    gap: np.ndarray
    recv_overhead: np.ndarray
    link_gap: np.ndarray


def _route_tables(grid: Grid, m: int) -> _RouteTables:
    """The :class:`_RouteTables` of ``grid`` at ``m``, memoised in ``grid.memo``. A
    grid of C single-rank clusters has C(C-1) routes, evaluated here in one batch per
    P-LogP function (:attr:`Grid.route_batch`)."""
    return grid.memo.get("multitree.tables", m, lambda: _make_tables(grid, m), maxsize=64)


def _make_tables(grid: Grid, m: int) -> _RouteTables:
    n = grid.nclusters
    batch = grid.route_batch
    a, b = batch.src, batch.dst
    lan_gap = np.array([c.lan.g(m) for c in grid.clusters])
    gap, os_w, or_w = _evaluate(grid, "routes", m)
    values = (np.maximum(lan_gap[a], os_w), batch.latency + gap, gap, or_w)
    tables = []
    for value in values:  # s_w = max(g_l, os_w), r_w = L_w + g_w, g_w, or_w
        table = np.zeros((n, n))
        table[a, b] = value
        tables.append(table)
    links = _evaluate(grid, "links", m)[0]
    return _RouteTables(*tables, links)


SHARED_NETWORKS = 64
"""Up to this many distinct P-LogP objects (a preset's routes share one) are evaluated
one by one and spread with numpy; more (a transit-stub grid) in one batch."""


def _evaluate(grid: Grid, kind: str, m: int) -> tuple[np.ndarray, ...]:
    """For the routes (``kind="routes"``, ``grid.routes`` order) ``g(m)``, ``os(m)``,
    ``or(m)``; for the links ``g(m)``: bit for bit the functions' own values."""

    def make() -> tuple[list, np.ndarray, list]:
        if kind == "routes":
            nets = [route.plogp for route in grid.routes.values()]
        else:
            nets = [link.g for link in grid.links.values()]
        index: dict[int, int] = {}
        first = [index.setdefault(id(net), len(index)) for net in nets]
        unique = list({id(net): net for net in nets}.values())
        if len(unique) <= SHARED_NETWORKS:
            batches = []
        elif kind == "routes":
            batch = grid.route_batch
            batches = [batch.g, batch.os, batch.or_]
        else:
            batches = [link_batch(grid)]
        return unique, np.array(first, dtype=int), batches

    unique, inverse, batches = grid.memo.get(f"multitree.{kind}", None, make, maxsize=1)
    if batches:
        return tuple(batch(m) for batch in batches)
    if kind == "routes":
        rows = [(net.g(m), net.os(m), net.or_(m)) for net in unique]
    else:
        rows = [(fn(m),) for fn in unique]
    table = np.array(rows, dtype=float).reshape(len(unique), -1)
    return tuple(table[inverse, j] for j in range(table.shape[1]))


def _link_uses(grid: Grid, home: int, k: int, count: np.ndarray) -> tuple[np.ndarray, ...]:
    """The links some part crosses and how many segments cross each (``sum_i k_i`` over
    the part routes through it), memoised per (root cluster, k)."""

    def make() -> tuple[np.ndarray, ...]:
        batch = grid.route_batch
        per_route = np.where(batch.src == home, count[batch.dst], count[batch.src])
        per_route[batch.dst == home] = 0.0  # no part returns to the root's cluster
        entry_route, entry_link = route_links(grid)
        uses = np.bincount(entry_link, weights=per_route[entry_route], minlength=len(grid.links))
        used = np.flatnonzero(uses > 0)
        return used, uses[used]

    return grid.memo.get("multitree.link_uses", (home, k), make, maxsize=256)


MODELS: dict[tuple[str, str], Callable[..., float]] = {("bcast", "multitree"): multitree_model}
"""The model of the multi-tree broadcast, by ``(op, name)``."""
