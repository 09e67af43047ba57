"""The event-driven simulator: replay a schedule on a grid in virtual time.

:func:`simulate` gives exact per-rank completion times under the P-LogP timing rules
(see :mod:`gridcoll.simulate.executor`), and with ``record=True`` a :class:`Timeline`
of every message and resource occupancy. :mod:`gridcoll.simulate.engine` is the small
SimPy-style event core it runs on; :mod:`gridcoll.simulate.streams` replays, without
the heap and bit for bit the same, the schedules whose every resource serves a single
stream (every tree broadcast). :mod:`gridcoll.simulate.fairshare` shares fair links
(``Link.sharing == "fair"``) max-min fairly among the messages on them.
"""

from gridcoll.errors import EmptySchedule
from gridcoll.simulate.engine import (
    NORMAL,
    URGENT,
    BaseEnvironment,
    Environment,
    Event,
    RealtimeEnvironment,
    Timeout,
)
from gridcoll.simulate.executor import SimResult, simulate
from gridcoll.simulate.timeline import RESOURCE_KINDS, Interval, MessageRecord, Timeline

__all__ = [
    "NORMAL",
    "RESOURCE_KINDS",
    "URGENT",
    "BaseEnvironment",
    "EmptySchedule",
    "Environment",
    "Event",
    "Interval",
    "MessageRecord",
    "RealtimeEnvironment",
    "SimResult",
    "Timeline",
    "Timeout",
    "simulate",
]
