"""Phoenix (seed 004): the experiments measured on real processes.

Small runs of :mod:`gridcoll.experiments.phoenix_measured` (4-6 spawned processes on an
emulated das2-spread grid, marked ``slow``). They assert correctness (every vnode
delivered exactly once, the exact sum, clean churn), never timing: the machine is
shared. Skipped without pyzmq.
"""

from __future__ import annotations

import argparse
import random
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gridcoll.cli.phoenix import add_parser
from gridcoll.cli.phoenix import run as cli_run
from gridcoll.errors import ParameterError
from gridcoll.experiments.phoenix_measured import (
    churn,
    churn_steps,
    default_grid,
    latency,
    reduction,
    transition,
)
from gridcoll.network import get_grid
from gridcoll.plot.phoenix import plot_phoenix

pytest.importorskip("zmq")


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_latency_measured_on_six_processes(tmp_path: Path) -> None:
    grid = get_grid("das2-spread:6,3")
    result = latency(grid, repeats=2, settle_timeout_s=5.0)  # exactly once, or it raises
    assert result["mode"] == "measure" and result["nprocs"] == 6
    assert len(result["arrivals_ms"]["ours"]) == 5  # every vnode but the root's
    assert set(result["last_arrival_ms"]) == {"mpich_like", "magpie_like", "ours_simulated", "ours"}
    assert result["last_arrival_ms"]["ours"] > 0
    assert result["ratio_to_magpie_like"] == pytest.approx(
        result["last_arrival_ms"]["ours"] / result["last_arrival_ms"]["magpie_like"]
    )
    assert 0 < result["join_s"]["median"] <= result["join_s"]["max"]
    assert result["startup_s"]["median"] > 0 and result["worker_errors"] == []
    for kind in ("latency", "bandwidth"):  # 3 clusters: at least 2 to span, at most 5
        edges = result["wan_edges"][kind]
        assert 2 <= len(edges) <= 5
        assert {e.split("->")[1] for e in edges} == {"1", "2"}  # each entered from outside
    assert plot_phoenix(result, tmp_path / "fig6.png").stat().st_size > 0


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_reduction_is_exact_on_six_processes() -> None:
    grid = get_grid("das2-spread:6,3")
    result = reduction(grid, repeats=2, settle_timeout_s=None)  # a wrong sum raises
    assert result["sum"] == 21 and len(result["times"]) == 2
    assert result["rows"][0]["time_s"]["ours"] > 0
    assert result["worker_errors"] == []


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_transition_two_leave_and_rejoin_with_nothing_lost() -> None:
    grid = get_grid("das2-spread:4,2")
    result = transition(
        grid, leave_s=2.0, rejoin_s=4.0, until_s=6.0, nbytes=64 * 1024, settle_timeout_s=None
    )
    assert result["leavers"] == 2
    assert (result["lost"], result["duplicated"], result["wrong_size"]) == (0, 0, 0)
    assert result["incomplete"] == 0
    assert result["delivered"] == 4 * len(result["broadcasts"]) > 0
    assert result["worker_errors"] == []


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_transition_crash_is_detected_and_broadcasts_complete_again() -> None:
    """SIGKILLed leavers: heartbeats detect them, heirs take their vnodes, and the
    broadcasts after the kill reach every vnode again (none lost)."""
    grid = get_grid("das2-spread:4,2")
    result = transition(
        grid,
        leave_s=2.0,
        rejoin_s=7.0,
        until_s=9.0,
        nbytes=1024,
        crash=True,
        op_timeout_s=5.0,
        settle_timeout_s=None,
        group_options={"heartbeat_s": 0.5, "heartbeat_timeout_s": 1.5},
    )
    assert result["crash"] and result["killed"] == 2
    assert result["killed_detected_by_root"] == 2
    assert result["heartbeat_timeout_s"] == 1.5
    assert result["lost"] == 0 and result["incomplete"] == 0, result
    again = result["complete_again_s"]
    assert again is not None and 0 < again < 7.0 - 2.0
    in_flight = result["in_flight_complete_s"]  # (None: no broadcast was under way)
    assert in_flight is None or 0 < in_flight <= again
    assert result["delivered"] >= 4 * len(result["broadcasts"])
    assert result["worker_errors"] == []


@settings(max_examples=200, deadline=None)
@given(
    nprocs=st.integers(3, 40),
    changes=st.integers(0, 30),
    duration=st.floats(1.0, 100.0),
    seed=st.integers(0, 2**32),
)
def test_churn_steps_are_a_schedule_the_orchestrator_can_run(
    nprocs: int, changes: int, duration: float, seed: int
) -> None:
    steps = churn_steps(nprocs, changes, duration, random.Random(seed))
    assert len(steps) <= changes
    assert [t for t, *_ in steps] == sorted(t for t, *_ in steps)
    assert all(0.05 * duration <= t <= 0.7 * duration for t, *_ in steps)
    present, left, back = set(range(nprocs)), set(), set()
    for _, action, rank, via in steps:
        # the heir or contact is a founder still there (its pid and address known)
        assert via in present and via not in back and via != rank
        if action == "leave":
            assert rank != 0 and rank in present and rank not in back and rank not in left
            present.discard(rank)
            left.add(rank)
        else:
            assert action == "join" and rank in left and rank not in present
            present.add(rank)
            back.add(rank)
        assert len(present) >= (nprocs + 1) // 2 and 0 in present


