"""Every broadcast builder, many sizes, every root, several dtypes: bytes compared exactly.

Run under ``mpiexec -n N``; the grid and the WAN emulation come from the environment
(``GRIDCOLL_GRID``, ``GRIDCOLL_EMULATE``), as in any application. For each registered
broadcast builder (small explicit parameters: segment sizes that do not divide the
message, degrees 1-3), each root, and sizes from 1 byte up, the root fills a buffer of
one of the dtypes with random bytes, the others with other bytes, and after ``Bcast``
every rank compares its bytes with the root's exactly. ``auto`` and ``native`` run too.
Rank 0 prints one JSON line: the number of cases and the failures (a failure on any
rank is reported by it on stderr and makes the exit status 1).

Usage: bcast_matrix.py [--seed S] [--sizes 1,17,4096 | random:K] [--max-cases-per-builder K]
[--roots K]

``--roots K`` runs each builder from K random roots only (default: every root), for
runs on many ranks; the runs on fewer ranks cover every root.
"""

import argparse
import json
import os
import sys

import numpy as np
from mpi4py import MPI

import gridcoll
from gridcoll.algorithms import list_builders

DTYPES = (np.uint8, np.int32, np.float64, np.complex128)
MPI_TYPES = {
    np.uint8: MPI.UNSIGNED_CHAR,
    np.int32: MPI.INT32_T,
    np.float64: MPI.DOUBLE,
    np.complex128: MPI.C_DOUBLE_COMPLEX,
}


def params_for(builder, rng):
    """Small explicit parameters, fixed per builder: segment sizes are multiples of 16
    bytes (whole elements of every dtype) that rarely divide the message; degrees 1-3."""
    params = {}
    for name in builder.params:
        if name.endswith("segment_size"):
            params[name] = 16 * int(rng.choice([13, 65, 257, 1025]))
        elif name.endswith("degree"):
            params[name] = int(rng.integers(1, 4))
        else:
            raise SystemExit(f"unknown parameter {name!r} of builder {builder.name!r}")
    return params


def plan_cases(size, sizes, seed, per_builder, nroots=None):
    """{(algo, params): [(root, dtype, nelems, form, case id)]}, the same on every rank.

    Every builder runs from every root; "auto" (which searches every builder's
    parameters for every new size and root) runs a few times only.
    """
    rng = np.random.default_rng(seed)
    plan = {}
    names = [*list_builders("bcast"), "auto", "native"]
    case_id = 0
    for builder in names:
        name = builder if isinstance(builder, str) else builder.name
        params = None if isinstance(builder, str) else params_for(builder, rng)
        roots = [int(r) for r in rng.permutation(size)]
        count = min(per_builder, 3) if name == "auto" else max(per_builder, nroots or size)
        todo = []
        for i in range(count):
            root = roots[i % size]
            hint = sizes[int(rng.integers(0, len(sizes)))] if i >= len(sizes) else sizes[i]
            dtype = DTYPES[int(rng.integers(0, len(DTYPES)))]
            if hint == 1:
                dtype = np.uint8
            itemsize = np.dtype(dtype).itemsize
            nelems = max(1, hint // itemsize)
            todo.append((root, np.dtype(dtype).name, nelems, int(rng.integers(0, 3)), case_id))
            case_id += 1
        plan[(name, json.dumps(params))] = todo
    return plan


def run_case(comm, name, case, seed):
    root, dtype_name, nelems, form, i = case
    dtype = np.dtype(dtype_name)
    rank = comm.Get_rank()
    rng = np.random.default_rng([seed, i])
    expected = rng.integers(0, 256, nelems * dtype.itemsize, dtype=np.uint8)
    raw = expected.copy() if rank == root else expected ^ np.uint8(rank % 255 + 1)
    buf = raw.view(dtype)
    if form == 0:
        comm.Bcast(buf, root=root)
    elif form == 1:
        comm.Bcast([buf, MPI_TYPES[dtype.type]], root=root)
    else:
        comm.Bcast([buf, nelems, MPI_TYPES[dtype.type]], root=root)
    if not np.array_equal(raw, expected):
        bad = int(np.flatnonzero(raw != expected)[0])
        return f"rank {rank}: {name} root {root} {dtype} x{nelems}: byte {bad} wrong"
    return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--sizes", default="1,3,17,1000,4099,65536,100003")
    ap.add_argument("--max-cases-per-builder", type=int, default=4)
    ap.add_argument("--roots", type=int, default=None)
    args = ap.parse_args()
    world = MPI.COMM_WORLD
    if args.sizes.startswith("random:"):  # 1 byte, then K random sizes up to 200 kB
        rng = np.random.default_rng(args.seed + 1000)
        k = int(args.sizes.split(":")[1])
        sizes = [1] + [int(x) for x in rng.integers(2, 200_000, k)]
    else:
        sizes = [int(s) for s in args.sizes.split(",")]
    plan = plan_cases(world.Get_size(), sizes, args.seed, args.max_cases_per_builder, args.roots)
    failures, ncases, emulated = [], 0, []
    for (name, params), todo in plan.items():
        comm = gridcoll.Comm(world, algo=name, params=json.loads(params), timeout=30)
        for case in todo:
            try:
                problem = run_case(comm, name, case, args.seed)
            except Exception as err:  # report and stop: the others would time out anyway
                print(
                    f"rank {world.Get_rank()}: {name} {params} {case}: {type(err).__name__}: {err}",
                    file=sys.stderr,
                    flush=True,
                )
                sys.stdout.flush()
                os._exit(1)
            ncases += 1
            if problem:
                failures.append(f"{problem} (params {params})")
                print(failures[-1], file=sys.stderr, flush=True)
        emulated.append(comm.gridcoll_state.emulator is not None)
        comm.gridcoll_state.close()  # its private communicator (COMM_WORLD itself stays)
    everyone = world.gather(failures, root=0)
    if world.Get_rank() == 0:
        flat = [f for fs in everyone for f in fs]
        summary = {
            "cases": ncases,
            "builders": sorted(n for n, _ in plan),
            "failures": flat,
            "emulated": all(emulated),
            "nranks": world.Get_size(),
        }
        print(json.dumps(summary), flush=True)
        return 1 if flat else 0
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
