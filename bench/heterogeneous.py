"""Heterogeneous broadcast trees on one contention-aware simulator (seeds 001, 003, 004).

Every builder of seeds 001, 003 and 004 (FEF, ECEF, look-ahead, HLOT, TPS, Mateescu,
basic/driver/clustered simulated annealing, Phoenix's latency- and bandwidth-aware
trees, List) and the baselines (MPICH-G2, MagPIe's original, flat, binomial) is planned
on its own (its segment size tuned on its per-edge model), built and simulated; ``auto``
plans among all of them within a planning budget. Three set-ups:

* **seed 003** (sec. 5.1): transit-stub grids of 10, 20, ..., 60 nodes, 10 random grids
  each, messages of 1, 4, 16 and 256 KB, root 0;
* **seed 001** (sec. 3): the TeraGrid, 1 MB from a node of C2, unloaded and with 50%,
  70% and 90% of the bandwidth of the links to C3 removed (``Grid.with_links_scaled``);
* **das2:16**: the DAS with 16 ranks per cluster, 1 KB, 64 KB and 1 MB.

The simulated-annealing rows get the share of the budget that ``auto`` gives each
annealing family (``gridcoll.cli.compare.row_budget``): they show the trees ``auto``
weighed, so ``auto`` can lose to a row only where its model misjudges the simulator.

Per set-up and builder: the mean and worst ratio of its simulated time to the best
simulated time of the case (the best-known tree), and how far its own per-edge
prediction and the contention-free view (the same tree, shared links removed) are
from the simulation. Then TPS against ECEF, HLOT and flat on seed 003's set-up, the
check that ``auto`` is never more than 5% worse than the best builder, and ``auto``'s
planning time on the 64-node grids.

Run: ``python bench/heterogeneous.py [--quick] [--grids N] [--budget S] [--out FILE]``.
"""

from __future__ import annotations

import statistics
import time
from collections import defaultdict

from _common import Bench, console, table
from gridcoll.algorithms import get_builder
from gridcoll.algorithms.edge_costs import edge_costs
from gridcoll.algorithms.heuristics import grow
from gridcoll.algorithms.tps import bottleneck_set
from gridcoll.cli.compare import DEFAULT_ALGOS, row_budget, schedule_tree, without_links
from gridcoll.errors import GridcollError
from gridcoll.models import tree_time
from gridcoll.network import get_grid
from gridcoll.simulate import simulate
from gridcoll.tune import Call, PlanOptions, plan

KiB, MiB = 1024, 1024 * 1024
SEED003_NODES = (10, 20, 30, 40, 50, 60)
SEED003_GRIDS = 10
SEED003_SIZES = (KiB, 4 * KiB, 16 * KiB, 256 * KiB)
LOADS = (1.0, 0.5, 0.3, 0.1)  # bandwidth left on C3's links (seed 001: 50-90% removed)
DAS_SIZES = (KiB, 64 * KiB, MiB)
AUTO_SLACK = 1.05
TPS_RIVALS = ("ecef", "hlot", "flat")


def cases(quick: bool, ngrids: int = SEED003_GRIDS):
    """(set-up, label, grid, nbytes, root) for every case; ``ngrids`` random
    transit-stub grids per node count (seeds 1..ngrids; one with ``quick``)."""
    nodes = (10, 30, 60) if quick else SEED003_NODES
    seeds = range(1, 2) if quick else range(1, ngrids + 1)
    sizes = (KiB, 256 * KiB) if quick else SEED003_SIZES
    for n in nodes:
        for seed in seeds:
            grid = get_grid(f"transit-stub:{n},{seed}")
            for nbytes in sizes:
                yield "seed003", f"transit-stub:{n},{seed}", grid, nbytes, 0
    tera = get_grid("teragrid")
    for left in (1.0, 0.3) if quick else LOADS:
        grid = tera if left == 1.0 else tera.with_links_scaled(left, 2)  # C3
        setup = "teragrid" if left == 1.0 else "teragrid+load"
        label = "teragrid" if left == 1.0 else f"teragrid, C3 at {left:.0%}"
        yield setup, label, grid, MiB, 8  # root: the first node of C2 (SDSC)
    das = get_grid("das2:16")
    for nbytes in (MiB,) if quick else DAS_SIZES:
        yield "das2:16", "das2:16", das, nbytes, 0


