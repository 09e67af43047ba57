"""Allreduce, allgather, reduce-scatter, reduce, all-to-all, scatter and gather against
the physical limit.

For every collective x preset x size, the plan ``auto`` chooses (the command line's
default budget, :data:`gridcoll.tune.select.DEFAULT_BUDGET_S`), simulated
(``gridcoll.simulate``), against its physical bound
(``gridcoll.network.collective_bound``) and against its own model:

* ``sim_vs_bound``: simulated time over the bound (goal: at most 1.10 from 64 KiB;
  never below 1: a simulated schedule below a lower bound would disprove it);
* ``model_vs_sim``: the chosen plan's prediction over its simulation, minus one (goal:
  within 10%);
* ``best_vs_bound``: the best simulated time of every candidate ``auto`` searched (each
  builder's tuned parameters), over the bound: how far the bound is from the best
  schedule gridcoll has, whichever the tuner picks.

Presets: ``magpie:8,1``, ``magpie:4,2``, ``das2:4``, ``teragrid``,
``transit-stub:20,3``; sizes 8 B, 64 KiB, 1 MiB (the vector of a reduction, one rank's
block of an allgather, reduce-scatter, scatter or gather, one pair's block of an
all-to-all). The plot (``--plot``, default
``bench/results/collectives_bound.png``) draws ``sim_vs_bound`` per cell.

``--measure`` adds the calls over MPI on the emulated WAN (``magpie:8,1`` and
``magpie:4,2``, 1 MiB, allreduce, allgather and all-to-all): ``auto`` and MPICH's
algorithm (:data:`BASELINES`: for all-to-all the rotated Direct Exchange of MPICH
1.2.5, seed 002 sec. 5) through :class:`gridcoll.Comm` (planned with the runtime's
host overhead; every rank's bytes verified), one launch per grid, median of
``--repeat`` runs each: measured over the bound (goal: 1.25x) and the speed-up over
MPICH's algorithm (goal for allreduce and allgather: 3x). Run it alone on the
machine.

Run: ``python bench/collectives_bound.py [--quick] [--measure] [--out FILE] [--plot FILE]``.
``--quick``: 64 KiB and 1 MiB on ``magpie:8,1`` and ``das2:4``.
"""

from __future__ import annotations

from pathlib import Path

from _common import RESULTS, Bench, console, percent, seconds, table, times
from gridcoll.network import get_grid
from gridcoll.simulate import simulate
from gridcoll.tune import Call, PlanOptions, plan
from gridcoll.tune.decision import build_schedule
from gridcoll.tune.select import DEFAULT_BUDGET_S

OPS = ("allreduce", "allgather", "reduce_scatter", "reduce", "alltoall", "scatter", "gather")
GRIDS = ("magpie:8,1", "magpie:4,2", "das2:4", "teragrid", "transit-stub:20,3")
QUICK_GRIDS = ("magpie:8,1", "das2:4")
SIZES = (8, 64 * 1024, 2**20)
QUICK_SIZES = (64 * 1024, 2**20)
BOUND_GOAL = 1.10
MODEL_GOAL = 0.10
GOAL_FROM = 64 * 1024
"""The goals: simulated within 1.10x of the bound and the model within 10% of the
simulation, from 64 KiB."""


def cell(grid_spec: str, op: str, nbytes: int) -> dict:
    """One cell: ``auto``'s plan simulated, its bound, and the best candidate."""
    grid = get_grid(grid_spec)
    p = plan(grid, Call(op, nbytes), PlanOptions(budget_s=DEFAULT_BUDGET_S))
    sim = simulate(p.build(grid), grid).total_s
    best_s, best_algo = sim, p.algorithm
    for cand in p.candidates[1:]:
        schedule = build_schedule(grid, op, cand.algorithm, nbytes, 0, 1, cand.params)
        t = simulate(schedule, grid).total_s
        if t < best_s:
            best_s, best_algo = t, cand.algorithm
    return {
        "grid": grid_spec,
        "op": op,
        "size": nbytes,
        "chosen": p.algorithm,
        "params": dict(p.params),
        "predicted_s": p.predicted_s,
        "simulated_s": sim,
        "bound_s": p.bound_s,
        "sim_vs_bound": sim / p.bound_s,
        "model_vs_sim": p.predicted_s / sim - 1,
        "best_algorithm": best_algo,
        "best_vs_bound": best_s / p.bound_s,
        "budget_note": p.budget_note,
    }


MEASURED_GRIDS = ("magpie:8,1", "magpie:4,2")
MEASURED_OPS = ("allreduce", "allgather", "alltoall")
BASELINES = {"allreduce": "mpich", "allgather": "mpich", "alltoall": "direct-rotated"}
"""MPICH's algorithm for each measured collective."""
MEASURED_SIZE = 2**20
MEASURED_GOAL = 1.25
SPEEDUP_GOAL = 3.0


