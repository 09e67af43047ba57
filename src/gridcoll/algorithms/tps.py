"""TPS, seed 003's two-phase scheduling: bottleneck nodes are attached last, as leaves.

Lee and Han (seed 003, sec. 4, figure 4) measure every edge by its completion time
``completion_ij = latency_ij + messagesize / bandwidth_ij`` (here ``C = r(M) = L + g(M)``,
:mod:`~gridcoll.algorithms.edge_costs`). A node whose *fastest incoming edge* is slow
would delay all its descendants if it sat in the middle of the tree, so:

1. For every node i except the root, ``best_i = min_{j != i} C_ji``. The bottleneck set
   ``B`` is the nodes with ``best_i`` above the average of ``best`` ("our method
   chooses nodes whose completion time is above the average of minimum completion
   time").
2. First phase: an ECEF tree over ``V - B``
   (:func:`~gridcoll.algorithms.heuristics.grow`): each step adds the edge
   ``(x, j)``, x in the tree, j in ``V - B`` not yet in it, with the least ready time
   of x plus ``C_xj``.
3. Second phase: each node i of B, in increasing ``best_i``, is attached to the node j
   of ``V - B`` where its completion time from the root, ``R_j + C_ji``, is least
   (the paper's "weight of edge(j,i) + sum of weight from root to j"; ``R_j`` is j's
   ready time after its earlier sends, which is that path sum when sends do not
   serialise). Nodes of B are never senders: they are leaves.

O(P^2) with the incremental ECEF (the paper: O(N^2 log N)).

Above :data:`~gridcoll.algorithms._hetero.COORDINATOR_RANKS` ranks, on a grid with
clusters of several ranks, the tree is grown over the coordinators (the rule kept,
on the coordinator grid) and every cluster gets MPICH's binomial tree below its
coordinator (:func:`~gridcoll.algorithms._hetero.coordinator_tree`): O(C^2).

References
----------
J. Lee, D. Han, *A two-phase scheduling algorithm for efficient collective
communications of MPICH-G2* (seed 003), sec. 4, figures 4 and 5.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gridcoll.algorithms._hetero import coordinator_tree, make_tree, tree_family
from gridcoll.algorithms.edge_costs import EdgeCosts, edge_costs
from gridcoll.algorithms.heuristics import grow
from gridcoll.algorithms.trees import Tree
from gridcoll.network.grid import Grid

__all__ = [
    "TPS",
    "TREES",
    "TwoPhase",
    "bottleneck_set",
    "tps",
    "tps_schedule",
    "tps_segmented",
    "tps_tree",
]


def bottleneck_set(costs: EdgeCosts, root: int) -> list[int]:
    """``B``: the non-root nodes whose fastest incoming edge is slower than the average
    fastest incoming edge (seed 003, sec. 4), in increasing order of that edge."""
    best = np.min(costs.completion, axis=0)  # min_j C_ji per column; the diagonal is inf
    others = [i for i in range(costs.n) if i != root]
    if not others:
        return []
    average = float(np.mean(best[others]))
    slack = 1e-12 * abs(average)  # equal values must not differ by rounding
    chosen = [i for i in others if best[i] > average + slack]
    return sorted(chosen, key=lambda i: (best[i], i))


@dataclass(frozen=True, eq=False)
class TwoPhase:
    """The result of TPS: the tree, the bottleneck set and the arrival times."""

    tree: Tree
    bottleneck: list[int]
    arrival: np.ndarray

    @property
    def completion(self) -> float:
        """The latest arrival: the broadcast's completion time in TPS's own metric."""
        return float(np.max(self.arrival))


def tps_schedule(costs: EdgeCosts, root: int) -> TwoPhase:
    """Run both phases of TPS on ``costs``; see the module docstring."""
    bottleneck = bottleneck_set(costs, root)
    rest = set(bottleneck)
    first = grow(costs, root, "ecef", [v for v in range(costs.n) if v not in rest])
    parent, order = dict(first.parent), list(first.order)
    R, arrival = first.ready.copy(), first.arrival.copy()
    senders = np.array(first.order)  # V - B: the only possible parents
    C, S = costs.completion, costs.busy
    for i in bottleneck:  # the second phase: "find j minimizing weight(j,i) + path(j)"
        k = int(np.argmin(R[senders] + C[senders, i]))
        j = int(senders[k])
        parent[i] = j
        order.append(i)
        arrival[i] = R[j] + C[j, i]
        R[j] += S[j, i]
        R[i] = arrival[i]
    return TwoPhase(make_tree(root, parent, order), bottleneck, arrival)


def tps_tree(costs: EdgeCosts, root: int) -> Tree:
    """The TPS tree of ``costs`` from ``root``."""
    return tps_schedule(costs, root).tree


def _tps_on(grid: Grid, nbytes: int, root: int = 0) -> Tree:
    """The TPS tree of ``grid`` for ``nbytes`` from ``root`` (memoised)."""
    return coordinator_tree(
        grid, ("tps", nbytes, root), root, lambda g, r: tps_tree(edge_costs(g, nbytes), r)
    )


TREES = {"tps": _tps_on}
"""Builder name -> ``tree(grid, nbytes, root)``."""


TPS = tree_family(
    "tps",
    TREES["tps"],
    "TPS: ECEF without bottleneck nodes, then them as leaves (seed 003)",
    """TPS tree.

    Notes
    -----
    Bottleneck nodes (fastest incoming completion time above the average) are left out
    of an ECEF tree and attached last, as leaves, where they complete earliest. The
    model is seed 000's per-edge ``lam(M)`` on the tree. O(P^2) to build.

    References
    ----------
    Seed 003, sec. 4 (figure 4); sec. 3.1 (packet-level transfer).

    Examples
    --------
    >>> from gridcoll.network import magpie
    >>> tps(magpie(2, 2), 1024).nmessages
    3
    """,
    module=__name__,
)
tps, tps_segmented = TPS.build, TPS.build_segmented
