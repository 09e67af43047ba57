"""``gridcoll scenario``: seed 001's experiment, an application of broadcasts on a loaded
grid, run with each strategy (seed 001 sec. 3, figure 8).

``--simulate`` (the default) runs every call in the simulator under the load
(:func:`gridcoll.experiments.adaptive.simulate_scenario`), on the full grid; ``--measure``
runs the application for real over MPI on the emulated WAN, one launch per strategy
(:func:`gridcoll.experiments.adaptive.run_scenario`), with the same load applied by the
emulator, time-scaled (``--time-scale``) and on fewer ranks per cluster where the
machine cannot hold the grid (``--ranks-per-cluster``; it says so). Both print a table
of each strategy's mean times loaded and unloaded and its change against MPICH-G2,
and with ``--json`` one object: per strategy ``times_s``, ``mean_loaded_s``,
``mean_unloaded_s``, ``improvement_loaded``, ``change_unloaded`` (fractions, positive
= faster than ``mpich-g2``), ``after_load`` (the first two calls after each load ends
against the same calls without load), the advisor's CPU seconds and the monitor's
cost; ``loaded`` (one boolean per call). ``--plot`` draws seed 001's figure 8.
"""

from __future__ import annotations

import argparse
import math
import time
from dataclasses import replace
from pathlib import Path

from rich.table import Table

from gridcoll.cli._common import console, error_console, load_grid_arg, print_json, progress_bar
from gridcoll.errors import ParameterError
from gridcoll.experiments.adaptive import (
    STRATEGIES,
    run_scenario,
    seed001_app,
    simulate_scenario,
    summarize,
)
from gridcoll.network.grid import Grid
from gridcoll.network.load import load_from_spec
from gridcoll.units import format_time

__all__ = ["add_parser", "run"]

