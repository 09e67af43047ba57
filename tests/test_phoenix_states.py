"""Phoenix (seed 004): the state table is the code path (h11's ``_state.py`` style):
a process changes state only through :func:`gridcoll.phoenix.states.transition`."""

from __future__ import annotations

import pathlib
import random

import pytest

import gridcoll.phoenix
from gridcoll.errors import LocalProtocolError
from gridcoll.phoenix.events import (
    BcastRequested,
    JoinRequested,
    LeaveRequested,
    PeerFailed,
    Received,
    Start,
)
from gridcoll.phoenix.messages import LeaveAck, Welcome
from gridcoll.phoenix.protocol import Process
from gridcoll.phoenix.states import ACCEPTS, TRANSITIONS, State, transition
from gridcoll.phoenix.static import Network


def test_the_table_drives_the_moves() -> None:
    assert transition(State.IDLE, Start) is State.ACTIVE
    assert transition(State.IDLE, JoinRequested) is State.JOINING
    assert transition(State.JOINING, Welcome) is State.ACTIVE
    assert transition(State.ACTIVE, LeaveRequested) is State.LEAVING
    assert transition(State.LEAVING, LeaveAck) is State.LEFT
    assert transition(State.LEAVING, PeerFailed) is State.LEFT


@pytest.mark.parametrize("state", list(State))
def test_any_exception_ends_in_error_for_good(state: State) -> None:
    if state is State.ERROR:
        assert TRANSITIONS[state] == {} and ACCEPTS[state] == ()
        with pytest.raises(LocalProtocolError, match="no transition from ERROR"):
            transition(state, Exception)
    else:
        assert transition(state, Exception) is State.ERROR


def test_a_move_the_table_lacks_is_refused() -> None:
    with pytest.raises(LocalProtocolError, match="no transition from ACTIVE on Start"):
        transition(State.ACTIVE, Start)
    with pytest.raises(LocalProtocolError, match="no transition from LEFT on LeaveAck"):
        transition(State.LEFT, LeaveAck)


def _network(n: int) -> Network:
    mapping = {p: range(2 * p, 2 * p + 2) for p in range(n)}
    procs = {p: Process(p, rng=random.Random(p), founder_vnodes=mapping) for p in range(n)}
    net = Network(procs, lambda p, q: (1e-4, 1e8), random.Random(0))
    for p in procs:
        net.feed(p, Start())
    net.run()
    return net


def test_a_process_moves_only_through_the_table(monkeypatch: pytest.MonkeyPatch) -> None:
    moves: list[tuple[State, type, State]] = []

    class Row(dict):
        """A row of the table that records each move looked up in it."""

        def __init__(self, state: State) -> None:
            super().__init__(TRANSITIONS[state])
            self.state = state

        def __getitem__(self, trigger: type) -> State:
            after = super().__getitem__(trigger)
            moves.append((self.state, trigger, after))
            return after

    for state in State:
        monkeypatch.setitem(TRANSITIONS, state, Row(state))
    net = _network(3)
    net.feed(2, LeaveRequested(heir=1))
    net.run()
    joiner = Process(9, rng=random.Random(9))
    net.processes[9] = joiner
    net.feed(9, JoinRequested(0))
    net.run()
    assert net.processes[2].state is State.LEFT and joiner.state is State.ACTIVE
    assert (State.IDLE, Start, State.ACTIVE) in moves
    assert (State.ACTIVE, LeaveRequested, State.LEAVING) in moves
    assert (State.LEAVING, LeaveAck, State.LEFT) in moves
    assert (State.IDLE, JoinRequested, State.JOINING) in moves
    assert (State.JOINING, Welcome, State.ACTIVE) in moves
    with pytest.raises(LocalProtocolError):
        net.processes[2].handle(BcastRequested("b", 4, 1))
    assert moves[-1] == (State.LEFT, Exception, State.ERROR)


def test_a_leaver_whose_last_awaited_member_dies_is_left() -> None:
    net = _network(3)
    leaver = net.processes[2]
    leaver.handle(LeaveRequested(heir=1))
    assert leaver.state is State.LEAVING
    leaver.handle(Received(0, LeaveAck(frozenset())))
    assert leaver.state is State.LEAVING
    leaver.handle(PeerFailed(1))
    assert leaver.state is State.LEFT


def test_no_state_is_assigned_by_hand() -> None:
    """Every change of a process's state is a :func:`transition` (the initial IDLE
    aside)."""
    src = pathlib.Path(gridcoll.phoenix.__file__).parent
    by_hand = [
        f"{path.name}:{n}"
        for path in sorted(src.glob("*.py"))
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if ".state = State." in line and "State.IDLE" not in line
    ]
    assert by_hand == []
