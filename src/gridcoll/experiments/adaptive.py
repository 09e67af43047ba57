"""Seed 001's experiment: an application of broadcasts on a loaded grid, run with each
strategy (seed 001 sec. 3, figure 8), in simulation (:func:`simulate_scenario`) or for
real on the emulated WAN (:func:`run_scenario`).

The application (:func:`seed001_app`): about 60 broadcasts from one root, the first
of 1 MB, sizes decreasing linearly; 90 s between the first two, intervals decreasing
exponentially ("right-looking Gaussian elimination"). The paper gives neither the last
size nor the rate, so: the size falls by ``first / n`` per call (the last is ``first /
n``), and each interval is :data:`INTERVAL_DECAY` = 0.97 times the one before (90 s down
to 15 s; the 60 calls span 42 minutes, about four of seed 001's load cycles).

The set-up (seed 001 sec. 3): the root is a node of C2 (:func:`seed001_root`); the
load (:func:`~gridcoll.network.load.seed001_trace`) goes on the links of the cluster
that plays seed 001's C3 (:func:`seed001_cluster`): the intermediate node of
MPICH-G2's tree whose relay the broadcast's completion waits on ("use of C3 as an
intermediate node ... presents a major bottleneck", sec. 3). On ``teragrid`` that is
C7, PSC's representative, not the preset's C3 (ANL's, served first and with time to
spare): ``docs/mpi.md`` gives the figures.

The strategies (:data:`STRATEGIES`):

* ``mpich-g2`` — MPICH-G2's static multilevel tree (seed 001 figure 7), planned once
  on the described grid;
* ``mateescu`` — seed 001's comparison: the same advisor and monitor as ``adaptive``,
  running Mateescu's algorithm;
* ``sa-clustered`` — seed 001's own strategy: the same advisor and monitor running
  clusteredSA (:mod:`gridcoll.algorithms.annealing`) alone, whole-message trees as in
  the paper;
* ``adaptive`` — the advisor (:class:`~gridcoll.adapt.advisor.Advisor`, every
  builder: gridcoll's ``auto``) on the monitor's view
  (:class:`~gridcoll.adapt.monitor.NetworkMonitor`: passive samples from every
  wide-area message, probes for links without traffic);
* ``static`` — gridcoll's own plan (``auto``) on the described grid, no monitor, with
  the planning budget the advisor has for the same call (:func:`call_budgets`): what
  adapting adds to gridcoll, as opposed to what gridcoll adds to MPICH-G2.

The advisors plan each target in ``share`` of the forecast interval (the budget
follows the interval: :meth:`~gridcoll.adapt.advisor.Advisor.budget_s`), and plan
every idle size before the root's first call, in ``share`` of the ``idle_s`` seconds
the application spends before it (:meth:`~gridcoll.adapt.advisor.Advisor.plan_idle`;
by default as long as its first interval, our choice).

Every call is simulated on the described grid under the load trace, from its start
time in the trace (``simulate(load=, offset=)``); the monitor learns from that very
simulation's messages, so it sees only what a real one would (end-to-end times). A
call is *loaded* if any link carries load when it starts. Each strategy is also run
without the load (``reference_s``), the time each call would have taken on the idle
network, so :func:`summarize` can say how soon a strategy is back after a load ends.
The planner runs with a frozen clock: its nominal budget alone decides (deterministic),
and the advisor's CPU seconds are measured and reported.
"""

from __future__ import annotations

import itertools
import json
import math
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from gridcoll.adapt.advisor import (
    ADVISOR_MAX_BUDGET_S,
    ADVISOR_SHARE,
    IDLE_SIZES,
    MIN_BUDGET_S,
    Advisor,
)
from gridcoll.adapt.handoff import announcement, decode, encode, planned, trailer_bytes
from gridcoll.adapt.monitor import PERIOD_S, PROBE_BYTES, NetworkMonitor, Transfer
from gridcoll.algorithms.mpich_g2 import mpich_g2, mpich_g2_tree
from gridcoll.network.grid import Grid
from gridcoll.network.load import LoadTrace, occupancy_end
from gridcoll.runtime.netns import Network
from gridcoll.runtime.supervisor import STARTUP_S, run_job
from gridcoll.simulate import simulate
from gridcoll.tune import Call, PlanCache, PlanOptions, plan

