"""Drop-in check: one program, run on a duplicate of MPI.COMM_WORLD and on
gridcoll.Comm(MPI.COMM_WORLD); every result and every error class must be the same.

Run under ``mpiexec -n N`` (N >= 2). Rank 0 prints one JSON line
``{"steps": n, "differences": [...], "gridcoll": {...}}``; exit status 1 on a difference.
"""

import json
import sys

import numpy as np
from mpi4py import MPI

import gridcoll


class DLPackOnly:
    """A numpy array seen through DLPack only (``__dlpack__``, ``__dlpack_device__``)."""

    def __init__(self, arr):
        self.arr = arr

    def __dlpack__(self, **kwargs):
        return self.arr.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self.arr.__dlpack_device__()


class ArrayInterfaceOnly:
    """A numpy array seen through ``__array_interface__`` only (mpi4py refuses it)."""

    def __init__(self, arr):
        self.__array_interface__ = arr.__array_interface__


def outcome(fn):
    """The result of fn(), or the class (and MPI error class) of what it raised."""
    try:
        value = fn()
    except MPI.Exception as err:
        return ("MPI.Exception", err.Get_error_class())
    except Exception as err:
        return ("raised", type(err).__name__, str(err))
    if isinstance(value, np.ndarray):
        return ("array", value.dtype.str, value.tobytes().hex())
    return ("value", repr(value))


def steps(comm):
    """(name, thunk) pairs; each thunk runs one call on ``comm`` and returns something."""
    rank, size = comm.Get_rank(), comm.Get_size()
    last = size - 1

    def filled(dtype, n, root):
        base = np.arange(n, dtype=np.float64) * 1.5 + 3
        data = base.astype(dtype)
        return data if rank == root else np.zeros(n, dtype)

    def bcast_form(form, root):
        def run():
            a = filled(np.int32, 10, root)
            b = filled(np.float64, 7, root)
            c = filled(np.complex128, 5, root)
            if form == "buf":
                comm.Bcast(a, root)
                return a
            if form == "buf-dtype":
                comm.Bcast([b, MPI.DOUBLE], root=root)
                return b
            if form == "buf-count-dtype":
                comm.Bcast([a, 6, MPI.INT], root=root)
                return a
            if form == "buf-countdispl-dtype":
                comm.Bcast([b, (3, 2), MPI.DOUBLE], root=root)
                return b
            if form == "buf-count-displ-dtype":
                comm.Bcast([a, 4, 5, MPI.INT], root=root)
                return a
            if form == "buf-typechar":
                comm.Bcast([c, "D"], root=root)
                return c
            if form == "bytearray":
                ba = bytearray(b"gridcoll" if rank == root else b"........")
                comm.Bcast(ba, root=root)
                return bytes(ba)
            if form == "fortran":
                f = np.asfortranarray(np.arange(12.0).reshape(3, 4)) * (rank == root)
                comm.Bcast(f, root=root)
                return np.ascontiguousarray(f)
            if form == "vector-datatype":  # holes: native path
                v = MPI.DOUBLE.Create_vector(3, 1, 2).Commit()
                x = np.arange(6.0) if rank == root else np.full(6, -1.0)
                comm.Bcast([x, 1, v], root=root)
                v.Free()
                return x
            if form == "dlpack":
                comm.Bcast(DLPackOnly(b), root=root)
                return b
            if form == "dlpack-count-dtype":
                comm.Bcast([DLPackOnly(a), 6, MPI.INT], root=root)
                return a
            if form == "array-interface-only":
                comm.Bcast(ArrayInterfaceOnly(b), root=root)
                return b
            if form == "empty":
                e = np.empty(0)
                comm.Bcast(e, root=root)
                return e
            if form == "in-place":
                comm.Bcast(MPI.IN_PLACE, root=root)
                return None
            raise AssertionError(form)

        return run

    out = []
    for form in (
        "buf",
        "buf-dtype",
        "buf-count-dtype",
        "buf-countdispl-dtype",
        "buf-count-displ-dtype",
        "buf-typechar",
        "bytearray",
        "fortran",
        "vector-datatype",
        "dlpack",
        "dlpack-count-dtype",
        "array-interface-only",
        "empty",
        "in-place",
    ):
        for root in sorted({0, last}):
            out.append((f"Bcast {form} root {root}", bcast_form(form, root)))
    for root in range(size):
        out.append(
            (
                f"bcast dict root {root}",
                lambda r=root: comm.bcast({"rank": rank, "r": r} if rank == r else None, r),
            )
        )
    big = list(range(5000))
    out += [
        ("bcast big list", lambda: comm.bcast(big if rank == last else None, root=last)),
        ("bcast array", lambda: comm.bcast(np.arange(300.0) * (rank + 1), root=0)),
        ("bcast None", lambda: comm.bcast(None, root=0)),
        ("Bcast root=size", lambda: comm.Bcast(np.zeros(3), root=size)),
        ("Bcast root=-1", lambda: comm.Bcast(np.zeros(3), root=-1)),
        ("bcast root=size", lambda: comm.bcast(1, root=size)),
        ("Bcast negative count", lambda: comm.Bcast([np.zeros(3), -1, MPI.DOUBLE])),
        ("Bcast not multiple", lambda: comm.Bcast([np.zeros(3, np.uint8), MPI.DOUBLE])),
        ("Bcast readonly", lambda: comm.Bcast(b"abc", root=0) if rank != 0 else None),
        ("Bcast non-contiguous", lambda: comm.Bcast(np.zeros((3, 4))[:, 1])),
        ("Bcast None", lambda: comm.Bcast(None)),
        ("Get_rank", comm.Get_rank),
        ("Get_size", comm.Get_size),
        ("Barrier", comm.Barrier),
        ("barrier", comm.barrier),
        ("allreduce", lambda: comm.allreduce(rank + 1)),
        ("Allreduce in place", lambda: _allreduce_in_place(comm, rank)),
        ("sendrecv ring", lambda: comm.sendrecv(rank, (rank + 1) % size, source=(rank - 1) % size)),
        ("Dup bcast", lambda: _dup(comm, rank)),
        ("Clone bcast", lambda: _clone(comm, rank)),
        ("Split bcast", lambda: _split(comm, rank)),
        ("Free world", lambda: comm.Free() if comm.Get_size() < 0 else None),
    ]
    return out


