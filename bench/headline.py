"""Seed 000's headline, in simulation: a 1 MB broadcast to 4 and 8 clusters.

Seed 000 (sec. 3.1.2) reports, on its simulated WAN (10 ms, 1 MB/s per link) with one
CPU per cluster: 1079 ms with segmentation and 7425 ms without for 8 clusters, and
1072 ms and 3200 ms for 4 clusters. This script plans ``magpie-segmented`` and
``magpie-original`` on ``magpie:8,1`` and ``magpie:4,1``, replays the schedules in the
simulator, and reports the relative error to the paper; it also reports ``auto`` (the
best of every builder) and ``mpich`` against the throughput bound (goal: auto within
1.5x of the bound on magpie:8,1).

Run: ``python bench/headline.py [--quick] [--out bench/results/headline.json]``.
"""

from __future__ import annotations

from _common import Bench, console, percent, rel_error, seconds, table, times
from gridcoll.network import broadcast_bound, get_grid
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

AUTO_GOAL = 1.5
"""auto's goal: simulated time within this factor of the bound on magpie:8,1."""

PAPER_TOLERANCE = 0.10
"""The tolerance for reproducing the paper's figures."""


def run_case(spec: str, algorithm: str) -> dict:
    """Plan, build and simulate one broadcast of 1 MB from rank 0."""
    grid = get_grid(spec)
    result = plan(grid, Call("bcast", MB, 0), PlanOptions(algo=algorithm))
    sim = simulate(result.build(grid), grid)
    bound = broadcast_bound(grid, MB, 0).time_s
    paper = PAPER_MS.get((spec, algorithm))
    return {
        "grid": spec,
        "algorithm": algorithm,
        "chosen": result.algorithm,
        "params": dict(result.params),
        "predicted_s": result.predicted_s,
        "simulated_s": sim.total_s,
        "bound_s": bound,
        "ratio_to_bound": sim.total_s / bound,
        "paper_s": paper / 1e3 if paper else None,
        "error_vs_paper": rel_error(sim.total_s, paper / 1e3) if paper else None,
        "within_10pct": abs(rel_error(sim.total_s, paper / 1e3)) <= PAPER_TOLERANCE
        if paper
        else None,
        "model_vs_sim": rel_error(result.predicted_s, sim.total_s),
    }


def main(argv: list[str] | None = None) -> int:
    bench = Bench("headline", "seed 000's 1 MB broadcast headline, simulated", argv)
    bench.parse()
    algorithms = ["magpie-segmented", "magpie-original", "auto", "mpich"]
    for spec in ("magpie:8,1", "magpie:4,1"):
        for algorithm in algorithms:
            bench.add(**run_case(spec, algorithm))
    rows = bench.rows
    auto8 = next(r for r in rows if r["grid"] == "magpie:8,1" and r["algorithm"] == "auto")
    paper_rows = [r for r in rows if r["paper_s"] is not None]
    summary = {
        "paper_cases_within_10pct": sum(bool(r["within_10pct"]) for r in paper_rows),
        "paper_cases": len(paper_rows),
        "auto_magpie_8_1_ratio_to_bound": auto8["ratio_to_bound"],
        "auto_goal_met": auto8["ratio_to_bound"] <= AUTO_GOAL,
        "auto_magpie_8_1_simulated_s": auto8["simulated_s"],
        "bound_magpie_8_1_s": auto8["bound_s"],
    }
    path = bench.finish(summary)
    out = console()
    out.print(
        table(
            "1 MB broadcast from rank 0 (simulated), seed 000 sec. 3.1.2",
            rows,
            [
                ("grid", "grid", None),
                ("algorithm", "algorithm", None),
                ("chosen", "chosen", None),
                ("predicted", "predicted_s", seconds),
                ("simulated", "simulated_s", seconds),
                ("paper", "paper_s", seconds),
                ("vs paper", "error_vs_paper", percent),
                ("bound", "bound_s", seconds),
                ("/ bound", "ratio_to_bound", times),
            ],
        )
    )
    out.print(
        f"paper figures reproduced within 10%: {summary['paper_cases_within_10pct']}"
        f"/{summary['paper_cases']}; auto on magpie:8,1: {seconds(auto8['simulated_s'])} = "
        f"{times(auto8['ratio_to_bound'])} the bound {seconds(auto8['bound_s'])} "
        f"(goal <= {AUTO_GOAL}x: {'met' if summary['auto_goal_met'] else 'NOT met'})"
    )
    out.print(f"wrote {path}", soft_wrap=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
