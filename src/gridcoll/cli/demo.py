"""``gridcoll demo``: the main job - real broadcasts and allreduces over an emulated WAN,
against MPICH.

For each collective (``--ops``: the broadcast and the allreduce), grid and message
size, each algorithm is planned (its parameters tuned on the model), built, replayed in
the simulator, and run for real: one ``mpiexec`` per grid and collective starts one
process per grid rank with the WAN emulated (every cross-cluster message is held for
the link's latency and serialised at its bandwidth), runs every schedule ``--repeat``
times with every rank's bytes verified, and reports the median. The broadcasts run as
schedules; the allreduces through :class:`gridcoll.Comm` (``Allreduce``, each rank
planning the same algorithm and parameters). The table puts measured, predicted
(model), simulated and the physical bound side by side with the speed-up over MPICH's
algorithm; the plots (one per collective) draw measured completion time against
message size (solid), the simulation (dotted) and the bound (dashed).

Planning and simulation use the effective grid: the grid plus the runtime's
per-message host overhead (:mod:`gridcoll.runtime.host`; ``--host-overhead``), so that
segments are not cut finer than this Python runtime can push. ``--no-measure`` (or a
machine without ``mpiexec``/mpi4py) only plans and simulates, for the grid as described
(no host overhead unless ``--host-overhead`` is given): seed 000's figures.

:func:`compute_row` makes one :class:`DemoRow` per (grid, algorithm, size) and takes an
optional ``measure(grid, schedule) -> seconds`` hook; :func:`demo_rows` plans every row
and measures a grid's rows in one launch (:func:`gridcoll.runtime.worker.measure_schedules`).
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import json
import math
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich import box
from rich.table import Table

from gridcoll.algorithms import BUILDERS
from gridcoll.cli._common import (
    PARAMS_CAPTION,
    console,
    error_console,
    format_params,
    load_grid_arg,
    print_json,
    progress_bar,
    ratio,
)
from gridcoll.cli.run import add_host_overhead_argument
from gridcoll.errors import GridcollError, ParameterError, UnknownAlgorithm
from gridcoll.network import Grid
from gridcoll.runtime.host import describe, external_load, resolve_host_overhead
from gridcoll.schedule import Schedule
from gridcoll.units import format_size, format_time, parse_size

__all__ = [
    "DEFAULT_GRIDS",
    "DEFAULT_SIZES",
    "DEMO_ALGORITHMS",
    "DEMO_OPS",
    "OP_ALGORITHMS",
    "DemoRow",
    "Measure",
    "add_parser",
    "compute_row",
    "demo_rows",
    "mpi_available",
    "mpi_measure",
    "run",
]

DEMO_ALGORITHMS = ("mpich", "magpie-original", "magpie-segmented", "auto")
"""The broadcast algorithms the demo compares; ``auto`` is the planner's pick among all
builders."""

DEMO_OPS = ("bcast", "allreduce")
"""The collectives the demo runs by default."""

OP_ALGORITHMS = {"allreduce": ("mpich", "two-level", "auto")}
"""The algorithms compared for the other collectives: MPICH's, the two-level
WAN-aware one (seed 000's), and the planner's pick (the packed trees, where they win)."""

DEFAULT_GRIDS = ("magpie:8,1", "magpie:4,2")
"""Seed 000's simulated WAN: 8 clusters of 1 rank, and 4 clusters of 2."""

DEFAULT_SIZES = (16 * 1024, 64 * 1024, 256 * 1024, 1024 * 1024)
"""16 KiB to 1 MiB in powers of 4."""

BASELINE = "mpich"
"""Speed-ups are against this algorithm."""

Measure = Callable[[Grid, Schedule], float]
"""Runs a schedule for real and returns its completion time in seconds."""


def mpi_measure(repeat: int = 3, timeout: float = 60.0) -> Measure:
    """A :data:`Measure` that runs one schedule over MPI on the emulated WAN ``repeat``
    times (every rank's bytes verified) and returns the median time.

    Raises :class:`gridcoll.errors.LaunchError` (a GridcollError) when a run
    fails or is not verified.
    """

    def measure(grid: Grid, schedule: Schedule) -> float:
        from gridcoll.runtime.worker import measure_schedule

        return statistics.median(measure_schedule(grid, schedule, repeat=repeat, timeout=timeout))

    return measure


def mpi_available() -> str | None:
    """None if real runs are possible here, else why not (one line)."""
    if importlib.util.find_spec("mpi4py") is None:
        return "mpi4py is not installed (pip install mpi4py mpich)"
    from gridcoll.errors import LaunchError
    from gridcoll.runtime.processes import default_mpiexec

    try:
        default_mpiexec()
    except LaunchError as err:
        return str(err)
    return None


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
    host_overhead_s: float = 0.0
    """The per-message host overhead the row was planned and simulated with."""
    measured_all_s: tuple[float, ...] = ()
    op: str = "bcast"

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
    host_overhead: float = 0.0,
    op: str = "bcast",
) -> DemoRow:
    """Plan ``algorithm`` for one call of ``op``, simulate it (and measure it, if asked).

    Planning and simulation are on ``grid.with_host_overhead(host_overhead)``; the bound
    is ``grid``'s.
    """
    row, schedule = _plan_row(grid, algorithm, nbytes, root, cache, spec, host_overhead, op)
    if measure is None:
        return row
    return dataclasses.replace(row, measured_s=measure(grid, schedule))


