"""MPICH's broadcast, as it runs on a grid it does not know is one (a baseline).

MPICH chooses among three algorithms by message size and communicator size (Thakur,
Rabenseifner and Gropp 2005, sec. 4.1; MPICH's ``MPIR_CVAR_BCAST_*`` defaults):

* ``M < 12288`` bytes or ``P < 8``: a binomial tree, whole message;
* ``M < 524288`` bytes and ``P`` a power of two: a binomial *scatter* of ``P`` blocks
  followed by a *recursive-doubling* allgather;
* otherwise: the binomial scatter followed by a *ring* allgather.

All three treat the communicator as flat: ranks are numbered relative to the root
(``(rank - root) mod P``) and clusters are ignored, which is what makes MPICH a baseline
on a wide-area grid.
"""

from __future__ import annotations

from gridcoll.algorithms._common import check_call, tree_schedule
from gridcoll.algorithms.trees import binomial_tree
from gridcoll.errors import ParameterError
from gridcoll.network.grid import Grid
from gridcoll.schedule.ir import Op, Recv, Schedule, Send, split_segments

__all__ = [
    "LONG_MSG_SIZE",
    "MIN_PROCS",
    "SHORT_MSG_SIZE",
    "mpich",
    "mpich_blocks",
    "mpich_variant",
]

SHORT_MSG_SIZE = 12288
"""Below this many bytes MPICH broadcasts along a binomial tree (``BCAST_SHORT_MSG_SIZE``)."""

LONG_MSG_SIZE = 524288
"""From this many bytes MPICH uses the ring allgather (``BCAST_LONG_MSG_SIZE``)."""

MIN_PROCS = 8
"""With fewer ranks MPICH always uses the binomial tree (``BCAST_MIN_PROCS``)."""


def mpich_variant(nranks: int, nbytes: int) -> str:
    """Which algorithm MPICH picks: ``binomial``, ``scatter-doubling`` or ``scatter-ring``."""
    if nbytes < SHORT_MSG_SIZE or nranks < MIN_PROCS:
        return "binomial"
    if nbytes < LONG_MSG_SIZE and nranks & (nranks - 1) == 0:
        return "scatter-doubling"
    return "scatter-ring"


