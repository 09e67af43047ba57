"""Reduce-scatter builders: rank ``i`` ends with block ``i`` of ``x_0 (op) ... (op) x_{P-1}``.

MPI's ``MPI_Reduce_scatter_block``: every rank contributes a vector of ``P`` blocks of
``b = nbytes`` bytes (block ``i`` at offset ``i b``), and rank ``i`` receives block ``i``
of the reduction of all the vectors, in rank order. ``nbytes`` is one block (as for
scatter); the data space is the ``P b`` bytes of the vector, cut by
:meth:`~gridcoll.algorithms._collective.Blocks.cut` so no segment straddles two
blocks. Every rank starts holding its own contribution in every segment (a reduction);
``commutative=False`` makes every builder here combine in rank order and the validator
proves it (:mod:`gridcoll.schedule.validate`).

* :func:`pairwise_reduce_scatter` - rank ``j`` takes block ``j`` directly from every
  other rank (MPICH's pairwise exchange, its long-message choice);
* :func:`reduce_then_scatter` - the baseline: a binomial reduce of the whole vector to
  rank 0, then a flat scatter of the blocks;
* :func:`two_level_reduce_scatter` - WAN-aware (seed 000's rule: cross the wide area
  once): each cluster reduces the vector to its coordinator, coordinators exchange
  exactly the blocks of each other's clusters (one message per ordered cluster pair
  and round), each coordinator hands its members their blocks.
"""

from __future__ import annotations

from gridcoll.algorithms._collective import (
    Blocks,
    append_tree_reduce,
    check_reduction,
    finish,
    preorder_tree,
    reduction_params,
)
from gridcoll.algorithms.allreduce import reduction_groups
from gridcoll.algorithms.reduce import binomial_reduce_tree
from gridcoll.network.grid import Grid
from gridcoll.schedule.ir import Op, Recv, Schedule, Send

__all__ = [
    "pairwise_order",
    "pairwise_reduce_scatter",
    "reduce_then_scatter",
    "two_level_reduce_scatter",
]


def _empty(P: int) -> list[list[Op]]:
    return [[] for _ in range(P)]


def pairwise_order(P: int, j: int, commutative: bool) -> list[tuple[int, bool]]:
    """The ranks rank ``j`` takes its block from, in order, each with ``incoming_first``.

    Rank ``j - d`` (mod ``P``) sends to ``j`` in its ``d``-th send. A commutative
    operation takes them in that order (``d = 1, 2, ...``); otherwise ``j-1, ..., 0``
    each on the left (``[j-d .. j]``), then ``j+1, ..., P-1`` each on the right, so
    the result is ``x_0 (op) ... (op) x_{P-1}``.
    """
    if commutative:
        return [((j - d) % P, False) for d in range(1, P)]
    return [(i, True) for i in range(j - 1, -1, -1)] + [(i, False) for i in range(j + 1, P)]


