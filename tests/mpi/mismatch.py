"""Mismatched arguments across ranks must raise, never hang or corrupt data.

Run under ``mpiexec -n 3``. Each case uses a fresh gridcoll.Comm with a short timeout;
rank 1 deviates from the others (a larger buffer, another dtype, another root, one call
too many). Every rank must either raise a gridcoll CollectiveError, or return with
exactly the data of the root it asked for (a root that only sends cannot notice), and
at least one rank must raise. Rank 0 prints one JSON line per case.
"""

import json
import sys
import time

import numpy as np
from mpi4py import MPI

import gridcoll
from gridcoll.runtime import CollectiveError

TIMEOUT = 2.0


def case_size(comm, rank):
    n = 64 if rank == 1 else 48
    data = np.arange(n, dtype=np.uint8) if rank == 0 else np.zeros(n, np.uint8)
    comm.Bcast(data, root=0)
    return bool(np.array_equal(data, np.arange(n, dtype=np.uint8)))


def case_dtype(comm, rank):
    dtype = np.int32 if rank == 1 else np.float64  # same bytes if 2x the count
    n = 32 if rank == 1 else 16
    data = np.arange(n).astype(dtype) if rank == 0 else np.zeros(n, dtype)
    comm.Bcast(data, root=0)
    return bool(np.array_equal(data, np.arange(n).astype(dtype)))


def case_root(comm, rank):
    root = 1 if rank == 1 else 0
    data = np.full(1000, root + 1, np.uint8) if rank == root else np.zeros(1000, np.uint8)
    comm.Bcast(data, root=root)
    ok = bool((data == root + 1).all())
    # No rank may receive a message of the other tree, so the roots only send: a stray
    # message is found at the latest by the next call.
    again = np.full(10, 5, np.uint8) if rank == 0 else np.zeros(10, np.uint8)
    comm.Bcast(again, root=0)
    return ok and bool((again == 5).all())


def case_extra_call(comm, rank):
    data = np.full(10, 7, np.uint8) if rank == 0 else np.zeros(10, np.uint8)
    comm.Bcast(data, root=0)
    if rank == 1:  # one call the others never make
        comm.Bcast(data, root=0)
    return bool((data == 7).all())


def case_large_size(comm, rank):
    n = 300_000 if rank == 2 else 200_000  # larger than expected: truncation or header
    data = np.ones(n, np.uint8) if rank == 0 else np.zeros(n, np.uint8)
    comm.Bcast(data, root=0)
    return bool((data == 1).all())


CASES = [case_size, case_dtype, case_root, case_extra_call, case_large_size]


def main():
    world = MPI.COMM_WORLD
    rank = world.Get_rank()
    status = 0
    for case in CASES:
        comm = gridcoll.Comm(world, algo="binomial", timeout=TIMEOUT)
        comm.Barrier()
        start = time.monotonic()
        try:
            ok = case(comm, rank)
            mine = {"raised": None, "correct": ok}
        except CollectiveError as err:
            mine = {"raised": type(err).__name__, "message": str(err)}
        mine["seconds"] = round(time.monotonic() - start, 3)
        try:  # Free: a notice of a call this rank returned from raises here
            comm.gridcoll_state.close()
        except CollectiveError as err:
            if not mine["raised"]:
                mine = {"raised": type(err).__name__, "message": str(err), "at": "free"}
                mine["seconds"] = round(time.monotonic() - start, 3)
        world.Barrier()
        everyone = world.gather(mine, root=0)
        if rank == 0:
            raised = [r for r in everyone if r["raised"]]
            silent_wrong = [
                i for i, r in enumerate(everyone) if not r["raised"] and not r["correct"]
            ]
            good = bool(raised) and not silent_wrong
            status |= not good
            print(json.dumps({"case": case.__name__, "ok": good, "ranks": everyone}), flush=True)
    return status


if __name__ == "__main__":
    sys.exit(main())
