"""``gridcoll run``: run a collective for real over MPI on an emulated grid.

Plans the call as ``gridcoll plan`` does, simulates the chosen schedule, then starts
``mpiexec`` with one rank per grid rank (the WAN emulated, unless ``--no-emulation``),
runs the collective (``--op``, default bcast) ``--repeat`` times with every rank's bytes
verified against a result computed with numpy alone (:mod:`gridcoll.runtime.worker`,
which gets the call and the choice as one JSON document), and reports
the median measured time beside the model's prediction, the simulator's time and the
bound. ``--json`` prints the fields of ``gridcoll simulate --json`` plus
``measured_s`` (median), ``measured_all_s``, ``verified`` and ``host_overhead_s``.

Planning, prediction and simulation use the *effective grid*: the grid plus this
runtime's per-message host overhead (``--host-overhead``, else ``GRIDCOLL_HOST_OVERHEAD``,
else the calibrated default of :mod:`gridcoll.runtime.host`); the ranks plan with the
same value, and the bound is the physical grid's.
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys

from gridcoll.cli._common import (
    Request,
    add_call_arguments,
    add_load_argument,
    add_netns_argument,
    console,
    format_params,
    load_trace_arg,
    netns_arg,
    plan_json,
    plan_request,
    print_json,
    ratio,
    request_from_args,
)
from gridcoll.errors import ParameterError
from gridcoll.runtime.host import (
    describe,
    external_load,
    parse_host_overhead,
    resolve_host_overhead,
)
from gridcoll.units import format_size, format_time

__all__ = ["add_parser", "run"]


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected seconds, got {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be > 0, got {text!r}")
    return value


def _repeat(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {text!r}")
    return value


def host_overhead_arg(text: str) -> float | None:
    """argparse type of ``--host-overhead``: a duration (``40us``) or ``auto``."""
    try:
        return parse_host_overhead(text)
    except ParameterError as err:
        raise argparse.ArgumentTypeError(str(err)) from err


def add_host_overhead_argument(parser: argparse.ArgumentParser) -> None:
    """``--host-overhead``, shared by ``run`` and ``demo``."""
    parser.add_argument(
        "--host-overhead",
        type=host_overhead_arg,
        default=None,
        metavar="TIME",
        help="the runtime's CPU cost per message and side (e.g. 40us) added to the grid "
        "for planning and simulation (default: $GRIDCOLL_HOST_OVERHEAD, else calibrated: "
        "45 us with the WAN emulated, 8 us without, times (ranks + load average) / cores "
        "if above 1)",
    )


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``run`` subcommand."""
    parser = subparsers.add_parser(
        "run",
        help="run a collective for real over MPI on an emulated grid, verified",
        description=(
            "Plan one collective call (--op, default bcast; for scatter, gather, allgather "
            "and alltoall --size is the bytes per rank per peer), then run it with mpiexec "
            "(one rank per grid rank, the WAN emulated on this machine) --repeat times, "
            "verify every rank's bytes and report the median measured time beside the "
            "prediction, the simulation and the bound. Reductions sum unsigned integers of "
            "--itemsize bytes, or with --non-commutative multiply 2x2 int64 matrices in "
            "rank order (--itemsize 32). --algo native runs the MPI library's own."
        ),
    )
    add_call_arguments(parser)
    parser.add_argument("--repeat", type=_repeat, default=3, metavar="K", help="runs (default 3)")
    parser.add_argument(
        "--no-emulation",
        action="store_true",
        help="send cross-cluster messages straight over MPI (no WAN latency or bandwidth)",
    )
    parser.add_argument(
        "--timeout",
        type=_positive_float,
        default=None,
        metavar="S",
        help="seconds a call may go without progress on a rank before it fails "
        "(default: 10x the predicted time, at least 30)",
    )
    parser.add_argument(
        "--mpiexec",
        default=None,
        metavar="PATH",
        help="mpiexec to use (default: the mpich wheel's)",
    )
    add_host_overhead_argument(parser)
    add_netns_argument(parser)
    add_load_argument(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Plan, simulate, launch, report; 0 if every repetition was verified, else 1."""
    from gridcoll.runtime.worker import Batch, run_batch
    from gridcoll.tune import FRUGAL, PlanOptions

    request = request_from_args(args)
    call, grid = request.call, request.grid
    load = load_trace_arg(args, grid)
    network = netns_arg(args, grid)
    emulated = not args.no_emulation and network is None and not grid.is_single_cluster
    overhead = resolve_host_overhead(
        args.host_overhead,
        grid.nranks,
        emulated=emulated,
        load=external_load(),
        tcp=network is not None,
    )
    # as gridcoll.Comm plans: the runtime's host overhead, the native collective allowed
    # (auto on one cluster), frugal, the chosen schedule simulated
    result = plan_request(request, host_overhead=overhead, native=True, check=True, frugal=FRUGAL)
    estimate = max(
        (x for x in (result.predicted_s, result.simulated_s or 0.0) if math.isfinite(x)),
        default=0.0,
    )
    timeout = args.timeout or max(30.0, 10.0 * estimate)
    # the ranks run this plan's choice: its algorithm and parameters, fixed
    params = None if result.native else dict(result.params)
    chosen = PlanOptions(result.algorithm, params, host_overhead=overhead)
    # a call the worker cannot verify is refused here, before anything starts
    batch = Batch(((call, chosen),), repeat=args.repeat, timeout=timeout)
    outcome = run_batch(
        grid, batch, emulate=not args.no_emulation, mpiexec=args.mpiexec, load=load, network=network
    )
    times = list(outcome.result.get("measured_all_s", [])) if outcome.result else []
    measured = statistics.median(times) if times and outcome.ok else None
    if args.json:
        _print_json(request, result, outcome, times, measured, args)
    else:
        _print_text(request, result, outcome, times, measured, args)
    return 0 if outcome.verified else 1


def _print_json(request: Request, result, outcome, times, measured, args) -> None:
    data = plan_json(request, result)
    data.update(
        measured_s=measured,
        measured_all_s=times,
        verified=outcome.verified,
        emulated=not args.no_emulation and args.netns is None,
        netns=args.netns,
        nranks=request.grid.nranks,
        repeat=args.repeat,
        timing=(outcome.result or {}).get("timing"),
    )
    if not outcome.ok:
        data["error"] = outcome.describe_failure()
        data["failed_ranks"] = outcome.failed_ranks
    print_json(data)


def _print_text(request: Request, result, outcome, times, measured, args) -> None:
    out = console()
    call, grid = request.call, request.grid
    if grid.nclusters == 1:
        wan = "one cluster (no WAN)"
    else:
        wan = "WAN not emulated" if args.no_emulation else "WAN emulated"
        if args.netns is not None:
            wan = "namespace network (real TCP)"
    per = " per rank per peer" if call.op in ("scatter", "gather", "allgather", "alltoall") else ""
    origin = f", root {call.root}" if result.rooted else ""
    out.print(
        f"{call.op} of {format_size(call.nbytes)}{per} on {request.spec} ({grid.nranks} ranks, "
        f"{grid.nclusters} clusters){origin}, {wan}",
        markup=False,
    )
    if result.native:
        out.print(f"algorithm: native (the MPI library's own {call.op}): {result.reason}")
    else:
        out.print(f"algorithm: {result.algorithm} ({format_params(result.params)})")
        out.print(
            f"planned and simulated with a host overhead of {describe(result.host_overhead_s)}"
        )
    if not outcome.ok:
        print(f"gridcoll run: failed: {outcome.describe_failure()}", file=sys.stderr)
        return
    bound = result.bound_s
    spread = f"min {format_time(min(times))}, max {format_time(max(times))}"
    check = "yes (every rank, every repetition)" if outcome.verified else "NO"
    out.print(f"  measured  {format_time(measured)}  median of {len(times)} ({spread})")
    out.print(f"  verified  {check}")
    if not result.native:
        simulated = result.simulated_s
        out.print(
            f"  predicted {format_time(result.predicted_s)}  "
            f"(measured/predicted {measured / result.predicted_s:.2f})"
        )
        out.print(
            f"  simulated {format_time(simulated)}  (measured/simulated {measured / simulated:.2f})"
        )
    out.print(f"  bound     {format_time(bound)}  (measured {ratio(measured, bound)} the bound)")
    if args.explain:
        out.print(result.explain(), markup=False)
