"""Every builder of scatter, gather, allgather, alltoall, reduce and allreduce against
mpi4py's own collective, on the same inputs.

Run under ``mpiexec -n N``; the grid and the WAN emulation come from the environment
(``GRIDCOLL_GRID``, ``GRIDCOLL_EMULATE``), as in any application. For each registered
builder (small explicit parameters: segment sizes that rarely divide the block, degrees
1-3), plus ``auto`` and ``native``, several cases: a root (every root in turn), a dtype
(int32, float64, complex128, uint8), a count (1 element, or one that does not divide
the segments), a buffer form (``buf``, ``[buf, type]``, ``[buf, count, type]``),
sometimes ``MPI.IN_PLACE``, and for reductions an operation: ``MPI.SUM``, ``MPI.PROD``,
``MPI.MAX``, a user-defined commutative op, and two non-commutative ones (2x2 matrix
products on float64 and on int64 quadruples, a user datatype of 4 elements). Each case
runs gridcoll's collective and ``MPI.COMM_WORLD``'s (a duplicate) on copies of the same
inputs and compares the results: exactly, except float reductions (the MPI library
combines in its own order: relative 1e-9). A few object (lower-case) calls per op too.

Rank 0 prints one JSON line: cases, builders, failures. A rank that raises reports it
on stderr and exits 1.

Usage: collectives_matrix.py [--seed S] [--ops scatter,...] [--cases-per-builder K]
       [--counts 1,5,37]
"""

import argparse
import json
import os
import sys

import numpy as np
from mpi4py import MPI
from mpi4py.util.dtlib import to_numpy_dtype

import gridcoll
from gridcoll.algorithms import list_builders

OPS = ("scatter", "gather", "allgather", "alltoall", "reduce", "allreduce")
DTYPES = ("int32", "float64", "complex128", "uint8")
MPI_TYPES = {
    "int32": MPI.INT32_T,
    "float64": MPI.DOUBLE,
    "complex128": MPI.C_DOUBLE_COMPLEX,
    "uint8": MPI.UNSIGNED_CHAR,
}


def _matmul(dtype):
    """x (op) y = x @ y on 2x2 matrices stored as quadruples: associative, not commutative."""

    def fn(inbuf, inoutbuf, datatype):
        x = np.frombuffer(inbuf, dtype=dtype).reshape(-1, 2, 2)
        y = np.frombuffer(inoutbuf, dtype=dtype).reshape(-1, 2, 2)
        y[...] = x @ y  # inoutbuf = inbuf (op) inoutbuf

    return fn


def _add(inbuf, inoutbuf, datatype):
    """A user-defined commutative op: element-wise addition of any predefined type."""
    dtype = to_numpy_dtype(datatype)
    x = np.frombuffer(inbuf, dtype=dtype)
    y = np.frombuffer(inoutbuf, dtype=dtype)
    y += x


QUAD_F = MPI.DOUBLE.Create_contiguous(4).Commit()
QUAD_I = MPI.INT64_T.Create_contiguous(4).Commit()
MATMUL_F = MPI.Op.Create(_matmul(np.float64), commute=False)
MATMUL_I = MPI.Op.Create(_matmul(np.int64), commute=False)
USER_ADD = MPI.Op.Create(_add, commute=True)
REDUCE_OPS = ("sum", "prod", "max", "user-add", "matmul-f64", "matmul-i64")


def params_for(builder, rng):
    params = {}
    for name in builder.params:
        if name.endswith("segment_size"):
            params[name] = 32 * int(rng.choice([1, 3, 7, 33]))
        elif name.endswith("degree"):
            params[name] = int(rng.integers(1, 4))
        else:
            raise SystemExit(f"unknown parameter {name!r} of builder {builder.name!r}")
    return params


