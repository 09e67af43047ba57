"""A program whose every collective is recorded (``GRIDCOLL_LOG``, ``GRIDCOLL_ALGO``
from the environment, as ``gridcoll mpirun --log --algo`` sets them).

Run under ``mpiexec -n N``. Each rank makes the same calls: 3 ``Bcast`` of 4 KiB from
rank 0, 2 ``Allreduce`` of 1000 doubles, one each of ``Scatter`` (root 1), ``Gather``,
``Allgather``, ``Alltoall``, ``Reduce`` (root ``N - 1``) and ``Barrier``. Rank 0 prints
one JSON line: the calls made, per op, and the algorithm each op's last call used.
"""

import json
import sys

import numpy as np
from mpi4py import MPI

import gridcoll

comm = gridcoll.Comm(MPI.COMM_WORLD, timeout=60)
rank, size = comm.Get_rank(), comm.Get_size()
used = {}
a = np.arange(4096, dtype=np.uint8)
for _ in range(3):
    comm.Bcast(a, 0)
used["bcast"] = comm.last_plan.algorithm
x = np.arange(1000.0)
for _ in range(2):
    comm.Allreduce(x, np.empty_like(x), MPI.SUM)
used["allreduce"] = comm.last_plan.algorithm
comm.Scatter(np.zeros(size * 10), np.zeros(10), 1)
used["scatter"] = comm.last_plan.algorithm
comm.Gather(np.zeros(10), np.zeros(size * 10), 0)
used["gather"] = comm.last_plan.algorithm
comm.Allgather(np.zeros(10), np.zeros(size * 10))
used["allgather"] = comm.last_plan.algorithm
comm.Alltoall(np.zeros(size * 10), np.zeros(size * 10))
used["alltoall"] = comm.last_plan.algorithm
comm.Reduce(x, np.empty_like(x), MPI.SUM, size - 1)
used["reduce"] = comm.last_plan.algorithm
comm.Barrier()
used["barrier"] = comm.last_plan.algorithm
calls = {"bcast": 3, "allreduce": 2, "scatter": 1, "gather": 1, "allgather": 1}
calls |= {"alltoall": 1, "reduce": 1, "barrier": 1}
if rank == 0:
    print(json.dumps({"calls": calls, "used": used, "grid": comm.grid.name}), flush=True)
sys.exit(0)
