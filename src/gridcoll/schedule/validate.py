"""Prove a schedule correct by replaying it symbolically.

The replay runs every rank's program in order, with blocking receives and
non-blocking sends (the semantics of :mod:`gridcoll.schedule.ir`), matching the
messages of each ordered pair of ranks first-in first-out. Instead of bytes it tracks,
for every rank and segment, *whose data* the rank holds: the set of ranks whose
contribution the held value is made of (one rank for a copy, several after reductions).

Non-commutative reductions (``schedule.params["commutative"] is False``) must also
combine in rank order: every held value must then be the reduction of a contiguous
interval of ranks ``[lo, hi]``, and a combining receive must join two adjacent
intervals with the lower one on the left: the held data's interval just before the
incoming one for a default receive (``held = held (op) incoming``), just after it for
an :attr:`~gridcoll.schedule.ir.Recv.incoming_first` one (``held = incoming (op)
held``). The replay names the first combine that would reorder operands.

It raises :class:`~gridcoll.errors.ScheduleError` naming the first rank and segment at
fault when a rank sends a segment it does not hold, a receive expects other segments
than the matched send carries, a reduction would count a contribution twice, the
programs deadlock, a message is never received, a non-commutative reduction combines
out of rank order, or a rank ends without exactly the data the collective defines.
Cost: O(total operations x segments per message).
"""

from __future__ import annotations

from collections import deque

from gridcoll.errors import ScheduleError
from gridcoll.schedule.ir import Recv, Schedule, Send

__all__ = ["REDUCTIONS", "expected_holdings", "initial_holdings", "is_ordered", "validate"]

Holdings = list[dict[int, frozenset[int]]]

REDUCTIONS = ("reduce", "allreduce", "reduce_scatter", "scan", "exscan")
"""The collectives that combine data: every rank starts with its own contribution in
every segment. reduce_scatter's data space is ``P`` blocks of ``nbytes`` (rank ``i``
ends with block ``i`` reduced over all ranks); scan's and exscan's the ``M``-byte
vector (rank ``i`` ends with ``x_0 (op) ... (op) x_i``, for exscan ``x_{i-1}``, rank
0's exscan result undefined)."""


def _block_of(schedule: Schedule, segment: int) -> int:
    """The block (owner index) a segment of a personalised data space belongs to."""
    offset, length = schedule.segments[segment]
    block = offset // schedule.nbytes
    if (offset + max(length, 1) - 1) // schedule.nbytes != block:
        raise ScheduleError(
            f"segment {segment} ({offset}, {length}) straddles two blocks", segment=segment
        )
    return block


def initial_holdings(schedule: Schedule) -> Holdings:
    """What every rank holds before the call, per segment: the contributing ranks."""
    P, op, root = schedule.nranks, schedule.op, schedule.root
    nseg = len(schedule.segments)
    held: Holdings = [{} for _ in range(P)]
    if op in ("bcast", "scatter"):
        held[root] = {s: frozenset((root,)) for s in range(nseg)}
    elif op in ("gather", "allgather"):
        for s in range(nseg):
            owner = _block_of(schedule, s)
            held[owner][s] = frozenset((owner,))
    elif op == "alltoall":
        for s in range(nseg):
            src = _block_of(schedule, s) // P
            held[src][s] = frozenset((src,))
    elif op in REDUCTIONS:
        for r in range(P):
            held[r] = {s: frozenset((r,)) for s in range(nseg)}
    return held


def expected_holdings(schedule: Schedule) -> Holdings:
    """What every rank must hold after the call (segments it need not hold are absent)."""
    P, op, root = schedule.nranks, schedule.op, schedule.root
    nseg = len(schedule.segments)
    everyone = frozenset(range(P))
    want: Holdings = [{} for _ in range(P)]
    if op == "bcast":
        want = [{s: frozenset((root,)) for s in range(nseg)} for _ in range(P)]
    elif op == "scatter":
        for s in range(nseg):
            owner = _block_of(schedule, s)
            want[owner][s] = frozenset((root,))
    elif op == "gather":
        want[root] = {s: frozenset((_block_of(schedule, s),)) for s in range(nseg)}
    elif op == "allgather":
        want = [{s: frozenset((_block_of(schedule, s),)) for s in range(nseg)} for _ in range(P)]
    elif op == "alltoall":
        for s in range(nseg):
            src, dst = divmod(_block_of(schedule, s), P)
            want[dst][s] = frozenset((src,))
    elif op == "reduce":
        want[root] = {s: everyone for s in range(nseg)}
    elif op == "allreduce":
        want = [{s: everyone for s in range(nseg)} for _ in range(P)]
    elif op == "reduce_scatter":
        for s in range(nseg):
            want[_block_of(schedule, s)][s] = everyone
    elif op == "scan":
        want = [{s: frozenset(range(r + 1)) for s in range(nseg)} for r in range(P)]
    elif op == "exscan":  # rank 0's result is undefined
        want = [{s: frozenset(range(r)) for s in range(nseg)} if r else {} for r in range(P)]
    return want


def is_ordered(schedule: Schedule) -> bool:
    """True if the schedule reduces with a non-commutative operation (rank order)."""
    return schedule.op in REDUCTIONS and not schedule.params.get("commutative", True)


