"""WAN-aware and baseline broadcasts: MagPIe's three, MPICH's choice, the multi-tree.

Every builder must deliver exactly the root's bytes (the symbolic replay of
:func:`gridcoll.schedule.validate`) on every grid, root, datatype and size; its
structure must be what the papers describe; its model must give the hand-computed
numbers; and on ``magpie:8,1`` the multi-tree must come close to the throughput bound.
"""

from collections import Counter

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gridcoll.algorithms import get_builder, list_builders
from gridcoll.algorithms.binomial_tree import binomial
from gridcoll.algorithms.mpich import mpich_blocks, mpich_variant
from gridcoll.algorithms.multitree import multitree_parts, part_rates
from gridcoll.algorithms.trees import Tree, append_tree_broadcast, refine_segments
from gridcoll.errors import ParameterError
from gridcoll.models import MODELS, predict
from gridcoll.network import Grid, broadcast_bound, get_grid, magpie
from gridcoll.schedule import (
    Recv,
    Send,
    schedule_from_json,
    schedule_to_json,
    split_segments,
    validate,
)
from gridcoll.simulate import simulate

MiB = 1 << 20

WAN_BUILDERS = {
    "magpie-original": (),
    "magpie-sequential": ("wan_segment_size", "wan_degree", "lan_segment_size", "lan_degree"),
    "magpie-segmented": ("segment_size", "wan_degree", "lan_degree"),
    "mpich": (),
    "multitree": ("segment_size", "lan_degree"),
}
"""The builders of this family and their tunable parameters."""


def params_for(name, segment=48, wan_degree=2, lan_degree=2, lan_segment=None):
    """Keyword parameters for builder ``name`` (segment sizes in bytes)."""
    values = {
        "segment_size": segment,
        "wan_segment_size": segment,
        "lan_segment_size": lan_segment or segment,
        "wan_degree": wan_degree,
        "lan_degree": lan_degree,
    }
    return {p: values[p] for p in WAN_BUILDERS[name]}


def build(name, grid, nbytes, root=0, **kwargs):
    return get_builder("bcast", name).build(grid, nbytes, root, **kwargs)


def interleaved(nclusters, per_cluster):
    """magpie:C,N with ranks dealt round-robin over the clusters (0, 1, 2, 0, 1, 2...)."""
    grid = magpie(nclusters, per_cluster)
    placement = tuple(r % nclusters for r in range(grid.nranks))
    return Grid("interleaved", grid.clusters, grid.routes, grid.links, placement)


def wan_sends(schedule, grid):
    """Every send whose two ranks are in different clusters: (src, dst, segments)."""
    cluster = grid.cluster_of
    return [
        (src, op.peer, op.segments)
        for src, program in enumerate(schedule.programs)
        for op in program
        if isinstance(op, Send) and cluster[src] != cluster[op.peer]
    ]


# -- registration ------------------------------------------------------------------------
def test_builders_are_registered_with_their_params():
    table = {b.name: b for b in list_builders("bcast")}
    for name, params in WAN_BUILDERS.items():
        assert table[name].params == params
        assert table[name].summary
        assert ("bcast", name) in MODELS


# -- correctness: every grid, root, size ------------------------------------------------
GRIDS = [f"magpie:{c},{n}" for c in range(1, 6) for n in range(1, 5)] + ["das2:2", "teragrid"]


@pytest.mark.parametrize("spec", GRIDS)
@pytest.mark.parametrize("name", list(WAN_BUILDERS))
def test_every_root_gets_a_valid_schedule(name, spec):
    grid = get_grid(spec)
    roots = range(grid.nranks) if grid.nranks <= 20 else range(0, grid.nranks, 7)
    for root in roots:
        for nbytes in (1, 100, 1000):  # 100 and 1000 are not multiples of 48
            schedule = build(name, grid, nbytes, root, **params_for(name))
            validate(schedule)
            assert schedule.algorithm == name and schedule.root == root


