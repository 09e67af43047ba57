"""mpi4py's buffer specs as :mod:`gridcoll.runtime.buffers` parses them, against mpi4py
4.1.2's own parser (``msgbuffer.pxi``), in one process.

Specs of several blocks are compared with mpi4py by running its neighbourhood
collectives on a one-process graph communicator with ``k`` self-loops
(``Create_dist_graph_adjacent`` on ``MPI.COMM_SELF``): mpi4py parses a send and a
receive spec of ``k`` blocks with its own ``message_vector`` or ``message_simple``, and
MPI moves the blocks, so both the errors and the bytes every block covers are mpi4py's.
Every buffer is a window inside a larger array, so a block mpi4py places outside the
window (which gridcoll refuses with ``MPI.Exception(ERR_COUNT)``) lands in memory the
test owns.
"""

import ctypes
import gc
import sys
from collections import namedtuple

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

MPI = pytest.importorskip("mpi4py.MPI")

import gridcoll  # noqa: E402
from gridcoll.runtime import buffers  # noqa: E402

_GUARD = 1024  # bytes of the test's memory either side of a buffer's window
_NUMPY_TYPES = {"int32": MPI.INT, "float64": MPI.DOUBLE, "uint8": MPI.UNSIGNED_CHAR}
_TYPE_KEYS = {"int32": "i", "float64": "d", "uint8": "B"}  # keys of MPI._typedict


@pytest.fixture(scope="module")
def graphs():
    """One-process communicators with k = 1..4 in- and out-neighbours (all itself)."""
    comms = {
        k: MPI.COMM_SELF.Create_dist_graph_adjacent([0] * k, [0] * k, reorder=False)
        for k in range(1, 5)
    }
    yield comms
    for comm in comms.values():
        comm.Free()


def _window(dtype: str, n: int) -> tuple[np.ndarray, np.ndarray]:
    """(the test's memory, a window of ``n`` items of ``dtype`` inside it)."""
    nbytes = n * np.dtype(dtype).itemsize
    big = (np.arange(nbytes + 2 * _GUARD) * 7 % 251).astype(np.uint8)
    return big, big[_GUARD : _GUARD + nbytes].view(dtype)


def _outcome(call):
    try:
        return call(), None
    except Exception as err:
        return None, err


def _same_error(mine: Exception, call) -> None:
    """``call`` (mpi4py) raises ``mine``'s class with ``mine``'s message."""
    with pytest.raises(type(mine)) as theirs:
        call()
    assert str(theirs.value) == str(mine)


# -- vector specs: the forms, by example --------------------------------------------


def test_every_vector_form_and_the_tuple_rule():
    a = np.arange(12, dtype=np.int32)
    cases = {  # spec (3 blocks) -> counts, displs
        "bare, equal": (a, (4, 4, 4), (0, 4, 8)),
        "[buf, type]": ([a, MPI.INT], (4, 4, 4), (0, 4, 8)),
        "[buf, counts] (a list)": ([a, [1, 2, 3]], (1, 2, 3), (0, 1, 3)),
        "[buf, counts, type]": ([a, [1, 2, 3], MPI.INT], (1, 2, 3), (0, 1, 3)),
        "[buf, count, type]": ([a, 2, MPI.INT], (2, 2, 2), (0, 2, 4)),
        "[buf, (counts, displs)]": ([a, ([1, 2, 3], [9, 0, 3])], (1, 2, 3), (9, 0, 3)),
        "[buf, (counts, displs), type]": ([a, ([1, 0, 2], [0, 5, 7]), "i"], (1, 0, 2), (0, 5, 7)),
        "[buf, (count, stride), type]": ([a, (2, 3), MPI.INT], (2, 2, 2), (0, 3, 6)),
        "[buf, (0, None), type]": ([a, (0, None), MPI.INT], (0, 0, 0), (0, 0, 0)),
        "[buf, (count, None), type]": ([a, (3, None), MPI.INT], (3, 3, 3), (0, 3, 6)),
        "[buf, (None, None)]": ([a, (None, None)], (4, 4, 4), (0, 4, 8)),
        "[buf, counts, displs, type]": ([a, [1, 1, 1], [2, 0, 1], MPI.INT], (1, 1, 1), (2, 0, 1)),
        "4 items, a tuple of counts": ([a, (1, 2, 3), None, MPI.INT], (1, 2, 3), (0, 1, 3)),
        "4 items, a stride": ([a, 2, 4, MPI.INT], (2, 2, 2), (0, 4, 8)),
        "numpy counts": ([a, (np.array([1, 2, 3]), np.int64(4)), "i"], (1, 2, 3), (0, 4, 8)),
        "a tuple subclass": ([a, namedtuple("P", "c d")(1, 2)], (1, 1, 1), (0, 2, 4)),
        "a bool count": ([a, True, MPI.INT], (1, 1, 1), (0, 1, 2)),
        "a 0-d array count": ([a, np.array(2), MPI.INT], (2, 2, 2), (0, 2, 4)),
    }
    for name, (spec, counts, displs) in cases.items():
        v = buffers.parse_vector(spec, True, 3)
        assert (v.counts, v.displs, v.itemsize) == (counts, displs, 4), name
        assert np.shares_memory(v.view, a) and v.view.size == 48, name
        assert v.byte_counts() == tuple(4 * c for c in counts), name


