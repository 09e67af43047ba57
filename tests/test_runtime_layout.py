"""The runtime's buffer mapping (runtime.layout), reducer and write hazards, in one
process: every builder's schedule replayed on real bytes through each rank's layout,
results compared with numpy's."""

from collections import deque

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("mpi4py")
from mpi4py import MPI

from gridcoll.algorithms import list_builders
from gridcoll.network import get_grid
from gridcoll.runtime.executor import compile_program
from gridcoll.runtime.layout import layout_for
from gridcoll.runtime.mpi_ops import reducer
from gridcoll.schedule.ir import Send

GRIDS = ("magpie:3,2", "magpie:2,3", "das2:2")
PERSONAL = ("scatter", "gather", "allgather", "alltoall")


def _params(builder):
    return {p: (24 if p.endswith("segment_size") else 2) for p in builder.params}


def replay(schedule, locals_, layouts, combine=None):
    """Run every rank's program on its local buffer (blocking receives, FIFO channels)."""
    P, segs = schedule.nranks, schedule.segments
    channels: dict = {}
    pc = [0] * P
    moved = True
    while moved:
        moved = False
        for r in range(P):
            program, off = schedule.programs[r], layouts[r].offsets
            while pc[r] < len(program):
                op = program[pc[r]]
                if isinstance(op, Send):
                    data = [locals_[r][off[s] : off[s] + segs[s][1]].copy() for s in op.segments]
                    channels.setdefault((r, op.peer), deque()).append(data)
                else:
                    queue = channels.get((op.peer, r))
                    if not queue:
                        break
                    for s, data in zip(op.segments, queue.popleft(), strict=True):
                        held = locals_[r][off[s] : off[s] + segs[s][1]]
                        if op.combine:
                            combine(held, data, op.incoming_first)
                        else:
                            held[:] = data
                pc[r] += 1
                moved = True
    assert all(pc[r] == len(schedule.programs[r]) for r in range(P))


def run_personal(schedule, b, inplace=False):
    """User buffers -> layouts -> replay -> user buffers; returns (sends, recvs)."""
    op, P, root = schedule.op, schedule.nranks, schedule.root
    rng = np.random.default_rng(7)
    rows = op in ("scatter", "alltoall")
    sends = [rng.integers(0, 256, (P if rows else 1) * b, dtype=np.uint8) for _ in range(P)]
    has_recv = [op != "gather" or r == root for r in range(P)]
    recvs = [np.zeros(b if op == "scatter" else P * b, np.uint8) if h else None for h in has_recv]
    layouts, locals_ = [], []
    for r in range(P):
        ip = inplace and (op != "scatter" or r == root) and (op != "gather" or r == root)
        layout = layout_for(schedule, r, inplace=ip)
        src = sends[r]
        if ip and op in ("gather", "allgather"):
            recvs[r][r * b : (r + 1) * b] = sends[r]
            src = recvs[r]
        elif ip and op == "alltoall":
            recvs[r][:] = sends[r]
            src = recvs[r]
        local = {"recv": recvs[r], "send": src}.get(layout.run_on)
        if local is None:
            local = np.zeros(layout.size, np.uint8)
        for a, d, n in layout.copy_in:
            local[d : d + n] = src[a : a + n]
        layouts.append(layout)
        locals_.append(local)
    replay(schedule, locals_, layouts)
    for r, layout in enumerate(layouts):
        for a, d, n in layout.copy_out:
            recvs[r][d : d + n] = locals_[r][a : a + n]
    return sends, recvs


@pytest.mark.parametrize("spec", GRIDS)
@pytest.mark.parametrize("op", PERSONAL)
def test_every_personalised_builder_through_its_layout(spec, op):
    grid = get_grid(spec)
    P, b = grid.nranks, 40
    for builder in list_builders(op):
        for root in range(P):
            for inplace in (False, True):
                schedule = builder.build(grid, b, root, **_params(builder))
                sends, recvs = run_personal(schedule, b, inplace)
                for r in range(P):
                    if op == "scatter":
                        if inplace and r == root:
                            continue  # MPI.IN_PLACE: the root's block stays in sendbuf
                        want = sends[root][r * b : (r + 1) * b]
                    elif op == "gather":
                        want = np.concatenate(sends) if r == root else None
                    elif op == "allgather":
                        want = np.concatenate(sends)
                    else:
                        want = np.concatenate([sends[s][r * b : (r + 1) * b] for s in range(P)])
                    if want is not None:
                        assert np.array_equal(recvs[r], want), (builder.name, root, r, inplace)


