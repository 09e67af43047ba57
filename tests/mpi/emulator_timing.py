"""Time the WAN emulator on magpie:2,2 (10 ms, 1 MB/s pair links); run with 4 ranks.

The grid is the first argument (default ``magpie:2,2``; ``magpie:2,2+fair`` shares the
links fairly).

1. one 10**6-byte message 0 -> 2 crosses link c0->c1: expect ~1.01 s;
2. two concurrent 10**6-byte messages 0 -> 2 and 1 -> 3 share that link: FIFO delivers
   the second ~2.01 s after they start; fair sharing delivers both then;
3. the same two, the second sent 0.5 s after the first: FIFO delivers the first at
   1.01 s and the second 1.51 s after its start; fair sharing gives each half the link
   while both are on it: both 1.51 s after their own start.
Prints one JSON line (rank 0) with the times from each send's start to its receive.
"""

import json
import os
import sys
import time

import numpy as np
from mpi4py import MPI

import gridcoll
from gridcoll.runtime import execute
from gridcoll.schedule import Recv, Schedule, Send

os.environ["GRIDCOLL_EMULATE"] = "1"
M = 10**6


def schedule(pairs):
    programs = [[] for _ in range(4)]
    for i, (a, b) in enumerate(pairs):
        programs[a].append(Send(b, (i,)))
        programs[b].append(Recv(a, (i,)))
    segments = tuple((i * M, M) for i in range(len(pairs)))
    return Schedule(
        "bcast", "test", 4, 0, M * len(pairs), segments, tuple(tuple(p) for p in programs)
    )


def run(comm, state, sched, late=()):
    """Run ``sched``; return every rank's (start, end) on the system-wide clock. Ranks
    in ``late`` start 0.5 s after the others."""
    buf = np.zeros(sched.nbytes, dtype=np.uint8)
    comm.Barrier()
    if comm.Get_rank() in late:
        time.sleep(0.5)
    start = time.monotonic()
    execute(sched, state.private, buf, emulator=state.emulator, timeout=30)
    return comm.gather((start, time.monotonic()), root=0)


def main():
    grid = sys.argv[1] if len(sys.argv) > 1 else "magpie:2,2"
    comm = gridcoll.Comm(MPI.COMM_WORLD, grid, algo="binomial")
    comm.Barrier()
    from gridcoll.runtime.state import ready

    state = ready(comm)
    assert state.emulator is not None, "emulation is not on"
    one = run(comm, state, schedule([(0, 2)]))
    two = run(comm, state, schedule([(0, 2), (1, 3)]))
    late = run(comm, state, schedule([(0, 2), (1, 3)]), late=(1, 3))
    if comm.Get_rank() == 0:
        t_one = one[2][1] - one[0][0]
        t_two = [two[2][1] - two[0][0], two[3][1] - two[1][0]]
        t_late = [late[2][1] - late[0][0], late[3][1] - late[1][0]]
        print(json.dumps({"one": t_one, "two": t_two, "late": t_late}), flush=True)
    comm.Barrier()
    return 0


if __name__ == "__main__":
    sys.exit(main())
