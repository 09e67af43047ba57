"""The documented limits: what gridcoll accepts, so that work stays bounded.

A few bytes of input must not buy minutes of work or gigabytes of memory. Every entry
point checks its inputs against these before doing anything (docs/grid-format.md and
the README list them):

* :data:`MAX_RANKS`, :data:`MAX_CLUSTERS` -- the largest grid (a preset, a file);
* :data:`MAX_MESSAGE_BYTES` -- the largest collective call (MPI's ``int`` count of
  bytes); :data:`MAX_SEGMENTS` -- the most segments one call may be cut into;
* :data:`MAX_TIME_S`, :data:`MIN_BANDWIDTH`, :data:`MAX_BANDWIDTH` -- the range of a
  P-LogP table's latencies, overheads, gaps and bandwidths;
* :data:`MAX_FILE_BYTES`, :data:`MAX_JSON_DEPTH` -- grid and P-LogP files;
* :data:`MAX_LOG_BYTES` -- a call log read by ``gridcoll report``;
* :data:`MAX_BUDGET_S` -- a planning budget;
* :data:`MAX_HOST_PATTERNS` -- the host patterns of a grid placed by host.
"""

from __future__ import annotations

__all__ = [
    "MAX_BANDWIDTH",
    "MAX_BUDGET_S",
    "MAX_CLUSTERS",
    "MAX_FILE_BYTES",
    "MAX_HOST_PATTERNS",
    "MAX_JSON_DEPTH",
    "MAX_LOG_BYTES",
    "MAX_MESSAGE_BYTES",
    "MAX_NAME_CHARS",
    "MAX_RANKS",
    "MAX_SEGMENTS",
    "MAX_TIME_S",
    "MIN_BANDWIDTH",
]

MAX_RANKS = 100_000
"""Ranks in one grid (planning stays near a second at 10,000: bench/planning_time.py)."""

MAX_CLUSTERS = 1_000
"""Clusters in one grid (a grid has a route per ordered pair: a million at most)."""

MAX_MESSAGE_BYTES = 2**31 - 1
"""Bytes in one collective call: MPI's largest ``int`` count of ``MPI_BYTE``."""

MAX_SEGMENTS = 2**20
"""Segments one call may be cut into (a schedule holds a message per segment and edge)."""

MAX_TIME_S = 3600.0
"""The largest latency, overhead or gap of a P-LogP table: an hour."""

MIN_BANDWIDTH = 1.0
"""The smallest bandwidth, bytes per second (seed 003's slowest links are 10 kbit/s)."""

MAX_BANDWIDTH = 1e15
"""The largest finite bandwidth, bytes per second (a petabyte per second)."""

MAX_FILE_BYTES = 64 * 2**20
"""The largest grid or P-LogP file read (64 MiB): a measured 1,000-cluster grid fits."""

MAX_LOG_BYTES = 256 * 2**20
"""The largest call log ``gridcoll report`` reads (256 MiB: about 700,000 calls)."""

MAX_JSON_DEPTH = 32
"""The deepest nesting of a grid or P-LogP file (the format needs 5)."""

MAX_NAME_CHARS = 200
"""The longest cluster, site or link name (and host pattern)."""

MAX_HOST_PATTERNS = 1024
"""Host patterns (``"hosts"`` of the clusters) in one grid: checking that no plain host
name matches another cluster's glob is O(patterns^2) regular-expression matches."""

MAX_BUDGET_S = 86400.0
"""The largest planning budget, nominal seconds (a day)."""
