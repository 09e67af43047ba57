"""Seed 000's efficient P-LogP measurement (sec. 2.2, figure 4), without I/O.

Theory of operation
-------------------
Two processes take part: *measure* and *mirror*. This module is the brain of *measure*:
a :class:`PLogPProcedure` decides the next *probe* from the results so far, and a
transport (:mod:`gridcoll.measure.transport` over MPI, or a synthetic network in the
tests) carries it out and feeds the result back::

    proc = PLogPProcedure()
    while (probe := proc.next_probe()) is not None:
        proc.feed(transport.run(probe))
    result = proc.measurement()

Rule 1: there are two probes. :class:`GapProbe` ``n``: n empty messages in a row and
one empty reply; its result is ``RTT_n(0)`` in seconds. :class:`SizeProbe` ``(m, reps)``:
``reps`` repetitions of figure 4's two roundtrips for ``m`` bytes; its result is one
:class:`Sample` per repetition: ``os`` (the time of the send call), ``rtt`` (m bytes
there, an empty message back) and ``or_`` (the time of the receive of an m-byte message
that has been waiting ``Delta > RTT(m)``).

Rule 2: the steps are the paper's, in its order (seed 000, sec. 2.2):

1. ``g(0)``: ``n = 1``, then ``n = 10``, then doubling; ``n g(0) = RTT_n(0) - RTT_1(0)/2``;
   stop when the gap per message changes by less than ``epsilon`` *and*
   ``RTT_1(0) < epsilon RTT_n(0)``; take the gap of the largest ``n``. (Ours, for a
   shared machine: a run whose gap *rose* is repeated, up to twice, and the smallest
   kept -- the gap can only fall as n grows, delays only add; the spread of such
   repeats, up to 5%, widens epsilon in the settling test; and doubling stops, with a
   note, at the first run that takes 2 s and meets ``RTT_1(0) < epsilon RTT_n(0)``.
   ``RTT_1(0)`` is the fastest of its runs, and ``g(0)`` the smallest gap of the runs
   that meet ``RTT_1(0) < epsilon RTT_n(0)``: each of them is ``g(0) + L/n``, within
   epsilon/2 of ``g(0)``, plus whatever delays it suffered.)
2. every size ``m = 0`` and ``2^k``, ``k = 0 .. k_m``: the repetitions grow until the
   90% confidence interval of ``RTT(m)``, ``os(m)`` and ``or(m)`` is small enough, or
   the cap is reached (60 for small messages, 15 for large ones).
   ``g(m) = RTT(m) - RTT(0) + g(0)``, ``L = (RTT(0) - 2 g(0)) / 2`` (Rule 5).
3. ``k_m`` is raised while ``g(2^k_m)`` is not within ``epsilon`` of the value
   extrapolated from ``g(2^(k_m-2))`` and ``g(2^(k_m-1))``.
4. non-linearities: for consecutive sizes ``a < b < c``, if ``os``, ``or`` or ``g`` at
   ``c`` differs from the extrapolation from ``a`` and ``b`` by more than ``epsilon``,
   measure ``(b + c) / 2``, and repeat on the new intervals until the extrapolations
   match or ``c - b <= max(32 B, epsilon c)``.

Rule 3 (our reading of "small enough" and "within epsilon", which the paper leaves
open): a quantity is known well enough when its 90% half-width is at most
``epsilon * max(|value|, RTT(0))``: within 1% of itself, and never finer than 1% of the
round trip, the time scale at which the model uses it (an overhead of 15 us need not be
known to 0.15 us on a 20 ms link). A message is *large* when ``RTT(m) > 2 RTT(0)``: its
transfer, not the latency, dominates each repetition. Two values "match" when they
differ by at most ``epsilon * max(|value|, RTT(0))`` plus both confidence half-widths:
a difference inside the noise is not a non-linearity.

Rule 4: any exception inside the procedure moves it to ``ERROR`` (h11's rule); the
measurement so far stays readable (:meth:`PLogPProcedure.measurement`, marked
incomplete), so an interrupted run keeps what it found.

Rule 5 (ours: estimates that survive a busy machine). Every timing is a lower envelope:
a repetition cannot be faster than the network and the software, and everything else
(a late wake-up, a core lent to another job) only adds. So ``RTT(m)``, ``os(m)``,
``or(m)`` and the one-way time are each the lower quartile of their repetitions after
far-out ones are dropped (:func:`gridcoll.measure.stats.envelope`), not their mean or
median, which a few milliseconds of lost scheduling pull; every small size gets at
least the 11 repetitions whose lower quartile has a 90% interval. ``g(m)`` and ``L`` are
differences of such timings, and a difference of two noisy timings can come out below
zero: the model says it cannot (``RTT(m) - RTT(0) = g(m) - g(0) >= 0``; ``RTT(0) =
2 (L + g(0))`` with ``L, g(0) >= 0``), so :func:`gap_estimate` and
:func:`latency_estimate` return the value the model allows nearest the data (``g(0)``;
``L = 0``) when the difference is negative within the noise, and say the timings
*contradict* the model when it is negative beyond it. Every figure carries its 90%
half-width and how many samples were kept; a figure whose half-width exceeds
``confidence_limit`` (10%) of its value and ``epsilon RTT(0)`` (Rule 3's scale), or
that contradicts the model, is listed in :attr:`PLogPMeasurement.low_confidence`, and
:meth:`PLogPMeasurement.check_confidence` refuses such a measurement in one line.

References
----------
T. Kielmann, H. E. Bal, S. Gorlatch, K. Verstoep, R. Hofman. Network performance-aware
collective communication for clustered wide-area systems. Parallel Computing 27 (2001),
sec. 2.2 (seed 000). T. Kielmann, H. E. Bal, K. Verstoep. Fast measurement of LogP
parameters for message passing platforms. IPDPS workshops 2000 (its ref. [28]).
V. Paxson. On calibrating measurements of packet transit times. SIGMETRICS 1998
(minimum filtering of delays that only add).
"""

