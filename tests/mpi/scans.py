"""Reduce_scatter_block, Reduce_scatter, Scan and Exscan (and their non-blocking and
object forms) with every builder, against mpi4py's own collective on the same inputs.

Run under ``mpiexec -n N``; the grid and the WAN emulation come from the environment.
For each registered builder of ``reduce_scatter``, ``scan`` and ``exscan``, plus
``auto`` and ``native``, several cases: a dtype, a count, a reduction operation
(``MPI.SUM``, ``MPI.PROD``, ``MPI.MAX``, a user-defined commutative op, and two
non-commutative ones: 2x2 matrix products on float64 and on int64 quadruples, whose
order must be rank order), a buffer form, sometimes ``MPI.IN_PLACE``; for
``Reduce_scatter`` uneven counts with zeros, given or left to be gathered
(``recvcounts=None``). Each case runs gridcoll's call and ``MPI.COMM_WORLD``'s (a
duplicate) on copies of the same inputs and compares the receive buffers: exactly,
but float reductions to 1e-9 (the MPI library combines in its own order); Exscan's
rank 0 buffer must be left untouched by both. With ``--nonblocking`` the cases of a
builder are started together (``I`` forms) and completed by ``MPI.Request.Waitall``.

Rank 0 prints one JSON line: cases, builders, failures, emulated, nranks.

Usage: scans.py [--seed S] [--ops reduce_scatter_block,...] [--cases-per-builder K]
       [--nonblocking] [--objects]
"""

import argparse
import json
import os
import sys

import numpy as np
from collectives_matrix import QUAD_F, QUAD_I, REDUCE_OPS, _reduce_inputs
from mpi4py import MPI

import gridcoll
from gridcoll.algorithms import list_builders

OPS = ("reduce_scatter_block", "reduce_scatter", "scan", "exscan")
DTYPES = ("int32", "float64", "complex128", "uint8")
POISON = 0x5A


def plan_cases(op, size, seed, per_builder):
    """[(name, params, [case])], the same on every rank."""
    rng = np.random.default_rng([seed, OPS.index(op)])
    base = "reduce_scatter" if op.startswith("reduce_scatter") else op
    out = []
    for builder in [*list_builders(base), "auto", "native"]:
        name = builder if isinstance(builder, str) else builder.name
        params = None
        if not isinstance(builder, str):
            params = {
                p: (32 * int(rng.choice([1, 3])) if p.endswith("segment_size") else 2)
                for p in builder.params
            }
        cases = []
        for i in range(per_builder if name not in ("auto", "native") else 2):
            rop = REDUCE_OPS[int(rng.integers(0, len(REDUCE_OPS)))]
            if i < 2:  # both non-commutative ops on every builder that keeps rank order
                rop = ("matmul-f64", "matmul-i64")[i]
            if isinstance(builder, str) or not builder.commutative_only:
                pass
            elif rop.startswith("matmul"):
                rop = "sum"
            dtype = DTYPES[int(rng.integers(0, len(DTYPES)))]
            if rop == "max" and dtype == "complex128":
                rop = "sum"
            if rop == "user-add" and dtype == "complex128":
                dtype = "float64"
            counts = [int(c) * int(rng.random() < 0.75) for c in rng.integers(0, 4, size)]
            cases.append(
                {
                    "rop": rop,
                    "dtype": dtype,
                    "count": int(rng.choice([1, 3, 7])),
                    "counts": counts,
                    "given": bool(rng.random() < 0.6),
                    "form": int(rng.integers(0, 3)),
                    "inplace": bool(rng.random() < 0.3),
                    "id": int(rng.integers(0, 2**31)),
                }
            )
        out.append((name, params, cases))
    return out


