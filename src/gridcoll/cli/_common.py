"""Shared plumbing of the subcommands: call arguments, planning, output.

The subcommands ``plan``, ``simulate`` and ``demo`` describe one collective call the
same way (grid, op, size, root, algorithm, datatype size); this module parses those
arguments into checked values, plans the call with :func:`gridcoll.tune.plan`, and
prints the result as a rich table or as one JSON object.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from gridcoll.algorithms import get_builder, list_builders
from gridcoll.errors import GridcollError, GridError, ParameterError, UnknownAlgorithm
from gridcoll.limits import MAX_MESSAGE_BYTES
from gridcoll.network import Grid, get_grid
from gridcoll.schedule import OPERATIONS, split_segments
from gridcoll.tune.select import NATIVE
from gridcoll.units import format_size, format_time, parse_size

__all__ = [
    "PARAMS_CAPTION",
    "PARAM_SYMBOLS",
    "Call",
    "add_call_arguments",
    "call_from_args",
    "console",
    "error_console",
    "format_params",
    "load_grid_arg",
    "plan_call",
    "plan_json",
    "plan_table",
    "print_json",
    "size_arg",
]


def console() -> Console:
    """The stdout console: 120 columns when not a terminal, so tables do not wrap."""
    return Console(width=None if sys.stdout.isatty() else 120, highlight=False, markup=False)


def error_console() -> Console:
    """The stderr console, for progress bars and notes (keeps stdout clean for --json)."""
    return Console(stderr=True, highlight=False, markup=False)


def progress_bar() -> Progress:
    """A progress bar on stderr (description, bar, done/total, elapsed), gone when the
    work ends: what long commands show while they run."""
    return Progress(
        TextColumn("{task.description}", markup=False),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=error_console(),
        transient=True,
    )


def size_arg(text: str) -> int:
    """argparse type of SIZE: ``1MiB``, ``64KB``, ``1048576``; must be > 0."""
    if text.strip().startswith("-"):
        raise argparse.ArgumentTypeError(f"size must be > 0 bytes, got {text!r}")
    try:
        value = parse_size(text)
    except ParameterError as err:
        raise argparse.ArgumentTypeError(str(err)) from err
    if value <= 0:
        raise argparse.ArgumentTypeError(f"size must be > 0 bytes, got {text!r}")
    if value > MAX_MESSAGE_BYTES:
        raise argparse.ArgumentTypeError(
            f"size {text!r} is above the largest call, {MAX_MESSAGE_BYTES} bytes (2 GiB - 1)"
        )
    return value


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {text!r}")
    return value


def _rank(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"a rank is a whole number, got {text!r}") from None


def add_call_arguments(parser: argparse.ArgumentParser, *, size_required: bool = True) -> None:
    """The arguments that describe one collective call."""
    parser.add_argument(
        "--grid",
        required=True,
        metavar="GRID",
        help="a preset (magpie:8,1, das2:4, teragrid, transit-stub:20,1, lan:16) or a grid file",
    )
    parser.add_argument(
        "--op", default="bcast", choices=OPERATIONS, help="the collective (default: bcast)"
    )
    parser.add_argument(
        "--size",
        type=size_arg,
        default=None,
        metavar="SIZE",
        help=(
            "message size: 1048576, 64KB, 1MiB (binary prefixes); for scatter, gather, "
            "allgather, alltoall and reduce_scatter the bytes one rank sends or receives "
            "per peer (MPI's count); for reduce, allreduce, scan and exscan the vector; "
            "ignored by barrier" + (" (required)" if size_required else "")
        ),
    )
    parser.set_defaults(size_required=size_required)
    parser.add_argument(
        "--non-commutative",
        dest="commutative",
        action="store_false",
        help="reductions (reduce, allreduce, reduce_scatter, scan, exscan): the operation "
        "is not commutative (combine in rank order)",
    )
    parser.add_argument("--root", type=_rank, default=0, metavar="R", help="root rank (default 0)")
    parser.add_argument(
        "--algo",
        default="auto",
        metavar="NAME",
        help="a builder name (see 'gridcoll algorithms') or 'auto' for the best predicted",
    )
    parser.add_argument(
        "--itemsize",
        type=_positive_int,
        default=1,
        metavar="N",
        help="bytes per datatype element; sizes and segments are whole elements (default 1)",
    )
    parser.add_argument(
        "--segment-size",
        type=size_arg,
        default=None,
        metavar="SIZE",
        help="fix the segment size of segmented algorithms (default: tuned)",
    )
    add_budget_argument(parser)
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--explain", action="store_true", help="explain the choice")


def budget_arg(text: str) -> float | None:
    """argparse type of ``--budget``: nominal seconds in (0, MAX_BUDGET_S], or ``none``
    (no anytime builders)."""
    from gridcoll.limits import MAX_BUDGET_S

    if text.strip().lower() == "none":
        return None
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, got {text!r}") from None
    if not (math.isfinite(value) and 0 < value <= MAX_BUDGET_S):
        raise argparse.ArgumentTypeError(
            f"must be a number of seconds in (0, {MAX_BUDGET_S:g}], got {text!r}"
        )
    return value


def add_budget_argument(parser: argparse.ArgumentParser) -> None:
    """``--budget``: one default for every command (:data:`gridcoll.tune.DEFAULT_BUDGET_S`),
    so the same call chooses the same algorithm in ``plan``, ``simulate``, ``compare``,
    ``run`` and ``demo``."""
    from gridcoll.tune import DEFAULT_BUDGET_S

    parser.add_argument(
        "--budget",
        type=budget_arg,
        default=DEFAULT_BUDGET_S,
        metavar="SECONDS",
        help="planning budget in nominal seconds: lets auto run the simulated-annealing "
        "builders and skips builders whose planning would not fit; planning also stops "
        "near it on the wall clock (a note says what was cut); 'none' leaves the "
        f"annealing out and sets no deadline (default {DEFAULT_BUDGET_S:g})",
    )


def load_grid_arg(spec: str) -> Grid:
    """:func:`gridcoll.network.get_grid`, with any parse failure turned into GridError.

    A grid file whose entries have the wrong JSON types can make the file parser raise
    a bare KeyError or TypeError; the command line still owes the user one clear line.
    """
    try:
        return get_grid(spec)
    except GridcollError:
        raise
    except (KeyError, TypeError, AttributeError, ValueError) as err:
        detail = f"{type(err).__name__}: {err}"
        raise GridError(f"grid file {spec!r} is malformed ({detail})") from err


@dataclass(frozen=True)
class Call:
    """One collective call, checked: everything a planner needs."""

    spec: str
    grid: Grid
    op: str
    nbytes: int
    root: int
    algo: str
    itemsize: int
    segment_size: int | None
    commutative: bool = True
    budget_s: float | None = None


def call_from_args(args: argparse.Namespace, nbytes: int | None = None) -> Call:
    """Check the call arguments; raise a GridcollError naming the first bad one."""
    grid = load_grid_arg(args.grid)
    nbytes = args.size if nbytes is None else nbytes
    if args.op == "barrier":
        nbytes = 0  # a barrier moves no data
    elif nbytes is None and getattr(args, "size_required", True):
        raise ParameterError(f"the following arguments are required: --size (for --op {args.op})")
    grid.check_rank(args.root, "root")
    if args.algo not in ("auto", NATIVE):
        get_builder(args.op, args.algo)  # UnknownAlgorithm lists the choices
    elif not list_builders(args.op):
        raise UnknownAlgorithm(f"no {args.op} algorithms are registered yet")
    # size and segment size must be whole elements: split_segments names the problem
    if nbytes:
        split_segments(nbytes, args.segment_size, args.itemsize)
    if args.segment_size is not None and nbytes and args.segment_size > nbytes:
        raise ParameterError(
            f"--segment-size {format_size(args.segment_size)} is larger than the "
            f"{format_size(nbytes)} message"
        )
    return Call(
        args.grid,
        grid,
        args.op,
        nbytes,
        args.root,
        args.algo,
        args.itemsize,
        args.segment_size,
        getattr(args, "commutative", True),
        getattr(args, "budget", None),
    )


def plan_call(call: Call, cache: Any = None, **options: Any) -> Any:
    """Plan ``call`` with :func:`gridcoll.tune.plan`, the one entry point: a fixed
    ``--segment-size`` is its ``params`` argument (``options``: ``host_overhead``,
    ``check``, ...)."""
    from gridcoll.tune import plan

    params = None
    if call.segment_size is not None and call.op != "barrier":
        params = {"segment_size": call.segment_size}
    return plan(
        call.grid,
        call.op,
        call.nbytes,
        call.root,
        algo=call.algo,
        params=params,
        itemsize=call.itemsize,
        cache=cache,
        commutative=call.commutative,
        budget_s=call.budget_s,
        **options,
    )


def _finite(x: float) -> float | None:
    return x if math.isfinite(x) else None


def plan_json(call: Call, result: Any, **extra: Any) -> dict[str, Any]:
    """The JSON object of ``plan`` and ``simulate`` (``extra`` adds e.g. simulated_s)."""
    out: dict[str, Any] = {
        "op": call.op,
        "grid": call.spec,
        "size": call.nbytes,
        "root": call.root if result.rooted else None,
        "algorithm": result.algorithm,
        "params": dict(result.params),
        "segment_size": result.segment_size,
        "predicted_s": _finite(result.predicted_s),
        "bound_s": _finite(result.bound_s),
        "simulated_s": result.simulated_s,
        "host_overhead_s": result.host_overhead_s,
        "budget_note": getattr(result, "budget_note", ""),
        "candidates": [
            {
                "algorithm": c.algorithm,
                "params": dict(c.params),
                "segment_size": c.segment_size,
                "predicted_s": _finite(c.predicted_s),
                "simulated_s": c.simulated_s,
            }
            for c in result.candidates
        ],
    }
    out["pruned"] = [
        {"algorithm": name, "lower_bound_s": _finite(lower)} for name, lower in result.pruned
    ]
    out.update(extra)
    return out


def print_json(data: Mapping[str, Any] | list[Any]) -> None:
    """Write exactly one JSON document to stdout."""
    sys.stdout.write(json.dumps(data, indent=2) + "\n")


PARAM_SYMBOLS = {
    "segment_size": "m",
    "wan_segment_size": "m_w",
    "lan_segment_size": "m_l",
    "degree": "d",
    "wan_degree": "d_w",
    "lan_degree": "d_l",
}
"""The papers' symbols for the builders' parameters, used in tables (JSON keeps names)."""

PARAMS_CAPTION = "m: segment size, d: tree degree (_w: wide-area layer, _l: local layer)"
"""The legend of :data:`PARAM_SYMBOLS` printed under tables."""


def format_params(params: Mapping[str, Any]) -> str:
    """``m=8KiB d_w=7 d_l=1``: the papers' symbols, sizes in human units."""
    parts = []
    for key, value in params.items():
        if key.endswith("segment_size") and isinstance(value, int):
            value = _segment(value)
        parts.append(f"{PARAM_SYMBOLS.get(key, key)}={value}")
    return " ".join(parts) or "-"