from __future__ import annotations

import enum
import math
from collections.abc import Generator, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from gridcoll.errors import MeasurementError
from gridcoll.measure.stats import Estimate, envelope, envelope_min_samples
from gridcoll.network.plogp import PLogP

__all__ = [
    "Cost",
    "GapProbe",
    "PLogPMeasurement",
    "PLogPProcedure",
    "Point",
    "ProcedureState",
    "Sample",
    "Settings",
    "SizeProbe",
    "gap_estimate",
    "latency_estimate",
    "poorly_known",
    "run_procedure",
    "saturation_cost",
    "table_from_dict",
]


# -- probes and their results ---------------------------------------------------------


@dataclass(frozen=True, slots=True)
class GapProbe:
    """Send ``n`` empty messages in a row; the mirror answers the last one with one
    empty reply. The result is ``RTT_n(0)`` in seconds."""

    n: int


@dataclass(frozen=True, slots=True)
class SizeProbe:
    """``reps`` repetitions of figure 4's two roundtrips for ``m`` bytes.

    The result is a list of ``reps`` :class:`Sample`. ``delta_factor``: the transport
    waits ``Delta = delta_factor * RTT(m)`` (that repetition's, plus its own margin)
    before receiving in the second roundtrip.
    """

    m: int
    reps: int
    delta_factor: float = 1.25
    with_or: bool = True
    """False: only the first roundtrip (``os``, ``RTT``); ``or_`` is then 0 (matrices)."""


@dataclass(frozen=True, slots=True)
class Sample:
    """One repetition of figure 4 for one size, in seconds.

    ``owd`` is the one-way time of the m-byte message when both ends share a clock
    (one machine), else None.
    """

    os: float
    rtt: float
    or_: float
    owd: float | None = None


Probe = GapProbe | SizeProbe


# -- settings and results -------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Settings:
    """The procedure's constants (seed 000, sec. 2.2, unless marked ours)."""

    epsilon: float = 0.01
    """Relative tolerance of every test ("epsilon = 1%")."""
    k_max: int = 18
    """Initial largest size ``2^k_m`` ("we used k_m = 18")."""
    k_limit: int = 26
    """Largest ``k_m`` the settling test may raise it to (ours: 64 MiB)."""
    initial_reps: int = 4
    """Repetitions of every size at first ("a small number of times"; ours: 4)."""
    max_reps_small: int = 60
    max_reps_large: int = 15
    large_factor: float = 2.0
    """A size is large when ``RTT(m) > large_factor * RTT(0)`` (ours)."""
    rtt1_reps: int = 3
    """``RTT_1(0)`` is the median of this many single-message runs (ours)."""
    gap_n_limit: int = 1 << 22
    """Give up doubling ``n`` beyond this (ours); the result says so."""
    gap_time_limit: float = 2.0
    """Stop doubling ``n`` once one run takes this many seconds and meets the paper's
    ``RTT_1(0) < epsilon RTT_n(0)`` (ours; noted in the result): on a quiet network the
    paper's other test, a gap that changes by less than epsilon, ends the doubling
    first; on a shared machine the gap per message wanders by more than epsilon from
    run to run, and each doubling would double the cost without settling it."""
    gap_noise_limit: float = 0.05
    """Largest run-to-run noise (relative) the settling test may widen epsilon to (ours)."""
    gap_retries: int = 2
    """Run an ``n`` again (at most this often) when its gap per message rose above the
    previous one by more than epsilon: a disturbance, since delays only add (ours)."""
    min_interval: int = 32
    """Halving stops at ``max(min_interval, epsilon * m)`` bytes ("32 bytes")."""
    max_sizes: int = 160
    """Measure at most this many sizes (ours: a guard against a pathological network)."""
    confidence_limit: float = 0.10
    """A figure whose 90% half-width exceeds this fraction of its value (and
    ``epsilon RTT(0)``) is flagged low-confidence (ours; Rule 5)."""
    latency: str = "auto"
    """``"round-trip"``: ``L = (RTT(0) - 2 g(0))/2`` as the paper; ``"one-way"``: from the
    one-way time when both ends share a clock (then asymmetric latency is measurable);
    ``"auto"``: one-way when the samples carry it."""

    def __post_init__(self) -> None:
        if not 0 < self.epsilon < 1:
            raise ValueError(f"epsilon must be in (0, 1), got {self.epsilon!r}")
        if not 1 <= self.k_max <= self.k_limit <= 40:
            raise ValueError(f"need 1 <= k_max <= k_limit <= 40, got {self.k_max}, {self.k_limit}")
        if self.initial_reps < 2:
            raise ValueError(f"initial_reps must be >= 2, got {self.initial_reps!r}")
        if not self.confidence_limit > 0:
            raise ValueError(f"confidence_limit must be > 0, got {self.confidence_limit!r}")
        if self.latency not in ("auto", "round-trip", "one-way"):
            raise ValueError(f"latency must be auto, round-trip or one-way, not {self.latency!r}")