def measured(repeat: int) -> list[dict]:
    """``auto`` and ``mpich`` over MPI on the emulated WAN (module docstring)."""
    import statistics

    from gridcoll.network import collective_bound
    from gridcoll.runtime.host import resolve_host_overhead
    from gridcoll.runtime.worker import measure_calls

    rows = []
    for spec in MEASURED_GRIDS:
        grid = get_grid(spec)
        host = resolve_host_overhead(None, grid.nranks, emulated=True)
        calls, keys = [], []
        for op in MEASURED_OPS:
            for algo in ("auto", BASELINES[op]):
                calls.append((Call(op, MEASURED_SIZE), PlanOptions(algo=algo, host_overhead=host)))
                keys.append((op, algo))
        found = measure_calls(grid, calls, repeat=repeat, timeout=120.0, wall_timeout=900.0)
        for (op, algo), case in zip(keys, found, strict=True):
            bound = collective_bound(grid, op, MEASURED_SIZE).time_s
            median = statistics.median(case["measured_all_s"])
            rows.append(
                {
                    "grid": spec,
                    "op": op,
                    "algo": algo,
                    "chosen": case.get("algorithm"),
                    "measured_s": median,
                    "measured_all_s": case["measured_all_s"],
                    "bound_s": bound,
                    "measured_vs_bound": median / bound,
                    "host_overhead_s": host,
                }
            )
    for row in rows:
        base = next(
            r
            for r in rows
            if (r["grid"], r["op"], r["algo"]) == (row["grid"], row["op"], BASELINES[row["op"]])
        )
        row["speedup_vs_mpich"] = base["measured_s"] / row["measured_s"]
    return rows


def plot(rows: list[dict], path: Path) -> None:
    """``sim_vs_bound`` per cell: one panel per collective, bars per grid and size."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ops = list(dict.fromkeys(r["op"] for r in rows))
    grids = list(dict.fromkeys(r["grid"] for r in rows))
    sizes = list(dict.fromkeys(r["size"] for r in rows))
    fig, axes = plt.subplots(1, len(ops), figsize=(4 * len(ops), 3.6), sharey=True)
    width = 0.8 / len(sizes)
    for ax, op in zip(axes, ops, strict=True):
        for k, size in enumerate(sizes):
            ys = [
                next((r["sim_vs_bound"] for r in rows if (r["op"], r["grid"], r["size"]) ==
                      (op, g, size)), 0.0)
                for g in grids
            ]  # fmt: skip
            xs = [i + (k - (len(sizes) - 1) / 2) * width for i in range(len(grids))]
            ax.bar(xs, ys, width, label=_size(size))
        ax.axhline(BOUND_GOAL, color="k", linestyle="--", linewidth=0.8)
        ax.axhline(1.0, color="k", linewidth=0.8)
        ax.set_title(op)
        ax.set_xticks(range(len(grids)), grids, rotation=30, ha="right", fontsize=8)
        ax.set_yscale("log")
    axes[0].set_ylabel("simulated / physical bound")
    axes[-1].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def _size(nbytes: int) -> str:
    from gridcoll.units import format_size

    return format_size(nbytes)


def main() -> None:
    bench = Bench("collectives_bound", __doc__.splitlines()[0])
    bench.parser.add_argument("--plot", type=Path, default=RESULTS / "collectives_bound.png")
    bench.parser.add_argument(
        "--measure", action="store_true", help="also run allreduce, allgather, alltoall over MPI"
    )
    bench.parser.add_argument("--repeat", type=int, default=3, help="runs per measured call")
    args = bench.parse()
    grids = QUICK_GRIDS if bench.quick else GRIDS
    sizes = QUICK_SIZES if bench.quick else SIZES
    out = console()
    for op in OPS:
        for spec in grids:
            for nbytes in sizes:
                bench.add(**cell(spec, op, nbytes))
                out.print(f"{op} {spec} {_size(nbytes)}", end="\r")
    rows = bench.rows
    judged = [r for r in rows if r["size"] >= GOAL_FROM]
    summary = {
        "cells": len(rows),
        "worst_sim_vs_bound": max(r["sim_vs_bound"] for r in judged),
        "within_bound_goal": sum(r["sim_vs_bound"] <= BOUND_GOAL for r in judged),
        "worst_model_vs_sim": max(abs(r["model_vs_sim"]) for r in judged),
        "within_model_goal": sum(abs(r["model_vs_sim"]) <= MODEL_GOAL for r in judged),
        "judged": len(judged),
        "below_bound": sum(r["best_vs_bound"] < 1 - 1e-9 for r in rows),
    }
    args.plot.parent.mkdir(parents=True, exist_ok=True)
    plot(rows, args.plot)
    out.print(
        table(
            "auto against the physical bound (simulated)",
            rows,
            [
                ("op", "op", None),
                ("grid", "grid", None),
                ("size", "size", _size),
                ("chosen", "chosen", None),
                ("simulated", "simulated_s", seconds),
                ("bound", "bound_s", seconds),
                ("sim/bound", "sim_vs_bound", times),
                ("model vs sim", "model_vs_sim", percent),
                ("best/bound", "best_vs_bound", times),
            ],
        )
    )
    extra = {}
    if args.measure:
        runs = measured(args.repeat)
        extra["measured"] = runs
        auto = [r for r in runs if r["algo"] == "auto"]
        summary["measured_worst_vs_bound"] = max(r["measured_vs_bound"] for r in auto)
        summary["measured_least_speedup"] = min(r["speedup_vs_mpich"] for r in auto)
        out.print(
            table(
                "over MPI, WAN emulated, 1 MiB (median)",
                runs,
                [
                    ("grid", "grid", None),
                    ("op", "op", None),
                    ("algorithm", "algo", None),
                    ("chosen", "chosen", None),
                    ("measured", "measured_s", seconds),
                    ("bound", "bound_s", seconds),
                    ("meas/bound", "measured_vs_bound", times),
                    ("vs mpich", "speedup_vs_mpich", times),
                ],
            )
        )
    out.print(summary)
    out.print(f"wrote {bench.finish(summary, plot=str(args.plot), **extra)}")


if __name__ == "__main__":
    main()
