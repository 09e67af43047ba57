"""``gridcoll measure``: P-LogP parameters between two ranks, or link matrices.

``gridcoll measure --grid magpie:2,2 --between 0,2 --out link.json`` starts two ranks
(ranks 0 and 2 of the grid, the WAN between them emulated) and runs seed 000's
procedure (sec. 2.2) between them; ``--both-directions`` also the other way.
It writes a P-LogP file that :func:`gridcoll.network.gridfile.load_plogp` reads
(``--grid-out`` also writes the grid with the measured table in place), shows progress,
prints the table and what the measurement sent beside a saturation-based method, and
``--plot`` draws seed 000's figure 2. ``--json`` prints one object with ``L_s`` and
``points`` (per direction under ``forward``/``backward``).

``gridcoll measure --grid GRID --matrix --out M.json`` measures seed 001's latency and
bandwidth matrices between the clusters' first ranks (and inside each, between its
first two); ``--every T --count N --history H.jsonl`` repeats it.

An interrupted measurement (Ctrl-C, a lost rank) ends with one error line; what was
measured is kept in ``--out`` marked ``"complete": false``, which gridcoll refuses to
plan with unless asked (``GRIDCOLL_ALLOW_INCOMPLETE=1``).

Every figure carries its 90% half-width and the repetitions kept (``confidence``,
``ci_s``, ``rel``, ``kept`` in the JSON); figures known too poorly are listed under
``low_confidence`` and printed, and ``--strict`` refuses such a measurement in one line.
"""

from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path

from gridcoll.cli._common import (
    add_netns_argument,
    console,
    error_console,
    load_grid_arg,
    netns_arg,
    print_json,
    size_arg,
)
from gridcoll.errors import MeasurementError, ParameterError
from gridcoll.measure.plogp_procedure import Settings
from gridcoll.network.gridfile import save_grid, save_plogp
from gridcoll.units import format_size, format_time

__all__ = ["add_parser", "run"]


