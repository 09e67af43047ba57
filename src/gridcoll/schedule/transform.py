"""Schedule transforms: new valid schedules from proven ones.

:func:`reverse` runs a schedule backwards in time. Gather is "the inverse operation of
scatter" (seed 000, sec. 3.3) and a tree reduce is a tree broadcast run backwards with
combining receives, so one proven builder gives the other, and the validator
(:func:`gridcoll.schedule.validate`) proves the result again.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gridcoll.schedule.ir import Op, Recv, Schedule, Send

__all__ = ["reverse", "reverse_program"]


def reverse_program(program: tuple[Op, ...] | list[Op], *, combine: bool = False) -> tuple[Op, ...]:
    """One rank's program backwards, every ``Send(peer, segs)`` now ``Recv(peer, segs)``
    (combining with ``combine``) and every ``Recv`` a ``Send``. O(len(program))."""
    return tuple(
        Recv(op.peer, op.segments, combine=combine) if isinstance(op, Send)
        else Send(op.peer, op.segments)
        for op in reversed(program)
    )  # fmt: skip


def reverse(
    schedule: Schedule,
    *,
    op: str,
    algorithm: str | None = None,
    combine: bool = False,
    params: Mapping[str, Any] | None = None,
) -> Schedule:
    """The time reversal of ``schedule``: every program backwards, sends and receives
    swapped.

    Parameters
    ----------
    schedule : Schedule
        A valid schedule (:func:`~gridcoll.schedule.validate`).
    op : str
        The collective the reversal performs (``"gather"`` for a scatter, ``"reduce"``
        for a broadcast).
    algorithm : str, optional
        Its name (default: the schedule's).
    combine : bool
        Make every new receive a combining one (a reduction: ``held = held (op)
        incoming``, which needs a commutative operation unless the data flow keeps
        rank order).
    params : mapping, optional
        The new schedule's parameters (default: the schedule's).

    Returns
    -------
    Schedule
        Same ranks, root, size and segments.

    Notes
    -----
    Why the reversal of a valid schedule is valid:

    * *Deadlock-free.* A valid schedule has an execution: a total order of all
      operations that keeps every program's order and puts each receive after its
      matching send. Read backwards it keeps every reversed program's order, and each
      new receive (an old send) now comes after its matching new send (the old
      receive): an execution of the reversed schedule. Sends never block
      (``MPI_Isend``), so a schedule with one execution cannot deadlock.
    * *Matching.* Messages of one ordered pair are matched in program order (MPI's
      non-overtaking rule). If ``a`` sent ``m_1, m_2`` to ``b``, which received them
      in that order, then ``b`` now sends ``m_2, m_1`` to ``a`` and ``a`` receives
      ``m_2, m_1``: the per-pair FIFO order is reversed on both ends alike, so every
      message still meets the receive naming the same segments, and none is left
      unreceived.
    * *Data.* A rank sends only segments it holds. In a scatter every segment travels
      down a path from the root to its owner, each relay receiving it before sending
      it on; backwards, it travels up the same path from the owner (which holds it
      from the start) to the root, each relay receiving it before sending it on. The
      root ends with every block: a gather. A broadcast down a tree reversed with
      ``combine`` makes each node combine its children's partial results before
      sending to its parent: a reduce (for a commutative operation: a child's
      subtree need not be the rank interval next to its parent's).

    A schedule whose data do not flow along such paths (a rank sending data it
    received from nobody and did not own) has no valid reversal; the validator says
    so. The timing may differ: a rank now waits on its messages in the reverse order
    of the original sends. O(total operations).

    References
    ----------
    Seed 000, sec. 3.3 ("Gather is the inverse operation of scatter"); seed 002,
    sec. 4 ("once modelling the Scatter we have a good approximation with the
    Gather model").

    Examples
    --------
    >>> from gridcoll.schedule.ir import Schedule
    >>> scatter = Schedule("scatter", "flat", 2, 0, 1, ((0, 1), (1, 1)),
    ...                    ((Send(1, (1,)),), (Recv(0, (1,)),)))
    >>> [[(type(o).__name__, o.peer, o.segments) for o in p]
    ...  for p in reverse(scatter, op="gather").programs]
    [[('Recv', 1, (1,))], [('Send', 0, (1,))]]
    """
    return Schedule(
        op,
        schedule.algorithm if algorithm is None else algorithm,
        schedule.nranks,
        schedule.root,
        schedule.nbytes,
        schedule.segments,
        tuple(reverse_program(p, combine=combine) for p in schedule.programs),
        dict(schedule.params if params is None else params),
    )