def _plan_row(
    grid: Grid,
    algorithm: str,
    nbytes: int,
    root: int,
    cache: Any,
    spec: str | None,
    host_overhead: float,
    op: str = "bcast",
) -> tuple[DemoRow, Schedule]:
    from gridcoll.tune import DEFAULT_BUDGET_S, Call, PlanOptions, plan

    result = plan(
        grid,
        Call(op, nbytes, root if op == "bcast" else 0),
        PlanOptions(
            algo=algorithm, budget_s=DEFAULT_BUDGET_S, host_overhead=host_overhead, check=True
        ),
        cache=cache,
    )
    schedule = result.build()
    row = DemoRow(
        grid=spec or grid.name,
        algorithm=algorithm,
        nbytes=nbytes,
        chosen=result.algorithm,
        params=dict(result.params),
        predicted_s=result.predicted_s,
        simulated_s=result.simulated_s,
        bound_s=result.bound_s,
        host_overhead_s=host_overhead,
        op=op,
    )
    return row, schedule


def demo_rows(
    grids: Sequence[str],
    sizes: Sequence[int],
    algorithms: Sequence[str],
    *,
    root: int = 0,
    measure: Measure | None = None,
    on_row: Callable[[DemoRow], None] | None = None,
    real: bool = False,
    repeat: int = 3,
    host_overhead: float | None = None,
    on_run: Callable[[str, int], None] | None = None,
    ops: Sequence[str] = ("bcast",),
) -> list[DemoRow]:
    """Every (grid, collective, size, algorithm) row, with speed-ups against
    :data:`BASELINE`; ``algorithms`` are the broadcast's, :data:`OP_ALGORITHMS` the
    others'.

    With ``real``, each grid's schedules run over MPI in one launch (``repeat`` times
    each; ``on_run(grid, n)`` reports the runs done) and rows are planned with the
    runtime's host overhead (``host_overhead``, else the environment's or the
    calibrated default); otherwise with ``host_overhead`` or 0. ``measure`` is the
    older per-row hook (one launch per row).
    """
    from gridcoll.tune import PlanCache

    cache = PlanCache()
    rows = []
    load = external_load() if real else 0.0  # before any of our ranks run
    for spec in grids:
        grid = load_grid_arg(spec)
        grid.check_rank(root, "root")
        overhead = _overhead_for(grid, real, host_overhead, load)
        for op in ops:
            planned = []
            for nbytes in sizes:
                for algorithm in algorithms if op == "bcast" else OP_ALGORITHMS[op]:
                    row, schedule = _plan_row(
                        grid, algorithm, nbytes, root, cache, spec, overhead, op
                    )
                    if measure is not None:
                        row = dataclasses.replace(row, measured_s=measure(grid, schedule))
                    planned.append((row, schedule))
                    if on_row is not None:
                        on_row(row)
            if real:
                planned = _measure_grid(grid, spec, planned, repeat, on_run)
            rows += [row for row, _ in planned]
    return _with_speedups(rows)


