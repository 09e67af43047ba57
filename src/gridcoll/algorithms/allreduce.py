"""Allreduce builders: every rank ends with ``x_0 (op) x_1 (op) ... (op) x_{P-1}``.

The data space is the ``M = nbytes`` bytes of the vector each rank contributes. As for
reduce (:mod:`gridcoll.algorithms.reduce`), ``commutative=False`` makes every builder
here combine in rank order (each combine joins two adjacent rank intervals, the lower
on the left, using :attr:`~gridcoll.schedule.ir.Recv.incoming_first` where the partner
holds the lower one), and the schedule records ``params["commutative"]``.

Flat-network algorithms (Thakur, Rabenseifner and Gropp 2005, as in MPICH):

* :func:`reduce_bcast_allreduce` - binomial reduce to rank 0, binomial broadcast;
* :func:`recursive_doubling_allreduce` - ``log2 p`` exchanges of the whole vector;
* :func:`rabenseifner_allreduce` - reduce-scatter by recursive halving of the vector,
  then allgather by recursive doubling: ``2 (p-1)/p M`` bytes per rank;
* :func:`mpich_allreduce` - MPICH's choice between the last two.

For ``P`` not a power of two, ``p = 2^floor(log2 P)``: of the first ``2 (P - p)``
ranks each even one hands its vector to the next odd one first and gets the result
back last (MPICH's scheme), so rank intervals stay contiguous.

WAN-aware: :func:`two_level_allreduce` - each cluster reduces to its coordinator; the
coordinators run a direct reduce-scatter and allgather in which each WAN link carries
each byte of ``M / P_w`` once per direction and phase; each coordinator broadcasts the
result in its cluster; all pipelined in segments. :func:`two_level_exchange_allreduce`
- the same with one WAN round (every coordinator sends its whole partial result to
every other), for short vectors.
"""

from __future__ import annotations

from gridcoll.algorithms._collective import (
    append_tree_reduce,
    check_reduction,
    finish,
    preorder_tree,
    reduction_params,
    runs,
)
from gridcoll.algorithms.reduce import binomial_reduce_tree
from gridcoll.algorithms.trees import Tree, append_tree_broadcast, binomial_tree
from gridcoll.network.grid import Grid
from gridcoll.schedule.ir import Op, Recv, Schedule, Send, split_segments

__all__ = [
    "SHORT_MSG_SIZE",
    "Fold",
    "chunk_segments",
    "mpich_allreduce",
    "mpich_allreduce_variant",
    "rabenseifner_allreduce",
    "recursive_doubling_allreduce",
    "reduce_bcast_allreduce",
    "reduction_groups",
    "two_level_allreduce",
    "two_level_exchange_allreduce",
]

SHORT_MSG_SIZE = 2048
"""Up to this many bytes MPICH allreduces by recursive doubling
(``MPIR_CVAR_ALLREDUCE_SHORT_MSG_SIZE``)."""


def _empty(P: int) -> list[list[Op]]:
    return [[] for _ in range(P)]


def reduce_bcast_allreduce(
    grid: Grid, nbytes: int, root: int = 0, *, itemsize: int = 1, commutative: bool = True
) -> Schedule:
    """Reduce then broadcast: a binomial reduce to rank 0, a binomial broadcast from it.

    Parameters
    ----------
    grid : Grid
    nbytes : int
        ``M``, the vector size in bytes (a whole number of ``itemsize`` elements).
    root : int
        Checked, otherwise ignored (allreduce has no root).
    itemsize : int
    commutative : bool
        Either way the binomial tree over ranks in natural order keeps rank order.

    Returns
    -------
    Schedule

    Raises
    ------
    ParameterError
        For a bad root or size.

    Notes
    -----
    ``T = 2 ceil(log2 P) (L + g(M))`` on one network. Builds in O(P).

    References
    ----------
    Thakur, Rabenseifner and Gropp 2005, sec. 4.5 (MPICH's original allreduce).

    Examples
    --------
    >>> from gridcoll.network import magpie
    >>> [(type(op).__name__, op.peer) for op in
    ...  reduce_bcast_allreduce(magpie(1, 2), 8).programs[1]]
    [('Send', 0), ('Recv', 0)]
    """
    check_reduction(grid, nbytes, root, "reduce-bcast", commutative)
    segments = split_segments(nbytes, None, itemsize)
    ranks = list(range(grid.nranks))
    programs = _empty(grid.nranks)
    append_tree_reduce(programs, binomial_reduce_tree(ranks), [(0,)])
    append_tree_broadcast(programs, binomial_tree(ranks), [(0,)])
    params = reduction_params(commutative)
    return finish("allreduce", "reduce-bcast", grid, 0, nbytes, segments, programs, params)


