"""The models: seed 002 Table 1, seed 000 sec. 3.1.1, the per-edge tree model, registry."""

from __future__ import annotations

import itertools
import random
import sys
import types

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gridcoll.algorithms import get_builder, list_builders
from gridcoll.algorithms.magpie import coordinator_order
from gridcoll.algorithms.trees import Tree, chain_tree, dary_tree, flat_tree
from gridcoll.errors import ParameterError, UnknownAlgorithm
from gridcoll.models import (
    MODELS,
    dary_segmented_time,
    flat_gamma,
    flat_lam,
    flat_time,
    nsegments,
    predict,
    segmented_time,
    single_layer,
    tree_gamma_lambda,
    tree_model,
    tree_time,
)
from gridcoll.models.registry import SEGMENTED_TREE, SINGLE_TREE, _merge, optimistic_s
from gridcoll.network import Cluster, Grid, Link, PLogP, Route, get_grid, magpie
from gridcoll.network.presets import lan_plogp
from gridcoll.simulate import simulate
from gridcoll.tune import Call, plan
from gridcoll.tune.search import heuristic_search

US = 1e-6

# The hand-computed network: L = 10 us, g(m) = 2 us + m * 1 us/B (1 MB/s), os(m) = 0,
# or(m) = min(1 us, g(m)) = 1 us. So g(1) = 3 us, g(25) = 27 us, g(30) = 32 us,
# g(100) = 102 us. P = 5 ranks, M = 100 bytes, m = 25 bytes: k = ceil(100/25) = 4.
NET = PLogP.linear(10 * US, 1e6, g0=2 * US, or0=1 * US)
NET_NO_OR = PLogP.linear(10 * US, 1e6, g0=2 * US)  # the same with or(m) = 0
P, M, m = 5, 100, 25


def one_cluster(net: PLogP = NET, nranks: int = P) -> Grid:
    return Grid("hand", (Cluster("c", nranks, net),))


# Seed 002, Table 1, row by row, in microseconds:
TABLE_1 = [
    # flat: (P-1) g(M) + L = 4*102 + 10
    ("flat", {}, 418),
    # flat-rendezvous: (P-1) g(M) + 2 g(1) + 3 L = 408 + 6 + 30
    ("flat-rendezvous", {}, 444),
    # flat-segmented: (P-1) (g(m) k) + L = 4*(27*4) + 10
    ("flat-segmented", {"segment_size": 25}, 442),
    # chain: (P-1) (g(M) + L) = 4*(102 + 10)
    ("chain", {}, 448),
    # chain-rendezvous: (P-1) (g(M) + 2 g(1) + 3 L) = 4*(102 + 6 + 30)
    ("chain-rendezvous", {}, 552),
    # chain-segmented: (P-1) (g(m) + L) + g(m) (k-1) = 4*(27 + 10) + 27*3 = 148 + 81
    ("chain-segmented", {"segment_size": 25}, 229),
    # binary: ceil(log2 5) (2 g(M) + L) = 3*(204 + 10)
    ("binary", {}, 642),
    # binomial: floor(log2 5) g(M) + ceil(log2 5) L = 2*102 + 3*10
    ("binomial", {}, 234),
    # binomial-rendezvous: floor(log2 P) g(M) + ceil(log2 P) (2 g(1) + 3 L) = 204 + 3*36
    ("binomial-rendezvous", {}, 312),
    # binomial-segmented: floor(log2 P) g(m) k + ceil(log2 P) L = 2*27*4 + 3*10
    ("binomial-segmented", {"segment_size": 25}, 246),
    # flat-segmented with m = 30: k = ceil(100/30) = 4, g(30) = 32: 4*(32*4) + 10
    ("flat-segmented", {"segment_size": 30}, 522),
    # seed 000, d = 2: h = 2 (1+2+4 >= 5); gamma <= max(g, or + d s) = max(27, 1 + 54) = 55;
    # lam <= h ((d-1) s + r) = 2*(27 + 10 + 27) = 128; T = (k-1) gamma + lam = 3*55 + 128
    ("dary-segmented", {"segment_size": 25, "degree": 2}, 293),
    # d = 4 = P-1: h = 1; gamma = max(27, 1 + 4*27) = 109; lam = 3*27 + 37 = 118;
    # T = 3*109 + 118 = 445: the bound exceeds the exact flat tree (442) by (k-1) or(m)
    ("dary-segmented", {"segment_size": 25, "degree": 4}, 445),
    # d = 1 (chain): h = 4; gamma = 1 + 27 = 28; lam = 4*(0 + 37) = 148; T = 3*28 + 148
    ("dary-segmented", {"segment_size": 25, "degree": 1}, 232),
]