@dataclass(frozen=True, slots=True)
class Point:
    """The measured parameters at one size (seconds), with 90% half-widths (Rule 5):
    ``kept`` of the ``reps`` repetitions survived the outlier fence (the fewest over
    ``RTT``, ``os`` and ``or``); ``low_confidence`` names the poorly known figures."""

    m: int
    os: float
    or_: float
    rtt: float
    g: float
    os_ci: float
    or_ci: float
    rtt_ci: float
    reps: int
    large: bool
    owd: float | None = None
    g_ci: float = math.nan
    kept: int = 0
    low_confidence: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        out = {
            "m": self.m,
            "os_s": self.os,
            "or_s": self.or_,
            "g_s": self.g,
            "rtt_s": self.rtt,
            "ci_s": {"os": self.os_ci, "or": self.or_ci, "rtt": self.rtt_ci, "g": self.g_ci},
            "rel": {
                "os": _rel(self.os_ci, self.os),
                "or": _rel(self.or_ci, self.or_),
                "g": _rel(self.g_ci, self.g),
            },
            "reps": self.reps,
            "kept": self.kept,
            "low_confidence": list(self.low_confidence),
        }
        if self.owd is not None:
            out["owd_s"] = self.owd
        return out


@dataclass(frozen=True, slots=True)
class Cost:
    """What a measurement sent: messages, payload bytes, and the time it kept the link
    busy (``sum g(m)`` over its messages)."""

    messages: int = 0
    bytes: int = 0
    link_s: float = 0.0

    def __add__(self, other: Cost) -> Cost:
        return Cost(
            self.messages + other.messages, self.bytes + other.bytes, self.link_s + other.link_s
        )

    def to_dict(self) -> dict[str, Any]:
        return {"messages": self.messages, "bytes": self.bytes, "link_s": self.link_s}


@dataclass(frozen=True)
class PLogPMeasurement:
    """The outcome of a :class:`PLogPProcedure` (complete or not).

    ``L`` follows :attr:`Settings.latency`; ``L_rtt`` is always the paper's
    ``(RTT(0) - 2 g(0)) / 2``. ``points`` are sorted by size; ``g`` is as measured
    (:meth:`plogp` makes it non-decreasing). ``gap_runs`` lists ``(n, RTT_n(0), gap)``.
    ``L_estimate`` and ``g0_estimate`` carry their 90% half-widths and sample counts;
    ``low_confidence`` lists, one line each, the figures known too poorly (Rule 5).
    """

    L: float
    L_rtt: float
    g0: float
    rtt0: float
    points: tuple[Point, ...]
    complete: bool
    latency_method: str
    gap_runs: tuple[tuple[int, float, float], ...]
    k_max: int
    cost: Cost
    notes: tuple[str, ...] = ()
    L_estimate: Estimate | None = None
    g0_estimate: Estimate | None = None
    low_confidence: tuple[str, ...] = ()
    limit: float = 0.10
    """The :attr:`Settings.confidence_limit` the flags were decided with."""

    @property
    def confident(self) -> bool:
        """True when no figure is flagged low-confidence."""
        return not self.low_confidence

    def check_confidence(self) -> PLogPMeasurement:
        """Return ``self``, or raise :class:`MeasurementError` (one line) naming the
        figures known too poorly to plan with."""
        if self.low_confidence:
            raise MeasurementError(
                f"the measurement is not trustworthy: {'; '.join(self.low_confidence)}"
            )
        return self

    def plogp(self) -> PLogP:
        """The P-LogP table (``complete`` carried over).

        Noise can make a measured ``g`` dip by a few microseconds between two sizes; the
        table takes the running maximum, since ``g`` must not decrease with ``m``
        (seed 000: a larger message never occupies the link for less time).
        """
        return _table(
            self.L,
            [(p.m, p.os, p.or_, p.g) for p in self.points],
            self.complete,
        )

    def saturation_cost(self) -> Cost:
        """What a saturation-based method would have sent for the same sizes."""
        return saturation_cost(self.points, self.g0, self.rtt0)

    def to_dict(self) -> dict[str, Any]:
        """The JSON object of ``gridcoll measure --json``: ``L_s`` and ``points``."""
        ours, sat = self.cost, self.saturation_cost() if self.points else Cost()
        return _clean(
            {
                "L_s": self.L,
                "points": [p.to_dict() for p in self.points],
                "complete": self.complete,
                "L_rtt_s": self.L_rtt,
                "latency_method": self.latency_method,
                "g0_s": self.g0,
                "rtt0_s": self.rtt0,
                "k_max": self.k_max,
                "gap_runs": [{"n": n, "rtt_s": r, "gap_s": g} for n, r, g in self.gap_runs],
                "cost": ours.to_dict(),
                "saturation_cost": sat.to_dict(),
                "savings": _savings(ours, sat),
                "notes": list(self.notes),
                "confidence": {
                    "L": None if self.L_estimate is None else self.L_estimate.to_dict(),
                    "g0": None if self.g0_estimate is None else self.g0_estimate.to_dict(),
                    "limit": self.limit,
                },
                "low_confidence": list(self.low_confidence),
            }
        )


