"""The event-driven simulator: its event core, exact P-LogP timings, errors, timeline."""

from __future__ import annotations

import itertools
import math
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gridcoll.algorithms import get_builder, list_builders
from gridcoll.algorithms.trees import Tree, _explicit_tree_broadcast, tree_broadcast
from gridcoll.errors import EmptySchedule, ParameterError, ScheduleError
from gridcoll.network import Cluster, Grid, PLogP, broadcast_bound, get_grid, magpie
from gridcoll.plot.timeline import plot_timeline, resource_rows
from gridcoll.schedule import Recv, Schedule, Send, split_segments
from gridcoll.simulate import (
    NORMAL,
    URGENT,
    Environment,
    Event,
    MessageRecord,
    RealtimeEnvironment,
    SimResult,
    Timeline,
    Timeout,
    simulate,
)
from gridcoll.simulate.streams import replay_streams, single_stream_paths

# A LAN whose overheads fit inside the gap twice: os + or <= g(m) for every m.
NET = PLogP.linear(50e-6, 10e6, g0=10e-6, os0=3e-6, or0=4e-6)


def lan_grid(nranks: int, net: PLogP = NET) -> Grid:
    return Grid("t", (Cluster("lan", nranks, net),))


def build(grid: Grid, name: str, nbytes: int, root: int = 0, **params) -> Schedule:
    return get_builder("bcast", name).build(grid, nbytes, root, **params)


def hand(nranks: int, programs, nsegments: int = 1, nbytes: int = 1000) -> Schedule:
    """A hand-written schedule (simulate does not check what data ends where)."""
    size = nbytes // nsegments
    segments = tuple((s * size, size) for s in range(nsegments))
    return Schedule("bcast", "test", nranks, 0, nbytes, segments, tuple(map(tuple, programs)))


# -- the event core --------------------------------------------------------------------
class TestEngine:
    def test_events_run_in_time_priority_sequence_order(self):
        env = Environment()
        seen = []
        for name, delay, priority in [
            ("late", 2.0, URGENT),
            ("b", 1.0, NORMAL),
            ("a", 1.0, URGENT),
            ("c", 1.0, NORMAL),
        ]:
            event = Timeout(env, delay, name, priority)
            event.callbacks.append(lambda ev: seen.append((env.now, ev.value)))
        env.run()
        assert seen == [(1.0, "a"), (1.0, "b"), (1.0, "c"), (2.0, "late")]
        assert env.now == 2.0

    def test_step_on_empty_heap_raises(self):
        with pytest.raises(EmptySchedule):
            Environment().step()

    def test_run_until_time_stops_before_later_events(self):
        env = Environment()
        Timeout(env, 5.0)
        env.run(until=3.0)
        assert env.now == 3.0 and len(env) == 1 and env.peek() == 5.0
        with pytest.raises(ValueError, match="earlier than now"):
            env.run(until=1.0)

    def test_run_until_event_returns_its_value(self):
        env = Environment()
        done = Timeout(env, 4.0, "ok")
        Timeout(env, 9.0)
        assert env.run(until=done) == "ok"
        assert env.now == 4.0 and done.processed

    def test_until_event_never_triggered(self):
        env = Environment()
        with pytest.raises(RuntimeError, match="not triggered"):
            env.run(until=Event(env))

    def test_failed_events_are_never_silently_ignored(self):
        env = Environment()
        Event(env).fail(KeyError("boom"))
        with pytest.raises(KeyError, match="boom"):
            env.run()
        defused = Event(env).fail(KeyError("quiet"))
        defused.defuse()
        env.run()  # no raise
        assert not defused.ok

    def test_misuse(self):
        env = Environment()
        event = Event(env).succeed(1)
        with pytest.raises(RuntimeError, match="already been triggered"):
            event.succeed(2)
        with pytest.raises(RuntimeError, match="not yet available"):
            _ = Event(env).value
        with pytest.raises(ValueError, match="Negative delay"):
            Timeout(env, -1.0)
        with pytest.raises(ValueError, match="before now"):
            Environment(5.0).schedule_at(1.0, Event(env))

    def test_realtime_environment_follows_the_wall_clock(self):
        started = time.monotonic()
        env = RealtimeEnvironment(factor=0.001, strict=False)
        Timeout(env, 2.0, "x")
        env.run()
        assert env.now == 2.0
        assert time.monotonic() - started >= 0.002  # 2 simulated s = 2 ms of wall clock


