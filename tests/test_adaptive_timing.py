"""Real message timings for the adaptive monitor, without MPI: NTP's offset estimate
(RFC 5905 sec. 8), the pairing of sends with receives on the root's clock, the probe
budget, the monitor's traffic share, and probes left to links no message crossed."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gridcoll.adapt.clock import ClockSample, best_sample, ntp_sample
from gridcoll.adapt.monitor import (
    PROBE_BYTES,
    MonitorTraffic,
    NetworkMonitor,
    ProbeBudget,
    Transfer,
)
from gridcoll.network import get_grid
from gridcoll.runtime.adaptive import CallTimes, matched_transfers

delays = st.floats(min_value=0.0, max_value=0.5, allow_nan=False)


# -- NTP -------------------------------------------------------------------------------------
@given(
    offset=st.floats(min_value=-1e4, max_value=1e4, allow_nan=False),
    start=st.floats(min_value=0.0, max_value=1e5, allow_nan=False),
    exchanges=st.lists(st.tuples(delays, delays, delays), min_size=1, max_size=8),
)
def test_the_least_delay_exchange_recovers_the_offset_within_half_its_delay(
    offset, start, exchanges
):
    """The peer's clock reads ``offset`` more than the root's; each exchange has random
    one-way delays ``d1``, ``d2`` and a random time ``w`` at the peer. The kept sample's
    offset is within half its delay (and the least delay) of the true one, and its delay
    is the exchange's round trip less ``w``."""
    samples = []
    t = start
    for d1, w, d2 in exchanges:
        t1 = t
        t2 = t1 + d1 + offset
        t3 = t2 + w
        t4 = t1 + d1 + w + d2
        samples.append(ntp_sample(t1, t2, t3, t4))
        t = t4 + 0.01
    best = best_sample(samples)
    assert best is not None
    least = min(d1 + d2 for d1, _w, d2 in exchanges)
    slack = 1e-9 * (1 + abs(offset) + abs(start))  # float rounding of the timestamps
    assert best.delay == pytest.approx(least, abs=slack)
    assert abs(best.offset - offset) <= best.delay / 2 + slack
    assert abs(best.offset - offset) <= least / 2 + slack


def test_symmetric_delays_give_the_exact_offset_and_no_sample_gives_none():
    s = ntp_sample(100.0, 100.0 + 0.1 + 7.0, 100.0 + 0.2 + 7.0, 100.3)
    assert s.offset == pytest.approx(7.0) and s.delay == pytest.approx(0.2)
    assert best_sample([]) is None
    assert best_sample([ClockSample(1.0, 0.3), ClockSample(2.0, 0.1)]) == ClockSample(2.0, 0.1)


# -- pairing sends and receives --------------------------------------------------------------
def test_sends_and_receives_pair_in_order_on_the_root_clock():
    """Rank 2 (cluster 1) runs 5 s ahead of the root: its receive times less 5 s are
    on the root's clock; two messages of one pair pair in order; a receive whose size
    disagrees with its send is dropped, and probes pair apart from the calls' messages."""
    cluster = (0, 0, 1, 1)
    times = {
        0: CallTimes(sent=[(2, 100, 1.0), (2, 200, 1.5)], probe_sent=[(3, 9, 4.0)]),
        2: CallTimes(received=[(0, 100, 6.25), (0, 200, 6.75)]),
        3: CallTimes(received=[(1, 50, 9.0)], probe_received=[(0, 9, 9.5)]),
        1: CallTimes(sent=[(3, 60, 3.0)]),
    }
    offsets = {2: 5.0, 3: 5.0}
    got = matched_transfers(times, offsets, cluster)
    assert got == [Transfer(0, 1, 100, 1.0, 1.25), Transfer(0, 1, 200, 1.5, 1.75)]
    probes = matched_transfers(times, offsets, cluster, probes=True)
    assert probes == [Transfer(0, 1, 9, 4.0, 4.5)]


def test_a_report_decodes_to_what_was_encoded():
    times = CallTimes(
        emulated=[(0, 1, 64, 1.0, 2.0)],
        sent=[(3, 64, 1.5)],
        received=[(2, 32, 2.5)],
        probe_sent=[(5, PROBE_BYTES, 3.0)],
        probe_received=[],
    )
    rank, end, back = CallTimes.decode(times.encode(4, 9.5))
    assert (rank, end, back) == (4, 9.5, times)


# -- the probe budget and the monitor's traffic ------------------------------------------------
@given(
    share=st.floats(min_value=0.0, max_value=2.0),
    window=st.integers(min_value=1, max_value=8),
    calls=st.lists(st.integers(min_value=0, max_value=10**6), max_size=40),
    probe=st.integers(min_value=1, max_value=10**5),
)
def test_probes_stay_within_their_share_of_each_probing_window_and_of_the_run(
    share, window, calls, probe
):
    """Probing greedily after every call (up to 4 probes), the probe bytes of the
    ``window`` calls up to any call that probed, and of the whole run, stay within
    ``share`` of those calls' application bytes."""
    budget = ProbeBudget(share, window)
    spent = []
    for app in calls:
        budget.called(app)
        n = 0
        for _ in range(4):
            if not budget.allows(probe):
                break
            budget.spend(probe)
            n += probe
        spent.append(n)
        assert sum(spent) <= share * sum(calls[: len(spent)]) + 1e-6
    for i in range(len(calls)):
        lo = max(0, i - window + 1)
        if spent[i]:
            assert sum(spent[lo : i + 1]) <= share * sum(calls[lo : i + 1]) + 1e-6
    assert budget.probe_bytes == sum(spent)


def test_budget_and_traffic_edges():
    with pytest.raises(ValueError, match="share"):
        ProbeBudget(-0.1)
    with pytest.raises(ValueError, match="window"):
        ProbeBudget(0.05, 0)
    assert not ProbeBudget(0.05).allows(1)  # no call yet: nothing to take a share of
    traffic = MonitorTraffic(report_bytes=10, probe_bytes=20, sync_bytes=20)
    assert traffic.share == 0.0 and traffic.total == 50
    traffic.app_wan_bytes = 1000
    assert traffic.share == pytest.approx(0.05)
    assert traffic.to_json()["share"] == pytest.approx(0.05)


def test_a_link_crossed_in_the_period_is_not_probed():
    """Every link is due at once (period passed); a message over A->B this period
    leaves its link out of ``skip_measured`` probes, not out of the plain ones."""
    grid = get_grid("magpie:2,1")
    monitor = NetworkMonitor(grid, period_s=1.0, start=0.0)
    monitor.observe([Transfer(0, 1, 1000, 10.0, 10.5)])
    assert (0, 1) in monitor.probes_due(10.0)
    assert monitor.probes_due(10.0, skip_measured=True) == [(1, 0)]
