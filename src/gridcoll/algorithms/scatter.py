"""Scatter builders: the root sends block ``i`` (``b = nbytes`` bytes) to rank ``i``.

The data space is ``P`` blocks of ``b`` bytes, block ``i`` belonging to rank ``i``
(:mod:`gridcoll.algorithms._collective`); ``nbytes`` is the count of one rank, as MPI's
``sendcount`` ("1 MB to each receiver", seed 000 sec. 3.2). The root keeps its own block.

Single-layer shapes of seed 002, Table 2, over MPICH's root-relative numbering:

* :func:`flat_scatter` - the root sends every block directly;
* :func:`chain_scatter` - each rank passes on the blocks of the ranks after it;
* :func:`chain_pipelined_scatter` - the same chain, one segment per message, farthest
  block first, every rank forwarding at once;
* :func:`binomial_scatter` - MPICH's binomial tree, each child getting its subtree's blocks.

WAN-aware shapes of seed 000, sec. 3.2:

* :func:`magpie_original_scatter` - MagPIe's original: one whole message per remote
  cluster to its coordinator, which scatters it locally;
* :func:`magpie_segmented_scatter` - seed 000's segmented flat tree over all ranks, the
  clusters walked round-robin so consecutive sends use different WAN links;
* :func:`cluster_aware_scatter` - each cluster's share crosses the WAN once, segmented
  and round-robin over clusters, its coordinator forwarding every segment at once.

``backwards=True`` (the flat and WAN-aware shapes) sends in the reverse order: the
last rank, cluster and round first. A scatter's time reversal is a gather
(:mod:`gridcoll.algorithms.gather`), whose root receives in the reverse of the send
order; reversing a backwards scatter lets it receive in the order the messages arrive.
"""

from __future__ import annotations

from collections.abc import Iterable

from gridcoll.algorithms._collective import (
    Blocks,
    check_blocks,
    check_segment_size,
    finish,
)
from gridcoll.algorithms.magpie import cluster_ranks, coordinator_order
from gridcoll.algorithms.trees import relative_ranks
from gridcoll.network.grid import Grid
from gridcoll.schedule.ir import Op, Recv, Schedule, Send

__all__ = [
    "binomial_scatter",
    "chain_pipelined_scatter",
    "chain_scatter",
    "cluster_aware_scatter",
    "flat_scatter",
    "magpie_original_scatter",
    "magpie_segmented_scatter",
    "round_robin_order",
]


def _empty(P: int) -> list[list[Op]]:
    return [[] for _ in range(P)]


def _ordered(items: Iterable[int], backwards: bool) -> list[int]:
    """``items`` as a list, reversed if ``backwards``."""
    out = list(items)
    return out[::-1] if backwards else out


def round_robin_order(grid: Grid, root: int) -> list[int]:
    """The non-root ranks in seed 000's scatter order: the first rank of every cluster,
    then the second of every cluster, and so on; remote clusters (by coordinator order)
    before the root's own in each round, each cluster's coordinator first."""
    clusters = [grid.cluster_of[c] for c in coordinator_order(grid, root)]
    home = clusters[0]
    lists = {
        c: [r for r in cluster_ranks(grid, c, coord) if r != root]
        for c, coord in zip(clusters, coordinator_order(grid, root), strict=True)
    }
    order = [*clusters[1:], home]
    depth = max(len(v) for v in lists.values())
    return [lists[c][p] for p in range(depth) for c in order if p < len(lists[c])]


