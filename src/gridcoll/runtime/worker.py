"""What ``gridcoll run`` starts on every rank: ``python -m gridcoll.runtime.worker``.

Each rank wraps ``MPI.COMM_WORLD`` in a :class:`gridcoll.Comm` (the grid and the WAN
emulation come from the environment the launcher set), then runs the broadcast
``--repeat`` times. Before each run the root fills its buffer with pseudo-random bytes
(seeded by the repetition) and every other rank fills its own with bytes that differ
from them everywhere; after it, every rank compares its bytes with the root's (which it
regenerates from the seed) exactly.

Timing: on one machine ``time.monotonic()`` is one system-wide clock, so the ranks
agree on a start instant instead of trusting a barrier's exit: after a barrier, rank 0
picks ``T = now + START_MARGIN_S`` and sends it to all (non-blocking), every rank sleeps
until ``T`` and calls ``Bcast``, and notes when it returns. The measured time is
``max over ranks (end) - T``: from the moment every rank (the root included) is in the
call to the moment the last rank has its data. Neither a barrier's latency nor the skew
of its exit (ranks that sleep while they wait leave a barrier up to a millisecond
apart, more on an oversubscribed machine) is inside the interval. A rank that got ``T``
only after ``T`` starts late; the result counts such starts (``late_starts``). If the
ranks span several hosts (:mod:`gridcoll.runtime.hostnames`; ``GRIDCOLL_FAKE_HOSTNAME``
fakes that for a test) the clocks are not comparable, and the time is rank 0's from its
barrier exit to the exit of a second barrier after the broadcast (an upper bound
including one barrier). The result says which (``"timing"``).

Several ``--schedule`` files run one after the other in one launch (the demo and the
benchmarks: one ``mpiexec`` start-up per grid instead of one per row); so do several
``--case`` calls (a JSON object each: ``op``, ``size``, ``root``, ``algo``, ``params``,
``itemsize``, ``commutative``, ``counts``); the result has a row per schedule or case in
``cases``, the first one's fields also at the top level. A case with ``counts`` (bytes
per block: ``P``, or ``P * P`` for all-to-all) runs the uneven form, ``Scatterv``,
``Gatherv``, ``Allgatherv`` or ``Alltoallv``, on packed buffers; its ``size`` is the
largest count.

Other collectives (``--op scatter|gather|allgather|alltoall|reduce|allreduce|barrier``;
``--size`` is the bytes per rank per peer, MPI's count times the extent): every rank
generates every rank's input from the repetition's seed, so it computes its expected
result with numpy alone (the blocks it must receive; the element-wise sum of all ranks'
vectors of unsigned integers of ``--itemsize`` bytes, or with ``commutative`` false the
rank-ordered product of 2x2 int64 matrices, ``--itemsize 32``), never with a schedule,
and compares its bytes exactly. A barrier is verified by the shared clock: no rank may
leave before the last one entered (on several hosts, whose clocks are not comparable,
only by its completing).

Output: rank 0 prints one line ``GRIDCOLL-RESULT {json}`` on stdout. A rank that fails
prints ``GRIDCOLL-ERROR {json}`` on stderr and exits with status 1 without finalizing
MPI. With ``GRIDCOLL_STATUS_DIR`` set, every rank also appends its progress to
``rank-R`` there (``joined``, ``rep`` with its case and repetition, ``done`` or
``error``), which lets the launcher name a rank that died without a word and report
progress while the job runs.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

from gridcoll.schedule.ir import OPERATIONS

__all__ = ["ENV_STATUS_DIR", "ERROR_PREFIX", "RESULT_PREFIX", "main"]


ENV_STATUS_DIR = "GRIDCOLL_STATUS_DIR"
"""Environment variable: directory where each rank appends its progress."""
START_MARGIN_S = 0.005
"""How far ahead of the barrier exit rank 0 puts the common start instant."""
RESULT_PREFIX = "GRIDCOLL-RESULT "
ERROR_PREFIX = "GRIDCOLL-ERROR "


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m gridcoll.runtime.worker")
    p.add_argument("--op", default="bcast", choices=list(OPERATIONS))
    p.add_argument("--size", type=int, required=False, default=None)
    p.add_argument("--root", type=int, default=0)
    p.add_argument("--itemsize", type=int, default=1, help="bytes per datatype element")
    p.add_argument("--algo", default="auto")
    p.add_argument("--params", default=None, help="JSON object of fixed builder parameters")
    p.add_argument(
        "--non-commutative",
        dest="commutative",
        action="store_false",
        help="reduce/allreduce: 2x2 int64 matrix products (itemsize 32), in rank order",
    )
    p.add_argument(
        "--case",
        action="append",
        default=None,
        help="JSON object of one call (op, size, root, algo, params, itemsize, commutative); "
        "repeat to run several in one launch",
    )
    p.add_argument(
        "--schedule",
        action="append",
        default=None,
        help="run this schedule file (JSON) instead; repeat to run several in one launch",
    )
    p.add_argument("--repeat", type=int, default=1)
    p.add_argument("--timeout", type=float, default=None)
    p.add_argument("--fail-rank", type=int, default=None, help=argparse.SUPPRESS)
    p.add_argument("--fail-mode", default="exit", choices=["exit", "hang"], help=argparse.SUPPRESS)
    return p


class _Status:
    """Appends progress lines to ``$GRIDCOLL_STATUS_DIR/rank-R`` (if set)."""

    def __init__(self, rank: int):
        directory = os.environ.get(ENV_STATUS_DIR)
        self.path = Path(directory) / f"rank-{rank}" if directory else None
        self.rank = rank

    def write(self, event: str, **fields: object) -> None:
        if self.path is None:
            return
        line = json.dumps({"event": event, "rank": self.rank, "pid": os.getpid(), **fields})
        with open(self.path, "a") as f:
            f.write(line + "\n")


def _expected(nbytes: int, rep: int, root: int) -> np.ndarray:
    rng = np.random.default_rng([rep, root, nbytes])
    return rng.integers(0, 256, nbytes, dtype=np.uint8)


def _ctl_gather(ctl, values: list[float], timeout: float) -> np.ndarray | None:
    """Gather a few floats at rank 0 without blocking in MPI."""
    from mpi4py import MPI

    from gridcoll.runtime.executor import wait

    send = np.asarray(values, dtype=np.float64)
    recv = np.empty((ctl.Get_size(), send.size)) if ctl.Get_rank() == 0 else None
    req = ctl.Igather([send, MPI.DOUBLE], [recv, MPI.DOUBLE] if recv is not None else None, 0)
    wait(req, timeout, what="gathering the timings")
    return recv


def _fail(mode: str) -> None:
    """Leave without a word (``exit``), or never join the broadcast (``hang``)."""
    sys.stdout.flush()
    if mode == "exit":
        os._exit(3)
    while True:
        time.sleep(1.0)


def _common_start(ctl, timeout: float) -> float:
    """Rank 0 picks an instant a little ahead; every rank sleeps until it; return it."""
    from mpi4py import MPI

    from gridcoll.runtime.executor import wait

    at = np.array([time.monotonic() + START_MARGIN_S])
    wait(ctl.Ibcast([at, MPI.DOUBLE], 0), timeout, what="agreeing on a start time")
    left = at[0] - time.monotonic()
    if left > 0:
        time.sleep(left)
    return float(at[0])


def _one_host(ctl, timeout: float) -> bool:
    """Whether every rank shares one clock (:mod:`gridcoll.runtime.hostnames`)."""
    from gridcoll.runtime.executor import wait
    from gridcoll.runtime.hostnames import gather_hosts, one_host

    return one_host(gather_hosts(ctl, wait, timeout))


def _run(args: argparse.Namespace, status: _Status) -> dict | None:
    from mpi4py import MPI

    from gridcoll.runtime.executor import wait
    from gridcoll.runtime.state import PROCESS, ready, state_of

    world = MPI.COMM_WORLD
    cases = _cases(args)
    comm = _comm_for(cases[0], args)
    timeout = state_of(comm).timeout
    ctl, req = MPI.Intracomm(world).Idup()
    wait(req, timeout, what="duplicating COMM_WORLD")
    status.write("joined")
    state = ready(comm)  # private communicator, emulator: outside the timed runs
    last_words = PROCESS.watchdog().last_words
    last_words.append(lambda reason: _report(status, "CollectiveTimeout", reason))
    one_host = _one_host(ctl, timeout)
    results = []
    for index, case in enumerate(cases):
        if index and args.case:  # each --case its own algorithm: its own communicator
            state.close()
            comm = _comm_for(case, args)
            state = ready(comm)
        results.append(_run_case(comm, ctl, state, case, index, args, status, one_host))
    wait(ctl.Ibarrier(), timeout, what="the final barrier")
    ctl.Free()
    state.close()  # the private communicator; COMM_WORLD itself is not ours to free
    if world.Get_rank() != 0:
        return None
    result = dict(results[0])  # the first (usually only) case at the top level
    result.update(
        nranks=world.Get_size(),
        grid=comm.grid.name,
        emulated=state.emulator is not None,
        host_overhead_s=state.host_overhead,
        plan_grid=state.plan_grid.name,
        timing="shared-clock" if one_host else "barrier",
        verified=all(r["verified"] for r in results),
        cases=results,
    )
    return result


def _comm_for(case: dict, args: argparse.Namespace):
    """A gridcoll.Comm on COMM_WORLD running the case's algorithm for its collective."""
    from mpi4py import MPI

    from gridcoll.runtime.comm import Comm

    op, algo, params = case["op"], case["algo"], case["params"]
    if op == "bcast" and not args.case:  # as before: the algo names the broadcast's
        return Comm(MPI.COMM_WORLD, algo=algo, params=params, timeout=args.timeout)
    fixed = {op: params} if params is not None else None
    return Comm(MPI.COMM_WORLD, algo={op: algo}, params=fixed, timeout=args.timeout)


