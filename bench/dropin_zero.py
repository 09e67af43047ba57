"""Zero-byte collectives, timed: an unchanged mpi4py program (``bench/dropin.py`` part 1).

It knows nothing of gridcoll: ``mpiexec -n 4 python bench/dropin_zero.py`` times mpi4py's
collectives, ``gridcoll mpirun --grid magpie:2,2 --world -- python -m gridcoll
bench/dropin_zero.py`` the same lines on gridcoll's (``MPI.COMM_WORLD`` swapped).

For each collective (``Bcast``, ``Allreduce``, ``Gather``, ``Scatter``, ``Allgather``,
``Alltoall``, ``Reduce``) and each buffer form (``numpy``: zero-length ``int32`` arrays;
``none``: ``[None, MPI.INT]``), every rank runs ``--calls`` back-to-back calls after a
barrier and a few warm-up calls; its time per call is its own elapsed time over the
count. Rank 0 prints one line, ``DROPIN-ZERO {json}``: per case the per-call mean of
every rank (seconds) and its median over the ranks, and each rank's fastest tenth of
the calls (``best_batch_s``: per call, median over the ranks); and, as a check that the WAN is
emulated, ``bcast_4B_s``: half the round trip, on rank 0, of a 4-byte ``Bcast`` from
rank 0 followed by one from the last rank (the other cluster on ``magpie:2,2``), the
median of three: at least one WAN latency when it is emulated, microseconds when not.
The barriers and gathers are on ``MPI.COMM_WORLD.Dup()`` (a duplicate of a swapped world
is a ``gridcoll.Comm`` too), outside the timed loops.

Run: ``python bench/dropin_zero.py [--calls N] [--warmup N]`` under an MPI launcher.
"""

from __future__ import annotations

import json
import os
import sys
import time

import numpy as np
from mpi4py import MPI

OPS = ("Bcast", "Allreduce", "Gather", "Scatter", "Allgather", "Alltoall", "Reduce")
FORMS = ("numpy", "none")
RESULT = "DROPIN-ZERO "
BATCHES = 10
"""Each rank also times its calls in this many batches: the fastest batch's per-call
time (``best_batch_s``, median over ranks) is the cost when the rank was not preempted,
the figure to read on a loaded or oversubscribed machine."""


def _args(op: str, form: str):
    """The arguments of one zero-byte call (fresh buffers, zero items per rank)."""
    if form == "numpy":
        a, b = np.empty(0, dtype=np.int32), np.empty(0, dtype=np.int32)
    else:
        a, b = [None, MPI.INT], [None, MPI.INT]
    if op == "Bcast":
        return (a,), {"root": 0}
    if op == "Allreduce":
        return (a, b), {"op": MPI.SUM}
    if op == "Reduce":
        return (a, b), {"op": MPI.SUM, "root": 0}
    if op in ("Gather", "Scatter"):
        return (a, b), {"root": 0}
    return (a, b), {}  # Allgather, Alltoall


def main(argv: list[str]) -> int:
    calls = int(argv[argv.index("--calls") + 1]) if "--calls" in argv else 1000
    warmup = int(argv[argv.index("--warmup") + 1]) if "--warmup" in argv else 10
    world = MPI.COMM_WORLD
    rank, size = world.Get_rank(), world.Get_size()
    ctl = world.Dup()
    cases = []
    for op in OPS:
        for form in FORMS:
            args, kwargs = _args(op, form)
            fn = getattr(world, op)
            for _ in range(warmup):
                fn(*args, **kwargs)
            ctl.Barrier()
            start = last = time.perf_counter()
            batch = max(1, calls // BATCHES)
            best = float("inf")
            for i in range(1, calls + 1):
                fn(*args, **kwargs)
                if i % batch == 0:
                    now = time.perf_counter()
                    best = min(best, (now - last) / batch)
                    last = now
            per_call = (time.perf_counter() - start) / calls
            every = ctl.gather((per_call, best), root=0)
            if rank == 0:
                cases.append(
                    {
                        "op": op,
                        "form": form,
                        "calls": calls,
                        "per_rank_s": [m for m, _ in every],
                        "median_s": float(np.median([m for m, _ in every])),
                        "best_batch_per_rank_s": [b for _, b in every],
                        "best_batch_s": float(np.median([b for _, b in every])),
                    }
                )
    # the WAN check: a 4-byte broadcast from rank 0, then one back from the last rank
    # (the other cluster on magpie:2,2): on rank 0, half that round trip is at least one
    # emulated WAN latency (10 ms) when the emulation is on, microseconds when not
    one = np.zeros(1, dtype=np.int32)
    wan = []
    for i in range(4):
        ctl.Barrier()
        start = time.perf_counter()
        world.Bcast(one, root=0)
        world.Bcast(one, root=size - 1)
        if i:  # the first pair plans both signatures
            wan.append((time.perf_counter() - start) / 2)
    if rank == 0:
        grid = getattr(world, "grid", None)
        info = {
            "world": type(world).__module__ + "." + type(world).__qualname__,
            "nranks": size,
            "mpi": MPI.Get_library_version().splitlines()[0].strip(),
            "grid": None if grid is None else getattr(grid, "name", str(grid)),
            "env": {k: os.environ.get(k) for k in ("GRIDCOLL_GRID", "GRIDCOLL_EMULATE")},
            "bcast_4B_s": float(np.median(wan)) if rank == 0 else None,
            "cases": cases,
        }
        print(RESULT + json.dumps(info), flush=True)
    ctl.Free()
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
