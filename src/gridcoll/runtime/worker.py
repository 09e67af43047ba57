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
ranks span several hosts the clocks are not comparable, and the time is rank 0's from
its barrier exit to the exit of a second barrier after the broadcast (an upper bound
including one barrier). The result says which (``"timing"``).

Several ``--schedule`` files run one after the other in one launch (the demo and the
benchmarks: one ``mpiexec`` start-up per grid instead of one per row); the result has a
row per schedule in ``cases``, the first one's fields also at the top level.

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
import zlib
from pathlib import Path

import numpy as np

__all__ = ["ENV_STATUS_DIR", "ERROR_PREFIX", "RESULT_PREFIX", "main"]

ENV_STATUS_DIR = "GRIDCOLL_STATUS_DIR"
"""Environment variable: directory where each rank appends its progress."""
START_MARGIN_S = 0.005
"""How far ahead of the barrier exit rank 0 puts the common start instant."""
RESULT_PREFIX = "GRIDCOLL-RESULT "
ERROR_PREFIX = "GRIDCOLL-ERROR "


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m gridcoll.runtime.worker")
    p.add_argument("--op", default="bcast", choices=["bcast"])
    p.add_argument("--size", type=int, required=False, default=None)
    p.add_argument("--root", type=int, default=0)
    p.add_argument("--itemsize", type=int, default=1, help="bytes per datatype element")
    p.add_argument("--algo", default="auto")
    p.add_argument("--params", default=None, help="JSON object of fixed builder parameters")
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
    from mpi4py import MPI

    from gridcoll.runtime.executor import wait

    h = np.array([zlib.crc32(MPI.Get_processor_name().encode())], dtype=np.int64)
    lo, hi = np.empty_like(h), np.empty_like(h)
    wait(ctl.Iallreduce(h, lo, MPI.MIN), timeout, what="comparing hosts")
    wait(ctl.Iallreduce(h, hi, MPI.MAX), timeout, what="comparing hosts")
    return bool(lo[0] == hi[0])


def _run(args: argparse.Namespace, status: _Status) -> dict | None:
    from mpi4py import MPI

    import gridcoll
    from gridcoll.runtime.comm import _ready, _watchdog, params_from_json
    from gridcoll.runtime.executor import wait

    world = MPI.COMM_WORLD
    params = params_from_json(args.params)
    comm = gridcoll.Comm(world, algo=args.algo, params=params, timeout=args.timeout)
    timeout = comm._gc.timeout
    ctl, req = MPI.Intracomm(world).Idup()
    wait(req, timeout, what="duplicating COMM_WORLD")
    status.write("joined")
    state = _ready(comm)  # private communicator, emulator: outside the timed runs
    _watchdog().last_words.append(lambda reason: _report(status, "CollectiveTimeout", reason))
    one_host = _one_host(ctl, timeout)
    cases = _cases(args)
    results = [
        _run_case(comm, ctl, state, case, index, args, status, one_host)
        for index, case in enumerate(cases)
    ]
    comm.Barrier()
    ctl.Free()
    state.close()  # the private communicator; COMM_WORLD itself is not ours to free
    if world.Get_rank() != 0:
        return None
    result = dict(results[0])  # the first (usually only) case at the top level
    result.update(
        op=args.op,
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


def _cases(args: argparse.Namespace) -> list[dict]:
    """What to run: one entry per schedule file, or the one planned call."""
    if not args.schedule:
        return [{"schedule": None, "nbytes": args.size, "root": args.root, "file": None}]
    from gridcoll.schedule import schedule_from_json

    cases = []
    for path in args.schedule:
        schedule = schedule_from_json(Path(path).read_text())
        cases.append(
            {"schedule": schedule, "nbytes": schedule.nbytes, "root": schedule.root, "file": path}
        )
    return cases


def _run_case(comm, ctl, state, case, index, args, status, one_host) -> dict:
    """``--repeat`` verified, timed runs of one case; rank 0 gets the result row."""
    from mpi4py import MPI

    from gridcoll.runtime.comm import _prepare

    rank = comm.Get_rank()
    schedule, nbytes, root = case["schedule"], case["nbytes"], case["root"]
    plan = None
    if schedule is None:
        plan = _prepare(state, rank, nbytes, root, args.itemsize).plan  # plan before timing
    timeout = state.timeout
    times, verified, late_starts = [], True, 0
    buf = np.empty(nbytes, dtype=np.uint8)
    message = buf
    if args.itemsize > 1 and schedule is None:  # whole elements of a contiguous datatype
        element = MPI.BYTE.Create_contiguous(args.itemsize).Commit()
        message = [buf, nbytes // args.itemsize, element]
    for rep in range(args.repeat):
        expected = _expected(nbytes, rep, root)
        if rank == root:
            buf[:] = expected
        else:
            np.bitwise_xor(expected, (rank % 255) + 1, out=buf)
        comm.Barrier()
        start, late = time.monotonic(), False
        if one_host:
            start = _common_start(ctl, timeout)
            late = time.monotonic() > start + 1e-3
        if args.fail_rank == rank:  # testing the failure behaviour: leave, or never join
            _fail(args.fail_mode)
        if schedule is None:
            comm.Bcast(message, root=root)
        else:
            comm.execute(schedule, buf)
        end = time.monotonic()
        if not one_host:
            comm.Barrier()
            end = time.monotonic()
        ok = bool(np.array_equal(buf, expected))
        status.write("rep", case=index, rep=rep, ok=ok)
        table = _ctl_gather(ctl, [start, end, float(ok), float(late)], timeout)
        if rank == 0:
            late_starts += int(table[:, 3].sum())
            times.append(float(table[:, 1].max() - start) if one_host else end - start)
            verified = verified and bool(table[:, 2].all())
    if schedule is not None:
        algorithm, params_out = schedule.algorithm, dict(schedule.params)
        segment = schedule.segment_size
        explanation = f"schedule file {case['file']}"
    else:
        algorithm, params_out = plan.algorithm, dict(plan.params)
        segment, explanation = plan.segment_size, plan.explain()
    return {
        "size": nbytes,
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
        if args.schedule is None and (args.size is None or args.size < 1):
            raise ValueError("--size must be a positive number of bytes")
        if args.itemsize < 1 or (args.size or 0) % args.itemsize:
            raise ValueError("--size must be a whole number of --itemsize elements")
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
