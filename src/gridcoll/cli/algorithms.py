"""``gridcoll algorithms [--op OP] [--json]``: the registered builders."""

from __future__ import annotations

import argparse

from rich.table import Table

from gridcoll.algorithms import list_builders
from gridcoll.cli._common import console, print_json
from gridcoll.schedule import OPERATIONS

__all__ = ["add_parser", "run"]


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``algorithms`` subcommand."""
    parser = subparsers.add_parser(
        "algorithms",
        help="list the algorithms (builders) with their tunable parameters",
        description="List every registered builder: the names --algo takes.",
    )
    parser.add_argument("--op", choices=OPERATIONS, help="only this collective")
    parser.add_argument("--json", action="store_true", help="print a JSON list")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Print the builders as a table (or JSON)."""
    builders = list_builders(args.op)
    if args.json:
        print_json(
            [
                {"op": b.op, "name": b.name, "summary": b.summary, "params": list(b.params)}
                for b in builders
            ]
        )
        return 0
    table = Table(title=f"{len(builders)} algorithms", title_justify="left")
    table.add_column("op", no_wrap=True)
    table.add_column("name", style="bold", no_wrap=True)
    table.add_column("tunable parameters", no_wrap=True)
    table.add_column("summary", ratio=1)
    for b in builders:
        table.add_row(b.op, b.name, "\n".join(b.params) or "-", b.summary)
    console().print(table)
    return 0
