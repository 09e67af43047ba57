"""Fair (max-min) sharing of links: the grid field, progressive filling, the simulator."""

from __future__ import annotations

import itertools
import json
import math

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from gridcoll.algorithms import get_builder, list_builders
from gridcoll.errors import GridError, ParameterError
from gridcoll.network import (
    Cluster,
    Grid,
    Link,
    PiecewiseLinear,
    PLogP,
    Route,
    collective_bound,
    get_grid,
    grid_from_dict,
    grid_to_dict,
    load_grid,
    magpie,
    save_grid,
)
from gridcoll.schedule import Recv, Schedule, Send
from gridcoll.simulate import simulate
from gridcoll.simulate.fairshare import max_min_rates
from gridcoll.simulate.streams import replay_streams
from gridcoll.tune import Call, PlanOptions, plan

LAN = PLogP.linear(0.0, 1e12, g0=0.0)  # a LAN that costs (almost) nothing
L_W = 5e-3


def link_gap(bandwidth: float, g0: float = 0.0) -> PiecewiseLinear:
    return PLogP.linear(0.0, bandwidth, g0=g0).g_fn


def star(links: dict[str, float], paths: dict[int, tuple[str, ...]], sharing: str, g0=0.0):
    """Single-rank clusters 0..n-2 sending to the last one, D, over the named links
    (bytes/s); every other route has a fast private link."""
    n = len(paths) + 1
    clusters = tuple(Cluster(f"c{i}", 1, LAN) for i in range(n))
    all_links = {name: Link(name, link_gap(bw, g0), sharing) for name, bw in links.items()}
    routes = {}
    for a, b in itertools.permutations(range(n), 2):
        names = paths.get(a, ()) if b == n - 1 else ()
        if not names:
            names = (f"{a}>{b}",)
            all_links[names[0]] = Link(names[0], link_gap(1e9), sharing)
        routes[(a, b)] = Route(PLogP.linear(L_W, 1e6, g0=g0), names)
    return Grid(f"star-{sharing}", clusters, routes, all_links)


def sends(nranks: int, messages: list[tuple[int, int, int]]) -> Schedule:
    """One message per (src, dst, segment); segment s has ``sizes[s]`` bytes."""
    sizes = [m for _, _, m in messages]
    segments = tuple((sum(sizes[:s]), m) for s, m in enumerate(sizes))
    programs: list[list] = [[] for _ in range(nranks)]
    for s, (src, dst, _) in enumerate(messages):
        programs[src].append(Send(dst, (s,)))
        programs[dst].append(Recv(src, (s,)))
    total = sum(sizes)
    return Schedule("bcast", "t", nranks, 0, total, segments, tuple(map(tuple, programs)))


# -- progressive filling ---------------------------------------------------------------
def test_max_min_classic_example():
    """Bertsekas & Gallager sec. 6.5.2: flows 0 and 1 share link A with flow 2, which is
    held to a quarter elsewhere (link B); 0 and 1 split what 2 leaves of A."""
    flows = {0: [("A", 1.0)], 1: [("A", 1.0)], 2: [("B", 4.0), ("A", 1.0)]}
    rates = max_min_rates(flows)
    assert rates[2] == pytest.approx(0.25)
    assert rates[0] == rates[1] == pytest.approx(0.375)


def test_max_min_four_flows_three_links():
    """Three links of capacity 1, 1, 2 in a row; a long flow crosses all of them."""
    flows = {"long": [(1, 1.0), (2, 1.0), (3, 1.0)], "a": [(1, 1.0)], "b": [(2, 1.0)]}
    flows["c"] = [(3, 1.0)]
    rates = max_min_rates(flows, {1: 1.0, 2: 1.0, 3: 2.0})
    assert rates == pytest.approx({"long": 0.5, "a": 0.5, "b": 0.5, "c": 1.5})


def test_a_flow_that_costs_nothing_is_not_limited():
    assert max_min_rates({0: [("A", 0.0)], 1: [("A", 2.0)]}) == {0: math.inf, 1: 0.5}


@st.composite
def flow_sets(draw):
    nlinks = draw(st.integers(1, 5))
    costs = st.floats(0.01, 10.0)
    return {
        f: [(link, draw(costs)) for link in draw(st.sets(st.integers(0, nlinks - 1), min_size=1))]
        for f in range(draw(st.integers(1, 8)))
    }