# -- exact P-LogP timings on one cluster -----------------------------------------------
@pytest.mark.parametrize("P", [2, 3, 5, 8])
@pytest.mark.parametrize("M", [1, 1000, 65536])
def test_flat_is_exact(P, M):
    """Flat tree: (P-1) g(M) + L (seed 002, Table 1)."""
    result = simulate(build(lan_grid(P), "flat", M), lan_grid(P))
    assert result.total_s == pytest.approx((P - 1) * NET.g(M) + NET.L, rel=1e-12)


def test_flat_per_rank_finish_times():
    """Child i gets its message at (i) g(M) + L; the root's CPU is free after each os."""
    P, M = 6, 4000
    result = simulate(build(lan_grid(P), "flat", M), lan_grid(P))
    expected = [(P - 1) * NET.os(M)] + [i * NET.g(M) + NET.L for i in range(1, P)]
    assert result.finish_s == pytest.approx(expected, rel=1e-12)
    assert result.nmessages == P - 1 and result.total_s == max(result.finish_s)


@pytest.mark.parametrize("P", [2, 4, 7])
@pytest.mark.parametrize("M", [1, 5000])
def test_chain_is_exact(P, M):
    """Chain: (P-1) (g(M) + L)."""
    result = simulate(build(lan_grid(P), "chain", M), lan_grid(P))
    assert result.total_s == pytest.approx((P - 1) * (NET.g(M) + NET.L), rel=1e-12)


@pytest.mark.parametrize(("P", "M", "m"), [(2, 10000, 1000), (5, 10000, 1000), (8, 65536, 4096)])
def test_chain_segmented_is_exact(P, M, m):
    """Pipeline with or + os <= g(m): (P-1)(g(m) + L) + (k-1) g(m)."""
    assert NET.os(m) + NET.or_(m) <= NET.g(m)
    k = math.ceil(M / m)
    result = simulate(build(lan_grid(P), "chain-segmented", M, segment_size=m), lan_grid(P))
    expected = (P - 1) * (NET.g(m) + NET.L) + (k - 1) * NET.g(m)
    assert result.total_s == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize(("P", "M", "m"), [(3, 8000, 1000), (6, 4096, 4096)])
def test_flat_segmented_is_exact(P, M, m):
    """Flat tree of k segments: (P-1) k g(m) + L."""
    k = math.ceil(M / m)
    result = simulate(build(lan_grid(P), "flat-segmented", M, segment_size=m), lan_grid(P))
    assert result.total_s == pytest.approx((P - 1) * k * NET.g(m) + NET.L, rel=1e-12)


@pytest.mark.parametrize("P", [2, 4, 8, 16, 32])
def test_binomial_is_exact_for_powers_of_two(P):
    """Binomial: floor(log2 P) g(M) + ceil(log2 P) L, exact when P is a power of two."""
    M = 3000
    result = simulate(build(lan_grid(P), "binomial", M, root=1), lan_grid(P))
    rounds = int(math.log2(P))
    assert result.total_s == pytest.approx(rounds * (NET.g(M) + NET.L), rel=1e-12)


# -- single messages and WAN contention ------------------------------------------------
@pytest.mark.parametrize("m", [1, 1000, 200_000])
def test_single_lan_message_is_r_l(m):
    """r_l(m) = L_l + g_l(m) (seed 000, sec. 2.1)."""
    schedule = hand(2, [[Send(1, (0,))], [Recv(0, (0,))]], nbytes=m)
    result = simulate(schedule, lan_grid(2))
    assert result.finish_s == pytest.approx((NET.os(m), NET.L + NET.g(m)), rel=1e-12)


@pytest.mark.parametrize("m", [1, 1000, 65536, 200_000])
def test_single_wan_message_is_r_w(m):
    """magpie:2,1: r_w(m) = L_w + g_w(m) = 10 ms + g_w(m)."""
    grid = magpie(2, 1)
    wan = grid.plogp(0, 1)
    result = simulate(build(grid, "flat", m), grid)
    assert wan.L == 10e-3
    assert result.total_s == pytest.approx(wan.L + wan.g(m), rel=1e-12)


