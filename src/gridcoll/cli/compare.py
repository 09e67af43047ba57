"""``gridcoll compare``: every named builder, planned and simulated, side by side.

For each message size, each algorithm is planned on its own (``tune.plan`` with
``algo=NAME``: its segment size tuned on its model), built, and replayed in the
event-driven simulator, which charges every shared NIC, gateway and wide-area link;
``auto`` is one more row (the planner's choice among all builders). The table gives,
per size, every algorithm's times and its ratio to the best simulated time:

``predicted``
    the builder's registered model: seed 000's per-edge ``T = (k-1) gamma + lam`` on
    its own tree, shared links included (:mod:`gridcoll.models.heterogeneous`);
``no contention``
    the same per-edge model of the same tree on the grid with its shared links removed:
    what a heuristic that sees only per-pair latency and bandwidth believes. The gap to
    ``simulated`` is seed 001's warning (sec. 2.1): trees that look good edge by edge
    can send many messages over one wide-area link. Shown for plain tree broadcasts
    (every rank receives from one parent, one segment size); ``-`` otherwise (and for
    the other collectives, which ``--op`` also compares);
``simulated``
    the simulator's completion time; ``/ best`` divides it by the size's best;
``plan``
    the wall time of planning that row (tree construction and segment-size search).

``--budget`` is the planning budget (nominal seconds, :func:`gridcoll.tune.plan`) that
lets the simulated-annealing builders run inside ``auto``; a named annealing row gets
the share ``auto`` gives its family (:func:`row_budget`), so it shows the same tree.
With ``--json``, one object whose ``results`` list holds ``algorithm``, ``size``, ``predicted_s``,
``simulated_s``, ``plan_time_s`` (and ``chosen``, ``params``, ``contention_free_s``,
``ratio_to_best``, ``bound_s``) per row.
"""

from __future__ import annotations

import argparse
import math
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from rich.table import Table

from gridcoll.algorithms import get_builder, list_builders
from gridcoll.algorithms.trees import Tree
from gridcoll.cli._common import (
    PARAMS_CAPTION,
    add_budget_argument,
    console,
    format_params,
    load_grid_arg,
    print_json,
    size_arg,
)
from gridcoll.errors import GridcollError, ParameterError, UnknownAlgorithm
from gridcoll.network.grid import Grid, Route
from gridcoll.schedule import OPERATIONS, Recv, Schedule, Send
from gridcoll.tune import DEFAULT_BUDGET_S
from gridcoll.units import format_size, format_time

__all__ = [
    "DEFAULT_ALGOS",
    "CompareRow",
    "add_parser",
    "compare_rows",
    "plot_compare",
    "row_budget",
    "run",
    "schedule_tree",
    "without_links",
]

DEFAULT_ALGOS = (
    "flat",
    "binomial",
    "magpie-original",
    "mpich-g2",
    "mpich-g2-segmented",
    "fef",
    "fef-segmented",
    "ecef",
    "ecef-segmented",
    "look-ahead",
    "look-ahead-segmented",
    "hlot",
    "hlot-segmented",
    "tps",
    "tps-segmented",
    "mateescu",
    "mateescu-segmented",
    "sa",
    "sa-segmented",
    "sa-clustered",
    "sa-clustered-segmented",
    "phoenix-latency",
    "phoenix-latency-segmented",
    "phoenix-bandwidth",
    "phoenix-bandwidth-segmented",
    "list",
)
"""The default builders and baselines; ``--algos all`` takes every registered one."""


@dataclass(frozen=True)
class CompareRow:
    """One algorithm at one size (times in seconds)."""

    grid: str
    algorithm: str
    """The requested name (``auto`` for the planner's pick)."""
    nbytes: int
    chosen: str
    params: dict[str, Any]
    predicted_s: float
    contention_free_s: float | None
    simulated_s: float
    plan_time_s: float
    bound_s: float
    ratio_to_best: float = field(default=math.nan)

    def to_json(self) -> dict[str, Any]:
        """The JSON object of the row (``size`` is ``nbytes``)."""
        out = asdict(self)
        out["size"] = out.pop("nbytes")
        for key in ("predicted_s", "contention_free_s", "ratio_to_best"):
            value = out[key]
            if value is not None and not math.isfinite(value):
                out[key] = None
        return out


