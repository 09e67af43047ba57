"""Plumbing shared by the heterogeneous tree builders: a per-grid tree cache, the
spanning-tree check, and tree -> schedule for the unsegmented and segmented variants.

Every family module (``heuristics``, ``hlot``, ``tps``, ``mateescu``, ``annealing``,
``phoenix``, ``mpich_g2``) computes one :class:`~gridcoll.algorithms.trees.Tree` per
``(grid, M, root, parameters)``, from the whole message ``M`` as the papers do, and
exports it in a ``TREES`` dict; the unsegmented builder sends the whole message down
it, the segmented one cuts it into segments that every node forwards as they arrive
(seed 003's packet-level transfer). The tuner evaluates the model at many segment
sizes, so the tree is memoised on the grid object, as :mod:`gridcoll.network.bounds`
memoises its flows: a grid is immutable, and hashing a large one is slow.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import Any

from gridcoll.algorithms._common import check_call
from gridcoll.algorithms.trees import Tree, tree_broadcast
from gridcoll.errors import ParameterError
from gridcoll.network.grid import Grid
from gridcoll.schedule.ir import Schedule, split_segments

TREE_CACHE_SIZE = 512
"""Trees kept per grid object (oldest dropped first)."""


def cached_tree(grid: Grid, key: Hashable, make: Callable[[], Tree]) -> Tree:
    """``make()``, memoised on ``grid`` under ``key`` (a Tree is never modified)."""
    memo: dict[Hashable, Tree] = grid.__dict__.setdefault("_hetero_trees", {})
    tree = memo.get(key)
    if tree is None:
        tree = make()
        if len(memo) >= TREE_CACHE_SIZE:
            memo.pop(next(iter(memo)))
        memo[key] = tree
    return tree


def make_tree(root: int, parent: Mapping[int, int], order: Sequence[int]) -> Tree:
    """A Tree from parent links; each node's children in the order they appear in
    ``order`` (the order the algorithm attached them: its send order)."""
    children: dict[int, list[int]] = {}
    for v in order:
        if v != root:
            children.setdefault(parent[v], []).append(v)
    return Tree(root, {v: tuple(k) for v, k in children.items()})


def check_spanning(tree: Tree, nranks: int, root: int) -> None:
    """Raise ParameterError unless ``tree`` spans ranks ``0..nranks-1`` from ``root``."""
    if tree.root != root:
        raise ParameterError(f"tree is rooted at {tree.root!r}, not at root {root!r}")
    nodes = tree.nodes()
    if sorted(nodes) != list(range(nranks)):
        missing = sorted(set(range(nranks)) - set(nodes))
        raise ParameterError(
            f"tree does not span the {nranks} ranks exactly once (missing {missing[:5]!r})"
        )


def tree_bcast(
    algorithm: str,
    grid: Grid,
    nbytes: int,
    root: int,
    tree: Callable[[], Tree],
    *,
    segment_size: int | None = None,
    itemsize: int = 1,
    params: Mapping[str, Any] | None = None,
) -> Schedule:
    """The broadcast of ``nbytes`` down ``tree()`` (built after the call is checked)."""
    check_call(grid, nbytes, root)
    segments = split_segments(nbytes, segment_size, itemsize)
    shape = tree()
    check_spanning(shape, grid.nranks, root)
    programs = tree_broadcast(shape, grid.nranks, len(segments))
    return Schedule(
        "bcast", algorithm, grid.nranks, root, nbytes, segments, programs, dict(params or {})
    )


# -- nominal planning costs (for the tuner's budget; calibrated on a 2020s x86 core) -----
EDGE_MODEL_S = 6e-6
"""Nominal seconds of the per-edge model per tree edge (one tuner evaluation is O(P))."""
SEARCH_EVALUATIONS = 40
"""Nominal model evaluations of the tuner's segment-size search of one builder."""
QUADRATIC_BUILD_S = 4e-8
"""Nominal seconds per rank pair of an O(P^2) tree construction."""


def planning_cost(*, segmented: bool, quadratic: bool = True) -> Callable[[Grid], float]:
    """A builder's nominal planning seconds on a grid: its tree, then one model
    evaluation (unsegmented) or a segment-size search. Deterministic: a function of
    the rank count only, so every MPI rank makes the same budget decisions."""

    def cost(grid: Grid) -> float:
        P = grid.nranks
        build = QUADRATIC_BUILD_S * P * P if quadratic else EDGE_MODEL_S * P
        return build + (SEARCH_EVALUATIONS if segmented else 1) * EDGE_MODEL_S * P

    return cost
