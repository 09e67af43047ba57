"""Seed 001's adaptive-broadcast experiment, three load seeds (sec. 3, figure 8).

For each seed, seed 001's application (60 broadcasts from 1 MB down, intervals from 90 s
down) runs on ``teragrid`` (64 ranks) from seed 001's root (a node of C2) under seed
001's random load on the links of the cluster playing seed 001's C3 (the relay of
MPICH-G2's tree its completion waits on: C7 on ``teragrid``,
:func:`gridcoll.experiments.adaptive.seed001_cluster`), with five strategies
(:mod:`gridcoll.experiments.adaptive`): MPICH-G2's static tree, the advisor running
Mateescu's algorithm, the advisor running clusteredSA (seed 001's own strategy), the
advisor running every builder (gridcoll's ``adaptive``), and gridcoll's static plan
with the advisor's budget. The advisors plan in a quarter of each forecast interval
(no cap) and plan the idle sizes before the first call. Every call is simulated under
the load; the runs without load (the reference a strategy returns to after a load) do
not depend on the seed and are made once.

It reports, per seed, the headline and its goals:

* ``adaptive_vs_static_loaded``: ``adaptive`` against ``static``, mean per loaded call
  (goal >= 20%);
* ``adaptive_vs_static_worst_unloaded``: the worst unloaded call against ``static``
  (goal: never more than 3% slower, i.e. >= -0.03), and the mean;
* ``paper_vs_auto_loaded`` / ``_unloaded``: seed 001's strategy (``sa-clustered``)
  against gridcoll's (``adaptive``);
* ``mpich_g2_loaded_over_unloaded``: MPICH-G2's loaded calls over the same calls
  without load (the load must slow it: > 1);

and per seed and strategy ``improvement_loaded`` over MPICH-G2, ``after_load_second``
(the second call after each load ends, against the same call with no load at all),
the advisor's CPU seconds and the monitor's share of the WAN bytes and time.

And the hand-off's cost: for sizes from 64 KiB, the adaptive plan simulated with and
without its trailer (``handoff_share``: goal < 2%), and the CPU seconds of encoding,
decoding and rebuilding the announced plan on a rank.

``--measure`` adds a measured run over MPI (seed 0, ``teragrid`` with 2 ranks per
cluster, time-scaled to at most 10 minutes: ``gridcoll scenario --measure``).

Run: ``python bench/adaptive.py [--quick] [--measure] [--out bench/results/adaptive.json]``.
"""

from __future__ import annotations

import math
import time

from _common import Bench, console, percent, seconds, table
from gridcoll.adapt.handoff import announcement, decode, encode, planned, trailer_bytes
from gridcoll.experiments.adaptive import (
    STRATEGIES,
    seed001_app,
    seed001_cluster,
    seed001_root,
    simulate_scenario,
    unloaded_times,
)
from gridcoll.network import get_grid
from gridcoll.network.load import seed001_trace
from gridcoll.simulate import simulate
from gridcoll.tune import Call, PlanCache, PlanOptions, plan

KiB = 1024
SEEDS = (0, 1, 2)


def handoff_cost(grid, sizes) -> list[dict]:
    """The trailer's share of the call's time, and the hand-off's CPU per call.

    The schedule with the trailer and the same schedule without it must differ only by
    those bytes, so the plan is made without anytime builders (an annealing run's tree
    depends on the size it is searched at, and would differ by more than the bytes)."""
    trailer = trailer_bytes(grid)
    rows = []
    for m in sizes:
        chosen = plan(grid, Call("bcast", m + trailer, 0))
        with_trailer = simulate(chosen.build(), grid).total_s
        bare = plan(
            grid, Call("bcast", m, 0), PlanOptions(algo=chosen.algorithm, params=chosen.params)
        )
        without = simulate(bare.build(), grid).total_s
        ann = announcement(1, grid, {}, [(m, chosen)])
        start = time.process_time()
        for _ in range(100):
            decode(encode(ann, grid), grid)
        codec_s = (time.process_time() - start) / 100
        start = time.process_time()
        rebuilt = planned(
            grid, decode(encode(ann, grid), grid), m, 0, extra=trailer, cache=PlanCache(4)
        )
        rebuilt.build()
        rebuild_s = time.process_time() - start
        rows.append(
            {
                "nbytes": m,
                "algorithm": chosen.algorithm,
                "params": chosen.params,
                "trailer_bytes": trailer,
                "with_trailer_s": with_trailer,
                "without_s": without,
                "handoff_share": (with_trailer - without) / without,
                "codec_s": codec_s,
                "rebuild_s": rebuild_s,
            }
        )
    return rows