def test_inferred_counts_spread_the_remainder_over_the_first_blocks():
    for n, blocks, counts in [(10, 3, (4, 3, 3)), (2, 4, (1, 1, 0, 0)), (0, 2, (0, 0))]:
        v = buffers.parse_vector(np.arange(n, dtype=np.float64), False, blocks)
        assert v.counts == counts
        assert v.displs == tuple(int(x) for x in np.cumsum((0, *counts))[:-1])
    assert buffers.parse_vector([np.zeros(7, np.int16), MPI.BYTE], True, 4).counts == (4, 4, 3, 3)


@given(n=st.integers(0, 200), blocks=st.integers(1, 9))
def test_inferred_counts_cover_the_buffer_in_near_equal_packed_blocks(n, blocks):
    v = buffers.parse_vector(np.zeros(n, np.int32), True, blocks)
    assert sum(v.counts) == n and max(v.counts) - min(v.counts) <= 1
    assert list(v.counts) == sorted(v.counts, reverse=True)
    assert v.displs == tuple(sum(v.counts[:i]) for i in range(blocks))


@pytest.mark.parametrize(
    ("spec", "error", "message"),
    [
        (lambda a: [a, [1, 2]], ValueError, "expecting 3 items, got 2"),
        (lambda a: [a, [1, 1, 1], [0, 1], MPI.INT], ValueError, "expecting 3 items, got 2"),
        (lambda a: [a, (1, 2, 3)], ValueError, "too many values to unpack (expected 2)"),
        (lambda a: [a, (1,), MPI.INT], ValueError, "need more than 1 value to unpack"),
        (lambda a: [a, (), MPI.INT], ValueError, "need more than 0 values to unpack"),
        (lambda a: [a], ValueError, "message: expecting 2 to 4 items"),
        (lambda a: [a, 1, 0, MPI.INT, None], ValueError, "message: expecting 2 to 4 items"),
        (lambda a: 5, TypeError, "message: expecting buffer or list/tuple"),
        (lambda a: None, TypeError, "message: expecting buffer or list/tuple"),
        (lambda a: [a, 1.5, MPI.INT], TypeError, "object of type 'float' has no len()"),
        (lambda a: [a, [1.5] * 3], TypeError, "'float' object cannot be interpreted as an integer"),
        (lambda a: [a, [1, 1, 1], [0, 1], "x"], KeyError, "\"cannot map 'x' to MPI datatype\""),
        (lambda a: [a, "int32"], KeyError, "\"cannot map 'int32' to MPI datatype\""),
        (lambda a: [a, [1, 1, 1], 0, [MPI.INT]], TypeError, "unhashable type: 'list'"),
        (lambda a: [a, [3], [0]], TypeError, "unhashable type: 'list'"),  # 3 items: a type
        (lambda a: [a, [2**70] * 3], OverflowError, "Python int too large to convert to C long"),
        (lambda a: [None, [0, 0, 0]], KeyError, "'cannot map None to MPI datatype'"),
        (
            lambda a: [a.view(np.uint8)[:7], MPI.INT],
            ValueError,
            "buffer length 7 is not a multiple of datatype extent 4 (lb:0, ub:4)",
        ),
        (lambda a: [a, MPI.DATATYPE_NULL], ValueError, "cannot infer count, datatype is null"),
        (lambda a: np.zeros(3, "i,d"), KeyError, "cannot map 'T{i:f0:=d:f1:}' to MPI datatype"),
        (lambda a: np.zeros(3, ">f8"), BufferError, "format string '>d' with non-native"),
        (lambda a: np.zeros((3, 4))[:, 1], BufferError, "not contiguous"),
    ],
)
def test_bad_vector_specs_raise_mpi4pys_errors(graphs, spec, error, message):
    a, partner = np.arange(12, dtype=np.int32), np.zeros(8, np.uint8)
    for readonly in (True, False):
        with pytest.raises(error) as info:
            buffers.parse_vector(spec(a), readonly, 3)
        assert message in str(info.value)
    # mpi4py's own parser, on 3 blocks, raises the same (as a send and a receive spec)
    _same_error(info.value, lambda: graphs[3].Neighbor_alltoallv(spec(a), [partner, 0, "B"]))
    _same_error(info.value, lambda: graphs[3].Neighbor_alltoallv([partner, 0, "B"], spec(a)))


