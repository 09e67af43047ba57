"""Heterogeneous tree builders (seeds 001, 003, 004 and their baselines), their models,
the planning budget of ``auto``, and ``gridcoll compare``."""

from __future__ import annotations

import itertools
import json
import math
import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gridcoll.algorithms import get_builder, list_builders
from gridcoll.algorithms.annealing import (
    TreeCost,
    basic_sa,
    clustered_sa,
    driver_sa,
    form_pool_sets,
    random_tree,
)
from gridcoll.algorithms.edge_costs import EdgeCosts, edge_costs
from gridcoll.algorithms.heuristics import grow
from gridcoll.algorithms.hlot import hlot_tree
from gridcoll.algorithms.mpich_g2 import mpich_g2_tree
from gridcoll.algorithms.phoenix import bandwidth_tree, latency_tree, list_order
from gridcoll.algorithms.tps import bottleneck_set, tps_schedule
from gridcoll.algorithms.trees import Tree, flat_tree
from gridcoll.cli.compare import schedule_tree, without_links
from gridcoll.cli.main import main
from gridcoll.errors import ParameterError, Unfeasible
from gridcoll.models import MODELS, tree_time
from gridcoll.models.heterogeneous import TREES, tree_of
from gridcoll.network import Cluster, Grid, Link, Route, get_grid, magpie, teragrid
from gridcoll.network.plogp import PLogP
from gridcoll.network.presets import lan_plogp, transit_stub, wan_plogp
from gridcoll.schedule import validate
from gridcoll.simulate import simulate
from gridcoll.tune import Call, PlanOptions, plan

pytestmark = pytest.mark.usefixtures("no_wall_clock")  # budgets: nominal only (conftest)

FAMILIES = [
    "fef",
    "ecef",
    "look-ahead",
    "hlot",
    "tps",
    "mateescu",
    "sa",
    "sa-clustered",
    "phoenix-latency",
    "phoenix-bandwidth",
    "mpich-g2",
]
NAMES = FAMILIES + [f"{f}-segmented" for f in FAMILIES] + ["list"]
SA_EVALUATIONS = 400  # keeps the property tests fast; the annealing is exercised below


def fast(name: str) -> dict:
    """Builder keyword arguments that keep the annealing short."""
    return {"evaluations": SA_EVALUATIONS} if name.startswith("sa") else {}


def is_spanning(tree: Tree, nranks: int, root: int) -> bool:
    nodes = tree.nodes()
    return tree.root == root and sorted(nodes) == list(range(nranks))


# -- random grids ------------------------------------------------------------------------
@st.composite
def grids(draw) -> Grid:
    """Pair-link grids with random per-pair latency and bandwidth (asymmetric), some
    routes also crossing one shared backbone link; or a small transit-stub grid."""
    if draw(st.booleans()):
        return transit_stub(draw(st.integers(2, 9)), draw(st.integers(0, 10**6)))
    sizes = draw(st.lists(st.integers(1, 4), min_size=1, max_size=4))
    lan = lan_plogp()
    clusters = tuple(Cluster(f"c{i}", n, lan) for i, n in enumerate(sizes))
    links = {"core": Link("core", PLogP.linear(0.0, 2e6, g0=8e-6).g_fn)}
    routes = {}
    for a, b in itertools.permutations(range(len(sizes)), 2):
        latency = draw(st.floats(1e-4, 0.3))
        bandwidth = draw(st.floats(1e4, 1e8))
        wan = wan_plogp(latency, bandwidth, lan)
        links[f"{a}>{b}"] = Link(f"{a}>{b}", wan.g_fn)
        shared = ("core",) if draw(st.booleans()) else ()
        routes[(a, b)] = Route(wan, (f"{a}>{b}", *shared))
    return Grid("random", clusters, routes, links)


def test_every_name_is_registered_with_a_model():
    names = {b.name for b in list_builders("bcast")}
    assert set(NAMES) <= names
    for name in NAMES:
        assert ("bcast", name) in MODELS
        builder = get_builder("bcast", name)
        assert ("segment_size" in builder.params) == (name.endswith("-segmented") or name == "list")
    assert {b.anytime for b in list_builders("bcast") if b.anytime} == {"sa", "sa-clustered"}