def flat_scatter(
    grid: Grid, nbytes: int, root: int = 0, *, itemsize: int = 1, backwards: bool = False
) -> Schedule:
    """Flat-tree scatter: the root sends each rank its block, one after the other.

    Parameters
    ----------
    grid : Grid
    nbytes : int
        ``b``: bytes per rank (a whole number of ``itemsize`` elements).
    root : int
    itemsize : int
    backwards : bool
        Send in reverse root-relative rank order (module docstring).

    Returns
    -------
    Schedule
        ``P - 1`` messages of ``b`` bytes, in root-relative rank order.

    Raises
    ------
    ParameterError
        For a bad root or a size <= 0 or not whole elements.

    Notes
    -----
    ``T = (P-1) g(b) + L`` on one network (seed 002, Table 2, "Flat Tree"); the
    registered model evaluates it edge by edge. Builds in O(P).

    References
    ----------
    Barchet-Estefanel and Mounié (seed 002), sec. 4, Table 2.

    Examples
    --------
    >>> from gridcoll.network import magpie
    >>> flat_scatter(magpie(2, 2), 100, root=1).programs[1]
    (Send(peer=2, segments=(2,)), Send(peer=3, segments=(3,)), Send(peer=0, segments=(0,)))
    """
    check_blocks(grid, nbytes, root, itemsize)
    P = grid.nranks
    blocks = Blocks.cut(P, nbytes, None, itemsize)
    programs = _empty(P)
    for r in _ordered(relative_ranks(P, root)[1:], backwards):
        programs[root].append(Send(r, blocks.block(r)))
        programs[r].append(Recv(root, blocks.block(r)))
    return finish("scatter", "flat", grid, root, nbytes, blocks.segments, programs)


def chain_scatter(grid: Grid, nbytes: int, root: int = 0, *, itemsize: int = 1) -> Schedule:
    """Chain scatter: each rank keeps its block and passes the rest to the next.

    Relative rank ``i`` receives the blocks of relative ranks ``i .. P-1`` in one
    message and sends those of ``i+1 .. P-1`` on.

    Notes
    -----
    ``T = sum_{j=1}^{P-1} g(j b) + (P-1) L`` (seed 002, Table 2, "Chain"). Builds in
    O(P^2) (the blocks listed per message).

    References
    ----------
    Seed 002, sec. 4, Table 2.

    Examples
    --------
    >>> from gridcoll.network import magpie
    >>> s = chain_scatter(magpie(1, 3), 10)
    >>> [(type(op).__name__, op.peer, op.segments) for op in s.programs[1]]
    [('Recv', 0, (1, 2)), ('Send', 2, (2,))]
    """
    check_blocks(grid, nbytes, root, itemsize)
    P = grid.nranks
    blocks = Blocks.cut(P, nbytes, None, itemsize)
    rel = relative_ranks(P, root)
    programs = _empty(P)
    for i in range(1, P):
        message = blocks.blocks(rel[i:])
        programs[rel[i - 1]].append(Send(rel[i], message))
        programs[rel[i]].append(Recv(rel[i - 1], message))
    return finish("scatter", "chain", grid, root, nbytes, blocks.segments, programs)


