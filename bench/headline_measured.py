"""Seed 000's headline, measured for real: a 1 MB broadcast over the emulated WAN.

Seed 000 (sec. 3.1.2) ran its broadcasts on a simulated WAN (10 ms, 1 MB/s per link)
with one CPU per cluster: 1079 ms with the segmented two-layer tree and 7425 ms with the
original MagPIe broadcast on 8 clusters (1072 ms and 3200 ms on 4). This script runs
them for real: one process per rank on this machine, the WAN emulated below every
algorithm (:mod:`gridcoll.runtime.emulation`), each schedule planned on the effective
grid (the grid plus the runtime's host overhead, :mod:`gridcoll.runtime.host`) and run
``--repeat`` times with every rank's bytes verified, all in one launch per grid. It
reports the median against the paper, and ``auto`` (the best of every builder) and
``mpich`` against the throughput bound (goal: ``auto`` within 1.5x of it on
``magpie:8,1``).

``--quick``: ``magpie:8,1`` only, one run each (about half a minute).

Run: ``python bench/headline_measured.py [--quick] [--out bench/results/headline_measured.json]``.
"""

from __future__ import annotations

import os
import statistics

from _common import Bench, console, percent, rel_error, seconds, table, times
from gridcoll.network import broadcast_bound, get_grid
from gridcoll.runtime.host import default_host_overhead, external_load
from gridcoll.runtime.worker import measure_schedules
from gridcoll.simulate import simulate
from gridcoll.tune import Call, PlanOptions, plan

MB = 2**20
"""Seed 000's "1 MB" (gridcoll reads sizes with binary prefixes)."""

PAPER_MS = {
    ("magpie:8,1", "magpie-segmented"): 1079.0,
    ("magpie:8,1", "magpie-original"): 7425.0,
    ("magpie:4,1", "magpie-segmented"): 1072.0,
    ("magpie:4,1", "magpie-original"): 3200.0,
}
"""Seed 000, sec. 3.1.2: completion times of a 1 MB broadcast (ms)."""

ALGORITHMS = ("magpie-segmented", "magpie-original", "auto", "mpich")
AUTO_GOAL = 1.5
"""auto's goal: measured time within this factor of the bound on magpie:8,1."""


def run_grid(spec: str, repeat: int, load: float) -> list[dict]:
    grid = get_grid(spec)
    overhead = default_host_overhead(grid.nranks, emulated=True, load=load)
    bound = broadcast_bound(grid, MB, 0).time_s
    rows, schedules = [], []
    for algorithm in ALGORITHMS:
        result = plan(
            grid, Call("bcast", MB, 0), PlanOptions(algo=algorithm, host_overhead=overhead)
        )
        schedule = result.build()  # on result.network: the grid plus the overhead
        schedules.append(schedule)
        rows.append(
            {
                "grid": spec,
                "algorithm": algorithm,
                "chosen": result.algorithm,
                "params": dict(result.params),
                "host_overhead_s": overhead,
                "predicted_s": result.predicted_s,
                "simulated_s": simulate(schedule, result.network).total_s,
                "bound_s": bound,
            }
        )
    runs = measure_schedules(grid, schedules, repeat=repeat, timeout=120.0)
    for row, measured in zip(rows, runs, strict=True):
        paper = PAPER_MS.get((spec, row["algorithm"]))
        median = statistics.median(measured)
        row.update(
            measured_s=median,
            measured_all_s=measured,
            ratio_to_bound=median / row["bound_s"],
            meas_vs_sim=rel_error(median, row["simulated_s"]),
            paper_s=paper / 1e3 if paper else None,
            error_vs_paper=rel_error(median, paper / 1e3) if paper else None,
        )
    return rows


def main(argv: list[str] | None = None) -> int:
    bench = Bench("headline_measured", "seed 000's 1 MB headline, measured over MPI", argv)
    bench.parser.add_argument("--repeat", type=int, default=5, help="runs per algorithm")
    bench.parse()
    repeat = 1 if bench.quick else bench.args.repeat
    load = external_load()  # before any of our ranks run
    for spec in ("magpie:8,1",) if bench.quick else ("magpie:8,1", "magpie:4,1"):
        for row in run_grid(spec, repeat, load):
            bench.add(**row)
    rows = bench.rows
    by = {(r["grid"], r["algorithm"]): r for r in rows}
    seg, orig, auto = (
        by[("magpie:8,1", a)] for a in ("magpie-segmented", "magpie-original", "auto")
    )
    summary = {
        "magpie_8_1_segmented_s": seg["measured_s"],
        "magpie_8_1_original_s": orig["measured_s"],
        "paper_segmented_s": 1.079,
        "paper_original_s": 7.425,
        "segmented_speedup_over_original": orig["measured_s"] / seg["measured_s"],
        "paper_speedup": 7425 / 1079,
        "auto_chosen": auto["chosen"],
        "auto_params": auto["params"],
        "auto_measured_s": auto["measured_s"],
        "bound_s": auto["bound_s"],
        "auto_ratio_to_bound": auto["ratio_to_bound"],
        "auto_goal_met": auto["ratio_to_bound"] <= AUTO_GOAL,
        "host_overhead_s": auto["host_overhead_s"],
        "repeat": repeat,
        "load_at_start": load,
    }
    path = bench.finish(summary, loadavg_at_end=os.getloadavg())
    out = console()
    out.print(
        table(
            "1 MB broadcast from rank 0, measured over MPI on the emulated WAN (seed 000 3.1.2)",
            rows,
            [
                ("grid", "grid", None),
                ("algorithm", "algorithm", None),
                ("chosen", "chosen", None),
                ("measured", "measured_s", seconds),
                ("simulated", "simulated_s", seconds),
                ("meas vs sim", "meas_vs_sim", percent),
                ("paper", "paper_s", seconds),
                ("vs paper", "error_vs_paper", percent),
                ("bound", "bound_s", seconds),
                ("/ bound", "ratio_to_bound", times),
            ],
        )
    )
    out.print(
        f"magpie:8,1: magpie-segmented {seconds(seg['measured_s'])} vs magpie-original "
        f"{seconds(orig['measured_s'])} ({summary['segmented_speedup_over_original']:.1f}x; "
        f"paper 1079 ms vs 7425 ms, 6.9x); auto ({auto['chosen']}) "
        f"{seconds(auto['measured_s'])} = {times(auto['ratio_to_bound'])} the bound "
        f"{seconds(auto['bound_s'])} (goal <= {AUTO_GOAL}x: "
        f"{'met' if summary['auto_goal_met'] else 'NOT met'})"
    )
    out.print(f"wrote {path}", soft_wrap=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
