"""Allgather builders: every rank ends with every rank's block (``b = nbytes`` bytes).

The data space is ``P`` blocks of ``b`` bytes, block ``i`` held by rank ``i`` at the
start (:mod:`gridcoll.algorithms._collective`); ``nbytes`` is one rank's count, as MPI's
``sendcount``. Allgather has no root: the schedules have root 0 and ignore ``root``
beyond checking it.

Flat-network algorithms (Thakur, Rabenseifner and Gropp 2005, as in MPICH):

* :func:`ring_allgather` - ``P - 1`` steps, each rank passing a block to its right;
* :func:`recursive_doubling_allgather` - ``log2 P`` exchanges of doubling size
  (other ``P``: the extra ranks fold into the first ones and get the result back);
* :func:`bruck_allgather` - ``ceil(log2 P)`` steps for any ``P``;
* :func:`mpich_allgather` - MPICH's choice among the three by total size and ``P``.

WAN-aware algorithms of seed 000, sec. 3.4:

* :func:`magpie_original_allgather` - MagPIe's: local gather at every coordinator, an
  exchange of whole cluster vectors among the coordinators, a local binomial broadcast;
* :func:`magpie_segmented_allgather` - the same three phases pipelined in rounds of one
  segment per block, the coordinators exchanging segmented messages over the WAN and
  forwarding each down a ``lan_degree``-ary tree as it arrives.
"""

from __future__ import annotations

from gridcoll.algorithms._collective import (
    Blocks,
    check_blocks,
    check_segment_size,
    finish,
)
from gridcoll.algorithms.magpie import check_degree, cluster_ranks
from gridcoll.algorithms.trees import append_tree_broadcast, binomial_tree, dary_tree
from gridcoll.network.grid import Grid
from gridcoll.schedule.ir import Op, Recv, Schedule, Send

__all__ = [
    "BRUCK_MSG_SIZE",
    "LONG_MSG_SIZE",
    "bruck_allgather",
    "magpie_original_allgather",
    "magpie_segmented_allgather",
    "mpich_allgather",
    "mpich_allgather_variant",
    "recursive_doubling_allgather",
    "ring_allgather",
]

BRUCK_MSG_SIZE = 81920
"""Below this total (``P b``) MPICH uses Bruck's algorithm when ``P`` is not a power
of two (``MPIR_CVAR_ALLGATHER_SHORT_MSG_SIZE``)."""

LONG_MSG_SIZE = 524288
"""From this total (``P b``) MPICH uses the ring (``MPIR_CVAR_ALLGATHER_LONG_MSG_SIZE``)."""


def _empty(P: int) -> list[list[Op]]:
    return [[] for _ in range(P)]


def ring_allgather(grid: Grid, nbytes: int, root: int = 0, *, itemsize: int = 1) -> Schedule:
    """Ring allgather: in step ``j`` rank ``r`` sends block ``r - j + 1`` to ``r + 1``.

    Parameters
    ----------
    grid : Grid
    nbytes : int
        ``b``: bytes per rank (a whole number of ``itemsize`` elements).
    root : int
        Checked, otherwise ignored.
    itemsize : int

    Returns
    -------
    Schedule
        ``P (P-1)`` messages of ``b`` bytes.

    Raises
    ------
    ParameterError
        For a bad root or a size <= 0 or not whole elements.

    Notes
    -----
    ``T = (P-1) (L + g(b))`` on one network; every link of the ring carries one block
    per step, so on a grid numbered cluster by cluster each WAN link between
    neighbouring clusters carries ``P - 1`` blocks. Builds in O(P^2).

    References
    ----------
    Thakur, Rabenseifner and Gropp, *Optimization of collective communication
    operations in MPICH* (2005), sec. 4.2.

    Examples
    --------
    >>> from gridcoll.network import magpie
    >>> [(type(op).__name__, op.peer, op.segments) for op in
    ...  ring_allgather(magpie(1, 3), 8).programs[0]]  # doctest: +NORMALIZE_WHITESPACE
    [('Send', 1, (0,)), ('Recv', 2, (2,)), ('Send', 1, (2,)), ('Recv', 2, (1,))]
    """
    check_blocks(grid, nbytes, root, itemsize)
    P = grid.nranks
    blocks = Blocks.cut(P, nbytes, None, itemsize)
    programs = _empty(P)
    for me in range(P):
        right, left = (me + 1) % P, (me - 1) % P
        for step in range(1, P):
            programs[me].append(Send(right, blocks.block((me - step + 1) % P)))
            programs[me].append(Recv(left, blocks.block((me - step) % P)))
    return finish("allgather", "ring", grid, 0, nbytes, blocks.segments, programs)


