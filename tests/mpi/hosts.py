"""Ranks on several hosts, faked on one machine (``GRIDCOLL_FAKE_HOSTNAME``).

``hosts.py GRID collectives``: a gridcoll.Comm on GRID (a grid file placing its ranks
by host; ``-``: the launch's ``GRIDCOLL_GRID``) runs Bcast, Allreduce and Gather (every
root, two sizes, ``auto`` and ``binomial``) and compares every result with mpi4py's own
on MPI.COMM_WORLD.
``hosts.py GRID emulated``: with ``GRIDCOLL_EMULATE=1``, making that Comm must raise;
and a Comm on the launch's grid (``GRIDCOLL_GRID``, placed by number) must raise at its
first collective, and stay unusable after.

Rank 0 prints one JSON line with every rank's report.
"""

import json
import sys

import numpy as np
from mpi4py import MPI

import gridcoll
from gridcoll.runtime.state import state_of


def compare(comm, world) -> list[str]:
    """The names of the calls whose results differ from mpi4py's."""
    rank, size = world.Get_rank(), world.Get_size()
    wrong = []
    for n in (5, 40_000):
        for root in range(size):
            mine = np.arange(n, dtype=np.float64) * (root + 1) if rank == root else np.zeros(n)
            ref = mine.copy()
            comm.Bcast(mine, root)
            world.Bcast(ref, root)
            if not np.array_equal(mine, ref):
                wrong.append(f"Bcast n={n} root={root}")
            send = np.arange(n, dtype=np.int64) + 1000 * rank
            got = np.empty(size * n, dtype=np.int64) if rank == root else None
            ref = np.empty(size * n, dtype=np.int64) if rank == root else None
            comm.Gather(send, got, root)
            world.Gather(send, ref, root)
            if rank == root and not np.array_equal(got, ref):
                wrong.append(f"Gather n={n} root={root}")
        for dtype, op in ((np.float64, MPI.SUM), (np.int32, MPI.MAX), (np.int64, MPI.PROD)):
            send = (np.arange(n) % 7 + rank + 1).astype(dtype)
            got, ref = np.empty_like(send), np.empty_like(send)
            comm.Allreduce(send, got, op)
            world.Allreduce(send, ref, op)
            if not np.array_equal(got, ref):
                wrong.append(f"Allreduce n={n} {np.dtype(dtype).name}")
    return wrong


def collectives(grid: str | None) -> dict:
    world = MPI.COMM_WORLD
    report: dict = {"rank": world.Get_rank(), "wrong": [], "algorithms": []}
    for algo in (None, "binomial"):
        comm = gridcoll.Comm(world, grid, algo=algo)
        report["wrong"] += compare(comm, world)
        state = state_of(comm)
        report["algorithms"].append(comm.last_plan.algorithm)
        report["doorbells"] = state.bells is not None
        report["explain"] = comm.explain()
        report["hosts"] = list(state.hosts)
        report["cluster_of"] = list(comm.grid.cluster_of)
        report["grid_hosts"] = [list(c.hosts) for c in comm.grid.clusters]
        split = comm.Split(world.Get_rank() % 2, world.Get_rank())
        report["split_note"] = split.explain()
        split.Free()
        state.close()  # a wrapper of COMM_WORLD: MPI refuses to free the handle itself
    return report


def outcome(fn) -> list:
    try:
        fn()
    except Exception as err:
        return [type(err).__name__, str(err)]
    return ["ok", ""]


def emulated(grid: str) -> dict:
    world = MPI.COMM_WORLD
    report = {"rank": world.Get_rank()}
    report["by_host"] = outcome(lambda: gridcoll.Comm(world, grid))
    comm = gridcoll.Comm(world)  # the launch's grid, placed by number
    buf = np.zeros(4)
    report["first_call"] = outcome(lambda: comm.Bcast(buf, 0))
    report["second_call"] = outcome(lambda: comm.Bcast(buf, 0))
    report["doorbells"] = state_of(comm).bells is not None
    return report


def main() -> None:
    grid, mode = (None if sys.argv[1] == "-" else sys.argv[1]), sys.argv[2]
    report = collectives(grid) if mode == "collectives" else emulated(grid)
    reports = MPI.COMM_WORLD.gather(report, 0)
    if MPI.COMM_WORLD.Get_rank() == 0:
        print(json.dumps({"ranks": reports}), flush=True)


if __name__ == "__main__":
    main()
