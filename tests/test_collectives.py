"""scatter, gather, allgather, all-to-all, reduce, allreduce and barrier: builders,
models, bounds, planning and the non-commutative rules."""

import dataclasses
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gridcoll.algorithms import get_builder, list_builders
from gridcoll.algorithms._collective import preorder_tree, runs
from gridcoll.algorithms.alltoall import direct_alltoall, direct_rotated_alltoall
from gridcoll.algorithms.reduce import dary_segmented_reduce
from gridcoll.errors import ParameterError, ScheduleError, UnknownAlgorithm
from gridcoll.models import MODELS, predict
from gridcoll.models.alltoall import (
    alltoall_bounds,
    fit_contention,
    least_squares_ratio,
)
from gridcoll.models.scatter import scatter_table2
from gridcoll.network import das2, get_grid, lan, magpie
from gridcoll.network.bounds import collective_bound
from gridcoll.schedule import Recv, Schedule, schedule_from_json, schedule_to_json, validate
from gridcoll.simulate import simulate
from gridcoll.tune import Call, PlanOptions, plan
from gridcoll.tune.contention import simulated_contention

OPS = ("scatter", "gather", "allgather", "alltoall", "reduce", "allreduce", "barrier")
REDUCTIONS = ("reduce", "allreduce")

EXPECTED_BUILDERS = {
    "scatter": {
        "flat",
        "chain",
        "chain-pipelined",
        "binomial",
        "magpie-original",
        "magpie-segmented",
        "cluster-aware",
        "multipath",
    },
    "allgather": {"magpie-original", "magpie-segmented", "ring", "recursive-doubling", "mpich"},
    "alltoall": {"direct", "direct-rotated", "cluster-aware", "direct-segmented", "multipath"},
    "reduce": {"binomial", "chain-segmented", "dary-segmented", "two-level"},
    "allreduce": {"reduce-bcast", "recursive-doubling", "rabenseifner", "two-level"},
    "barrier": {"two-level", "dissemination"},
}
EXPECTED_BUILDERS["gather"] = EXPECTED_BUILDERS["scatter"]
"""The builders each collective must offer: the papers' algorithms and their baselines."""


def interleaved(C: int, N: int):
    """magpie:C,N with ranks dealt round-robin to the clusters (not contiguous)."""
    grid = magpie(C, N)
    return dataclasses.replace(
        grid, name=f"magpie:{C},{N}/rr", placement=tuple(r % C for r in range(C * N))
    )


# One grid per rank count 1..12 (several shapes for some), das2:2 and interleaved ranks.
GRIDS = [
    magpie(1, 1),
    magpie(2, 1),
    magpie(1, 3),
    magpie(2, 2),
    magpie(5, 1),
    magpie(3, 2),
    magpie(1, 7),
    magpie(4, 2),
    magpie(3, 3),
    magpie(5, 2),
    magpie(1, 11),
    magpie(3, 4),
    magpie(4, 3),
    das2(2),
    interleaved(3, 3),
]

ROOTLESS = ("allgather", "alltoall", "allreduce", "barrier")