def plan_cases(op, size, counts, seed, per_builder, max_roots):
    """[(name, params, [case])], the same on every rank."""
    rng = np.random.default_rng([seed, OPS.index(op)])
    out = []
    for builder in [*list_builders(op), "auto", "native"]:
        name = builder if isinstance(builder, str) else builder.name
        params = None if isinstance(builder, str) else params_for(builder, rng)
        roots = [int(r) for r in rng.permutation(size)]
        n = max(per_builder, min(size, max_roots))
        if name in ("auto", "native"):
            n = min(per_builder, 2)
        cases = []
        for i in range(n):
            case = {
                "root": roots[i % size],
                "dtype": DTYPES[int(rng.integers(0, len(DTYPES)))],
                "count": int(counts[i % len(counts)]),
                "form": int(rng.integers(0, 3)),
                "inplace": bool(rng.random() < 0.3),
                "id": int(rng.integers(0, 2**31)),
            }
            if op in ("reduce", "allreduce"):
                case["rop"] = REDUCE_OPS[int(rng.integers(0, len(REDUCE_OPS)))]
                if case["rop"] == "max" and case["dtype"] == "complex128":
                    case["rop"] = "sum"
                if case["rop"] == "user-add" and case["dtype"] == "complex128":
                    case["dtype"] = "float64"
                if isinstance(builder, str) or not builder.commutative_only:
                    if i < 2:  # every order-preserving builder: both non-commutative ops
                        case["rop"] = ("matmul-f64", "matmul-i64")[i]
                else:
                    case["rop"] = "sum" if case["rop"].startswith("matmul") else case["rop"]
            cases.append(case)
        out.append((name, params, cases))
    return out


def _spec(arr, count, dtype_name, form):
    if form == 0:
        return arr
    if form == 1:
        return [arr, MPI_TYPES[dtype_name]]
    return [arr, count, MPI_TYPES[dtype_name]]


def _data(rng, shape, dtype_name):
    if dtype_name == "uint8":
        return rng.integers(0, 256, shape).astype(np.uint8)
    if dtype_name == "int32":
        return rng.integers(-1000, 1000, shape).astype(np.int32)
    if dtype_name == "float64":
        return rng.standard_normal(shape)
    return rng.standard_normal(shape) + 1j * rng.standard_normal(shape)


def _reduce_inputs(case, rank):
    """(array, spec factory, MPI op, exact?) of one reduction case."""
    rop, count, name = case["rop"], case["count"], case["dtype"]
    rng = np.random.default_rng([case["id"], rank])
    if rop.startswith("matmul"):
        if rop == "matmul-f64":
            x = rng.uniform(0.5, 1.5, (count, 4))
            return x, (lambda a: [a, count, QUAD_F]), MATMUL_F, False
        x = rng.integers(-3, 4, (count, 4)).astype(np.int64)
        return x, (lambda a: [a, count, QUAD_I]), MATMUL_I, True
    if rop == "prod":
        x = _data(rng, count, name)
        if name in ("float64", "complex128"):
            x = 1.0 + 0.01 * x
        elif name == "int32":
            x = (np.abs(x) % 3 + 1).astype(np.int32)
    else:
        x = _data(rng, count, name)
    op = {"sum": MPI.SUM, "prod": MPI.PROD, "max": MPI.MAX, "user-add": USER_ADD}[rop]
    exact = name in ("int32", "uint8") or rop == "max"
    return x, (lambda a: _spec(a, count, name, case["form"])), op, exact


def run_case(op, comm, ref, case):
    """Run gridcoll's and MPI's collective; return None or what differs."""
    rank, size = comm.Get_rank(), comm.Get_size()
    root, count, name, form = case["root"], case["count"], case["dtype"], case["form"]
    rng = np.random.default_rng([case["id"], rank])
    inplace = case["inplace"]
    results = []
    if op in ("reduce", "allreduce"):
        x, spec, mop, exact = _reduce_inputs(case, rank)
        for c in (comm, ref):
            out = np.zeros_like(x)
            has = op == "allreduce" or rank == root
            send = spec(x.copy())
            if inplace and has:
                out[...] = x
                send = MPI.IN_PLACE
            recv = spec(out) if has else None
            if op == "reduce":
                c.Reduce(send, recv, mop, root)
            else:
                c.Allreduce(send, recv, mop)
            results.append(out)
        same = (
            np.array_equal(results[0], results[1])
            if exact
            else np.allclose(results[0], results[1], rtol=1e-9, atol=1e-12)
        )
        return (
            None if same else f"{op} {case}: {results[0].ravel()[:4]} vs {results[1].ravel()[:4]}"
        )
    whole = _data(rng, size * count, name)
    mine = _data(rng, count, name)
    for c in (comm, ref):
        recv = np.zeros(size * count if op != "scatter" else count, dtype=whole.dtype)
        if op == "scatter":
            rows = _spec(whole.copy(), count, name, form) if rank == root else None
            if inplace and rank == root:
                recv = whole.copy()
                c.Scatter(_spec(recv, count, name, form), MPI.IN_PLACE, root)
            else:
                c.Scatter(rows, _spec(recv, count, name, form), root)
        elif op == "gather":
            if inplace and rank == root:
                recv[root * count : (root + 1) * count] = mine
                c.Gather(MPI.IN_PLACE, _spec(recv, count, name, form), root)
            else:
                c.Gather(
                    _spec(mine.copy(), count, name, form), _spec(recv, count, name, form), root
                )
        elif op == "allgather":
            if inplace:
                recv[rank * count : (rank + 1) * count] = mine
                c.Allgather(MPI.IN_PLACE, _spec(recv, count, name, form))
            else:
                c.Allgather(_spec(mine.copy(), count, name, form), _spec(recv, count, name, form))
        else:
            if inplace:
                recv[...] = whole
                c.Alltoall(MPI.IN_PLACE, _spec(recv, count, name, form))
            else:
                c.Alltoall(_spec(whole.copy(), count, name, form), _spec(recv, count, name, form))
        results.append(recv)
    if op == "gather" and rank != root:
        return None
    if np.array_equal(results[0], results[1]):
        return None
    bad = int(np.flatnonzero(results[0] != results[1])[0])
    return f"rank {rank}: {op} {case}: element {bad} differs"