def test_blocks_outside_the_buffer_and_negative_counts_are_errcount():
    a = np.arange(10, dtype=np.int32)
    for spec in ([a, [3, 3, 5], MPI.INT], [a, [1, 1, 1], [0, 1, -1], MPI.INT], [a, -1, MPI.INT]):
        with pytest.raises(MPI.Exception) as info:
            buffers.parse_vector(spec, True, 3)
        assert info.value.Get_error_class() == MPI.ERR_COUNT
    # an empty block may sit anywhere, as MPI lets it
    v = buffers.parse_vector([a, [0, 2, 0], [-5, 8, 99], MPI.INT], False, 3)
    assert v.counts == (0, 2, 0) and v.displs == (-5, 8, 99)
    # MPI's own error for a negative count on one process
    with pytest.raises(MPI.Exception) as info:
        MPI.COMM_SELF.Scatterv([a, [-1], MPI.INT], [a, 0, MPI.INT], 0)
    assert info.value.Get_error_class() == MPI.ERR_COUNT


def test_a_datatype_with_holes_and_an_object_array_go_to_mpi():
    holes = MPI.INT.Create_vector(2, 1, 2).Commit()
    try:
        a = np.arange(12, dtype=np.int32)
        assert buffers.parse_vector([a, [1, 1, 1], holes], True, 3) is None
        assert buffers.parse([a, 1, holes], True) is None
    finally:
        holes.Free()
    assert buffers.parse_vector([np.zeros(3, object), MPI.BYTE], True, 1) is None


# -- None and MPI.BOTTOM --------------------------------------------------------------


@pytest.mark.parametrize("bottom", [None, MPI.BOTTOM], ids=["None", "BOTTOM"])
def test_a_none_or_bottom_vector_buffer_with_zero_counts_is_empty(bottom):
    cases = [
        ([bottom, (0, None), MPI.DOUBLE], (0, 0, 0), (0, 0, 0)),
        ([bottom, MPI.DOUBLE], (0, 0, 0), (0, 0, 0)),
        ([bottom, [0, 0, 0], [5, 6, 7], MPI.DOUBLE], (0, 0, 0), (5, 6, 7)),
        ([bottom, (0, 3), "d"], (0, 0, 0), (0, 3, 6)),
        ([bottom, ([0, 0, 0], None), MPI.DOUBLE], (0, 0, 0), (0, 0, 0)),
    ]
    for spec, counts, displs in cases:
        form = spec[1:-1]
        v = buffers.parse_vector(spec, False, 3)
        assert v.view.size == 0 and v.itemsize == 8, form
        assert (v.counts, v.displs) == (counts, displs), form
        assert v.datatype == MPI.DOUBLE and v.data is bottom, form
        assert buffers.signature(v.block_spec()) == "<f8"
    # a nonzero count: absolute addresses from MPI_BOTTOM, for MPI's own call
    assert buffers.parse_vector([bottom, (1, None), MPI.INT], True, 3) is None
    assert buffers.parse_vector([bottom, [0, 2, 0], None, MPI.INT], True, 3) is None
    with pytest.raises(KeyError, match="cannot map None to MPI datatype"):
        buffers.parse_vector([bottom, (0, None)], True, 3)  # a datatype is required