def params_for(builder, nbytes: int, itemsize: int, m: int = 3, degree: int = 2) -> dict:
    """Small parameters for every tunable name: several segments per block."""
    out = {}
    for name in builder.params:
        if name.endswith("segment_size"):
            out[name] = max(itemsize, m // itemsize * itemsize)
        elif name.endswith("degree"):
            out[name] = degree
    return out


def builds(op: str, grid, nbytes: int, root: int, itemsize: int, commutative: bool = True):
    """Every builder of ``op`` (order-preserving ones only when not commutative)."""
    for builder in list_builders(op):
        if not commutative and builder.commutative_only:
            continue
        kwargs = params_for(builder, nbytes, itemsize)
        if op in REDUCTIONS:
            kwargs["commutative"] = commutative
        yield builder, builder.build(grid, nbytes, root, itemsize=itemsize, **kwargs)


# -- registry -----------------------------------------------------------------------------
def test_the_expected_builders_are_registered_with_models():
    for op, names in EXPECTED_BUILDERS.items():
        registered = {b.name for b in list_builders(op)}
        assert names <= registered, op
        for name in registered:
            assert (op, name) in MODELS, (op, name)


def test_only_reordering_trees_are_commutative_only():
    flagged = {(b.op, b.name) for b in list_builders() if b.commutative_only}
    assert flagged == {
        ("reduce", "dary-segmented"),
        ("reduce", "multitree"),
        ("allreduce", "multitree"),
        ("reduce_scatter", "multitree"),
    }


# -- every builder proves correct ---------------------------------------------------------
@pytest.mark.parametrize("op", OPS)
def test_every_builder_validates_on_every_grid_and_root(op):
    nbytes = 0 if op == "barrier" else 10  # 10 bytes: segments of 3 do not divide it
    for grid in GRIDS:
        roots = range(grid.nranks) if op not in ROOTLESS else sorted({0, grid.nranks - 1})
        for root in roots:
            for builder, schedule in builds(op, grid, nbytes, root, 1):
                try:
                    validate(schedule)
                except ScheduleError as err:  # pragma: no cover - the message names it
                    raise AssertionError(f"{op} {builder.name} {grid.name} root {root}") from err
                assert schedule.op == op and schedule.algorithm == builder.name


@pytest.mark.parametrize("op", REDUCTIONS)
def test_order_preserving_reductions_keep_rank_order_everywhere(op):
    for grid in GRIDS:
        roots = range(grid.nranks) if op == "reduce" else [0]
        for root in roots:
            for builder, schedule in builds(op, grid, 10, root, 1, commutative=False):
                assert schedule.params["commutative"] is False
                try:
                    validate(schedule)  # proves the combine order too
                except ScheduleError as err:  # pragma: no cover
                    raise AssertionError(f"{op} {builder.name} {grid.name} root {root}") from err


@pytest.mark.parametrize("op", ("scatter", "gather", "allgather", "alltoall", "allreduce"))
@pytest.mark.parametrize("itemsize", [2, 4, 8])
def test_itemsizes_and_sizes_that_do_not_divide(op, itemsize):
    grid = magpie(3, 2)
    nbytes = 7 * itemsize  # 7 elements: no block, chunk or segment count divides it
    for _builder, schedule in builds(op, grid, nbytes, 1, itemsize):
        validate(schedule)
        for offset, length in schedule.segments:
            assert offset % itemsize == 0 and length % itemsize == 0 and length > 0


def _grid_strategy():
    return st.tuples(st.integers(1, 4), st.integers(1, 4), st.booleans()).map(
        lambda t: interleaved(t[0], t[1]) if t[2] and t[0] > 1 else magpie(t[0], t[1])
    )


@settings(max_examples=40)
@given(
    grid=_grid_strategy(),
    op=st.sampled_from(OPS),
    data=st.data(),
)
def test_random_calls_validate_and_simulate(grid, op, data):
    itemsize = data.draw(st.sampled_from([1, 2, 4]))
    nbytes = 0 if op == "barrier" else itemsize * data.draw(st.integers(1, 40))
    root = data.draw(st.integers(0, grid.nranks - 1))
    commutative = data.draw(st.booleans()) if op in REDUCTIONS else True
    builder = data.draw(
        st.sampled_from([b for b in list_builders(op) if commutative or not b.commutative_only])
    )
    kwargs = params_for(
        builder,
        nbytes,
        itemsize,
        m=data.draw(st.integers(1, max(1, nbytes))),
        degree=data.draw(st.integers(1, 4)),
    )
    if op in REDUCTIONS:
        kwargs["commutative"] = commutative
    schedule = builder.build(grid, nbytes, root, itemsize=itemsize, **kwargs)
    validate(schedule)
    result = simulate(schedule, grid)
    assert result.total_s >= 0
    if grid.nranks > 1 and op != "barrier":
        assert result.nmessages > 0


# -- non-commutative operations -----------------------------------------------------------
def test_reordering_tree_is_refused_for_non_commutative_ops():
    grid = magpie(2, 3)
    with pytest.raises(ParameterError, match="commutative"):
        dary_segmented_reduce(grid, 64, 0, segment_size=8, degree=2, commutative=False)
    with pytest.raises(ParameterError, match="needs a commutative operation"):
        plan(grid, Call("reduce", 64, commutative=False), PlanOptions(algo="dary-segmented"))
    with pytest.raises(ParameterError, match="commutative must be"):
        plan(grid, Call("reduce", 64, commutative="no"))


def test_auto_never_picks_a_reordering_tree_for_non_commutative_ops():
    grid = magpie(4, 4)
    for nbytes in (8, 4096, 1 << 20):
        for op in REDUCTIONS:
            p = plan(grid, Call(op, nbytes, 3, commutative=False))
            names = {c.algorithm for c in p.candidates}
            assert "dary-segmented" not in names
            assert all(c.params["commutative"] is False for c in p.candidates)
            schedule = p.build(grid)
            assert schedule.params["commutative"] is False
            validate(schedule)
    assert "dary-segmented" in {c.algorithm for c in plan(grid, Call("reduce", 4096)).candidates}


def test_validator_catches_reordered_operands():
    grid = lan(5)
    schedule = dary_segmented_reduce(grid, 16, 0, segment_size=8, degree=2)
    validate(schedule)  # fine for a commutative operation
    reordered = dataclasses.replace(schedule, params={**schedule.params, "commutative": False})
    with pytest.raises(ScheduleError, match="out of rank order"):
        validate(reordered)


def test_validator_checks_the_side_of_each_combine():
    # rank 1 holds x1 and receives x0: x0 (op) x1 needs incoming_first
    def schedule(first: bool) -> Schedule:
        programs = ((Send_(1),), (Recv(0, (0,), combine=True, incoming_first=first),))
        return Schedule("reduce", "t", 2, 1, 4, ((0, 4),), programs, {"commutative": False})

    validate(schedule(True))
    with pytest.raises(ScheduleError, match="held first"):
        validate(schedule(False))


def Send_(peer):
    from gridcoll.schedule import Send

    return Send(peer, (0,))


def test_incoming_first_survives_json():
    grid = magpie(2, 3)
    schedule = get_builder("allreduce", "recursive-doubling").build(grid, 64, commutative=False)
    assert any(isinstance(op, Recv) and op.incoming_first for p in schedule.programs for op in p)
    assert schedule_from_json(schedule_to_json(schedule)) == schedule


def test_preorder_tree_spans_contiguous_intervals():
    ranks = list(range(3, 17))
    for degree in (1, 2, 3, 5):
        tree = preorder_tree(ranks, degree)
        assert sorted(tree.nodes()) == ranks
        for v in tree.nodes():
            kids = tree.children.get(v, ())
            assert list(kids) == sorted(kids)
            span = _subtree(tree, v)
            assert span == list(range(v, v + len(span)))


def _subtree(tree, v):
    out, stack = [], [v]
    while stack:
        x = stack.pop()
        out.append(x)
        stack.extend(tree.children.get(x, ()))
    return sorted(out)


def test_runs_follow_the_placement():
    assert runs(magpie(2, 2)) == [[0, 1], [2, 3]]
    assert runs(interleaved(2, 2)) == [[0], [1], [2], [3]]


# -- bad input, before anything is built ---------------------------------------------------
@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        (lambda g: plan(g, Call("scatter", 7, itemsize=2)), ParameterError, "whole number"),
        (lambda g: plan(g, Call("nosuch", 64)), UnknownAlgorithm, "no algorithms are registered"),
        (
            lambda g: plan(g, Call("gather", 64), PlanOptions(algo="nosuch")),
            UnknownAlgorithm,
            "choose one of",
        ),
        (lambda g: plan(g, Call("allgather", 0)), ParameterError, "positive"),
        (lambda g: plan(g, Call("barrier", -1)), ParameterError, "barrier"),
        (lambda g: plan(g, Call("alltoall", 64, 99)), ParameterError, "out of range"),
        (
            lambda g: get_builder("scatter", "magpie-segmented").build(
                g, 64, segment_size=3, itemsize=2
            ),
            ParameterError,
            "datatype",
        ),
        (
            lambda g: get_builder("allreduce", "two-level").build(
                g, 64, segment_size=8, lan_degree=0
            ),
            ParameterError,
            "lan_degree",
        ),
    ],
)
def test_bad_calls_raise_clear_errors(call, error, match):
    with pytest.raises(error, match=match):
        call(magpie(2, 2))


