"""Make ``mpi4py.MPI.COMM_WORLD`` a :class:`gridcoll.Comm`: unchanged mpi4py programs.

An mpi4py program reaches the world communicator by name: ``MPI.COMM_WORLD``, ``from
mpi4py.MPI import COMM_WORLD``, a library's default argument ``comm=MPI.COMM_WORLD``.
:func:`swap` replaces that one attribute of the ``mpi4py.MPI`` module by
``gridcoll.Comm(<the original COMM_WORLD>, **options)`` (the same MPI handle), so
every lookup made afterwards gets gridcoll's collectives; ``COMM_SELF`` stays mpi4py's.
An object that took mpi4py's ``COMM_WORLD`` before the swap keeps it.

Three ways to swap before a program looks:

* :func:`swap` in the program itself (it needs MPI initialised: it imports
  ``mpi4py.MPI``);
* :func:`swap_on_import`, a finder on ``sys.meta_path`` (:class:`SwapOnImport`) that
  loads ``mpi4py.MPI`` with its own loader and swaps right after, when the process
  first imports it: a process that never does is left alone (importing ``mpi4py.MPI``
  initialises MPI, so the hook never imports it itself), and ``mpi4py.rc`` set by the
  program before that import is honoured;
* :func:`run_program`: ``python -m gridcoll app.py [args]``, ``-m module``, ``-c code``
  or ``-`` run a program as ``python -m mpi4py`` does (:mod:`mpi4py.run`: the same
  ``sys.argv`` and ``sys.path``, and an uncaught exception ends the job with
  ``MPI_Abort``), with the hook installed before its first line.

``gridcoll mpirun --world`` (or ``GRIDCOLL_WORLD=1``) reaches every Python process of
the job, whatever the command: the launcher puts :data:`SITE_DIR` first on
``PYTHONPATH`` (:func:`environment`); the ``sitecustomize`` there installs the hook in
every interpreter that starts with ``GRIDCOLL_WORLD`` set, without importing gridcoll
until the process imports ``mpi4py.MPI``, then runs the next ``sitecustomize`` on
``sys.path`` (a site's own).

Pickling follows mpi4py, which pickles predefined communicators by name: the swapped
``COMM_WORLD`` unpickles to ``MPI.COMM_WORLD`` of the unpickling process
(``Comm.__reduce__``). mpi4py's original object, reachable through plain views such
as ``MPI.Intracomm(MPI.COMM_WORLD)``, reduces to the name ``"COMM_WORLD"``, which after
the swap names another object, so the pickler would refuse it; :func:`swap` registers
a reduction for ``MPI.Intracomm`` (``copyreg``) that pickles it the way the name's
current object pickles, and leaves every other ``MPI.Intracomm`` to mpi4py.

Where this sits in :mod:`gridcoll.runtime`: after ``comm`` (which it imports inside
functions only, so that importing this module loads neither mpi4py nor MPI); the
launcher imports it for :func:`environment`.
"""

from __future__ import annotations

import copyreg as _copyreg
import importlib as _importlib
import importlib.abc as _abc
import os as _os
import sys as _sys
import warnings as _warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

from gridcoll.errors import ParameterError

__all__ = [
    "ENV_WORLD",
    "HOOK_MARK",
    "MPI_MODULE",
    "PROGRAM_FLAGS",
    "SITE_DIR",
    "SwapOnImport",
    "check_program",
    "environment",
    "requested",
    "run_program",
    "swap",
    "swap_on_import",
    "swapped",
]

ENV_WORLD = "GRIDCOLL_WORLD"
"""Set (and not ``0``) in a job's environment: every Python process swaps
``COMM_WORLD`` when it imports ``mpi4py.MPI`` (``gridcoll mpirun --world``)."""

MPI_MODULE = "mpi4py.MPI"
"""The module whose ``COMM_WORLD`` is swapped, and whose import the hook watches."""

SITE_DIR = Path(__file__).resolve().parent / "world-site"
"""The directory holding gridcoll's ``sitecustomize.py`` (package data, not a package),
put first on ``PYTHONPATH`` by :func:`environment`."""

HOOK_MARK = "gridcoll_world_hook"
"""An attribute (true) of the finder gridcoll's ``sitecustomize`` installs, which hands
the import of ``mpi4py.MPI`` over to a :class:`SwapOnImport`: skipped when a
:class:`SwapOnImport` looks for the module's real spec."""

PROGRAM_FLAGS = ("-m", "-c", "-")
"""The first arguments of :func:`run_program` that name no file: a module, a command
string, standard input (as for ``python`` and ``python -m mpi4py``)."""


