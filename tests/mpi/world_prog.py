"""An unchanged mpi4py program: it never names gridcoll (its pickling checks, world_pickle, do).

``tests/test_world_mpi.py`` runs it three ways: ``python -m gridcoll world_prog.py``,
``python -m gridcoll -m world_prog`` and ``gridcoll mpirun --grid magpie:2,2 --world --
python world_prog.py``; each time ``MPI.COMM_WORLD`` must be a ``gridcoll.Comm``, which
it reports (the class, the grid, the algorithms). Rank 0 prints one JSON line: every
rank's checks (each true when right), and what the world's calls ran.
"""

import json
import sys

import numpy as np
import world_lib
import world_pickle
from mpi4py import MPI
from mpi4py.MPI import COMM_WORLD

# The swap happens at the process's first import of mpi4py.MPI, whichever module makes
# it (here world_lib): its default comm=MPI.COMM_WORLD is evaluated after it.

comm = COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
checks = {
    "from-import is MPI.COMM_WORLD": comm is MPI.COMM_WORLD,
    "library default is MPI.COMM_WORLD": world_lib.default_comm() is MPI.COMM_WORLD,
    "COMM_SELF is mpi4py's": type(MPI.COMM_SELF) is MPI.Intracomm,
}
algorithms = {}

n = 1000
send = np.arange(n, dtype=np.int64) * (rank + 1)
recv = np.empty_like(send)
comm.Allreduce(send, recv, op=MPI.SUM)
checks["Allreduce"] = bool(np.array_equal(recv, np.arange(n) * (size * (size + 1) // 2)))
algorithms["Allreduce"] = comm.last_plan.algorithm

data = np.arange(n, dtype=np.int32) if rank == 0 else np.zeros(n, dtype=np.int32)
comm.Bcast(data, root=0)
checks["Bcast"] = bool(np.array_equal(data, np.arange(n, dtype=np.int32)))
algorithms["Bcast"] = comm.last_plan.algorithm

checks["allgather"] = comm.allgather(rank * rank + 1) == [r * r + 1 for r in range(size)]
checks["library Allreduce"] = (
    world_lib.total(np.full(3, rank + 1)).tolist() == [size * (size + 1) // 2] * 3
)
checks.update(world_pickle.check())

everyone = comm.gather(checks, root=0)
if rank == 0:
    world = type(comm)
    print(
        json.dumps(
            {
                "class": f"{world.__module__}.{world.__qualname__}",
                "name": type(comm).__name__,
                "size": size,
                "argv": sys.argv[1:],
                "grid": comm.grid.name,
                "emulated": comm.gridcoll_state.emulator is not None,
                "algorithms": algorithms,
                "ranks": everyone,
            }
        ),
        flush=True,
    )
