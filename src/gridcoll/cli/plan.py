"""``gridcoll plan``: choose an algorithm and its parameters for one call, by model."""

from __future__ import annotations

import argparse

from gridcoll.cli._common import (
    add_call_arguments,
    console,
    plan_json,
    plan_request,
    plan_table,
    print_json,
    request_from_args,
    summary_line,
)

__all__ = ["add_parser", "run"]


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``plan`` subcommand."""
    parser = subparsers.add_parser(
        "plan",
        help="choose the algorithm, tree shape and segment size for one call",
        description=(
            "Plan one collective call: evaluate every candidate algorithm with its tuned "
            "parameters on the closed-form model and print the choice, its predicted "
            "time and the physical bound."
        ),
    )
    add_call_arguments(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Plan the call and print the candidates (or one JSON object)."""
    request = request_from_args(args)
    result = plan_request(request)
    if args.json:
        data = plan_json(request, result)
        if args.explain:
            data["explanation"] = result.explain()
        print_json(data)
        return 0
    out = console()
    out.print(plan_table(request, result))
    out.print(summary_line(request, result), soft_wrap=True)
    if args.explain:
        out.print(result.explain())
    return 0