def test_a_none_or_bottom_vector_buffer_as_mpi4py_takes_it_on_one_block():
    for spec in ([None, (0, None), MPI.INT], [MPI.BOTTOM, [0], [4], MPI.INT], [None, MPI.INT]):
        MPI.COMM_SELF.Gatherv([None, MPI.INT], spec, 0)  # mpi4py takes it
        assert buffers.parse_vector(spec, False, 1).view.size == 0
    with pytest.raises(MPI.Exception):  # MPI's error for what gridcoll hands to MPI
        MPI.COMM_SELF.Scatterv([None, (5, None), MPI.INT], [np.zeros(5, np.int32), MPI.INT], 0)
    assert buffers.parse_vector([None, (5, None), MPI.INT], True, 1) is None


@pytest.mark.parametrize("bottom", [None, MPI.BOTTOM], ids=["None", "BOTTOM"])
def test_a_none_or_bottom_simple_buffer_keeps_its_datatype(bottom):
    for spec in ([bottom, MPI.INT], [bottom, 0, MPI.INT], [bottom, (0, 0), MPI.INT]):
        s = buffers.parse(spec, False, 4)
        assert (s.view.size, s.itemsize, s.count) == (0, 4, 0)
        assert s.datatype == MPI.INT and s.data is bottom
        assert buffers.signature(s) == "<i4"
    s = buffers.parse([bottom, "d"], True)
    assert s.itemsize == 8 and s.datatype == MPI.DOUBLE
    with pytest.raises(KeyError, match="cannot map None to MPI datatype"):
        buffers.parse([bottom, 0], True)
    with pytest.raises(ValueError, match="displacement 1 out of bounds"):
        buffers.parse([bottom, (0, 1), MPI.INT], True)


def test_a_nonzero_count_from_none_or_bottom():
    with pytest.raises(ValueError, match="message: buffer is None but count is 3"):
        buffers.parse([None, 3, MPI.INT], True)
    with pytest.raises(MPI.Exception):  # MPI's own, as mpi4py's call raises it
        buffers.parse([MPI.BOTTOM, 3, MPI.INT], True)
    with pytest.raises(KeyError, match="cannot map None"):  # bare BOTTOM: no datatype
        buffers.parse(MPI.BOTTOM, True)
    s = buffers.parse(MPI.IN_PLACE, True)
    assert (s.view.size, s.itemsize, buffers.signature(s)) == (0, 1, "")


def test_simple_forms_with_none_count_or_displacement():
    a = np.arange(10, dtype=np.int32)
    for spec, (count, first) in {
        "a": ([a, (2, None), MPI.INT], (2, 0)),
        "b": ([a, (None, 4), MPI.INT], (6, 4)),
        "c": ([a, None, None, MPI.INT], (10, 0)),
        "d": ([a, [None, 8]], (2, 8)),
        "e": ([a, 3, "i"], (3, 0)),
    }.values():
        s = buffers.parse(spec, True)
        assert s.count == count and s.view.view(np.int32)[0] == first
    with pytest.raises(KeyError, match="cannot map 'int32' to MPI datatype"):
        buffers.parse([a, "int32"], True)
    with pytest.raises(KeyError, match="cannot map 'T"):  # a structured type, bare
        buffers.parse(np.zeros(3, "i,d"), True)
    assert buffers.parse([np.zeros(3, "i,d"), MPI.BYTE], True).view.size == 36


# -- against mpi4py, several blocks ----------------------------------------------------


def _ints(k: int, lo: int, hi: int) -> st.SearchStrategy:
    """Counts or displacements in every form mpi4py reads (and some it refuses)."""
    item = st.integers(lo, hi)
    return st.one_of(
        st.none(),
        item,
        st.booleans(),
        st.lists(item, min_size=max(k - 1, 0), max_size=k + 1),
        st.lists(item, min_size=k, max_size=k).map(np.array),
        st.sampled_from([1.5, [1.5] * k, 2**70, [2**70] * k, "x"]),
    )


