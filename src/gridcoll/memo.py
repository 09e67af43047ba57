"""The one memo facility: small, bounded, per-grid tables of derived values.

Planning asks the same questions of a grid many times (the max-flow from a root, a
cluster pair's edge costs at a segment size, a heuristic's tree). Every layer memoises
them in the grid's own :class:`Memo` (``grid.memo``), never in a module-level dict and
never by writing attributes into the frozen :class:`~gridcoll.network.Grid`:

* a memo belongs to one grid object, so it lives and dies with it (a re-measured grid
  is a new object with an empty memo, and nothing stale survives);
* each named table is an LRU map bounded by the ``maxsize`` its first user declares;
* :meth:`Memo.sizes` shows what is held, :meth:`Memo.clear` drops it.

Values must be pure functions of the grid and the key. Not thread-safe: a table may
compute a value twice under races, which is harmless for pure values.

Examples
--------
>>> memo = Memo()
>>> memo.get("squares", 3, lambda: 9, maxsize=2)
9
>>> memo.get("squares", 3, lambda: 0)  # a hit: not recomputed
9
>>> memo.sizes()
{'squares': 1}
>>> memo.clear(); len(memo)
0
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any, TypeVar

__all__ = ["DEFAULT_MAXSIZE", "Memo"]

T = TypeVar("T")

DEFAULT_MAXSIZE = 128
"""Entries a table keeps unless its first user says otherwise."""


class Memo:
    """Named LRU tables of values derived from one grid (module docstring)."""

    __slots__ = ("_limits", "_tables", "hits", "misses")

    def __init__(self) -> None:
        self._tables: dict[str, OrderedDict[Hashable, Any]] = {}
        self._limits: dict[str, int] = {}
        self.hits = 0
        self.misses = 0

    def get(
        self, table: str, key: Hashable, compute: Callable[[], T], maxsize: int = DEFAULT_MAXSIZE
    ) -> T:
        """The value of ``key`` in ``table``, computed by ``compute()`` on a miss.

        ``maxsize`` bounds the table (fixed by its first use); the least recently used
        entries are dropped beyond it.
        """
        entries = self._tables.get(table)
        if entries is None:
            if not isinstance(maxsize, int) or maxsize < 1:
                raise ValueError(f"memo table size must be a positive integer, got {maxsize!r}")
            entries = self._tables[table] = OrderedDict()
            self._limits[table] = maxsize
        try:
            value = entries[key]
        except KeyError:
            self.misses += 1
            value = entries[key] = compute()
            if len(entries) > self._limits[table]:
                entries.popitem(last=False)
            return value
        self.hits += 1
        entries.move_to_end(key)
        return value

    def sizes(self) -> dict[str, int]:
        """Entries held per table."""
        return {name: len(entries) for name, entries in self._tables.items()}

    def limits(self) -> dict[str, int]:
        """The bound of every table."""
        return dict(self._limits)

    def clear(self, table: str | None = None) -> None:
        """Drop every entry (of one ``table``, or of all); the bounds and counters stay."""
        for name, entries in self._tables.items():
            if table is None or name == table:
                entries.clear()

    def __len__(self) -> int:
        return sum(len(entries) for entries in self._tables.values())

    def __repr__(self) -> str:
        held = ", ".join(f"{n}={len(e)}/{self._limits[n]}" for n, e in self._tables.items())
        return f"Memo({held}; hits={self.hits}, misses={self.misses})"
