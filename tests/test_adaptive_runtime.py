"""Adaptive collectives end to end (seed 001): ``gridcoll scenario`` simulated and
measured, and ``gridcoll mpirun --adaptive``: the hand-off in the trailer (every rank
runs the announced plan, checked by the call header; a rank holding another
announcement fails the call everywhere), and the root's monitor learning a link's load
from the emulated messages alone."""

from __future__ import annotations

import json
import math
import subprocess
import sys

import pytest

from gridcoll.experiments.adaptive import STRATEGIES
from test_cli import run, run_json
from test_runtime_mpi import HERE, clean_env, fast_grid, last_json, write_grid

pytestmark = pytest.mark.usefixtures("no_wall_clock")


def write_load(tmp_path, link: str, fraction: float, start: float, end: float):
    path = tmp_path / "load.json"
    loads = [{"link": link, "fraction": fraction, "from": start, "to": end}]
    path.write_text(json.dumps({"format": "gridcoll-load/1", "loads": loads}))
    return path


# -- gridcoll scenario --simulate ------------------------------------------------------------
def test_scenario_simulated_json_and_plot(capsys, tmp_path):
    """magpie:3,2 with c1's links at 90% from t = 20 s (2 s scaled): the JSON has the
    scenario's fields, ``loaded`` follows the trace, mpich-g2 is its own baseline, the plot
    is written."""
    load = tmp_path / "load.json"
    loads = [{"link": name, "fraction": 0.9, "from": 20.0, "to": 10**6}
             for name in ("c1->c0", "c0->c1", "c1->c2", "c2->c1")]  # fmt: skip
    load.write_text(json.dumps({"format": "gridcoll-load/1", "loads": loads}))
    plot = tmp_path / "fig8.png"
    data = run_json(
        capsys, "scenario", "--grid", "magpie:3,2", "--load", str(load), "--app", "seed001:6",
        "--strategies", ",".join(STRATEGIES), "--time-scale", "0.1", "--budget", "0.05",
        "--plot", str(plot),
    )  # fmt: skip
    times = [c["t"] for c in data["calls"]]
    assert times == sorted(times) and len(times) == 6
    assert data["loaded"] == [t >= 20.0 * 0.1 for t in times]  # the trace is time-scaled too
    assert set(data["strategies"]) == set(STRATEGIES)
    for e in data["strategies"].values():
        assert len(e["times_s"]) == 6 and all(t > 0 for t in e["times_s"])
        loaded = [t for t, x in zip(e["times_s"], data["loaded"], strict=True) if x]
        assert math.isclose(e["mean_loaded_s"], sum(loaded) / len(loaded))
        assert "improvement_loaded" in e and "change_unloaded" in e
        assert len(e["reference_s"]) == 6
    assert data["strategies"]["mpich-g2"]["improvement_loaded"] == 0.0
    assert data["strategies"]["adaptive"]["monitor"]["passive_messages"] > 0
    assert plot.stat().st_size > 10_000
    # the headline: adaptive against static, seed 001's strategy against gridcoll's
    head = data["headline"]
    assert set(head) == {"adaptive_vs_static", "paper_vs_auto", "mpich_g2_loaded_over_unloaded"}
    assert (
        head["adaptive_vs_static"]["loaded"] == data["strategies"]["adaptive"]["vs_static_loaded"]
    )
    assert data["strategies"]["static"]["vs_static_loaded"] == 0.0
    assert set(data["strategies"]["sa-clustered"]["algorithms"]) == {"sa-clustered"}
    assert data["strategies"]["sa-clustered"]["idle_plans"] > 0
    assert data["share"] == 0.25 and data["max_budget_s"] == 0.05
    assert data["root"] == 0 and data["loaded_cluster"] is None  # no C2, no sites


def test_scenario_errors_are_one_line(capsys):
    for argv, what in (
        (["--strategies", "mpich-g2,best"], "unknown 'best'"),
        (["--app", "linear"], "--app must be seed001"),
        (["--app", "seed001:x"], "integer N"),
        (["--time-scale", "0"], "--time-scale must be positive"),
        (["--load", "seed001:abc"], "integer seed"),
        (["--share", "0"], "--share must be in (0, 1]"),
        (["--loaded-cluster", "C9"], "no cluster 'C9'"),
        (["--plot", "fig.txt"], "--plot needs"),
    ):
        code, out, err = run(capsys, "scenario", "--grid", "magpie:2,1", *argv)
        assert code == 2, (argv, out, err)
        assert what in err and len(err.strip().splitlines()) == 1, err


# -- over MPI -----------------------------------------------------------------------------
mpi = [pytest.mark.slow, pytest.mark.mpi]


def adaptive_run(
    tmp_path, *args: str, load=None, timeout: float = 300, real: bool = False, **env: str
):
    """``gridcoll mpirun --adaptive`` of tests/mpi/adaptive.py on 3 clusters of 2 ranks;
    ``real``: ``--no-emulation`` (the monitor times the real messages)."""
    grid = write_grid(tmp_path, fast_grid({"A": 2, "B": 2, "C": 2}))
    cmd = [sys.executable, "-m", "gridcoll", "mpirun", "--grid", str(grid), "--adaptive"]
    if load is not None:
        cmd += ["--load", str(load)]
    if real:
        cmd += ["--no-emulation"]
    cmd += ["--", sys.executable, str(HERE / "adaptive.py"), *args]
    return subprocess.run(
        cmd, env=clean_env(**env), capture_output=True, text=True, timeout=timeout, check=False
    )


