"""Adaptive broadcasts under ``gridcoll mpirun --adaptive`` (seed 001, sec. 2.5).

Broadcasts of linearly decreasing sizes from rank 0, a pause between calls (the
advisor plans in it). After each call every rank checks its bytes and reports the plan
it ran (algorithm, parameters, size); rank 0 checks they are all the same (the hand-off
gave every rank one schedule) and prints one JSON line: ``verified``, ``same_plan``,
``announced`` (calls that ran a plan the root announced, not the ordinary one), the
root's monitor load and figures, the reports' bytes.

``--tamper K``: before call ``K``, rank 1 replaces the announcement it holds by one
with other parameters (a hand-off gone wrong). Every rank must then fail that call
with a ``CollectiveError`` (the call header differs), none hang: the JSON has each
rank's error type.
"""

import argparse
import json
import time

import numpy as np
from mpi4py import MPI

import gridcoll
from gridcoll.adapt.handoff import Announcement, Entry, choose
from gridcoll.runtime import CollectiveError

p = argparse.ArgumentParser()
p.add_argument("--calls", type=int, default=8)
p.add_argument("--first", type=int, default=256 * 1024)
p.add_argument("--pause", type=float, default=0.4)
p.add_argument("--tamper", type=int, default=-1)
args = p.parse_args()

world = MPI.COMM_WORLD
rank = world.Get_rank()
comm = gridcoll.Comm(world)  # adaptive from GRIDCOLL_ADAPTIVE (gridcoll mpirun --adaptive)
step = args.first // (args.calls + 1)
verified, same, announced, errors = True, True, 0, []
for i in range(args.calls):
    n = args.first - i * step
    state = comm.gridcoll_state
    if i == args.tamper and rank == 1:
        entry = Entry(n, "flat-segmented", (("segment_size", 1000),))
        state.adaptive.announced[0] = Announcement(99, (0.0,) * len(state.grid.links), (entry,))
    ann = None if state.adaptive is None else state.adaptive.announced.get(0)
    hit = choose(ann, n) is not None
    buf = np.full(n, i % 251, dtype=np.uint8) if rank == 0 else np.zeros(n, dtype=np.uint8)
    try:
        comm.Bcast(buf, 0)
    except CollectiveError as err:
        errors.append(type(err).__name__)
        break
    verified &= bool((buf == i % 251).all())
    plan = comm.last_plan
    plans = world.gather((plan.algorithm, sorted(plan.params.items()), plan.nbytes, hit), 0)
    if rank == 0:
        same &= all(x[:3] == plans[0][:3] for x in plans)
        announced += all(x[3] for x in plans)
    time.sleep(args.pause)

errors = world.gather(errors, 0)
verified = world.allreduce(verified, op=MPI.LAND)
state = comm.gridcoll_state
reports = world.reduce(state.adaptive.report_bytes if state.adaptive else 0, op=MPI.SUM, root=0)
if rank == 0:
    side = state.adaptive.roots[0] if state.adaptive and 0 in state.adaptive.roots else None
    print(
        json.dumps(
            {
                "verified": verified,
                "same_plan": same,
                "announced": announced,
                "errors": errors,
                "load": None if side is None else side.monitor.load(),
                "stats": None if side is None else side.stats(),
                "report_bytes": reports,
                "trailer": state.adaptive.trailer if state.adaptive else None,
            }
        ),
        flush=True,
    )
