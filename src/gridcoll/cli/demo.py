"""``gridcoll demo``: the main job - WAN-aware broadcasts against MPICH, by size.

For each grid and message size, each algorithm is planned (its parameters tuned on the
model), built, and replayed in the simulator; the table and the plot compare predicted
and simulated completion times with the physical bound and with MPICH's broadcast.

:func:`compute_row` makes one :class:`DemoRow` per (grid, algorithm, size). It takes an
optional ``measure(grid, schedule) -> seconds`` hook that fills the ``measured_s``
column (and speed-ups then use it); ``--measure`` passes :func:`mpi_measure`, which runs
each schedule for real with ``mpiexec`` on the emulated WAN
(:func:`gridcoll.runtime.launcher.measure_schedule`) and takes the median.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from gridcoll.algorithms import BUILDERS
from gridcoll.cli._common import (
    PARAMS_CAPTION,
    console,
    error_console,
    format_params,
    load_grid_arg,
    print_json,
    ratio,
)
from gridcoll.errors import ParameterError, UnknownAlgorithm
from gridcoll.network import Grid
from gridcoll.schedule import Schedule
from gridcoll.units import format_size, format_time, parse_size

__all__ = [
    "DEFAULT_GRIDS",
    "DEFAULT_SIZES",
    "DEMO_ALGORITHMS",
    "DemoRow",
    "Measure",
    "add_parser",
    "compute_row",
    "demo_rows",
    "mpi_measure",
    "run",
]

DEMO_ALGORITHMS = ("mpich", "magpie-original", "magpie-segmented", "multitree", "auto")
"""The algorithms the demo compares; ``auto`` is the planner's pick among all builders."""

DEFAULT_GRIDS = ("magpie:8,1", "magpie:4,2")
"""Seed 000's simulated WAN: 8 clusters of 1 rank, and 4 clusters of 2."""

DEFAULT_SIZES = (16 * 1024, 64 * 1024, 256 * 1024, 1024 * 1024)
"""16 KiB to 1 MiB in powers of 4."""

BASELINE = "mpich"
"""Speed-ups are against this algorithm."""

Measure = Callable[[Grid, Schedule], float]
"""Runs a schedule for real and returns its completion time in seconds."""


def mpi_measure(repeat: int = 3, timeout: float = 60.0) -> Measure:
    """A :data:`Measure` that runs the schedule over MPI on the emulated WAN ``repeat``
    times (every rank's bytes verified) and returns the median time.

    Raises :class:`gridcoll.runtime.launcher.LaunchError` (a GridcollError) when a run
    fails or is not verified.
    """

    def measure(grid: Grid, schedule: Schedule) -> float:
        from gridcoll.runtime.launcher import measure_schedule

        times = measure_schedule(grid, schedule, repeat=repeat, timeout=timeout)
        return statistics.median(times)

    return measure


@dataclass(frozen=True)
class DemoRow:
    """One algorithm at one message size on one grid (times in seconds)."""

    grid: str
    algorithm: str
    """The requested algorithm (``auto`` for the planner's pick)."""
    nbytes: int
    chosen: str
    """The builder that ran: ``algorithm`` itself, or the one ``auto`` chose."""
    params: dict[str, Any]
    predicted_s: float
    simulated_s: float
    bound_s: float
    measured_s: float | None = None
    speedup: float | None = field(default=None, compare=False)
    """Baseline's time / this time: measured when both are, else simulated."""

    @property
    def time_s(self) -> float:
        """The best evidence of this row's time: measured if available, else simulated."""
        return self.measured_s if self.measured_s is not None else self.simulated_s


def compute_row(
    grid: Grid,
    algorithm: str,
    nbytes: int,
    *,
    root: int = 0,
    cache: Any = None,
    measure: Measure | None = None,
    spec: str | None = None,
) -> DemoRow:
    """Plan ``algorithm`` for one broadcast, simulate it (and measure it, if asked)."""
    from gridcoll.simulate import simulate
    from gridcoll.tune import plan

    result = plan(grid, "bcast", nbytes, root, algo=algorithm, cache=cache)
    schedule = result.build(grid)
    simulated = simulate(schedule, grid).total_s
    return DemoRow(
        grid=spec or grid.name,
        algorithm=algorithm,
        nbytes=nbytes,
        chosen=result.algorithm,
        params=dict(result.params),
        predicted_s=result.predicted_s,
        simulated_s=simulated,
        bound_s=result.bound_s,
        measured_s=None if measure is None else measure(grid, schedule),
    )