def test_asymmetric_route_uses_its_own_direction():
    """das2: Leiden -> VU has its own bandwidth (seed 000, Table 2 is asymmetric)."""
    grid = get_grid("das2:1")
    result = simulate(hand(4, [[Recv(1, (0,))], [Send(0, (0,))], [], []], nbytes=50_000), grid)
    route = grid.plogp(1, 0)
    assert result.finish_s[0] == pytest.approx(route.L + route.g(50_000), rel=1e-12)
    assert route.g(50_000) != grid.plogp(0, 1).g(50_000)


def test_messages_sharing_a_wan_link_queue():
    """Two senders of cluster 0 to cluster 1: the second arrives g_w later."""
    grid, m = magpie(2, 2), 10_000
    programs = [[Send(2, (0,))], [Send(3, (0,))], [Recv(0, (0,))], [Recv(1, (0,))]]
    result = simulate(hand(4, programs, nbytes=m), grid)
    wan = grid.plogp(0, 2)
    first, second = sorted(result.finish_s[2:])
    assert first == pytest.approx(wan.L + wan.g(m), rel=1e-12)
    assert second - first == pytest.approx(wan.g(m), rel=1e-9)


def test_different_wan_links_share_only_the_gateway():
    """Two senders of cluster 0 to clusters 1 and 2: the second waits g_l at the gateway."""
    grid, m = magpie(3, 2), 10_000
    programs = [[Send(2, (0,))], [Send(4, (0,))], [Recv(0, (0,))], [], [Recv(1, (0,))], []]
    result = simulate(hand(6, programs, nbytes=m), grid)
    wan, lan = grid.plogp(0, 2), grid.lan(0)
    assert result.finish_s[2] == pytest.approx(wan.L + wan.g(m), rel=1e-12)
    assert result.finish_s[4] == pytest.approx(lan.g(m) + wan.L + wan.g(m), rel=1e-12)


@pytest.mark.parametrize("m", [1000, 200_000])
def test_two_wan_sends_in_a_row_give_s_w(m):
    """The second head leaves at s_w(m) = max(g_l(m), os_w(m)) (seed 000, sec. 2.1)."""
    grid = magpie(3, 1)
    programs = [[Send(1, (0,)), Send(2, (0,))], [Recv(0, (0,))], [Recv(0, (0,))]]
    result = simulate(hand(3, programs, nbytes=m), grid)
    wan, lan = grid.plogp(0, 2), grid.lan(0)
    s_w = max(lan.g(m), wan.os(m))
    assert result.finish_s[0] == pytest.approx(2 * wan.os(m), rel=1e-12)
    assert result.finish_s[2] == pytest.approx(s_w + wan.L + wan.g(m), rel=1e-12)


def test_receive_of_an_arrived_message_costs_or():
    """A Recv reached after its message arrived completes at t + or(m)."""
    m = 1000
    programs = [
        [Recv(2, (0,)), Send(1, (0,))],  # relays segment 0 from rank 2
        [Recv(0, (0,)), Recv(2, (1,))],  # segment 1 arrived long before it is taken
        [Send(1, (1,)), Send(0, (0,))],
    ]
    result = simulate(hand(3, programs, nsegments=2, nbytes=2 * m), lan_grid(3))
    g, L = NET.g(m), NET.L
    relayed = (g + g + L) + (g + L)  # rank 2's NIC is busy g before segment 0 leaves
    assert result.finish_s[0] == pytest.approx(g + g + L + NET.os(m), rel=1e-12)
    assert result.finish_s[1] == pytest.approx(relayed + NET.or_(m), rel=1e-12)


def test_idle_rank_finishes_at_zero():
    result = simulate(hand(3, [[Send(1, (0,))], [Recv(0, (0,))], []]), lan_grid(3))
    assert result.finish_s[2] == 0.0 and result.total_s == result.finish_s[1]


def test_deterministic():
    grid = magpie(3, 3)
    schedule = build(grid, "binomial-segmented", 100_000, 4, segment_size=8192)
    assert simulate(schedule, grid) == simulate(schedule, grid)


# -- errors ------------------------------------------------------------------------------
def test_deadlock_names_a_stuck_rank():
    programs = [[Recv(1, (0,)), Send(1, (0,))], [Recv(0, (0,)), Send(0, (0,))]]
    with pytest.raises(ScheduleError, match=r"deadlock: rank 0 .* from rank 1") as info:
        simulate(hand(2, programs), lan_grid(2))
    assert info.value.rank == 0