# -- models against the simulator ---------------------------------------------------------
@pytest.mark.parametrize("P", [2, 3, 5, 8, 12])
@pytest.mark.parametrize("shape", ["flat", "chain", "chain-pipelined"])
def test_table2_is_exact_for_scatter_and_gather_on_one_network(P, shape):
    grid = lan(P)
    net = grid.clusters[0].lan
    for nbytes in (100, 65536):
        expected = scatter_table2(shape, net.g, net.L, P, nbytes)
        for op in ("scatter", "gather"):
            builder = get_builder(op, shape)
            params = {"segment_size": nbytes} if builder.params else {}
            sim = simulate(builder.build(grid, nbytes, 0, **params), grid).total_s
            model = predict(grid, op, shape, nbytes, 0, **params)
            assert sim == pytest.approx(expected, rel=1e-9)
            assert model == pytest.approx(expected, rel=1e-9)


def test_table2_binomial_is_exact_for_powers_of_two_and_an_upper_bound_otherwise():
    for P in (2, 4, 8, 16, 3, 6, 12):
        grid = lan(P)
        net = grid.clusters[0].lan
        table = scatter_table2("binomial", net.g, net.L, P, 4096)
        sim = simulate(get_builder("scatter", "binomial").build(grid, 4096), grid).total_s
        if P & (P - 1) == 0:
            assert sim == pytest.approx(table, rel=1e-9)
        else:
            assert sim < table