STRATEGIES = ("mpich-g2", "mateescu", "sa-clustered", "adaptive", "static")
ADVISED = {"mateescu": "mateescu", "sa-clustered": "sa-clustered", "adaptive": "auto"}
"""The strategies run by the advisor, and the algorithm it plans with."""
NTARGETS = 3
"""The advisor's targets per call (the forecast size, twice and half it): the static
plan's budget is the advisor's for one of them (:func:`call_budgets`)."""
INTERVAL_DECAY = 0.97
"""Each interval of seed 001's application is this times the one before (our choice)."""


@dataclass(frozen=True)
class AppCall:
    """One broadcast of the application: at ``t`` seconds, ``nbytes`` bytes."""

    t: float
    nbytes: int


def seed001_app(
    ncalls: int = 60,
    first_bytes: int = 1 << 20,
    first_interval: float = 90.0,
    decay: float = INTERVAL_DECAY,
    time_scale: float = 1.0,
    start: float = 0.0,
) -> tuple[AppCall, ...]:
    """Seed 001's application (module docstring): call ``i`` of ``first_bytes * (1 -
    i/n)`` bytes (whole bytes, exactly linear), ``first_interval * decay**i`` seconds
    before call ``i + 1``, times multiplied by ``time_scale``."""
    if ncalls < 1 or first_bytes < ncalls:
        raise ValueError(f"need 1 <= ncalls <= first_bytes, got {ncalls}, {first_bytes}")
    step = first_bytes // ncalls
    calls, t = [], start
    for i in range(ncalls):
        calls.append(AppCall(t, first_bytes - i * step))
        t += first_interval * decay**i * time_scale
    return tuple(calls)


def seed001_root(grid: Grid) -> int:
    """Seed 001's root: "a node in C2" (sec. 3), the lowest rank of the cluster named
    ``C2``; rank 0 on a grid without one."""
    names = [c.name for c in grid.clusters]
    return grid.members[names.index("C2")][0] if "C2" in names else 0


def seed001_cluster(grid: Grid, root: int, nbytes: int = 1 << 20) -> int | None:
    """The cluster whose links seed 001's load takes: the one playing C3, "an
    intermediate node of the hierarchical MPICH-G2 tree" whose load delays "the
    propagation of broadcast messages to other clusters at the last level" (sec. 3).

    Among the clusters whose representative, in MPICH-G2's tree from ``root``,
    forwards to ranks of other clusters (the root's own cluster excluded: it is the
    source, not a relay), the one whose relayed ranks finish last when an ``nbytes``
    broadcast is simulated without load; ties go to the lowest index. None if no
    cluster relays (a flat wide-area tree: grids without sites). O(P) plus one
    simulation."""
    tree = mpich_g2_tree(grid, root)
    finish = simulate(mpich_g2(grid, nbytes, root=root), grid).finish_s
    cluster_of = grid.cluster_of
    best, latest = None, -math.inf
    for c, rep in enumerate(grid.coordinators(root)):
        if c == cluster_of[root]:
            continue
        relayed = _outside(tree, rep, c, cluster_of)
        if relayed:
            end = max(finish[r] for r in relayed)
            if end > latest:
                best, latest = c, end
    return best


def _outside(tree, rep: int, cluster: int, cluster_of: Sequence[int]) -> list[int]:
    """The ranks of ``rep``'s subtree outside ``cluster``."""
    out, stack = [], list(tree.children.get(rep, ()))
    while stack:
        v = stack.pop()
        if cluster_of[v] != cluster:
            out.append(v)
        stack.extend(tree.children.get(v, ()))
    return out


