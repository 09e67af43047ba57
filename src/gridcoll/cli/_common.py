"""Shared plumbing of the subcommands: call arguments, planning, output.

The subcommands ``plan``, ``simulate`` and ``run`` describe one collective call the
same way (grid, op, size, root, algorithm, datatype size); this module parses those
arguments into a :class:`Request`: the grid and the call as the tuner takes it
(:class:`gridcoll.tune.Call`, which checks the size, item size and the rest once, and
:class:`gridcoll.tune.PlanOptions`), plans it with :func:`gridcoll.tune.plan`, and
prints the result as a rich table or as one JSON object.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from gridcoll.errors import GridcollError, GridError, ParameterError
from gridcoll.limits import MAX_MESSAGE_BYTES
from gridcoll.network import Grid, get_grid
from gridcoll.schedule import OPERATIONS, split_segments
from gridcoll.tune import Call, Plan, PlanCache, PlanOptions, plan
from gridcoll.units import format_size, format_time, parse_size

__all__ = [
    "PARAMS_CAPTION",
    "PARAM_SYMBOLS",
    "Request",
    "add_call_arguments",
    "add_netns_argument",
    "console",
    "error_console",
    "format_params",
    "load_grid_arg",
    "netns_arg",
    "plan_json",
    "plan_request",
    "plan_table",
    "print_json",
    "request_from_args",
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


def _call_size(text: str) -> int:
    """argparse type of a call's ``--size``: the text parsed (``1MiB``, ``-5``); the
    value is the call's to check (:class:`gridcoll.tune.Call`)."""
    text = text.strip()
    try:
        value = parse_size(text.removeprefix("-"))
    except ParameterError as err:
        raise argparse.ArgumentTypeError(str(err)) from err
    return -value if text.startswith("-") else value


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
        type=_call_size,
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
        type=int,
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
        "near it in CPU time, the same on a busy machine (a note says what was cut); "
        "'none' leaves the "
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
class Request:
    """One collective call of the command line: the grid it names, the call (checked
    once, by :class:`gridcoll.tune.Call`) and the planning options its flags give."""

    spec: str
    """The grid as the user wrote it (a preset name or a file)."""
    grid: Grid
    call: Call
    options: PlanOptions


def request_from_args(args: argparse.Namespace, nbytes: int | None = None) -> Request:
    """The :class:`Request` of the call arguments; raise a GridcollError naming the first
    bad one (the call's own checks are :class:`gridcoll.tune.Call`'s, the grid's
    :func:`gridcoll.tune.plan`'s)."""
    grid = load_grid_arg(args.grid)
    nbytes = args.size if nbytes is None else nbytes
    if args.op == "barrier":
        nbytes = 0  # a barrier moves no data
    elif nbytes is None and getattr(args, "size_required", True):
        raise ParameterError(f"the following arguments are required: --size (for --op {args.op})")
    call = Call(
        args.op,
        nbytes or 0,
        args.root,
        args.itemsize,
        commutative=getattr(args, "commutative", True),
    )
    params = None
    segment = args.segment_size
    if segment is not None and call.nbytes:
        split_segments(call.nbytes, segment, call.itemsize)  # a segment of whole elements
        if segment > call.nbytes:
            raise ParameterError(
                f"--segment-size {format_size(segment)} is larger than the "
                f"{format_size(call.nbytes)} message"
            )
        params = {"segment_size": segment}
    options = PlanOptions(args.algo, params, budget_s=getattr(args, "budget", None))
    return Request(args.grid, grid, call, options)


def plan_request(request: Request, cache: PlanCache | None = None, **options: Any) -> Plan:
    """Plan ``request`` with :func:`gridcoll.tune.plan`, the one entry point; ``options``
    replace fields of its :class:`~gridcoll.tune.PlanOptions` (``host_overhead``,
    ``check``, ...)."""
    chosen = replace(request.options, **options) if options else request.options
    return plan(request.grid, request.call, chosen, cache=cache)


def _finite(x: float) -> float | None:
    return x if math.isfinite(x) else None


def plan_json(request: Request, result: Plan, **extra: Any) -> dict[str, Any]:
    """The JSON object of ``plan`` and ``simulate`` (``extra`` adds e.g. simulated_s)."""
    out: dict[str, Any] = {
        "op": request.call.op,
        "grid": request.spec,
        "size": request.call.nbytes,
        "root": request.call.root if result.rooted else None,
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


def plan_table(request: Request, result: Plan, simulated_s: float | None = None) -> Table:
    """Every candidate with its predicted time and ratio to the bound, the choice marked."""
    call, grid = request.call, request.grid
    origin = f", root {call.root}" if result.rooted else ""
    table = Table(
        title=(
            f"{call.op} of {format_size(call.nbytes)} on {request.spec} "
            f"({grid.nranks} ranks, {grid.nclusters} clusters){origin}"
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


def summary_line(request: Request, result: Plan, simulated_s: float | None = None) -> str:
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


def add_netns_argument(parser: argparse.ArgumentParser) -> None:
    """``--netns [NAME]``: run on a namespace network instead of the emulation."""
    parser.add_argument(
        "--netns",
        nargs="?",
        const="",
        default=None,
        metavar="NAME",
        help="run the ranks on the namespace network NAME (default: the one up; see "
        "'gridcoll netns up'): a real TCP network between the sites, no emulation",
    )


def netns_arg(args: argparse.Namespace, grid: Grid):
    """The ``--netns`` network (None without it), checked to hold ``grid``'s ranks.
    Raises LaunchError (none up, several up, gone) or GridError before anything starts."""
    if getattr(args, "netns", None) is None:
        return None
    from gridcoll.runtime.netns import find

    network = find(args.netns or None)
    if len(network.ranks) != grid.nranks:
        raise GridError(
            f"grid {grid.name!r} has {grid.nranks} ranks; namespace network "
            f"{network.name!r} holds {len(network.ranks)}"
        )
    return network
