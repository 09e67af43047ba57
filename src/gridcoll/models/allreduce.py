"""Closed-form P-LogP models of the allreduce builders
(:mod:`gridcoll.algorithms.allreduce`).

``M = nbytes``; ``p = 2^floor(log2 P)``. On one network (Thakur, Rabenseifner and Gropp
2005, sec. 4.5, with ``L + g(n)`` per message of ``n`` bytes):

=======================  ============================================================
reduce-bcast             ``2 ceil(log2 P) (L + g(M))``
recursive doubling       ``log2 p (L + g(M))`` (+ two steps when ``P != p``)
Rabenseifner             ``2 log2 p L + 2 (p-1)/p M G`` (+ two steps)
=======================  ============================================================

The registered models follow each builder's exchanges step by step with every edge's
own parameters (:func:`~gridcoll.models._collective.rounds_time`: a rank starts a step
when it has finished the previous one; messages queue at NICs and on shared links), so
the WAN steps of the flat-network algorithms are charged what they cost.

The two-level allreduce pipelines a local reduce, the leaders' direct reduce-scatter and
allgather over the WAN and a local broadcast, in rounds of one segment per chunk:
``T = lam_reduce + T_wan + lam_bcast`` with ``T_wan`` the later of the link-bound
``2 k g_w(m) + L_w`` (each ordered link carries one segment per round and phase, the
reduce-scatter's ahead of the allgather's) and the leaders' own per-round work
(:func:`two_level_allreduce_model`).
"""

from __future__ import annotations

import math

import numpy as np

from gridcoll.algorithms._collective import check_commutative, preorder_tree
from gridcoll.algorithms.allreduce import (
    Fold,
    chunk_segments,
    mpich_allreduce_variant,
    reduction_groups,
)
from gridcoll.algorithms.magpie import check_degree
from gridcoll.algorithms.reduce import binomial_reduce_tree
from gridcoll.algorithms.trees import binomial_tree
from gridcoll.models._collective import (
    Costs,
    reduce_gamma_lambda,
    rounds_time,
    sized_tree,
)
from gridcoll.models.single_layer import check_model_call, nsegments
from gridcoll.network.bounds import cluster_classes
from gridcoll.network.grid import Grid

__all__ = [
    "MODELS",
    "mpich_allreduce_model",
    "rabenseifner_allreduce_model",
    "recursive_doubling_allreduce_model",
    "reduce_bcast_allreduce_model",
    "two_level_allreduce_model",
    "two_level_exchange_allreduce_model",
]


def reduce_bcast_allreduce_model(
    grid: Grid, nbytes: int, root: int = 0, *, itemsize: int = 1, commutative: bool = True
) -> float:
    """Model of :func:`~gridcoll.algorithms.allreduce.reduce_bcast_allreduce`: the
    binomial reduce's ``lam`` plus the binomial broadcast's (seconds)."""
    M = check_model_call(grid, nbytes, root, itemsize)
    check_commutative(commutative, "reduce-bcast")
    costs = Costs(grid)
    ranks = list(range(grid.nranks))
    up = reduce_gamma_lambda(costs, binomial_reduce_tree(ranks), M)[1]
    down = sized_tree(costs, binomial_tree(ranks), lambda a, c: M)[1]
    return up + down


def _fold_rounds(fold: Fold, M: int) -> tuple[list, list]:
    fold_in = [(r, r + 1, M) for r in range(0, 2 * fold.rem, 2)]
    fold_out = [(r + 1, r, M) for r in range(0, 2 * fold.rem, 2)]
    return fold_in, fold_out


def recursive_doubling_allreduce_model(
    grid: Grid, nbytes: int, root: int = 0, *, itemsize: int = 1, commutative: bool = True
) -> float:
    """Model of :func:`~gridcoll.algorithms.allreduce.recursive_doubling_allreduce`:
    fold, ``log2 p`` exchanges of ``M`` bytes, unfold, step by step."""
    M = check_model_call(grid, nbytes, root, itemsize)
    check_commutative(commutative, "recursive-doubling")
    # memoised: "mpich" weighs the same rounds on small vectors
    return grid.memo.get("models.recursive_doubling", M, lambda: _recursive_doubling_time(grid, M))


def _recursive_doubling_time(grid: Grid, M: int) -> float:
    fold = Fold(grid.nranks)
    fold_in, fold_out = _fold_rounds(fold, M)
    rounds = [fold_in]
    mask = 1
    while mask < fold.p:
        rounds.append([(fold.rank(n), fold.rank(n ^ mask), M) for n in range(fold.p)])
        mask <<= 1
    rounds.append(fold_out)
    return max(rounds_time(Costs(grid), rounds).values(), default=0.0)