def call_budgets(
    app: Sequence[AppCall],
    share: float = ADVISOR_SHARE,
    idle_s: float | None = None,
    max_budget_s: float | None = ADVISOR_MAX_BUDGET_S,
) -> list[float]:
    """The planning budget the advisor gives one target for each call (the static
    plan's, for a fair comparison): ``share`` of the interval before the call over
    :data:`NTARGETS`; for the first call, the idle budget per size, ``share * idle_s /
    len(IDLE_SIZES)`` (:meth:`Advisor.plan_idle`); at least :data:`MIN_BUDGET_S`, at
    most ``max_budget_s`` if set. Seed 001's application: 1.875 s for the first call,
    then 7.5 s down to 1.3 s."""
    idle = _idle_s(app, idle_s)
    spans = [idle / len(IDLE_SIZES)] + [(b.t - a.t) / NTARGETS for a, b in itertools.pairwise(app)]
    out = [max(MIN_BUDGET_S, share * x) for x in spans[: len(app)]]
    return out if max_budget_s is None else [min(max_budget_s, b) for b in out]


def _idle_s(app: Sequence[AppCall], idle_s: float | None) -> float:
    """The seconds before the first call: ``idle_s`` (0: no idle mode), else the
    first interval."""
    if idle_s is not None:
        return idle_s
    return app[1].t - app[0].t if len(app) > 1 else PERIOD_S


def probe_transfer(grid: Grid, load: LoadTrace | None, src: int, dst: int, t: float) -> Transfer:
    """A lone probe of :data:`PROBE_BYTES` from cluster ``src`` to ``dst`` at trace time
    ``t``: cut-through over the route's links, each served at ``1 - f(t)`` (as the
    simulator serves a lone message; NICs and gateways are not loaded)."""
    route = grid.routes[(src, dst)]
    occ = route.plogp.g(PROBE_BYTES)
    for name in route.links:
        g = grid.links[name].g(PROBE_BYTES)
        end = t + g if load is None else occupancy_end(g, t, load.profile(name))
        occ = max(occ, end - t)
    return Transfer(src, dst, PROBE_BYTES, t, t + occ + route.plogp.L)


@dataclass
class StrategyRun:
    """One strategy's run of the application: per call the seconds, the plan's
    algorithm and prediction, whether the view was stale; the advisor's CPU seconds
    and what the monitor cost."""

    strategy: str
    times_s: list[float] = field(default_factory=list)
    algorithms: list[str] = field(default_factory=list)
    predicted_s: list[float] = field(default_factory=list)
    stale: list[bool] = field(default_factory=list)
    advisor_cpu_s: float = 0.0
    wan_bytes: int = 0
    monitor: dict = field(default_factory=dict)
    late: int = 0
    """Measured runs: calls some rank reached after their instant."""
    budgets_s: list[float] = field(default_factory=list)
    """The planning budget per target after each call (advisors) or per call
    (``static``), nominal seconds."""
    idle_plans: int = 0
    """Advisors: plans made in idle mode, before the first call."""
    announced: list[bool] = field(default_factory=list)
    """Advisors: per call, whether it ran a plan the root announced (else the
    ordinary plan, :mod:`gridcoll.adapt.handoff`)."""


