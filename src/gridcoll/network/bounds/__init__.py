"""Physical limits of a collective on a grid: the figures every benchmark reports against.

Lower bounds on the completion time of a collective call, each valid alone against the
simulator's semantics of docs/architecture.md (cut-through FIFO resources, ``os``/``or``,
``L``); :attr:`Bound.time_s` is the largest. They are gridcoll's own (docs/architecture.md,
"Where each paper formula lives"), on seed 000's P-LogP parameters (sec. 2.1).

* :mod:`gridcoll.network.bounds.flows` - the link-capacity graph, its cluster quotient,
  max-flow and minimum cuts, and the clusters that carry equal flows;
* :mod:`gridcoll.network.bounds.paths` - the least latencies along paths between
  clusters;
* :mod:`gridcoll.network.bounds.broadcast` - the latency, throughput and windowed-cut
  bounds of a broadcast: :func:`broadcast_bound`;
* :mod:`gridcoll.network.bounds.collectives` - the cut bounds of the other collectives
  and the prefix bound of scan: :func:`collective_bound`.

Everything derived from the grid is memoised in ``grid.memo``.
"""

from gridcoll.network.bounds.broadcast import (
    NEWTON_STEPS,
    Bound,
    broadcast_bound,
    latency_bound,
    throughput_rate,
    windowed_time,
)
from gridcoll.network.bounds.collectives import (
    BOUND_OPS,
    PREFIX_CUTS,
    collective_bound,
    set_flow,
    site_groups,
)
from gridcoll.network.bounds.flows import (
    MEMO_SIZE,
    FlowGraph,
    RankClass,
    capacity_graph,
    cluster_classes,
    peak_rate,
    quotient_graph,
)

__all__ = [
    "BOUND_OPS",
    "MEMO_SIZE",
    "NEWTON_STEPS",
    "PREFIX_CUTS",
    "Bound",
    "FlowGraph",
    "RankClass",
    "broadcast_bound",
    "capacity_graph",
    "cluster_classes",
    "collective_bound",
    "latency_bound",
    "peak_rate",
    "quotient_graph",
    "set_flow",
    "site_groups",
    "throughput_rate",
    "windowed_time",
]
