"""FIFO vs fair links: ten reference broadcasts simulated under both sharing modes.

Each schedule is planned on the FIFO grid (the models are FIFO-based) and replayed by
the simulator on the same grid with FIFO links and with every link fair
(``Grid.with_link_sharing("fair")``, ``docs/grid-format.md``). ``simgrid_fair_s`` is the
reference figure of SimGrid 4.1 under fair sharing, where it gives one (the
two cases with contention); ``bench/simgrid_check.py`` replays all ten in SimGrid.

Run: ``python bench/sharing.py [--quick] [--out bench/results/sharing.json]``.
"""

from __future__ import annotations

from _common import Bench, console, percent, rel_error, seconds, table
from gridcoll.network import get_grid
from gridcoll.simulate import simulate
from gridcoll.tune import Call, PlanOptions, plan

KiB, MiB = 1024, 1024 * 1024

CASES = (
    ("magpie:8,1", "magpie-original", MiB, None),
    ("magpie:8,1", "magpie-segmented", MiB, None),
    ("magpie:8,1", "mpich", MiB, None),
    ("magpie:8,1", "auto", MiB, None),
    ("magpie:4,2", "auto", 256 * KiB, None),
    ("das2:4", "auto", MiB, None),
    ("teragrid", "ecef", MiB, 11.47),
    ("teragrid", "sa-clustered-segmented", MiB, None),
    ("transit-stub:20,3", "fef-segmented", 64 * KiB, None),
    ("transit-stub:20,3", "tps", 64 * KiB, 42.4),
)
"""(grid, algorithm, bytes, SimGrid's fair-sharing seconds or None)."""
QUICK = ("magpie-original", "mpich", "ecef", "tps")


def main(argv: list[str] | None = None) -> int:
    bench = Bench("sharing", "broadcasts under FIFO and fair link sharing", argv)
    bench.parse()
    for spec, algo, nbytes, simgrid in CASES:
        if bench.quick and algo not in QUICK:
            continue
        grid = get_grid(spec)
        chosen = plan(grid, Call("bcast", nbytes, 0), PlanOptions(algo=algo, check=False))
        schedule = chosen.build(grid)
        fifo = simulate(schedule, grid).total_s
        fair = simulate(schedule, grid.with_link_sharing("fair")).total_s
        bench.add(
            grid=spec,
            algorithm=algo,
            chosen=chosen.algorithm,
            nbytes=nbytes,
            fifo_s=fifo,
            fair_s=fair,
            fair_vs_fifo=rel_error(fair, fifo),
            simgrid_fair_s=simgrid,
            fair_vs_simgrid=None if simgrid is None else rel_error(fair, simgrid),
        )
    columns = [
        ("grid", "grid", None),
        ("algorithm", "algorithm", None),
        ("chosen", "chosen", None),
        ("FIFO", "fifo_s", seconds),
        ("fair", "fair_s", seconds),
        ("fair/FIFO", "fair_vs_fifo", percent),
        ("SimGrid fair", "simgrid_fair_s", seconds),
        ("fair/SimGrid", "fair_vs_simgrid", percent),
    ]
    console().print(table("FIFO vs fair links (simulated)", bench.rows, columns))
    changed = [r for r in bench.rows if r["fair_s"] != r["fifo_s"]]
    path = bench.finish(summary={"cases": len(bench.rows), "changed_by_fair": len(changed)})
    console().print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
