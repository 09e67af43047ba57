"""WAN-aware two-layer broadcasts of MagPIe (seed 000, sec. 3.1 and 3.1.2).

Every cluster has one *coordinator* (:meth:`Grid.coordinators`): the root in its own
cluster, the lowest rank elsewhere. The coordinators form the wide-area layer, and each
coordinator is the root of a tree over its own cluster (the local-area layer), so the
message crosses the WAN only once per cluster and no path holds two wide-area hops.

* :func:`magpie_original` - MagPIe's original broadcast: a flat WAN tree and binomial
  LAN trees, whole messages, WAN phase before LAN phase.
* :func:`magpie_sequential` - the sequential composition ``T = T_w + T_l`` of two
  segmented d-ary broadcasts, each with its own segment size and degree.
* :func:`magpie_segmented` - the pipelined two-layer broadcast: one segment size, the
  LAN trees grafted below the WAN tree, coordinators forwarding each segment at once.
"""

from __future__ import annotations

from gridcoll.algorithms._common import check_call
from gridcoll.algorithms.trees import (
    Tree,
    append_tree_broadcast,
    binomial_tree,
    dary_tree,
    flat_tree,
    refine_segments,
    tree_broadcast,
)
from gridcoll.errors import ParameterError
from gridcoll.network.grid import Grid
from gridcoll.schedule.ir import Op, Schedule, split_segments

__all__ = [
    "check_degree",
    "cluster_ranks",
    "coordinator_order",
    "lan_trees",
    "magpie_original",
    "magpie_segmented",
    "magpie_sequential",
    "original_tree",
    "two_layer_tree",
    "wan_tree",
]


def check_degree(degree: object, name: str) -> int:
    """Return ``degree`` if it is an integer >= 1, else raise ParameterError."""
    if not isinstance(degree, int) or isinstance(degree, bool) or degree < 1:
        raise ParameterError(f"{name} must be an integer >= 1, got {degree!r}")
    return degree


def coordinator_order(grid: Grid, root: int) -> list[int]:
    """The coordinators, the root first, then the others by cluster index."""
    coordinators = grid.coordinators(root)
    home = grid.cluster_of[root]
    return [root] + [c for i, c in enumerate(coordinators) if i != home]


def cluster_ranks(grid: Grid, cluster: int, coordinator: int) -> list[int]:
    """The ranks of ``cluster``, its coordinator first, then the others in rank order."""
    return [coordinator] + [r for r in grid.members[cluster] if r != coordinator]


def lan_trees(grid: Grid, root: int, shape) -> list[Tree]:
    """One tree of the given shape per cluster, rooted at its coordinator."""
    return [
        shape(cluster_ranks(grid, c, coordinator))
        for c, coordinator in enumerate(grid.coordinators(root))
    ]


def wan_tree(grid: Grid, root: int, degree: int) -> Tree:
    """The complete ``degree``-ary tree over the coordinators, root first."""
    return dary_tree(coordinator_order(grid, root), degree)


def original_tree(grid: Grid, root: int) -> Tree:
    """MagPIe's original shape: flat WAN tree, binomial LAN trees below it."""
    return flat_tree(coordinator_order(grid, root)).graft(lan_trees(grid, root, binomial_tree))


def two_layer_tree(grid: Grid, root: int, wan_degree: int, lan_degree: int) -> Tree:
    """The pipelined two-layer shape: a d_w-ary WAN tree, d_l-ary LAN trees grafted
    below each coordinator (which forwards to WAN children first)."""
    return wan_tree(grid, root, wan_degree).graft(
        lan_trees(grid, root, lambda ranks: dary_tree(ranks, lan_degree))
    )