def _cases(args: argparse.Namespace) -> list[dict]:
    """What to run: one entry per ``--case`` or schedule file, or the one planned call."""
    from gridcoll.runtime.choice import params_from_json

    call = {
        "op": args.op,
        "schedule": None,
        "nbytes": args.size,
        "root": args.root,
        "file": None,
        "algo": args.algo,
        "params": params_from_json(args.params),
        "itemsize": args.itemsize,
        "commutative": args.commutative,
    }
    if args.case:
        cases = []
        for text in args.case:
            given = json.loads(text)
            case = dict(call, op=given.get("op", "bcast"), nbytes=given.get("size"))
            for key in ("root", "algo", "params", "itemsize", "commutative"):
                case[key] = given.get(key, call[key] if key != "params" else None)
            if given.get("counts") is not None:
                case["counts"] = tuple(int(c) for c in given["counts"])
                case["nbytes"] = max(case["counts"])
            _check_size(case)
            cases.append(case)
        return cases
    if not args.schedule:
        _check_size(call)
        return [call]
    from gridcoll.schedule import schedule_from_json

    cases = []
    for path in args.schedule:
        schedule = schedule_from_json(Path(path).read_text())
        if schedule.op != "bcast":
            raise ValueError(f"schedule file {path}: only broadcast schedules run from files")
        cases.append(
            dict(call, schedule=schedule, nbytes=schedule.nbytes, root=schedule.root, file=path)
        )
    return cases