class Fold:
    """MPICH's handling of ``P`` not a power of two (``p = 2^floor(log2 P)``).

    Of ranks ``0 .. 2(P-p)-1``, each even one sends its vector to the odd one after it,
    which combines it on the left (``[r-1, r]``) and takes part as new rank ``r // 2``;
    the other ranks ``r >= 2(P-p)`` are new rank ``r - (P-p)``. New ranks are in rank
    order and each stands for a contiguous interval of ranks.
    """

    def __init__(self, P: int):
        self.P = P
        self.p = 1 << (P.bit_length() - 1)
        self.rem = P - self.p

    def rank(self, new: int) -> int:
        """The rank that acts as new rank ``new``."""
        return 2 * new + 1 if new < self.rem else new + self.rem

    def fold(self, programs: list[list[Op]], messages: list[tuple[int, ...]]) -> None:
        for r in range(0, 2 * self.rem, 2):
            programs[r] += [Send(r + 1, m) for m in messages]
            programs[r + 1] += [Recv(r, m, combine=True, incoming_first=True) for m in messages]

    def unfold(self, programs: list[list[Op]], messages: list[tuple[int, ...]]) -> None:
        for r in range(0, 2 * self.rem, 2):
            programs[r + 1] += [Send(r, m) for m in messages]
            programs[r] += [Recv(r + 1, m) for m in messages]


def recursive_doubling_allreduce(
    grid: Grid, nbytes: int, root: int = 0, *, itemsize: int = 1, commutative: bool = True
) -> Schedule:
    """Recursive doubling: in step ``j`` new ranks ``i`` and ``i xor 2^j`` swap vectors.

    Each combines the partner's vector on the side of its interval (the lower one on
    the left), so the order is kept for any operation.

    Notes
    -----
    ``T = log2(p) (L + g(M) + or(M))`` on one network, plus two steps for ``P != p``.
    The best for short vectors. Builds in O(P log P).

    References
    ----------
    Thakur, Rabenseifner and Gropp 2005, sec. 4.5.
    """
    check_reduction(grid, nbytes, root, "recursive-doubling", commutative)
    segments = split_segments(nbytes, None, itemsize)
    whole = [tuple(range(len(segments)))]
    programs = _empty(grid.nranks)
    fold = Fold(grid.nranks)
    fold.fold(programs, whole)
    mask = 1
    while mask < fold.p:
        for new in range(fold.p):
            me, partner = fold.rank(new), fold.rank(new ^ mask)
            programs[me].append(Send(partner, whole[0]))
            programs[me].append(Recv(partner, whole[0], combine=True, incoming_first=partner < me))
        mask <<= 1
    fold.unfold(programs, whole)
    params = reduction_params(commutative)
    return finish("allreduce", "recursive-doubling", grid, 0, nbytes, segments, programs, params)


def chunk_segments(nbytes: int, nchunks: int, itemsize: int) -> list[tuple[int, int]]:
    """``nchunks`` contiguous chunks ``(offset, length)`` of whole elements, the first
    ``items mod nchunks`` one element longer (some empty when there are fewer
    elements than chunks)."""
    items = nbytes // itemsize
    base, extra = divmod(items, nchunks)
    out, offset = [], 0
    for i in range(nchunks):
        length = (base + (i < extra)) * itemsize
        out.append((offset, length))
        offset += length
    return out


