"""A soak test: many mixed collectives with random sizes, roots, dtypes and operations,
each compared byte for byte with mpi4py's own collective on the same inputs.

Run under ``mpiexec -n N``; the grid and the WAN emulation come from the environment
(``GRIDCOLL_GRID``, ``GRIDCOLL_EMULATE``), as in any application, and every call goes
through one ``gridcoll.Comm`` with ``algo="auto"`` (so the tuner plans each new call
signature, and the plan and program caches fill and evict as in a long-running job).

Every rank draws the same sequence of calls from ``--seed`` (``numpy.random.Generator``;
a rank's input of call ``i`` comes from the seed ``[seed, i, rank]``): the collective
(``Bcast``, ``Scatter``, ``Gather``, ``Allgather``, ``Alltoall``, ``Reduce``,
``Allreduce``, ``Barrier`` and the object forms ``bcast``, ``allreduce``, ``gather``),
a size (mostly 0 to 64 KiB in all, one call in 20 up to 1 MiB, one in 10 at most 64
bytes, one in 50 empty), a root, a dtype (float64, int32, uint8, int64) and for
reductions ``MPI.SUM``, ``MPI.MAX`` or ``MPI.MIN``. Inputs are small integers (floats
included), so a float sum is exact whatever order the MPI library combines in, and a
uint8 sum wraps alike everywhere: every comparison is exact, byte for byte.

Memory: the resident set size (``VmRSS`` of ``/proc/self/status``) after ``--warmup``
calls and after the last one, per rank.

Rank 0 prints one JSON line: ``calls``, ``per_op`` counts, ``failures`` (every rank's
differences, at most 50 listed, ``nfailures`` counts them all), ``rss_warm_kib`` and
``rss_end_kib`` per rank, ``growth_kib`` (the largest growth of a rank),
``elapsed_s`` and rank 0's cache fill (``plans_cached`` of ``plans_maxsize``,
``prepared_cached``: the process's plan cache takes one plan per new call signature,
up to its bound, so some growth is expected). A rank whose call raises reports it on stderr
and exits 1 (the others would only time out).

Usage: soak.py [--seed S] [--calls N] [--warmup W]
"""

import argparse
import json
import os
import sys
import time

import numpy as np
from mpi4py import MPI

import gridcoll

BUFFER_OPS = ("Bcast", "Scatter", "Gather", "Allgather", "Alltoall", "Reduce", "Allreduce")
OBJECT_OPS = ("bcast", "allreduce", "gather")
WEIGHTS = {
    "Bcast": 4,
    "Scatter": 2,
    "Gather": 2,
    "Allgather": 2,
    "Alltoall": 2,
    "Reduce": 3,
    "Allreduce": 4,
    "Barrier": 1,
    "bcast": 1,
    "allreduce": 1,
    "gather": 1,
}
DTYPES = ("float64", "int32", "uint8", "int64")
REDUCTIONS = {"SUM": MPI.SUM, "MAX": MPI.MAX, "MIN": MPI.MIN}
BLOCKED = ("Scatter", "Gather", "Allgather", "Alltoall")
"""Collectives whose size is split into one block per rank."""


