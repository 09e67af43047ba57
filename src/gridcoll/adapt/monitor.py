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

The monitor never reads a clock or sends a byte: the caller feeds it (the simulated
scenario, :mod:`gridcoll.experiments.adaptive`; the runtime, from the emulated messages'
delivery times) and carries out the probes it asks for.
"""

from __future__ import annotations

import math
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

    def probes_due(self, now: float) -> list[tuple[int, int]]:
        """Cluster pairs to probe so that every due link is crossed: greedily the route
        covering most due links (ties: the lowest pair), until none is left."""
        left = set(self.due(now))
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
