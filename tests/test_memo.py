"""The one memo facility (gridcoll.memo): bounded, visible, clearable, per grid."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gridcoll.memo import Memo
from gridcoll.network import get_grid
from gridcoll.tune import Call, plan

SRC = Path(__file__).resolve().parents[1] / "src" / "gridcoll"


def test_a_hit_is_not_recomputed_and_is_counted():
    memo, calls = Memo(), []
    assert memo.get("t", "k", lambda: calls.append(1) or 7) == 7
    assert memo.get("t", "k", lambda: calls.append(1) or 8) == 7
    assert calls == [1] and (memo.hits, memo.misses) == (1, 1)


@given(st.lists(st.integers(0, 20), max_size=200), st.integers(1, 8))
def test_tables_are_lru_bounded(keys, maxsize):
    memo = Memo()
    recent: list[int] = []  # a model of an LRU of maxsize entries
    for key in keys:
        memo.get("t", key, lambda key=key: key * key, maxsize)
        if key in recent:
            recent.remove(key)
        recent.append(key)
        recent = recent[-maxsize:]
        assert memo.sizes() == {"t": len(recent)}
    for key in recent:  # exactly the most recent ones are held
        assert memo.get("t", key, lambda: -1) == key * key


def test_sizes_limits_and_clear():
    memo = Memo()
    memo.get("a", 1, lambda: 1, maxsize=4)
    memo.get("b", 1, lambda: 1, maxsize=2)
    memo.get("b", 2, lambda: 2)
    assert memo.sizes() == {"a": 1, "b": 2} and memo.limits() == {"a": 4, "b": 2}
    assert len(memo) == 3 and "b=2/2" in repr(memo)
    memo.clear("a")
    assert memo.sizes() == {"a": 0, "b": 2}
    memo.clear()
    assert len(memo) == 0 and memo.limits() == {"a": 4, "b": 2}


def test_bad_table_size_is_refused():
    with pytest.raises(ValueError, match="positive integer"):
        Memo().get("t", 1, lambda: 1, maxsize=0)


def test_planning_fills_the_grids_own_memo_and_clearing_it_changes_no_plan():
    grid = get_grid("das2:3")
    first = plan(grid, Call("bcast", 2**20))
    assert len(grid.memo) > 0  # bounds, edge costs, trees... all in one place
    assert all(size <= grid.memo.limits()[name] for name, size in grid.memo.sizes().items())
    grid.memo.clear()
    again = plan(grid, Call("bcast", 2**20))
    assert (again.algorithm, again.params, again.predicted_s) == (
        first.algorithm,
        first.params,
        first.predicted_s,
    )
    assert get_grid("das2:3").memo is not grid.memo  # per grid object: nothing shared


def test_no_module_writes_its_own_cache_into_a_grid():
    pattern = re.compile(r"grid\.__dict__|__dict__\.setdefault")
    offenders = [
        f"{path.relative_to(SRC)}:{n}"
        for path in SRC.rglob("*.py")
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if pattern.search(line)
    ]
    assert not offenders, f"use grid.memo instead: {offenders}"