def rabenseifner_allreduce(
    grid: Grid, nbytes: int, root: int = 0, *, itemsize: int = 1, commutative: bool = True
) -> Schedule:
    """Rabenseifner's allreduce: reduce-scatter by recursive halving, then allgather.

    The vector is cut into ``p`` chunks. In reduce-scatter step ``j`` (distance ``2^j``,
    nearest first) new ranks ``i`` and ``i xor 2^j`` split the chunk range they share:
    the lower keeps and combines the lower half, the upper the upper half, each
    receiving the other's half of its own. The allgather retraces the steps backwards,
    swapping halves without combining.

    Notes
    -----
    ``T = 2 log2(p) L + 2 (p-1)/p M G`` on one network (plus the fold for ``P != p``):
    bandwidth-optimal for long vectors. Nearest partners first keeps the largest
    exchanges inside a cluster on grids numbered cluster by cluster. Builds in
    O(P log P).

    References
    ----------
    R. Rabenseifner, *Optimization of collective reduction operations*, ICCS 2004;
    Thakur, Rabenseifner and Gropp 2005, sec. 4.5.
    """
    check_reduction(grid, nbytes, root, "rabenseifner", commutative)
    split_segments(nbytes, None, itemsize)
    fold = Fold(grid.nranks)
    p = fold.p
    chunks = chunk_segments(nbytes, p, itemsize)
    index, segments = {}, []
    for c, (offset, length) in enumerate(chunks):
        if length:
            index[c] = len(segments)
            segments.append((offset, length))

    def message(lo: int, hi: int) -> tuple[int, ...]:
        return tuple(index[c] for c in range(lo, hi) if c in index)

    whole = [tuple(range(len(segments)))]
    programs = _empty(grid.nranks)
    fold.fold(programs, whole)
    ranges = {new: (0, p) for new in range(p)}
    history = []
    mask = 1
    while mask < p:  # reduce-scatter: halve the range, nearest partner first
        new_ranges = {}
        for new in range(p):
            partner = new ^ mask
            lo, hi = ranges[new]
            mid = (lo + hi) // 2
            keep, give = ((lo, mid), (mid, hi)) if new < partner else ((mid, hi), (lo, mid))
            me, peer = fold.rank(new), fold.rank(partner)
            if message(*give):
                programs[me].append(Send(peer, message(*give)))
            if message(*keep):
                programs[me].append(
                    Recv(peer, message(*keep), combine=True, incoming_first=partner < new)
                )
            new_ranges[new] = keep
        history.append((mask, ranges))
        ranges = new_ranges
        mask <<= 1
    for mask, before in reversed(history):  # allgather: undo each halving
        for new in range(p):
            partner = new ^ mask
            me, peer = fold.rank(new), fold.rank(partner)
            if message(*ranges[new]):
                programs[me].append(Send(peer, message(*ranges[new])))
            if message(*ranges[partner]):
                programs[me].append(Recv(peer, message(*ranges[partner])))
        ranges = before
    fold.unfold(programs, whole)
    params = reduction_params(commutative)
    return finish("allreduce", "rabenseifner", grid, 0, nbytes, tuple(segments), programs, params)


def mpich_allreduce_variant(nranks: int, nbytes: int, itemsize: int, commutative: bool) -> str:
    """MPICH's choice: ``recursive-doubling`` for short vectors, non-commutative
    operations or fewer elements than ``p``; else ``rabenseifner``."""
    p = 1 << (nranks.bit_length() - 1)
    if nbytes <= SHORT_MSG_SIZE or not commutative or nbytes // itemsize < p:
        return "recursive-doubling"
    return "rabenseifner"


def mpich_allreduce(
    grid: Grid, nbytes: int, root: int = 0, *, itemsize: int = 1, commutative: bool = True
) -> Schedule:
    """MPICH's ``MPI_Allreduce`` on a flat communicator (a baseline).

    Notes
    -----
    Recursive doubling up to 2 KiB, for non-commutative operations and for fewer
    elements than ``p``; Rabenseifner's algorithm otherwise (``params["variant"]``).
    Clusters are ignored. Builds in O(P log P).

    References
    ----------
    Thakur, Rabenseifner and Gropp 2005, sec. 4.5.
    """
    check_reduction(grid, nbytes, root, "mpich", commutative)
    variant = mpich_allreduce_variant(grid.nranks, nbytes, itemsize, commutative)
    build = {
        "recursive-doubling": recursive_doubling_allreduce,
        "rabenseifner": rabenseifner_allreduce,
    }[variant]
    s = build(grid, nbytes, root, itemsize=itemsize, commutative=commutative)
    params = reduction_params(commutative, variant=variant)
    return finish("allreduce", "mpich", grid, 0, nbytes, s.segments, s.programs, params)


