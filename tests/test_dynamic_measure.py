"""Seed 004's experiments measured on real processes (issue 15, item 6).

Small runs of :mod:`gridcoll.measure.dynamic_experiments` (4-6 spawned processes on an
emulated das2-spread grid). They assert correctness (every vnode delivered exactly
once, the exact sum, clean churn), never timing: the machine is shared.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from gridcoll.cli.dynamic import add_parser
from gridcoll.cli.dynamic import run as cli_run
from gridcoll.errors import ParameterError
from gridcoll.measure.dynamic_experiments import default_grid, latency, reduction, transition
from gridcoll.network import get_grid
from gridcoll.plot.dynamic import plot_dynamic

pytest.importorskip("zmq")


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
    assert plot_dynamic(result, tmp_path / "fig6.png").stat().st_size > 0


@pytest.mark.timeout(120)
def test_reduction_is_exact_on_six_processes() -> None:
    grid = get_grid("das2-spread:6,3")
    result = reduction(grid, repeats=2, settle_timeout_s=None)  # a wrong sum raises
    assert result["sum"] == 21 and len(result["times"]) == 2
    assert result["rows"][0]["time_s"]["ours"] > 0
    assert result["worker_errors"] == []


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


@pytest.mark.timeout(120)
def test_transition_crash_ends_and_reports_the_lost_vnodes() -> None:
    """SIGKILLed leavers: the core does not re-map their vnodes yet, so broadcasts
    after the kill miss them; the run must still end and say so."""
    grid = get_grid("das2-spread:4,2")
    result = transition(
        grid,
        leave_s=2.0,
        rejoin_s=3.0,
        until_s=5.0,
        nbytes=1024,
        crash=True,
        op_timeout_s=1.5,
        settle_timeout_s=None,
    )
    assert result["crash"] and result["killed"] == 2
    assert result["lost"] > 0 and result["incomplete"] > 0 and result["duplicated"] == 0
    total = sum(4 for _ in result["broadcasts"])
    assert result["delivered"] + result["lost"] == total


def _args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_parser(parser.add_subparsers())
    return parser.parse_args(["dynamic", *argv])


def test_cli_checks_the_measure_flags() -> None:
    with pytest.raises(ParameterError, match="need --measure"):
        cli_run(_args("--experiment", "transition", "--crash"))
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
    assert default_grid("latency", 32) == "das2-spread:32,3"
    assert default_grid("transition", 8) == "das2-spread:8,4"


@pytest.mark.timeout(120)
def test_cli_measure_prints_the_json(capsys: pytest.CaptureFixture[str]) -> None:
    import json

    from gridcoll.cli.main import main

    argv = [
        "dynamic",
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