@pytest.mark.parametrize("name", list(WAN_BUILDERS))
@pytest.mark.parametrize("nbytes", [12288, 20000, 600000])
def test_long_messages_on_every_root(name, nbytes):
    """Sizes where MPICH switches to scatter + allgather (doubling on P = 8, 16; ring
    on P = 12, 20) and where the segmented builders have many segments."""
    for spec in ("magpie:4,2", "magpie:4,4", "magpie:3,4", "magpie:5,4"):
        grid = get_grid(spec)
        for root in range(grid.nranks):
            validate(build(name, grid, nbytes, root, **params_for(name, segment=4096)))


@pytest.mark.parametrize("name", list(WAN_BUILDERS))
def test_interleaved_placement(name):
    grid = interleaved(3, 3)
    assert grid.members == ((0, 3, 6), (1, 4, 7), (2, 5, 8))
    for root in range(grid.nranks):
        for nbytes in (1, 333, 20000):
            validate(build(name, grid, nbytes, root, **params_for(name, segment=64)))


@given(
    name=st.sampled_from(list(WAN_BUILDERS)),
    nclusters=st.integers(1, 5),
    per_cluster=st.integers(1, 4),
    shuffle=st.booleans(),
    root_seed=st.integers(0, 10**6),
    items=st.integers(1, 4000),
    itemsize=st.sampled_from([1, 4, 8]),
    segment_items=st.integers(1, 700),
    lan_segment_items=st.integers(1, 700),
    wan_degree=st.integers(1, 6),
    lan_degree=st.integers(1, 5),
)
def test_property_builders_deliver_exactly_the_roots_bytes(
    name,
    nclusters,
    per_cluster,
    shuffle,
    root_seed,
    items,
    itemsize,
    segment_items,
    lan_segment_items,
    wan_degree,
    lan_degree,
):
    grid = interleaved(nclusters, per_cluster) if shuffle else magpie(nclusters, per_cluster)
    root = root_seed % grid.nranks
    nbytes = items * itemsize
    params = params_for(
        name,
        segment=segment_items * itemsize,
        lan_segment=lan_segment_items * itemsize,
        wan_degree=wan_degree,
        lan_degree=lan_degree,
    )
    schedule = build(name, grid, nbytes, root, itemsize=itemsize, **params)
    validate(schedule)
    assert sum(length for _, length in schedule.segments) == nbytes
    assert all(length > 0 and length % itemsize == 0 for _, length in schedule.segments)
    assert schedule_from_json(schedule_to_json(schedule)) == schedule
    predicted = MODELS[("bcast", name)](grid, nbytes, root, itemsize=itemsize, **params)
    assert predicted > 0 if grid.nranks > 1 else predicted == 0


