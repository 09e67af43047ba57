"""Bhat, Raghavendra and Prasanna's broadcast heuristics: FEF, ECEF and look-ahead.

The three grow a tree greedily from the root (cited by seed 003, sec. 2.2 and Table 1).
``A`` is the set of ranks that hold the message, ``B`` those that do not; every rank i
of A has a *ready time* ``R_i``, when it can start its next send. At each step one edge
``(i, j)``, i in A, j in B, is chosen and scheduled at ``R_i``: j receives at
``R_i + C_ij`` (:mod:`~gridcoll.algorithms.edge_costs`: ``C = r(M) = L + g(M)``), i is
busy for ``S_ij = max(g_l(M), os(M))``, and j joins A. The rules differ in the edge:

=================  =========================================================  ========
rule               edge chosen                                                cost
=================  =========================================================  ========
FEF                the fastest edge, least ``C_ij`` ("fastest edge first")    O(P^2)
ECEF               the earliest completing, least ``R_i + C_ij``              O(P^2)
look-ahead         least ``R_i + C_ij + LA_j``, ``LA_j = min_{k in B} C_jk``  O(P^2)
=================  =========================================================  ========

``LA_j`` is how fast j could pass the message on once it has it: a node that is
cheap to reach but slow to send from is not taken first. Ties go to the lower rank.
The order in which a node's edges were chosen is its send order; the predicted
arrival of every rank is the per-edge model's ``lam`` without shared links
(:func:`gridcoll.models.tree_model.tree_time`), which the builders' models evaluate
with the links.

Each step costs O(P) numpy work: the best sender of every rank of B is kept, and only
the ranks whose best sender was just delayed are re-examined (the paper's
O(P^2 log P) and O(P^3) become O(P^2) amortised in practice).

Above :data:`~gridcoll.algorithms._hetero.COORDINATOR_RANKS` ranks, on a grid with
clusters of several ranks, the tree is grown over the coordinators (the rule kept,
on the coordinator grid) and every cluster gets MPICH's binomial tree below its
coordinator (:func:`~gridcoll.algorithms._hetero.coordinator_tree`): O(C^2).

References
----------
P. B. Bhat, C. S. Raghavendra, V. K. Prasanna, *Efficient collective communication in
distributed heterogeneous systems*, ICDCS 1999 (J. Parallel Distrib. Comput. 63, 2003).
Lee and Han (seed 003), sec. 2.2 and Table 1.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from gridcoll.algorithms._hetero import coordinator_tree, make_tree, tree_family
from gridcoll.algorithms.edge_costs import EdgeCosts, edge_costs
from gridcoll.algorithms.trees import Tree
from gridcoll.errors import ParameterError, Unfeasible
from gridcoll.network.grid import Grid

__all__ = [
    "ECEF",
    "FEF",
    "LOOK_AHEAD",
    "RULES",
    "TREES",
    "Growth",
    "ecef",
    "ecef_segmented",
    "ecef_tree",
    "fef",
    "fef_segmented",
    "fef_tree",
    "grow",
    "look_ahead",
    "look_ahead_segmented",
    "lookahead_tree",
]

RULES = ("fef", "ecef", "look-ahead")
"""The edge-selection rules of :func:`grow`."""


@dataclass(frozen=True, eq=False)
class Growth:
    """The outcome of a greedy growth: the tree and its schedule's times."""

    root: int
    parent: dict[int, int]
    """Parent of every reached non-root rank."""
    order: list[int]
    """Ranks in the order they were reached, the root first."""
    ready: np.ndarray
    """``R_i``: when each reached rank is free after its sends (inf if not reached)."""
    arrival: np.ndarray
    """When each rank receives the message (0 at the root, inf if not reached)."""

    @property
    def tree(self) -> Tree:
        """The tree, children in send order."""
        return make_tree(self.root, self.parent, self.order)

    @property
    def completion(self) -> float:
        """The latest arrival over the reached ranks."""
        return float(max(self.arrival[v] for v in self.order))