def without_links(grid: Grid) -> Grid:
    """``grid`` with its shared links removed: every route keeps its end-to-end P-LogP
    parameters but occupies no shared resource (a per-pair view of the network)."""
    routes = {key: Route(r.plogp, ()) for key, r in grid.routes.items()}
    return Grid(f"{grid.name}-nolinks", grid.clusters, routes, {}, grid.placement)


def schedule_tree(schedule: Schedule) -> Tree | None:
    """The tree a plain tree broadcast sends down, or None.

    Plain: every rank but the root receives from exactly one peer, no control
    messages, each rank sends to its children in one fixed order.
    """
    parent: dict[int, int] = {}
    order: dict[int, list[int]] = {}
    for rank, program in enumerate(schedule.programs):
        peers = set()
        for op in program:
            if not op.segments:
                return None
            if isinstance(op, Recv):
                peers.add(op.peer)
            elif isinstance(op, Send) and op.peer not in order.setdefault(rank, []):
                order[rank].append(op.peer)
        if rank == schedule.root:
            if peers:
                return None
        elif len(peers) != 1:
            return None
        else:
            parent[rank] = peers.pop()
    for v, kids in order.items():
        if any(parent.get(c) != v for c in kids):
            return None
    return Tree(schedule.root, {v: tuple(k) for v, k in order.items() if k})


def _contention_free(schedule: Schedule, bare: Grid) -> float | None:
    from gridcoll.models.tree_model import tree_time

    if schedule.op != "bcast":  # the per-edge tree model is a broadcast's
        return None
    tree = schedule_tree(schedule)
    if tree is None or len({length for _, length in schedule.segments[:-1]}) > 1:
        return None
    return tree_time(bare, tree, schedule.nbytes, schedule.segment_size)


def row_budget(op: str, algo: str, budget_s: float | None) -> float | None:
    """The planning budget of one row: ``auto`` and the deterministic builders get
    ``budget_s``; an anytime builder (simulated annealing) gets the share ``auto`` gives
    its family (:data:`gridcoll.tune.select.ANYTIME_SHARE`, split evenly), so its row
    shows the very tree ``auto`` weighed (same evaluations, same seed: same tree)."""
    from gridcoll.tune.select import ANYTIME_SHARE

    if budget_s is None or algo == "auto" or not get_builder(op, algo).anytime:
        return budget_s
    families = {b.anytime for b in list_builders(op) if b.anytime}
    return ANYTIME_SHARE * budget_s / len(families)


def _row(
    grid: Grid, bare: Grid, spec: str, op: str, algo: str, nbytes: int, root: int, budget
) -> CompareRow:
    from gridcoll.simulate import simulate
    from gridcoll.tune import Call, PlanOptions, plan

    start = time.perf_counter()
    budget = row_budget(op, algo, budget)
    result = plan(grid, Call(op, nbytes, root), PlanOptions(algo=algo, budget_s=budget))
    elapsed = time.perf_counter() - start
    schedule = result.build()
    return CompareRow(
        grid=spec,
        algorithm=algo,
        nbytes=nbytes,
        chosen=result.algorithm,
        params=dict(result.params),
        predicted_s=result.predicted_s,
        contention_free_s=_contention_free(schedule, bare),
        simulated_s=simulate(schedule, grid).total_s,
        plan_time_s=elapsed,
        bound_s=result.bound_s,
    )