def _allreduce_in_place(comm, rank):
    x = np.array([rank, 1.0])
    comm.Allreduce(MPI.IN_PLACE, x, op=MPI.SUM)
    return x


def _dup(comm, rank):
    d = comm.Dup()
    same = type(d) is type(comm)
    value = d.bcast(rank * 10 + 1, root=0)
    d.Free()
    return (same, value)


def _clone(comm, rank):
    d = comm.Clone()
    same = type(d) is type(comm)
    a = np.full(4, rank, dtype=np.int64)
    d.Bcast(a, root=d.Get_size() - 1)
    d.Free()
    return (same, a.tolist())


def _split(comm, rank):
    sub = comm.Split(rank % 2, key=-rank)
    same = isinstance(sub, gridcoll.Comm) == isinstance(comm, gridcoll.Comm)
    value = sub.bcast((rank, sub.Get_rank()), root=0)
    sub.Free()
    return (same, value)


def main():
    world = MPI.COMM_WORLD
    plain = world.Dup()
    wrapped = gridcoll.Comm(world, timeout=20)
    results = {}
    for label, comm in (("mpi4py", plain), ("gridcoll", wrapped)):
        results[label] = [(name, outcome(fn)) for name, fn in steps(comm)]
    differences = []
    for (name, a), (_, b) in zip(results["mpi4py"], results["gridcoll"], strict=True):
        if a != b:
            differences.append({"rank": world.Get_rank(), "step": name, "mpi4py": a, "gridcoll": b})
    info = {
        "results": {name: list(r) for name, r in results["gridcoll"]},
        "type": type(wrapped).__name__,
        "explain": wrapped.explain(),
        "dup_type": type(wrapped.Dup()).__name__,
    }
    plain.Free()
    everyone = world.gather(differences, root=0)
    if world.Get_rank() == 0:
        flat = [d for ds in everyone for d in ds]
        print(
            json.dumps({"steps": len(results["mpi4py"]), "differences": flat, "gridcoll": info}),
            flush=True,
        )
        return 1 if flat else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
