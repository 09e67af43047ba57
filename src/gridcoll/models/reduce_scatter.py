"""Closed-form P-LogP models of the reduce-scatter builders
(:mod:`gridcoll.algorithms.reduce_scatter`).

``b = nbytes`` is one block, ``m`` the segment size, ``k = ceil(b/m)``. On one network:

=====================  ===============================================================
pairwise               ``(P-1) max(g(b), os(b), or(b)) + L`` (each NIC in takes ``P-1``)
reduce-then-scatter    ``ceil(log2 P) (L + g(P b)) + (P-1) g(b) + L`` (``P = 2^h``)
two-level              ``lam_l(P m) + (k-1) gamma(m) + r_w + (N_g - 1) s_l(m) + r_l(m)``
=====================  ===============================================================

The registered models evaluate these edge by edge with every route's own parameters
(seed 000, sec. 2.1, :mod:`gridcoll.models._collective`): the pairwise exchange message
by message with queues at the receivers' NICs and on shared links; the baseline as the
binomial reduce's ``lam`` (:func:`~gridcoll.models._collective.reduce_gamma_lambda`)
followed by a flat tree (:func:`~gridcoll.models._collective.sized_tree`); the
two-level one as the local reduce's ``(gamma, lam)``, the coordinators' exchange
(seed 000's two-layer pipelining, sec. 3.1.2) and the local hand-out. Combining costs
nothing, as in the reduce models and the simulator.
"""

from __future__ import annotations

from gridcoll.algorithms._collective import check_commutative, preorder_tree
from gridcoll.algorithms.allreduce import reduction_groups
from gridcoll.algorithms.magpie import check_degree
from gridcoll.algorithms.reduce import binomial_reduce_tree
from gridcoll.algorithms.reduce_scatter import pairwise_order
from gridcoll.algorithms.trees import flat_tree
from gridcoll.models._collective import Costs, Inbound, reduce_gamma_lambda, sized_tree
from gridcoll.models.single_layer import check_model_call, nsegments
from gridcoll.network.grid import Grid

__all__ = [
    "MODELS",
    "pairwise_reduce_scatter_model",
    "reduce_then_scatter_model",
    "two_level_reduce_scatter_model",
]


def pairwise_reduce_scatter_model(
    grid: Grid, nbytes: int, root: int = 0, *, itemsize: int = 1, commutative: bool = True
) -> float:
    """Model of :func:`~gridcoll.algorithms.reduce_scatter.pairwise_reduce_scatter`.

    Rank ``i`` starts its ``d``-th send (to ``i + d``) when its CPU (``os`` each) and
    NIC (``s`` each) are free; the messages queue at the receivers' NICs and on shared
    links in the order they start (:class:`~gridcoll.models._collective.Inbound`);
    rank ``j``, its sends made, takes its ``P - 1`` blocks in its program's order, each
    at ``max(arrival, previous + or(b))``. The slowest rank counts. O(P^2 log P).
    """
    b = check_model_call(grid, nbytes, root, itemsize)
    check_commutative(commutative, "pairwise")
    P = grid.nranks
    costs = Costs(grid)
    clock = [0.0] * P
    departs = []
    for i in range(P):
        nic = 0.0
        for d in range(1, P):
            j = (i + d) % P
            e = costs(i, j, b)
            start = max(clock[i], nic)
            nic = start + e.s
            clock[i] += e.os
            departs.append((start, i, j))
    inbound = Inbound(costs)
    arrival = {(i, j): inbound.arrival(i, j, b, start) for start, i, j in sorted(departs)}
    T = 0.0
    for j in range(P):
        t = clock[j]
        for i, _ in pairwise_order(P, j, commutative):
            t = max(arrival[(i, j)], t + costs(i, j, b).or_)
        T = max(T, t)
    return T


def reduce_then_scatter_model(
    grid: Grid, nbytes: int, root: int = 0, *, itemsize: int = 1, commutative: bool = True
) -> float:
    """Model of :func:`~gridcoll.algorithms.reduce_scatter.reduce_then_scatter`: the
    binomial reduce's ``lam(P b)``, then rank 0's flat tree of ``b``-byte blocks
    (seed 002, Tables 1 and 2, edge by edge)."""
    b = check_model_call(grid, nbytes, root, itemsize)
    check_commutative(commutative, "reduce-then-scatter")
    P = grid.nranks
    costs = Costs(grid)
    ranks = list(range(P))
    lam = reduce_gamma_lambda(costs, binomial_reduce_tree(ranks), P * b)[1]
    return max(sized_tree(costs, flat_tree(ranks), lambda a, c: b, start=lam)[2].values())