def chain_pipelined_scatter(
    grid: Grid, nbytes: int, root: int = 0, *, segment_size: int, itemsize: int = 1
) -> Schedule:
    """Pipelined chain scatter: one segment per message, farthest block first.

    The root sends the segments of relative rank ``P-1``'s block, then ``P-2``'s, ...;
    every rank forwards each segment that is not its own to the next rank as soon as
    it arrives, so all hops work at once.

    Parameters
    ----------
    grid : Grid
    nbytes : int
        ``b``, bytes per rank.
    root : int
    segment_size : int
        ``m`` (``m >= b`` means whole blocks: seed 002's "Pipelined Chain").
    itemsize : int

    Notes
    -----
    With whole blocks ``T = (P-1) (g(b) + L)`` (seed 002, Table 2, "Pipelined Chain");
    with ``k`` segments the last of rank ``i``'s ``(P-i) k`` messages arrives at about
    ``((P-i) k - 1) sigma + i r(m)``, ``sigma`` the slowest per-message cost on the way.
    Builds in O(P^2 k).

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
    for target in range(P - 1, 0, -1):  # farthest block first
        for j in range(blocks.k):
            seg = (blocks.seg(rel[target], j),)
            for hop in range(1, target + 1):
                programs[rel[hop - 1]].append(Send(rel[hop], seg))
                programs[rel[hop]].append(Recv(rel[hop - 1], seg))
    params = {"segment_size": segment_size}
    return finish(
        "scatter", "chain-pipelined", grid, root, nbytes, blocks.segments, programs, params
    )


def binomial_scatter(grid: Grid, nbytes: int, root: int = 0, *, itemsize: int = 1) -> Schedule:
    """MPICH's binomial scatter: each node receives its subtree's blocks in one message.

    Relative rank ``i`` receives the blocks of relative ranks ``[i, i + lowbit(i))``
    from ``i - lowbit(i)`` and sends ``[i + 2^j, i + 2^{j+1})`` to ``i + 2^j`` for
    ``2^j < lowbit(i)``, largest subtree first.

    Notes
    -----
    ``T = sum_{j=0}^{ceil(log2 P)-1} g(2^j b) + ceil(log2 P) L`` (seed 002, Table 2,
    "Binomial Tree"): fewer, larger messages in parallel. Builds in O(P log P).

    References
    ----------
    Seed 002, sec. 4, Table 2; Thakur, Rabenseifner and Gropp 2005 (MPICH).

    Examples
    --------
    >>> from gridcoll.network import magpie
    >>> [(op.peer, op.segments) for op in binomial_scatter(magpie(2, 2), 8).programs[0]]
    [(2, (2, 3)), (1, (1,))]
    """
    check_blocks(grid, nbytes, root, itemsize)
    P = grid.nranks
    blocks = Blocks.cut(P, nbytes, None, itemsize)
    rel = relative_ranks(P, root)
    programs = _empty(P)
    for i in range(P):
        low = i & -i if i else 1 << max(P - 1, 1).bit_length()
        mask = low >> 1
        while mask:
            if i + mask < P:
                message = blocks.blocks(rel[i + mask : min(i + 2 * mask, P)])
                programs[rel[i]].append(Send(rel[i + mask], message))
                programs[rel[i + mask]].append(Recv(rel[i], message))
            mask >>= 1
    return finish("scatter", "binomial", grid, root, nbytes, blocks.segments, programs)


def magpie_original_scatter(
    grid: Grid, nbytes: int, root: int = 0, *, itemsize: int = 1, backwards: bool = False
) -> Schedule:
    """MagPIe's original scatter: one whole message per cluster, then local flat trees.

    The root sends each remote coordinator (:meth:`Grid.coordinators`) the blocks of
    its whole cluster in one message, one cluster after the other, then its own
    cluster's blocks; each coordinator then sends every member of its cluster its block.
    ``backwards``: the clusters and each cluster's members in reverse order.

    Notes
    -----
    ``T = max_c [ sum_{c' <= c} s_w(N_c' b) + r_w(N_c b) + (N_c - 1) g_l(b) + L_l ]``:
    the WAN links are used one at a time, since ``os_w(M) ~ g_w(M)`` for long messages
    ("the root can only send over one WAN link at a time", seed 000, sec. 3.1).
    Builds in O(P).

    References
    ----------
    Seed 000, sec. 3.2 (MagPIe's original scatter sends complete messages).
    """
    check_blocks(grid, nbytes, root, itemsize)
    P = grid.nranks
    blocks = Blocks.cut(P, nbytes, None, itemsize)
    programs = _empty(P)
    coordinators = coordinator_order(grid, root)
    for coordinator in _ordered(coordinators[1:], backwards):
        members = cluster_ranks(grid, grid.cluster_of[coordinator], coordinator)
        message = blocks.blocks(members)
        programs[root].append(Send(coordinator, message))
        programs[coordinator].append(Recv(root, message))
    for coordinator in coordinators:
        members = cluster_ranks(grid, grid.cluster_of[coordinator], coordinator)
        for r in _ordered(members[1:], backwards):
            programs[coordinator].append(Send(r, blocks.block(r)))
            programs[r].append(Recv(coordinator, blocks.block(r)))
    return finish("scatter", "magpie-original", grid, root, nbytes, blocks.segments, programs)


def magpie_segmented_scatter(
    grid: Grid,
    nbytes: int,
    root: int = 0,
    *,
    segment_size: int,
    itemsize: int = 1,
    backwards: bool = False,
) -> Schedule:
    """Seed 000's WAN-aware scatter: a segmented flat tree walking clusters round-robin.

    Every block is cut into ``k = ceil(b/m)`` segments. In round ``j`` the root sends
    segment ``j`` to the first rank of every cluster, then to the second rank of every
    cluster, and so on (:func:`round_robin_order`), so consecutive sends go over
    different WAN links and all links carry data at once.

    Parameters
    ----------
    grid : Grid
    nbytes : int
        ``b``, bytes per rank.
    root : int
    segment_size : int
        ``m`` (a multiple of ``itemsize``; ``m >= b`` means whole blocks).
    itemsize : int
    backwards : bool
        The last round first, each in the reverse of :func:`round_robin_order`.

    Notes
    -----
    ``T = (k-1) gamma(m) + lam(m)`` with (seed 000, sec. 3.2)
    ``gamma(m) <= P_l max(g_w(m), (P_w-1) s_w(m) + s_l(m)) + or_l(m)`` and
    ``lam(m) <= (P_l-1) max(g_w(m), (P_w-1) s_w(m) + s_l(m)) + (P_w-1) s_w(m) + r_w(m)``.
    For long messages ``T`` is about ``P_l g_w(b)``. Builds in O(P k).

    References
    ----------
    Seed 000, sec. 3.2 (1 MB to each of 8 clusters: 1078 ms instead of 7437 ms).

    Examples
    --------
    >>> from gridcoll.network import magpie
    >>> round_robin_order(magpie(2, 2), 0)
    [2, 1, 3]
    """
    check_blocks(grid, nbytes, root, itemsize)
    check_segment_size(segment_size, itemsize)
    P = grid.nranks
    blocks = Blocks.cut(P, nbytes, segment_size, itemsize)
    order = _ordered(round_robin_order(grid, root), backwards)
    programs = _empty(P)
    for j in _ordered(range(blocks.k), backwards):
        for r in order:
            seg = (blocks.seg(r, j),)
            programs[root].append(Send(r, seg))
            programs[r].append(Recv(root, seg))
    params = {"segment_size": segment_size}
    return finish(
        "scatter", "magpie-segmented", grid, root, nbytes, blocks.segments, programs, params
    )


def cluster_aware_scatter(
    grid: Grid,
    nbytes: int,
    root: int = 0,
    *,
    segment_size: int,
    itemsize: int = 1,
    backwards: bool = False,
) -> Schedule:
    """Each cluster's share crosses the WAN once, segmented, then is scattered inside.

    In round ``j`` the root sends each remote coordinator one message holding segment
    ``j`` of every block of its cluster (``N_c m`` bytes), the clusters in coordinator
    order, then segment ``j`` to each rank of its own cluster; a coordinator forwards
    each member's segment as soon as the round's message has arrived.

    Parameters
    ----------
    grid : Grid
    nbytes : int
        ``b``, bytes per rank.
    root : int
    segment_size : int
        ``m`` per block; a WAN message carries ``N_c m`` bytes.
    itemsize : int
    backwards : bool
        The last round first, clusters and members in reverse order.

    Notes
    -----
    ``T = (k-1) gamma(m) + lam(m)`` with ``gamma(m) = max(sum_c s_w(N_c m) + (N_0 - 1)
    s_l(m), max_c g_w(N_c m), max_c (or_w(N_c m) + (N_c - 1) s_l(m)))`` and ``lam(m)``
    the last arrival of one round: ``(P_w - 1)`` WAN messages instead of ``P - N_0`` for
    the flat tree, each crossing the WAN once ("message combining and forwarding via
    coordinator nodes", seed 000, sec. 3.2). Builds in O(P k).

    References
    ----------
    Seed 000, sec. 3.2.
    """
    check_blocks(grid, nbytes, root, itemsize)
    check_segment_size(segment_size, itemsize)
    P = grid.nranks
    blocks = Blocks.cut(P, nbytes, segment_size, itemsize)
    coordinators = coordinator_order(grid, root)
    members = {c: cluster_ranks(grid, grid.cluster_of[c], c) for c in coordinators}
    programs = _empty(P)
    for j in _ordered(range(blocks.k), backwards):
        for c in _ordered(coordinators[1:], backwards):
            message = blocks.round(members[c], j)
            programs[root].append(Send(c, message))
            programs[c].append(Recv(root, message))
            for r in _ordered(members[c][1:], backwards):
                programs[c].append(Send(r, (blocks.seg(r, j),)))
                programs[r].append(Recv(c, (blocks.seg(r, j),)))
        for r in _ordered(members[root][1:], backwards):
            programs[root].append(Send(r, (blocks.seg(r, j),)))
            programs[r].append(Recv(root, (blocks.seg(r, j),)))
    params = {"segment_size": segment_size}
    return finish("scatter", "cluster-aware", grid, root, nbytes, blocks.segments, programs, params)