MEASURE_RANKS_PER_CLUSTER = 2
"""``--measure``'s default ranks per cluster: 16 processes for seed 001's 8 clusters."""
MEASURE_START_S = 5.0
"""``--measure``: the application's first call comes this many seconds, plus one per
rank, after the launch (the ranks' start-up on an oversubscribed machine); the load
trace starts at the launch."""


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``scenario`` subcommand."""
    parser = subparsers.add_parser(
        "scenario",
        help="seed 001's adaptive-broadcast experiment: an application under load, "
        "each strategy side by side",
        description=(
            "Run seed 001's application (broadcasts of decreasing size at decreasing "
            "intervals) under a load trace with each strategy: MPICH-G2's static tree, "
            "Mateescu's tree re-planned by the advisor, gridcoll's adaptive advisor, and "
            "gridcoll's static plan; simulated (default) or measured over MPI."
        ),
    )
    parser.add_argument(
        "--grid",
        default="teragrid",
        metavar="GRID",
        help="a preset or a grid file (default: teragrid)",
    )
    parser.add_argument(
        "--load",
        default="seed001",
        metavar="TRACE",
        help="seed001[:SEED] (default seed001:0) or a gridcoll-load/1 file",
    )
    parser.add_argument(
        "--app",
        default="seed001",
        metavar="seed001[:N]",
        help="the application: seed 001's, N broadcasts (default 60)",
    )
    parser.add_argument(
        "--strategies",
        default="mpich-g2,mateescu,adaptive",
        metavar="A,B,...",
        help=f"comma-separated, from {', '.join(STRATEGIES)} (default: mpich-g2,mateescu,adaptive)",
    )
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--simulate", action="store_true", help="simulate (the default)")
    mode.add_argument("--measure", action="store_true", help="run over MPI on the emulated WAN")
    parser.add_argument(
        "--time-scale",
        type=float,
        default=None,
        metavar="X",
        help="multiply every time of the application and the load by X "
        "(default 1 simulated; measured: what fits in 10 minutes)",
    )
    parser.add_argument("--root", type=int, default=0, metavar="R", help="root rank (default 0)")
    parser.add_argument(
        "--period",
        type=float,
        default=300.0,
        metavar="S",
        help="the monitor's refresh period in unscaled seconds (default 300: seed 001's 5 "
        "minutes): a link no call crossed for a period is probed",
    )
    parser.add_argument(
        "--budget",
        type=float,
        default=1.0,
        metavar="S",
        help="the advisor's largest planning budget per size, nominal seconds (default 1; "
        "--measure uses the runtime's default, 1)",
    )
    parser.add_argument(
        "--ranks-per-cluster",
        type=int,
        default=None,
        metavar="K",
        help=f"--measure: ranks per cluster (default {MEASURE_RANKS_PER_CLUSTER})",
    )
    parser.add_argument(
        "--no-reference",
        action="store_true",
        help="skip the runs without load (after_load needs them; --measure makes one, "
        "of the adaptive strategy)",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--plot", metavar="FILE.png", help="draw seed 001's figure 8")
    parser.set_defaults(func=run)


def _app_arg(text: str, time_scale: float, start: float = 0.0):
    name, _, arg = text.partition(":")
    if name != "seed001":
        raise ParameterError(f"--app must be seed001 or seed001:N, got {text!r:.60}")
    try:
        n = int(arg) if arg else 60
    except ValueError:
        raise ParameterError(f"--app seed001:N needs an integer N, got {arg!r:.40}") from None
    if not 2 <= n <= 10_000:
        raise ParameterError(f"--app seed001:N needs 2 <= N <= 10000, got {n}")
    return seed001_app(n, time_scale=time_scale, start=start)


def _strategies_arg(text: str) -> list[str]:
    names = [s.strip() for s in text.split(",") if s.strip()]
    bad = [s for s in names if s not in STRATEGIES]
    if bad or not names:
        raise ParameterError(
            f"--strategies: unknown {bad[0] if bad else '(none)'!r}; choose from "
            f"{', '.join(STRATEGIES)}"
        )
    return list(dict.fromkeys(names))


def _measured_grid(grid: Grid, per_cluster: int) -> Grid:
    """``grid`` with ``per_cluster`` ranks in every cluster (same links and routes)."""
    clusters = tuple(replace(c, nranks=per_cluster, hosts=()) for c in grid.clusters)
    return Grid(f"{grid.name}:{per_cluster}-per-cluster", clusters, grid.routes, grid.links)


def run(args: argparse.Namespace) -> int:
    """Run the scenario; print the table (or the JSON); draw the plot."""
    if args.plot and Path(args.plot).suffix.lower() not in (".png", ".svg", ".pdf"):
        raise ParameterError(f"--plot needs a .png, .svg or .pdf file name, got {args.plot!r}")
    if args.time_scale is not None and not (args.time_scale > 0 and math.isfinite(args.time_scale)):
        raise ParameterError(f"--time-scale must be positive, got {args.time_scale!r}")
    if not args.period > 0:
        raise ParameterError(f"--period must be positive, got {args.period!r}")
    if not args.budget > 0:
        raise ParameterError(f"--budget must be positive, got {args.budget!r}")
    strategies = _strategies_arg(args.strategies)
    grid = load_grid_arg(args.grid)
    if not 0 <= args.root < grid.nranks:
        raise ParameterError(f"--root must be a rank of {args.grid} (0..{grid.nranks - 1})")
    scale = args.time_scale if args.time_scale is not None else 1.0
    unscaled = _app_arg(args.app, 1.0)
    if args.measure:
        return _measure(args, grid, strategies, unscaled)
    app = _app_arg(args.app, scale)
    load = load_from_spec(args.load, grid, duration=unscaled[-1].t + 600.0, time_scale=scale)
    out = console()
    started = time.monotonic()
    nruns = len(strategies) * (1 if args.no_reference else 2)
    with progress_bar() as progress:
        task = progress.add_task("simulating", total=nruns * len(app))

        def tick(name: str, i: int) -> None:
            progress.update(task, advance=1, description=f"simulating {name}, call {i + 1}")

        summary = simulate_scenario(
            grid,
            app,
            load,
            strategies,
            root=args.root,
            period_s=args.period * scale,
            max_budget_s=args.budget,
            reference=not args.no_reference,
            on_call=tick,
        )
    summary.update(_meta(args, grid, "simulate", scale, time.monotonic() - started))
    return _report(args, summary, grid, out)


def _measure(args, grid: Grid, strategies: list[str], unscaled) -> int:
    per_cluster = args.ranks_per_cluster or MEASURE_RANKS_PER_CLUSTER
    if per_cluster < 1:
        raise ParameterError(f"--ranks-per-cluster must be >= 1, got {per_cluster}")
    measured = (
        _measured_grid(grid, per_cluster)
        if per_cluster < max(c.nranks for c in grid.clusters)
        else grid
    )
    if args.root >= measured.nranks:
        raise ParameterError(
            f"--root must be a rank of the measured grid (0..{measured.nranks - 1})"
        )
    # Without load the adaptive strategy runs once more: the reference after a load.
    unloaded = [] if args.no_reference else [n for n in strategies if n == "adaptive"]
    # A run must take at most 10 minutes: each launch gets its share of it.
    span = unscaled[-1].t + 30.0
    start = MEASURE_START_S + measured.nranks
    budget = 600.0 / (len(strategies) + len(unloaded)) - start - 30.0  # start-up, calls
    scale = args.time_scale or min(1.0, budget / span)
    app = _app_arg(args.app, scale, start=start)
    load = load_from_spec(args.load, measured, duration=unscaled[-1].t + 600.0, time_scale=scale)
    out = console()
    if measured is not grid:
        error_console().print(
            f"measuring on {measured.nranks} ranks ({per_cluster} per cluster of "
            f"{args.grid}'s {grid.nclusters}): this machine cannot hold {grid.nranks} "
            f"processes; times scaled by {scale:.3g}"
        )
    started = time.monotonic()
    runs, reference = {}, {}
    with progress_bar() as progress:
        for name, under in [(n, load) for n in strategies] + [(n, None) for n in unloaded]:
            what = f"measuring {name}" + ("" if under is not None else " without load")
            task = progress.add_task(what, total=len(app))
            run = run_scenario(
                measured,
                name,
                app,
                under,
                root=args.root,
                period_s=args.period * scale,
                on_call=lambda n, task=task: progress.update(task, completed=n),
            )
            if under is None:
                reference[name] = run.times_s
            else:
                runs[name] = run
    summary = summarize(app, load, runs, reference or None)
    summary.update(_meta(args, measured, "measure", scale, time.monotonic() - started))
    return _report(args, summary, measured, out)


def _meta(args, grid: Grid, mode: str, scale: float, wall: float) -> dict:
    return {
        "grid": grid.name,
        "ranks": grid.nranks,
        "load": args.load,
        "app": args.app,
        "mode": mode,
        "time_scale": scale,
        "root": args.root,
        "period_s": args.period * scale,
        "max_budget_s": args.budget,
        "wall_s": wall,
    }


def _report(args, summary: dict, grid: Grid, out) -> int:
    if args.plot:
        from gridcoll.plot.scenario import plot_scenario

        plot_scenario(
            summary,
            args.plot,
            title=(
                f"{summary['app']} on {grid.name} ({grid.nranks} ranks), load {summary['load']}, "
                f"{summary['mode']}d"
            ),
        )
        summary["plot"] = str(args.plot)
    if args.json:
        print_json(summary)
        return 0
    out.print(_table(summary, grid))
    if args.plot:
        out.print(f"plot written to {args.plot}")
    return 0


def _table(summary: dict, grid: Grid) -> Table:
    nloaded = sum(summary["loaded"])
    table = Table(
        title=f"{len(summary['loaded'])} broadcasts on {grid.name} ({grid.nranks} ranks), "
        f"{nloaded} under load, {summary['mode']}d",
        title_justify="left",
        caption="vs mpich-g2: mean per-call change, positive = faster; after load: the "
        "2nd call after each load ends / the same call unloaded",
    )
    for col in (
        "strategy",
        "mean loaded",
        "mean unloaded",
        "vs mpich-g2 loaded",
        "vs mpich-g2 unloaded",
        "after load",
        "advisor CPU",
        "monitor",
    ):
        table.add_column(col, justify="left" if col == "strategy" else "right")
    for name, e in summary["strategies"].items():
        after = [r["ratios"][1] for r in e.get("after_load", []) if len(r["ratios"]) > 1]
        mon = e.get("monitor") or {}
        table.add_row(
            name,
            _time(e["mean_loaded_s"]),
            _time(e["mean_unloaded_s"]),
            _pct(e.get("improvement_loaded")),
            _pct(e.get("change_unloaded")),
            "-" if not after else f"{max(after):.3f}x worst",
            "-" if not e.get("advisor_cpu_s") else format_time(e["advisor_cpu_s"]),
            "-" if not mon else _monitor_cell(mon, e),
        )
    return table


def _monitor_cell(mon: dict, entry: dict) -> str:
    share = 100 * entry.get("monitor_share_bytes", 0.0)
    return f"{mon['probes']} probes, {share:.1f}% of WAN bytes"


def _time(x: float) -> str:
    return "-" if x is None or math.isnan(x) else format_time(x)


def _pct(x: float | None) -> str:
    return "-" if x is None or math.isnan(x) else f"{100 * x:+.1f}%"
