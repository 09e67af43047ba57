"""Measuring the network on the emulator: accuracy, cost, discovery, prediction.

1. **P-LogP accuracy** (seed 000 sec. 2.2): ``gridcoll measure --both-directions`` on
   WAN routes with known parameters (``magpie:2,2`` 0-2, ``das2:1`` VU-UvA, an
   asymmetric 2 ms / 2 MB/s vs 5 ms / 1 MB/s pair): the worst relative error of ``L``
   and of ``g(m)`` for ``m >= 1 KiB``, per direction (goal: within 10%). Only WAN links
   are emulated; the LAN is this machine's shared memory, so only WAN routes have a
   configured truth.
2. **Cost**: the whole procedure (k_m = 18, as the paper) on one emulated WAN link
   (``magpie:2,2`` 0 -> 2): wall time (goal: under a minute), messages and bytes sent,
   beside a saturation-based method for the same sizes (seed 000 claims 90-95% less).
3. **Discovery** (seed 001 pools / our gap method): ``gridcoll discover`` on
   ``das2:2``, ``magpie:4,2`` and (full run) ``teragrid``: same clusters as configured?
4. **Prediction**: a grid built from measured tables (WAN both ways and both LANs of
   ``magpie:2,2``) predicts, by simulation, the broadcast times measured by the runtime
   on the emulated ``magpie:2,2`` (64 KiB - 1 MiB; goal: within 10%).

Run: ``python bench/measure_accuracy.py [--quick] [--out bench/results/measure_accuracy.json]``
(``--quick``: 4 KiB tables, no teragrid, one broadcast size).
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import Bench, console, percent, seconds, table
from gridcoll.network import get_grid, load_grid

ASYMMETRIC = Path(__file__).resolve().parent.parent / "docs" / "grids" / "asymmetric.json"
"""2 ms / 2 MB/s from A to B, 5 ms / 1 MB/s back."""


def gridcoll(*args: str, timeout: float = 1800) -> tuple[dict, float]:
    """Run ``gridcoll ... --json``; return its object and the wall time."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GRIDCOLL_")}
    start = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "gridcoll", *args, "--json"],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        check=False,
    )
    if proc.returncode != 0:
        raise SystemExit(f"gridcoll {' '.join(args)} failed: {proc.stderr.strip()[-600:]}")
    return json.loads(proc.stdout), time.monotonic() - start


def accuracy(bench: Bench, tmp: Path, spec: str, a: int, b: int, max_size: str) -> None:
    out = tmp / "link.json"
    result, wall = gridcoll(
        "measure", "--grid", spec, "--between", f"{a},{b}", "--both-directions",
        "--max-size", max_size, "--out", str(out),
    )  # fmt: skip
    grid = get_grid(spec)
    for direction, (src, dst) in (("forward", (a, b)), ("backward", (b, a))):
        true, got = grid.plogp(src, dst), result[direction]
        g_errors = [
            (p["g_s"] - true.g(p["m"])) / true.g(p["m"]) for p in got["points"] if p["m"] >= 1024
        ]
        worst = max(g_errors, key=abs)
        bench.add(
            part="accuracy",
            grid=grid.name,
            route=f"{src}->{dst}",
            L_true_s=true.L,
            L_s=got["L_s"],
            L_err=(got["L_s"] - true.L) / true.L,
            g_err_worst=worst,
            g_err_median=statistics.median(abs(e) for e in g_errors),
            g0_s=got["g0_s"],
            sizes=len(got["points"]),
            messages=got["cost"]["messages"],
            bytes=got["cost"]["bytes"],
            wall_s=wall / 2,
        )


def cost(bench: Bench, tmp: Path) -> None:
    result, wall = gridcoll(
        "measure", "--grid", "magpie:2,2", "--between", "0,2", "--out", str(tmp / "full.json"),
        "--plot", str(tmp / "full.png"),
    )  # fmt: skip
    grid = get_grid("magpie:2,2")
    true = grid.plogp(0, 2)
    bench.add(
        part="cost",
        grid="magpie:2,2",
        route="0->2",
        wall_s=wall,
        measure_s=result["elapsed_s"],
        sizes=len(result["points"]),
        k_max=result["k_max"],
        messages=result["cost"]["messages"],
        bytes=result["cost"]["bytes"],
        link_s=result["cost"]["link_s"],
        saturation_messages=result["saturation_cost"]["messages"],
        saturation_bytes=result["saturation_cost"]["bytes"],
        saturation_link_s=result["saturation_cost"]["link_s"],
        savings=result["savings"],
        L_err=(result["L_s"] - true.L) / true.L,
        g_err_worst=max(
            (
                (p["g_s"] - true.g(p["m"])) / true.g(p["m"])
                for p in result["points"]
                if p["m"] >= 1024
            ),
            key=abs,
        ),
        os_128k_s=next((p["os_s"] for p in result["points"] if p["m"] == 131072), None),
        notes=result["notes"],
    )


def discovery(bench: Bench, tmp: Path, spec: str) -> None:
    result, wall = gridcoll(
        "discover", "--grid", spec, "--out", str(tmp / "found.json"), "--no-refine"
    )
    bench.add(
        part="discover",
        grid=spec,
        matches=result["matches_grid"],
        clusters=len(result["clusters"]),
        metric=result["metric"],
        separation=result["separation"],
        wall_s=wall,
    )


