"""A 50% load on WAN link A->B doubles a lone message's time there (seed 001, sec. 3).

Run with 2 ranks under ``gridcoll mpirun --grid FAST_A1_B1 --load TRACE`` where the
trace loads ``A->B`` at 50% and leaves ``B->A`` free. Rank 0 (cluster A) sends M bytes
to rank 1, then rank 1 sends M bytes back, each alone on its link, three times; rank 0
prints one JSON line with the median times of the loaded (0 -> 1) and unloaded
(1 -> 0) messages, from the send's start to the receive's completion.
"""

import json
import statistics
import sys
import time

import numpy as np
from mpi4py import MPI

import gridcoll
from gridcoll.runtime import execute
from gridcoll.runtime.state import ready
from gridcoll.schedule import Recv, Schedule, Send

M = 4 * 10**6  # 40 ms on a 100 MB/s link: 80 ms under a 50% load


def one_message(src, dst):
    programs = [[], []]
    programs[src].append(Send(dst, (0,)))
    programs[dst].append(Recv(src, (0,)))
    return Schedule("bcast", "test", 2, src, M, ((0, M),), tuple(tuple(p) for p in programs))


def timed(comm, state, sched):
    buf = np.zeros(M, dtype=np.uint8)
    comm.Barrier()
    start = time.monotonic()
    execute(sched, state.private, buf, emulator=state.emulator, timeout=30)
    return comm.gather((start, time.monotonic()), root=0)


def main():
    comm = gridcoll.Comm(MPI.COMM_WORLD, algo="binomial")
    comm.Barrier()
    state = ready(comm)
    assert state.emulator is not None, "emulation is not on"
    loaded, free = [], []
    for _ in range(3):
        t = timed(comm, state, one_message(0, 1))
        u = timed(comm, state, one_message(1, 0))
        if comm.Get_rank() == 0:
            loaded.append(t[1][1] - t[0][0])
            free.append(u[0][1] - u[1][0])
    if comm.Get_rank() == 0:
        out = {"loaded": statistics.median(loaded), "free": statistics.median(free)}
        print(json.dumps(out), flush=True)
    comm.Barrier()
    return 0


if __name__ == "__main__":
    sys.exit(main())
