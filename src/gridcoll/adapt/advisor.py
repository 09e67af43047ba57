"""The broadcast advisor, sans I/O: forecast the application's next call, plan it ahead
on the monitor's view, hand the call the best plan ready (seed 001
sec. 2.5, figure 5).

Seed 001's advisor reads the application's sizes and time stamps, forecasts the next
size and the interval before the next call by linear regression, and runs clusteredSA
for the forecast size, twice and half it, with the forecast interval as its time
budget; with no application it cycles through 1 KB to 2 MB. This one does the same with
gridcoll's planner (:func:`gridcoll.tune.plan`, every builder, clusteredSA and the
other anytime builders sharing the budget), with three changes:

* the forecasts are :class:`~gridcoll.adapt.forecast.Forecaster`\\ s over
  :data:`~gridcoll.adapt.forecast.TREND_METHODS` (the seed's regression, a geometric
  trend, the last value; the least recent error wins);
* the budget per target is ``share`` (:data:`ADVISOR_SHARE`, a quarter, by default)
  of the forecast interval split among the targets, with no cap unless the caller
  sets ``max_budget_s`` (seed 001 gives clusteredSA the whole interval as its
  ``time_duration``; the rest of the interval is the application's here, since the
  advisor runs on the root's machine and takes its CPU from it);
* idle mode (:meth:`Advisor.plan_idle`) plans every idle size before the root's first
  call, in ``share`` of the time the caller says it has, so the first calls find
  budgeted plans ready (seed 001 cycles through the idle sizes while the application
  makes no call);
* a call whose measured time exceeds ``stale_factor`` times its plan's prediction
  marks the view *stale* (item 5): until the monitor's view changes, calls get the
  *safe* plan, made on the worst load each link showed recently
  (:meth:`~gridcoll.adapt.monitor.NetworkMonitor.worst_load`), and the caller
  refreshes the links of the call's routes at once (:meth:`Advisor.measured` returns
  them).

The application never waits for the advisor: :meth:`Advisor.offer` gives the plans
ready at that moment, which the root announces for its next call
(:mod:`gridcoll.adapt.handoff`); a call they do not fit runs the ordinary plan. The
advisor reads no clock: the caller says when calls happen and gives the planner's
clock (``clock``, for its deadline).
"""

from __future__ import annotations

import math
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from gridcoll.adapt.forecast import TREND_METHODS, Forecaster
from gridcoll.network.grid import Grid
from gridcoll.tune import Call, PlanCache, PlanOptions, plan
from gridcoll.tune.select import Plan

IDLE_SIZES = tuple(2**k for k in range(10, 22))
"""Seed 001's idle mode: 1 KiB to 2 MiB in powers of two, round robin."""
ADVISOR_MAX_BUDGET_S: float | None = None
"""The default cap on one target's planning budget (nominal seconds,
:func:`tune.plan`): none, the budget follows the forecast interval alone."""
ADVISOR_SHARE = 0.25
"""The default share of the forecast interval the advisor plans in, split among its
targets (seed 001 plans in the whole interval; the rest is the application's here: on
a machine whose cores the ranks share, the advisor's CPU is theirs). At seed 001's
intervals, 90 s down to 15 s, one of three targets gets 7.5 s down to 1.25 s."""
MIN_BUDGET_S = 0.01
"""The least budget a target gets (an interval of milliseconds still plans)."""
UNKNOWN_INTERVAL_BUDGET_S = 0.1
"""The budget per target while no interval is known (one call seen) and no idle
stretch was given (:meth:`Advisor.plan_idle`)."""
STALE_FACTOR = 1.5
"""A call measured this many times slower than predicted makes the view stale."""
READY_PLANS = 64
"""Ready plans kept (the oldest dropped first)."""


