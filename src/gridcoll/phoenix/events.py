"""Phoenix (seed 004): what a driver feeds a process (events) and what it gets back
(actions).

A :class:`~gridcoll.phoenix.protocol.Process` is sans-I/O, as h11's connection is: the
driver feeds it events (:data:`Event`) and performs the actions (:data:`Action`) it
returns; the rules a driver follows are the protocol module's ("Rules"). Each is a
frozen value; callers dispatch on ``type(x)``.

References
----------
H. Saito, K. Taura, T. Chikayama, *Collective operations for wide-area message passing
systems using adaptive spanning trees* (seed 004), sec. III and IV.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass

from gridcoll.phoenix.messages import Message

__all__ = [
    "PROBE_BYTES",
    "Abandoned",
    "Action",
    "BcastRequested",
    "Deliver",
    "Event",
    "JoinRequested",
    "LeaveRequested",
    "MigrateRequested",
    "PeerFailed",
    "PeerLost",
    "Probe",
    "ProbeResult",
    "Received",
    "ReduceDone",
    "ReduceRequested",
    "Remeasured",
    "Send",
    "SetTimer",
    "Start",
    "TimerExpired",
]

PROBE_BYTES = 128 * 1024
"""The bandwidth probe: a 128-kilobyte download (sec. IV-A)."""


# -- events (fed in) -------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Start:
    """A founder begins (probing)."""


@dataclass(frozen=True, slots=True)
class Received:
    src: int
    message: Message


@dataclass(frozen=True, slots=True)
class TimerExpired:
    timer: Hashable


@dataclass(frozen=True, slots=True)
class ProbeResult:
    peer: int
    rtt_s: float
    bw_Bps: float


@dataclass(frozen=True, slots=True)
class JoinRequested:
    contact: int


@dataclass(frozen=True, slots=True)
class LeaveRequested:
    heir: int | None = None


@dataclass(frozen=True, slots=True)
class PeerFailed:
    """The driver's failure detector says ``pid`` died without leaving
    (:mod:`~gridcoll.phoenix.protocol`, "Failures"). ``pid`` must never send again: a
    process only suspected must not be reported (a reported one that is alive loses its
    vnodes to the heir).
    ``received``: how many of this process's messages ``pid`` had taken in and passed
    on (its heartbeats say; None: unknown), so only later ones are sent again.
    ``delivered``: how many it had taken in at all (a later heartbeat: its own vnodes
    had them, though it may not have passed them on; None: ``received``), so only later
    ones go to its heir for its own vnodes."""

    pid: int
    received: int | None = None
    delivered: int | None = None


@dataclass(frozen=True, slots=True)
class Remeasured:
    """The driver measured ``peer``'s round trip again (:mod:`~gridcoll.phoenix.protocol`,
    "Trees"): ``rtt_s``, lower than the process holds, replaces it and the trees are
    judged again. ``bw_Bps``: the rate of the peer's download recomputed with it (a rate counts half
    the RTT), if higher than the process holds; None: the held rate stays."""

    peer: int
    rtt_s: float
    bw_Bps: float | None = None


@dataclass(frozen=True, slots=True)
class MigrateRequested:
    """Give the listed vnodes this process owns to ``dst`` (the others are ignored)."""

    vnodes: frozenset[int]
    dst: int


@dataclass(frozen=True, slots=True)
class BcastRequested:
    op_id: Hashable
    root: int
    nbytes: int
    payload: object = None
    kind: str | None = None  # force a tree; None: the model chooses


@dataclass(frozen=True, slots=True)
class ReduceRequested:
    op_id: Hashable
    root: int
    values: Mapping[int, object]
    op: Callable[[object, object], object]
    nbytes: int = 8  # the size of one vnode's data, for the wire


Event = (
    Start
    | Received
    | TimerExpired
    | ProbeResult
    | JoinRequested
    | LeaveRequested
    | MigrateRequested
    | BcastRequested
    | ReduceRequested
    | PeerFailed
    | Remeasured
)


# -- actions (returned) ----------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Send:
    dst: int
    message: Message
    nbytes: int


@dataclass(frozen=True, slots=True)
class Probe:
    """Measure ``peer``: ping-pongs for the RTT, then an ``nbytes`` download for the
    bandwidth; ``nbytes == 0``: the pings only (the result's ``bw_Bps`` is ignored)."""

    peer: int
    nbytes: int = PROBE_BYTES


@dataclass(frozen=True, slots=True)
class Deliver:
    """Segment ``segment`` of broadcast ``op_id`` for these vnodes (each vnode gets each
    segment of a broadcast exactly once; it has the broadcast once it has all
    ``nsegments``). ``payload`` is the segment's slice of a bytes-like payload of
    ``nbytes`` bytes, the payload itself otherwise."""

    op_id: Hashable
    vnodes: frozenset[int]
    payload: object
    segment: int = 0
    nsegments: int = 1


@dataclass(frozen=True, slots=True)
class SetTimer:
    timer: Hashable
    delay_s: float


@dataclass(frozen=True, slots=True)
class ReduceDone:
    op_id: Hashable
    value: object
    missing: frozenset[int]


@dataclass(frozen=True, slots=True)
class PeerLost:
    """``pid`` died (a :class:`PeerFailed`): the vnodes this process had mapped to it
    now map to ``heir`` (None: no member is left to take them), with a fresh state
    (what had been delivered to them died with ``pid``); ``resent``: the broadcasts
    whose messages to ``pid`` this process sent again (:mod:`~gridcoll.phoenix.protocol`,
    "Failures")."""

    pid: int
    heir: int | None
    vnodes: frozenset[int]
    resent: frozenset[Hashable]


@dataclass(frozen=True, slots=True)
class Abandoned:
    """A pipelined broadcast these owned vnodes will not get the rest of (their segments
    so far were delivered): its root process died before they had every segment, or
    after a failure the rest stopped coming and was asked for in vain
    (:mod:`~gridcoll.phoenix.protocol`, "Failures"). Also, from a leaver every member it
    knows of died under, a broadcast these vnodes (not its own) were to get through it:
    it knows no live process to send it to (the joiners that live on were announced by a
    process that died)."""

    op_id: Hashable
    vnodes: frozenset[int]


Action = Send | Probe | Deliver | SetTimer | ReduceDone | PeerLost | Abandoned
