"""Load traces (gridcoll.network.load) and their use by the simulator (seed 001, sec. 3)."""

import json

import pytest

from gridcoll.algorithms.flat_tree import flat
from gridcoll.errors import GridError
from gridcoll.network import magpie, teragrid
from gridcoll.network.load import (
    MAX_FRACTION,
    Load,
    LoadTrace,
    cluster_links,
    loads_from_json,
    occupancy_end,
    read_load,
    seed001_trace,
)
from gridcoll.simulate import simulate

HALF = LoadTrace((Load("c0->c1", 0.5, 0.0, 100.0),))


def doc(*loads, **top):
    return {"format": "gridcoll-load/1", "loads": list(loads), **top}


def item(**kw):
    base = {"link": "c0->c1", "fraction": 0.5, "from": 0, "to": 10}
    base.update(kw)
    return {k: v for k, v in base.items() if v is not ...}


# -- the format ---------------------------------------------------------------------------


def test_round_trip_through_a_file(tmp_path):
    trace = LoadTrace((Load("a", 0.5, 0.0, 10.0), Load("b", 0.25, 3.0, 4.5)))
    path = tmp_path / "load.json"
    path.write_text(json.dumps(trace.to_json()))
    assert read_load(path) == trace


@pytest.mark.parametrize(
    ("document", "message"),
    [
        ([], "expected a JSON object"),
        ({"format": "x", "loads": []}, "format must be"),
        (doc(extra=1), "unknown key"),
        ({"format": "gridcoll-load/1", "loads": {}}, "'loads' must be a list"),
        (doc(3), "load 0 must be an object"),
        (doc(item(to=...)), "must have link, fraction, from, to"),
        (doc(item(speed=1)), "must have link, fraction, from, to"),
        (doc(item(link="")), "non-empty name"),
        (doc(item(fraction="half")), "fraction must be a number"),
        (doc(item(fraction=True)), "fraction must be a number"),
        (doc(item(fraction=1.0)), "fraction must be in [0, 1)"),
        (doc(item(fraction=-0.1)), "fraction must be in [0, 1)"),
        (doc(item(**{"from": -1})), "from must be >= 0"),
        (doc(item(**{"from": 5, "to": 5})), "must be before to"),
        (doc(item(to=float("inf"))), "to must be a number"),
    ],
)
def test_every_validation_error_is_one_line(document, message):
    with pytest.raises(GridError, match=None) as err:
        loads_from_json(document)
    assert message in str(err.value) and "\n" not in str(err.value)


def test_a_file_that_is_not_json_or_not_a_file(tmp_path):
    path = tmp_path / "bad.json"
    path.write_text("{")
    with pytest.raises(GridError, match="is not JSON"):
        read_load(path)
    with pytest.raises(GridError, match="is not a regular file"):
        read_load(tmp_path)


def test_check_names_the_links_the_grid_lacks():
    HALF.check(magpie(2, 1))
    with pytest.raises(GridError, match="lacks: c0->c1"):
        HALF.check(teragrid())


def test_scaled_multiplies_every_time():
    trace = LoadTrace((Load("a", 0.5, 2.0, 10.0),)).scaled(0.5)
    assert trace.loads == (Load("a", 0.5, 1.0, 5.0),)
    with pytest.raises(GridError, match="positive"):
        trace.scaled(0)


def test_overlapping_loads_add_up_capped_below_one():
    trace = LoadTrace(
        (Load("a", 0.5, 0.0, 10.0), Load("a", 0.3, 5.0, 20.0), Load("a", 0.6, 8.0, 9.0))
    )
    assert trace.fraction_at("a", 1.0) == 0.5
    assert trace.fraction_at("a", 6.0) == pytest.approx(0.8)
    assert trace.fraction_at("a", 8.5) == MAX_FRACTION
    assert trace.fraction_at("a", 10.0) == pytest.approx(0.3)  # [from, to)
    assert trace.fraction_at("a", 20.0) == 0.0
    assert trace.fraction_at("b", 6.0) == 0.0
    steps = trace.profile("a")
    assert [b for b, _ in steps] == [0.0, 5.0, 8.0, 9.0, 10.0, 20.0]
    assert steps[-1][1] == 0.0


# -- the piecewise occupancy --------------------------------------------------------------


def test_occupancy_without_load_is_g():
    assert occupancy_end(2.0, 1.0, ()) == 3.0


def test_occupancy_under_a_constant_half_load_doubles():
    assert occupancy_end(2.0, 1.0, ((0.0, 0.5), (100.0, 0.0))) == pytest.approx(5.0)


def test_a_load_that_starts_mid_message():
    # 1 s at full speed serves 1 s of work, the remaining 1 s at half speed takes 2 s
    assert occupancy_end(2.0, 0.0, ((1.0, 0.5), (10.0, 0.0))) == pytest.approx(3.0)


def test_a_load_that_ends_mid_message():
    # 0.75 s at quarter speed serves 0.1875 s of work; the remaining 0.8125 s at full speed
    end = occupancy_end(1.0, 0.25, ((0.0, 0.75), (1.0, 0.0)))
    assert end == pytest.approx(1.0 + 0.8125)


def test_a_load_outside_the_message_changes_nothing():
    assert occupancy_end(1.0, 0.0, ((5.0, 0.5), (6.0, 0.0))) == 1.0
    assert occupancy_end(1.0, 10.0, ((5.0, 0.5), (6.0, 0.0))) == 11.0