def test_layouts_hold_only_what_a_rank_touches():
    grid = get_grid("magpie:4,2")
    P, b = grid.nranks, 100
    for name in ("direct", "direct-rotated"):
        schedule = next(x for x in list_builders("alltoall") if x.name == name).build(grid, b)
        for r in range(P):
            layout = layout_for(schedule, r)
            assert layout.run_on == "staging" and layout.size == (2 * P - 1) * b
    scatter = next(x for x in list_builders("scatter") if x.name == "flat").build(grid, b, 3)
    assert layout_for(scatter, 3).run_on == "send"  # the root sends from the user's buffer
    assert layout_for(scatter, 3).copy_out == ((3 * b, 0, b),)
    assert all(layout_for(scatter, r).run_on == "recv" for r in range(P) if r != 3)
    gather = next(x for x in list_builders("gather") if x.name == "binomial").build(grid, b, 0)
    assert layout_for(gather, 0, inplace=True).copy_in == ()


def _matmul(x, y):
    return np.einsum("nij,njk->nik", x.reshape(-1, 2, 2), y.reshape(-1, 2, 2)).reshape(-1, 4)


def _matmul_op(inbuf, inoutbuf, datatype):
    x = np.frombuffer(inbuf, dtype=np.int64).reshape(-1, 4)
    y = np.frombuffer(inoutbuf, dtype=np.int64).reshape(-1, 4)
    y[...] = _matmul(x, y)


@pytest.mark.parametrize("spec", GRIDS)
@pytest.mark.parametrize("op", ["reduce", "allreduce"])
def test_reductions_in_rank_order_with_a_non_commutative_op(spec, op):
    """2x2 integer matrix products (exact, not commutative) through the runtime's reducer:
    every order-preserving builder gives x_0 x_1 ... x_{P-1}."""
    grid = get_grid(spec)
    P, count = grid.nranks, 7
    quad = MPI.INT64_T.Create_contiguous(4).Commit()
    mop = MPI.Op.Create(_matmul_op, commute=False)
    try:
        combine = reducer(mop, quad, 32, commutative=False)
        rng = np.random.default_rng(3)
        xs = [rng.integers(-2, 3, (count, 4)).astype(np.int64) for _ in range(P)]
        want = xs[0]
        for x in xs[1:]:
            want = _matmul(want, x)
        for builder in list_builders(op):
            if builder.commutative_only:
                continue
            params = {**_params(builder), "commutative": False}
            params = {k: (64 if k.endswith("segment_size") else v) for k, v in params.items()}
            for root in range(P) if op == "reduce" else (0,):
                schedule = builder.build(grid, count * 32, root, itemsize=32, **params)
                layouts = [layout_for(schedule, r) for r in range(P)]
                locals_ = [x.copy().reshape(-1).view(np.uint8) for x in xs]
                replay(schedule, locals_, layouts, combine)
                for r in range(P) if op == "allreduce" else (root,):
                    got = locals_[r].view(np.int64).reshape(-1, 4)
                    assert np.array_equal(got, want), (builder.name, root, r)
    finally:
        mop.Free()
        quad.Free()


def test_reducer_operand_order():
    """held = held (op) incoming, or incoming (op) held; Reduce_local(a, b): b = a (op) b."""
    quad = MPI.INT64_T.Create_contiguous(4).Commit()
    mop = MPI.Op.Create(_matmul_op, commute=False)
    try:
        combine = reducer(mop, quad, 32, commutative=False)
        a = np.array([[1, 1, 0, 1]], dtype=np.int64)  # [[1, 1], [0, 1]]
        b = np.array([[1, 0, 1, 1]], dtype=np.int64)  # [[1, 0], [1, 1]]
        held, incoming = a.copy(), b.copy()
        combine(held.view(np.uint8).reshape(-1), incoming.view(np.uint8).reshape(-1), False)
        assert np.array_equal(held, _matmul(a, b))
        held, incoming = a.copy(), b.copy()
        combine(held.view(np.uint8).reshape(-1), incoming.view(np.uint8).reshape(-1), True)
        assert np.array_equal(held, _matmul(b, a))
    finally:
        mop.Free()
        quad.Free()


def test_write_after_send_hazards_are_flagged_at_compile_time():
    grid = get_grid("magpie:2,2")
    builders = {b.name: b for b in list_builders("allreduce")}
    schedule = builders["recursive-doubling"].build(grid, 64, commutative=True)
    program = compile_program(schedule, 0)
    sends = [s for s in program.steps if s.send]
    assert sends and all(s.snapshot for s in sends)  # it combines into what it sent
    assert not any(s.inplace for s in program.steps if not s.send)
    bcast = {b.name: b for b in list_builders("bcast")}["binomial"].build(grid, 64)
    steps = compile_program(bcast, 1).steps
    assert not any(s.snapshot for s in steps if s.send)
    assert all(s.inplace for s in steps if not s.send)  # zero-copy as before