def rabenseifner_allreduce_model(
    grid: Grid, nbytes: int, root: int = 0, *, itemsize: int = 1, commutative: bool = True
) -> float:
    """Model of :func:`~gridcoll.algorithms.allreduce.rabenseifner_allreduce`: fold,
    the halving reduce-scatter (nearest partner first), the doubling allgather, unfold,
    each step with the bytes of the chunk ranges exchanged."""
    M = check_model_call(grid, nbytes, root, itemsize)
    check_commutative(commutative, "rabenseifner")
    # memoised: "mpich" weighs the same rounds on large vectors
    compute = lambda: _rabenseifner_time(grid, M, itemsize)  # noqa: E731
    return grid.memo.get("models.rabenseifner", (M, itemsize), compute)


def _rabenseifner_time(grid: Grid, M: int, itemsize: int) -> float:
    fold = Fold(grid.nranks)
    p = fold.p
    chunks = [length for _, length in chunk_segments(M, p, itemsize)]
    prefix = [0]
    for length in chunks:
        prefix.append(prefix[-1] + length)
    fold_in, fold_out = _fold_rounds(fold, M)
    rounds, ranges, history = [fold_in], {n: (0, p) for n in range(p)}, []
    mask = 1
    while mask < p:
        step, new = [], {}
        for n in range(p):
            lo, hi = ranges[n]
            mid = (lo + hi) // 2
            keep, give = ((lo, mid), (mid, hi)) if n < n ^ mask else ((mid, hi), (lo, mid))
            step.append((fold.rank(n), fold.rank(n ^ mask), prefix[give[1]] - prefix[give[0]]))
            new[n] = keep
        rounds.append(step)
        history.append((mask, ranges))
        ranges = new
        mask <<= 1
    for mask, before in reversed(history):
        rounds.append(
            [
                (fold.rank(n), fold.rank(n ^ mask), prefix[ranges[n][1]] - prefix[ranges[n][0]])
                for n in range(p)
            ]
        )
        ranges = before
    rounds.append(fold_out)
    return max(rounds_time(Costs(grid), rounds).values(), default=0.0)


def mpich_allreduce_model(
    grid: Grid, nbytes: int, root: int = 0, *, itemsize: int = 1, commutative: bool = True
) -> float:
    """Model of :func:`~gridcoll.algorithms.allreduce.mpich_allreduce`: the model of the
    variant MPICH picks."""
    check_model_call(grid, nbytes, root, itemsize)
    check_commutative(commutative, "mpich")
    variant = mpich_allreduce_variant(grid.nranks, nbytes, itemsize, commutative)
    model = {
        "recursive-doubling": recursive_doubling_allreduce_model,
        "rabenseifner": rabenseifner_allreduce_model,
    }[variant]
    return model(grid, nbytes, root, itemsize=itemsize, commutative=commutative)


def two_level_allreduce_model(
    grid: Grid,
    nbytes: int,
    root: int = 0,
    *,
    segment_size: int,
    lan_degree: int,
    itemsize: int = 1,
    commutative: bool = True,
) -> float:
    """Model of :func:`~gridcoll.algorithms.allreduce.two_level_allreduce`.

    ``G`` groups, chunks of about ``M / G``, ``k`` rounds of ``m`` per chunk, local
    round messages of ``n = G m`` bytes; per group the local reduce's
    ``(gamma_r, lam_r)`` and broadcast's ``(gamma_b, lam_b)`` on its ``d_l``-ary tree.
    A leader's three phases follow its program: (1) reduce a round and send its
    ``G - 1`` reduce-scatter segments, ending at ``t1 = lam_r + (k-1) max(gamma_r,
    (G-1) s_w) + ...``; (3) combine each round's segments and send the result, ending
    at ``t3``, no earlier than the last reduce-scatter segment's arrival
    ``max(t1 + r_w, lam_r + k g_link + L_w)``; (4) take the allgather's segments, which
    follow the reduce-scatter's on each link (``lam_r + 2 k g_link + L_w``), and
    broadcast each round (``k gamma_b + lam_b``). The slowest leader counts.
    """
    m = check_model_call(grid, nbytes, root, itemsize, segment_size)
    check_degree(lan_degree, "lan_degree")
    check_commutative(commutative, "two-level")
    groups = reduction_groups(grid, commutative)
    G = len(groups)
    leaders = [g[0] for g in groups]
    lengths = [length for _, length in chunk_segments(nbytes, G, itemsize)]
    m = min(m, max(max(lengths), itemsize))
    k = nsegments(max(max(lengths), 1), m)
    n = sum(min(m, length) for length in lengths)
    costs = Costs(grid)
    rep, reps = _alike(grid, commutative)
    lans = _lan_phases(costs, groups, rep, reps, lan_degree, n)
    if G == 1:  # the whole reduce, then the whole broadcast
        g_r, lam_r, g_b, lam_b = lans[0]
        return lam_r + (k - 1) * g_r + (k - 1) * g_b + lam_b
    busy = _link_busy(costs, leaders, m, len(reps) < G)
    t1, t3 = [0.0] * G, [0.0] * G
    for g in reps:
        out = [costs(leaders[g], leaders[q], m) for q in range(G) if q != g]
        g_r, lam_r, _, _ = lans[g]
        t1[g] = lam_r + (k - 1) * max(g_r, sum(e.s for e in out)) + sum(e.os for e in out)
    t1 = [t1[rep[g]] for g in range(G)]

    def link_bound(q: int, g: int, rounds: int) -> float:
        e = costs(leaders[q], leaders[g], m)
        return lans[q][1] + rounds * busy(e) + e.L

    for g in reps:
        leader = leaders[g]
        into = [costs(leaders[q], leader, m) for q in range(G) if q != g]
        out = [costs(leader, leaders[q], m) for q in range(G) if q != g]
        work = k * (sum(e.or_ for e in into) + sum(e.os for e in out))
        last = max(
            max(t1[q] + costs(leaders[q], leader, m).r, link_bound(q, g, k))
            for q in range(G)
            if q != g
        )
        t3[g] = max(t1[g] + work, last + into[-1].or_ + sum(e.os for e in out))
    t3 = [t3[rep[g]] for g in range(G)]
    T = 0.0
    for g in reps:
        _, _, g_b, lam_b = lans[g]
        into = [costs(leaders[q], leaders[g], m) for q in range(G) if q != g]
        last = max(
            max(t3[q] + costs(leaders[q], leaders[g], m).r, link_bound(q, g, 2 * k))
            for q in range(G)
            if q != g
        )
        per_round = max(g_b, sum(e.or_ for e in into))
        T = max(T, max(t3[g] + (k - 1) * per_round, last) + lam_b)
    return T


