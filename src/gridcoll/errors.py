"""The exception hierarchy of gridcoll.

Every error gridcoll raises on purpose derives from :class:`GridcollError`, so an
application can catch them all, and each message names the bad value with ``!r``.
As in networkx's ``exception.py``, the whole hierarchy lives here; the layers raise
these classes and re-export the ones their users catch (``gridcoll.runtime``'s
collective errors, ``gridcoll.simulate.EmptySchedule``...)::

    GridcollError
    ├── GridError (ValueError)          a grid or P-LogP table is malformed
    ├── ParameterError (ValueError)     a call argument is out of range
    ├── LogError (ValueError)           a call log cannot be read
    ├── UnknownAlgorithm (KeyError)     no builder of that name
    ├── ScheduleError                   a schedule is wrong or cannot run
    ├── Unfeasible                      no schedule of that kind exists
    ├── EmptySchedule                   the simulator has no event left
    ├── CollectiveError                 a collective failed while running
    │   ├── CollectiveTimeout (TimeoutError)
    │   └── MismatchError (ValueError)
    ├── LaunchError                     mpiexec could not run the job
    ├── MeasurementError                a measurement or measured experiment failed
    ├── ProtocolError                   a Phoenix process used against the rules
    │   ├── LocalProtocolError          an event it cannot take
    │   └── RemoteProtocolError         a message that breaks an invariant
    ├── WireError (ValueError)          bytes that are not a valid Phoenix message
    ├── GroupError                      a Phoenix group operation failed
    └── UsageError                      the command line is malformed

This module imports nothing of gridcoll: it is the bottom layer.
"""

from typing import Any

__all__ = [
    "CollectiveError",
    "CollectiveTimeout",
    "EmptySchedule",
    "GridError",
    "GridcollError",
    "GroupError",
    "LaunchError",
    "LocalProtocolError",
    "LogError",
    "MeasurementError",
    "MismatchError",
    "ParameterError",
    "ProtocolError",
    "RemoteProtocolError",
    "ScheduleError",
    "Unfeasible",
    "UnknownAlgorithm",
    "UsageError",
    "WireError",
]


class GridcollError(Exception):
    """Base class of every error raised by gridcoll."""


# -- arguments and descriptions ------------------------------------------------------


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


# -- schedules and their simulation --------------------------------------------------


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


class EmptySchedule(GridcollError):
    """Raised by :meth:`gridcoll.simulate.engine.Environment.step` when no event is
    left to process (SimPy's ``EmptySchedule``)."""


# -- the runtime -----------------------------------------------------------------------


class CollectiveError(GridcollError):
    """A collective failed while running; ``rank`` is where, ``peer`` the rank involved.

    The communicator stays usable: the next call runs as if the failed one had not
    happened (its stray messages are drained, :class:`gridcoll.runtime.notices.Ledger`).
    """

    def __init__(
        self,
        message: str,
        *,
        rank: int | None = None,
        peer: int | None = None,
        relayed: bool = False,
    ):
        super().__init__(message)
        self.rank = rank
        self.peer = peer
        self.relayed = relayed
        """Raised on a peer's notice: that peer has told every rank already."""


class CollectiveTimeout(CollectiveError, TimeoutError):
    """A rank waited longer than the timeout: a peer died, never joined, or the ranks
    called the collective with mismatched arguments."""


class MismatchError(CollectiveError, ValueError):
    """A message belongs to a call with other arguments (collective, size, datatype,
    reduction operation, root, algorithm, grid or call order) than the receiver's own
    call, or a peer found such a mismatch and said so (a notice)."""


class LaunchError(GridcollError):
    """``mpiexec`` could not be found or run, or the launched job failed."""


# -- Phoenix (seed 004) ----------------------------------------------------------------


class ProtocolError(GridcollError):
    """A Phoenix process was used against the protocol's rules (h11's split: the
    local side or the remote one broke them)."""


class LocalProtocolError(ProtocolError):
    """This process was fed an event it cannot take (or is in ERROR)."""


class RemoteProtocolError(ProtocolError):
    """A message broke an invariant (e.g. a second delivery to a vnode)."""


class WireError(GridcollError, ValueError):
    """Bytes that are not a valid Phoenix message, or a message that cannot be encoded."""


class GroupError(GridcollError):
    """A group operation failed: a refused or timed-out join, a closed group, a core in
    ERROR, or a call this process cannot make now."""


# -- measurements and the command line -----------------------------------------------


class MeasurementError(GridcollError):
    """A measurement or a measured experiment failed (a rank was lost, a worker
    error, a timeout, it was interrupted, bad or wrong results).

    ``partial`` holds what was measured before (a P-LogP measurement marked
    incomplete, or a dict of them per direction), or None if nothing was.
    """

    def __init__(self, message: str, *, partial: Any = None):
        super().__init__(message)
        self.partial = partial


class UsageError(GridcollError):
    """The command line itself is malformed (unknown option, missing argument...)."""
