"""Adaptive collectives (seed 001): the network monitor, the forecasters, the advisor
that plans ahead, and the plan hand-off. Sans I/O: the runtime
(``gridcoll.Comm(adaptive=True)``) and seed 001's scenario
(:mod:`gridcoll.experiments.adaptive`) feed them."""

from gridcoll.adapt.advisor import ADVISOR_MAX_BUDGET_S, IDLE_SIZES, STALE_FACTOR, Advisor
from gridcoll.adapt.clock import ClockSample, best_sample, ntp_sample
from gridcoll.adapt.forecast import (
    NWS_METHODS,
    TREND_METHODS,
    Forecaster,
    geometric_trend,
    last_value,
    linear_trend,
    running_mean,
    running_median,
)
from gridcoll.adapt.monitor import (
    LOAD_QUANTUM,
    PERIOD_S,
    PROBE_BYTES,
    PROBE_SHARE,
    MonitorCost,
    MonitorTraffic,
    NetworkMonitor,
    ProbeBudget,
    Transfer,
    transfer_bounds,
)

__all__ = [
    "ADVISOR_MAX_BUDGET_S",
    "IDLE_SIZES",
    "LOAD_QUANTUM",
    "NWS_METHODS",
    "PERIOD_S",
    "PROBE_BYTES",
    "PROBE_SHARE",
    "STALE_FACTOR",
    "TREND_METHODS",
    "Advisor",
    "ClockSample",
    "Forecaster",
    "MonitorCost",
    "MonitorTraffic",
    "NetworkMonitor",
    "ProbeBudget",
    "Transfer",
    "best_sample",
    "geometric_trend",
    "last_value",
    "linear_trend",
    "ntp_sample",
    "running_mean",
    "running_median",
    "transfer_bounds",
]
