"""A failed call leaves the communicator usable: a program that catches the error and
carries on gets correct results afterwards, on every rank, in every collective.

Run under ``mpiexec -n 4`` on ``magpie:2,2`` (clusters {0, 1} and {2, 3}), emulated or
not. For each failure (a user's reduction operation that raises, arguments that
differ across ranks, a rank late past the timeout, a v-collective whose buffer
disagrees with the agreed counts, bad arguments on every rank), every rank makes the
failing call on one ``gridcoll.Comm``, catches what it raises, then runs every
collective once on the same communicator, each result checked against numpy. Rank 0
prints one JSON line per failure: what each rank raised, and the collectives whose
result was wrong or that raised afterwards (none may).
"""

import json
import sys
import time

import numpy as np
from mpi4py import MPI

import gridcoll

TIMEOUT = 2.0


def _boom(inbuf, inoutbuf, datatype):
    raise RuntimeError(f"user op failed on rank {MPI.COMM_WORLD.Get_rank()}")


BOOM = MPI.Op.Create(_boom, commute=True)


def user_op_raises(comm, rank, size):
    x = np.full(16, float(rank))
    comm.Allreduce(x, np.empty_like(x), BOOM)


def dtype_differs(comm, rank, size):
    x = np.arange(4, dtype=np.float64 if rank < 2 else np.int64)
    comm.Allreduce(x, np.empty_like(x), MPI.SUM)


def root_differs(comm, rank, size):
    root = 0 if rank < 2 else 2
    comm.Bcast(np.full(4096, rank, np.uint8), root=root)


def size_differs(comm, rank, size):
    n = 100 if rank == 3 else 200
    comm.Bcast(np.zeros(n, np.uint8) if rank else np.ones(n, np.uint8), root=0)


def late_rank(comm, rank, size):
    if rank == 3:
        time.sleep(TIMEOUT * 1.5)  # the others time out; rank 3 is told on arrival
    x = np.full(8, rank, np.int64)
    comm.Allreduce(x, np.empty_like(x), MPI.SUM)


def counts_disagree(comm, rank, size):
    counts = [2, 2, 2, 2]
    send = np.arange(8, dtype=np.int32) if rank == 0 else None
    recv = np.empty(1 if rank == 2 else 2, np.int32)  # rank 2's buffer is too small
    comm.Scatterv([send, counts] if rank == 0 else None, recv, root=0)


def bad_arguments_everywhere(comm, rank, size):
    comm.Bcast(np.zeros(4), root=size)  # MPI.Exception(ERR_ROOT) before any message


FAILURES = [
    user_op_raises,
    dtype_differs,
    root_differs,
    size_differs,
    late_rank,
    counts_disagree,
    bad_arguments_everywhere,
]


def every_collective(comm, rank, size):
    """(name, thunk) pairs; a thunk runs one collective and returns whether its
    result is exact."""
    v = np.arange(10, dtype=np.int64) + 100 * rank
    total = sum(np.arange(10, dtype=np.int64) + 100 * r for r in range(size))

    def bcast():
        buf = np.arange(1000, dtype=np.float64) if rank == 1 else np.zeros(1000)
        comm.Bcast(buf, root=1)
        return np.array_equal(buf, np.arange(1000, dtype=np.float64))

    def allreduce():
        out = np.empty_like(v)
        comm.Allreduce(v, out, MPI.SUM)
        return np.array_equal(out, total)

    def reduce():
        out = np.empty_like(v) if rank == 2 else None
        comm.Reduce(v, out, MPI.SUM, root=2)
        return rank != 2 or np.array_equal(out, total)

    def gather():
        out = np.empty(size * 10, np.int64) if rank == 3 else None
        comm.Gather(v, out, root=3)
        return rank != 3 or np.array_equal(out.reshape(size, 10)[:, 0], 100 * np.arange(size))

    def scatter():
        send = np.repeat(np.arange(size, dtype=np.int32), 5) if rank == 0 else None
        out = np.empty(5, np.int32)
        comm.Scatter(send, out, root=0)
        return bool((out == rank).all())

    def allgather():
        out = np.empty(size * 10, np.int64)
        comm.Allgather(v, out)
        return np.array_equal(out.reshape(size, 10)[:, 0], 100 * np.arange(size))

    def alltoall():
        send = np.arange(size * 3, dtype=np.int32) + 1000 * rank
        out = np.empty(size * 3, np.int32)
        comm.Alltoall(send, out)
        expect = np.concatenate([np.arange(3) + 3 * rank + 1000 * r for r in range(size)])
        return np.array_equal(out, expect)

    def reduce_scatter():
        send = np.ones(size * 4, np.float64) * (rank + 1)
        out = np.empty(4)
        comm.Reduce_scatter_block(send, out, MPI.SUM)
        return bool((out == size * (size + 1) / 2).all())

    def scan():
        out = np.empty_like(v)
        comm.Scan(v, out, MPI.SUM)
        return np.array_equal(out, sum(np.arange(10) + 100 * r for r in range(rank + 1)))

    def allgatherv():
        counts = [r + 1 for r in range(size)]
        out = np.empty(sum(counts), np.int16)
        comm.Allgatherv(np.full(rank + 1, rank, np.int16), [out, counts])
        return np.array_equal(out, np.repeat(np.arange(size), counts))

    def barrier():
        comm.Barrier()
        return True

    def objects():
        return comm.allreduce(rank) == size * (size - 1) // 2

    return [
        ("bcast", bcast),
        ("allreduce", allreduce),
        ("reduce", reduce),
        ("gather", gather),
        ("scatter", scatter),
        ("allgather", allgather),
        ("alltoall", alltoall),
        ("reduce_scatter_block", reduce_scatter),
        ("scan", scan),
        ("allgatherv", allgatherv),
        ("barrier", barrier),
        ("allreduce of objects", objects),
    ]


def run_failure(world, failure, rank, size):
    comm = gridcoll.Comm(world.Dup(), timeout=TIMEOUT)
    comm.Barrier()
    record = {"rank": rank, "raised": None, "after": []}
    try:
        failure(comm, rank, size)
    except Exception as err:  # the test judges which ranks raised what
        record["raised"] = type(err).__name__
        record["message"] = str(err)[:300]
    for name, thunk in every_collective(comm, rank, size):
        try:
            if not thunk():
                record["after"].append([name, "wrong result"])
        except Exception as err:
            record["after"].append([name, f"{type(err).__name__}: {str(err)[:300]}"])
    try:
        comm.Free()
    except Exception as err:
        record["after"].append(["Free", f"{type(err).__name__}: {str(err)[:300]}"])
    return record


def main():
    world = MPI.COMM_WORLD
    rank, size = world.Get_rank(), world.Get_size()
    only = sys.argv[1].split(",") if len(sys.argv) > 1 else None
    for failure in FAILURES:
        if only and failure.__name__ not in only:
            continue
        record = run_failure(world, failure, rank, size)
        everyone = world.gather(record, root=0)
        if rank == 0:
            print(json.dumps({"failure": failure.__name__, "ranks": everyone}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
