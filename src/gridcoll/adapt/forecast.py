"""Forecasts from short histories: seed 001's regression and NWS's adaptive choice.

Two series need forecasting:

* each wide-area link's load, from the monitor's samples (:mod:`gridcoll.adapt.monitor`).
  The Network Weather Service (Wolski, Spring and Hayes, *The Network Weather Service*,
  FGCS 15, 1999, sec. 4) runs several simple predictors side by side and, at each step,
  uses the one whose recent error is least; :data:`NWS_METHODS` are its three
  simplest: the last value, the running mean and the running median;
* the application's broadcast sizes and the intervals between its calls, which seed
  001 (sec. 2.5) forecasts "by simple linear regression models". Its own application
  shrinks the interval *exponentially*, which a straight line fits badly, so
  :data:`TREND_METHODS` adds a geometric trend (a line through ``log x``) and the last
  value, and the same least-recent-error rule picks among them: the seed's regression
  where it is right, the better one where the data show it.

:class:`Forecaster` is the one mechanism; a method is a pure function of the history.
Every forecast costs O(W) for a window of ``W`` values.
"""

from __future__ import annotations

import math
import statistics
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

Method = Callable[..., float]
"""A predictor: ``method(history, steps=1)``, the history oldest first and never empty,
-> the value ``steps`` ahead (the next one by default)."""


def last_value(history: Sequence[float], steps: int = 1) -> float:
    """NWS's last-value predictor."""
    return history[-1]


def running_mean(history: Sequence[float], steps: int = 1) -> float:
    """NWS's running mean over the window."""
    return math.fsum(history) / len(history)


def running_median(history: Sequence[float], steps: int = 1) -> float:
    """NWS's running median over the window (robust to a lone outlier)."""
    return statistics.median(history)


def linear_trend(history: Sequence[float], steps: int = 1) -> float:
    """Seed 001's simple linear regression: the least-squares line through
    ``(i, x_i)``, evaluated ``steps`` indices past the last (the last value while there
    are fewer than two points)."""
    n = len(history)
    if n < 2:
        return history[-1]
    mean_i = (n - 1) / 2
    mean_x = math.fsum(history) / n
    sxx = math.fsum((i - mean_i) ** 2 for i in range(n))
    sxy = math.fsum((i - mean_i) * (x - mean_x) for i, x in enumerate(history))
    return mean_x + sxy / sxx * (n - 1 + steps - mean_i)


def geometric_trend(history: Sequence[float], steps: int = 1) -> float:
    """A line through ``(i, log x_i)`` at the next index: an exponential growth or
    decay (seed 001's intervals); the linear trend if a value is not positive or
    there are fewer than two (exactly the last value, as ``exp(log x)`` is not)."""
    if len(history) < 2 or min(history) <= 0:
        return linear_trend(history, steps)
    return math.exp(linear_trend([math.log(x) for x in history], steps))


NWS_METHODS: tuple[tuple[str, Method], ...] = (
    ("last", last_value),
    ("mean", running_mean),
    ("median", running_median),
)
TREND_METHODS: tuple[tuple[str, Method], ...] = (
    ("linear", linear_trend),
    ("geometric", geometric_trend),
    ("last", last_value),
)


@dataclass
class Forecaster:
    """Several predictors run side by side; the forecast is the one whose mean
    absolute error over the last ``error_window`` values is least (ties: the first
    listed). ``update`` scores every method's forecast of the new value before
    appending it.

    >>> f = Forecaster(TREND_METHODS)
    >>> for x in (90.0, 81.0, 72.9, 65.61):
    ...     f.update(x)
    >>> f.chosen, round(f.forecast(), 3)
    ('geometric', 59.049)
    """

    methods: tuple[tuple[str, Method], ...] = NWS_METHODS
    window: int = 10
    error_window: int = 5
    history: deque[float] = field(init=False)
    errors: dict[str, deque[float]] = field(init=False)

    def __post_init__(self) -> None:
        if not self.methods:
            raise ValueError("a forecaster needs at least one method")
        self.history = deque(maxlen=self.window)
        self.errors = {name: deque(maxlen=self.error_window) for name, _ in self.methods}

    def __len__(self) -> int:
        return len(self.history)

    def update(self, value: float) -> None:
        """Score every method on ``value``, then add it to the history."""
        if not math.isfinite(value):
            raise ValueError(f"a forecaster takes finite values, got {value!r}")
        if self.history:
            for name, method in self.methods:
                self.errors[name].append(abs(method(self.history) - value))
        self.history.append(value)

    @property
    def chosen(self) -> str:
        """The method with the least recent error (the first while none is scored)."""

        def score(item: tuple[str, Method]) -> float:
            errs = self.errors[item[0]]
            return math.fsum(errs) / len(errs) if errs else 0.0

        return min(self.methods, key=score)[0]

    def forecast(self, default: float = math.nan, steps: int = 1) -> float:
        """The chosen method's value ``steps`` ahead (``default`` with no history)."""
        if not self.history:
            return default
        return dict(self.methods)[self.chosen](self.history, steps)
