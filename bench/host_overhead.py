"""Calibrate the runtime's per-message host overhead (:mod:`gridcoll.runtime.host`).

Runs schedules whose completion time is bound by the per-message cost of this runtime
(small segments, many messages per rank), measures each over MPI (median of
``--repeat`` verified runs), and finds by bisection the host overhead ``h`` at which the
simulator on ``grid.with_host_overhead(h)`` gives the measured time. Dividing by the
oversubscription ``max(1, (P + load) / cpus)`` (``load``: the load average before the
first launch) gives the CPU cost per message and side ``c``; the
median over the cases, WAN emulated and not, is what
:data:`~gridcoll.runtime.host.HOST_COST_EMULATED_S` and
:data:`~gridcoll.runtime.host.HOST_COST_PLAIN_S` should be on this machine. Cases whose
simulated time does not depend on ``h`` (link-bound) do not constrain it and are left
out of the median (``informative: false``).

Run: ``python bench/host_overhead.py [--quick] [--out bench/results/host_overhead.json]``.
"""

from __future__ import annotations

import os
import statistics

from _common import Bench, console, seconds, table
from gridcoll.algorithms import get_builder
from gridcoll.network import get_grid
from gridcoll.runtime import host
from gridcoll.runtime.worker import measure_schedules
from gridcoll.simulate import simulate

KiB = 1024
CASES = (
    # grid, builder, bytes, parameters, WAN emulated
    ("magpie:4,1", "multitree", 1024 * KiB, {"segment_size": 512, "lan_degree": 1}, True),
    ("magpie:2,2", "multitree", 256 * KiB, {"segment_size": 256, "lan_degree": 1}, True),
    ("magpie:8,1", "multitree", 1024 * KiB, {"segment_size": 1024, "lan_degree": 1}, True),
    ("magpie:8,1", "multitree", 1024 * KiB, {"segment_size": 2048, "lan_degree": 1}, True),
    ("magpie:4,2", "multitree", 1024 * KiB, {"segment_size": 512, "lan_degree": 1}, True),
    ("magpie:4,2", "multitree", 1024 * KiB, {"segment_size": 1024, "lan_degree": 1}, True),
    ("magpie:16,1", "multitree", 1024 * KiB, {"segment_size": 4096, "lan_degree": 1}, True),
    ("lan:2", "flat-segmented", 256 * KiB, {"segment_size": 256}, False),
    ("lan:4", "chain-segmented", 256 * KiB, {"segment_size": 256}, False),
    ("lan:8", "flat-segmented", 256 * KiB, {"segment_size": 256}, False),
    ("lan:8", "chain-segmented", 256 * KiB, {"segment_size": 256}, False),
)
QUICK = (2, 4, 7, 10)
"""--quick: indices into CASES."""


def fit(schedule, grid, target: float) -> tuple[float, bool]:
    """(h such that simulate(schedule, grid + h) == target, whether h matters here)."""

    def sim(h: float) -> float:
        return simulate(schedule, grid.with_host_overhead(h)).total_s

    lo, hi = 0.0, 2e-3
    if sim(lo) >= target:
        return 0.0, sim(hi) > 1.05 * sim(lo)
    if sim(hi) < target:
        return hi, False
    for _ in range(24):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if sim(mid) < target else (lo, mid)
    return (lo + hi) / 2, True


def main(argv: list[str] | None = None) -> int:
    bench = Bench("host_overhead", "calibrate the runtime's per-message host overhead", argv)
    bench.parser.add_argument("--repeat", type=int, default=5, help="runs per case")
    bench.parse()
    cpus = host.cpus()
    load = host.external_load()  # before any of our ranks run
    cases = [CASES[i] for i in QUICK] if bench.quick else list(CASES)
    for spec, name, nbytes, params, emulated in cases:
        grid = get_grid(spec)
        schedule = get_builder("bcast", name).build(grid, nbytes, 0, **params)
        (runs,) = measure_schedules(
            grid, [schedule], repeat=bench.args.repeat, emulate=emulated, timeout=60.0
        )
        measured = statistics.median(runs)
        h, informative = fit(schedule, grid, measured)
        stretch = max(1.0, (grid.nranks + load) / cpus)
        bench.add(
            grid=spec,
            nranks=grid.nranks,
            algorithm=name,
            params=params,
            size=nbytes,
            emulated=emulated,
            messages=schedule.nmessages,
            measured_s=measured,
            measured_all_s=runs,
            simulated_h0_s=simulate(schedule, grid).total_s,
            fitted_h_s=h,
            oversubscription=stretch,
            cost_per_message_s=h / stretch,
            informative=informative,
        )
    rows = bench.rows
    summary = {"cpus": cpus, "load_at_start": load}
    for emulated, key, current in (
        (True, "emulated", host.HOST_COST_EMULATED_S),
        (False, "plain", host.HOST_COST_PLAIN_S),
    ):
        group = [r for r in rows if r["emulated"] == emulated]
        costs = [r["cost_per_message_s"] for r in ([r for r in group if r["informative"]] or group)]
        summary[f"median_cost_{key}_s"] = statistics.median(costs) if costs else None
        summary[f"current_cost_{key}_s"] = current
    path = bench.finish(summary, loadavg_at_end=os.getloadavg())
    out = console()
    out.print(
        table(
            f"host overhead fitted per case ({cpus} cpus, load {load:.1f}): "
            "simulate(grid + h) == measured",
            [
                {**r, "h_us": r["fitted_h_s"] * 1e6, "c_us": r["cost_per_message_s"] * 1e6}
                for r in rows
            ],
            [
                ("grid", "grid", None),
                ("algorithm", "algorithm", None),
                ("emulated", "emulated", None),
                ("messages", "messages", None),
                ("measured", "measured_s", seconds),
                ("sim (h=0)", "simulated_h0_s", seconds),
                ("fitted h", "h_us", lambda x: f"{x:.1f} us"),
                ("(P+load)/cpus", "oversubscription", lambda x: f"{x:.1f}"),
                ("c", "c_us", lambda x: f"{x:.1f} us"),
                ("informative", "informative", None),
            ],
        )
    )
    for key in ("emulated", "plain"):
        med, cur = summary[f"median_cost_{key}_s"], summary[f"current_cost_{key}_s"]
        if med is not None:
            out.print(
                f"{key}: median c = {med * 1e6:.1f} us per message "
                f"(gridcoll.runtime.host uses {cur * 1e6:.1f} us)"
            )
    out.print(f"wrote {path}", soft_wrap=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