def compare_rows(
    grid: Grid,
    sizes: Sequence[int],
    algos: Sequence[str],
    *,
    root: int = 0,
    budget_s: float | None = DEFAULT_BUDGET_S,
    spec: str | None = None,
    op: str = "bcast",
) -> tuple[list[CompareRow], list[dict[str, Any]]]:
    """Plan, build and simulate every algorithm (and ``auto``) of ``op`` at every size.

    Returns the rows, each with its ratio to its size's best simulated time, and the
    (algorithm, size, reason) of the rows that could not be planned.
    """
    bare = without_links(grid)
    rows, skipped = [], []
    names = [a for a in algos if a != "auto"] + ["auto"]
    for nbytes in sizes:
        done = []
        for algo in names:
            try:
                done.append(_row(grid, bare, spec or grid.name, op, algo, nbytes, root, budget_s))
            except GridcollError as err:
                skipped.append({"algorithm": algo, "size": nbytes, "reason": str(err)})
        best = min((r.simulated_s for r in done), default=math.nan)
        rows += [replace(r, ratio_to_best=r.simulated_s / best if best > 0 else 1.0) for r in done]
    return rows, skipped


def plot_compare(rows: Sequence[CompareRow], path: str | Path, *, title: str = "") -> Path:
    """One panel per size: a bar per algorithm (simulated time, log scale, best at the
    top), a black tick at its predicted time and a red cross at its contention-free
    time, so the trees that overload a shared link stand out. Returns ``path``."""
    from matplotlib.figure import Figure

    sizes = sorted({r.nbytes for r in rows})
    most = max(sum(r.nbytes == n for r in rows) for n in sizes)
    fig = Figure(figsize=(4.8 * len(sizes), 1.2 + 0.24 * most), layout="constrained")
    axes = fig.subplots(1, len(sizes), squeeze=False)[0]
    for ax, nbytes in zip(axes, sizes, strict=True):
        panel = sorted((r for r in rows if r.nbytes == nbytes), key=lambda r: -r.simulated_s)
        ys = range(len(panel))
        labels = [r.algorithm if r.algorithm != "auto" else f"auto ({r.chosen})" for r in panel]
        colors = ["tab:orange" if r.algorithm == "auto" else "tab:blue" for r in panel]
        ax.barh(ys, [r.simulated_s for r in panel], color=colors, alpha=0.8, label="simulated")
        ax.scatter(
            [r.predicted_s for r in panel], ys, marker="|", s=120, color="black", label="predicted"
        )
        free = [(r.contention_free_s, y) for r, y in zip(panel, ys, strict=True)]
        free = [(x, y) for x, y in free if x is not None]
        if free:
            ax.scatter(*zip(*free, strict=True), marker="x", color="tab:red", label="no contention")
        ax.set_yticks(list(ys), labels, fontsize="small")
        ax.set_xscale("log")
        ax.set_xlabel("completion time, s")
        ax.set_title(format_size(nbytes))
        ax.grid(True, axis="x", which="both", alpha=0.3)
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncol=3, fontsize="small")
    if title:
        fig.suptitle(title)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    return path


# -- the command ---------------------------------------------------------------------------
def _sizes(values: Sequence[str]) -> list[int]:
    sizes = []
    for value in values:
        for part in value.split(","):
            if part.strip():
                try:
                    sizes.append(size_arg(part.strip()))
                except argparse.ArgumentTypeError as err:
                    raise ParameterError(str(err)) from None
    if not sizes:
        raise ParameterError("--sizes needs at least one size")
    return sizes


