"""The runtime's host overhead: PLogP.with_overhead, Grid.with_host_overhead, the default,
its overrides, and what planning on the effective grid changes."""

from __future__ import annotations

import json
import shutil

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gridcoll.errors import GridError, ParameterError
from gridcoll.network import PiecewiseLinear, PLogP, get_grid, grid_to_dict
from gridcoll.network.presets import lan_plogp, wan_plogp
from gridcoll.runtime import host
from gridcoll.simulate import simulate
from gridcoll.tune import Call, PlanOptions, plan

LAN = lan_plogp()
WAN = wan_plogp(10e-3, 1e6, LAN)
SIZES = [0, 1, 100, 1000, 2700, 4096, 65536, 100_000, 131072, 2**20, 2**22]


# -- PiecewiseLinear.maximum ----------------------------------------------------------
def test_maximum_adds_the_crossing_inside_a_piece():
    f = PiecewiseLinear((0.0, 10.0), (0.0, 10.0))  # y = m
    h = PiecewiseLinear((0.0, 10.0), (4.0, 4.0))  # y = 4
    top = f.maximum(h)
    assert 4.0 in top.sizes
    for m in (0, 2, 4, 6, 10, 20):
        assert top(m) == pytest.approx(max(f(m), h(m)))


def test_maximum_follows_the_other_line_past_a_tail_crossing():
    f = PiecewiseLinear((0.0, 10.0), (5.0, 6.0))  # slope 0.1, leads at first
    h = PiecewiseLinear((0.0, 10.0), (0.0, 2.0))  # slope 0.2, crosses at m = 50
    top = f.maximum(h)
    for m in (0, 10, 30, 50, 80, 1000):
        assert top(m) == pytest.approx(max(f(m), h(m)))


@given(
    st.lists(st.floats(0, 1e-3), min_size=2, max_size=4),
    st.lists(st.floats(0, 1e-3), min_size=2, max_size=4),
)
def test_maximum_is_exact_everywhere(a, b):
    f = PiecewiseLinear(tuple(float(i * 1000) for i in range(len(a))), tuple(a))
    h = PiecewiseLinear(tuple(float(i * 1500) for i in range(len(b))), tuple(b))
    top = f.maximum(h)
    for m in range(0, 12000, 250):
        assert top(m) == pytest.approx(max(f(m), h(m)), rel=1e-9, abs=1e-15)


# -- PLogP.with_overhead --------------------------------------------------------------
@pytest.mark.parametrize("net", [LAN, WAN], ids=["lan", "wan"])
@pytest.mark.parametrize("extra", [5e-6, 40e-6, 1e-3])
def test_with_overhead_shifts_the_overheads_and_keeps_the_gap_above_them(net, extra):
    slow = net.with_overhead(extra, extra / 2)
    assert slow.L == net.L
    for m in SIZES:
        assert slow.os(m) == pytest.approx(net.os(m) + extra)
        assert slow.or_(m) == pytest.approx(net.or_(m) + extra / 2)
        assert slow.g(m) == pytest.approx(max(net.g(m), slow.os(m), slow.or_(m)))
        assert slow.g(m) >= slow.os(m) - 1e-15 and slow.g(m) >= slow.or_(m) - 1e-15


def test_with_overhead_leaves_a_gap_that_already_covers_it():
    slow = LAN.with_overhead(2e-6)  # os(0) = 6 us < g(0) = 8 us
    assert slow.g(0) == LAN.g(0) and slow.g(2**20) == pytest.approx(LAN.g(2**20))
    assert slow.bandwidth == pytest.approx(LAN.bandwidth)


def test_with_overhead_raises_the_gap_of_short_messages_only():
    slow = LAN.with_overhead(40e-6)
    assert slow.g(0) == pytest.approx(44e-6)  # os' = 4 + 40 us > g = 8 us
    assert slow.g(2**20) == pytest.approx(LAN.g(2**20))  # 21 ms: the wire dominates
    assert slow.bandwidth == pytest.approx(LAN.bandwidth)


def test_with_overhead_zero_is_the_same_object_and_or_defaults_to_os():
    assert LAN.with_overhead(0.0) is LAN
    both = LAN.with_overhead(10e-6)
    assert both.or_(100) == pytest.approx(LAN.or_(100) + 10e-6)


