"""``GRIDCOLL_CHECK=1`` on one cluster, where the MPI library runs every collective
(no gridcoll header): ranks that disagree on a call's reduction operation or root
raise ``MismatchError`` in that call, all of them; calls that agree still work.

Run under ``mpiexec -n N`` (N >= 4) with ``GRIDCOLL_CHECK=1``. Rank 0 prints one JSON
line: a list of every rank's outcomes (the error's class and message, or the result).
"""

import json

import numpy as np
from mpi4py import MPI

import gridcoll

world = MPI.COMM_WORLD
rank = world.Get_rank()
out = {"rank": rank}


def case(name, comm, fn):
    try:
        out[name] = ["ok", fn(comm)]
    except Exception as err:
        out[name] = [type(err).__name__, str(err)]


def allreduce_op(comm):
    y = np.empty(4)
    comm.Allreduce(np.ones(4), y, MPI.SUM if rank else MPI.MAX)
    return float(y[0])


def bcast_root(comm):
    b = np.zeros(8)
    comm.Bcast(b, root=0 if rank < 2 else 1)
    return float(b[0])


def agreeing(comm):
    b = np.full(8, 3.0) if rank == 0 else np.zeros(8)
    comm.Bcast(b, root=0)
    y = np.empty(8)
    comm.Allreduce(b, y, MPI.SUM)
    return float(y[0])


case("allreduce_op", gridcoll.Comm(world.Dup()), allreduce_op)
case("bcast_root", gridcoll.Comm(world.Dup()), bcast_root)
case("agreeing", gridcoll.Comm(world.Dup()), agreeing)
everyone = world.gather(out, root=0)
if rank == 0:
    print(json.dumps(everyone), flush=True)
