"""Scan and exscan builders: prefix reductions in rank order.

MPI's ``MPI_Scan``: rank ``i`` ends with ``x_0 (op) x_1 (op) ... (op) x_i``;
``MPI_Exscan``: rank ``i >= 1`` ends with ``x_0 (op) ... (op) x_{i-1}`` (rank 0's result
is undefined). The data space is the ``M = nbytes`` bytes of the vector every rank
contributes; every rank starts holding its own contribution. Every builder combines
adjacent rank intervals, the lower on the left, so any operation (``commutative`` is
recorded and the validator proves the order either way).

A schedule holds one value per segment and rank, and a send carries what the rank
holds when it starts (an executor copies a send's bytes if a later receive of the same
rank rewrites them: :mod:`gridcoll.schedule.ir`). So:

* :func:`chain_scan` / :func:`chain_segmented_scan` - rank ``i`` receives ``[0..i-1]``
  from ``i-1``, combines it on the left (``[0..i]``) and forwards it to ``i+1``,
  segment by segment. With ranks numbered cluster by cluster (every preset) the chain
  crosses each wide-area link between consecutive clusters once and no other: the
  grid-aware scan, each byte of ``M`` over the WAN ``C - 1`` times in all;
* :func:`recursive_doubling_scan` - Hillis and Steele's doubling: in step ``d`` rank
  ``i`` sends what it holds, ``[i - 2^d + 1 .. i]``, to ``i + 2^d`` and combines
  ``[i - 2^{d+1} + 1 .. i - 2^d]`` from ``i - 2^d`` on the left: ``ceil(log2 P)``
  steps, for short vectors;
* :func:`chain_exscan` / :func:`chain_segmented_exscan` - the chain scan, but rank
  ``i`` sends its prefix ``[0..i]`` to ``i+1`` twice: the first message is combined
  there (``[0..i+1]``, forwarded on), the second replaces it (``[0..i]``, rank
  ``i+1``'s result) once forwarded; the last rank forwards nothing and takes one;
* :func:`recursive_doubling_exscan` - the doubling scan, then one shift: rank ``i``
  sends ``[0..i]`` to ``i+1`` and takes ``[0..i-1]`` from ``i-1`` in its place.
"""

from __future__ import annotations

from gridcoll.algorithms._collective import check_reduction, finish, reduction_params
from gridcoll.network.grid import Grid
from gridcoll.schedule.ir import Op, Recv, Schedule, Send, split_segments

__all__ = [
    "chain_exscan",
    "chain_scan",
    "chain_segmented_exscan",
    "chain_segmented_scan",
    "doubling_steps",
    "exscan_copies",
    "recursive_doubling_exscan",
    "recursive_doubling_scan",
]


def _empty(P: int) -> list[list[Op]]:
    return [[] for _ in range(P)]


def exscan_copies(op: str, P: int, i: int) -> int:
    """Messages per segment on the chain's hop ``i-1 -> i``: 2 for exscan (one to
    combine and forward, one for rank ``i``'s result) except into the last rank, which
    forwards nothing and takes its result alone; 1 for scan."""
    return 2 if op == "exscan" and i < P - 1 else 1


def _chain(
    op: str,
    algorithm: str,
    grid: Grid,
    nbytes: int,
    root: int,
    *,
    itemsize: int,
    commutative: bool,
    segment_size: int | None,
) -> Schedule:
    """The chain scan (``op="scan"``) or exscan, in segments of ``segment_size``
    (None: the whole vector). O(P k)."""
    check_reduction(
        grid, nbytes, root, algorithm, commutative, itemsize=itemsize,
        **({} if segment_size is None else {"segment_size": segment_size}),
    )  # fmt: skip
    P = grid.nranks
    segments = split_segments(nbytes, segment_size, itemsize)
    programs = _empty(P)
    for i in range(P):
        program = programs[i]
        for s in range(len(segments)):
            message = (s,)
            if op == "exscan" and i == P - 1 and i:  # forwards nothing: its result only
                program.append(Recv(i - 1, message))
                continue
            if i:
                program.append(Recv(i - 1, message, combine=True, incoming_first=True))
            if i < P - 1:
                program += [Send(i + 1, message)] * exscan_copies(op, P, i + 1)
            if i and op == "exscan":
                program.append(Recv(i - 1, message))  # [0..i-1] replaces [0..i]
    params = {} if segment_size is None else {"segment_size": segment_size}
    params = reduction_params(commutative, **params)
    return finish(op, algorithm, grid, 0, nbytes, segments, programs, params)


