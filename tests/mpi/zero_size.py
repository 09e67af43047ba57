"""Calls that move no data, as mpi4py has them: every collective and every v-form, with
zero-length buffers and ``None`` (MPI_BOTTOM with a datatype) buffers.

Run under ``mpiexec -n 4`` on an emulated grid. Every rank makes the same calls; a
block collective whose buffers are empty must complete without running a program
(no message, no wide-area round trip: counted by wrapping the runtime's ``execute``);
a v-form whose counts only the root knows (``Scatterv``, ``Gatherv``) or that spread
over the ranks (``Alltoallv``) runs its agreement on counts, nothing more; then a
broadcast with data still delivers the right bytes (the empty calls' arguments ride
in its headers). Rank 0 prints one JSON line: per call, the programs it ran, and
the errors.
"""

import json
import sys

import numpy as np
from mpi4py import MPI

import gridcoll
from gridcoll.runtime import prepare


def calls(comm, size):
    e = np.zeros(0, np.int32)
    ez = np.zeros(0, np.float64)
    nb = [None, MPI.INT]
    nv = [None, (0, None), MPI.INT]
    zeros = [0] * size
    return {
        "Bcast": lambda: comm.Bcast(e, root=1),
        "Bcast None": lambda: comm.Bcast(nb, root=2),
        "Gather": lambda: comm.Gather(e, e, root=1),
        "Gather None": lambda: comm.Gather(nb, nb),
        "Scatter": lambda: comm.Scatter(e, e, root=3),
        "Scatter None": lambda: comm.Scatter(nb, nb),
        "Allgather": lambda: comm.Allgather(e, e),
        "Allgather None": lambda: comm.Allgather(nb, nb),
        "Alltoall": lambda: comm.Alltoall(e, e),
        "Alltoall None": lambda: comm.Alltoall(nb, nb),
        "Reduce": lambda: comm.Reduce(ez, ez, MPI.SUM, root=2),
        "Reduce None": lambda: comm.Reduce(nb, nb),
        "Allreduce": lambda: comm.Allreduce(ez, ez, MPI.MAX),
        "Allreduce None": lambda: comm.Allreduce(nb, nb),
        "Reduce_scatter_block": lambda: comm.Reduce_scatter_block(ez, ez, MPI.SUM),
        "Reduce_scatter": lambda: comm.Reduce_scatter(nb, nb, zeros, MPI.SUM),
        "Scan": lambda: comm.Scan(nb, nb),
        "Exscan": lambda: comm.Exscan(ez, ez),
        "Allgatherv": lambda: comm.Allgatherv(nb, nv),
        "Allgatherv counts": lambda: comm.Allgatherv(e, [e, zeros]),
        "Gatherv": lambda: comm.Gatherv(nb, nv),
        "Scatterv": lambda: comm.Scatterv(nv, nb),
        "Alltoallv": lambda: comm.Alltoallv(nv, nv),
        "Ibcast": lambda: comm.Ibcast(e).Wait(),
        "Iallreduce None": lambda: comm.Iallreduce(nb, nb).Wait(),
    }


def main():
    world = MPI.COMM_WORLD
    rank, size = world.Get_rank(), world.Get_size()
    comm = gridcoll.Comm(world.Dup(), timeout=20)
    comm.Barrier()  # set-up outside the counted calls
    programs = [0]
    run = prepare.execute

    def counted(*args, **kwargs):
        programs[0] += 1
        return run(*args, **kwargs)

    prepare.execute = counted
    report = {"rank": rank, "programs": {}, "errors": {}}
    for name, call in calls(comm, size).items():
        before = programs[0]
        try:
            call()
        except Exception as err:  # the test judges every error
            report["errors"][name] = f"{type(err).__name__}: {err}"
        report["programs"][name] = programs[0] - before
    data = np.arange(100, dtype=np.int64) if rank == 0 else np.zeros(100, np.int64)
    comm.Bcast(data, root=0)
    report["after"] = bool(np.array_equal(data, np.arange(100)))
    everyone = world.gather(report, root=0)
    if rank == 0:
        print(json.dumps(everyone), flush=True)
    comm.Free()
    return 0


if __name__ == "__main__":
    sys.exit(main())
