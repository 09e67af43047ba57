"""gridcoll against the MPI library's own broadcast: one cluster, no emulation.

On ``lan:2``, ``lan:4`` and ``lan:8`` (one process per rank on this machine, no WAN
emulation) each message size from 1 B to 16 MiB is broadcast by ``gridcoll.Comm``'s
``Bcast`` with ``algo="auto"`` and by the MPI library's ``MPI_Bcast`` (mpi4py's
``Bcast`` on a plain communicator), in the same run, alternately. On one cluster with no
emulated WAN, ``auto`` hands the call to the MPI library's broadcast
(``gridcoll.tune.plan(..., native=True)`` chooses ``native``), so the difference is the
price of the Python layer: the hot path of ``gridcoll.Comm.Bcast``
(:func:`gridcoll.runtime.collectives.bcast`: a type check, the record of the call for
``explain()``) and the watchdog that ends the job if a rank never joins
(:mod:`gridcoll.runtime.watchdog`), about 1 us. Goal: never more than 10% slower than
native at any size. The per-call overhead of the layer is the 1-byte time through
``gridcoll.Comm`` minus the native one.

Timing: ranks agree on a start instant (rank 0 picks it, all sleep until it, as the
worker does), run ``n`` back-to-back broadcasts (``n`` from 500 for tiny messages down to
3 for 16 MiB), and the time per call is ``(last rank's end - start) / n``; the median of
``--rounds`` alternating rounds is reported. Every rank's bytes are checked after each
round.

Run: ``python bench/native.py [--quick] [--out bench/results/native.json]``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from _common import Bench, console, percent, table
from gridcoll.units import format_size

GRIDS = (2, 4, 8)
QUICK_GRIDS = (2, 8)
SIZES = tuple(4**i for i in range(13))  # 1 B .. 16 MiB
QUICK_SIZES = tuple(16**i for i in range(7))  # 1 B, 16 B, ... 16 MiB
GOAL = 1.10
"""gridcoll auto may take at most this times native's time, at any size."""
RESULT = "NATIVE-RESULT "