def pairwise_reduce_scatter(
    grid: Grid, nbytes: int, root: int = 0, *, itemsize: int = 1, commutative: bool = True
) -> Schedule:
    """Pairwise exchange: every rank sends block ``j`` of its vector straight to rank ``j``.

    Rank ``i`` sends to ``i+1, i+2, ...`` (mod ``P``), staggered so that in each step
    every rank sends to a different one, then takes its own block from every other
    rank (:func:`pairwise_order`), combining each into what it holds.

    Parameters
    ----------
    grid : Grid
    nbytes : int
        ``b``, one block in bytes (a whole number of ``itemsize`` elements).
    root : int
        Checked, otherwise ignored (reduce_scatter has no root).
    itemsize : int
    commutative : bool
        False: rank ``j`` combines ``j-1, ..., 0`` on the left, then ``j+1, ..., P-1``
        on the right.

    Returns
    -------
    Schedule

    Raises
    ------
    ParameterError
        For a bad root, a size <= 0 or not whole elements.

    Notes
    -----
    Each rank sends and receives ``(P-1)`` blocks: on one network
    ``T = (P-1) max(g(b), os(b), or(b)) + L``, the least traffic any algorithm can
    move (:func:`gridcoll.network.bounds.collective_bound`), but ``P - N_c`` wide-area
    messages leave every rank of cluster ``c``. Builds in O(P^2).

    References
    ----------
    Thakur, Rabenseifner and Gropp 2005, sec. 4.6 (MPICH's reduce-scatter, pairwise
    exchange for long messages); seed 002, sec. 5 (direct exchange).

    Examples
    --------
    >>> from gridcoll.network import magpie
    >>> s = pairwise_reduce_scatter(magpie(1, 3), 8, commutative=False)
    >>> [(type(op).__name__, op.peer) for op in s.programs[1]]
    [('Send', 2), ('Send', 0), ('Recv', 0), ('Recv', 2)]
    """
    check_reduction(grid, nbytes, root, "pairwise", commutative)
    P = grid.nranks
    blocks = Blocks.cut(P, nbytes, None, itemsize)
    programs = _empty(P)
    for i in range(P):
        programs[i] += [Send((i + d) % P, blocks.block((i + d) % P)) for d in range(1, P)]
        programs[i] += [
            Recv(src, blocks.block(i), combine=True, incoming_first=first)
            for src, first in pairwise_order(P, i, commutative)
        ]
    params = reduction_params(commutative)
    return finish("reduce_scatter", "pairwise", grid, 0, nbytes, blocks.segments, programs, params)


def reduce_then_scatter(
    grid: Grid, nbytes: int, root: int = 0, *, itemsize: int = 1, commutative: bool = True
) -> Schedule:
    """Reduce, then scatter: a binomial reduce of the ``P b`` vector to rank 0, then
    rank 0 sends block ``i`` to rank ``i`` (a flat tree).

    Parameters
    ----------
    grid : Grid
    nbytes : int
        ``b``, one block in bytes.
    root : int
        Checked, otherwise ignored.
    itemsize : int
    commutative : bool
        Either way the binomial tree over ranks in natural order keeps rank order.

    Notes
    -----
    ``T = ceil(log2 P) (L + g(P b)) + (P-1) g(b) + L`` on one network for ``P`` a
    power of two (seed 002, Table 1's binomial tree backwards, then Table 2's flat
    scatter). Builds in O(P).

    References
    ----------
    Thakur, Rabenseifner and Gropp 2005, sec. 4.6 (MPICH's reduce + scatterv, its
    choice for non-commutative operations); seed 002, Tables 1 and 2.

    Examples
    --------
    >>> from gridcoll.network import magpie
    >>> s = reduce_then_scatter(magpie(1, 2), 8)
    >>> [(type(op).__name__, op.peer) for op in s.programs[1]]
    [('Send', 0), ('Recv', 0)]
    """
    check_reduction(grid, nbytes, root, "reduce-then-scatter", commutative)
    P = grid.nranks
    blocks = Blocks.cut(P, nbytes, None, itemsize)
    programs = _empty(P)
    append_tree_reduce(programs, binomial_reduce_tree(list(range(P))), [blocks.blocks(range(P))])
    for i in range(1, P):
        programs[0].append(Send(i, blocks.block(i)))
        programs[i].append(Recv(0, blocks.block(i)))
    params = reduction_params(commutative)
    return finish(
        "reduce_scatter", "reduce-then-scatter", grid, 0, nbytes, blocks.segments, programs, params
    )


