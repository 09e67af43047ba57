"""How long a cold plan takes, from 8 to 10,000 ranks, on uniform and uneven grids.

The goals for a cold ``plan(grid, "bcast", 1 MiB)`` (``algo="auto"``): at most
50 ms on ``magpie:32,32`` (1,024 ranks), 1 s on ``magpie:100,100`` (10,000 ranks) and
200 ms on ``transit-stub:60,1``; a cached plan at most 20 us. A cold 1 MiB allreduce
plan (``allreduce_cold_s``, on its own fresh grid object): at most 200 ms on
``magpie:32,32``.

Every grid is planned in a fresh child process (forked after the imports) on a fresh
grid object, so nothing is memoised yet: the cold time is the wall time of the one
``plan`` call, and a grid that exceeds ``--timeout`` is reported as such instead of
holding the bench. The child also times, each on a fresh grid object:

* ``search_s``: the parameter searches alone (every non-anytime builder through
  :func:`gridcoll.tune.search.heuristic_search`, in the order of
  :func:`gridcoll.models.registry.optimistic_s`, skipping a builder whose optimistic
  bound exceeds :data:`gridcoll.tune.select.VERIFY_WITHIN` times the best prediction so
  far): the part the models and the search own;
* ``bound_s``: :func:`gridcoll.network.bounds.collective_bound` alone;
* ``optimistic_s``: the optimistic bounds of every builder;
* the cached plan (a :class:`~gridcoll.tune.PlanCache` hit, best of 200).

Run: ``python bench/planning_time.py [--quick] [--timeout S] [--grid SPEC ...]
[--out FILE]`` (``--quick``: four grids, under a minute).
"""

from __future__ import annotations

import multiprocessing
import time
from typing import Any

from _common import Bench, console, seconds, table
from gridcoll.algorithms.registry import list_builders
from gridcoll.errors import GridcollError
from gridcoll.models.registry import MODELS, optimistic_s
from gridcoll.network import get_grid
from gridcoll.network.bounds import collective_bound
from gridcoll.tune import Call, PlanCache, plan
from gridcoll.tune.search import heuristic_search

NBYTES = 2**20
GRIDS = (
    ("lan:8", "uniform"),
    ("magpie:8,1", "uniform"),
    ("magpie:4,2", "uniform"),
    ("das2:4", "heterogeneous"),
    ("teragrid", "heterogeneous"),
    ("transit-stub:20,3", "heterogeneous"),
    ("transit-stub:60,1", "heterogeneous"),
    ("magpie:16,16", "uniform"),
    ("lan:1024", "uniform"),
    ("magpie:32,32", "uniform"),
    ("das2:250", "heterogeneous"),
    ("transit-stub:200,1", "heterogeneous"),
    ("magpie:100,100", "uniform"),
    ("das2:2500", "heterogeneous"),
)
QUICK_GRIDS = (
    ("magpie:8,1", "uniform"),
    ("das2:4", "heterogeneous"),
    ("transit-stub:60,1", "heterogeneous"),
    ("magpie:32,32", "uniform"),
)
GOALS_S = {"magpie:32,32": 0.05, "magpie:100,100": 1.0, "transit-stub:60,1": 0.2}
"""The cold-plan goals (seconds); every cached plan: 20 us."""
ALLREDUCE_GOALS_S = {"magpie:32,32": 0.2}
"""The cold allreduce-plan goals (seconds)."""
CACHED_GOAL_S = 20e-6


def _search_only(spec: str) -> float:
    """Wall seconds of every builder's search on a fresh grid, pruned by optimistic_s."""
    from gridcoll.tune.select import VERIFY_WITHIN

    grid = get_grid(spec)
    start = time.perf_counter()
    builders = [b for b in list_builders("bcast") if not b.anytime]
    bounds = [optimistic_s(grid, "bcast", b.name, NBYTES, 0) for b in builders]
    best = float("inf")
    for bound, _, builder in sorted(zip(bounds, range(len(builders)), builders, strict=True)):
        if bound > VERIFY_WITHIN * best:
            continue
        try:
            found = heuristic_search(
                grid, NBYTES, 0, model=MODELS["bcast", builder.name], params=builder.params
            )
        except GridcollError:
            continue
        best = min(best, found.predicted_s)
    return time.perf_counter() - start


