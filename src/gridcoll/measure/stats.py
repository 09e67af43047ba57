"""Small statistics for the measurement: medians and their 90% confidence intervals.

Seed 000 (sec. 2.2) repeats each roundtrip "until a sufficiently small (90%) confidence
interval is obtained". We estimate each quantity by the **median** of its repetitions
and use the distribution-free 90% interval of the median, ``[x_(j), x_(n+1-j)]`` with
``j`` the largest rank such that ``P(Binomial(n, 1/2) < j) <= 5%`` (for ``n < 5`` no
such ``j`` exists and the interval is the whole range). Rather than the mean's
t-interval: on a shared, oversubscribed machine a repetition is now and then delayed by
milliseconds (the process was not scheduled), and delays only ever add, so a mean is
pulled by them while the median is not; the order-statistics interval needs no normal
noise. :func:`mean_interval` gives the classical t-interval too.

The P-LogP procedure's timings are **lower envelopes**: a round trip, a send or a receive
call cannot take less than the network and the software need, and everything else that
happens to the processes (a wake-up that comes late, a core lent to another job) only
adds. :func:`envelope` estimates such a quantity robustly: it drops the far-out samples
(above Tukey's fence ``Q3 + 3 (Q3 - Q1)``), then takes the **lower quartile** of the rest
with its distribution-free 90% interval (the order statistics ``x_(j) .. x_(k)`` around
rank ``n/4``, from ``Binomial(n, 1/4)``; below about 11 samples the interval has no 90%
cover and is the range ``x_(1) .. x_(k)``). Up to three quarters of the repetitions may
be disturbed, by any amount, without moving it; its bias (the lower quartile of the
small, undisturbed scheduling noise) is the same for every message size, so it cancels in
the differences the procedure takes (``g(m) = RTT(m) - RTT(0) + g(0)``). The minimum is
the same idea (V. Paxson, On calibrating measurements of packet transit times,
SIGMETRICS 1998, sec. 2: "minimum filtering") with no interval and no protection
against one sample that came out too low.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

__all__ = [
    "CONFIDENCE",
    "ENVELOPE_QUANTILE",
    "FENCE",
    "Estimate",
    "Summary",
    "envelope",
    "envelope_min_samples",
    "mean_interval",
    "quantile_interval",
    "summarize",
    "t_quantile",
]

CONFIDENCE = 0.90
"""Two-sided confidence level of every interval (seed 000, sec. 2.2)."""

# t_{0.95, df} for df = 1..30: the two-sided 90% quantiles of Student's t.
_T95 = (
    6.314, 2.920, 2.353, 2.132, 2.015, 1.943, 1.895, 1.860, 1.833, 1.812,
    1.796, 1.782, 1.771, 1.761, 1.753, 1.746, 1.740, 1.734, 1.729, 1.725,
    1.721, 1.717, 1.714, 1.711, 1.708, 1.706, 1.703, 1.701, 1.699, 1.697,
)  # fmt: skip
_Z95 = 1.6449

ENVELOPE_QUANTILE = 0.25
"""The quantile :func:`envelope` estimates: the lower quartile."""
FENCE = 3.0
"""Tukey's far-out fence: samples above ``Q3 + FENCE (Q3 - Q1)`` are dropped."""


def t_quantile(df: int) -> float:
    """``t_{0.95, df}``: the multiplier of a two-sided 90% interval with ``df`` degrees
    of freedom (tabulated to 30, then the normal value with a 1/df correction)."""
    if df < 1:
        return math.inf
    if df <= len(_T95):
        return _T95[df - 1]
    return _Z95 + (_Z95**3 + _Z95) / (4 * df)  # Cornish-Fisher: within 0.1% for df > 30


class Summary:
    """An estimate (``mean``: the median here) and the half-width of its 90% interval."""

    __slots__ = ("half", "mean", "n")

    def __init__(self, mean: float, half: float, n: int):
        self.mean = mean
        self.half = half
        self.n = n

    def __repr__(self) -> str:
        return f"Summary(mean={self.mean!r}, half={self.half!r}, n={self.n})"


def _median_rank(n: int) -> int:
    """The largest ``j >= 1`` with ``P(Bin(n, 1/2) <= j - 1) <= (1 - CONFIDENCE)/2``,
    or 1 when there is none (small n: the interval is the range)."""
    alpha, cdf, j = (1 - CONFIDENCE) / 2, 0.0, 0
    for k in range(n + 1):
        cdf += math.comb(n, k) / 2**n
        if cdf > alpha:
            break
        j = k + 1
    return max(j, 1)