@dataclass
class Advisor:
    """Plans ahead for one collective from one root (module docstring).

    ``grid`` is the described network; every plan is made on it under the load the
    caller passes (:meth:`NetworkMonitor.load`, :meth:`Grid.with_link_load`). ``algo``
    is ``"auto"`` (the adaptive strategy) or one builder (seed 001's Mateescu strategy:
    ``"mateescu"``)."""

    grid: Grid
    op: str = "bcast"
    root: int = 0
    algo: str = "auto"
    itemsize: int = 1
    host_overhead: float | None = None
    max_budget_s: float | None = ADVISOR_MAX_BUDGET_S
    """A cap on one target's budget (nominal seconds); None: no cap."""
    share: float = ADVISOR_SHARE
    """The share of the forecast interval planned in (:data:`ADVISOR_SHARE`)."""
    stale_factor: float = STALE_FACTOR
    extra_bytes: int = 0
    """Bytes every plan carries beyond the user's (the hand-off's trailer)."""
    lead: int = 1
    """How many calls ahead a plan is used: 2 with the hand-off (the plan announced in
    call ``n`` serves call ``n + 1``, planned after call ``n - 1``)."""
    frugal: float = 0.0
    cache: PlanCache | None = None
    clock: Callable[[], float] | None = None
    sizes: Forecaster = field(init=False)
    intervals: Forecaster = field(init=False)
    stale: bool = field(init=False, default=False)
    plans_made: int = field(init=False, default=0)
    _ready: OrderedDict = field(init=False, default_factory=OrderedDict)
    _offered: dict | None = field(init=False, default=None)
    _offered_key: tuple = field(init=False, default=())
    _stale_view: tuple | None = field(init=False, default=None)
    _last_call: float | None = field(init=False, default=None)
    _idle: int = field(init=False, default=0)
    _idle_budget: float = field(init=False, default=UNKNOWN_INTERVAL_BUDGET_S)

    def __post_init__(self) -> None:
        if not (0 < self.share <= 1):
            raise ValueError(f"share must be in (0, 1], got {self.share!r}")
        if self.max_budget_s is not None and not self.max_budget_s > 0:
            raise ValueError(f"max_budget_s must be positive or None, got {self.max_budget_s!r}")
        self.sizes = Forecaster(TREND_METHODS)
        self.intervals = Forecaster(TREND_METHODS)
        if self.cache is None:
            self.cache = PlanCache(256)

    # -- the application ----------------------------------------------------------------
    def record_call(self, nbytes: int, t: float) -> None:
        """The application called the collective with ``nbytes`` at time ``t``."""
        self.sizes.update(float(nbytes))
        if self._last_call is not None:
            self.intervals.update(max(0.0, t - self._last_call))
        self._last_call = t

    def forecast(self) -> tuple[float, float]:
        """The size of the call ``lead`` calls ahead and the seconds between calls (NaN
        while unknown)."""
        return self.sizes.forecast(steps=self.lead), self.intervals.forecast()

    def targets(self) -> list[int]:
        """The sizes to plan for: the forecast size, twice and half it (seed 001);
        with no call yet, the next idle size (:data:`IDLE_SIZES`)."""
        size, _ = self.forecast()
        if math.isnan(size):
            return [IDLE_SIZES[self._idle % len(IDLE_SIZES)]]
        unit = self.itemsize
        m = max(unit, round(size / unit) * unit)
        halved = max(unit, (m // 2) // unit * unit)
        return list(dict.fromkeys((m, 2 * m, halved)))

    def budget_s(self, ntargets: int) -> float:
        """Planning budget per target: ``share`` of the forecast interval ``T``
        shared by the ``n`` targets, ``share * T / n`` (seed 001 sec. 2.5: the interval
        is clusteredSA's ``time_duration``), at least :data:`MIN_BUDGET_S`, at most
        ``max_budget_s`` if set. While the interval is unknown (after the first
        call): the idle budget per size (:meth:`plan_idle`), else
        :data:`UNKNOWN_INTERVAL_BUDGET_S`."""
        _, interval = self.forecast()
        budget = (
            self._idle_budget
            if math.isnan(interval)
            else max(MIN_BUDGET_S, self.share * interval / max(1, ntargets))
        )
        return budget if self.max_budget_s is None else min(self.max_budget_s, budget)

    # -- planning -----------------------------------------------------------------------
    def plan_ahead(
        self,
        load: Mapping[str, float],
        safe_load: Mapping[str, float] | None = None,
        *,
        limit: int | None = None,
    ) -> list[Plan]:
        """Plan the targets not yet ready (at most ``limit`` of them) on the grid under
        ``load`` (the monitor's forecast), each within :meth:`budget_s`; while stale,
        under ``safe_load`` without anytime builders (quick). A load other than the one
        found stale clears the mark (fresh figures arrived). What was planned last is
        what :meth:`offer` offers."""
        key = tuple(sorted(load.items()))
        if self.stale and key != self._stale_view:
            self.stale = False
        safe = self.stale and safe_load is not None
        chosen_load = dict(safe_load) if safe else dict(load)
        on = self.grid.with_link_load(chosen_load)
        targets = self.targets()
        budget = None if safe else self.budget_s(len(targets))
        todo = [m for m in targets if (on.fingerprint, m) not in self._ready]
        made = []
        for m in todo[:limit]:
            made.append(self._plan(on, m, budget_s=budget))
            self._ready[(on.fingerprint, m)] = made[-1]
            while len(self._ready) > READY_PLANS:
                self._ready.popitem(last=False)
        if not self.sizes.history:
            self._idle += 1
        self._offered = chosen_load
        self._offered_key = key
        return made

    def plan_idle(self, load: Mapping[str, float], seconds: float) -> list[Plan]:
        """Idle mode (seed 001 sec. 2.5): before the root's first call, with
        ``seconds`` to spare, plan every size of :data:`IDLE_SIZES` on the grid under
        ``load``, each in ``share * seconds / len(IDLE_SIZES)`` (at least
        :data:`MIN_BUDGET_S`, at most ``max_budget_s``); that is also the budget per
        target until an interval is known. Returns the plans made (none once a call
        was recorded: the forecasts take over)."""
        if self.sizes.history:
            return []
        if not (seconds > 0 and math.isfinite(seconds)):
            raise ValueError(f"seconds must be positive, got {seconds!r}")
        budget = max(MIN_BUDGET_S, self.share * seconds / len(IDLE_SIZES))
        if self.max_budget_s is not None:
            budget = min(self.max_budget_s, budget)
        self._idle_budget = budget
        on = self.grid.with_link_load(dict(load))
        made = []
        for m in IDLE_SIZES:
            if (on.fingerprint, m) not in self._ready:
                made.append(self._plan(on, m, budget_s=budget))
                self._ready[(on.fingerprint, m)] = made[-1]
        while len(self._ready) > READY_PLANS:
            self._ready.popitem(last=False)
        self._offered = dict(load)
        self._offered_key = tuple(sorted(load.items()))
        return made

    def offer(self, current: int | None = None) -> tuple[dict[str, float], list[tuple[int, Plan]]]:
        """The load planned under last and its ready plans for the current targets, as
        (user size, plan) pairs, the forecast size first: what the root announces
        (:mod:`gridcoll.adapt.handoff`). Before any call is recorded, ``current`` (the
        size of the call being made) stands for the next one: the ready idle sizes
        nearest it, at most three."""
        if self._offered is None:
            return {}, []
        key = self.grid.with_link_load(self._offered).fingerprint
        targets = self.targets()
        if not self.sizes.history and current is not None and current > 0:
            idle = [m for m in IDLE_SIZES if (key, m) in self._ready]
            targets = sorted(idle, key=lambda m: (abs(math.log(m / current)), m))[:3]
        ready = [(m, self._ready[(key, m)]) for m in targets if (key, m) in self._ready]
        return dict(self._offered), ready

    def measured(self, predicted_s: float, seconds: float) -> bool:
        """A call predicted to take ``predicted_s`` took ``seconds``: True if that makes
        the view stale (the caller then refreshes the links the call crossed at once)."""
        if seconds > self.stale_factor * predicted_s and not self.stale:
            self.stale = True
            self._stale_view = self._offered_key
            return True
        return False

    # -- inside -------------------------------------------------------------------------
    def _plan(self, view: Grid, nbytes: int, *, budget_s: float | None) -> Plan:
        self.plans_made += 1
        return plan(
            view,
            Call(self.op, nbytes + self.extra_bytes, self.root, itemsize=self.itemsize),
            PlanOptions(
                algo=self.algo,
                host_overhead=self.host_overhead,
                budget_s=budget_s,
                frugal=self.frugal,
            ),
            cache=self.cache,
            clock=self.clock,
        )
