"""The exception hierarchy of gridcoll.

Every error gridcoll raises on purpose derives from :class:`GridcollError`, so an
application can catch them all, and each message names the bad value with ``!r``.
"""

__all__ = [
    "GridError",
    "GridcollError",
    "LogError",
    "ParameterError",
    "ScheduleError",
    "Unfeasible",
    "UnknownAlgorithm",
]


class GridcollError(Exception):
    """Base class of every error raised by gridcoll."""


class GridError(GridcollError, ValueError):
    """A grid description or P-LogP table is malformed or inconsistent."""


class ParameterError(GridcollError, ValueError):
    """A call argument is out of range: a root, a size, a segment size, a degree."""


class LogError(GridcollError, ValueError):
    """A call log (``GRIDCOLL_LOG``) cannot be read: missing, empty or malformed."""


class UnknownAlgorithm(GridcollError, KeyError):
    """No builder is registered under the requested name."""

    def __str__(self) -> str:  # KeyError quotes its argument; we want the plain sentence
        return str(self.args[0]) if self.args else ""


class ScheduleError(GridcollError):
    """A schedule would not deliver exactly the right bytes, or cannot be executed.

    ``rank`` and ``segment`` name the first place the replay found wrong, when known.
    """

    def __init__(self, message: str, *, rank: int | None = None, segment: int | None = None):
        super().__init__(message)
        self.rank = rank
        self.segment = segment


class Unfeasible(GridcollError):
    """No schedule of the requested kind exists for these arguments."""