def _segment(nbytes: int) -> str:
    """A segment size: ``8KiB`` when whole KiB/MiB, else exact bytes (``7085B``)."""
    if nbytes >= 1024 and nbytes % 1024 == 0:
        return format_size(nbytes).replace(" ", "")
    return f"{nbytes}B"


def ratio(seconds: float, bound: float) -> str:
    """``6.74x``: how far a time is from the bound (``-`` without one)."""
    if not bound > 0 or not math.isfinite(bound) or not math.isfinite(seconds):
        return "-"
    return f"{seconds / bound:.2f}x"


def plan_table(call: Call, result: Any, simulated_s: float | None = None) -> Table:
    """Every candidate with its predicted time and ratio to the bound, the choice marked."""
    origin = f", root {call.root}" if result.rooted else ""
    table = Table(
        title=(
            f"{call.op} of {format_size(call.nbytes)} on {call.spec} "
            f"({call.grid.nranks} ranks, {call.grid.nclusters} clusters){origin}"
        ),
        title_justify="left",
        caption=PARAMS_CAPTION,
        caption_justify="left",
    )
    table.add_column("", width=1)
    table.add_column("algorithm")
    table.add_column("parameters")
    table.add_column("predicted", justify="right")
    table.add_column("/ bound", justify="right")
    chosen = (result.algorithm, dict(result.params))
    for cand in result.candidates:
        mark = "*" if (cand.algorithm, dict(cand.params)) == chosen else ""
        table.add_row(
            mark,
            cand.algorithm,
            format_params(cand.params),
            format_time(cand.predicted_s) if math.isfinite(cand.predicted_s) else "-",
            ratio(cand.predicted_s, result.bound_s),
            style="bold" if mark else None,
        )
    for name, lower in result.pruned:  # not searched: their models cannot beat the choice
        table.add_row(
            "",
            name,
            "not searched",
            f">= {format_time(lower)}",
            ratio(lower, result.bound_s),
            style="dim",
        )
    return table


