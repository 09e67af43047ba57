"""Seed 000's search heuristics against an exhaustive search, over a table of cases.

Seed 000 (sec. 3.1.1) replaces an exhaustive search over segment sizes and tree degrees
by two heuristics (degrees only where the tree height drops, from ``floor(g(m)/s(m))``;
segment sizes ``M/2^i`` then hill-climbing on ``k`` by 1 and 5) and reports that they
find the optimum in "almost all" cases. For every builder with tunable parameters, every
message size from 1 KiB to 16 MiB and every grid (``lan:2`` .. ``lan:64`` and the
presets), this script runs :func:`gridcoll.tune.heuristic_search` and
:func:`gridcoll.tune.exhaustive_search` on the same model and counts the cases where the
heuristic's predicted time is within 1% of the exhaustive optimum.

Run: ``python bench/heuristics.py [--quick] [--out bench/results/heuristics.json]``.
"""

from __future__ import annotations

import statistics
import time
from collections import defaultdict

from _common import Bench, console, table
from gridcoll.algorithms import list_builders
from gridcoll.errors import GridcollError
from gridcoll.models import MODELS
from gridcoll.network import broadcast_bound, get_grid
from gridcoll.tune.search import exhaustive_search, heuristic_search

KiB, MiB = 1024, 1024 * 1024
SIZES = tuple(KiB * 4**i for i in range(8))  # 1 KiB, 4 KiB, ... 16 MiB
GRIDS = (
    "lan:2",
    "lan:4",
    "lan:8",
    "lan:16",
    "lan:32",
    "lan:64",
    "magpie:8,1",
    "magpie:4,4",
    "magpie:4,16",
    "das2:4",
    "teragrid",
    "transit-stub:10,1",
)
QUICK_SIZES = (KiB, 64 * KiB, MiB, 16 * MiB)
QUICK_GRIDS = ("lan:2", "lan:8", "lan:32", "magpie:8,1", "magpie:4,4", "das2:4")
TOLERANCE = 0.01
"""A heuristic result counts as optimal within this relative distance."""


def applicable(builder, grid) -> bool:
    """Two-layer and multi-tree builders are for grids of several clusters."""
    wan_only = any(p.startswith(("wan_", "lan_")) for p in builder.params)
    anytime = builder.anytime is not None  # simulated annealing: its tree depends on a budget
    return bool(builder.params) and not anytime and not (wan_only and grid.is_single_cluster)


def main(argv: list[str] | None = None) -> int:
    bench = Bench("heuristics", "seed 000's heuristics vs exhaustive search", argv)
    bench.parse()
    grids, sizes = (QUICK_GRIDS, QUICK_SIZES) if bench.quick else (GRIDS, SIZES)
    skipped = []
    for spec in grids:
        grid = get_grid(spec)
        for builder in list_builders("bcast"):
            if not applicable(builder, grid):
                continue
            model = MODELS[("bcast", builder.name)]
            for nbytes in sizes:
                kwargs = {"model": model, "params": builder.params}
                try:
                    start = time.perf_counter()
                    fast = heuristic_search(grid, nbytes, 0, **kwargs)
                    mid = time.perf_counter()
                    best = exhaustive_search(grid, nbytes, 0, **kwargs)
                    end = time.perf_counter()
                except GridcollError as err:
                    skipped.append({"grid": spec, "algorithm": builder.name, "nbytes": nbytes,
                                    "reason": str(err)})  # fmt: skip
                    continue
                gap = fast.predicted_s / best.predicted_s - 1.0
                bound = broadcast_bound(grid, nbytes, 0).time_s
                bench.add(
                    grid=spec,
                    algorithm=builder.name,
                    nbytes=nbytes,
                    heuristic_s=fast.predicted_s,
                    heuristic_params=fast.params,
                    heuristic_evaluations=fast.evaluations,
                    heuristic_time_s=mid - start,
                    exhaustive_s=best.predicted_s,
                    exhaustive_params=best.params,
                    exhaustive_evaluations=best.evaluations,
                    exhaustive_time_s=end - mid,
                    gap=gap,
                    within_1pct=gap <= TOLERANCE,
                    bound_s=bound,
                    ratio_to_bound=fast.predicted_s / bound,
                )
    rows = bench.rows
    per: dict[str, list[dict]] = defaultdict(list)
    for row in rows:
        per[row["algorithm"]].append(row)
    per_algorithm = [
        {
            "algorithm": name,
            "cases": len(cases),
            "within_1pct": sum(r["within_1pct"] for r in cases),
            "share": sum(r["within_1pct"] for r in cases) / len(cases),
            "worst_gap": max(r["gap"] for r in cases),
            "median_ratio_to_bound": statistics.median(r["ratio_to_bound"] for r in cases),
            "evaluations_ratio": sum(r["exhaustive_evaluations"] for r in cases)
            / max(1, sum(r["heuristic_evaluations"] for r in cases)),
        }
        for name, cases in per.items()
    ]
    within = sum(r["within_1pct"] for r in rows)
    worst = max(rows, key=lambda r: r["gap"]) if rows else None
    summary = {
        "cases": len(rows),
        "within_1pct": within,
        "share_within_1pct": within / len(rows) if rows else None,
        "worst_gap": worst["gap"] if worst else None,
        "worst_case": {k: worst[k] for k in ("grid", "algorithm", "nbytes")} if worst else None,
        "skipped": len(skipped),
        "per_algorithm": per_algorithm,
    }
    path = bench.finish(summary, skipped=skipped)
    out = console()
    out.print(
        table(
            f"heuristic vs exhaustive search ({len(grids)} grids, {len(sizes)} sizes)",
            per_algorithm,
            [
                ("algorithm", "algorithm", None),
                ("cases", "cases", None),
                ("within 1%", "within_1pct", None),
                ("share", "share", lambda x: f"{x:.0%}"),
                ("worst gap", "worst_gap", lambda x: f"{x:+.1%}"),
                ("evals saved", "evaluations_ratio", lambda x: f"{x:.0f}x"),
                ("median / bound", "median_ratio_to_bound", lambda x: f"{x:.2f}x"),
            ],
        )
    )
    misses = sorted((r for r in rows if not r["within_1pct"]), key=lambda r: -r["gap"])[:10]
    if misses:
        out.print(
            table(
                "largest misses",
                misses,
                [
                    ("grid", "grid", None),
                    ("algorithm", "algorithm", None),
                    ("size", "nbytes", None),
                    ("heuristic", "heuristic_params", None),
                    ("exhaustive", "exhaustive_params", None),
                    ("gap", "gap", lambda x: f"{x:+.2%}"),
                ],
            )
        )
    if rows:
        out.print(
            f"{within}/{len(rows)} cases ({summary['share_within_1pct']:.1%}) within 1% of the "
            f"exhaustive optimum; worst {summary['worst_gap']:+.2%} "
            f"({worst['algorithm']} on {worst['grid']}, {worst['nbytes']} B)"
        )
    out.print(f"wrote {path}", soft_wrap=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
