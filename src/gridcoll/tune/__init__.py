"""The tuner: seed 000's segment-size and shape search, per-call selection, a cache.

* :mod:`gridcoll.tune.search` - the heuristics of seed 000 (sec. 3.1.1, 3.1.2) and the
  exhaustive reference search, both taking the model as a parameter;
* :mod:`gridcoll.tune.call` - :class:`Call` and :class:`PlanOptions`, the frozen,
  self-validating call and planning options :func:`plan` takes (and the cache keys);
* :mod:`gridcoll.tune.decision` - :class:`Plan` and :class:`Candidate`, what
  :func:`plan` returns;
* :mod:`gridcoll.tune.select` - :func:`plan`: every builder's best parameters and
  predicted time, best first, with the physical bound;
* :mod:`gridcoll.tune.deadline` - :class:`Deadline`, a planning budget on the wall
  clock, which every stage of :func:`plan` answers to;
* :mod:`gridcoll.tune.cache` - :class:`PlanCache`, the caller's LRU decision cache.
"""

from gridcoll.tune.cache import PlanCache
from gridcoll.tune.call import Call, PlanOptions
from gridcoll.tune.deadline import Deadline
from gridcoll.tune.search import (
    SearchResult,
    degree_candidates,
    degree_start,
    exhaustive_search,
    heuristic_search,
    lan_degree_limit,
    reference_segment_sizes,
    segment_for,
    segment_sizes,
)
from gridcoll.tune.select import (
    DEFAULT_BUDGET_S,
    FRUGAL,
    NATIVE,
    ROOTED,
    Candidate,
    Plan,
    native_reason,
    plan,
)

__all__ = [
    "DEFAULT_BUDGET_S",
    "FRUGAL",
    "NATIVE",
    "ROOTED",
    "Call",
    "Candidate",
    "Deadline",
    "Plan",
    "PlanCache",
    "PlanOptions",
    "SearchResult",
    "degree_candidates",
    "degree_start",
    "exhaustive_search",
    "heuristic_search",
    "lan_degree_limit",
    "native_reason",
    "plan",
    "reference_segment_sizes",
    "segment_for",
    "segment_sizes",
]