def summarize(samples: Sequence[float]) -> Summary:
    """The median and the half-width of its distribution-free 90% interval."""
    n = len(samples)
    if n == 0:
        return Summary(math.nan, math.inf, 0)
    xs = sorted(samples)
    median = xs[n // 2] if n % 2 else (xs[n // 2 - 1] + xs[n // 2]) / 2
    if n == 1:
        return Summary(median, math.inf, 1)
    j = _median_rank(n)
    return Summary(median, (xs[n - j] - xs[j - 1]) / 2, n)


def mean_interval(samples: Sequence[float]) -> Summary:
    """The mean and the half-width of Student's 90% interval (inf for n < 2)."""
    n = len(samples)
    if n == 0:
        return Summary(math.nan, math.inf, 0)
    mean = math.fsum(samples) / n
    if n == 1:
        return Summary(mean, math.inf, 1)
    var = math.fsum((x - mean) ** 2 for x in samples) / (n - 1)
    return Summary(mean, t_quantile(n - 1) * math.sqrt(var / n), n)


@dataclass(frozen=True, slots=True)
class Estimate:
    """A robust estimate with its 90% half-width, how many samples it had and kept."""

    value: float
    half: float
    n: int
    kept: int

    @property
    def relative(self) -> float:
        """``half / |value|`` (0 for an exact zero, inf for an uncertain one)."""
        if self.half == 0:
            return 0.0
        return self.half / abs(self.value) if self.value != 0 else math.inf

    def to_dict(self) -> dict[str, Any]:
        """``{"value", "half", "rel", "n", "kept"}`` (times in seconds)."""
        return {
            "value": self.value,
            "half": self.half,
            "rel": self.relative,
            "n": self.n,
            "kept": self.kept,
        }


def _binom_cdf(n: int, p: float) -> list[float]:
    """``P(Binomial(n, p) <= k)`` for ``k = 0 .. n``."""
    out, cdf = [], 0.0
    for k in range(n + 1):
        cdf += math.comb(n, k) * p**k * (1 - p) ** (n - k)
        out.append(cdf)
    return out


def quantile_interval(samples: Sequence[float], q: float) -> Summary:
    """The ``q``-quantile of ``samples`` (the order statistic ``x_(ceil(q n))``) and the
    half-width of its distribution-free 90% interval ``[x_(j), x_(k)]``: ``j`` the
    largest rank with ``P(B < j) <= 5%`` and ``k`` the smallest with ``P(B >= k) <= 5%``,
    ``B ~ Binomial(n, q)``; where no such rank exists (few samples), the interval
    reaches the extreme sample on that side."""
    if not 0 < q < 1:
        raise ValueError(f"q must be in (0, 1), got {q!r}")
    n = len(samples)
    if n == 0:
        return Summary(math.nan, math.inf, 0)
    xs = sorted(samples)
    value = xs[max(math.ceil(q * n), 1) - 1]
    if n == 1:
        return Summary(value, math.inf, 1)
    alpha = (1 - CONFIDENCE) / 2
    cdf = _binom_cdf(n, q)
    j = max([r for r in range(1, n + 1) if cdf[r - 1] <= alpha], default=1)
    k = min([r for r in range(1, n + 1) if 1 - cdf[r - 1] <= alpha], default=n)
    return Summary(value, (xs[max(k, j) - 1] - xs[j - 1]) / 2, n)


def envelope_min_samples() -> int:
    """The fewest samples whose lower quartile has a 90% interval (11): below it the
    interval is the range, and a few samples all delayed alike look precise."""
    alpha, n = (1 - CONFIDENCE) / 2, 1
    while (1 - ENVELOPE_QUANTILE) ** n > alpha:
        n += 1
    return n


def envelope(samples: Sequence[float]) -> Estimate:
    """The lower envelope of timings that delays only lengthen (module docstring):
    far-out samples dropped, then the lower quartile and its 90% half-width."""
    n = len(samples)
    if n == 0:
        return Estimate(math.nan, math.inf, 0, 0)
    xs = sorted(samples)
    q1, q3 = xs[math.ceil(n / 4) - 1], xs[math.ceil(3 * n / 4) - 1]  # nearest rank
    fence = q3 + FENCE * (q3 - q1)
    kept = [x for x in xs if x <= fence]
    s = quantile_interval(kept, ENVELOPE_QUANTILE)
    return Estimate(s.mean, s.half, n, len(kept))
