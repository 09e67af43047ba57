"""Seed 000's P-LogP procedure, driven by a synthetic network (fast, deterministic)."""

import itertools
import math

import pytest

from gridcoll.errors import MeasurementError
from gridcoll.measure import (
    GapProbe,
    PLogPProcedure,
    Settings,
    SizeProbe,
    SyntheticTransport,
    run_procedure,
)
from gridcoll.measure.plogp_procedure import ProcedureState, Sample, table_from_dict
from gridcoll.measure.stats import mean_interval, summarize, t_quantile
from gridcoll.network import PLogP, get_grid
from gridcoll.network.gridfile import plogp_from_dict, plogp_to_dict

LINK = PLogP.linear(10e-3, 1e6, g0=8e-6, os0=4e-6, or0=4e-6)
MAGPIE_WAN = get_grid("magpie:2,2").plogp(0, 2)  # os knee from 64 KiB to 128 KiB


def measure(plogp, settings=None, **kw):
    transport = SyntheticTransport(plogp, **kw)
    return run_procedure(PLogPProcedure(settings or Settings(k_max=12)), transport), transport


def test_exact_network_is_recovered_exactly():
    result, _ = measure(LINK)
    assert result.complete
    assert pytest.approx(10e-3, rel=1e-3) == result.L
    assert result.g0 == pytest.approx(8e-6, rel=0.01)
    table = result.plogp()
    for m in (1024, 4096):
        assert table.g(m) == pytest.approx(LINK.g(m), rel=1e-3)
        assert table.os(m) == pytest.approx(LINK.os(m), rel=1e-9)
        assert table.or_(m) == pytest.approx(LINK.or_(m), rel=1e-9)
    assert [p.m for p in result.points] == [0] + [2**k for k in range(13)]


def test_gap_sequence_is_1_10_then_doubling_until_saturated():
    result, _ = measure(LINK)
    ns = [n for n, _, _ in result.gap_runs]
    assert ns[:2] == [1, 10] and all(b == 2 * a for a, b in itertools.pairwise(ns[1:]))
    _, rtt_n, gap = result.gap_runs[-1]
    rtt1 = result.gap_runs[0][1]
    assert rtt1 < 0.01 * rtt_n  # RTT_1(0) < epsilon RTT_n(0)
    assert abs(gap - result.gap_runs[-2][2]) <= 0.01 * result.gap_runs[-2][2]


class WanderingGap(SyntheticTransport):
    """g(0) that alternates 3% above and below its value with n: it never settles."""

    def run(self, probe):
        if isinstance(probe, GapProbe) and probe.n > 1:
            wobble = 1.03 if probe.n.bit_length() % 2 else 0.97
            self.probes += 1
            return 2 * self.fwd.L + probe.n * self.fwd.g(0) * wobble
        return super().run(probe)


def test_a_gap_that_never_settles_stops_doubling_at_the_time_limit():
    transport = WanderingGap(LINK)
    result = run_procedure(PLogPProcedure(Settings(k_max=4)), transport)
    rtt1 = result.gap_runs[0][1]
    limit = max(Settings().gap_time_limit, rtt1 / 0.01)  # 2 s, and the paper's 1% rule
    assert limit == pytest.approx(2.0, rel=0.02)  # L = 10 ms: RTT_1(0) ~ 20 ms
    *before, (_, last_rtt, _) = result.gap_runs
    assert last_rtt >= limit and all(rtt < limit for _, rtt, _ in before)
    assert any("did not settle" in note for note in result.notes)


def test_the_probes_are_the_papers():
    proc = PLogPProcedure(Settings(k_max=4))
    assert proc.next_probe() == GapProbe(1)
    proc.feed(0.02)
    proc.feed(0.02)
    proc.feed(0.02)
    assert proc.next_probe() == GapProbe(10)
    assert proc.state is ProcedureState.RUNNING


def test_nonlinearity_is_located_by_halving():
    result, _ = measure(MAGPIE_WAN, Settings(k_max=18))
    sizes = [p.m for p in result.points]
    # extra sizes were measured inside (64 KiB, 128 KiB] and (128 KiB, 256 KiB]
    assert any(65536 < m < 131072 for m in sizes)
    assert any(131072 < m < 262144 for m in sizes)
    # the knee at 64 KiB is bracketed within max(32 B, epsilon m)
    above = min(m for m in sizes if m > 65536)
    assert above - 65536 <= max(32, 0.01 * above)
    table = result.plogp()
    for m in (70000, 100000, 140000, 200000):
        assert table.os(m) == pytest.approx(MAGPIE_WAN.os(m), rel=0.02)
    assert not result.notes


def test_k_max_is_raised_until_the_gap_per_byte_settles():
    # g bends at 6000 B: below it 1 MB/s, above it 4 MB/s (a faster protocol for long
    # messages), so g(2^13) is not on the line through g(2^11) and g(2^12)
    sizes = (0.0, 6000.0, 2.0**20)
    g = (8e-6, 8e-6 + 6000 / 1e6, 8e-6 + 6000 / 1e6 + (2**20 - 6000) / 4e6)
    bent = PLogP.from_points(5e-3, sizes, (4e-6,) * 3, (4e-6,) * 3, g)
    result, _ = measure(bent, Settings(k_max=13))
    assert result.k_max > 13
    assert result.plogp().g(2**15) == pytest.approx(bent.g(2**15), rel=0.01)


