"""Broadcast and allreduce on a real network: namespaces, veths, htb, MPICH over TCP.

Each grid becomes a namespace network (:mod:`gridcoll.runtime.netns`: one namespace per
cluster, its links shaped with ``htb`` to the grid's bandwidths; latency is not
emulated). Then, as a newcomer would, end to end from the ``gridcoll`` command:

1. ``gridcoll discover --netns`` measures every pair of ranks over TCP, finds the
   clusters and writes the **measured grid** (``clusters_exact``: the grid's own
   clusters found);
2. ``gridcoll measure --netns --between`` runs seed 000's P-LogP procedure (sec. 2.2) on
   one wide-area route: its ``g(m)`` slope against the shaped rate (the payload rate on
   the wire: 1448 bytes of TCP payload per 1514-byte frame);
3. ``gridcoll run --netns`` plans each call on the measured grid and runs it over the
   namespace network (``measured_s``, beside ``predicted_s`` and ``simulated_s``), and
   ``gridcoll run`` without it runs the same plan on gridcoll's emulator for the same
   grid (``emulated_s``).

Goals: measured within 10% of simulated for broadcast and allreduce from 256 KiB;
P-LogP within 10% of the shaped rate; the clusters found exactly.

``--quick``: ``magpie:4,2`` only, 256 KiB and 1 MiB, no P-LogP run (about 3 minutes).
Needs root (network namespaces); elsewhere it says why and writes nothing.

Run: ``python bench/real_network.py [--quick] [--repeat K] [--out FILE]``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from _common import Bench, console, seconds, table, times
from gridcoll.network import get_grid
from gridcoll.network.gridfile import load_grid
from gridcoll.runtime import netns
from gridcoll.units import format_size

GRIDS = ("magpie:4,2", "das2:2")
SIZES = (64 * 1024, 256 * 1024, 1024 * 1024, 4 * 1024 * 1024)
QUICK_SIZES = (256 * 1024, 1024 * 1024)
OPS = ("bcast", "allreduce")
JUDGED_FROM = 256 * 1024
"""Smallest size the 10% goal judges (below it the real stack's per-message costs,
which no grid parameter models, weigh)."""
NAME = "bench"


def gridcoll(*args: str) -> dict[str, Any]:
    """Run ``gridcoll ARGS --json``; its JSON object (an ``error`` key if it failed)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GRIDCOLL_")}
    out = subprocess.run(
        [sys.executable, "-m", "gridcoll", *args, "--json"],
        capture_output=True,
        text=True,
        timeout=1800,
        check=False,
        env=env,
    )
    try:
        data = json.loads(out.stdout)
    except json.JSONDecodeError:
        tail = " ".join(out.stderr.split())[-300:]
        return {"error": f"exit {out.returncode}: {tail}"}
    if out.returncode != 0 and "error" not in data:
        data["error"] = f"exit {out.returncode}"
    return data


def plogp_rate(grid_spec: str, found: Path, a: int, b: int, tmp: Path) -> dict[str, Any]:
    """Seed 000's procedure from rank ``a`` to ``b``: ``g``'s slope against the shaper."""
    out = tmp / "plogp.json"
    data = gridcoll(
        "measure", "--grid", str(found), "--netns", NAME, "--between", f"{a},{b}",
        "--max-size", "256KiB", "--out", str(out),
    )  # fmt: skip
    grid = get_grid(grid_spec)
    ca, cb = grid.cluster_of[a], grid.cluster_of[b]
    (link,) = grid.routes[(ca, cb)].links
    shaped = grid.links[link].bandwidth * netns.FRAME_PAYLOAD
    row: dict[str, Any] = {"route": link, "shaped_payload_Bps": shaped}
    if "error" in data:
        return row | {"error": data["error"]}
    points = json.loads(out.read_text())["points"]
    big = [p for p in points if p["m"] >= 64 * 1024]
    slope = (big[-1]["g"] - big[0]["g"]) / (big[-1]["m"] - big[0]["m"])
    return row | {
        "measured_Bps": 1 / slope,
        "error_rel": (1 / slope - shaped) / shaped,
        "L_s": json.loads(out.read_text())["L"],
        "wall_s": data.get("wall_s"),
    }


