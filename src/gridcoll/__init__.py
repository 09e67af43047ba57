"""gridcoll: fast collective communication on multi-cluster, wide-area systems.

Layers (see docs/architecture.md): network -> schedule -> algorithms -> models ->
simulate -> tune -> runtime, with cli and plot on top.
"""

from gridcoll.errors import (
    GridcollError,
    GridError,
    ParameterError,
    ScheduleError,
    Unfeasible,
    UnknownAlgorithm,
)
from gridcoll.network import Grid, PLogP, get_grid

__version__ = "0.1.0"

__all__ = [
    "Grid",
    "GridError",
    "GridcollError",
    "PLogP",
    "ParameterError",
    "ScheduleError",
    "Unfeasible",
    "UnknownAlgorithm",
    "__version__",
    "get_grid",
]

# gridcoll.Comm needs mpi4py, and importing mpi4py.MPI initialises MPI: load it on first
# use (PEP 562), so `import gridcoll` stays fast and works without mpi4py.
if __import__("importlib.util").util.find_spec("mpi4py") is not None:
    __all__ += ["Comm"]


def __getattr__(name: str):
    if name == "Comm":
        from gridcoll.runtime.comm import Comm

        return Comm
    raise AttributeError(f"module 'gridcoll' has no attribute {name!r}")
