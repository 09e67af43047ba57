"""The runtime's parts that need no mpiexec: link reservations, programs, headers,
buffer parsing, the single-process Comm, the launcher's bookkeeping."""

import math

import numpy as np
import pytest

MPI = pytest.importorskip("mpi4py.MPI")

import gridcoll  # noqa: E402
from gridcoll.errors import GridError, ParameterError  # noqa: E402
from gridcoll.network import get_grid, magpie  # noqa: E402
from gridcoll.runtime import comm as comm_mod  # noqa: E402
from gridcoll.runtime.emulation import (  # noqa: E402
    Emulator,
    LinkState,
    create_link_state,
    subgrid,
)
from gridcoll.runtime.executor import (  # noqa: E402
    HEADER_BYTES,
    CallInfo,
    MismatchError,
    compile_program,
)
from gridcoll.runtime.launcher import (  # noqa: E402
    LaunchResult,
    RankReport,
    _reports,
    mpiexec_command,
)
from gridcoll.schedule import Recv, Schedule, Send  # noqa: E402


@pytest.fixture
def link_state(tmp_path):
    """magpie:2,2's link state in a temporary file."""
    grid = magpie(2, 2)
    path = create_link_state(grid, tmp_path / "links")
    state = LinkState(path, grid)
    yield grid, state
    state.close()


# -- the emulator's arithmetic ---------------------------------------------------------


def test_one_message_is_delivered_after_gap_and_latency(link_state):
    grid, state = link_state
    emu = Emulator(grid, state)
    m = 10**6
    deliver = emu.reserve(0, 2, m, now=100.0)
    assert deliver == pytest.approx(100.0 + grid.links["c0->c1"].g(m) + 0.010)
    assert deliver == pytest.approx(101.010008)


def test_messages_on_one_link_queue_fifo(link_state):
    grid, state = link_state
    emu = Emulator(grid, state)
    first = emu.reserve(0, 2, 10**6, now=0.0)
    second = emu.reserve(1, 3, 10**6, now=0.0)  # another sender, same link c0->c1
    assert second - first == pytest.approx(grid.links["c0->c1"].g(10**6))
    other_way = emu.reserve(2, 0, 10**6, now=0.0)  # link c1->c0 is free
    assert other_way == pytest.approx(first)


def test_a_free_link_does_not_delay(link_state):
    grid, state = link_state
    emu = Emulator(grid, state)
    emu.reserve(0, 2, 1000, now=0.0)
    assert emu.reserve(0, 2, 1000, now=50.0) == pytest.approx(50.0 + 0.001008 + 0.010)


def test_cut_through_rule_on_two_links(tmp_path):
    """h_i = max(h_{i-1}, free_i); e_i = max(h_i + g_i, e_{i-1}) on a two-link route."""
    grid = get_grid("teragrid")
    path = create_link_state(grid, tmp_path / "tg")
    state = LinkState(path, grid)
    try:
        links = (state.index["SDSC:up"], state.index["ANL:down"])
        # busy the second link until t = 5: the head waits there; the tail leaves at 5 + g
        state.reserve((links[1],), (5.0,), 0.0)
        tail = state.reserve(links, (1.0, 2.0), 0.0)
        assert tail == pytest.approx(7.0)
        assert state.free_times()["SDSC:up"] == pytest.approx(1.0)
        assert state.free_times()["ANL:down"] == pytest.approx(7.0)
    finally:
        state.close()


def test_send_overhead_is_the_rendezvous_part_only(link_state):
    grid, state = link_state
    emu = Emulator(grid, state)
    lan, wan = grid.lan(0), grid.plogp(0, 2)
    assert emu.send_overhead(0, 2, 1024) == pytest.approx(0.0)
    assert emu.send_overhead(0, 2, 10**6) == pytest.approx(wan.os(10**6) - lan.os(10**6))
    assert emu.crosses(0, 2) and not emu.crosses(0, 1)


def test_send_busy_is_the_whole_wan_send_overhead(link_state):
    grid, state = link_state
    emu = Emulator(grid, state)
    wan = grid.plogp(0, 2)
    for m in (1, 1024, 65536, 10**6):
        assert emu.send_busy(0, 2, m) == pytest.approx(wan.os(m))


def test_link_state_refuses_another_grid(tmp_path):
    path = create_link_state(magpie(2, 2), tmp_path / "links")
    with pytest.raises(GridError, match="too short for grid"):
        LinkState(path, magpie(3, 1))
    with pytest.raises(GridError, match="another grid"):
        LinkState(path, magpie(2, 3))  # same links, another grid


def test_subgrid_keeps_clusters_and_links():
    grid = magpie(3, 2)
    sub = subgrid(grid, [5, 0, 1])
    assert sub.nranks == 3
    assert sub.cluster_of == (1, 0, 0)
    assert sub.plogp(0, 1) == grid.plogp(5, 0)
    assert sub.path(0, 1)[2] == ("link", "c2->c0")
    assert subgrid(grid, list(range(6))) is grid


