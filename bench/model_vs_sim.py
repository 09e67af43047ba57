"""Model vs simulator: the relative difference per algorithm, grid and message size.

For every broadcast builder, the planner tunes its parameters on the closed-form model
(:mod:`gridcoll.models`); the same schedule is then replayed in the event-driven
simulator (:mod:`gridcoll.simulate`). The difference ``(model - sim) / sim`` shows where
the models are exact and where they are conservative (the two-layer models use the
slowest route on grids whose routes differ, as seed 000 does on the DAS) or optimistic.
On a single cluster the papers' own formulas (seed 002 Table 1, seed 000's d-ary
bounds; :mod:`gridcoll.models.single_layer`) are reported beside them, evaluated with the
same parameters (``paper_s``, ``paper_vs_sim``).

Run: ``python bench/model_vs_sim.py [--quick] [--out bench/results/model_vs_sim.json]``.
"""

from __future__ import annotations

import statistics
from collections import defaultdict

from _common import Bench, console, percent, rel_error, seconds, table, times
from gridcoll.algorithms import list_builders
from gridcoll.errors import GridcollError
from gridcoll.models import single_layer as formulas
from gridcoll.network import broadcast_bound, get_grid
from gridcoll.simulate import simulate
from gridcoll.tune import Call, PlanCache, PlanOptions, plan

GRIDS = ("lan:16", "magpie:4,4", "magpie:8,1", "das2:4")
SIZES = (1024, 16 * 1024, 256 * 1024, 1024 * 1024, 4 * 1024 * 1024)
QUICK_GRIDS = ("lan:16", "magpie:8,1")
QUICK_SIZES = (16 * 1024, 1024 * 1024)


PAPER = {
    "flat": lambda net, P, M, p: formulas.flat_time(net, P, M),
    "flat-rendezvous": lambda net, P, M, p: formulas.flat_rendezvous_time(net, P, M),
    "flat-segmented": lambda net, P, M, p: formulas.flat_segmented_time(
        net, P, M, p["segment_size"]
    ),
    "chain": lambda net, P, M, p: formulas.chain_time(net, P, M),
    "chain-rendezvous": lambda net, P, M, p: formulas.chain_rendezvous_time(net, P, M),
    "chain-segmented": lambda net, P, M, p: formulas.chain_segmented_time(
        net, P, M, p["segment_size"]
    ),
    "binary": lambda net, P, M, p: formulas.binary_time(net, P, M),
    "binomial": lambda net, P, M, p: formulas.binomial_time(net, P, M),
    "binomial-rendezvous": lambda net, P, M, p: formulas.binomial_rendezvous_time(net, P, M),
    "binomial-segmented": lambda net, P, M, p: formulas.binomial_segmented_time(
        net, P, M, p["segment_size"]
    ),
    "dary-segmented": lambda net, P, M, p: formulas.dary_segmented_time(
        net, P, M, p["segment_size"], p["degree"]
    ),
}
"""The papers' closed forms of the single-layer builders, on one network (one cluster)."""


def paper_time(grid, name: str, nbytes: int, params: dict) -> float | None:
    """Seed 002 Table 1 / seed 000 sec. 3.1.1 for ``name`` on a one-cluster grid."""
    formula = PAPER.get(name)
    if formula is None or not grid.is_single_cluster:
        return None
    return formula(grid.clusters[0].lan, grid.nranks, nbytes, params)


def main(argv: list[str] | None = None) -> int:
    bench = Bench("model_vs_sim", "relative difference model vs simulator", argv)
    bench.parse()
    grids, sizes = (QUICK_GRIDS, QUICK_SIZES) if bench.quick else (GRIDS, SIZES)
    cache = PlanCache()
    skipped = []
    for spec in grids:
        grid = get_grid(spec)
        for nbytes in sizes:
            bound = broadcast_bound(grid, nbytes).time_s
            for builder in list_builders("bcast"):
                try:
                    result = plan(
                        grid, Call("bcast", nbytes, 0), PlanOptions(algo=builder.name), cache=cache
                    )
                    sim = simulate(result.build(grid), grid).total_s
                except GridcollError as err:
                    skipped.append({"grid": spec, "algorithm": builder.name, "nbytes": nbytes,
                                    "reason": str(err)})  # fmt: skip
                    continue
                paper = paper_time(grid, builder.name, nbytes, dict(result.params))
                bench.add(
                    grid=spec,
                    algorithm=builder.name,
                    nbytes=nbytes,
                    params=dict(result.params),
                    predicted_s=result.predicted_s,
                    paper_s=paper,
                    paper_vs_sim=None if paper is None else rel_error(paper, sim),
                    simulated_s=sim,
                    bound_s=bound,
                    ratio_to_bound=sim / bound,
                    rel_diff=rel_error(result.predicted_s, sim),
                )
    by_algorithm: dict[str, list[float]] = defaultdict(list)
    for row in bench.rows:
        by_algorithm[row["algorithm"]].append(abs(row["rel_diff"]))
    per_algorithm = {
        name: {
            "cases": len(diffs),
            "median_abs_rel_diff": statistics.median(diffs),
            "max_abs_rel_diff": max(diffs),
        }
        for name, diffs in by_algorithm.items()
    }
    all_diffs = [abs(r["rel_diff"]) for r in bench.rows]
    paper_diffs = [abs(r["paper_vs_sim"]) for r in bench.rows if r["paper_vs_sim"] is not None]
    summary = {
        "paper_cases": len(paper_diffs),
        "paper_within_1pct": sum(d <= 0.01 for d in paper_diffs),
        "cases": len(bench.rows),
        "skipped": len(skipped),
        "within_1pct": sum(d <= 0.01 for d in all_diffs),
        "within_10pct": sum(d <= 0.10 for d in all_diffs),
        "median_abs_rel_diff": statistics.median(all_diffs) if all_diffs else None,
        "per_algorithm": per_algorithm,
    }
    path = bench.finish(summary, skipped=skipped)
    out = console()
    out.print(
        table(
            "|model - sim| / sim, by algorithm",
            [{"algorithm": name, **stats} for name, stats in per_algorithm.items()],
            [
                ("algorithm", "algorithm", None),
                ("cases", "cases", None),
                ("median", "median_abs_rel_diff", lambda x: f"{x:.1%}"),
                ("max", "max_abs_rel_diff", lambda x: f"{x:.1%}"),
            ],
        )
    )
    largest = max(sizes)
    out.print(
        table(
            f"at {largest // 1024} KiB: model, simulator and the bound",
            [r for r in bench.rows if r["nbytes"] == largest],
            [
                ("grid", "grid", None),
                ("algorithm", "algorithm", None),
                ("model", "predicted_s", seconds),
                ("paper formula", "paper_s", seconds),
                ("simulated", "simulated_s", seconds),
                ("model - sim", "rel_diff", percent),
                ("paper - sim", "paper_vs_sim", percent),
                ("/ bound", "ratio_to_bound", times),
            ],
        )
    )
    out.print(
        f"{summary['cases']} cases ({summary['skipped']} skipped): "
        f"{summary['within_1pct']} within 1%, {summary['within_10pct']} within 10%, "
        f"median |model - sim| / sim = {summary['median_abs_rel_diff']:.1%}; the papers' "
        f"single-cluster formulas within 1% in {summary['paper_within_1pct']}"
        f"/{summary['paper_cases']} cases"
    )
    out.print(f"wrote {path}", soft_wrap=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
