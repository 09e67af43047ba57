"""Where a rank's part of a schedule's data space lives: the user's buffers, or a packed
staging buffer (pure Python, no MPI).

A schedule moves the bytes of a *data space* (:mod:`gridcoll.schedule.ir`): scatter,
gather and allgather ``P`` blocks of ``b`` bytes (block ``i`` belongs to rank ``i``),
all-to-all ``P * P`` blocks (block ``src * P + dst``), reduce-scatter ``P`` blocks of
every rank's vector (rank ``i`` ends with block ``i``), a reduction or a scan the ``M``
bytes of its vector (here: one block; exscan's rank 0 has no result and no receive
map: its buffer is left as it was, as MPI leaves it undefined). An MPI call gives each
rank a send buffer and a receive buffer, each a row of blocks; :func:`layout_for` maps
the blocks a rank's program touches onto one *local* buffer that the executor runs on
(:func:`gridcoll.runtime.executor.compile_program`'s ``layout``):

* ``"recv"``: the receive buffer itself, when every block the rank needs has a place
  there (gather at the root, allgather, allreduce, a reduce's root, a scatter leaf):
  its own input is copied in first (nothing to copy with ``MPI_IN_PLACE``);
* ``"send"``: the send buffer itself, when the rank only sends (a scatter's root, a
  gather or reduce leaf), then its own output copied out (the root's block of a
  scatter);
* ``"staging"``: a packed buffer: the receive buffer's blocks at their own offsets
  first, then the other blocks the rank touches, in order (all-to-all: the rank's row
  is sent from it and its column received into it; a binomial scatter's inner rank
  holds its subtree's blocks). Copies in before, out after.

So a rank never holds more than the blocks its program touches (an all-to-all rank
``2 P`` blocks plus what it relays, not ``P * P``).

Uneven blocks (``Scatterv``, ``Gatherv``, ``Allgatherv``, ``Alltoallv``: a schedule
:func:`~gridcoll.schedule.transform.trimmed` to its counts) keep the blocks' stride in
the data space; a block's size is the sum of its segments
(:func:`~gridcoll.schedule.transform.block_sizes`, an empty block has none and no
place), and where each block sits in the user's buffers is the call's displacements
(``sdispls``, ``rdispls``: bytes), not ``i b``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from gridcoll.errors import GridcollError
from gridcoll.schedule.ir import Recv, Schedule
from gridcoll.schedule.transform import block_sizes

__all__ = ["Copy", "Layout", "block_maps", "layout_for", "touched_blocks"]

Copy = tuple[int, int, int]
"""``(source offset, destination offset, nbytes)``."""


@dataclass(frozen=True, slots=True)
class Layout:
    """One rank's local buffer for one schedule.

    ``offsets[s]`` is segment ``s``'s offset in the local buffer (``-1``: the rank never
    touches it); ``run_on`` is ``"recv"``, ``"send"`` or ``"staging"``; ``copy_in``
    copies from the send buffer into the local one before the call, ``copy_out`` from
    the local buffer into the receive buffer after it; ``size`` is the local buffer's
    byte size.
    """

    rank: int
    run_on: str
    size: int
    offsets: tuple[int, ...]
    copy_in: tuple[Copy, ...]
    copy_out: tuple[Copy, ...]


def _block_size(schedule: Schedule) -> int:
    return schedule.nbytes


VECTOR_OPS = ("reduce", "allreduce", "scan", "exscan")
"""The collectives whose data space is one vector (block 0), not blocks of ranks."""


def _sizes(schedule: Schedule) -> dict[int, int]:
    """Bytes of every block that has any (a reduction's vector is block 0)."""
    if schedule.op in VECTOR_OPS:
        return {0: schedule.nbytes}
    return block_sizes(schedule)


def block_maps(
    schedule: Schedule,
    rank: int,
    *,
    inplace: bool = False,
    sdispls: Sequence[int] | None = None,
    rdispls: Sequence[int] | None = None,
) -> tuple[dict, dict]:
    """(send map, receive map): block -> byte offset in the rank's send / receive buffer.

    With ``inplace`` (``MPI.IN_PLACE``) the send buffer *is* the receive buffer, laid
    out as MPI says for that collective (gather's root, allgather: the rank's own block
    at its place in the receive buffer; all-to-all: the receive buffer is the send
    buffer; reductions and scans: the vector; reduce-scatter: the whole vector, its
    result at the start; scatter's root keeps its block in the send buffer: no receive
    map).

    ``sdispls`` / ``rdispls`` (the uneven forms): the byte offset of every block of
    the rank's send / receive buffer, in MPI's order (a scatter root's ``i``, a gather
    root's or an allgather's ``i``, an all-to-all rank's ``d`` and ``s``, a
    reduce-scatter's block ``i`` of the vector); default ``i b``.
    """
    op, P, root, b = schedule.op, schedule.nranks, schedule.root, _block_size(schedule)
    sd = range(0, P * b, b) if sdispls is None else sdispls
    rd = range(0, P * b, b) if rdispls is None else rdispls
    send: dict[int, int] = {}
    recv: dict[int, int] = {}
    if op == "scatter":
        if rank == root:
            send = {i: sd[i] for i in range(P)}
            if not inplace:
                recv = {rank: 0}
        else:
            recv = {rank: 0}
    elif op == "gather":
        send = {rank: rd[rank] if inplace else 0}
        if rank == root:
            recv = {i: rd[i] for i in range(P)}
    elif op == "allgather":
        send = {rank: rd[rank] if inplace else 0}
        recv = {i: rd[i] for i in range(P)}
    elif op == "alltoall":
        send = {rank * P + d: sd[d] for d in range(P)}
        recv = {s * P + rank: rd[s] for s in range(P)}
    elif op in VECTOR_OPS:
        send = {0: 0}
        gets = {"reduce": rank == root, "exscan": rank != 0}.get(op, True)
        if gets:  # exscan's rank 0 has no result (MPI: undefined): its buffer is left as it was
            recv = {0: 0}
    elif op == "reduce_scatter":  # every rank's whole vector; its own block back
        send = {k: sd[k] for k in range(P)}
        recv = {rank: 0}
    else:
        raise GridcollError(f"no buffer layout for {op!r}")
    return send, recv


def _block_of(schedule: Schedule, segment: int) -> int:
    if schedule.op in VECTOR_OPS:
        return 0
    return schedule.segments[segment][0] // _block_size(schedule)


def touched_blocks(schedule: Schedule, rank: int) -> tuple[set[int], bool]:
    """(the blocks ``rank``'s program sends or receives, whether it receives at all)."""
    blocks: set[int] = set()
    receives = False
    for op in schedule.programs[rank]:
        receives = receives or (isinstance(op, Recv) and bool(op.segments))
        blocks.update(_block_of(schedule, s) for s in op.segments)
    return blocks, receives


def _runs(copies: list[Copy]) -> tuple[Copy, ...]:
    """Merge copies that continue each other on both sides."""
    out: list[list[int]] = []
    for src, dst, n in sorted(copies, key=lambda c: c[1]):
        if out and out[-1][0] + out[-1][2] == src and out[-1][1] + out[-1][2] == dst:
            out[-1][2] += n
        else:
            out.append([src, dst, n])
    return tuple((a, b, c) for a, b, c in out)


def layout_for(
    schedule: Schedule,
    rank: int,
    *,
    inplace: bool = False,
    sdispls: Sequence[int] | None = None,
    rdispls: Sequence[int] | None = None,
) -> Layout:
    """The local buffer of ``rank`` for ``schedule`` (module notes; ``sdispls`` and
    ``rdispls``: :func:`block_maps`). O(segments)."""
    sizes = _sizes(schedule)
    send, recv = block_maps(schedule, rank, inplace=inplace, sdispls=sdispls, rdispls=rdispls)
    send = {k: v for k, v in send.items() if k in sizes}  # empty blocks have no place
    recv = {k: v for k, v in recv.items() if k in sizes}
    touched, receives = touched_blocks(schedule, rank)
    missing = set(recv) - touched - set(send)
    if missing:
        raise GridcollError(
            f"rank {rank} of {schedule.algorithm!r} never receives block(s) {sorted(missing)}"
        )
    needed = touched | (set(send) & set(recv))
    if needed <= set(recv):
        place = dict(recv)
        run_on = "recv"
        size = max((place[k] + sizes[k] for k in place), default=0)
        copy_in = [(send[k], place[k], sizes[k]) for k in needed & set(send)]
        if inplace:
            copy_in = [c for c in copy_in if c[0] != c[1]]
        copy_out: list[Copy] = []
    elif needed <= set(send) and not receives:
        place = dict(send)
        run_on = "send"
        size = max((place[k] + sizes[k] for k in place), default=0)
        copy_in = []
        copy_out = [(place[k], recv[k], sizes[k]) for k in recv]
    else:  # packed: the receive buffer's blocks first, then the rest in order
        place = {}
        end = 0
        rest = sorted(needed - set(recv), key=lambda k: (k not in send, send.get(k, 0), k))
        for k in [*sorted(recv, key=recv.__getitem__), *rest]:
            place[k] = end
            end += sizes[k]
        run_on, size = "staging", end
        copy_in = [(send[k], place[k], sizes[k]) for k in needed & set(send)]
        copy_out = [(place[k], recv[k], sizes[k]) for k in recv]
    start = 0 if schedule.op in VECTOR_OPS else schedule.nbytes  # block k at k start
    offsets = []
    for s, (offset, _) in enumerate(schedule.segments):
        k = _block_of(schedule, s)
        offsets.append(place[k] + offset - k * start if k in place else -1)
    return Layout(rank, run_on, size, tuple(offsets), _runs(copy_in), _runs(copy_out))