@pytest.mark.slow
@pytest.mark.mpi
def test_the_hand_off_gives_every_rank_the_announced_plan_and_the_monitor_learns_a_load(
    tmp_path,
):
    """A->B loaded 80% all along: every call's bytes arrive, every rank runs the same plan,
    most calls run a plan the root announced, and the root's monitor, fed by the emulated
    messages' times (and by probes of the links of a call that proved its view stale, if
    one did: a period of 300 s has no other probe due), forecasts A->B at 80% and no
    other link."""
    load = write_load(tmp_path, "A->B", 0.8, 0.0, 10**6)
    proc = adaptive_run(tmp_path, "--calls", "8", load=load)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = last_json(proc)
    assert out["verified"] and out["same_plan"], out
    assert out["announced"] >= 4, out  # calls 3.. (the first two have no announcement yet)
    assert out["errors"] == [[]] * 6
    assert out["load"] == {"A->B": 0.8}, out
    assert out["stats"]["monitor"]["passive_messages"] > 0
    assert out["report_bytes"] > 0


@pytest.mark.slow
@pytest.mark.mpi
def test_on_a_real_network_the_monitor_times_the_messages_and_probes(tmp_path):
    """--no-emulation, a monitor period of 50 ms, probes allowed half the application's
    wide-area bytes: the root learns from the calls' own messages (passive samples),
    probes the links no call crossed with real messages, synchronises the clocks (one
    host, one clock: every offset within a millisecond of 0), and reports the monitor's
    traffic, its probes within their share."""
    proc = adaptive_run(
        tmp_path, "--calls", "8", "--pause", "0.1", real=True,
        GRIDCOLL_MONITOR_PERIOD="0.05", GRIDCOLL_PROBE_SHARE="0.5",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = last_json(proc)
    assert out["verified"] and out["same_plan"], out
    assert out["errors"] == [[]] * 6
    stats = out["stats"]
    assert stats["monitor"]["passive_messages"] > 0, stats
    assert stats["monitor"]["probes"] > 0, stats
    assert stats["clock_syncs"] >= 1
    assert set(stats["clock_offsets"]) == {"2", "4"}  # the first rank of B and of C
    assert all(abs(x) < 1e-3 for x in stats["clock_offsets"].values()), stats
    traffic = stats["traffic"]
    assert traffic["app_wan_bytes"] > 0 and traffic["sync_bytes"] > 0
    assert traffic["report_bytes"] > 0
    assert traffic["probe_bytes"] <= 0.5 * traffic["app_wan_bytes"]
    assert traffic["share"] == pytest.approx(
        (traffic["report_bytes"] + traffic["probe_bytes"] + traffic["sync_bytes"])
        / traffic["app_wan_bytes"]
    )


@pytest.mark.slow
@pytest.mark.mpi
def test_on_a_real_network_probes_keep_to_the_default_share(tmp_path):
    """The same run with the default probe share (5%): probes never take more of the
    application's wide-area bytes; with a share of 0, there is no probe at all and the
    calls' messages still feed the monitor."""
    proc = adaptive_run(
        tmp_path, "--calls", "6", "--pause", "0.1", real=True, GRIDCOLL_MONITOR_PERIOD="0.05"
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    stats = last_json(proc)["stats"]
    assert stats["probe_share_limit"] == 0.05
    assert stats["traffic"]["probe_bytes"] <= 0.05 * stats["traffic"]["app_wan_bytes"]
    proc = adaptive_run(
        tmp_path, "--calls", "4", "--pause", "0.1", real=True,
        GRIDCOLL_MONITOR_PERIOD="0.05", GRIDCOLL_PROBE_SHARE="0",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    stats = last_json(proc)["stats"]
    assert stats["monitor"]["probes"] == 0 and stats["traffic"]["probe_bytes"] == 0
    assert stats["monitor"]["passive_messages"] > 0


@pytest.mark.slow
@pytest.mark.mpi
def test_a_rank_holding_another_announcement_fails_the_call_everywhere(tmp_path):
    """Rank 1's announcement replaced before call 4: its schedule differs from the
    others', so the call header check raises MismatchError on every rank; none hangs."""
    proc = adaptive_run(tmp_path, "--calls", "6", "--tamper", "4", timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = last_json(proc)
    assert out["errors"] == [["MismatchError"]] * 6, out


@pytest.mark.slow
@pytest.mark.mpi
def test_scenario_measured(capsys, tmp_path):
    """gridcoll scenario --measure on a 6-rank grid: every call timed and verified, the
    adaptive run's root reports its advisor's work and the passive measurements."""
    grid = write_grid(tmp_path, fast_grid({"A": 2, "B": 2, "C": 2}))
    load = write_load(tmp_path, "A->B", 0.8, 0.0, 10**6)
    data = run_json(
        capsys, "scenario", "--measure", "--grid", str(grid), "--load", str(load),
        "--app", "seed001:4", "--strategies", "mpich-g2,adaptive", "--time-scale", "0.01",
    )  # fmt: skip
    assert data["mode"] == "measure" and data["ranks"] == 6
    assert data["loaded"] == [True] * 4
    for name in ("mpich-g2", "adaptive"):
        e = data["strategies"][name]
        assert len(e["times_s"]) == 4 and all(0 < t < 5 for t in e["times_s"])
    assert data["strategies"]["mpich-g2"]["algorithms"] == ["mpich-g2"] * 4
    adaptive = data["strategies"]["adaptive"]
    assert adaptive["advisor_cpu_s"] > 0
    assert adaptive["monitor"]["passive_messages"] > 0