def run_case(grid, algo: str, nbytes: int, root: int, budget: float, bare) -> dict:
    """Plan (timed), build, simulate one algorithm; the contention-free view of its tree."""
    budget = row_budget("bcast", algo, budget)
    wall, cpu = time.perf_counter(), time.process_time()
    result = plan(grid, Call("bcast", nbytes, root), PlanOptions(algo=algo, budget_s=budget))
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    schedule = result.build(grid)
    tree = schedule_tree(schedule)
    free = None
    if tree is not None:
        free = tree_time(bare, tree, nbytes, schedule.segment_size)
    return {
        "algorithm": algo,
        "chosen": result.algorithm,
        "params": dict(result.params),
        "predicted_s": result.predicted_s,
        "contention_free_s": free,
        "simulated_s": simulate(schedule, grid).total_s,
        "plan_time_s": wall,
        "plan_cpu_s": cpu,
        "bound_s": result.bound_s,
    }


def per_builder(rows: list[dict]) -> list[dict]:
    """Mean and worst ratio to the best-known tree, and the model gaps, per algorithm."""
    by: dict[str, list[dict]] = defaultdict(list)
    for r in rows:
        by[r["algorithm"]].append(r)
    out = []
    for name, mine in by.items():
        ratios = [r["ratio_to_best"] for r in mine]
        free = [r["simulated_s"] / r["contention_free_s"] for r in mine if r["contention_free_s"]]
        out.append(
            {
                "algorithm": name,
                "cases": len(mine),
                "mean_ratio": statistics.fmean(ratios),
                "worst_ratio": max(ratios),
                "best_count": sum(x <= 1.0 + 1e-9 for x in ratios),
                "sim_over_model": statistics.fmean(
                    r["simulated_s"] / r["predicted_s"] for r in mine
                ),
                "sim_over_free": statistics.fmean(free) if free else None,
                "plan_ms": 1e3 * statistics.fmean(r["plan_time_s"] for r in mine),
            }
        )
    return sorted(out, key=lambda s: s["mean_ratio"])


def tps_report(rows: list[dict]) -> dict:
    """TPS against ECEF, HLOT and flat on seed 003's set-up, unsegmented and with
    packet-level (segmented) transfer: wins, ties, mean time ratio; and how often the
    TPS tree is the ECEF tree (no bottleneck node moved)."""
    index = {(r["case"], r["algorithm"]): r for r in rows if r["setup"] == "seed003"}
    report = {}
    for suffix in ("", "-segmented"):
        tps_name = f"tps{suffix}"
        for rival in TPS_RIVALS:
            name = rival if rival == "flat" else f"{rival}{suffix}"
            pairs = [
                (index[c, tps_name]["simulated_s"], index[c, name]["simulated_s"])
                for (c, a) in index
                if a == tps_name and (c, name) in index
            ]
            if not pairs:
                continue
            report[f"{tps_name} vs {name}"] = {
                "cases": len(pairs),
                "tps_faster": sum(t < o * (1 - 1e-9) for t, o in pairs),
                "tie": sum(abs(t - o) <= 1e-9 * o for t, o in pairs),
                "tps_slower": sum(t > o * (1 + 1e-9) for t, o in pairs),
                "mean_time_ratio": statistics.fmean(t / o for t, o in pairs),
            }
    same = [r["tps_is_ecef"] for r in rows if r["setup"] == "seed003" and r["algorithm"] == "tps"]
    report["tps tree == ecef tree"] = {
        "cases": len(same),
        "share": statistics.fmean(same) if same else None,
    }
    return report


FIGURE7 = ("tps", "ecef", "hlot", "flat", "tps-segmented", "ecef-segmented", "hlot-segmented")
"""The algorithms of seed 003's figure 7 (and the packet-level variants)."""


def mean_by(rows: list[dict], key: str) -> list[dict]:
    """Seed 003's figure 7: the mean simulated time of TPS and its rivals per value of
    ``key`` ("nodes" for 7(a), "nbytes" for 7(b))."""
    mine = [r for r in rows if r["setup"] == "seed003"]
    out = []
    for value in sorted({r[key] for r in mine}):
        row = {key: value}
        for name in FIGURE7:
            times = [r["simulated_s"] for r in mine if r[key] == value and r["algorithm"] == name]
            row[name] = statistics.fmean(times) if times else None
        out.append(row)
    return out