def calls_for(nbytes: int) -> int:
    """Back-to-back calls per timed round: enough to dwarf the start-up jitter."""
    return max(3, min(500, (64 * 2**20) // max(nbytes, 1)))


# -- the MPI side (one process per rank) ---------------------------------------------------
def worker(sizes: list[int], rounds: int) -> None:
    import time

    import numpy as np
    from mpi4py import MPI

    import gridcoll
    from gridcoll.runtime.executor import wait

    world = MPI.COMM_WORLD
    rank = world.Get_rank()
    native = world.Dup()
    ctl = world.Dup()
    comm = gridcoll.Comm(world, algo="auto")

    def start_at() -> float:
        wait(ctl.Ibarrier(), 60.0, what="barrier")
        at = np.array([time.monotonic() + 0.003])
        wait(ctl.Ibcast([at, MPI.DOUBLE], 0), 60.0, what="start")
        left = at[0] - time.monotonic()
        if left > 0:
            time.sleep(left)
        return float(at[0])

    def timed(target, buf, n: int) -> tuple[float, bool]:
        expected = np.arange(buf.size, dtype=np.uint64).astype(np.uint8)
        buf[:] = expected if rank == 0 else 0
        start = start_at()
        for _ in range(n):
            target.Bcast(buf, root=0)
        end = np.array([time.monotonic() - start, float(np.array_equal(buf, expected))])
        out = np.empty((world.Get_size(), 2)) if rank == 0 else None
        wait(ctl.Igather(end, out, 0), 60.0, what="gather")
        if rank != 0:
            return 0.0, True
        return float(out[:, 0].max()) / n, bool(out[:, 1].all())

    rows = []
    for nbytes in sizes:
        buf = np.empty(nbytes, dtype=np.uint8)
        n = calls_for(nbytes)
        times = {"native": [], "gridcoll": []}
        ok = True
        timed(native, buf, 1)  # warm-up: connections, plan cache
        timed(comm, buf, 1)
        for r in range(rounds):
            order = ("native", "gridcoll") if r % 2 == 0 else ("gridcoll", "native")
            for which in order:
                t, good = timed(native if which == "native" else comm, buf, n)
                times[which].append(t)
                ok = ok and good
        if rank == 0:
            plan = comm.last_plan
            rows.append(
                {
                    "size": nbytes,
                    "calls": n,
                    "native_all_s": times["native"],
                    "gridcoll_all_s": times["gridcoll"],
                    "chosen": plan.algorithm,
                    "reason": plan.reason,
                    "verified": ok,
                    "host_overhead_s": comm.host_overhead,
                }
            )
    if rank == 0:
        print(RESULT + json.dumps(rows), flush=True)
    comm.Free()
    for c in (native, ctl):
        c.Free()


# -- the driver ----------------------------------------------------------------------------
def run_grid(nranks: int, sizes: tuple[int, ...], rounds: int) -> list[dict]:
    from gridcoll.runtime.processes import OVERSUBSCRIBE_ENV, mpiexec_command

    env = {k: v for k, v in os.environ.items() if not k.startswith("GRIDCOLL_")}
    env.update(OVERSUBSCRIBE_ENV)
    env["GRIDCOLL_EMULATE"] = "0"
    program = [sys.executable, str(Path(__file__).resolve()), "--worker"]
    program += ["--sizes", ",".join(map(str, sizes)), "--rounds", str(rounds)]
    proc = subprocess.run(
        mpiexec_command(nranks, program),
        env=env,
        capture_output=True,
        text=True,
        timeout=1800,
        check=False,
    )
    for line in proc.stdout.splitlines():
        if line.startswith(RESULT):
            return json.loads(line[len(RESULT) :])
    raise RuntimeError(f"lan:{nranks} failed ({proc.returncode}): {proc.stderr[-2000:]}")


def _median(values: list[float]) -> float:
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


def us(x: float) -> str:
    return f"{x * 1e6:.1f} us" if x < 1e-3 else f"{x * 1e3:.2f} ms"


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if "--worker" in argv:
        sizes = [int(s) for s in argv[argv.index("--sizes") + 1].split(",")]
        worker(sizes, int(argv[argv.index("--rounds") + 1]))
        return 0
    bench = Bench("native", "gridcoll auto against the MPI library's MPI_Bcast, one cluster", argv)
    bench.parser.add_argument("--rounds", type=int, default=None, help="timed rounds per size")
    bench.parse()
    grids = QUICK_GRIDS if bench.quick else GRIDS
    sizes = QUICK_SIZES if bench.quick else SIZES
    rounds = bench.args.rounds or (5 if bench.quick else 9)
    for nranks in grids:
        for row in run_grid(nranks, sizes, rounds):
            native, mine = _median(row["native_all_s"]), _median(row["gridcoll_all_s"])
            bench.add(
                grid=f"lan:{nranks}",
                nranks=nranks,
                **row,
                native_s=native,
                gridcoll_s=mine,
                ratio=mine / native,
                within_goal=mine / native <= GOAL,
            )
    rows = bench.rows
    one_byte = [r for r in rows if r["size"] == 1]
    overhead = {r["grid"]: r["gridcoll_s"] - r["native_s"] for r in one_byte}
    worst = max(rows, key=lambda r: r["ratio"])
    summary = {
        "goal": f"gridcoll auto <= {GOAL}x native at every size",
        "cases": len(rows),
        "cases_within_goal": sum(r["within_goal"] for r in rows),
        "goal_met": all(r["within_goal"] for r in rows),
        "worst_ratio": worst["ratio"],
        "worst_case": f"{worst['grid']} {format_size(worst['size'])}",
        "per_call_overhead_s": overhead,
        "all_verified": all(r["verified"] for r in rows),
        "auto_chose": sorted({r["chosen"] for r in rows}),
    }
    path = bench.finish(summary, loadavg_at_end=os.getloadavg())
    out = console()
    out.print(
        table(
            "broadcast, one cluster, no emulation: gridcoll auto vs MPI_Bcast (per call)",
            [{**r, "size_h": format_size(r["size"]), "extra": r["ratio"] - 1} for r in rows],
            [
                ("grid", "grid", None),
                ("size", "size_h", None),
                ("calls", "calls", None),
                ("native", "native_s", us),
                ("gridcoll auto", "gridcoll_s", us),
                ("ratio", "ratio", lambda x: f"{x:.2f}"),
                ("vs native", "extra", percent),
                ("chosen", "chosen", None),
                ("ok", "verified", lambda v: "yes" if v else "NO"),
            ],
        )
    )
    verdict = "met" if summary["goal_met"] else "NOT met"
    out.print(
        f"goal (auto never more than 10% slower than native): {verdict}: "
        f"{summary['cases_within_goal']}/{summary['cases']} sizes within; worst "
        f"{worst['ratio']:.2f}x at {summary['worst_case']}"
    )
    out.print(
        "per-call overhead of the Python layer (1 B through gridcoll.Comm minus MPI_Bcast): "
        + ", ".join(f"{g} {us(v)}" for g, v in overhead.items())
    )
    out.print(f"wrote {path}", soft_wrap=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
