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
"""

from __future__ import annotations

import math
from collections.abc import Sequence

__all__ = ["CONFIDENCE", "Summary", "mean_interval", "summarize", "t_quantile"]

CONFIDENCE = 0.90
"""Two-sided confidence level of every interval (seed 000, sec. 2.2)."""

# t_{0.95, df} for df = 1..30: the two-sided 90% quantiles of Student's t.
_T95 = (
    6.314, 2.920, 2.353, 2.132, 2.015, 1.943, 1.895, 1.860, 1.833, 1.812,
    1.796, 1.782, 1.771, 1.761, 1.753, 1.746, 1.740, 1.734, 1.729, 1.725,
    1.721, 1.717, 1.714, 1.711, 1.708, 1.706, 1.703, 1.701, 1.699, 1.697,
)  # fmt: skip
_Z95 = 1.6449


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
