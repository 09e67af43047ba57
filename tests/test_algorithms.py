"""Single-layer broadcast builders: every one delivers exactly the root's bytes."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gridcoll.algorithms import get_builder, list_builders
from gridcoll.algorithms.trees import (
    binomial_tree,
    chain_tree,
    dary_tree,
    flat_tree,
    minimal_height,
    relative_ranks,
)
from gridcoll.errors import ParameterError, UnknownAlgorithm
from gridcoll.network import Cluster, Grid, get_grid, magpie
from gridcoll.network.presets import lan_plogp
from gridcoll.schedule import Send, schedule_from_json, schedule_to_json, validate

SINGLE_LAYER = [
    "flat",
    "flat-rendezvous",
    "flat-segmented",
    "chain",
    "chain-rendezvous",
    "chain-segmented",
    "binary",
    "binomial",
    "binomial-rendezvous",
    "binomial-segmented",
    "dary-segmented",
]


def params_for(builder, segment_size, degree):
    out = {}
    if "segment_size" in builder.params:
        out["segment_size"] = segment_size
    if "degree" in builder.params:
        out["degree"] = degree
    return out


def test_the_single_layer_trees_are_registered():
    names = {b.name for b in list_builders("bcast")}
    assert set(SINGLE_LAYER) <= names


@pytest.mark.parametrize("name", SINGLE_LAYER)
@pytest.mark.parametrize("spec", ["lan:1", "lan:2", "lan:7", "magpie:3,3", "das2:2"])
def test_every_root_gets_a_valid_schedule(name, spec):
    grid = get_grid(spec)
    builder = get_builder("bcast", name)
    for root in range(grid.nranks):
        schedule = builder.build(grid, 1000, root, **params_for(builder, 300, 3))
        validate(schedule)
        assert schedule.algorithm == name and schedule.root == root


@given(
    name=st.sampled_from(SINGLE_LAYER),
    nclusters=st.integers(1, 4),
    per_cluster=st.integers(1, 5),
    root_seed=st.integers(0, 10**6),
    items=st.integers(1, 5000),
    itemsize=st.sampled_from([1, 4, 8]),
    segment_items=st.integers(1, 2000),
    degree=st.integers(1, 6),
)
def test_property_builders_deliver_exactly_the_roots_bytes(
    name, nclusters, per_cluster, root_seed, items, itemsize, segment_items, degree
):
    grid = magpie(nclusters, per_cluster)
    root = root_seed % grid.nranks
    builder = get_builder("bcast", name)
    schedule = builder.build(
        grid,
        items * itemsize,
        root,
        itemsize=itemsize,
        **params_for(builder, segment_items * itemsize, degree),
    )
    validate(schedule)
    assert sum(length for _, length in schedule.segments) == items * itemsize
    assert schedule_from_json(schedule_to_json(schedule)) == schedule


def test_interleaved_placement_is_respected():
    lan = lan_plogp()
    grid = magpie(2, 2)
    mixed = Grid("mixed", grid.clusters, grid.routes, grid.links, placement=(0, 1, 0, 1))
    for name in SINGLE_LAYER:
        builder = get_builder("bcast", name)
        validate(builder.build(mixed, 64, 3, **params_for(builder, 16, 2)))
    assert mixed.members == ((0, 2), (1, 3)) and lan.L == grid.clusters[0].lan.L


def test_segment_counts_and_message_counts():
    grid = get_grid("lan:5")
    schedule = get_builder("bcast", "chain-segmented").build(grid, 1000, 0, segment_size=300)
    assert len(schedule.segments) == 4  # k = ceil(1000/300)
    assert schedule.nmessages == 4 * 4  # every one of 4 segments crosses 4 chain edges
    rendezvous = get_builder("bcast", "flat-rendezvous").build(grid, 1000, 0)
    assert rendezvous.nmessages == 3 * 4  # request, clear-to-send and data per child
    # the root sends all requests before any data (seed 002's flat rendezvous)
    root_ops = rendezvous.programs[0]
    assert all(op.segments == () for op in root_ops[:4] if isinstance(op, Send))


def test_tree_shapes():
    ranks = list(range(10))
    assert flat_tree(ranks).degree == 9 and flat_tree(ranks).height == 1
    assert chain_tree(ranks).height == 9
    assert binomial_tree(ranks).children[0] == (8, 4, 2, 1)
    assert binomial_tree(ranks).height == 3  # max popcount of 0..9 (rank 7 = 0b111)
    for d in range(1, 10):
        tree = dary_tree(ranks, d)
        assert tree.degree <= d and tree.height == minimal_height(10, d)
        assert sorted(tree.nodes()) == ranks
    assert minimal_height(10, 3) == 2  # 1 + 3 + 9 >= 10
    assert relative_ranks(5, 3) == [3, 4, 0, 1, 2]


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"root": 4}, ParameterError, "root 4 is out of range"),
        ({"root": -1}, ParameterError, "out of range"),
        ({"nbytes": 0}, ParameterError, "positive number of bytes"),
        ({"nbytes": -5}, ParameterError, "positive number of bytes"),
        ({"degree": 0}, ParameterError, "degree must be >= 1"),
        ({"segment_size": 6, "itemsize": 4}, ParameterError, "does not divide"),
    ],
)
def test_bad_arguments_raise_before_building(kwargs, error, message):
    args = {"nbytes": 64, "root": 0, "segment_size": 16, "degree": 2} | kwargs
    grid = get_grid("lan:4")
    with pytest.raises(error, match=message):
        get_builder("bcast", "dary-segmented").build(
            grid, args.pop("nbytes"), args.pop("root"), **args
        )


def test_unknown_algorithm_lists_choices():
    with pytest.raises(UnknownAlgorithm, match="choose one of: flat"):
        get_builder("bcast", "fastest")


def test_cluster_without_ranks_is_rejected():
    with pytest.raises(ValueError, match="at least one rank"):
        Cluster("empty", 0, lan_plogp())