def run_strategy(
    strategy: str,
    grid: Grid,
    app: Sequence[AppCall],
    load: LoadTrace | None,
    *,
    root: int = 0,
    period_s: float = PERIOD_S,
    share: float = ADVISOR_SHARE,
    max_budget_s: float | None = ADVISOR_MAX_BUDGET_S,
    idle_s: float | None = None,
    cache: PlanCache | None = None,
    on_call: Callable[[int], None] | None = None,
) -> StrategyRun:
    """Simulate ``app`` under ``load`` with one strategy (module docstring): the
    advisors plan in ``share`` of each forecast interval (capped at ``max_budget_s``
    if set) and, idle, in ``share`` of ``idle_s`` before the first call (None: the
    first interval; 0: no idle mode)."""
    if strategy not in STRATEGIES:
        raise ValueError(f"unknown strategy {strategy!r}; choose from {', '.join(STRATEGIES)}")
    cache = cache if cache is not None else PlanCache(1024)
    if strategy in ("mpich-g2", "static"):
        return _run_static(
            strategy, grid, app, load, root, share, max_budget_s, idle_s, cache, on_call
        )
    out = StrategyRun(strategy)
    algo = ADVISED[strategy]
    trailer = trailer_bytes(grid)
    monitor = NetworkMonitor(grid, period_s=period_s, start=app[0].t if app else 0.0)
    advisor = Advisor(
        grid,
        "bcast",
        root,
        algo=algo,
        share=share,
        max_budget_s=max_budget_s,
        extra_bytes=trailer,
        lead=2,
        cache=cache,
        clock=_frozen_clock,
    )
    cpu = time.process_time()
    idle = _idle_s(app, idle_s) if app else 0.0
    if idle > 0:  # idle mode: the advisor starts with the application, before its first call
        out.idle_plans = len(advisor.plan_idle(monitor.load(), idle))
    out.advisor_cpu_s += time.process_time() - cpu
    cluster_of = grid.cluster_of
    announced = None
    for i, call in enumerate(app):
        cpu = time.process_time()
        # Every rank: the plan the root announced in the previous call, else the
        # ordinary one (handoff module). The root: what its advisor has ready now
        # rides in this call's trailer, for the next.
        chosen = planned(grid, announced, call.nbytes, root, extra=trailer, cache=cache)
        out.announced.append(chosen is not None)
        if chosen is None:
            chosen = plan(
                grid,
                Call("bcast", call.nbytes + trailer, root),
                PlanOptions(algo=algo),
                cache=cache,
            )
        offered_load, ready = advisor.offer(call.nbytes)
        trailer_out = encode(announcement(i, grid, offered_load, ready), grid)
        out.advisor_cpu_s += time.process_time() - cpu
        result = simulate(chosen.build(), grid, load=load, offset=call.t, record=True)
        out.times_s.append(result.total_s)
        out.algorithms.append(chosen.algorithm)
        predicted = chosen.simulated_s or chosen.predicted_s
        out.predicted_s.append(predicted)
        out.stale.append(advisor.stale)
        transfers = [
            Transfer(
                cluster_of[m.src],
                cluster_of[m.dst],
                m.nbytes,
                call.t + m.send_start,
                call.t + m.arrival,
            )
            for m in result.timeline.messages
            if cluster_of[m.src] != cluster_of[m.dst]
        ]
        out.wan_bytes += sum(x.nbytes for x in transfers)
        cpu = time.process_time()
        announced = decode(trailer_out, grid)
        monitor.observe(transfers)
        advisor.record_call(call.nbytes, call.t)
        if advisor.measured(predicted, result.total_s):  # stale: refresh its links now
            monitor.forget({n for x in transfers for n in grid.routes[(x.src, x.dst)].links})
        now = call.t + result.total_s
        for src, dst in monitor.probes_due(now):
            monitor.observe([probe_transfer(grid, load, src, dst, now)], probe=True)
        monitor.end_period(now)
        advisor.plan_ahead(monitor.load(), monitor.worst_load())
        out.budgets_s.append(advisor.budget_s(NTARGETS))
        out.advisor_cpu_s += time.process_time() - cpu
        if on_call is not None:
            on_call(i)
    out.monitor = monitor.cost.to_json()
    return out


