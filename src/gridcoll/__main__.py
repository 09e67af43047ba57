"""``python -m gridcoll``: the ``gridcoll`` command, or an mpi4py program run on gridcoll.

``python -m gridcoll COMMAND ...`` is the ``gridcoll`` command. ``python -m gridcoll
app.py [args]``, ``-m module [args]``, ``-c code [args]`` and ``- [args]`` (the program
on standard input) run an unchanged mpi4py program as ``python -m mpi4py`` does, with
``MPI.COMM_WORLD`` a :class:`gridcoll.Comm` (:func:`gridcoll.runtime.world.run_program`);
:func:`runs_program` tells the two apart.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

__all__ = ["main", "runs_program"]


def runs_program(argv: Sequence[str]) -> bool:
    """Whether ``python -m gridcoll ARGV`` runs a program rather than a command.

    A program when the first argument is ``-m``, ``-c`` or ``-``, or a file (an
    existing file, or any name ending in ``.py``) that is not the name of a ``gridcoll``
    subcommand; anything else (a subcommand, ``--help``, ``--version``, nothing) is the
    command line of ``gridcoll``.
    """
    from gridcoll.runtime.world import PROGRAM_FLAGS

    if not argv:
        return False
    first = argv[0]
    if first in PROGRAM_FLAGS:
        return True
    if first.startswith("-") or not (first.endswith(".py") or os.path.isfile(first)):
        return False
    from gridcoll.cli.main import command_names

    return first not in command_names()


def main(argv: Sequence[str] | None = None) -> int:
    """Run the program or the command of ``argv`` (default ``sys.argv[1:]``); return the
    exit status (a bad program line: one ``gridcoll: error:`` line, status 2)."""
    argv = sys.argv[1:] if argv is None else list(argv)
    if not runs_program(argv):
        from gridcoll.cli.main import main as command

        return command(argv)
    from gridcoll.errors import ParameterError
    from gridcoll.runtime.world import check_program, run_program

    try:
        check_program(argv)
    except ParameterError as err:
        print(f"gridcoll: error: {err}", file=sys.stderr)
        return 2
    return run_program(argv)


if __name__ == "__main__":
    raise SystemExit(main())