def _overhead_for(grid: Grid, real: bool, explicit: float | None, load: float) -> float:
    """The runtime's host overhead for real runs (:func:`resolve_host_overhead`); the
    grid as described (``explicit`` or 0) when only planning and simulating."""
    if not real:
        return explicit or 0.0
    return resolve_host_overhead(
        explicit, grid.nranks, emulated=not grid.is_single_cluster, load=load
    )


def _measure_grid(grid, spec, planned, repeat, on_run):
    """Run every planned row of one grid and collective in one launch; fill the measured
    times. Broadcasts run their schedules; the other collectives run through
    :class:`gridcoll.Comm`, every rank planning the row's algorithm and parameters."""
    from gridcoll.runtime.worker import measure_calls, measure_schedules
    from gridcoll.tune import Call, PlanOptions

    longest = max(row.simulated_s for row, _ in planned)
    total = sum(row.simulated_s for row, _ in planned)
    timeout = max(30.0, 10.0 * longest)
    wall = 60.0 + 4 * grid.nranks + repeat * (5.0 * total + 2.0 * len(planned))
    progress = None if on_run is None else (lambda n: on_run(spec, n))
    op = planned[0][0].op
    if op == "bcast":
        schedules = [schedule for _, schedule in planned]
        times = measure_schedules(
            grid, schedules, repeat=repeat, timeout=timeout, wall_timeout=wall,
            on_progress=progress,
        )  # fmt: skip
    else:
        calls = [
            (
                Call(op, row.nbytes),
                PlanOptions(
                    algo=row.chosen,
                    params={k: v for k, v in row.params.items() if k != "commutative"},
                    host_overhead=row.host_overhead_s,
                ),
            )
            for row, _ in planned
        ]
        found = measure_calls(
            grid, calls, repeat=repeat, timeout=timeout, wall_timeout=wall, on_progress=progress
        )
        times = [case["measured_all_s"] for case in found]
    return [
        (
            dataclasses.replace(
                row, measured_s=statistics.median(runs), measured_all_s=tuple(runs)
            ),
            schedule,
        )
        for (row, schedule), runs in zip(planned, times, strict=True)
    ]


def _with_speedups(rows: list[DemoRow]) -> list[DemoRow]:
    base = {(r.grid, r.op, r.nbytes): r for r in rows if r.algorithm == BASELINE}
    out = []
    for row in rows:
        ref = base.get((row.grid, row.op, row.nbytes))
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


def _ops_arg(text: str) -> tuple[str, ...]:
    ops = _names_arg(text)
    known = ("bcast", *OP_ALGORITHMS)
    for op in ops:
        if op not in known:
            raise argparse.ArgumentTypeError(f"unknown collective {op!r}; choose from {known}")
    if not ops:
        raise argparse.ArgumentTypeError("--ops needs at least one collective")
    return ops


