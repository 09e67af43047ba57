"""Max-min fair sharing of links among concurrent flows: progressive filling.

Theory of operation
-------------------
A *flow* is one message crossing one or more fair links. On link ``l`` a flow of ``m``
bytes costs ``c_l = g_l(m) / m`` seconds per byte (``g_l`` the link's occupancy
function: the per-message constant ``g_0`` is spread over the message's bytes), so a
flow sending ``x`` bytes/s uses the fraction ``x c_l`` of the link's time, and a link
is saturated when those fractions sum to 1. Alone, a flow runs at ``min_l 1 / c_l``
and takes ``max_l g_l(m)``: exactly its FIFO occupancy.

:func:`max_min_rates` gives every flow its max-min fair rate in bytes/s by progressive
filling (Bertsekas & Gallager, *Data Networks*, 2nd ed., sec. 6.5.2): all rates rise
together from 0; when a link saturates, the flows crossing it are frozen at the level
reached; the others keep rising until every flow crosses a saturated link. The result
is the unique allocation in which every flow has a *bottleneck*: a saturated link on
which no flow has a larger rate (ibid., the bottleneck characterisation). With every
``c_l`` equal on a link (``g_0 = 0`` or equal sizes) this is the classic max-min
fairness of TCP flows on a shared bottleneck.

:class:`FairShare` keeps the flows in progress in virtual time: it advances their
remaining bytes at their rates, recomputes the rates when a flow starts or ends, and
says when the next flow ends. The simulator (:mod:`gridcoll.simulate.executor`) drives
it from its event heap.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass

__all__ = ["FairShare", "Flow", "max_min_rates"]

FINISHED = 1e-12
"""A flow whose remaining bytes are at most this fraction of its size has ended
(rounding of the fluid's progress over several rate changes)."""


def max_min_rates(
    flows: Mapping[Hashable, Sequence[tuple[Hashable, float]]],
    capacity: Mapping[Hashable, float] | None = None,
    weights: Mapping[Hashable, int] | None = None,
) -> dict[Hashable, float]:
    """The max-min fair rates of ``flows``, by progressive filling.

    Parameters
    ----------
    flows : mapping flow -> sequence of (link, cost)
        The links each flow crosses, with the capacity one unit of its rate uses there
        (``c_l = g_l(m) / m``: seconds of the link per byte). Costs <= 0 are ignored.
    capacity : mapping link -> float, optional
        Each link's capacity (default 1: a link's whole time).
    weights : mapping flow -> int, optional
        How many identical flows each key stands for (default 1): identical flows get
        identical max-min rates, so :class:`FairShare` solves one per class.

    Returns
    -------
    dict flow -> rate
        Every flow's rate (``inf`` for a flow that costs nothing anywhere).

    Notes
    -----
    Bertsekas & Gallager, *Data Networks*, sec. 6.5.2: raise the level ``lam`` of every
    unfrozen flow together; link ``l`` saturates at ``lam_l = (cap_l - used_l) /
    sum_{f unfrozen on l} c_{f,l}``; freeze the flows of the links reaching the least
    ``lam_l``, and repeat. O(K (R + F)) for R links, F flow-link pairs and K <= R
    distinct saturation levels.
    """
    load: dict[Hashable, float] = {}  # sum of the costs of the unfrozen flows on a link
    count: dict[Hashable, int] = {}  # number of unfrozen flows on a link
    users: dict[Hashable, list[Hashable]] = {}
    for key, costs in flows.items():
        n = 1 if weights is None else weights[key]
        for link, c in costs:
            if c > 0:
                load[link] = load.get(link, 0.0) + n * c
                count[link] = count.get(link, 0) + 1
                users.setdefault(link, []).append(key)
    used = dict.fromkeys(load, 0.0)
    rates: dict[Hashable, float] = {}
    level = 0.0
    while True:
        best, tight = math.inf, []
        for link, n in count.items():
            if n == 0:
                continue
            cap = 1.0 if capacity is None else capacity[link]
            lam = max((cap - used[link]) / load[link], level)  # rounding never lowers it
            if lam < best:
                best, tight = lam, [link]
            elif lam == best:
                tight.append(link)
        if not tight:
            break
        level = best
        for link in tight:
            for key in users[link]:
                if key in rates:
                    continue
                rates[key] = level
                n = 1 if weights is None else weights[key]
                for other, c in flows[key]:
                    if c > 0:
                        used[other] += level * (n * c)
                        load[other] -= n * c
                        count[other] -= 1
    for key in flows:
        rates.setdefault(key, math.inf)
    return rates


@dataclass(slots=True)
class Flow:
    """One message in progress on the fair links of its path."""

    costs: tuple[tuple[int, float], ...]
    """``(link id, seconds per byte)`` of every fair link crossed."""
    size: float
    """Bytes to carry (at least 1)."""
    remaining: float
    """Bytes not yet carried, as of :attr:`FairShare.now`."""
    rate: float = 0.0
    """Bytes/s since the last rate change."""
    finish: float = math.inf
    """When the flow ends at its present rate."""


class FairShare:
    """The flows in progress on fair links, in virtual time (module docstring).

    :meth:`start` and :meth:`pop_finished` change the set of flows; after them,
    :meth:`reshare` gives the new rates and the time the next flow ends.
    """

    CACHE_SIZE = 4096
    """Allocations kept per run, by the classes of flows and their counts: a pipeline
    meets the same few mixes of flows again and again."""

    def __init__(self) -> None:
        self.flows: dict[int, Flow] = {}
        self.now = 0.0
        self.cache: dict[frozenset, dict] = {}
        self.capacity: dict[int, float] = {}
        """Capacity of a link id as a fraction of its own (default 1; under a load
        ``f``, ``1 - f``: :mod:`gridcoll.network.load`)."""

    def advance(self, t: float) -> None:
        """Carry every flow's bytes from :attr:`now` to ``t`` at its rate."""
        dt = t - self.now
        if dt > 0:
            for flow in self.flows.values():
                flow.remaining -= flow.rate * dt
        self.now = max(self.now, t)

    def start(self, t: float, key: int, costs: tuple[tuple[int, float], ...], size: float):
        """A flow of ``size`` bytes enters at ``t`` (rates are stale until :meth:`reshare`)."""
        self.advance(t)
        self.flows[key] = Flow(costs, size, size)

    def reshare(self) -> float:
        """Recompute every rate (:func:`max_min_rates`, once per class of flows with the
        same costs: the segments of a pipeline, the pairs of one cluster pair); the time
        the next flow ends."""
        flows = self.flows
        classes: dict[tuple[tuple[int, float], ...], int] = {}  # identical flows, counted
        for flow in flows.values():
            classes[flow.costs] = classes.get(flow.costs, 0) + 1
        mix = frozenset(classes.items())
        capacity = None
        if self.capacity:
            capacity = {link: self.capacity.get(link, 1.0) for c in classes for link, _ in c}
            mix = frozenset((mix, frozenset(capacity.items())))
        rates = self.cache.get(mix)
        if rates is None:
            if len(self.cache) >= self.CACHE_SIZE:
                self.cache.clear()
            rates = self.cache[mix] = max_min_rates(
                {c: c for c in classes}, capacity=capacity, weights=classes
            )
        now, first = self.now, math.inf
        for flow in flows.values():
            rate = flow.rate = rates[flow.costs]
            remaining = flow.remaining if flow.remaining > 0 else 0.0
            flow.finish = now + remaining / rate if rate < math.inf else now
            if flow.finish < first:
                first = flow.finish
        return first

    def pop_finished(self, t: float) -> list[int]:
        """The flows that have ended by ``t`` (in the order they started), removed."""
        self.advance(t)
        done = [
            key
            for key, flow in self.flows.items()
            if flow.finish <= t or flow.remaining <= FINISHED * flow.size
        ]
        for key in done:
            del self.flows[key]
        return done