@settings(max_examples=30)
@given(grid=grids(), root_seed=st.integers(0, 10**6), nbytes=st.integers(1, 300_000))
def test_property_every_builder_spans_the_grid_from_the_root(grid, root_seed, nbytes):
    root = root_seed % grid.nranks
    segment = max(1, nbytes // 3)
    for name in NAMES:
        tree = tree_of(name, grid, nbytes, root, **fast(name))
        assert is_spanning(tree, grid.nranks, root), name
        params = {"segment_size": segment} if get_builder("bcast", name).params else {}
        schedule = get_builder("bcast", name).build(grid, nbytes, root, **params, **fast(name))
        validate(schedule)
        assert schedule.algorithm == name and schedule.root == root
        assert schedule_tree(schedule) == Tree(tree.root, dict(tree.children)), name


@settings(max_examples=25)
@given(grid=grids(), root_seed=st.integers(0, 10**6), nbytes=st.integers(1, 2**20))
def test_property_tps_puts_the_bottleneck_nodes_at_the_leaves(grid, root_seed, nbytes):
    root = root_seed % grid.nranks
    costs = edge_costs(grid, nbytes)
    result = tps_schedule(costs, root)
    assert set(result.bottleneck) == set(bottleneck_set(costs, root))
    for v in result.bottleneck:
        assert v != root and not result.tree.children.get(v)
    assert is_spanning(result.tree, grid.nranks, root)


@settings(max_examples=25)
@given(grid=grids(), root_seed=st.integers(0, 10**6), nbytes=st.integers(1, 2**20))
def test_property_heuristic_times_are_the_per_edge_model_without_links(grid, root_seed, nbytes):
    """ECEF's ready-time arithmetic is seed 000's per-edge lam on a per-pair network."""
    root = root_seed % grid.nranks
    bare = without_links(grid)
    for rule in ("fef", "ecef", "look-ahead"):
        growth = grow(edge_costs(grid, nbytes), root, rule)
        assert tree_time(bare, growth.tree, nbytes) == pytest.approx(growth.completion)


@settings(max_examples=25)
@given(grid=grids(), seed=st.integers(0, 10**6), nbytes=st.integers(1, 2**20))
def test_property_annealing_cost_is_the_per_edge_model(grid, seed, nbytes):
    rng = random.Random(seed)
    root = rng.randrange(grid.nranks)
    tree = random_tree(list(range(grid.nranks)), root, rng)
    cost = TreeCost(grid, nbytes)
    start, value = basic_sa(cost, tree, rng, evaluations=1)
    assert start == tree and value == pytest.approx(tree_time(grid, tree, nbytes))


# -- seed 003's two phases, by hand ------------------------------------------------------
# Six nodes A..F (0..5), root A, stated in seed 003's terms: C[i][j] is the completion
# time of a message from i to j, latency + size/bandwidth (sec. 4); a sender is busy for
# the whole transfer (Bhat et al.'s model: S = C), so its ready time grows with each send.
# Every edge not listed costs 1000. Fastest incoming edges: B 10 (from C), C 10 (from
# B), D 20 (from B), E 100 (from A), F 30 (from D); their average is 170/5 = 34, so the
# bottleneck set is {E} (seed 003: "nodes whose completion time is above the average of
# minimum completion time").
#
# ECEF picks the earliest completing edge each time:
#   A->E at 0+100 = 100 (A->B would complete at 150); A is ready at 100.
#   E->F at 100+140 = 240 (A->B: 100+150 = 250).
#   A->B at 250. B->C at 250+10 = 260. B->D at 260+20 = 280.
#   Tree A->(E, B), E->(F), B->(C, D); completion 280: E, slow to reach, relays to F and
#   delays A's send to B.
# TPS, first phase, ECEF without E: A->B at 150, B->C at 160, B->D at 180, D->F at 210.
#   Second phase: E below the node of V-B where it completes earliest: A (ready at 150)
#   +100 = 250, every other node +1000. Tree A->(B, E), B->(C, D), D->(F); completion
#   250 (seed 003's figure 5: "TPS attach node E to node H", a leaf).
A, B, C, D, E, F = range(6)
HAND_EDGES = {(A, E): 100, (A, B): 150, (C, B): 10, (B, C): 10, (B, D): 20, (D, F): 30, (E, F): 140}


def hand_costs() -> EdgeCosts:
    matrix = np.full((6, 6), 1000.0)
    for (i, j), value in HAND_EDGES.items():
        matrix[i, j] = value
    return EdgeCosts(matrix, matrix)


def test_ecef_reproduces_the_hand_worked_example():
    growth = grow(hand_costs(), A, "ecef")
    assert growth.order == [A, E, F, B, C, D]
    assert growth.tree == Tree(A, {A: (E, B), E: (F,), B: (C, D)})
    assert list(growth.arrival) == [0, 250, 260, 280, 100, 240]
    assert growth.completion == 280


def test_tps_reproduces_the_hand_worked_example():
    costs = hand_costs()
    assert bottleneck_set(costs, A) == [E]
    result = tps_schedule(costs, A)
    assert result.tree == Tree(A, {A: (B, E), B: (C, D), D: (F,)})
    assert list(result.arrival) == [0, 150, 160, 180, 250, 210]
    assert result.completion == 250 < grow(costs, A, "ecef").completion


def test_without_bottlenecks_tps_is_ecef():
    grid = get_grid("lan:6")  # every incoming edge alike: nobody is above the average
    costs = edge_costs(grid, 4096)
    assert bottleneck_set(costs, 0) == []
    assert tps_schedule(costs, 0).tree == grow(costs, 0, "ecef").tree


def test_fef_and_look_ahead_by_hand():
    costs = hand_costs()
    assert grow(costs, A, "fef").tree == Tree(A, {A: (E, B), E: (F,), B: (C, D)})
    # look-ahead: LA(B) = 10 makes A->B (150 + 10) beat A->E (100 + 140)
    assert grow(costs, A, "look-ahead").order[:2] == [A, B]


# -- seed 001: annealing -----------------------------------------------------------------
def test_annealing_is_reproducible_and_never_worse_than_its_start():
    grid = teragrid()
    cost = TreeCost(grid, 2**20)
    start = flat_tree(list(range(grid.nranks)))
    start_cost = tree_time(grid, start, 2**20)
    first = basic_sa(cost, start, random.Random(7))
    again = basic_sa(cost, start, random.Random(7))
    assert first == again
    assert first[1] <= start_cost and first[1] == pytest.approx(tree_time(grid, first[0], 2**20))
    tree, value = driver_sa(cost, 0, random.Random(3), evaluations=3000, initial=[start])
    assert value <= start_cost and is_spanning(tree, grid.nranks, 0)
    for name in ("sa", "sa-clustered"):
        one = get_builder("bcast", name).build(grid, 2**20, 8, seed=5, evaluations=2000)
        fresh = teragrid()  # no tree cache shared
        two = get_builder("bcast", name).build(fresh, 2**20, 8, seed=5, evaluations=2000)
        assert one == two
        warm = tree_time(grid, mpich_g2_tree(grid, 8), 2**20)
        assert tree_time(grid, schedule_tree(one), 2**20) <= warm  # warm start: never worse


@settings(max_examples=15)
@given(grid=grids(), seed=st.integers(0, 10**6), nbytes=st.integers(1, 2**20))
def test_property_basic_sa_never_returns_a_worse_tree(grid, seed, nbytes):
    rng = random.Random(seed)
    root = rng.randrange(grid.nranks)
    start = random_tree(list(range(grid.nranks)), root, rng)
    tree, value = basic_sa(TreeCost(grid, nbytes), start, random.Random(seed), evaluations=500)
    assert value <= tree_time(grid, start, nbytes) and is_spanning(tree, grid.nranks, root)


def test_budgets_are_kept_and_checked():
    grid = teragrid()
    cost = TreeCost(grid, 2**20)
    driver_sa(cost, 8, random.Random(0), evaluations=700)
    assert cost.evaluations <= 700 + 1  # the initial tree's evaluation may be the last
    cost = TreeCost(grid, 2**20)
    clustered_sa(cost, 8, random.Random(0), evaluations=1500)
    assert cost.evaluations <= 1500 + 20  # + one evaluation per joined candidate
    with pytest.raises(ParameterError, match="not both"):
        get_builder("bcast", "sa").build(grid, 1024, 0, evaluations=10, time_budget_s=1.0)
    with pytest.raises(ParameterError, match="evaluations"):
        get_builder("bcast", "sa").build(grid, 1024, 0, evaluations=0)


def test_pool_sets_reproduce_seed_001_table_1():
    h1, h2, h3, h4, h5, h6, h7, h8 = range(8)
    rows = [
        [100, 80, 80, 60, 60, 20, 10, 10],
        [80, 100, 80, 60, 60, 20, 10, 10],
        [80, 80, 100, 60, 60, 20, 10, 10],
        [60, 60, 60, 100, 80, 40, 50, 50],
        [60, 60, 60, 80, 100, 40, 50, 50],
        [20, 20, 20, 40, 40, 100, 30, 30],
        [10, 10, 10, 50, 50, 30, 100, 80],
        [10, 10, 10, 50, 50, 30, 80, 100],
    ]
    nodes = list(range(8))
    assert form_pool_sets(rows, nodes, 20) == [[h1, h2, h3, h4, h5, h6], [h7, h8]]
    assert form_pool_sets(rows, nodes, 70) == [[h1, h2, h3], [h4, h5], [h6], [h7, h8]]


def test_clustered_sa_pools_the_teragrid_by_site():
    grid = teragrid()
    tree, value = clustered_sa(TreeCost(grid, 2**20), 8, random.Random(1), evaluations=4000)
    assert is_spanning(tree, grid.nranks, 8) and value == pytest.approx(
        tree_time(grid, tree, 2**20)
    )
    # one wide-area edge into each other site: the pools are the sites (16 nodes each)
    site = {r: grid.clusters[grid.cluster_of[r]].site for r in range(grid.nranks)}
    crossings = [(v, c) for v, kids in tree.children.items() for c in kids if site[v] != site[c]]
    assert len(crossings) == 3


# -- seed 004 and the baselines ----------------------------------------------------------
def _crossings(grid: Grid, tree: Tree) -> tuple[int, int]:
    """Wide-area edges of a tree, and paths from the root crossing more than one."""
    parents, hops = tree.parents(), {tree.root: 0}
    for v in tree.nodes()[1:]:
        hops[v] = hops[parents[v]] + (grid.cluster_of[v] != grid.cluster_of[parents[v]])
    wan = sum(grid.cluster_of[v] != grid.cluster_of[p] for v, p in parents.items())
    return wan, sum(h > 1 for h in hops.values())


def test_phoenix_trees_are_the_protocol_cores():
    """One implementation: the builders' trees are the core's, for the requested root,
    its children most descendants first (the core's broadcast order)."""
    from gridcoll.phoenix.static import stable_trees

    grid = get_grid("das2:4")
    for root in (0, 9):
        core = stable_trees(grid, seed=5, roots=frozenset({root}), remote_probes=True)
        lat = get_builder("bcast", "phoenix-latency").build(grid, 1, root, seed=5)
        bw = get_builder("bcast", "phoenix-bandwidth-segmented").build(
            grid, 4096, root, segment_size=1024, seed=5
        )
        for schedule, parents in ((lat, core.latency[root]), (bw, core.bandwidth[root])):
            tree = schedule_tree(schedule)
            assert tree.parents() == parents
            for kids in tree.children.values():
                sizes = [len(Tree(c, tree.children).nodes()) for c in kids]
                assert sizes == sorted(sizes, reverse=True)


def test_phoenix_latency_tree_has_property_one_with_ten_extra_probes():
    """Seed 004 sec. IV-B, Property I, with the paper's 10 extra probes on das2:34 (136
    ranks, 4 clusters), for three seeds: no path from the root crosses two wide-area
    edges (no chained wide-area latencies) and few wide-area edges (3 would do; the
    noise of 10 probes leaves a LAN a second one now and then); the bandwidth tree
    also uses few wide-area edges."""
    grid = get_grid("das2:34")
    few = 2 * (grid.nclusters - 1)
    for seed in (0, 1, 2):
        lat, bw = latency_tree(grid, 0, seed=seed), bandwidth_tree(grid, 0, seed=seed)
        assert is_spanning(lat, grid.nranks, 0) and is_spanning(bw, grid.nranks, 0)
        wan, chained = _crossings(grid, lat)
        assert chained == 0 and grid.nclusters - 1 <= wan <= few, (seed, wan, chained)
        assert _crossings(grid, bw)[0] <= few
    assert latency_tree(grid, 0, seed=seed) is lat  # one run, memoised per grid
    with pytest.raises(ParameterError, match="extra probes"):
        latency_tree(grid, 0, extra=-1)


def test_phoenix_trees_are_seeded():
    grid = magpie(3, 4)
    tree = latency_tree(grid, 2, seed=7)
    assert latency_tree(magpie(3, 4), 2, seed=7) == tree  # a fresh grid: the same run
    assert _crossings(grid, tree) == (2, 0)
    assert any(latency_tree(grid, 2, seed=s) != tree for s in range(8, 12))


def test_list_order_maximises_the_narrowest_hop():
    grid = get_grid("das2:2")
    order = list_order(grid, 0)
    clusters = list(dict.fromkeys(grid.cluster_of[r] for r in order))

    def narrowest(path):
        return min(grid.wan(a, b).bandwidth for a, b in itertools.pairwise(path))

    best = max(narrowest([0, *p]) for p in itertools.permutations([1, 2, 3]))
    assert clusters[0] == 0 and narrowest(clusters) == best
    assert order[:2] == [0, 1]  # the root's cluster first, root first


def test_mpich_g2_tree_is_seed_001_figure_7():
    grid = teragrid()  # C1..C8, two per site: SDSC, ANL, NCSA, PSC; root in C2
    tree = mpich_g2_tree(grid, 8)
    assert tree.children[8][:4] == (16, 32, 48, 0)  # ANL, NCSA, PSC; then C1 of SDSC
    for rep, partner in ((16, 24), (32, 40), (48, 56)):  # C3 -> C4, C5 -> C6, C7 -> C8
        assert tree.children[rep][0] == partner


def test_hlot_relays_only_when_the_detour_is_faster():
    lan = lan_plogp()
    clusters = tuple(Cluster(f"c{i}", 2, lan) for i in range(3))
    latency = {(0, 1): 0.01, (1, 0): 0.01, (1, 2): 0.01, (2, 1): 0.01, (0, 2): 0.1, (2, 0): 0.1}
    routes = {key: Route(wan_plogp(lat, 1e6, lan), ()) for key, lat in latency.items()}
    grid = Grid("detour", clusters, routes, {})
    assert hlot_tree(grid, 0).children[0] == (2, 1)  # c1 first, then the LAN
    assert hlot_tree(grid, 0).children[2][0] == 4  # c2 through c1: 20 ms < 100 ms
    assert hlot_tree(teragrid(), 8).children[8][:7] == (0, 16, 24, 32, 40, 48, 56)  # flat


def test_mateescu_overloads_the_wide_area_links():
    """Seed 001, sec. 3 (figure 9): shortest paths send many messages from the root's
    cluster over the same WAN links; its per-pair belief is far below the simulation."""
    grid, nbytes = teragrid(), 2**15  # eager: the root's sends overlap on the links
    schedule = get_builder("bcast", "mateescu").build(grid, nbytes, 8)
    tree = schedule_tree(schedule)
    believed = tree_time(without_links(grid), tree, nbytes)
    simulated = simulate(schedule, grid).total_s
    assert len(tree.children[8]) == 63 and simulated > 1.5 * believed
    g2 = get_builder("bcast", "mpich-g2").build(grid, nbytes, 8)
    assert simulate(g2, grid).total_s < simulated / 3
    ecef = get_builder("bcast", "ecef").build(grid, 2**20, 8)  # one WAN link, many copies
    believed = tree_time(without_links(grid), schedule_tree(ecef), 2**20)
    assert simulate(ecef, grid).total_s > 3 * believed


# -- planning budget ---------------------------------------------------------------------
def test_auto_skips_annealing_without_a_budget_and_runs_it_with_one():
    grid = magpie(3, 3)
    plain = plan(grid, Call("bcast", 1024))
    skipped = dict(plain.skipped)
    assert set(skipped) >= {"sa", "sa-segmented", "sa-clustered", "sa-clustered-segmented"}
    assert "budget" in skipped["sa"]
    budgeted = plan(grid, Call("bcast", 1024), PlanOptions(budget_s=0.5))
    sa = [c for c in budgeted.candidates if c.algorithm.startswith("sa")]
    assert len(sa) == 4 and all(c.params["evaluations"] >= 1000 for c in sa)
    again = plan(
        magpie(3, 3), Call("bcast", 1024), PlanOptions(budget_s=0.5)
    )  # deterministic: same choice
    assert [(c.algorithm, c.params, c.predicted_s) for c in again.candidates] == [
        (c.algorithm, c.params, c.predicted_s) for c in budgeted.candidates
    ]
    best = min(budgeted.candidates, key=lambda c: c.predicted_s)
    assert budgeted.predicted_s == best.predicted_s <= plain.predicted_s
    validate(budgeted.build(grid))
    big = plan(
        grid, Call("bcast", 2**16), PlanOptions(budget_s=0.5)
    )  # the multi-tree wins: sa not searched
    assert {"sa", "sa-clustered-segmented"} <= set(dict(big.pruned))
    tiny = plan(grid, Call("bcast", 1024), PlanOptions(budget_s=1e-3))
    assert "evaluations" in dict(tiny.skipped)["sa"]
    with pytest.raises(ParameterError, match="budget_s"):
        plan(grid, Call("bcast", 1024), PlanOptions(budget_s=-1.0))


def test_named_annealing_gets_the_whole_budget():
    grid = magpie(2, 2)
    named = plan(grid, Call("bcast", 4096), PlanOptions(algo="sa", budget_s=0.2))
    auto = plan(grid, Call("bcast", 4096), PlanOptions(budget_s=0.2))
    sa_auto = next(c for c in auto.candidates if c.algorithm == "sa")
    assert abs(named.params["evaluations"] - 4 * sa_auto.params["evaluations"]) <= 4
    with pytest.raises(Unfeasible, match="evaluations"):
        plan(grid, Call("bcast", 4096), PlanOptions(algo="sa", budget_s=1e-4))


def test_budget_skips_expensive_builders_on_large_grids():
    grid = magpie(4, 16)  # 64 ranks: a segment-size search costs about 15 ms nominal
    result = plan(grid, Call("bcast", 2**16), PlanOptions(budget_s=0.01))
    reasons = dict(result.skipped)
    assert "look-ahead-segmented" in reasons and "needs about" in reasons["look-ahead-segmented"]
    assert result.candidates  # the builders without a declared cost are still there


def test_auto_ranks_its_best_predictions_on_the_simulator():
    """The models only shortlist: of the candidates within 25% of the best prediction,
    the fastest simulated goes first (here the predictions are made up: flat first)."""
    from gridcoll.tune.select import Candidate, _verified

    grid = get_grid("lan:16")
    fake = [
        Candidate("flat", {}, 2**20, 1.0),
        Candidate("binomial", {}, 2**20, 1.1),
        Candidate("chain", {}, 2**20, 2.0),  # beyond 1.25x the best: not simulated
    ]
    ranked = _verified(grid, Call("bcast", 2**20), fake)
    assert [c.algorithm for c in ranked] == ["binomial", "flat", "chain"]
    for c in ranked[:2]:
        schedule = get_builder("bcast", c.algorithm).build(grid, 2**20, 0)
        assert c.simulated_s == simulate(schedule, grid).total_s
    assert ranked[2].simulated_s is None
    chosen = plan(grid, Call("bcast", 2**20))  # the real thing: the choice was simulated
    assert chosen.candidates[0].simulated_s is not None
    assert "checked on the simulator" in chosen.explain()


def test_a_candidate_too_large_to_simulate_still_wins_on_a_better_prediction():
    """Each candidate ranks on its best estimate: the simulated time where the check ran,
    the prediction elsewhere. A 1-byte-segment chain (15 * 2**20 messages: over the
    check's limit) predicted below every simulated time goes first (transit-stub:60,4 at
    1 KiB once chose a simulated multitree 36% slower than an unsimulable FEF tree)."""
    from gridcoll.tune.select import Candidate, _verified

    grid = get_grid("lan:16")
    fake = [
        Candidate("flat", {}, 2**20, 0.010),
        Candidate("binomial", {}, 2**20, 0.011),
        Candidate("chain", {"segment_size": 1}, 1, 0.012),  # within 1.25x: too large
    ]
    ranked = _verified(grid, Call("bcast", 2**20), fake)
    simulated = [c.simulated_s for c in ranked if c.simulated_s is not None]
    assert len(simulated) == 2 and min(simulated) > 0.012  # flat and binomial: > 80 ms
    assert ranked[0].algorithm == "chain" and ranked[0].simulated_s is None
    chosen = plan(get_grid("transit-stub:60,4"), Call("bcast", 1024), PlanOptions(budget_s=1.0))
    assert chosen.algorithm == "fef-segmented" and chosen.candidates[0].simulated_s is None
    assert "its prediction beats the simulated times" in chosen.explain()
    assert [c.algorithm for c in ranked[1:]] == sorted(
        ["flat", "binomial"], key=lambda a: next(c.simulated_s for c in ranked if c.algorithm == a)
    )


def test_trees_table_covers_every_family():
    assert set(TREES) == set(FAMILIES) | {"list"}


# -- gridcoll compare --------------------------------------------------------------------
def test_compare_json_fields(capsys, tmp_path):
    plot = tmp_path / "cmp.png"
    argv = ["compare", "--grid", "magpie:3,2", "--sizes", "1KB,64KB", "--algos", "ecef,tps,sa"]
    code = main([*argv, "--budget", "0.2", "--json", "--plot", str(plot)])
    out, err = capsys.readouterr()
    assert code == 0, err
    data = json.loads(out)
    assert data["sizes"] == [1024, 65536] and plot.exists()
    rows = data["results"]
    assert {(r["algorithm"], r["size"]) for r in rows} == {
        (a, s) for a in ("ecef", "tps", "sa", "auto") for s in (1024, 65536)
    }
    for row in rows:
        assert {"algorithm", "size", "predicted_s", "simulated_s", "plan_time_s"} <= set(row)
        assert row["simulated_s"] > 0 and row["plan_time_s"] >= 0 and row["ratio_to_best"] >= 1
    for size in (1024, 65536):
        assert min(r["ratio_to_best"] for r in rows if r["size"] == size) == 1.0
    code = main([*argv[:5], "--algos", "nope"])
    assert code == 2 and "unknown bcast algorithm 'nope'" in capsys.readouterr().err


def test_compare_table_runs(capsys):
    code = main(["compare", "--grid", "das2:2", "--sizes", "4KB", "--algos", "list,mpich-g2"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "auto" in out and "no contention" in out and "/ best" in out


def test_plan_cli_takes_a_planning_budget(capsys):
    """``gridcoll plan --budget S``: auto then weighs the annealing builders."""
    argv = ["plan", "--grid", "magpie:3,3", "--size", "1KB", "--json"]
    assert main([*argv, "--budget", "none"]) == 0
    plain = {c["algorithm"] for c in json.loads(capsys.readouterr().out)["candidates"]}
    assert main([*argv, "--budget", "0.5"]) == 0
    budgeted = {c["algorithm"] for c in json.loads(capsys.readouterr().out)["candidates"]}
    assert "sa" not in plain and {"sa", "sa-clustered-segmented"} <= budgeted
    assert main(argv) == 0  # the default budget (tune.DEFAULT_BUDGET_S) lets them in
    default = {c["algorithm"] for c in json.loads(capsys.readouterr().out)["candidates"]}
    assert {"sa", "sa-clustered-segmented"} <= default
    assert main([*argv, "--budget", "-1"]) == 2
    assert "--budget" in capsys.readouterr().err


def test_schedule_tree_rejects_non_tree_schedules():
    grid = magpie(2, 2)
    assert schedule_tree(get_builder("bcast", "flat-rendezvous").build(grid, 64)) is None
    assert schedule_tree(get_builder("bcast", "binomial").build(grid, 64)) is not None
    assert math.isfinite(
        tree_time(grid, schedule_tree(get_builder("bcast", "binomial").build(grid, 64)), 64)
    )


# -- one declaration per family, two builders --------------------------------------------
def test_every_family_is_declared_once_and_registered_as_both_builders():
    from gridcoll.algorithms.registry import TREE_FAMILIES

    assert [f.name for f in TREE_FAMILIES] == [
        "fef", "ecef", "look-ahead", "hlot", "tps", "mateescu",
        "phoenix-latency", "phoenix-bandwidth", "mpich-g2", "sa", "sa-clustered",
    ]  # fmt: skip
    assert set(FAMILIES) == {f.name for f in TREE_FAMILIES}
    for family in TREE_FAMILIES:
        plain = get_builder("bcast", family.name)
        segmented = get_builder("bcast", f"{family.name}-segmented")
        assert plain.build is family.build and segmented.build is family.build_segmented
        assert plain.summary == family.summary and segmented.params == ("segment_size",)
        assert TREES[family.name] is family.tree
        fn = family.name.replace("-", "_")
        module = __import__(plain.build.__module__, fromlist=[fn])
        assert getattr(module, fn) is plain.build, fn  # callable from Python as before
        assert getattr(module, f"{fn}_segmented") is segmented.build
        assert plain.build.__name__ == fn and segmented.build.__name__ == f"{fn}_segmented"


def test_generated_builders_keep_the_algorithm_docstring_citation_and_complexity():
    from gridcoll.algorithms.registry import TREE_FAMILIES

    for family in TREE_FAMILIES:
        plain, segmented = family.build.__doc__, family.build_segmented.__doc__
        assert plain.splitlines()[0].endswith(", whole message.")
        assert segmented.splitlines()[0].endswith(", segments forwarded as they arrive.")
        for doc in (plain, segmented):
            assert "\nReferences\n----------\n" in doc and "\nNotes\n-----\n" in doc
            assert "O(" in doc.split("\nNotes\n-----\n")[1]  # the build complexity
        refs = plain.split("\nReferences\n----------\n")[1].split("\n\n")[0]
        assert refs in segmented  # the same citation
        assert "segment_size : int" in segmented and "(k-1) gamma(m) + lam(m)" in segmented
        assert "Examples" not in segmented


def test_generated_builders_check_their_keywords_and_record_their_parameters():
    from gridcoll.algorithms.heuristics import fef, fef_segmented
    from gridcoll.algorithms.phoenix import phoenix_latency_segmented

    grid = magpie(2, 2)
    with pytest.raises(TypeError, match="segment_size"):
        fef(grid, 1024, segment_size=512)
    with pytest.raises(TypeError, match="segment_size"):
        fef_segmented(grid, 1024)
    assert fef(grid, 1024).params == {}
    assert fef_segmented(grid, 1024, 1, segment_size=256).params == {"segment_size": 256}
    assert phoenix_latency_segmented(grid, 1024, segment_size=512, seed=3).params == {
        "seed": 3,
        "segment_size": 512,
    }
    with pytest.raises(ParameterError, match="segment size"):
        fef_segmented(grid, 1024, segment_size=0)


@settings(max_examples=15)
@given(grid=grids(), root_seed=st.integers(0, 10**6), nbytes=st.integers(1, 100_000))
def test_property_one_segment_is_the_whole_message(grid, root_seed, nbytes):
    """``X-segmented`` with ``m >= M`` sends exactly what ``X`` sends."""
    from gridcoll.algorithms.registry import TREE_FAMILIES

    root = root_seed % grid.nranks
    for family in TREE_FAMILIES:
        kw = fast(family.name)
        plain = family.build(grid, nbytes, root, **kw)
        one = family.build_segmented(grid, nbytes, root, segment_size=nbytes, **kw)
        assert one.programs == plain.programs and one.segments == plain.segments
