"""Gather builders: every rank sends its block (``b = nbytes`` bytes) to the root.

The data space is ``P`` blocks of ``b`` bytes, block ``i`` held by rank ``i`` at the
start; the root must end with all of them. ``nbytes`` is one rank's count, as MPI's
``sendcount``. Each builder mirrors the scatter of the same name
(:mod:`gridcoll.algorithms.scatter`): "Gather is the inverse operation of scatter"
(seed 000, sec. 3.3).

* :func:`flat_gather` - every rank sends to the root directly;
* :func:`chain_gather` - each rank adds its block to what it got from the next rank;
* :func:`chain_pipelined_gather` - the same chain, one segment per message, each rank
  sending its own segments first and then forwarding the stream from behind;
* :func:`binomial_gather` - MPICH's binomial tree;
* :func:`magpie_original_gather` - local gathers at the coordinators, then one whole
  message per cluster over the WAN;
* :func:`magpie_segmented_gather` - seed 000's segmented flat tree, the root taking
  segments round-robin over the clusters;
* :func:`cluster_aware_gather` - coordinators combine each round's segments of their
  cluster into one WAN message.
"""

from __future__ import annotations

from gridcoll.algorithms._collective import (
    Blocks,
    check_blocks,
    check_segment_size,
    finish,
)
from gridcoll.algorithms.magpie import cluster_ranks, coordinator_order
from gridcoll.algorithms.scatter import round_robin_order
from gridcoll.algorithms.trees import relative_ranks
from gridcoll.network.grid import Grid
from gridcoll.schedule.ir import Op, Recv, Schedule, Send

__all__ = [
    "binomial_gather",
    "chain_gather",
    "chain_pipelined_gather",
    "cluster_aware_gather",
    "flat_gather",
    "magpie_original_gather",
    "magpie_segmented_gather",
]


def _empty(P: int) -> list[list[Op]]:
    return [[] for _ in range(P)]


def flat_gather(grid: Grid, nbytes: int, root: int = 0, *, itemsize: int = 1) -> Schedule:
    """Flat-tree gather: every rank sends its block to the root at once.

    The root receives in root-relative rank order.

    Parameters
    ----------
    grid : Grid
    nbytes : int
        ``b``: bytes per rank (a whole number of ``itemsize`` elements).
    root : int
    itemsize : int

    Returns
    -------
    Schedule

    Raises
    ------
    ParameterError
        For a bad root or a size <= 0 or not whole elements.

    Notes
    -----
    ``T = (P-1) g(b) + L`` on one network (seed 002, Table 2 mirrored: the root's
    incoming link serialises the messages). Builds in O(P).

    References
    ----------
    Seed 002, sec. 4 ("once modelling the Scatter we have a good approximation with
    the Gather model"); seed 000, sec. 3.3.

    Examples
    --------
    >>> from gridcoll.network import magpie
    >>> [op.peer for op in flat_gather(magpie(2, 2), 100, root=2).programs[2]]
    [3, 0, 1]
    """
    check_blocks(grid, nbytes, root, itemsize)
    P = grid.nranks
    blocks = Blocks.cut(P, nbytes, None, itemsize)
    programs = _empty(P)
    for r in relative_ranks(P, root)[1:]:
        programs[r].append(Send(root, blocks.block(r)))
        programs[root].append(Recv(r, blocks.block(r)))
    return finish("gather", "flat", grid, root, nbytes, blocks.segments, programs)


def chain_gather(grid: Grid, nbytes: int, root: int = 0, *, itemsize: int = 1) -> Schedule:
    """Chain gather: relative rank ``i`` sends its block and those of ``i+1 .. P-1``.

    Relative rank ``P-1`` starts; each rank waits for the message from the next one
    and sends one message with its own block in front.

    Notes
    -----
    ``T = sum_{j=1}^{P-1} g(j b) + (P-1) L`` (seed 002, Table 2, "Chain", mirrored).
    Builds in O(P^2).

    References
    ----------
    Seed 002, sec. 4, Table 2.
    """
    check_blocks(grid, nbytes, root, itemsize)
    P = grid.nranks
    blocks = Blocks.cut(P, nbytes, None, itemsize)
    rel = relative_ranks(P, root)
    programs = _empty(P)
    for i in range(P - 1, 0, -1):
        message = blocks.blocks(rel[i:])
        programs[rel[i]].append(Send(rel[i - 1], message))
        programs[rel[i - 1]].append(Recv(rel[i], message))
    return finish("gather", "chain", grid, root, nbytes, blocks.segments, programs)