def validate(schedule: Schedule) -> None:
    """Replay ``schedule``; return None if every rank ends with exactly the right data.

    A barrier is checked by causality instead of data: every rank must, before it
    leaves, have heard (directly or through others) from every rank. A reduction with
    ``params["commutative"] is False`` must also combine in rank order (module notes).

    Raises
    ------
    ScheduleError
        With ``rank`` and ``segment`` set to the first place found wrong.
    """
    P = schedule.nranks
    held = initial_holdings(schedule)
    heard = [frozenset((r,)) for r in range(P)]  # happened-before knowledge, for barriers
    channels: dict[tuple[int, int], deque] = {}
    pc = [0] * P
    waiting: dict[tuple[int, int], int] = {}  # channel -> rank blocked on it
    ready = deque(range(P))
    programs = schedule.programs
    ordered = is_ordered(schedule)

    while ready:
        rank = ready.popleft()
        program = programs[rank]
        while pc[rank] < len(program):
            op = program[pc[rank]]
            if not 0 <= op.peer < P or op.peer == rank:
                raise ScheduleError(
                    f"rank {rank} op {pc[rank]} names peer {op.peer!r}, not another rank",
                    rank=rank,
                )
            if isinstance(op, Send):
                payload = {}
                for s in op.segments:
                    if s not in held[rank]:
                        raise ScheduleError(
                            f"rank {rank} sends segment {s} to rank {op.peer} before it holds it",
                            rank=rank,
                            segment=s,
                        )
                    payload[s] = held[rank][s]
                key = (rank, op.peer)
                channels.setdefault(key, deque()).append((op.segments, payload, heard[rank]))
                if waiting.get(key) == op.peer:
                    del waiting[key]
                    ready.append(op.peer)
                pc[rank] += 1
                continue
            key = (op.peer, rank)
            queue = channels.get(key)
            if not queue:
                waiting[key] = rank
                break
            segments, payload, knowledge = queue.popleft()
            if segments != op.segments:
                raise ScheduleError(
                    f"rank {rank} expects segments {op.segments} from rank {op.peer}, "
                    f"which sends {segments}",
                    rank=rank,
                    segment=(op.segments or segments or (None,))[0],
                )
            _deliver(held[rank], payload, op, rank, ordered)
            heard[rank] = heard[rank] | knowledge
            pc[rank] += 1

    stuck = [r for r in range(P) if pc[r] < len(programs[r])]
    if stuck:
        r = stuck[0]
        op = programs[r][pc[r]]
        raise ScheduleError(
            f"deadlock: rank {r} waits forever at op {pc[r]} for a message from rank "
            f"{op.peer} ({len(stuck)} rank(s) stuck)",
            rank=r,
        )
    for (src, dst), queue in sorted(channels.items()):
        if queue:
            raise ScheduleError(
                f"rank {dst} never receives {len(queue)} message(s) rank {src} sends it",
                rank=dst,
            )
    if schedule.op == "barrier":
        for r in range(P):
            if heard[r] != frozenset(range(P)):
                missing = min(set(range(P)) - heard[r])
                raise ScheduleError(
                    f"rank {r} leaves the barrier before hearing from rank {missing}", rank=r
                )
        return
    _check_final(held, expected_holdings(schedule))


def _deliver(
    held: dict[int, frozenset[int]], payload: dict, op: Recv, rank: int, ordered: bool
) -> None:
    for s, contributors in payload.items():
        if op.combine:
            mine = held.get(s, frozenset())
            if mine & contributors:
                raise ScheduleError(
                    f"rank {rank} would combine rank(s) {sorted(mine & contributors)}'s data "
                    f"into segment {s} twice",
                    rank=rank,
                    segment=s,
                )
            if ordered:
                _check_order(mine, contributors, op, rank, s)
            held[s] = mine | contributors
        else:
            held[s] = contributors


def _interval(ranks: frozenset[int]) -> str:
    if not ranks:
        return "nothing"
    if max(ranks) - min(ranks) + 1 == len(ranks):
        return f"[{min(ranks)}..{max(ranks)}]"
    return f"ranks {sorted(ranks)}"


def _check_order(
    mine: frozenset[int], incoming: frozenset[int], op: Recv, rank: int, s: int
) -> None:
    """A non-commutative combine must join adjacent rank intervals, lower on the left."""
    left, right = (incoming, mine) if op.incoming_first else (mine, incoming)
    contiguous = all(part and max(part) - min(part) + 1 == len(part) for part in (left, right))
    if not contiguous or max(left) + 1 != min(right):
        side = "incoming first" if op.incoming_first else "held first"
        raise ScheduleError(
            f"rank {rank} combines segment {s} out of rank order ({side}): "
            f"{_interval(left)} (op) {_interval(right)} is not x_lo (op) ... (op) x_hi of "
            f"adjacent rank intervals, as a non-commutative operation needs",
            rank=rank,
            segment=s,
        )


def _check_final(held: Holdings, want: Holdings) -> None:
    for rank, (have, need) in enumerate(zip(held, want, strict=True)):
        for s in sorted(need):
            if s not in have:
                raise ScheduleError(f"rank {rank} ends without segment {s}", rank=rank, segment=s)
            if have[s] != need[s]:
                raise ScheduleError(
                    f"rank {rank} ends with segment {s} made of rank(s) {sorted(have[s])}'s "
                    f"data instead of {sorted(need[s])}'s",
                    rank=rank,
                    segment=s,
                )
