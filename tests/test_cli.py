"""The command line: every subcommand, its JSON, and one-line errors for bad input."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from gridcoll.cli.demo import OP_ALGORITHMS
from gridcoll.cli.main import COMMANDS, EXIT_ERROR, build_parser, main
from gridcoll.network import get_grid, save_grid

pytestmark = pytest.mark.usefixtures("no_wall_clock")  # budgets: nominal only (conftest)

PLAN_FIELDS = {
    "op",
    "grid",
    "size",
    "root",
    "algorithm",
    "segment_size",
    "predicted_s",
    "bound_s",
    "candidates",
}
CANDIDATE_FIELDS = {"algorithm", "segment_size", "predicted_s"}


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def run_json(capsys, *argv: str) -> dict:
    code, out, err = run(capsys, *argv, "--json")
    assert code == 0, err
    return json.loads(out)  # exactly one JSON document: loads() rejects trailing text


# -- structure ---------------------------------------------------------------------------
def test_every_command_module_has_add_parser_and_run():
    names = set()
    for module in COMMANDS:
        assert callable(module.add_parser) and callable(module.run)
        names.add(module.__name__.rsplit(".", 1)[-1])
    assert names >= {"algorithms", "plan", "simulate", "demo"}
    assert build_parser().prog == "gridcoll"


def test_help_and_version_exit_zero(capsys):
    for argv in (["--help"], ["plan", "--help"], ["--version"]):
        with pytest.raises(SystemExit) as info:
            main(argv)
        assert info.value.code == 0
    assert "gridcoll" in capsys.readouterr().out


# -- algorithms -----------------------------------------------------------------------------
def test_algorithms_table_lists_builders_with_params(capsys):
    code, out, _ = run(capsys, "algorithms")
    assert code == 0
    for name in ("flat", "chain-segmented", "binomial", "dary-segmented"):
        assert name in out
    assert "segment_size" in out and "wan_degree" in out


def test_algorithms_json(capsys):
    data = run_json(capsys, "algorithms", "--op", "bcast")
    assert {b["name"] for b in data} >= {"flat", "binomial-segmented", "dary-segmented"}
    for b in data:
        assert set(b) == {"op", "name", "summary", "params"}
        assert b["op"] == "bcast" and b["summary"]
    dary = next(b for b in data if b["name"] == "dary-segmented")
    assert dary["params"] == ["segment_size", "degree"]


# -- plan -----------------------------------------------------------------------------------
def test_plan_json_fields(capsys):
    data = run_json(capsys, "plan", "--grid", "magpie:8,1", "--op", "bcast", "--size", "1MiB")
    assert set(data) >= PLAN_FIELDS
    assert data["op"] == "bcast" and data["grid"] == "magpie:8,1"
    assert data["size"] == 2**20 and data["root"] == 0
    # windowed cut: the direct 1 MB/s link from 10 ms, 6 relayed ones from 20 ms + os(1)
    relayed = 20e-3 + 4e-6 + 1 / 150e6
    assert data["bound_s"] == pytest.approx((2**20 + 1e6 * 10e-3 + 6e6 * relayed) / 7e6)
    cands = data["candidates"]
    assert cands and all(set(c) >= CANDIDATE_FIELDS for c in cands)
    times = [c["predicted_s"] for c in cands]
    assert times == sorted(times)  # best first
    assert cands[0]["algorithm"] == data["algorithm"]
    assert cands[0]["predicted_s"] == data["predicted_s"]
    assert data["predicted_s"] >= data["bound_s"] * (1 - 1e-9)
    assert 1 <= data["segment_size"] <= 2**20


@pytest.mark.parametrize("size", ["1MiB", "64KB", "1048576"])
def test_plan_size_units(capsys, size):
    data = run_json(capsys, "plan", "--grid", "lan:4", "--size", size)
    assert data["size"] == {"1MiB": 2**20, "64KB": 65536, "1048576": 2**20}[size]


def test_plan_table_marks_the_choice_and_prints_one_summary(capsys):
    code, out, err = run(capsys, "plan", "--grid", "magpie:4,2", "--size", "256KiB")
    assert code == 0 and not err
    assert "/ bound" in out and "predicted" in out
    summary = [line for line in out.splitlines() if line.startswith("chosen:")]
    assert len(summary) == 1 and "bound" in summary[0]
    marked = [line for line in out.splitlines() if "│ * │" in line]
    assert len(marked) == 1


def test_plan_named_algorithm_root_and_explain(capsys):
    data = run_json(
        capsys, "plan", "--grid", "magpie:4,2", "--size", "64KiB", "--algo", "binomial",
        "--root", "5", "--explain",
    )  # fmt: skip
    assert data["algorithm"] == "binomial" and data["root"] == 5
    assert [c["algorithm"] for c in data["candidates"]] == ["binomial"]
    assert "binomial" in data["explanation"]
    code, out, _ = run(capsys, "plan", "--grid", "lan:8", "--size", "64KiB", "--explain")
    assert code == 0 and "chosen" in out


def test_plan_fixed_segment_size(capsys):
    data = run_json(
        capsys, "plan", "--grid", "lan:8", "--size", "1MiB", "--algo", "chain-segmented",
        "--segment-size", "4KiB", "--itemsize", "8",
    )  # fmt: skip
    assert data["segment_size"] == 4096
    assert data["candidates"][0]["segment_size"] == 4096


def test_plan_reads_a_grid_file(capsys, tmp_path):
    path = tmp_path / "das.json"
    save_grid(get_grid("das2:2"), path)
    data = run_json(capsys, "plan", "--grid", str(path), "--size", "64KiB")
    assert data["grid"] == str(path)
    assert data["predicted_s"] > 0


# -- simulate ------------------------------------------------------------------------------
def test_simulate_json_adds_simulated_time(capsys):
    data = run_json(capsys, "simulate", "--grid", "magpie:4,2", "--size", "64KiB")
    assert set(data) >= PLAN_FIELDS | {"simulated_s"}
    assert data["simulated_s"] >= data["bound_s"] * (1 - 1e-9)


def test_simulate_flat_tree_matches_the_model(capsys):
    # seed 002 Table 1's flat tree is exact in the simulator: (P-1) g(M) + L
    data = run_json(capsys, "simulate", "--grid", "lan:6", "--size", "16KiB", "--algo", "flat")
    assert data["simulated_s"] == pytest.approx(data["predicted_s"], rel=1e-9)


def test_simulate_table_and_plot(capsys, tmp_path):
    png = tmp_path / "out" / "timeline.png"
    code, out, _ = run(
        capsys, "simulate", "--grid", "magpie:2,2", "--size", "16KiB", "--plot", str(png)
    )
    assert code == 0
    assert "simulated" in out and "timeline written" in out
    assert png.exists() and png.stat().st_size > 1000


# -- demo ----------------------------------------------------------------------------------
def test_demo_writes_table_plot_and_json(capsys, tmp_path):
    code, out, err = run(
        capsys, "demo", "--no-measure", "--grid", "magpie:2,1", "--sizes", "16KiB,64KiB",
        "--out", str(tmp_path),
    )  # fmt: skip
    assert code == 0, err
    assert (tmp_path / "sizes.png").stat().st_size > 1000
    data = json.loads((tmp_path / "demo.json").read_text())
    algorithms = data["algorithms"]
    assert "auto" in algorithms and data["ops"] == ["bcast", "allreduce"]
    assert len(data["rows"]) == 2 * (len(algorithms) + len(OP_ALGORITHMS["allreduce"]))
    assert {r["op"] for r in data["rows"]} == {"bcast", "allreduce"}
    assert (tmp_path / "sizes-allreduce.png").stat().st_size > 1000
    for row in data["rows"]:
        assert row["simulated_s"] >= row["bound_s"] * (1 - 1e-9)
        assert row["measured_s"] is None
        assert row["host_overhead_s"] == 0.0  # --no-measure: the grid as described
    assert data["measured"] is False
    assert "broadcast on magpie:2,1" in out and "allreduce on magpie:2,1" in out
    assert "bound" in out


def test_demo_no_measure_plans_with_a_given_host_overhead(capsys, tmp_path):
    data = run_json(
        capsys, "demo", "--no-measure", "--grid", "magpie:8,1", "--sizes", "1MiB",
        "--algorithms", "multitree", "--ops", "bcast", "--host-overhead", "200us",
        "--out", str(tmp_path),
    )  # fmt: skip
    (row,) = data["rows"]
    assert row["host_overhead_s"] == pytest.approx(200e-6)
    assert data["host_overhead_s"] == {"magpie:8,1": pytest.approx(200e-6)}
    # segments are not cut finer than the host can push (no overhead: 1020 B)
    assert row["params"]["segment_size"] > 2048


def test_demo_without_mpi_falls_back_to_simulation(capsys, tmp_path, monkeypatch):
    import gridcoll.cli.demo as demo

    monkeypatch.setattr(demo, "mpi_available", lambda: "no mpiexec found")
    code, _out, err = run(
        capsys, "demo", "--grid", "magpie:2,1", "--sizes", "16KiB", "--algorithms", "binomial",
        "--out", str(tmp_path),
    )  # fmt: skip
    assert code == 0
    assert "no MPI here (no mpiexec found)" in err and "--no-measure" in err
    data = json.loads((tmp_path / "demo.json").read_text())
    assert data["measured"] is False and data["rows"][0]["measured_s"] is None


def test_demo_json_and_explicit_algorithms(capsys, tmp_path):
    data = run_json(
        capsys, "demo", "--no-measure", "--grid", "lan:4", "--grid", "magpie:2,2", "--sizes",
        "16KiB", "--algorithms", "binomial,auto", "--ops", "bcast", "--out", str(tmp_path),
    )  # fmt: skip
    assert data["grids"] == ["lan:4", "magpie:2,2"]
    assert [(r["grid"], r["algorithm"]) for r in data["rows"]] == [
        ("lan:4", "binomial"),
        ("lan:4", "auto"),
        ("magpie:2,2", "binomial"),
        ("magpie:2,2", "auto"),
    ]


def test_demo_rows_take_a_measure_hook_and_compute_speedups():
    from gridcoll.cli.demo import DemoRow, _with_speedups, compute_row

    row = compute_row(get_grid("lan:4"), "binomial", 4096, measure=lambda grid, sched: 0.5)
    assert isinstance(row, DemoRow)
    assert row.measured_s == 0.5 and row.time_s == 0.5
    assert row.chosen == "binomial"
    base = DemoRow("g", "mpich", 1, "mpich", {}, 1.0, 2.0, 0.5)
    fast = DemoRow("g", "auto", 1, "x", {}, 0.5, 0.5, 0.5)
    rows = _with_speedups([base, fast])
    assert rows[0].speedup == 1.0 and rows[1].speedup == 4.0


# -- errors: one line, exit 2, no traceback ----------------------------------------------------
def _grid_files(tmp_path: Path) -> dict[str, Path]:
    files = {
        "bad-json": "{not json",
        "no-lan": json.dumps({"clusters": [{"name": "A", "ranks": 2}]}),
        "link-point": json.dumps(
            {
                "clusters": [
                    {"name": "A", "ranks": 1, "lan": {"latency": "1us", "bandwidth": "1MB/s"}}
                ],
                "links": [{"name": "x", "g": [{"m": 0}]}],
            }
        ),
        "route-type": json.dumps(
            {
                "clusters": [
                    {"name": "A", "ranks": 1, "lan": {"latency": "1us", "bandwidth": "1MB/s"}}
                ],
                "routes": [3],
            }
        ),
    }
    out = {}
    for name, text in files.items():
        out[name] = tmp_path / f"{name}.json"
        out[name].write_text(text)
    return out


BAD_CALLS = {
    "malformed grid file": (["--grid", "{bad-json}", "--size", "1MiB"], "not valid JSON"),
    "grid file missing cluster fields": (
        ["--grid", "{no-lan}", "--size", "1MiB"],
        "cluster 0 needs 'name', 'ranks' and 'lan'",
    ),
    "grid file with a bad link point": (["--grid", "{link-point}", "--size", "1MiB"], "grid file"),
    "grid file with a bad route": (["--grid", "{route-type}", "--size", "1MiB"], "grid file"),
    "unknown preset": (["--grid", "nosuch:4", "--size", "1MiB"], "unknown grid 'nosuch:4'"),
    "preset arguments": (["--grid", "magpie:8", "--size", "1MiB"], "needs 2 integer"),
    "unknown algorithm": (
        ["--grid", "magpie:8,1", "--size", "1MiB", "--algo", "nope"],
        "unknown bcast algorithm 'nope'",
    ),
    "root out of range": (
        ["--grid", "magpie:8,1", "--size", "1MiB", "--root", "8"],
        "root 8 is out of range",
    ),
    "negative root": (["--grid", "magpie:8,1", "--size", "1MiB", "--root", "-1"], "root -1"),
    "size 0": (["--grid", "magpie:8,1", "--size", "0"], "size must be > 0"),
    "negative size": (["--grid", "magpie:8,1", "--size", "-5"], "size must be > 0"),
    "unparsable size": (["--grid", "magpie:8,1", "--size", "lots"], "cannot parse size 'lots'"),
    "segment vs datatype": (
        ["--grid", "magpie:8,1", "--size", "1MiB", "--itemsize", "8", "--segment-size", "1001"],
        "segment size 1001 does not divide into the 8-byte datatype",
    ),
    "size vs datatype": (
        ["--grid", "magpie:8,1", "--size", "1001", "--itemsize", "8"],
        "not a whole number of 8-byte elements",
    ),
    "zero segment": (["--grid", "lan:4", "--size", "1MiB", "--segment-size", "0"], "> 0"),
    "missing size": (["--grid", "magpie:8,1"], "required: --size"),
    "unknown option": (["--grid", "magpie:8,1", "--size", "1MiB", "--frob"], "--frob"),
    "bad op": (["--grid", "lan:4", "--size", "1MiB", "--op", "nope"], "invalid choice"),
}


@pytest.mark.parametrize("command", ["plan", "simulate"])
@pytest.mark.parametrize("case", sorted(BAD_CALLS))
def test_bad_input_is_one_line_and_exit_2(capsys, tmp_path, command, case):
    files = _grid_files(tmp_path)
    argv, message = BAD_CALLS[case]
    argv = [a.format(**{k: str(v) for k, v in files.items()}) for a in argv]
    code, out, err = run(capsys, command, *argv)
    assert code == EXIT_ERROR == 2
    assert out == ""
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("gridcoll: error: ")
    assert message in lines[0]
    assert "Traceback" not in err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        ([], "required: COMMAND"),
        (["frob"], "invalid choice: 'frob'"),
        (["demo", "--sizes", "16KiB,0"], "size must be > 0"),
        (["demo", "--algorithms", "nope"], "unknown bcast algorithm 'nope'"),
        (["demo", "--grid", "nosuch"], "unknown grid 'nosuch'"),
        (["demo", "--grid", "lan:2", "--root", "2"], "root 2 is out of range"),
        (["algorithms", "--op", "nope"], "invalid choice"),
        (["simulate", "--grid", "lan:2", "--size", "1KiB", "--plot", "x.txt"], ".png"),
    ],
)
def test_other_bad_input(capsys, argv, message):
    code, out, err = run(capsys, *argv)
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith("gridcoll: error: ")
    assert message in err


def _command() -> list[str]:
    exe = shutil.which("gridcoll")
    return [exe] if exe else [sys.executable, "-m", "gridcoll.cli.main"]


def test_entry_point_subprocess_json_and_error(tmp_path):
    env = {**os.environ, "COLUMNS": "200"}
    ok = subprocess.run(
        [*_command(), "plan", "--grid", "magpie:4,1", "--size", "64KB", "--json"],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    assert ok.returncode == 0, ok.stderr
    assert set(json.loads(ok.stdout)) >= PLAN_FIELDS
    bad = tmp_path / "bad.json"
    bad.write_text("{")
    fail = subprocess.run(
        [*_command(), "simulate", "--grid", str(bad), "--size", "1MiB"],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    assert fail.returncode == 2
    assert fail.stdout == ""
    assert fail.stderr.startswith("gridcoll: error: grid file")
    assert fail.stderr.count("\n") == 1 and "Traceback" not in fail.stderr


@pytest.mark.slow
@pytest.mark.mpi
def test_demo_measure_runs_the_schedules_over_mpi(capsys, tmp_path):
    pytest.importorskip("mpi4py")
    from gridcoll.runtime.processes import default_mpiexec

    try:
        default_mpiexec()
    except Exception as err:  # no mpiexec on this machine
        pytest.skip(f"no mpiexec: {err}")
    data = run_json(
        capsys, "demo", "--grid", "magpie:2,1", "--grid", "magpie:2,2", "--sizes", "1KiB,4KiB",
        "--algorithms", "mpich,magpie-segmented,auto", "--repeat", "1", "--out", str(tmp_path),
    )  # fmt: skip
    assert data["measured"] is True and data["repeat"] == 1
    # broadcasts as schedules, allreduces through gridcoll.Comm.Allreduce
    assert len(data["rows"]) == 2 * 2 * (3 + len(OP_ALGORITHMS["allreduce"]))
    assert {r["op"] for r in data["rows"]} == {"bcast", "allreduce"}
    for row in data["rows"]:
        # the emulated WAN: 10 ms, 1 MB/s hops; measured close to the simulation
        assert row["measured_s"] > 0  # speed is judged in bench/, not here
        assert len(row["measured_all_s"]) == 1
        assert row["host_overhead_s"] > 0  # planned for this runtime
        assert row["speedup"] is not None
    assert (tmp_path / "sizes.png").stat().st_size > 1000


# -- one planning path: what the user fixes is what is planned and simulated ------------
def test_fixed_segment_size_is_planned_and_simulated_as_given(capsys):
    data = run_json(
        capsys, "plan", "--grid", "magpie:4,4", "--size", "1MB", "--segment-size", "16KB",
        "--explain",
    )  # fmt: skip
    from gridcoll.simulate import simulate
    from gridcoll.tune import Call, PlanOptions, plan

    assert data["segment_size"] == 16384
    for cand in data["candidates"]:
        if "segment_size" in cand["params"]:
            assert cand["params"]["segment_size"] == 16384, cand
    # the reported simulation is the simulation of that very plan
    chosen = plan(
        "magpie:4,4",
        Call("bcast", 2**20),
        PlanOptions(params={"segment_size": 16384}, budget_s=1.0),
    )
    assert data["simulated_s"] == pytest.approx(
        simulate(chosen.build(), get_grid("magpie:4,4")).total_s
    )
    assert data["simulated_s"] == chosen.simulated_s


def test_segment_size_larger_than_the_message_is_refused(capsys):
    code, out, err = run(
        capsys, "plan", "--grid", "magpie:2,2", "--size", "1KiB", "--segment-size", "4KB"
    )
    assert code == EXIT_ERROR and "larger than the 1 KiB message" in err and not out


def test_explain_names_the_flag_not_the_keyword(capsys):
    code, out, _ = run(capsys, "plan", "--grid", "das2:2", "--size", "64KiB", "--explain")
    assert code == 0 and "--budget" in out and "budget_s" not in out


def test_plan_and_compare_choose_alike_by_default(capsys):
    planned = run_json(capsys, "plan", "--grid", "das2:2", "--size", "64KiB")
    compared = run_json(
        capsys, "compare", "--grid", "das2:2", "--sizes", "64KiB", "--algos", "binomial"
    )
    auto = next(r for r in compared["results"] if r["algorithm"] == "auto")
    assert (auto["chosen"], auto["params"]) == (planned["algorithm"], planned["params"])


@pytest.mark.parametrize("op", ["allgather", "alltoall", "allreduce", "barrier"])
def test_rootless_collectives_print_no_root(capsys, op):
    code, out, _ = run(
        capsys, "plan", "--grid", "magpie:2,2", "--op", op, "--size", "1KiB", "--explain"
    )
    assert code == 0 and "root" not in out.lower()
    assert (
        run_json(capsys, "plan", "--grid", "magpie:2,2", "--op", op, "--size", "1KiB")["root"]
        is None
    )


def test_the_command_line_guide_documents_every_command():
    text = (Path(__file__).resolve().parents[1] / "docs" / "cli.md").read_text()
    for module in COMMANDS:
        name = module.__name__.rsplit(".", 1)[-1]
        assert f"gridcoll {name}" in text, name


# -- gridcoll report (call logs, GRIDCOLL_LOG) -------------------------------------------


def _synthetic_log(path: Path, grid: str = "magpie:2,2") -> None:
    """Two ranks, 3 broadcasts of 64 KiB (the model right) and 2 allreduces of 8 KB
    (measured 10x the prediction), as the runtime writes them."""
    from gridcoll.runtime.record import record_line
    from gridcoll.tune import Call, PlanOptions, plan

    network = get_grid("magpie:2,2")
    bcast = plan(network, Call("bcast", 65536, 0), PlanOptions(algo="binomial"))
    allreduce = plan(network, Call("allreduce", 8000, 0, itemsize=8), PlanOptions(algo="two-level"))
    lines, call = [], {0: 0, 1: 0}
    for i in range(3):
        for rank in (0, 1):
            call[rank] += 1
            t = bcast.predicted_s * (1.0 + 0.1 * i) * (1.0 if rank else 0.5)
            lines.append(
                record_line(bcast, measured_s=t, rank=rank, nranks=2, call=call[rank], grid=grid)
            )
    for _ in range(2):
        for rank in (0, 1):
            call[rank] += 1
            t = allreduce.predicted_s * 10
            lines.append(
                record_line(
                    allreduce, measured_s=t, rank=rank, nranks=2, call=call[rank], grid=grid
                )
            )
    path.write_text("".join(lines))


def test_report_on_a_synthetic_log(capsys, tmp_path):
    from gridcoll.tune import Call, PlanOptions, plan

    log = tmp_path / "run.jsonl"
    _synthetic_log(log)
    out = run_json(capsys, "report", str(log))
    rows = {row["op"]: row for row in out["rows"]}
    assert set(rows) == {"bcast", "allreduce"} and out["lines"] == 10
    predicted = plan(
        get_grid("magpie:2,2"), Call("bcast", 65536, 0), PlanOptions(algo="binomial")
    ).predicted_s
    bcast = rows["bcast"]
    assert (bcast["calls"], bcast["ranks"], bcast["size"]) == (3, 2, 65536)
    assert bcast["algorithms"] == {"binomial": 6}
    # per call the slowest rank (rank 1): 1.0, 1.1, 1.2 x predicted; the median 1.1 x
    assert bcast["measured_s"] == pytest.approx(1.1 * predicted)
    assert bcast["ratio"] == pytest.approx(1.1)
    assert rows["allreduce"]["ratio"] == pytest.approx(10.0)
    assert out["most_wrong"]["op"] == "allreduce"
    code, text, err = run(capsys, "report", str(log), "--plot", str(tmp_path / "p" / "r.png"))
    assert code == 0, err
    assert "binomial" in text and "two-level" in text and "10.00" in text
    assert "most wrong on allreduce of 7.81 KiB on magpie:2,2" in " ".join(text.split())
    assert (tmp_path / "p" / "r.png").stat().st_size > 0


def test_report_reads_several_logs_and_shows_names_as_written(capsys, tmp_path):
    _synthetic_log(tmp_path / "a.jsonl", grid="[bold]g[/]")
    _synthetic_log(tmp_path / "b.jsonl", grid="other")
    code, text, err = run(capsys, "report", str(tmp_path / "a.jsonl"), str(tmp_path / "b.jsonl"))
    assert code == 0, err
    assert "[bold]g[/]" in text and "other" in text and "20 lines from 2 logs" in text


def _bad_logs(tmp_path: Path) -> dict[str, tuple[str, str]]:
    from gridcoll.runtime.record import record_line
    from gridcoll.tune import Call, plan

    good = record_line(
        plan(get_grid("lan:2"), Call("bcast", 100, 0)), measured_s=1e-5, rank=0, nranks=2, call=1,
        grid="lan:2",
    )  # fmt: skip
    cases = {
        "empty": ("", "holds no calls"),
        "blank lines": ("\n  \n", "holds no calls"),
        "not json": (good + "{not json\n", "line 2: not JSON"),
        "another format": ('{"format": "gridcoll-log/0"}\n', "line 1: not a gridcoll-log/1 line"),
        "a list": ("[1, 2]\n", "not a gridcoll-log/1 line"),
        "negative time": (good.replace('"measured_s":1e-05', '"measured_s":-1'), "negative"),
        "no time": (good.replace('"measured_s":1e-05,', ""), "'measured_s' is not a finite"),
        "nan": (good.replace('"measured_s":1e-05', '"measured_s":NaN'), "not a finite number"),
        "text size": (good.replace('"size":100', '"size":"100"'), "'size' is not a whole number"),
        "no op": (good.replace('"op":"bcast",', ""), "'op' is not a name"),
        "deep": ("[" * 100_000 + "\n", "not"),
    }
    paths = {}
    for name, (text, message) in cases.items():
        path = tmp_path / (name.replace(" ", "-") + ".jsonl")
        path.write_text(text)
        paths[name] = (str(path), message)
    path = tmp_path / "latin1.jsonl"
    path.write_bytes(b"\xff\xfe caf\xe9\n")
    paths["not utf-8"] = (str(path), "not UTF-8")
    paths["missing"] = (str(tmp_path / "nope.jsonl"), "No such file")
    paths["directory"] = (str(tmp_path), "not a regular file")
    return paths


def test_report_refuses_bad_logs_in_one_line(capsys, tmp_path):
    for name, (path, message) in _bad_logs(tmp_path).items():
        code, out, err = run(capsys, "report", path)
        assert code == EXIT_ERROR and out == "", name
        assert err.count("\n") == 1 and err.startswith("gridcoll: error: "), (name, err)
        assert message in err and repr(path) in err, (name, err)
    code, out, err = run(capsys, "report")
    assert code == EXIT_ERROR and "LOG" in err


def test_mpirun_checks_algo_text_and_log_before_launching(capsys):
    for algo, message in [
        ("bcast:nope", "algo part 'bcast:nope': unknown bcast algorithm 'nope'"),
        ("bcats:binomial", "names no collective: 'bcats'"),
        ("bcast:flat;bcast:chain", "names 'bcast' twice"),
    ]:
        code, out, err = run(capsys, "mpirun", "--grid", "lan:2", "--algo", algo, "--", "true")
        assert code == EXIT_ERROR and out == "" and message in err and err.count("\n") == 1, err
    code, out, err = run(capsys, "mpirun", "--grid", "lan:2", "--log", " ", "--", "true")
    assert code == EXIT_ERROR and out == "" and "empty" in err


def test_mpirun_world_flag_and_environment_reach_the_launch(capsys, monkeypatch):
    """``--world`` or ``GRIDCOLL_WORLD=1``: the launch adds gridcoll's sitecustomize
    (``launch(world=True)``); neither: it does not. No job is started here."""
    from gridcoll.runtime import supervisor

    seen = []
    monkeypatch.setattr(supervisor, "launch", lambda grid, command, **kw: seen.append(kw) or 0)
    monkeypatch.delenv("GRIDCOLL_WORLD", raising=False)
    assert run(capsys, "mpirun", "--grid", "lan:2", "--", "true")[0] == 0
    assert run(capsys, "mpirun", "--grid", "lan:2", "--world", "--", "true")[0] == 0
    monkeypatch.setenv("GRIDCOLL_WORLD", "1")
    assert run(capsys, "mpirun", "--grid", "lan:2", "--", "true")[0] == 0
    monkeypatch.setenv("GRIDCOLL_WORLD", "0")
    assert run(capsys, "mpirun", "--grid", "lan:2", "--", "true")[0] == 0
    assert [kw["world"] for kw in seen] == [False, True, True, False]
