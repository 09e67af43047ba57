"""``gridcoll phoenix``: Phoenix (seed 004), figs. 6-9, with processes that come and go.

``gridcoll dynamic`` is the same command under its old name.
``--experiment latency|bandwidth|reduction|transition`` runs one of
:data:`gridcoll.experiments.phoenix_simulated.EXPERIMENTS` in simulation (``--simulate``,
the default): :mod:`gridcoll.phoenix`'s processes on the simulator's link model beside
the paper's baselines (MPICH-like, MagPIe-like, List). ``--grid`` defaults to the
paper's set-up for the experiment (``das2-spread:201,3``, ``:137,4``, ``:128,3``,
``:160,4``). ``--measure`` runs it instead with ``--processes N`` real processes
(:mod:`gridcoll.experiments.phoenix_measured`, default 32, on ``das2-spread:N,3`` or
``:N,4``), the baselines simulated on the same grid. ``--crash`` makes transition's
leavers die instead of leaving (measured: by SIGKILL, found by heartbeats; simulated:
the survivors are told 3 s later, the measured heartbeat timeout); heirs take their
vnodes, and the headline says when broadcasts complete again. ``--experiment churn
--measure [--runs N]`` is the exactly-once checker (sec. III: a broadcast reaches every
vnode once while processes join and leave): ``N`` runs (default 20) of
random joins and leaves on real processes (default 8) during broadcasts, every vnode's
deliveries counted. A progress line goes to stderr. It prints a table and the headline
(``--json``: one object, every series and ``ratio_to_magpie_like``, ``ratio_to_list`` or
``recovery_s``, ``delivered``, ``lost``, ``duplicated``); ``--plot`` draws the figure.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rich.table import Table

from gridcoll.cli._common import console, load_grid_arg, print_json, progress_bar, size_arg
from gridcoll.errors import ParameterError

__all__ = ["add_parser", "run"]

EXPERIMENT_NAMES = ("latency", "bandwidth", "reduction", "transition", "churn")


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``phoenix`` subcommand (alias ``dynamic``, its old name)."""
    parser = subparsers.add_parser(
        "phoenix",
        aliases=["dynamic"],
        help="seed 004's experiments: self-built trees, processes that join and leave",
        description=(
            "Run one of Phoenix's (seed 004) experiments in simulation: the gridcoll.phoenix "
            "protocol (random probes, latency- and bandwidth-aware trees, virtual "
            "nodes) against MPICH-like, MagPIe-like and List."
        ),
    )
    parser.add_argument(
        "--experiment",
        required=True,
        choices=EXPERIMENT_NAMES,
        help="fig. 6 latency, fig. 7 bandwidth, fig. 8 reduction, fig. 9 transition; "
        "churn (--measure): the exactly-once checker over runs of random joins and leaves",
    )
    parser.add_argument(
        "--grid",
        default=None,
        metavar="GRID",
        help="a preset or a grid file (default: the paper's set-up for the experiment)",
    )
    parser.add_argument("--simulate", action="store_true", help="simulate (the default)")
    parser.add_argument(
        "--measure",
        action="store_true",
        help="run with real processes (gridcoll.group.Group) on the emulated grid",
    )
    parser.add_argument(
        "--processes",
        type=int,
        default=None,
        metavar="N",
        help="--measure: the number of processes (default 32; sets the default grid)",
    )
    parser.add_argument(
        "--settle",
        type=float,
        default=None,
        metavar="S",
        help="--measure: wait at most S seconds for the trees to settle before measuring "
        "(default 180, transition 120; 0: start at once)",
    )
    parser.add_argument(
        "--crash",
        action="store_true",
        help="transition: the leavers die instead of leaving politely (--measure: by "
        "SIGKILL); reports how soon broadcasts complete again",
    )
    parser.add_argument(
        "--runs",
        type=int,
        default=None,
        metavar="N",
        help="--measure churn: the number of runs, each a new group (default 20)",
    )
    parser.add_argument("--seed", type=int, default=0, help="seeds the processes (default 0)")
    parser.add_argument(
        "--sizes",
        default=None,
        metavar="S,S,...",
        help="bandwidth and reduction: the message sizes (default: the paper's range)",
    )
    parser.add_argument(
        "--size",
        type=size_arg,
        default=None,
        metavar="SIZE",
        help="transition, churn: the broadcast size (default 4MiB; with --measure "
        "256KiB; churn 64KiB)",
    )
    parser.add_argument(
        "--times",
        default=None,
        metavar="LEAVE,REJOIN,END",
        help="transition: when half the processes leave, rejoin, and the run ends "
        "(default 60,90,120 seconds; with --measure 30,45,60 after the trees settle)",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--plot", metavar="FILE.png", help="draw the experiment's figure")
    parser.set_defaults(func=run)


def _options(args: argparse.Namespace) -> dict:
    """The keyword arguments of the experiment function from the flags."""
    kwargs: dict = {"seed": args.seed}
    exp = args.experiment
    if args.sizes is not None:
        if exp not in ("bandwidth", "reduction"):
            raise ParameterError(f"--sizes is for bandwidth and reduction, not {exp}")
        sizes = [size_arg(s.strip()) for s in args.sizes.split(",") if s.strip()]
        if not sizes or any(s < 1 for s in sizes):
            raise ParameterError(f"--sizes needs positive sizes, got {args.sizes!r:.60}")
        kwargs["sizes"] = sorted(set(sizes))
    if args.size is not None and exp not in ("transition", "churn"):
        raise ParameterError(f"--size is for transition and churn, not {exp}")
    if args.times is not None and exp != "transition":
        raise ParameterError(f"--times is for transition, not {exp}")
    if args.runs is not None:
        if exp != "churn":
            raise ParameterError(f"--runs is for churn, not {exp}")
        if args.runs < 1:
            raise ParameterError(f"--runs needs at least 1, got {args.runs}")
        kwargs["runs"] = args.runs
    if args.size is not None:
        kwargs["nbytes"] = args.size
    if args.times is not None:
        try:
            leave, rejoin, end = (float(x) for x in args.times.split(","))
        except ValueError:
            raise ParameterError(
                f"--times needs LEAVE,REJOIN,END in seconds, got {args.times!r:.60}"
            ) from None
        kwargs.update(leave_s=leave, rejoin_s=rejoin, until_s=end)
    return kwargs


def _check_mode(args: argparse.Namespace) -> None:
    if args.measure and args.simulate:
        raise ParameterError("--measure and --simulate exclude each other")
    if not args.measure and (args.processes is not None or args.settle is not None):
        raise ParameterError("--processes and --settle need --measure")
    if args.settle is not None and args.settle < 0:
        raise ParameterError(f"--settle needs seconds >= 0, got {args.settle}")
    if args.experiment == "churn" and not args.measure:
        raise ParameterError(
            "churn runs real processes: add --measure (in simulation, the churn property "
            "tests check exactly-once delivery: tests/test_phoenix_churn.py)"
        )
    if args.experiment == "churn" and args.plot:
        raise ParameterError("churn has no figure: its result is the checker's counts")
    if args.crash and args.experiment != "transition":
        raise ParameterError(f"--crash is for transition, not {args.experiment}")
    if args.processes is not None and args.processes < 2:
        raise ParameterError(f"--processes needs at least 2, got {args.processes}")
    if args.measure and args.sizes is not None and args.experiment == "reduction":
        raise ParameterError("--measure reduction adds one integer per vnode: no --sizes")


def _experiment(args: argparse.Namespace) -> tuple[Any, str]:
    """The experiment function and its default grid for the mode."""
    if args.measure:
        from gridcoll.experiments.phoenix_measured import (
            DEFAULT_PROCESSES,
            MEASURE_EXPERIMENTS,
            default_grid,
        )

        n = args.processes or DEFAULT_PROCESSES[args.experiment]
        return MEASURE_EXPERIMENTS[args.experiment], default_grid(args.experiment, n)
    from gridcoll.experiments.phoenix_simulated import DEFAULT_GRIDS, EXPERIMENTS

    return EXPERIMENTS[args.experiment], DEFAULT_GRIDS[args.experiment]


def run(args: argparse.Namespace) -> int:
    """Run the experiment; print the table (or the JSON); draw the plot."""
    if args.plot and Path(args.plot).suffix.lower() not in (".png", ".svg", ".pdf"):
        raise ParameterError(f"--plot needs a .png, .svg or .pdf file name, got {args.plot!r}")
    _check_mode(args)
    kwargs = _options(args)
    func, default = _experiment(args)
    grid = load_grid_arg(args.grid or default)
    if args.processes is not None and grid.nranks != args.processes:
        raise ParameterError(f"--processes {args.processes} but {grid.name} has {grid.nranks}")
    started = time.monotonic()
    if args.crash:
        kwargs["crash"] = True
    if args.measure:
        if args.settle is not None:
            kwargs["settle_timeout_s"] = args.settle
        result = func(grid, progress=_stderr_progress(args.experiment, grid.name), **kwargs)
        print(file=sys.stderr)
    else:
        with progress_bar() as bar:
            task = bar.add_task(f"{args.experiment} on {grid.name}", total=None)

            def progress(done: int, total: int) -> None:
                bar.update(task, completed=done, total=total)

            result = func(grid, progress=progress, **kwargs)
        result["mode"] = "simulate"
    result["wall_s"] = time.monotonic() - started
    if args.plot:
        from gridcoll.plot.phoenix import plot_phoenix

        result["plot"] = str(plot_phoenix(result, args.plot))
    if args.json:
        print_json(result)
        return 0
    out = console()
    out.print(_table(result))
    out.print(_headline(result), soft_wrap=True)
    if args.plot:
        out.print(f"figure written to {args.plot}")
    return 0


_STAGES = ("starting processes", "forming the group", "settling", "measuring", "done")


def _stderr_progress(experiment: str, grid: str) -> Callable[[int, int], None]:
    """One progress line on stderr, rewritten in place (``--measure``)."""
    started = time.monotonic()

    def progress(done: int, total: int) -> None:
        stages = len(_STAGES) - 1  # per group formed: churn forms one per run
        runs = max(1, total // stages)
        stage = _STAGES[stages if done >= total else done % stages]
        run = f"run {done // stages + 1} of {runs}: " if runs > 1 and done < total else ""
        took = time.monotonic() - started
        print(f"\r{experiment} on {grid}: {run}{stage} ({took:.0f} s)   ", end="", file=sys.stderr)
        sys.stderr.flush()

    return progress


def _table(result: dict) -> Table:
    exp = result["experiment"]
    table = Table(title=f"seed 004, {exp}: {result['grid']} ({result['nprocs']} processes)")
    if exp == "latency":
        table.add_column("implementation")
        table.add_column("last arrival (ms)", justify="right")
        for name, ms in result["last_arrival_ms"].items():
            table.add_row(name, f"{ms:.3f}")
    elif exp in ("bandwidth", "reduction"):
        key = "bandwidth_MBps" if exp == "bandwidth" else "time_s"
        names = list(result["rows"][0][key])
        table.add_column("bytes", justify="right")
        for name in names:
            table.add_column(f"{name} ({'MB/s' if exp == 'bandwidth' else 's'})", justify="right")
        for row in result["rows"]:
            table.add_row(str(row["nbytes"]), *(f"{row[key][n]:.4g}" for n in names))
    elif exp == "churn":
        for col in ("run", "joins", "leaves", "broadcasts", "delivered", "lost", "duplicated"):
            table.add_column(col, justify="right")
        for row in result["runs"]:
            actions = [s["action"] for s in row["steps"]]
            table.add_row(
                str(row["run"]),
                str(actions.count("join")),
                str(actions.count("leave")),
                *(str(row[k]) for k in ("broadcasts", "delivered", "lost", "duplicated")),
            )
    else:
        table.add_column("start (s)", justify="right")
        table.add_column("completion (s)", justify="right")
        for b in result["broadcasts"]:
            done = "-" if b["time_s"] is None else f"{b['time_s']:.3f}"
            table.add_row(f"{b['start_s']:.3f}", done)
    return table


def _headline(result: dict) -> str:
    text = _headline_text(result)
    if result["experiment"] == "churn":
        text = f"measured with {result['nprocs']} processes; {text}"
    elif result.get("mode") == "measure":
        text = f"measured with {result['nprocs']} processes, baselines simulated; {text}"
    if result.get("crash"):

        def after(x: float | None) -> str:
            return f"{x:.1f} s after the kill" if x is not None else "never"

        how = "SIGKILLed" if result.get("mode") == "measure" else "crashed"
        seen = result.get("killed_detected_by_root")
        text += (
            f"; {result['killed']} {how}"
            + ("" if seen is None else f", {seen} detected by the root")
            + "; the broadcast under way completed "
            f"{after(result['in_flight_complete_s'])}, the next one "
            f"{after(result['complete_again_s'])} (goal: within the heartbeat "
            f"timeout + 1 s = {result['heartbeat_timeout_s'] + 1:g} s)"
        )
    return text


def _headline_text(result: dict) -> str:
    exp = result["experiment"]
    if exp == "churn":
        return (
            f"{result['nruns']} runs of {result['changes']} random joins and leaves, "
            f"{result['broadcasts']} broadcasts: delivered {result['delivered']}, lost "
            f"{result['lost']}, duplicated {result['duplicated']} (goal: 0 and 0), "
            f"incomplete {result['incomplete']}"
        )
    if exp in ("latency", "reduction"):
        return (
            f"ours / MagPIe-like: {result['ratio_to_magpie_like']:.3f} "
            "(goal <= 1.3; seed 004: about 2)"
        )
    if exp == "bandwidth":
        return f"ours / List at the largest size: {result['ratio_to_list']:.3f} (goal >= 0.95)"
    rec = ", ".join("never" if r is None else f"{r:.2f} s" for r in result["recovery_s"])
    if result["stable_s"] is None:
        return f"no stable time: {result['note']}"
    return (
        f"stable {result['stable_s']:.3f} s; recovery after leave, rejoin: {rec} (goal <= 2 s); "
        f"delivered {result['delivered']}, lost {result['lost']}, duplicated "
        f"{result['duplicated']}, incomplete {result['incomplete']}"
    )