def chain_pipelined_gather(
    grid: Grid, nbytes: int, root: int = 0, *, segment_size: int, itemsize: int = 1
) -> Schedule:
    """Pipelined chain gather: one segment per message, forwarded as it arrives.

    Relative rank ``i`` sends the segments of its own block to ``i - 1``, then
    forwards the stream it receives from ``i + 1`` (blocks ``i+1, ..., P-1`` in turn),
    segment by segment.

    Parameters
    ----------
    grid : Grid
    nbytes : int
        ``b``, bytes per rank.
    root : int
    segment_size : int
        ``m`` (``m >= b``: whole blocks, seed 002's "Pipelined Chain").
    itemsize : int

    Notes
    -----
    With whole blocks ``T = (P-1) (g(b) + L)`` (seed 002, Table 2 mirrored). Builds
    in O(P^2 k).

    References
    ----------
    Seed 002, sec. 4, Table 2.
    """
    check_blocks(grid, nbytes, root, itemsize)
    check_segment_size(segment_size, itemsize)
    P = grid.nranks
    blocks = Blocks.cut(P, nbytes, segment_size, itemsize)
    rel = relative_ranks(P, root)
    programs = _empty(P)
    for i in range(1, P):
        me, parent = rel[i], rel[i - 1]
        programs[me] += [Send(parent, (blocks.seg(me, j),)) for j in range(blocks.k)]
        for source in rel[i + 1 :]:
            for j in range(blocks.k):
                seg = (blocks.seg(source, j),)
                programs[me] += [Recv(rel[i + 1], seg), Send(parent, seg)]
    for source in rel[1:]:
        programs[root] += [Recv(rel[1], (blocks.seg(source, j),)) for j in range(blocks.k)]
    params = {"segment_size": segment_size}
    return finish(
        "gather", "chain-pipelined", grid, root, nbytes, blocks.segments, programs, params
    )


def binomial_gather(grid: Grid, nbytes: int, root: int = 0, *, itemsize: int = 1) -> Schedule:
    """MPICH's binomial gather: each node forwards its subtree's blocks in one message.

    Relative rank ``i`` receives ``[i + 2^j, i + 2^{j+1})`` from ``i + 2^j`` for
    ``2^j < lowbit(i)`` (smallest first), then sends ``[i, i + lowbit(i))`` to
    ``i - lowbit(i)``.

    Notes
    -----
    ``T = sum_{j=0}^{ceil(log2 P)-1} g(2^j b) + ceil(log2 P) L`` (seed 002, Table 2,
    "Binomial Tree", mirrored). Builds in O(P log P).

    References
    ----------
    Seed 002, sec. 4, Table 2; Thakur, Rabenseifner and Gropp 2005 (MPICH).
    """
    check_blocks(grid, nbytes, root, itemsize)
    P = grid.nranks
    blocks = Blocks.cut(P, nbytes, None, itemsize)
    rel = relative_ranks(P, root)
    programs = _empty(P)
    for i in range(P):
        low = i & -i if i else 1 << max(P - 1, 1).bit_length()
        mask = 1
        while mask < low:
            if i + mask < P:
                message = blocks.blocks(rel[i + mask : min(i + 2 * mask, P)])
                programs[rel[i]].append(Recv(rel[i + mask], message))
            mask <<= 1
        if i:
            message = blocks.blocks(rel[i : min(i + low, P)])
            programs[rel[i]].append(Send(rel[i - low], message))
    return finish("gather", "binomial", grid, root, nbytes, blocks.segments, programs)


def magpie_original_gather(
    grid: Grid, nbytes: int, root: int = 0, *, itemsize: int = 1
) -> Schedule:
    """MagPIe's original gather: local flat gathers, then one whole message per cluster.

    Every rank sends its block to its cluster's coordinator; each remote coordinator
    then sends its cluster's blocks to the root in one message. The root receives its
    own cluster's blocks first, then the clusters in coordinator order.

    Notes
    -----
    ``T = max_c [ (N_c - 1) g_l(b) + L_l + r_w(N_c b) ]`` plus the root's receive
    overheads; unsegmented messages leave the WAN links idle while the local gathers
    run. Builds in O(P).

    References
    ----------
    Seed 000, sec. 3.3 (MagPIe's original gather, compared with segmentation in Fig. 9).
    """
    check_blocks(grid, nbytes, root, itemsize)
    P = grid.nranks
    blocks = Blocks.cut(P, nbytes, None, itemsize)
    programs = _empty(P)
    coordinators = coordinator_order(grid, root)
    for coordinator in coordinators:
        for r in cluster_ranks(grid, grid.cluster_of[coordinator], coordinator)[1:]:
            programs[r].append(Send(coordinator, blocks.block(r)))
            programs[coordinator].append(Recv(r, blocks.block(r)))
    for coordinator in coordinators[1:]:
        message = blocks.blocks(cluster_ranks(grid, grid.cluster_of[coordinator], coordinator))
        programs[coordinator].append(Send(root, message))
        programs[root].append(Recv(coordinator, message))
    return finish("gather", "magpie-original", grid, root, nbytes, blocks.segments, programs)