@given(flow_sets())
def test_max_min_is_feasible_and_every_flow_has_a_bottleneck(flows):
    """The characterisation (ibid.): every link's load is at most its capacity, and each
    flow crosses a saturated link on which no flow has a larger rate."""
    rates = max_min_rates(flows)
    load: dict[int, float] = {}
    for f, costs in flows.items():
        for link, c in costs:
            load[link] = load.get(link, 0.0) + rates[f] * c
    assert all(v <= 1 + 1e-9 for v in load.values())
    for f, costs in flows.items():
        assert any(
            load[link] >= 1 - 1e-9
            and all(rates[g] <= rates[f] * (1 + 1e-9) for g in flows if link in dict(flows[g]))
            for link, _ in costs
        ), f


@given(flow_sets(), st.lists(st.integers(1, 3), min_size=8, max_size=8))
def test_weights_stand_for_identical_flows(flows, counts):
    """A class of n identical flows gets the rate each of the n copies would get."""
    copies = {(f, k): costs for f, costs in flows.items() for k in range(counts[f])}
    each = max_min_rates(copies)
    weighted = max_min_rates(flows, weights={f: counts[f] for f in flows})
    for (f, _), rate in each.items():
        assert weighted[f] == pytest.approx(rate, rel=1e-9)


# -- the simulator ---------------------------------------------------------------------
@pytest.mark.parametrize("g0", [0.0, 8e-6])
@pytest.mark.parametrize("m", [1, 1000, 200_000])
def test_a_lone_message_takes_the_same_time_in_both_modes(m, g0):
    times = [
        simulate(sends(2, [(0, 1, m)]), star({"down": 1e6}, {0: ("down",)}, mode, g0)).total_s
        for mode in ("fifo", "fair")
    ]
    assert times[1] == pytest.approx(times[0], rel=1e-12)
    assert times[0] == pytest.approx(L_W + g0 + m / 1e6, rel=1e-12)


@pytest.mark.parametrize("g0", [0.0, 8e-6])
def test_a_half_share_doubles_a_lone_message(g0):
    """Two equal messages starting together on one fair link both take twice
    what one takes alone; on a FIFO link the first takes 1x and the second 2x."""
    m, paths = 100_000, {0: ("down",), 1: ("down",)}
    schedule = sends(3, [(0, 2, m), (1, 2, m)])
    alone = simulate(sends(3, [(0, 2, m)]), star({"down": 1e6}, paths, "fair", g0)).total_s - L_W
    fair = simulate(schedule, star({"down": 1e6}, paths, "fair", g0), record=True)
    fifo = simulate(schedule, star({"down": 1e6}, paths, "fifo", g0), record=True)
    arrivals = [msg.arrival - L_W for msg in fair.timeline.messages]
    assert arrivals == pytest.approx([2 * alone, 2 * alone], rel=1e-12)
    assert [msg.arrival - L_W for msg in fifo.timeline.messages] == pytest.approx(
        [alone, 2 * alone], rel=1e-12
    )


def test_three_flows_get_max_min_shares():
    """Flows 0 and 1 share 'down' with flow 2, which 'slow' holds to a quarter: 0 and 1
    run at 3/8 of 'down' each until they end, flow 2 at 1/4 throughout."""
    m, C = 100_000, 1e6
    grid = star(
        {"down": C, "slow": C / 4}, {0: ("down",), 1: ("down",), 2: ("slow", "down")}, "fair"
    )
    result = simulate(sends(4, [(0, 3, m), (1, 3, m), (2, 3, m)]), grid, record=True)
    arrivals = [msg.arrival - L_W for msg in result.timeline.messages]
    assert arrivals == pytest.approx([m / (3 * C / 8)] * 2 + [m / (C / 4)], rel=1e-12)
    fifo = simulate(
        sends(4, [(0, 3, m), (1, 3, m), (2, 3, m)]), grid.with_link_sharing("fifo"), record=True
    )
    served = [m / C, 2 * m / C, m / (C / 4)]  # one at a time, in the order they came
    assert [msg.arrival - L_W for msg in fifo.timeline.messages] == pytest.approx(served)


