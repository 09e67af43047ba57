"""``Scatter(None)`` at the root: the root raises mpi4py's own ``TypeError``
in the call, before any message; the others, waiting in the scatter, raise
``MismatchError`` as soon as the root makes its next gridcoll call (its waiting notice
carries the header of a call that is not their scatter), never a timeout.

Run under ``mpiexec -n 4`` with ``GRIDCOLL_GRID=magpie:2,2``. Rank 0 prints one JSON
line: every rank's error in the scatter and the seconds it took.
"""

import json
import time

import numpy as np
from mpi4py import MPI

import gridcoll

world = MPI.COMM_WORLD
rank = world.Get_rank()
comm = gridcoll.Comm(world, timeout=20)
comm.Barrier()  # set-up outside the timed part
out = {"rank": rank, "error": None}
start = time.monotonic()
try:
    comm.Scatter(None, np.zeros(8, np.int64), root=0)
except Exception as err:
    out.update(error=type(err).__name__, message=str(err)[:300])
out["seconds"] = round(time.monotonic() - start, 3)
if rank == 0:  # the root goes on to its next call
    try:
        comm.Barrier()
    except Exception as err:
        out["next"] = type(err).__name__
everyone = world.gather(out, root=0)
if rank == 0:
    print(json.dumps(everyone), flush=True)
