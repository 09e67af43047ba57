"""Phoenix (seed 004): a process's states and the table of its transitions.

As h11's ``_state.py``, the table is the code path: a
:class:`~gridcoll.phoenix.protocol.Process` changes state only through
:func:`transition`, which looks the move up in :data:`TRANSITIONS` and raises
:class:`~gridcoll.errors.LocalProtocolError` for a move the table lacks, so the table
cannot drift from the code. The code decides *whether* a trigger moves the process (the
last ack of a leave, say); the table decides *where to*.

``IDLE --Start--> ACTIVE`` (a founder); ``IDLE --JoinRequested--> JOINING --Welcome-->
ACTIVE``; ``ACTIVE --LeaveRequested--> LEAVING``; ``LEAVING --LeaveAck--> LEFT`` when
the last member it waits for acks, or ``--PeerFailed--> LEFT`` when the last one dies;
any state but ERROR ``--exception--> ERROR``, for good. :data:`ACCEPTS` lists the
events each state takes; any other is refused.

References
----------
H. Saito, K. Taura, T. Chikayama, *Collective operations for wide-area message passing
systems using adaptive spanning trees* (seed 004), sec. III (joining and leaving).
"""

from __future__ import annotations

from enum import Enum

from gridcoll.errors import LocalProtocolError
from gridcoll.phoenix.events import (
    BcastRequested,
    JoinRequested,
    LeaveRequested,
    MigrateRequested,
    PeerFailed,
    ProbeResult,
    Received,
    ReduceRequested,
    Remeasured,
    Start,
    TimerExpired,
)
from gridcoll.phoenix.messages import LeaveAck, Welcome

__all__ = ["ACCEPTS", "TRANSITIONS", "State", "transition"]


class State(Enum):
    """Where a process is in its life (module doc)."""

    IDLE = "idle"
    JOINING = "joining"
    ACTIVE = "active"
    LEAVING = "leaving"
    LEFT = "left"
    ERROR = "error"


TRANSITIONS: dict[State, dict[type, State]] = {
    State.IDLE: {Start: State.ACTIVE, JoinRequested: State.JOINING, Exception: State.ERROR},
    State.JOINING: {Welcome: State.ACTIVE, Exception: State.ERROR},
    State.ACTIVE: {LeaveRequested: State.LEAVING, Exception: State.ERROR},
    State.LEAVING: {LeaveAck: State.LEFT, PeerFailed: State.LEFT, Exception: State.ERROR},
    State.LEFT: {Exception: State.ERROR},
    State.ERROR: {},
}
"""State -> trigger -> next state. A trigger is the type of the event fed in, of the
message received, or ``Exception`` (any exception inside
:meth:`~gridcoll.phoenix.protocol.Process.handle`)."""

ACCEPTS: dict[State, tuple[type, ...]] = {
    State.IDLE: (Start, JoinRequested),
    State.JOINING: (Received, ProbeResult, TimerExpired, PeerFailed),
    State.ACTIVE: (
        Received,
        TimerExpired,
        ProbeResult,
        LeaveRequested,
        MigrateRequested,
        BcastRequested,
        ReduceRequested,
        PeerFailed,
        Remeasured,
    ),
    State.LEAVING: (Received, TimerExpired, ProbeResult, PeerFailed, Remeasured),
    State.LEFT: (Received, TimerExpired, ProbeResult, PeerFailed, Remeasured),
    State.ERROR: (),
}
"""Events each state takes; anything else raises LocalProtocolError (and so ERROR)."""


def transition(state: State, trigger: type) -> State:
    """The state a process in ``state`` moves to on ``trigger`` (:data:`TRANSITIONS`).

    Raises:
        LocalProtocolError: if the table has no such move.
    """
    try:
        return TRANSITIONS[state][trigger]
    except KeyError:
        raise LocalProtocolError(f"no transition from {state.name} on {trigger.__name__}") from None