@pytest.mark.parametrize("spec", ["das2:3", "teragrid", "transit-stub:12,3"])
def test_multitree_never_deadlocks_on_heterogeneous_wans(spec):
    """Coordinators take segments in estimated arrival order; any causal order is safe."""
    grid = get_grid(spec)
    for root in (0, grid.nranks // 2, grid.nranks - 1):
        schedule = build("multitree", grid, 50000, root, segment_size=1000, lan_degree=2)
        validate(schedule)
        simulate(schedule, grid)  # raises ScheduleError on a deadlock


# -- bad arguments -----------------------------------------------------------------------
BAD = [
    ({"root": 8}, "root 8 is out of range"),
    ({"root": -1}, "out of range"),
    ({"nbytes": 0}, "positive number of bytes"),
    ({"nbytes": 10, "itemsize": 4}, "not a whole number of 4-byte elements"),
]


@pytest.mark.parametrize("name", list(WAN_BUILDERS))
@pytest.mark.parametrize(("change", "message"), BAD)
def test_bad_call_raises_before_building(name, change, message):
    args = {"nbytes": 64, "root": 0} | change
    grid = magpie(2, 4)
    kwargs = params_for(name, segment=16) | {k: v for k, v in args.items() if k == "itemsize"}
    for fn in (get_builder("bcast", name).build, MODELS[("bcast", name)]):
        with pytest.raises(ParameterError, match=message):
            fn(grid, args["nbytes"], args["root"], **kwargs)


@pytest.mark.parametrize(
    ("name", "param", "value", "message"),
    [
        ("magpie-sequential", "wan_degree", 0, "wan_degree must be an integer >= 1"),
        ("magpie-sequential", "lan_degree", 0, "lan_degree must be an integer >= 1"),
        ("magpie-segmented", "wan_degree", 0, "wan_degree must be an integer >= 1"),
        ("magpie-segmented", "lan_degree", -2, "lan_degree must be an integer >= 1"),
        ("magpie-segmented", "lan_degree", 1.5, "lan_degree must be an integer >= 1"),
        ("multitree", "lan_degree", 0, "lan_degree must be an integer >= 1"),
        ("magpie-sequential", "wan_segment_size", 6, "does not divide"),
        ("magpie-sequential", "lan_segment_size", 10, "does not divide"),
        ("magpie-segmented", "segment_size", 6, "does not divide"),
        ("multitree", "segment_size", 2, "does not divide"),
        ("multitree", "segment_size", 0, "segment size must be > 0"),
    ],
)
def test_bad_parameters_raise(name, param, value, message):
    grid = magpie(3, 2)
    kwargs = params_for(name, segment=16) | {param: value, "itemsize": 4}
    for fn in (get_builder("bcast", name).build, MODELS[("bcast", name)]):
        with pytest.raises(ParameterError, match=message):
            fn(grid, 64, 0, **kwargs)


# -- structure ---------------------------------------------------------------------------
@pytest.mark.parametrize("grid", [magpie(5, 3), interleaved(4, 3)], ids=["magpie", "mixed"])
def test_magpie_original_sends_one_wan_message_per_remote_cluster(grid):
    for root in range(grid.nranks):
        schedule = build("magpie-original", grid, 5000, root)
        sends = wan_sends(schedule, grid)
        assert len(sends) == grid.nclusters - 1
        assert {src for src, _, _ in sends} == {root}
        assert Counter(grid.cluster_of[dst] for _, dst, _ in sends) == {
            c: 1 for c in range(grid.nclusters) if c != grid.cluster_of[root]
        }
        assert set(schedule.programs[root][: grid.nclusters - 1]) == {
            Send(dst, (0,)) for _, dst, _ in sends
        }  # all WAN sends first, then the LAN binomial tree
        assert len(schedule.segments) == 1 and schedule.nmessages == grid.nranks - 1


@pytest.mark.parametrize("wan_degree", [1, 2, 7])
def test_magpie_segmented_sends_each_segment_once_to_each_cluster(wan_degree):
    for grid in (magpie(8, 3), interleaved(5, 2)):
        for root in (0, grid.nranks - 1):
            schedule = build(
                "magpie-segmented",
                grid,
                10000,
                root,
                segment_size=1000,
                wan_degree=wan_degree,
                lan_degree=2,
            )
            per_cluster = Counter(
                (segments, grid.cluster_of[dst]) for _, dst, segments in wan_sends(schedule, grid)
            )
            assert set(per_cluster.values()) == {1}
            assert len(per_cluster) == len(schedule.segments) * (grid.nclusters - 1)
            # every message is one segment; coordinators forward WAN children first
            assert schedule.segment_size == 1000 and len(schedule.segments) == 10


def test_magpie_sequential_finishes_the_wan_before_the_lan():
    grid = magpie(4, 4)
    schedule = build(
        "magpie-sequential",
        grid,
        1000,
        5,
        wan_segment_size=300,
        wan_degree=2,
        lan_segment_size=128,
        lan_degree=2,
    )
    # the common refinement of the cuts 0|300|600|900|1000 and 0|128|256|...|896|1000
    cuts = {0, 300, 600, 900} | set(range(0, 1000, 128))
    assert [o for o, _ in schedule.segments] == sorted(cuts)
    for coordinator in grid.coordinators(5):
        program = schedule.programs[coordinator]
        kinds = [grid.cluster_of[op.peer] != grid.cluster_of[coordinator] for op in program]
        assert kinds == sorted(kinds, reverse=True)  # all WAN ops, then all LAN ops
        lan_messages = [op.segments for op in program if not kinds[program.index(op)]]
        assert all(len(m) <= 3 for m in lan_messages)  # a 128-byte cut spans <= 3 pieces


def test_multitree_wan_bytes_per_link():
    grid, root = magpie(8, 2), 3  # root in cluster 1
    schedule = build("multitree", grid, MiB, root, segment_size=4096, lan_degree=1)
    length = dict(enumerate(length for _, length in schedule.segments))
    link_bytes = Counter()
    for src, dst, segments in wan_sends(schedule, grid):
        route = (grid.cluster_of[src], grid.cluster_of[dst])
        link_bytes[route] += sum(length[s] for s in segments)
    parts = multitree_parts(grid, root, len(schedule.segments))
    part_bytes = {i: sum(length[s] for s in part) for i, part in parts.items()}
    home, remotes = 1, sorted(parts)
    assert sum(part_bytes.values()) == MiB
    assert max(part_bytes.values()) - min(part_bytes.values()) <= 4096  # equal rates
    expected = {(home, i): part_bytes[i] for i in remotes}
    expected |= {(i, j): part_bytes[i] for i in remotes for j in remotes if i != j}
    assert link_bytes == expected  # every WAN link carries one part, nothing twice
    assert all(b <= MiB // 7 + 4096 for b in link_bytes.values())


def test_multitree_parts_follow_bottleneck_rates():
    grid = get_grid("das2:1")
    rates = part_rates(grid, 0)
    parts = multitree_parts(grid, 0, 1000)
    assert sum(len(p) for p in parts.values()) == 1000
    total = sum(rates.values())
    for i, part in parts.items():
        assert abs(len(part) - 1000 * rates[i] / total) < 1
    # Leiden's part tree includes Leiden -> Delft at 3 Mb/s, the slowest route
    assert rates[1] == pytest.approx(3e6 / 8, rel=0.01)
    assert len(parts[1]) < len(parts[2])


def test_multitree_root_sends_round_robin():
    grid = magpie(4, 1)
    schedule = build("multitree", grid, 12 * 1000, 0, segment_size=1000, lan_degree=1)
    assert [op.peer for op in schedule.programs[0][:6]] == [1, 2, 3, 1, 2, 3]


def test_multitree_single_cluster_is_a_pipelined_tree():
    grid = get_grid("lan:7")
    schedule = build("multitree", grid, 1000, 2, segment_size=100, lan_degree=2)
    validate(schedule)
    assert schedule.nmessages == 6 * 10
    # the tree spans the root, then the other ranks in order: 2 -> (0, 1), 0 -> (3, 4)
    assert schedule.programs[2][:2] == (Send(0, (0,)), Send(1, (0,)))


def test_mpich_chooses_like_mpich():
    assert mpich_variant(7, 10**6) == "binomial"  # P < 8
    assert mpich_variant(64, 12287) == "binomial"  # short
    assert mpich_variant(64, 12288) == "scatter-doubling"  # medium, power of two
    assert mpich_variant(12, 12288) == "scatter-ring"  # medium, not a power of two
    assert mpich_variant(64, 524288) == "scatter-ring"  # long
    grid = magpie(4, 2)
    assert build("mpich", grid, 1000, 3).programs == binomial(grid, 1000, 3).programs


def test_mpich_scatter_blocks_and_empty_blocks():
    assert mpich_blocks(4, 10) == [(0, 3), (3, 3), (6, 3), (9, 1)]
    assert mpich_blocks(4, 40, itemsize=8) == [(0, 16), (16, 16), (32, 8), (40, 0)]
    grid = magpie(5, 4)  # P = 20, not a power of two: ring
    nbytes = 4 * 4096  # 4 elements of 4 KiB: 16 of the 20 blocks are empty
    for root in range(grid.nranks):
        schedule = build("mpich", grid, nbytes, root, itemsize=4096)
        validate(schedule)
        assert schedule.params["variant"] == "scatter-ring"
        assert schedule.segments == ((0, 4096), (4096, 4096), (8192, 4096), (12288, 4096))
        assert all(op.segments for program in schedule.programs for op in program)


def test_mpich_scatter_follows_mpich_code():
    grid = magpie(4, 4)  # P = 16, 600 000 bytes: ring
    schedule = build("mpich", grid, 600000, 0)
    root_ops = schedule.programs[0]
    # binomial scatter: relative 8 gets blocks 8..15, then 4..7, 2..3, 1
    assert root_ops[:4] == (
        Send(8, tuple(range(8, 16))),
        Send(4, (4, 5, 6, 7)),
        Send(2, (2, 3)),
        Send(1, (1,)),
    )
    # ring step 1: send own block right, receive left's block
    assert root_ops[4:6] == (Send(1, (0,)), Recv(15, (15,)))
    doubling = build("mpich", magpie(4, 4), 20000, 5)
    assert doubling.params["variant"] == "scatter-doubling"
    # rank 5 is relative 0; its last partner is relative 8, rank 13: they swap halves
    assert doubling.programs[5][-2:] == (
        Send(13, tuple(range(0, 8))),
        Recv(13, tuple(range(8, 16))),
    )


def test_tree_helpers():
    segments, (a, b) = refine_segments(split_segments(10, 4), split_segments(10, 3))
    assert segments == ((0, 3), (3, 1), (4, 2), (6, 2), (8, 1), (9, 1))
    assert a == ((0, 1), (2, 3), (4, 5)) and b == ((0,), (1, 2), (3, 4), (5,))
    programs = [[Recv(9, ())], [], []]
    append_tree_broadcast(programs, Tree(0, {0: (1,), 1: (2,)}), [(0,), (1, 2)])
    assert programs[0] == [Recv(9, ()), Send(1, (0,)), Send(1, (1, 2))]
    assert programs[2] == [Recv(1, (0,)), Recv(1, (1, 2))]


# -- models: hand computations on magpie:4,1 --------------------------------------------
# magpie:4,1: LAN L_l = 20 us, g_l(m) = 8 us + m / 50 MB/s, os_l(m) = or_l(m) =
# 4 us + m / 150 MB/s; WAN L_w = 10 ms, g_w(m) = 8 us + m / 1 MB/s, os_w = os_l up to
# 64 KiB and os_w = g_w from 128 KiB; or_w = or_l. P_w = 4 clusters of N = 1 rank.
G_W_1MIB = 8e-6 + MiB / 1e6  # g_w(M) = 1.048584 s, and os_w(M) = g_w(M)
G_W_16K = 8e-6 + 16384 / 1e6  # g_w(16 KiB) = 0.016392 s
G_L_16K = 8e-6 + 16384 / 50e6  # g_l(16 KiB) = 0.00033568 s = s_w(16 KiB)
OR_16K = 4e-6 + 16384 / 150e6  # or_w(16 KiB) = os_w(16 KiB) = 0.000113227 s
G_W_64K = 8e-6 + 65536 / 1e6  # g_w(64 KiB) = 0.065544 s
G_L_64K = 8e-6 + 65536 / 50e6  # g_l(64 KiB) = 0.00131872 s = s_w(64 KiB)


def test_magpie_original_model_by_hand():
    # flat WAN tree, lam = (P_w - 2) s_w(M) + r_w(M), s_w(M) = max(g_l(M), os_w(M)) = g_w(M);
    # N = 1: no LAN tree.  2 * 1.048584 + (0.01 + 1.048584) = 3.155752 s
    expected = 2 * G_W_1MIB + (10e-3 + G_W_1MIB)
    assert expected == pytest.approx(3.155752)
    assert predict(magpie(4, 1), "bcast", "magpie-original", MiB) == pytest.approx(expected)


def test_magpie_segmented_model_by_hand():
    # m = 16 KiB, k = 64, d_w = 3, h_w = 1, no LAN:
    # gamma = max(g_w(m), or_w(m) + 3 s_w(m)) = max(0.016392, 0.001120) = 0.016392
    # lam_w = 1 * (2 s_w(m) + r_w(m)) = 2 * 0.00033568 + 0.01 + 0.016392 = 0.02706336
    # T = 63 * 0.016392 + 0.02706336 = 1.05975936 s (seed 000: 1072 ms measured)
    gamma = max(G_W_16K, OR_16K + 3 * G_L_16K)
    lam = 2 * G_L_16K + 10e-3 + G_W_16K
    expected = 63 * gamma + lam
    assert expected == pytest.approx(1.05975936)
    params = {"segment_size": 16384, "wan_degree": 3, "lan_degree": 1}
    assert predict(magpie(4, 1), "bcast", "magpie-segmented", MiB, **params) == pytest.approx(
        expected
    )
    # the sequential composition has the same WAN phase and an empty LAN phase here
    sequential = {"wan_segment_size": 16384, "wan_degree": 3}
    sequential |= {"lan_segment_size": 4096, "lan_degree": 2}
    assert predict(magpie(4, 1), "bcast", "magpie-sequential", MiB, **sequential) == pytest.approx(
        expected
    )


def test_mpich_model_by_hand():
    # P = 4 < 8: binomial over relative ranks; root 0 sends to 2, then 1; 2 sends to 3.
    # Every edge is a WAN route: arrival(2) = r_w(M), arrival(1) = s_w(M) + r_w(M),
    # arrival(3) = 2 r_w(M) = 2.117168 s, the last.
    expected = 2 * (10e-3 + G_W_1MIB)
    assert predict(magpie(4, 1), "bcast", "mpich", MiB) == pytest.approx(expected)


def test_multitree_model_by_hand():
    # m = 64 KiB, k = 16 segments shared 6 / 5 / 5 (equal rates, largest remainder).
    # Part 1: gamma_1 = g_w(m) = 0.065544;
    # lam_1 = 2 s_w(m) + r_w(m) + 1 s_w(m) + r_w(m) = 3 * 0.00131872 + 2 * 0.075544
    # T = 5 * 0.065544 + 0.15504416 = 0.48276416 s (the root's and coordinators' work,
    # 16 s_w(m) ~ 0.021 s, is far below).
    grid = magpie(4, 1)
    assert [len(p) for p in multitree_parts(grid, 0, 16).values()] == [6, 5, 5]
    expected = 5 * G_W_64K + 3 * G_L_64K + 2 * (10e-3 + G_W_64K)
    assert expected == pytest.approx(0.48276416)
    params = {"segment_size": 65536, "lan_degree": 1}
    assert predict(grid, "bcast", "multitree", MiB, **params) == pytest.approx(expected)


def test_slowest_link_is_used_on_heterogeneous_wans():
    # das2: Leiden -> Delft, 3 Mb/s and 4 ms, is the slowest route (seed 000, sec. 4).
    from gridcoll.models.two_layer import slowest_wan

    wan = slowest_wan(get_grid("das2:1"))
    assert pytest.approx(4e-3) == wan.L and wan.bandwidth == pytest.approx(3e6 / 8, rel=1e-3)


# -- the simulator: seed 000's headline and the throughput bound ------------------------
def test_seed_000_headline_in_model_and_simulator():
    for nclusters, original_s in ((8, 7.425), (4, 3.200)):
        grid = magpie(nclusters, 1)
        params = {"segment_size": 16384, "wan_degree": nclusters - 1, "lan_degree": 1}
        for name, kwargs, paper_s in (
            ("magpie-original", {}, original_s),
            ("magpie-segmented", params, 1.079 if nclusters == 8 else 1.072),
        ):
            model = predict(grid, "bcast", name, MiB, **kwargs)
            simulated = simulate(build(name, grid, MiB, **kwargs), grid).total_s
            assert model == pytest.approx(paper_s, rel=0.03)
            assert simulated == pytest.approx(model, rel=0.01)


def test_multitree_reaches_the_throughput_bound_on_magpie_8_1():
    grid = magpie(8, 1)
    bound = broadcast_bound(grid, MiB).time_s  # ~ 1 MiB / (7 MB/s) + 10 ms ~ 0.16 s
    schedule = build("multitree", grid, MiB, segment_size=4096, lan_degree=1)
    simulated = simulate(schedule, grid).total_s
    assert simulated <= 1.5 * bound
    assert simulated <= 1.15 * bound  # in fact ~ 1.11
    model = predict(grid, "bcast", "multitree", MiB, segment_size=4096, lan_degree=1)
    assert model == pytest.approx(simulated, rel=0.02)
