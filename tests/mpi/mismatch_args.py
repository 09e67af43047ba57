"""Arguments that differ across ranks: the mismatch is found and the ranks carry on.

Run under ``mpiexec -n 4`` on ``magpie:2,2`` (clusters {0, 1} and {2, 3}), emulated or
not. Each case makes a fresh ``gridcoll.Comm``, then every rank calls (1) the
mismatched collective, (2) a correct broadcast from rank 0, (3) another one, (4) after
a plain barrier on ``COMM_WORLD``, ``close()`` of the communicator's state (what
``Free`` does), catching each error. A rank records the first error it met and when
(the stage and the seconds since the case began), and whether each broadcast's data
was right. The mismatch is raised in that call where a rank can see it (a header, a
stray, a peer waiting for it, a notice), else after the next call (a stray that was
still on its way); a user's reduction operation that raises raises on its rank and
fails the call on the others with a ``CollectiveError``; the calls after it succeed.
Rank 0 prints one JSON line per case.
"""

import json
import sys
import time

import numpy as np
from mpi4py import MPI

import gridcoll
from gridcoll.runtime import CollectiveError

TIMEOUT = 6.0


def allreduce_op(comm, rank):
    x = np.array([1.0, 2.0, 3.0, float(rank)])
    out = np.empty_like(x)
    comm.Allreduce(x, out, MPI.SUM if rank < 2 else MPI.MAX)
    return False  # any result is wrong on some rank: nobody may return silently


def allreduce_dtype(comm, rank):
    x = np.arange(4, dtype=np.float64 if rank < 2 else np.int64)
    out = np.empty_like(x)
    comm.Allreduce(x, out, MPI.SUM)
    return False


def bcast_root(comm, rank, n=1024):
    root = 0 if rank < 2 else 2
    data = np.full(n, root + 1, np.uint8) if rank == root else np.zeros(n, np.uint8)
    comm.Bcast(data, root=root)
    return False


def bcast_root_large(comm, rank):
    return bcast_root(comm, rank, 256 * 1024)  # rendezvous: the two roots' sends wait


def bcast_zero_length(comm, rank):
    n = 0 if rank == 3 else 100
    data = np.ones(n, np.uint8) if rank == 0 else np.zeros(n, np.uint8)
    comm.Bcast(data, root=0)
    return False


def gather_root(comm, rank):
    root = 3 if rank == 3 else 0
    recv = np.empty(4 * 8, np.int64) if rank == root else None
    comm.Gather(np.full(8, rank, np.int64), recv, root=root)
    return False


def reduce_root(comm, rank):
    root = 1 if rank == 3 else 0
    recv = np.empty(8, np.int64) if rank == root else None
    comm.Reduce(np.full(8, rank, np.int64), recv, MPI.SUM, root=root)
    return False


def _boom(inbuf, inoutbuf, datatype):
    raise RuntimeError(f"user op failed on rank {MPI.COMM_WORLD.Get_rank()}")


BOOM = MPI.Op.Create(_boom, commute=True)


def user_op_raises(comm, rank):
    x = np.full(16, float(rank))
    out = np.empty_like(x)
    comm.Allreduce(x, out, BOOM)  # raises where it combines; the others are told
    return False


def matching(comm, rank):
    """A control: the same calls with matching arguments raise nowhere."""
    x = np.arange(4, dtype=np.float64) + rank
    out = np.empty_like(x)
    comm.Allreduce(x, out, MPI.SUM)
    data = np.zeros(0, np.uint8)
    comm.Bcast(data, root=0)  # every rank empty: a barrier, passes
    return bool(np.array_equal(out, np.arange(4) * 4 + 6))


CASES = [
    allreduce_op,
    allreduce_dtype,
    bcast_root,
    bcast_root_large,
    bcast_zero_length,
    gather_root,
    reduce_root,
    user_op_raises,
    matching,
]


def _stage(record, name, start, action):
    try:
        return action()
    except Exception as err:  # every error is recorded: the test judges its kind
        record.setdefault("errors", []).append([name, type(err).__name__])
        if record["error"] is not None:
            return None
        record["error"] = type(err).__name__
        record["stage"] = name
        record["message"] = str(err)[:400]
        record["seconds"] = round(time.monotonic() - start, 3)
        record["collective_error"] = isinstance(err, CollectiveError)
        return None


def follow_up(comm, rank):
    """A correct broadcast from rank 0 (the next call)."""
    data = np.full(64, 9, np.uint8) if rank == 0 else np.zeros(64, np.uint8)
    comm.Bcast(data, root=0)
    return bool((data == 9).all())


def run_case(world, case, rank):
    comm = gridcoll.Comm(world, timeout=TIMEOUT)
    comm.Barrier()  # set-up outside the timed stages
    record = {"rank": rank, "error": None, "stage": None}
    start = time.monotonic()
    record["correct"] = _stage(record, "call", start, lambda: case(comm, rank))
    record["follow_up_correct"] = _stage(record, "next call", start, lambda: follow_up(comm, rank))
    record["then_correct"] = _stage(record, "then", start, lambda: follow_up(comm, rank))
    world.Barrier()
    _stage(record, "free", start, comm.gridcoll_state.close)
    record["total_seconds"] = round(time.monotonic() - start, 3)
    return record


def main():
    world = MPI.COMM_WORLD
    rank = world.Get_rank()
    only = sys.argv[1].split(",") if len(sys.argv) > 1 else None
    for case in CASES:
        if only and case.__name__ not in only:
            continue
        record = run_case(world, case, rank)
        world.Barrier()
        everyone = world.gather(record, root=0)
        if rank == 0:
            print(json.dumps({"case": case.__name__, "ranks": everyone}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
