"""Seed 000's collectives measured for real over MPI on the emulated WAN (sec. 3.2-3.4).

Every call runs through :class:`gridcoll.Comm` (``Scatter``, ``Gather``, ...) under
``mpiexec``, one process per rank, the WAN emulated below every algorithm
(:mod:`gridcoll.runtime.emulation`), every rank's bytes checked against numpy's result
(:mod:`gridcoll.runtime.worker`); each call is planned on the effective grid (the grid
plus the runtime's host overhead, :mod:`gridcoll.runtime.host`) and run with the
planned parameters fixed, so the measured schedule is the one predicted and simulated.
One launch per grid runs all of its calls.

1. **Seed 000's figures**, 1 MB per rank on ``magpie:8,1`` (sizes per rank per peer,
   as MPI counts): scatter, gather and allgather, ``magpie-segmented`` against
   ``magpie-original`` and ``auto``. The paper prints scatter's two numbers (sec. 3.2:
   1078 ms segmented, 7437 ms original; goal within 10%).
2. **Model against measured** per collective and size on ``magpie:8,1`` with ``auto``:
   ``(predicted - measured) / measured`` (seed 000 reports up to 14% for small scatters
   and 16% for allgather; goal within 10% from 64 KB).
3. **allreduce** on ``das2:4`` and ``magpie:8,2`` from 8 B to 16 MB: ``auto`` against
   ``mpich`` (MPICH's flat-network algorithms on the same emulated grid) and the bound
   (:func:`gridcoll.network.bounds.collective_bound`).

4. **The rest of MPI's collectives** on ``das2:4`` and ``magpie:4,2`` with
   ``auto``: ``Scatterv``, ``Gatherv``, ``Allgatherv`` and ``Alltoallv`` with uneven
   counts (block ``i`` of ``((5 i) mod P + 1) / P`` times the size, every fourth one
   empty), and ``Reduce_scatter_block`` (``size``: one rank's block), ``Scan`` and
   ``Exscan`` (``size``: the vector) of unsigned sums, measured against simulated and
   against the bound. The measured call
   includes the agreement on counts (a broadcast of the root's counts for Scatterv and
   Gatherv, an allgather of every rank's for Alltoallv): ``simulated_s`` is the
   trimmed schedule's plus that agreement's, simulated alike (``agreement_s``).

``--quick`` (under about 3 minutes on two cores): one run per call; the model table at
64 KB only; allreduce at 8 B and 64 KB; the new collectives at 64 KB only.

Run: ``python bench/collectives_measured.py [--quick] [--repeat K]
[--out bench/results/collectives_measured.json]``.
"""

from __future__ import annotations

import os
import statistics

from _common import Bench, console, percent, rel_error, seconds, table, times
from gridcoll.network import get_grid
from gridcoll.network.bounds import collective_bound
from gridcoll.runtime.host import default_host_overhead, external_load
from gridcoll.runtime.worker import measure_calls
from gridcoll.simulate import simulate
from gridcoll.tune import Call, PlanCache, PlanOptions, plan

MB = 2**20
"""Seed 000's "1 MB" (gridcoll reads sizes with binary prefixes)."""

PAPER_MS = {
    ("scatter", "magpie-segmented"): 1078.0,
    ("scatter", "magpie-original"): 7437.0,
}
"""Seed 000, sec. 3.2: 1 MB to each of 8 clusters of one CPU (ms)."""

