"""Closed-form P-LogP models of the gather builders (:mod:`gridcoll.algorithms.gather`).

``b = nbytes`` is the block of one rank, ``m`` the segment size, ``k = ceil(b/m)``.
Gather is scatter backwards (seed 002, sec. 4; seed 000, sec. 3.3), so the single-layer
shapes follow seed 002's Table 2 mirrored; the root's incoming link now serialises the
messages of a flat tree.

Seed 000, sec. 3.3, for the segmented flat tree: ``T = (k-1) gamma(m) + lam(m)`` with
``gamma(m) = max(P_l g_w(m), P_l or_l(m) + (P_w-1) P_l or_w(m) + os_l(m))`` and
``lam(m) = max(L_w + P_l g_w(m), max(L_l, os_l(m)) + P_l or_l(m) + (P_w-1) P_l
or_w(m))`` (:func:`magpie_segmented_gather_paper`; the ``os_l`` term is the root sending
to itself, which a schedule does not do).

The registered models evaluate the builder's own shape edge by edge
(:mod:`gridcoll.models._collective`): :func:`~gridcoll.models._collective.many_to_one`
for the flat trees (per round, the root's CPU and NIC, the shared links, the senders),
:func:`~gridcoll.models._collective.upward_tree` for the chain and binomial trees.
"""

from __future__ import annotations

from gridcoll.algorithms.magpie import cluster_ranks, coordinator_order
from gridcoll.algorithms.reduce import binomial_reduce_tree
from gridcoll.algorithms.scatter import round_robin_order
from gridcoll.algorithms.trees import chain_tree, relative_ranks
from gridcoll.models._collective import Costs, many_to_one, pipeline_time, upward_tree
from gridcoll.models.single_layer import check_model_call, nsegments
from gridcoll.models.two_layer import slowest_lan, slowest_wan
from gridcoll.network.grid import Grid

__all__ = [
    "MODELS",
    "binomial_gather_model",
    "chain_gather_model",
    "chain_pipelined_gather_model",
    "cluster_aware_gather_model",
    "flat_gather_model",
    "magpie_original_gather_model",
    "magpie_segmented_gather_model",
    "magpie_segmented_gather_paper",
]


def flat_gather_model(grid: Grid, nbytes: int, root: int = 0, *, itemsize: int = 1) -> float:
    """Model of :func:`~gridcoll.algorithms.gather.flat_gather`: every rank sends at
    once; the messages queue at the root's NIC and on shared links (seconds)."""
    b = check_model_call(grid, nbytes, root, itemsize)
    senders = relative_ranks(grid.nranks, root)[1:]
    return many_to_one(Costs(grid), root, [(r, b) for r in senders])[1]


def chain_gather_model(grid: Grid, nbytes: int, root: int = 0, *, itemsize: int = 1) -> float:
    """Model of :func:`~gridcoll.algorithms.gather.chain_gather`: Table 2's chain
    backwards, relative rank ``i`` sending ``(P - i) b`` bytes."""
    b = check_model_call(grid, nbytes, root, itemsize)
    P = grid.nranks
    rel = relative_ranks(P, root)
    position = {r: i for i, r in enumerate(rel)}
    return upward_tree(Costs(grid), chain_tree(rel), lambda v, c: (P - position[c]) * b)


def chain_pipelined_gather_model(
    grid: Grid, nbytes: int, root: int = 0, *, segment_size: int, itemsize: int = 1
) -> float:
    """Model of :func:`~gridcoll.algorithms.gather.chain_pipelined_gather`: the
    pipelined chain backwards (:func:`~gridcoll.models._collective.pipeline_time` from
    the far end, ``(P - i) k`` messages crossing the hop into relative rank ``i - 1``)."""
    m = check_model_call(grid, nbytes, root, itemsize, segment_size)
    k = nsegments(nbytes, m)
    P = grid.nranks
    costs = Costs(grid)

    def upstream(a: int, b: int, size: float):  # hop i of the chain runs rel[i] -> rel[i-1]
        return costs(b, a, size)

    rel = relative_ranks(P, root)
    return pipeline_time(upstream, rel, [(P - i) * k for i in range(P)], m)


def binomial_gather_model(grid: Grid, nbytes: int, root: int = 0, *, itemsize: int = 1) -> float:
    """Model of :func:`~gridcoll.algorithms.gather.binomial_gather`: Table 2's binomial
    tree backwards, each node forwarding its subtree's blocks."""
    b = check_model_call(grid, nbytes, root, itemsize)
    P = grid.nranks
    rel = relative_ranks(P, root)
    position = {r: i for i, r in enumerate(rel)}

    def size(parent: int, child: int) -> float:
        i = position[child]
        return min(i & -i, P - i) * b

    return upward_tree(Costs(grid), binomial_reduce_tree(rel), size)


