"""Per-call selection: search every builder's parameters, predict, pick the fastest.

:func:`plan` is what a collective call asks before it runs: for each builder of the
collective (or the one named by ``algo``) it searches the tunable parameters with seed
000's heuristics (:func:`gridcoll.tune.search.heuristic_search`) on the builder's model
(:data:`gridcoll.models.MODELS`), and returns a :class:`Plan` holding every candidate,
fastest first, and the physical bound of the call for comparison.

Planning budget (``budget_s``). Without one, ``auto`` considers every builder except the
*anytime* ones (simulated annealing, :attr:`Builder.anytime`), whose time has no natural
end; they are listed in :attr:`Plan.skipped`. With one, the anytime tree families share
:data:`ANYTIME_SHARE` of it, and every other builder that declares a nominal planning
cost (:attr:`Builder.cost`) is skipped once the costs so far would exceed the rest.
Both are *nominal* seconds, functions of the grid's size, never wall-clock readings:
the annealing gets ``evaluations = share / cost-per-evaluation`` cost evaluations, so a
plan depends only on its arguments and every MPI rank of a communicator makes the same
choice. A named anytime builder gets the whole budget (and the paper's fixed run count,
50 + 25 annealings, without one).

The deadline. Nominal costs are estimates, so with a budget every stage also answers to
a :class:`~gridcoll.tune.deadline.Deadline` of ``budget_s`` plus a small grace, kept on
the process's CPU time (the work done: the same on a busy machine as on an idle one): the
builders are searched while it has not passed, each search stopping short with its
best so far (:func:`gridcoll.tune.search.heuristic_search`); a simulated annealing run
is estimated before it starts (:func:`gridcoll.algorithms.annealing.nominal_setup_s`
plus its evaluations) and given fewer evaluations, or skipped, if it would not end in
time; the physical bound is computed first, if its estimate (:data:`BOUND_PAIR_S`)
fits, and each simulation of the check only if its estimate
(:data:`SIMULATED_MESSAGE_S`) still does.
Whatever it cut is listed in :attr:`Plan.budget_note` (and the builders in
:attr:`Plan.skipped`). A plan the deadline did not touch is the nominal budget's
plan, deterministic; planning without a budget (``gridcoll.Comm``'s) has no deadline.

One entry point. Every caller plans through :func:`plan`: the command line (``plan``,
``simulate``, ``compare``, ``run``, ``demo``), :class:`gridcoll.Comm` and the benchmarks,
with two frozen values (:mod:`gridcoll.tune.call`): the :class:`~gridcoll.tune.Call`
(collective, size, root, item size, counts, commutative) and the
:class:`~gridcoll.tune.PlanOptions`. What differs between the callers is a field of the
options, never code outside it: a forced algorithm (``algo``), fixed parameters
(``params``, a segment size included), the MPI library's own collective (``native``),
the runtime's per-message host overhead (``host_overhead``: the plan is made on
:meth:`Grid.with_host_overhead`), the budget (``budget_s``), the simulator check
(``check``) and the frugal tolerance (``frugal``). The result is always a
:class:`Plan`; its ``simulated_s`` is the simulation of that very plan.

Pruning. ``auto`` searches the builders in increasing order of the lower bound on
their models (:func:`gridcoll.models.optimistic_s`), and does not search one whose
bound exceeds :data:`VERIFY_WITHIN` times the best prediction so far: it could neither
win nor be checked on the simulator. If the check then puts the best estimate above a
pruned builder's bound, that builder is searched after all, so pruning never changes a
choice. On 1,024 and 10,000 ranks it is most of the speed of a cold plan
(``bench/planning_time.py``).

Simulator check. ``auto`` then simulates its few best-predicted candidates
(:data:`VERIFY_TOP`, :data:`VERIFY_WITHIN`, at most :data:`VERIFY_MESSAGES` messages;
for the collectives other than the broadcast, on up to :data:`VERIFY_RANKS` ranks)
and ranks every candidate on its best estimate, the simulated time where it has one and
the prediction elsewhere: the models are the search's fast upper estimates, the
simulator is the judge of the last few (deterministic too).
"""

from __future__ import annotations

import contextlib
import functools
import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from gridcoll.algorithms.annealing import nominal_setup_s
from gridcoll.algorithms.registry import Builder, get_builder, list_builders
from gridcoll.errors import GridcollError, ParameterError, Unfeasible, UnknownAlgorithm
from gridcoll.models.alltoall import CONTENTION_SIZES, DEFAULT_CONTENTION
from gridcoll.models.registry import MODELS, optimistic_s
from gridcoll.network.bounds import collective_bound
from gridcoll.network.grid import Grid
from gridcoll.network.gridfile import check_complete
from gridcoll.network.presets import get_grid
from gridcoll.schedule.ir import OPERATIONS, Schedule
from gridcoll.schedule.transform import PERSONALISED
from gridcoll.tune import deadline as _deadline
from gridcoll.tune.cache import PlanCache
from gridcoll.tune.call import Call, PlanOptions
from gridcoll.tune.contention import FITTED, MAX_FIT_RANKS, contention_model
from gridcoll.tune.deadline import Deadline
from gridcoll.tune.decision import NATIVE, ROOTED, Candidate, Plan, build_schedule
from gridcoll.tune.search import heuristic_search
from gridcoll.units import format_size, format_time

