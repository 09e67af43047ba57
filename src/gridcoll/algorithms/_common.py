"""Shared plumbing of the broadcast builders: checks, then tree -> schedule."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from gridcoll.algorithms.trees import Tree, relative_ranks, tree_broadcast
from gridcoll.errors import ParameterError
from gridcoll.network.grid import Grid
from gridcoll.schedule.ir import Schedule, split_segments


def check_call(grid: Grid, nbytes: int, root: int) -> None:
    """Validate the arguments every builder takes; raise before anything is built."""
    grid.check_rank(root, "root")
    if not isinstance(nbytes, int) or isinstance(nbytes, bool) or nbytes <= 0:
        raise ParameterError(f"message size must be a positive number of bytes, got {nbytes!r}")


def tree_schedule(
    algorithm: str,
    grid: Grid,
    nbytes: int,
    root: int,
    shape: Callable[[Sequence[int]], Tree],
    *,
    segment_size: int | None = None,
    itemsize: int = 1,
    rendezvous: bool = False,
    params: Mapping[str, Any] | None = None,
) -> Schedule:
    """A broadcast down ``shape(ranks)`` over all ranks in MPICH's relative order."""
    check_call(grid, nbytes, root)
    segments = split_segments(nbytes, segment_size, itemsize)
    tree = shape(relative_ranks(grid.nranks, root))
    programs = tree_broadcast(tree, grid.nranks, len(segments), rendezvous=rendezvous)
    return Schedule(
        "bcast", algorithm, grid.nranks, root, nbytes, segments, programs, dict(params or {})
    )