def _rel(half: float, value: float) -> float:
    if half == 0:
        return 0.0
    return half / abs(value) if value != 0 else math.inf


def _clean(value: Any) -> Any:
    """JSON-safe: non-finite floats become None."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_clean(v) for v in value]
    return value


def _table(L: float, points: list[tuple[float, float, float, float]], complete: bool) -> PLogP:
    if not points or not math.isfinite(L):
        raise MeasurementError("no size has been measured yet: there is no table")
    g, top = [], 0.0
    for p in points:  # the gap covers the overheads (seed 000, sec. 2.1): noise may not
        top = max(top, p[3], p[1], p[2], 0.0)
        g.append(top)
    if len(points) >= 2 and g[-1] <= g[-2]:
        # a flat last piece would mean infinite bandwidth beyond the largest size: take
        # the average slope of the whole table there instead (at least 1 ps/B)
        span = points[-1][0] - points[0][0]
        slope = max((g[-1] - g[0]) / span if span > 0 else 0.0, 1e-12)
        g[-1] = g[-2] + slope * (points[-1][0] - points[-2][0])
    return PLogP.from_points(
        max(L, 0.0),
        [p[0] for p in points],
        [max(p[1], 0.0) for p in points],
        [max(p[2], 0.0) for p in points],
        g,
        complete=complete,
    )


def table_from_dict(data: dict[str, Any], complete: bool | None = None) -> PLogP:
    """The P-LogP table of a :meth:`PLogPMeasurement.to_dict` object (``--json``)."""
    try:
        points = [(p["m"], p["os_s"], p["or_s"], p["g_s"]) for p in data["points"]]
        L = data["L_s"]
        L = math.nan if L is None else float(L)
    except (KeyError, TypeError) as err:
        raise MeasurementError(f"not a measurement object: missing {err}") from err
    return _table(L, points, bool(data.get("complete", True)) if complete is None else complete)


def _savings(ours: Cost, sat: Cost) -> dict[str, float | None]:
    def frac(a: float, b: float) -> float | None:
        return None if b <= 0 else 1.0 - a / b

    return {
        "messages": frac(ours.messages, sat.messages),
        "bytes": frac(ours.bytes, sat.bytes),
        "link_s": frac(ours.link_s, sat.link_s),
    }


# -- estimates (Rule 5) -----------------------------------------------------------------


def gap_estimate(
    rtt_m: Estimate, rtt_0: Estimate, g0: Estimate, slack: float
) -> tuple[Estimate, bool]:
    """``g(m) = RTT(m) - RTT(0) + g(0)`` (seed 000, sec. 2.2), never below ``g(0)``.

    (The same with the one-way times ``T(m) = L + g(m)`` of figure 3 in place of the
    round trips.) ``RTT(m) - RTT(0) = g(m) - g(0)``, and ``g`` does not decrease with
    ``m`` (a larger message never occupies the link for less, sec. 2.1): the difference
    is at least 0. Measured, it is a difference of two noisy timings and can come out
    negative. Within both half-widths plus ``slack`` that is noise, and the estimate is
    ``g(0)``, the nearest value the model allows; beyond, the timings contradict the
    model (the load changed between them): the estimate is still ``g(0)`` and the flag
    (second value) is True. The half-width is the sum of the three (a bound, not an interval).

    Examples
    --------
    >>> from gridcoll.measure.stats import Estimate
    >>> g0, rtt0 = Estimate(8e-6, 0.0, 5, 5), Estimate(20.0e-3, 5e-6, 30, 30)
    >>> g, bad = gap_estimate(Estimate(21.0e-3, 5e-6, 30, 30), rtt0, g0, 1e-4)
    >>> round(g.value * 1e3, 3), bad
    (1.008, False)
    >>> g, bad = gap_estimate(Estimate(19.99e-3, 5e-6, 30, 30), rtt0, g0, 1e-4)
    >>> g.value == g0.value, bad
    (True, False)
    """
    diff = rtt_m.value - rtt_0.value
    half = rtt_m.half + rtt_0.half + g0.half
    n, kept = min(rtt_m.n, rtt_0.n), min(rtt_m.kept, rtt_0.kept)
    if diff >= 0:
        return Estimate(g0.value + diff, half, n, kept), False
    return Estimate(g0.value, half, n, kept), -diff > rtt_m.half + rtt_0.half + slack


def latency_estimate(
    t0: Estimate, g0: Estimate, slack: float, *, one_way: bool = False
) -> tuple[Estimate, bool]:
    """``L = (RTT(0) - 2 g(0)) / 2`` (seed 000, sec. 2.2), or with ``one_way`` ``L =
    t(0) - g(0)`` from the one-way time of an empty message (``t(0) = L + g(0)``,
    figure 3); never below 0.

    ``t0`` is ``RTT(0)`` (or the one-way time). A negative value within the half-width
    plus ``slack`` is noise and gives ``L = 0``; beyond, ``g(0)`` and ``RTT(0)``
    contradict the model (the flag, second value, is True) and ``L`` is still 0.
    """
    if one_way:
        value, half = t0.value - g0.value, t0.half + g0.half
    else:
        value, half = (t0.value - 2 * g0.value) / 2, t0.half / 2 + g0.half
    if value >= 0:
        return Estimate(value, half, t0.n, t0.kept), False
    return Estimate(0.0, half, t0.n, t0.kept), -value > half + slack


def poorly_known(estimate: Estimate, limit: float, floor: float) -> bool:
    """True when the 90% half-width exceeds ``limit`` of the value and ``floor`` (the
    time scale at which the model uses it, Rule 3), or is unknown (NaN)."""
    half = estimate.half
    if math.isnan(half) or math.isnan(estimate.value):
        return True
    return half > limit * abs(estimate.value) and half > floor


# -- the saturation baseline ------------------------------------------------------------


def _saturation_n(g: float, rtt1: float, g0: float, rtt0: float, eps: float, limit: int):
    """The ``n`` sequence a saturation run at one size goes through (noise-free)."""
    ns, prev, n = [1], None, 10
    while True:
        ns.append(n)
        rtt_n = rtt1 + (n - 1) * g  # the first message costs RTT_1, each further one g
        gap = (rtt_n - rtt0 / 2) / n
        if prev is not None and abs(gap - prev) <= eps * prev and rtt1 < eps * rtt_n:
            return ns
        if n >= limit:
            return ns
        prev, n = gap, 2 * n


def saturation_cost(
    points: Sequence[Point], g0: float, rtt0: float, *, epsilon: float = 0.01
) -> Cost:
    """The cost of measuring ``g(m)`` by saturation at every size of ``points``.

    A saturation-based benchmark (Culler et al.'s LogP micro-benchmark, which seed 000's
    ref. [28] compares against) finds each ``g(m)`` as we find ``g(0)``: ``n = 1, 10``,
    then doubling, until the gap per message settles and ``RTT_1(m) < epsilon
    RTT_n(m)``. Here each run is replayed noise-free on the measured ``g(m)`` and
    ``RTT(m)`` (``RTT_n(m) = RTT_1(m) + (n - 1) g(m)``), and every message of every
    step is counted, plus one empty reply per step. Its repetitions and its overhead
    measurements are *not* counted, so this is a lower bound on what it sends.
    """
    cost = Cost()
    for p in points:
        g = max(p.g, 1e-9)
        for n in _saturation_n(g, p.rtt, g0, rtt0, epsilon, 1 << 24):
            cost += Cost(n + 1, n * p.m, n * g + g0)
    return cost


# -- the procedure ----------------------------------------------------------------------


class ProcedureState(enum.Enum):
    """Where a :class:`PLogPProcedure` is."""

    RUNNING = "running"
    DONE = "done"
    ERROR = "error"


@dataclass
class _Acc:
    """Samples of one size."""

    m: int
    samples: list[Sample] = field(default_factory=list)


class PLogPProcedure:
    """The measure side of seed 000's procedure, sans I/O (see the module docstring).

    Examples
    --------
    >>> from gridcoll.measure.synthetic import SyntheticTransport
    >>> from gridcoll.network import PLogP
    >>> link = PLogP.linear(10e-3, 1e6, g0=8e-6, os0=4e-6, or0=4e-6)
    >>> result = run_procedure(PLogPProcedure(Settings(k_max=12)), SyntheticTransport(link))
    >>> round(result.L * 1e3, 3), round(result.plogp().g(4096) * 1e3, 3)
    (10.0, 4.104)
    """

    def __init__(self, settings: Settings | None = None):
        self.settings = settings or Settings()
        self.state = ProcedureState.RUNNING
        self._acc: dict[int, _Acc] = {}
        self._gap_runs: list[tuple[int, float, float]] = []
        self._rtt1: float | None = None
        self._g0: Estimate | None = None
        self._k_max = self.settings.k_max
        self._notes: list[str] = []
        self._cost = Cost()
        self._pending: Probe | None = None
        self._gen = self._run()
        self._advance(None, first=True)

    # -- the driver's API ---------------------------------------------------------------
    def next_probe(self) -> Probe | None:
        """The probe to run next, or None when the procedure is done."""
        if self.state is ProcedureState.ERROR:
            raise MeasurementError("the procedure failed earlier; start a new one")
        return self._pending

    def feed(self, result: Any) -> None:
        """Give the result of :meth:`next_probe`'s probe."""
        if self._pending is None:
            raise MeasurementError(f"no probe is pending (state {self.state.value})")
        probe = self._pending
        try:
            self._check(probe, result)
        except MeasurementError:
            self.state = ProcedureState.ERROR
            raise
        self._account(probe, result)
        self._advance(result)

    def measurement(self) -> PLogPMeasurement:
        """What has been measured so far (``complete`` only once the procedure is done)."""
        return self._result(complete=self.state is ProcedureState.DONE)

    @property
    def sizes_done(self) -> int:
        """How many sizes have their repetitions (for progress displays)."""
        return len(self._acc)

    # -- internals ----------------------------------------------------------------------
    def _advance(self, result: Any, first: bool = False) -> None:
        try:
            self._pending = next(self._gen) if first else self._gen.send(result)
        except StopIteration:
            self._pending = None
            self.state = ProcedureState.DONE
        except BaseException:
            self._pending = None
            self.state = ProcedureState.ERROR
            raise

    @staticmethod
    def _check(probe: Probe, result: Any) -> None:
        if isinstance(probe, GapProbe):
            if not isinstance(result, int | float) or not result > 0 or not math.isfinite(result):
                raise MeasurementError(f"RTT_{probe.n}(0) must be a time > 0, got {result!r}")
            return
        if not isinstance(result, list | tuple) or len(result) != probe.reps:
            raise MeasurementError(f"{probe!r} needs {probe.reps} samples, got {result!r}")
        for s in result:
            values = (s.os, s.rtt, s.or_)
            if not all(math.isfinite(v) and v >= 0 for v in values) or s.rtt <= 0:
                raise MeasurementError(f"sample {s!r} of m={probe.m} is not a set of times")

    def _account(self, probe: Probe, result: Any) -> None:
        g0 = self._g0.value if self._g0 is not None else 0.0
        if isinstance(probe, GapProbe):
            # n empty messages and one empty reply
            self._cost += Cost(probe.n + 1, 0, (probe.n + 1) * g0)
            return
        rtt = math.fsum(x.rtt for x in result) / len(result)
        rtt0 = self._rtt0() if self._acc.get(0) and self._acc[0].samples else rtt
        g = max(rtt - rtt0 + g0, g0)
        # per repetition: m bytes there, empty back; empty there, m bytes back
        self._cost += Cost(4 * probe.reps, 2 * probe.m * probe.reps, probe.reps * (2 * g + 2 * g0))

    def _run(self) -> Generator[Probe, Any, None]:
        s = self.settings
        yield from self._measure_g0()
        yield from self._measure_sizes([0] + [1 << k for k in range(s.k_max + 1)])
        yield from self._settle_k_max()
        yield from self._find_nonlinearities()

    # step 1: g(0) by saturation
    def _measure_g0(self) -> Generator[Probe, Any, None]:
        s = self.settings
        rtt1s = []
        for _ in range(s.rtt1_reps):
            rtt1s.append((yield GapProbe(1)))
        rtt1 = min(rtt1s)  # the least disturbed (Rule 5)
        self._rtt1 = rtt1
        self._gap_runs.append((1, rtt1, rtt1 / 2))
        prev, n, noise = None, 10, 0.0
        while True:
            runs = [(yield GapProbe(n))]
            gap = max((runs[0] - rtt1 / 2) / n, 0.0)
            # the gap per message can only fall as n grows (L/n shrinks); a rise is a
            # disturbance (delays only add): run the same n again, keep the smallest,
            # and learn the run-to-run noise from the spread
            while prev is not None and gap > prev * (1 + s.epsilon) and len(runs) <= s.gap_retries:
                runs.append((yield GapProbe(n)))
                gaps = [max((r - rtt1 / 2) / n, 0.0) for r in runs]
                gap = min(gaps)
                if gap > 0:
                    noise = min(max(noise, (max(gaps) - gap) / gap), s.gap_noise_limit)
            rtt_n = min(runs)
            self._gap_runs.append((n, rtt_n, gap))
            tolerance = max(s.epsilon, noise)
            settled = prev is not None and abs(gap - prev) <= tolerance * prev
            if settled and rtt1 < s.epsilon * rtt_n:
                break
            if n >= s.gap_n_limit or (rtt_n >= s.gap_time_limit and rtt1 < s.epsilon * rtt_n):
                self._notes.append(
                    f"g(0) did not settle by n = {n} (gap {gap:.3g} s, previous "
                    f"{prev if prev is not None else math.nan:.3g} s, RTT_n {rtt_n:.3g} s): "
                    "taken as is"
                )
                break
            prev, n = gap, 2 * n
        self._g0 = self._g0_estimate(gap)

    def _g0_estimate(self, last: float) -> Estimate:
        """The smallest gap of the runs that meet ``RTT_1(0) < epsilon RTT_n(0)`` (each
        is ``g(0) + L/n``, within epsilon/2 of it, plus its delays: Rule 5); half-width:
        half their range. Without such a run, the last gap, its half-width unknown."""
        eps, rtt1 = self.settings.epsilon, self._rtt1 or 0.0
        gaps = [g for n, r, g in self._gap_runs if n > 1 and rtt1 < eps * r and g > 0]
        if not gaps:
            return Estimate(last, math.inf, 1, 1)
        return Estimate(min(gaps), (max(gaps) - min(gaps)) / 2, len(gaps), len(gaps))

    # step 2: the sizes, repetitions until each 90% interval is small enough
    def _measure_sizes(self, sizes: Sequence[int]) -> Generator[Probe, Any, None]:
        """Every size ``initial_reps`` times, then rounds over the sizes whose interval
        is still too wide, each at most ``initial_reps`` more per round, until it is
        small enough or the cap is reached (ours: the rounds spread every size's
        repetitions over the whole step, so a burst of load on the machine disturbs a
        few repetitions of each size, which its lower envelope ignores, rather than all
        of one; Rule 5)."""
        s = self.settings
        todo = []
        for m in sizes:
            if len(self._acc) >= s.max_sizes:
                if not any("max_sizes" in n for n in self._notes):
                    self._notes.append(f"stopped adding sizes at max_sizes = {s.max_sizes}")
                break
            acc = self._acc.setdefault(m, _Acc(m))
            acc.samples.extend((yield SizeProbe(m, s.initial_reps)))
            todo.append(acc)
        while todo:
            wants = [(acc, self._more(acc)) for acc in todo]
            todo = [acc for acc, more in wants if more > 0]
            for acc, more in wants:
                if more > 0:
                    acc.samples.extend((yield SizeProbe(acc.m, min(more, s.initial_reps))))

    def _more(self, acc: _Acc) -> int:
        """How many more repetitions ``acc`` wants (0: its interval is small enough or
        it has reached its cap). A small message gets at least
        :func:`~gridcoll.measure.stats.envelope_min_samples` (11), so that its lower
        envelope has a 90% interval (Rule 5); a large one, whose transfer dwarfs the
        scheduling noise, is spared them (the paper's non-intrusiveness)."""
        n = len(acc.samples)
        cap = self._cap(acc)
        if n >= cap:
            return 0
        floor = 0 if self._large(acc) else envelope_min_samples()
        need = max(self._reps_needed(acc), floor)
        return 0 if need <= n else min(cap, max(need, n + 1)) - n

    def _summaries(self, acc: _Acc) -> tuple[Estimate, Estimate, Estimate]:
        """The lower envelopes of the time ``g(m)`` comes from (:meth:`_timing`), of
        ``os(m)`` and of ``or(m)`` (Rule 5)."""
        return (
            self._timing(acc),
            envelope([x.os for x in acc.samples]),
            envelope([x.or_ for x in acc.samples]),
        )

    def _one_way(self) -> bool:
        """Do ``L`` and ``g(m)`` come from one-way times (Settings.latency)?"""
        if self.settings.latency == "round-trip":
            return False
        samples = [x for acc in self._acc.values() for x in acc.samples]
        return bool(samples) and all(x.owd is not None for x in samples)

    def _timing(self, acc: _Acc) -> Estimate:
        """``RTT(m)``, or the one-way time ``T(m) = L + g(m)`` (figure 3) when the ends
        share a clock: then ``g(m) = T(m) - T(0) + g(0)``, the paper's equation with one
        leg instead of two, and only the mirror's scheduling in it (Rule 5)."""
        if self._one_way():
            return envelope([x.owd for x in acc.samples])
        return envelope([x.rtt for x in acc.samples])

    def _rtt0(self) -> float:
        acc = self._acc.get(0)
        if acc is None or not acc.samples:
            return self._rtt1 or 0.0
        return envelope([x.rtt for x in acc.samples]).value

    def _large(self, acc: _Acc) -> bool:
        rtt = envelope([x.rtt for x in acc.samples]).value
        return acc.m > 0 and rtt > self.settings.large_factor * self._rtt0()

    def _cap(self, acc: _Acc) -> int:
        s = self.settings
        return s.max_reps_large if self._large(acc) else s.max_reps_small

    def _tolerance(self, value: float) -> float:
        return self.settings.epsilon * max(abs(value), self._rtt0())

    def _reps_needed(self, acc: _Acc) -> int:
        """Repetitions after which every half-width should be within tolerance
        (half-widths shrink as 1/sqrt(n))."""
        n, need = len(acc.samples), 0
        for summary in self._summaries(acc):
            tol = self._tolerance(summary.value)
            if summary.half <= tol:
                continue
            ratio = summary.half / tol if tol > 0 else math.inf
            need = max(need, math.ceil(n * min(ratio, 1e3) ** 2))
        return need

    # step 3: raise k_m until g(2^k_m) is on the line through the two sizes below
    def _settle_k_max(self) -> Generator[Probe, Any, None]:
        s = self.settings
        while True:
            a, b, c = (1 << (self._k_max - 2)), (1 << (self._k_max - 1)), (1 << self._k_max)
            if self._matches(a, b, c, "g"):
                return
            if self._k_max >= s.k_limit:
                self._notes.append(f"g(m)/m had not settled at k_m = {self._k_max}")
                return
            self._k_max += 1
            yield from self._measure_sizes([1 << self._k_max])

    # step 4: halve intervals where os, or or g leave the extrapolated line
    def _find_nonlinearities(self) -> Generator[Probe, Any, None]:
        s = self.settings
        while len(self._acc) < s.max_sizes:
            sizes = sorted(self._acc)
            for a, b, c in zip(sizes, sizes[1:], sizes[2:], strict=False):
                if c - b <= max(s.min_interval, s.epsilon * c):
                    continue
                if all(self._matches(a, b, c, q) for q in ("os", "or", "g")):
                    continue
                yield from self._measure_sizes([(b + c) // 2])
                break
            else:
                return
        self._notes.append(f"stopped halving at max_sizes = {s.max_sizes}")

    def _value(self, m: int, quantity: str) -> tuple[float, float]:
        t, os, or_ = self._summaries(self._acc[m])
        if quantity == "os":
            return os.value, os.half
        if quantity == "or":
            return or_.value, or_.half
        return t.value, t.half  # g(m) less the common g(0) - T(0): it cancels

    def _matches(self, a: int, b: int, c: int, quantity: str) -> bool:
        """Does ``quantity`` at ``c`` lie on the line through ``a`` and ``b``?"""
        if any(m not in self._acc for m in (a, b, c)):
            return True
        (ya, ha), (yb, hb), (yc, hc) = (self._value(m, quantity) for m in (a, b, c))
        r = (c - b) / (b - a)
        predicted = yb + (yb - ya) * r
        h_pred = _finite(hb) * (1 + r) + _finite(ha) * r
        return abs(yc - predicted) <= self._tolerance(yc) + _finite(hc) + h_pred

    def _result(self, complete: bool) -> PLogPMeasurement:
        s = self.settings
        g0 = self._g0 if self._g0 is not None else Estimate(math.nan, math.inf, 0, 0)
        zero = self._acc.get(0)
        rtt0 = envelope([x.rtt for x in zero.samples]) if zero and zero.samples else None
        floor = s.epsilon * rtt0.value if rtt0 is not None else 0.0  # Rule 3's scale
        one_way = self._one_way()
        flags: list[str] = []
        points = [
            self._point(self._acc[m], rtt0, self._timing(zero), g0, floor, flags)
            for m in sorted(self._acc)
            if self._acc[m].samples and rtt0 is not None
        ]
        nan = Estimate(math.nan, math.inf, 0, 0)
        L_rtt, bad = latency_estimate(rtt0 or nan, g0, floor)
        L, method = L_rtt, "round-trip"
        notes = list(self._notes)
        if s.latency == "one-way" and not one_way:
            notes.append("one-way latency asked for but the ends share no clock")
        if one_way and rtt0 is not None:
            L, bad = latency_estimate(self._timing(zero), g0, floor, one_way=True)
            method = "one-way"
        if rtt0 is not None:
            if bad:
                flags.append(
                    f"L: g(0) = {g0.value:.3g} s exceeds the {method} time of an "
                    "empty message beyond the noise"
                )
            elif poorly_known(L, s.confidence_limit, floor):
                flags.append(_describe("L", L))
            if poorly_known(g0, s.confidence_limit, floor):
                flags.append(_describe("g(0)", g0))
        return PLogPMeasurement(
            L=L.value,
            L_rtt=L_rtt.value,
            g0=g0.value,
            rtt0=rtt0.value if rtt0 is not None else math.nan,
            points=tuple(points),
            complete=complete,
            latency_method=method,
            gap_runs=tuple(self._gap_runs),
            k_max=self._k_max,
            cost=self._cost,
            notes=tuple(notes),
            L_estimate=L,
            g0_estimate=g0,
            low_confidence=tuple(flags),
            limit=s.confidence_limit,
        )

    def _point(
        self,
        acc: _Acc,
        rtt0: Estimate,
        t0: Estimate,
        g0: Estimate,
        floor: float,
        flags: list[str],
    ) -> Point:
        """One size's figures (Rule 5); its poorly known ones are added to ``flags``.
        ``t0``: the time of an empty message ``g(m)`` is taken against (:meth:`_timing`)."""
        s = self.settings
        t, os, or_ = self._summaries(acc)
        rtt = envelope([x.rtt for x in acc.samples])
        g, contradicts = (g0, False) if acc.m == 0 else gap_estimate(t, t0, g0, floor)
        owds = [x.owd for x in acc.samples if x.owd is not None]
        low = []
        if contradicts:
            low.append("g")
            flags.append(
                f"g({acc.m}): the time of {acc.m} bytes is below that of 0 beyond the noise"
            )
        for name, est in (("os", os), ("or", or_), ("g", g)):
            if name not in low and poorly_known(est, s.confidence_limit, floor):
                low.append(name)
                flags.append(_describe(f"{name}({acc.m})", est))
        return Point(
            m=acc.m,
            os=os.value,
            or_=or_.value,
            rtt=rtt.value,
            g=g.value,
            os_ci=os.half,
            or_ci=or_.half,
            rtt_ci=rtt.half,
            reps=rtt.n,
            large=acc.m > 0 and rtt.value > s.large_factor * rtt0.value,
            owd=envelope(owds).value if owds and len(owds) == len(acc.samples) else None,
            g_ci=g.half,
            kept=min(t.kept, rtt.kept, os.kept, or_.kept),
            low_confidence=tuple(low),
        )


def _describe(name: str, est: Estimate) -> str:
    """``g(2048) = 0.61 ms +- 0.12 ms (20%, 14 of 15 samples kept)``."""
    return (
        f"{name} = {est.value:.3g} s +- {est.half:.2g} s ({100 * est.relative:.0f}%, "
        f"{est.kept} of {est.n} samples kept)"
    )


def _finite(x: float) -> float:
    return x if math.isfinite(x) else 0.0


def run_procedure(procedure: PLogPProcedure, transport: Any, progress=None) -> PLogPMeasurement:
    """Drive ``procedure`` with ``transport`` (``transport.run(probe)``) to the end.

    ``progress(procedure, probe)`` is called before each probe. Raises
    :class:`MeasurementError` with the partial measurement if the transport fails.
    """
    while (probe := procedure.next_probe()) is not None:
        if progress is not None:
            progress(procedure, probe)
        try:
            result = transport.run(probe)
        except MeasurementError as err:
            if err.partial is None:
                err.partial = procedure.measurement()
            raise
        procedure.feed(result)
    return procedure.measurement()


def with_cost(measurement: PLogPMeasurement, extra: Cost) -> PLogPMeasurement:
    """The same measurement with ``extra`` added to its cost (control messages)."""
    return replace(measurement, cost=measurement.cost + extra)