def tps_evidence(quick: bool, ngrids: int) -> dict:
    """Why TPS ties ECEF on seed 003's set-up, from the builders and the simulator.

    Per case: TPS's bottleneck set B; how many of B are senders (inner nodes) in ECEF's
    tree; whether the rank that finishes last in the simulation of TPS's (whole-message)
    schedule is in B; and that completion over the *access floor*
    ``max_i min_j C_ji`` (the slowest rank's fastest possible delivery of the whole
    message, which no tree can beat).
    """
    rows = []
    for setup, _, grid, nbytes, root in cases(quick, ngrids):
        if setup != "seed003":
            continue
        costs = edge_costs(grid, nbytes)
        bottleneck = set(bottleneck_set(costs, root))
        ecef_tree = grow(costs, root, "ecef").tree
        schedule = get_builder("bcast", "tps").build(grid, nbytes, root)
        finish = simulate(schedule, grid).finish_s
        last = max(range(grid.nranks), key=finish.__getitem__)
        floor = max(float(costs.completion[:, i].min()) for i in range(grid.nranks) if i != root)
        rows.append(
            {
                "same": schedule_tree(schedule) == ecef_tree,
                "B": len(bottleneck),
                "B_senders_in_ecef": sum(1 for v in bottleneck if ecef_tree.children.get(v)),
                "last_in_B": last in bottleneck,
                "over_floor": max(finish) / floor,
            }
        )
    return {
        "cases": len(rows),
        "tps_tree_is_ecef_tree": sum(r["same"] for r in rows),
        "bottleneck_nodes": sum(r["B"] for r in rows),
        "of_them_senders_in_ecef": sum(r["B_senders_in_ecef"] for r in rows),
        "last_rank_in_B": sum(r["last_in_B"] for r in rows),
        "mean_tps_over_access_floor": statistics.fmean(r["over_floor"] for r in rows),
    }


def auto_check(rows: list[dict]) -> tuple[list[dict], dict]:
    """``auto`` against the best builder of each case (simulated times)."""
    per_case: dict[str, list[dict]] = defaultdict(list)
    for r in rows:
        per_case[r["case"]].append(r)
    checks = []
    for case, mine in per_case.items():
        auto = next((r for r in mine if r["algorithm"] == "auto"), None)
        others = [r for r in mine if r["algorithm"] != "auto"]
        if auto is None or not others:
            continue
        best = min(others, key=lambda r: r["simulated_s"])
        checks.append(
            {
                "case": case,
                "setup": auto["setup"],
                "chosen": auto["chosen"],
                "best": best["algorithm"],
                "ratio": auto["simulated_s"] / best["simulated_s"],
                "auto_predicted_over_sim": auto["predicted_s"] / auto["simulated_s"],
            }
        )
    worst = max(checks, key=lambda c: c["ratio"]) if checks else None
    summary = {
        "cases": len(checks),
        "within_5pct": sum(c["ratio"] <= AUTO_SLACK for c in checks),
        "worst": worst,
        "mean_ratio": statistics.fmean(c["ratio"] for c in checks) if checks else None,
    }
    return sorted(checks, key=lambda c: -c["ratio"]), summary


def planning_times(budget: float, repeat: int) -> list[dict]:
    """Cold ``auto`` plans (fresh grid objects, nothing memoised) on the 64-node grids."""
    out = []
    for spec, root in (("teragrid", 8), ("das2:16", 0), ("transit-stub:60,1", 0)):
        for b in (None, budget):
            walls, cpus = [], []
            for _ in range(repeat):
                grid = get_grid(spec)
                wall, cpu = time.perf_counter(), time.process_time()
                plan(grid, Call("bcast", MiB, root), PlanOptions(budget_s=b))
                walls.append(time.perf_counter() - wall)
                cpus.append(time.process_time() - cpu)
            out.append(
                {
                    "grid": spec,
                    "ranks": grid.nranks,
                    "budget_s": b,
                    "wall_s": min(walls),
                    "cpu_s": min(cpus),
                }
            )
    return out


