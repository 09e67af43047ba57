"""The schedule: the segment-level program of one collective call, for every rank.

Every algorithm is a *builder* that returns a :class:`Schedule`; the model, the
simulator and the MPI runtime all execute the same object (``docs/architecture.md``).

Data
    A collective moves bytes of a *data space*: for a broadcast of ``M`` bytes it is
    those ``M`` bytes; for scatter, gather and allgather it is ``P`` blocks of ``M``
    bytes (block ``i`` belongs to rank ``i``). The space is cut into *segments*
    ``(offset, length)``; a message carries one or more whole segments, concatenated
    in the order listed.

Programs
    Each rank runs an ordered tuple of operations:

    * :class:`Send` ``(peer, segments)``: start sending those segments to ``peer``. It
      does not wait for delivery (``MPI_Isend``); the CPU is busy ``os(m)``.
    * :class:`Recv` ``(peer, segments, combine, incoming_first)``: wait until the next
      message from ``peer`` has arrived and take it (``MPI_Irecv`` posted early, waited
      on here). With ``combine`` the incoming data is reduced into the data held
      (reductions): ``held = held (op) incoming`` by default, ``held = incoming (op)
      held`` with ``incoming_first`` (see *Reductions* below).

    A send with no segments is a *control message* of :data:`CONTROL_BYTES` bytes (the
    rendezvous handshakes of seed 002, Table 1). Messages between one pair of ranks are
    matched in program order, as MPI's non-overtaking rule guarantees.

Reductions
    Every rank starts with its own contribution in every segment. A combining receive
    applies the operation with the data already held as the *left* operand and the
    incoming data as the *right* one (``held = held (op) incoming``); with
    ``incoming_first`` the incoming data is the left operand (``held = incoming (op)
    held``). For a commutative operation the side does not matter. For a
    non-commutative one (``params["commutative"] is False``) the builders order every
    combine so that the result is ``x_0 (op) x_1 (op) ... (op) x_{P-1}`` in rank order,
    and :func:`gridcoll.schedule.validate` proves it: each held value is the reduction
    of a contiguous interval of ranks, and a combine joins two adjacent intervals, the
    lower one on the left. In MPI terms, ``MPI_Reduce_local(inbuf, inoutbuf)`` computes
    ``inoutbuf = inbuf (op) inoutbuf``: an ``incoming_first`` receive is
    ``Reduce_local(incoming, held)``; a default one is ``Reduce_local(held, incoming)``
    followed by copying ``incoming`` into ``held``.

Executing the program in order is the semantics all three executors share: a rank
that receives segment ``s`` and then sends it on forwards each segment as soon as it
has arrived (seed 003's packet-level transfer), with parallel sends to its children.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from gridcoll.errors import ParameterError, ScheduleError

__all__ = ["CONTROL_BYTES", "OPERATIONS", "Op", "Recv", "Schedule", "Send", "split_segments"]

CONTROL_BYTES = 1
"""Size of a control message (rendezvous request or clear-to-send): ``g(1)`` in Table 1."""

OPERATIONS = (
    "bcast",
    "scatter",
    "gather",
    "allgather",
    "alltoall",
    "reduce",
    "allreduce",
    "barrier",
)
"""The collective operations a schedule can describe."""


@dataclass(frozen=True, slots=True)
class Send:
    """Send ``segments`` (empty: a control message) to rank ``peer``."""

    peer: int
    segments: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class Recv:
    """Receive the next message from rank ``peer``; it carries ``segments``.

    With ``combine`` the message is reduced into the data held: ``held = held (op)
    incoming``, or ``held = incoming (op) held`` with ``incoming_first``.
    """

    peer: int
    segments: tuple[int, ...]
    combine: bool = False
    incoming_first: bool = False


Op = Send | Recv


@dataclass(frozen=True)
class Schedule:
    """The program of one collective call.

    Parameters
    ----------
    op : str
        The collective, one of :data:`OPERATIONS`.
    algorithm : str
        The builder's registered name (``"binomial-segmented"``).
    nranks, root : int
        Communicator size and root rank (0 for rootless collectives).
    nbytes : int
        ``M``: the message size of the call (per rank, for the personalised ones).
    segments : tuple of (offset, length)
        The segments of the data space.
    programs : tuple of tuple of Op
        ``programs[r]`` is rank r's program.
    params : mapping
        The builder's parameters (segment size, degrees...), kept for explanations.
    """

    op: str
    algorithm: str
    nranks: int
    root: int
    nbytes: int
    segments: tuple[tuple[int, int], ...]
    programs: tuple[tuple[Op, ...], ...]
    params: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.op not in OPERATIONS:
            raise ScheduleError(f"unknown collective {self.op!r}; expected one of {OPERATIONS}")
        if len(self.programs) != self.nranks:
            raise ScheduleError(
                f"schedule has {len(self.programs)} programs for {self.nranks} ranks"
            )

    @cached_property
    def message_bytes(self) -> dict[tuple[int, ...], int]:
        """Byte size of every distinct segment tuple that some message carries."""
        lengths = self.segments
        sizes: dict[tuple[int, ...], int] = {}
        for rank, program in enumerate(self.programs):
            for op in program:
                if op.segments not in sizes:
                    bad = [s for s in op.segments if not 0 <= s < len(lengths)]
                    if bad:
                        raise ScheduleError(
                            f"rank {rank} names segment {bad[0]!r}, which the schedule "
                            f"does not define",
                            rank=rank,
                            segment=bad[0],
                        )
                    sizes[op.segments] = (
                        sum(lengths[s][1] for s in op.segments) if op.segments else CONTROL_BYTES
                    )
        return sizes

    def nbytes_of(self, op: Op) -> int:
        """Bytes on the wire for one send or receive."""
        return self.message_bytes[op.segments]

    @property
    def nmessages(self) -> int:
        """Number of messages sent in total."""
        return sum(isinstance(op, Send) for program in self.programs for op in program)

    @property
    def segment_size(self) -> int:
        """The largest segment (the ``m`` of the papers)."""
        return max((length for _, length in self.segments), default=0)

    def describe(self) -> str:
        """One line: algorithm, parameters, segments and messages."""
        params = ", ".join(f"{k}={v}" for k, v in self.params.items())
        return (
            f"{self.op} {self.algorithm}({params}): {self.nranks} ranks, root {self.root}, "
            f"{self.nbytes} B in {len(self.segments)} segment(s), {self.nmessages} messages"
        )


def split_segments(
    nbytes: int, segment_size: int | None = None, itemsize: int = 1, offset: int = 0
) -> tuple[tuple[int, int], ...]:
    """Cut ``nbytes`` (starting at ``offset``) into segments of ``segment_size`` bytes.

    ``k = ceil(M/m)`` segments (seed 000, Appendix A); the last one may be shorter. Each
    segment is a whole number of ``itemsize``-byte elements: "the segment size must be
    a multiple of the size of the basic data type" (seed 000, sec. 3.1.1). ``None``
    means one segment. Raises :class:`ParameterError` for a size <= 0, a segment size
    <= 0 or one that does not divide into the datatype.
    """
    if itemsize < 1:
        raise ParameterError(f"itemsize must be >= 1, got {itemsize!r}")
    if nbytes <= 0:
        raise ParameterError(f"message size must be > 0 bytes, got {nbytes!r}")
    if nbytes % itemsize:
        raise ParameterError(
            f"message size {nbytes} is not a whole number of {itemsize}-byte elements"
        )
    m = nbytes if segment_size is None else segment_size
    if m <= 0:
        raise ParameterError(f"segment size must be > 0 bytes, got {segment_size!r}")
    if m % itemsize:
        raise ParameterError(f"segment size {m} does not divide into the {itemsize}-byte datatype")
    m = min(m, nbytes)
    return tuple((offset + start, min(m, nbytes - start)) for start in range(0, nbytes, m))
