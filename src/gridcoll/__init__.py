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