def chain_scan(
    grid: Grid, nbytes: int, root: int = 0, *, itemsize: int = 1, commutative: bool = True
) -> Schedule:
    """Chain scan, whole vector: rank ``i`` takes ``[0..i-1]`` from ``i-1``, combines it
    on the left and sends ``[0..i]`` to ``i+1``.

    Parameters
    ----------
    grid : Grid
    nbytes : int
        ``M``, the vector in bytes (a whole number of ``itemsize`` elements).
    root : int
        Checked, otherwise ignored (scan has no root).
    itemsize : int
    commutative : bool
        Recorded; the chain keeps rank order for any operation.

    Returns
    -------
    Schedule

    Raises
    ------
    ParameterError
        For a bad root, a size <= 0 or not whole elements.

    Notes
    -----
    ``T = (P-1) (L + g(M))`` on one network, seed 002's chain (Table 1): each rank
    posts its receive at once, so ``or`` overlaps the arrival. Builds in O(P).

    References
    ----------
    Seed 002, Table 1 (chain); MPI-3.1, sec. 5.11 (``MPI_Scan``).

    Examples
    --------
    >>> from gridcoll.network import magpie
    >>> s = chain_scan(magpie(1, 3), 8)
    >>> [(type(op).__name__, op.peer) for op in s.programs[1]]
    [('Recv', 0), ('Send', 2)]
    """
    return _chain(
        "scan", "chain", grid, nbytes, root,
        itemsize=itemsize, commutative=commutative, segment_size=None,
    )  # fmt: skip


def chain_segmented_scan(
    grid: Grid,
    nbytes: int,
    root: int = 0,
    *,
    segment_size: int,
    itemsize: int = 1,
    commutative: bool = True,
) -> Schedule:
    """Pipelined chain scan: :func:`chain_scan` segment by segment, every rank combining
    and forwarding a segment as soon as it has it.

    With ranks numbered cluster by cluster it crosses each wide-area link between
    consecutive clusters once: the scan that crosses each WAN link once.

    Parameters
    ----------
    grid : Grid
    nbytes : int
        ``M`` in bytes.
    root : int
        Checked, otherwise ignored.
    segment_size : int
        ``m`` (a multiple of ``itemsize``).
    itemsize : int
    commutative : bool

    Notes
    -----
    ``T = (k-1) gamma(m) + lam(m)``, ``lam = sum_hops (L + g(m))``,
    ``gamma = max(g(m), s(m), or(m) + os(m))`` of the slowest hop (seed 000,
    sec. 3.1.1; seed 002, Table 1's pipelined chain). Builds in O(P k).

    References
    ----------
    Seed 000, sec. 3.1.1; seed 002, Table 1.
    """
    return _chain(
        "scan", "chain-segmented", grid, nbytes, root,
        itemsize=itemsize, commutative=commutative, segment_size=segment_size,
    )  # fmt: skip


def chain_exscan(
    grid: Grid, nbytes: int, root: int = 0, *, itemsize: int = 1, commutative: bool = True
) -> Schedule:
    """Chain exscan, whole vector: rank ``i`` takes ``[0..i-1]`` from ``i-1`` and
    combines it on the left (``[0..i]``), sends that to ``i+1`` twice, then takes
    ``[0..i-1]`` again from ``i-1`` in its place (its result).

    A rank holds one value per segment, so it cannot keep ``[0..i-1]`` and forward
    ``[0..i]`` at once; the second copy costs one more message per hop, sent right
    after the first and off the critical path (rank ``i+1`` forwards before it takes
    it). Rank 0 sends ``x_0`` twice; rank ``P-2`` sends once, as rank ``P-1``
    forwards nothing (:func:`exscan_copies`).

    Parameters
    ----------
    grid : Grid
    nbytes : int
        ``M`` in bytes.
    root : int
        Checked, otherwise ignored.
    itemsize : int
    commutative : bool

    Notes
    -----
    ``T = (P-1) (L + g(M))`` on one network, as the chain scan: every second copy
    arrives ``s(M) = max(g(M), os(M)) <= L + g(M)`` after the first; twice the chain
    scan's bytes on every hop but the last. Builds in O(P).

    References
    ----------
    Seed 002, Table 1 (chain); MPI-3.1, sec. 5.11.2 (``MPI_Exscan``).

    Examples
    --------
    >>> from gridcoll.network import magpie
    >>> s = chain_exscan(magpie(1, 4), 8)
    >>> [(type(op).__name__, op.peer) for op in s.programs[1]]
    [('Recv', 0), ('Send', 2), ('Send', 2), ('Recv', 0)]
    >>> [(type(op).__name__, op.peer) for op in s.programs[3]]
    [('Recv', 2)]
    """
    return _chain(
        "exscan", "chain", grid, nbytes, root,
        itemsize=itemsize, commutative=commutative, segment_size=None,
    )  # fmt: skip


