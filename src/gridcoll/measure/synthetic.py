"""A synthetic network that answers the procedure's probes from a known P-LogP table.

It plays both *measure* and *mirror* on paper, with figure 3's timing (seed 000,
sec. 2.1): a message of ``m`` bytes leaves after ``os(m)``, arrives ``L + g(m)`` after
it was started, and a row of ``n`` messages occupies the link ``g`` each. Noise, if
asked for, is a random delay added to every time (delays never make a message faster),
from a seeded generator, so every run is repeatable: an exponential jitter, and
``spikes``, a busy machine's rare long delays (a process that was not scheduled).
Tests and benchmarks drive :class:`~gridcoll.measure.plogp_procedure.PLogPProcedure`
with it.
"""

from __future__ import annotations

import random

from gridcoll.errors import MeasurementError
from gridcoll.measure.plogp_procedure import (
    Cost,
    GapProbe,
    Sample,
    SizeProbe,
)
from gridcoll.network.plogp import PLogP

__all__ = ["SyntheticTransport"]


class SyntheticTransport:
    """Answers :class:`GapProbe` and :class:`SizeProbe` from ``plogp``.

    Parameters
    ----------
    plogp : PLogP
        The true parameters of the link (forward direction).
    backward : PLogP, optional
        The reverse direction (the replies); default ``plogp``.
    noise : float
        Mean of an exponential delay (seconds) added to each measured time; 0: exact.
    seed : int
        Seeds the noise.
    shared_clock : bool
        Report one-way times (as ranks on one machine can).
    fail_after : int, optional
        Raise :class:`MeasurementError` at this probe (a lost rank), for tests.
    spikes : tuple of float
        ``(probability, seconds)``: each time is, with this probability, delayed by up
        to this many more seconds (uniformly); ``(0, 0)``: none.
    """

    def __init__(
        self,
        plogp: PLogP,
        backward: PLogP | None = None,
        *,
        noise: float = 0.0,
        seed: int = 0,
        shared_clock: bool = False,
        fail_after: int | None = None,
        spikes: tuple[float, float] = (0.0, 0.0),
    ):
        self.fwd = plogp
        self.bwd = backward or plogp
        self.noise = noise
        self.rng = random.Random(seed)
        self.shared_clock = shared_clock
        self.fail_after = fail_after
        self.spikes = spikes
        self.probes = 0
        self.cost = Cost()
        self.elapsed = 0.0
        """Virtual seconds the measurement would have taken."""

    def _jitter(self) -> float:
        delay = self.rng.expovariate(1.0 / self.noise) if self.noise > 0 else 0.0
        p, most = self.spikes
        if p > 0 and self.rng.random() < p:
            delay += self.rng.uniform(0.0, most)
        return delay

    def run(self, probe: GapProbe | SizeProbe):
        """The result of one probe (see :mod:`gridcoll.measure.plogp_procedure`)."""
        self.probes += 1
        if self.fail_after is not None and self.probes > self.fail_after:
            raise MeasurementError(f"the mirror did not answer probe {self.probes} (lost)")
        f, b = self.fwd, self.bwd
        if isinstance(probe, GapProbe):
            # the last of n messages arrives L + n g(0) after the first left; the reply
            # takes L + g(0) more
            rtt = f.L + probe.n * f.g(0) + b.L + b.g(0) + self._jitter()
            self.elapsed += rtt
            self.cost += Cost(probe.n + 1, 0, (probe.n + 1) * f.g(0))
            return rtt
        m, samples = probe.m, []
        for _ in range(probe.reps):
            owd = f.L + f.g(m) + self._jitter()
            rtt = owd + b.L + b.g(0) + self._jitter()
            delta = probe.delta_factor * rtt
            samples.append(
                Sample(
                    os=f.os(m) + self._jitter() * 0.01,
                    rtt=rtt,
                    or_=b.or_(m) + self._jitter() * 0.01,
                    owd=owd if self.shared_clock else None,
                )
            )
            if not probe.with_or:
                samples[-1] = Sample(samples[-1].os, rtt, 0.0, samples[-1].owd)
                self.elapsed += rtt
                self.cost += Cost(2, m, f.g(m) + f.g(0))
                continue
            self.elapsed += rtt + max(delta, f.L + f.g(0) + b.L + b.g(m))
            self.cost += Cost(4, 2 * m, 2 * f.g(m) + 2 * f.g(0))
        return samples
