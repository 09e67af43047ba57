"""A tiny discrete-event core in the style of SimPy 3 (``simpy/core.py``, ``events.py``).

Theory of operation
-------------------
An environment keeps a heap of ``(time, priority, seq, event)`` entries. ``seq`` comes
from :func:`itertools.count`, so events at the same time and priority are processed in
the order they were scheduled: every run is deterministic. :meth:`Environment.step`
pops one entry, advances the clock to its time and runs the event's callbacks;
:meth:`BaseEnvironment.run` steps until the heap is empty, a time is reached or an
event is processed.

Rules:

1. Time never goes backwards: an event cannot be scheduled before ``now``.
2. Failed events are never silently ignored: when a failed event is processed and no
   callback defused it, its exception is raised out of :meth:`~Environment.step`.
3. An event is triggered at most once; triggering it again raises ``RuntimeError``.

The schedule executor (:mod:`gridcoll.simulate.executor`) drives this heap with its own
inlined copy of :meth:`Environment.step` for speed; protocols written sans-I/O (seed
004's dynamic trees) can use :class:`Event` and :class:`Timeout` directly.
"""

from __future__ import annotations

import itertools
import time as _time
from abc import ABC, abstractmethod
from collections.abc import Callable
from heapq import heappop, heappush
from typing import Any

from gridcoll.errors import EmptySchedule

__all__ = [
    "NORMAL",
    "PENDING",
    "URGENT",
    "BaseEnvironment",
    "Environment",
    "Event",
    "RealtimeEnvironment",
    "Timeout",
]

URGENT = 0
"""Priority of start-up and stop events: processed before others at the same time."""

NORMAL = 1
"""Priority of ordinary events (a message head reaching a resource, a timeout)."""

PENDING: Any = object()
"""Value of an event that has not been triggered yet."""


class _StopSimulation(Exception):
    """Raised by the callback of the ``until`` event to end :meth:`BaseEnvironment.run`."""

    @classmethod
    def callback(cls, event: Event) -> None:
        if event.ok:
            raise cls(event.value)
        raise event.value


class Event:
    """Something that happens at a point of virtual time.

    An event is *pending* until :meth:`succeed` or :meth:`fail` triggers it (which
    schedules it now), then *processed* once the environment has run its callbacks.
    Each callback is called with the event.
    """

    __slots__ = ("_defused", "_ok", "_value", "callbacks", "env")

    def __init__(self, env: BaseEnvironment):
        self.env = env
        self.callbacks: list[Callable[[Event], None]] | None = []
        self._value: Any = PENDING
        self._ok = True
        self._defused = False

    def __repr__(self) -> str:
        return f"<{type(self).__name__} at {id(self):#x}>"

    @property
    def triggered(self) -> bool:
        """True once the event has been scheduled with a value."""
        return self._value is not PENDING

    @property
    def processed(self) -> bool:
        """True once the environment has run the event's callbacks."""
        return self.callbacks is None

    @property
    def ok(self) -> bool:
        """True if the event succeeded (only meaningful once triggered)."""
        return self._ok

    @property
    def value(self) -> Any:
        """The value of the event; RuntimeError while it is still pending."""
        if self._value is PENDING:
            raise RuntimeError(f"value of {self!r} is not yet available")
        return self._value

    def defuse(self) -> None:
        """Mark a failed event as handled, so processing it does not raise."""
        self._defused = True

    def succeed(self, value: Any = None, priority: int = NORMAL) -> Event:
        """Trigger the event now with ``value``."""
        if self._value is not PENDING:
            raise RuntimeError(f"{self!r} has already been triggered")
        self._ok = True
        self._value = value
        self.env.schedule(self, priority)
        return self

    def fail(self, exception: BaseException, priority: int = NORMAL) -> Event:
        """Trigger the event now as failed; processing it raises ``exception``."""
        if self._value is not PENDING:
            raise RuntimeError(f"{self!r} has already been triggered")
        if not isinstance(exception, BaseException):
            raise ValueError(f"{exception!r} is not an exception")
        self._ok = False
        self._value = exception
        self.env.schedule(self, priority)
        return self


class Timeout(Event):
    """An event that succeeds ``delay`` seconds from now."""

    __slots__ = ()

    def __init__(
        self, env: BaseEnvironment, delay: float, value: Any = None, priority: int = NORMAL
    ):
        if delay < 0:
            raise ValueError(f"Negative delay {delay!r}")
        # inlined from Event.__init__() for speed
        self.env = env
        self.callbacks = []
        self._value = value
        self._ok = True
        self._defused = False
        env.schedule(self, priority, delay)