def test_deadlock_after_some_traffic():
    programs = [[Send(1, (0,)), Recv(2, (0,))], [Recv(0, (0,))], [Recv(0, (0,))]]
    with pytest.raises(ScheduleError, match="deadlock") as info:
        simulate(hand(3, programs), lan_grid(3))
    assert info.value.rank == 0


def test_mismatched_segments():
    programs = [[Send(1, (0,))], [Recv(0, (1,))]]
    with pytest.raises(ScheduleError, match=r"expects segments \(1,\) .* sends \(0,\)") as info:
        simulate(hand(2, programs, nsegments=2), lan_grid(2))
    assert info.value.rank == 1


def test_message_never_received():
    with pytest.raises(ScheduleError, match="never receives 1 message"):
        simulate(hand(2, [[Send(1, (0,))], []]), lan_grid(2))


@pytest.mark.parametrize("peer", [0, 5, -1])
def test_bad_peer(peer):
    with pytest.raises(ScheduleError, match="names peer"):
        simulate(hand(2, [[Send(peer, (0,))], []]), lan_grid(2))
    with pytest.raises(ScheduleError, match="names peer"):
        simulate(hand(2, [[], [Recv(peer if peer != 0 else 1, (0,))]]), lan_grid(2))


def test_unknown_segment():
    with pytest.raises(ScheduleError, match="segment"):
        simulate(hand(2, [[Send(1, (3,))], [Recv(0, (3,))]]), lan_grid(2))


def test_schedule_must_fit_the_grid():
    with pytest.raises(ScheduleError, match="has 4 ranks but grid"):
        simulate(build(lan_grid(4), "flat", 100), lan_grid(3))


# -- the timeline ----------------------------------------------------------------------
def test_record_false_keeps_no_timeline():
    grid = magpie(2, 2)
    assert simulate(build(grid, "flat", 100), grid).timeline is None


def test_timeline_is_consistent():
    grid = magpie(3, 4)
    schedule = build(grid, "binomial-segmented", 60_000, 5, segment_size=16_384)
    plain = simulate(schedule, grid)
    result = simulate(schedule, grid, record=True)
    assert (result.total_s, result.finish_s) == (plain.total_s, plain.finish_s)
    timeline = result.timeline
    assert isinstance(timeline, Timeline)
    assert len(timeline.messages) == result.nmessages == schedule.nmessages
    for msg in timeline.messages:
        assert isinstance(msg, MessageRecord)
        p = grid.plogp(msg.src, msg.dst)
        assert msg.arrival >= msg.send_start + p.L + p.g(msg.nbytes) - 1e-12
        assert msg.recv_done >= msg.arrival
        assert msg.recv_done <= result.finish_s[msg.dst]
    hops = {}
    for iv in timeline.intervals:
        hops.setdefault(iv.message, []).append(iv)
    for index, ivs in hops.items():
        msg = timeline.messages[index]
        assert [iv.resource for iv in ivs] == list(grid.path(msg.src, msg.dst))
        assert ivs[0].start >= msg.send_start
        assert all(a.start <= b.start for a, b in itertools.pairwise(ivs))
        assert msg.arrival == pytest.approx(
            max(iv.end for iv in ivs) + grid.plogp(msg.src, msg.dst).L
        )
    for ivs in timeline.by_resource.values():  # FIFO, one message at a time
        assert all(a.end <= b.start for a, b in itertools.pairwise(ivs))
    for iv in timeline.intervals:  # each hop is busy g(m) of its own network
        kind, key = iv.resource
        nbytes = timeline.messages[iv.message].nbytes
        gap = grid.links[key].g if kind == "link" else grid.clusters[0].lan.g
        assert iv.end - iv.start == pytest.approx(gap(nbytes), rel=1e-12)
    assert timeline.busy_s(("link", "nowhere")) == 0.0
    assert timeline.busy_s(("link", "c1->c0")) > 0.0