def _run_static(
    strategy, grid, app, load, root, share, max_budget_s, idle_s, cache, on_call
) -> StrategyRun:
    """``mpich-g2`` (no budget) or ``static`` (``auto`` with :func:`call_budgets`),
    each call planned alone on the described grid."""
    out = StrategyRun(strategy)
    if strategy == "mpich-g2":
        budgets = [None] * len(app)
    else:
        budgets = call_budgets(app, share, idle_s, max_budget_s)
    algo = "mpich-g2" if strategy == "mpich-g2" else "auto"
    for i, (call, budget) in enumerate(zip(app, budgets, strict=True)):
        chosen = plan(
            grid,
            Call("bcast", call.nbytes, root),
            PlanOptions(algo=algo, budget_s=budget),
            cache=cache,
            clock=_frozen_clock,
        )
        result = simulate(chosen.build(), grid, load=load, offset=call.t)
        out.times_s.append(result.total_s)
        out.algorithms.append(chosen.algorithm)
        out.predicted_s.append(chosen.simulated_s or chosen.predicted_s)
        out.stale.append(False)
        if budget is not None:
            out.budgets_s.append(budget)
        if on_call is not None:
            on_call(i)
    return out


def _frozen_clock() -> float:
    """The planner's deadline clock in simulation: time stands still while it plans,
    so only the nominal budget decides (deterministic runs)."""
    return 0.0


def loaded_calls(app: Sequence[AppCall], load: LoadTrace | None) -> list[bool]:
    """Whether any link carries load when each call starts."""
    if load is None:
        return [False] * len(app)
    return [any(load.fraction_at(name, c.t) > 0 for name in load.links) for c in app]


def load_ends(load: LoadTrace | None) -> list[float]:
    """The times at which the trace's load stops (every link idle from then on, until
    the next load)."""
    if load is None:
        return []
    ends = sorted({x.end for x in load.loads})
    return [e for e in ends if all(load.fraction_at(name, e) == 0 for name in load.links)]


def summarize(
    app: Sequence[AppCall],
    load: LoadTrace | None,
    runs: dict[str, StrategyRun],
    reference: dict[str, list[float]] | None = None,
    baseline: str = "mpich-g2",
) -> dict:
    """The scenario's JSON (seed 001 sec. 3, figure 8): per strategy ``times_s``,
    ``mean_loaded_s``, ``mean_unloaded_s``; ``loaded``; against ``baseline`` the mean
    per-call ``improvement_loaded`` and ``change_unloaded``, against ``static``
    ``vs_static_loaded`` and ``vs_static_unloaded`` (fractions, positive = faster);
    with ``reference`` (each strategy without the load) ``loaded_over_unloaded`` (the
    mean over loaded calls of each call's time over the same call without load) and
    ``after_load``: the first and second call after each load ends, as a ratio to the
    same call unloaded. ``headline`` (:func:`headline`) sums it up."""
    loaded = loaded_calls(app, load)
    ends = load_ends(load)
    out: dict = {
        "calls": [{"t": c.t, "nbytes": c.nbytes} for c in app],
        "loaded": loaded,
        "load_ends": ends,
        "strategies": {},
    }
    for name, run in runs.items():
        times = run.times_s
        entry = {
            "times_s": times,
            "algorithms": run.algorithms,
            "predicted_s": run.predicted_s,
            "stale": run.stale,
            "budgets_s": run.budgets_s,
            "idle_plans": run.idle_plans,
            "announced": run.announced,
            "mean_loaded_s": _mean([t for t, x in zip(times, loaded, strict=True) if x]),
            "mean_unloaded_s": _mean([t for t, x in zip(times, loaded, strict=True) if not x]),
            "advisor_cpu_s": run.advisor_cpu_s,
            "monitor": run.monitor,
            "app_wan_bytes": run.wan_bytes,
            "late": run.late,
            "app_s": math.fsum(times),
        }
        if run.monitor and run.wan_bytes:
            own = run.monitor["probe_bytes"] + run.monitor.get("report_bytes", 0)
            entry["monitor_share_bytes"] = own / run.wan_bytes
            entry["monitor_share_s"] = run.monitor["probe_s"] / max(1e-12, entry["app_s"])
        if baseline in runs:
            on, off = _gains(times, runs[baseline].times_s, loaded)
            entry["improvement_loaded"] = _mean(on)
            entry["change_unloaded"] = _mean(off)
            entry["worst_change_unloaded"] = min(off, default=math.nan)
        if "static" in runs:
            on, off = _gains(times, runs["static"].times_s, loaded)
            entry["vs_static_loaded"] = _mean(on)
            entry["vs_static_unloaded"] = _mean(off)
            entry["worst_vs_static_unloaded"] = min(off, default=math.nan)
        if reference is not None and name in reference:
            ref = reference[name]
            entry["reference_s"] = ref
            entry["loaded_over_unloaded"] = _mean(
                [t / r for t, r, x in zip(times, ref, loaded, strict=True) if x]
            )
            after = []
            for e in ends:
                nxt = [i for i, c in enumerate(app) if c.t >= e][:2]
                after.append(
                    {"load_end": e, "calls": nxt, "ratios": [times[i] / ref[i] for i in nxt]}
                )
            entry["after_load"] = after
        out["strategies"][name] = entry
    out["headline"] = headline(out)
    return out