def prediction(bench: Bench, tmp: Path, sizes: list[int], max_size: str) -> None:
    from gridcoll.runtime.worker import measure_schedule
    from gridcoll.simulate import simulate
    from gridcoll.tune import Call, plan

    grid = get_grid("magpie:2,2")
    path = tmp / "g0.json"
    steps = [("0,2", True), ("0,1", False), ("2,3", False)]
    spec = "magpie:2,2"
    start = time.monotonic()
    for k, (pair, both) in enumerate(steps):
        out = tmp / f"g{k + 1}.json"
        args = ["measure", "--grid", spec, "--between", pair, "--out", str(tmp / f"t{k}.json")]
        args += ["--grid-out", str(out), "--max-size", max_size]
        if both:
            args.append("--both-directions")
        gridcoll(*args)
        spec, path = str(out), out
    measuring_s = time.monotonic() - start
    measured = load_grid(path)
    for nbytes in sizes:
        chosen = plan(measured, Call("bcast", nbytes))
        schedule = chosen.build(measured)
        predicted = simulate(schedule, measured).total_s
        configured = simulate(schedule, grid).total_s
        runs = measure_schedule(grid, schedule, repeat=3)
        real = statistics.median(runs)
        bench.add(
            part="prediction",
            grid="magpie:2,2",
            size=nbytes,
            algorithm=chosen.algorithm,
            predicted_s=predicted,
            configured_grid_s=configured,
            measured_s=real,
            runs_s=runs,
            error=(predicted - real) / real,
            configured_error=(configured - real) / real,
            measuring_s=measuring_s,
        )


def main() -> None:
    bench = Bench("measure_accuracy", __doc__.splitlines()[0])
    args = bench.parse()
    quick = args.quick
    with tempfile.TemporaryDirectory(prefix="gridcoll-bench-") as tmpdir:
        tmp = Path(tmpdir)
        for spec, a, b in (("magpie:2,2", 0, 2), ("das2:1", 0, 2), (str(ASYMMETRIC), 0, 1)):
            accuracy(bench, tmp, spec, a, b, "4KB" if quick else "64KB")
        if not quick:
            cost(bench, tmp)
        for spec in ("das2:2", "magpie:4,2") + (() if quick else ("teragrid",)):
            discovery(bench, tmp, spec)
        prediction(bench, tmp, [256 * 1024] if quick else [65536, 262144, 1048576], "256KB")
    out = console()
    acc = [r for r in bench.rows if r["part"] == "accuracy"]
    out.print(table("P-LogP accuracy on emulated WAN routes (m >= 1 KiB)", acc, [
        ("grid", "grid", None), ("route", "route", None), ("L", "L_s", seconds),
        ("L err", "L_err", percent), ("worst g err", "g_err_worst", percent),
        ("median |g err|", "g_err_median", percent), ("g(0)", "g0_s", seconds),
        ("time", "wall_s", seconds),
    ]))  # fmt: skip
    for r in bench.rows:
        if r["part"] == "cost":
            s = r["savings"]
            out.print(
                f"full procedure magpie:2,2 0->2: {r['wall_s']:.1f} s wall ({r['measure_s']:.1f} s "
                f"measuring), {r['sizes']} sizes, {r['messages']} messages, {r['bytes']} B; "
                f"saturation: {r['saturation_messages']} messages, {r['saturation_bytes']} B; "
                f"savings {s['messages']:.1%} messages, {s['bytes']:.1%} bytes, "
                f"{s['link_s']:.1%} link time"
            )
    disc = [r for r in bench.rows if r["part"] == "discover"]
    out.print(table("discovery", disc, [
        ("grid", "grid", None), ("same clusters", "matches", None), ("clusters", "clusters", None),
        ("metric", "metric", None), ("time", "wall_s", seconds),
    ]))  # fmt: skip
    pred = [r for r in bench.rows if r["part"] == "prediction"]
    title = "broadcast on emulated magpie:2,2: measured grid's prediction vs runtime"
    out.print(table(title, pred, [
        ("size", "size", None), ("algorithm", "algorithm", None),
        ("predicted", "predicted_s", seconds), ("measured", "measured_s", seconds),
        ("error", "error", percent), ("configured grid's error", "configured_error", percent),
    ]))  # fmt: skip
    summary = {
        "worst_L_err": max((abs(r["L_err"]) for r in acc), default=None),
        "worst_g_err": max((abs(r["g_err_worst"]) for r in acc), default=None),
        "discovery_all_match": all(r["matches"] for r in disc),
        "worst_prediction_err": max((abs(r["error"]) for r in pred), default=None),
    }
    cost_rows = [r for r in bench.rows if r["part"] == "cost"]
    if cost_rows:
        summary["full_measure_wall_s"] = cost_rows[0]["wall_s"]
        summary["full_measure_bytes"] = cost_rows[0]["bytes"]
        summary["full_measure_messages"] = cost_rows[0]["messages"]
    out.print(f"summary: {summary}")
    path = bench.finish(summary)
    out.print(f"written to {path}")


if __name__ == "__main__":
    main()
