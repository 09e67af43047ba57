"""One set of cases, run on every executor: the model, the simulator and the runtime.

gridcoll runs a planned collective three ways: the closed-form P-LogP **model** the
tuner searches with (:mod:`gridcoll.models`, through :func:`gridcoll.tune.plan`'s
prediction), the event-driven **simulator** (:func:`gridcoll.simulate.simulate` on the
plan's schedule) and the MPI **runtime** (:class:`gridcoll.Comm` under ``mpiexec``
with the WAN emulated, through :func:`gridcoll.runtime.worker.run_batch`). As
mpi4py's own suite does (``test/test_util_pkl5.py``: one ``BaseTest`` with the test
methods, a subclass per implementation), :class:`BaseExecutor` states what holds on
every executor and :class:`TestModel`, :class:`TestSimulator` and :class:`TestRuntime`
each implement ``execute(case)`` returning an :class:`Outcome`:

* the call completes, with a positive finite time, on the algorithm asked for;
* the time is at least the grid's physical bound
  (:func:`gridcoll.network.bounds.collective_bound`) less the executor's slack;
* where the executor carries data, every rank ends with exactly the expected bytes
  (the simulator: :func:`gridcoll.schedule.validate`; the runtime: the worker's exact
  comparison of every rank's buffer, and for a barrier that no rank left before the
  last one entered);
* the simulator agrees with the model within the tolerance the planner's predictions
  are held to (``test_planned_predictions_track_the_simulator`` in
  ``tests/test_collectives.py`` and ``tests/test_reduce_scatter_scan.py``: 30%).

Every case runs on one small grid (:data:`GRID`: 5 ranks in 3 clusters, interleaved,
the fast WAN of the emulated runtime tests), so the runtime runs them all in one
``mpiexec`` launch.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gridcoll.errors import ScheduleError
from gridcoll.network import grid_from_dict
from gridcoll.network.bounds import collective_bound
from gridcoll.schedule import validate
from gridcoll.simulate import simulate
from gridcoll.tune import Call, PlanOptions, plan

# -- the grid and the cases ------------------------------------------------------------

LAN = {"latency": "20us", "bandwidth": "500MB/s", "overhead": "10us"}


def _route(a: str, b: str) -> dict:
    slow = {a, b} == {"A", "C"}
    plogp = {
        "latency": "2ms" if slow else "1ms",
        "bandwidth": "50MB/s" if slow else "100MB/s",
        "overhead": "20us",
    }
    return {"from": a, "to": b, "plogp": plogp}


GRID = grid_from_dict(
    {
        "format": "gridcoll-grid/1",
        "name": "executors-A2-B2-C1",
        "clusters": [
            {"name": name, "ranks": n, "lan": LAN} for name, n in (("A", 2), ("B", 2), ("C", 1))
        ],
        "routes": [_route(a, b) for a in "ABC" for b in "ABC" if a != b],
        "placement": ["A", "B", "A", "C", "B"],
    }
)
"""The fast grid of ``tests/test_runtime_mpi.py`` (1 ms / 100 MB/s WAN, A<->C 2 ms /
50 MB/s; non-zero overheads): quick to emulate, every cut crosses the WAN."""


@dataclass(frozen=True)
class Case:
    """One collective call and the algorithm it is planned with (the planner picks the
    parameters not given). ``commutative=False`` reduces 2x2 int64 matrices
    (``itemsize`` 32), the only non-commutative operation the runtime verifies."""

    op: str
    algo: str
    nbytes: int = 0
    root: int = 0
    params: tuple[tuple[str, int], ...] = ()
    commutative: bool = True

    @property
    def call(self) -> Call:
        itemsize = 1 if self.commutative else 32
        return Call(self.op, self.nbytes, self.root, itemsize, commutative=self.commutative)

    @property
    def options(self) -> PlanOptions:
        return PlanOptions(algo=self.algo, params=dict(self.params))

    def __str__(self) -> str:
        order = "" if self.commutative else ",non-commutative"
        return f"{self.op}:{self.algo}:{self.nbytes}B:root{self.root}{order}"


CASES = (
    Case("bcast", "flat", 1, 1),
    Case("bcast", "binomial", 1000, 0),
    Case("bcast", "chain-segmented", 8192, 4, (("segment_size", 2048),)),
    Case("bcast", "magpie-segmented", 65536, 2),
    Case("bcast", "multitree", 65536, 3),
    Case("scatter", "flat", 1000, 0),
    Case("scatter", "binomial", 4096, 3),
    Case("scatter", "cluster-aware", 65536, 2),
    Case("scatter", "multipath", 10000, 3, (("segment_size", 3000),)),
    Case("gather", "multipath", 10000, 4, (("segment_size", 3000),)),
    Case("gather", "chain", 1000, 1),
    Case("gather", "magpie-original", 4096, 0),
    Case("gather", "chain-pipelined", 65536, 4),
    Case("allgather", "ring", 1000),
    Case("allgather", "recursive-doubling", 4096),
    Case("allgather", "magpie-segmented", 65536),
    Case("alltoall", "direct", 1000),
    Case("alltoall", "direct-rotated", 4096),
    Case("alltoall", "cluster-aware", 8192),
    Case("alltoall", "direct-segmented", 10000, 0, (("segment_size", 3000),)),
    Case("alltoall", "multipath", 10000, 0, (("segment_size", 3000),)),
    Case("reduce", "binomial", 1000, 2),
    Case("reduce", "two-level", 65536, 0),
    Case("reduce", "chain-segmented", 4096, 3, commutative=False),
    Case("allreduce", "recursive-doubling", 1000),
    Case("allreduce", "rabenseifner", 4096),
    Case("allreduce", "two-level", 65536),
    Case("reduce_scatter", "pairwise", 1000),
    Case("reduce_scatter", "two-level", 8192),
    Case("reduce_scatter", "reduce-then-scatter", 4096, commutative=False),
    Case("scan", "chain", 1000),
    Case("scan", "recursive-doubling", 4096),
    Case("scan", "chain-segmented", 65536, commutative=False),
    Case("exscan", "chain", 4096),
    Case("exscan", "recursive-doubling", 1024, commutative=False),
    Case("barrier", "dissemination"),
    Case("barrier", "two-level"),
)
"""Every collective gridcoll plans, a few algorithms each, sizes up to 64 KiB."""

AGREEMENT = 0.30
"""How far the simulator may lie from the model's prediction (relative): the planner's
predictions track the simulator within 30% (``tests/test_collectives.py`` and
``tests/test_reduce_scatter_scan.py``, ``test_planned_predictions_track_the_simulator``)."""


@dataclass(frozen=True)
class Outcome:
    """What an executor reports of one case: its time, the algorithm it ran, and
    whether every rank ended with the expected bytes (``None``: it carries no data)."""

    time_s: float
    algorithm: str
    delivered: bool | None
    detail: str = ""


@functools.cache
def _plan(case: Case):
    # a standing clock: a busy machine cannot cut the search short (conftest's
    # no_wall_clock fixture, as an argument so hypothesis can share it)
    return plan(GRID, case.call, case.options, clock=lambda: 0.0)


def _model(case: Case) -> Outcome:
    p = _plan(case)
    return Outcome(p.predicted_s, p.algorithm, None)


def _simulator(case: Case) -> Outcome:
    p = _plan(case)
    schedule = p.build(GRID)
    try:
        validate(schedule)
    except ScheduleError as err:
        delivered, detail = False, str(err)
    else:
        delivered, detail = True, ""
    return Outcome(simulate(schedule, GRID).total_s, p.algorithm, delivered, detail)


# -- what holds on every executor -------------------------------------------------------


class BaseExecutor:
    """The test methods; a subclass sets ``execute`` and its tolerances."""

    BOUND_SLACK = 1e-9
    """Relative amount the executor's time may fall below the physical bound."""

    AGREEMENT: float | None = AGREEMENT
    """Relative distance allowed from the model's prediction; ``None``: not compared."""

    def execute(self, case: Case) -> Outcome:
        raise NotImplementedError

    @pytest.mark.parametrize("case", CASES, ids=str)
    def test_the_call_completes_on_the_algorithm_asked_for(self, case):
        outcome = self.execute(case)
        assert math.isfinite(outcome.time_s) and outcome.time_s > 0, outcome
        assert outcome.algorithm == case.algo

    @pytest.mark.parametrize("case", CASES, ids=str)
    def test_no_faster_than_the_physical_bound(self, case):
        bound = collective_bound(GRID, case.op, case.nbytes, case.root).time_s
        assert bound > 0
        assert self.execute(case).time_s >= bound * (1 - self.BOUND_SLACK)

    @pytest.mark.parametrize("case", CASES, ids=str)
    def test_every_rank_ends_with_the_expected_bytes(self, case):
        outcome = self.execute(case)
        if outcome.delivered is None:
            pytest.skip(f"{type(self).__name__} carries no data")
        assert outcome.delivered, outcome.detail

    @pytest.mark.parametrize("case", CASES, ids=str)
    def test_agrees_with_the_model(self, case):
        if self.AGREEMENT is None:
            pytest.skip(f"{type(self).__name__}'s time is not compared with the model")
        predicted = _model(case).time_s
        assert self.execute(case).time_s == pytest.approx(predicted, rel=self.AGREEMENT)