def run_objects(comm, ref, seed):
    """The lower-case forms: gridcoll's result equals mpi4py's."""
    rank, size = comm.Get_rank(), comm.Get_size()
    problems = []
    for root in sorted({0, size - 1}):
        obj = {"rank": rank, "data": list(range(rank * 3 % 7)), "s": "x" * (rank * 37 % 11)}
        items = [(i, "y" * ((i + seed) % 5)) for i in range(size)]
        pairs = [
            (comm.scatter(items if rank == root else None, root), ref.scatter(items, root)),
            (comm.gather(obj, root), ref.gather(obj, root)),
            (comm.allgather(obj), ref.allgather(obj)),
            (
                comm.alltoall([(rank, j) for j in range(size)]),
                ref.alltoall([(rank, j) for j in range(size)]),
            ),
            (comm.reduce(rank + 1, MPI.PROD, root), ref.reduce(rank + 1, MPI.PROD, root)),
            (comm.allreduce([rank], MPI.SUM), ref.allreduce([rank], MPI.SUM)),
            (
                comm.allreduce(str(rank), lambda a, b: a + b),
                ref.allreduce(str(rank), lambda a, b: a + b),
            ),
        ]
        for i, (got, want) in enumerate(pairs):
            if got != want:
                problems.append(f"rank {rank}: object call {i} root {root}: {got!r} vs {want!r}")
    return problems


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--ops", default=",".join(OPS))
    ap.add_argument("--cases-per-builder", type=int, default=2)
    ap.add_argument("--counts", default="1,37,5")
    ap.add_argument("--max-roots", type=int, default=64, help="roots per builder at most")
    ap.add_argument("--objects", action="store_true")
    args = ap.parse_args()
    world = MPI.COMM_WORLD
    ref = world.Dup()
    counts = [int(c) for c in args.counts.split(",")]
    failures, ncases, builders, emulated = [], 0, [], []
    for op in args.ops.split(","):
        for name, params, cases in plan_cases(
            op, world.Get_size(), counts, args.seed, args.cases_per_builder, args.max_roots
        ):
            algo = {op: name}
            comm = gridcoll.Comm(
                world, algo=algo, params={op: params} if params else None, timeout=30
            )
            builders.append(f"{op}:{name}")
            for case in cases:
                try:
                    problem = run_case(op, comm, ref, case)
                except Exception as err:  # report and stop: the others would time out anyway
                    print(
                        f"rank {world.Get_rank()}: {op} {name} {params} {case}: "
                        f"{type(err).__name__}: {err}",
                        file=sys.stderr,
                        flush=True,
                    )
                    sys.stdout.flush()
                    os._exit(1)
                ncases += 1
                if problem:
                    failures.append(f"{problem} ({name} {params})")
                    print(failures[-1], file=sys.stderr, flush=True)
            emulated.append(comm.gridcoll_state.emulator is not None)
            comm.gridcoll_state.close()
    if args.objects:
        comm = gridcoll.Comm(world, timeout=30)
        failures += run_objects(comm, ref, args.seed)
        comm.gridcoll_state.close()
    everyone = world.gather(failures, root=0)
    if world.Get_rank() == 0:
        flat = [f for fs in everyone for f in fs]
        print(
            json.dumps(
                {
                    "cases": ncases,
                    "builders": builders,
                    "failures": flat,
                    "emulated": bool(emulated) and all(emulated),
                    "nranks": world.Get_size(),
                }
            ),
            flush=True,
        )
        return 1 if flat else 0
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
