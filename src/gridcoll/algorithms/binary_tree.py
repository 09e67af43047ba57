"""The binary-tree broadcast (seed 002, Table 1)."""

from __future__ import annotations

from gridcoll.algorithms._common import tree_schedule
from gridcoll.algorithms.trees import binary_tree
from gridcoll.network.grid import Grid
from gridcoll.schedule.ir import Schedule

__all__ = ["binary"]


def binary(grid: Grid, nbytes: int, root: int = 0, *, itemsize: int = 1) -> Schedule:
    """Binary tree: each rank forwards the whole message to two children.

    Notes
    -----
    Cost at most ``ceil(log2 P) (2 g(M) + L)`` (seed 002, Table 1). Builds in O(P).
    """
    return tree_schedule("binary", grid, nbytes, root, binary_tree, itemsize=itemsize)
