"""Scatterv, Gatherv, Allgatherv and Alltoallv (and their non-blocking forms) with every
builder, against mpi4py's own collective on the same inputs.

Run under ``mpiexec -n N``; the grid and the WAN emulation come from the environment
(``GRIDCOLL_GRID``, ``GRIDCOLL_EMULATE``). For each registered builder of the equal
collective (the uneven call runs its schedule trimmed to the counts), plus ``auto`` and
``native``, several cases: a root, a dtype, uneven counts with zeros (sometimes all
zero but one, sometimes all zero), displacements shuffled with gaps, a buffer form
(``[buf, counts, displs, type]``, ``[buf, (counts, displs), type]``, ``[buf, counts]``
with packed displacements), sometimes ``MPI.IN_PLACE``. Each case runs gridcoll's
call and ``MPI.COMM_WORLD``'s (a duplicate) on copies of the same inputs and compares
every byte of the receive buffers (gaps included: both start from the same fill). With
``--nonblocking`` the cases of each builder are started together with the ``I``
forms and completed by ``MPI.Request.Waitall`` (or a ``Test`` loop, or ``Wait``).

Rank 0 prints one JSON line: cases, builders, failures, emulated, nranks.

Usage: vcollectives.py [--seed S] [--ops scatterv,...] [--cases-per-builder K]
       [--max-count C] [--nonblocking]
"""

import argparse
import json
import os
import sys

import numpy as np
from mpi4py import MPI

import gridcoll
from gridcoll.algorithms import list_builders

OPS = ("scatterv", "gatherv", "allgatherv", "alltoallv")
DTYPES = {"int32": MPI.INT32_T, "float64": MPI.DOUBLE, "uint8": MPI.UNSIGNED_CHAR}
FILL = 77


def params_for(builder, rng):
    params = {}
    for name in builder.params:
        if name.endswith("segment_size"):
            params[name] = 8 * int(rng.choice([1, 3, 5]))
        elif name.endswith("degree"):
            params[name] = int(rng.integers(1, 4))
        else:
            raise SystemExit(f"unknown parameter {name!r} of builder {builder.name!r}")
    return params


def _counts(rng, n, max_count):
    kind = rng.integers(0, 6)
    if kind == 0:
        return [0] * n  # nothing to move: still a call on every rank
    if kind == 1:  # one block only
        out = [0] * n
        out[int(rng.integers(0, n))] = int(rng.integers(1, max_count + 1))
        return out
    return [int(c) * int(rng.random() < 0.7) for c in rng.integers(0, max_count + 1, n)]


def _layout(rng, counts, packed):
    """Displacements (items) of ``counts`` in a buffer: packed, or shuffled with gaps."""
    if packed:
        return [int(sum(counts[:i])) for i in range(len(counts))], int(sum(counts))
    displs, end = [0] * len(counts), 0
    for i in rng.permutation(len(counts)):
        end += int(rng.integers(0, 3))
        displs[i] = end
        end += counts[i]
    return displs, end + int(rng.integers(0, 2))


def plan_cases(op, size, seed, per_builder, max_count):
    """[(name, params, [case])], the same on every rank."""
    rng = np.random.default_rng([seed, OPS.index(op)])
    base = op[:-1]
    out = []
    for builder in [*list_builders(base), "auto", "native"]:
        name = builder if isinstance(builder, str) else builder.name
        params = None if isinstance(builder, str) else params_for(builder, rng)
        cases = []
        for _ in range(per_builder if name not in ("auto", "native") else 2):
            n = size * size if op == "alltoallv" else size
            counts = _counts(rng, n, max_count)
            form = int(rng.integers(0, 3))
            cases.append(
                {
                    "root": int(rng.integers(0, size)),
                    "dtype": list(DTYPES)[int(rng.integers(0, len(DTYPES)))],
                    "counts": counts,
                    "form": form,
                    "inplace": bool(rng.random() < 0.25),
                    "layout_seed": int(rng.integers(0, 2**31)),
                    "id": int(rng.integers(0, 2**31)),
                }
            )
        out.append((name, params, cases))
    return out


def _vspec(arr, counts, displs, dtype, form):
    if form == 0:
        return [arr, counts, displs, DTYPES[dtype]]
    if form == 1:
        return [arr, (counts, displs), DTYPES[dtype]]
    return [arr, counts]  # packed displacements: mpi4py computes them


def _data(rng, n, dtype):
    if dtype == "uint8":
        return rng.integers(0, 256, n).astype(np.uint8)
    if dtype == "int32":
        return rng.integers(-1000, 1000, n).astype(np.int32)
    return rng.standard_normal(n)