def chain_segmented_exscan(
    grid: Grid,
    nbytes: int,
    root: int = 0,
    *,
    segment_size: int,
    itemsize: int = 1,
    commutative: bool = True,
) -> Schedule:
    """Pipelined chain exscan: :func:`chain_exscan` segment by segment.

    Parameters
    ----------
    grid : Grid
    nbytes : int
        ``M`` in bytes.
    root : int
        Checked, otherwise ignored.
    segment_size : int
        ``m``.
    itemsize : int
    commutative : bool

    Notes
    -----
    ``T = (k-1) gamma(m) + lam(m)`` with ``gamma = max(2 g(m), 2 s(m), 2 or(m) +
    2 os(m))`` of the slowest hop (two messages per segment and hop but the last) and
    ``lam`` the chain's ``sum (L + g(m))``. Builds in O(P k).

    References
    ----------
    Seed 000, sec. 3.1.1; seed 002, Table 1.
    """
    return _chain(
        "exscan", "chain-segmented", grid, nbytes, root,
        itemsize=itemsize, commutative=commutative, segment_size=segment_size,
    )  # fmt: skip


def doubling_steps(P: int) -> list[list[tuple[int, int]]]:
    """The ``(sender, receiver)`` pairs of each step of the doubling scan:
    ``(i, i + 2^d)`` for every ``i + 2^d < P``, ``d = 0, 1, ...``."""
    steps, d = [], 1
    while d < P:
        steps.append([(i, i + d) for i in range(P - d)])
        d <<= 1
    return steps


def _doubling(
    op: str, grid: Grid, nbytes: int, root: int, itemsize: int, commutative: bool
) -> Schedule:
    check_reduction(grid, nbytes, root, "recursive-doubling", commutative)
    P = grid.nranks
    segments = split_segments(nbytes, None, itemsize)
    whole = tuple(range(len(segments)))
    programs = _empty(P)
    for step in doubling_steps(P):
        for i, j in step:  # every send of a step before the receives: what rank i holds
            programs[i].append(Send(j, whole))
        for i, j in step:
            programs[j].append(Recv(i, whole, combine=True, incoming_first=True))
    if op == "exscan":  # the shift: [0..i] to i+1, [0..i-1] from i-1 in its place
        for i in range(P - 1):
            programs[i].append(Send(i + 1, whole))
        for i in range(1, P):
            programs[i].append(Recv(i - 1, whole))
    params = reduction_params(commutative)
    return finish(op, "recursive-doubling", grid, 0, nbytes, segments, programs, params)


def recursive_doubling_scan(
    grid: Grid, nbytes: int, root: int = 0, *, itemsize: int = 1, commutative: bool = True
) -> Schedule:
    """Hillis and Steele's doubling scan: ``ceil(log2 P)`` steps of whole vectors.

    In step ``d`` rank ``i`` holds ``[max(0, i - 2^d + 1) .. i]``; it sends that to
    ``i + 2^d`` and combines what ``i - 2^d`` sends on the left, the adjacent interval
    below its own. The send carries the value held when it starts, so one value per
    rank suffices (as in recursive-doubling allreduce).

    Parameters
    ----------
    grid : Grid
    nbytes : int
        ``M`` in bytes.
    root : int
        Checked, otherwise ignored.
    itemsize : int
    commutative : bool

    Notes
    -----
    ``T <= ceil(log2 P) max(L + g(M), os(M) + or(M))`` on one network (equal for
    ``P`` a power of two); ranks are paired across
    clusters from the first step on, so every step may cross the wide area. Builds in
    O(P log P).

    References
    ----------
    W. D. Hillis and G. L. Steele, *Data parallel algorithms*, CACM 29(12), 1986;
    MPICH's ``MPIR_Scan_intra_recursive_doubling`` (Thakur, Rabenseifner and Gropp
    2005).

    Examples
    --------
    >>> from gridcoll.network import magpie
    >>> s = recursive_doubling_scan(magpie(1, 4), 8)
    >>> [(type(op).__name__, op.peer) for op in s.programs[2]]
    [('Send', 3), ('Recv', 1), ('Recv', 0)]
    """
    return _doubling("scan", grid, nbytes, root, itemsize, commutative)


def recursive_doubling_exscan(
    grid: Grid, nbytes: int, root: int = 0, *, itemsize: int = 1, commutative: bool = True
) -> Schedule:
    """The doubling scan (:func:`recursive_doubling_scan`), then one shift: rank ``i``
    sends its ``[0..i]`` to ``i+1`` and takes ``[0..i-1]`` from ``i-1`` in its place.

    Parameters
    ----------
    grid : Grid
    nbytes : int
        ``M`` in bytes.
    root : int
        Checked, otherwise ignored.
    itemsize : int
    commutative : bool

    Notes
    -----
    ``T <= (ceil(log2 P) + 1) max(L + g(M), os(M) + or(M))`` on one network. Builds in
    O(P log P).

    References
    ----------
    Hillis and Steele 1986; MPI-3.1, sec. 5.11.2 (``MPI_Exscan``).
    """
    return _doubling("exscan", grid, nbytes, root, itemsize, commutative)