def _check_size(case: dict) -> None:
    if case["op"] == "barrier":
        case["nbytes"] = 0
        return
    nbytes, itemsize = case["nbytes"], case["itemsize"]
    if nbytes is None or nbytes < 1:
        raise ValueError("--size must be a positive number of bytes")
    if itemsize < 1 or nbytes % itemsize:
        raise ValueError("--size must be a whole number of --itemsize elements")
    if case["op"] in _REDUCE:
        if case["commutative"] and itemsize not in (1, 2, 4, 8):
            raise ValueError("a reduction's --itemsize must be 1, 2, 4 or 8 (unsigned sums)")
        if not case["commutative"] and itemsize != 32:
            raise ValueError("a non-commutative reduction needs --itemsize 32 (2x2 int64)")


def _pattern(rep: int, src: int, dst: int, n: int) -> np.ndarray:
    """``n`` pseudo-random bytes of the block ``src`` sends ``dst`` in repetition ``rep``
    (a multiplicative hash: cheap enough for 16 ranks x 16 MB)."""
    i = np.arange(n, dtype=np.uint32)
    i *= np.uint32(2654435761)
    i += np.uint32((rep * 7919 + src * 131 + dst * 17 + n) & 0xFFFFFFFF)
    return (i >> np.uint32(13)).astype(np.uint8)