def _alike(grid: Grid, commutative: bool) -> tuple[list[int], list[int]]:
    """``(rep, reps)``: the groups of :func:`reduction_groups` that every figure of the
    two-level models below treats alike share a representative, ``rep[g]``; ``reps``
    lists them. Commutative groups are the clusters: those an automorphism of the grid
    swaps (:func:`gridcoll.network.bounds.cluster_classes`) have equal phases, so
    each figure is computed once per class, O(G classes) instead of O(G^2)."""
    if not commutative:
        G = len(reduction_groups(grid, commutative))
        return list(range(G)), list(range(G))
    rep = [0] * grid.nclusters
    for cls in cluster_classes(grid):
        for c in cls:
            rep[c] = cls[0]
    return rep, sorted(set(rep))


def _lan_phases(costs: Costs, groups, rep, reps, lan_degree: int, n: int) -> list:
    """Per group, its local reduce's ``(gamma_r, lam_r)`` and broadcast's ``(gamma_b,
    lam_b)`` of ``n``-byte messages on its ``d_l``-ary tree (computed for the
    representatives of :func:`_alike`)."""
    phases = {}
    for g in reps:
        tree = preorder_tree(groups[g], lan_degree)
        g_b, lam_b, _ = sized_tree(costs, tree, lambda a, c: n)
        phases[g] = (*reduce_gamma_lambda(costs, tree, n), g_b, lam_b)
    return [phases[rep[g]] for g in range(len(groups))]


def _link_busy(costs: Costs, leaders: list[int], m: int, private: bool):
    """``busy(e)``: the busiest link of the route of ``e`` summed over every pair of
    leaders' ``m``-byte messages (``g`` on a route without links). ``private``: every
    link carries one route (grids with interchangeable clusters), so a link's sum is
    its own route's ``g``, read off ``e`` without the O(G^2) pass."""
    if private:
        return lambda e: max((g_link for _, g_link in e.links), default=e.g)
    link_busy: dict[str, float] = {}
    for a in leaders:
        for b in leaders:
            if a != b:
                for name, g_link in costs(a, b, m).links:
                    link_busy[name] = link_busy.get(name, 0.0) + g_link
    return lambda e: max((link_busy[name] for name, _ in e.links), default=e.g)


