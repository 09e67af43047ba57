"""Closed-form P-LogP models of the barrier builders (:mod:`gridcoll.algorithms.barrier`).

Every message is a control message of one byte: ``r(1) = L + g(1)``.

* dissemination: round ``j`` of rank ``r`` completes at ``max(t_{r - 2^j} + r(1),
  t_r + os(1) + or(1))`` over the rounds' edges (:func:`rounds_time`); on one network
  ``ceil(log2 P) (L + g(1))``;
* two-level: the coordinators' flat gathers, one round in which every coordinator
  signals every other, and their flat releases:
  ``2 ((N-2) g_l(1) + r_l(1)) + (P_w-2) s_w(1) + r_w(1)`` plus receive overheads.
"""

from __future__ import annotations

from gridcoll.algorithms.barrier import check_barrier
from gridcoll.algorithms.trees import flat_tree
from gridcoll.models._collective import Costs, many_to_one, rounds_time, sized_tree
from gridcoll.network.grid import Grid

__all__ = ["MODELS", "dissemination_barrier_model", "two_level_barrier_model"]


def dissemination_barrier_model(
    grid: Grid, nbytes: int = 0, root: int = 0, *, itemsize: int = 1
) -> float:
    """Model of :func:`~gridcoll.algorithms.barrier.dissemination_barrier` (seconds)."""
    check_barrier(grid, nbytes, root)
    P = grid.nranks
    rounds, dist = [], 1
    while dist < P:
        rounds.append([(r, (r + dist) % P, 1) for r in range(P)])
        dist <<= 1
    return max(rounds_time(Costs(grid), rounds).values(), default=0.0)


def two_level_barrier_model(
    grid: Grid, nbytes: int = 0, root: int = 0, *, itemsize: int = 1
) -> float:
    """Model of :func:`~gridcoll.algorithms.barrier.two_level_barrier`: flat local
    gathers, the coordinators' all-to-all round, flat local releases."""
    check_barrier(grid, nbytes, root)
    costs = Costs(grid)
    coordinators = [ranks[0] for ranks in grid.members]
    C = len(coordinators)
    gathered = [
        many_to_one(costs, c, [(r, 1) for r in grid.members[i][1:]])[1]
        for i, c in enumerate(coordinators)
    ]
    clock = {c: gathered[i] for i, c in enumerate(coordinators)}
    rounds = [
        [(coordinators[a], coordinators[(a + i) % C], 1) for a in range(C) for i in range(1, C)]
    ]
    clock = rounds_time(costs, rounds, clock) if C > 1 else clock
    T = 0.0
    for i, c in enumerate(coordinators):
        tree = flat_tree(list(grid.members[i]))
        T = max(T, clock[c] + sized_tree(costs, tree, lambda a, b: 1)[1])
    return T


MODELS = {
    ("barrier", "dissemination"): dissemination_barrier_model,
    ("barrier", "two-level"): two_level_barrier_model,
}
"""The barrier models, by ``(op, name)``."""