class _Call:
    """One rank's buffers, call and expected result of one collective (module notes)."""

    def __init__(self, comm, case: dict):
        self.comm, self.case = comm, case
        self.op, self.root, self.n = case["op"], case["root"], case["nbytes"]
        self.rank, self.size = comm.Get_rank(), comm.Get_size()
        self.send = self.recv = self.expected = None
        self.message = None
        self.entered = 0.0

    def fill(self, rep: int) -> None:
        """Fresh inputs for ``rep``; outputs poisoned; the expected result, by numpy."""
        op, P, r, n, root = self.op, self.size, self.rank, self.n, self.root
        block = _pattern
        if op == "bcast":
            self.expected = _expected(n, rep, root)
            if self.recv is None:
                self.recv = np.empty(n, dtype=np.uint8)
                self.message = self.recv
                itemsize = self.case["itemsize"]
                if itemsize > 1 and self.case["schedule"] is None:
                    from mpi4py import MPI

                    element = MPI.BYTE.Create_contiguous(itemsize).Commit()
                    self.message = [self.recv, n // itemsize, element]
            if r == root:
                self.recv[:] = self.expected
            else:
                np.bitwise_xor(self.expected, (r % 255) + 1, out=self.recv)
            return
        if op == "barrier":
            return
        if op in _REDUCE:
            self._fill_reduction(rep)
            return
        counts = self.case.get("counts")
        if counts is not None:
            self._fill_uneven(rep, counts)
            return
        if op == "scatter":
            self.send = (
                np.concatenate([block(rep, r, d, n) for d in range(P)]) if r == root else None
            )
            self.expected = block(rep, root, r, n)
        elif op in ("gather", "allgather"):
            self.send = block(rep, r, 0, n)
            everyone = np.concatenate([block(rep, s, 0, n) for s in range(P)])
            self.expected = everyone if op == "allgather" or r == root else None
        else:
            self.send = np.concatenate([block(rep, r, d, n) for d in range(P)])
            self.expected = np.concatenate([block(rep, s, r, n) for s in range(P)])
        out = n if op == "scatter" else P * n
        self.recv = np.full(out, 0xA5, dtype=np.uint8) if self.expected is not None else None

    def _fill_uneven(self, rep: int, counts: tuple[int, ...]) -> None:
        """The v-variants: block ``i`` of ``counts[i]`` bytes, buffers packed."""
        op, P, r, root = self.op, self.size, self.rank, self.root

        def row(src: int, dsts: range, sizes) -> np.ndarray:
            return np.concatenate(
                [_pattern(rep, src, d, c) for d, c in zip(dsts, sizes, strict=True)]
            )

        if op == "scatter":
            self.send = row(root, range(P), counts) if r == root else None
            self.expected = _pattern(rep, root, r, counts[r])
        elif op in ("gather", "allgather"):
            self.send = _pattern(rep, r, 0, counts[r])
            everyone = np.concatenate([_pattern(rep, s, 0, counts[s]) for s in range(P)])
            self.expected = everyone if op == "allgather" or r == root else None
        else:
            self.send = row(r, range(P), counts[r * P : (r + 1) * P])
            self.expected = np.concatenate(
                [_pattern(rep, s, r, counts[s * P + r]) for s in range(P)]
            )
        if self.expected is not None:
            self.recv = np.full(self.expected.size, 0xA5, dtype=np.uint8)

    def _fill_reduction(self, rep: int) -> None:
        """Reductions, scans and the reduce-scatter (``--size``: one rank's block, the
        vector ``P`` of them): the expected result is the fold of the ranks whose
        inputs the rank's result is made of (all; ``0..r``; ``0..r-1``), in rank order."""
        op, P, r, itemsize = self.op, self.size, self.rank, self.case["itemsize"]
        n = self.n * P if op == "reduce_scatter" else self.n
        upto = {"scan": r + 1, "exscan": r}.get(op, P)
        has = op != "reduce" or r == self.root
        if op == "exscan" and r == 0:
            has = False  # MPI leaves rank 0's result undefined
        if self.case["commutative"]:
            dtype = np.dtype(f"u{itemsize}")
            vectors = [_pattern(rep, s, 0, n).view(dtype) for s in range(P)]
            self.send = vectors[r].copy()
            total = np.zeros(n // itemsize, dtype=dtype)
            for v in vectors[:upto]:
                total += v  # unsigned: wraps as MPI.SUM does
        else:
            count = n // 32
            mats = [
                (_pattern(rep, s, 0, 4 * count).astype(np.int64) % 3 - 1).reshape(count, 2, 2)
                for s in range(P)
            ]
            self.send = mats[r].reshape(count, 4).copy()
            total = mats[0]
            for m in mats[1:upto]:
                total = np.einsum("nij,njk->nik", total, m)  # x_0 x_1 ... in rank order
            total = total.reshape(count, 4)
        if op == "reduce_scatter":  # this rank's block of the total
            k = len(total) // P
            total = total[r * k : (r + 1) * k]
        self.expected = total.copy() if has else None
        self.recv = np.zeros_like(total) if has or op == "exscan" else None

    def run(self) -> None:
        from mpi4py import MPI

        comm, op, root = self.comm, self.op, self.root
        self.entered = time.monotonic()
        if op == "bcast":
            if self.case["schedule"] is None:
                comm.Bcast(self.message, root=root)
            else:
                comm.execute(self.case["schedule"], self.recv)
        elif op == "barrier":
            comm.Barrier()
        elif self.case.get("counts") is not None:
            self._run_uneven(comm, self.case["counts"])
        elif op == "scatter":
            comm.Scatter(self.send, self.recv, root)
        elif op == "gather":
            comm.Gather(self.send, self.recv, root)
        elif op == "allgather":
            comm.Allgather(self.send, self.recv)
        elif op == "alltoall":
            comm.Alltoall(self.send, self.recv)
        else:
            mop = MPI.SUM if self.case["commutative"] else _matmul_op()
            send, recv = self.send, self.recv
            if not self.case["commutative"]:
                quad = _quad()
                send = [send, len(send), quad]
                recv = None if recv is None else [recv, len(recv), quad]
            if op == "reduce":
                comm.Reduce(send, recv, mop, root)
            elif op == "allreduce":
                comm.Allreduce(send, recv, mop)
            elif op == "reduce_scatter":
                if not self.case["commutative"]:  # per block: the count is a block's
                    send = [self.send, len(self.send) // self.size, _quad()]
                comm.Reduce_scatter_block(send, recv, mop)
            else:
                getattr(comm, op.capitalize())(send, recv, mop)

    def _run_uneven(self, comm, counts: tuple[int, ...]) -> None:
        op, P, r, root = self.op, self.size, self.rank, self.root
        if op == "scatter":
            comm.Scatterv([self.send, list(counts)] if r == root else None, self.recv, root)
        elif op == "gather":
            comm.Gatherv(self.send, [self.recv, list(counts)] if r == root else None, root)
        elif op == "allgather":
            comm.Allgatherv(self.send, [self.recv, list(counts)])
        else:
            comm.Alltoallv(
                [self.send, list(counts[r * P : (r + 1) * P])], [self.recv, list(counts[r::P])]
            )

    def ok(self) -> bool:
        """This rank's bytes equal the expected ones (a barrier: checked at rank 0)."""
        if self.op == "barrier" or self.expected is None:
            return True
        return bool(np.array_equal(self.recv, self.expected))


_OPS: dict = {}


def _quad():
    """The 2x2 int64 matrix datatype (32 bytes) of non-commutative reductions."""
    if "quad" not in _OPS:
        from mpi4py import MPI

        _OPS["quad"] = MPI.INT64_T.Create_contiguous(4).Commit()
    return _OPS["quad"]


def _matmul_op():
    """x (op) y = x @ y on 2x2 int64 matrices: associative, not commutative."""
    if "matmul" not in _OPS:
        from mpi4py import MPI

        def matmul(inbuf, inoutbuf, datatype):
            x = np.frombuffer(inbuf, dtype=np.int64).reshape(-1, 2, 2)
            y = np.frombuffer(inoutbuf, dtype=np.int64).reshape(-1, 2, 2)
            y[...] = np.einsum("nij,njk->nik", x, y)

        _OPS["matmul"] = MPI.Op.Create(matmul, commute=False)
    return _OPS["matmul"]


def _run_case(comm, ctl, state, case, index, args, status, one_host) -> dict:
    """``--repeat`` verified, timed runs of one case; rank 0 gets the result row."""
    from gridcoll.runtime.executor import wait
    from gridcoll.runtime.prepare import plan_call, prepare

    rank = comm.Get_rank()
    op, schedule, nbytes, root = case["op"], case["schedule"], case["nbytes"], case["root"]
    plan = None
    if schedule is None and case.get("counts") is not None:  # the plan the call makes
        plan = plan_call(state, op, nbytes, root, case["itemsize"], counts=case["counts"])
    elif schedule is None:  # plan before timing
        itemsize = 1 if op == "barrier" else case["itemsize"]
        commutative = case["commutative"] or op not in _REDUCE
        plan = prepare(state, rank, op, nbytes, root, itemsize, commutative).plan
    timeout = state.timeout
    times, verified, late_starts = [], True, 0
    call = _Call(comm, case)
    if case.get("counts") is not None:  # its layout and its agreement's plans, untimed
        call.fill(0)
        call.run()
    for rep in range(args.repeat):
        call.fill(rep)
        wait(ctl.Ibarrier(), timeout, what="the barrier before a repetition")
        start, late = time.monotonic(), False
        if one_host:
            start = _common_start(ctl, timeout)
            late = time.monotonic() > start + 1e-3
        if args.fail_rank == rank:  # testing the failure behaviour: leave, or never join
            _fail(args.fail_mode)
        call.run()
        end = time.monotonic()
        if not one_host:
            wait(ctl.Ibarrier(), timeout, what="the barrier after a repetition")
            end = time.monotonic()
        ok = call.ok()
        status.write("rep", case=index, rep=rep, ok=ok)
        table = _ctl_gather(ctl, [start, end, float(ok), float(late), call.entered], timeout)
        if rank == 0:
            late_starts += int(table[:, 3].sum())
            times.append(float(table[:, 1].max() - start) if one_host else end - start)
            verified = verified and bool(table[:, 2].all())
            if op == "barrier" and one_host:  # nobody left before the last one came in
                verified = verified and bool(table[:, 1].min() >= table[:, 4].max())
    if schedule is not None:
        algorithm, params_out = schedule.algorithm, dict(schedule.params)
        segment = schedule.segment_size
        explanation = f"schedule file {case['file']}"
    else:
        algorithm, params_out = plan.algorithm, dict(plan.params)
        segment, explanation = plan.segment_size, plan.explain()
    return {
        "op": op,
        "size": nbytes,
        "counts": case.get("counts"),
        "root": root,
        "algorithm": algorithm,
        "params": params_out,
        "segment_size": segment,
        "measured_all_s": times,
        "verified": verified and len(times) == args.repeat,
        "repetitions": args.repeat,
        "late_starts": late_starts,
        "explanation": explanation,
    }


_REDUCE = ("reduce", "allreduce", "reduce_scatter", "scan", "exscan")


def _report(status: _Status, kind: str, message: str, peer: int | None = None) -> None:
    """This rank's failure, for the launcher: a status line and an error line."""
    info = {"rank": status.rank, "type": kind, "message": " ".join(message.split()), "peer": peer}
    status.write("error", **{k: v for k, v in info.items() if k != "rank"})
    sys.stderr.write(ERROR_PREFIX + json.dumps(info) + "\n")
    sys.stderr.flush()
    sys.stdout.flush()


def main(argv: list[str] | None = None) -> int:
    """Run the worker; return the exit status (0: done, 1: this rank failed)."""
    args = _parser().parse_args(argv)
    from mpi4py import MPI

    rank = MPI.COMM_WORLD.Get_rank()
    status = _Status(rank)
    try:
        result = _run(args, status)
    except Exception as err:  # report, then leave without MPI_Finalize (peers may be gone)
        _report(status, type(err).__name__, str(err), getattr(err, "peer", None))
        os._exit(1)
    status.write("done")
    if result is not None:
        sys.stdout.write(RESULT_PREFIX + json.dumps(result) + "\n")
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
