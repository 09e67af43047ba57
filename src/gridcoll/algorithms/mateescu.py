"""Mateescu-style broadcast: a shortest-path tree from per-edge costs (seed 001, sec. 2.1).

Seed 001 describes Mateescu's method as "the extended single source shortest path
algorithm and vertex labeling", building the tree incrementally from the message size,
"time needed for message initializations, and latencies and bandwidths of the links",
and uses it as its example of a tree that is "theoretically attractive" but ignores
that "two distinct communication edges of a broadcast tree ... can involve the same
communication resources": it may send many copies over one wide-area link (its
figure 9: many edges from one node of C2 to the nodes of C8). Implemented as that:

1. **Shortest paths.** Every rank pair ``(u, v)`` costs ``c_uv = init_u + L_uv +
   g_uv(M)`` (``init_u = os_uv(0)``, the message initiation cost; ``L + g(M)`` the
   P-LogP transfer time of the whole message). Dijkstra from the root over the
   complete graph of ranks gives every rank its earliest arrival ``d_v`` if each
   sender could send to all its children at once: the model ignores both shared links
   and the sender's serialisation.
2. **Vertex labels.** A post-order pass labels each node with the time its subtree
   needs once it holds the message, ``label_v = max_c (c_vc + label_c)``, and each
   node sends to its children in decreasing ``c_vc + label_c`` (the longest subtree
   first).

On routes whose costs obey the triangle inequality the shortest path is the direct
edge, so the tree is nearly flat: the root sends the whole message to almost every
rank itself, which is exactly the contention seed 001 measures. O(P^2).

Above :data:`~gridcoll.algorithms._hetero.COORDINATOR_RANKS` ranks, on a grid with
clusters of several ranks, the tree is grown over the coordinators (the rule kept,
on the coordinator grid) and every cluster gets MPICH's binomial tree below its
coordinator (:func:`~gridcoll.algorithms._hetero.coordinator_tree`): O(C^2).

References
----------
G. Mateescu, *A method for MPI broadcast in computational grids*, IPDPS 2005, as seed
001 (Gupta and Vadhiyar), sec. 2.1 and 3, describes it.
"""

from __future__ import annotations

import numpy as np

from gridcoll.algorithms._hetero import coordinator_tree, tree_family
from gridcoll.algorithms.edge_costs import edge_costs
from gridcoll.algorithms.trees import Tree
from gridcoll.network.grid import Grid

__all__ = [
    "MATEESCU",
    "TREES",
    "mateescu",
    "mateescu_segmented",
    "mateescu_tree",
    "shortest_path_tree",
]


def _init_costs(grid: Grid) -> np.ndarray:
    """``init_uv = os_uv(0)`` per rank pair (the initiation cost of a message)."""
    n = grid.nclusters
    per = np.empty((n, n))
    for a in range(n):
        for b in range(n):
            net = grid.clusters[a].lan if a == b else grid.wan(a, b)
            per[a, b] = net.os(0)
    cl = np.asarray(grid.cluster_of)
    return per[np.ix_(cl, cl)]


def shortest_path_tree(cost: np.ndarray, root: int) -> Tree:
    """Dijkstra from ``root`` on the dense matrix ``cost``, then children ordered by
    post-order labels, longest subtree first. O(P^2); ties to the lower rank."""
    n = cost.shape[0]
    dist = np.full(n, np.inf)
    dist[root] = 0.0
    parent = np.full(n, -1)
    done = np.zeros(n, dtype=bool)
    for _ in range(n):
        free = np.where(done, np.inf, dist)
        u = int(np.argmin(free))
        if not np.isfinite(free[u]):
            break
        done[u] = True
        via = dist[u] + cost[u]
        better = ~done & (via < dist)
        dist[better], parent[better] = via[better], u
    kids: dict[int, list[int]] = {}
    for v in np.argsort(dist, kind="stable"):  # parents before children
        if v != root:
            kids.setdefault(int(parent[v]), []).append(int(v))
    label = np.zeros(n)
    for v in np.argsort(-dist, kind="stable"):  # post-order: children first
        for c in kids.get(int(v), ()):
            label[v] = max(label[v], cost[v, c] + label[c])
    children = {
        v: tuple(sorted(cs, key=lambda c, v=v: (-(cost[v, c] + label[c]), c)))
        for v, cs in kids.items()
    }
    return Tree(root, children)


def mateescu_tree(grid: Grid, nbytes: int, root: int = 0) -> Tree:
    """The Mateescu-style tree of ``grid`` for ``nbytes`` from ``root``."""
    cost = _init_costs(grid) + edge_costs(grid, nbytes).completion  # init + L + g(M)
    return shortest_path_tree(cost, root)


def _mateescu_on(grid: Grid, nbytes: int, root: int = 0) -> Tree:
    return coordinator_tree(
        grid, ("mateescu", nbytes, root), root, lambda g, r: mateescu_tree(g, nbytes, r)
    )


TREES = {"mateescu": _mateescu_on}
"""Builder name -> ``tree(grid, nbytes, root)``."""


MATEESCU = tree_family(
    "mateescu",
    TREES["mateescu"],
    "shortest-path tree from per-edge costs, shared links ignored (seed 001, 2.1)",
    """Mateescu-style shortest-path tree.

    Notes
    -----
    Per-edge costs ``os(0) + L + g(M)``, Dijkstra, post-order labels for the send
    order; shared links and the sender's serialisation are ignored when the tree is
    built (the registered model, seed 000's per-edge ``lam(M)``, counts both). O(P^2).

    References
    ----------
    Seed 001, sec. 2.1 and figure 9.

    Examples
    --------
    >>> from gridcoll.network import magpie
    >>> [op.peer for op in mateescu(magpie(2, 2), 2**20).programs[0]]  # flat
    [2, 3, 1]
    """,
    module=__name__,
)
mateescu, mateescu_segmented = MATEESCU.build, MATEESCU.build_segmented