def main(argv: list[str] | None = None) -> int:
    bench = Bench("heterogeneous", "heterogeneous trees: seeds 001, 003, 004", argv)
    bench.parser.add_argument(
        "--budget", type=float, default=1.0, help="planning budget, nominal seconds (default 1)"
    )
    bench.parser.add_argument(
        "--grids",
        type=int,
        default=SEED003_GRIDS,
        help=f"random transit-stub grids per node count (default {SEED003_GRIDS}, seed 003's)",
    )
    args = bench.parse()
    algos = [*DEFAULT_ALGOS, "auto"]
    started = time.perf_counter()
    skipped = []
    for setup, label, grid, nbytes, root in cases(bench.quick, args.grids):
        bare = without_links(grid)
        case = f"{label} {nbytes}B"
        done = []
        for algo in algos:
            try:
                done.append(run_case(grid, algo, nbytes, root, args.budget, bare))
            except GridcollError as err:
                skipped.append({"case": case, "algorithm": algo, "reason": str(err)})
        best = min(r["simulated_s"] for r in done)
        ecef_tree = schedule_tree(get_builder("bcast", "ecef").build(grid, nbytes, root))
        tps_tree = schedule_tree(get_builder("bcast", "tps").build(grid, nbytes, root))
        for r in done:
            bench.add(
                setup=setup,
                case=case,
                grid=label,
                nodes=grid.nranks,
                nbytes=nbytes,
                root=root,
                ratio_to_best=r["simulated_s"] / best,
                tps_is_ecef=tps_tree == ecef_tree,
                **r,
            )
        winner = min(done, key=lambda r: r["simulated_s"])["algorithm"]
        console().print(f"{time.perf_counter() - started:7.1f}s {case}: best {winner}")
    rows = bench.rows
    setups = list(dict.fromkeys(r["setup"] for r in rows))
    summary: dict = {"budget_s": args.budget, "per_setup": {}}
    out = console()
    for setup in setups:
        stats = per_builder([r for r in rows if r["setup"] == setup])
        summary["per_setup"][setup] = stats
        ncases = len({r["case"] for r in rows if r["setup"] == setup})
        out.print(
            table(
                f"{setup}: ratio to the best-known tree ({ncases} cases; simulated times)",
                stats,
                [
                    ("algorithm", "algorithm", None),
                    ("mean", "mean_ratio", lambda x: f"{x:.2f}x"),
                    ("worst", "worst_ratio", lambda x: f"{x:.2f}x"),
                    ("best in", "best_count", None),
                    ("sim / model", "sim_over_model", lambda x: f"{x:.2f}"),
                    ("sim / no-contention", "sim_over_free", lambda x: f"{x:.2f}"),
                    ("plan ms", "plan_ms", lambda x: f"{x:.1f}"),
                ],
            )
        )
    summary["tps"] = tps_report(rows)
    summary["seed003_by_nodes"] = mean_by(rows, "nodes")
    out.print(
        table(
            "seed 003, figure 7(a): mean simulated time (s) by node count",
            summary["seed003_by_nodes"],
            [("nodes", "nodes", None)] + [(n, n, lambda x: f"{x:.2f}") for n in FIGURE7],
        )
    )
    summary["seed003_by_size"] = mean_by(rows, "nbytes")
    out.print(
        table(
            "seed 003, figure 7(b): mean simulated time (s) by message size",
            summary["seed003_by_size"],
            [("size", "nbytes", None)] + [(n, n, lambda x: f"{x:.2f}") for n in FIGURE7],
        )
    )
    tps_rows = [{"pair": k, **v} for k, v in summary["tps"].items() if "vs" in k]
    out.print(
        table(
            "TPS against ECEF, HLOT and flat (seed 003's set-up)",
            tps_rows,
            [
                ("pair", "pair", None),
                ("cases", "cases", None),
                ("TPS faster", "tps_faster", None),
                ("tie", "tie", None),
                ("TPS slower", "tps_slower", None),
                ("mean TPS / other", "mean_time_ratio", lambda x: f"{x:.3f}"),
            ],
        )
    )
    share = summary["tps"]["tps tree == ecef tree"]["share"]
    out.print(f"TPS builds exactly the ECEF tree in {share:.0%} of seed 003's cases")
    evidence = summary["tps_evidence"] = tps_evidence(bench.quick, args.grids)
    out.print(
        f"why: of {evidence['bottleneck_nodes']} bottleneck nodes (TPS's B) over "
        f"{evidence['cases']} cases, {evidence['of_them_senders_in_ecef']} are senders in "
        f"ECEF's tree; the last rank to finish TPS's broadcast is in B in "
        f"{evidence['last_rank_in_B']}/{evidence['cases']} cases; TPS's simulated time is "
        f"{evidence['mean_tps_over_access_floor']:.2f}x the access floor max_i min_j C_ji"
    )
    checks, auto_summary = auto_check(rows)
    summary["auto"] = auto_summary
    out.print(
        table(
            f"auto against the best builder ({auto_summary['within_5pct']}/{auto_summary['cases']} "
            f"cases within 5%); worst first",
            checks[:10],
            [
                ("case", "case", None),
                ("chosen", "chosen", None),
                ("best", "best", None),
                ("auto / best", "ratio", lambda x: f"{x:.3f}"),
                ("predicted / sim", "auto_predicted_over_sim", lambda x: f"{x:.3f}"),
            ],
        )
    )
    timing = planning_times(args.budget, 1 if bench.quick else 3)
    summary["auto_planning_time"] = timing
    out.print(
        table(
            "cold auto planning time, 1 MiB (best of runs)",
            timing,
            [
                ("grid", "grid", None),
                ("ranks", "ranks", None),
                ("budget_s", "budget_s", lambda x: "none" if x is None else f"{x:g}"),
                ("wall", "wall_s", lambda x: f"{x:.3f}s"),
                ("cpu", "cpu_s", lambda x: f"{x:.3f}s"),
            ],
        )
    )
    path = bench.finish(summary, skipped=skipped, auto_checks=checks)
    out.print(f"wrote {path} ({time.perf_counter() - started:.0f} s)", soft_wrap=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