FIGURE_GRID = "magpie:8,1"
FIGURE_OPS = ("scatter", "gather", "allgather")
FIGURE_ALGOS = ("magpie-segmented", "magpie-original", "auto")
MODEL_OPS = ("scatter", "gather", "allgather", "alltoall", "reduce", "allreduce", "barrier")
MODEL_SIZES = (1024, 64 * 1024, MB)
QUICK_MODEL_SIZES = (64 * 1024,)
MODEL_GOAL = 0.10
ALLREDUCE_GRIDS = ("das2:4", "magpie:8,2")
ALLREDUCE_SIZES = tuple(8 * 8**i for i in range(8))  # 8 B .. 16 MiB
QUICK_ALLREDUCE_SIZES = (8, 64 * 1024)
ALLREDUCE_ALGOS = ("auto", "mpich")
NEW_GRIDS = ("das2:4", "magpie:4,2")
UNEVEN_OPS = ("scatterv", "gatherv", "allgatherv", "alltoallv")
NEW_OPS = (*UNEVEN_OPS, "reduce_scatter", "scan", "exscan")
"""The collectives part 4 measures (the v-variants' counts:
:func:`uneven_counts`)."""
NEW_SIZES = (64 * 1024, MB)
QUICK_NEW_SIZES = (64 * 1024,)