@pytest.mark.parametrize("bad", [-1e-6, float("nan"), float("inf")])
def test_with_overhead_rejects_bad_values(bad):
    with pytest.raises(GridError, match="os_extra"):
        LAN.with_overhead(bad)
    with pytest.raises(GridError, match="or_extra"):
        LAN.with_overhead(0.0, bad)


def test_with_overhead_round_trips_through_loggp():
    slow = LAN.with_overhead(30e-6)
    back = PLogP.from_loggp(slow.to_loggp())
    assert back.os(1) == pytest.approx(slow.os(1))


# -- Grid.with_host_overhead ----------------------------------------------------------
def test_grid_with_host_overhead_changes_hosts_not_wires():
    grid = get_grid("magpie:4,2")
    eff = grid.with_host_overhead(100e-6)
    assert eff.name == "magpie:4,2+host100us"
    assert eff.fingerprint != grid.fingerprint
    assert eff.links == grid.links  # the wide-area wires keep their occupancy
    assert eff.cluster_of == grid.cluster_of and eff.nranks == grid.nranks
    assert eff.clusters[0].lan.os(0) == pytest.approx(grid.clusters[0].lan.os(0) + 100e-6)
    route, phys = eff.routes[(0, 1)].plogp, grid.routes[(0, 1)].plogp
    assert route.L == phys.L
    assert route.or_(1000) == pytest.approx(phys.or_(1000) + 100e-6)
    assert grid.with_host_overhead(0.0) is grid
    assert "host1us/2us" in grid.with_host_overhead(1e-6, 2e-6).name
    json.dumps(grid_to_dict(eff))  # the effective grid is a grid like any other


def test_simulated_time_grows_with_the_host_overhead_when_host_bound():
    grid = get_grid("lan:2")
    from gridcoll.algorithms import get_builder

    schedule = get_builder("bcast", "flat-segmented").build(grid, 256 * 256, 0, segment_size=256)
    base = simulate(schedule, grid).total_s
    slow = simulate(schedule, grid.with_host_overhead(50e-6)).total_s
    # 256 messages, each now costing the sender 4 + 50 us > the 13 us gap
    assert slow == pytest.approx(256 * (54e-6 + 256 / 150e6), rel=0.05)
    assert slow > 3 * base


def test_planning_on_the_effective_grid_cuts_coarser_segments():
    grid = get_grid("magpie:8,1")
    fast = plan(grid, Call("bcast", 2**20), PlanOptions(algo="multitree"))
    eff = grid.with_host_overhead(160e-6)
    slow = plan(eff, Call("bcast", 2**20), PlanOptions(algo="multitree"))
    assert slow.params["segment_size"] >= 2 * fast.params["segment_size"]
    # the coarser plan costs little in the model, and the simulation agrees with it
    assert slow.predicted_s < 1.1 * fast.predicted_s
    sim = simulate(slow.build(eff), eff).total_s
    assert sim == pytest.approx(slow.predicted_s, rel=0.02)


# -- the default and its overrides ----------------------------------------------------
def test_default_host_overhead_scales_with_oversubscription():
    c = host.HOST_COST_EMULATED_S
    assert host.default_host_overhead(2, emulated=True, ncpus=2) == pytest.approx(c)
    assert host.default_host_overhead(8, emulated=True, ncpus=2) == pytest.approx(4 * c)
    assert host.default_host_overhead(1, emulated=False, ncpus=8) == host.HOST_COST_PLAIN_S
    # other processes on the machine count like ranks
    loaded = host.default_host_overhead(8, emulated=True, ncpus=2, load=4.0)
    assert loaded == pytest.approx(6 * c)
    assert host.default_host_overhead(1, emulated=True, ncpus=8, load=3.0) == pytest.approx(c)
    assert host.external_load() >= 0.0
    assert host.HOST_COST_PLAIN_S < host.HOST_COST_EMULATED_S


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("40us", 40e-6), ("0.0002", 2e-4), ("0", 0.0), (1e-5, 1e-5), ("auto", None), ("", None)],
)
def test_parse_host_overhead(text, seconds):
    value = host.parse_host_overhead(text)
    assert value == (None if seconds is None else pytest.approx(seconds))


