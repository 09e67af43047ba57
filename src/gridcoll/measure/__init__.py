"""Measuring the network: P-LogP parameters, link matrices, clusters found from them.

* :mod:`~gridcoll.measure.plogp_procedure` -- seed 000's efficient P-LogP measurement
  (sec. 2.2) as a sans-I/O procedure: it decides the next probe from the results so far;
* :mod:`~gridcoll.measure.transport` -- its MPI side (*measure* and *mirror* over
  mpi4py, below them the runtime's WAN emulation); :mod:`~gridcoll.measure.synthetic`
  -- a synthetic network for tests;
* :mod:`~gridcoll.measure.link` -- :func:`measure_plogp` between two ranks;
* :mod:`~gridcoll.measure.matrix` -- seed 001's latency and bandwidth matrices between
  cluster representatives (:func:`measure_matrix`, :func:`monitor`);
* :mod:`~gridcoll.measure.discover` -- clusters from rank-to-rank measurements
  (:func:`discover`, :func:`find_clusters`, seed 001's :func:`pools`), and grids built
  from what was measured;
* :mod:`~gridcoll.measure.plot` -- ``os``, ``or`` and ``g`` against ``m`` (seed 000,
  figure 2).

The MPI functions are collective and need mpi4py (imported when called); the rest does
not.
"""

from gridcoll.errors import MeasurementError
from gridcoll.measure.discover import (
    Clustering,
    discover,
    find_clusters,
    grid_from_matrices,
    grid_from_tables,
    pairwise_matrices,
    pool_sets,
    pools,
)
from gridcoll.measure.link import LinkMeasurement, measure_plogp
from gridcoll.measure.matrix import LinkEstimate, LinkMatrices, measure_matrix, monitor, probe_link
from gridcoll.measure.plogp_procedure import (
    Cost,
    GapProbe,
    PLogPMeasurement,
    PLogPProcedure,
    Point,
    Sample,
    Settings,
    SizeProbe,
    run_procedure,
    saturation_cost,
)
from gridcoll.measure.synthetic import SyntheticTransport

__all__ = [
    "Clustering",
    "Cost",
    "GapProbe",
    "LinkEstimate",
    "LinkMatrices",
    "LinkMeasurement",
    "MeasurementError",
    "PLogPMeasurement",
    "PLogPProcedure",
    "Point",
    "Sample",
    "Settings",
    "SizeProbe",
    "SyntheticTransport",
    "discover",
    "find_clusters",
    "grid_from_matrices",
    "grid_from_tables",
    "measure_matrix",
    "measure_plogp",
    "monitor",
    "pairwise_matrices",
    "pool_sets",
    "pools",
    "probe_link",
    "run_procedure",
    "saturation_cost",
]
