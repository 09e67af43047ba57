"""``gridcoll simulate``: plan one call, then replay the schedule in the simulator."""

from __future__ import annotations

import argparse
from pathlib import Path

from gridcoll.cli._common import (
    add_call_arguments,
    add_load_argument,
    console,
    load_trace_arg,
    plan_json,
    plan_request,
    plan_table,
    print_json,
    request_from_args,
    summary_line,
)
from gridcoll.errors import ParameterError

__all__ = ["add_parser", "run"]


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``simulate`` subcommand."""
    parser = subparsers.add_parser(
        "simulate",
        help="plan one call and run its schedule in the event-driven simulator",
        description=(
            "Plan one collective call as 'gridcoll plan' does, build the chosen schedule "
            "and execute it in the event-driven simulator."
        ),
    )
    add_call_arguments(parser)
    parser.add_argument(
        "--plot",
        metavar="FILE.png",
        help="draw the timeline: which link carries which segment when",
    )
    add_load_argument(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Plan, build, simulate; print the result (or one JSON object)."""
    from gridcoll.simulate import simulate

    if args.plot and Path(args.plot).suffix.lower() not in (".png", ".svg", ".pdf"):
        raise ParameterError(f"--plot needs a .png, .svg or .pdf file name, got {args.plot!r}")
    request = request_from_args(args)
    load = load_trace_arg(args, request.grid)
    result = plan_request(request)
    schedule = result.build(request.grid)
    sim = simulate(schedule, request.grid, record=bool(args.plot), load=load)
    if args.plot:
        from gridcoll.plot.timeline import plot_timeline

        Path(args.plot).parent.mkdir(parents=True, exist_ok=True)
        plot_timeline(sim, request.grid, args.plot)
    if args.json:
        data = plan_json(request, result, simulated_s=sim.total_s, nmessages=sim.nmessages)
        if args.plot:
            data["plot"] = str(args.plot)
        if args.explain:
            data["explanation"] = result.explain()
        print_json(data)
        return 0
    out = console()
    out.print(plan_table(request, result))
    out.print(summary_line(request, result, sim.total_s), soft_wrap=True)
    if args.explain:
        out.print(result.explain())
    if args.plot:
        out.print(f"timeline written to {args.plot}")
    return 0
