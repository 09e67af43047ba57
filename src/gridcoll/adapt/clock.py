"""Clock offsets between two processes, as NTP estimates them, sans I/O.

The runtime times a wide-area message at its sender (``T_s``, when the send starts) and
at its receiver (``T_r``, when the receive completes), each on its own host's clock. A
host's clock differs from the root's by an offset ``theta`` (its clock minus the
root's), so the message's one-way time on one clock is ``T_r - T_s - (theta_r -
theta_s)``. ``theta`` is estimated from an exchange of four timestamps (D. L. Mills et
al., RFC 5905, *Network Time Protocol Version 4*, sec. 8): the root sends at ``T1``
(its clock), the peer receives at ``T2`` and answers at ``T3`` (its clock), the root
receives at ``T4``. Then

    ``theta = ((T2 - T1) + (T3 - T4)) / 2``  (the offset)
    ``delta = (T4 - T1) - (T3 - T2)``        (the round-trip delay)

and, whatever the two one-way delays are, the true offset lies within ``delta / 2``
of ``theta`` (:func:`ntp_sample`). Like NTP's clock filter (RFC 5905 sec. 10), of
several exchanges the one with the least delay is kept (:func:`best_sample`): its
bound is the tightest. On one host the two clocks are one, and ``theta`` comes out
within half the exchange's delay of zero.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

__all__ = ["ClockSample", "best_sample", "ntp_sample"]


@dataclass(frozen=True, slots=True)
class ClockSample:
    """One exchange's estimate: ``offset`` (``theta``, the peer's clock minus the
    root's, seconds) and ``delay`` (``delta``, the round trip less the peer's time
    between receiving and answering)."""

    offset: float
    delay: float


def ntp_sample(t1: float, t2: float, t3: float, t4: float) -> ClockSample:
    """The offset and delay of one exchange (RFC 5905 sec. 8, module docstring).

    ``t1`` and ``t4`` are on the root's clock (its send and its receipt of the answer),
    ``t2`` and ``t3`` on the peer's (its receipt and its answer).

    >>> s = ntp_sample(10.0, 15.5, 15.6, 10.3)  # peer 5.4 s ahead, 0.1 s each way
    >>> round(s.offset, 9), round(s.delay, 9)
    (5.4, 0.2)
    """
    return ClockSample(((t2 - t1) + (t3 - t4)) / 2, (t4 - t1) - (t3 - t2))


def best_sample(samples: Iterable[ClockSample]) -> ClockSample | None:
    """The sample of least delay (NTP's clock filter, RFC 5905 sec. 10), or None."""
    return min(samples, key=lambda s: s.delay, default=None)