def _repeat_arg(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"--repeat must be >= 1, got {text!r}")
    return value


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``demo`` subcommand."""
    parser = subparsers.add_parser(
        "demo",
        help="run WAN-aware broadcasts and allreduces and MPICH's for real on an emulated "
        "WAN (table + plot)",
        description=(
            "Run broadcasts and allreduces of several sizes for real over MPI on seed "
            "000's emulated WAN with MPICH's algorithm, the WAN-aware ones (MagPIe's "
            "original and segmented two-layer broadcasts, the two-level allreduce) and "
            "the automatic choice; print measured, predicted and simulated times, the "
            "physical bound and the speed-up over MPICH, and plot time against size. "
            "--no-measure only plans and simulates."
        ),
    )
    parser.add_argument(
        "--ops",
        type=_ops_arg,
        default=DEMO_OPS,
        metavar="OP1,OP2",
        help=f"collectives to run (default: {','.join(DEMO_OPS)}; choose from "
        f"{', '.join(('bcast', *OP_ALGORITHMS))})",
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
        "--no-measure",
        dest="measure",
        action="store_false",
        help="only plan and simulate (fast; no MPI): the grid as described, seed 000's figures",
    )
    parser.add_argument("--measure", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument(
        "--repeat",
        type=_repeat_arg,
        default=3,
        metavar="K",
        help="runs of every broadcast; the median is reported (default 3)",
    )
    add_host_overhead_argument(parser)
    parser.add_argument("--json", action="store_true", help="print the rows as one JSON object")
    parser.set_defaults(func=run, measure=True)


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
    """Plan, simulate and run every row with a progress bar; print the tables, write the
    plot and JSON. 0 on success, 1 if a measurement failed (the simulation is shown)."""
    started = time.perf_counter()
    grids = tuple(args.grid or DEFAULT_GRIDS)
    for spec in grids:  # fail on a bad grid or root before any work
        load_grid_arg(spec).check_rank(args.root, "root")
    algorithms = _algorithms(args.algorithms)
    real = bool(args.measure)
    if real:
        why = mpi_available()
        if why is not None:
            error_console().print(
                f"note: no MPI here ({why}); showing planning and simulation only, as "
                "with --no-measure",
                soft_wrap=True,
            )
            real = False
    rows, failure = _compute(args, grids, algorithms, real)
    measured = real and failure is None
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    data = {
        "grids": list(grids),
        "sizes": list(args.sizes),
        "ops": list(args.ops),
        "algorithms": list(algorithms),
        "root": args.root,
        "measured": measured,
        "repeat": args.repeat if measured else None,
        "host_overhead_s": {spec: _grid_overhead(rows, spec) for spec in grids},
        "rows": [_row_json(r) for r in rows],
    }
    if failure:
        data["error"] = failure
    plots = [_plot(rows, op, out_dir, measured) for op in args.ops]
    data["wall_s"] = time.perf_counter() - started
    (out_dir / "demo.json").write_text(json.dumps(data, indent=2) + "\n")
    if args.json:
        print_json(data | {"plots": [str(p) for p in plots], "json": str(out_dir / "demo.json")})
        return 1 if failure else 0
    out = console()
    for op in args.ops:
        for spec in grids:
            mine = [r for r in rows if r.grid == spec and r.op == op]
            out.print(_table(spec, op, mine))
            for line in _headlines(spec, mine):
                out.print(line)
            out.print()
    if failure:
        error_console().print(f"gridcoll demo: measurement failed: {failure}", soft_wrap=True)
    wrote = ", ".join(str(p) for p in plots)
    out.print(f"wrote {wrote} and {out_dir / 'demo.json'} ({format_time(data['wall_s'])} in all)")
    return 1 if failure else 0


def _plot(rows: list[DemoRow], op: str, out_dir: Path, measured: bool) -> Path:
    """One collective's plot: ``sizes.png`` for the broadcast, ``sizes-OP.png`` else."""
    from gridcoll.plot.sizes import plot_sizes

    name = {"bcast": "Broadcast", "allreduce": "Allreduce"}.get(op, op)
    title = (
        f"{name} time: measured over MPI, WAN emulated (solid), simulated (dotted), bound (dashed)"
        if measured
        else f"{name} time: simulated (solid), bound (dashed)"
    )
    return plot_sizes(
        [r for r in rows if r.op == op],
        out_dir / ("sizes.png" if op == "bcast" else f"sizes-{op}.png"),
        value="measured_s" if measured else "simulated_s",
        reference="simulated_s" if measured else None,
        title=title,
    )


def _compute(args, grids, algorithms, real) -> tuple[list[DemoRow], str | None]:
    """The rows, with a progress bar on stderr; on a failed launch, simulated rows and
    the reason."""
    per_size = sum(len(algorithms if op == "bcast" else OP_ALGORITHMS[op]) for op in args.ops)
    nrows = len(args.sizes) * per_size
    progress = progress_bar()
    with progress:
        plan_task = progress.add_task("planning and simulating", total=len(grids) * nrows)
        run_tasks = {}
        if real:
            for spec in grids:
                run_tasks[spec] = progress.add_task(
                    f"running on {spec} (MPI, emulated WAN)", total=nrows * args.repeat
                )

        def planned(row: DemoRow) -> None:
            progress.update(
                plan_task,
                advance=1,
                description=f"planning {row.grid} {row.op} {format_size(row.nbytes)} "
                f"{row.algorithm}",
            )

        def ran(spec: str, n: int) -> None:
            progress.update(run_tasks[spec], completed=n)

        kwargs = dict(
            root=args.root,
            on_row=planned,
            repeat=args.repeat,
            host_overhead=args.host_overhead,
            on_run=ran,
            ops=args.ops,
        )
        try:
            return demo_rows(grids, args.sizes, algorithms, real=real, **kwargs), None
        except GridcollError as err:
            if not real:
                raise
            failure = " ".join(str(err).split())
    progress.console.print("note: showing the simulation only", soft_wrap=True)
    rows = demo_rows(grids, args.sizes, algorithms, real=False, **kwargs)
    return rows, failure


