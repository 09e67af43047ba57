"""The runtime: schedules run over MPI, the WAN emulation, and ``gridcoll.Comm``.

* :mod:`~gridcoll.runtime.executor` runs one rank's program of any schedule with
  non-blocking point-to-point calls on views of the user's buffer, never spinning;
* :mod:`~gridcoll.runtime.emulation` holds cross-cluster messages for the link latency
  and serialises them at the link bandwidth, below every algorithm;
* :mod:`~gridcoll.runtime.comm` is :class:`Comm`, the mpi4py-style API, whose methods
  are one-liners over :mod:`~gridcoll.runtime.collectives`;
* :mod:`~gridcoll.runtime.supervisor` starts a program under ``mpiexec`` on a grid and
  watches it (``gridcoll mpirun``, ``gridcoll run``, ``gridcoll measure``), over
  :mod:`~gridcoll.runtime.processes` (the job's processes and files);
  :mod:`~gridcoll.runtime.worker` is the program ``gridcoll run`` starts, and how to
  start it.

* :mod:`~gridcoll.runtime.host` is the runtime's per-message host overhead, which the
  runtime adds to the grid it plans and simulates on.

The modules behind ``Comm``, each importing only the ones before it: ``buffers``
(mpi4py's buffer specs), ``state`` (a communicator's grid, options, private
communicator and caches), ``prepare`` (the one path from a call to its plan, compiled
program and layout, and running it), ``mpi_ops`` (MPI reduction operations: checks,
labels, the combine), ``collectives`` (one helper per buffer collective over one
preamble driven by a table), ``objects`` (the pickled object forms), ``comm`` (the
class). Below them: ``choice``, ``host``, ``layout``, ``watchdog``,
``doorbell``, ``emulation``, ``header`` (the call header every receiver checks),
``notices`` (how a failure is told to the other ranks) and ``executor`` (which uses
the ones before it).

Importing :mod:`~gridcoll.runtime.comm` or :mod:`~gridcoll.runtime.executor` (or using
``gridcoll.runtime.Comm``) needs mpi4py and initialises MPI; the supervisor, the
emulation and the host-overhead module do not.
"""

import importlib as _importlib

from gridcoll.errors import CollectiveError, CollectiveTimeout, MismatchError

_EXPORTS = {
    "CallInfo": "header",
    "Comm": "comm",
    "Emulator": "emulation",
    "LinkState": "emulation",
    "Program": "executor",
    "compile_program": "executor",
    "create_link_state": "emulation",
    "execute": "executor",
    "subgrid": "emulation",
}

__all__ = [
    "CallInfo",
    "CollectiveError",
    "CollectiveTimeout",
    "Comm",
    "Emulator",
    "LinkState",
    "MismatchError",
    "Program",
    "compile_program",
    "create_link_state",
    "execute",
    "subgrid",
]


def __getattr__(name: str):
    # Loaded on first use (PEP 562): importing mpi4py.MPI initialises MPI, which the
    # supervisor, the host-overhead calibration and the emulation's link state do not need
    # (gridcoll run and gridcoll demo start mpiexec without becoming MPI processes).
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'gridcoll.runtime' has no attribute {name!r}")
    return getattr(_importlib.import_module(f"gridcoll.runtime.{module}"), name)