@st.composite
def _vector_cases(draw):
    k = draw(st.integers(1, 4))
    dtype = draw(st.sampled_from(sorted(_NUMPY_TYPES)))
    n = draw(st.integers(0, 12))
    big, a = _window(dtype, n)
    kind = draw(st.sampled_from(["mpi", "key", "short", "bad"]))
    t = {"mpi": _NUMPY_TYPES[dtype], "key": _TYPE_KEYS[dtype], "short": MPI.SHORT}.get(
        kind, "int32"
    )
    counts, displs = draw(_ints(k, -1, 6)), draw(_ints(k, -3, 10))
    if draw(st.booleans()) and isinstance(counts, list):
        counts = tuple(counts)  # a tuple of counts: in a 4-item spec, still counts
    pair = draw(st.lists(st.integers(0, 2), max_size=3).filter(lambda p: len(p) != 2))
    form = draw(st.integers(0, 8))
    spec = [
        a,
        [a, t],
        [a, list(counts) if isinstance(counts, tuple) else counts],
        [a, list(counts) if isinstance(counts, tuple) else counts, t],
        [a, (counts, displs)],
        [a, (counts, displs), t],
        [a, counts, displs, t],
        [a, tuple(pair), t],
        [a] if draw(st.booleans()) else [a, counts, displs, t, None],
    ][form]
    typed = form in (1, 3, 5, 6, 7, 8)
    mpi_type = buffers._asdatatype(t) if typed and kind != "bad" else _NUMPY_TYPES[dtype]
    return k, big, spec, mpi_type


def _vector_blocks(spec, readonly: bool, k: int, mpi_type) -> tuple[list, list, int]:
    """The counts and displacements mpi4py's rules give for a spec gridcoll refused
    with ERR_COUNT (its own check, after mpi4py's rules): the test then checks that
    mpi4py moves exactly these blocks, or MPI refuses a negative count."""
    o_buf, o_counts, o_displs, o_type = buffers._unpack_vector(spec)
    _, btype, nbytes = buffers._message_basic(o_buf, o_type, readonly)
    counts, displs = buffers._vector_counts(o_counts, o_displs, k, btype, nbytes)
    return list(counts), list(displs), mpi_type.Get_extent()[1]


def _spans(counts, displs, itemsize):
    return [
        (_GUARD + d * itemsize, _GUARD + (d + c) * itemsize)
        for c, d in zip(counts, displs, strict=True)
    ]


def _check_send(graph, big, spec, counts, displs, itemsize, mpi_type):
    """mpi4py sends exactly the blocks gridcoll found."""
    received = np.zeros(sum(counts) * itemsize, np.uint8)
    graph.Neighbor_alltoallv(spec, [received, list(counts), None, mpi_type])
    expected = b"".join(big[lo:hi].tobytes() for lo, hi in _spans(counts, displs, itemsize))
    assert received.tobytes() == expected


def _check_recv(graph, big, spec, counts, displs, itemsize, mpi_type):
    """mpi4py receives into exactly the blocks gridcoll found, and nowhere else."""
    payload = (np.arange(sum(counts) * itemsize) * 13 % 241 + 3).astype(np.uint8)
    before = big.copy()
    graph.Neighbor_alltoallv([payload, list(counts), None, mpi_type], spec)
    spans, untouched, at = _spans(counts, displs, itemsize), np.ones(big.size, bool), 0
    expected = before.copy()
    for lo, hi in spans:
        expected[lo:hi] = payload[at : at + hi - lo]
        untouched[lo:hi] = False
        at += hi - lo
    assert np.array_equal(big[untouched], before[untouched])
    overlap = sum(hi - lo for lo, hi in spans) != (~untouched).sum()
    assert overlap or np.array_equal(big, expected)


@given(case=_vector_cases(), readonly=st.booleans())
@settings(max_examples=300, deadline=None)
def test_vector_specs_parse_as_mpi4pys_message_vector(graphs, case, readonly):
    k, big, spec, mpi_type = case
    graph = graphs[k]
    partner = np.zeros(4 * _GUARD, np.uint8)
    v, err = _outcome(lambda: buffers.parse_vector(spec, readonly, k))
    if err is not None and not isinstance(err, MPI.Exception):
        if readonly:
            _same_error(err, lambda: graph.Neighbor_alltoallv(spec, [partner, 0, MPI.BYTE]))
        else:
            _same_error(err, lambda: graph.Neighbor_alltoallv([partner, 0, MPI.BYTE], spec))
        return
    if err is not None:  # gridcoll's ERR_COUNT: a negative count, or a block outside
        assert err.Get_error_class() == MPI.ERR_COUNT
        counts, displs, itemsize = _vector_blocks(spec, readonly, k, mpi_type)
        window = big.size - 2 * _GUARD
        outside = [lo < _GUARD or hi > _GUARD + window for lo, hi in
                   _spans(counts, displs, itemsize) if hi > lo]  # fmt: skip
        if any(c < 0 for c in counts):
            with pytest.raises(MPI.Exception) as info:  # MPI's own refusal
                graph.Neighbor_alltoallv(spec, [partner, [0] * k, MPI.BYTE])
            assert info.value.Get_error_class() == MPI.ERR_COUNT
            return
        assert any(outside)
        if window == 0:
            return  # numpy puts an empty window at its array's start: no block to compare
    else:
        assert v is not None and v.view.size == big.size - 2 * _GUARD
        counts, displs, itemsize = v.counts, v.displs, v.itemsize
        assert itemsize == mpi_type.Get_extent()[1]
    check = _check_send if readonly else _check_recv
    check(graph, big, spec, counts, displs, itemsize, mpi_type)