def _grid_overhead(rows: list[DemoRow], spec: str) -> float | None:
    return next((r.host_overhead_s for r in rows if r.grid == spec), None)


def _row_json(row: DemoRow) -> dict[str, Any]:
    data = dataclasses.asdict(row)
    data["measured_all_s"] = list(row.measured_all_s)
    for key, value in data.items():
        if isinstance(value, float) and not math.isfinite(value):
            data[key] = None
    return data


def _table(spec: str, op: str, rows: list[DemoRow]) -> Table:
    measured = any(r.measured_s is not None for r in rows)
    nranks = load_grid_arg(spec).nranks
    overhead = rows[0].host_overhead_s if rows else 0.0
    how = (
        "measured: median over MPI, WAN emulated; "
        if measured
        else "simulated only (--no-measure); "
    )
    table = Table(
        title=f"{'broadcast' if op == 'bcast' else op} on {spec} ({nranks} ranks)",
        title_justify="left",
        box=box.SIMPLE_HEAD,
        pad_edge=False,
        padding=(0, 0, 0, 0),
        caption=(
            f"{how}predicted and simulated with a host overhead of {describe(overhead)}\n"
            f"{PARAMS_CAPTION}"
        ),
        caption_justify="left",
    )
    for name, justify in [
        ("size", "right"),
        ("algorithm", "left"),
        ("parameters", "left"),
        *([("measured", "right")] if measured else []),
        ("predicted", "right"),
        ("simulated", "right"),
        *([("meas/sim", "right")] if measured else []),
        ("bound", "right"),
        ("/ bound", "right"),
        (f"vs {BASELINE}", "right"),
    ]:
        table.add_column(name, justify=justify, no_wrap=justify == "right")  # type: ignore[arg-type]
    previous = None
    for r in rows:
        name = r.algorithm if r.algorithm == r.chosen else f"{r.algorithm}: {r.chosen}"
        cells = [
            format_size(r.nbytes) if r.nbytes != previous else "",
            name,
            format_params(r.params),
            *([_time_or_dash(r.measured_s)] if measured else []),
            format_time(r.predicted_s),
            format_time(r.simulated_s),
            *([_meas_over_sim(r)] if measured else []),
            format_time(r.bound_s),
            ratio(r.time_s, r.bound_s),
            f"{r.speedup:.2f}x" if r.speedup is not None else "-",
        ]
        table.add_row(*cells, end_section=r is not rows[-1] and r.algorithm == "auto")
        previous = r.nbytes
    return table


def _time_or_dash(seconds: float | None) -> str:
    return format_time(seconds) if seconds is not None else "-"


def _meas_over_sim(row: DemoRow) -> str:
    if row.measured_s is None or row.simulated_s <= 0:
        return "-"
    return f"{row.measured_s / row.simulated_s:.2f}"


def _headlines(spec: str, rows: list[DemoRow]) -> list[str]:
    """One line per grid and collective: the automatic choice at the largest size."""
    mine = [r for r in rows if r.algorithm == "auto"]
    if not mine:
        return []
    best = max(mine, key=lambda r: r.nbytes)
    kind = "measured" if best.measured_s is not None else "simulated"
    speed = f", {best.speedup:.1f}x faster than {BASELINE}" if best.speedup else ""
    return [
        f"{spec} {best.op}, {format_size(best.nbytes)}: auto picks {best.chosen}, {kind} "
        f"{format_time(best.time_s)} = {ratio(best.time_s, best.bound_s)} "
        f"the bound {format_time(best.bound_s)}{speed}"
    ]
