"""Schedule transforms: the time reversal, proven by the validator.

Gather is the reversal of scatter and a tree reduce the reversal of a tree broadcast
with combining receives (``gridcoll.schedule.transform.reverse``); the registered
gather builders and ``append_tree_reduce`` are built that way, and must give exactly
the programs they gave before (hand-written), which the reference copies below keep.
"""

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gridcoll.algorithms import get_builder, list_builders
from gridcoll.algorithms._collective import (
    Blocks,
    append_tree_reduce,
    mirrored,
    preorder_tree,
)
from gridcoll.algorithms.magpie import cluster_ranks, coordinator_order
from gridcoll.algorithms.scatter import round_robin_order
from gridcoll.algorithms.trees import (
    Tree,
    append_tree_broadcast,
    binomial_tree,
    chain_tree,
    dary_tree,
    relative_ranks,
)
from gridcoll.errors import ScheduleError
from gridcoll.network import das2, magpie
from gridcoll.schedule import Recv, Schedule, Send, validate
from gridcoll.schedule.transform import (
    PERSONALISED,
    block_sizes,
    reverse,
    reverse_program,
    trimmed,
)

NAMES = [b.name for b in list_builders("scatter")]
BACKWARDS = {"flat", "magpie-original", "magpie-segmented", "cluster-aware"}
"""Scatter builders with ``backwards``: their gathers reverse the backwards scatter."""
OWN_GATHER = {"multipath"}
"""Gathers that are not their scatter reversed: multipath weighs its routes and orders
its programs towards the root (links are asymmetric)."""


def interleaved(C: int, N: int):
    """magpie:C,N with ranks dealt round-robin to the clusters (not contiguous)."""
    grid = magpie(C, N)
    return dataclasses.replace(
        grid, name=f"magpie:{C},{N}/rr", placement=tuple(r % C for r in range(C * N))
    )


def grids():
    return st.tuples(st.integers(1, 4), st.integers(1, 4), st.booleans()).map(
        lambda t: interleaved(t[0], t[1]) if t[2] and t[0] > 1 else magpie(t[0], t[1])
    ) | st.sampled_from([das2(1), das2(2)])