def _members(costs: EdgeCosts, root: int, nodes: Iterable[int] | None) -> np.ndarray:
    n = costs.n
    if not 0 <= root < n:
        raise ParameterError(f"root {root!r} is out of range for {n} ranks")
    in_b = np.zeros(n, dtype=bool)
    if nodes is None:
        in_b[:] = True
    else:
        for v in nodes:
            if not 0 <= v < n:
                raise ParameterError(f"rank {v!r} is out of range for {n} ranks")
            in_b[v] = True
    in_b[root] = False
    return in_b


def _lookahead_init(C: np.ndarray, in_b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``LA_j = min_{k in B, k != j} C_jk`` for j in B (0 when j is B's only rank)."""
    n = C.shape[0]
    la, la_arg = np.zeros(n), np.full(n, -1)
    idx = np.nonzero(in_b)[0]
    if idx.size > 1:
        sub = C[np.ix_(idx, idx)]  # the diagonal is inf
        k = np.argmin(sub, axis=1)
        la[idx] = sub[np.arange(idx.size), k]
        la_arg[idx] = idx[k]
    return la, la_arg


def _refresh_lookahead(C, in_b, la, la_arg, gone: int) -> None:
    """``gone`` left B: recompute LA of the ranks whose nearest B rank it was."""
    rows = np.nonzero(in_b & (la_arg == gone))[0]
    if rows.size == 0:
        return
    cols = np.nonzero(in_b)[0]
    sub = C[np.ix_(rows, cols)]
    if cols.size > 1:
        k = np.argmin(sub, axis=1)
        la[rows] = sub[np.arange(rows.size), k]
        la_arg[rows] = cols[k]
    else:  # only the row itself is left in B
        la[rows], la_arg[rows] = 0.0, -1


def grow(
    costs: EdgeCosts, root: int, rule: str = "ecef", nodes: Iterable[int] | None = None
) -> Growth:
    """Grow a broadcast tree over ``nodes`` (default: all ranks) from ``root``.

    Parameters
    ----------
    costs : EdgeCosts
        ``C`` (arrival after the send starts) and ``S`` (sender busy) per rank pair.
    root : int
    rule : {"fef", "ecef", "look-ahead"}
        The edge-selection rule (module docstring).
    nodes : iterable of int, optional
        The ranks to reach; the root is always in. TPS grows over a subset.

    Returns
    -------
    Growth

    Raises
    ------
    ParameterError
        For an unknown rule or a rank out of range.
    Unfeasible
        If some rank cannot be reached (an infinite cost everywhere).
    """
    if rule not in RULES:
        raise ParameterError(f"unknown rule {rule!r}; choose one of {RULES}")
    C, S = costs.completion, costs.busy
    in_b = _members(costs, root, nodes)
    in_a = np.zeros_like(in_b)
    in_a[root] = True
    R = np.full(costs.n, np.inf)
    R[root] = 0.0
    arrival = R.copy()
    timed = rule != "fef"  # ECEF and look-ahead add the sender's ready time
    best = np.where(in_b, C[root] + (R[root] if timed else 0.0), np.inf)
    arg = np.full(costs.n, root)
    if rule == "look-ahead":
        la, la_arg = _lookahead_init(C, in_b)
    parent: dict[int, int] = {}
    order = [root]
    for _ in range(int(in_b.sum())):
        score = best + la if rule == "look-ahead" else best
        j = int(np.argmin(score))
        if not np.isfinite(score[j]) or not in_b[j]:
            raise Unfeasible(f"rank {j} cannot be reached from root {root} (infinite cost)")
        i = int(arg[j])
        parent[j] = i
        order.append(j)
        arrival[j] = R[i] + C[i, j]  # j receives R_i + C_ij after i's earlier sends
        R[i] += S[i, j]  # i is busy for S_ij
        R[j] = arrival[j]
        in_b[j], in_a[j], best[j] = False, True, np.inf
        if timed:  # i is later now: re-examine the ranks whose best sender it was
            cols = np.nonzero(in_b & (arg == i))[0]
            if cols.size:
                rows = np.nonzero(in_a)[0]
                K = R[rows, None] + C[np.ix_(rows, cols)]
                k = np.argmin(K, axis=0)
                best[cols] = K[k, np.arange(cols.size)]
                arg[cols] = rows[k]
        offer = C[j] + (R[j] if timed else 0.0)  # j is a sender now
        better = in_b & (offer < best)
        best[better], arg[better] = offer[better], j
        if rule == "look-ahead":
            _refresh_lookahead(C, in_b, la, la_arg, j)
    return Growth(root, parent, order, R, arrival)


def fef_tree(costs: EdgeCosts, root: int, nodes: Iterable[int] | None = None) -> Tree:
    """FEF: always the fastest edge from the ranks that hold the message."""
    return grow(costs, root, "fef", nodes).tree


def ecef_tree(costs: EdgeCosts, root: int, nodes: Iterable[int] | None = None) -> Tree:
    """ECEF: always the edge that completes earliest, ``R_i + C_ij``."""
    return grow(costs, root, "ecef", nodes).tree


def lookahead_tree(costs: EdgeCosts, root: int, nodes: Iterable[int] | None = None) -> Tree:
    """ECEF with look-ahead: least ``R_i + C_ij + min_{k in B} C_jk``."""
    return grow(costs, root, "look-ahead", nodes).tree


def _on_grid(rule: str):
    def tree(grid: Grid, nbytes: int, root: int = 0) -> Tree:
        return coordinator_tree(
            grid,
            (rule, nbytes, root),
            root,
            lambda g, r: grow(edge_costs(g, nbytes), r, rule).tree,
        )

    tree.__doc__ = f"The {rule} tree of ``grid`` for ``nbytes`` from ``root`` (memoised)."
    return tree


TREES = {rule: _on_grid(rule) for rule in RULES}
"""Builder name -> ``tree(grid, nbytes, root)``: the tree each builder sends down."""


FEF = tree_family(
    "fef",
    TREES["fef"],
    "FEF: fastest edge first (Bhat et al. 1999)",
    """FEF tree (fastest edge first)

    Notes
    -----
    The tree is grown from the costs of the whole message (:func:`grow`); the model is
    seed 000's per-edge ``lam(M)`` on it. O(P^2) to build.

    References
    ----------
    Bhat, Raghavendra, Prasanna (1999); seed 003, sec. 2.2.

    Examples
    --------
    >>> from gridcoll.network import magpie
    >>> fef(magpie(2, 2), 1024).nmessages
    3
    """,
    module=__name__,
)
fef, fef_segmented = FEF.build, FEF.build_segmented

ECEF = tree_family(
    "ecef",
    TREES["ecef"],
    "ECEF: earliest completing edge first (Bhat et al.)",
    """ECEF tree (earliest completing edge first)

    Notes
    -----
    Chooses ``(i, j)`` minimising ``R_i + C_ij``: the sender's ready time plus the
    edge's completion time (seed 003, Table 1). O(P^2) to build.

    References
    ----------
    Bhat, Raghavendra, Prasanna (1999); seed 003, sec. 2.2.

    Examples
    --------
    >>> from gridcoll.network import magpie
    >>> s = ecef(magpie(2, 2), 1024)
    >>> [op.peer for op in s.programs[0]]  # the LAN rank first (48 us), then the WAN
    [1, 2]
    """,
    module=__name__,
)
ecef, ecef_segmented = ECEF.build, ECEF.build_segmented

LOOK_AHEAD = tree_family(
    "look-ahead",
    TREES["look-ahead"],
    "ECEF with look-ahead: prefers receivers that forward fast (Bhat et al.)",
    """ECEF with look-ahead

    Notes
    -----
    Chooses ``(i, j)`` minimising ``R_i + C_ij + LA_j`` with ``LA_j`` the fastest edge
    from j to a rank still without the message (seed 003, Table 1: "Ready time +
    Communication time + Look-ahead value"). O(P^2) amortised.

    References
    ----------
    Bhat, Raghavendra, Prasanna (1999); seed 003, sec. 2.2.
    """,
    module=__name__,
)
look_ahead, look_ahead_segmented = LOOK_AHEAD.build, LOOK_AHEAD.build_segmented