def magpie_original(grid: Grid, nbytes: int, root: int = 0, *, itemsize: int = 1) -> Schedule:
    """MagPIe's original broadcast: flat WAN tree of coordinators, binomial LAN trees.

    The root sends the whole message to each other cluster's coordinator, one after the
    other; then the root and every coordinator broadcast it inside their cluster along
    a binomial tree. No segmentation; the root makes all its WAN sends before its LAN
    sends.

    Parameters
    ----------
    grid : Grid
    nbytes : int
        ``M``, the message size in bytes (a whole number of ``itemsize`` elements).
    root : int
    itemsize : int
        Size of the datatype in bytes.

    Returns
    -------
    Schedule
        One segment; ``P_w - 1`` WAN messages and ``P - P_w`` LAN messages.

    Raises
    ------
    ParameterError
        For a root out of range, a size <= 0 or not a whole number of elements.

    Notes
    -----
    P-LogP cost (seed 000, sec. 3.1.1, flat WAN tree; seed 002, Table 1, binomial):
    ``T = (P_w - 2) s_w(M) + r_w(M) + floor(log2 N) g_l(M) + ceil(log2 N) L_l`` with
    ``s_w(M) = max(g_l(M), os_w(M))``; for long messages ``os_w(M) ~ g_w(M)``, so the
    root uses the WAN links one at a time. Builds in O(P).

    References
    ----------
    Kielmann et al., *Network performance-aware collective communication for clustered
    wide area systems* (seed 000), sec. 3.1 and 3.1.3.

    Examples
    --------
    >>> from gridcoll.network import magpie
    >>> magpie_original(magpie(2, 2), 1024).programs[0]
    (Send(peer=2, segments=(0,)), Send(peer=1, segments=(0,)))
    """
    check_call(grid, nbytes, root)
    segments = split_segments(nbytes, None, itemsize)
    programs = tree_broadcast(original_tree(grid, root), grid.nranks, len(segments))
    return Schedule("bcast", "magpie-original", grid.nranks, root, nbytes, segments, programs)


def magpie_sequential(
    grid: Grid,
    nbytes: int,
    root: int = 0,
    *,
    wan_segment_size: int,
    wan_degree: int,
    lan_segment_size: int,
    lan_degree: int,
    itemsize: int = 1,
) -> Schedule:
    """Sequential two-layer broadcast: a segmented WAN tree, then segmented LAN trees.

    The coordinators first take part in a segmented broadcast down a complete tree of
    degree ``wan_degree`` (coordinators ordered root first, then by cluster index);
    only when a coordinator has received and forwarded every WAN segment does it
    broadcast the message in its cluster, down a complete ``lan_degree``-ary tree with
    segments of ``lan_segment_size`` bytes.

    Parameters
    ----------
    grid : Grid
    nbytes : int
        ``M``, the message size in bytes.
    root : int
    wan_segment_size, lan_segment_size : int
        ``m_w`` and ``m_l``: segment sizes of the two phases (multiples of ``itemsize``).
    wan_degree, lan_degree : int
        ``d_w`` and ``d_l`` (>= 1; larger than the layer needs means a flat tree).
    itemsize : int

    Returns
    -------
    Schedule
        Its segments are the common refinement of the two cuts (a boundary wherever
        either phase has one); a WAN or LAN message carries the refined segments that
        cover its range.

    Raises
    ------
    ParameterError
        For a bad root or size, a segment size <= 0 or not a multiple of ``itemsize``,
        a degree < 1.

    Notes
    -----
    ``T = T_w + T_l = (k_w - 1) gamma_w(m_w) + lam_w(m_w) + (k_l - 1) gamma_l(m_l) +
    lam_l(m_l)`` (seed 000, sec. 3.1.2), each phase bounded as in sec. 3.1.1:
    ``gamma <= max(g, or + d s)``, ``lam <= h ((d-1) s + r)``, with ``s_w``, ``r_w`` on
    the WAN. Builds in O(P (k_w + k_l)).

    References
    ----------
    Seed 000, sec. 3.1.2 ("sequential composition, as performed in the original MagPIe
    library").

    Examples
    --------
    >>> from gridcoll.network import magpie
    >>> s = magpie_sequential(magpie(2, 2), 1000, wan_segment_size=400, wan_degree=1,
    ...                       lan_segment_size=500, lan_degree=1)
    >>> s.segments
    ((0, 400), (400, 100), (500, 300), (800, 200))
    >>> [(type(op).__name__, op.peer, op.segments) for op in s.programs[2]]
    ... # doctest: +NORMALIZE_WHITESPACE
    [('Recv', 0, (0,)), ('Recv', 0, (1, 2)), ('Recv', 0, (3,)),
     ('Send', 3, (0, 1)), ('Send', 3, (2, 3))]
    """
    check_call(grid, nbytes, root)
    check_degree(wan_degree, "wan_degree")
    check_degree(lan_degree, "lan_degree")
    wan_cut = split_segments(nbytes, wan_segment_size, itemsize)
    lan_cut = split_segments(nbytes, lan_segment_size, itemsize)
    segments, (wan_messages, lan_messages) = refine_segments(wan_cut, lan_cut)
    programs: list[list[Op]] = [[] for _ in range(grid.nranks)]
    # T_w: the coordinators' segmented d_w-ary broadcast ...
    append_tree_broadcast(programs, wan_tree(grid, root, wan_degree), wan_messages)
    # ... then T_l: each coordinator's segmented d_l-ary broadcast in its cluster.
    for lan in lan_trees(grid, root, lambda ranks: dary_tree(ranks, lan_degree)):
        append_tree_broadcast(programs, lan, lan_messages)
    params = {
        "wan_segment_size": wan_segment_size,
        "wan_degree": wan_degree,
        "lan_segment_size": lan_segment_size,
        "lan_degree": lan_degree,
    }
    return Schedule(
        "bcast",
        "magpie-sequential",
        grid.nranks,
        root,
        nbytes,
        segments,
        tuple(tuple(p) for p in programs),
        params,
    )