def main(argv: list[str] | None = None) -> int:
    bench = Bench("adaptive", "seed 001's adaptive broadcast under load, three seeds", argv)
    bench.parser.add_argument(
        "--measure",
        action="store_true",
        help="also run seed 0 for real over MPI (about 10 minutes)",
    )
    args = bench.parse()
    grid = get_grid("teragrid")
    ncalls = 20 if bench.quick else 60
    seeds = SEEDS[:1] if bench.quick else SEEDS
    app = seed001_app(ncalls)
    root = seed001_root(grid)
    cluster = seed001_cluster(grid, root)
    out = console()
    started = time.monotonic()
    reference = unloaded_times(grid, app, root=root)
    out.print(f"references without load: {time.monotonic() - started:.0f} s")
    summaries, headlines = {}, []
    for seed in seeds:
        load = seed001_trace(grid, cluster, seed=seed, duration=app[-1].t + 600.0)
        t = time.monotonic()
        summary = simulate_scenario(grid, app, load, STRATEGIES, root=root, reference=reference)
        out.print(f"seed {seed}: {time.monotonic() - t:.0f} s")
        summaries[seed] = summary
        head = summary["headline"]
        headlines.append(
            {
                "seed": seed,
                "loaded_calls": sum(summary["loaded"]),
                "adaptive_vs_static_loaded": head["adaptive_vs_static"]["loaded"],
                "adaptive_vs_static_unloaded": head["adaptive_vs_static"]["unloaded"],
                "adaptive_vs_static_worst_unloaded": head["adaptive_vs_static"]["worst_unloaded"],
                "paper_vs_auto_loaded": head["paper_vs_auto"]["loaded"],
                "paper_vs_auto_unloaded": head["paper_vs_auto"]["unloaded"],
                "mpich_g2_loaded_over_unloaded": head["mpich_g2_loaded_over_unloaded"],
            }
        )
        mateescu = summary["strategies"]["mateescu"]["mean_loaded_s"]
        for name, e in summary["strategies"].items():
            seconds_after = [r["ratios"][1] for r in e["after_load"] if len(r["ratios"]) > 1]
            bench.add(
                seed=seed,
                strategy=name,
                loaded_calls=sum(summary["loaded"]),
                mean_loaded_s=e["mean_loaded_s"],
                mean_unloaded_s=e["mean_unloaded_s"],
                vs_static_loaded=e["vs_static_loaded"],
                vs_static_unloaded=e["vs_static_unloaded"],
                worst_vs_static_unloaded=e["worst_vs_static_unloaded"],
                loaded_over_unloaded=e["loaded_over_unloaded"],
                improvement_loaded=e["improvement_loaded"],
                change_unloaded=e["change_unloaded"],
                worst_change_unloaded=e["worst_change_unloaded"],
                beats_mateescu_loaded=e["mean_loaded_s"] < mateescu,
                after_load_second=max(seconds_after, default=math.nan),
                advisor_cpu_s=e["advisor_cpu_s"],
                idle_plans=e["idle_plans"],
                monitor_share_bytes=e.get("monitor_share_bytes"),
                monitor_share_s=e.get("monitor_share_s"),
                times_s=e["times_s"],
                algorithms=e["algorithms"],
                budgets_s=e["budgets_s"],
            )
    out.print(
        table(
            "the headline: adaptive vs static, seed 001's advisor vs gridcoll's",
            headlines,
            [
                ("seed", "seed", None),
                ("loaded calls", "loaded_calls", None),
                ("adaptive vs static loaded", "adaptive_vs_static_loaded", percent),
                ("unloaded", "adaptive_vs_static_unloaded", percent),
                ("worst unloaded", "adaptive_vs_static_worst_unloaded", percent),
                ("sa-clustered vs auto loaded", "paper_vs_auto_loaded", percent),
                ("unloaded", "paper_vs_auto_unloaded", percent),
                ("mpich-g2 loaded x", "mpich_g2_loaded_over_unloaded", lambda x: f"{x:.3f}x"),
            ],
        )
    )
    columns = [
        ("seed", "seed", None),
        ("strategy", "strategy", None),
        ("mean loaded", "mean_loaded_s", seconds),
        ("mean unloaded", "mean_unloaded_s", seconds),
        ("vs static loaded", "vs_static_loaded", percent),
        ("vs static unloaded", "vs_static_unloaded", percent),
        ("vs MPICH-G2 loaded", "improvement_loaded", percent),
        ("worst unloaded", "worst_change_unloaded", percent),
        ("2nd after load", "after_load_second", lambda x: "-" if math.isnan(x) else f"{x:.3f}x"),
        ("advisor CPU", "advisor_cpu_s", seconds),
    ]
    out.print(table("seed 001's scenario on teragrid (simulated)", bench.rows, columns))
    handoff = handoff_cost(grid, [64 * KiB, 128 * KiB, 256 * KiB, 512 * KiB, 1024 * KiB])
    out.print(
        table(
            "the hand-off's cost",
            handoff,
            [
                ("size", "nbytes", None),
                ("algorithm", "algorithm", None),
                ("with trailer", "with_trailer_s", seconds),
                ("without", "without_s", seconds),
                ("share", "handoff_share", percent),
                ("rebuild CPU", "rebuild_s", seconds),
            ],
        )
    )
    adaptive = [r for r in bench.rows if r["strategy"] == "adaptive"]
    measured = None
    if args.measure:
        measured = _measure(grid)
    path = bench.finish(
        summary={
            "seeds": list(seeds),
            "calls": ncalls,
            "root": root,
            "loaded_cluster": grid.clusters[cluster].name,
            "adaptive_vs_static_loaded": [h["adaptive_vs_static_loaded"] for h in headlines],
            "adaptive_vs_static_unloaded": [h["adaptive_vs_static_unloaded"] for h in headlines],
            "adaptive_vs_static_worst_unloaded": [
                h["adaptive_vs_static_worst_unloaded"] for h in headlines
            ],
            "paper_vs_auto_loaded": [h["paper_vs_auto_loaded"] for h in headlines],
            "paper_vs_auto_unloaded": [h["paper_vs_auto_unloaded"] for h in headlines],
            "mpich_g2_loaded_over_unloaded": [
                h["mpich_g2_loaded_over_unloaded"] for h in headlines
            ],
            "adaptive_improvement_loaded": [r["improvement_loaded"] for r in adaptive],
            "adaptive_beats_mateescu": [r["beats_mateescu_loaded"] for r in adaptive],
            "adaptive_worst_change_unloaded": [r["worst_change_unloaded"] for r in adaptive],
            "adaptive_after_load_second": [r["after_load_second"] for r in adaptive],
            "handoff_share_max": max(r["handoff_share"] for r in handoff),
        },
        headline=headlines,
        handoff=handoff,
        reference_s=reference,
        measured=measured,
    )
    out.print(f"wrote {path}")
    return 0


def _measure(grid) -> dict:
    """``gridcoll scenario --measure --json`` for seed 0 (its JSON)."""
    import json
    import subprocess
    import sys

    cmd = [
        sys.executable,
        "-m",
        "gridcoll",
        "scenario",
        "--measure",
        "--load",
        "seed001:0",
        "--strategies",
        "mpich-g2,sa-clustered,adaptive,static",
        "--json",
    ]
    done = subprocess.run(cmd, capture_output=True, text=True, check=True)
    return json.loads(done.stdout)


if __name__ == "__main__":
    raise SystemExit(main())