@pytest.mark.parametrize("text", ["-5us", "2s", "fast"])
def test_parse_host_overhead_rejects_bad_values(text):
    with pytest.raises(ParameterError):
        host.parse_host_overhead(text)


def test_explicit_beats_environment_beats_default(monkeypatch):
    monkeypatch.delenv(host.ENV_HOST_OVERHEAD, raising=False)
    default = host.default_host_overhead(8, emulated=True)
    assert host.resolve_host_overhead(None, 8, emulated=True) == pytest.approx(default)
    monkeypatch.setenv(host.ENV_HOST_OVERHEAD, "25us")
    assert host.resolve_host_overhead(None, 8, emulated=True) == pytest.approx(25e-6)
    assert host.resolve_host_overhead("70us", 8, emulated=True) == pytest.approx(70e-6)
    monkeypatch.setenv(host.ENV_HOST_OVERHEAD, "auto")
    assert host.resolve_host_overhead(None, 8, emulated=True) == pytest.approx(default)
    monkeypatch.setenv(host.ENV_HOST_OVERHEAD, "soon")
    with pytest.raises(ParameterError, match="GRIDCOLL_HOST_OVERHEAD"):
        host.host_overhead_from_env()


def test_local_ranks_reads_the_launchers_local_size(monkeypatch):
    monkeypatch.delenv("MPI_LOCALNRANKS", raising=False)
    monkeypatch.delenv("OMPI_COMM_WORLD_LOCAL_SIZE", raising=False)
    assert host.local_ranks(16) == 16
    monkeypatch.setenv("MPI_LOCALNRANKS", "4")
    assert host.local_ranks(16) == 4


@pytest.mark.parametrize(("value", "message"), [("2s", "below 1 s"), ("-1us", "cannot parse")])
def test_cli_rejects_a_bad_host_overhead(capsys, value, message):
    from gridcoll.cli.main import main

    argv = ["run", "--grid", "magpie:2,1", "--size", "1KiB", f"--host-overhead={value}"]
    code = main(argv)
    err = capsys.readouterr().err
    assert code == 2 and "--host-overhead" in err and message in err


# -- the runtime uses it (under mpiexec) ----------------------------------------------
def _have_mpi() -> bool:
    import importlib.util

    return importlib.util.find_spec("mpi4py") is not None and bool(
        shutil.which("mpiexec") or shutil.which("mpirun")
    )


@pytest.mark.slow
@pytest.mark.mpi
def test_gridcoll_run_json_reports_the_host_overhead(capsys, monkeypatch):
    if not _have_mpi():
        pytest.skip("no mpiexec / mpi4py")
    from gridcoll.cli.main import main

    monkeypatch.delenv(host.ENV_HOST_OVERHEAD, raising=False)
    monkeypatch.setattr("gridcoll.cli.run.external_load", lambda: 3.0)
    argv = ["run", "--grid", "magpie:2,1", "--size", "4KiB", "--repeat", "1", "--json"]
    assert main([*argv, "--host-overhead", "100us"]) == 0
    fixed = json.loads(capsys.readouterr().out)
    assert fixed["host_overhead_s"] == pytest.approx(100e-6) and fixed["verified"]
    assert main(argv) == 0
    default = json.loads(capsys.readouterr().out)
    expected = host.default_host_overhead(2, emulated=True, load=3.0)
    assert default["host_overhead_s"] == pytest.approx(expected)


@pytest.mark.slow
@pytest.mark.mpi
def test_the_ranks_plan_with_the_launchers_host_overhead():
    if not _have_mpi():
        pytest.skip("no mpiexec / mpi4py")
    from gridcoll.runtime.worker import run_worker

    grid = get_grid("magpie:2,2")
    outcome = run_worker(grid, 8192, algo="auto", repeat=1, host_overhead=250e-6, timeout=30)
    assert outcome.verified, outcome.describe_failure()
    assert outcome.result["host_overhead_s"] == pytest.approx(250e-6)
    assert outcome.result["plan_grid"] == "magpie:2,2+host250us"
