"""The network monitor, sans I/O: link loads from the collectives' own traffic, probes
only where there is none, an NWS forecast per link (seed 001 sec. 2.5).

Seed 001's communication benchmark re-measures every cluster pair every 5 minutes. This
monitor goes further with what the application already sends: every wide-area message
is a measurement. A message of ``m`` bytes that spent ``T`` seconds between its send and
its arrival (less the route's latency ``L``) crossed every link ``l`` of its route, and
no link served it faster than its own gap allows under the load ``f_l`` it carries:

    ``T >= g_l(m) / (1 - f_l)``,  i.e.  ``f_l <= 1 - g_l(m) / T``

for every link ``l`` it crossed (:func:`transfer_bounds`): an upper bound on each link's
load, tight on the message's bottleneck. A message queued behind others, or slowed by
another link of its route, only loosens it, so over one period the monitor keeps, per
link, the *least* of these bounds (the most load the link's fastest message allows):
the link's load sample for the period (:meth:`NetworkMonitor.end_period`). A link that
only messages bottlenecked elsewhere crossed is taken as loaded as they allow, which
predicts every route they took as it was measured. A link no message crossed in a period is probed
(:meth:`NetworkMonitor.probes_due`: the fewest routes covering the links that are due);
a probe is one message of :data:`PROBE_BYTES` and is measured the same way, but counted
as the monitor's own traffic (:class:`MonitorCost`).

Each link's samples feed a :class:`~gridcoll.adapt.forecast.Forecaster` over NWS's
three predictors; :meth:`NetworkMonitor.load` is the forecast, rounded to
:data:`LOAD_QUANTUM` (so that views repeat and plans are found in the cache), which
the advisor plans on (:meth:`Grid.with_link_load`); ``version`` counts its changes.

Probes are rationed (:class:`ProbeBudget`): over a window of calls, their bytes stay
within a share (:data:`PROBE_SHARE`) of the application's own wide-area bytes, and a
caller may leave out the links some message crossed in the period (``skip_measured``:
their passive samples suffice). :class:`MonitorTraffic` counts all the monitor sends
(reports, probes, clock synchronisation) against the application's wide-area bytes.

The monitor never reads a clock or sends a byte: the caller feeds it (the simulated
scenario, :mod:`gridcoll.experiments.adaptive`; the runtime, from the emulated messages'
delivery times, or from the real messages' send and receive times on clocks aligned by
:mod:`gridcoll.adapt.clock`) and carries out the probes it asks for.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field

from gridcoll.adapt.forecast import NWS_METHODS, Forecaster
from gridcoll.network.grid import Grid

PROBE_BYTES = 128 * 1024
"""An active probe's size: seed 004's bandwidth probe (128 KB)."""
PERIOD_S = 300.0
"""Seed 001's refresh period: every 5 minutes."""
LOAD_QUANTUM = 0.05
"""The view's loads are multiples of 5%."""
MAX_LOAD = 0.95
"""The most load a view assumes on a link (a link never vanishes from a plan)."""
TIME_RTOL = 1e-9
"""A transfer within this relative margin of its gap took exactly its gap: rounding in
the times (sums of seconds) must not read as a load of 1e-15, which would decide the
forecasters' least-error choice on noise."""
PROBE_SHARE = 0.05
"""The most probe bytes a window of calls may send, as a share of the application's
wide-area bytes in it (:class:`ProbeBudget`)."""
PROBE_WINDOW = 64
"""The calls a :class:`ProbeBudget` window spans."""


@dataclass(frozen=True)
class Transfer:
    """One wide-area message as seen end to end: from cluster ``src`` to ``dst``,
    ``nbytes``, sent at ``sent`` and arrived at ``arrived`` (seconds on one clock)."""

    src: int
    dst: int
    nbytes: int
    sent: float
    arrived: float


