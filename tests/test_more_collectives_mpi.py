"""The rest of MPI's collectives under mpiexec, blocking and non-blocking, every builder
against mpi4py's own collective on the same inputs, with and without the emulated WAN,
2 to 16 ranks:

* Scatterv, Gatherv, Allgatherv, Alltoallv (``tests/mpi/vcollectives.py``; each
  builder's schedule trimmed to the counts): uneven and zero counts, shuffled and
  gapped displacements, three buffer forms, ``MPI.IN_PLACE``, several dtypes and roots;
* Reduce_scatter_block, Reduce_scatter, Scan, Exscan and the object forms ``scan`` and
  ``exscan`` (``tests/mpi/scans.py``): predefined, user and non-commutative operations
  (rank order), uneven and zero counts, given or gathered, ``MPI.IN_PLACE``.
"""

import pytest

pytest.importorskip("mpi4py")

from gridcoll.algorithms import list_builders
from test_runtime_mpi import clean_env, fast_grid, last_json, mpirun, write_grid

pytestmark = [pytest.mark.slow, pytest.mark.mpi]

V_OPS = {"scatterv": "scatter", "gatherv": "gather", "allgatherv": "allgather",
         "alltoallv": "alltoall"}  # fmt: skip
SCAN_OPS = {"reduce_scatter_block": "reduce_scatter", "reduce_scatter": "reduce_scatter",
            "scan": "scan", "exscan": "exscan"}  # fmt: skip


def check(proc, nranks: int, emulated: bool, ops: dict = V_OPS) -> dict:
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = last_json(proc)
    assert out["failures"] == []
    assert out["nranks"] == nranks and out["emulated"] is emulated
    expected = {f"{op}:{b.name}" for op, base in ops.items() for b in list_builders(base)}
    expected |= {f"{op}:{name}" for op in ops for name in ("auto", "native")}
    assert set(out["builders"]) == expected
    return out


@pytest.mark.parametrize("nonblocking", [False, True])
def test_every_builder_without_emulation(nonblocking):
    args = ["--seed", "2", "--max-count", "300"] + (["--nonblocking"] if nonblocking else [])
    out = check(mpirun(2, "vcollectives.py", *args, timeout=300), 2, emulated=False)
    assert out["cases"] >= 3 * 25


@pytest.mark.parametrize("nonblocking", [False, True])
def test_every_builder_with_emulation(tmp_path, nonblocking):
    grid = write_grid(tmp_path, fast_grid({"A": 2, "B": 2, "C": 1}, ["A", "B", "A", "C", "B"]))
    env = clean_env(GRIDCOLL_GRID=str(grid), GRIDCOLL_EMULATE="1")
    args = ["--seed", "5"] + (["--nonblocking"] if nonblocking else [])
    out = check(mpirun(5, "vcollectives.py", *args, env=env, timeout=300), 5, emulated=True)
    assert out["cases"] >= 3 * 25


def test_every_builder_on_16_emulated_ranks(tmp_path):
    grid = write_grid(tmp_path, fast_grid({f"c{i}": 4 for i in range(4)}))
    env = clean_env(GRIDCOLL_GRID=str(grid), GRIDCOLL_EMULATE="1")
    args = ["--seed", "16", "--cases-per-builder", "1"]
    out = check(mpirun(16, "vcollectives.py", *args, env=env, timeout=600), 16, emulated=True)
    assert out["cases"] >= 25


@pytest.mark.parametrize(("n", "nonblocking"), [(2, False), (4, True)])
def test_reduce_scatter_and_scans_without_emulation(n, nonblocking):
    args = ["--seed", str(n), "--objects"] + (["--nonblocking"] if nonblocking else [])
    out = check(mpirun(n, "scans.py", *args, timeout=300), n, False, SCAN_OPS)
    assert out["cases"] >= 3 * 9


@pytest.mark.parametrize("nonblocking", [False, True])
def test_reduce_scatter_and_scans_with_emulation(tmp_path, nonblocking):
    grid = write_grid(tmp_path, fast_grid({"A": 2, "B": 2, "C": 1}, ["A", "B", "A", "C", "B"]))
    env = clean_env(GRIDCOLL_GRID=str(grid), GRIDCOLL_EMULATE="1")
    args = ["--seed", "7", "--objects"] + (["--nonblocking"] if nonblocking else [])
    out = check(mpirun(5, "scans.py", *args, env=env, timeout=300), 5, True, SCAN_OPS)
    assert out["cases"] >= 3 * 9


def test_reduce_scatter_and_scans_on_16_emulated_ranks(tmp_path):
    grid = write_grid(tmp_path, fast_grid({f"c{i}": 4 for i in range(4)}))
    env = clean_env(GRIDCOLL_GRID=str(grid), GRIDCOLL_EMULATE="1")
    args = ["--seed", "16", "--cases-per-builder", "2"]
    out = check(mpirun(16, "scans.py", *args, env=env, timeout=600), 16, True, SCAN_OPS)
    assert out["cases"] >= 2 * 9
