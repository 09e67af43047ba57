"""Binomial-tree broadcasts, MPICH's shape (seed 002, Table 1)."""

from __future__ import annotations

from gridcoll.algorithms._common import tree_schedule
from gridcoll.algorithms.trees import binomial_tree
from gridcoll.network.grid import Grid
from gridcoll.schedule.ir import Schedule

__all__ = ["binomial", "binomial_rendezvous", "binomial_segmented"]


def binomial(grid: Grid, nbytes: int, root: int = 0, *, itemsize: int = 1) -> Schedule:
    """Binomial tree: in each round every rank holding the message sends it to one more.

    Notes
    -----
    Cost ``floor(log2 P) g(M) + ceil(log2 P) L`` (seed 002, Table 1). Builds in O(P).

    Examples
    --------
    >>> from gridcoll.network import magpie
    >>> binomial(magpie(2, 2), 1024).programs[0]
    (Send(peer=2, segments=(0,)), Send(peer=1, segments=(0,)))
    """
    return tree_schedule("binomial", grid, nbytes, root, binomial_tree, itemsize=itemsize)


def binomial_rendezvous(grid: Grid, nbytes: int, root: int = 0, *, itemsize: int = 1) -> Schedule:
    """Binomial tree with a rendezvous handshake on every edge.

    Notes
    -----
    Cost ``floor(log2 P) g(M) + ceil(log2 P) (2 g(1) + 3 L)`` (seed 002, Table 1).
    """
    return tree_schedule(
        "binomial-rendezvous", grid, nbytes, root, binomial_tree, itemsize=itemsize, rendezvous=True
    )


def binomial_segmented(
    grid: Grid, nbytes: int, root: int = 0, *, segment_size: int, itemsize: int = 1
) -> Schedule:
    """Segmented binomial tree: every rank forwards each segment as it arrives.

    Notes
    -----
    Cost ``floor(log2 P) k g(m) + ceil(log2 P) L`` (seed 002, Table 1). O(P k).
    """
    return tree_schedule(
        "binomial-segmented",
        grid,
        nbytes,
        root,
        binomial_tree,
        segment_size=segment_size,
        itemsize=itemsize,
        params={"segment_size": segment_size},
    )