def _gains(
    times: Sequence[float], base: Sequence[float], loaded: Sequence[bool]
) -> tuple[list[float], list[float]]:
    """Per call ``(base - time) / base`` (positive = faster), loaded calls and the
    others."""
    gains = [(b - t) / b for t, b in zip(times, base, strict=True)]
    on = [g for g, x in zip(gains, loaded, strict=True) if x]
    off = [g for g, x in zip(gains, loaded, strict=True) if not x]
    return on, off


def headline(summary: dict) -> dict:
    """What the scenario is run for, from a :func:`summarize` document (None where a
    strategy is missing): ``adaptive`` against ``static`` loaded and unloaded (the
    mean per-call gain; ``worst_unloaded``: the worst unloaded call), seed 001's
    strategy (``sa-clustered``) against gridcoll's (``adaptive``, ``auto``), and
    MPICH-G2's mean loaded call over the same call without load."""
    runs = summary["strategies"]
    loaded = summary["loaded"]
    out: dict = {}
    if "adaptive" in runs and "static" in runs:
        a = runs["adaptive"]
        out["adaptive_vs_static"] = {
            "loaded": a["vs_static_loaded"],
            "unloaded": a["vs_static_unloaded"],
            "worst_unloaded": a["worst_vs_static_unloaded"],
        }
    if "adaptive" in runs and "sa-clustered" in runs:
        on, off = _gains(runs["sa-clustered"]["times_s"], runs["adaptive"]["times_s"], loaded)
        out["paper_vs_auto"] = {"loaded": _mean(on), "unloaded": _mean(off)}
    if "mpich-g2" in runs and "loaded_over_unloaded" in runs["mpich-g2"]:
        out["mpich_g2_loaded_over_unloaded"] = runs["mpich-g2"]["loaded_over_unloaded"]
    return out


def _mean(values: Sequence[float]) -> float:
    return math.fsum(values) / len(values) if values else math.nan


def simulate_scenario(
    grid: Grid,
    app: Sequence[AppCall],
    load: LoadTrace | None,
    strategies: Sequence[str] = STRATEGIES,
    *,
    root: int = 0,
    period_s: float = PERIOD_S,
    share: float = ADVISOR_SHARE,
    max_budget_s: float | None = ADVISOR_MAX_BUDGET_S,
    idle_s: float | None = None,
    reference: dict[str, list[float]] | bool = True,
    on_call: Callable[[str, int], None] | None = None,
) -> dict:
    """Every strategy's run of ``app`` under ``load`` (:func:`run_strategy`) and their
    :func:`summarize`. ``reference``: True runs every strategy again without the load
    (``reference_s``, ``after_load``); a dict gives those runs (the same for every load
    trace: computed once, shared by several seeds); False leaves them out."""
    cache = PlanCache(4096)
    runs = {}
    for name in strategies:
        tick = None if on_call is None else (lambda i, name=name: on_call(name, i))
        runs[name] = run_strategy(
            name,
            grid,
            app,
            load,
            root=root,
            period_s=period_s,
            share=share,
            max_budget_s=max_budget_s,
            idle_s=idle_s,
            cache=cache,
            on_call=tick,
        )
    if reference is True:
        reference = unloaded_times(
            grid,
            app,
            strategies,
            root=root,
            period_s=period_s,
            share=share,
            max_budget_s=max_budget_s,
            idle_s=idle_s,
            cache=cache,
            on_call=on_call,
        )
    return summarize(app, load, runs, reference or None)


