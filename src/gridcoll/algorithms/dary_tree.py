"""The segmented d-ary tree of seed 000, sec. 3.1.1: any degree, minimal height."""

from __future__ import annotations

from functools import partial

from gridcoll.algorithms._common import tree_schedule
from gridcoll.algorithms.trees import dary_tree
from gridcoll.network.grid import Grid
from gridcoll.schedule.ir import Schedule

__all__ = ["dary_segmented"]


def dary_segmented(
    grid: Grid,
    nbytes: int,
    root: int = 0,
    *,
    segment_size: int,
    degree: int,
    itemsize: int = 1,
) -> Schedule:
    """Segmented broadcast down a complete tree of degree ``d`` and minimal height ``h``.

    Notes
    -----
    ``T = (k-1) gamma(m) + lam(m)`` with ``gamma(m) <= max(g(m), or(m) + d s(m))`` and
    ``lam(m) <= h ((d-1) s(m) + r(m))`` (seed 000, sec. 3.1.1). d = 1 is the chain,
    d = P-1 the flat tree. The tree is built in O(P) "by keeping track of each node's
    degree while assigning receivers to senders"; the programs in O(P k).

    References
    ----------
    Kielmann et al., *Network performance-aware collective communication for clustered
    wide area systems* (seed 000), sec. 3.1.1.
    """
    return tree_schedule(
        "dary-segmented",
        grid,
        nbytes,
        root,
        partial(dary_tree, degree=degree),
        segment_size=segment_size,
        itemsize=itemsize,
        params={"segment_size": segment_size, "degree": degree},
    )