def magpie_original_gather_model(
    grid: Grid, nbytes: int, root: int = 0, *, itemsize: int = 1
) -> float:
    """Model of :func:`~gridcoll.algorithms.gather.magpie_original_gather`: flat local
    gathers, then one whole message per cluster, the root taking its own cluster
    first."""
    b = check_model_call(grid, nbytes, root, itemsize)
    costs = Costs(grid)
    coordinators = coordinator_order(grid, root)
    members = {c: cluster_ranks(grid, grid.cluster_of[c], c) for c in coordinators}
    ready = {}
    for c in coordinators[1:]:
        ready[c] = many_to_one(costs, c, [(r, b) for r in members[c][1:]])[1]
    messages = [(r, b) for r in members[root][1:]]
    messages += [(c, len(members[c]) * b) for c in coordinators[1:]]
    return many_to_one(costs, root, messages, ready)[1]


def magpie_segmented_gather_model(
    grid: Grid, nbytes: int, root: int = 0, *, segment_size: int, itemsize: int = 1
) -> float:
    """Model of :func:`~gridcoll.algorithms.gather.magpie_segmented_gather`:
    ``(k-1) gamma(m) + lam(m)`` of the root's round-robin rounds, edge by edge
    (seed 000, sec. 3.3)."""
    m = check_model_call(grid, nbytes, root, itemsize, segment_size)
    k = nsegments(nbytes, m)
    gamma, lam = many_to_one(Costs(grid), root, [(r, m) for r in round_robin_order(grid, root)])
    return (k - 1) * gamma + lam


def magpie_segmented_gather_paper(
    grid: Grid, nbytes: int, root: int = 0, *, segment_size: int, itemsize: int = 1
) -> float:
    """Seed 000, sec. 3.3, as printed (slowest WAN route and LAN, sec. 4)."""
    m = check_model_call(grid, nbytes, root, itemsize, segment_size)
    k = nsegments(nbytes, m)
    P_w = grid.nclusters
    P_l = max(c.nranks for c in grid.clusters)
    lan = slowest_lan(grid)
    if P_w < 2:
        gamma = max(lan.g(m), P_l * lan.or_(m) + lan.os(m))
        lam = max(lan.L, lan.os(m)) + P_l * lan.or_(m)
        return (k - 1) * gamma + lam
    wan = slowest_wan(grid)
    recv = P_l * lan.or_(m) + (P_w - 1) * P_l * wan.or_(m)
    gamma = max(P_l * wan.g(m), recv + lan.os(m))
    lam = max(wan.L + P_l * wan.g(m), max(lan.L, lan.os(m)) + recv)
    return (k - 1) * gamma + lam


def cluster_aware_gather_model(
    grid: Grid, nbytes: int, root: int = 0, *, segment_size: int, itemsize: int = 1
) -> float:
    """Model of :func:`~gridcoll.algorithms.gather.cluster_aware_gather`:
    ``(k-1) gamma(m) + lam(m)``, the coordinators' rounds (``N_c - 1`` LAN segments in,
    one ``N_c m`` WAN message out) feeding the root's."""
    m = check_model_call(grid, nbytes, root, itemsize, segment_size)
    k = nsegments(nbytes, m)
    costs = Costs(grid)
    coordinators = coordinator_order(grid, root)
    members = {c: cluster_ranks(grid, grid.cluster_of[c], c) for c in coordinators}
    gamma, ready = 0.0, {}
    for c in coordinators[1:]:
        g_c, lam_c = many_to_one(costs, c, [(r, m) for r in members[c][1:]])
        up = costs(c, root, len(members[c]) * m)
        gamma = max(gamma, g_c + up.os, up.s)
        ready[c] = lam_c
    messages = [(r, m) for r in members[root][1:]]
    messages += [(c, len(members[c]) * m) for c in coordinators[1:]]
    g_root, lam = many_to_one(costs, root, messages, ready)
    return (k - 1) * max(gamma, g_root) + lam


MODELS = {
    ("gather", "flat"): flat_gather_model,
    ("gather", "chain"): chain_gather_model,
    ("gather", "chain-pipelined"): chain_pipelined_gather_model,
    ("gather", "binomial"): binomial_gather_model,
    ("gather", "magpie-original"): magpie_original_gather_model,
    ("gather", "magpie-segmented"): magpie_segmented_gather_model,
    ("gather", "cluster-aware"): cluster_aware_gather_model,
}
"""The gather models, by ``(op, name)``."""
