"""Models of the multi-path scatter and gather (:mod:`gridcoll.algorithms.multipath`).

Every segment message returns at once, so the routes work together and the call ends
when the busiest resource has carried its load and the last segment has made its way:
``T = max_x W_x + max_routes (sum L + g(m))``, ``W_x`` the total occupancy of resource
``x`` (a NIC, a gateway, a wide-area link, a rank's CPU) over every message
(:func:`gridcoll.algorithms.multipath.segment_loads`), as the tree-packing models
charge theirs (:mod:`gridcoll.models.packing`).
"""

from __future__ import annotations

from gridcoll.algorithms.multipath import check_relayable, segment_loads
from gridcoll.models.single_layer import check_model_call
from gridcoll.network.grid import Grid

__all__ = [
    "MODELS",
    "multipath_alltoall_model",
    "multipath_gather_model",
    "multipath_scatter_model",
]


def _model(op: str, grid: Grid, nbytes: int, root: int, segment_size: int, itemsize: int) -> float:
    m = check_model_call(grid, nbytes, root, itemsize, segment_size)
    check_relayable(op, grid, nbytes, m)  # the builder declines too
    if grid.nranks < 2:
        return 0.0
    load, way = segment_loads(op, grid, root, nbytes, m)
    return max(load.values(), default=0.0) + way


def multipath_scatter_model(
    grid: Grid, nbytes: int, root: int = 0, *, segment_size: int, itemsize: int = 1
) -> float:
    """Model of :func:`~gridcoll.algorithms.multipath.multipath_scatter` (module
    docstring). O(P C)."""
    return _model("scatter", grid, nbytes, root, segment_size, itemsize)


def multipath_gather_model(
    grid: Grid, nbytes: int, root: int = 0, *, segment_size: int, itemsize: int = 1
) -> float:
    """Model of :func:`~gridcoll.algorithms.multipath.multipath_gather`. O(P C)."""
    return _model("gather", grid, nbytes, root, segment_size, itemsize)


def multipath_alltoall_model(
    grid: Grid, nbytes: int, root: int = 0, *, segment_size: int, itemsize: int = 1
) -> float:
    """Model of :func:`~gridcoll.algorithms.multipath.multipath_alltoall`. O(P^2 C)."""
    return _model("alltoall", grid, nbytes, root, segment_size, itemsize)


MODELS = {
    ("scatter", "multipath"): multipath_scatter_model,
    ("gather", "multipath"): multipath_gather_model,
    ("alltoall", "multipath"): multipath_alltoall_model,
}
"""The multi-path models, by ``(op, name)``."""