__all__ = [
    "ANYTIME_SHARE",
    "BOUND_PAIR_S",
    "DEFAULT_BUDGET_S",
    "MIN_EVALUATIONS",
    "NATIVE",
    "ROOTED",
    "SIMULATED_MESSAGE_S",
    "VERIFY_RANKS",
    "Candidate",
    "Plan",
    "native_reason",
    "plan",
]

ANYTIME_SHARE = 0.5
"""Share of a planning budget that ``auto`` gives the anytime builders, split evenly
among their tree families."""

MIN_EVALUATIONS = 1000
"""An anytime builder that the budget would give fewer cost evaluations is skipped."""

VERIFY_TOP = 3
VERIFY_WITHIN = 1.25
VERIFY_MESSAGES = 8000
"""``auto`` simulates its best-predicted candidates, at most
:data:`VERIFY_TOP` of them within :data:`VERIFY_WITHIN` times the best prediction and
:data:`VERIFY_MESSAGES` messages in all (about 20 us each: 0.16 s), and ranks those by
the simulated time: the per-edge models are upper estimates whose error differs from
tree to tree (e.g. a segmented tree's ``(k-1) gamma + lam`` when its edges differ)."""

VERIFY_RANKS = 64
"""The check of a collective other than the broadcast builds its candidates' schedules
to count their messages (a personalised collective's can hold ``P^2`` of them): by
default it runs on grids of at most this many ranks (``check=True`` forces it)."""

SIMULATED_MESSAGE_S = 20e-6
"""Nominal seconds the simulator spends per message (the event loop's rate; the
heap-free replay is faster): a simulation's estimate against the planning deadline."""

BOUND_PAIR_S = 2e-5
"""Nominal seconds of the physical bound per ordered cluster pair (its max-flows on the
cluster quotient: 0.36-0.48 s at 200 clusters, 1.9-2.5 s at 400, measured on the
development machine): its estimate against the planning deadline."""


def _segment_of(params: dict[str, Any], nbytes: int) -> int:
    m = params.get("segment_size", params.get("wan_segment_size", nbytes))
    return min(int(m), nbytes)


def _builders(op: str, algo: str) -> list[Builder]:
    """The builders to consider; UnknownAlgorithm for an unknown op or name."""
    if algo == NATIVE:
        if op not in OPERATIONS:
            raise UnknownAlgorithm(f"unknown collective {op!r}; choose one of: {OPERATIONS}")
        return []
    if algo != "auto":
        return [get_builder(op, algo)]
    builders = list_builders(op)
    if not builders:
        ops = sorted({b.op for b in list_builders()})
        raise UnknownAlgorithm(f"no algorithms are registered for {op!r}; choose one of: {ops}")
    return builders


REDUCTIONS = ("reduce", "allreduce", "reduce_scatter", "scan", "exscan")
"""The collectives that combine data and take ``commutative``."""


def _for_operation(call: Call, algo: str, builders: list[Builder]) -> list[Builder]:
    """The builders that can serve the call: commutative-only trees are dropped for a
    non-commutative operation, and refused by name (before anything is built)."""
    if call.commutative or call.op not in REDUCTIONS:
        return builders
    if algo != "auto" and builders and builders[0].commutative_only:
        ordered = [b.name for b in list_builders(call.op) if not b.commutative_only]
        raise ParameterError(
            f"{call.op} algorithm {algo!r} reorders operands and needs a commutative "
            f"operation; for a non-commutative one use one of: {', '.join(ordered)}"
        )
    return [b for b in builders if not b.commutative_only]


def _check_on(grid: Grid, call: Call) -> None:
    """The checks of ``call`` that need the grid (the rest are :class:`Call`'s own): the
    root is a rank, an uneven call has one count per block."""
    grid.check_rank(call.root, "root")
    if call.counts is not None:
        P = grid.nranks
        nblocks = P * P if call.op == "alltoall" else P
        if len(call.counts) != nblocks:
            raise ParameterError(
                f"{call.op} on {P} ranks has {nblocks} blocks, got {len(call.counts)} counts"
            )


def _model_size(call: Call) -> int:
    """The size the models are evaluated at: ``nbytes``, or an uneven call's mean block."""
    return call.nbytes if call.counts is None else _mean_block(call.counts, call.itemsize)


