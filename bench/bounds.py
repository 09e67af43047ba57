"""The physical limit: how long a cold bound takes, and how tight it is.

For each grid, a fresh grid object (nothing memoised) and a cold
:func:`gridcoll.network.broadcast_bound` of 1 MiB from rank 0: wall and CPU seconds
(the machine may be shared), the quotient graph's size, and the bound's parts
(latency, throughput, windowed cut). Goals: milliseconds on
``magpie:32,32`` (1,024 ranks), well under 0.3 s on ``magpie:100,100`` (10,000 ranks);
before the cluster quotient the throughput bound alone took 2.3 s and 236 s there.

Then the bound's value on ``magpie:8,1`` at 1 KiB, 16 KiB and 1 MiB beside the best
simulated time of ``auto``'s candidates: the windowed cut (latency along paths with
bandwidth) against the throughput bound it replaced (12.3 ms at 16 KiB, where any
relayed byte pays two 10 ms WAN latencies).

Run: ``python bench/bounds.py [--quick] [--out FILE]``.
"""

from __future__ import annotations

import time

from _common import Bench, console, seconds, table
from gridcoll.algorithms.registry import get_builder
from gridcoll.network import broadcast_bound, get_grid
from gridcoll.network.bounds import cluster_classes
from gridcoll.simulate import simulate
from gridcoll.tune import Call, plan

NBYTES = 2**20
GRIDS = (
    "magpie:8,1",
    "das2:4",
    "teragrid",
    "transit-stub:60,1",
    "magpie:32,32",
    "das2:250",
    "magpie:100,100",
)
QUICK_GRIDS = ("magpie:8,1", "transit-stub:60,1", "magpie:32,32")
SIZES = (1024, 16384, 2**20)


def cold(spec: str) -> dict:
    """One cold bound on a fresh grid object; its row."""
    grid = get_grid(spec)
    wall, cpu = time.perf_counter(), time.process_time()
    bound = broadcast_bound(grid, NBYTES, 0)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    return {
        "grid": spec,
        "nranks": grid.nranks,
        "clusters": grid.nclusters,
        "receiver_classes": len(cluster_classes(grid, (grid.cluster_of[0],))),
        "cold_s": wall,
        "cold_cpu_s": cpu,
        "bound_s": bound.time_s,
        "latency_s": bound.latency_s,
        "throughput_s": bound.throughput_s,
        "windowed_s": bound.windowed_s,
        "memo": grid.memo.sizes(),
    }


def tightness(spec: str, nbytes: int) -> dict:
    """The bound beside the best simulated candidate of ``auto``."""
    grid = get_grid(spec)
    bound = broadcast_bound(grid, nbytes, 0)
    best, name = float("inf"), ""
    for cand in plan(grid, Call("bcast", nbytes, 0)).candidates:
        schedule = get_builder("bcast", cand.algorithm).build(grid, nbytes, 0, **cand.params)
        sim = simulate(schedule, grid).total_s
        if sim < best:
            best, name = sim, cand.algorithm
    return {
        "grid": spec,
        "nbytes": nbytes,
        "throughput_s": bound.throughput_s,
        "windowed_s": bound.windowed_s,
        "bound_s": bound.time_s,
        "best_simulated_s": best,
        "best_algorithm": name,
        "ratio": best / bound.time_s,
    }


def main() -> int:
    bench = Bench("bounds", __doc__.splitlines()[0])
    bench.parse()
    specs = QUICK_GRIDS if bench.quick else GRIDS
    rows = [bench.add(kind="cold", **cold(spec)) for spec in specs]
    tight = [bench.add(kind="tightness", **tightness("magpie:8,1", n)) for n in SIZES]
    console().print(
        table(
            "cold broadcast_bound (1 MiB, root 0)",
            rows,
            [
                ("grid", "grid", None),
                ("ranks", "nranks", str),
                ("classes", "receiver_classes", str),
                ("wall", "cold_s", seconds),
                ("cpu", "cold_cpu_s", seconds),
                ("bound", "bound_s", seconds),
            ],
        )
    )
    console().print(
        table(
            "magpie:8,1: bound against the best simulated candidate",
            tight,
            [
                ("bytes", "nbytes", str),
                ("throughput", "throughput_s", seconds),
                ("windowed", "windowed_s", seconds),
                ("best sim", "best_simulated_s", seconds),
                ("algorithm", "best_algorithm", None),
                ("sim/bound", "ratio", lambda x: f"{x:.3f}"),
            ],
        )
    )
    summary = {
        "cold_s": {r["grid"]: r["cold_s"] for r in rows},
        "magpie_8_1_bound_s": {r["nbytes"]: r["bound_s"] for r in tight},
        "magpie_8_1_sim_over_bound": {r["nbytes"]: r["ratio"] for r in tight},
    }
    path = bench.finish(summary)
    console().print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
