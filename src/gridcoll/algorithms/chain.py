"""Chain broadcasts: each rank forwards to the next (seed 002, Table 1)."""

from __future__ import annotations

from gridcoll.algorithms._common import tree_schedule
from gridcoll.algorithms.trees import chain_tree
from gridcoll.network.grid import Grid
from gridcoll.schedule.ir import Schedule

__all__ = ["chain", "chain_rendezvous", "chain_segmented"]


def chain(grid: Grid, nbytes: int, root: int = 0, *, itemsize: int = 1) -> Schedule:
    """Chain: the whole message is passed from rank to rank.

    Notes
    -----
    Cost ``(P-1) (g(M) + L)`` (seed 002, Table 1). Builds in O(P).

    Examples
    --------
    >>> from gridcoll.network import magpie
    >>> chain(magpie(2, 2), 1024).nmessages
    3
    """
    return tree_schedule("chain", grid, nbytes, root, chain_tree, itemsize=itemsize)


def chain_rendezvous(grid: Grid, nbytes: int, root: int = 0, *, itemsize: int = 1) -> Schedule:
    """Chain with a rendezvous handshake on every hop.

    Notes
    -----
    Cost ``(P-1) (g(M) + 2 g(1) + 3 L)`` (seed 002, Table 1). Builds in O(P).
    """
    return tree_schedule(
        "chain-rendezvous", grid, nbytes, root, chain_tree, itemsize=itemsize, rendezvous=True
    )


def chain_segmented(
    grid: Grid, nbytes: int, root: int = 0, *, segment_size: int, itemsize: int = 1
) -> Schedule:
    """Segmented chain (pipeline): segments flow down the chain one behind the other.

    Notes
    -----
    Cost ``(P-1) (g(m) + L) + (k-1) g(m)`` (seed 002, Table 1). Builds in O(P k).
    """
    return tree_schedule(
        "chain-segmented",
        grid,
        nbytes,
        root,
        chain_tree,
        segment_size=segment_size,
        itemsize=itemsize,
        params={"segment_size": segment_size},
    )
