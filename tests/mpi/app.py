"""An mpi4py application that knows nothing of grids: run it with ``gridcoll mpirun``.

``gridcoll.Comm(MPI.COMM_WORLD)`` finds the grid and the WAN emulation in the
environment. Rank 0 prints one JSON line: the grid it found, whether its messages were
emulated, the broadcast result checks and how long a 100 kB broadcast took.
"""

import json
import sys
import time

import numpy as np
from mpi4py import MPI

import gridcoll

comm = gridcoll.Comm(MPI.COMM_WORLD)
rank = comm.Get_rank()
data = np.arange(100_000, dtype=np.uint8) if rank == 0 else np.zeros(100_000, np.uint8)
comm.Barrier()
start = time.monotonic()
comm.Bcast(data, root=0)
seconds = comm.allreduce(time.monotonic() - start, op=MPI.MAX)
ok = comm.allreduce(bool(np.array_equal(data, np.arange(100_000, dtype=np.uint8))), op=MPI.LAND)
message = comm.bcast({"hello": "grid"} if rank == 0 else None, root=0)
if rank == 0:
    state = comm.gridcoll_state
    print(
        json.dumps(
            {
                "grid": comm.grid.name,
                "nranks": comm.Get_size(),
                "emulated": state.emulator is not None,
                "verified": ok,
                "object": message,
                "seconds": seconds,
                "algorithm": comm.last_plan.algorithm,
            }
        ),
        flush=True,
    )
sys.exit(0)
