"""The ``gridcoll`` entry point: an argparse parser with one subcommand per module.

Each module in :data:`COMMANDS` has ``add_parser(subparsers)``, which adds its
subcommand and sets ``func=run`` on it, and ``run(args) -> int``. Errors derived from
:class:`~gridcoll.errors.GridcollError`, and argument mistakes, become one line
``gridcoll: error: <message>`` on stderr and exit status 2, never a traceback.

SIGINT, SIGTERM and SIGHUP end a command the same way: each raises :class:`Interrupted`
(a ``KeyboardInterrupt``) in the main thread, so every launch on the way out stops its
MPI job and removes its files (:class:`gridcoll.runtime.processes.LaunchedJob`); the
command prints ``gridcoll: interrupted by SIGTERM`` and exits with ``128 + signal``
(130 for SIGINT). A signal the caller set to be ignored (``nohup``) stays ignored, and
further signals during that clean-up are ignored so that it completes (it is bounded).
"""

from __future__ import annotations

import argparse
import contextlib
import signal
import sys
import threading
from collections.abc import Iterator, Sequence

from gridcoll import __version__
from gridcoll.cli import (
    algorithms,
    compare,
    demo,
    discover,
    measure,
    mpirun,
    netns,
    phoenix,
    plan,
    report,
    run,
    scenario,
    simulate,
)
from gridcoll.errors import GridcollError, UsageError

__all__ = [
    "COMMANDS",
    "EXIT_ERROR",
    "INTERRUPTS",
    "PROGRAM_EPILOG",
    "Interrupted",
    "build_parser",
    "command_names",
    "interrupts_raise",
    "main",
]

COMMANDS = [
    algorithms,
    plan,
    simulate,
    compare,
    demo,
    run,
    mpirun,
    report,
    measure,
    discover,
    netns,
    scenario,
    phoenix,
]
"""The subcommand modules, in the order ``gridcoll --help`` lists them."""

EXIT_ERROR = 2
"""Exit status for bad input (as argparse uses for usage errors)."""


INTERRUPTS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
"""The signals that interrupt a command (and stop its MPI job) instead of killing it."""


class Interrupted(KeyboardInterrupt):
    """The command received ``signum`` (one of :data:`INTERRUPTS`).

    A ``KeyboardInterrupt``, so that the clean-up written for Ctrl-C (``finally``
    blocks, context managers, ``except BaseException``) runs for SIGTERM and SIGHUP too.
    """

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


@contextlib.contextmanager
def interrupts_raise() -> Iterator[None]:
    """Within the block, the first of :data:`INTERRUPTS` raises :class:`Interrupted`
    in the main thread; later ones are ignored, so the clean-up that the first one
    started is not cut short. A signal set to be ignored, or handled by someone else
    (not Python's default), is left alone; the previous handlers are restored after.
    Outside the main thread (where Python cannot set handlers) this does nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    raised = False

    def interrupt(signum: int, frame: object) -> None:
        nonlocal raised
        if raised:
            return
        raised = True
        raise Interrupted(signum)

    previous = {}
    for sig in INTERRUPTS:
        current = signal.getsignal(sig)
        if current in (signal.SIG_DFL, signal.default_int_handler):
            previous[sig] = signal.signal(sig, interrupt)
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


class _Parser(argparse.ArgumentParser):
    """An ArgumentParser that raises instead of printing usage and exiting."""

    def error(self, message: str) -> None:  # type: ignore[override]
        command = self.prog.removeprefix("gridcoll").strip()
        where = f" (see 'gridcoll {command} --help')" if command else " (see 'gridcoll --help')"
        raise UsageError(message + where)


PROGRAM_EPILOG = (
    "python -m gridcoll also runs an unchanged mpi4py program with MPI.COMM_WORLD a "
    "gridcoll.Comm, as python -m mpi4py runs one: python -m gridcoll app.py [args], "
    "-m module [args], -c code [args], - [args] (a first argument that is -m, -c, -, or a "
    "file that is no COMMAND). For every Python process of a job: gridcoll mpirun --world."
)
"""How ``python -m gridcoll`` tells a program from a command (``gridcoll.__main__``),
at the end of ``gridcoll --help``."""


def build_parser() -> argparse.ArgumentParser:
    """The full parser: ``gridcoll [--version] COMMAND ...``."""
    parser = _Parser(
        prog="gridcoll",
        description="Collective communication schedules for multi-cluster wide-area grids.",
        epilog=PROGRAM_EPILOG,
    )
    parser.add_argument("--version", action="version", version=f"gridcoll {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for module in COMMANDS:
        module.add_parser(subparsers)
    return parser


def command_names() -> list[str]:
    """The subcommands' names, in the order ``gridcoll --help`` lists them."""
    parser = build_parser()
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return list(action.choices)


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; return its exit status (0 on success, 2 on bad input,
    ``128 + signal`` when interrupted: 130 for SIGINT, 143 for SIGTERM, 129 for SIGHUP)."""
    with interrupts_raise():
        try:
            args = build_parser().parse_args(argv)
            return int(args.func(args))
        except GridcollError as err:
            print(f"gridcoll: error: {_one_line(err)}", file=sys.stderr)
            return EXIT_ERROR
        except KeyboardInterrupt as err:
            signum = getattr(err, "signum", signal.SIGINT)
            print(f"gridcoll: interrupted by {signal.Signals(signum).name}", file=sys.stderr)
            return 128 + signum


def _one_line(err: BaseException) -> str:
    return " ".join(str(err).split()) or type(err).__name__


if __name__ == "__main__":
    sys.exit(main())
