"""Rank 3 misbehaves in a 16 MiB broadcast on magpie:2,2.

``python faults.py MODE HANDLING``: after one broadcast every rank joins (the set-up
done), rank 3 ``hang``s (sleeps, alive), ``exit``s (``sys.exit(3)``: it reaches its
exit and MPI_Finalize) or joins ``late`` (after
``LATE_S``); the others run the broadcast. ``raise``: a failed call ends the program
(an uncaught exception); ``catch``: it is handled and the program sleeps on before it
exits. Each rank prints one JSON line: its outcome and the seconds the call took.
"""

import json
import sys
import time

import numpy as np
from mpi4py import MPI

import gridcoll

LATE_S = 8.0


def say(outcome: dict) -> None:
    """One write, newline included: ``gridcoll mpirun`` runs Python unbuffered, where
    ``print`` writes the text and its newline apart, and mpiexec may put another rank's
    line between them."""
    sys.stdout.write(json.dumps(outcome) + "\n")


mode, handling = sys.argv[1], sys.argv[2]
comm = gridcoll.Comm(MPI.COMM_WORLD)
rank = comm.Get_rank()
comm.Bcast(np.zeros(8, dtype=np.uint8), root=0)  # every rank has joined once
buf = np.full(16 << 20, 7 if rank == 0 else 0, dtype=np.uint8)
if rank == 3:
    if mode == "hang":
        time.sleep(3600)
    elif mode == "exit":
        sys.exit(3)
    elif mode == "late":
        time.sleep(LATE_S)
start = time.monotonic()
outcome = {"rank": rank, "error": None, "is_gridcoll_error": None, "message": ""}
try:
    comm.Bcast(buf, root=0)
except Exception as err:
    outcome.update(
        error=type(err).__name__,
        is_gridcoll_error=isinstance(err, gridcoll.GridcollError),
        message=str(err)[:500],
    )
    if handling == "raise":
        say(dict(outcome, seconds=time.monotonic() - start))
        raise
outcome["seconds"] = time.monotonic() - start
say(outcome)
if handling == "catch":
    time.sleep(2 * LATE_S)