def test_churn_steps_mix_joins_and_leaves() -> None:
    steps = churn_steps(8, 6, 20.0, random.Random(0))
    assert {a for _, a, _, _ in steps} == {"leave", "join"}


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_churn_checker_counts_every_vnode_once_on_real_processes() -> None:
    grid = get_grid("das2-spread:6,3")
    result = churn(grid, runs=1, changes=4, duration_s=8.0, nbytes=16 * 1024, seed=3)
    (run,) = result["runs"]
    actions = [s["action"] for s in run["steps"]]
    assert "leave" in actions and "join" in actions  # real churn happened
    assert (result["lost"], result["duplicated"], result["wrong_size"]) == (0, 0, 0)
    assert result["incomplete"] == 0 and result["worker_errors"] == []
    assert result["delivered"] == 6 * result["broadcasts"] > 0


def test_cli_prints_the_churn_checkers_counts() -> None:
    from rich.console import Console

    from gridcoll.cli.phoenix import _headline, _table

    steps = [{"at_s": 1.0, "action": "leave", "rank": 3, "via": 1}]
    row = {"run": 0, "steps": steps, "broadcasts": 5, "delivered": 40, "lost": 0}
    result = {
        "experiment": "churn",
        "mode": "measure",
        "grid": "das2-spread:8,4",
        "nprocs": 8,
        "nruns": 1,
        "changes": 6,
        "runs": [{**row, "duplicated": 1}],
        **{k: row[k] for k in ("broadcasts", "delivered", "lost")},
        "duplicated": 1,
        "incomplete": 0,
    }
    text = _headline(result)
    assert text.startswith("measured with 8 processes; 1 runs of 6 random joins and leaves")
    assert "delivered 40, lost 0, duplicated 1 (goal: 0 and 0)" in text
    console = Console(width=120, record=True)
    console.print(_table(result))
    out = console.export_text()
    assert "das2-spread:8,4" in out and "duplicated" in out
    cells = [c.strip() for c in out.splitlines()[-2].split("│")[1:-1]]
    assert cells == ["0", "0", "1", "5", "40", "0", "1"]  # run, joins, leaves, ...


def _args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_parser(parser.add_subparsers())
    return parser.parse_args(["phoenix", *argv])


def test_cli_checks_the_measure_flags() -> None:
    with pytest.raises(ParameterError, match="need --measure"):
        cli_run(_args("--experiment", "transition", "--processes", "8"))
    with pytest.raises(ParameterError, match="need --measure"):
        cli_run(_args("--experiment", "latency", "--settle", "3"))
    with pytest.raises(ParameterError, match="for transition"):
        cli_run(_args("--experiment", "latency", "--measure", "--crash"))
    with pytest.raises(ParameterError, match="exclude"):
        cli_run(_args("--experiment", "latency", "--measure", "--simulate"))
    with pytest.raises(ParameterError, match="has 6"):
        cli_run(
            _args(
                "--experiment",
                "latency",
                "--measure",
                "--processes",
                "4",
                "--grid",
                "das2-spread:6,3",
            )
        )
    with pytest.raises(ParameterError, match="add --measure"):
        cli_run(_args("--experiment", "churn"))
    with pytest.raises(ParameterError, match="--runs is for churn"):
        cli_run(_args("--experiment", "transition", "--measure", "--runs", "3"))
    with pytest.raises(ParameterError, match="at least 1"):
        cli_run(_args("--experiment", "churn", "--measure", "--runs", "0"))
    assert default_grid("churn") == "das2-spread:8,4"
    assert default_grid("latency", 32) == "das2-spread:32,3"
    assert default_grid("transition", 8) == "das2-spread:8,4"


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_cli_measure_prints_the_json(capsys: pytest.CaptureFixture[str]) -> None:
    import json

    from gridcoll.cli.main import main

    argv = [
        "phoenix",
        "--experiment",
        "reduction",
        "--measure",
        "--processes",
        "4",
        "--settle",
        "0",
    ]
    argv.append("--json")
    assert main(argv) == 0
    captured = capsys.readouterr()
    result = json.loads(captured.out)
    assert (result["mode"], result["grid"], result["sum"]) == ("measure", "das2-spread:4,3", 10)
    assert result["wall_s"] > 0 and "reduction on das2-spread:4,3" in captured.err
    assert result["settled"] is False  # --settle 0: measured at once
