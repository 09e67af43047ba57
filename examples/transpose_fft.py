"""A distributed 2-D FFT across sites: FFT the rows, transpose by all-to-all, FFT the rows.

Each of the ``P`` ranks holds ``N / P`` rows of an ``N x N`` complex matrix. After the
FFT of its rows, rank ``p`` sends rank ``q`` the ``N/P x N/P`` block of its rows in
``q``'s columns (``MPI_Alltoall``, ``(N/P)^2 * 16`` bytes per pair); transposing the
blocks it gets gives it ``N / P`` rows of the transposed matrix, whose row FFTs are the
columns' FFTs: rank ``p`` ends with columns ``p N/P ... (p+1) N/P - 1`` of
``numpy.fft.fft2``, which rank 0 checks. The transpose is timed with gridcoll's
``Alltoall`` (``auto``) and with MPICH's algorithm for large all-to-alls, the rotated
Direct Exchange that mpi4py's ``MPI_Alltoall`` runs (seed 002, sec. 5), through the same
emulated WAN (``gridcoll.Comm(..., algo="direct-rotated")``), alternately, median of
``--repeat`` runs each::

    gridcoll mpirun --grid magpie:4,2 -- python examples/transpose_fft.py --n 1024

Rank 0 prints one JSON line: both medians, the speed-up, the plan ``auto`` chose and
the physical bound of the all-to-all.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import numpy as np
from mpi4py import MPI

import gridcoll


def transpose(comm: MPI.Intracomm, rows: np.ndarray) -> np.ndarray:
    """``rows`` (``N/P x N``, this rank's rows) -> this rank's rows of the transpose."""
    P = comm.Get_size()
    n = rows.shape[0]
    send = np.ascontiguousarray(rows.reshape(n, P, n).transpose(1, 0, 2))  # block q: q's columns
    recv = np.empty_like(send)
    comm.Alltoall(send, recv)
    return np.ascontiguousarray(recv.transpose(2, 0, 1).reshape(n, P * n))  # block q, transposed


def fft2_rows(comm: MPI.Intracomm, rows: np.ndarray) -> np.ndarray:
    """This rank's columns of the 2-D FFT, as rows of its transpose."""
    return np.fft.fft(transpose(comm, np.fft.fft(rows, axis=1)), axis=1)


def timed(comm: MPI.Intracomm, rows: np.ndarray) -> float:
    """Seconds of one transpose, from a barrier to the last rank's end."""
    comm.Barrier()
    start = time.perf_counter()
    transpose(comm, rows)
    elapsed = time.perf_counter() - start
    return comm.allreduce(elapsed, op=MPI.MAX)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=1024, help="matrix side N (a multiple of P)")
    parser.add_argument("--repeat", type=int, default=3, help="timed transposes per algorithm")
    args = parser.parse_args()
    world = MPI.COMM_WORLD
    P, rank = world.Get_size(), world.Get_rank()
    if args.n % P:
        raise SystemExit(f"--n must be a multiple of the {P} ranks, got {args.n}")
    n = args.n // P
    rng = np.random.default_rng(0)
    matrix = rng.standard_normal((args.n, args.n)) + 1j * rng.standard_normal((args.n, args.n))
    rows = matrix[rank * n : (rank + 1) * n]

    auto = gridcoll.Comm(world)
    mpich = gridcoll.Comm(world, algo="direct-rotated")
    mine = fft2_rows(auto, rows)  # the check: every column of fft2 where it belongs
    plan = auto.last_plan  # the all-to-all's
    columns = world.gather(mine, root=0)
    times: dict[str, list[float]] = {"auto": [], "mpich": []}
    for _ in range(args.repeat):
        times["auto"].append(timed(auto, rows))
        times["mpich"].append(timed(mpich, rows))
    if rank == 0:
        assert np.allclose(np.concatenate(columns).T, np.fft.fft2(matrix)), "wrong FFT"
        result = {
            "ranks": P,
            "n": args.n,
            "bytes_per_pair": n * n * 16,
            "checked": "numpy.fft.fft2",
            "auto_s": statistics.median(times["auto"]),
            "auto_algorithm": plan.algorithm,
            "mpich_s": statistics.median(times["mpich"]),
            "speedup": statistics.median(times["mpich"]) / statistics.median(times["auto"]),
            "bound_s": plan.bound_s,
            "times": times,
        }
        print(json.dumps(result))


if __name__ == "__main__":
    main()
