"""The decision cache: plans of past calls, so a repeated call does not search again.

An explicit object the caller owns (no module state): the runtime keeps one per
communicator, the adaptive advisor its own. Keys hold every argument of
:func:`~gridcoll.tune.plan` that can change its result, the grid by its fingerprint,
which hashes the whole description, so a re-measured or loaded grid never reuses a
stale plan. Least recently used plans are
dropped beyond ``maxsize``. Not thread-safe: share one across threads only under a lock.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import TYPE_CHECKING, Any

from gridcoll.errors import ParameterError
from gridcoll.network.grid import Grid

if TYPE_CHECKING:
    from gridcoll.tune.select import Plan

__all__ = ["PlanCache"]

Key = tuple[Any, ...]


class PlanCache:
    """An LRU-bounded map from call signatures to :class:`~gridcoll.tune.Plan` objects.

    Examples
    --------
    >>> from gridcoll.tune import plan
    >>> cache = PlanCache(maxsize=8)
    >>> first = plan("lan:4", "bcast", 4096, cache=cache)
    >>> plan("lan:4", "bcast", 4096, cache=cache) is first
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
    def key(
        grid: Grid,
        op: str,
        nbytes: int,
        root: int,
        itemsize: int,
        algo: str,
        params: dict[str, Any] | None = None,
        budget_s: float | None = None,
        commutative: bool = True,
        host_overhead: float | None = None,
        native: bool = False,
        check: bool | None = None,
        counts: tuple[int, ...] | None = None,
        frugal: float = 0.0,
    ) -> Key:
        """The cache key of a :func:`~gridcoll.tune.plan` call (same arguments and
        defaults): the grid's fingerprint and every argument that can change the plan."""
        fixed = tuple(sorted(params.items())) if params else None
        return (
            grid.fingerprint, op, nbytes, root, itemsize, algo, fixed, budget_s,
            commutative, host_overhead, native, check, counts, frugal,
        )  # fmt: skip

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
