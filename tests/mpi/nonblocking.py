"""Non-blocking collectives of gridcoll.Comm against mpi4py's own, byte for byte.

Run under ``mpiexec -n N`` (N >= 2), with or without ``GRIDCOLL_GRID`` and the
emulation. For every collective (``Ibcast``, ``Iscatter``, ``Igather``, ``Iallgather``,
``Ialltoall``, ``Ireduce``, ``Iallreduce``, ``Ibarrier``), several datatypes, roots
and sizes (zero included), the request is completed four ways: ``Wait``, a ``Test``
loop with computation between tests, ``MPI.Request.Waitall`` over several outstanding
calls of different collectives on one communicator (MPI's order rules), and
``MPI.Request.Waitany``; then a blocking call after outstanding ones, and a bad
argument (raised in the call, as mpi4py raises it). Each result is compared with the
same call on ``MPI.COMM_WORLD`` through mpi4py. Rank 0 prints one JSON line
``{"cases": n, "differences": [...]}``.
"""

import json
import sys

import numpy as np
from mpi4py import MPI

import gridcoll

world = MPI.COMM_WORLD
rank, size = world.Get_rank(), world.Get_size()
comm = gridcoll.Comm(world)
rng = np.random.default_rng(1234)  # the same draws on every rank
DTYPES = [np.uint8, np.int32, np.float64]
differences: list = []
cases = 0


def data(dtype, n, salt):
    """Rank-dependent integer-valued data (sums are exact in every order)."""
    return ((np.arange(n) * 7 + 13 * rank + salt) % 50).astype(dtype)


def calls(dtype, n, root, salt):
    """name -> (start on gridcoll.Comm returning (request, result), reference)."""
    mpi_t = MPI._typedict[np.dtype(dtype).char]

    def ibcast():
        buf = data(dtype, n, salt) if rank == root else np.zeros(n, dtype)
        return comm.Ibcast(buf, root), buf

    def rbcast():
        buf = data(dtype, n, salt) if rank == root else np.zeros(n, dtype)
        world.Bcast(buf, root)
        return buf

    def iscatter():
        send = data(dtype, n * size, salt) if rank == root else None
        recv = np.zeros(n, dtype)
        return comm.Iscatter(send, recv, root), recv

    def rscatter():
        send = data(dtype, n * size, salt) if rank == root else None
        recv = np.zeros(n, dtype)
        world.Scatter(send, recv, root)
        return recv

    def igather():
        recv = np.zeros(n * size, dtype) if rank == root else None
        return comm.Igather(data(dtype, n, salt), recv, root), recv

    def rgather():
        recv = np.zeros(n * size, dtype) if rank == root else None
        world.Gather(data(dtype, n, salt), recv, root)
        return recv

    def iallgather():
        recv = np.zeros(n * size, dtype)
        return comm.Iallgather(data(dtype, n, salt), recv), recv

    def rallgather():
        recv = np.zeros(n * size, dtype)
        world.Allgather(data(dtype, n, salt), recv)
        return recv

    def ialltoall():
        recv = np.zeros(n * size, dtype)
        return comm.Ialltoall(data(dtype, n * size, salt), recv), recv

    def ralltoall():
        recv = np.zeros(n * size, dtype)
        world.Alltoall(data(dtype, n * size, salt), recv)
        return recv

    def ireduce():
        recv = np.zeros(n, dtype) if rank == root else None
        return comm.Ireduce([data(dtype, n, salt), mpi_t], recv, MPI.MAX, root), recv

    def rreduce():
        recv = np.zeros(n, dtype) if rank == root else None
        world.Reduce([data(dtype, n, salt), mpi_t], recv, MPI.MAX, root)
        return recv

    def iallreduce():
        recv = np.zeros(n, dtype)
        return comm.Iallreduce(data(dtype, n, salt), recv, MPI.SUM), recv

    def rallreduce():
        recv = np.zeros(n, dtype)
        world.Allreduce(data(dtype, n, salt), recv, MPI.SUM)
        return recv

    def ibarrier():
        return comm.Ibarrier(), None

    def rbarrier():
        world.Barrier()

    return {
        "Ibcast": (ibcast, rbcast),
        "Iscatter": (iscatter, rscatter),
        "Igather": (igather, rgather),
        "Iallgather": (iallgather, rallgather),
        "Ialltoall": (ialltoall, ralltoall),
        "Ireduce": (ireduce, rreduce),
        "Iallreduce": (iallreduce, rallreduce),
        "Ibarrier": (ibarrier, rbarrier),
    }


def same(a, b):
    if a is None or b is None:
        return a is None and b is None
    return a.dtype == b.dtype and a.tobytes() == b.tobytes()


def record(name, how, got, want):
    global cases
    cases += 1
    if not same(got, want):
        differences.append({"rank": rank, "call": name, "completed by": how})


def compute(seconds=0.002):
    """A little work between tests (numpy, like an application's)."""
    x = np.ones(20000)
    for _ in range(int(seconds * 500) + 1):
        x = np.sqrt(x + 1.0)
    return x


for round_ in range(3):
    for dtype in DTYPES:
        n = int(rng.choice([0, 1, 5, 1000, 40000]))
        root = int(rng.integers(size))
        table = calls(dtype, n, root, salt=round_)
        # one at a time: Wait, then a Test loop
        for name, (start, reference) in table.items():
            for how in ("Wait", "Test"):
                req, got = start()
                if how == "Wait":
                    req.Wait()
                else:
                    while not req.Test():
                        compute()
                record(name, how, got, reference())
        # all outstanding together on one communicator, then Waitall (MPI's order)
        started = [(name, start()) for name, (start, _ref) in table.items()]
        MPI.Request.Waitall([req for _name, (req, _got) in started])
        for name, (_req, got) in started:
            record(name, "Waitall", got, table[name][1]())
        # Waitany until all are done, with a blocking call after outstanding ones
        started = [(name, start()) for name, (start, _ref) in list(table.items())[:4]]
        blocking = data(dtype, n, 99) if rank == root else np.zeros(n, dtype)
        comm.Bcast(blocking, root)  # waits for the outstanding ones first
        pending = [req for _name, (req, _got) in started]
        while any(r != MPI.REQUEST_NULL for r in pending):
            MPI.Request.Waitany(pending)
        for name, (_req, got) in started:
            record(name, "Waitany", got, table[name][1]())
        ref = data(dtype, n, 99) if rank == root else np.zeros(n, dtype)
        world.Bcast(ref, root)
        record("Bcast after outstanding", "blocking", blocking, ref)

# a bad argument raises in the call, the class mpi4py raises
errors = {}
BAD = [
    (
        "root out of range",
        lambda: comm.Ibcast(np.zeros(4), size),
        lambda: world.Ibcast(np.zeros(4), size),
    ),
]
for label, bad_gridcoll, bad_mpi in BAD:
    outcomes = []
    for fn in (bad_gridcoll, bad_mpi):
        try:
            fn()
            outcomes.append("no error")
        except MPI.Exception as err:
            outcomes.append(f"MPI.Exception {err.Get_error_class()}")
        except Exception as err:
            outcomes.append(type(err).__name__)
    errors[label] = outcomes
    if outcomes[0] != outcomes[1]:
        differences.append({"rank": rank, "call": label, "outcomes": outcomes})
comm.Barrier()

everything = world.gather(differences, root=0)
counts = world.gather(cases, root=0)
if rank == 0:
    flat = [d for part in everything for d in part]
    print(json.dumps({"cases": min(counts), "differences": flat[:20], "errors": errors}))
    sys.exit(1 if flat else 0)