def uneven_counts(op: str, nranks: int, size: int) -> list[int]:
    """Block ``i`` of ``((5 i) mod P + 1) / P`` times ``size`` bytes, every fourth one
    empty (all-to-all: block ``src * P + dst`` as block ``src + dst``)."""
    n = nranks * nranks if op == "alltoallv" else nranks

    def one(i: int) -> int:
        return 0 if i % 4 == 3 else size * ((5 * i) % nranks + 1) // nranks

    if op == "alltoallv":
        return [one(i // nranks + i % nranks) for i in range(n)]
    return [one(i) for i in range(n)]


def _agreement_s(grid, op: str, root: int, overhead: float, cache: PlanCache) -> float:
    """Simulated seconds of a v-variant's agreement on counts (8-byte integers): the
    root's broadcast (Scatterv, Gatherv), every rank's send and receive counts gathered
    (Alltoallv), nothing (Allgatherv)."""
    P = grid.nranks
    if op in ("scatterv", "gatherv"):
        p = plan(grid, Call("bcast", 8 * P, root), PlanOptions(host_overhead=overhead), cache=cache)
    elif op == "alltoallv":
        p = plan(
            grid, Call("allgather", 16 * P, 0), PlanOptions(host_overhead=overhead), cache=cache
        )
    else:
        return 0.0
    return simulate(p.build(), p.network).total_s


def _row(grid, overhead: float, part: str, op: str, size: int, algo: str, cache: PlanCache):
    """Plan on the effective grid, simulate; the call the ranks will run (fixed params).
    A v-variant (``scatterv``...) runs its equal collective's plan on uneven counts."""
    nbytes = 0 if op == "barrier" else size
    counts, base, agreement = None, op, 0.0
    if op in UNEVEN_OPS:
        base = op[:-1]
        counts = uneven_counts(op, grid.nranks, size)
        nbytes = max(counts)
        agreement = _agreement_s(grid, op, 0, overhead, cache)
    call = Call(base, nbytes, 0, counts=None if counts is None else tuple(counts))
    p = plan(grid, call, PlanOptions(algo=algo, host_overhead=overhead), cache=cache)
    schedule = p.build()  # on p.network: the grid plus the overhead
    # the ranks run this plan's choice, its parameters fixed
    case = (call, PlanOptions(p.algorithm, dict(p.params), host_overhead=overhead))
    return {
        "part": part,
        "grid": grid.name,
        "op": op,
        "size": size,
        "algorithm": algo,
        "chosen": p.algorithm,
        "params": dict(p.params),
        "predicted_s": p.predicted_s + agreement,
        "simulated_s": simulate(schedule, p.network).total_s + agreement,
        "agreement_s": agreement,
        "bound_s": collective_bound(grid, base, nbytes, 0, counts).time_s,
        "case": case,
    }


def run_grid(spec: str, wanted: list[tuple[str, str, int, str]], repeat: int, load: float):
    """Plan, simulate and measure the (part, op, size, algo) calls of one grid."""
    grid = get_grid(spec)
    overhead = default_host_overhead(grid.nranks, emulated=True, load=load)
    cache = PlanCache()
    rows = [_row(grid, overhead, part, op, size, algo, cache) for part, op, size, algo in wanted]
    longest = max(max(r["simulated_s"], r["predicted_s"]) for r in rows)
    measured = measure_calls(
        grid,
        [r["case"] for r in rows],
        repeat=repeat,
        timeout=max(120.0, 5 * longest),
    )
    for row, got in zip(rows, measured, strict=True):
        median = statistics.median(got["measured_all_s"])
        paper = PAPER_MS.get((row["op"], row["algorithm"])) if spec == FIGURE_GRID else None
        row.pop("case")
        row.update(
            host_overhead_s=overhead,
            measured_s=median,
            measured_all_s=got["measured_all_s"],
            ran=got["algorithm"],
            model_error=rel_error(row["predicted_s"], median),
            meas_vs_sim=rel_error(median, row["simulated_s"]),
            ratio_to_bound=median / row["bound_s"] if row["bound_s"] > 0 else None,
            paper_s=paper / 1e3 if paper else None,
            error_vs_paper=rel_error(median, paper / 1e3) if paper else None,
        )
    return rows


def _wanted(quick: bool) -> dict[str, list[tuple[str, str, int, str]]]:
    figures = [("figure", op, MB, a) for op in FIGURE_OPS for a in FIGURE_ALGOS]
    sizes = QUICK_MODEL_SIZES if quick else MODEL_SIZES
    model = [("model", op, s, "auto") for op in MODEL_OPS for s in sizes]
    model = [m for m in model if m[1] != "barrier" or m[2] == sizes[0]]
    allreduce = QUICK_ALLREDUCE_SIZES if quick else ALLREDUCE_SIZES
    out = {FIGURE_GRID: figures + model}
    for spec in ALLREDUCE_GRIDS:
        out[spec] = [("allreduce", "allreduce", s, a) for s in allreduce for a in ALLREDUCE_ALGOS]
    for spec in NEW_GRIDS:
        new = [
            ("new", op, s, "auto")
            for op in NEW_OPS
            for s in (QUICK_NEW_SIZES if quick else NEW_SIZES)
        ]
        out[spec] = out.get(spec, []) + new
    return out


def _summary(rows: list[dict]) -> dict:
    fig = {(r["op"], r["algorithm"]): r for r in rows if r["part"] == "figure"}
    summary: dict = {}
    for op in FIGURE_OPS:
        seg, orig = fig[(op, "magpie-segmented")], fig[(op, "magpie-original")]
        summary[f"{op}_segmented_s"] = seg["measured_s"]
        summary[f"{op}_original_s"] = orig["measured_s"]
        summary[f"{op}_auto_s"] = fig[(op, "auto")]["measured_s"]
        summary[f"{op}_auto_chosen"] = fig[(op, "auto")]["chosen"]
    summary["paper_scatter_segmented_s"] = 1.078
    summary["paper_scatter_original_s"] = 7.437
    for algo in ("magpie-segmented", "magpie-original"):
        err = fig[("scatter", algo)]["error_vs_paper"]
        summary[f"scatter_{algo}_vs_paper"] = err
        summary[f"scatter_{algo}_within_10pct"] = abs(err) <= 0.10
    model = [r for r in rows if r["part"] in ("model", "figure") and r["size"] >= 64 * 1024]
    worst = max(model, key=lambda r: abs(r["model_error"]))
    summary["model_worst_from_64KB"] = {
        "op": worst["op"],
        "algorithm": worst["chosen"],
        "size": worst["size"],
        "error": worst["model_error"],
    }
    summary["model_within_10pct_from_64KB"] = sum(
        abs(r["model_error"]) <= MODEL_GOAL for r in model
    )
    summary["model_rows_from_64KB"] = len(model)
    allr = [r for r in rows if r["part"] == "allreduce"]
    speedups = {}
    for r in allr:
        if r["algorithm"] == "auto":
            other = next(
                x
                for x in allr
                if (x["grid"], x["size"], x["algorithm"]) == (r["grid"], r["size"], "mpich")
            )
            speedups[f"{r['grid']} {r['size']}"] = other["measured_s"] / r["measured_s"]
    summary["allreduce_auto_speedup_over_mpich"] = speedups
    summary.update(_new_summary(rows))
    return summary


def _new_summary(rows: list[dict]) -> dict:
    """The new collectives' part of the summary."""
    summary: dict = {}
    new = [r for r in rows if r["part"] == "new"]
    summary["new_collectives"] = {
        f"{r['grid']} {r['op']} {r['size']}": {
            "chosen": r["chosen"],
            "measured_vs_simulated": r["meas_vs_sim"],
            "ratio_to_bound": r["ratio_to_bound"],
        }
        for r in new
    }
    summary["new_worst_measured_vs_simulated"] = max(
        (abs(r["meas_vs_sim"]) for r in new), default=None
    )
    return summary


COMMON = [
    ("grid", "grid", None),
    ("op", "op", None),
    ("size", "size", str),
    ("algorithm", "algorithm", None),
    ("chosen", "chosen", None),
    ("measured", "measured_s", seconds),
    ("predicted", "predicted_s", seconds),
    ("model err", "model_error", percent),
    ("simulated", "simulated_s", seconds),
    ("bound", "bound_s", seconds),
    ("/ bound", "ratio_to_bound", times),
]
"""The columns of every table."""


def _print_new(out, rows: list[dict]) -> None:
    out.print(
        table(
            "the rest of MPI's collectives (auto; v-variants on uneven counts, agreement included)",
            [r for r in rows if r["part"] == "new"],
            [*COMMON, ("meas/sim", "meas_vs_sim", percent)],
        )
    )


def _print(out, rows: list[dict], summary: dict) -> None:
    if "scatter_segmented_s" not in summary:  # --only new
        _print_new(out, rows)
        return
    figure = [r for r in rows if r["part"] == "figure"]
    out.print(
        table(
            "1 MB per rank on magpie:8,1, measured over MPI on the emulated WAN (seed 000 3.2-3.4)",
            figure,
            [*COMMON, ("paper", "paper_s", seconds), ("vs paper", "error_vs_paper", percent)],
        )
    )
    out.print(
        table("model against measured (auto)", [r for r in rows if r["part"] == "model"], COMMON)
    )
    out.print(
        table(
            "allreduce: auto against mpich", [r for r in rows if r["part"] == "allreduce"], COMMON
        )
    )
    _print_new(out, rows)
    out.print(
        f"scatter 1 MB on magpie:8,1: segmented {seconds(summary['scatter_segmented_s'])} "
        f"(paper 1078 ms, {percent(summary['scatter_magpie-segmented_vs_paper'])}), original "
        f"{seconds(summary['scatter_original_s'])} (paper 7437 ms, "
        f"{percent(summary['scatter_magpie-original_vs_paper'])}); model within 10% from 64 KB "
        f"in {summary['model_within_10pct_from_64KB']} of {summary['model_rows_from_64KB']} rows"
    )


def main(argv: list[str] | None = None) -> int:
    bench = Bench("collectives_measured", "seed 000's collectives measured over MPI", argv)
    bench.parser.add_argument("--repeat", type=int, default=3, help="runs per call")
    bench.parser.add_argument(
        "--only", choices=("new",), help="run one part only (new: the rest of MPI's collectives)"
    )
    bench.parse()
    repeat = 1 if bench.quick else bench.args.repeat
    load = external_load()  # before any of our ranks run
    for spec, wanted in _wanted(bench.quick).items():
        if bench.args.only:
            wanted = [w for w in wanted if w[0] == bench.args.only]
        if wanted:
            for row in run_grid(spec, wanted, repeat, load):
                bench.add(**row)
    summary = _new_summary(bench.rows) if bench.args.only else _summary(bench.rows)
    summary.update(repeat=repeat, load_at_start=load)
    path = bench.finish(summary, loadavg_at_end=os.getloadavg())
    out = console()
    _print(out, bench.rows, summary)
    out.print(f"wrote {path}", soft_wrap=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