EXACT = [  # (op, name, params): the model is the simulator's time on these grids
    ("scatter", "flat", {}),
    ("scatter", "binomial", {}),
    ("scatter", "magpie-original", {}),
    ("scatter", "magpie-segmented", {"segment_size": 8192}),
    ("scatter", "cluster-aware", {"segment_size": 8192}),
    ("gather", "flat", {}),
    ("gather", "chain", {}),
    ("gather", "binomial", {}),
    ("gather", "magpie-original", {}),
    ("gather", "magpie-segmented", {"segment_size": 8192}),
    ("allgather", "magpie-original", {}),
    ("reduce", "binomial", {}),
    ("reduce", "chain-segmented", {"segment_size": 8192}),
    ("allreduce", "reduce-bcast", {}),
    ("barrier", "dissemination", {}),
]


@pytest.mark.parametrize(("op", "name", "params"), EXACT)
@pytest.mark.parametrize("spec", ["lan:8", "magpie:8,1", "magpie:4,4", "das2:3"])
def test_models_equal_the_simulator_where_exact(op, name, params, spec):
    grid = get_grid(spec)
    for nbytes in [0] if op == "barrier" else [1024, 1 << 20]:
        schedule = get_builder(op, name).build(grid, nbytes, 1, **params)
        sim = simulate(schedule, grid).total_s
        assert predict(grid, op, name, nbytes, 1, **params) == pytest.approx(sim, rel=0.01)


@pytest.mark.parametrize("op", OPS)
def test_planned_predictions_track_the_simulator(op):
    """Every algorithm's tuned model on WAN grids, 64 KiB and up: within 30% (most are
    exact; the recorded exceptions are the flat-network algorithms on non-power-of-two
    grids, whose later rounds overtake earlier ones on shared links)."""
    worst = 0.0
    for spec in ("magpie:8,1", "magpie:4,4"):
        grid = get_grid(spec)
        for nbytes in [0] if op == "barrier" else [65536, 1 << 20]:
            for cand in plan(grid, Call(op, nbytes, 0)).candidates:
                sim = simulate(
                    get_builder(op, cand.algorithm).build(grid, nbytes, 0, **cand.params), grid
                ).total_s
                worst = max(worst, abs(cand.predicted_s - sim) / sim)
    assert worst <= 0.30