def unloaded_times(
    grid: Grid,
    app: Sequence[AppCall],
    strategies: Sequence[str] = STRATEGIES,
    *,
    root: int = 0,
    period_s: float = PERIOD_S,
    share: float = ADVISOR_SHARE,
    max_budget_s: float | None = ADVISOR_MAX_BUDGET_S,
    idle_s: float | None = None,
    cache: PlanCache | None = None,
    on_call: Callable[[str, int], None] | None = None,
) -> dict[str, list[float]]:
    """Each strategy's per-call seconds with no load at all: the reference a strategy
    should come back to after a load ends."""
    out = {}
    for name in strategies:
        tick = None if on_call is None else (lambda i, name=name: on_call(f"{name} (no load)", i))
        out[name] = run_strategy(
            name,
            grid,
            app,
            None,
            root=root,
            period_s=period_s,
            share=share,
            max_budget_s=max_budget_s,
            idle_s=idle_s,
            cache=cache,
            on_call=tick,
        ).times_s
    return out


def run_scenario(
    grid: Grid,
    strategy: str,
    app: Sequence[AppCall],
    load: LoadTrace | None,
    *,
    root: int = 0,
    period_s: float | None = None,
    timeout: float = 120.0,
    mpiexec: str | None = None,
    on_call: Callable[[int], None] | None = None,
    network: Network | None = None,
) -> StrategyRun:
    """Run seed 001's application ``app`` (:class:`AppCall`\\ s, times from the load
    trace's time 0, the launch's start) for real on ``grid`` with one strategy
    (:mod:`gridcoll.experiments.adaptive_worker` on every rank), the WAN emulated under
    ``load``, or real on a namespace ``network`` whose shapers follow ``load``
    (:mod:`gridcoll.runtime.netns`); ``period_s``: the root's monitor period
    (``GRIDCOLL_MONITOR_PERIOD``).
    Returns a :class:`StrategyRun`; raises
    :class:`~gridcoll.errors.LaunchError` unless every call's bytes were
    verified."""
    calls = json.dumps([[c.t, c.nbytes] for c in app])
    program = [
        sys.executable,
        "-m",
        "gridcoll.experiments.adaptive_worker",
        "--strategy",
        strategy,
        "--calls",
        calls,
        "--root",
        str(root),
        "--timeout",
        repr(float(timeout)),
    ]
    wall = STARTUP_S + 2 * grid.nranks + (app[-1].t if app else 0.0) + len(app) * timeout
    env = {} if period_s is None else {"GRIDCOLL_MONITOR_PERIOD": repr(float(period_s))}
    outcome = run_job(
        grid,
        program,
        timeout=timeout,
        wall=wall,
        mpiexec=mpiexec,
        on_progress=on_call,
        load=load,
        extra_env=env,
        network=network,
    )
    outcome.require_verified(f"the {strategy} scenario on {grid.name}")
    result = outcome.result
    advisor = result.get("advisor") or {}
    monitor = dict(advisor.get("monitor") or {})
    if advisor:
        monitor["report_bytes"] = result.get("report_bytes", 0)
    return StrategyRun(
        strategy,
        wan_bytes=int(advisor.get("app_wan_bytes", 0)),
        times_s=list(result["times_s"]),
        algorithms=list(result["algorithms"]),
        predicted_s=[math.nan] * len(result["times_s"]),
        stale=[False] * len(result["times_s"]),
        advisor_cpu_s=float(advisor.get("advisor_cpu_s", 0.0)),
        monitor=monitor,
        late=int(result.get("late", 0)),
    )