# -- seed 001's generator -----------------------------------------------------------------


def test_seed001_is_seeded_and_within_the_papers_ranges():
    grid = teragrid()
    trace = seed001_trace(grid, cluster="C3", seed=7, duration=7200.0)
    assert trace == seed001_trace(grid, cluster=2, seed=7, duration=7200.0)
    assert trace != seed001_trace(grid, cluster=2, seed=8, duration=7200.0)
    assert trace.links == {"C3:up", "C3:down"} == set(cluster_links(grid, "C3"))
    periods = sorted({(x.start, x.end, x.fraction) for x in trace.loads})
    assert len(periods) >= 5
    previous_end = 0.0
    for start, end, fraction in periods:
        assert 0.5 <= fraction <= 0.9
        assert 240.0 <= start - previous_end <= 420.0  # off 4-7 min
        if end < 7200.0:
            assert 360.0 <= end - start <= 480.0  # on 6-8 min
        previous_end = end


def test_seed001_time_scale_and_mesh_links():
    grid = magpie(4, 1)
    trace = seed001_trace(grid, cluster=0, seed=1, duration=3600.0)
    assert seed001_trace(grid, cluster=0, seed=1, duration=3600.0, time_scale=0.01) == (
        trace.scaled(0.01)
    )
    touching = {n for (a, b), r in grid.routes.items() if 0 in (a, b) for n in r.links}
    assert trace.links == touching
    with pytest.raises(GridError, match="no cluster"):
        seed001_trace(grid, cluster="C9")


# -- the simulator ------------------------------------------------------------------------


@pytest.mark.parametrize("sharing", ["fifo", "fair"])
def test_a_half_load_doubles_a_lone_message_on_its_link(sharing):
    grid = magpie(2, 1).with_link_sharing(sharing)
    nbytes = 1 << 20
    schedule = flat(grid, nbytes)
    g = grid.links["c0->c1"].g(nbytes)
    free = simulate(schedule, grid).total_s
    loaded = simulate(schedule, grid, load=HALF).total_s
    assert loaded - free == pytest.approx(g, rel=1e-9)
    later = LoadTrace((Load("c0->c1", 0.5, 50.0, 100.0),))
    assert simulate(schedule, grid, load=later).total_s == free
    assert simulate(schedule, grid, load=HALF, offset=200.0).total_s == free
    other = LoadTrace((Load("c1->c0", 0.5, 0.0, 100.0),))
    assert simulate(schedule, grid, load=other).total_s == free


@pytest.mark.parametrize("sharing", ["fifo", "fair"])
def test_a_load_starting_mid_message_in_the_simulator(sharing):
    grid = magpie(2, 1).with_link_sharing(sharing)
    nbytes = 1 << 20
    schedule = flat(grid, nbytes)
    free = simulate(schedule, grid).total_s
    g = grid.links["c0->c1"].g(nbytes)
    mid = LoadTrace((Load("c0->c1", 0.5, g / 2, 100.0),))
    assert simulate(schedule, grid, load=mid).total_s - free == pytest.approx(g / 2, rel=1e-9)


def test_a_trace_naming_a_missing_link_is_refused():
    with pytest.raises(GridError, match="lacks"):
        simulate(flat(teragrid(), 1000), teragrid(), load=HALF)


# -- the emulator's reservation and the command line --------------------------------------


def test_the_emulators_reservation_serves_a_loaded_link_at_half_speed():
    from gridcoll.runtime import emulation as emu

    grid = magpie(2, 1)
    path = emu.create_link_state(grid)
    try:
        state = emu.LinkState(path, grid)
        t0 = 1000.0
        loaded = emu.Emulator(grid, state, HALF, t0)
        g = grid.links["c0->c1"].g(1 << 20)
        latency = grid.plogp(0, 1).L
        assert loaded.reserve(0, 1, 1 << 20, t0) == pytest.approx(t0 + 2 * g + latency)
        assert loaded.reserve(1, 0, 1 << 20, t0) == pytest.approx(t0 + g + latency)
        state.close()
    finally:
        path.unlink()


def test_cli_simulate_load_and_refusal(capsys, tmp_path):
    from gridcoll.cli.main import main

    path = tmp_path / "load.json"
    path.write_text(json.dumps(HALF.to_json()))
    base = ["simulate", "--grid", "magpie:2,1", "--size", "1MiB", "--algo", "flat", "--json"]
    assert main(base) == 0
    free = json.loads(capsys.readouterr().out)["simulated_s"]
    assert main([*base, "--load", str(path)]) == 0
    loaded = json.loads(capsys.readouterr().out)["simulated_s"]
    assert loaded - free == pytest.approx(magpie(2, 1).links["c0->c1"].g(1 << 20))
    assert main(["simulate", "--grid", "teragrid", "--size", "1KiB", "--load", str(path)]) != 0
    assert "lacks: c0->c1" in capsys.readouterr().err


def test_cli_mpirun_refuses_a_trace_naming_a_missing_link_before_launching(capsys, tmp_path):
    from gridcoll.cli.main import main

    path = tmp_path / "load.json"
    path.write_text(json.dumps(HALF.to_json()))
    assert main(["mpirun", "--grid", "teragrid", "--load", str(path), "--", "false"]) != 0
    assert "lacks: c0->c1" in capsys.readouterr().err
