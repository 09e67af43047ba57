"""Schedule transforms: new valid schedules from proven ones.

:func:`reverse` runs a schedule backwards in time. Gather is "the inverse operation of
scatter" (seed 000, sec. 3.3) and a tree reduce is a tree broadcast run backwards with
combining receives, so one proven builder gives the other, and the validator
(:func:`gridcoll.schedule.validate`) proves the result again.

:func:`trimmed` makes the uneven (``v``) form of a personalised schedule: block ``i``
cut down to ``counts[i]`` bytes, so every builder of scatter, gather, allgather,
all-to-all and reduce-scatter also builds ``MPI_Scatterv``, ``Gatherv``,
``Allgatherv``, ``Alltoallv`` and ``Reduce_scatter``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from gridcoll.errors import ScheduleError
from gridcoll.schedule.ir import Op, Recv, Schedule, Send

__all__ = ["PERSONALISED", "block_sizes", "reverse", "reverse_program", "trimmed"]

PERSONALISED = ("scatter", "gather", "allgather", "alltoall", "reduce_scatter")
"""The collectives whose data space is blocks of ``nbytes`` (block ``i`` at ``i nbytes``;
all-to-all: ``P * P`` blocks): the ones :func:`trimmed` applies to."""


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


def trimmed(schedule: Schedule, counts: Sequence[int]) -> Schedule:
    """``schedule`` with block ``i`` cut down to its first ``counts[i]`` bytes.

    A personalised schedule (:data:`PERSONALISED`) moves blocks of ``b =
    schedule.nbytes`` bytes, block ``i`` at offset ``i b`` (all-to-all: ``P * P``
    blocks, ``src * P + dst``). Its uneven form keeps the offsets (``b`` stays the
    blocks' stride, at least the largest count) and every message, each segment
    ``(offset, length)`` of block ``i`` cut to the part below ``i b + counts[i]``:

    * a segment left with no byte is dropped, and the segments are renumbered;
    * a message left with no segment is dropped at both ends (its send and the
      receive it matches name the same segments, so both go, and every other
      message of that pair still meets the same receive: FIFO order per pair);
      control messages (no segments to begin with) stay.

    Why the result is valid: every byte that remains travels the path it travelled
    before, relays included (a relay forwards segment ``s`` only after receiving it,
    and both messages keep ``s`` or lose it together); a dropped message carried
    nothing, and the ordering it gave is not needed by anything it carried. The
    validator (:func:`gridcoll.schedule.validate.validate`) proves each result again
    in the tests. A block of zero bytes has no segment: nobody sends it, as MPI moves
    nothing for a zero count. O(total operations x segments per message).

    Parameters
    ----------
    schedule : Schedule
        A personalised schedule of ``nbytes = b`` per block.
    counts : sequence of int
        Bytes of every block (``P``, or ``P * P`` for all-to-all), each in ``[0, b]``.

    Raises
    ------
    ScheduleError
        For another collective, the wrong number of counts or a count out of range.

    Examples
    --------
    >>> from gridcoll.schedule.ir import Schedule
    >>> flat = Schedule("scatter", "flat", 3, 0, 4, ((0, 4), (4, 4), (8, 4)),
    ...                 ((Send(1, (1,)), Send(2, (2,))), (Recv(0, (1,)),), (Recv(0, (2,)),)))
    >>> v = trimmed(flat, (4, 0, 3))
    >>> v.segments
    ((0, 4), (8, 3))
    >>> v.programs[0], v.programs[1], v.programs[2][0].peer
    ((Send(peer=2, segments=(1,)),), (), 0)
    """
    if schedule.op not in PERSONALISED:
        raise ScheduleError(f"{schedule.op!r} has no uneven form; trimmed() takes {PERSONALISED}")
    b, P = schedule.nbytes, schedule.nranks
    nblocks = P * P if schedule.op == "alltoall" else P
    counts = tuple(counts)
    if len(counts) != nblocks:
        raise ScheduleError(
            f"{schedule.op} on {P} ranks has {nblocks} blocks, got {len(counts)} counts"
        )
    if any(not 0 <= c <= b for c in counts):
        raise ScheduleError(f"every count must be in [0, {b}] bytes (the blocks' stride)")
    renumber: dict[int, int] = {}
    segments: list[tuple[int, int]] = []
    for s, (offset, length) in enumerate(schedule.segments):
        block = offset // b
        keep = min(offset + length, block * b + counts[block]) - offset
        if keep > 0:
            renumber[s] = len(segments)
            segments.append((offset, keep))

    def cut(program: Sequence[Op]) -> tuple[Op, ...]:
        out: list[Op] = []
        for op in program:
            kept = tuple(renumber[s] for s in op.segments if s in renumber)
            if op.segments and not kept:
                continue
            if isinstance(op, Send):
                out.append(Send(op.peer, kept))
            else:
                out.append(Recv(op.peer, kept, op.combine, op.incoming_first))
        return tuple(out)

    return Schedule(
        schedule.op,
        schedule.algorithm,
        P,
        schedule.root,
        b,
        tuple(segments),
        tuple(cut(p) for p in schedule.programs),
        dict(schedule.params),
    )


def block_sizes(schedule: Schedule) -> dict[int, int]:
    """Bytes of every non-empty block of a personalised schedule (:func:`trimmed`):
    the sum of its segments. O(segments)."""
    sizes: dict[int, int] = {}
    for offset, length in schedule.segments:
        block = offset // schedule.nbytes
        sizes[block] = sizes.get(block, 0) + length
    return sizes
