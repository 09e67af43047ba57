"""Barrier builders: no rank leaves before every rank has entered.

A barrier moves no data: every message is a control message
(:data:`~gridcoll.schedule.ir.CONTROL_BYTES`), the schedules have no segments and
``nbytes = 0`` (any ``nbytes`` given is ignored), and the validator checks causality:
each rank must have heard, directly or through others, from every rank before it
finishes.

* :func:`dissemination_barrier` - the flat-network baseline (MPICH's): ``ceil(log2 P)``
  rounds, in round ``j`` rank ``r`` signals ``r + 2^j`` and waits for ``r - 2^j``;
  on a grid about ``log2 P_w`` of the rounds cross the WAN.
* :func:`two_level_barrier` - each cluster's ranks signal their coordinator, the
  coordinators signal each other all at once (one WAN round), then release their
  ranks.
"""

from __future__ import annotations

from gridcoll.errors import ParameterError
from gridcoll.network.grid import Grid
from gridcoll.schedule.ir import Op, Recv, Schedule, Send

__all__ = ["check_barrier", "dissemination_barrier", "two_level_barrier"]


def check_barrier(grid: Grid, nbytes: int, root: int) -> None:
    """A barrier's arguments: ``root`` in range, ``nbytes`` a whole number >= 0."""
    grid.check_rank(root, "root")
    if not isinstance(nbytes, int) or isinstance(nbytes, bool) or nbytes < 0:
        raise ParameterError(f"a barrier's size must be 0 (it is ignored), got {nbytes!r}")


def _schedule(algorithm: str, grid: Grid, programs: list[list[Op]]) -> Schedule:
    return Schedule(
        "barrier", algorithm, grid.nranks, 0, 0, (), tuple(tuple(p) for p in programs), {}
    )


def dissemination_barrier(
    grid: Grid, nbytes: int = 0, root: int = 0, *, itemsize: int = 1
) -> Schedule:
    """The dissemination barrier: ``ceil(log2 P)`` rounds of one signal per rank.

    Parameters
    ----------
    grid : Grid
    nbytes, root, itemsize
        Checked, otherwise ignored.

    Returns
    -------
    Schedule

    Notes
    -----
    ``T = ceil(log2 P) (os(1) + L + or(1))`` on one network; on a grid numbered cluster
    by cluster the rounds with ``2^j >= N`` cross the WAN. Builds in O(P log P).

    References
    ----------
    D. Hensgen, R. Finkel, U. Manber, *Two algorithms for barrier synchronization*,
    IJPP 17(1), 1988; Thakur, Rabenseifner and Gropp 2005 (MPICH's barrier).

    Examples
    --------
    >>> from gridcoll.network import magpie
    >>> [(type(op).__name__, op.peer) for op in dissemination_barrier(magpie(1, 3)).programs[0]]
    [('Send', 1), ('Recv', 2), ('Send', 2), ('Recv', 1)]
    """
    check_barrier(grid, nbytes, root)
    P = grid.nranks
    programs: list[list[Op]] = [[] for _ in range(P)]
    dist = 1
    while dist < P:
        for r in range(P):
            programs[r] += [Send((r + dist) % P, ()), Recv((r - dist) % P, ())]
        dist <<= 1
    return _schedule("dissemination", grid, programs)


def two_level_barrier(grid: Grid, nbytes: int = 0, root: int = 0, *, itemsize: int = 1) -> Schedule:
    """Two-level barrier with one WAN round.

    Every rank signals its cluster's coordinator (its lowest rank) and waits for its
    release; a coordinator waits for its ranks, signals every other coordinator, waits
    for all of them, then releases its ranks.

    Notes
    -----
    ``T = 2 (L_l + g_l(1)) + (P_w - 2) s_w(1) + r_w(1)`` plus receive overheads: one
    WAN latency, against about ``log2 P_w`` for :func:`dissemination_barrier`. Builds
    in O(P + P_w^2).

    References
    ----------
    Seed 000, sec. 3.1 (MagPIe's coordinators: no path holds two WAN hops).
    """
    check_barrier(grid, nbytes, root)
    P = grid.nranks
    programs: list[list[Op]] = [[] for _ in range(P)]
    coordinators = [ranks[0] for ranks in grid.members]
    C = len(coordinators)
    for c, coordinator in enumerate(coordinators):
        members = grid.members[c][1:]
        for r in members:
            programs[r] += [Send(coordinator, ()), Recv(coordinator, ())]
        program = programs[coordinator]
        program += [Recv(r, ()) for r in members]
        program += [Send(coordinators[(c + i) % C], ()) for i in range(1, C)]
        program += [Recv(coordinators[(c - i) % C], ()) for i in range(1, C)]
        program += [Send(r, ()) for r in members]
    return _schedule("two-level", grid, programs)