# -- compiled programs and headers -----------------------------------------------------


def _schedule(programs, segments, nbytes):
    return Schedule("bcast", "test", len(programs), 0, nbytes, segments, programs)


def test_compile_merges_contiguous_segments_and_marks_headers(link_state):
    grid, state = link_state
    segments = ((0, 10), (10, 10), (30, 5), (20, 10))
    programs = (
        (Send(1, (0, 1)), Send(1, (2, 3)), Send(2, (0,)), Send(2, ())),
        (Recv(0, (0, 1)), Recv(0, (2, 3))),
        (Recv(0, (0,)), Recv(0, ())),
        (),
    )
    sched = _schedule(programs, segments, 35)
    plain = compile_program(sched, 0)
    assert [s.pieces for s in plain.steps] == [((0, 20),), ((30, 5), (20, 10)), ((0, 10),), ()]
    assert [s.header for s in plain.steps] == [True, False, True, False]
    assert plain.steps[3].nbytes == 1  # a control message
    emulated = compile_program(sched, 0, emulator=Emulator(grid, state))
    assert [s.wan for s in emulated.steps] == [False, False, True, True]
    assert [s.header for s in emulated.steps] == [True, False, False, False]  # inline on WAN
    assert compile_program(sched, 1).extent == 35


def test_header_round_trip_and_mismatch():
    sched = _schedule(((Send(1, (0,)),), (Recv(0, (0,)),)), ((0, 8),), 8)
    call = CallInfo.of(sched, seq=5, itemsize=4, grid_id=9)
    step = compile_program(sched, 1, call=call).steps[0]
    raw = call.pack(8, 12.5)
    assert raw.size == HEADER_BYTES
    assert call.check(raw, step, 1) == 12.5
    other = CallInfo.of(sched, seq=5, itemsize=8, grid_id=9)
    with pytest.raises(MismatchError, match="itemsize 8 vs 4"):
        call.check(other.pack(8, 0.0), step, 1)
    stray = CallInfo.of(sched, seq=(7 << 32) + 5, itemsize=4, grid_id=9)
    with pytest.raises(MismatchError, match="another communicator"):
        call.check(stray.pack(8, 0.0), step, 1)


# -- buffers ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("make", "nbytes", "itemsize"),
    [
        (lambda a: a, 80, 8),
        (lambda a: [a, MPI.DOUBLE], 80, 8),
        (lambda a: [a, 3, MPI.DOUBLE], 24, 8),
        (lambda a: [a, (3, 2), MPI.DOUBLE], 24, 8),
        (lambda a: [a, 3, 2, MPI.DOUBLE], 24, 8),
        (lambda a: [a, "d"], 80, 8),
        (lambda a: [a, MPI.BYTE], 80, 1),
        (lambda a: [a, 2, MPI.DOUBLE.Create_contiguous(2).Commit()], 32, 16),
    ],
)
def test_message_forms(make, nbytes, itemsize):
    a = np.arange(10.0)
    view, size = comm_mod._message(make(a), root_side=False)
    assert (view.size, size) == (nbytes, itemsize)
    assert np.shares_memory(view, a)


def test_message_offsets_and_errors():
    a = np.arange(10.0)
    view, _ = comm_mod._message([a, 3, 2, MPI.DOUBLE], root_side=False)
    assert view.view(np.float64).tolist() == [2.0, 3.0, 4.0]
    with pytest.raises(ValueError, match="negative count"):
        comm_mod._message([a, -1, MPI.DOUBLE], root_side=False)
    with pytest.raises(MPI.Exception) as info:
        comm_mod._message([a, 11, MPI.DOUBLE], root_side=False)
    assert info.value.Get_error_class() == MPI.ERR_COUNT
    with pytest.raises(BufferError):
        comm_mod._message(b"abc", root_side=False)
    assert comm_mod._message(b"abc", root_side=True)[0].size == 3
    with pytest.raises(BufferError):
        comm_mod._message(np.zeros((3, 4))[:, 1], root_side=True)
    vector = MPI.DOUBLE.Create_vector(3, 1, 2).Commit()
    assert comm_mod._message([np.zeros(6), 1, vector], root_side=True)[0] is None  # native
    vector.Free()
    assert comm_mod._message(MPI.IN_PLACE, root_side=True)[0].size == 0


def test_fortran_order_buffers_are_viewed_in_memory_order():
    f = np.asfortranarray(np.arange(6, dtype=np.int32).reshape(2, 3))
    view, itemsize = comm_mod._message(f, root_side=False)
    assert itemsize == 4 and np.shares_memory(view, f)
    assert view.tobytes() == f.tobytes(order="A")


# -- the single-process communicator ---------------------------------------------------