class Case:
    """One case's buffers for one communicator, and the call that starts it."""

    def __init__(self, op, rank, size, case):
        self.op, self.rank, self.case = op, rank, case
        root, dtype, counts, form = case["root"], case["dtype"], case["counts"], case["form"]
        rng = np.random.default_rng([case["id"], rank])
        lay = np.random.default_rng([case["layout_seed"], rank])
        packed = form == 2
        self.inplace = case["inplace"]
        if op == "alltoallv":
            row = counts[rank * size : (rank + 1) * size]
            col = counts[rank::size]
            sd, s_end = _layout(lay, row, packed)
            rd, r_end = _layout(lay, col, packed)
            self.send = _vspec(_data(rng, s_end, dtype), row, sd, dtype, form)
            self.recv_arr = np.full(r_end, FILL, dtype=np.dtype(dtype))
            self.recv = _vspec(self.recv_arr, col, rd, dtype, form)
            self.inplace = False  # MPI.IN_PLACE goes to the library: tested once below
            return
        mine = _data(rng, counts[rank], dtype)
        displs, end = _layout(np.random.default_rng([case["layout_seed"]]), counts, packed)
        full = np.full(end, FILL, dtype=np.dtype(dtype))
        if op == "scatterv":
            self.inplace = self.inplace and rank == root
            if rank == root:
                self.send = _vspec(_data(rng, end, dtype), counts, displs, dtype, form)
            else:
                self.send = None
            self.recv_arr = np.full(counts[rank], FILL, dtype=np.dtype(dtype))
            self.recv = MPI.IN_PLACE if self.inplace else self.recv_arr
        elif op == "gatherv":
            self.inplace = self.inplace and rank == root
            self.recv_arr = full if rank == root else None
            if self.inplace:
                full[displs[rank] : displs[rank] + counts[rank]] = mine
            self.send = MPI.IN_PLACE if self.inplace else mine
            self.recv = _vspec(full, counts, displs, dtype, form) if rank == root else None
        else:
            self.recv_arr = full
            if self.inplace:
                full[displs[rank] : displs[rank] + counts[rank]] = mine
            self.send = MPI.IN_PLACE if self.inplace else mine
            self.recv = _vspec(full, counts, displs, dtype, form)


def _method(op, nonblocking):
    stem = {
        "scatterv": "Scatterv",
        "gatherv": "Gatherv",
        "allgatherv": "Allgatherv",
        "alltoallv": "Alltoallv",
    }[op]
    return ("I" + stem.lower()) if nonblocking else stem


def run_cases(op, comm, ref, cases, nonblocking, rank, size):
    """Run the cases on both communicators; return the failures."""
    results = []
    for c in (comm, ref):
        made = [Case(op, rank, size, case) for case in cases]
        if nonblocking and c is comm:
            requests = [_start(op, c, x, True) for x in made]
            how = cases[0]["id"] % 3
            if how == 0:
                MPI.Request.Waitall(requests)
            elif how == 1:
                while not all(r.Test() for r in requests):
                    MPI.Comm.Barrier(MPI.COMM_SELF)  # a local no-op: test again
            else:
                for r in requests:
                    r.Wait()
        else:
            for x in made:
                _start(op, c, x, False)
        results.append(made)
    problems = []
    for mine, theirs in zip(*results, strict=True):
        if mine.recv_arr is None:
            continue
        a, b = mine.recv_arr, theirs.recv_arr
        if op == "scatterv" and mine.inplace:
            continue  # MPI.IN_PLACE at the root: nothing received
        if not np.array_equal(a.view(np.uint8), b.view(np.uint8)):
            bad = int(np.flatnonzero(a.view(np.uint8) != b.view(np.uint8))[0])
            problems.append(f"rank {rank}: {op} {mine.case}: byte {bad} differs")
    return problems


def _start(op, comm, case, nonblocking):
    method = getattr(comm, _method(op, nonblocking))
    if op in ("scatterv", "gatherv"):
        return method(case.send, case.recv, case.case["root"])
    return method(case.send, case.recv)


def run_extras(comm, ref, rank, size):
    """Alltoallv with MPI.IN_PLACE (the library's), and a mismatch every rank learns."""
    problems = []
    counts = [(rank + d) % 3 for d in range(size)]
    outs = []
    for c in (comm, ref):
        buf = np.arange(sum(counts), dtype=np.int64) + 100 * rank
        c.Alltoallv(MPI.IN_PLACE, [buf, counts])
        outs.append(buf)
    if not np.array_equal(*outs):
        problems.append(f"rank {rank}: Alltoallv(IN_PLACE) differs")
    return problems


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--ops", default=",".join(OPS))
    ap.add_argument("--cases-per-builder", type=int, default=3)
    ap.add_argument("--max-count", type=int, default=9)
    ap.add_argument("--nonblocking", action="store_true")
    args = ap.parse_args()
    world = MPI.COMM_WORLD
    rank, size = world.Get_rank(), world.Get_size()
    ref = world.Dup()
    failures, ncases, builders, emulated = [], 0, [], []
    for op in args.ops.split(","):
        for name, params, cases in plan_cases(
            op, size, args.seed, args.cases_per_builder, args.max_count
        ):
            base = op[:-1]
            comm = gridcoll.Comm(
                world, algo={base: name}, params={base: params} if params else None, timeout=30
            )
            builders.append(f"{op}:{name}")
            try:
                failures += run_cases(op, comm, ref, cases, args.nonblocking, rank, size)
            except Exception as err:  # report and stop: the others would time out anyway
                import traceback

                traceback.print_exc()
                print(
                    f"rank {rank}: {op} {name} {params}: {type(err).__name__}: {err}",
                    file=sys.stderr,
                    flush=True,
                )
                os._exit(1)
            ncases += len(cases)
            emulated.append(comm.gridcoll_state.emulator is not None)
            comm.gridcoll_state.close()
    comm = gridcoll.Comm(world, timeout=30)
    failures += run_extras(comm, ref, rank, size)
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