def magpie_segmented(
    grid: Grid,
    nbytes: int,
    root: int = 0,
    *,
    segment_size: int,
    wan_degree: int,
    lan_degree: int,
    itemsize: int = 1,
) -> Schedule:
    """Pipelined two-layer broadcast: one segment size, LAN trees grafted on the WAN tree.

    The coordinators (root first, then by cluster index) form a complete
    ``wan_degree``-ary tree; below each hangs a complete ``lan_degree``-ary tree over its
    cluster. Every rank forwards each segment as soon as it has it; a coordinator sends
    it first to its WAN children, then to its LAN children, so the two layers overlap
    and several WAN links carry different segments at once.

    Parameters
    ----------
    grid : Grid
    nbytes : int
        ``M``, the message size in bytes.
    root : int
    segment_size : int
        ``m``, the same in both layers "so coordinators do not need to re-assemble
        segments" (a multiple of ``itemsize``).
    wan_degree, lan_degree : int
        ``d_w`` and ``d_l`` (>= 1).
    itemsize : int

    Returns
    -------
    Schedule

    Raises
    ------
    ParameterError
        For a bad root or size, segment size or degree.

    Notes
    -----
    ``T = (k - 1) gamma(m) + lam_w(m) + lam_l(m)`` with
    ``gamma(m) <= max(g_w(m), or_w(m) + d_w s_w(m) + d_l s_l(m))`` (seed 000,
    sec. 3.1.2). Every segment crosses the WAN exactly once per remote cluster. Builds
    in O(P k).

    References
    ----------
    Seed 000, sec. 3.1.2 (pipelined two-layer broadcast) and 3.1.3 (1 MB to 8 clusters
    in 1079 ms instead of 7425 ms).

    Examples
    --------
    >>> from gridcoll.network import magpie
    >>> s = magpie_segmented(magpie(2, 2), 1024, segment_size=512, wan_degree=1, lan_degree=1)
    >>> [(op.peer, op.segments) for op in s.programs[0]]  # WAN child 2 first, then LAN 1
    [(2, (0,)), (1, (0,)), (2, (1,)), (1, (1,))]
    """
    check_call(grid, nbytes, root)
    check_degree(wan_degree, "wan_degree")
    check_degree(lan_degree, "lan_degree")
    segments = split_segments(nbytes, segment_size, itemsize)
    tree = two_layer_tree(grid, root, wan_degree, lan_degree)
    programs = tree_broadcast(tree, grid.nranks, len(segments))
    params = {"segment_size": segment_size, "wan_degree": wan_degree, "lan_degree": lan_degree}
    return Schedule(
        "bcast", "magpie-segmented", grid.nranks, root, nbytes, segments, programs, params
    )
