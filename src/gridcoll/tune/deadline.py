"""The planning deadline: what a budget (``budget_s``) allows of real work.

:func:`gridcoll.tune.plan` first spends a budget in *nominal* seconds (functions of the
grid's size, deterministic: :func:`gridcoll.tune.select`'s allowances). Nominal costs
are estimates, so with a budget every stage of planning also answers to a
:class:`Deadline` on a real clock. By default (:data:`CLOCK`) that clock is the
process's CPU time: it counts the work planning has done, not the seconds other
processes took from it, so the same command plans the same on a busy machine as on an
idle one (within the CPU clock's own jitter). A caller that needs a plan within wall
seconds passes ``time.monotonic``:

* stages that can be cut short stop there and keep their best so far: each builder's
  parameter search starts no model evaluation that the previous one says would end
  past it (:func:`gridcoll.tune.search.heuristic_search`, ``deadline=``), and builders
  not yet searched when it passes are skipped;
* stages that cannot be cut (a simulated annealing run, a simulation of the check, the
  physical bound, a builder's first model evaluation where it declares a cost) are
  estimated before they start (:meth:`Deadline.allows`) and made smaller (fewer
  annealing evaluations) or left out, with a note. Estimates are nominal seconds
  scaled by :attr:`Deadline.slowdown`, the clock's seconds per CPU second planning
  has had so far (1 on the default CPU clock; on a wall clock, a loaded machine, where
  the process gets a share of a core, estimates longer and skips more).

The search ends ``budget_s`` after the start; the deadline comes :data:`GRACE_S` later,
a small fixed allowance for the stages after the search (the check's simulations). A plan
that never meets its deadline is exactly the plan the nominal budget gives (and the
same on every MPI rank); one that does says what was cut in :attr:`Plan.budget_note`.

The clock is a parameter (:data:`CLOCK` by default): tests pass a fake one and
see every stage stop, with no sleeping (as SimPy's virtual and real-time environments
share one API).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

__all__ = ["CLOCK", "GRACE_S", "MAX_SLOWDOWN", "MIN_OBSERVED_S", "Deadline"]

CLOCK = time.process_time
"""The clock :func:`gridcoll.tune.plan` keeps a budget's deadline on when it is given
none: this process's CPU time, the work done, which a loaded machine does not speed
past (read at each call: tests that check the nominal budget alone swap it for a clock
that stands still, as mpi4py's tests swap a module's thresholds)."""

GRACE_S = 0.5
"""Wall-clock seconds allowed past ``budget_s`` for what follows the search (the check's
simulations, an annealing run of a whole budget): planning takes about ``budget_s +
GRACE_S`` at most, plus one model evaluation (the granularity of a search) and the
grid's parsing."""

MIN_OBSERVED_S = 0.05
"""Before this many wall seconds, :attr:`Deadline.slowdown` is 1 (timer noise)."""

MAX_SLOWDOWN = 100.0
"""The largest :attr:`Deadline.slowdown` (a process that got 1% of a core)."""


@dataclass
class Deadline:
    """``budget_s`` (plus :data:`GRACE_S`) from now on ``clock``.

    ``notes`` collects, in order, what the deadline cut short or skipped (one short
    phrase each); ``cut`` is True once anything was.

    Examples
    --------
    >>> ticks = iter([0.0, 0.4, 0.4, 2.0])
    >>> d = Deadline(1.0, clock=lambda: next(ticks), grace_s=0.5, cpu_clock=lambda: 0.0)
    >>> d.allows(0.5, search=True), d.allows(0.5), d.allows(0.5)
    (True, True, False)
    """

    budget_s: float
    clock: Callable[[], float] = time.monotonic
    grace_s: float = GRACE_S
    first_eval_s: float = 0.0
    """The longest first model evaluation so far of a builder that declares no cost
    (the tuner's estimate of the next such builder's first one)."""
    cpu_clock: Callable[[], float] = time.process_time
    """This process's CPU time: with the wall clock, it tells how much of a CPU the
    planning gets (:attr:`slowdown`). A test with a fake clock passes the same one."""
    start: float = field(init=False)
    cpu_start: float = field(init=False)
    notes: list[str] = field(default_factory=list, init=False)

    def __post_init__(self) -> None:
        self.start = self.clock()
        self.cpu_start = self.cpu_clock()

    def left(self) -> float:
        """Seconds until the deadline, ``budget_s + grace_s`` after the start (negative
        once it has passed)."""
        return self.start + self.budget_s + self.grace_s - self.clock()

    def search_left(self) -> float:
        """Seconds left to the search: until ``budget_s`` after the start."""
        return self.start + self.budget_s - self.clock()

    def allows(self, estimate_s: float, *, search: bool = False) -> bool:
        """Whether a stage estimated at ``estimate_s`` seconds ends in time: before the
        search's end with ``search=True``, else before the deadline."""
        return estimate_s <= (self.search_left() if search else self.left())

    @property
    def slowdown(self) -> float:
        """How much slower than nominal planning runs now: wall-clock seconds per CPU
        second since the start (a loaded machine gives the process a share of a core),
        between 1 and :data:`MAX_SLOWDOWN`; 1 until :data:`MIN_OBSERVED_S` have
        passed (timer noise)."""
        wall = self.clock() - self.start
        cpu = self.cpu_clock() - self.cpu_start
        if wall < MIN_OBSERVED_S or cpu <= 0:
            return 1.0
        return min(max(wall / cpu, 1.0), MAX_SLOWDOWN)

    def scaled(self, nominal_s: float) -> float:
        """A nominal estimate (seconds of CPU on the development machine) at the
        current :attr:`slowdown`."""
        return nominal_s * self.slowdown

    def note(self, text: str) -> None:
        """Record that the deadline cut something (``text``: what), once per text."""
        if text not in self.notes:
            self.notes.append(text)

    @property
    def cut(self) -> bool:
        """True once the deadline cut or skipped anything."""
        return bool(self.notes)
