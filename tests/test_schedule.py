"""The schedule IR, its validator and its JSON form."""

import itertools
import pickle

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gridcoll.algorithms.trees import Tree, _explicit_tree_broadcast, tree_broadcast
from gridcoll.errors import ParameterError, ScheduleError
from gridcoll.schedule import (
    CONTROL_BYTES,
    Recv,
    Schedule,
    Send,
    schedule_from_json,
    schedule_to_json,
    split_segments,
    validate,
)
from gridcoll.schedule.ir import PeriodicProgram


def bcast(programs, nranks=3, nsegments=1, nbytes=None, root=0):
    nbytes = nbytes or 10 * nsegments
    segments = split_segments(nbytes, nbytes // nsegments)
    return Schedule("bcast", "hand", nranks, root, nbytes, segments, tuple(map(tuple, programs)))


GOOD = [
    [Send(1, (0,)), Send(2, (0,))],
    [Recv(0, (0,))],
    [Recv(0, (0,))],
]


def test_valid_flat_broadcast_passes():
    validate(bcast(GOOD))


def test_rank_left_without_data_is_named():
    programs = [[Send(1, (0,))], [Recv(0, (0,))], []]
    with pytest.raises(ScheduleError) as err:
        validate(bcast(programs))
    assert (err.value.rank, err.value.segment) == (2, 0)
    assert "rank 2 ends without segment 0" in str(err.value)


def test_sending_before_holding_is_named():
    programs = [[Send(1, (0,))], [Send(2, (0,)), Recv(0, (0,))], [Recv(1, (0,))]]
    with pytest.raises(ScheduleError, match="rank 1 sends segment 0 to rank 2 before") as err:
        validate(bcast(programs))
    assert err.value.rank == 1


def test_mismatched_segments_between_send_and_receive():
    programs = [[Send(1, (0,)), Send(1, (1,))], [Recv(0, (1,)), Recv(0, (0,))], []]
    with pytest.raises(ScheduleError, match="expects segments"):
        validate(bcast(programs, nranks=2 + 1, nsegments=2))


def test_deadlock_is_reported():
    programs = [
        [Send(1, (0,)), Send(2, (0,))],
        [Recv(2, (0,)), Recv(0, (0,))],
        [Recv(1, (0,)), Recv(0, (0,))],
    ]
    with pytest.raises(ScheduleError, match="deadlock"):
        validate(bcast(programs))


def test_unreceived_message_is_reported():
    programs = [[Send(1, (0,)), Send(1, (0,)), Send(2, (0,))], [Recv(0, (0,))], [Recv(0, (0,))]]
    with pytest.raises(ScheduleError, match="never receives"):
        validate(bcast(programs))


def test_peer_out_of_range_is_reported():
    programs = [[Send(5, (0,))], [], []]
    with pytest.raises(ScheduleError, match="names peer 5"):
        validate(bcast(programs))


def test_reduction_counted_twice_is_caught():
    # rank 1 combines rank 0's data twice into segment 0
    programs = [[Send(1, (0,)), Send(1, (0,))], [Recv(0, (0,), True), Recv(0, (0,), True)]]
    schedule = Schedule("reduce", "hand", 2, 1, 8, ((0, 8),), tuple(map(tuple, programs)))
    with pytest.raises(ScheduleError, match="twice"):
        validate(schedule)


def test_correct_reduction_and_allgather_pass():
    reduce = Schedule(
        "reduce", "hand", 2, 1, 8, ((0, 8),), ((Send(1, (0,)),), (Recv(0, (0,), True),))
    )
    validate(reduce)
    # allgather of 2 blocks of 4 bytes: each rank sends its block to the other
    allgather = Schedule(
        "allgather",
        "hand",
        2,
        0,
        4,
        ((0, 4), (4, 4)),
        ((Send(1, (0,)), Recv(1, (1,))), (Send(0, (1,)), Recv(0, (0,)))),
    )
    validate(allgather)


def test_reduce_without_combining_is_wrong():
    plain = Schedule("reduce", "hand", 2, 1, 8, ((0, 8),), ((Send(1, (0,)),), (Recv(0, (0,)),)))
    with pytest.raises(ScheduleError, match="instead of"):
        validate(plain)


def test_barrier_needs_everyone_heard():
    control = ()
    half = Schedule("barrier", "hand", 3, 0, 1, (), ((Send(1, control),), (Recv(0, control),), ()))
    with pytest.raises(ScheduleError, match="before hearing"):
        validate(half)
    ring = tuple(
        (
            Send((r + 1) % 3, control),
            Recv((r - 1) % 3, control),
            Send((r + 1) % 3, control),
            Recv((r - 1) % 3, control),
        )
        for r in range(3)
    )
    validate(Schedule("barrier", "hand", 3, 0, 1, (), ring))


def test_message_sizes_and_control_messages():
    schedule = bcast(
        [[Send(1, ()), Send(1, (0, 1))], [Recv(0, ()), Recv(0, (0, 1))]],
        nranks=2,
        nsegments=2,
        nbytes=30,
    )
    assert schedule.nbytes_of(schedule.programs[0][0]) == CONTROL_BYTES
    assert schedule.nbytes_of(schedule.programs[0][1]) == 30
    assert schedule.segment_size == 15


def test_program_count_must_match_ranks():
    with pytest.raises(ScheduleError, match="programs for"):
        Schedule("bcast", "x", 3, 0, 1, ((0, 1),), ((),))
    with pytest.raises(ScheduleError, match="unknown collective"):
        Schedule("nosuch", "x", 1, 0, 1, ((0, 1),), ((),))


@given(
    nbytes=st.integers(1, 10_000),
    itemsize=st.sampled_from([1, 2, 4, 8, 16]),
    segment_items=st.integers(1, 3000),
)
def test_split_segments_tiles_the_message(nbytes, itemsize, segment_items):
    nbytes *= itemsize
    segments = split_segments(nbytes, segment_items * itemsize, itemsize)
    assert segments[0][0] == 0
    assert sum(length for _, length in segments) == nbytes
    for (o1, n1), (o2, _) in itertools.pairwise(segments):
        assert o1 + n1 == o2
    assert all(length % itemsize == 0 and length > 0 for _, length in segments)
    assert len(segments) == -(-nbytes // min(segment_items * itemsize, nbytes))


@pytest.mark.parametrize(
    ("nbytes", "segment_size", "itemsize", "message"),
    [
        (0, None, 1, "must be > 0"),
        (-4, None, 1, "must be > 0"),
        (64, 0, 1, "segment size must be > 0"),
        (64, 6, 4, "does not divide into the 4-byte datatype"),
        (10, None, 4, "not a whole number of 4-byte elements"),
    ],
)
def test_split_segments_rejects_bad_sizes(nbytes, segment_size, itemsize, message):
    with pytest.raises(ParameterError, match=message):
        split_segments(nbytes, segment_size, itemsize)


def test_json_round_trip_and_malformed_json():
    schedule = bcast(GOOD)
    assert schedule_from_json(schedule_to_json(schedule)) == schedule
    with pytest.raises(ScheduleError, match="not a schedule"):
        schedule_from_json('{"format": "other"}')
    with pytest.raises(ScheduleError, match="malformed"):
        schedule_from_json('{"format": "gridcoll-schedule/1"}')


# -- compact programs ----------------------------------------------------------------
PATTERN = ((False, 0), (True, 2), (True, 5))
MESSAGES = ((0,), (1,), (2, 3))
EXPLICIT = tuple(
    (Send if send else Recv)(peer, segments) for segments in MESSAGES for send, peer in PATTERN
)


def test_periodic_program_is_the_tuple_of_its_ops():
    program = PeriodicProgram(PATTERN, MESSAGES)
    assert len(program) == 9 and program.nsends == 6
    assert program == EXPLICIT and list(EXPLICIT) == program
    assert EXPLICIT == program  # noqa: SIM300 - the tuple on the left: reflected __eq__
    assert program != EXPLICIT[:-1] and program != (*EXPLICIT[:-1], Send(5, (2,)))
    assert hash(program) == hash(EXPLICIT)
    assert tuple(program) == EXPLICIT and repr(program) == repr(EXPLICIT)
    assert [program[i] for i in range(-9, 9)] == list(EXPLICIT * 2)
    assert program[2:7:2] == EXPLICIT[2:7:2] and program[:] == EXPLICIT
    assert program + (Send(1, ()),) == (*EXPLICIT, Send(1, ()))  # noqa: RUF005
    assert (Send(1, ()),) + program == (Send(1, ()), *EXPLICIT)  # noqa: RUF005
    assert program.index(Send(5, (1,))) == 5 and Recv(0, (2, 3)) in program
    assert pickle.loads(pickle.dumps(program)) == program
    for bad in (9, -10):
        with pytest.raises(IndexError):
            program[bad]
    assert PeriodicProgram((), MESSAGES) == () and len(PeriodicProgram(PATTERN, ())) == 0


def test_schedule_of_periodic_programs_counts_as_its_tuples():
    programs = (PeriodicProgram(((True, 1), (True, 2)), ((0,), (1,))),)
    programs += (PeriodicProgram(((False, 0),), ((0,), (1,))),) * 2
    compact = Schedule("bcast", "hand", 3, 0, 30, ((0, 20), (20, 10)), programs)
    explicit = Schedule("bcast", "hand", 3, 0, 30, compact.segments, tuple(map(tuple, programs)))
    assert compact == explicit
    assert compact.nmessages == explicit.nmessages == 4
    assert compact.message_bytes == explicit.message_bytes == {(0,): 20, (1,): 10}
    validate(compact)
    assert schedule_from_json(schedule_to_json(compact)) == compact
    outside = (PeriodicProgram(PATTERN, ((7,),)),)
    bad = Schedule("bcast", "hand", 1, 0, 30, compact.segments, outside)
    with pytest.raises(ScheduleError, match="segment 7"):
        bad.message_bytes  # noqa: B018


@st.composite
def trees(draw):
    """A random rooted tree over a random subset of ranks (parents before children),
    children in a random send order."""
    nranks = draw(st.integers(1, 12))
    ranks = draw(st.permutations(range(nranks)))[: draw(st.integers(1, nranks))]
    children: dict[int, list[int]] = {}
    for i, v in enumerate(ranks[1:], start=1):
        children.setdefault(ranks[draw(st.integers(0, i - 1))], []).append(v)
    return nranks, Tree(ranks[0], {v: tuple(kids) for v, kids in children.items()})


@given(trees(), st.integers(1, 6))
def test_tree_broadcast_equals_its_explicit_programs(case, nsegments):
    nranks, tree = case
    compact = tree_broadcast(tree, nranks, nsegments)
    explicit = _explicit_tree_broadcast(tree, nranks, nsegments, rendezvous=False)
    assert compact == explicit
    assert [len(p) for p in compact] == [len(p) for p in explicit]
    assert all(isinstance(p, PeriodicProgram) or p == () for p in compact)
    assert tree_broadcast(tree, nranks, nsegments, rendezvous=True) == _explicit_tree_broadcast(
        tree, nranks, nsegments, rendezvous=True
    )
