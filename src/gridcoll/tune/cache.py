"""The decision cache: plans of past calls, so a repeated call does not search again.

An explicit object the caller owns (no module state): the runtime keeps one per
process, the adaptive advisor its own. A key is the grid's fingerprint, which hashes
the whole description, so a re-measured or loaded grid never reuses a stale plan, and
the :class:`~gridcoll.tune.Call` and :class:`~gridcoll.tune.PlanOptions` of
:func:`~gridcoll.tune.plan` themselves (frozen, hashable): what can change a plan is a
field of one of them, so it is in the key. Least recently used plans are
dropped beyond ``maxsize``. Not thread-safe: share one across threads only under a lock.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import TYPE_CHECKING, Any

from gridcoll.errors import ParameterError
from gridcoll.network.grid import Grid

if TYPE_CHECKING:
    from gridcoll.tune.call import Call, PlanOptions
    from gridcoll.tune.decision import Plan

__all__ = ["PlanCache"]

Key = tuple[Any, ...]


class PlanCache:
    """An LRU-bounded map from call signatures to :class:`~gridcoll.tune.Plan` objects.

    Examples
    --------
    >>> from gridcoll.tune import Call, plan
    >>> cache = PlanCache(maxsize=8)
    >>> first = plan("lan:4", Call("bcast", 4096), cache=cache)
    >>> plan("lan:4", Call("bcast", 4096), cache=cache) is first
    True
    >>> cache.hits, cache.misses, len(cache)
    (1, 1, 1)
    """

    DEFAULT_MAXSIZE = 256
    """Plans kept by default: a few collectives times a few sizes and roots."""

    def __init__(self, maxsize: int = DEFAULT_MAXSIZE) -> None:
        if not isinstance(maxsize, int) or maxsize < 1:
            raise ParameterError(f"cache size must be a positive integer, got {maxsize!r}")
        self.maxsize = maxsize
        self.hits = 0
        self.misses = 0
        self._plans: OrderedDict[Key, Plan] = OrderedDict()

    @staticmethod
    def key(grid: Grid, call: Call, options: PlanOptions) -> Key:
        """The cache key of a :func:`~gridcoll.tune.plan` call: the grid's fingerprint
        and the two frozen values themselves, so every field of :class:`Call` and of
        :class:`PlanOptions` is in it by being declared there."""
        return (grid.fingerprint, call, options)

    def get(self, key: Key) -> Plan | None:
        """The cached plan (now the most recently used), or None."""
        found = self._plans.get(key)
        if found is None:
            self.misses += 1
            return None
        self._plans.move_to_end(key)
        self.hits += 1
        return found

    def put(self, key: Key, plan: Plan) -> None:
        """Store ``plan``; drop the least recently used plans beyond ``maxsize``."""
        self._plans[key] = plan
        self._plans.move_to_end(key)
        while len(self._plans) > self.maxsize:
            self._plans.popitem(last=False)

    def clear(self) -> None:
        """Forget every plan (after the network changed, say); counters are kept."""
        self._plans.clear()

    def __len__(self) -> int:
        return len(self._plans)

    def __contains__(self, key: Any) -> bool:
        return key in self._plans

    def __repr__(self) -> str:
        return (
            f"PlanCache(maxsize={self.maxsize}, size={len(self)}, "
            f"hits={self.hits}, misses={self.misses})"
        )
