"""Flat-tree broadcasts: the root sends to every rank directly (seed 002, Table 1)."""

from __future__ import annotations

from gridcoll.algorithms._common import tree_schedule
from gridcoll.algorithms.trees import flat_tree
from gridcoll.network.grid import Grid
from gridcoll.schedule.ir import Schedule

__all__ = ["flat", "flat_rendezvous", "flat_segmented"]


def flat(grid: Grid, nbytes: int, root: int = 0, *, itemsize: int = 1) -> Schedule:
    """Flat tree: the root sends the whole message to each rank in turn.

    Notes
    -----
    P-LogP cost ``(P-1) g(M) + L`` (seed 002, Table 1). Builds in O(P).

    References
    ----------
    Barchet-Estefanel and Mounié, *Performance characterisation of intra-cluster
    collective communications* (seed 002), sec. 3, Table 1.

    Examples
    --------
    >>> from gridcoll.network import magpie
    >>> flat(magpie(2, 2), 1024).nmessages
    3
    """
    return tree_schedule("flat", grid, nbytes, root, flat_tree, itemsize=itemsize)


def flat_rendezvous(grid: Grid, nbytes: int, root: int = 0, *, itemsize: int = 1) -> Schedule:
    """Flat tree with a rendezvous handshake before each transfer.

    Notes
    -----
    Cost ``(P-1) g(M) + 2 g(1) + 3 L`` (seed 002, Table 1). Builds in O(P).
    """
    return tree_schedule(
        "flat-rendezvous", grid, nbytes, root, flat_tree, itemsize=itemsize, rendezvous=True
    )


def flat_segmented(
    grid: Grid, nbytes: int, root: int = 0, *, segment_size: int, itemsize: int = 1
) -> Schedule:
    """Flat tree sending the message as k segments of ``segment_size`` bytes.

    Notes
    -----
    Cost ``(P-1) k g(m) + L`` (seed 002, Table 1). Builds in O(P k).
    """
    return tree_schedule(
        "flat-segmented",
        grid,
        nbytes,
        root,
        flat_tree,
        segment_size=segment_size,
        itemsize=itemsize,
        params={"segment_size": segment_size},
    )
