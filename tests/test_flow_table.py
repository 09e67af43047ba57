"""Fair links on the emulated WAN: the shared flow table.

``gridcoll.runtime.flow_table`` advances a fluid max-min simulation lazily, from
whichever process touches it. These tests check its arithmetic against hand-worked
cases, that its answers do not depend on when or how often it is asked, and the
emulator's use of it (stamps, load, the pair order). The same rules over MPI, with real
messages, are checked in tests/test_runtime_mpi.py (emulator_timing.py, ``fair``).
"""

import dataclasses
import math
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gridcoll.errors import GridcollError
from gridcoll.network import Grid, get_grid, magpie
from gridcoll.network.load import Load, LoadTrace
from gridcoll.runtime import flow_table
from gridcoll.runtime.emulation import Emulator, LinkState, create_link_state, sharing_domains
from gridcoll.runtime.flow_table import is_flow_stamp

M = 10**6
T0 = 1000.0


@pytest.fixture
def fair(tmp_path):
    """magpie:2,2+fair (1 MB/s pair links, L = 10 ms) with its link state."""
    grid = magpie(2, 2).with_link_sharing("fair")
    state = LinkState(create_link_state(grid, tmp_path / "links"), grid)
    yield grid, state
    state.close()


def final(emulator: Emulator, stamp: float, now: float) -> float:
    """The delivery time of a flow that has ended by ``now``."""
    at, generation, _ = emulator.state.table_of(stamp).delivery(stamp, now)
    assert generation is None, "the flow has not ended yet"
    return at


def gap(grid, m=M):
    return grid.links["c0->c1"].g(m), grid.plogp(0, 2).L


def test_sharing_domains_join_the_fair_links_routes_cross_together():
    """magpie's cluster pairs have links of their own: a domain (table, lock) each;
    teragrid's routes cross an uplink and a downlink, which joins them all."""
    pairs = magpie(3, 1).with_link_sharing("fair")
    assert sharing_domains(pairs) == {name: k for k, name in enumerate(sorted(pairs.links))}
    star = get_grid("teragrid+fair")
    assert set(sharing_domains(star).values()) == {0} and len(sharing_domains(star)) > 2
    assert sharing_domains(magpie(3, 1)) == {}


def test_a_lone_flow_takes_its_fifo_time(fair):
    grid, state = fair
    emulator = Emulator(grid, state)
    g, L = gap(grid)
    stamp = emulator.reserve(0, 2, M, T0)
    assert is_flow_stamp(stamp)
    at, generation, sent = state.table_of(stamp).delivery(stamp, T0)
    assert (at, sent) == (pytest.approx(T0 + g + L), T0) and generation is not None
    assert final(emulator, stamp, T0 + g) == pytest.approx(T0 + g + L)
    with pytest.raises(GridcollError, match="gone from the flow table"):
        state.table_of(stamp).delivery(stamp, T0 + g)  # answered once: the slot is free


def test_two_flows_starting_together_share_the_link_and_end_together(fair):
    grid, state = fair
    emulator = Emulator(grid, state)
    g, L = gap(grid)
    first = emulator.reserve(0, 2, M, T0)
    second = emulator.reserve(1, 3, M, T0)
    assert final(emulator, first, T0 + 2 * g) == pytest.approx(T0 + 2 * g + L)
    assert final(emulator, second, T0 + 2 * g) == pytest.approx(T0 + 2 * g + L)


def test_a_later_flow_moves_an_earlier_ones_projection(fair):
    """0 -> 2 alone for g/2, then shared: it ends at 1.5 g, the later one at 2 g. The
    projection made before the second flow existed is stale, and the generation says so."""
    grid, state = fair
    emulator = Emulator(grid, state)
    g, L = gap(grid)
    first = emulator.reserve(0, 2, M, T0)
    alone, generation, _ = state.table_of(first).delivery(first, T0)
    assert alone == pytest.approx(T0 + g + L)
    second = emulator.reserve(1, 3, M, T0 + g / 2)
    assert state.table_of(first).generation() != generation
    moved, _, _ = state.table_of(first).delivery(first, T0 + g / 2)
    assert moved == pytest.approx(T0 + 1.5 * g + L)
    assert final(emulator, first, T0 + 1.5 * g) == pytest.approx(T0 + 1.5 * g + L)
    assert final(emulator, second, T0 + 2 * g) == pytest.approx(T0 + 2 * g + L)