def test_noise_is_deterministic_and_within_10_percent():
    first, t1 = measure(MAGPIE_WAN, noise=50e-6, seed=7, shared_clock=True)
    again, _ = measure(MAGPIE_WAN, noise=50e-6, seed=7, shared_clock=True)
    assert first == again
    assert first.latency_method == "one-way"
    assert pytest.approx(10e-3, rel=0.1) == first.L
    table = first.plogp()
    for p in first.points:
        if p.m >= 1024:
            assert table.g(p.m) == pytest.approx(MAGPIE_WAN.g(p.m), rel=0.1)
    assert t1.elapsed < 60  # virtual seconds: the WAN measurement fits in a minute


def test_noisy_sizes_take_more_repetitions_up_to_the_caps():
    result, _ = measure(LINK, Settings(k_max=12), noise=3e-3, seed=1)
    reps = {p.m: p.reps for p in result.points}
    assert max(reps.values()) > 4
    assert all(r <= 60 for r in reps.values())
    assert all(p.reps <= 15 for p in result.points if p.large)


def test_asymmetric_latency_needs_a_shared_clock():
    back = PLogP.linear(20e-3, 1e6, g0=8e-6)
    one_way, _ = measure(LINK, backward=back, shared_clock=True)
    assert pytest.approx(10e-3, rel=1e-3) == one_way.L
    assert one_way.L_rtt == pytest.approx(15e-3, rel=1e-3)  # the paper's symmetric L
    rtt_only, _ = measure(LINK, backward=back)
    assert rtt_only.latency_method == "round-trip"
    assert pytest.approx(15e-3, rel=1e-3) == rtt_only.L


def test_cost_and_the_saturation_baseline():
    result, transport = measure(MAGPIE_WAN, Settings(k_max=18))
    assert result.cost.messages == transport.cost.messages
    assert result.cost.bytes == transport.cost.bytes
    sat = result.saturation_cost()
    savings = result.to_dict()["savings"]
    assert sat.bytes > 20 * result.cost.bytes
    assert savings["bytes"] > 0.9 and savings["link_s"] > 0.9
    assert savings["messages"] > 0


def test_a_lost_mirror_keeps_the_partial_table_marked_incomplete():
    with pytest.raises(MeasurementError) as info:
        measure(LINK, fail_after=25)
    partial = info.value.partial
    assert partial is not None and not partial.complete
    table = partial.plogp()
    assert not table.complete and len(table.g_fn.sizes) >= 2
    data = plogp_to_dict(table)
    assert data["complete"] is False
    assert not plogp_from_dict(data, "x").complete
    assert not table_from_dict(partial.to_dict()).complete


def test_nothing_measured_means_no_table():
    with pytest.raises(MeasurementError) as info:
        measure(LINK, fail_after=1)
    with pytest.raises(MeasurementError, match="no size has been measured"):
        info.value.partial.plogp()


def test_bad_results_move_the_procedure_to_error():
    proc = PLogPProcedure()
    with pytest.raises(MeasurementError, match="must be a time"):
        proc.feed(-1.0)
    assert proc.state is ProcedureState.ERROR
    with pytest.raises(MeasurementError, match="failed earlier"):
        proc.next_probe()
    assert not proc.measurement().complete


def test_wrong_sample_counts_are_refused():
    proc = PLogPProcedure(Settings(k_max=2))
    while isinstance(proc.next_probe(), GapProbe):
        proc.feed(1.0 if proc.next_probe().n > 1 else 0.02)
    probe = proc.next_probe()
    assert isinstance(probe, SizeProbe) and probe.m == 0
    with pytest.raises(MeasurementError, match="needs 4 samples"):
        proc.feed([Sample(1e-6, 0.02, 1e-6)])


def test_done_procedure_refuses_more_results():
    proc = PLogPProcedure(Settings(k_max=2))
    run_procedure(proc, SyntheticTransport(LINK))
    assert proc.state is ProcedureState.DONE and proc.next_probe() is None
    with pytest.raises(MeasurementError, match="no probe is pending"):
        proc.feed(1.0)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"epsilon": 0},
        {"k_max": 0},
        {"k_max": 20, "k_limit": 19},
        {"initial_reps": 1},
        {"latency": "psychic"},
    ],
)
def test_bad_settings(kwargs):
    with pytest.raises(ValueError):
        Settings(**kwargs)


def test_json_object_has_L_s_and_points():
    result, _ = measure(LINK, Settings(k_max=3))
    data = result.to_dict()
    assert set(data["points"][0]) >= {"m", "os_s", "or_s", "g_s"}
    assert data["L_s"] == result.L and data["complete"] is True


def test_statistics():
    assert t_quantile(1) == pytest.approx(6.314)
    assert t_quantile(100) == pytest.approx(1.660, rel=2e-3)
    s = summarize([1.0, 2.0, 3.0, 100.0, 2.5, 1.5, 2.2, 1.8])  # one wild delay
    assert s.mean == pytest.approx(2.1) and s.half < 1.0
    m = mean_interval([1.0, 2.0, 3.0])
    assert m.mean == 2.0 and m.half == pytest.approx(2.920 / math.sqrt(3))
    assert math.isinf(summarize([1.0]).half)
