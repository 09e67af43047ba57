"""The ``gridcoll`` entry point: an argparse parser with one subcommand per module.

Each module in :data:`COMMANDS` has ``add_parser(subparsers)``, which adds its
subcommand and sets ``func=run`` on it, and ``run(args) -> int``. Errors derived from
:class:`~gridcoll.errors.GridcollError`, and argument mistakes, become one line
``gridcoll: error: <message>`` on stderr and exit status 2, never a traceback.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from gridcoll import __version__
from gridcoll.cli import algorithms, compare, demo, discover, measure, mpirun, plan, run, simulate
from gridcoll.errors import GridcollError

__all__ = ["COMMANDS", "EXIT_ERROR", "UsageError", "build_parser", "main"]

COMMANDS = [algorithms, plan, simulate, compare, demo, run, mpirun, measure, discover]
"""The subcommand modules, in the order ``gridcoll --help`` lists them."""

EXIT_ERROR = 2
"""Exit status for bad input (as argparse uses for usage errors)."""


class UsageError(GridcollError):
    """The command line itself is malformed (unknown option, missing argument...)."""


class _Parser(argparse.ArgumentParser):
    """An ArgumentParser that raises instead of printing usage and exiting."""

    def error(self, message: str) -> None:  # type: ignore[override]
        command = self.prog.removeprefix("gridcoll").strip()
        where = f" (see 'gridcoll {command} --help')" if command else " (see 'gridcoll --help')"
        raise UsageError(message + where)


def build_parser() -> argparse.ArgumentParser:
    """The full parser: ``gridcoll [--version] COMMAND ...``."""
    parser = _Parser(
        prog="gridcoll",
        description="Collective communication schedules for multi-cluster wide-area grids.",
    )
    parser.add_argument("--version", action="version", version=f"gridcoll {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for module in COMMANDS:
        module.add_parser(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; return its exit status (0 on success, 2 on bad input)."""
    try:
        args = build_parser().parse_args(argv)
        return int(args.func(args))
    except GridcollError as err:
        print(f"gridcoll: error: {_one_line(err)}", file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        print("gridcoll: interrupted", file=sys.stderr)
        return 130


def _one_line(err: BaseException) -> str:
    return " ".join(str(err).split()) or type(err).__name__


if __name__ == "__main__":
    sys.exit(main())