def paper_formula(name: str, params: dict) -> float:
    """The closed form of ``name`` from :mod:`gridcoll.models.single_layer`."""
    formula = getattr(single_layer, name.replace("-", "_") + "_time")
    extra = [params[key] for key in ("segment_size", "degree") if key in params]
    return formula(NET, P, M, *extra)


@pytest.mark.parametrize(("name", "params", "expected_us"), TABLE_1)
def test_paper_formulas_equal_hand_computed_values(name, params, expected_us):
    assert paper_formula(name, params) == pytest.approx(expected_us * US)


@pytest.mark.parametrize(
    ("name", "params"),
    [
        ("flat", {}),
        ("chain", {}),
        ("flat-segmented", {"segment_size": 25}),
        ("flat-segmented", {"segment_size": 30}),
        ("chain-segmented", {"segment_size": 25}),
    ],
)
def test_registered_models_equal_the_formulas_where_those_are_exact(name, params):
    # the registered model evaluates seed 000's gamma/lambda on the builder's own tree;
    # for flat trees and chains (or + os <= g here) that is exactly Table 1
    registered = predict(one_cluster(), "bcast", name, M, **params)
    assert registered == pytest.approx(paper_formula(name, params))


def test_registered_models_are_no_worse_than_the_bounds():
    # elsewhere Table 1 and seed 000's d/h forms are upper bounds or estimates of the
    # pipelined tree, which the per-edge evaluation of the same tree never exceeds
    for name, params, _ in TABLE_1:
        if name in ("binomial-segmented", "binomial", "binomial-rendezvous"):
            continue  # Table 1's binomial rows are estimates, not bounds (see docstring)
        registered = predict(one_cluster(), "bcast", name, M, **params)
        assert registered <= paper_formula(name, params) * (1 + 1e-9), name


def test_flat_tree_gamma_lambda_of_seed_000():
    # gamma = max(g(m), (P-1) s(m)) = max(27, 108); lam = (P-2) s(m) + r(m) = 81 + 37
    assert flat_gamma(NET, P, m) == pytest.approx(108 * US)
    assert flat_lam(NET, P, m) == pytest.approx(118 * US)
    # T = (k-1) gamma + lam = 3*108 + 118 = 442 = Table 1's segmented flat tree
    assert segmented_time(flat_gamma(NET, P, m), flat_lam(NET, P, m), 4) == pytest.approx(442 * US)


def test_nsegments_rounds_up():
    assert [nsegments(100, s) for s in (25, 30, 100, 101, 1)] == [4, 4, 1, 1, 100]


def test_one_rank_costs_nothing():
    grid = one_cluster(nranks=1)
    for (op, name), model in MODELS.items():
        if op == "bcast" and name in SINGLE_LAYER:
            params = {"segment_size": 10, "degree": 1}
            kwargs = {k: v for k, v in params.items() if k in SINGLE_LAYER[name]}
            assert model(grid, 100, **kwargs) == 0.0


SINGLE_LAYER = {
    "flat": (),
    "flat-rendezvous": (),
    "flat-segmented": ("segment_size",),
    "chain": (),
    "chain-rendezvous": (),
    "chain-segmented": ("segment_size",),
    "binary": (),
    "binomial": (),
    "binomial-rendezvous": (),
    "binomial-segmented": ("segment_size",),
    "dary-segmented": ("segment_size", "degree"),
}


