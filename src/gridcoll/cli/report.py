"""``gridcoll report LOG... [--plot FILE] [--json]``: what a run's collectives did.

Reads the call logs that ``GRIDCOLL_LOG`` (or ``Comm(log=...)``) wrote, one file per
rank or one shared file (:mod:`gridcoll.runtime.record`), and prints per grid, op and
size: the calls, the algorithm(s) chosen, the measured time (median over calls of each
call's slowest rank), the plan's prediction, their ratio and the bound; then where the
model was most wrong. ``--plot`` draws measured against predicted
(:func:`gridcoll.plot.report.plot_report`). A missing, empty or malformed log is one
line ``gridcoll: error: ...`` and exit status 2.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from rich.table import Table

from gridcoll.cli._common import console, print_json
from gridcoll.runtime.record import Row, most_wrong, read_log, summarize
from gridcoll.units import format_size, format_time

__all__ = ["add_parser", "run"]


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``report`` subcommand."""
    parser = subparsers.add_parser(
        "report",
        help="summarise call logs (GRIDCOLL_LOG): measured against predicted, per op and size",
        description=(
            "Summarise the call logs written with GRIDCOLL_LOG=FILE (or Comm(log=...)): per "
            "grid, collective and size, the calls, the algorithm, the measured time (median "
            "over calls of the slowest rank) against the model's prediction, and where the "
            "model was most wrong. Example: gridcoll report run-*.jsonl --plot report.png"
        ),
    )
    parser.add_argument("logs", nargs="+", metavar="LOG", help="log files (one per rank, or one)")
    parser.add_argument("--plot", metavar="FILE", help="draw measured against predicted here")
    parser.add_argument("--json", action="store_true", help="print the rows as JSON")
    parser.set_defaults(func=run)


def _row_json(row: Row) -> dict:
    return {
        "grid": row.grid,
        "op": row.op,
        "size": row.size,
        "nranks": row.nranks,
        "ranks": row.ranks,
        "calls": row.calls,
        "algorithms": dict(row.algorithms),
        "measured_s": row.measured_s,
        "predicted_s": row.predicted_s,
        "ratio": row.ratio,
        "bound_s": row.bound_s,
    }


def _time(seconds: float | None) -> str:
    return "-" if seconds is None else format_time(seconds)


def _table(rows: list[Row], files: int, lines: int) -> Table:
    table = Table(
        title=f"{lines} lines from {files} log{'s' if files != 1 else ''}",
        title_justify="left",
        caption="measured: median over calls of the slowest rank; ratio: measured / predicted",
        caption_justify="left",
    )
    table.add_column("grid", no_wrap=True)
    table.add_column("op", no_wrap=True)
    table.add_column("size", justify="right", no_wrap=True)
    table.add_column("ranks", justify="right")
    table.add_column("calls", justify="right")
    table.add_column("algorithm", ratio=1)
    table.add_column("measured", justify="right", no_wrap=True)
    table.add_column("predicted", justify="right", no_wrap=True)
    table.add_column("ratio", justify="right", no_wrap=True)
    table.add_column("bound", justify="right", no_wrap=True)
    for row in rows:
        names = ", ".join(
            name if len(row.algorithms) == 1 else f"{name} ({n})" for name, n in row.algorithms
        )
        table.add_row(
            row.grid,
            row.op,
            format_size(row.size),
            str(row.nranks),
            str(row.calls),
            names,
            _time(row.measured_s),
            _time(row.predicted_s),
            "-" if row.ratio is None else f"{row.ratio:.2f}",
            _time(row.bound_s),
        )
    return table


def _verdict(row: Row | None) -> str:
    if row is None:
        return "no call had a prediction to compare with"
    ratio = row.ratio
    how = f"{ratio:.2f}x slower" if ratio >= 1 else f"{1 / ratio:.2f}x faster"
    return (
        f"the model was most wrong on {row.op} of {format_size(row.size)} on {row.grid} "
        f"({row.algorithms[0][0]}): measured {format_time(row.measured_s)}, predicted "
        f"{format_time(row.predicted_s)}, {how} than predicted"
    )


def run(args: argparse.Namespace) -> int:
    """Print the summary of the logs (a table, or JSON); 0 on success."""
    records = []
    for path in args.logs:
        records += read_log(path)
    rows = summarize(records)
    worst = most_wrong(rows)
    plot = None
    if args.plot:
        from gridcoll.plot.report import plot_report

        plot = plot_report(rows, Path(args.plot), title="measured against predicted")
    if args.json:
        print_json(
            {
                "rows": [_row_json(row) for row in rows],
                "most_wrong": None if worst is None else _row_json(worst),
                "lines": len(records),
                "plot": None if plot is None else str(plot),
            }
        )
        return 0
    out = console()
    out.print(_table(rows, len(args.logs), len(records)))
    out.print(_verdict(worst))
    if plot is not None:
        out.print(f"wrote {plot}")
    return 0