def test_auto_is_close_to_its_prediction_on_the_papers_grid():
    """The model of the plan ``auto`` chooses is within 12% of its simulation (the
    packed reduce's pipeline fill is the farthest, 11%); where the check simulated
    the plan, it carries that simulation."""
    grid = magpie(8, 1)
    for op in OPS:
        nbytes = 0 if op == "barrier" else 1 << 20
        p = plan(grid, Call(op, nbytes))
        sim = simulate(p.build(grid), grid).total_s
        assert p.predicted_s == pytest.approx(sim, rel=0.12), op
        assert p.simulated_s in (None, sim), op


# -- seed 002's all-to-all bounds and contention ratio -------------------------------------
def test_rotated_direct_exchange_lies_between_table3_bounds_on_a_lan():
    for P in (2, 4, 8, 16):
        grid = lan(P)
        for nbytes in (64, 4096, 1 << 20):
            bounds = alltoall_bounds(grid, nbytes)
            sim = simulate(direct_rotated_alltoall(grid, nbytes), grid).total_s
            assert bounds.lower * (1 - 1e-9) <= sim <= bounds.upper * (1 + 1e-9)


def test_direct_exchange_lies_between_the_bounds_on_grids():
    for grid in (magpie(8, 1), magpie(4, 4), magpie(2, 8), das2(3)):
        for nbytes in (1024, 65536, 1 << 20):
            bounds = alltoall_bounds(grid, nbytes)
            sim = simulate(direct_alltoall(grid, nbytes), grid).total_s
            assert bounds.lower * (1 - 1e-3) <= sim <= bounds.upper * (1 + 1e-3)


def test_table3_on_one_network():
    grid = lan(6)
    net = grid.clusters[0].lan
    b = alltoall_bounds(grid, 4096)
    assert b.lower == pytest.approx(5 * net.os(4096) + 5 * net.or_(4096) + net.L)
    assert b.upper == pytest.approx(5 * net.g(4096) + 5 * net.or_(4096) + net.L)
    assert b.predict(2 / 3) == pytest.approx(b.lower + (b.upper - b.lower) * 2 / 3)


def test_contention_fit_recovers_a_known_ratio():
    grid = lan(8)
    times = [(n, alltoall_bounds(grid, n).predict(0.4)) for n in (256, 4096, 65536)]
    assert fit_contention(grid, times) == pytest.approx(0.4)
    assert fit_contention(grid, times, relative=False) == pytest.approx(0.4)
    assert least_squares_ratio([(1, 3, 2)]) == pytest.approx(0.5)
    with pytest.raises(ParameterError, match="no sample"):
        least_squares_ratio([(1, 1, 2)])


def test_simulated_contention_is_memoised_and_used_by_the_model():
    grid = lan(8)
    gamma = simulated_contention(grid, "direct-rotated")
    assert simulated_contention(lan(8), "direct-rotated") == gamma  # by fingerprint
    b = alltoall_bounds(grid, 4096)
    rotated = predict(grid, "alltoall", "direct-rotated", 4096, contention=gamma)
    assert rotated == pytest.approx(b.predict(gamma))
    model = MODELS["alltoall", "direct"]
    assert model(grid, 4096, contention=2 / 3) == pytest.approx(b.predict(2 / 3))