def test_one_pairs_flows_keep_their_order_as_on_one_connection(fair):
    """Two messages 0 -> 2 sent at once: the second starts when the first has ended (one
    share of the link per pair); a message of another pair shares with each in turn."""
    grid, state = fair
    emulator = Emulator(grid, state)
    g, L = gap(grid)
    a1 = emulator.reserve(0, 2, M, T0)
    a2 = emulator.reserve(0, 2, M, T0)
    b = emulator.reserve(1, 3, 2 * M, T0)
    # a1 and b share until a1 ends at 2g (b has 1 MB left); a2 starts only then and
    # shares with b until both end at 4g: a2 never ran beside a1
    assert final(emulator, a1, T0 + 5 * g) == pytest.approx(T0 + 2 * g + L)
    assert final(emulator, b, T0 + 5 * g) == pytest.approx(T0 + 4 * g + L, rel=1e-5)
    assert final(emulator, a2, T0 + 5 * g) == pytest.approx(T0 + 4 * g + L, rel=1e-5)


def test_a_half_load_doubles_a_lone_flows_time_and_a_load_step_mid_flow_counts(tmp_path):
    """A load trace under fair sharing: the load leaves ``1 - f`` of the link."""
    grid = magpie(2, 1).with_link_sharing("fair")
    state = LinkState(create_link_state(grid, tmp_path / "links"), grid)
    g, L = grid.links["c0->c1"].g(M), grid.plogp(0, 1).L
    half = LoadTrace((Load("c0->c1", 0.5, 0.0, 100.0),))
    loaded = Emulator(grid, state, half, T0)
    stamp = loaded.reserve(0, 1, M, T0)
    assert final(loaded, stamp, T0 + 3 * g) == pytest.approx(T0 + 2 * g + L)
    back = loaded.reserve(1, 0, M, T0 + 10)  # c1->c0 carries no load
    assert final(loaded, back, T0 + 10 + g) == pytest.approx(T0 + 10 + g + L)
    state.close()
    state = LinkState(create_link_state(grid, tmp_path / "links2"), grid)
    mid = LoadTrace((Load("c0->c1", 0.5, g / 2, 100.0),))  # from half-way through
    stepped = Emulator(grid, state, mid, T0)
    stamp = stepped.reserve(0, 1, M, T0)
    assert final(stepped, stamp, T0 + 3 * g) == pytest.approx(T0 + 1.5 * g + L)
    state.close()


def test_a_route_with_fifo_and_fair_links_reserves_the_fifo_ones(tmp_path):
    """Only c0->c1 shares fairly: a message 1 -> 0 still queues FIFO on c1->c0."""
    base = magpie(2, 2)
    links = dict(base.links)
    links["c0->c1"] = dataclasses.replace(links["c0->c1"], sharing="fair")
    grid = Grid(base.name + "-mixed", base.clusters, base.routes, links, base.placement)
    state = LinkState(create_link_state(grid, tmp_path / "links"), grid)
    emulator = Emulator(grid, state)
    g, L = gap(grid)
    back = [emulator.reserve(2, 0, M, T0), emulator.reserve(3, 1, M, T0)]
    assert not any(is_flow_stamp(s) for s in back)
    assert sorted(back) == [pytest.approx(T0 + g + L), pytest.approx(T0 + 2 * g + L)]
    out = [emulator.reserve(0, 2, M, T0), emulator.reserve(1, 3, M, T0)]
    assert all(is_flow_stamp(s) for s in out)
    assert [final(emulator, s, T0 + 2 * g) for s in out] == [pytest.approx(T0 + 2 * g + L)] * 2
    state.close()