def _pair(text: str) -> tuple[int, int]:
    try:
        a, b = (int(x) for x in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected two ranks A,B, got {text!r}") from None
    return a, b


def _positive(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be > 0, got {text!r}")
    return value


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``measure`` subcommand."""
    p = subparsers.add_parser(
        "measure",
        help="measure P-LogP parameters between two ranks, or link matrices",
        description=(
            "Measure the P-LogP parameters from rank A to rank B with seed 000's "
            "procedure (sec. 2.2), on the grid's emulated WAN; or, with --matrix, "
            "latency and bandwidth between the clusters (seed 001, sec. 2.5). "
            "Example: gridcoll measure --grid magpie:2,2 --between 0,2 --out link.json"
        ),
    )
    p.add_argument("--grid", required=True, metavar="GRID", help="a preset or a grid file")
    mode = p.add_mutually_exclusive_group(required=True)
    mode.add_argument("--between", type=_pair, metavar="A,B", help="measure from A to B")
    mode.add_argument("--matrix", action="store_true", help="latency/bandwidth matrices")
    p.add_argument("--both-directions", action="store_true", help="also from B to A")
    p.add_argument("--out", required=True, metavar="FILE", help="the P-LogP (or matrix) file")
    p.add_argument("--grid-out", metavar="FILE", help="also write GRID with the measured table")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--plot", metavar="FILE.png", help="plot os, or, g against m (fig. 2)")
    p.add_argument(
        "--max-size",
        type=size_arg,
        default=2**18,
        metavar="SIZE",
        help="initial largest size 2^k_m (default 256KiB, k_m = 18 as the paper)",
    )
    p.add_argument("--epsilon", type=_positive, default=0.01, help="relative tolerance (0.01)")
    p.add_argument(
        "--max-reps",
        type=int,
        default=60,
        metavar="N",
        help="repetitions cap of small messages (60; large: min(N, 15))",
    )
    p.add_argument("--every", type=_positive, metavar="T", help="--matrix: repeat every T s")
    p.add_argument(
        "--count",
        type=int,
        default=None,
        metavar="N",
        help="--matrix: rounds (default 1, or forever with --every)",
    )
    p.add_argument("--history", metavar="FILE", help="--matrix: append each round (JSON lines)")
    p.add_argument(
        "--timeout",
        type=_positive,
        default=60.0,
        metavar="S",
        help="seconds without a message before a rank counts as lost (60)",
    )
    p.add_argument(
        "--strict",
        action="store_true",
        help="refuse a measurement with a low-confidence figure (one error line)",
    )
    p.add_argument("--no-emulation", action="store_true", help="do not emulate the WAN")
    p.add_argument("--mpiexec", default=None, metavar="PATH", help="mpiexec to use")
    add_netns_argument(p)
    p.add_argument("--fail-after", type=int, default=None, help=argparse.SUPPRESS)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Run the measurement; return 0 (errors raise)."""
    grid = load_grid_arg(args.grid)
    if args.matrix:
        return _run_matrix(args, grid)
    a, b = args.between
    for r in (a, b):
        grid.check_rank(r, "rank")
    if a == b:
        raise ParameterError(f"--between needs two different ranks, got {a},{b}")
    k = int(math.log2(args.max_size))
    if 2**k != args.max_size or not 1 <= k <= 30:
        raise ParameterError(f"--max-size must be a power of two >= 2, got {args.max_size}")
    if not args.epsilon < 1:
        raise ParameterError(f"--epsilon must be < 1, got {args.epsilon}")
    if args.max_reps < 4:
        raise ParameterError(f"--max-reps must be >= 4, got {args.max_reps}")
    Settings(epsilon=args.epsilon, k_max=k, k_limit=max(k, 26))  # checks before launching
    return _run_plogp(args, grid, a, b, k)


def _run_plogp(args, grid, a: int, b: int, k: int) -> int:
    from gridcoll.measure import launch
    from gridcoll.runtime.emulation import subgrid

    sub = subgrid(grid, [a, b], name=f"{grid.name}[{a},{b}]")
    spec = {
        "mode": "plogp",
        "a": 0,
        "b": 1,
        "both": args.both_directions,
        "settings": {
            "epsilon": args.epsilon,
            "k_max": k,
            "k_limit": max(k, 26),
            "max_reps_small": args.max_reps,
            "max_reps_large": min(args.max_reps, 15),
        },
        "timeout": args.timeout,
        "fail_after": args.fail_after,
    }
    start = time.monotonic()
    network = netns_arg(args, grid)
    if network is not None:
        network = network.for_ranks([a, b])
    with launch.job(sub, emulate=not args.no_emulation, network=network) as job:
        outcome = _watch(job, spec, args, f"{a} -> {b}")
        elapsed = time.monotonic() - start
        if not outcome.ok:
            _keep_partial(outcome, args.out, a, b)
            kept = ", ".join(outcome.partial) or "nothing"
            raise MeasurementError(
                f"the measurement {a} -> {b} on {grid.name} failed: "
                f"{outcome.describe_failure()}; measured so far ({kept}) kept in "
                f"{args.out!r}, marked incomplete"
            )
    result = outcome.result
    if args.strict:
        _check_confidence(result, a, b)
    result["between"] = [a, b]
    result["grid"] = grid.name
    result["wall_s"] = elapsed
    tables = _tables(result)
    save_plogp(tables if args.both_directions else tables["forward"], args.out, extra=result)
    if args.grid_out:
        from gridcoll.measure.discover import with_measured

        save_grid(
            with_measured(grid, a, b, tables["forward"], tables.get("backward")), args.grid_out
        )
    if args.plot:
        from gridcoll.measure.plot import plot_plogp

        plot_plogp(_directions(result), args.plot, title=f"{grid.name}: {a} -> {b}")
    if args.json:
        print_json(result)
    else:
        _print_result(result, args, a, b)
    return 0


def _check_confidence(result: dict, a: int, b: int) -> None:
    """Raise one line naming the low-confidence figures (``--strict``)."""
    flagged = [
        f"{direction}: {flag}"
        for direction, d in _directions(result).items()
        for flag in d.get("low_confidence", [])
    ]
    if flagged:
        raise MeasurementError(
            f"the measurement {a} -> {b} is not trustworthy (--strict): {'; '.join(flagged)}"
        )


def _directions(result: dict) -> dict[str, dict]:
    if "forward" in result:
        return {"forward": result["forward"], "backward": result["backward"]}
    return {"forward": result}


def _tables(result: dict) -> dict:
    from gridcoll.measure.plogp_procedure import table_from_dict

    return {k: table_from_dict(v) for k, v in _directions(result).items()}


def _keep_partial(outcome, out: str, a: int, b: int) -> None:
    """Write what the failed job measured, each table marked incomplete."""
    from gridcoll.measure.plogp_procedure import table_from_dict

    tables = {}
    for direction, data in outcome.partial.items():
        try:
            tables[direction] = table_from_dict(data, complete=False)
        except MeasurementError:
            continue  # nothing measured in that direction yet
    extra = {"between": [a, b], "error": outcome.describe_failure(), "partial": outcome.partial}
    if set(tables) == {"forward"}:
        save_plogp(tables["forward"], out, extra=extra)
    elif tables:
        save_plogp(tables, out, extra=extra)
    else:
        Path(out).write_text(
            json.dumps({"format": "gridcoll-plogp/1", "complete": False, "measurement": extra})
            + "\n"
        )


def _watch(job, spec: dict, args, label: str):
    """Run the job with a rich progress line on stderr."""
    from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    err = error_console()
    with Progress(
        SpinnerColumn(),
        TextColumn("{task.description}", markup=False),
        TimeElapsedColumn(),
        console=err,
        transient=True,
        disable=not err.is_terminal,
    ) as bar:
        task = bar.add_task(f"measuring {label}: starting", total=None)

        def show(line: dict) -> None:
            if "round" in line:
                what = f"matrix round {line['round']} done ({line['elapsed_s']:.1f} s)"
            elif "m" in line:
                what = f"{line['direction']}: m = {format_size(line['m'])} x {line['reps']}"
            else:
                what = f"{line['direction']}: g(0) with {line['n']} messages in a row"
            sent = f"{line.get('messages', 0)} msgs, {format_size(line.get('bytes', 0))} sent"
            done = line.get("sizes_done", 0)
            bar.update(task, description=f"measuring {label}: {what} · {done} sizes · {sent}")

        return job.run(spec, on_progress=show, mpiexec=args.mpiexec)


def _print_result(result: dict, args, a: int, b: int) -> None:
    from rich.table import Table

    out = console()
    for direction, d in _directions(result).items():
        src, dst = (a, b) if direction == "forward" else (b, a)
        table = Table(
            title=(
                f"P-LogP {src} -> {dst}: L = {format_time(d['L_s'])} ({d['latency_method']}), "
                f"g(0) = {format_time(d['g0_s'])}"
            ),
            title_justify="left",
        )
        for col in ("m", "os(m)", "or(m)", "g(m)", "+- g(m)", "kept/reps"):
            table.add_column(col, justify="right")
        for p in d["points"]:
            low = set(p.get("low_confidence", []))
            table.add_row(
                format_size(p["m"]),
                format_time(p["os_s"]) + ("?" if "os" in low else ""),
                format_time(p["or_s"]) + ("?" if "or" in low else ""),
                format_time(p["g_s"]) + ("?" if "g" in low else ""),
                _half(p.get("ci_s", {}).get("g")),
                f"{p.get('kept', p['reps'])}/{p['reps']}",
            )
        out.print(table)
        ours, sat, save = d["cost"], d["saturation_cost"], d["savings"]
        out.print(
            f"{direction}: sent {ours['messages']} messages, {format_size(ours['bytes'])}, "
            f"link busy {format_time(ours['link_s'])}; a saturation-based method: "
            f"{sat['messages']} messages, {format_size(sat['bytes'])}, "
            f"{format_time(sat['link_s'])} (we send {_pct(save['messages'])} fewer "
            f"messages, {_pct(save['bytes'])} fewer bytes, {_pct(save['link_s'])} less link time)"
        )
        for note in d["notes"]:
            out.print(f"note: {note}")
        for flag in d.get("low_confidence", []):
            out.print(f"low confidence (?): {flag}")
    out.print(f"wall time {result['wall_s']:.1f} s; written to {args.out}")


def _half(x: float | None) -> str:
    return "-" if x is None or not math.isfinite(x) else format_time(x)


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{100 * x:.1f}%"


def _run_matrix(args, grid) -> int:
    from gridcoll.measure import launch
    from gridcoll.measure.matrix import LinkMatrices
    from gridcoll.runtime.emulation import subgrid

    ranks = []
    for members in grid.members:
        ranks.extend(members[:2])
    sub = subgrid(grid, sorted(ranks), name=f"{grid.name}[matrix]")
    count = args.count if args.count is not None else (0 if args.every else 1)
    if count < 0:
        raise ParameterError(f"--count must be >= 0, got {count}")
    spec = {
        "mode": "matrix",
        "every": args.every or 0.0,
        "count": count,
        "timeout": args.timeout,
        "history": str(Path(args.history).resolve()) if args.history else None,
    }
    network = netns_arg(args, grid)
    if network is not None:
        network = network.for_ranks(sorted(ranks))
    with launch.job(sub, emulate=not args.no_emulation, network=network) as job:
        outcome = _watch(job, spec, args, "matrix")
    if not outcome.ok:
        raise MeasurementError(f"the matrix measurement failed: {outcome.describe_failure()}")
    matrices = LinkMatrices.from_dict(outcome.result)
    original = sorted(ranks)
    data = matrices.to_dict() | {"grid": grid.name, "ranks": [original[r] for r in matrices.ranks]}
    Path(args.out).write_text(json.dumps(data, indent=2) + "\n")
    if args.json:
        print_json(data)
    else:
        _print_matrices(data, args.out)
    return 0


def _print_matrices(data: dict, path: str) -> None:
    from rich.table import Table

    out = console()
    names = data["names"]
    for key, title, fmt in (
        ("latency_s", "latency (row -> column)", format_time),
        ("bandwidth_Bps", "bandwidth (row -> column)", lambda x: f"{x / 1e6:.3g} MB/s"),
    ):
        table = Table(title=title, title_justify="left")
        table.add_column("")
        for n in names:
            table.add_column(n, justify="right")
        for n, row in zip(names, data[key], strict=True):
            table.add_row(n, *("-" if x is None else fmt(x) for x in row))
        out.print(table)
    out.print(f"measured in {data['elapsed_s']:.1f} s; written to {path}")
