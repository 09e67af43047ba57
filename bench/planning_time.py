"""How long planning and simulating take, against the number of ranks.

For ``lan:P`` and ``magpie:C,N`` up to 1024 ranks: the time of a cold ``plan(...,
algo="auto")`` (every builder's parameters searched on the model), of the same call
answered from a :class:`gridcoll.tune.PlanCache`, of building the chosen schedule, and of
simulating it (1 MiB broadcast). The cached plan should take microseconds; a 1024-rank
broadcast in hundreds of segments should simulate in seconds.

Run: ``python bench/planning_time.py [--quick] [--out bench/results/planning_time.json]``.
"""

from __future__ import annotations

from _common import Bench, console, seconds, table, timed, times
from gridcoll.network import broadcast_bound, get_grid
from gridcoll.simulate import simulate
from gridcoll.tune import PlanCache, plan

NBYTES = 2**20
GRIDS = (
    "lan:16",
    "lan:64",
    "lan:256",
    "lan:1024",
    "magpie:4,4",
    "magpie:8,8",
    "magpie:16,16",
    "magpie:8,128",
    "magpie:32,32",
)
QUICK_GRIDS = ("lan:16", "lan:128", "magpie:4,4", "magpie:8,16")


def us(x: float) -> str:
    """Microseconds."""
    return f"{x * 1e6:.1f} us"


def main(argv: list[str] | None = None) -> int:
    bench = Bench("planning_time", "plan (cold, cached) and simulate time vs rank count", argv)
    bench.parse()
    for spec in QUICK_GRIDS if bench.quick else GRIDS:
        grid = get_grid(spec)
        cache = PlanCache()
        result, cold = timed(lambda: plan(grid, "bcast", NBYTES, 0, cache=cache))  # noqa: B023
        _, cached = timed(lambda: plan(grid, "bcast", NBYTES, 0, cache=cache), repeat=200)  # noqa: B023
        schedule, build_s = timed(lambda: result.build(grid))  # noqa: B023
        sim, sim_s = timed(lambda: simulate(schedule, grid))  # noqa: B023
        bound = broadcast_bound(grid, NBYTES).time_s
        bench.add(
            grid=spec,
            nranks=grid.nranks,
            algorithm=result.algorithm,
            params=dict(result.params),
            segments=len(schedule.segments),
            messages=schedule.nmessages,
            plan_cold_s=cold,
            plan_cached_s=cached,
            build_s=build_s,
            simulate_s=sim_s,
            simulated_s=sim.total_s,
            bound_s=bound,
            ratio_to_bound=sim.total_s / bound,
        )
    rows = bench.rows
    slowest = max(rows, key=lambda r: r["plan_cold_s"])
    summary = {
        "max_ranks": max(r["nranks"] for r in rows),
        "plan_cold_s_max": slowest["plan_cold_s"],
        "plan_cold_slowest_grid": slowest["grid"],
        "plan_cached_s_max": max(r["plan_cached_s"] for r in rows),
        "simulate_s_max": max(r["simulate_s"] for r in rows),
    }
    path = bench.finish(summary)
    out = console()
    out.print(
        table(
            f"planning and simulating a {NBYTES // 2**20} MiB broadcast",
            rows,
            [
                ("grid", "grid", None),
                ("ranks", "nranks", None),
                ("algorithm", "algorithm", None),
                ("segments", "segments", None),
                ("messages", "messages", None),
                ("plan cold", "plan_cold_s", seconds),
                ("plan cached", "plan_cached_s", us),
                ("build", "build_s", seconds),
                ("simulate", "simulate_s", seconds),
                ("simulated", "simulated_s", seconds),
                ("/ bound", "ratio_to_bound", times),
            ],
        )
    )
    out.print(
        f"up to {summary['max_ranks']} ranks: cold plan <= {seconds(summary['plan_cold_s_max'])} "
        f"({summary['plan_cold_slowest_grid']}), "
        f"cached plan <= {us(summary['plan_cached_s_max'])}, "
        f"simulation <= {seconds(summary['simulate_s_max'])}"
    )
    out.print(f"wrote {path}", soft_wrap=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