def _pof2(P: int) -> int:
    return 1 << (P.bit_length() - 1)


def recursive_doubling_allgather(
    grid: Grid, nbytes: int, root: int = 0, *, itemsize: int = 1
) -> Schedule:
    """Recursive-doubling allgather: ``log2 P`` exchanges, each doubling the data held.

    With ``p = 2^floor(log2 P)``, ranks ``r >= p`` first send their block to
    ``r - p``; ranks ``0 .. p-1`` then swap, in step ``j``, everything they hold with
    ``r xor 2^j``; finally rank ``r - p`` sends ``r`` every block but its own.

    Notes
    -----
    ``T = log2(P) L + (P-1) g(b)`` on one network for a power of two (the exchanges
    carry ``b, 2b, 4b, ...``); otherwise two more steps. Builds in O(P^2).

    References
    ----------
    Thakur, Rabenseifner and Gropp 2005, sec. 4.2.
    """
    check_blocks(grid, nbytes, root, itemsize)
    P = grid.nranks
    blocks = Blocks.cut(P, nbytes, None, itemsize)
    p = _pof2(P)
    programs = _empty(P)
    holds = {r: [r] for r in range(p)}
    for r in range(p, P):  # fold the extra ranks in
        programs[r].append(Send(r - p, blocks.block(r)))
        programs[r - p].append(Recv(r, blocks.block(r)))
        holds[r - p].append(r)
    mask = 1
    while mask < p:
        new = {}
        for r in range(p):
            partner = r ^ mask
            mine, theirs = sorted(holds[r]), sorted(holds[partner])
            programs[r].append(Send(partner, blocks.blocks(mine)))
            programs[r].append(Recv(partner, blocks.blocks(theirs)))
            new[r] = mine + theirs
        holds = new
        mask <<= 1
    for r in range(p, P):  # ... and give them the result
        rest = blocks.blocks([b for b in range(P) if b != r])
        programs[r - p].append(Send(r, rest))
        programs[r].append(Recv(r - p, rest))
    return finish("allgather", "recursive-doubling", grid, 0, nbytes, blocks.segments, programs)


def bruck_allgather(grid: Grid, nbytes: int, root: int = 0, *, itemsize: int = 1) -> Schedule:
    """Bruck's allgather: in step ``j`` rank ``r`` sends what it holds to ``r - 2^j``.

    After step ``j`` rank ``r`` holds blocks ``r .. r + 2^{j+1} - 1`` (mod P); the
    last step sends only the ``P - 2^j`` blocks still missing.

    Notes
    -----
    ``T = ceil(log2 P) L + (P-1) g(b)`` on one network, for any ``P``. Builds in
    O(P^2).

    References
    ----------
    J. Bruck et al., *Efficient algorithms for all-to-all communications in
    multiport message-passing systems*, IEEE TPDS 8(11), 1997; Thakur et al. 2005.
    """
    check_blocks(grid, nbytes, root, itemsize)
    P = grid.nranks
    blocks = Blocks.cut(P, nbytes, None, itemsize)
    programs = _empty(P)
    dist = 1
    while dist < P:
        count = min(dist, P - dist)
        for r in range(P):
            to, frm = (r - dist) % P, (r + dist) % P
            programs[r].append(Send(to, blocks.blocks([(r + i) % P for i in range(count)])))
            programs[r].append(Recv(frm, blocks.blocks([(frm + i) % P for i in range(count)])))
        dist <<= 1
    return finish("allgather", "bruck", grid, 0, nbytes, blocks.segments, programs)