def mpich_blocks(nranks: int, nbytes: int, itemsize: int = 1) -> list[tuple[int, int]]:
    """The scatter blocks ``(offset, length)`` of relative ranks 0..P-1.

    Block ``i`` is ``[i b, (i+1) b)`` clipped to the message, with
    ``b = ceil(M / P)`` rounded up to a whole number of ``itemsize`` elements (MPICH
    uses ``ceil(M/P)`` bytes on packed data). Trailing blocks may be empty when
    ``M < P b``.
    """
    items = -(-nbytes // itemsize)
    block = -(-items // nranks) * itemsize
    return [(min(i * block, nbytes), max(0, min(block, nbytes - i * block))) for i in range(nranks)]


def mpich(grid: Grid, nbytes: int, root: int = 0, *, itemsize: int = 1) -> Schedule:
    """MPICH's ``MPI_Bcast`` on a flat communicator: binomial, or scatter + allgather.

    Parameters
    ----------
    grid : Grid
    nbytes : int
        ``M`` in bytes (a whole number of ``itemsize`` elements).
    root : int
    itemsize : int

    Returns
    -------
    Schedule
        Algorithm ``"mpich"``; ``params["variant"]`` says which of the three MPICH chose.
        For the scatter variants, segment ``i`` is the block of relative rank ``i``;
        empty blocks (``M < P``) are neither segments nor sent.

    Raises
    ------
    ParameterError
        For a bad root or size.

    Notes
    -----
    With ``b = ceil(M/P)``, on a homogeneous network (Thakur et al. 2005, sec. 4.1):
    binomial ``ceil(log2 P) (L + g(M))``; scatter + recursive doubling
    ``2 log2 P L + 2 (P-1)/P M G``; scatter + ring ``(log2 P + P - 1) L +
    2 (P-1)/P M G``. On a grid, each of these crosses WAN links wherever the relative
    numbering happens to put a cluster boundary; :mod:`gridcoll.models.mpich` evaluates
    them edge by edge. The binomial scatter and the allgathers follow MPICH's code:
    relative rank ``i`` receives blocks ``[i, i + lowbit(i))`` from ``i - lowbit(i)``;
    in ring step ``j`` rank ``r`` sends block ``rel(r - j + 1)`` to ``r + 1`` and
    receives ``rel(r - j)`` from ``r - 1``; in doubling step ``j`` relative ranks
    ``i`` and ``i xor 2^j`` swap the ``2^j`` blocks of their subtrees. Builds in O(P)
    (binomial) or O(P^2) (scatter + allgather: ``P (P-1)`` block transfers).

    References
    ----------
    R. Thakur, R. Rabenseifner and W. Gropp, *Optimization of collective communication
    operations in MPICH*, Int. J. High Performance Computing Applications 19(1), 2005.
    The baseline role follows seed 004 (MPICH-like) and seed 000, sec. 3.1.

    Examples
    --------
    >>> from gridcoll.network import magpie
    >>> mpich(magpie(2, 2), 1024).params["variant"]
    'binomial'
    >>> mpich(magpie(4, 2), 1 << 20).params["variant"]
    'scatter-ring'
    """
    check_call(grid, nbytes, root)
    P = grid.nranks
    variant = mpich_variant(P, nbytes)
    if variant == "binomial":
        return tree_schedule(
            "mpich",
            grid,
            nbytes,
            root,
            binomial_tree,
            itemsize=itemsize,
            params={"variant": variant},
        )
    split_segments(nbytes, None, itemsize)  # the size must be whole elements
    blocks = mpich_blocks(P, nbytes, itemsize)
    nonempty = sum(1 for _, length in blocks if length)
    segments = tuple(blocks[:nonempty])
    programs: list[list[Op]] = [[] for _ in range(P)]
    _scatter(programs, root, nonempty)
    if variant == "scatter-doubling":
        _doubling_allgather(programs, root, nonempty)
    else:
        _ring_allgather(programs, root, nonempty)
    return Schedule(
        "bcast",
        "mpich",
        P,
        root,
        nbytes,
        segments,
        tuple(tuple(p) for p in programs),
        {"variant": variant},
    )


def _rank(relative: int, root: int, nranks: int) -> int:
    return (relative + root) % nranks


def _blocks(first: int, count: int, nonempty: int) -> tuple[int, ...]:
    """Segments of blocks ``first .. first+count-1`` that hold data."""
    return tuple(range(first, min(first + count, nonempty)))


def _scatter(programs: list[list[Op]], root: int, nonempty: int) -> None:
    """MPICH's binomial scatter (``MPII_Scatter_for_bcast``), skipping empty messages."""
    P = len(programs)
    for rel in range(P):
        me = _rank(rel, root, P)
        low = rel & -rel if rel else 1 << (P - 1).bit_length()
        if rel:
            message = _blocks(rel, low, nonempty)
            if message:
                programs[me].append(Recv(_rank(rel - low, root, P), message))
        mask = low >> 1
        while mask:
            if rel + mask < P:
                message = _blocks(rel + mask, mask, nonempty)
                if message:
                    programs[me].append(Send(_rank(rel + mask, root, P), message))
            mask >>= 1


def _ring_allgather(programs: list[list[Op]], root: int, nonempty: int) -> None:
    """MPICH's ring allgather: P-1 steps of send right / receive left."""
    P = len(programs)
    for me in range(P):
        right, left = (me + 1) % P, (me - 1) % P
        for step in range(1, P):
            send_block = (me - step + 1 - root) % P
            recv_block = (me - step - root) % P
            if send_block < nonempty:
                programs[me].append(Send(right, (send_block,)))
            if recv_block < nonempty:
                programs[me].append(Recv(left, (recv_block,)))


def _doubling_allgather(programs: list[list[Op]], root: int, nonempty: int) -> None:
    """MPICH's recursive-doubling allgather for a power-of-two P (log2 P exchanges)."""
    P = len(programs)
    if P & (P - 1):
        raise ParameterError(f"recursive doubling needs a power-of-two size, not {P}")
    for rel in range(P):
        me = _rank(rel, root, P)
        mask, i = 1, 0
        while mask < P:
            partner = rel ^ mask
            mine = _blocks(rel >> i << i, mask, nonempty)
            theirs = _blocks(partner >> i << i, mask, nonempty)
            if mine:
                programs[me].append(Send(_rank(partner, root, P), mine))
            if theirs:
                programs[me].append(Recv(_rank(partner, root, P), theirs))
            mask <<= 1
            i += 1
