"""Gather builders: every rank sends its block (``b = nbytes`` bytes) to the root.

The data space is ``P`` blocks of ``b`` bytes, block ``i`` held by rank ``i`` at the
start; the root must end with all of them. ``nbytes`` is one rank's count, as MPI's
``sendcount``. "Gather is the inverse operation of scatter" (seed 000, sec. 3.3): each
builder is the time reversal (:func:`gridcoll.schedule.transform.reverse`) of the
scatter of the same name (:mod:`gridcoll.algorithms.scatter`): every program run
backwards, sends and receives swapped, so a relay sends on what it has received from
the ranks below it. A rank receives in the reverse of the order the scatter sends in, so
the flat and WAN-aware shapes reverse the scatter that sends backwards (last rank,
cluster and round first; ``backwards=True``): the root then takes the messages in the
order they arrive, the first rank, cluster and segment first.

* :func:`flat_gather` - every rank sends to the root directly;
* :func:`chain_gather` - each rank adds its block to what it got from the next rank;
* :func:`chain_pipelined_gather` - the same chain, one segment per message, each rank
  sending its own segments first and then forwarding the stream from behind, nearest
  block first;
* :func:`binomial_gather` - MPICH's binomial tree;
* :func:`magpie_original_gather` - local gathers at the coordinators, then one whole
  message per cluster over the WAN;
* :func:`magpie_segmented_gather` - seed 000's segmented flat tree, the root taking
  segments round-robin over the clusters;
* :func:`cluster_aware_gather` - coordinators combine each round's segments of their
  cluster into one WAN message.
"""

from __future__ import annotations

from gridcoll.algorithms import scatter
from gridcoll.network.grid import Grid
from gridcoll.schedule.ir import Schedule
from gridcoll.schedule.transform import reverse

__all__ = [
    "binomial_gather",
    "chain_gather",
    "chain_pipelined_gather",
    "cluster_aware_gather",
    "flat_gather",
    "magpie_original_gather",
    "magpie_segmented_gather",
]


def flat_gather(grid: Grid, nbytes: int, root: int = 0, *, itemsize: int = 1) -> Schedule:
    """Flat-tree gather: every rank sends its block to the root at once.

    The reversal of :func:`~gridcoll.algorithms.scatter.flat_scatter` sending
    backwards: the root receives in root-relative rank order.

    Parameters and errors as the scatter's (``b = nbytes`` per rank): ParameterError
    for a bad root or a size <= 0 or not whole elements, before anything is built.

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
    return reverse(
        scatter.flat_scatter(grid, nbytes, root, itemsize=itemsize, backwards=True), op="gather"
    )


def chain_gather(grid: Grid, nbytes: int, root: int = 0, *, itemsize: int = 1) -> Schedule:
    """Chain gather: relative rank ``i`` sends its block and those of ``i+1 .. P-1``.

    The reversal of :func:`~gridcoll.algorithms.scatter.chain_scatter`: relative rank
    ``P-1`` starts; each rank waits for the message from the next one and sends one
    message with its own block in front.

    Notes
    -----
    ``T = sum_{j=1}^{P-1} g(j b) + (P-1) L`` (seed 002, Table 2, "Chain", mirrored).
    Builds in O(P^2).

    References
    ----------
    Seed 002, sec. 4, Table 2.
    """
    return reverse(scatter.chain_scatter(grid, nbytes, root, itemsize=itemsize), op="gather")


def chain_pipelined_gather(
    grid: Grid, nbytes: int, root: int = 0, *, segment_size: int, itemsize: int = 1
) -> Schedule:
    """Pipelined chain gather: one segment per message, forwarded as it arrives.

    The reversal of :func:`~gridcoll.algorithms.scatter.chain_pipelined_scatter`:
    relative rank ``i`` sends the segments of its own block to ``i - 1`` (the last
    segment first), then forwards the stream it receives from ``i + 1`` (blocks
    ``i+1, ..., P-1`` in turn), segment by segment.

    Parameters as the scatter's (``b = nbytes`` per rank, ``m = segment_size``).

    Notes
    -----
    With whole blocks ``T = (P-1) (g(b) + L)`` (seed 002, Table 2 mirrored). Builds
    in O(P^2 k).

    References
    ----------
    Seed 002, sec. 4, Table 2.
    """
    return reverse(
        scatter.chain_pipelined_scatter(
            grid, nbytes, root, segment_size=segment_size, itemsize=itemsize
        ),
        op="gather",
    )


def binomial_gather(grid: Grid, nbytes: int, root: int = 0, *, itemsize: int = 1) -> Schedule:
    """MPICH's binomial gather: each node forwards its subtree's blocks in one message.

    The reversal of :func:`~gridcoll.algorithms.scatter.binomial_scatter`: relative
    rank ``i`` receives ``[i + 2^j, i + 2^{j+1})`` from ``i + 2^j`` for
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
    return reverse(scatter.binomial_scatter(grid, nbytes, root, itemsize=itemsize), op="gather")