# -- the per-edge tree model ---------------------------------------------------------------
def test_tree_model_equals_flat_tree_formula():
    grid = one_cluster()
    tree = flat_tree(list(range(P)))
    # gamma: root sends P-1 = 4 times s = g(25) = 27; lam = 3*27 + (10 + 27)
    assert tree_gamma_lambda(grid, tree, m) == pytest.approx((108 * US, 118 * US))
    assert tree_time(grid, tree, M, m) == pytest.approx(442 * US)  # Table 1, seg. flat tree
    assert tree_time(grid, tree, M) == pytest.approx(418 * US)  # Table 1, flat tree


def test_tree_model_equals_chain_formulas():
    tree = chain_tree(list(range(P)))
    # or = 0: gamma = g(m), lam = (P-1) (L + g(m)): Table 1's pipeline, 229 us
    assert tree_time(one_cluster(NET_NO_OR), tree, M, m) == pytest.approx(229 * US)
    # or = 1 us, os = 0: the CPU (or + os = 1 us) is not the bottleneck, the NIC
    # (s = g = 27 us) is: still Table 1's 229 us, below seed 000's d = 1 bound of
    # or + s = 28 us per segment (3*28 + 148 = 232 us)
    assert tree_time(one_cluster(), tree, M, m) == pytest.approx(229 * US)
    assert dary_segmented_time(NET, P, M, m, 1) == pytest.approx(232 * US)
    # when the CPU drives the NIC (os = g), the refinement is seed 000's bound exactly
    host_bound = PLogP.linear(10 * US, 1e6, g0=2 * US, os0=2 * US, or0=1 * US, copy_bandwidth=1e6)
    assert tree_time(one_cluster(host_bound), tree, M, m) == pytest.approx(
        dary_segmented_time(host_bound, P, M, m, 1)
    )
    assert tree_time(one_cluster(), tree, M) == pytest.approx(448 * US)  # Table 1, chain


def test_tree_model_within_seed_000_bounds_on_complete_trees():
    grid = one_cluster(nranks=13)  # 1 + 3 + 9: the complete ternary tree of height 2
    tree = dary_tree(list(range(13)), 3)
    assert tree_time(grid, tree, M, m) <= dary_segmented_time(NET, 13, M, m, 3) + 1e-12


# A WAN of L_w = 1 ms, g_w(m) = m * 10 us (100 kB/s), os_w = or_w = 0, between cluster "a"
# (the root alone) and cluster "b" of `nb` ranks; one private link per direction.
WAN = PLogP.linear(1e-3, 1e5)


def two_clusters(nb: int) -> Grid:
    clusters = (Cluster("a", 1, NET), Cluster("b", nb, NET))
    routes = {(0, 1): Route(WAN, ("a->b",)), (1, 0): Route(WAN, ("b->a",))}
    links = {name: Link(name, WAN.g_fn) for name in ("a->b", "b->a")}
    return Grid("two", clusters, routes, links)


def test_multi_cluster_models_use_the_per_edge_parameters():
    grid = two_clusters(1)
    # flat, M = 100: lam = r_w = L_w + g_w(100) = 1000 + 1000 us
    assert predict(grid, "bcast", "flat", M) == pytest.approx(2000 * US)
    # rendezvous adds 2 g_w(1) + 2 L_w = 20 + 2000 us on the path
    assert predict(grid, "bcast", "flat-rendezvous", M) == pytest.approx(4020 * US)
    # segmented, m = 25, k = 4: gamma = max(g_w(25) = 250, s_w = max(g_l(25), os_w) = 27)
    # = 250; lam = 1000 + 250; T = 3*250 + 1250
    assert predict(grid, "bcast", "flat-segmented", M, segment_size=25) == pytest.approx(2000 * US)