@dataclass
class MonitorCost:
    """What monitoring cost: probes sent, their bytes and their seconds on the wire,
    and the passive samples taken from the application's own messages."""

    probes: int = 0
    probe_bytes: int = 0
    probe_s: float = 0.0
    passive_messages: int = 0

    def to_json(self) -> dict:
        return {
            "probes": self.probes,
            "probe_bytes": self.probe_bytes,
            "probe_s": self.probe_s,
            "passive_messages": self.passive_messages,
        }


@dataclass
class MonitorTraffic:
    """The bytes monitoring sent, by kind, against the application's wide-area bytes:
    ``share`` is their ratio (0 while the application sent none)."""

    report_bytes: int = 0
    probe_bytes: int = 0
    sync_bytes: int = 0
    app_wan_bytes: int = 0

    @property
    def total(self) -> int:
        return self.report_bytes + self.probe_bytes + self.sync_bytes

    @property
    def share(self) -> float:
        return self.total / self.app_wan_bytes if self.app_wan_bytes else 0.0

    def to_json(self) -> dict:
        return {
            "report_bytes": self.report_bytes,
            "probe_bytes": self.probe_bytes,
            "sync_bytes": self.sync_bytes,
            "app_wan_bytes": self.app_wan_bytes,
            "share": self.share,
        }


@dataclass
class ProbeBudget:
    """Probe bytes rationed to ``share`` of the application's wide-area bytes: a probe
    is allowed when, with it, the probe bytes of the last ``window`` calls stay within
    ``share`` of those calls' application bytes (no burst spends what a long quiet
    stretch saved), and those of the whole run within ``share`` of the run's."""

    share: float = PROBE_SHARE
    window: int = PROBE_WINDOW
    app_bytes: int = field(init=False, default=0)
    probe_bytes: int = field(init=False, default=0)
    _calls: deque = field(init=False, repr=False)  # (application bytes, probe bytes)

    def __post_init__(self) -> None:
        if not (self.share >= 0 and math.isfinite(self.share)):
            raise ValueError(f"share must be a finite non-negative number, got {self.share!r}")
        if self.window < 1:
            raise ValueError(f"window must be at least 1, got {self.window!r}")
        self._calls = deque(maxlen=self.window)

    def called(self, app_bytes: int) -> None:
        """A call moved ``app_bytes`` over the wide area: it opens its window slot."""
        self._calls.append([app_bytes, 0])
        self.app_bytes += app_bytes

    def allows(self, nbytes: int) -> bool:
        """Whether a probe of ``nbytes`` keeps the window and the run within share."""
        if self.probe_bytes + nbytes > self.share * self.app_bytes:
            return False
        app = sum(c[0] for c in self._calls)
        spent = sum(c[1] for c in self._calls)
        return spent + nbytes <= self.share * app

    def spend(self, nbytes: int) -> None:
        """Count a probe of ``nbytes`` against the latest call."""
        if not self._calls:
            self._calls.append([0, 0])
        self._calls[-1][1] += nbytes
        self.probe_bytes += nbytes


def transfer_bounds(grid: Grid, transfer: Transfer) -> dict[str, float]:
    """The most load each link of the transfer's route can have carried, given how
    long the transfer took: ``max(0, 1 - g_l(m) / T)`` with ``T`` its time less the
    route's ``L`` (module docstring)."""
    route = grid.routes.get((transfer.src, transfer.dst))
    if route is None:
        return {}
    busy = transfer.arrived - transfer.sent - route.plogp.L
    m = max(transfer.nbytes, 1)
    bounds = {}
    for name in route.links:
        g = grid.links[name].g(m)
        bounds[name] = 0.0 if busy <= g * (1 + TIME_RTOL) or busy <= 0 else 1.0 - g / busy
    return bounds


