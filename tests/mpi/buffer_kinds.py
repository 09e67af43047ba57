"""Every buffer kind mpi4py accepts, on every gridcoll collective, against mpi4py.

Run under ``mpiexec -n N`` (N >= 2); the grid and the WAN emulation come from the
environment. For each collective (Bcast, Scatter, Gather, Allgather, Alltoall, Reduce,
Allreduce, Reduce_scatter_block, Scan, Exscan, and Scatterv, Allgatherv, Alltoallv with
the bare buffer as their vector spec: equal blocks), each root, each buffer kind (numpy,
``array.array``, ``bytearray``, ``memoryview``, an object exposing only
``__dlpack__``/``__dlpack_device__``, the same in a ``[buf, count, type]`` spec) and
several element types, the call runs on ``gridcoll.Comm`` (``auto``, and fixed schedules
so that gridcoll's executor runs even on one cluster) and on a duplicate of
``MPI.COMM_WORLD`` on copies of the same inputs; the receive buffers must be byte for
byte the same. Then the objects mpi4py refuses or gridcoll cannot move: only
``__array_interface__`` (mpi4py's ``TypeError``, the same text), non-contiguous and
read-only DLPack tensors (mpi4py's ``BufferError``), and a ``__cuda_array_interface__``
object (its "device" pointer is host memory here: gridcoll hands the call to the MPI
library's own collective, as mpi4py does, with the same results; then a correct call
still works).

Rank 0 prints one JSON line: cases, failures, nranks, emulated.
"""

import array
import json
import sys

import numpy as np
from mpi4py import MPI

import gridcoll

FIXED = {
    "bcast": "binomial-segmented",
    "scatter": "binomial",
    "gather": "chain-pipelined",
    "allgather": "ring",
    "alltoall": "direct",
    "reduce": "binomial",
    "allreduce": "recursive-doubling",
    "reduce_scatter": "pairwise",
    "scan": "chain-segmented",
    "exscan": "chain",
}
OPS = (*FIXED, "scatterv", "allgatherv", "alltoallv")
"""The calls; a v-variant runs its equal collective's fixed schedule, trimmed."""
TYPES = {"float64": MPI.DOUBLE, "int32": MPI.INT32_T, "uint8": MPI.UNSIGNED_CHAR}
KINDS = ("numpy", "array", "bytearray", "memoryview", "dlpack", "dlpack-spec")


class DLPackOnly:
    """Exposes a numpy array through DLPack only (no buffer protocol)."""

    def __init__(self, arr):
        self.arr = arr

    def __dlpack__(self, **kwargs):
        return self.arr.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self.arr.__dlpack_device__()


class ArrayInterfaceOnly:
    """Exposes a numpy array through ``__array_interface__`` only."""

    def __init__(self, arr):
        self.arr = arr

    @property
    def __array_interface__(self):
        return self.arr.__array_interface__


class FakeCuda:
    """Claims to be device memory (``__cuda_array_interface__``), over host memory."""

    def __init__(self, arr):
        self.arr = arr

    @property
    def __cuda_array_interface__(self):
        face = dict(self.arr.__array_interface__)
        face.update(version=3, stream=None, strides=None)
        return face


