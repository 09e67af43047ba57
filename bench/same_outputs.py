"""Do two versions of gridcoll give the same figures? For refactors that must not change
behaviour.

Runs the same seeded, deterministic commands on this checkout and on a git revision
(``--base``, unpacked with ``git archive`` into a temporary folder) and compares their
JSON outputs field by field, leaving out the fields that measure this machine's wall
clock (:data:`VOLATILE`). The commands: ``gridcoll plan`` and ``gridcoll simulate`` on
seed 000's, seed 001's and seed 003's grids with an unlimited planning budget (so a busy
machine cannot change a choice), and seed 004's four experiments in simulation
(``gridcoll dynamic``, the name both old and new versions accept), the transition with
leaves and with crashes. ``--quick`` keeps the plans and simulations and one small transition.

    python bench/same_outputs.py --base REV [--quick] [--out FILE]

Writes one JSON document (default ``bench/results/same_outputs.json``): per command,
``same`` and, where they differ, the first differing paths. Exit status 1 if any
differs. The full run takes about 10 minutes per version on two cores (the fig. 6
latency experiment is most of it).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

from _common import Bench  # noqa: E402

PLANS = [
    ["plan", "--grid", "magpie:8,1", "--op", "bcast", "--size", "1MiB"],
    ["plan", "--grid", "das2:4", "--op", "allreduce", "--size", "64KiB"],
    ["plan", "--grid", "das2:4", "--op", "reduce", "--size", "1MiB", "--root", "3"],
    ["plan", "--grid", "teragrid", "--op", "allgather", "--size", "64KiB"],
    ["plan", "--grid", "magpie:4,2", "--op", "alltoall", "--size", "256KiB"],
    ["plan", "--grid", "transit-stub:20,3", "--op", "bcast", "--size", "16KiB"],
    ["simulate", "--grid", "magpie:4,2", "--op", "bcast", "--size", "256KiB"],
    ["simulate", "--grid", "teragrid", "--op", "scatter", "--size", "64KiB", "--root", "8"],
]
"""Plans and simulations: with ``--budget none --json`` appended."""

TRANSITION = ["--grid", "das2-spread:32,4", "--size", "256KiB", "--times", "30,45,60"]

PHOENIX = [
    ["dynamic", "--experiment", "latency"],
    ["dynamic", "--experiment", "bandwidth"],
    ["dynamic", "--experiment", "reduction"],
    ["dynamic", "--experiment", "transition", *TRANSITION],
    ["dynamic", "--experiment", "transition", *TRANSITION, "--crash"],
]
"""Seed 004's experiments in simulation (seeded), with ``--json`` appended."""

QUICK_TIMES = ["--size", "64KiB", "--times", "40,60,80"]

QUICK_PHOENIX = [
    ["dynamic", "--experiment", "transition", "--grid", "das2-spread:24,3", *QUICK_TIMES],
]

VOLATILE = re.compile(r"(^|_)(wall|plan_time|elapsed|cpu)(_|$)")
"""Field names that time this machine rather than the grid."""


def unpack(rev: str, into: Path) -> Path:
    """The tree of ``rev`` in a folder of its own (nothing of this checkout's state)."""
    archive = into / "base.tar"
    subprocess.run(
        ["git", "-C", str(ROOT), "archive", "--format=tar", "-o", str(archive), rev], check=True
    )
    tree = into / "base"
    with tarfile.open(archive) as tar:
        tar.extractall(tree, filter="data")
    return tree


def run(tree: Path, args: list[str]) -> tuple[object, float]:
    """``python -m gridcoll ARGS`` with ``tree``'s sources first on the path."""
    env = dict(os.environ, PYTHONPATH=str(tree / "src"))
    start = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "gridcoll", *args],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    wall = time.monotonic() - start
    if proc.returncode != 0:
        return {"error": proc.stderr.strip().splitlines()[-1:]}, wall
    return json.loads(proc.stdout), wall


def differences(a: object, b: object, path: str = "") -> list[str]:
    """The paths at which ``a`` and ``b`` differ, volatile fields left out."""
    if isinstance(a, dict) and isinstance(b, dict):
        out = []
        for key in sorted(set(a) | set(b)):
            if VOLATILE.search(str(key)):
                continue
            if key not in a or key not in b:
                out.append(f"{path}/{key} (only in {'new' if key not in a else 'base'})")
            else:
                out += differences(a[key], b[key], f"{path}/{key}")
        return out
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return [f"{path} (length {len(a)} vs {len(b)})"]
        pairs = enumerate(zip(a, b, strict=True))
        return [d for i, (x, y) in pairs for d in differences(x, y, f"{path}/{i}")]
    return [] if a == b else [f"{path}: {a!r} vs {b!r}"]


def main() -> int:
    bench = Bench("same_outputs", __doc__.splitlines()[0])
    bench.parser.add_argument("--base", required=True, help="the git revision to compare with")
    args = bench.parse()
    commands = [[*c, "--budget", "none", "--json"] for c in PLANS]
    commands += [[*c, "--json"] for c in (QUICK_PHOENIX if args.quick else PHOENIX)]
    with tempfile.TemporaryDirectory() as tmp:
        base = unpack(args.base, Path(tmp))
        for cmd in commands:
            new, new_s = run(ROOT, cmd)
            old, old_s = run(base, cmd)
            diffs = differences(new, old)
            bench.add(
                command="gridcoll " + " ".join(cmd),
                same=not diffs,
                differences=diffs[:10],
                wall_s={"new": new_s, "base": old_s},
            )
            mark = "same" if not diffs else f"DIFFERENT ({len(diffs)}: {diffs[0]})"
            print(f"{mark:>10}  gridcoll {' '.join(cmd)}", flush=True)
    rows = bench.rows
    summary = {"base": args.base, "commands": len(rows), "same": sum(r["same"] for r in rows)}
    bench.finish(summary)
    print(f"{summary['same']} of {summary['commands']} commands give the same output")
    return 0 if summary["same"] == summary["commands"] else 1


if __name__ == "__main__":
    sys.exit(main())