def two_level_exchange_allreduce_model(
    grid: Grid,
    nbytes: int,
    root: int = 0,
    *,
    segment_size: int,
    lan_degree: int,
    itemsize: int = 1,
    commutative: bool = True,
) -> float:
    """Model of :func:`~gridcoll.algorithms.allreduce.two_level_exchange_allreduce`.

    Per leader: (1) reduce each of the ``k`` segments locally and send it to the
    ``G - 1`` other leaders, ending at ``t1 = lam_r + (k-1) max(gamma_r, sum s_w) +
    sum os_w``; the last segment from leader ``q`` arrives at ``max(t1_q + r_w, lam_r,q
    + k g_link + L_w)``; (2) combine and broadcast each segment, ``max(gamma_b, sum
    or_w)`` per segment, the last one reaching the group ``lam_b`` later.
    """
    m = check_model_call(grid, nbytes, root, itemsize, segment_size)
    check_degree(lan_degree, "lan_degree")
    check_commutative(commutative, "two-level-exchange")
    k = nsegments(nbytes, m)
    groups = reduction_groups(grid, commutative)
    G = len(groups)
    leaders = [g[0] for g in groups]
    costs = Costs(grid)
    rep, reps = _alike(grid, commutative)
    lans = _lan_phases(costs, groups, rep, reps, lan_degree, m)
    if G == 1:  # the whole reduce, then the whole broadcast
        g_r, lam_r, g_b, lam_b = lans[0]
        return lam_r + (k - 1) * g_r + (k - 1) * g_b + lam_b
    busy = _link_busy(costs, leaders, m, len(reps) < G)
    t1 = [0.0] * G
    for g in reps:
        out = [costs(leaders[g], leaders[q], m) for q in range(G) if q != g]
        g_r, lam_r, _, _ = lans[g]
        t1[g] = lam_r + (k - 1) * max(g_r, sum(e.s for e in out)) + sum(e.os for e in out)
    t1 = [t1[rep[g]] for g in range(G)]
    T = 0.0
    for g in reps:
        leader = leaders[g]
        _, _, g_b, lam_b = lans[g]
        into = [costs(leaders[q], leader, m) for q in range(G) if q != g]
        last = 0.0
        for q in range(G):
            if q != g:
                e = costs(leaders[q], leader, m)
                last = max(last, t1[q] + e.r, lans[q][1] + k * busy(e) + e.L)
        per_round = max(g_b, sum(e.or_ for e in into))
        T = max(T, max(t1[g] + (k - 1) * per_round, last) + into[-1].or_ + lam_b)
    return T


def exchange_lower_bound(
    grid: Grid, name: str, nbytes: int, itemsize: int = 1, commutative: bool = True
) -> float:
    """A lower bound on the model of MPICH's exchange allreduces (``name``:
    ``recursive-doubling``, ``rabenseifner`` or ``mpich``, which runs one of them): the
    busiest wide-area link's total ``g_link`` over every step, plus the least ``L`` of a
    route that crosses it. :func:`rounds_time` queues each message on its route's
    links, so the last one over a link arrives no earlier. Rabenseifner's step with
    partner distance ``2^j`` moves ``p / 2^(j+1)`` chunks each way, counted at the
    smallest chunk. O(P log P) numpy, O(C) per step; 0.0 on a grid without links.
    """
    if name == "mpich":
        name = mpich_allreduce_variant(grid.nranks, nbytes, itemsize, commutative)
    if name not in ("recursive-doubling", "rabenseifner") or not grid.links:
        return 0.0
    fold = Fold(grid.nranks)
    p, C = fold.p, grid.nclusters
    cluster_of = np.asarray(grid.cluster_of)
    new = np.arange(p)
    chunk = itemsize * (nbytes // itemsize // p)
    steps = []  # (partner distance, bytes each way), every step of both halves
    mask = 1
    while mask < p:
        if name == "recursive-doubling":
            steps.append((mask, nbytes))
        else:
            steps += [(mask, (p // (2 * mask)) * chunk)] * 2
        mask <<= 1
    load: dict[str, float] = {}
    latency: dict[str, float] = {}
    for mask, size in steps:
        if size <= 0:
            continue
        src = np.where(new < fold.rem, 2 * new + 1, new + fold.rem)
        partner = new ^ mask
        dst = np.where(partner < fold.rem, 2 * partner + 1, partner + fold.rem)
        pairs = np.bincount(cluster_of[src] * C + cluster_of[dst], minlength=C * C)
        for pair in np.flatnonzero(pairs):
            a, b = divmod(int(pair), C)
            if a == b:
                continue
            route = grid.routes[(a, b)]
            for link in route.links:
                load[link] = load.get(link, 0.0) + pairs[pair] * grid.links[link].g(size)
                latency[link] = min(latency.get(link, math.inf), route.plogp.L)
    return max((load[link] + latency[link] for link in load), default=0.0)


MODELS = {
    ("allreduce", "reduce-bcast"): reduce_bcast_allreduce_model,
    ("allreduce", "recursive-doubling"): recursive_doubling_allreduce_model,
    ("allreduce", "rabenseifner"): rabenseifner_allreduce_model,
    ("allreduce", "mpich"): mpich_allreduce_model,
    ("allreduce", "two-level"): two_level_allreduce_model,
    ("allreduce", "two-level-exchange"): two_level_exchange_allreduce_model,
}
"""The allreduce models, by ``(op, name)``."""
