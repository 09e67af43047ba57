"""The runtime: schedules run over MPI, the WAN emulation, and ``gridcoll.Comm``.

* :mod:`~gridcoll.runtime.executor` runs one rank's program of any schedule with
  non-blocking point-to-point calls on views of the user's buffer, never spinning;
* :mod:`~gridcoll.runtime.emulation` holds cross-cluster messages for the link latency
  and serialises them at the link bandwidth, below every algorithm;
* :mod:`~gridcoll.runtime.comm` is :class:`Comm`, the mpi4py-style API;
* :mod:`~gridcoll.runtime.launcher` starts ``mpiexec`` on a grid (``gridcoll run``,
  ``gridcoll mpirun``); :mod:`~gridcoll.runtime.worker` is what ``gridcoll run`` starts.

Importing this package needs mpi4py (it initialises MPI).
"""

from gridcoll.runtime.comm import Comm, FixedPlan
from gridcoll.runtime.emulation import Emulator, LinkState, create_link_state, subgrid
from gridcoll.runtime.executor import (
    CallInfo,
    CollectiveError,
    CollectiveTimeout,
    MismatchError,
    Program,
    compile_program,
    execute,
)

__all__ = [
    "CallInfo",
    "CollectiveError",
    "CollectiveTimeout",
    "Comm",
    "Emulator",
    "FixedPlan",
    "LinkState",
    "MismatchError",
    "Program",
    "compile_program",
    "create_link_state",
    "execute",
    "subgrid",
]