def test_the_emulators_wait_sleeps_to_the_delivery_and_records_it(fair):
    grid, state = fair
    emulator = Emulator(grid, state)
    emulator.observed = []
    g, L = gap(grid, 1000)
    slept = []

    def sleep_until(t):
        slept.append(t)
        time.sleep(max(0.0, t - time.monotonic()))

    # wait() reads time.monotonic(): the flow starts now (T0 would be in the future
    # on a machine up less than T0 seconds, and the wait would last until then)
    t0 = time.monotonic()
    stamp = emulator.reserve(0, 2, 1000, t0)
    at = emulator.wait(stamp, 0, 2, 1000, sleep_until)
    assert at == pytest.approx(t0 + g + L) and slept[-1] == at
    assert time.monotonic() >= at
    assert emulator.observed == [(0, 1, 1000, t0, at)]
    assert emulator.wait(123.0, 0, 2, 1000, slept.append) == 123.0  # a time: sleep to it
    assert slept[-1] == 123.0


def test_a_full_table_reclaims_the_oldest_ended_flow(fair):
    grid, state = fair
    emulator = Emulator(grid, state)
    g, L = gap(grid, 1000)
    stamps = [emulator.reserve(0, 2, 1000, T0 + k * 10) for k in range(flow_table.MAX_FLOWS)]
    # every flow has ended, none was received: the next takes the oldest's slot
    emulator.reserve(1, 3, 1000, T0 + 1e5)
    with pytest.raises(GridcollError, match="gone from the flow table"):
        state.table_of(stamps[0]).delivery(stamps[0], T0 + 1e5)
    assert final(emulator, stamps[1], T0 + 1e5) == pytest.approx(T0 + 10 + g + L)


def test_a_table_full_of_flows_in_flight_says_so(fair):
    """No flow has ended, so none can be reclaimed: one more is refused, clearly."""
    grid, state = fair
    emulator = Emulator(grid, state)
    for _ in range(flow_table.MAX_FLOWS):
        emulator.reserve(0, 2, M, T0)  # one pair: all but the first wait in line
    with pytest.raises(GridcollError, match="in flight on fair links"):
        emulator.reserve(1, 3, M, T0)


@settings(max_examples=40, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(0, 7), st.integers(0, 7), st.integers(1, 4 * M), st.floats(0, 3)),
        min_size=1,
        max_size=12,
    ),
    st.lists(st.floats(0, 20), max_size=10),
)
def test_answers_do_not_depend_on_when_the_table_is_asked(tmp_path_factory, messages, asks):
    """teragrid+fair (routes of several fair links): the same flows give the same
    delivery times whether the table is asked only at the end or many times between."""
    grid = get_grid("teragrid+fair")
    sends = sorted(  # from the first or second rank of cluster a to one of cluster b
        (T0 + t, 8 * a + k % 2, 8 * b + k % 3, m)
        for k, (a, b, m, t) in enumerate(messages)
        if a != b
    )
    if not sends:
        return
    results = []
    for eager in (False, True):
        path = create_link_state(grid, tmp_path_factory.mktemp("links") / "state")
        state = LinkState(path, grid)
        emulator = Emulator(grid, state)
        stamps, done = [], {}
        pending_asks = sorted(T0 + x for x in asks) if eager else []
        for t, a, b, m in sends:
            while pending_asks and pending_asks[0] <= t:
                now = pending_asks.pop(0)
                for i, s in enumerate(stamps):
                    if i not in done:
                        at, generation, _ = state.table_of(s).delivery(s, now)
                        if generation is None:
                            done[i] = at
            stamps.append(emulator.reserve(a, b, m, t))
        end = T0 + 1e6
        for i, s in enumerate(stamps):
            if i not in done:
                done[i] = final(emulator, s, end)
        results.append([done[i] for i in range(len(stamps))])
        state.close()
    lazy, eager = results
    assert eager == pytest.approx(lazy, rel=1e-9)
    assert all(math.isfinite(x) for x in lazy)
    for (t, a, b, m), at in zip(sends, lazy, strict=True):  # never faster than alone
        links = [key for kind, key in grid.path(a, b) if kind == "link"]
        alone = max(grid.links[n].g(m) for n in links) + grid.plogp(a, b).L
        assert at >= t + alone * (1 - 1e-9)