# -- against mpi4py, block specs --------------------------------------------------------


@st.composite
def _simple_cases(draw):
    k = draw(st.integers(1, 4))
    dtype = draw(st.sampled_from(sorted(_NUMPY_TYPES)))
    big, a = _window(dtype, draw(st.integers(0, 12)))
    t = draw(st.sampled_from([_NUMPY_TYPES[dtype], _TYPE_KEYS[dtype], MPI.SHORT]))
    count = draw(st.one_of(st.none(), st.integers(-1, 6), st.booleans()))
    displ = draw(st.one_of(st.none(), st.integers(-1, 6)))
    form = draw(st.integers(0, 8))
    spec = [
        a,
        [a, t],
        [a, count],
        [a, count, t],
        [a, (count, displ)],
        [a, [count, displ], t],
        [a, (count, displ), t],
        [a, count, displ, t],
        [a, (count,), t],
    ][form]
    typed = form in (1, 3, 5, 6, 7, 8)
    mpi_type = buffers._asdatatype(t) if typed else _NUMPY_TYPES[dtype]
    return k, big, spec, mpi_type, count, (displ if form >= 4 else None) or 0


@given(case=_simple_cases(), readonly=st.booleans())
@settings(max_examples=200, deadline=None)
def test_block_specs_parse_as_mpi4pys_message_simple(graphs, case, readonly):
    k, big, spec, mpi_type, count, displ = case
    graph = graphs[k]
    partner = np.zeros(4 * _GUARD, np.uint8)
    s, err = _outcome(lambda: buffers.parse(spec, readonly, k if k >= 2 else 0))
    if err is not None and not isinstance(err, MPI.Exception):
        if readonly:
            _same_error(err, lambda: graph.Neighbor_alltoall(spec, [partner, 0, MPI.BYTE]))
        else:
            _same_error(err, lambda: graph.Neighbor_alltoall([partner, 0, MPI.BYTE], spec))
        return
    itemsize = mpi_type.Get_extent()[1]
    if err is not None:  # gridcoll's ERR_COUNT: an explicit count past the buffer
        assert err.Get_error_class() == MPI.ERR_COUNT
        assert _GUARD + (displ + count * k) * itemsize > big.size - _GUARD
        if big.size == 2 * _GUARD:
            return  # numpy puts an empty window at its array's start: no block to compare
    else:
        assert s.itemsize == itemsize and s.view.size == s.count * itemsize * k
        count = s.count
    lo, nbytes = _GUARD + displ * itemsize, count * itemsize * k
    if readonly:  # mpi4py sends the bytes gridcoll found
        received = np.zeros(nbytes, np.uint8)
        graph.Neighbor_alltoall(spec, [received, count, mpi_type])
        assert received.tobytes() == big[lo : lo + nbytes].tobytes()
    else:  # mpi4py receives into them, and nowhere else
        payload = (np.arange(nbytes) * 13 % 241 + 3).astype(np.uint8)
        expected = big.copy()
        expected[lo : lo + nbytes] = payload
        graph.Neighbor_alltoall([payload, count, mpi_type], spec)
        assert np.array_equal(big, expected)


# -- DLPack: the element type read from the capsule -------------------------------------
# A minimal DLPack producer in ctypes, after mpi4py's test/dlpackimpl.py: numpy's own
# __dlpack__ refuses long double, and the tests choose the DLPack element type.


