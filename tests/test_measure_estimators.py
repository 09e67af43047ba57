"""The estimators of the P-LogP procedure on a busy machine (seed 000, sec. 2.2; the
procedure's Rule 5): lower envelopes of timings that delays only lengthen, ``g(m)`` and
``L`` that the model's constraints keep at or above zero, and the confidence report."""

import math

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from gridcoll.errors import MeasurementError
from gridcoll.measure import PLogPProcedure, Settings, SyntheticTransport, run_procedure
from gridcoll.measure.plogp_procedure import (
    gap_estimate,
    latency_estimate,
    poorly_known,
)
from gridcoll.measure.stats import (
    Estimate,
    envelope,
    envelope_min_samples,
    quantile_interval,
    summarize,
)
from gridcoll.network import PLogP, get_grid

DAS2_WAN = get_grid("das2:1").plogp(0, 2)  # 1.5 ms, g(1 KiB) about 0.32 ms

times = st.floats(1e-6, 1.0, allow_nan=False)
jitters = st.lists(st.floats(0.0, 1.0), min_size=4, max_size=60)


@st.composite
def disturbed(draw):
    """A true time, small jitters (at most 1% of it) and fewer than half the samples
    delayed by anything up to a second (a process that was not scheduled)."""
    truth = draw(times)
    small = [truth * (1 + 0.01 * j) for j in draw(jitters)]
    n_out = draw(st.integers(0, (len(small) - 1) // 2))
    delays = draw(st.lists(st.floats(1e-3, 1.0), min_size=n_out, max_size=n_out))
    return truth, small[: len(small) - n_out] + [truth + d for d in delays]


@given(disturbed())
def test_the_envelope_ignores_positive_outliers(case):
    truth, samples = case
    est = envelope(samples)
    assert truth <= est.value <= truth * 1.01 * (1 + 1e-12)
    assert est.n == len(samples) and est.kept <= est.n
    assert est.half >= 0


@given(disturbed())
def test_the_envelope_never_exceeds_the_median(case):
    _, samples = case
    assert envelope(samples).value <= summarize(samples).mean


def test_the_envelope_needs_11_samples_for_a_90_percent_interval():
    assert envelope_min_samples() == 11  # 0.75^11 = 4.2% <= 5% < 0.75^10


def test_the_fence_drops_far_out_samples_and_says_how_many():
    # Q1 = 1.01, Q3 = 1.03 (nearest rank of 9): the fence is 1.09
    est = envelope([1.0, 1.01, 1.02, 1.03, 1.01, 1.02, 1.0, 50.0, 70.0])
    assert est.kept == 7 and est.n == 9
    assert est.value == 1.0  # x_(ceil(7/4)) of the 7 kept
    assert est.to_dict()["kept"] == 7 and est.to_dict()["rel"] == pytest.approx(est.relative)


@given(st.lists(st.floats(0.0, 1.0), min_size=2, max_size=40), st.floats(0.05, 0.95))
def test_the_quantile_interval_holds_its_estimate(samples, q):
    s = quantile_interval(samples, q)
    assert min(samples) <= s.mean <= max(samples)
    assert 0 <= s.half <= (max(samples) - min(samples)) / 2 + 1e-12


def test_the_quantile_interval_is_the_order_statistics_one():
    # Binomial(30, 1/4): P(B <= 3) = 3.7% <= 5% < P(B <= 4) = 9.8%, and
    # P(B >= 13) = 2.2% <= 5% < P(B >= 12) = 5.1%: the interval is [x_(4), x_(13)]
    s = quantile_interval([float(i) for i in range(1, 31)], 0.25)
    assert s.mean == 8.0  # x_(ceil(30/4))
    assert s.half == pytest.approx((13.0 - 4.0) / 2)
    assert math.isinf(quantile_interval([1.0], 0.25).half)
    with pytest.raises(ValueError):
        quantile_interval([1.0], 1.0)


estimates = st.builds(
    Estimate,
    value=st.floats(0.0, 1.0),
    half=st.floats(0.0, 1e-2),
    n=st.integers(1, 60),
    kept=st.integers(1, 60),
)


@given(estimates, estimates, estimates, st.floats(0.0, 1e-3))
def test_the_gap_is_never_below_g0_nor_zero(t_m, t_0, g0, slack):
    g, contradicts = gap_estimate(t_m, t_0, g0, slack)
    assert g.value >= g0.value >= 0
    assert g.half >= 0
    if t_m.value >= t_0.value:
        assert not contradicts
        assert g.value == pytest.approx(t_m.value - t_0.value + g0.value)
    else:
        assert g.value == g0.value
        assert contradicts == (t_0.value - t_m.value > t_m.half + t_0.half + slack)


@given(estimates, estimates, st.floats(0.0, 1e-3), st.booleans())
def test_the_latency_is_never_below_zero(t0, g0, slack, one_way):
    L, contradicts = latency_estimate(t0, g0, slack, one_way=one_way)
    raw = t0.value - g0.value if one_way else (t0.value - 2 * g0.value) / 2
    assert L.value >= 0
    assert L.value == pytest.approx(max(raw, 0.0))
    assert contradicts == (raw < 0 and -raw > L.half + slack)


def _rtts(base, n, delayed, delay):
    """n round trips of ``base`` seconds, ``delayed`` of them ``delay`` late (plus a
    microsecond of jitter each)."""
    return [base + 1e-6 * (i % 3) + (delay if i < delayed else 0.0) for i in range(n)]


def test_a_noise_pattern_that_made_the_median_gap_negative():
    # das2's WAN: RTT(0) = 2 (L + g(0)); g(1 KiB) = 0.32 ms. RTT(0) was taken while the
    # machine was busy (18 of 30 repetitions 2 ms late, a scheduler slice), RTT(1 KiB)
    # while it was quieter (9 of 30): the medians' difference is negative
    L, g0, g1k = DAS2_WAN.L, DAS2_WAN.g(0), DAS2_WAN.g(1024)
    rtt0 = _rtts(2 * (L + g0), 30, 18, 2e-3)
    rtt1k = _rtts(2 * L + g1k + g0, 30, 9, 2e-3)
    old = summarize(rtt1k).mean - summarize(rtt0).mean + g0
    assert old < 0
    g0_est = Estimate(g0, 0.0, 3, 3)
    g, contradicts = gap_estimate(envelope(rtt1k), envelope(rtt0), g0_est, 0.01 * 3e-3)
    assert not contradicts
    assert g.value == pytest.approx(g1k, rel=0.02)


def test_a_contradiction_beyond_the_noise_is_flagged_not_returned():
    g0 = Estimate(8e-6, 0.0, 3, 3)
    t0, tm = Estimate(3.0e-3, 2e-6, 30, 30), Estimate(2.5e-3, 2e-6, 30, 30)
    g, contradicts = gap_estimate(tm, t0, g0, 30e-6)
    assert contradicts and g.value == g0.value
    L, bad = latency_estimate(Estimate(10e-6, 1e-6, 30, 30), Estimate(40e-6, 1e-6, 3, 3), 1e-6)
    assert bad and L.value == 0.0


def test_poorly_known_needs_both_a_relative_and_an_absolute_excess():
    assert poorly_known(Estimate(100e-6, 20e-6, 30, 30), 0.10, 10e-6)
    assert not poorly_known(Estimate(100e-6, 20e-6, 30, 30), 0.10, 30e-6)  # below scale
    assert not poorly_known(Estimate(1e-3, 20e-6, 30, 30), 0.10, 10e-6)  # 2%
    assert poorly_known(Estimate(math.nan, 0.0, 0, 0), 0.10, 0.0)


def _spiked(seed: int, p: float):
    transport = SyntheticTransport(
        DAS2_WAN, noise=5e-6, seed=seed, spikes=(p, 3e-3), shared_clock=seed % 2 == 0
    )
    return run_procedure(PLogPProcedure(Settings(k_max=12, max_reps_small=30)), transport)


@settings(max_examples=15, deadline=None)
@given(st.integers(0, 2**16), st.floats(0.02, 0.2))
@example(seed=3399, p=0.19921875)  # 4 repetitions of 4 KiB all delayed alike
def test_the_procedure_recovers_the_link_through_scheduling_spikes(seed, p):
    # each time delayed by up to 3 ms with probability p (a round trip has two: up to
    # 36% of them disturbed, as a busy 2-core machine delays a rank): every figure
    # stays within 10% and none is negative
    result = _spiked(seed, p)
    assert pytest.approx(DAS2_WAN.L, rel=0.10) == result.L
    assert result.L >= 0 and result.g0 >= 0
    for point in result.points:
        assert point.g >= result.g0 and point.os >= 0 and point.or_ >= 0
        if point.m >= 1024:
            assert point.g == pytest.approx(DAS2_WAN.g(point.m), rel=0.10), point


@settings(max_examples=15, deadline=None)
@given(st.integers(0, 2**16), st.floats(0.2, 0.5))
def test_heavier_spikes_give_a_right_or_a_flagged_figure_never_a_negative_one(seed, p):
    result = _spiked(seed, p)
    assert result.L >= 0 and result.g0 >= 0
    for point in result.points:
        assert point.g >= result.g0 >= 0
        if point.m >= 1024 and "g" not in point.low_confidence:
            assert point.g == pytest.approx(DAS2_WAN.g(point.m), rel=0.10), point


def test_the_confidence_is_reported_in_the_result_and_its_json():
    link = PLogP.linear(10e-3, 1e6, g0=8e-6, os0=4e-6, or0=4e-6)
    transport = SyntheticTransport(link, noise=20e-6, seed=3, spikes=(0.2, 2e-3))
    result = run_procedure(PLogPProcedure(Settings(k_max=10)), transport)
    assert result.L_estimate.value == result.L and result.L_estimate.half > 0
    assert result.g0_estimate.value == result.g0 and result.g0_estimate.n >= 1
    data = result.to_dict()
    assert data["confidence"]["L"]["n"] == result.L_estimate.n
    assert data["confidence"]["limit"] == 0.10
    for p, point in zip(data["points"], result.points, strict=True):
        assert 0 < p["kept"] <= p["reps"]
        assert set(p["rel"]) == {"os", "or", "g"}
        assert p["ci_s"]["g"] == point.g_ci >= 0
    assert data["low_confidence"] == list(result.low_confidence)


def test_a_measurement_too_noisy_to_trust_is_refused_in_one_line():
    # 3 ms of exponential jitter on every time of a 1.5 ms link, 4 repetitions at most
    transport = SyntheticTransport(DAS2_WAN, noise=3e-3, seed=5)
    tight = Settings(k_max=10, max_reps_small=4, max_reps_large=4)
    result = run_procedure(PLogPProcedure(tight), transport)
    assert result.low_confidence and not result.confident
    assert any(p.low_confidence for p in result.points)
    with pytest.raises(MeasurementError, match="not trustworthy") as info:
        result.check_confidence()
    assert "\n" not in str(info.value)
    assert result.to_dict()["low_confidence"]


def test_a_quiet_measurement_passes_the_confidence_check():
    result = run_procedure(PLogPProcedure(Settings(k_max=10)), SyntheticTransport(DAS2_WAN))
    assert result.confident and result.check_confidence() is result


def test_bad_confidence_limit():
    with pytest.raises(ValueError, match="confidence_limit"):
        Settings(confidence_limit=0)