def demo_rows(
    grids: Sequence[str],
    sizes: Sequence[int],
    algorithms: Sequence[str],
    *,
    root: int = 0,
    measure: Measure | None = None,
    on_row: Callable[[DemoRow], None] | None = None,
) -> list[DemoRow]:
    """Every (grid, size, algorithm) row, with speed-ups against :data:`BASELINE`."""
    from gridcoll.tune import PlanCache

    cache = PlanCache()
    rows = []
    for spec in grids:
        grid = load_grid_arg(spec)
        grid.check_rank(root, "root")
        for nbytes in sizes:
            for algorithm in algorithms:
                row = compute_row(
                    grid, algorithm, nbytes, root=root, cache=cache, measure=measure, spec=spec
                )
                rows.append(row)
                if on_row is not None:
                    on_row(row)
    return _with_speedups(rows)


def _with_speedups(rows: list[DemoRow]) -> list[DemoRow]:
    base = {(r.grid, r.nbytes): r for r in rows if r.algorithm == BASELINE}
    out = []
    for row in rows:
        ref = base.get((row.grid, row.nbytes))
        speedup = None
        if ref is not None and row.time_s > 0:
            both_measured = ref.measured_s is not None and row.measured_s is not None
            ref_s = ref.time_s if both_measured else ref.simulated_s
            mine = row.time_s if both_measured else row.simulated_s
            speedup = ref_s / mine
        out.append(dataclasses.replace(row, speedup=speedup))
    return out


def _sizes_arg(text: str) -> tuple[int, ...]:
    sizes = []
    for part in text.split(","):
        try:
            value = parse_size(part)
        except ParameterError as err:
            raise argparse.ArgumentTypeError(str(err)) from err
        if value <= 0:
            raise argparse.ArgumentTypeError(f"message size must be > 0 bytes, got {part!r}")
        sizes.append(value)
    return tuple(sizes)