# -- property: any registered broadcast on any magpie grid ------------------------------
def _params(name: str, nbytes: int, draw) -> dict:
    """Draw every tunable parameter of a builder: segment sizes (at most 16 segments)
    and tree degrees."""
    params = {}
    for param in get_builder("bcast", name).params:
        if param.endswith("segment_size"):
            params[param] = draw(st.integers(max(1, nbytes // 16), nbytes))
        elif param.endswith("degree"):
            params[param] = draw(st.integers(1, 4))
        else:
            raise AssertionError(f"test does not know how to draw {param!r} of {name!r}")
    return params


@st.composite
def broadcasts(draw):
    grid = magpie(draw(st.integers(1, 4)), draw(st.integers(1, 4)))
    name = draw(st.sampled_from([b.name for b in list_builders("bcast")]))
    nbytes = draw(st.integers(1, 300_000))
    root = draw(st.integers(0, grid.nranks - 1))
    return grid, build(grid, name, nbytes, root, **_params(name, nbytes, draw))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(broadcasts())
def test_any_broadcast_finishes_above_the_bound(case):
    grid, schedule = case
    result = simulate(schedule, grid, record=True)
    assert isinstance(result, SimResult)
    bound = broadcast_bound(grid, schedule.nbytes, schedule.root)
    assert result.total_s >= bound.latency_s - 1e-12
    assert result.total_s == max(result.finish_s, default=0.0)
    assert len(result.finish_s) == grid.nranks
    for msg in result.timeline.messages:
        assert result.finish_s[msg.dst] >= msg.arrival
        assert result.finish_s[msg.src] >= msg.send_start


# -- the two evaluations: the dataflow replay equals the event loop, bit for bit ------------
def same_result(schedule: Schedule, grid: Grid) -> SimResult:
    """simulate() without record (the dataflow replay when it applies) and with it (the
    event loop, always) agree exactly; return the recorded result."""
    fast = simulate(schedule, grid)
    loop = simulate(schedule, grid, record=True)
    assert fast.total_s == loop.total_s
    assert fast.finish_s == loop.finish_s  # float ==: bit for bit, no tolerance
    assert (fast.nmessages, fast.nevents) == (loop.nmessages, loop.nevents)
    assert loop.nevents == len(loop.timeline.intervals) - loop.nmessages
    return loop


GRIDS = {
    "lan:6": get_grid("lan:6"),
    "magpie:3,3": magpie(3, 3),
    "das2:2": get_grid("das2:2"),
    "teragrid": get_grid("teragrid"),
    "transit-stub:8,3": get_grid("transit-stub:8,3"),
}


@st.composite
def tree_broadcasts(draw):
    """A random tree over a random subset of a grid's ranks, cut into 1-8 segments,
    as compact (PeriodicProgram) programs, some made tuples, or explicit ones."""
    grid = GRIDS[draw(st.sampled_from(sorted(GRIDS)))]
    ranks = draw(st.permutations(range(grid.nranks)))[: draw(st.integers(2, 12))]
    children: dict[int, list[int]] = {}
    for i, v in enumerate(ranks[1:], start=1):
        children.setdefault(ranks[draw(st.integers(0, i - 1))], []).append(v)
    tree = Tree(ranks[0], {v: tuple(kids) for v, kids in children.items()})
    nbytes = draw(st.integers(1, 100_000))
    segments = split_segments(nbytes, draw(st.integers(max(1, nbytes // 8), nbytes)))
    if draw(st.booleans()):  # compact programs, some ranks' made explicit
        programs = tree_broadcast(tree, grid.nranks, len(segments))
        programs = tuple(tuple(p) if draw(st.booleans()) else p for p in programs)
    else:
        rendezvous = draw(st.booleans())
        programs = _explicit_tree_broadcast(tree, grid.nranks, len(segments), rendezvous=rendezvous)
    return grid, Schedule("bcast", "t", grid.nranks, ranks[0], nbytes, segments, programs)


@st.composite
def message_sequences(draw):
    """Any deadlock-free schedule: messages in one global order, each a Send appended
    to its sender's program and a Recv to its receiver's, carrying random segments."""
    grid = GRIDS[draw(st.sampled_from(sorted(GRIDS)))]
    P = min(grid.nranks, 8)
    nsegments = draw(st.integers(1, 4))
    segments = split_segments(1000 * nsegments, 1000)
    programs: list[list] = [[] for _ in range(grid.nranks)]
    for _ in range(draw(st.integers(0, 30))):
        src, dst = draw(st.permutations(range(P)))[:2]
        carried = tuple(draw(st.sets(st.integers(0, nsegments - 1), max_size=2)))
        programs[src].append(Send(dst, carried))
        programs[dst].append(Recv(src, carried))
    return grid, Schedule(
        "bcast", "t", grid.nranks, 0, 1000 * nsegments, segments, tuple(map(tuple, programs))
    )


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(tree_broadcasts(), message_sequences()))
def test_dataflow_replay_equals_the_event_loop(case):
    grid, schedule = case
    same_result(schedule, grid)


def test_dataflow_replay_serves_every_two_layer_broadcast():
    """And every tree broadcast on one LAN; a cluster-unaware tree on a WAN is not
    single-stream (two ranks of one cluster send into another: its gateway)."""
    lan = lan_grid(20)
    for name in ("dary-segmented", "binomial-segmented", "flat-segmented"):
        params = {"segment_size": 5000} | ({"degree": 3} if name.startswith("dary") else {})
        schedule = build(lan, name, 40_000, 6, **params)
        assert replay_streams(schedule, lan, schedule.message_bytes) is not None, name
        same_result(schedule, lan)
    grid = magpie(4, 5)
    for name, params in [
        ("magpie-segmented", {"segment_size": 3000, "wan_degree": 2, "lan_degree": 2}),
        ("magpie-segmented", {"segment_size": 7000, "wan_degree": 3, "lan_degree": 4}),
        ("chain-segmented", {"segment_size": 4000}),
        ("magpie-original", {}),
    ]:
        schedule = build(grid, name, 40_000, 6, **params)
        assert replay_streams(schedule, grid, schedule.message_bytes) is not None, name
        same_result(schedule, grid)


def test_a_resource_fed_by_two_streams_takes_the_event_loop():
    grid = magpie(3, 2)  # gw_in of cluster 2 fed by ranks 0 and 2: two streams
    assert single_stream_paths(grid, [(0, 4), (2, 5)]) is None
    assert single_stream_paths(grid, [(0, 4), (0, 5), (0, 2)]) is not None
    schedule = hand(6, [[Send(4, (0,))], [], [Send(5, (0,))], [], [Recv(0, (0,))], [Recv(2, (0,))]])
    assert replay_streams(schedule, grid, schedule.message_bytes) is None
    same_result(schedule, grid)
    for name, params in [  # answers share the parent's NIC; relays share gateways
        ("flat-rendezvous", {}),
        ("binomial-rendezvous", {}),
        ("multitree", {"segment_size": 2000, "lan_degree": 2}),
    ]:
        schedule = build(grid, name, 5000, 1, **params)
        assert replay_streams(schedule, grid, schedule.message_bytes) is None
        same_result(schedule, grid)


def test_two_layer_broadcast_at_scale_exactly():
    """A 1,600-rank magpie-segmented broadcast of 64 segments: the dataflow replay's
    figures, pinned (the event loop gave them before the replay existed)."""
    grid = magpie(40, 40)
    schedule = build(
        grid, "magpie-segmented", 2**17, 0, segment_size=2048, wan_degree=39, lan_degree=3
    )
    result = simulate(schedule, grid)
    assert (result.nmessages, result.nevents) == (102_336, 109_824)
    assert result.total_s == 0.14396527999999972
    assert sum(result.finish_s) == 228.03656239999924


# -- the plot ----------------------------------------------------------------------------
def test_plot_timeline_writes_a_png(tmp_path):
    grid = magpie(3, 3)
    schedule = build(grid, "binomial-segmented", 50_000, 0, segment_size=10_000)
    result = simulate(schedule, grid, record=True)
    out = plot_timeline(result, grid, tmp_path / "timeline.png")
    data = out.read_bytes()
    assert data.startswith(b"\x89PNG") and len(data) > 1000


def test_plot_rows_are_capped_and_ordered():
    grid = magpie(4, 4)
    result = simulate(build(grid, "flat-rendezvous", 20_000), grid, record=True)
    rows, nused = resource_rows(result.timeline, max_rows=5)
    assert len(rows) == 5 < nused
    kinds = [kind for kind, _ in rows]
    assert kinds == sorted(kinds, key=["link", "gw_out", "gw_in", "nic_out", "nic_in"].index)
    assert kinds[0] == "link"


def test_plot_needs_a_recorded_timeline(tmp_path):
    grid = magpie(2, 1)
    result = simulate(build(grid, "flat", 10), grid)
    with pytest.raises(ParameterError, match="record=True"):
        plot_timeline(result, grid, tmp_path / "x.png")