@dataclass
class NetworkMonitor:
    """Per-link load forecasts of ``grid`` (the described, unloaded network) from
    passive transfers and active probes, one sample per link and period."""

    grid: Grid
    period_s: float = PERIOD_S
    window: int = 10
    start: float = -math.inf
    """When monitoring began: a link no message crossed is first due a period later."""
    forecasters: dict[str, Forecaster] = field(init=False)
    last_sample: dict[str, float] = field(init=False)
    cost: MonitorCost = field(init=False, default_factory=MonitorCost)
    version: int = field(init=False, default=0)
    _pending: dict[str, float] = field(init=False, default_factory=dict)
    _load: dict[str, float] = field(init=False, default_factory=dict)

    def __post_init__(self) -> None:
        if not (self.period_s > 0 and math.isfinite(self.period_s)):
            raise ValueError(f"period_s must be positive, got {self.period_s!r}")
        self.forecasters = {
            name: Forecaster(NWS_METHODS, window=self.window) for name in self.grid.links
        }
        self.last_sample = dict.fromkeys(self.grid.links, self.start)

    # -- feeding ------------------------------------------------------------------------
    def observe(self, transfers: Iterable[Transfer], *, probe: bool = False) -> None:
        """Take the transfers' bounds into the current period (module docstring)."""
        for transfer in transfers:
            if probe:
                self.cost.probes += 1
                self.cost.probe_bytes += transfer.nbytes
                self.cost.probe_s += transfer.arrived - transfer.sent
            else:
                self.cost.passive_messages += 1
            for name, bound in transfer_bounds(self.grid, transfer).items():
                self._pending[name] = min(self._pending.get(name, 1.0), bound)

    def end_period(self, now: float) -> bool:
        """Close the current period at time ``now``: every link measured in it gets its
        sample; True if the rounded view changed (``version`` went up)."""
        for name, sample in self._pending.items():
            self.forecasters[name].update(sample)
            self.last_sample[name] = now
        self._pending.clear()
        load = {name: _rounded(f.forecast(0.0)) for name, f in self.forecasters.items() if len(f)}
        load = {name: f for name, f in load.items() if f > 0}
        if load != self._load:
            self._load = load
            self.version += 1
            return True
        return False

    def forget(self, links: Iterable[str]) -> None:
        """Mark links' figures stale: they are due for a probe at once."""
        for name in links:
            self.last_sample[name] = -math.inf

    # -- asking -------------------------------------------------------------------------
    def due(self, now: float) -> list[str]:
        """The links with no sample for a whole period (sorted)."""
        return sorted(n for n, t in self.last_sample.items() if now - t >= self.period_s)

    def probes_due(self, now: float, *, skip_measured: bool = False) -> list[tuple[int, int]]:
        """Cluster pairs to probe so that every due link is crossed: greedily the route
        covering most due links (ties: the lowest pair), until none is left. With
        ``skip_measured``, a link some message crossed in the current period is not
        due (its passive sample suffices)."""
        left = set(self.due(now))
        if skip_measured:
            left -= self._pending.keys()
        chosen = []
        routes = sorted(self.grid.routes.items())
        while left:
            pair, route = max(routes, key=lambda item: len(left.intersection(item[1].links)))
            covered = left.intersection(route.links)
            if not covered:
                break  # links no route crosses: nothing to probe them with
            chosen.append(pair)
            left -= covered
        return chosen

    def load(self) -> dict[str, float]:
        """The forecast load of every link with one, rounded to :data:`LOAD_QUANTUM`
        (links forecast unloaded are left out)."""
        return dict(self._load)

    def worst_load(self) -> dict[str, float]:
        """The worst load each link showed in its window, rounded: what the advisor's
        safe plan is made on when its view has proved stale."""
        worst = {name: _rounded(max(f.history)) for name, f in self.forecasters.items() if len(f)}
        return {name: f for name, f in worst.items() if f > 0}


def quantized(steps: int) -> float:
    """``steps`` multiples of :data:`LOAD_QUANTUM`, as every rank computes it."""
    return round(steps * LOAD_QUANTUM, 6)


def _rounded(load: float) -> float:
    """A load rounded to the nearest multiple of :data:`LOAD_QUANTUM`, in [0, MAX_LOAD]."""
    return min(MAX_LOAD, quantized(round(max(0.0, load) / LOAD_QUANTUM)))