class Case:
    """One rank's buffers of one case, for one communicator."""

    def __init__(self, op, rank, size, case):
        self.op, self.case = op, case
        blocks = {"reduce_scatter_block": [case["count"]] * size, "reduce_scatter": case["counts"]}
        self.counts = blocks.get(op)
        n = sum(self.counts) if self.counts is not None else case["count"]
        x, _, self.mop, self.exact = _reduce_inputs(dict(case, count=max(n, 1)), rank)
        x = x[:n]
        self.inplace = case["inplace"] and not (op == "exscan" and rank == 0)
        if op == "reduce_scatter" and not case["given"]:
            self.inplace = False  # mpi4py would gather the vector's count as this rank's
        if self.inplace:
            self.recv_arr = x.copy()  # the vector; the result at its start
            self.send = MPI.IN_PLACE
            per = case["count"] if op == "reduce_scatter_block" else len(x)
            self.recv = self._spec(self.recv_arr, per)
        else:
            mine = self.counts[rank] if self.counts is not None else n
            self.recv_arr = np.zeros_like(x[:mine] if self.counts is not None else x)
            self.recv_arr.view(np.uint8)[...] = POISON
            self.send = self._spec(
                x.copy(), len(x) // (size if self.counts and op.endswith("block") else 1)
            )
            self.recv = self._spec(self.recv_arr, len(self.recv_arr))

    def _spec(self, arr, count):
        rop = self.case["rop"]
        if rop.startswith("matmul"):
            quad = QUAD_F if rop == "matmul-f64" else QUAD_I
            return [arr, count, quad]
        if self.case["form"] == 0:
            return arr
        return [arr, count, MPI._typedict[arr.dtype.char]]

    def start(self, comm, nonblocking):
        name = {
            "reduce_scatter_block": "Reduce_scatter_block",
            "reduce_scatter": "Reduce_scatter",
            "scan": "Scan",
            "exscan": "Exscan",
        }[self.op]
        method = getattr(comm, ("I" + name.lower()) if nonblocking else name)
        if self.op == "reduce_scatter":
            counts = self.counts if self.case["given"] else None
            return method(self.send, self.recv, counts, self.mop)
        return method(self.send, self.recv, self.mop)


def run_cases(op, comm, ref, cases, nonblocking, rank, size):
    results = []
    for c in (comm, ref):
        made = [Case(op, rank, size, case) for case in cases]
        if nonblocking and c is comm:
            MPI.Request.Waitall([x.start(c, True) for x in made])
        else:
            for x in made:
                x.start(c, False)
        results.append(made)
    problems = []
    for mine, theirs in zip(*results, strict=True):
        a, b = mine.recv_arr, theirs.recv_arr
        if mine.exact or a.dtype.kind in "iu":
            same = np.array_equal(a.view(np.uint8), b.view(np.uint8))
        else:
            same = np.allclose(a, b, rtol=1e-9, atol=1e-12)
        if not same:
            problems.append(f"rank {rank}: {op} {mine.case}: {a.ravel()[:4]} vs {b.ravel()[:4]}")
    return problems


def run_objects(comm, ref, rank):
    pairs = [
        (comm.scan(rank + 1), ref.scan(rank + 1)),
        (comm.exscan(rank + 1), ref.exscan(rank + 1)),
        (comm.scan(str(rank), lambda a, b: a + b), ref.scan(str(rank), lambda a, b: a + b)),
        (comm.exscan([rank], lambda a, b: a + b), ref.exscan([rank], lambda a, b: a + b)),
    ]
    return [
        f"rank {rank}: object call {i}: {got!r} vs {want!r}"
        for i, (got, want) in enumerate(pairs)
        if got != want
    ]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--ops", default=",".join(OPS))
    ap.add_argument("--cases-per-builder", type=int, default=3)
    ap.add_argument("--nonblocking", action="store_true")
    ap.add_argument("--objects", action="store_true")
    args = ap.parse_args()
    world = MPI.COMM_WORLD
    rank, size = world.Get_rank(), world.Get_size()
    ref = world.Dup()
    failures, ncases, builders, emulated = [], 0, [], []
    for op in args.ops.split(","):
        base = "reduce_scatter" if op.startswith("reduce_scatter") else op
        for name, params, cases in plan_cases(op, size, args.seed, args.cases_per_builder):
            comm = gridcoll.Comm(
                world, algo={base: name}, params={base: params} if params else None, timeout=30
            )
            builders.append(f"{op}:{name}")
            try:
                failures += run_cases(op, comm, ref, cases, args.nonblocking, rank, size)
            except Exception as err:  # report and stop: the others would time out anyway
                import traceback

                traceback.print_exc()
                print(f"rank {rank}: {op} {name} {params}: {type(err).__name__}: {err}",
                      file=sys.stderr, flush=True)  # fmt: skip
                os._exit(1)
            ncases += len(cases)
            emulated.append(comm.gridcoll_state.emulator is not None)
            comm.gridcoll_state.close()
    if args.objects:
        comm = gridcoll.Comm(world, timeout=30)
        failures += run_objects(comm, ref, rank)
        comm.gridcoll_state.close()
    for f in failures:
        print(f, file=sys.stderr, flush=True)
    everyone = world.gather(failures, root=0)
    if rank == 0:
        flat = [f for fs in everyone for f in fs]
        out = {
            "cases": ncases,
            "builders": builders,
            "failures": flat,
            "emulated": bool(emulated) and all(emulated),
            "nranks": size,
        }
        print(json.dumps(out), flush=True)
        return 1 if flat else 0
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
