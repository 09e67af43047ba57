"""The runtime's parts that need no mpiexec: link reservations, programs, headers,
buffer parsing, the single-process Comm, the launcher's bookkeeping."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

MPI = pytest.importorskip("mpi4py.MPI")

import gridcoll  # noqa: E402
from gridcoll.errors import (  # noqa: E402
    CollectiveError,
    GridError,
    MismatchError,
    ParameterError,
)
from gridcoll.network import get_grid, magpie  # noqa: E402
from gridcoll.runtime import buffers, mpi_ops  # noqa: E402
from gridcoll.runtime import comm as comm_mod  # noqa: E402
from gridcoll.runtime import prepare as prepare_mod  # noqa: E402
from gridcoll.runtime.emulation import (  # noqa: E402
    Emulator,
    LinkState,
    create_link_state,
    subgrid,
)
from gridcoll.runtime.executor import compile_program  # noqa: E402
from gridcoll.runtime.header import HEADER_BYTES, CallInfo, empty_digest  # noqa: E402
from gridcoll.runtime.notices import (  # noqa: E402
    FAILED_DRAINS,
    NOTICE_ERROR,
    NOTICE_MISMATCH,
    NOTICE_WAITING,
    Ledger,
    drain,
    held_notice,
    pack_notice,
    take_notice,
)
from gridcoll.runtime.processes import mpiexec_command  # noqa: E402
from gridcoll.runtime.state import state_of  # noqa: E402
from gridcoll.runtime.supervisor import LaunchResult, RankReport, _reports  # noqa: E402
from gridcoll.schedule import Recv, Schedule, Send  # noqa: E402
from gridcoll.tune import NATIVE, Call, Plan, PlanOptions, plan  # noqa: E402


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


def test_header_carries_collective_datatype_and_reduction_operation():
    """What must agree is in every header, and a mismatch names the
    field with both values (sender's vs this rank's)."""
    sched = _schedule(((Send(1, (0,)),), (Recv(0, (0,)),)), ((0, 8),), 8)
    base = CallInfo.of(sched, seq=5, itemsize=8, grid_id=9)
    assert HEADER_BYTES == 128 and base.op == "bcast"
    mine = base.numbered(6, "<f8", "SUM")
    step = compile_program(sched, 1, call=mine).steps[0]
    assert mine.check(base.numbered(6, "<f8", "SUM").pack(8, 3.5), step, 1) == 3.5
    cases = [
        (base.numbered(6, "<i8", "SUM"), "datatype '<i8' vs '<f8'"),
        (base.numbered(6, "<f8", "MAX"), "reduction operation 'MAX' vs 'SUM'"),
        (base.numbered(6, "<f8", ""), "reduction operation '' vs 'SUM'"),
    ]
    other_op = _schedule(((Send(1, (0,)),), (Recv(0, (0,)),)), ((0, 8),), 8)
    other_op = Schedule("gather", "test", 2, 0, 8, ((0, 8),), other_op.programs)
    cases.append(
        (CallInfo.of(other_op, itemsize=8, grid_id=9).numbered(6, "<f8", "SUM"), "'gather'")
    )
    root1 = Schedule("bcast", "test", 2, 1, 8, ((0, 8),), sched.programs)
    cases.append((CallInfo.of(root1, itemsize=8, grid_id=9).numbered(6, "<f8", "SUM"), "root 1"))
    for theirs, text in cases:
        with pytest.raises(MismatchError, match=text.replace("(", r"\(")):
            mine.check(theirs.pack(8, 0.0), step, 1)
    # a long structured signature differs past the 16 bytes a header shows: its CRC
    long_a, long_b = "[('a', '<f8'), ('b', '<i4')]", "[('a', '<f8'), ('b', '<i8')]"
    with pytest.raises(MismatchError, match="datatype"):
        base.numbered(6, long_a).check(base.numbered(6, long_b).pack(8, 0.0), step, 1)


def test_notices_round_trip_and_ignore_another_epoch():
    comm = MPI.COMM_SELF.Dup()
    tag, epoch = 77, 123
    now = (epoch << 32) + 5  # this rank is in call 5

    def notice(seq, kind, text):
        raw = pack_notice(seq, kind, text)
        return raw, comm.Isend([raw, MPI.BYTE], 0, tag)

    try:
        sent = notice(now, NOTICE_MISMATCH, "rank 0: boom")
        err = take_notice(comm, tag, now)
        assert isinstance(err, MismatchError) and err.relayed and err.peer == 0
        assert "call 5 failed there (rank 0: boom)" in str(err)
        sent[1].Wait()
        sent = notice(now, NOTICE_ERROR, "x" * 999)
        err = take_notice(comm, tag, now)
        assert type(err) is CollectiveError and err.relayed
        sent[1].Wait()
        # a notice of a recycled context (another epoch) is taken and dropped
        sent = notice(((epoch + 1) << 32) + 1, NOTICE_MISMATCH, "old")
        assert take_notice(comm, tag, now) is None
        assert not comm.Iprobe(MPI.ANY_SOURCE, tag)
        sent[1].Wait()
    finally:
        comm.Free()


def test_a_notice_of_a_completed_call_is_dropped_and_its_strays_drained():
    """This rank completed call 4 (its messages all passed their headers' check): a
    peer's failure of call 4 does not fail call 5; call 4 is noted as failed, so its
    strays are received and dropped by the next calls instead of taken for a mismatch."""
    comm = MPI.COMM_SELF.Dup()
    tag, epoch = 77, 123
    ledger = Ledger()
    try:
        raw = pack_notice((epoch << 32) + 4, NOTICE_MISMATCH, "rank 0: boom")
        sent = comm.Isend([raw, MPI.BYTE], 0, tag)
        assert take_notice(comm, tag, (epoch << 32) + 5, ledger=ledger) is None
        sent.Wait()
        assert list(ledger.failed) == [(epoch << 32) + 4] and ledger.held == []
        stray = comm.Isend([np.ones(100_000, np.uint8), MPI.BYTE], 0, 11)  # rendezvous
        drain(comm, [10, 11])
        stray.Wait()  # completes: the stray was taken
        assert not comm.Iprobe(MPI.ANY_SOURCE, MPI.ANY_TAG)
        ledger.forget_failed((epoch << 32) + 4 + FAILED_DRAINS + 1)
        assert ledger.failed == {}
    finally:
        comm.Free()


def test_a_notice_of_a_later_call_waits_until_this_rank_makes_it():
    """A peer that finished call 5 fails in call 6 while this rank still waits for
    call 5's last message: call 5 is not failed by it; call 6 is."""
    comm = MPI.COMM_SELF.Dup()
    tag, epoch = 77, 123
    ledger = Ledger()
    try:
        raw = pack_notice((epoch << 32) + 6, NOTICE_ERROR, "rank 0: user op failed")
        sent = comm.Isend([raw, MPI.BYTE], 0, tag)  # to itself: complete once received
        assert take_notice(comm, tag, (epoch << 32) + 5, ledger=ledger) is None
        sent.Wait()
        assert len(ledger.held) == 1 and not comm.Iprobe(MPI.ANY_SOURCE, tag)
        assert held_notice(comm, (epoch << 32) + 5, ledger) is None  # still held
        err = held_notice(comm, (epoch << 32) + 6, ledger)
        assert type(err) is CollectiveError and "call 6 failed there" in str(err)
        assert ledger.held == []
        # without a ledger (the communicator's Free), a later call's notice fails at once
        sent = comm.Isend([raw, MPI.BYTE], 0, tag)
        err = take_notice(comm, tag, (epoch << 32) + 6)
        assert type(err) is CollectiveError and "call 6 failed there" in str(err)
        sent.Wait()
    finally:
        comm.Free()


def test_a_peer_waiting_in_a_call_this_rank_ran_empty_is_told():
    """A call that moves no byte here completes at once; a peer that waits for this
    rank in it (it moves data in that call) gets a mismatch notice, this rank none."""
    comm = MPI.COMM_SELF.Dup()
    tag, epoch = 77, 123
    ledger = Ledger()
    seq = (epoch << 32) + 3
    try:
        mine = CallInfo(seq, 0, 0, 8, "", 0, 0, "bcast", "<f8")
        ledger.note_empty(mine)
        theirs = CallInfo(seq, 0, 800, 8, "binomial", 1, 0, "bcast", "<f8")
        raw = pack_notice(seq, NOTICE_WAITING, theirs.pack(0, 0.0).tobytes())
        sent = comm.Isend([raw, MPI.BYTE], 0, tag)
        assert take_notice(comm, tag, seq + 1, ledger=ledger) is None  # not this rank's error
        sent.Wait()
        [([reply], replies)] = ledger.orphans  # the answer, to the waiting rank alone
        MPI.Request.Waitall(replies)
        text = reply.tobytes()
        assert text[:4] == b"GCN1" and text[12] == NOTICE_MISMATCH
        assert b"moving no byte" in text and b"size 800 vs 0" in text
    finally:
        comm.Free()


def test_empty_calls_are_checked_in_the_next_header():
    """The digest of the calls without a message differs when their arguments do, and
    a header carrying another digest is a mismatch naming it."""
    a = CallInfo(1, 0, 0, 8, "", 0, 0, "bcast", "<f8")
    b = CallInfo(1, 1, 0, 8, "", 0, 0, "bcast", "<f8")
    assert empty_digest(0, a) != empty_digest(0, b)
    assert empty_digest(0, a) == empty_digest(0, a)
    call = CallInfo(2, 0, 64, 1, "binomial", 7, 0, "bcast", "|u1")
    mine, theirs = call.numbered(2, prior=empty_digest(0, a)), call.numbered(2, prior=0)
    differ, detail, _ = mine.differences(theirs.pack(64, 0.0).tobytes(), 64)
    assert differ == ["empty calls before"] and "empty calls before" in detail


@pytest.mark.parametrize(
    ("spec", "text"),
    [
        (lambda a: a, "<f8"),
        (lambda a: [a, MPI.DOUBLE], "<f8"),
        (lambda a: [a, "d"], "<f8"),
        (lambda a: [a, 3, MPI.DOUBLE], "<f8"),
        (lambda a: [a.view(np.int64), MPI.LONG], "<i8"),
        (lambda a: [a.view(np.int64), MPI.INT64_T], "<i8"),
        (lambda a: a.view(np.int64), "<i8"),
        (lambda a: a.view(np.uint8), "|u1"),
        (lambda a: [a.view(np.uint8), MPI.BYTE], "|u1"),
        (lambda a: bytearray(8), "|u1"),
        (lambda a: [a, 2, MPI.DOUBLE.Create_contiguous(4).Commit()], "('<f8', (4,))"),
    ],
)
def test_datatype_signature_names_the_type_not_its_size(spec, text):
    parsed = buffers.parse(spec(np.zeros(8)), True)
    assert buffers.signature(parsed) == text


def test_datatype_signature_of_an_empty_spec():
    assert buffers.signature(buffers.parse([None, MPI.DOUBLE], True)) == "<f8"
    assert buffers.signature(buffers.parse(MPI.IN_PLACE, True)) == ""


def _raising(inbuf, inoutbuf, datatype):
    raise RuntimeError("user op failed")


def _matmul(inbuf, inoutbuf, datatype):
    x = np.frombuffer(inbuf, dtype=np.float64).reshape(-1, 2, 2)
    y = np.frombuffer(inoutbuf, dtype=np.float64).reshape(-1, 2, 2)
    y[...] = x @ y


def test_reduction_operation_labels():
    assert mpi_ops.op_label(MPI.SUM) == "SUM" and mpi_ops.op_label(MPI.MAX) == "MAX"
    assert mpi_ops.op_label(MPI.MAXLOC) == "MAXLOC"
    op = MPI.Op.Create(_matmul, commute=False)
    again = MPI.Op.Create(_matmul, commute=False)
    other = MPI.Op.Create(_raising, commute=True)
    try:
        label = mpi_ops.op_label(op)
        assert label.startswith("user:") and len(label) <= 16
        assert mpi_ops.op_label(again) == label != mpi_ops.op_label(other)
    finally:
        for o in (op, again, other):
            o.Free()


def test_a_raising_user_op_raises_here_instead_of_aborting():
    """mpi4py aborts the job when a user's function raises inside MPI; gridcoll calls
    the function itself, so the exception propagates from the collective."""
    op = MPI.Op.Create(_raising, commute=True)
    try:
        combine = mpi_ops.reducer(op, MPI.DOUBLE, 8, True)
        with pytest.raises(RuntimeError, match="user op failed"):
            combine(np.zeros(16, np.uint8), np.zeros(16, np.uint8), False)
    finally:
        op.Free()


@pytest.mark.parametrize("incoming_first", [False, True])
def test_a_user_op_called_directly_keeps_mpis_operand_order(incoming_first):
    op = MPI.Op.Create(_matmul, commute=False)
    try:
        a = np.array([[1.0, 2.0], [3.0, 4.0]])
        b = np.array([[0.0, 1.0], [1.0, 5.0]])
        held, incoming = a.copy().view(np.uint8).reshape(-1), b.copy().view(np.uint8).reshape(-1)
        mpi_ops.reducer(op, MPI.DOUBLE, 32, False)(held, incoming, incoming_first)
        expected = b @ a if incoming_first else a @ b
        assert np.array_equal(held.view(np.float64).reshape(2, 2), expected)
    finally:
        op.Free()


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
    view, size = buffers.message(make(a), root_side=False)
    assert (view.size, size) == (nbytes, itemsize)
    assert np.shares_memory(view, a)


def test_message_offsets_and_errors():
    a = np.arange(10.0)
    view, _ = buffers.message([a, 3, 2, MPI.DOUBLE], root_side=False)
    assert view.view(np.float64).tolist() == [2.0, 3.0, 4.0]
    with pytest.raises(ValueError, match="negative count"):
        buffers.message([a, -1, MPI.DOUBLE], root_side=False)
    with pytest.raises(MPI.Exception) as info:
        buffers.message([a, 11, MPI.DOUBLE], root_side=False)
    assert info.value.Get_error_class() == MPI.ERR_COUNT
    with pytest.raises(BufferError):
        buffers.message(b"abc", root_side=False)
    assert buffers.message(b"abc", root_side=True)[0].size == 3
    with pytest.raises(BufferError):
        buffers.message(np.zeros((3, 4))[:, 1], root_side=True)
    vector = MPI.DOUBLE.Create_vector(3, 1, 2).Commit()
    assert buffers.message([np.zeros(6), 1, vector], root_side=True)[0] is None  # native
    assert buffers.data_bytes([np.zeros(6), 1, vector]) == 24  # 3 doubles of its 6
    assert buffers.data_bytes([np.zeros(6), (2, 0), vector]) == 48
    vector.Free()
    assert buffers.data_bytes(np.zeros(5, np.int32)) == 20
    assert buffers.data_bytes(MPI.IN_PLACE) == 0
    assert buffers.message(MPI.IN_PLACE, root_side=True)[0].size == 0


def test_fortran_order_buffers_are_viewed_in_memory_order():
    f = np.asfortranarray(np.arange(6, dtype=np.int32).reshape(2, 3))
    view, itemsize = buffers.message(f, root_side=False)
    assert itemsize == 4 and np.shares_memory(view, f)
    assert view.tobytes() == f.tobytes(order="A")


class _DLPackOnly:
    """A numpy array seen through DLPack only (no buffer protocol)."""

    def __init__(self, arr):
        self.arr = arr

    def __dlpack__(self, **kwargs):
        return self.arr.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self.arr.__dlpack_device__()


class _ArrayInterfaceOnly:
    def __init__(self, arr):
        self.__array_interface__ = arr.__array_interface__


class _FakeCuda:
    """Claims device memory (``__cuda_array_interface__``) over host memory."""

    def __init__(self, arr):
        face = dict(arr.__array_interface__)
        face.update(version=3, stream=None, strides=None)
        self.__cuda_array_interface__ = face


_DTYPES = ("float64", "float32", "int64", "int32", "int16", "uint8", "complex128", "bool")
_FORMS = (
    lambda b, a, t: b,
    lambda b, a, t: [b, t],
    lambda b, a, t: [b, a.size // 2, t],
    lambda b, a, t: [b, (a.size // 3, 1), t],
    lambda b, a, t: [b, a.size // 4, a.size // 4, t],
)


@given(
    dtype=st.sampled_from(_DTYPES),
    n=st.integers(4, 40),
    form=st.integers(0, len(_FORMS) - 1),
    readonly=st.booleans(),
    blocks=st.sampled_from([0, 2]),
)
@settings(max_examples=60, deadline=None)
def test_a_dlpack_buffer_parses_as_its_array_does(dtype, n, form, readonly, blocks):
    from mpi4py.util.dtlib import from_numpy_dtype

    a = np.arange(2 * n).astype(dtype)
    t = from_numpy_dtype(a.dtype)
    if blocks and form != 1 and form != 0:
        blocks = 0  # an explicit count is per block: keep the row forms simple
    mine = buffers.parse(_FORMS[form](_DLPackOnly(a), a, t), readonly, blocks)
    theirs = buffers.parse(_FORMS[form](a, a, t), readonly, blocks)
    assert mine.view.tobytes() == theirs.view.tobytes()
    assert np.shares_memory(mine.view, a)  # no copy
    assert (mine.itemsize, mine.count) == (theirs.itemsize, theirs.count)
    assert buffers.datatype_of(mine) == buffers.datatype_of(theirs)
    assert buffers.signature(mine) == buffers.signature(theirs)
    assert mine.view.flags.writeable is not readonly


def test_buffer_objects_mpi4py_takes_and_refuses():
    import array

    for obj in (array.array("d", [1.0, 2.0]), bytearray(16), memoryview(np.zeros(2))):
        spec = buffers.parse(obj, False)
        assert spec.view.size == 16 and buffers.host_array(obj, False) is obj
    assert buffers.datatype_of(buffers.parse(array.array("i", [1, 2]), True)) == MPI.INT
    # only __array_interface__: mpi4py refuses it, with the same error
    with pytest.raises(TypeError, match="message: expecting buffer or list/tuple"):
        buffers.parse(_ArrayInterfaceOnly(np.zeros(3)), True)
    with pytest.raises(TypeError, match="a bytes-like object is required"):
        buffers.parse([_ArrayInterfaceOnly(np.zeros(3)), MPI.DOUBLE], True)
    # DLPack: mpi4py's own checks and messages
    with pytest.raises(BufferError, match="dlpack: buffer is not contiguous"):
        buffers.parse(_DLPackOnly(np.zeros(8)[::2]), True)
    ro = np.zeros(3)
    ro.flags.writeable = False
    with pytest.raises(BufferError, match="dlpack: buffer is not writable"):
        buffers.parse(_DLPackOnly(ro), False)
    assert buffers.parse(_DLPackOnly(ro), True).view.size == 24
    assert buffers.data_bytes(_DLPackOnly(np.zeros(5, np.int32))) == 20
    # device memory: no host view, the MPI library's own collective moves it
    for spec in (_FakeCuda(np.zeros(3)), [_FakeCuda(np.zeros(3)), MPI.DOUBLE]):
        assert buffers.parse(spec, True) is None
    assert buffers.parse_vector(_FakeCuda(np.zeros(4)), False, 2) is None


def test_comm_takes_dlpack_and_hands_device_memory_to_mpi_on_one_process():
    comm = gridcoll.Comm(MPI.COMM_SELF)
    a, out = np.arange(6.0), np.zeros(6)
    comm.Allreduce(_DLPackOnly(a), _DLPackOnly(out), MPI.SUM)
    assert out.tolist() == a.tolist()
    comm.Bcast(_DLPackOnly(a), 0)
    comm.Bcast(_FakeCuda(a), 0)  # mpi4py hands the pointer to MPI, as without gridcoll
    comm.Allgather(a, _FakeCuda(out))
    assert out.tolist() == a.tolist()
    assert "device memory" in comm.explain()


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
        gridcoll.Comm(MPI.COMM_SELF, algo={"nosuch": "ring"})
    with pytest.raises(ParameterError, match="params= needs a named algorithm"):
        gridcoll.Comm(MPI.COMM_SELF, params={"segment_size": 8})
    with pytest.raises(ParameterError, match="timeout"):
        gridcoll.Comm(MPI.COMM_SELF, timeout=0)
    monkeypatch.setenv("GRIDCOLL_GRID", "lan:1")
    monkeypatch.setenv("GRIDCOLL_ALGO", "chain")
    comm = gridcoll.Comm(MPI.COMM_SELF)
    assert comm.grid.name == "lan:1" and state_of(comm).algos["bcast"] == ("chain", None)


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


def test_every_call_is_planned_by_tune_plan_with_the_runtime_arguments():
    """prepare() holds the one tune.Plan of the call: fixed parameters kept as given, the
    rest searched, made and built on the effective grid (grid + host overhead)."""
    comm = gridcoll.Comm(
        MPI.COMM_SELF,
        grid="lan:1",
        algo="chain-segmented",
        params={"segment_size": 16},
        host_overhead="10us",
    )
    state = state_of(comm)
    prepared = prepare_mod.prepare(state, 0, "bcast", 100, 0, 1)
    assert isinstance(prepared.plan, Plan)
    expected = plan(
        get_grid("lan:1"),
        Call("bcast", 100),
        PlanOptions(
            algo="chain-segmented",
            params={"segment_size": 16},
            host_overhead=comm.host_overhead,
            native=True,
        ),
    )
    assert prepared.plan == expected
    assert prepared.plan.params == {"segment_size": 16}
    assert prepared.plan.grid == "lan:1+host10us" == comm.plan_grid.name
    assert prepared.plan.network is comm.plan_grid  # one effective grid object
    assert prepared.program is not None and prepared.layout is None


@pytest.mark.parametrize(
    "spec, algo",
    [("lan:1", "auto"), ("lan:1", "native"), ("lan:1", "binomial"), ("magpie:1,1", "auto")],
)
def test_the_hot_path_flag_is_tune_plans_native_choice(spec, algo):
    """Comm.Bcast's hot path (state.native_bcast) goes native exactly when tune.plan with
    native=True chooses the MPI library's broadcast; explain() then says why."""
    comm = gridcoll.Comm(MPI.COMM_SELF, grid=spec, algo=algo)
    state = state_of(comm)
    chosen = plan(get_grid(spec), Call("bcast", 100), PlanOptions(algo=algo, native=True))
    assert state.native_bcast == (chosen.algorithm == NATIVE)
    state.last = (100, 0, 1)  # what the hot path records
    assert comm.last_plan.algorithm == chosen.algorithm
    if state.native_bcast:
        assert "because the" in comm.explain()


def test_comm_caches_are_bounded_visible_and_clearable():
    class Small(gridcoll.Comm):
        CACHE_SIZE = 2

    comm = Small(MPI.COMM_SELF, grid="lan:1", algo="chain")
    state = state_of(comm)
    assert comm.cache_info().prepared == 0 and comm.cache_info().maxsize == 2
    first = prepare_mod.prepare(state, 0, "bcast", 100, 0, 1)
    assert prepare_mod.prepare(state, 0, "bcast", 100, 0, 1) is first  # a hit
    for nbytes in (200, 300):
        prepare_mod.prepare(state, 0, "bcast", nbytes, 0, 1)
    info = comm.cache_info()
    assert (info.prepared, info.hits, info.misses) == (2, 1, 3)  # 100 B evicted
    assert prepare_mod.prepare(state, 0, "bcast", 100, 0, 1) is not first
    assert info.plans >= 3 and info.plans_maxsize >= info.plans
    comm.cache_clear()
    assert comm.cache_info().prepared == 0


def test_runtime_modules_form_no_cycle_and_use_no_private_names():
    """Each runtime module imports only modules before it (no cycle), never another
    module's underscore names, never the top package or the CLI."""
    import ast
    from pathlib import Path

    import gridcoll.runtime as runtime

    root = Path(runtime.__file__).parent
    graph, bad = {}, []
    for path in sorted(root.glob("*.py")):
        tree = ast.parse(path.read_text())
        aliases, deps = {}, set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for a in node.names:
                    if a.name == "gridcoll" or a.name.startswith("gridcoll.cli"):
                        bad.append((path.stem, a.name))
            if not isinstance(node, ast.ImportFrom) or not node.module:
                continue
            if node.module == "gridcoll" or node.module.startswith("gridcoll.cli"):
                bad.append((path.stem, node.module))
            if node.module == "gridcoll.runtime":
                aliases.update({a.asname or a.name: a.name for a in node.names})
                deps.update(a.name for a in node.names)
            elif node.module.startswith("gridcoll.runtime."):
                deps.add(node.module.split(".")[2])
            if node.module.startswith("gridcoll"):
                bad += [(path.stem, a.name) for a in node.names if a.name.startswith("_")]
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id in aliases
                and node.attr.startswith("_")
            ):
                bad.append((path.stem, f"{node.value.id}.{node.attr}"))
        graph[path.stem] = deps - {path.stem}
    assert not bad

    def reach(start, seen):
        for dep in graph.get(start, ()):
            assert dep != seen[0], f"import cycle through {seen}"
            if dep not in seen:
                reach(dep, [*seen, dep])

    for module in graph:
        reach(module, [module])
    assert graph["collectives"] >= {"prepare"} and "collectives" not in graph["prepare"]


# -- the watchdog of blocking native calls -------------------------------------------------


def test_watchdog_ends_a_call_past_its_deadline_and_spares_a_finished_one():
    import threading

    from gridcoll.runtime.watchdog import Watchdog

    fired = threading.Event()
    reasons: list[str] = []
    dog = Watchdog(
        abort=lambda reason: (reasons.append(reason), fired.set()), period=0.02, grace=0.0
    )
    dog.last_words.append(lambda reason: reasons.append("last words: " + reason))

    dog.arm(0.05, "a quick call")
    dog.disarm()
    assert not fired.wait(0.2)  # disarmed in time: nothing happens

    dog.arm(0.1, "native broadcast from root 3")
    assert fired.wait(5.0)
    assert reasons == [
        "last words: native broadcast from root 3 did not complete within 0.1 s",
        "native broadcast from root 3 did not complete within 0.1 s (a rank died or never joined)",
    ]


# -- GRIDCOLL_ALGO and GRIDCOLL_LOG ----------------------------------------------------


def test_algo_text_chooses_per_collective():
    from gridcoll.runtime.choice import algo_table, parse_algo

    assert parse_algo("bcast:multitree;allreduce:two-level") == {
        "bcast": "multitree",
        "allreduce": "two-level",
    }
    assert parse_algo(" bcast : chain , ; reduce:binomial ;") == {
        "bcast": "chain",
        "reduce": "binomial",
    }
    assert parse_algo(" binomial ") == "binomial" and parse_algo("") == "auto"
    text = algo_table("bcast:multitree;allreduce:two-level;barrier:native", None)
    assert text == algo_table(
        {"bcast": "multitree", "allreduce": "two-level", "barrier": "native"}, None
    )
    assert text["bcast"] == ("multitree", None) and text["scatter"] == ("auto", None)
    every = algo_table("binomial", None)
    assert every["bcast"] == every["reduce"] == ("binomial", None)
    assert every["allgather"] == ("auto", None)  # no binomial allgather


@pytest.mark.parametrize(
    ("text", "error", "names"),
    [
        ("bcast=multitree", gridcoll.UnknownAlgorithm, ["'bcast=multitree'", "binomial"]),
        ("bcats:multitree", ParameterError, ["'bcats:multitree'", "'bcats'", "allreduce"]),
        ("bcast:nope;reduce:binomial", gridcoll.UnknownAlgorithm, ["'bcast:nope'", "multitree"]),
        ("allreduce:ecef", gridcoll.UnknownAlgorithm, ["'allreduce:ecef'", "two-level"]),
        ("bcast:", ParameterError, ["'bcast:'", "collective:algorithm"]),
        (":chain", ParameterError, ["':chain'", "collective:algorithm"]),
        ("bcast:a:b", ParameterError, ["'bcast:a:b'"]),
        ("bcast:flat;bcast:chain", ParameterError, ["'bcast' twice"]),
    ],
)
def test_bad_algo_text_names_the_part_and_the_choices(text, error, names, monkeypatch):
    from gridcoll.runtime.choice import algo_table

    with pytest.raises(error) as info:
        algo_table(text, None)
    for name in names:
        assert name in str(info.value), (name, str(info.value))
    monkeypatch.setenv("GRIDCOLL_ALGO", text)
    with pytest.raises(error) as info:
        gridcoll.Comm(MPI.COMM_SELF)
    assert str(info.value).startswith(f"GRIDCOLL_ALGO={text!r}: ")


def test_gridcoll_algo_per_collective_from_the_environment(monkeypatch):
    monkeypatch.setenv("GRIDCOLL_ALGO", "bcast:multitree;allreduce:two-level")
    algos = state_of(gridcoll.Comm(MPI.COMM_SELF)).algos
    assert algos["bcast"] == ("multitree", None) and algos["allreduce"] == ("two-level", None)
    assert algos["gather"] == ("auto", None)
    given = state_of(gridcoll.Comm(MPI.COMM_SELF, algo="chain")).algos  # algo= wins
    assert given["bcast"] == ("chain", None)


def test_a_log_line_holds_the_plan_and_the_measured_time(tmp_path):
    import json

    from gridcoll.runtime.record import FORMAT, log_path, open_log, parse_line, record_line

    chosen = plan(get_grid("magpie:2,2"), Call("allreduce", 8000, 0, itemsize=8))
    line = record_line(
        chosen, measured_s=0.02, prepare_s=0.001, rank=3, nranks=4, call=7, grid="magpie:2,2"
    )
    assert line.endswith("\n") and line.count("\n") == 1 and len(line) < 4096
    data = json.loads(line)
    assert data["format"] == FORMAT and data["op"] == "allreduce" and data["size"] == 8000
    assert data["root"] is None and data["algorithm"] == chosen.algorithm
    assert data["params"] == json.loads(json.dumps(dict(chosen.params)))
    assert data["predicted_s"] == chosen.predicted_s and data["bound_s"] == chosen.bound_s
    assert (data["measured_s"], data["rank"], data["call"]) == (0.02, 3, 7)
    assert parse_line(line).measured_s == 0.02
    assert log_path("run-{rank}.jsonl", 5) == "run-5.jsonl"
    assert log_path("run.jsonl", 5) == "run.jsonl"
    with pytest.raises(ParameterError, match="cannot open log file"):
        open_log(str(tmp_path / "no" / "such" / "dir.jsonl"), 0)
    with pytest.raises(ParameterError, match="empty"):
        open_log("  ", 0)
    log = open_log(str(tmp_path / "r{rank}.jsonl"), 2)
    log.write(chosen, 0.5, 0.0, 4, "magpie:2,2")
    log.write(chosen, 0.25, 0.0, 4, "magpie:2,2")
    log.close()
    lines = (tmp_path / "r2.jsonl").read_text().splitlines()
    assert [json.loads(x)["call"] for x in lines] == [1, 2]


def test_a_log_takes_bcast_off_the_hot_path_only_when_on(tmp_path, monkeypatch):
    monkeypatch.delenv("GRIDCOLL_LOG", raising=False)
    plain = state_of(gridcoll.Comm(MPI.COMM_SELF))
    assert plain.log is None and plain.native_bcast  # one cluster: the hot path
    logged = gridcoll.Comm(MPI.COMM_SELF, log=str(tmp_path / "x.jsonl"))
    state = state_of(logged)
    assert state.log is not None and not state.native_bcast
    dup = logged.Dup()
    assert state_of(dup).log is state.log  # communicators made from it share it
    dup.Free()
    monkeypatch.setenv("GRIDCOLL_LOG", str(tmp_path / "env-{rank}.jsonl"))
    from_env = state_of(gridcoll.Comm(MPI.COMM_SELF))
    assert from_env.log.path == str(tmp_path / f"env-{MPI.COMM_WORLD.Get_rank()}.jsonl")
    assert not from_env.native_bcast


# -- vector buffer specs (the v-variants) ------------------------------------------------


def test_every_vector_spec_form_mpi4py_takes():
    from mpi4py import MPI

    a = np.arange(10, dtype=np.int32)
    forms = {
        "counts, displs, type": [a, [3, 0, 4], [5, 9, 0], MPI.INT],
        "(counts, displs), type": [a, ([3, 0, 4], [5, 9, 0]), MPI.INT],
        "(counts, displs)": [a, ([3, 0, 4], [5, 9, 0])],
        "numpy counts": [a, (np.array([3, 0, 4]), np.array([5, 9, 0])), "i"],
    }
    for name, spec in forms.items():
        v = buffers.parse_vector(spec, True, 3)
        assert v.counts == (3, 0, 4) and v.displs == (5, 9, 0), name
        assert v.byte_counts() == (12, 0, 16) and v.byte_displs() == (20, 36, 0), name
    packed = buffers.parse_vector([a, [3, 3, 4]], True, 3)
    assert packed.displs == (0, 3, 6)
    assert packed.counts == (3, 3, 4)  # a list: the counts
    stride = buffers.parse_vector([a, (2, 3), MPI.INT], True, 3)  # a tuple: (count, stride)
    assert stride.counts == (2, 2, 2) and stride.displs == (0, 3, 6)
    equal = buffers.parse_vector(np.arange(9.0), True, 3)
    assert equal.counts == (3, 3, 3) and equal.displs == (0, 3, 6) and equal.itemsize == 8
    strided = buffers.parse_vector([a, 2, 3, MPI.INT], True, 3)  # one count, a stride
    assert strided.counts == (2, 2, 2) and strided.displs == (0, 3, 6)


def test_bad_vector_specs_raise_before_any_message():
    from mpi4py import MPI

    a = np.arange(10, dtype=np.int32)
    with pytest.raises(ValueError, match="expecting 3 items, got 2"):
        buffers.parse_vector([a, [1, 2]], True, 3)
    with pytest.raises(ValueError, match=r"too many values to unpack \(expected 2\)"):
        buffers.parse_vector([a, (3, 3, 4)], True, 3)  # a tuple is (counts, displs)
    with pytest.raises(TypeError, match="unhashable type: 'list'"):
        buffers.parse_vector([a, [3, 0, 4], [5, 9, 0]], True, 3)  # 3 items: the last a type
    with pytest.raises(MPI.Exception):
        buffers.parse_vector([a, [3, 3, 3], [0, 3, 8], MPI.INT], True, 3)  # past the end
    assert buffers.parse_vector(a, True, 3).counts == (4, 3, 3)  # mpi4py: remainder first
    with pytest.raises(ValueError, match="cannot infer count"):
        buffers.parse_vector([a.view(np.uint8)[:7], MPI.INT], True, 3)
    with pytest.raises(KeyError, match="cannot map 'x' to MPI datatype"):
        buffers.parse_vector([a, "x"], True, 3)
    holes = MPI.INT.Create_vector(2, 1, 2).Commit()
    try:
        assert buffers.parse_vector([a, [1, 1, 1], holes], True, 3) is None  # native MPI
    finally:
        holes.Free()