def magpie_segmented_gather(
    grid: Grid, nbytes: int, root: int = 0, *, segment_size: int, itemsize: int = 1
) -> Schedule:
    """Seed 000's WAN-aware gather: a segmented flat tree, clusters round-robin.

    Every rank sends the ``k = ceil(b/m)`` segments of its block to the root at once;
    in round ``j`` the root takes segment ``j`` from the first rank of every cluster,
    then from the second, and so on, so it receives on all WAN links at once.

    Parameters
    ----------
    grid : Grid
    nbytes : int
        ``b``, bytes per rank.
    root : int
    segment_size : int
        ``m`` (a multiple of ``itemsize``).
    itemsize : int

    Notes
    -----
    ``T = (k-1) gamma(m) + lam(m)`` with (seed 000, sec. 3.3)
    ``gamma(m) = max(P_l g_w(m), P_l or_l(m) + (P_w-1) P_l or_w(m) + os_l(m))`` and
    ``lam(m) = max(L_w + P_l g_w(m), max(L_l, os_l(m)) + P_l or_l(m) + (P_w-1) P_l
    or_w(m))``. Builds in O(P k).

    References
    ----------
    Seed 000, sec. 3.3 ("message segmentation helps simultaneously receiving on all
    connections").
    """
    check_blocks(grid, nbytes, root, itemsize)
    check_segment_size(segment_size, itemsize)
    P = grid.nranks
    blocks = Blocks.cut(P, nbytes, segment_size, itemsize)
    programs = _empty(P)
    order = round_robin_order(grid, root)
    for r in order:
        programs[r] += [Send(root, (blocks.seg(r, j),)) for j in range(blocks.k)]
    for j in range(blocks.k):
        programs[root] += [Recv(r, (blocks.seg(r, j),)) for r in order]
    params = {"segment_size": segment_size}
    return finish(
        "gather", "magpie-segmented", grid, root, nbytes, blocks.segments, programs, params
    )


def cluster_aware_gather(
    grid: Grid, nbytes: int, root: int = 0, *, segment_size: int, itemsize: int = 1
) -> Schedule:
    """Coordinators combine each round of their cluster into one WAN message.

    Every rank sends its segments to its coordinator (the root's cluster: to the root);
    in round ``j`` a remote coordinator takes segment ``j`` from each member and sends
    segment ``j`` of every block of its cluster to the root in one message (``N_c m``
    bytes). The root takes, per round, its own cluster's segments, then one message
    per remote cluster.

    Parameters
    ----------
    grid : Grid
    nbytes : int
        ``b``, bytes per rank.
    root : int
    segment_size : int
        ``m`` per block; a WAN message carries ``N_c m`` bytes.
    itemsize : int

    Notes
    -----
    ``T = (k-1) gamma(m) + lam(m)``: ``gamma`` the busiest of the root (``sum or``),
    a coordinator (``(N_c - 1) or_l(m) + s_w(N_c m)``) and a WAN link
    (``g_w(N_c m)``); ``(P_w - 1)`` WAN messages per round instead of ``P - N_0``.
    Builds in O(P k).

    References
    ----------
    Seed 000, sec. 3.2-3.3 (message combining via coordinator nodes).
    """
    check_blocks(grid, nbytes, root, itemsize)
    check_segment_size(segment_size, itemsize)
    P = grid.nranks
    blocks = Blocks.cut(P, nbytes, segment_size, itemsize)
    coordinators = coordinator_order(grid, root)
    members = {c: cluster_ranks(grid, grid.cluster_of[c], c) for c in coordinators}
    programs = _empty(P)
    for c in coordinators:
        for r in members[c][1:]:
            programs[r] += [Send(c, (blocks.seg(r, j),)) for j in range(blocks.k)]
    for j in range(blocks.k):
        for r in members[root][1:]:
            programs[root].append(Recv(r, (blocks.seg(r, j),)))
        for c in coordinators[1:]:
            programs[c] += [Recv(r, (blocks.seg(r, j),)) for r in members[c][1:]]
            message = blocks.round(members[c], j)
            programs[c].append(Send(root, message))
            programs[root].append(Recv(c, message))
    params = {"segment_size": segment_size}
    return finish("gather", "cluster-aware", grid, root, nbytes, blocks.segments, programs, params)
