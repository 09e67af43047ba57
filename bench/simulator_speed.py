"""Simulator speed: building and simulating two-layer broadcasts of 1,000 and 10,000 ranks.

A 1 MiB ``magpie-segmented`` broadcast from rank 0 on
``magpie:100,100`` (10,000 ranks) in 512 segments of 2 KiB -- about 5 million messages
-- built and simulated in at most 10 s together. Degrees: a flat WAN tree
(``wan_degree = C - 1``) and ``lan_degree = 3``, what ``plan(..., algo=
"magpie-segmented")`` picks on ``magpie:32,32`` (31 and 3) and ``magpie:10,10`` (9 and 2
at 8 KiB), fixed here so that a cold plan of the 10,000-rank grid is not part of the
figure.

Per row: build and simulate seconds (wall and CPU), messages and hop events (every hop
of a message after its first), messages and events per second of simulation. The
dataflow rows are ``simulate(schedule, grid)`` (the heap-free replay of
:mod:`gridcoll.simulate.streams`); the event-loop rows are ``simulate(...,
record=True)``, which always runs the event loop and also records the timeline. The
machine is shared, so the JSON keeps the load average and CPU times beside wall times.

Run: ``python bench/simulator_speed.py [--quick] [--out bench/results/simulator_speed.json]``
(``--quick``: the 10,000-rank broadcast in 128 segments and a smaller event-loop row,
under 30 s).
"""

from __future__ import annotations

import os
import time

from _common import Bench, console, seconds, table
from gridcoll.algorithms import get_builder
from gridcoll.network import get_grid
from gridcoll.simulate import simulate

NBYTES = 2**20
GOAL_S = 10.0
"""The goal for building plus simulating the 10,000-rank, 512-segment case."""

FULL = [
    ("magpie:32,32", 2048, "dataflow"),
    ("magpie:100,100", 2048, "dataflow"),
    ("magpie:32,32", 2048, "event loop"),
]
QUICK = [
    ("magpie:32,32", 2048, "dataflow"),
    ("magpie:100,100", 8192, "dataflow"),
    ("magpie:32,32", 16384, "event loop"),
]


def clock() -> tuple[float, float]:
    """Wall and CPU seconds, now."""
    return time.perf_counter(), time.process_time()


def since(start: tuple[float, float]) -> tuple[float, float]:
    """Wall and CPU seconds elapsed since ``start``."""
    wall, cpu = clock()
    return wall - start[0], cpu - start[1]


def measure(spec: str, segment_size: int, path: str) -> dict:
    """Build and simulate one case; its row."""
    grid = get_grid(spec)
    params = {"segment_size": segment_size, "wan_degree": grid.nclusters - 1, "lan_degree": 3}
    builder = get_builder("bcast", "magpie-segmented")
    start = clock()
    schedule = builder.build(grid, NBYTES, 0, **params)
    build_s, build_cpu_s = since(start)
    start = clock()
    result = simulate(schedule, grid, record=(path == "event loop"))
    simulate_s, simulate_cpu_s = since(start)
    return {
        "grid": spec,
        "nranks": grid.nranks,
        "path": path,
        "algorithm": "magpie-segmented",
        "params": params,
        "segments": len(schedule.segments),
        "messages": result.nmessages,
        "events": result.nevents,
        "build_s": build_s,
        "build_cpu_s": build_cpu_s,
        "simulate_s": simulate_s,
        "simulate_cpu_s": simulate_cpu_s,
        "total_s": build_s + simulate_s,
        "messages_per_s": result.nmessages / simulate_s,
        "events_per_s": result.nevents / simulate_s,
        "messages_per_cpu_s": result.nmessages / simulate_cpu_s,
        "simulated_s": result.total_s,
    }


def main() -> int:
    bench = Bench("simulator_speed", __doc__.splitlines()[0])
    bench.parse()
    for spec, segment_size, path in QUICK if bench.quick else FULL:
        bench.add(**measure(spec, segment_size, path))
    rows = bench.rows
    big = max((r for r in rows if r["path"] == "dataflow"), key=lambda r: r["messages"])
    summary = {
        "largest": f"{big['grid']} in {big['segments']} segments",
        "largest_messages": big["messages"],
        "largest_build_plus_simulate_s": big["total_s"],
        "goal_s": GOAL_S if big["segments"] == 512 else None,
        "meets_goal": big["total_s"] <= GOAL_S if big["segments"] == 512 else None,
        "dataflow_messages_per_s": big["messages_per_s"],
        "dataflow_events_per_s": big["events_per_s"],
        "event_loop_messages_per_s": max(
            (r["messages_per_s"] for r in rows if r["path"] == "event loop"), default=None
        ),
        "loadavg_1min": os.getloadavg()[0],
    }
    path = bench.finish(summary)
    out = console()
    out.print(
        table(
            f"building and simulating a {NBYTES // 2**20} MiB magpie-segmented broadcast",
            rows,
            [
                ("grid", "grid", None),
                ("ranks", "nranks", None),
                ("simulator", "path", None),
                ("segments", "segments", None),
                ("messages", "messages", None),
                ("events", "events", None),
                ("build", "build_s", seconds),
                ("simulate", "simulate_s", seconds),
                ("simulate CPU", "simulate_cpu_s", seconds),
                ("msg/s", "messages_per_s", lambda x: f"{x:,.0f}"),
                ("events/s", "events_per_s", lambda x: f"{x:,.0f}"),
            ],
        )
    )
    out.print(
        f"{summary['largest']}: {summary['largest_messages']:,} messages built and simulated "
        f"in {seconds(summary['largest_build_plus_simulate_s'])} "
        f"(load average {summary['loadavg_1min']:.1f})"
    )
    out.print(f"wrote {path}", soft_wrap=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