DRAWN = st.tuples(st.sampled_from(CASES), st.integers(1, 1 << 17))
"""Any case at any size (the executors that cost no launch draw them)."""


def _drawn(draw: tuple[Case, int]) -> Case:
    case, nbytes = draw
    if case.op == "barrier":
        nbytes = 0
    elif not case.commutative:
        nbytes = 32 * max(1, nbytes // 32)
    return replace(case, nbytes=nbytes, params=())


class DrawnSizes(BaseExecutor):
    """A drawn case holds what a listed one does: at or above the bound, its bytes
    delivered (each subclass draws with its own ``@given`` test, as hypothesis asks)."""

    def check_drawn(self, case: Case) -> None:
        outcome = self.execute(case)
        bound = collective_bound(GRID, case.op, case.nbytes, case.root).time_s
        assert outcome.time_s >= bound * (1 - self.BOUND_SLACK)
        assert outcome.delivered in (None, True), outcome.detail


class TestModel(DrawnSizes):
    AGREEMENT = 0.0  # it is the model

    def execute(self, case: Case) -> Outcome:
        return _model(case)

    @given(DRAWN)
    def test_property_any_size(self, draw):
        self.check_drawn(_drawn(draw))


class TestSimulator(DrawnSizes):
    def execute(self, case: Case) -> Outcome:
        return _simulator(case)

    @given(DRAWN)
    def test_property_any_size(self, draw):
        self.check_drawn(_drawn(draw))


# -- the runtime: every case in one launch ----------------------------------------------


@functools.cache
def _runtime_launch():
    """One ``mpiexec`` launch of every case over :data:`GRID` with the WAN emulated
    (each case once; the worker compares every rank's bytes). Cached, a failed launch
    too: the tests report it instead of launching again."""
    from gridcoll.runtime.worker import Batch, run_batch

    batch = Batch(calls=tuple((c.call, c.options) for c in CASES), repeat=1, timeout=60.0)
    return run_batch(GRID, batch, emulate=True)


@pytest.mark.slow
@pytest.mark.mpi
class TestRuntime(BaseExecutor):
    BOUND_SLACK = 0.1
    """The measurement noise the runtime tests already allow below the bound
    (``test_run_op_json`` in ``tests/test_collectives_mpi.py``). Above it the measured
    time is free: a busy machine only slows a run down. The emulator delays only the
    WAN (ranks in one cluster talk at shared-memory speed, above the LAN's P-LogP
    figures), but every cut of :data:`GRID`'s bounds crosses the WAN."""

    AGREEMENT = None
    """Wall-clock time on a shared machine: no figure to hold it to."""

    def execute(self, case: Case) -> Outcome:
        pytest.importorskip("mpi4py")
        outcome = _runtime_launch()
        assert outcome.ok, outcome.describe_failure() or outcome.stderr[-3000:]
        assert len(outcome.result["cases"]) == len(CASES)
        row = outcome.result["cases"][CASES.index(case)]
        assert (row["op"], row["size"], row["root"]) == (case.op, case.nbytes, case.root)
        return Outcome(min(row["measured_all_s"]), row["algorithm"], bool(row["verified"]))
