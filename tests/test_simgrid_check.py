"""bench/simgrid_check.py without SimGrid: the schedule-to-SimGrid translation and the
graceful exit when SimGrid is missing (the replay itself is run by hand, never here)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from gridcoll.algorithms.flat_tree import flat
from gridcoll.network import get_grid, magpie
from gridcoll.schedule import Recv, Schedule, Send
from gridcoll.schedule.ir import CONTROL_BYTES

BENCH = Path(__file__).resolve().parent.parent / "bench"


@pytest.fixture(scope="module")
def check():
    sys.path.insert(0, str(BENCH))
    try:
        import simgrid_check
    finally:
        sys.path.remove(str(BENCH))
    return simgrid_check


def test_flat_broadcast_on_magpie(check):
    grid = magpie(2, 2)  # ranks 0, 1 in c0; 2, 3 in c1
    replay = check.translate(flat(grid, 1000), grid)
    assert replay.hosts == ("rank0", "rank1", "rank2", "rank3")
    lan, wan = 50e6, 1e6  # the presets' g(m) = 8 us + m / bandwidth: peak rate 1/slope
    assert replay.links == pytest.approx(
        {
            "nic_out:0": lan,
            "nic_in:1": lan,
            "gw_out:c0": lan,
            "link:c0->c1": wan,
            "gw_in:c1": lan,
            "nic_in:2": lan,
            "nic_in:3": lan,
        }
    )
    assert list(replay.links) == [
        "nic_out:0", "nic_in:1", "gw_out:c0", "link:c0->c1", "gw_in:c1", "nic_in:2", "nic_in:3"
    ]  # fmt: skip
    assert replay.routes[(0, 1)] == (("nic_out:0", "nic_in:1"), pytest.approx(20e-6))
    assert replay.routes[(0, 2)] == (
        ("nic_out:0", "gw_out:c0", "link:c0->c1", "gw_in:c1", "nic_in:2"),
        pytest.approx(10e-3),
    )
    assert set(replay.routes) == {(0, 1), (0, 2), (0, 3)}
    root = replay.programs[0]
    assert [op[:3] for op in root] == [(True, 1, 1000), (True, 2, 1000), (True, 3, 1000)]
    assert root[0][3] == pytest.approx(grid.lan(0).os(1000))
    assert root[1][3] == pytest.approx(grid.wan(0, 1).os(1000))
    assert replay.programs[2] == ((False, 0, 1000, pytest.approx(grid.wan(0, 1).or_(1000))),)
    assert replay.nmessages == 3


def test_teragrid_route_crosses_every_shared_link(check):
    grid = get_grid("teragrid")  # C1 (SDSC): ranks 0-7; C3 (ANL): ranks 16-23
    programs: list[tuple] = [()] * grid.nranks
    programs[0], programs[16] = (Send(16, (0,)),), (Recv(0, (0,)),)
    schedule = Schedule("bcast", "t", grid.nranks, 0, 8, ((0, 8),), tuple(programs))
    replay = check.translate(schedule, grid)
    names, latency = replay.routes[(0, 16)]
    assert names == (
        "nic_out:0", "gw_out:C1", "link:C1:up", "link:SDSC:up", "link:ANL:down",
        "link:C3:down", "gw_in:C3", "nic_in:16",
    )  # fmt: skip
    assert latency == pytest.approx(grid.wan(0, 2).L)
    mbit = 1e6 / 8
    assert [replay.links[n] for n in names] == pytest.approx(
        [
            100 * mbit,
            100 * mbit,
            100 * mbit,
            40 * mbit,
            30 * mbit,
            100 * mbit,
            100 * mbit,
            100 * mbit,
        ]
    )


def test_fair_grid_translates_the_same(check):
    grid = magpie(3, 1)
    schedule = flat(grid, 4096)
    assert check.translate(schedule, grid.with_link_sharing("fair")) == check.translate(
        schedule, grid
    )


def test_empty_send_is_a_control_message(check):
    grid = magpie(2, 1)
    schedule = Schedule("barrier", "t", 2, 0, 0, (), ((Send(1, ()),), (Recv(0, ()),)))
    replay = check.translate(schedule, grid)
    assert replay.programs[0][0][:3] == (True, 1, CONTROL_BYTES)
    assert replay.programs[1][0][:3] == (False, 0, CONTROL_BYTES)


def test_without_simgrid_prints_the_recipe_and_writes_nothing(check, monkeypatch, capsys, tmp_path):
    monkeypatch.setattr(check, "simgrid_available", lambda: False)
    out = tmp_path / "simgrid_check.json"
    assert check.main(["--out", str(out)]) == 0
    printed = capsys.readouterr().out.strip().splitlines()
    assert len(printed) == 1
    assert "bench/install_simgrid.sh" in printed[0]
    assert "pip install --no-build-isolation simgrid" in printed[0]
    assert not out.exists()


def test_cases_are_sharings(check):
    assert check.CASES is sys.modules["sharing"].CASES
    assert len(check.CASES) == 10
    cases = {(spec, algo) for spec, algo, _, _ in check.CASES}
    assert set(check.CONTENTION) <= cases