class _DLDataType(ctypes.Structure):
    _fields_ = (("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16))


class _DLTensor(ctypes.Structure):
    _fields_ = (
        ("data", ctypes.c_void_p),
        ("device_type", ctypes.c_int),
        ("device_id", ctypes.c_int32),
        ("ndim", ctypes.c_int32),
        ("dtype", _DLDataType),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("strides", ctypes.POINTER(ctypes.c_int64)),
        ("byte_offset", ctypes.c_uint64),
    )


class _DLManagedTensor(ctypes.Structure):
    _fields_ = (
        ("dl_tensor", _DLTensor),
        ("manager_ctx", ctypes.c_void_p),
        ("deleter", ctypes.c_void_p),
    )


class _DLManagedTensorVersioned(ctypes.Structure):
    _fields_ = (
        ("version_major", ctypes.c_uint32),
        ("version_minor", ctypes.c_uint32),
        ("manager_ctx", ctypes.c_void_p),
        ("deleter", ctypes.c_void_p),
        ("flags", ctypes.c_uint64),
        ("dl_tensor", _DLTensor),
    )


_V1, _V0 = b"dltensor_versioned", b"dltensor"
_api = ctypes.PyDLL(None, handle=ctypes.pythonapi._handle)
_capsule_new = _api.PyCapsule_New  # no destructor: the test keeps the tensor alive
_capsule_new.restype = ctypes.py_object
_capsule_new.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
_capsule_valid = _api.PyCapsule_IsValid
_capsule_valid.restype, _capsule_valid.argtypes = ctypes.c_int, [ctypes.py_object, ctypes.c_char_p]
_error_occurred = _api.PyErr_Occurred  # PyDLL raises the error if one is set
_error_occurred.restype, _error_occurred.argtypes = ctypes.c_void_p, []


_FLOAT, _COMPLEX, _BOOL, _BFLOAT = 2, 5, 6, 4
_DL_TYPES = {  # numpy dtype -> DLPack (code, bits, lanes)
    "longdouble": (_FLOAT, 8 * np.dtype(np.longdouble).itemsize, 1),
    "clongdouble": (_FLOAT, 8 * np.dtype(np.longdouble).itemsize, 2),  # as dlpackimpl
    "bool": (_BOOL, 8, 1),
    "float16": (_FLOAT, 16, 1),
    "float32": (_FLOAT, 32, 1),
    "complex64": (_COMPLEX, 64, 1),
    "int64": (0, 64, 1),
    "uint16": (1, 16, 1),
}


class _DLPackOnly:
    """A CPU array seen only through DLPack 1.x (``__dlpack__(max_version=...)``), with
    the element type ``dl`` (code, bits, lanes) chosen by the test. Its capsules have no
    destructor (their tensors live as long as the object) and are kept, to be
    inspected."""

    def __init__(self, array: np.ndarray, dl: tuple[int, int, int] | None = None):
        self.array, self.dl = array, dl or _DL_TYPES[array.dtype.type.__name__]
        self.tensors: list = []
        self.capsules: list = []

    def __dlpack_device__(self):
        return (1, 0)

    def __dlpack__(self, stream=None, max_version=None, copy=None, dl_device=None):
        return self._capsule(versioned=max_version is not None and max_version[0] >= 1)

    def _capsule(self, versioned: bool):
        code, bits, lanes = self.dl
        shape = (ctypes.c_int64 * 1)(self.array.nbytes * 8 // (bits * lanes))
        tensor = _DLTensor(self.array.ctypes.data, 1, 0, 1, _DLDataType(code, bits, lanes))
        tensor.shape = shape
        if versioned:
            readonly = 0 if self.array.flags.writeable else 1
            managed = _DLManagedTensorVersioned(1, 0, None, None, readonly, tensor)
        else:
            managed = _DLManagedTensor(tensor, None, None)
        self.tensors.append((managed, shape))
        capsule = _capsule_new(ctypes.addressof(managed), _V1 if versioned else _V0, None)
        self.capsules.append(capsule)
        return capsule


class _DLPackV0(_DLPackOnly):
    """A DLPack 0.x producer: no ``max_version`` (mpi4py falls back on ``TypeError``)."""

    def __dlpack__(self, stream=None):
        return self._capsule(versioned=False)


@pytest.mark.parametrize("producer", [_DLPackOnly, _DLPackV0], ids=["v1", "v0"])
@pytest.mark.parametrize("name", sorted(_DL_TYPES))
def test_a_dlpack_buffer_has_mpi4pys_element_type(producer, name):
    a = np.arange(6).astype(name)
    obj = producer(a)
    host = buffers.host_array(obj, False)
    assert host.dtype == a.dtype and np.shares_memory(host, a)
    s = buffers.parse(obj, True)
    assert (s.itemsize, s.count) == (a.itemsize, 6)
    assert buffers.datatype_of(s) == MPI._typedict[memoryview(a).format.lstrip("<")]
    assert buffers.signature(s) == buffers.signature(buffers.parse(a, True))
    MPI.COMM_SELF.Bcast(obj, 0)  # mpi4py takes it, with the datatype of that format
    v = buffers.parse_vector(obj, False, 4)
    assert v.counts == (2, 2, 1, 1) and v.itemsize == a.itemsize
    assert _error_occurred() is None  # no error left set: later calls work
    assert [x * 2 for x in range(3)] == [0, 2, 4]
    assert buffers.parse(np.arange(3.0), True).count == 3


def test_the_dlpack_types_mpi4py_calls_bytes():
    for dl, what in [((_BFLOAT, 16, 1), "bfloat16"), ((1, 8, 4), "4 lanes")]:
        obj = _DLPackOnly(np.arange(8, dtype=np.uint16), dl)
        assert buffers.host_array(obj, True).dtype == np.uint8, what  # MPI.BYTE
        assert buffers.parse(obj, True).view.size == 16, what
    complex32 = _DLPackOnly(np.arange(4, dtype=np.uint32), (_COMPLEX, 32, 1))
    assert buffers.host_array(complex32, True).dtype == np.uint8
    for call in (
        lambda: MPI.COMM_SELF.Bcast(complex32, 0),
        lambda: buffers.parse(complex32, True),
        lambda: buffers.parse_vector(complex32, True, 2),
    ):
        with pytest.raises(KeyError, match="cannot map 'Ze' to MPI datatype"):
            call()  # bare: mpi4py cannot map its format; with a datatype, bytes
    assert buffers.parse_vector([complex32, (1, 1), MPI.FLOAT], True, 2).counts == (1, 1)
    assert _error_occurred() is None


@pytest.mark.parametrize("producer", [_DLPackOnly, _DLPackV0], ids=["v1", "v0"])
def test_the_capsule_is_read_and_released_not_consumed(producer):
    obj = producer(np.arange(5).astype(np.longdouble))
    s = buffers.parse([obj, 2, MPI.LONG_DOUBLE], False)
    assert s.view.size == 32 and obj.capsules
    name = _V1 if producer is _DLPackOnly else _V0
    assert all(_capsule_valid(c, name) for c in obj.capsules)  # not renamed ("used_...")
    del s
    gc.collect()  # released by mpi4py and gridcoll: held by the list, c and the call
    assert all(sys.getrefcount(c) == 3 for c in obj.capsules)


def test_numpy_from_dlpack_is_never_called(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("numpy.from_dlpack called")

    monkeypatch.setattr(np, "from_dlpack", refuse)
    for name in ("longdouble", "clongdouble", "bool", "float16", "int64"):
        a = np.arange(4).astype(name)
        assert buffers.host_array(_DLPackV0(a), True).dtype == a.dtype
        assert buffers.parse_vector([_DLPackOnly(a), (1, 2)], True, 2).displs == (0, 2)


# -- through gridcoll.Comm on one process -----------------------------------------------


def test_comm_takes_the_zero_and_strided_vector_forms_on_one_process():
    comm = gridcoll.Comm(MPI.COMM_SELF)
    null_b, null_v = [None, MPI.INT], [None, (0, None), MPI.INT]
    comm.Gatherv(null_b, null_v)  # mpi4py's own test_msgzero forms
    comm.Scatterv(null_v, null_b)
    comm.Allgatherv(null_b, null_v)
    comm.Alltoallv(null_v, null_v)
    a, out = np.arange(6, dtype=np.int32), np.zeros(2, np.int32)
    comm.Scatterv([a, (2, 3), MPI.INT], out, 0)
    assert out.tolist() == [0, 1]
    ld = np.arange(3).astype(np.longdouble)
    comm.Bcast(_DLPackV0(ld), 0)
    assert _error_occurred() is None