def two_level_reduce_scatter(
    grid: Grid,
    nbytes: int,
    root: int = 0,
    *,
    segment_size: int,
    lan_degree: int,
    itemsize: int = 1,
    commutative: bool = True,
) -> Schedule:
    """WAN-aware reduce-scatter: local reduce, one exchange between coordinators, local
    hand-out.

    Every block is cut into ``k`` segments of ``m`` bytes; round ``j`` moves segment
    ``j`` of the blocks concerned. The groups are the clusters (commutative), or for a
    non-commutative operation the runs of consecutive ranks of one cluster
    (:func:`~gridcoll.algorithms._collective.runs`: the clusters themselves when each is
    a contiguous range of ranks, as on the presets; on other placements there are more
    groups than clusters, so a cluster's blocks may cross a link more than once, but
    rank order is kept). Each group is led by its lowest rank.

    1. Each group reduces round ``j`` of the whole vector (``P`` segments) up a
       ``d_l``-ary pre-order tree to its leader, which sends segment ``j`` of group
       ``q``'s blocks to leader ``q``, for every other ``q``: one wide-area message
       of ``N_q m`` bytes per ordered pair and round.
    2. Leader ``g`` combines the others' round ``j`` of its own blocks (groups after
       it on the right in increasing order, groups before it on the left in
       decreasing order: rank order) and sends each member segment ``j`` of its block.

    Each cluster's blocks cross each wide-area link once (``N_q b`` bytes from every
    other cluster), the least :func:`gridcoll.network.bounds.collective_bound` allows;
    a leader sends all its rounds before waiting for the others', so rounds overlap.

    Parameters
    ----------
    grid : Grid
    nbytes : int
        ``b``, one block in bytes.
    root : int
        Checked, otherwise ignored.
    segment_size : int
        ``m`` (a multiple of ``itemsize``), per block.
    lan_degree : int
        ``d_l`` of the local reduce trees.
    itemsize : int
    commutative : bool

    Notes
    -----
    ``T ~ lam_l(P m) + (k-1) gamma(m) + r_w(N_q m) + (N_g - 1) s_l(m) + r_l(m)``, with
    ``gamma`` the busiest of a leader (``gamma_l(P m)`` of its local reduce, ``sum_q
    s_w(N_q m)`` out, ``sum or_w`` in, ``(N_g - 1) os_l(m)`` to its members) and a
    wide-area link: seed 000's two-layer pipelining (sec. 3.1.2) applied to the
    coordinators' exchange of sec. 3.4. Builds in O(P k + G^2 k).

    References
    ----------
    Seed 000, sec. 3.1.2 and 3.4 (MagPIe: wide-area messages between coordinators
    only); Thakur, Rabenseifner and Gropp 2005, sec. 4.6.
    """
    check_reduction(
        grid, nbytes, root, "two-level", commutative, itemsize=itemsize,
        segment_size=segment_size, degrees={"lan_degree": lan_degree},
    )  # fmt: skip
    P = grid.nranks
    blocks = Blocks.cut(P, nbytes, segment_size, itemsize)
    groups = reduction_groups(grid, commutative)
    G = len(groups)
    leaders = [group[0] for group in groups]
    rounds = [blocks.round(range(P), j) for j in range(blocks.k)]
    programs = _empty(P)
    for g, group in enumerate(groups):
        tree = preorder_tree(group, lan_degree)
        leader = leaders[g]
        scratch = _empty(P)
        append_tree_reduce(scratch, tree, rounds)
        members = [r for r in group if r != leader]
        for r in members:
            programs[r] += scratch[r]
            programs[r] += [Recv(leader, (blocks.seg(r, j),)) for j in range(blocks.k)]
        lead = programs[leader]
        others = [(g + i) % G for i in range(1, G)]
        kids = tree.children.get(leader, ())
        for j in range(blocks.k):  # 1. local reduce of round j, its blocks to their leaders
            lead += [Recv(c, rounds[j], combine=True) for c in kids]
            lead += [Send(leaders[q], blocks.round(groups[q], j)) for q in others]
        mine = groups[g]
        for j in range(blocks.k):  # 2. own blocks in rank order, then to the members
            message = blocks.round(mine, j)
            lead += [Recv(leaders[q], message, combine=True) for q in range(g + 1, G)]
            lead += [
                Recv(leaders[q], message, combine=True, incoming_first=True)
                for q in range(g - 1, -1, -1)
            ]
            lead += [Send(r, (blocks.seg(r, j),)) for r in members]
    params = reduction_params(commutative, segment_size=segment_size, lan_degree=lan_degree)
    return finish("reduce_scatter", "two-level", grid, 0, nbytes, blocks.segments, programs, params)
