"""The schedule: the segment-level program of one collective call, for every rank.

Every algorithm is a *builder* that returns a :class:`Schedule`; the model, the
simulator and the MPI runtime all execute the same object (``docs/architecture.md``).

Data
    A collective moves bytes of a *data space*: for a broadcast of ``M`` bytes it is
    those ``M`` bytes; for scatter, gather and allgather it is ``P`` blocks of ``M``
    bytes (block ``i`` belongs to rank ``i``); for reduce_scatter (MPI's
    ``Reduce_scatter_block``) too, every rank contributing all ``P`` blocks and rank
    ``i`` ending with block ``i`` reduced; for reduce, allreduce, scan and exscan the
    ``M``-byte vector every rank contributes. The space is cut into *segments*
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

Compact programs
    A program is any sequence of ops equal to the tuple of them. Most are tuples; a
    tree broadcast's is a :class:`PeriodicProgram` (one pattern of peers repeated for
    every segment), which stores O(degree) instead of O(k degree) objects and makes its
    ops on demand: a 10,000-rank broadcast of 512 segments is 10,000 small objects, not
    5 million ``Send`` and ``Recv``.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, overload

from gridcoll.errors import ParameterError, ScheduleError
from gridcoll.limits import MAX_SEGMENTS

__all__ = [
    "CONTROL_BYTES",
    "OPERATIONS",
    "Op",
    "PeriodicProgram",
    "Recv",
    "Schedule",
    "Send",
    "split_segments",
]

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
    "reduce_scatter",
    "scan",
    "exscan",
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


class PeriodicProgram(Sequence[Op]):
    """A program that repeats one pattern of ops for every message, in order.

    For each ``segments`` of ``messages`` in turn, one op per ``(send, peer)`` of
    ``pattern``: ``Send(peer, segments)`` if ``send``, else ``Recv(peer, segments)``.
    A segmented tree broadcast's node has ``pattern = ((False, parent), (True, c_1),
    ..., (True, c_d))``: receive segment s from the parent, forward it to each child,
    next segment (seed 000, sec. 3.1.1; seed 003's packet-level forwarding).

    It is a read-only sequence equal to (and hashing as) the tuple of its ops, so every
    executor reads it as any program. It stores O(len(pattern)) values; the ``Send``
    and ``Recv`` objects are made only when the program is indexed or iterated (once,
    then kept), and never by the simulator's dataflow replay, which reads ``pattern``
    and ``messages`` (:mod:`gridcoll.simulate.streams`). Slices are tuples; ``len`` is
    ``len(pattern) * len(messages)``.

    Examples
    --------
    >>> p = PeriodicProgram(((False, 0), (True, 2)), ((0,), (1,)))
    >>> p == (Recv(0, (0,)), Send(2, (0,)), Recv(0, (1,)), Send(2, (1,)))
    True
    >>> p[-1], len(p), p.nsends
    (Send(peer=2, segments=(1,)), 4, 2)
    """

    __slots__ = ("_ops", "messages", "pattern")

    def __init__(
        self, pattern: tuple[tuple[bool, int], ...], messages: tuple[tuple[int, ...], ...]
    ):
        self.pattern = tuple((bool(send), peer) for send, peer in pattern)
        self.messages = tuple(messages)
        self._ops: tuple[Op, ...] | None = None

    def ops(self) -> tuple[Op, ...]:
        """The explicit tuple of ops (made on the first call, O(len(self)), then kept)."""
        ops = self._ops
        if ops is None:
            kinds = [(Send if send else Recv, peer) for send, peer in self.pattern]
            ops = self._ops = tuple(
                [kind(peer, segments) for segments in self.messages for kind, peer in kinds]
            )
        return ops

    def __len__(self) -> int:
        return len(self.pattern) * len(self.messages)

    @overload
    def __getitem__(self, index: int) -> Op: ...

    @overload
    def __getitem__(self, index: slice) -> tuple[Op, ...]: ...

    def __getitem__(self, index: int | slice) -> Op | tuple[Op, ...]:
        return self.ops()[index]

    def __iter__(self) -> Iterator[Op]:
        return iter(self.ops())

    def __eq__(self, other: object) -> bool:
        if isinstance(other, PeriodicProgram):
            if (self.pattern, self.messages) == (other.pattern, other.messages):
                return True
            return self.ops() == other.ops()
        if isinstance(other, tuple):
            return self.ops() == other
        if isinstance(other, Sequence) and not isinstance(other, str | bytes):
            return self.ops() == tuple(other)
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self.ops())

    def __add__(self, other: Sequence[Op]) -> tuple[Op, ...]:
        return (*self.ops(), *other)

    def __radd__(self, other: Sequence[Op]) -> tuple[Op, ...]:
        return (*other, *self.ops())

    def __repr__(self) -> str:
        return repr(self.ops())

    def __reduce__(self):
        return (PeriodicProgram, (self.pattern, self.messages))

    @property
    def nsends(self) -> int:
        """Number of ``Send`` ops, without making them."""
        return sum(send for send, _ in self.pattern) * len(self.messages)


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
    programs : tuple of sequences of Op
        ``programs[r]`` is rank r's program: a tuple of ops, or a
        :class:`PeriodicProgram` equal to one.
    params : mapping
        The builder's parameters (segment size, degrees...), kept for explanations.
    """

    op: str
    algorithm: str
    nranks: int
    root: int
    nbytes: int
    segments: tuple[tuple[int, int], ...]
    programs: tuple[Sequence[Op], ...]
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
        shared: set[int] = set()  # ids of the periodic programs' messages seen
        for rank, program in enumerate(self.programs):
            if isinstance(program, PeriodicProgram):  # its messages, without its ops
                seen = id(program.messages) in shared or not program.pattern
                shared.add(id(program.messages))
                carried = () if seen else program.messages
            else:
                carried = (op.segments for op in program)
            for segments in carried:
                if segments not in sizes:
                    bad = [s for s in segments if not 0 <= s < len(lengths)]
                    if bad:
                        raise ScheduleError(
                            f"rank {rank} names segment {bad[0]!r}, which the schedule "
                            f"does not define",
                            rank=rank,
                            segment=bad[0],
                        )
                    sizes[segments] = (
                        sum(lengths[s][1] for s in segments) if segments else CONTROL_BYTES
                    )
        return sizes

    def nbytes_of(self, op: Op) -> int:
        """Bytes on the wire for one send or receive."""
        return self.message_bytes[op.segments]

    @property
    def nmessages(self) -> int:
        """Number of messages sent in total."""
        return sum(
            program.nsends
            if isinstance(program, PeriodicProgram)
            else sum(isinstance(op, Send) for op in program)
            for program in self.programs
        )

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
    <= 0 or one that does not divide into the datatype, and for more than
    :data:`~gridcoll.limits.MAX_SEGMENTS` segments (checked before any is made).
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
    if -(-nbytes // m) > MAX_SEGMENTS:
        raise ParameterError(
            f"segment size {m} cuts the {nbytes}-byte message into more than "
            f"{MAX_SEGMENTS} segments (gridcoll.limits.MAX_SEGMENTS); use a larger one"
        )
    return tuple((offset + start, min(m, nbytes - start)) for start in range(0, nbytes, m))