# -- uneven blocks: the v-variants (Scatterv, Gatherv, Allgatherv, Alltoallv) ---------


def _displs(counts, rng):
    """Byte offsets of ``counts`` in a buffer, in a shuffled order with gaps."""
    out, end = [0] * len(counts), 0
    for i in rng.permutation(len(counts)):
        end += int(rng.integers(0, 3))
        out[i] = end
        end += counts[i]
    return out, end


def run_uneven(schedule, counts, rng):
    """Like :func:`run_personal` for a trimmed schedule, with shuffled displacements."""
    op, P, root = schedule.op, schedule.nranks, schedule.root
    if op == "alltoall":
        rows = [[counts[s * P + d] for d in range(P)] for s in range(P)]
        cols = [[counts[s * P + d] for s in range(P)] for d in range(P)]
    else:
        rows = cols = [list(counts)] * P
    sd, rd, sends, recvs, layouts, locals_ = [], [], [], [], [], []
    for r in range(P):
        if op == "scatter":
            s_off, s_end = _displs(rows[r], rng) if r == root else ([], 0)
            r_off, r_end = [0] * P, counts[r]
        elif op == "gather":
            s_off, s_end = [0] * P, counts[r]
            r_off, r_end = _displs(cols[r], rng) if r == root else ([], 0)
        elif op == "allgather":
            s_off, s_end = [0] * P, counts[r]
            r_off, r_end = _displs(cols[r], rng)
        else:
            (s_off, s_end), (r_off, r_end) = _displs(rows[r], rng), _displs(cols[r], rng)
        sd.append(s_off)
        rd.append(r_off)
        sends.append(rng.integers(0, 256, s_end, dtype=np.uint8))
        recvs.append(np.zeros(r_end, np.uint8))
        layout = layout_for(schedule, r, sdispls=s_off or None, rdispls=r_off or None)
        local = {"recv": recvs[r], "send": sends[r]}.get(layout.run_on)
        if local is None:
            local = np.zeros(layout.size, np.uint8)
        for a, d, n in layout.copy_in:
            local[d : d + n] = sends[r][a : a + n]
        layouts.append(layout)
        locals_.append(local)
    replay(schedule, locals_, layouts)
    for r, layout in enumerate(layouts):
        for a, d, n in layout.copy_out:
            recvs[r][d : d + n] = locals_[r][a : a + n]
    return sends, recvs, sd, rd


@settings(max_examples=40, deadline=None)
@given(
    op=st.sampled_from(PERSONAL),
    spec=st.sampled_from(GRIDS),
    seed=st.integers(0, 2**16),
    data=st.data(),
)
def test_every_builder_moves_uneven_blocks_to_their_displacements(op, spec, seed, data):
    """Every personalised builder, trimmed to random counts (zeros included), through
    each rank's layout with shuffled, gapped displacements: every rank ends with
    exactly MPI's result, bytes outside its blocks untouched (zero)."""
    from gridcoll.schedule.transform import trimmed

    grid = get_grid(spec)
    P = grid.nranks
    rng = np.random.default_rng(seed)
    builder = data.draw(st.sampled_from(list_builders(op)), label="builder")
    root = data.draw(st.integers(0, P - 1), label="root")
    n = P * P if op == "alltoall" else P
    counts = [int(c) for c in rng.integers(0, 5, n) * rng.integers(0, 2, n) * 8]
    counts[int(rng.integers(0, n))] = 40
    schedule = trimmed(builder.build(grid, 40, root, **_params(builder)), counts)
    sends, recvs, sd, rd = run_uneven(schedule, counts, rng)
    for r in range(P):
        want = np.zeros_like(recvs[r])
        if op == "scatter":
            want[: counts[r]] = sends[root][sd[root][r] : sd[root][r] + counts[r]]
        elif op == "alltoall":
            for s in range(P):
                c = counts[s * P + r]
                want[rd[r][s] : rd[r][s] + c] = sends[s][sd[s][r] : sd[s][r] + c]
        elif op == "allgather" or r == root:
            for s in range(P):
                want[rd[r][s] : rd[r][s] + counts[s]] = sends[s][: counts[s]]
        assert np.array_equal(recvs[r], want), (builder.name, root, r)