def test_shared_link_serialises_copies():
    grid = two_clusters(3)
    tree = flat_tree([0, 1, 2, 3])  # three copies over the one link a->b
    # k = 1, m = 100: sends start at 0, 102, 204 us (s = g_l(100)); the link is busy
    # 1000 us per copy, so they leave at 0, 1000, 2000 and the last arrives at 4000 us
    gamma, lam = tree_gamma_lambda(grid, tree, 100)
    assert lam == pytest.approx(4000 * US)
    assert gamma == pytest.approx(3000 * US)  # the link's total occupancy
    # m = 50, k = 2: departures 0, 500, 1000 -> lam = 1000 + 1000 + 500 = 2500 us;
    # gamma = 3 * g_w(50) = 1500 us; T = 1500 + 2500
    assert tree_time(grid, tree, 100, 50) == pytest.approx(4000 * US)


def test_magpie_headline_numbers_of_seed_000():
    # sec. 3.1.3: 1 MB to 8 clusters of 1 CPU takes 7425 ms unsegmented and 1079 ms
    # segmented (measured); the models should be within a few percent.
    grid = magpie(8, 1)
    flat = predict(grid, "bcast", "flat", 2**20)
    segmented = predict(grid, "bcast", "dary-segmented", 2**20, segment_size=8192, degree=7)
    assert flat == pytest.approx(7.425, rel=0.03)
    assert segmented == pytest.approx(1.079, rel=0.03)


# -- the registry and argument checks ------------------------------------------------------
def test_every_single_layer_builder_has_a_model():
    names = {b.name for b in list_builders("bcast")}
    assert set(SINGLE_LAYER) <= names
    for name in SINGLE_LAYER:
        assert ("bcast", name) in MODELS


def test_predict_accepts_preset_names():
    expected = flat_time(lan_plogp(), 4, 1000)  # 3 g(1000) + L on the MagPIe LAN
    assert predict("lan:4", "bcast", "flat", 1000) == pytest.approx(expected)


def test_unknown_model_raises():
    with pytest.raises(UnknownAlgorithm, match="'nope'"):
        predict(one_cluster(), "bcast", "nope", 100)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"nbytes": 0}, "positive"),
        ({"nbytes": -8}, "positive"),
        ({"nbytes": True}, "positive"),
        ({"root": 5}, "root 5 is out of range"),
        ({"root": -1}, "root -1"),
        ({"segment_size": 0}, "segment size"),
        ({"segment_size": -4}, "segment size"),
        ({"segment_size": 3, "itemsize": 2}, "2-byte datatype"),
        ({"nbytes": 101, "itemsize": 2}, "whole number"),
        ({"itemsize": 0}, "itemsize"),
        ({"degree": 0}, "degree"),
    ],
)
def test_models_reject_what_builders_reject(kwargs, match):
    call = {"nbytes": 100, "root": 0, "segment_size": 20, "degree": 2, "itemsize": 1}
    call.update(kwargs)
    with pytest.raises(ParameterError, match=match):
        predict(one_cluster(), "bcast", "dary-segmented", **call)


