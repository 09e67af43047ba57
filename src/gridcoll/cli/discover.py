"""``gridcoll discover``: find the clusters of a grid and write a grid file.

``gridcoll discover --grid magpie:4,2 --out found.json`` starts one rank per rank of
the grid with its WAN emulated (the grid is only the *machine*: discovery is told
nothing about its clusters), measures rank-to-rank latency and bandwidth, groups the
ranks (:func:`gridcoll.measure.find_clusters`: the clearest gap; ``--method pools``:
seed 001's pools), measures the clusters' LAN and per-pair WAN links one pair at a
time, and writes the grid file every command accepts. ``--in MATRIX`` groups the ranks
of a rank-to-rank matrix file instead (``latency_s``/``bandwidth_Bps``, as
``--matrix-out`` writes), with no MPI.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from gridcoll.cli._common import (
    add_netns_argument,
    console,
    error_console,
    load_grid_arg,
    netns_arg,
    print_json,
)
from gridcoll.errors import MeasurementError, ParameterError
from gridcoll.network.gridfile import grid_from_dict, save_grid

__all__ = ["add_parser", "run"]


def _positive(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be > 0, got {text!r}")
    return value


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``discover`` subcommand."""
    p = subparsers.add_parser(
        "discover",
        help="find the clusters from measured latency/bandwidth; write a grid file",
        description=(
            "Measure rank-to-rank latency and bandwidth (on GRID's emulated WAN) or read "
            "them (--in), group the ranks into clusters with no configuration, and write "
            "a grid file with the measured LAN and WAN parameters. "
            "Example: gridcoll discover --grid das2:2 --out das2-found.json"
        ),
    )
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--grid", metavar="GRID", help="the machine to run on (for the emulation)")
    src.add_argument("--in", dest="matrix_in", metavar="MATRIX", help="a rank-to-rank matrix file")
    p.add_argument("--out", required=True, metavar="GRIDFILE", help="the grid file to write")
    p.add_argument("--matrix-out", metavar="FILE", help="also write the rank-to-rank matrices")
    p.add_argument(
        "--min-gap",
        type=_positive,
        default=8.0,
        help="smallest inter/intra separation taken as a cluster boundary (8)",
    )
    p.add_argument(
        "--no-refine",
        action="store_true",
        help="take LAN/WAN from the rank-to-rank medians (no second pass)",
    )
    p.add_argument("--name", default="discovered", help="the grid's name")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--timeout", type=_positive, default=60.0, metavar="S")
    p.add_argument("--no-emulation", action="store_true", help="do not emulate the WAN")
    p.add_argument("--mpiexec", default=None, metavar="PATH", help="mpiexec to use")
    add_netns_argument(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Discover; return 0 (errors raise)."""
    from gridcoll.measure.discover import find_clusters, grid_from_matrices
    from gridcoll.measure.matrix import LinkMatrices

    if args.matrix_in:
        matrices = LinkMatrices.load(args.matrix_in)
        clustering = find_clusters(matrices.latency, matrices.bandwidth, min_gap=args.min_gap)
        grid = grid_from_matrices(clustering, matrices, name=args.name)
        result = {
            "clusters": [list(c) for c in clustering.clusters],
            "metric": clustering.metric,
            "reason": clustering.reason,
            "source": args.matrix_in,
        }
        expected = None
    else:
        expected = load_grid_arg(args.grid)
        if expected.nranks < 2:
            raise ParameterError(f"grid {args.grid!r} has one rank: nothing to discover")
        result = _measure(args, expected)
        grid = grid_from_dict(result.pop("grid"))
        if args.matrix_out:
            Path(args.matrix_out).write_text(json.dumps(result["pairwise"], indent=2) + "\n")
    save_grid(grid, args.out)
    if expected is not None:
        found = sorted(tuple(m) for m in grid.members)
        result["matches_grid"] = found == sorted(tuple(m) for m in expected.members)
    result["out"] = args.out
    if args.json:
        print_json({k: v for k, v in result.items() if k not in ("pairwise", "matrices")})
    else:
        _print(result, grid)
    return 0


def _measure(args, machine) -> dict:
    from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    from gridcoll.measure import launch

    spec = {
        "mode": "discover",
        "min_gap": args.min_gap,
        "refine": not args.no_refine,
        "name": args.name,
        "timeout": args.timeout,
    }
    err = error_console()
    start = time.monotonic()
    with (
        launch.job(machine, emulate=not args.no_emulation, network=netns_arg(args, machine)) as job,
        Progress(
            SpinnerColumn(),
            TextColumn("{task.description}", markup=False),
            TimeElapsedColumn(),
            console=err,
            transient=True,
            disable=not err.is_terminal,
        ) as bar,
    ):
        bar.add_task(f"discovering the clusters of {machine.nranks} ranks", total=None)
        outcome = job.run(spec, mpiexec=args.mpiexec)
    if not outcome.ok:
        raise MeasurementError(f"discovery failed: {outcome.describe_failure()}")
    outcome.result["wall_s"] = time.monotonic() - start
    return outcome.result


def _print(result: dict, grid) -> None:
    from rich.table import Table

    from gridcoll.units import format_time

    out = console()
    table = Table(title=f"{len(grid.clusters)} clusters found", title_justify="left")
    for col in ("cluster", "ranks", "LAN L", "LAN bandwidth"):
        table.add_column(col, justify="right" if col != "ranks" else "left")
    for c, members in zip(grid.clusters, grid.members, strict=True):
        bw = c.lan.bandwidth
        table.add_row(
            c.name, ",".join(map(str, members)), format_time(c.lan.L), f"{bw / 1e6:.3g} MB/s"
        )
    out.print(table)
    out.print(f"why: {result['reason']}")
    if "matches_grid" in result:
        out.print(
            f"same clusters as the grid it ran on: {'yes' if result['matches_grid'] else 'NO'}"
        )
    if "wall_s" in result:
        out.print(f"wall time {result['wall_s']:.1f} s")
    out.print(f"written to {result['out']}")