def _append_members(programs: list[list[Op]], tree: Tree, rounds: list[tuple[int, ...]]) -> None:
    """Append to every rank of ``tree`` but its root (the group's leader, whose ops the
    caller writes) its part of the local reduce of ``rounds`` up ``tree``, then of
    their broadcast down it. O(group size x rounds)."""
    scratch = _empty(len(programs))
    append_tree_reduce(scratch, tree, rounds)
    append_tree_broadcast(scratch, tree, rounds)
    for r in tree.nodes():
        if r != tree.root:
            programs[r] += scratch[r]


def reduction_groups(grid: Grid, commutative: bool) -> list[list[int]]:
    """Clusters (commutative) or runs of consecutive ranks in one cluster (otherwise),
    each with its lowest rank first: the leader."""
    if commutative:
        return [list(ranks) for ranks in grid.members]
    return runs(grid)


def two_level_allreduce(
    grid: Grid,
    nbytes: int,
    root: int = 0,
    *,
    segment_size: int,
    lan_degree: int,
    itemsize: int = 1,
    commutative: bool = True,
) -> Schedule:
    """WAN-aware allreduce: local reduce, WAN reduce-scatter + allgather, local broadcast.

    The vector is cut into ``G`` chunks, one per group (a cluster; for a
    non-commutative operation a run of consecutive ranks of one cluster), and each
    chunk into segments of ``m`` bytes; round ``j`` moves segment ``j`` of every chunk.

    1. Each group reduces round ``j`` up a ``d_l``-ary tree to its leader (lowest rank).
    2. Leader ``g`` sends segment ``j`` of chunk ``q`` to leader ``q``, for every ``q``.
    3. Leader ``g`` combines the others' segment ``j`` of chunk ``g`` (groups after it
       on the right in increasing order, groups before it on the left in decreasing
       order) and sends the result to every other leader.
    4. Leader ``g`` takes the other chunks' results and broadcasts round ``j`` down its
       tree.

    Every WAN link from ``g`` to ``q`` carries ``M / G`` bytes in step 2 and in step 3:
    each byte crosses each link once per phase, the least any allreduce can do over a
    full mesh of ``G`` sites (``2 (G-1)/G M`` out of and into each site). A leader sends
    all its rounds before waiting for any, so the rounds overlap.

    Parameters
    ----------
    grid : Grid
    nbytes : int
        ``M`` in bytes.
    root : int
        Checked, otherwise ignored.
    segment_size : int
        ``m``, per chunk.
    lan_degree : int
        ``d_l`` of the local trees.
    itemsize : int
    commutative : bool

    Notes
    -----
    ``T = T_lan_reduce(round) + (k-1) gamma(m) + lam(m) + T_lan_bcast(round)``, with
    ``gamma`` the busiest of a WAN link (``2 g_w(m)`` per round) and a leader
    (``2 (G-1) (s_w(m) + or_w(m))`` plus its LAN share), and ``lam = 2 r_w(m)`` plus
    the leader's sends; seed 000's two-layer pipelining (sec. 3.1.2) applied to the
    allgather exchange of sec. 3.4. Builds in O(P k + G^2 k).

    References
    ----------
    Seed 000, sec. 3.1.2 and 3.4; Rabenseifner 2004 (reduce-scatter + allgather).
    """
    check_reduction(
        grid, nbytes, root, "two-level", commutative, itemsize=itemsize,
        segment_size=segment_size, degrees={"lan_degree": lan_degree},
    )  # fmt: skip
    split_segments(nbytes, None, itemsize)
    groups = reduction_groups(grid, commutative)
    G = len(groups)
    leaders = [g[0] for g in groups]
    segments: list[tuple[int, int]] = []
    chunk_segs: list[list[int]] = []
    for offset, length in chunk_segments(nbytes, G, itemsize):
        cut = split_segments(length, segment_size, itemsize, offset) if length else ()
        chunk_segs.append(list(range(len(segments), len(segments) + len(cut))))
        segments += cut
    k = max(len(c) for c in chunk_segs)

    def seg(q: int, j: int) -> tuple[int, ...]:
        return (chunk_segs[q][j],) if j < len(chunk_segs[q]) else ()

    rounds = [tuple(s for q in range(G) for s in seg(q, j)) for j in range(k)]
    programs = _empty(grid.nranks)
    for g, group in enumerate(groups):
        tree = preorder_tree(group, lan_degree)
        leader = leaders[g]
        _append_members(programs, tree, rounds)
        lead = programs[leader]
        others = [(g + i) % G for i in range(1, G)]
        before = [q for q in range(g - 1, -1, -1)]
        after = [q for q in range(g + 1, G)]
        kids = tree.children.get(leader, ())
        for j in range(k):  # 1. local reduce of round j, 2. scatter it over the WAN
            lead += [Recv(c, rounds[j], combine=True) for c in kids]
            lead += [Send(leaders[q], seg(q, j)) for q in others if seg(q, j)]
        for j in range(k):  # 3. combine own chunk in rank order, share the result
            if seg(g, j):
                lead += [Recv(leaders[q], seg(g, j), combine=True) for q in after]
                lead += [
                    Recv(leaders[q], seg(g, j), combine=True, incoming_first=True) for q in before
                ]
                lead += [Send(leaders[q], seg(g, j)) for q in others]
        for j in range(k):  # 4. the other chunks' results, down the local tree
            lead += [Recv(leaders[q], seg(q, j)) for q in others if seg(q, j)]
            lead += [Send(c, rounds[j]) for c in kids]
    params = reduction_params(commutative, segment_size=segment_size, lan_degree=lan_degree)
    return finish("allreduce", "two-level", grid, 0, nbytes, tuple(segments), programs, params)