def run_call(found: Path, op: str, size: int, repeat: int, real: bool) -> dict[str, Any]:
    """``gridcoll run`` of one call on the namespace network (``real``) or the emulator."""
    args = ["run", "--grid", str(found), "--op", op, "--size", str(size)]
    args += ["--repeat", str(repeat)] + (["--netns", NAME] if real else [])
    return gridcoll(*args)


def main() -> None:
    bench = Bench("real_network", __doc__.splitlines()[0])
    bench.parser.add_argument("--repeat", type=int, default=3, help="runs per call (median)")
    args = bench.parse()
    out = console()
    reason = netns.not_permitted()
    if reason is not None:
        out.print(f"bench/real_network.py: {reason}; nothing measured")
        return
    grids = GRIDS[:1] if bench.quick else GRIDS
    sizes = QUICK_SIZES if bench.quick else SIZES
    summary: dict[str, Any] = {"grids": {}}
    netns.down(NAME)
    for spec in grids:
        grid = get_grid(spec)
        with tempfile.TemporaryDirectory() as tmp_dir, netns.network(grid, name=NAME):
            tmp = Path(tmp_dir)
            found = tmp / "found.json"
            out.print(f"{spec}: discovering the clusters over TCP ...")
            found_data = gridcoll("discover", "--grid", spec, "--netns", NAME, "--out", str(found))
            if "error" in found_data:
                raise SystemExit(f"{spec}: discovery failed: {found_data['error']}")
            grid_summary: dict[str, Any] = {
                "clusters_exact": found_data.get("matches_grid"),
                "discover_wall_s": found_data.get("wall_s"),
            }
            measured_grid = load_grid(found)
            if not bench.quick:
                b = grid.members[1][0]
                out.print(f"{spec}: P-LogP procedure from rank 0 to rank {b} ...")
                grid_summary["plogp"] = plogp_rate(spec, found, 0, b, tmp)
            worst = 0.0
            for op in OPS:
                for size in sizes:
                    out.print(f"{spec}: {op} {format_size(size)} ...")
                    real = run_call(found, op, size, args.repeat, real=True)
                    emulated = run_call(found, op, size, args.repeat, real=False)
                    row = bench.add(
                        grid=spec,
                        op=op,
                        size=size,
                        algorithm=real.get("algorithm"),
                        params=real.get("params"),
                        measured_s=real.get("measured_s"),
                        measured_all_s=real.get("measured_all_s"),
                        predicted_s=real.get("predicted_s"),
                        simulated_s=real.get("simulated_s"),
                        bound_s=real.get("bound_s"),
                        emulated_s=emulated.get("measured_s"),
                        emulated_algorithm=emulated.get("algorithm"),
                        verified=real.get("verified"),
                        error=real.get("error") or emulated.get("error"),
                    )
                    if row["measured_s"] and row["simulated_s"]:
                        row["measured_over_simulated"] = row["measured_s"] / row["simulated_s"]
                        if size >= JUDGED_FROM:
                            worst = max(worst, row["measured_over_simulated"])
                    if row["emulated_s"] and row["measured_s"]:
                        row["measured_over_emulated"] = row["measured_s"] / row["emulated_s"]
            grid_summary["worst_measured_over_simulated_from_256KiB"] = worst
            grid_summary["measured_grid"] = measured_grid.name
            summary["grids"][spec] = grid_summary
    judged = [r for r in bench.rows if r["size"] >= JUDGED_FROM]
    summary["goal_measured_within_10pct_of_simulated"] = bool(judged) and all(
        r.get("measured_over_simulated") is not None and r["measured_over_simulated"] <= 1.10
        for r in judged
    )
    summary["all_verified"] = all(r.get("verified") for r in bench.rows)
    path = bench.finish(summary)
    out.print(
        table(
            "on the namespace network (measured) against the model, simulator and emulator",
            bench.rows,
            [
                ("grid", "grid", None),
                ("op", "op", None),
                ("size", "size", format_size),
                ("algorithm", "algorithm", None),
                ("measured", "measured_s", seconds),
                ("predicted", "predicted_s", seconds),
                ("simulated", "simulated_s", seconds),
                ("emulated", "emulated_s", seconds),
                ("meas/sim", "measured_over_simulated", times),
                ("meas/emu", "measured_over_emulated", times),
            ],
        )
    )
    out.print(json.dumps(summary, indent=1))
    out.print(f"written to {path}")


if __name__ == "__main__":
    main()