def magpie_original_gather(
    grid: Grid, nbytes: int, root: int = 0, *, itemsize: int = 1
) -> Schedule:
    """MagPIe's original gather: local flat gathers, then one whole message per cluster.

    The reversal of :func:`~gridcoll.algorithms.scatter.magpie_original_scatter`
    sending backwards: every rank sends its block to its cluster's coordinator; each
    remote coordinator then sends its cluster's blocks to the root in one message. The
    root receives its own cluster's blocks first, then the clusters in coordinator
    order.

    Notes
    -----
    ``T = max_c [ (N_c - 1) g_l(b) + L_l + r_w(N_c b) ]`` plus the root's receive
    overheads; unsegmented messages leave the WAN links idle while the local gathers
    run. Builds in O(P).

    References
    ----------
    Seed 000, sec. 3.3 (MagPIe's original gather, compared with segmentation in Fig. 9).
    """
    return reverse(
        scatter.magpie_original_scatter(grid, nbytes, root, itemsize=itemsize, backwards=True),
        op="gather",
    )


def magpie_segmented_gather(
    grid: Grid, nbytes: int, root: int = 0, *, segment_size: int, itemsize: int = 1
) -> Schedule:
    """Seed 000's WAN-aware gather: a segmented flat tree, clusters round-robin.

    The reversal of :func:`~gridcoll.algorithms.scatter.magpie_segmented_scatter`
    sending backwards: every rank sends the ``k = ceil(b/m)`` segments of its block to
    the root at once; in round ``j`` the root takes segment ``j`` from every rank in
    :func:`~gridcoll.algorithms.scatter.round_robin_order` (the first rank of every
    cluster, then the second...), so it receives on all WAN links at once.

    Parameters as the scatter's (``b = nbytes`` per rank, ``m = segment_size``).

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
    return reverse(
        scatter.magpie_segmented_scatter(
            grid, nbytes, root, segment_size=segment_size, itemsize=itemsize, backwards=True
        ),
        op="gather",
    )


def cluster_aware_gather(
    grid: Grid, nbytes: int, root: int = 0, *, segment_size: int, itemsize: int = 1
) -> Schedule:
    """Coordinators combine each round of their cluster into one WAN message.

    The reversal of :func:`~gridcoll.algorithms.scatter.cluster_aware_scatter`
    sending backwards: every rank sends its segments to its coordinator (the root's
    cluster: to the root); in round ``j`` a remote coordinator takes segment ``j`` from
    each member and sends segment ``j`` of every block of its cluster to the root in
    one message (``N_c m`` bytes). The root takes, per round, its own cluster's
    segments, then one message per remote cluster in coordinator order.

    Parameters as the scatter's (``b = nbytes`` per rank, ``m = segment_size``).

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
    return reverse(
        scatter.cluster_aware_scatter(
            grid, nbytes, root, segment_size=segment_size, itemsize=itemsize, backwards=True
        ),
        op="gather",
    )