def two_level_exchange_allreduce(
    grid: Grid,
    nbytes: int,
    root: int = 0,
    *,
    segment_size: int,
    lan_degree: int,
    itemsize: int = 1,
    commutative: bool = True,
) -> Schedule:
    """Two-level allreduce with one WAN round: leaders exchange whole partial vectors.

    Each group (as in :func:`two_level_allreduce`) reduces the vector to its leader up a
    ``d_l``-ary tree, in segments of ``m`` bytes; each leader sends every segment of its
    group's partial result to every other leader, combines the others' (groups after it
    on the right in increasing order, groups before it on the left in decreasing order)
    and broadcasts the segment down its tree.

    Parameters
    ----------
    grid : Grid
    nbytes : int
        ``M`` in bytes.
    root : int
        Checked, otherwise ignored.
    segment_size : int
        ``m``.
    lan_degree : int
        ``d_l`` of the local trees.
    itemsize : int
    commutative : bool

    Notes
    -----
    One WAN latency instead of the two of the reduce-scatter + allgather:
    ``T ~ lam_l + (G-2) s_w(m) + r_w(m) + lam_l + (k-1) gamma(m)``, but each WAN link
    carries all ``M`` bytes (``2 M / G`` for :func:`two_level_allreduce`): the short
    vector choice, as the two-level barrier is for signals. Builds in O(P k + G^2 k).

    References
    ----------
    Seed 000, sec. 3.4 (MagPIe's allgather among coordinators, here of partial results).
    """
    check_reduction(
        grid, nbytes, root, "two-level-exchange", commutative, itemsize=itemsize,
        segment_size=segment_size, degrees={"lan_degree": lan_degree},
    )  # fmt: skip
    segments = split_segments(nbytes, segment_size, itemsize)
    rounds = [(s,) for s in range(len(segments))]
    groups = reduction_groups(grid, commutative)
    G = len(groups)
    leaders = [g[0] for g in groups]
    programs = _empty(grid.nranks)
    for g, group in enumerate(groups):
        tree = preorder_tree(group, lan_degree)
        leader = leaders[g]
        _append_members(programs, tree, rounds)
        lead = programs[leader]
        others = [(g + i) % G for i in range(1, G)]
        kids = tree.children.get(leader, ())
        for message in rounds:  # local reduce, then the partial result to every leader
            lead += [Recv(c, message, combine=True) for c in kids]
            lead += [Send(leaders[q], message) for q in others]
        for message in rounds:  # everyone's partials in rank order, then down the tree
            lead += [Recv(leaders[q], message, combine=True) for q in range(g + 1, G)]
            lead += [
                Recv(leaders[q], message, combine=True, incoming_first=True)
                for q in range(g - 1, -1, -1)
            ]
            lead += [Send(c, message) for c in kids]
    params = reduction_params(commutative, segment_size=segment_size, lan_degree=lan_degree)
    return finish("allreduce", "two-level-exchange", grid, 0, nbytes, segments, programs, params)