def _measure(spec: str) -> dict[str, Any]:
    """One grid, cold: runs in the child process."""
    grid = get_grid(spec)
    start = time.perf_counter()
    result = plan(grid, Call("bcast", NBYTES, 0))
    cold = time.perf_counter() - start
    cache = PlanCache()
    plan(grid, Call("bcast", NBYTES, 0), cache=cache)
    start = time.perf_counter()
    for _ in range(200):
        plan(grid, Call("bcast", NBYTES, 0), cache=cache)
    cached = (time.perf_counter() - start) / 200
    fresh = get_grid(spec)
    start = time.perf_counter()
    collective_bound(fresh, "bcast", NBYTES, 0)
    bound_s = time.perf_counter() - start
    fresh = get_grid(spec)
    start = time.perf_counter()
    for b in list_builders("bcast"):
        optimistic_s(fresh, "bcast", b.name, NBYTES, 0)
    optimistic = time.perf_counter() - start
    fresh = get_grid(spec)
    start = time.perf_counter()
    reduced = plan(fresh, Call("allreduce", NBYTES, 0))
    allreduce_cold = time.perf_counter() - start
    return {
        "nranks": grid.nranks,
        "nclusters": grid.nclusters,
        "algorithm": result.algorithm,
        "params": dict(result.params),
        "predicted_s": result.predicted_s,
        "candidates": len(result.candidates),
        "plan_cold_s": cold,
        "plan_cached_s": cached,
        "search_s": _search_only(spec),
        "bound_s": bound_s,
        "optimistic_s": optimistic,
        "allreduce_cold_s": allreduce_cold,
        "allreduce_algorithm": reduced.algorithm,
    }


def _child(spec: str, queue: multiprocessing.Queue) -> None:
    try:
        queue.put(_measure(spec))
    except Exception as err:  # reported, not raised: the bench goes on
        queue.put({"error": f"{type(err).__name__}: {err}"})


def _run(spec: str, timeout: float) -> dict[str, Any]:
    """:func:`_measure` in a forked child, or ``{"timed_out": True}`` after ``timeout``."""
    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    child = context.Process(target=_child, args=(spec, queue))
    child.start()
    try:
        return queue.get(timeout=timeout)
    except Exception:
        return {"timed_out": True}
    finally:
        if child.is_alive():
            child.terminate()
        child.join()


def us(x: float | None) -> str:
    """Microseconds."""
    return "-" if x is None else f"{x * 1e6:.1f} us"


def maybe(fmt):
    return lambda x: "-" if x is None else fmt(x)


def main(argv: list[str] | None = None) -> int:
    bench = Bench("planning_time", "cold and cached plan time, 8 to 10,000 ranks", argv)
    bench.parser.add_argument(
        "--timeout", type=float, default=None, help="seconds per grid (default 120, quick 15)"
    )
    bench.parser.add_argument(
        "--grid", action="append", default=None, help="only this grid (repeatable)"
    )
    args = bench.parse()
    timeout = args.timeout or (15.0 if bench.quick else 120.0)
    grids = QUICK_GRIDS if bench.quick else GRIDS
    if args.grid:
        kinds = dict(GRIDS)
        grids = tuple((spec, kinds.get(spec, "-")) for spec in args.grid)
    for spec, kind in grids:
        row = {"grid": spec, "kind": kind, "timeout_s": timeout, **_run(spec, timeout)}
        goal = GOALS_S.get(spec)
        row["goal_s"] = goal
        if goal is not None and "plan_cold_s" in row:
            row["meets_goal"] = row["plan_cold_s"] <= goal
        goal = ALLREDUCE_GOALS_S.get(spec)
        row["allreduce_goal_s"] = goal
        if goal is not None and "allreduce_cold_s" in row:
            row["allreduce_meets_goal"] = row["allreduce_cold_s"] <= goal
        bench.add(**row)
        console().print(f"{spec}: {row.get('plan_cold_s', row.get('error', 'timed out'))}")
    rows = bench.rows
    done = [r for r in rows if "plan_cold_s" in r]
    summary = {
        "grids": len(rows),
        "timed_out": [r["grid"] for r in rows if r.get("timed_out")],
        "errors": [r["grid"] for r in rows if "error" in r],
        "goals": {r["grid"]: r.get("meets_goal") for r in rows if r.get("goal_s")},
        "allreduce_goals": {
            r["grid"]: r.get("allreduce_meets_goal") for r in rows if r.get("allreduce_goal_s")
        },
        "plan_cached_s_max": max((r["plan_cached_s"] for r in done), default=None),
        "cached_goal_met": all(r["plan_cached_s"] <= CACHED_GOAL_S for r in done),
    }
    path = bench.finish(summary)
    out = console()
    out.print(
        table(
            f"cold plan of a {NBYTES // 2**20} MiB broadcast (algo=auto)",
            rows,
            [
                ("grid", "grid", None),
                ("ranks", "nranks", None),
                ("kind", "kind", None),
                ("algorithm", "algorithm", None),
                ("cold", "plan_cold_s", maybe(seconds)),
                ("goal", "goal_s", maybe(seconds)),
                ("search", "search_s", maybe(seconds)),
                ("bound", "bound_s", maybe(seconds)),
                ("optimistic", "optimistic_s", maybe(seconds)),
                ("cached", "plan_cached_s", us),
                ("allreduce cold", "allreduce_cold_s", maybe(seconds)),
                ("allreduce goal", "allreduce_goal_s", maybe(seconds)),
            ],
        )
    )
    out.print(f"wrote {path}", soft_wrap=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