def mpich_allgather_variant(nranks: int, nbytes: int) -> str:
    """MPICH's choice: ``recursive-doubling``, ``bruck`` or ``ring`` (by ``P b``)."""
    total = nranks * nbytes
    if total < LONG_MSG_SIZE and nranks & (nranks - 1) == 0:
        return "recursive-doubling"
    if total < BRUCK_MSG_SIZE:
        return "bruck"
    return "ring"


def mpich_allgather(grid: Grid, nbytes: int, root: int = 0, *, itemsize: int = 1) -> Schedule:
    """MPICH's ``MPI_Allgather`` on a flat communicator (a baseline).

    Recursive doubling for a total ``P b`` below 512 KiB and ``P`` a power of two;
    otherwise Bruck below 80 KiB; otherwise the ring. Clusters are ignored.

    Notes
    -----
    The cost of the chosen algorithm; ``params["variant"]`` names it. Builds in O(P^2).

    References
    ----------
    Thakur, Rabenseifner and Gropp 2005, sec. 4.2 (MPICH's thresholds).
    """
    check_blocks(grid, nbytes, root, itemsize)
    variant = mpich_allgather_variant(grid.nranks, nbytes)
    build = {
        "recursive-doubling": recursive_doubling_allgather,
        "bruck": bruck_allgather,
        "ring": ring_allgather,
    }[variant]
    s = build(grid, nbytes, root, itemsize=itemsize)
    return finish(
        "allgather", "mpich", grid, 0, nbytes, s.segments, s.programs, {"variant": variant}
    )


def _coordinators(grid: Grid) -> list[int]:
    """Every cluster's lowest rank, by cluster index."""
    return [ranks[0] for ranks in grid.members]


def magpie_original_allgather(
    grid: Grid, nbytes: int, root: int = 0, *, itemsize: int = 1
) -> Schedule:
    """MagPIe's allgather: local gather, coordinators' exchange, local broadcast.

    Every rank sends its block to its cluster's coordinator (its lowest rank); each
    coordinator then sends its cluster's blocks in one message to every other
    coordinator (cluster ``c`` to ``c+1, c+2, ...``) and receives theirs; finally it
    broadcasts the whole vector (``P b`` bytes) down a binomial tree in its cluster.
    Whole messages, one phase after the other.

    Notes
    -----
    ``T = T_gather + T_exchange + T_bcast`` (seed 000, sec. 3.4: "the sum of local
    gather, wide-area allgather (between the coordinator nodes), and the local
    broadcast"), with ``T_exchange = (P_w - 2) s_w(N b) + r_w(N b)`` for whole
    messages. Builds in O(P P_w + P_w^2).

    References
    ----------
    Seed 000, sec. 3.4 ("currently implemented in MagPIe").
    """
    check_blocks(grid, nbytes, root, itemsize)
    P = grid.nranks
    blocks = Blocks.cut(P, nbytes, None, itemsize)
    programs = _empty(P)
    coordinators = _coordinators(grid)
    C = len(coordinators)
    for c, coordinator in enumerate(coordinators):
        for r in grid.members[c][1:]:
            programs[r].append(Send(coordinator, blocks.block(r)))
            programs[coordinator].append(Recv(r, blocks.block(r)))
    for c, coordinator in enumerate(coordinators):
        mine = blocks.blocks(grid.members[c])
        for i in range(1, C):
            programs[coordinator].append(Send(coordinators[(c + i) % C], mine))
        for i in range(1, C):
            q = (c - i) % C
            programs[coordinator].append(Recv(coordinators[q], blocks.blocks(grid.members[q])))
    everything = blocks.blocks(range(P))
    for c, coordinator in enumerate(coordinators):
        tree = binomial_tree(cluster_ranks(grid, c, coordinator))
        append_tree_broadcast(programs, tree, [everything])
    return finish("allgather", "magpie-original", grid, 0, nbytes, blocks.segments, programs)