# -- bounds -----------------------------------------------------------------------------
@pytest.mark.parametrize("op", OPS)
def test_no_algorithm_beats_the_bound(op):
    for grid in (lan(6), magpie(8, 1), magpie(4, 2), das2(2)):
        for nbytes in [0] if op == "barrier" else [8, 1 << 20]:
            bound = collective_bound(grid, op, nbytes, 1).time_s
            assert bound > 0
            for cand in plan(grid, Call(op, nbytes, 1)).candidates:
                schedule = get_builder(op, cand.algorithm).build(grid, nbytes, 1, **cand.params)
                assert simulate(schedule, grid).total_s >= bound * (1 - 1e-9), cand.algorithm


def test_bounds_of_the_papers_grid():
    grid = magpie(8, 1)
    MB = 1 << 20
    wan = grid.wan(0, 1)
    one_link = MB / wan.bandwidth + wan.L  # 1 MB over one 1 MB/s link
    for op in ("scatter", "gather", "allgather", "alltoall"):
        assert collective_bound(grid, op, MB).time_s == pytest.approx(one_link, rel=1e-3)
    assert collective_bound(grid, "barrier", 0).time_s == pytest.approx(wan.L + wan.os(1))
    assert collective_bound(grid, "reduce", MB).time_s < one_link
    assert collective_bound(lan(1), "allreduce", 8).time_s == 0
    with pytest.raises(ParameterError, match="no bound"):
        collective_bound(grid, "nosuch", 8)


def test_plan_reports_the_bound_of_every_op():
    for op in OPS:
        p = plan("magpie:4,2", Call(op, 0 if op == "barrier" else 4096))
        assert math.isfinite(p.bound_s) and 0 < p.bound_s <= p.predicted_s * (1 + 1e-9)


# -- seed 000's headline figures ----------------------------------------------------------
def test_seed000_scatter_headline_in_simulation():
    grid = magpie(8, 1)
    MB = 1 << 20
    segmented = plan(grid, Call("scatter", MB), PlanOptions(algo="magpie-segmented"))
    original = plan(grid, Call("scatter", MB), PlanOptions(algo="magpie-original"))
    seg_s = simulate(segmented.build(grid), grid).total_s
    orig_s = simulate(original.build(grid), grid).total_s
    assert seg_s == pytest.approx(1.078, rel=0.10)  # paper: 1078 ms
    assert orig_s == pytest.approx(7.437, rel=0.10)  # paper: 7437 ms


# -- the command line -------------------------------------------------------------------
def _cli(capsys, *argv: str) -> tuple[int, str, str]:
    from gridcoll.cli.main import main

    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("op", OPS)
def test_plan_and_simulate_take_every_op_with_the_same_json_fields(capsys, op):
    import json

    size = [] if op == "barrier" else ["--size", "64KiB"]
    code, out, _ = _cli(capsys, "plan", "--grid", "magpie:4,2", "--op", op, *size, "--json")
    assert code == 0
    plan_fields = json.loads(out)
    assert plan_fields["op"] == op and plan_fields["bound_s"] > 0
    code, out, _ = _cli(capsys, "plan", "--grid", "magpie:4,2", "--size", "64KiB", "--json")
    assert set(json.loads(out)) == set(plan_fields)  # the broadcast's fields
    code, out, _ = _cli(capsys, "simulate", "--grid", "magpie:4,2", "--op", op, *size, "--json")
    data = json.loads(out)
    assert code == 0 and data["simulated_s"] > 0


def test_cli_non_commutative_and_its_errors(capsys):
    import json

    code, out, _ = _cli(
        capsys, "simulate", "--grid", "magpie:2,3", "--op", "reduce", "--size", "4KiB",
        "--root", "4", "--non-commutative", "--json",
    )  # fmt: skip
    assert code == 0 and json.loads(out)["params"]["commutative"] is False
    code, out, err = _cli(
        capsys, "plan", "--grid", "magpie:2,3", "--op", "reduce", "--size", "4KiB",
        "--algo", "dary-segmented", "--non-commutative",
    )  # fmt: skip
    assert code == 2 and "needs a commutative operation" in err and out == ""
    code, _, err = _cli(capsys, "plan", "--grid", "magpie:2,3", "--op", "scatter")
    assert code == 2 and "required: --size" in err