def _names_arg(text: str) -> tuple[str, ...]:
    return tuple(name.strip() for name in text.split(",") if name.strip())


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``demo`` subcommand."""
    parser = subparsers.add_parser(
        "demo",
        help="compare WAN-aware broadcasts with MPICH's over message sizes (table + plot)",
        description=(
            "Plan and simulate broadcasts of several sizes with MPICH's algorithm, "
            "MagPIe's original and segmented two-layer broadcasts, the multi-tree "
            "broadcast and the automatic choice; print predicted and simulated times, "
            "the physical bound and the speed-up over MPICH, and plot time against size."
        ),
    )
    parser.add_argument(
        "--grid",
        action="append",
        metavar="GRID",
        help=f"a preset or grid file; repeat for several (default: {', '.join(DEFAULT_GRIDS)})",
    )
    parser.add_argument(
        "--sizes",
        type=_sizes_arg,
        default=DEFAULT_SIZES,
        metavar="S1,S2,...",
        help="message sizes (default: 16KiB,64KiB,256KiB,1MiB)",
    )
    parser.add_argument(
        "--algorithms",
        type=_names_arg,
        default=None,
        metavar="A1,A2,...",
        help=f"broadcast algorithms to compare (default: {','.join(DEMO_ALGORITHMS)})",
    )
    parser.add_argument("--root", type=int, default=0, metavar="R", help="root rank (default 0)")
    parser.add_argument(
        "--out",
        default="gridcoll-demo",
        metavar="DIR",
        help="where to write sizes.png and demo.json (default: ./gridcoll-demo/)",
    )
    parser.add_argument(
        "--measure",
        action="store_true",
        help="also run every schedule for real over MPI on the emulated WAN (slow: one "
        "mpiexec per row) and add a measured column",
    )
    parser.add_argument(
        "--repeat",
        type=int,
        default=3,
        metavar="K",
        help="with --measure: runs per row, the median is reported (default 3)",
    )
    parser.add_argument("--json", action="store_true", help="print the rows as one JSON object")
    parser.set_defaults(func=run)


def _algorithms(requested: tuple[str, ...] | None) -> tuple[str, ...]:
    """The algorithms to run: all requested must exist; defaults skip missing builders."""
    available = {name for op, name in BUILDERS if op == "bcast"}
    if requested is not None:
        for name in requested:
            if name != "auto" and name not in available:
                choices = ", ".join(sorted(available | {"auto"}))
                raise UnknownAlgorithm(f"unknown bcast algorithm {name!r}; choose from {choices}")
        return requested
    chosen = tuple(a for a in DEMO_ALGORITHMS if a == "auto" or a in available)
    missing = [a for a in DEMO_ALGORITHMS if a not in chosen]
    if missing:
        error_console().print(
            f"note: not yet available, left out: {', '.join(missing)}", soft_wrap=True
        )
    return chosen


def run(args: argparse.Namespace) -> int:
    """Compute every row with a progress bar, print the tables, write the plot and JSON."""
    grids = tuple(args.grid or DEFAULT_GRIDS)
    for spec in grids:  # fail on a bad grid or root before any work
        load_grid_arg(spec).check_rank(args.root, "root")
    algorithms = _algorithms(args.algorithms)
    if args.repeat < 1:
        raise ParameterError(f"--repeat must be >= 1, got {args.repeat!r}")
    measure = mpi_measure(args.repeat) if args.measure else None
    total = len(grids) * len(args.sizes) * len(algorithms)
    progress = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=error_console(),
        transient=True,
    )
    with progress:
        task = progress.add_task("planning and simulating", total=total)

        def advance(row: DemoRow) -> None:
            progress.update(
                task,
                advance=1,
                description=f"{row.grid} {format_size(row.nbytes)} {row.algorithm}",
            )

        rows = demo_rows(
            grids, args.sizes, algorithms, root=args.root, measure=measure, on_row=advance
        )

    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    data = {
        "grids": list(grids),
        "sizes": list(args.sizes),
        "algorithms": list(algorithms),
        "root": args.root,
        "measured": measure is not None,
        "rows": [_row_json(r) for r in rows],
    }
    (out_dir / "demo.json").write_text(json.dumps(data, indent=2) + "\n")
    from gridcoll.plot.sizes import plot_sizes

    plots = [
        plot_sizes(
            rows, out_dir / "sizes.png", title="Broadcast completion time (simulated) vs size"
        )
    ]
    if measure is not None:
        plots.append(
            plot_sizes(
                rows,
                out_dir / "sizes-measured.png",
                value="measured_s",
                title="Broadcast completion time (measured, MPI on the emulated WAN) vs size",
            )
        )
    if args.json:
        print_json(data | {"plots": [str(p) for p in plots], "json": str(out_dir / "demo.json")})
        return 0
    out = console()
    for spec in grids:
        out.print(_table(spec, [r for r in rows if r.grid == spec]))
        for line in _headlines(spec, rows):
            out.print(line)
        out.print()
    out.print(f"wrote {', '.join(str(p) for p in plots)} and {out_dir / 'demo.json'}")
    return 0


def _row_json(row: DemoRow) -> dict[str, Any]:
    data = dataclasses.asdict(row)
    for key, value in data.items():
        if isinstance(value, float) and not math.isfinite(value):
            data[key] = None
    return data


def _table(spec: str, rows: list[DemoRow]) -> Table:
    measured = any(r.measured_s is not None for r in rows)
    nranks = load_grid_arg(spec).nranks
    table = Table(
        title=f"broadcast on {spec} ({nranks} ranks)",
        title_justify="left",
        caption=PARAMS_CAPTION,
        caption_justify="left",
    )
    for name, justify in [
        ("size", "right"),
        ("algorithm", "left"),
        ("parameters", "left"),
        ("predicted", "right"),
        ("simulated", "right"),
        *([("measured", "right")] if measured else []),
        ("bound", "right"),
        ("/ bound", "right"),
        (f"vs {BASELINE}", "right"),
    ]:
        table.add_column(name, justify=justify)  # type: ignore[arg-type]
    previous = None
    for r in rows:
        name = r.algorithm if r.algorithm == r.chosen else f"{r.algorithm}: {r.chosen}"
        cells = [
            format_size(r.nbytes) if r.nbytes != previous else "",
            name,
            format_params(r.params),
            format_time(r.predicted_s),
            format_time(r.simulated_s),
            *([format_time(r.measured_s) if r.measured_s is not None else "-"] if measured else []),
            format_time(r.bound_s),
            ratio(r.time_s, r.bound_s),
            f"{r.speedup:.2f}x" if r.speedup is not None else "-",
        ]
        table.add_row(*cells, end_section=False)
        previous = r.nbytes
    return table


def _headlines(spec: str, rows: list[DemoRow]) -> list[str]:
    """One line per grid: the automatic choice at the largest size."""
    mine = [r for r in rows if r.grid == spec and r.algorithm == "auto"]
    if not mine:
        return []
    best = max(mine, key=lambda r: r.nbytes)
    speed = f", {best.speedup:.1f}x faster than {BASELINE}" if best.speedup else ""
    if best.measured_s is not None:
        speed += f"; measured {format_time(best.measured_s)}"
    return [
        f"{spec}, {format_size(best.nbytes)}: auto picks {best.chosen}, simulated "
        f"{format_time(best.simulated_s)} = {ratio(best.simulated_s, best.bound_s)} "
        f"the bound {format_time(best.bound_s)}{speed}"
    ]
