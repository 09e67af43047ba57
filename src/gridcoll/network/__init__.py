"""The network layer: P-LogP parameters, grids, presets, the grid file, bounds."""

from gridcoll.network.bounds import (
    Bound,
    broadcast_bound,
    capacity_graph,
    collective_bound,
    latency_bound,
    throughput_rate,
)
from gridcoll.network.grid import (
    Cluster,
    Grid,
    Link,
    Route,
    host_pattern,
    place_by_host,
    placement_summary,
)
from gridcoll.network.gridfile import grid_from_dict, grid_to_dict, load_grid, save_grid
from gridcoll.network.load import Load, LoadTrace, read_load, seed001_trace
from gridcoll.network.plogp import LogGP, PiecewiseLinear, PLogP, r_w, s_w
from gridcoll.network.presets import (
    PRESETS,
    das2,
    das2_spread,
    get_grid,
    lan,
    magpie,
    teragrid,
    transit_stub,
)

__all__ = [
    "PRESETS",
    "Bound",
    "Cluster",
    "Grid",
    "Link",
    "Load",
    "LoadTrace",
    "LogGP",
    "PLogP",
    "PiecewiseLinear",
    "Route",
    "broadcast_bound",
    "capacity_graph",
    "collective_bound",
    "das2",
    "das2_spread",
    "get_grid",
    "grid_from_dict",
    "grid_to_dict",
    "host_pattern",
    "lan",
    "latency_bound",
    "load_grid",
    "magpie",
    "place_by_host",
    "placement_summary",
    "r_w",
    "read_load",
    "s_w",
    "save_grid",
    "seed001_trace",
    "teragrid",
    "throughput_rate",
    "transit_stub",
]