def wrap(arr, kind, blocks=1):
    """(the buffer argument, a function returning its bytes after the call); a spec's
    count is per block of a per-rank row (``blocks``), as mpi4py reads it."""
    if kind == "numpy":
        return arr, arr.tobytes
    if kind == "array":
        code = {"float64": "d", "int32": "i", "uint8": "B"}[arr.dtype.name]
        a = array.array(code, arr.tobytes())
        return a, a.tobytes
    if kind == "bytearray":
        b = bytearray(arr.tobytes())
        return b, lambda: bytes(b)
    if kind == "memoryview":
        return memoryview(arr), arr.tobytes
    if kind == "dlpack":
        return DLPackOnly(arr), arr.tobytes
    if kind == "dlpack-spec":
        mpi_type = TYPES[arr.dtype.name]
        return [DLPackOnly(arr), arr.size // blocks, mpi_type], arr.tobytes
    raise AssertionError(kind)


def inputs(op, rank, size, root, dtype, n, rng_seed):
    """(send array or None, receive array or None) of this rank, the same on both runs."""
    rng = np.random.default_rng(rng_seed * 1000 + rank)
    if dtype == "float64":
        send = rng.integers(0, 50, 4 * size * n).astype(np.float64)  # exact sums
    else:
        send = rng.integers(0, 9, 4 * size * n).astype(dtype)
    blocks = {
        "bcast": (n, n),
        "scatter": (size * n, n),
        "gather": (n, size * n),
        "allgather": (n, size * n),
        "alltoall": (size * n, size * n),
        "reduce": (n, n),
        "allreduce": (n, n),
        "reduce_scatter": (size * n, n),
        "scan": (n, n),
        "exscan": (n, n),
        "scatterv": (size * n, n),
        "allgatherv": (n, size * n),
        "alltoallv": (size * n, size * n),
    }[op]
    s = send[: blocks[0]].copy()
    r = np.zeros(blocks[1], dtype)
    if op == "bcast":
        return (s if rank == root else np.zeros(n, dtype)), None
    return s, r


def call(comm, op, send, recv, root):
    if op == "bcast":
        comm.Bcast(send, root)
    elif op == "scatter":
        comm.Scatter(send, recv, root)
    elif op == "gather":
        comm.Gather(send, recv, root)
    elif op == "allgather":
        comm.Allgather(send, recv)
    elif op == "alltoall":
        comm.Alltoall(send, recv)
    elif op == "reduce":
        comm.Reduce(send, recv, MPI.SUM, root)
    elif op == "allreduce":
        comm.Allreduce(send, recv, MPI.SUM)
    elif op == "reduce_scatter":
        comm.Reduce_scatter_block(send, recv, MPI.SUM)
    elif op == "scan":
        comm.Scan(send, recv, MPI.SUM)
    elif op == "exscan":
        comm.Exscan(send, recv, MPI.SUM)
    elif op == "scatterv":
        comm.Scatterv(send, recv, root)
    elif op == "allgatherv":
        comm.Allgatherv(send, recv)
    elif op == "alltoallv":
        comm.Alltoallv(send, recv)


def outcome(comm, op, kind, root, dtype, n, seed):
    """The bytes every buffer holds after the call (or the error), on ``comm``."""
    rank, size = comm.Get_rank(), comm.Get_size()
    send, recv = inputs(op, rank, size, root, dtype, n, seed)
    rows = {
        "scatter": (size, 1),
        "gather": (1, size),
        "allgather": (1, size),
        "reduce_scatter": (size, 1),
    }
    if op.endswith("v") and kind == "dlpack-spec":
        kind = "dlpack"  # a v-spec's count is a list: the bare buffer (equal blocks)
    sb, rb = rows.get(op, (size, size) if op == "alltoall" else (1, 1))
    s, s_bytes = wrap(send, kind, sb)
    if recv is None:
        r, r_bytes = None, lambda: b""
    else:
        r, r_bytes = wrap(recv, kind, rb)
    try:
        call(comm, op, s, r, root)
    except Exception as err:
        return ["raised", type(err).__name__, str(err)]
    return [s_bytes().hex(), r_bytes().hex()]


def error_cases(comm, rank):
    """(name, thunk) of the buffers refused by mpi4py or by gridcoll."""
    size = comm.Get_size()
    a = np.arange(4.0 * size)
    ro = a.copy()
    ro.flags.writeable = False
    strided = np.arange(8.0 * size)[::2]
    return [
        ("Bcast array-interface", lambda: comm.Bcast(ArrayInterfaceOnly(a), 0)),
        (
            "Allreduce array-interface spec",
            lambda: comm.Allreduce(a, [ArrayInterfaceOnly(a.copy()), MPI.DOUBLE]),
        ),
        ("Bcast dlpack non-contiguous", lambda: comm.Bcast(DLPackOnly(strided), 0)),
        ("Allreduce dlpack read-only recv", lambda: comm.Allreduce(a, DLPackOnly(ro))),
        (
            "Allgather dlpack wrong blocks",
            lambda: comm.Allgather(DLPackOnly(np.zeros(2)), DLPackOnly(np.zeros(2 * size + 1))),
        ),
        ("Bcast dlpack negative count", lambda: comm.Bcast([DLPackOnly(a), -1, MPI.DOUBLE])),
    ]


def run_errors(comm, ref, rank):
    failures = []
    for (name, mine), (_, theirs) in zip(
        error_cases(comm, rank), error_cases(ref, rank), strict=True
    ):
        got, want = _error(mine), _error(theirs)
        if got != want:
            failures.append(f"rank {rank}: {name}: gridcoll {got}, mpi4py {want}")
    # Device memory: gridcoll hands it to the MPI library's own collective, as mpi4py
    # does (FakeCuda's "device" pointer is host memory, so MPI can move it here).
    size = comm.Get_size()

    def device_calls(c):
        out = FakeCuda(np.zeros(3))
        c.Allreduce(np.full(3, rank + 1.0), out, MPI.SUM)
        root = FakeCuda(np.arange(3.0) if rank == 0 else np.zeros(3))
        c.Bcast(root, 0)
        gathered = np.zeros(size * 2)
        c.Gather([FakeCuda(np.full(2, float(rank))), MPI.DOUBLE], gathered, 0)
        return [out.arr.tolist(), root.arr.tolist(), gathered.tolist() if rank == 0 else []]

    try:
        got, want = device_calls(comm), device_calls(ref)
        if got != want:
            failures.append(f"rank {rank}: device memory: gridcoll {got}, mpi4py {want}")
    except Exception as err:
        failures.append(f"rank {rank}: device memory: {type(err).__name__}: {err}")
    x = np.full(5, rank + 1.0)
    out = np.empty(5)
    comm.Allreduce(x, out, MPI.SUM)
    if not np.array_equal(out, np.full(5, size * (size + 1) / 2)):
        failures.append(f"rank {rank}: a correct call after the refusals: {out}")
    return failures


def _error(thunk):
    try:
        thunk()
    except MPI.Exception as err:
        return ["MPI.Exception", err.Get_error_class()]
    except Exception as err:
        return [type(err).__name__, str(err)]
    return ["nothing raised"]


def main():
    world = MPI.COMM_WORLD
    rank, size = world.Get_rank(), world.Get_size()
    ref = world.Dup()
    comms = {
        "auto": gridcoll.Comm(world, timeout=30),
        "fixed": gridcoll.Comm(world, algo=FIXED, timeout=30),
    }
    failures, cases = [], 0
    roots = sorted({0, size - 1})
    for op in OPS:
        for kind in KINDS:
            for i, dtype in enumerate(TYPES):
                if kind == "bytearray" and dtype != "uint8":
                    continue
                rooted = op in ("bcast", "scatter", "gather", "reduce", "scatterv")
                for root in roots if rooted else [0]:
                    n = (3, 1, 37)[(i + root) % 3]
                    seed = cases
                    want = outcome(ref, op, kind, root, dtype, n, seed)
                    for label, comm in comms.items():
                        got = outcome(comm, op, kind, root, dtype, n, seed)
                        cases += 1
                        if got != want:
                            failures.append(
                                f"rank {rank}: {op} {kind} {dtype} root {root} n {n} "
                                f"({label}): gridcoll {got[:3]}, mpi4py {want[:3]}"
                            )
                            print(failures[-1][:300], file=sys.stderr, flush=True)
    failures += run_errors(comms["fixed"], ref, rank)
    emulated = all(c.gridcoll_state.emulator is not None for c in comms.values())
    ref.Free()
    everyone = world.gather(failures, root=0)
    if rank == 0:
        flat = [f for fs in everyone for f in fs]
        print(
            json.dumps({"cases": cases, "failures": flat, "nranks": size, "emulated": emulated}),
            flush=True,
        )
        return 1 if flat else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
