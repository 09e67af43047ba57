"""``gridcoll mpirun``: start any mpi4py program on an emulated grid.

``gridcoll mpirun --grid magpie:4,2 -- python app.py`` starts ``mpiexec -n 8 python
app.py`` with the environment set so that ``gridcoll.Comm(MPI.COMM_WORLD)`` inside the
program finds the grid by itself and its broadcasts cross the emulated WAN links; the
application changes no line. With ``--world`` (or ``GRIDCOLL_WORLD=1``) it need not even
wrap ``COMM_WORLD``: every Python process of the job makes ``MPI.COMM_WORLD`` itself a
``gridcoll.Comm`` when it imports ``mpi4py.MPI`` (:mod:`gridcoll.runtime.world`), so an
unchanged mpi4py program, its libraries, or ``python -m pytest`` run on gridcoll's
collectives. The exit status is mpiexec's. When the job fails, one line
on stderr names the rank that died and how (``gridcoll mpirun: rank 1 died (exited with
status 3); ...``), from the launcher's rank wrapper, not a PID.
"""

from __future__ import annotations

import argparse
import sys

from gridcoll.cli._common import (
    add_load_argument,
    add_netns_argument,
    load_grid_arg,
    load_trace_arg,
    netns_arg,
)
from gridcoll.errors import ParameterError

__all__ = ["add_parser", "run"]


def _nprocs(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {text!r}")
    return value


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``mpirun`` subcommand."""
    parser = subparsers.add_parser(
        "mpirun",
        help="launch any mpi4py program on a grid with the WAN emulation on",
        description=(
            "Start COMMAND under mpiexec with one rank per grid rank and the WAN emulated. "
            "Inside, gridcoll.Comm(MPI.COMM_WORLD) finds the grid by itself; with --world "
            "MPI.COMM_WORLD itself is one, so an unchanged mpi4py program runs on gridcoll. "
            "Example: gridcoll mpirun --grid magpie:4,2 --world -- python app.py"
        ),
    )
    parser.add_argument("--grid", required=True, metavar="GRID", help="a preset or a grid file")
    parser.add_argument(
        "-n",
        "--np",
        dest="nprocs",
        type=_nprocs,
        default=None,
        metavar="N",
        help="number of ranks (must equal the grid's; default: the grid's)",
    )
    parser.add_argument(
        "--no-emulation", action="store_true", help="do not emulate the WAN (grid only)"
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=None,
        metavar="S",
        help="seconds a gridcoll collective may go without progress before it fails "
        "(GRIDCOLL_TIMEOUT)",
    )
    parser.add_argument(
        "--algo",
        default=None,
        metavar="ALGO",
        help="force algorithms in every gridcoll.Comm (GRIDCOLL_ALGO): a name (every "
        "collective with a builder of that name uses it, the others auto) or one per "
        "collective, 'bcast:multitree;allreduce:two-level'",
    )
    parser.add_argument(
        "--log",
        default=None,
        metavar="FILE",
        help="record every gridcoll collective call, one JSON line each (GRIDCOLL_LOG; "
        "'{rank}' in FILE: one file per rank); read them with gridcoll report",
    )
    parser.add_argument(
        "--adaptive",
        action="store_true",
        help="every gridcoll.Comm's broadcasts adapt to the network as it runs "
        "(GRIDCOLL_ADAPTIVE=1; seed 001)",
    )
    parser.add_argument(
        "--world",
        action="store_true",
        help="every Python process of the job makes MPI.COMM_WORLD a gridcoll.Comm when "
        "it imports mpi4py.MPI, whatever the command (python app.py, python -m pytest, a "
        "script with a shebang); processes that never import it are left alone "
        "(GRIDCOLL_WORLD=1)",
    )
    parser.add_argument("--mpiexec", default=None, metavar="PATH", help="mpiexec to use")
    add_netns_argument(parser)
    add_load_argument(parser)
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- COMMAND [ARGS...]")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Launch the command; return mpiexec's exit status."""
    import os

    from gridcoll.runtime.choice import algo_table
    from gridcoll.runtime.supervisor import launch
    from gridcoll.runtime.world import requested

    command = list(args.command)
    if command and command[0] == "--":
        command = command[1:]
    if not command:
        raise ParameterError("no command given: gridcoll mpirun --grid GRID -- python app.py")
    grid = load_grid_arg(args.grid)
    load = load_trace_arg(args, grid)  # refused before anything starts
    network = netns_arg(args, grid)
    if args.nprocs is not None and args.nprocs != grid.nranks:
        raise ParameterError(
            f"grid {args.grid!r} has {grid.nranks} ranks; -n {args.nprocs} does not match"
        )
    if args.timeout is not None and not args.timeout > 0:
        raise ParameterError(f"--timeout must be > 0 seconds, got {args.timeout!r}")
    if args.algo is not None:
        algo_table(args.algo, None)  # names the bad part and lists the choices
        os.environ["GRIDCOLL_ALGO"] = args.algo
    if args.adaptive:
        os.environ["GRIDCOLL_ADAPTIVE"] = "1"
    if args.log is not None:
        from gridcoll.runtime.record import ENV_LOG, log_path

        log_path(args.log, 0)  # an empty name is refused here
        os.environ[ENV_LOG] = args.log
    return launch(
        grid,
        command,
        emulate=not args.no_emulation,
        timeout=args.timeout,
        mpiexec=args.mpiexec,
        on_failure=_report_failure,
        load=load,
        world=args.world or requested(),
        network=network,
    )


def _report_failure(text: str) -> None:
    """One line on stderr: which ranks ended the job, and how."""
    print(f"gridcoll mpirun: {' '.join(text.split())}", file=sys.stderr)
