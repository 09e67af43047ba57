"""What ``gridcoll scenario --measure`` starts on every rank: seed 001's application.

``python -m gridcoll.experiments.adaptive_worker --strategy S --calls JSON`` wraps
``MPI.COMM_WORLD`` in a :class:`gridcoll.Comm` for the strategy (``mpich-g2``: the
builder ``mpich-g2``; ``static``: ``auto``; ``adaptive``: ``auto`` with
``adaptive=True``; ``mateescu``: ``mateescu`` with ``adaptive=True``, the advisor
running Mateescu's algorithm; ``sa-clustered``: the same with clusteredSA, seed 001's
own strategy) and makes the application's broadcasts at their times:
call ``i`` at ``T0 + t_i``, ``T0`` the load trace's time 0 (``GRIDCOLL_LOAD_T0``, the
launch's start; without a load, rank 0's clock at start-up, broadcast). Every rank
sleeps until that instant (one machine, one monotonic clock), calls ``Bcast``, and
notes when it returns; the call's time is the slowest rank's end less the instant
(as :mod:`gridcoll.runtime.worker` times its runs), or, when a rank reached the call
after its instant (the previous call ran past it: ``late``), less the last rank's
entry. The root fills its buffer with a
pattern of the call's number, and every rank checks its bytes.

Rank 0 prints one ``GRIDCOLL-RESULT`` line: ``times_s``, ``algorithms`` (the root's
plan per call), ``late`` (calls a rank reached after their instant), ``verified``, and
the root's advisor figures (:meth:`gridcoll.runtime.adaptive.RootSide.stats`).
Progress: a ``rep`` line per call in ``$GRIDCOLL_STATUS_DIR/rank-R``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

from gridcoll.runtime.supervisor import ENV_STATUS_DIR, ERROR_PREFIX, RESULT_PREFIX

__all__ = ["STRATEGY_COMM", "main"]

STRATEGY_COMM = {
    "mpich-g2": ("mpich-g2", False),
    "static": ("auto", False),
    "adaptive": ("auto", True),
    "mateescu": ("mateescu", True),
    "sa-clustered": ("sa-clustered", True),
}
"""Each strategy's ``Comm(algo=..., adaptive=...)``."""


def _status(rank: int, event: str, **fields: object) -> None:
    directory = os.environ.get(ENV_STATUS_DIR)
    if directory:
        line = json.dumps({"event": event, "rank": rank, "pid": os.getpid(), **fields})
        with open(Path(directory) / f"rank-{rank}", "a") as f:
            f.write(line + "\n")


def _run(args: argparse.Namespace) -> dict | None:
    from mpi4py import MPI

    from gridcoll.runtime.comm import Comm
    from gridcoll.runtime.emulation import ENV_LOAD_T0
    from gridcoll.runtime.executor import wait

    world = MPI.COMM_WORLD
    rank = world.Get_rank()
    algo, adaptive = STRATEGY_COMM[args.strategy]
    comm = Comm(world, algo=algo, adaptive=adaptive)
    ctl = world.Dup()
    _status(rank, "joined")
    t0 = np.array([float(os.environ.get(ENV_LOAD_T0, "nan"))])
    if np.isnan(t0[0]):  # no load: rank 0's clock now is time 0
        t0[0] = time.monotonic()
        wait(ctl.Ibcast([t0, MPI.DOUBLE], 0), args.timeout, what="agreeing on time 0")
    calls = json.loads(args.calls)
    times, algorithms, late, verified = [], [], 0, True
    for i, (t, nbytes) in enumerate(calls):
        pattern = (i * 37 + 11) % 251
        buf = np.full(nbytes, pattern if rank == args.root else 0, dtype=np.uint8)
        at = t0[0] + t
        left = at - time.monotonic()
        if left > 0:
            time.sleep(left)
        entered = time.monotonic()
        comm.Bcast(buf, args.root)
        end = time.monotonic()
        ok = bool((buf == pattern).all())
        got = np.empty((ctl.Get_size(), 4)) if rank == 0 else None
        mine = np.array([end, entered, float(ok), float(left <= 0)])
        wait(ctl.Igather([mine, MPI.DOUBLE], got, 0), args.timeout, what="the timings")
        if rank == args.root:
            plan = comm.last_plan
            name = np.frombuffer(plan.algorithm.encode().ljust(64)[:64], dtype=np.uint8).copy()
        else:
            name = np.zeros(64, dtype=np.uint8)
        if args.root != 0:
            wait(ctl.Ibcast([name, MPI.BYTE], args.root), args.timeout, what="the plan's name")
        if rank == 0:
            start = at
            if got[:, 3].any():  # a rank came late (the last call ran past this instant)
                late += 1
                start = max(at, float(got[:, 1].max()))
            times.append(float(got[:, 0].max()) - start)
            verified = verified and bool(got[:, 2].all())
            algorithms.append(bytes(name).decode().strip())
            _status(rank, "rep", case=0, rep=i)
    stats = None
    if rank == args.root and comm.gridcoll_state.adaptive is not None:
        side = comm.gridcoll_state.adaptive.roots.get(args.root)
        stats = None if side is None else side.stats()
    stats = ctl.bcast(stats, args.root) if args.root != 0 else stats
    reports = ctl.reduce(
        0 if comm.gridcoll_state.adaptive is None else comm.gridcoll_state.adaptive.report_bytes,
        op=MPI.SUM,
        root=0,
    )
    if rank != 0:
        return None
    return {
        "strategy": args.strategy,
        "times_s": times,
        "algorithms": algorithms,
        "late": late,
        "verified": verified,
        "advisor": stats,
        "report_bytes": reports,
    }


def main(argv: list[str] | None = None) -> int:
    """Run the application on this rank; 0 when done, 1 when this rank failed."""
    p = argparse.ArgumentParser(prog="python -m gridcoll.experiments.adaptive_worker")
    p.add_argument("--strategy", required=True, choices=sorted(STRATEGY_COMM))
    p.add_argument("--calls", required=True, help="JSON list of [t, nbytes]")
    p.add_argument("--root", type=int, default=0)
    p.add_argument("--timeout", type=float, default=120.0)
    args = p.parse_args(argv)
    from mpi4py import MPI

    rank = MPI.COMM_WORLD.Get_rank()
    try:
        result = _run(args)
    except Exception as err:  # report, then leave without MPI_Finalize (peers may be gone)
        _status(rank, "error", message=f"{type(err).__name__}: {err}")
        sys.stderr.write(ERROR_PREFIX + json.dumps({"rank": rank, "message": str(err)}) + "\n")
        sys.stderr.flush()
        os._exit(1)
    _status(rank, "done")
    if result is not None:
        sys.stdout.write(RESULT_PREFIX + json.dumps(result) + "\n")
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