@st.composite
def personal_calls(draw, names=tuple(NAMES)):
    """(grid, name, nbytes, root, params) of a scatter/gather call, several segments."""
    grid = draw(grids())
    name = draw(st.sampled_from(names))
    itemsize = draw(st.sampled_from([1, 2, 4]))
    nbytes = itemsize * draw(st.integers(1, 20))
    root = draw(st.integers(0, grid.nranks - 1))
    params = {"itemsize": itemsize}
    if get_builder("scatter", name).params:
        params["segment_size"] = itemsize * draw(st.integers(1, nbytes // itemsize))
    return grid, name, nbytes, root, params


# -- reverse itself -----------------------------------------------------------------------
def test_reverse_swaps_and_reverses_every_program():
    s = get_builder("scatter", "chain").build(magpie(1, 3), 10)
    g = reverse(s, op="gather", algorithm="x", params={"p": 1})
    assert (g.op, g.algorithm, g.params) == ("gather", "x", {"p": 1})
    assert (g.nranks, g.root, g.nbytes, g.segments) == (s.nranks, s.root, s.nbytes, s.segments)
    assert g.programs[1] == (Recv(2, (2,)), Send(0, (1, 2)))  # was Recv(0, (1, 2)), Send(2, (2,))
    assert reverse_program(g.programs[1], combine=True) == (
        Recv(0, (1, 2), combine=True),
        Send(2, (2,)),
    )


@settings(max_examples=40)
@given(call=personal_calls(), backwards=st.booleans())
def test_every_reversed_scatter_is_a_valid_gather_and_reverses_back(call, backwards):
    grid, name, nbytes, root, params = call
    if backwards and name in BACKWARDS:
        params = {**params, "backwards": True}
    scatter = get_builder("scatter", name).build(grid, nbytes, root, **params)
    validate(scatter)
    gather = reverse(scatter, op="gather")
    validate(gather)  # the proof: every rank's block reaches the root, no deadlock
    assert reverse(gather, op="scatter").programs == scatter.programs


@settings(max_examples=40)
@given(call=personal_calls(tuple(n for n in NAMES if n not in OWN_GATHER)))
def test_registered_gathers_are_the_reversed_scatters(call):
    grid, name, nbytes, root, params = call
    gather = get_builder("gather", name).build(grid, nbytes, root, **params)
    if name in BACKWARDS:
        params = {**params, "backwards": True}
    scatter = get_builder("scatter", name).build(grid, nbytes, root, **params)
    assert gather.programs == reverse(scatter, op="gather").programs
    assert (gather.op, gather.algorithm) == ("gather", name)
    validate(gather)


def test_a_broadcast_reversed_without_combining_is_no_reduce():
    bcast = get_builder("bcast", "binomial").build(magpie(2, 2), 8)
    with pytest.raises(ScheduleError):
        validate(reverse(bcast, op="reduce", params={"commutative": True}))
    validate(reverse(bcast, op="reduce", combine=True, params={"commutative": True}))


# -- the gathers keep their hand-written programs -----------------------------------------
def _old_gather(grid, name, nbytes, root, segment_size=None):
    """The gather builders as they were written by hand before they became reversals
    (chain-pipelined excepted: each rank now sends its block's segments last first)."""
    P = grid.nranks
    blocks = Blocks.cut(P, nbytes, segment_size, 1)
    programs = [[] for _ in range(P)]
    if name == "flat":
        for r in relative_ranks(P, root)[1:]:
            programs[r].append(Send(root, blocks.block(r)))
            programs[root].append(Recv(r, blocks.block(r)))
    elif name == "chain":
        rel = relative_ranks(P, root)
        for i in range(P - 1, 0, -1):
            message = blocks.blocks(rel[i:])
            programs[rel[i]].append(Send(rel[i - 1], message))
            programs[rel[i - 1]].append(Recv(rel[i], message))
    elif name == "magpie-original":
        coordinators = coordinator_order(grid, root)
        for c in coordinators:
            for r in cluster_ranks(grid, grid.cluster_of[c], c)[1:]:
                programs[r].append(Send(c, blocks.block(r)))
                programs[c].append(Recv(r, blocks.block(r)))
        for c in coordinators[1:]:
            message = blocks.blocks(cluster_ranks(grid, grid.cluster_of[c], c))
            programs[c].append(Send(root, message))
            programs[root].append(Recv(c, message))
    elif name == "magpie-segmented":
        order = round_robin_order(grid, root)
        for r in order:
            programs[r] += [Send(root, (blocks.seg(r, j),)) for j in range(blocks.k)]
        for j in range(blocks.k):
            programs[root] += [Recv(r, (blocks.seg(r, j),)) for r in order]
    elif name == "cluster-aware":
        coordinators = coordinator_order(grid, root)
        members = {c: cluster_ranks(grid, grid.cluster_of[c], c) for c in coordinators}
        for c in coordinators:
            for r in members[c][1:]:
                programs[r] += [Send(c, (blocks.seg(r, j),)) for j in range(blocks.k)]
        for j in range(blocks.k):
            programs[root] += [Recv(r, (blocks.seg(r, j),)) for r in members[root][1:]]
            for c in coordinators[1:]:
                programs[c] += [Recv(r, (blocks.seg(r, j),)) for r in members[c][1:]]
                message = blocks.round(members[c], j)
                programs[c].append(Send(root, message))
                programs[root].append(Recv(c, message))
    return tuple(tuple(p) for p in programs)


@pytest.mark.parametrize("grid", [magpie(1, 4), magpie(3, 2), das2(2), interleaved(3, 3)])
@pytest.mark.parametrize("name", ["flat", "chain", "magpie-original"])
def test_whole_block_gathers_are_unchanged(grid, name):
    for root in (0, grid.nranks - 1):
        got = get_builder("gather", name).build(grid, 6, root).programs
        assert got == _old_gather(grid, name, 6, root)


@pytest.mark.parametrize("grid", [magpie(1, 4), magpie(3, 2), das2(2), interleaved(3, 3)])
@pytest.mark.parametrize("name", ["magpie-segmented", "cluster-aware"])
def test_segmented_gathers_are_unchanged(grid, name):
    for root in (0, grid.nranks - 1):
        got = get_builder("gather", name).build(grid, 7, root, segment_size=3).programs
        assert got == _old_gather(grid, name, 7, root, segment_size=3)


def test_flat_gather_root_receives_in_root_relative_order():
    s = get_builder("gather", "flat").build(magpie(2, 2), 100, root=2)
    assert [op.peer for op in s.programs[2]] == [3, 0, 1]


def test_pipelined_chain_gather_sends_each_block_last_segment_first():
    s = get_builder("gather", "chain-pipelined").build(magpie(1, 3), 4, segment_size=2)
    # rank 2 owns segments 4, 5 (block 2); rank 1 sends its own 3, 2, then forwards 5, 4
    assert s.programs[2] == (Send(1, (5,)), Send(1, (4,)))
    assert s.programs[1] == (
        Send(0, (3,)),
        Send(0, (2,)),
        Recv(2, (5,)),
        Send(0, (5,)),
        Recv(2, (4,)),
        Send(0, (4,)),
    )


# -- reduce from broadcast ----------------------------------------------------------------
def _old_tree_reduce(nranks, tree, messages, to=None):
    """``append_tree_reduce`` as written by hand before it became a reversal."""
    programs = [[] for _ in range(nranks)]
    parent = dict(tree.parents())
    if to is not None and to != tree.root:
        parent[tree.root] = to
    for v in tree.nodes():
        kids = tree.children.get(v, ())
        for message in messages:
            programs[v] += [Recv(c, message, combine=True) for c in kids]
            if v in parent:
                programs[v].append(Send(parent[v], message))
    if to is not None and to != tree.root:
        programs[to] += [Recv(tree.root, message) for message in messages]
    return programs


SHAPES = {
    "dary": lambda ranks, d: dary_tree(ranks, d),
    "binomial": lambda ranks, d: binomial_tree(ranks),
    "chain": lambda ranks, d: chain_tree(ranks),
    "preorder": lambda ranks, d: preorder_tree(ranks, d),
}


@st.composite
def tree_calls(draw):
    P = draw(st.integers(1, 12))
    root = draw(st.integers(0, P - 1))
    shape = draw(st.sampled_from(sorted(SHAPES)))
    tree = SHAPES[shape](relative_ranks(P, root), draw(st.integers(1, 4)))
    k = draw(st.integers(1, 4))
    return P, root, tree, k


def _reduce_schedule(P, root, programs, k, commutative):
    segments = tuple((s, 1) for s in range(k))
    return Schedule(
        "reduce",
        "test",
        P,
        root,
        k,
        segments,
        tuple(tuple(p) for p in programs),
        {"commutative": commutative},
    )


@settings(max_examples=60)
@given(call=tree_calls(), to=st.integers(0, 11))
def test_tree_reduce_is_the_reversed_broadcast_of_the_mirrored_tree(call, to):
    P, _, tree, k = call
    to = to % P
    messages = [(s,) for s in range(k)]
    programs = [[] for _ in range(P)]
    append_tree_reduce(programs, tree, messages, to=to)
    assert programs == _old_tree_reduce(P, tree, messages, to=to)
    down = [[] for _ in range(P)]
    append_tree_broadcast(down, mirrored(tree), messages[::-1])
    if to == tree.root:
        assert programs == [list(reverse_program(p, combine=True)) for p in down]
    validate(_reduce_schedule(P, to, programs, k, commutative=True))


@settings(max_examples=40)
@given(call=tree_calls())
def test_any_reversed_tree_broadcast_is_a_commutative_reduce(call):
    P, root, tree, k = call
    down = [[] for _ in range(P)]
    append_tree_broadcast(down, tree, [(s,) for s in range(k)])
    up = [reverse_program(p, combine=True) for p in down]
    validate(_reduce_schedule(P, root, up, k, commutative=True))


@settings(max_examples=40)
@given(P=st.integers(2, 12), degree=st.integers(1, 4), k=st.integers(1, 3))
def test_operand_order_decides_which_reversal_is_a_non_commutative_reduce(P, degree, k):
    """On a pre-order tree the reversed broadcast of the mirrored tree combines in rank
    order; the reversal of the tree itself takes children high to low, which the
    validator refuses as soon as a node has two children."""
    tree = preorder_tree(list(range(P)), degree)
    messages = [(s,) for s in range(k)]
    for shape, ordered in ((mirrored(tree), True), (tree, tree.degree < 2)):
        down = [[] for _ in range(P)]
        append_tree_broadcast(down, shape, messages[::-1])
        up = [reverse_program(p, combine=True) for p in down]
        schedule = _reduce_schedule(P, 0, up, k, commutative=False)
        if ordered:
            validate(schedule)
        else:
            with pytest.raises(ScheduleError, match="adjacent rank intervals"):
                validate(schedule)


def test_mirrored_reverses_children_only():
    tree = Tree(0, {0: (1, 2, 3), 2: (4, 5)})
    assert mirrored(tree) == Tree(0, {0: (3, 2, 1), 2: (5, 4)})
    assert mirrored(mirrored(tree)) == tree


# -- trimmed: the uneven (v) forms ------------------------------------------------------


@settings(max_examples=60, deadline=None)
@given(
    op=st.sampled_from(PERSONALISED),
    spec=st.sampled_from(["magpie:2,2", "magpie:3,2", "das2:2", "magpie:5,1"]),
    data=st.data(),
)
def test_every_personalised_builder_trimmed_to_any_counts_is_valid(op, spec, data):
    """Every builder's schedule cut to random counts (zeros, all but one zero, full
    blocks) still proves correct, moves exactly the counted bytes, and sends no
    empty message."""
    from gridcoll.network import get_grid

    grid = get_grid(spec)
    P = grid.nranks
    builders = list_builders(op)
    if not builders:  # an op whose builders another module registers
        return
    builder = data.draw(st.sampled_from(builders), label="builder")
    itemsize = data.draw(st.sampled_from([1, 4, 8]), label="itemsize")
    n = P * P if op == "alltoall" else P
    items = data.draw(st.lists(st.integers(0, 6), min_size=n, max_size=n), label="items")
    counts = [c * itemsize for c in items]
    stride = max(max(counts), itemsize)
    root = data.draw(st.integers(0, P - 1), label="root")
    params = {p: (3 * itemsize if p.endswith("segment_size") else 2) for p in builder.params}
    extra = {"commutative": True} if op == "reduce_scatter" else {}
    full = builder.build(grid, stride, root, itemsize=itemsize, **params, **extra)
    cut = trimmed(full, counts)
    validate(cut)
    assert block_sizes(cut) == {i: c for i, c in enumerate(counts) if c}
    for program in cut.programs:
        assert all(op_.segments for op_ in program)  # no message left empty
    assert all(length > 0 for _, length in cut.segments)


def test_trimmed_refuses_what_it_cannot_cut():
    grid = magpie(2, 2)
    scatter = get_builder("scatter", "flat").build(grid, 8)
    with pytest.raises(ScheduleError, match="4 blocks, got 3"):
        trimmed(scatter, [1, 2, 3])
    with pytest.raises(ScheduleError, match=r"in \[0, 8\]"):
        trimmed(scatter, [1, 2, 3, 9])
    bcast = get_builder("bcast", "binomial").build(grid, 8)
    with pytest.raises(ScheduleError, match="no uneven form"):
        trimmed(bcast, [1, 2, 3, 4])


def test_full_counts_leave_a_schedule_as_it_was():
    grid = magpie(3, 2)
    for op in ("scatter", "gather", "allgather", "alltoall"):
        for builder in list_builders(op):
            params = {p: (8 if p.endswith("segment_size") else 2) for p in builder.params}
            full = builder.build(grid, 24, 1, **params)
            n = 36 if op == "alltoall" else 6
            assert trimmed(full, [24] * n) == dataclasses.replace(full, params=dict(full.params))