def requested(environ: Mapping[str, str] | None = None) -> bool:
    """Whether ``environ`` (default ``os.environ``) asks for the swap: ``GRIDCOLL_WORLD``
    set to anything but empty or ``0``."""
    environ = _os.environ if environ is None else environ
    return environ.get(ENV_WORLD, "").strip() not in ("", "0")


def environment(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The variables a launch adds so every Python process of its job swaps
    ``COMM_WORLD`` when it imports ``mpi4py.MPI``: ``GRIDCOLL_WORLD=1`` and
    ``PYTHONPATH`` with :data:`SITE_DIR` first (``environ``'s entries kept after it).

    Parameters
    ----------
    environ : mapping, optional
        The environment the job starts from (default ``os.environ``).

    Returns
    -------
    dict
        ``{"GRIDCOLL_WORLD": "1", "PYTHONPATH": ...}``, to be added to ``environ``.
    """
    environ = _os.environ if environ is None else environ
    rest = [p for p in environ.get("PYTHONPATH", "").split(_os.pathsep) if p and p != str(SITE_DIR)]
    return {ENV_WORLD: "1", "PYTHONPATH": _os.pathsep.join([str(SITE_DIR), *rest])}


def swapped() -> bool:
    """Whether ``mpi4py.MPI.COMM_WORLD`` is a :class:`gridcoll.Comm` (False while
    ``mpi4py.MPI`` is not imported; never imports it)."""
    module = _sys.modules.get(MPI_MODULE)
    if module is None:
        return False
    from gridcoll.runtime.comm import Comm

    return isinstance(getattr(module, "COMM_WORLD", None), Comm)


def swap(**options: Any) -> Any:
    """Replace ``mpi4py.MPI.COMM_WORLD`` by ``gridcoll.Comm(COMM_WORLD, **options)``.

    Imports ``mpi4py.MPI`` (which initialises MPI unless ``mpi4py.rc.initialize`` is
    false). Idempotent: when ``COMM_WORLD`` is already a :class:`gridcoll.Comm` and no
    ``options`` are given, that one is returned; with ``options`` a new ``Comm`` around
    the same handle replaces it (objects that took the previous one keep it). Never a
    ``Comm`` wrapping a ``Comm``. ``COMM_SELF`` is not touched.

    Parameters
    ----------
    **options
        Keyword arguments of :class:`gridcoll.Comm` (``grid``, ``algo``, ``params``,
        ``timeout``, ``host_overhead``, ``log``, ``adaptive``); by default each is read
        from the environment as ``Comm`` reads it (``GRIDCOLL_GRID``, ``GRIDCOLL_ALGO``...).

    Returns
    -------
    gridcoll.Comm
        The new ``MPI.COMM_WORLD``.

    Raises
    ------
    RuntimeError
        MPI is not initialised (``mpi4py.rc.initialize = False`` and no ``MPI.Init``
        yet) or already finalised.

    Notes
    -----
    Making the ``Comm`` is local, as ``gridcoll.Comm(MPI.COMM_WORLD)`` is, except on a
    grid placed by host, where every rank gathers the ranks' host names: then every
    rank must swap (or import ``mpi4py.MPI`` under the hook).
    """
    return _swap_in(_importlib.import_module(MPI_MODULE), options)


def _swap_in(mpi: ModuleType, options: Mapping[str, Any]) -> Any:
    """:func:`swap` on the module object ``mpi`` (also while it is being imported)."""
    from gridcoll.runtime.comm import Comm

    current = mpi.COMM_WORLD
    if isinstance(current, Comm) and not options:
        return current
    if not mpi.Is_initialized() or mpi.Is_finalized():
        state = "finalized" if mpi.Is_finalized() else "not initialized"
        raise RuntimeError(f"cannot swap MPI.COMM_WORLD: MPI is {state}")
    world = Comm(mpi.Intracomm(current), **options)  # the handle, never a Comm in a Comm
    mpi.COMM_WORLD = world
    _copyreg.pickle(mpi.Intracomm, _reduce_intracomm)
    return world


def _reduce_intracomm(comm: Any) -> str | tuple:
    """mpi4py's reduction of a plain ``MPI.Intracomm``, except for mpi4py's original
    object of a predefined name that is now another object (the swapped
    ``COMM_WORLD``): that one pickles as the name's current object does, so it
    unpickles to ``MPI.COMM_WORLD`` of the unpickling process, as before the swap."""
    reduced = comm.__reduce__()  # a name, (__newobj__, (cls, predefined)), or ValueError
    if isinstance(reduced, str):
        current = getattr(_sys.modules[MPI_MODULE], reduced, comm)
        if current is not comm:
            return current.__reduce__()
    return reduced


class SwapOnImport(_abc.MetaPathFinder):
    """A ``sys.meta_path`` finder: loads ``mpi4py.MPI`` with the loader the other
    finders give it, then swaps ``COMM_WORLD`` with ``options`` (:func:`swap`) before
    the import returns, and leaves ``sys.meta_path``.

    It imports nothing itself; every other module is left to the other finders. If MPI
    is not initialised by the import (``mpi4py.rc.initialize = False``), it warns and
    does not swap (call :func:`swap` after ``MPI.Init()``).
    """

    def __init__(self, **options: Any):
        self.options = dict(options)

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> Any:
        """The spec of ``mpi4py.MPI`` with a swapping loader; None for other modules."""
        if fullname != MPI_MODULE:
            return None
        for finder in list(_sys.meta_path):
            if isinstance(finder, SwapOnImport) or getattr(finder, HOOK_MARK, False):
                continue
            if not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None:
                break
        else:
            return None
        if spec.loader is not None:
            spec.loader = _SwappingLoader(spec.loader, self)
        return spec

    def swap_into(self, module: ModuleType) -> None:
        """Leave ``sys.meta_path`` and swap ``module``'s ``COMM_WORLD``."""
        if self in _sys.meta_path:
            _sys.meta_path.remove(self)
        if not module.Is_initialized():
            _warnings.warn(
                "MPI is not initialized after importing mpi4py.MPI (mpi4py.rc.initialize "
                "is false): MPI.COMM_WORLD stays mpi4py's; call "
                "gridcoll.runtime.world.swap() after MPI.Init()",
                RuntimeWarning,
                stacklevel=2,
            )
            return
        _swap_in(module, self.options)


class _SwappingLoader(_abc.Loader):
    """``mpi4py.MPI``'s own loader, then the swap; everything else delegated to it."""

    def __init__(self, loader: Any, finder: SwapOnImport):
        self.loader = loader
        self.finder = finder

    def create_module(self, spec: Any) -> ModuleType | None:
        return self.loader.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        self.loader.exec_module(module)
        self.finder.swap_into(module)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.loader, name)


def swap_on_import(**options: Any) -> SwapOnImport | None:
    """Swap ``COMM_WORLD`` (:func:`swap` with ``options``) when the process imports
    ``mpi4py.MPI``: a :class:`SwapOnImport` first on ``sys.meta_path``.

    If ``mpi4py.MPI`` is already imported, swap now and return None; if a hook is
    already installed, it is kept and returned (its options win).
    """
    module = _sys.modules.get(MPI_MODULE)
    if module is not None:
        _swap_in(module, options)
        return None
    for finder in _sys.meta_path:
        if isinstance(finder, SwapOnImport):
            return finder
    finder = SwapOnImport(**options)
    _sys.meta_path.insert(0, finder)
    return finder


def check_program(argv: Sequence[str]) -> None:
    """Raise :class:`~gridcoll.errors.ParameterError` unless ``argv`` names a program
    :func:`run_program` can start: ``pyfile [args]`` (an existing file), ``-m module
    [args]``, ``-c code [args]`` or ``- [args]``."""
    if not argv:
        raise ParameterError("no program given: python -m gridcoll app.py [args]")
    first = argv[0]
    if first in ("-m", "-c") and len(argv) < 2:
        what = "a module name" if first == "-m" else "a command string"
        raise ParameterError(f"{first} needs {what}: python -m gridcoll {first} ARG [args]")
    if first not in PROGRAM_FLAGS and not _os.path.isfile(first):
        raise ParameterError(f"cannot open file {first!r}: no such file")


def run_program(argv: Sequence[str], **options: Any) -> int:
    """Run a Python program as ``python -m mpi4py`` does, ``COMM_WORLD`` swapped.

    ``argv`` is ``pyfile [args]``, ``-m module [args]``, ``-c code [args]`` or ``-
    [args]`` (the program on standard input); the program sees ``sys.argv`` and
    ``sys.path`` as under ``python`` (:func:`mpi4py.run.run_command_line`). The hook
    (:func:`swap_on_import` with ``options``) is installed before its first line: the
    program's first ``import mpi4py.MPI`` initialises MPI and swaps. An uncaught
    exception (or ``SystemExit`` with a failure status) ends the job with
    ``MPI_Abort`` when MPI is in use, as ``python -m mpi4py`` does, and is re-raised.

    Returns
    -------
    int
        0 when the program ran to its end (``SystemExit`` propagates).

    Raises
    ------
    ParameterError
        ``argv`` names no program (:func:`check_program`), before anything runs.
    """
    check_program(argv)
    from mpi4py.run import run_command_line, set_abort_status  # mpi4py.MPI not imported

    swap_on_import(**options)
    try:
        run_command_line(list(argv))
    except (SystemExit, KeyboardInterrupt) as exc:
        set_abort_status(exc)
        raise
    except BaseException:
        set_abort_status(1)
        raise
    return 0