def test_a_pair_keeps_its_order_and_takes_one_share():
    """Rank 0 sends a large then a small message to D while rank 1 sends one: the pair's
    second message flows only after its first has crossed the link (one connection),
    arrives after it, and cutting into segments buys no larger share."""
    big, small, C = 100_000, 1_000, 1e6
    grid = star({"down": C}, {0: ("down",), 1: ("down",)}, "fair")
    result = simulate(sends(3, [(0, 2, big), (0, 2, small), (1, 2, big)]), grid, record=True)
    first, second, other = result.timeline.messages
    assert first.arrival < second.arrival
    link = result.timeline.by_resource[("link", "down")]
    by_message = {iv.message: iv for iv in link}
    assert by_message[1].start == by_message[0].end  # the pair's second flow waits
    assert first.arrival - L_W == pytest.approx(2 * big / C, rel=1e-12)
    assert other.arrival == pytest.approx(first.arrival, rel=1e-12)
    assert second.arrival - L_W == pytest.approx((2 * big + small) / C, rel=1e-12)
    # four segments of 25 kB against one 100 kB message: each pair gets half the link
    quarters = [(0, 2, big // 4)] * 4 + [(1, 2, big)]
    result = simulate(sends(3, quarters), grid, record=True)
    ends = [msg.arrival - L_W for msg in result.timeline.messages]
    assert ends[3] == pytest.approx(2 * big / C, rel=1e-9)
    assert ends[4] == pytest.approx(2 * big / C, rel=1e-9)


def test_without_fair_links_nothing_changes():
    """A fair grid whose schedule crosses no fair link, and the FIFO grid, agree exactly;
    the dataflow replay is never used on fair links (and the event loop agrees with it)."""
    grid = magpie(3, 2)
    fair = grid.with_link_sharing("fair")
    local = sends(6, [(0, 1, 5000), (2, 3, 7000)])  # LAN messages only
    assert simulate(local, fair).finish_s == simulate(local, grid).finish_s
    wan = sends(6, [(0, 2, 5000), (0, 4, 5000), (2, 4, 3000)])
    assert simulate(wan, fair).finish_s == simulate(wan, fair, record=True).finish_s
    one = sends(6, [(0, 2, 5000)])
    assert replay_streams(one, grid, one.message_bytes) is not None
    assert replay_streams(one, fair, one.message_bytes) is None


@pytest.mark.parametrize("name", ["chain-segmented", "flat-segmented"])
def test_one_stream_per_link_takes_the_fifo_times(name):
    """A pipeline whose every link carries one pair's messages, one after another: the
    pair's flows follow each other as its FIFO messages do, so the times agree."""
    grid = magpie(4, 1)
    schedule = get_builder("bcast", name).build(grid, 200_000, 0, segment_size=16_384)
    fifo = simulate(schedule, grid).finish_s
    fair = simulate(schedule, grid.with_link_sharing("fair")).finish_s
    assert fair == pytest.approx(fifo, rel=1e-12)


# -- conservation: every collective on fair grids ------------------------------------------
FAIR_GRIDS = {name: get_grid(name) for name in ("magpie:3,2+fair", "das2:2+fair")}
FAIR_GRIDS["star"] = star(
    {"down": 1e6, "slow": 2.5e5}, {0: ("down",), 1: ("down",), 2: ("slow", "down")}, "fair"
)


@st.composite
def collectives(draw):
    grid = FAIR_GRIDS[draw(st.sampled_from(sorted(FAIR_GRIDS)))]
    builder = draw(st.sampled_from(list_builders()))
    nbytes = 0 if builder.op == "barrier" else draw(st.integers(1, 100_000))
    root = draw(st.integers(0, grid.nranks - 1))
    params = {}
    for param in builder.params:
        if param.endswith("segment_size"):
            params[param] = draw(st.integers(max(1, nbytes // 8), max(1, nbytes)))
        else:
            params[param] = draw(st.integers(1, 4))
    try:
        schedule = builder.build(grid, nbytes, root, **params)
    except ParameterError:
        assume(False)
    return grid, builder.op, schedule


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(collectives())
def test_fair_sharing_never_beats_the_physical_bound(case):
    grid, op, schedule = case
    result = simulate(schedule, grid, record=True)
    bound = collective_bound(grid, op, schedule.nbytes, schedule.root).time_s
    assert result.total_s >= bound * (1 - 1e-9)
    assert len(result.timeline.messages) == result.nmessages == schedule.nmessages
    last: dict[tuple[int, int], float] = {}
    for msg in result.timeline.messages:  # every message delivered and taken, in order
        assert msg.send_start <= msg.arrival <= msg.recv_done <= result.finish_s[msg.dst]
        assert msg.arrival >= last.get((msg.src, msg.dst), 0.0)
        last[(msg.src, msg.dst)] = msg.arrival


# -- the grid description -----------------------------------------------------------------
def test_grid_file_round_trips_sharing(tmp_path):
    grid = get_grid("teragrid").with_link_sharing("fair", ["SDSC:up", "ANL:down"])
    path = tmp_path / "g.json"
    save_grid(grid, path)
    back = load_grid(path)
    assert back.fingerprint == grid.fingerprint
    assert back.fair_links == {"SDSC:up", "ANL:down"}
    written = json.loads(path.read_text())
    assert sum("sharing" in link for link in written["links"]) == 2


def test_link_sharing_default_and_override():
    data = {
        "clusters": [
            {"name": "A", "ranks": 2, "lan": {"latency": "20us", "bandwidth": "50MB/s"}},
            {"name": "B", "ranks": 2, "lan": {"latency": "20us", "bandwidth": "50MB/s"}},
        ],
        "links": [{"name": "up", "bandwidth": "1MB/s", "sharing": "fifo"}],
        "routes": [
            {"from": "A", "to": "B", "plogp": {"latency": "10ms", "bandwidth": "1MB/s"}},
            {"from": "B", "to": "A", "plogp": {"latency": "10ms", "bandwidth": "1MB/s"}},
        ],
    }
    old = grid_from_dict(data)
    assert old.fair_links == frozenset()
    assert "sharing" not in json.dumps(grid_to_dict(old))  # FIFO files are written as before
    fair = grid_from_dict({**data, "link_sharing": "fair"})
    assert fair.fair_links == {"A->B", "B->A"}  # private links take the default; 'up' its own
    assert fair.fingerprint != old.fingerprint
    for bad in ({"link_sharing": "wfq"}, {"link_sharing": True}):
        with pytest.raises(GridError, match="'link_sharing' must be one of"):
            grid_from_dict({**data, **bad})
    data["links"][0]["sharing"] = "FAIR"
    with pytest.raises(GridError, match="link 'up': 'sharing' must be one of"):
        grid_from_dict(data)


def test_old_files_and_presets_are_unchanged(tmp_path):
    for spec in ("magpie:3,2", "teragrid", "transit-stub:6,1"):
        grid = get_grid(spec)
        assert grid.fair_links == frozenset()
        path = tmp_path / "g.json"
        save_grid(grid, path)
        assert "sharing" not in path.read_text()


def test_fingerprint_and_name_differ_between_modes():
    grid = get_grid("magpie:4,1")
    fair = get_grid("magpie:4,1+fair")
    assert fair.name == "magpie:4,1+fair" and fair.fair_links == set(grid.links)
    assert fair.fingerprint != grid.fingerprint
    assert fair.with_link_sharing("fifo").fingerprint == grid.fingerprint
    some = grid.with_link_sharing("fair", ["c0->c1"])
    assert some.name == "magpie:4,1+fair-links" and some.fair_links == {"c0->c1"}
    assert len({grid.fingerprint, fair.fingerprint, some.fingerprint}) == 3
    assert get_grid("teragrid+fifo") is not None and grid.with_link_sharing("fifo") is grid
    with pytest.raises(GridError, match="sharing must be one of"):
        grid.with_link_sharing("wfq")
    with pytest.raises(GridError, match="no link"):
        grid.with_link_sharing("fair", ["nowhere"])
    with pytest.raises(GridError, match="sharing must be one of"):
        Link("x", link_gap(1e6), "round-robin")


def test_scaled_links_keep_their_sharing():
    fair = get_grid("teragrid+fair")
    assert fair.with_links_scaled(0.5, 2).fair_links == fair.fair_links


# -- the tuner -------------------------------------------------------------------------------
def test_plan_on_a_fair_grid_simulates_fairly():
    """The models stay FIFO-based; plan's check simulates on the fair grid. ECEF's 1 MiB
    tree on teragrid (7.78 s FIFO, slower when its WAN messages share links)."""
    grid = get_grid("teragrid+fair")
    p = plan(grid, Call("bcast", 1 << 20, 0), PlanOptions(algo="ecef", check=True))
    schedule = p.build(grid)
    assert p.simulated_s == simulate(schedule, grid).total_s
    fifo = simulate(schedule, get_grid("teragrid")).total_s
    assert fifo == pytest.approx(7.78, abs=0.01) and p.simulated_s > 1.3 * fifo
    assert p.simulated_s >= p.bound_s * (1 - 1e-9)
    auto = plan("magpie:4,1+fair", Call("bcast", 65536, 0), PlanOptions(budget_s=0.5, check=True))
    assert auto.simulated_s >= auto.bound_s * (1 - 1e-9)