def magpie_segmented_allgather(
    grid: Grid,
    nbytes: int,
    root: int = 0,
    *,
    segment_size: int,
    lan_degree: int,
    itemsize: int = 1,
) -> Schedule:
    """Seed 000's allgather with a segmented WAN exchange, pipelined with the LANs.

    Every block is cut into ``k = ceil(b/m)`` segments; round ``j`` moves segment ``j``
    of every block. Each rank sends its segments to its cluster's coordinator (its
    lowest rank). In round ``j`` a coordinator takes segment ``j`` from each member,
    sends its cluster's round (``N_c m`` bytes) to every other coordinator and down its
    cluster's ``lan_degree``-ary tree; after its last round it takes the other
    clusters' rounds in order, forwarding each down the tree at once.

    Parameters
    ----------
    grid : Grid
    nbytes : int
        ``b``, bytes per rank.
    root : int
        Checked, otherwise ignored.
    segment_size : int
        ``m`` per block (a multiple of ``itemsize``).
    lan_degree : int
        ``d_l`` of the local broadcast trees.
    itemsize : int

    Notes
    -----
    For the WAN exchange (seed 000, sec. 3.4) ``T = (k-1) gamma(m) + lam(m)`` with
    ``gamma(m) = max((P_w - 1) (s_w(m) + max(g_l(m), or_w(m))), g_w(m))`` and
    ``lam(m) = (P_w - 2) s_w(m) + g_w(m) + L_w``; the local gather and broadcast overlap
    it, adding about one round of each. Builds in O(P k P_w).

    References
    ----------
    Seed 000, sec. 3.4 and Fig. 11.
    """
    check_blocks(grid, nbytes, root, itemsize)
    check_segment_size(segment_size, itemsize)
    check_degree(lan_degree, "lan_degree")
    P = grid.nranks
    blocks = Blocks.cut(P, nbytes, segment_size, itemsize)
    programs = _empty(P)
    coordinators = _coordinators(grid)
    C = len(coordinators)
    for c, coordinator in enumerate(coordinators):
        for r in grid.members[c][1:]:
            programs[r] += [Send(coordinator, (blocks.seg(r, j),)) for j in range(blocks.k)]
    for c, coordinator in enumerate(coordinators):
        tree = dary_tree(cluster_ranks(grid, c, coordinator), lan_degree)
        kids = tree.children.get(coordinator, ())
        program = programs[coordinator]
        lan_messages = []
        for j in range(blocks.k):  # gather round j, send it over the WAN and the LAN
            program += [Recv(r, (blocks.seg(r, j),)) for r in grid.members[c][1:]]
            mine = blocks.round(grid.members[c], j)
            program += [Send(coordinators[(c + i) % C], mine) for i in range(1, C)]
            program += [Send(kid, mine) for kid in kids]
            lan_messages.append(mine)
        # The other clusters' rounds, forwarded as they come. Waiting for them only
        # after every send keeps the rounds overlapping: a round costs gamma(m), not
        # a WAN latency (seed 000's model has no L_w in gamma).
        for j in range(blocks.k):
            for i in range(1, C):
                q = (c - i) % C
                theirs = blocks.round(grid.members[q], j)
                program.append(Recv(coordinators[q], theirs))
                program += [Send(kid, theirs) for kid in kids]
                lan_messages.append(theirs)
        scratch = [[] for _ in range(P)]
        append_tree_broadcast(scratch, tree, lan_messages)
        for r in grid.members[c][1:]:
            programs[r] += scratch[r]
    params = {"segment_size": segment_size, "lan_degree": lan_degree}
    return finish(
        "allgather", "magpie-segmented", grid, 0, nbytes, blocks.segments, programs, params
    )