class BaseEnvironment(ABC):
    """The interface shared by the virtual-time and the real-time environments."""

    @property
    @abstractmethod
    def now(self) -> float:
        """The current simulation time in seconds."""

    @abstractmethod
    def schedule(self, event: Event, priority: int = NORMAL, delay: float = 0.0) -> None:
        """Put ``event`` on the heap, ``delay`` seconds from now."""

    @abstractmethod
    def step(self) -> None:
        """Process the next event; EmptySchedule if there is none."""

    def run(self, until: float | Event | None = None) -> Any:
        """Process events until the heap is empty, time ``until`` is reached, or event
        ``until`` has been processed (its value is returned).

        Raises
        ------
        ValueError
            If ``until`` is a time earlier than now.
        RuntimeError
            If no event is left but the ``until`` event was never triggered.
        """
        stop: Event | None = None
        if isinstance(until, Event):
            stop = until
            if stop.processed:
                return stop.value
        elif until is not None:
            at = float(until)
            if at < self.now:
                raise ValueError(f"until ({at!r}) must not be earlier than now ({self.now!r})")
            stop = Event(self)
            stop._value = None
            self.schedule(stop, URGENT, at - self.now)
        if stop is not None:
            stop.callbacks.append(_StopSimulation.callback)
        try:
            while True:
                self.step()
        except _StopSimulation as exc:
            return exc.args[0]
        except EmptySchedule:
            if isinstance(until, Event) and not until.triggered:
                raise RuntimeError(
                    f"no scheduled events left but the until event {until!r} was not triggered"
                ) from None
        return None


class Environment(BaseEnvironment):
    """Virtual time: the clock jumps from one event to the next.

    Parameters
    ----------
    initial_time : float
        The time the clock starts at.
    """

    def __init__(self, initial_time: float = 0.0):
        self._now = float(initial_time)
        self._queue: list[tuple[float, int, int, Any]] = []
        self._eid = itertools.count()

    @property
    def now(self) -> float:
        return self._now

    def __len__(self) -> int:
        """Number of scheduled events."""
        return len(self._queue)

    def peek(self) -> float:
        """Time of the next event, or infinity if there is none."""
        return self._queue[0][0] if self._queue else float("inf")

    def schedule(self, event: Any, priority: int = NORMAL, delay: float = 0.0) -> None:
        if delay < 0:
            raise ValueError(f"Negative delay {delay!r}")
        heappush(self._queue, (self._now + delay, priority, next(self._eid), event))

    def schedule_at(self, at: float, event: Any, priority: int = NORMAL) -> None:
        """Put ``event`` on the heap at absolute time ``at`` (not before now)."""
        if at < self._now:
            raise ValueError(f"cannot schedule at {at!r}, before now ({self._now!r})")
        heappush(self._queue, (at, priority, next(self._eid), event))

    def step(self) -> None:
        try:
            self._now, _, _, event = heappop(self._queue)
        except IndexError:
            raise EmptySchedule() from None
        callbacks, event.callbacks = event.callbacks, None
        for callback in callbacks:
            callback(event)
        if not event._ok and not event._defused:
            raise event._value  # failed events are never silently ignored


class RealtimeEnvironment(Environment):
    """Virtual time tied to the wall clock: one simulated second lasts ``factor`` s.

    With ``strict``, :meth:`step` raises RuntimeError when processing falls behind the
    wall clock by more than one ``factor``-scaled second's worth of slack.
    """

    def __init__(self, initial_time: float = 0.0, factor: float = 1.0, strict: bool = True):
        if factor <= 0:
            raise ValueError(f"factor must be > 0, got {factor!r}")
        super().__init__(initial_time)
        self.factor = factor
        self.strict = strict
        self._real_start = _time.monotonic()
        self._env_start = self._now

    def sync(self) -> None:
        """Re-align the wall clock with the current simulation time."""
        self._real_start = _time.monotonic()
        self._env_start = self._now

    def step(self) -> None:
        at = self.peek()
        if at == float("inf"):
            raise EmptySchedule()
        real_at = self._real_start + (at - self._env_start) * self.factor
        delay = real_at - _time.monotonic()
        if self.strict and -delay > self.factor:
            raise RuntimeError(
                f"simulation too slow for real time: {-delay:.3f} s behind at t={at!r}"
            )
        if delay > 0:
            _time.sleep(delay)
        super().step()