def two_level_reduce_scatter_model(
    grid: Grid,
    nbytes: int,
    root: int = 0,
    *,
    segment_size: int,
    lan_degree: int,
    itemsize: int = 1,
    commutative: bool = True,
) -> float:
    """Model of :func:`~gridcoll.algorithms.reduce_scatter.two_level_reduce_scatter`.

    ``G`` groups (``N_g`` ranks each), ``k`` rounds of ``m``; per group the local
    reduce's ``(gamma_r, lam_r)`` of ``P m``-byte rounds on its ``d_l``-ary tree.
    Leader ``g`` (1) reduces each round and sends leader ``q`` its ``N_q m`` bytes,
    its last round starting at ``lam_r + (k-1) max(gamma_r, sum s_w, cpu)`` (``cpu``
    the leader's ``or`` of its children and ``os`` of its sends), its sends ``os_w``
    (CPU) and ``s_w`` (NIC) apart, its CPU done at ``t1``; the last round from ``q``
    arrives at ``max(depart_q + r_w, lam_r,q + k g_link + L_w)`` (the link-bound of
    seed 000's pipelining, sec. 3.1.2); (2) combines each round (``sum or_w``) and
    hands its ``N_g - 1`` members their segment (``os_l`` each, ``s_l`` on its NIC),
    the last round's last member served ``(N_g - 2) s_l + r_l`` after its combines.
    The slowest leader counts. O(P + G^2).
    """
    m = check_model_call(grid, nbytes, root, itemsize, segment_size)
    check_degree(lan_degree, "lan_degree")
    check_commutative(commutative, "two-level")
    P = grid.nranks
    k = nsegments(nbytes, m)
    m = min(m, nbytes)
    groups = reduction_groups(grid, commutative)
    G = len(groups)
    leaders = [group[0] for group in groups]
    costs = Costs(grid)
    link_busy: dict[str, float] = {}
    for g, a in enumerate(leaders):
        for q, c in enumerate(leaders):
            if q != g:
                for name, g_link in costs(a, c, len(groups[q]) * m).links:
                    link_busy[name] = link_busy.get(name, 0.0) + g_link
    lans, t1 = [], []
    depart: dict[tuple[int, int], float] = {}  # when q's last round leaves for g
    for g, group in enumerate(groups):
        tree = preorder_tree(group, lan_degree)
        g_r, lam_r = reduce_gamma_lambda(costs, tree, P * m)
        leader = leaders[g]
        others = [(g + i) % G for i in range(1, G)]  # the builder's send order
        out = [costs(leader, leaders[q], len(groups[q]) * m) for q in others]
        kids = tree.children.get(leader, ())
        cpu = sum(costs(c, leader, P * m).or_ for c in kids) + sum(e.os for e in out)
        per = max(g_r, cpu, sum(e.s for e in out))
        start = lam_r + (k - 1) * per
        cpu_at = nic_at = start
        for q, e in zip(others, out, strict=True):
            depart[g, q] = max(cpu_at, nic_at)
            cpu_at, nic_at = cpu_at + e.os, depart[g, q] + e.s
        lans.append(lam_r)
        t1.append(cpu_at)
    T = 0.0
    for g, group in enumerate(groups):
        leader, N = leaders[g], len(group)
        into = [costs(leaders[q], leader, N * m) for q in range(G) if q != g]
        last = t1[g]
        for q in range(G):
            if q != g:
                e = costs(leaders[q], leader, N * m)
                busy = max((link_busy[name] for name, _ in e.links), default=e.g)
                last = max(last, depart[q, g] + e.r, lans[q] + k * busy + e.L)
        members = [costs(leader, r, m) for r in group if r != leader]
        work = sum(e.or_ for e in into) + sum(e.os for e in members)
        nic = sum(e.s for e in members)
        ready = max(t1[g] + (k - 1) * max(work, nic), last) + sum(e.or_ for e in into[-1:])
        done = ready
        for i, e in enumerate(members):
            done = max(done, ready + i * e.s + e.r)
        T = max(T, done)
    return T


MODELS = {
    ("reduce_scatter", "pairwise"): pairwise_reduce_scatter_model,
    ("reduce_scatter", "reduce-then-scatter"): reduce_then_scatter_model,
    ("reduce_scatter", "two-level"): two_level_reduce_scatter_model,
}
"""The reduce-scatter models, by ``(op, name)``."""
