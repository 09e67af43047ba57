"""Bad arguments to the collectives raise clear errors before any message is sent.

Run under ``mpiexec -n N`` (N >= 3). Each check makes every rank call with the same bad
argument, expects the error, and then runs a correct collective on the same
communicator: had any message of the failed call been sent, that call would find it
(a header or stray check) and fail. The last check gives one rank another count: the
ranks must raise ``MismatchError`` (or time out with a collective error) within the
timeout, never hang. Rank 0 prints one JSON line: per check, the errors every rank saw.
"""

import json
import sys
import time

import numpy as np
from mpi4py import MPI

import gridcoll
from gridcoll.errors import ParameterError
from gridcoll.runtime import CollectiveError, MismatchError


def _matmul(inbuf, inoutbuf, datatype):
    x = np.frombuffer(inbuf, dtype=np.float64).reshape(-1, 2, 2)
    y = np.frombuffer(inoutbuf, dtype=np.float64).reshape(-1, 2, 2)
    y[...] = x @ y


MATMUL = MPI.Op.Create(_matmul, commute=False)
QUAD = MPI.DOUBLE.Create_contiguous(4).Commit()


def expect(kind, action):
    """Run ``action``; return the name of what it raised (must be ``kind``)."""
    try:
        action()
    except kind as err:
        return f"{type(err).__name__}: {err}"
    except Exception as err:  # the wrong error: report it
        return f"WRONG {type(err).__name__}: {err}"
    return "WRONG: nothing raised"


def still_works(comm):
    """A correct allreduce right after: proves the failed call left no message behind."""
    x = np.arange(5, dtype=np.int64) + comm.Get_rank()
    out = np.empty_like(x)
    comm.Allreduce(x, out, MPI.SUM)
    size = comm.Get_size()
    return bool(np.array_equal(out, np.arange(5) * size + size * (size - 1) // 2))


def main():
    world = MPI.COMM_WORLD
    rank, size = world.Get_rank(), world.Get_size()
    report = {}
    comm = gridcoll.Comm(world, algo="binomial", timeout=10)
    quads = np.ones((3, 4))

    x5, x4 = np.zeros(5, np.int32), np.zeros(4, np.int32)
    report["count mismatch (send vs recv)"] = expect(
        ValueError, lambda: comm.Allreduce(x5, x4, MPI.SUM)
    )
    report["alltoall count not divisible"] = expect(
        ValueError, lambda: comm.Alltoall(np.zeros(size * 2 + 1), np.zeros(size * 2 + 1))
    )
    report["unknown op"] = expect(TypeError, lambda: comm.Allreduce(x5, x5.copy(), "sum"))
    report["OP_NULL"] = expect(ParameterError, lambda: comm.Allreduce(x5, x5.copy(), MPI.OP_NULL))
    z = np.zeros(3, np.complex128)
    report["MAX on complex"] = expect(ParameterError, lambda: comm.Allreduce(z, z.copy(), MPI.MAX))
    report["object op not callable"] = expect(TypeError, lambda: comm.allreduce(1, op=3))
    if rank == 0:  # only the root takes part: it must fail before sending anything
        report["scatter root buffer not P blocks"] = expect(
            ValueError, lambda: comm.Scatter(np.zeros(size + 1), np.zeros(1), 0)
        )
    report["after local errors, a correct call works"] = still_works(comm)

    fixed = gridcoll.Comm(
        world,
        algo={"reduce": "dary-segmented"},
        params={"reduce": {"segment_size": 64, "degree": 2}},
        timeout=10,
    )
    report["non-commutative op, commutative-only algorithm fixed"] = expect(
        ParameterError, lambda: fixed.Reduce([quads, 3, QUAD], [quads.copy(), 3, QUAD], MATMUL, 0)
    )
    named = gridcoll.Comm(world, algo={"allreduce": "two-level"}, timeout=10)
    named_reduce = gridcoll.Comm(world, algo={"reduce": "dary-segmented"}, timeout=10)
    report["non-commutative op, commutative-only algorithm named"] = expect(
        ParameterError,
        lambda: named_reduce.Reduce([quads, 3, QUAD], [quads.copy(), 3, QUAD], MATMUL, 0),
    )
    report["unknown algorithm"] = expect(
        gridcoll.errors.UnknownAlgorithm, lambda: gridcoll.Comm(world, algo={"reduce": "ring"})
    )
    report["after algorithm errors, a correct call works"] = still_works(fixed) and still_works(
        named
    )

    mism = gridcoll.Comm(world, algo="ring", timeout=3)
    count = 4 if rank == 1 else 5
    start = time.monotonic()
    report["count mismatch across ranks"] = expect(
        CollectiveError,
        lambda: mism.Allgather(np.zeros(count, np.int32), np.zeros(size * count, np.int32)),
    )
    report["mismatch seconds"] = round(time.monotonic() - start, 2)
    report["mismatch is MismatchError"] = "MismatchError" in report["count mismatch across ranks"]
    assert issubclass(MismatchError, CollectiveError)
    everyone = world.gather(report, root=0)
    if rank == 0:
        print(json.dumps(everyone), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