def summary_line(call: Call, result: Any, simulated_s: float | None = None) -> str:
    """One line: the choice, its prediction, the bound (and the simulation: the plan's
    own check unless ``simulated_s`` is given); a second one when the planning
    budget's deadline cut anything (:attr:`gridcoll.tune.Plan.budget_note`)."""
    if simulated_s is None:
        simulated_s = result.simulated_s
    bound = (
        f"bound {format_time(result.bound_s)} ({ratio(result.predicted_s, result.bound_s)})"
        if math.isfinite(result.bound_s)
        else "bound not computed"
    )
    line = (
        f"chosen: {result.algorithm} ({format_params(result.params)}): "
        f"predicted {format_time(result.predicted_s)}, {bound}"
    )
    if simulated_s is not None:
        error = (result.predicted_s - simulated_s) / simulated_s if simulated_s > 0 else 0.0
        versus = (
            f"{ratio(simulated_s, result.bound_s)} the bound, "
            if math.isfinite(result.bound_s)
            else ""
        )
        line += f"; simulated {format_time(simulated_s)} ({versus}model {error:+.1%})"
    note = getattr(result, "budget_note", "")
    return f"{line}\nnote: {note}" if note else line


def add_load_argument(parser: argparse.ArgumentParser) -> None:
    """``--load TRACE`` and ``--load-scale X``: cross traffic on the WAN links."""
    parser.add_argument(
        "--load",
        metavar="TRACE",
        default=None,
        help="cross traffic on the WAN links: a gridcoll-load/1 trace file "
        "(docs/load-format.md), or seed001[:SEED] (seed 001's random load on the links "
        "of cluster C3, over an hour); time 0 is the start of the run",
    )
    parser.add_argument(
        "--load-scale",
        type=float,
        default=1.0,
        metavar="X",
        help="multiply every time of the --load trace by X (default 1)",
    )


def load_trace_arg(args: argparse.Namespace, grid: Grid):
    """The ``--load`` trace, time-scaled and checked against ``grid`` (None without it).
    Raises GridError (a bad file, a link the grid lacks) before anything starts."""
    from gridcoll.network.load import load_from_spec

    if getattr(args, "load", None) is None:
        return None
    return load_from_spec(args.load, grid, time_scale=args.load_scale)
