"""``gridcoll scenario``: seed 001's experiment, an application of broadcasts on a loaded
grid, run with each strategy (seed 001 sec. 3, figure 8).

``--simulate`` (the default) runs every call in the simulator under the load
(:func:`gridcoll.experiments.adaptive.simulate_scenario`), on the full grid; ``--measure``
runs the application for real over MPI on the emulated WAN, one launch per strategy
(:func:`gridcoll.experiments.adaptive.run_scenario`), with the same load applied by the
emulator, time-scaled (``--time-scale``) and on fewer ranks per cluster where the
machine cannot hold the grid (``--ranks-per-cluster``; it says so).

Seed 001's set-up by default: the root is a node of C2 (``--root``), and
``--load seed001[:SEED]`` loads the links of the cluster playing seed 001's C3, the
intermediate node of MPICH-G2's tree its completion waits on
(:func:`~gridcoll.experiments.adaptive.seed001_cluster`; C7 on ``teragrid``;
``--loaded-cluster`` names another). The advisors plan in ``--share`` of each
forecast interval (no cap unless ``--budget``) and plan the idle sizes before the
first call (``--idle`` seconds).

Both print the headline (``adaptive`` against ``static`` under load and without;
seed 001's ``sa-clustered`` against gridcoll's ``adaptive``; MPICH-G2's loaded calls
against the same calls without load) and a table of each strategy's mean times, and
with ``--json`` one object: ``headline``; per strategy ``times_s``, ``mean_loaded_s``,
``mean_unloaded_s``, ``vs_static_loaded``, ``vs_static_unloaded``,
``improvement_loaded``, ``change_unloaded`` (fractions, positive = faster than
``static``, ``mpich-g2``), ``loaded_over_unloaded``, ``after_load`` (the first two
calls after each load ends against the same calls without load), ``budgets_s``,
``idle_plans``, the advisor's CPU seconds and the monitor's cost; ``loaded`` (one
boolean per call). ``--plot`` draws seed 001's figure 8.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import time
from dataclasses import replace
from pathlib import Path

from rich.table import Table

from gridcoll.adapt.advisor import ADVISOR_SHARE
from gridcoll.cli._common import console, error_console, load_grid_arg, print_json, progress_bar
from gridcoll.errors import ParameterError
from gridcoll.experiments.adaptive import (
    STRATEGIES,
    headline,
    run_scenario,
    seed001_app,
    seed001_cluster,
    seed001_root,
    simulate_scenario,
    summarize,
)
from gridcoll.network.grid import Grid
from gridcoll.network.load import load_from_spec
from gridcoll.runtime import netns
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
            "the advisor re-planning with Mateescu's algorithm, with clusteredSA (seed "
            "001's strategy) or with every builder (gridcoll's adaptive), and gridcoll's "
            "static plan; simulated (default) or measured over MPI."
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
        "--loaded-cluster",
        default=None,
        metavar="NAME",
        help="the cluster whose links seed001 loads (default: the one playing seed 001's "
        "C3, the relay of MPICH-G2's tree its completion waits on: C7 on teragrid)",
    )
    parser.add_argument(
        "--app",
        default="seed001",
        metavar="seed001[:N]",
        help="the application: seed 001's, N broadcasts (default 60)",
    )
    parser.add_argument(
        "--strategies",
        default=",".join(STRATEGIES),
        metavar="A,B,...",
        help=f"comma-separated, from {', '.join(STRATEGIES)} (default: all)",
    )
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--simulate", action="store_true", help="simulate (the default)")
    mode.add_argument("--measure", action="store_true", help="run over MPI on the emulated WAN")
    parser.add_argument(
        "--netns",
        action="store_true",
        help="--measure on a real network instead of the emulator: the measured grid made a "
        "namespace network for the run (root; gridcoll netns), the load changing its "
        "shapers' rates, MPI over TCP",
    )
    parser.add_argument(
        "--time-scale",
        type=float,
        default=None,
        metavar="X",
        help="multiply every time of the application and the load by X "
        "(default 1 simulated; measured: what fits in 10 minutes)",
    )
    parser.add_argument(
        "--root",
        type=int,
        default=None,
        metavar="R",
        help="root rank (default: seed 001's, the first rank of C2; 0 without a C2)",
    )
    parser.add_argument(
        "--period",
        type=float,
        default=300.0,
        metavar="S",
        help="the monitor's refresh period in unscaled seconds (default 300: seed 001's 5 "
        "minutes): a link no call crossed for a period is probed",
    )
    parser.add_argument(
        "--share",
        type=float,
        default=ADVISOR_SHARE,
        metavar="X",
        help=f"the share of each forecast interval the advisor plans in, split among its "
        f"three targets (default {ADVISOR_SHARE:g}); the static plan gets the same budget",
    )
    parser.add_argument(
        "--budget",
        type=float,
        default=None,
        metavar="S",
        help="cap the planning budget of one target, nominal seconds (default: no cap)",
    )
    parser.add_argument(
        "--idle",
        type=float,
        default=None,
        metavar="S",
        help="unscaled seconds the advisor has before the first call, planned in idle "
        "mode (default: the application's first interval, 90)",
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


def _loaded_cluster(args, grid: Grid) -> int | None:
    """The cluster a ``seed001`` load takes: ``--loaded-cluster``, else the one playing
    seed 001's C3 from the root (None: the generator's default)."""
    if args.loaded_cluster is None:
        return seed001_cluster(grid, args.root)
    names = [c.name for c in grid.clusters]
    if args.loaded_cluster not in names:
        raise ParameterError(
            f"--loaded-cluster: {args.grid} has no cluster {args.loaded_cluster!r:.40}"
        )
    return names.index(args.loaded_cluster)


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
    if args.budget is not None and not args.budget > 0:
        raise ParameterError(f"--budget must be positive, got {args.budget!r}")
    if not 0 < args.share <= 1:
        raise ParameterError(f"--share must be in (0, 1], got {args.share!r}")
    if args.idle is not None and not (args.idle > 0 and math.isfinite(args.idle)):
        raise ParameterError(f"--idle must be positive, got {args.idle!r}")
    strategies = _strategies_arg(args.strategies)
    grid = load_grid_arg(args.grid)
    if args.root is None:
        args.root = seed001_root(grid)
    if not 0 <= args.root < grid.nranks:
        raise ParameterError(f"--root must be a rank of {args.grid} (0..{grid.nranks - 1})")
    scale = args.time_scale if args.time_scale is not None else 1.0
    unscaled = _app_arg(args.app, 1.0)
    if args.netns and not args.measure:
        raise ParameterError("--netns runs the measured scenario: add --measure")
    if args.measure:
        return _measure(args, grid, strategies, unscaled)
    app = _app_arg(args.app, scale)
    args.cluster = _loaded_cluster(args, grid)
    load = load_from_spec(
        args.load,
        grid,
        duration=unscaled[-1].t + 600.0,
        time_scale=scale,
        cluster=args.cluster,
    )
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
            share=args.share,
            max_budget_s=args.budget,
            idle_s=None if args.idle is None else args.idle * scale,
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
    if measured is not grid and args.root == seed001_root(grid):
        args.root = seed001_root(measured)
    if args.root >= measured.nranks:
        raise ParameterError(
            f"--root must be a rank of the measured grid (0..{measured.nranks - 1})"
        )
    args.cluster = _loaded_cluster(args, measured)
    # Without load the adaptive strategy runs once more: the reference after a load.
    unloaded = [] if args.no_reference else [n for n in strategies if n == "adaptive"]
    # A run must take at most 10 minutes: each launch gets its share of it.
    span = unscaled[-1].t + 30.0
    start = MEASURE_START_S + measured.nranks
    budget = 600.0 / (len(strategies) + len(unloaded)) - start - 30.0  # start-up, calls
    scale = args.time_scale or min(1.0, budget / span)
    app = _app_arg(args.app, scale, start=start)
    load = load_from_spec(
        args.load,
        measured,
        duration=unscaled[-1].t + 600.0,
        time_scale=scale,
        cluster=args.cluster,
    )
    out = console()
    if measured is not grid:
        error_console().print(
            f"measuring on {measured.nranks} ranks ({per_cluster} per cluster of "
            f"{args.grid}'s {grid.nclusters}): this machine cannot hold {grid.nranks} "
            f"processes; times scaled by {scale:.3g}"
        )
    started = time.monotonic()
    runs, reference = {}, {}
    real = netns.network(measured, name="scenario") if args.netns else contextlib.nullcontext()
    with real as network, progress_bar() as progress:
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
                network=network,
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
        "mode": f"{mode} (namespace network)" if args.netns and mode == "measure" else mode,
        "time_scale": scale,
        "root": args.root,
        "loaded_cluster": None if args.cluster is None else grid.clusters[args.cluster].name,
        "period_s": args.period * scale,
        "share": args.share,
        "max_budget_s": args.budget,
        "idle_s": args.idle,
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
    for line in _headline_lines(summary):
        out.print(line)
    out.print(_table(summary, grid))
    if args.plot:
        out.print(f"plot written to {args.plot}")
    return 0


def _headline_lines(summary: dict) -> list[str]:
    """The headline (:func:`~gridcoll.experiments.adaptive.headline`) in words."""
    h = summary.get("headline") or headline(summary)
    lines = []
    if "adaptive_vs_static" in h:
        a = h["adaptive_vs_static"]
        lines.append(
            f"adaptive vs static: {_pct(a['loaded'])} under load, {_pct(a['unloaded'])} "
            f"without (worst call {_pct(a['worst_unloaded'])}); positive = adaptive faster"
        )
    if "paper_vs_auto" in h:
        p = h["paper_vs_auto"]
        lines.append(
            f"seed 001's advisor (sa-clustered) vs gridcoll's (adaptive, auto): "
            f"{_pct(p['loaded'])} under load, {_pct(p['unloaded'])} without"
        )
    if not math.isnan(h.get("mpich_g2_loaded_over_unloaded", math.nan)):
        lines.append(
            f"mpich-g2 under load: {h['mpich_g2_loaded_over_unloaded']:.3f}x the same calls "
            "without load"
        )
    return lines


def _table(summary: dict, grid: Grid) -> Table:
    nloaded = sum(summary["loaded"])
    where = summary.get("loaded_cluster")
    table = Table(
        title=f"{len(summary['loaded'])} broadcasts on {grid.name} ({grid.nranks} ranks), "
        f"{nloaded} under load" + (f" (on {where}'s links)" if where else "") + ", "
        f"{summary['mode']}d",
        title_justify="left",
        caption="vs static / mpich-g2: mean per-call change, positive = faster; loaded x: "
        "loaded calls / the same calls without load; after load: the 2nd call after each "
        "load ends / the same call unloaded",
    )
    for col in (
        "strategy",
        "mean loaded",
        "mean unloaded",
        "vs static loaded",
        "vs static unloaded",
        "vs mpich-g2 loaded",
        "loaded x",
        "after load",
        "advisor CPU",
        "monitor",
    ):
        table.add_column(col, justify="left" if col == "strategy" else "right")
    for name, e in summary["strategies"].items():
        after = [r["ratios"][1] for r in e.get("after_load", []) if len(r["ratios"]) > 1]
        mon = e.get("monitor") or {}
        ratio = e.get("loaded_over_unloaded")
        table.add_row(
            name,
            _time(e["mean_loaded_s"]),
            _time(e["mean_unloaded_s"]),
            _pct(e.get("vs_static_loaded")),
            _pct(e.get("vs_static_unloaded")),
            _pct(e.get("improvement_loaded")),
            "-" if ratio is None or math.isnan(ratio) else f"{ratio:.3f}x",
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