def rss_kib() -> int:
    """This process's resident set size in KiB (``VmRSS``)."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return -1


def draw_call(rng: np.random.Generator, size: int) -> dict:
    """The next call, the same on every rank (only ``rng``'s draws decide it)."""
    names = list(WEIGHTS)
    p = np.array([WEIGHTS[n] for n in names], dtype=float)
    op = names[int(rng.choice(len(names), p=p / p.sum()))]
    kind = rng.random()
    if kind < 0.02:
        nbytes = 0
    elif kind < 0.12:
        nbytes = int(rng.integers(1, 65))
    elif kind < 0.17:
        nbytes = int(rng.integers(64 * 1024, 1024 * 1024 + 1))
    else:
        nbytes = int(rng.integers(1, 64 * 1024 + 1))
    dtype = DTYPES[int(rng.integers(0, len(DTYPES)))]
    itemsize = np.dtype(dtype).itemsize
    count = nbytes // itemsize
    if op in BLOCKED:
        count //= size  # per rank: the call moves about nbytes in all
    return {
        "op": op,
        "dtype": dtype,
        "count": count,
        "root": int(rng.integers(0, size)),
        "rop": list(REDUCTIONS)[int(rng.integers(0, len(REDUCTIONS)))],
    }


def inputs(seed: int, index: int, rank: int, shape, dtype: str) -> np.ndarray:
    """Rank ``rank``'s input of call ``index``: small integers, exact in every dtype."""
    rng = np.random.default_rng([seed, index, rank])
    if dtype == "uint8":
        return rng.integers(0, 256, size=shape).astype(np.uint8)
    return rng.integers(-1000, 1001, size=shape).astype(dtype)


def run_buffer(op: str, comm, ref, call: dict, x: np.ndarray) -> tuple[bytes, bytes]:
    """The call on gridcoll's communicator and on mpi4py's: both results as bytes (the
    receive buffer where this rank has one, else its send buffer after the call)."""
    rank, size, root = comm.Get_rank(), comm.Get_size(), call["root"]
    dtype, count = x.dtype, call["count"]
    got_x, want_x = x.copy(), x.copy()
    if op == "Bcast":
        comm.Bcast(got_x, root)
        ref.Bcast(want_x, root)
        return got_x.tobytes(), want_x.tobytes()
    if op in ("Reduce", "Allreduce"):
        got, want = np.zeros_like(x), np.zeros_like(x)
        rop = REDUCTIONS[call["rop"]]
        if op == "Reduce":
            comm.Reduce(got_x, got, rop, root)
            ref.Reduce(want_x, want, rop, root)
        else:
            comm.Allreduce(got_x, got, rop)
            ref.Allreduce(want_x, want, rop)
        keep = op == "Allreduce" or rank == root
        return (got if keep else got_x).tobytes(), (want if keep else want_x).tobytes()
    if op == "Scatter":
        got, want = np.zeros(count, dtype), np.zeros(count, dtype)
        comm.Scatter(got_x if rank == root else None, got, root)
        ref.Scatter(want_x if rank == root else None, want, root)
        return got.tobytes(), want.tobytes()
    if op == "Gather":
        shape = size * count if rank == root else 0
        got, want = np.zeros(shape, dtype), np.zeros(shape, dtype)
        comm.Gather(got_x, got if rank == root else None, root)
        ref.Gather(want_x, want if rank == root else None, root)
        return got.tobytes(), want.tobytes()
    got, want = np.zeros(size * count, dtype), np.zeros(size * count, dtype)
    if op == "Allgather":
        comm.Allgather(got_x, got)
        ref.Allgather(want_x, want)
    else:  # Alltoall
        comm.Alltoall(got_x, got)
        ref.Alltoall(want_x, want)
    return got.tobytes(), want.tobytes()


def input_shape(call: dict, rank: int, size: int) -> int:
    """The number of elements of this rank's send buffer (its receive buffer: Bcast)."""
    count = call["count"]
    if call["op"] == "Scatter":
        return size * count if rank == call["root"] else 0
    if call["op"] == "Alltoall":
        return size * count
    return count


def run_object(op: str, comm, ref, call: dict, seed: int, index: int) -> tuple:
    """An object form on both communicators (a picklable value derived from the inputs)."""
    rank, root = comm.Get_rank(), call["root"]
    values = inputs(seed, index, rank, min(call["count"], 256), "int64").tolist()
    obj = {"rank": rank, "call": index, "values": values}
    if op == "bcast":
        return comm.bcast(obj if rank == root else None, root), ref.bcast(
            obj if rank == root else None, root
        )
    if op == "gather":
        return comm.gather(obj, root), ref.gather(obj, root)
    total = sum(values)
    return comm.allreduce(total, REDUCTIONS[call["rop"]]), ref.allreduce(
        total, REDUCTIONS[call["rop"]]
    )


def one_call(comm, ref, call: dict, seed: int, index: int) -> str:
    """Run call ``index`` on both; '' if the results agree, else what differs."""
    rank, size, op = comm.Get_rank(), comm.Get_size(), call["op"]
    if op == "Barrier":
        comm.Barrier()
        ref.Barrier()
        return ""
    if op in OBJECT_OPS:
        got, want = run_object(op, comm, ref, call, seed, index)
        return "" if got == want else f"{got!r:.200} != {want!r:.200}"
    x = inputs(seed, index, rank, input_shape(call, rank, size), call["dtype"])
    got, want = run_buffer(op, comm, ref, call, x)
    if got == want:
        return ""
    diff = next((i for i, (a, b) in enumerate(zip(got, want, strict=False)) if a != b), None)
    return f"{len(got)} vs {len(want)} bytes, first difference at byte {diff}"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seed", type=int, default=11)
    ap.add_argument("--calls", type=int, default=1000)
    ap.add_argument("--warmup", type=int, default=100)
    args = ap.parse_args()
    world = MPI.COMM_WORLD
    rank, size = world.Get_rank(), world.Get_size()
    ref = world.Dup()
    comm = gridcoll.Comm(world, timeout=60)
    rng = np.random.default_rng(args.seed)
    failures: list[str] = []
    per_op: dict[str, int] = {}
    rss_warm = rss_kib()
    start = time.perf_counter()
    for index in range(args.calls):
        call = draw_call(rng, size)
        per_op[call["op"]] = per_op.get(call["op"], 0) + 1
        try:
            problem = one_call(comm, ref, call, args.seed, index)
        except Exception as err:  # report and stop: the others would time out anyway
            print(f"rank {rank}: call {index} {call}: {type(err).__name__}: {err}", file=sys.stderr)
            sys.stderr.flush()
            sys.stdout.flush()
            os._exit(1)
        if problem:
            failures.append(f"rank {rank}: call {index} {call}: {problem}")
            print(failures[-1], file=sys.stderr, flush=True)
        if index + 1 == args.warmup:
            rss_warm = rss_kib()
    elapsed = time.perf_counter() - start
    rss_end = rss_kib()
    emulated = comm.gridcoll_state.emulator is not None
    info = comm.cache_info()
    comm.gridcoll_state.close()
    everyone = world.gather((failures, rss_warm, rss_end), root=0)
    if rank != 0:
        return 0
    flat = [f for fs, _, _ in everyone for f in fs]
    warm = [w for _, w, _ in everyone]
    end = [e for _, _, e in everyone]
    print(
        json.dumps(
            {
                "calls": args.calls,
                "nranks": size,
                "emulated": emulated,
                "per_op": per_op,
                "failures": flat[:50],
                "nfailures": len(flat),
                "rss_warm_kib": warm,
                "rss_end_kib": end,
                "growth_kib": max(e - w for w, e in zip(warm, end, strict=True)),
                "elapsed_s": elapsed,
                "plans_cached": info.plans,
                "plans_maxsize": info.plans_maxsize,
                "prepared_cached": info.prepared,
            }
        ),
        flush=True,
    )
    return 1 if flat else 0


if __name__ == "__main__":
    sys.exit(main())