def _mean_block(counts: tuple[int, ...], itemsize: int) -> int:
    """The mean block, rounded up to whole items: the size the models are evaluated at
    for an uneven call (equal blocks of the same total, within an item per block)."""
    items = -(-sum(counts) // (itemsize * len(counts)))
    return max(items, 1) * itemsize


def _pinned(builder: Builder, params: dict[str, Any], nbytes: int) -> tuple[dict, dict, str]:
    """Split the caller's ``params`` for one builder: the tunable ones it pins (a
    ``segment_size`` pins every segment-size parameter the builder has, clamped to the
    message), the others passed to its model and builder as they are, and a note."""
    pinned: dict[str, Any] = {}
    note = ""
    for name in builder.params:
        value = params.get(name)
        if value is None and name.endswith("segment_size"):
            value = params.get("segment_size")
        if value is None:
            continue
        if name.endswith("segment_size") and value > nbytes > 0:
            note = (
                f"{name} {format_size(value)} fixed by the caller is larger than the "
                f"message: clamped to {format_size(nbytes)}"
            )
            value = nbytes
        pinned[name] = value
    extra = {k: v for k, v in params.items() if k not in builder.params and k != "segment_size"}
    return pinned, extra, note


def _candidate(
    builder: Builder,
    grid: Grid,
    nbytes: int,
    root: int,
    itemsize: int,
    fixed: dict[str, Any] | None = None,
    params: dict[str, Any] | None = None,
    deadline: Deadline | None = None,
    frugal: float = 0.0,
) -> Candidate:
    """The builder's best parameters: ``fixed`` ones (an annealing budget,
    ``commutative``) and the caller's ``params`` (:func:`_pinned`) kept, the rest
    searched (cut short by ``deadline``), then made frugal (:func:`_frugal`); raises
    GridcollError if it cannot be modelled."""
    model = MODELS.get((builder.op, builder.name))
    if model is None:
        raise Unfeasible("no model is registered")
    if deadline is None or _fit_in_time(builder, grid, deadline):  # else the default
        model = contention_model(model, grid, builder.op, builder.name)
    pinned, extra, note = _pinned(builder, params or {}, nbytes)
    fixed = {**(fixed or {}), **extra}
    if fixed:
        model = functools.partial(model, **fixed)
    if builder.op == "barrier":  # no size, no parameters: one evaluation
        seconds = model(grid, 0, root, itemsize=itemsize)
        return Candidate(builder.name, fixed, 0, seconds, "one model evaluation")
    found = heuristic_search(
        grid,
        nbytes,
        root,
        model=model,
        params=builder.params,
        itemsize=itemsize,
        pinned=pinned,
        deadline=deadline,
    )
    if found.refused and deadline is not None:
        deadline.note(f"the search of {builder.name} was cut short")
    if deadline is not None and not builder.anytime and builder.cost is None:
        deadline.first_eval_s = max(deadline.first_eval_s, found.first_s)
    if not math.isfinite(found.predicted_s):
        raise Unfeasible(f"the model predicts {found.predicted_s!r}")
    chosen = {**fixed, **found.params}
    predicted = found.predicted_s
    reasoning = f"{note}; {found.reasoning}" if note else found.reasoning
    if frugal > 0:
        free = [k for k in found.params if k.endswith("segment_size") and k not in pinned]
        chosen, predicted, why = _frugal(
            model, grid, nbytes, root, itemsize, chosen, predicted, free, frugal, fixed
        )
        reasoning = f"{reasoning}; {why}" if why else reasoning
    m = _segment_of(chosen, nbytes)
    return Candidate(builder.name, chosen, m, predicted, reasoning)


FRUGAL = 0.01
"""The ``frugal`` tolerance :class:`gridcoll.Comm` plans with (:func:`plan`)."""


def _frugal(
    model: Callable[..., float],
    grid: Grid,
    nbytes: int,
    root: int,
    itemsize: int,
    chosen: dict[str, Any],
    predicted: float,
    free: list[str],
    frugal: float,
    fixed: dict[str, Any],
) -> tuple[dict[str, Any], float, str]:
    """Double the searched segment sizes ``free`` together while the model stays within
    ``(1 + frugal)`` of the search's best ``predicted``: the largest such segments, so
    the fewest messages. The model prices a message's time, not the CPU each costs the
    ranks' other work (a non-blocking call's overlapped computation, ranks sharing
    cores), so a 0.3 % predicted gain bought with 8 times the messages (4 MiB
    allreduce on ``das2:4``: 8 KiB segments, 6,144 messages, against 64 KiB, 768) is
    not taken. O(log(M / m)) model evaluations. Returns (params, prediction, note)."""
    if not free:
        return chosen, predicted, ""
    limit = (1.0 + frugal) * predicted
    best, best_s = chosen, predicted
    trial = dict(chosen)
    while all(trial[k] < nbytes for k in free):
        trial = {**trial, **{k: min(2 * trial[k], nbytes) for k in free}}
        try:
            seconds = model(
                grid,
                nbytes,
                root,
                itemsize=itemsize,
                **{k: v for k, v in trial.items() if k not in fixed},
            )
        except GridcollError:
            break
        if not seconds <= limit:
            break
        best, best_s = trial, seconds
    if best is chosen:
        return chosen, predicted, ""
    was = _segment_of(chosen, nbytes)
    now = _segment_of(best, nbytes)
    return (
        best,
        best_s,
        (
            f"frugal: segments of {format_size(now)} instead of {format_size(was)} "
            f"({best_s / predicted - 1:+.1%} predicted, {now // max(was, 1)}x fewer messages)"
        ),
    )


def _fit_in_time(builder: Builder, grid: Grid, deadline: Deadline) -> bool:
    """Whether the all-to-all contention fit of ``builder`` (:data:`FITTED`: four
    simulations of ``P^2`` messages, :func:`gridcoll.tune.contention.simulated_contention`)
    ends before the search's deadline; if not, the model takes seed 002's default ratio
    (noted). True for every other builder."""
    if builder.op != "alltoall" or builder.name not in FITTED:
        return True
    if not 2 <= grid.nranks <= MAX_FIT_RANKS:
        return True  # no simulation: the default ratio anyway
    estimate = deadline.scaled(len(CONTENTION_SIZES) * grid.nranks**2 * SIMULATED_MESSAGE_S)
    if deadline.allows(estimate, search=True):
        return True
    deadline.note(
        f"the contention of {builder.name} was not fitted (about {format_time(estimate)}): "
        f"seed 002's {DEFAULT_CONTENTION:.3g} used"
    )
    return False


def _allowances(
    builders: list[Builder], grid: Grid, budget_s: float | None, named: bool
) -> list[tuple[Builder, dict[str, Any] | None, str]]:
    """Per builder: the fixed parameters the budget gives it, or None and the reason it
    is skipped (module docstring). Nominal costs only: deterministic."""
    families = list(dict.fromkeys(b.anytime for b in builders if b.anytime))
    if budget_s is None or not families:
        anytime_total = 0.0
    elif all(b.anytime for b in builders):
        anytime_total = budget_s
    else:
        anytime_total = ANYTIME_SHARE * budget_s
    left = None if budget_s is None else budget_s - anytime_total
    out: list[tuple[Builder, dict[str, Any] | None, str]] = []
    for b in builders:
        if b.anytime:
            if budget_s is None:
                if named:  # the paper's fixed run count
                    out.append((b, {}, ""))
                else:
                    why = "anytime builder: auto runs it only with a planning budget (--budget)"
                    out.append((b, None, why))
                continue
            share = anytime_total / len(families)
            evaluations = int(share / b.cost(grid)) if b.cost else MIN_EVALUATIONS
            if evaluations < MIN_EVALUATIONS:
                why = f"planning budget: {share:.3g} s buys {evaluations} evaluations"
                out.append((b, None, f"{why} (< {MIN_EVALUATIONS})"))
            else:
                out.append((b, {"evaluations": evaluations}, ""))
            continue
        if left is not None and b.cost is not None:
            cost = b.cost(grid)
            if cost > left:
                why = f"planning budget: needs about {cost:.3g} s, {max(left, 0.0):.3g} s left"
                out.append((b, None, why))
                continue
            left -= cost
        out.append((b, {}, ""))
    return out


def _verified(
    grid: Grid, call: Call, candidates: list[Candidate], deadline: Deadline | None = None
) -> list[Candidate]:
    """``candidates`` (best predicted first) with the few best simulated (module
    constants :data:`VERIFY_TOP`...) moved to the front, fastest simulated first.
    Deterministic: the simulator is a pure function of the schedule and the grid; a
    simulation that ``deadline`` leaves no time for (:data:`SIMULATED_MESSAGE_S` per
    message, scaled to the machine's speed) is left out."""
    from gridcoll.simulate import simulate

    best, left = candidates[0].predicted_s, VERIFY_MESSAGES
    checked: dict[int, Candidate] = {}
    seen: dict[tuple, float] = {}  # one schedule, many names: "sa" is "sa-segmented", k=1
    for index, cand in enumerate(candidates):
        if len(seen) == VERIFY_TOP or cand.predicted_s > VERIFY_WITHIN * best:
            break
        rest = {k: v for k, v in cand.params.items() if k != "segment_size"}
        same = (cand.algorithm.removesuffix("-segmented"), cand.segment_size, repr(rest))
        if same in seen:
            checked[index] = replace(cand, simulated_s=seen[same])
            continue
        if _least_messages(grid, call, cand) > left:
            continue  # too many to simulate, known before building the schedule
        try:
            schedule = _schedule_of(grid, call, cand)
        except GridcollError:
            continue
        if schedule.nmessages > left:
            continue
        if deadline is not None and not deadline.allows(
            deadline.scaled(schedule.nmessages * SIMULATED_MESSAGE_S)
        ):
            deadline.note(f"{cand.algorithm} was not simulated")
            continue
        left -= schedule.nmessages
        seen[same] = simulate(schedule, grid).total_s
        checked[index] = replace(cand, simulated_s=seen[same])
    if not checked:
        return candidates
    # each candidate on its best estimate: simulated if checked, else its prediction (a
    # tree with too many messages to simulate still wins on a better prediction)
    ranked = sorted(
        enumerate(candidates),
        key=lambda ic: checked[ic[0]].simulated_s if ic[0] in checked else ic[1].predicted_s,
    )
    return [checked.get(i, c) for i, c in ranked]


def _least_messages(grid: Grid, call: Call, cand: Candidate) -> int:
    """The fewest messages ``cand``'s schedule can have, known without building it (0
    where unknown): a broadcast tree, and a packed tree of any collective
    (:mod:`gridcoll.algorithms.packing`), send every segment to each of the ``P - 1``
    other ranks in its own message (the allreduce twice: up and down); the segmented
    and multi-path personalised builders every segment of every block that moves
    (:mod:`gridcoll.algorithms.multipath`)."""
    segments = -(-_model_size(call) // max(cand.segment_size, 1))
    if cand.algorithm in ("multipath", "direct-segmented"):
        P = grid.nranks
        return segments * (P * (P - 1) if call.op == "alltoall" else P - 1)
    if call.op != "bcast" and cand.algorithm != "multitree":
        return 0
    if call.op in PERSONALISED:  # a block per rank
        segments *= grid.nranks
    return segments * (grid.nranks - 1) * (2 if call.op == "allreduce" else 1)


def native_reason(grid: Grid, algo: str) -> str:
    """Why the call goes to the MPI library's own collective ('' if it does not)."""
    if algo == NATIVE:
        return "the caller asked for the MPI library's own collective"
    if algo == "auto" and grid.is_single_cluster:
        # One cluster, no wide-area link: gridcoll knows nothing of this network that
        # the MPI library does not, and the library runs its tuned algorithms in C with
        # per-message costs below a microsecond, where a schedule executed from Python
        # pays the host overhead (several us per message, more when ranks share cores)
        # on every segment (bench/native.py measures it).
        return (
            "the communicator is one cluster (no wide-area link to plan around): the "
            "MPI library's own collective is faster than any schedule run from Python"
        )
    return ""


def _bound_estimate(grid: Grid) -> float:
    """Nominal seconds of the physical bound of a call on ``grid``
    (:data:`BOUND_PAIR_S` per ordered cluster pair)."""
    return BOUND_PAIR_S * grid.nclusters * max(grid.nclusters - 1, 1)


def _bound_first(grid: Grid, call: Call, deadline: Deadline) -> float:
    """With a deadline, the physical bound's time is computed before the search, if its
    estimate (at the machine's current speed) fits the whole deadline, so no overrun of
    the search can crowd it out; else NaN at once, noted."""
    estimate = deadline.scaled(_bound_estimate(grid))
    if not deadline.allows(estimate):
        deadline.note(
            f"the physical bound was not computed (about {format_time(estimate)} on "
            f"{grid.nclusters} clusters)"
        )
        return math.nan
    return _bound(grid, call)


def _bound(grid: Grid, call: Call) -> float:
    """The physical bound's time of ``call`` on ``grid`` (:func:`collective_bound`)."""
    return collective_bound(grid, call.op, call.nbytes, call.root, call.counts).time_s


def _schedule_of(grid: Grid, call: Call, cand: Candidate) -> Schedule:
    """The schedule of ``cand`` for ``call`` (uneven with the call's counts)."""
    return build_schedule(
        grid, call.op, cand.algorithm, call.nbytes, call.root, call.itemsize, cand.params,
        call.counts,
    )  # fmt: skip


def _native_plan(
    grid: Grid, call: Call, reason: str, host: float, deadline: Deadline | None = None
) -> Plan:
    """The plan that hands the call to the MPI library. Its prediction is MPICH's
    algorithm (``mpich``, where registered) on the physical grid: the library's own
    overheads, not the Python runtime's."""
    op, nbytes, root, itemsize = call.op, _model_size(call), call.root, call.itemsize
    bound = math.nan
    if deadline is not None:
        bound = _bound_first(grid, call, deadline)
    predicted = math.nan
    if (op, "mpich") in MODELS and op != "barrier":
        with contextlib.suppress(GridcollError):
            builder = get_builder(op, "mpich")
            predicted = _candidate(builder, grid, nbytes, root, itemsize, deadline=deadline)
            predicted = predicted.predicted_s
    if deadline is None:
        bound = _bound(grid, call)
    cand = Candidate(NATIVE, {}, nbytes, predicted, "the MPI library's own algorithm")
    return Plan(
        op,
        grid.name,
        call.nbytes,
        root,
        itemsize,
        NATIVE,
        {},
        nbytes,
        predicted,
        bound,
        (cand,),
        host_overhead_s=host,
        reason=reason,
        network=grid,
        budget_note=_budget_note(deadline),
        counts=call.counts,
    )


def _budget_note(deadline: Deadline | None) -> str:
    """The plan's :attr:`Plan.budget_note`: what the deadline cut, in one line."""
    if deadline is None or not deadline.cut:
        return ""
    return (
        f"planning deadline ({format_time(deadline.budget_s)} budget of planning time) "
        f"reached: {'; '.join(deadline.notes)}"
    )


def predict_mpich(grid: Grid, op: str, nbytes: int, root: int, itemsize: int) -> float:
    """MPICH's algorithm for ``op`` predicted on ``grid`` (the native plan's estimate)."""
    return _candidate(get_builder(op, "mpich"), grid, nbytes, root, itemsize).predicted_s


def _estimate(cand: Candidate) -> float:
    """A candidate's best estimate: simulated where checked, else predicted."""
    return cand.predicted_s if cand.simulated_s is None else cand.simulated_s


def _simulated(
    grid: Grid, call: Call, cand: Candidate, deadline: Deadline | None = None
) -> Candidate:
    """``cand`` with the simulator's time of its schedule (whatever its size, unless
    ``deadline`` leaves no time for it: then ``cand`` as it is, noted)."""
    from gridcoll.simulate import simulate

    schedule = _schedule_of(grid, call, cand)
    estimate = schedule.nmessages * SIMULATED_MESSAGE_S
    if deadline is not None and not deadline.allows(deadline.scaled(estimate)):
        deadline.note(
            f"the choice was not simulated ({schedule.nmessages} messages, about "
            f"{format_time(estimate)})"
        )
        return cand
    return replace(cand, simulated_s=simulate(schedule, grid).total_s)


@dataclass
class _Search:
    """The search of one :func:`plan` call over the builders it allows, stage by stage
    (:func:`_make_plan`): what it found, skipped and pruned so far."""

    grid: Grid
    """The effective grid the models are evaluated on."""
    call: Call
    options: PlanOptions
    deadline: Deadline | None
    candidates: list[tuple[Candidate, int]] = field(default_factory=list)
    """Each searched builder's best candidate, with the builder's registry index."""
    skipped: list[tuple[str, str]] = field(default_factory=list)
    pruned: list[tuple[float, int, Builder, dict]] = field(default_factory=list)
    """(model's lower bound, index, builder, fixed parameters) of the builders that
    could not beat the best found."""
    anytime: dict[str, int | None] = field(default_factory=dict)
    """Per anytime family: the evaluations the deadline allows (:func:`_anytime_in_time`)."""

    def shortlist(self, builders: list[Builder]) -> list[tuple[float, int, Builder, dict]]:
        """The builders the budget allows (:func:`_allowances`), the most promising
        first: by the lower bound on their models (:func:`gridcoll.models.optimistic_s`),
        unless a builder was named or the deadline leaves no time for the bounds."""
        call, options, deadline = self.call, self.options, self.deadline
        named, nbytes = options.named, _model_size(call)
        reduction = {"commutative": call.commutative} if call.op in REDUCTIONS else {}
        allowed = []
        allowances = _allowances(builders, self.grid, options.budget_s, named)
        for index, (builder, fixed, why) in enumerate(allowances):
            if fixed is None:
                self.skipped.append((builder.name, why))
                continue
            lower = 0.0
            if not named and (deadline is None or deadline.allows(0.0, search=True)):
                lower = optimistic_s(
                    self.grid, call.op, builder.name, nbytes, call.root, call.itemsize
                )
            elif not named:  # searched in registry order, none pruned
                deadline.note("the models' lower bounds were not computed")
            allowed.append((lower, index, builder, {**fixed, **reduction}))
        allowed.sort(key=lambda entry: entry[:2])
        return allowed

    def run(self, entries: list[tuple[float, int, Builder, dict]]) -> None:
        """Search ``entries`` in order: each builder's best parameters (:func:`_candidate`),
        unless its model's bound cannot beat the best so far (pruned), the deadline
        leaves no time for it, or it cannot be modelled (skipped, with the reason)."""
        grid, call, deadline = self.grid, self.call, self.deadline
        for lower, index, builder, fixed in entries:
            incumbent = min((c.predicted_s for c, _ in self.candidates), default=math.inf)
            if lower > VERIFY_WITHIN * incumbent:
                self.pruned.append((lower, index, builder, fixed))
                continue
            why = "" if deadline is None else _too_late(builder, grid, deadline, self.candidates)
            if why:
                self.skipped.append((builder.name, f"planning budget: {why}"))
                deadline.note("builders not searched (see skipped)")
                continue
            if builder.anytime and deadline is not None and "evaluations" in fixed:
                fixed = _anytime_in_time(builder, grid, fixed, deadline, self.anytime, self.skipped)
                if fixed is None:
                    continue
            try:
                cand = _candidate(
                    builder, grid, _model_size(call), call.root, call.itemsize, fixed,
                    self.options.fixed, deadline, self.options.frugal,
                )  # fmt: skip
                self.candidates.append((cand, index))
            except GridcollError as err:
                self.skipped.append((builder.name, str(err)))

    def ranked(self) -> list[Candidate]:
        """The candidates, best first: by prediction (ties: registry order), then, with
        the simulator check (``options.check``; default: ``auto`` broadcasts), the few
        best by simulation (:func:`_verified`). A pruned builder whose bound the checked
        best estimate exceeds is searched after all, so pruning never changes a choice."""
        call, options, deadline = self.call, self.options, self.deadline
        check = options.check
        if call.counts is not None and check is None:
            check = True
        force = check is True  # the caller wants the choice simulated, whatever its size
        if check is None:
            check = not options.named and (call.op == "bcast" or self.grid.nranks <= VERIFY_RANKS)
        self.candidates.sort(key=lambda ci: (ci[0].predicted_s, ci[1]))
        ranked = [c for c, _ in self.candidates]
        if check and _model_size(call) > 0:
            ranked = _verified(self.grid, call, ranked, deadline)
            estimate = _estimate(ranked[0])
            late = [entry for entry in self.pruned if entry[0] < estimate]
            if late:  # the check raised the best estimate above some pruned bounds
                self.pruned = [entry for entry in self.pruned if entry[0] >= estimate]
                self.run(late)
                self.candidates.sort(key=lambda ci: (ci[0].predicted_s, ci[1]))
                ranked = _verified(self.grid, call, [c for c, _ in self.candidates], deadline)
            if ranked[0].simulated_s is None and force:
                ranked[0] = _simulated(self.grid, call, ranked[0], deadline)
        if call.counts is not None:  # the models saw the mean block; the simulator the counts
            ranked = [
                c if c.simulated_s is None else replace(c, predicted_s=c.simulated_s)
                for c in ranked
            ]
            ranked.sort(key=lambda c: (c.simulated_s is None, c.predicted_s))
        return ranked

    def unfeasible(self) -> Unfeasible:
        """The error when no builder could be modelled, every reason listed."""
        budget_s = self.options.budget_s
        reasons = "; ".join(f"{name}: {why}" for name, why in self.skipped)
        hint = ""
        if budget_s is not None and any("planning budget" in why for _, why in self.skipped):
            hint = f" (a planning budget above {budget_s:g} s may allow it)"
        return Unfeasible(
            f"no {self.call.op} algorithm could be modelled on {self.grid.name!r}{hint}: {reasons}"
        )


def _make_plan(
    grid: Grid,
    call: Call,
    options: PlanOptions,
    builders: list[Builder],
    physical: Grid,
    deadline: Deadline | None = None,
) -> Plan:
    """Search every builder on ``grid`` (the effective grid), rank, check on the
    simulator (:class:`_Search`); the bound is the ``physical`` grid's. Every stage
    answers to ``deadline`` (module docstring). For an uneven call the models are
    evaluated at the mean block (:func:`_model_size`), and the schedules checked are the
    uneven ones."""
    search = _Search(grid, call, options, deadline)
    allowed = search.shortlist(builders)
    bound = math.nan
    if deadline is not None and allowed:
        bound = _bound_first(physical, call, deadline)
    search.run(allowed)
    if not search.candidates:  # at once (no bound) when the nominal budget allowed none
        raise search.unfeasible()
    ranked = search.ranked()
    best = ranked[0]
    pruned = sorted(search.pruned, key=lambda entry: entry[:2])
    lead = _estimate(best)
    skipped = search.skipped + [
        (
            builder.name,
            f"not searched: its model cannot predict below {format_time(lower)} "
            f"(models.optimistic_s), above the best found, {format_time(lead)}",
        )
        for lower, _, builder, _ in pruned
    ]
    if deadline is None:
        bound = _bound(physical, call)
    reason = ""
    if options.named and options.fixed:
        reason = f"the caller fixed algo={best.algorithm!r} with params={options.fixed!r}"
    elif options.named:
        reason = f"the caller asked for {best.algorithm!r}"
    return Plan(
        call.op,
        grid.name,
        call.nbytes,
        call.root,
        call.itemsize,
        best.algorithm,
        dict(best.params),
        best.segment_size,
        best.predicted_s,
        bound,
        tuple(ranked),
        tuple(skipped),
        options.budget_s,
        simulated_s=best.simulated_s,
        host_overhead_s=float(options.host_overhead or 0.0),
        reason=reason,
        pruned=tuple((b.name, lower) for lower, _, b, _ in pruned),
        network=grid,
        budget_note=_budget_note(deadline),
        counts=call.counts,
    )


def _too_late(builder: Builder, grid: Grid, deadline: Deadline, candidates: list) -> str:
    """Why ``builder`` is not searched before the deadline ('' if it is): a declared
    cost (one evaluation of a pairwise model, a tree's construction and search) scaled
    to the machine's speed must fit; a builder without one is estimated by the longest
    first evaluation so far, and the first builder searched needs no estimate. Annealing
    runs are estimated by :func:`_anytime_in_time`."""
    if builder.anytime:
        return ""
    if builder.cost is not None:
        estimate = deadline.scaled(builder.cost(grid))
        if not deadline.allows(estimate, search=True):
            left = max(deadline.search_left(), 0.0)
            return (
                f"needs about {format_time(estimate)} at the machine's current speed, "
                f"{format_time(left)} left before the deadline"
            )
        return ""
    if candidates and not deadline.allows(deadline.first_eval_s, search=True):
        return "its first model evaluation would end past the deadline"
    return ""


def _anytime_in_time(
    builder: Builder,
    grid: Grid,
    fixed: dict[str, Any],
    deadline: Deadline,
    decided: dict[str, int | None],
    skipped: list[tuple[str, str]],
) -> dict[str, Any] | None:
    """``fixed`` with as many annealing evaluations as the deadline allows (the nominal
    budget's when they fit), or None and the builder in ``skipped``. An annealing run
    cannot stop early and stay reproducible (the chosen ``evaluations`` must rebuild
    the same tree), so it is estimated before it starts: set-up plus evaluations at
    nominal cost, scaled to the machine's speed, must end before the deadline (the
    grace included: a named builder's evaluations are the whole budget's). The
    builders of one family share the decision (and their tree)."""
    family = builder.anytime or builder.name
    if family not in decided:
        per = builder.cost(grid) if builder.cost else 0.0
        setup, wanted = deadline.scaled(nominal_setup_s(grid)), int(fixed["evaluations"])
        per = deadline.scaled(per)
        if deadline.allows(setup + wanted * per):  # the grace included: whole budgets fit
            decided[family] = wanted
        else:
            room = max(deadline.left() - setup, 0.0)
            fits = int(room / per) if per > 0 else wanted
            decided[family] = fits if fits >= MIN_EVALUATIONS else None
            deadline.note(
                f"{family} ran {fits} of {wanted} evaluations"
                if fits >= MIN_EVALUATIONS
                else f"{family} was not run (the deadline left {fits} evaluations)"
            )
    evaluations = decided[family]
    if evaluations is None:
        skipped.append(
            (builder.name, f"planning budget: the deadline leaves < {MIN_EVALUATIONS} evaluations")
        )
        return None
    return {**fixed, "evaluations": evaluations}


def _effective(grid: Grid, host_overhead: float | None) -> Grid:
    """The grid as the runtime's software layer sees it (memoised on the grid)."""
    if not host_overhead:
        return grid
    return grid.memo.get(
        "host_overhead", float(host_overhead), lambda: grid.with_host_overhead(host_overhead), 8
    )


def plan(
    grid: Grid | str | Path,
    call: Call,
    options: PlanOptions | None = None,
    *,
    cache: PlanCache | None = None,
    clock: Callable[[], float] | None = None,
) -> Plan:
    """Choose the algorithm and parameters for one collective call.

    The one planning entry point (module docstring): every caller comes here.

    Parameters
    ----------
    grid : Grid, preset name or grid file
        Pass a :class:`Grid` object on hot paths: a name is parsed on every call.
    call : Call
        The collective call (:class:`gridcoll.tune.Call`: the collective, ``nbytes``,
        root, item size, the uneven form's counts, a non-commutative reduction),
        checked when it was made; here its root is checked against the grid, and a
        rootless collective's plan has root 0. For scatter, gather, allgather,
        all-to-all and reduce_scatter ``nbytes`` is one rank's block per peer (MPI's
        ``sendcount`` times the extent); for a reduction the vector; a barrier's is 0.
        With ``counts`` every builder serves the uneven form
        (:func:`gridcoll.schedule.transform.trimmed`): the models are evaluated at the
        mean block, exact for equal counts, and the best candidates are then checked on
        the simulator with the real counts (``check`` defaults to True).
        A non-commutative reduction leaves out the builders whose trees reorder
        operands (:attr:`Builder.commutative_only`), every candidate combines in rank
        order, and the chosen parameters carry ``commutative`` to the builder.
    options : PlanOptions, optional
        How to answer (:class:`gridcoll.tune.PlanOptions`; default: every builder, no
        budget). ``algo``: ``"auto"``, a builder name or ``"native"``. ``params``: kept
        as given, only the others searched; with ``auto`` they apply to every
        candidate that has them; a ``segment_size`` fixes every segment-size
        parameter, clamped to the message (the plan's reasoning says so).
        ``budget_s``: lets ``auto`` run the simulated annealing builders and bounds the
        others' declared costs; the plan depends on it deterministically, unless
        planning would overrun it in CPU time: every stage then stops at the
        deadline (``budget_s`` plus :data:`gridcoll.tune.deadline.GRACE_S`), and
        :attr:`Plan.budget_note` says what was cut. ``host_overhead``: the plan is made
        on ``grid.with_host_overhead(host_overhead)`` and :attr:`Plan.network` is it.
        ``native``: ``auto`` chooses the MPI library's own collective on a one-cluster
        grid (:attr:`Plan.reason` says why). ``check``: simulate the best candidates
        (at most :data:`VERIFY_TOP` within :data:`VERIFY_WITHIN` of the best prediction,
        :data:`VERIFY_MESSAGES` messages) and rank them by the simulation (default:
        ``auto``; beyond the broadcast, on up to :data:`VERIFY_RANKS` ranks).
        ``frugal``: each candidate's searched segment sizes are doubled while its model
        stays within ``1 + frugal`` of its best
        (:func:`_frugal`); :class:`gridcoll.Comm` plans with :data:`FRUGAL`.
    cache : PlanCache, optional
        A repeated call with equal ``call`` and ``options`` on a grid of the same
        fingerprint returns the cached :class:`Plan` object (a dictionary lookup:
        microseconds, whatever the grid's size).
    clock : callable, optional
        The clock the budget's deadline is kept on (default
        :data:`gridcoll.tune.deadline.CLOCK`, the process's CPU time: the work done, so a
        busy machine plans as an idle one); ``time.monotonic`` bounds wall seconds; tests
        pass a fake one. Not part of the cache key.

    Returns
    -------
    Plan

    Raises
    ------
    UnknownAlgorithm
        For an unknown ``algo``.
    ParameterError
        For a root out of range, an uneven call whose counts do not fit the grid, or
        a commutative-only algorithm named for a non-commutative operation.
    Unfeasible
        If no builder could be modelled (the reasons are listed).

    Notes
    -----
    Every builder with tunable parameters costs one heuristic search (about
    ``log2(M) |d|`` plus ``4 |d|`` per hill-climbing move model evaluations); the bound
    costs one max-flow per cluster. A cache hit costs a dictionary lookup.

    Examples
    --------
    >>> p = plan("magpie:8,1", Call("bcast", 2**20), PlanOptions(algo="dary-segmented"))
    >>> p.params["degree"], round(p.predicted_s, 2)
    (7, 1.06)
    >>> plan("magpie:8,1", Call("bcast", 2**20),
    ...      PlanOptions(algo="dary-segmented", params={"segment_size": 4096})).params
    {'segment_size': 4096, 'degree': 7}
    """
    if not isinstance(grid, Grid):
        grid = get_grid(grid)
    if not isinstance(call, Call):
        raise ParameterError(f"call must be a gridcoll.tune.Call, got {call!r}")
    options = _DEFAULT_OPTIONS if options is None else options
    key = None
    if cache is not None:  # the hot path: no check, one lookup
        key = PlanCache.key(grid, call, options)
        found = cache.get(key)
        if found is not None:
            return found
    check_complete(grid)  # partial (interrupted) measurements: refused
    algo = options.algo
    builders = _for_operation(call, algo, _builders(call.op, algo))
    _check_on(grid, call)
    if call.op not in ROOTED and call.root:
        call = replace(call, root=0)
    budget_s = options.budget_s
    deadline = None if budget_s is None else Deadline(budget_s, clock or _deadline.CLOCK)
    reason = native_reason(grid, algo) if options.native or algo == NATIVE else ""
    if reason:
        host = float(options.host_overhead or 0.0)
        found = _native_plan(grid, call, reason, host, deadline)
    else:
        effective = _effective(grid, options.host_overhead)
        found = _make_plan(effective, call, options, builders, grid, deadline)
    if key is not None:
        cache.put(key, found)
    return found


_DEFAULT_OPTIONS = PlanOptions()


DEFAULT_BUDGET_S = 1.0
"""The planning budget of the command line (``plan``, ``simulate``, ``compare``,
``run``, ``demo`` alike, so one call chooses the same everywhere); the Python default
is none (no anytime builders), what every MPI rank of :class:`gridcoll.Comm` uses."""