def test_comm_on_one_process():
    comm = gridcoll.Comm(MPI.COMM_SELF)
    assert isinstance(comm, MPI.Intracomm) and comm.Get_size() == 1
    assert comm.grid.name == "lan:1"
    a = np.arange(5)
    comm.Bcast(a, root=0)
    assert a.tolist() == [0, 1, 2, 3, 4]
    obj = {"x": [1, 2]}
    out = comm.bcast(obj, root=0)
    assert out == obj and out is not obj  # mpi4py returns a copy on the root too
    comm.Barrier()
    with pytest.raises(MPI.Exception) as info:
        comm.Bcast(a, root=1)
    assert info.value.Get_error_class() == MPI.ERR_ROOT
    with pytest.raises(MPI.Exception) as info:
        comm.bcast(1, root=-1)
    assert info.value.Get_error_class() == MPI.ERR_ROOT
    assert "no gridcoll collective" in comm.explain()
    dup = comm.Dup()
    assert type(dup) is gridcoll.Comm and dup.grid is comm.grid
    dup.Free()


def test_comm_checks_its_grid_and_options(monkeypatch):
    with pytest.raises(GridError, match="has 4 ranks but the communicator has 1"):
        gridcoll.Comm(MPI.COMM_SELF, grid="magpie:2,2")
    with pytest.raises(gridcoll.UnknownAlgorithm, match="unknown algorithm 'nope'"):
        gridcoll.Comm(MPI.COMM_SELF, algo="nope")
    with pytest.raises(gridcoll.UnknownAlgorithm, match="unknown scatter algorithm"):
        gridcoll.Comm(MPI.COMM_SELF, algo={"scatter": "ring"})
    with pytest.raises(ParameterError, match="unknown collectives"):
        gridcoll.Comm(MPI.COMM_SELF, algo={"scan": "ring"})
    with pytest.raises(ParameterError, match="params= needs a named algorithm"):
        gridcoll.Comm(MPI.COMM_SELF, params={"segment_size": 8})
    with pytest.raises(ParameterError, match="timeout"):
        gridcoll.Comm(MPI.COMM_SELF, timeout=0)
    monkeypatch.setenv("GRIDCOLL_GRID", "lan:1")
    monkeypatch.setenv("GRIDCOLL_ALGO", "chain")
    comm = gridcoll.Comm(MPI.COMM_SELF)
    assert comm.grid.name == "lan:1" and comm._gc.algo == "chain"


def test_gridcoll_exports_comm_lazily():
    assert "Comm" in gridcoll.__all__
    assert gridcoll.Comm is comm_mod.Comm


# -- the launcher's bookkeeping --------------------------------------------------------


def test_mpiexec_command(tmp_path):
    cmd = mpiexec_command(4, ["python", "x.py"], mpiexec="/bin/echo")
    assert cmd == ["/bin/echo", "-n", "4", "python", "x.py"]


def test_rank_reports_name_the_failed_rank():
    status = {
        0: [{"event": "joined", "pid": 1}, {"event": "error", "message": "timed out", "peer": 1}],
        1: [{"event": "joined", "pid": 2}],
        2: [{"event": "joined", "pid": 3}, {"event": "done"}],
    }
    reports = _reports(status, 4, alive=set())
    assert [r.state for r in reports] == ["error", "died", "done", "never-started"]
    result = LaunchResult(["mpiexec"], 1, "", "", None, reports)
    assert not result.ok and not result.verified
    assert result.failed_ranks == [1, 3]
    text = result.describe_failure()
    assert "rank 1 failed" in text and "rank 3 failed" in text and "timed out" in text


def test_a_result_is_verified_only_if_every_rank_finished():
    done = [RankReport(r, "done") for r in range(3)]
    good = LaunchResult(["x"], 0, "", "", {"verified": True}, done)
    assert good.verified
    partial = LaunchResult(["x"], 0, "", "", {"verified": True}, [*done[:2], RankReport(2, "hung")])
    assert not partial.verified
    unchecked = LaunchResult(["x"], 0, "", "", {"verified": False}, done)
    assert not unchecked.verified


def test_fixed_plan_explains_itself():
    plan = comm_mod.FixedPlan("bcast", "lan:4", 100, 0, 1, "chain", {}, 100, reason="forced")
    assert "chain() because forced" in plan.explain()
    assert math.isnan(plan.predicted_s)
    assert plan.build(get_grid("lan:4")).algorithm == "chain"


# -- the watchdog of blocking native calls -------------------------------------------------


def test_watchdog_ends_a_call_past_its_deadline_and_spares_a_finished_one():
    import threading

    from gridcoll.runtime.watchdog import Watchdog

    fired = threading.Event()
    reasons: list[str] = []
    dog = Watchdog(abort=lambda reason: (reasons.append(reason), fired.set()), period=0.02)
    dog.last_words.append(lambda reason: reasons.append("last words: " + reason))

    dog.arm(0.05, "a quick call")
    dog.disarm()
    assert not fired.wait(0.2)  # disarmed in time: nothing happens

    dog.arm(0.1, "native broadcast from root 3")
    assert fired.wait(5.0)
    assert reasons == [
        "last words: native broadcast from root 3 did not complete within 0.1 s",
        "native broadcast from root 3 did not complete within 0.1 s",
    ]