def _algos(text: str | None, op: str) -> list[str]:
    if text is None:
        return list(DEFAULT_ALGOS) if op == "bcast" else [b.name for b in list_builders(op)]
    if text.strip() == "all":
        return [b.name for b in list_builders(op)]
    names = [a.strip() for a in text.split(",") if a.strip()]
    if not names:
        raise ParameterError("--algos needs at least one algorithm name")
    for name in names:
        if name != "auto":
            get_builder(op, name)  # UnknownAlgorithm lists the choices
    return names


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``compare`` subcommand."""
    parser = subparsers.add_parser(
        "compare",
        help="plan and simulate many builders (and auto) at several sizes, side by side",
        description=(
            "Plan every named builder (its segment size tuned on its model), build it and "
            "simulate it on the grid; print predicted, contention-free and simulated "
            "times, the ratio to the best and the planning time. 'auto' is always a row."
        ),
    )
    parser.add_argument("--grid", required=True, metavar="GRID", help="a preset or a grid file")
    parser.add_argument(
        "--op", default="bcast", choices=OPERATIONS, help="the collective (default: bcast)"
    )
    parser.add_argument(
        "--sizes",
        nargs="+",
        required=True,
        metavar="SIZE",
        help="message sizes, space- or comma-separated: 1KB 64KB,1MiB",
    )
    parser.add_argument("--root", type=int, default=0, metavar="R", help="root rank (default 0)")
    parser.add_argument(
        "--algos",
        metavar="A,B,...",
        help="comma-separated builder names, or 'all' (default: the heterogeneous trees "
        "and their baselines)",
    )
    add_budget_argument(parser)
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--plot", metavar="FILE.png", help="draw simulated time against size")
    parser.set_defaults(func=run)


def _table(rows: list[CompareRow], spec: str, grid: Grid, nbytes: int, op: str) -> Table:
    table = Table(
        title=f"{op} of {format_size(nbytes)} on {spec} ({grid.nranks} ranks, "
        f"{grid.nclusters} clusters)",
        title_justify="left",
        caption=PARAMS_CAPTION + "; no contention: the same tree without shared links",
        caption_justify="left",
    )
    for header in ("algorithm", "parameters"):
        table.add_column(header)
    for header in ("predicted", "no contention", "simulated", "/ best", "plan"):
        table.add_column(header, justify="right")

    def fmt(x: float | None) -> str:
        return "-" if x is None or not math.isfinite(x) else format_time(x)

    for r in sorted(rows, key=lambda r: r.simulated_s):
        name = r.algorithm if r.algorithm != "auto" else f"auto -> {r.chosen}"
        params = {k: v for k, v in r.params.items() if k not in ("seed", "warm_start")}
        table.add_row(
            name,
            format_params(params),
            fmt(r.predicted_s),
            fmt(r.contention_free_s),
            fmt(r.simulated_s),
            f"{r.ratio_to_best:.2f}x",
            fmt(r.plan_time_s),
            style="bold" if r.algorithm == "auto" else None,
        )
    return table


def run(args: argparse.Namespace) -> int:
    """Compute every row; print the tables (or one JSON object); draw the plot."""
    if args.plot and Path(args.plot).suffix.lower() not in (".png", ".svg", ".pdf"):
        raise ParameterError(f"--plot needs a .png, .svg or .pdf file name, got {args.plot!r}")
    grid = load_grid_arg(args.grid)
    grid.check_rank(args.root, "root")
    if not list_builders(args.op):
        raise UnknownAlgorithm(f"no {args.op} algorithms are registered yet")
    sizes, algos = _sizes(args.sizes), _algos(args.algos, args.op)
    rows, skipped = compare_rows(
        grid, sizes, algos, root=args.root, budget_s=args.budget, spec=args.grid, op=args.op
    )
    if args.plot:
        plot_compare(rows, args.plot, title=f"{args.op} on {args.grid} ({grid.nranks} ranks)")
    if args.json:
        best = {}
        for r in rows:
            if r.algorithm != "auto" and (
                r.nbytes not in best or r.simulated_s < best[r.nbytes]["simulated_s"]
            ):
                best[r.nbytes] = {"algorithm": r.algorithm, "simulated_s": r.simulated_s}
        data = {
            "grid": args.grid,
            "op": args.op,
            "root": args.root,
            "budget_s": args.budget,
            "sizes": sizes,
            "results": [r.to_json() for r in rows],
            "best": [{"size": size, **b} for size, b in best.items()],
            "skipped": skipped,
        }
        if args.plot:
            data["plot"] = str(args.plot)
        print_json(data)
        return 0
    out = console()
    for nbytes in sizes:
        out.print(_table([r for r in rows if r.nbytes == nbytes], args.grid, grid, nbytes, args.op))
    for s in skipped:
        out.print(f"skipped {s['algorithm']} at {format_size(s['size'])}: {s['reason']}")
    if args.plot:
        out.print(f"plot written to {args.plot}")
    return 0