def test_registry_merges_family_dicts(monkeypatch, tmp_path):
    fake = types.ModuleType("fake_family")
    fake.MODELS = {("bcast", "fake"): lambda grid, nbytes, root=0, *, itemsize=1: 1.0}
    monkeypatch.setitem(sys.modules, "fake_family", fake)
    merged = _merge(("gridcoll.models.single_layer", "fake_family", "gridcoll.models.unwritten"))
    assert ("bcast", "fake") in merged and ("bcast", "flat") in merged  # unwritten: left out
    with pytest.raises(RuntimeError, match="defined twice"):
        _merge(("gridcoll.models.single_layer", "gridcoll.models.single_layer"))
    (tmp_path / "broken_family.py").write_text("import no_such_module_for_gridcoll\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ModuleNotFoundError, match="no_such_module_for_gridcoll"):
        _merge(("broken_family",))  # a family whose own imports fail is not hidden


# -- the fast paths of the per-edge model, the quotient, the lower bound ----------------
def _random_tree(ranks: list[int], rng) -> Tree:
    """A random tree over ``ranks`` (root first), children in random send order."""
    children: dict[int, list[int]] = {}
    for i, v in enumerate(ranks[1:], start=1):
        children.setdefault(ranks[rng.randrange(i)], []).append(v)
    for kids in children.values():
        rng.shuffle(kids)
    return Tree(ranks[0], {v: tuple(k) for v, k in children.items()})


@st.composite
def link_grids(draw) -> Grid:
    """Uneven grids whose routes cross pair links and, some, one shared core link."""
    sizes = draw(st.lists(st.integers(1, 5), min_size=1, max_size=4))
    lans = [PLogP.linear(draw(st.floats(1e-6, 1e-4)), draw(st.floats(1e7, 1e9))) for _ in sizes]
    clusters = tuple(Cluster(f"c{i}", n, lans[i]) for i, n in enumerate(sizes))
    links = {"core": Link("core", PLogP.linear(0.0, draw(st.floats(1e5, 1e8))).g_fn)}
    routes = {}
    linked = draw(st.booleans())
    for a, b in itertools.permutations(range(len(sizes)), 2):
        wan = PLogP.linear(draw(st.floats(1e-4, 0.1)), draw(st.floats(1e4, 1e8)), g0=8e-6)
        links[f"{a}>{b}"] = Link(f"{a}>{b}", wan.g_fn)
        shared = ("core",) if draw(st.booleans()) else ()
        routes[(a, b)] = Route(wan, (f"{a}>{b}", *shared) if linked else ())
    return Grid("random", clusters, routes, links if linked else {})


@settings(max_examples=60, deadline=None)
@given(
    grid=link_grids(),
    seed=st.integers(0, 10**6),
    m=st.integers(1, 2**20),
    rendezvous=st.booleans(),
)
def test_property_compiled_tree_model_equals_the_edge_by_edge_model(grid, seed, m, rendezvous):
    """The fast paths (numpy or plain Python without contended links, the send-ordered
    loop with them) give the reference's gamma and lam to 1e-12."""
    rng = random.Random(seed)
    ranks = list(range(grid.nranks))
    rng.shuffle(ranks)
    tree = _random_tree(ranks, rng)
    want = tree_model._loop_gamma_lambda(grid, tree, m, rendezvous)
    compiled = tree_model._compile(grid, tree)
    paths = [tree_model._linked_gamma_lambda]
    if not compiled.contended:
        paths += [tree_model._vector_gamma_lambda, tree_model._small_gamma_lambda]
    for fast in paths:
        got = fast(grid, compiled, m, rendezvous)
        assert got == pytest.approx(want, rel=1e-12, abs=0.0), fast.__name__
    assert tree_gamma_lambda(grid, tree, m, rendezvous=rendezvous) == pytest.approx(
        want, rel=1e-12, abs=0.0
    )


def test_shared_links_are_taken_in_the_order_of_the_sends():
    """A send never waits for a send that starts later (the phoenix-latency defect).

    Rank 0 (cluster A) sends first to rank 1 (cluster A, 10 s away on a slow LAN), then
    to rank 2 (cluster B). Rank 1 reaches rank 3 (cluster B) over the same link A->B
    only at 10 s; rank 2's copy starts at once. Breadth first, rank 1's send was booked
    first and rank 2's had to wait for it (lam 21.5 s instead of 10.5 s)."""
    slow_lan = PLogP.linear(10.0, 1e9)
    wan = PLogP.linear(0.5, 1.0)  # g(m) = m seconds: one byte, one second on the link
    link = Link("A>B", wan.g_fn)
    grid = Grid(
        "order",
        (Cluster("A", 2, slow_lan), Cluster("B", 2, slow_lan)),
        {(0, 1): Route(wan, ("A>B",)), (1, 0): Route(wan, ())},
        {"A>B": link},
    )
    tree = Tree(0, {0: (1, 2), 1: (3,)})
    _, lam = tree_gamma_lambda(grid, tree, 1)
    s_lan = slow_lan.g(1)
    # rank 2: departs after the LAN send (s_lan), arrives + L + g = 1.5 s later; rank 3:
    # departs at rank 1's arrival (10 s + g), the link long free
    assert lam == pytest.approx(max(10.0 + s_lan + 1.5, s_lan + 1.5), rel=1e-12)


def test_phoenix_latency_prediction_equals_its_simulation_on_das2():
    """phoenix-latency on das2:50 at 1 B: the links are booked in time order, not
    breadth first (which predicted 60% above the simulation). On the
    core's trees (four seeds) the model is exact on two and 0.1-0.2% low on the
    others (a residue not yet explained), far inside 1%."""
    grid = get_grid("das2:50")
    for seed in (0, 1):
        schedule = get_builder("bcast", "phoenix-latency").build(grid, 1, 0, seed=seed)
        predicted = MODELS["bcast", "phoenix-latency"](grid, 1, 0, seed=seed)
        assert predicted == pytest.approx(simulate(schedule, grid).total_s, rel=1e-2)


@settings(max_examples=25, deadline=None)
@given(
    clusters=st.integers(2, 4),
    per_cluster=st.integers(1, 6),
    root_seed=st.integers(0, 10**6),
    m=st.integers(1, 2**16),
    lan_degree=st.integers(1, 4),
    wan_degree=st.integers(1, 3),
)
def test_property_models_on_the_cluster_quotient_equal_the_per_rank_model(
    clusters, per_cluster, root_seed, m, lan_degree, wan_degree
):
    """Equal clusters take equal LAN times: magpie-sequential's one LAN tree per
    distinct (LAN, size) and multitree's per-group LAN terms equal the per-rank sums."""
    grid = magpie(clusters, per_cluster)
    root = root_seed % grid.nranks
    M = 4 * m
    got = MODELS["bcast", "magpie-sequential"](
        grid,
        M,
        root,
        wan_segment_size=m,
        wan_degree=wan_degree,
        lan_segment_size=m,
        lan_degree=lan_degree,
    )
    coordinators = grid.coordinators(root)
    lans = [
        dary_tree(
            [coordinators[c], *(r for r in grid.members[c] if r != coordinators[c])], lan_degree
        )
        for c in range(grid.nclusters)
    ]
    wan = dary_tree(coordinator_order(grid, root), wan_degree)

    def reference(tree: Tree) -> float:
        gamma, lam = tree_model._loop_gamma_lambda(grid, tree, m, False)
        return (nsegments(M, m) - 1) * gamma + lam

    want = reference(wan) + max(reference(lan) for lan in lans)
    assert got == pytest.approx(want, rel=1e-12, abs=0.0)


SINGLE_TREES = sorted(SINGLE_TREE | SEGMENTED_TREE)


@pytest.mark.parametrize("spec", ["magpie:4,2", "das2:3", "teragrid", "transit-stub:8,2"])
@pytest.mark.parametrize("nbytes", [1, 1000, 65536, 2**20])
def test_optimistic_bound_is_below_every_configuration_searched(spec, nbytes):
    """optimistic_s never exceeds what a builder's model predicts, at the parameters
    the search finds and at every segment size it may try."""
    grid = get_grid(spec)
    for name in [*SINGLE_TREES, "mpich", "multitree"]:
        if name.startswith("sa"):
            continue
        bound = optimistic_s(grid, "bcast", name, nbytes, 0)
        builder = get_builder("bcast", name)
        found = heuristic_search(
            grid, nbytes, 0, model=MODELS["bcast", name], params=builder.params
        )
        assert bound <= found.predicted_s * (1 + 1e-12), name
        if "segment_size" in builder.params:
            params = {k: v for k, v in found.params.items() if k != "segment_size"}
            for m in {1, 7, nbytes // 3 or 1, nbytes}:
                t = MODELS["bcast", name](grid, nbytes, 0, segment_size=m, **params)
                assert bound <= t * (1 + 1e-12), (name, m)


@pytest.mark.parametrize(
    "spec", ["magpie:4,2", "magpie:3,3", "das2:3", "teragrid", "teragrid+fair", "transit-stub:8,2"]
)
@pytest.mark.parametrize("nbytes", [8, 1000, 65536, 2**20])
@pytest.mark.parametrize("itemsize", [1, 8])
def test_exchange_allreduce_bounds_are_below_their_models(spec, nbytes, itemsize):
    """The busiest link's load never exceeds what recursive doubling's, Rabenseifner's
    or MPICH's allreduce model predicts (P a power of two or not)."""
    grid = get_grid(spec)
    for name in ("recursive-doubling", "rabenseifner", "mpich"):
        bound = optimistic_s(grid, "allreduce", name, nbytes, 0, itemsize)
        model = MODELS["allreduce", name](grid, nbytes, 0, itemsize=itemsize)
        assert bound <= model * (1 + 1e-12), name


def test_exchange_allreduces_are_pruned_behind_the_two_level_on_many_ranks():
    """On magpie:32,32 at 1 MiB every WAN step of recursive doubling pushes 32 MiB over
    one 1 MB/s link (33 s), Rabenseifner's about 1 MiB (1.06 s): neither model need run
    once the two-level allreduce predicts 0.11 s."""
    grid = get_grid("magpie:32,32")
    assert optimistic_s(grid, "allreduce", "recursive-doubling", 2**20) > 30.0
    assert optimistic_s(grid, "allreduce", "rabenseifner", 2**20) > 1.0
    p = plan(grid, Call("allreduce", 2**20))
    assert p.algorithm == "two-level" and p.predicted_s < 0.2
    assert {"recursive-doubling", "rabenseifner", "mpich"}.isdisjoint(
        c.algorithm for c in p.candidates
    )


def test_optimistic_bound_prunes_single_trees_behind_the_multitree():
    """On magpie:8,1 at 1 MiB every single tree pushes the whole message over one
    1 MB/s link (about 1 s); the multi-tree splits it (0.17 s): none need be searched."""
    grid = magpie(8, 1)
    best = MODELS["bcast", "multitree"](grid, 2**20, 0, segment_size=1020, lan_degree=1)
    for name in SINGLE_TREES:
        assert optimistic_s(grid, "bcast", name, 2**20, 0) > 5 * best, name
    assert optimistic_s(grid, "bcast", "multitree", 2**20, 0) == 0.0
    assert optimistic_s(grid, "scatter", "flat", 2**20, 0) == 0.0


# -- models against the physical bound ----------------------------------------------------
@pytest.mark.parametrize("spec", ["lan:8", "lan:24", "magpie:4,2", "das2:3", "transit-stub:8,1"])
def test_no_alltoall_model_predicts_below_the_bound(spec):
    """``plan --grid lan:24 --op alltoall --size 64KiB`` must not predict below its
    bound of 30.2 ms: Table 3's lower bound (seed 002, sec. 5) ignores the NIC
    serialising a rank's P - 1 messages (29.8 ms). Neither the fitted ratio (the
    tuner's) nor the default may predict below ``collective_bound``."""
    from gridcoll.models import MODELS
    from gridcoll.network.bounds import collective_bound
    from gridcoll.tune.contention import contention_model

    grid = get_grid(spec)
    for nbytes in (1024, 65536, 1 << 20):
        bound = collective_bound(grid, "alltoall", nbytes).time_s
        for name in ("direct", "direct-rotated", "cluster-aware"):
            model = MODELS["alltoall", name]
            for fitted in (model, contention_model(model, grid, "alltoall", name)):
                assert fitted(grid, nbytes) >= bound * (1 - 1e-9), (name, nbytes)


def test_lan24_alltoall_64KiB_is_predicted_at_its_floor():
    from gridcoll.models.alltoall import alltoall_bounds

    grid, b = get_grid("lan:24"), 65536
    net = grid.clusters[0].lan
    bounds = alltoall_bounds(grid, b)
    assert bounds.floor == pytest.approx(23 * net.g(b) + net.L)  # one NIC, 23 messages
    assert bounds.predict(0.0) == bounds.floor > bounds.lower
    sim = simulate(get_builder("alltoall", "direct-rotated").build(grid, b), grid).total_s
    assert bounds.floor * (1 - 1e-12) <= sim <= bounds.floor * 1.001


@settings(max_examples=25, deadline=None)
@given(
    sizes=st.lists(st.integers(1, 6), min_size=2, max_size=5),
    m=st.integers(1, 2**16),
    lan_degree=st.integers(1, 5),
)
def test_property_multitree_lan_terms_per_group_equal_per_cluster(sizes, m, lan_degree):
    """The multi-tree's LAN terms, one evaluation per distinct (LAN, size), equal the
    cluster-by-cluster terms of seed 000 sec. 3.1.1."""
    from gridcoll.models.multitree import _lan_terms
    from gridcoll.network import magpie as _magpie

    base = _magpie(len(sizes), 1)
    clusters = tuple(Cluster(c.name, n, c.lan) for c, n in zip(base.clusters, sizes, strict=True))
    grid = Grid("uneven", clusters, base.routes, base.links)
    lan_out, gammas, lam_l = _lan_terms(grid, m, lan_degree)
    want_out, want_gammas, want_lam = [], [], 0.0
    for cluster in grid.clusters:
        n, lan = cluster.nranks, cluster.lan
        d = min(lan_degree, n - 1)
        want_out.append(d * lan.s(m))
        if n > 1:
            want_gammas.append(single_layer.dary_gamma(lan, d, m))
            want_lam = max(want_lam, single_layer.dary_lam(lan, n, d, m))
    assert lan_out.tolist() == want_out and set(gammas.tolist()) == set(want_gammas)
    assert lam_l == want_lam


def test_heuristics_run_over_the_coordinators_on_large_grids():
    """Above COORDINATOR_RANKS ranks the per-rank heuristics grow their tree over the
    coordinators (their own rule, on the coordinator grid) and hang a binomial tree
    in every cluster: the schedule is valid and the model evaluates it."""
    from gridcoll.algorithms._hetero import COORDINATOR_RANKS, coordinator_grid
    from gridcoll.algorithms.edge_costs import edge_costs
    from gridcoll.algorithms.heuristics import grow
    from gridcoll.schedule import validate

    grid = magpie(9, 40)
    assert grid.nranks > COORDINATOR_RANKS
    root = 45  # cluster 1
    tree = get_builder("bcast", "ecef").build(grid, 4096, root)
    validate(tree)
    wide = grow(edge_costs(coordinator_grid(grid), 4096), 1, "ecef").tree
    coordinators = grid.coordinators(root)
    from gridcoll.models.heterogeneous import tree_of

    full = tree_of("ecef", grid, 4096, root)
    for v, kids in wide.children.items():  # the wide-area children come first
        got = full.children[coordinators[v]][: len(kids)]
        assert got == tuple(coordinators[c] for c in kids)
    assert sorted(full.nodes()) == list(range(grid.nranks))
    assert MODELS["bcast", "ecef"](grid, 4096, root) == pytest.approx(
        tree_time(grid, full, 4096), rel=1e-12
    )


@pytest.mark.parametrize("spec", ["magpie:4,3", "magpie:6,2"])
@pytest.mark.parametrize("name", ["two-level", "two-level-exchange"])
def test_two_level_allreduce_models_are_computed_once_per_class_of_clusters(
    monkeypatch, spec, name
):
    """Interchangeable clusters share every figure of the two-level models: computing
    them once per class (and reading a link's load off its one route) gives exactly
    what every cluster computed on its own gives."""
    from gridcoll.models import allreduce as models

    grid = get_grid(spec)
    cases = [(m, d, n) for m in (64, 1024, 65536) for d in (1, 2, 3) for n in (1000, 2**20)]
    fast = [MODELS["allreduce", name](grid, n, segment_size=m, lan_degree=d) for m, d, n in cases]
    alone = list(range(grid.nclusters))
    monkeypatch.setattr(models, "_alike", lambda grid, commutative: (alone, alone))
    fresh = get_grid(spec)
    slow = [MODELS["allreduce", name](fresh, n, segment_size=m, lan_degree=d) for m, d, n in cases]
    assert fast == slow
