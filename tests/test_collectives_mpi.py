"""scatter, gather, allgather, alltoall, reduce, allreduce and barrier under mpiexec:
every builder's result against mpi4py's own collective, and the bad-input errors.

Each test starts ``mpiexec -n N`` on a script of ``tests/mpi/`` that loops over many
cases in one launch (start-up costs seconds on two cores); the scripts compare every
rank's result with ``MPI.COMM_WORLD``'s collective on the same inputs. Correctness runs
with emulation use the fast grids of ``test_runtime_mpi.py`` (1-2 ms, 50-100 MB/s).
"""

import json

import pytest

pytest.importorskip("mpi4py")

from gridcoll.algorithms import list_builders
from test_runtime_mpi import clean_env, fast_grid, gridcoll_cli, last_json, mpirun, write_grid

pytestmark = [pytest.mark.slow, pytest.mark.mpi]

OPS = ("scatter", "gather", "allgather", "alltoall", "reduce", "allreduce")


def check(proc, nranks: int, emulated: bool) -> dict:
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = last_json(proc)
    assert out["failures"] == []
    assert out["nranks"] == nranks and out["emulated"] is emulated
    expected = {f"{op}:{b.name}" for op in OPS for b in list_builders(op)}
    expected |= {f"{op}:{name}" for op in OPS for name in ("auto", "native")}
    assert set(out["builders"]) == expected
    return out


@pytest.mark.parametrize(("n", "counts"), [(2, "1,37,5,1000"), (7, "1,37,5")])
def test_every_builder_without_emulation(n, counts):
    args = ["--seed", str(n), "--counts", counts, "--objects"]
    out = check(mpirun(n, "collectives_matrix.py", *args, timeout=300), n, emulated=False)
    assert out["cases"] >= 33 * max(2, n)  # every builder from every root


def test_every_builder_with_emulation(tmp_path):
    grid = write_grid(tmp_path, fast_grid({"A": 2, "B": 2, "C": 1}, ["A", "B", "A", "C", "B"]))
    env = clean_env(GRIDCOLL_GRID=str(grid), GRIDCOLL_EMULATE="1")
    args = ["--seed", "11", "--counts", "1,37,5,300", "--objects"]
    out = check(mpirun(5, "collectives_matrix.py", *args, env=env, timeout=300), 5, emulated=True)
    assert out["cases"] >= 5 * 33


def test_every_builder_on_16_emulated_ranks(tmp_path):
    clusters = {f"c{i}": 4 for i in range(4)}
    grid = write_grid(tmp_path, fast_grid(clusters))
    env = clean_env(GRIDCOLL_GRID=str(grid), GRIDCOLL_EMULATE="1")
    args = ["--seed", "16", "--max-roots", "3", "--counts", "1,37,5", "--objects"]
    proc = mpirun(16, "collectives_matrix.py", *args, env=env, timeout=600)
    assert check(proc, 16, emulated=True)["cases"] >= 3 * 33


def test_bad_input_raises_before_any_message(tmp_path):
    grid = write_grid(tmp_path, fast_grid({"A": 2, "B": 2, "C": 1}, ["A", "B", "A", "C", "B"]))
    env = clean_env(GRIDCOLL_GRID=str(grid), GRIDCOLL_EMULATE="1")
    proc = mpirun(5, "collectives_errors.py", env=env, timeout=180)
    assert proc.returncode == 0, proc.stderr[-3000:]
    reports = json.loads(proc.stdout.strip().splitlines()[-1])
    assert len(reports) == 5
    for rank, report in enumerate(reports):
        for check_name, outcome in report.items():
            assert "WRONG" not in str(outcome), (rank, check_name, outcome)
        assert report["after local errors, a correct call works"] is True
        assert report["after algorithm errors, a correct call works"] is True
        assert report["mismatch seconds"] < 3 + 2.5  # the 3 s timeout at most: never a hang
        assert "mismatch in send count 5" in report["count mismatch (send vs recv)"]
        assert "unknown reduce algorithm 'ring'" in report["unknown algorithm"]
        assert "reorders operands" in report["non-commutative op, commutative-only algorithm fixed"]
    assert "not a multiple" in reports[0]["scatter root buffer not P blocks"]
    assert any(r["mismatch is MismatchError"] for r in reports)


@pytest.mark.parametrize(
    ("op", "extra"),
    [  # the bytes and the bound of each collective: tests/test_executors.py
        ("reduce", ["--non-commutative", "--itemsize", "32", "--root", "3"]),
    ],
)
def test_run_op_json(tmp_path, op, extra):
    grid = write_grid(tmp_path, fast_grid({"A": 2, "B": 2}))
    args = ["run", "--grid", str(grid), "--op", op, "--size", "8KB", "--repeat", "2", "--json"]
    proc = gridcoll_cli(*args, *extra)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    for key in ("op", "algorithm", "predicted_s", "bound_s", "simulated_s", "measured_s"):
        assert key in out, key
    assert out["op"] == op and out["verified"] is True and len(out["measured_all_s"]) == 2
    assert out["emulated"] is True and out["measured_s"] >= out["bound_s"] * 0.9
    if op == "reduce":
        assert out["params"]["commutative"] is False


def test_run_refuses_what_it_cannot_verify():
    proc = gridcoll_cli(
        "run", "--grid", "magpie:2,2", "--op", "allreduce", "--size", "96", "--itemsize", "3"
    )
    assert proc.returncode == 2 and "--itemsize must be" in proc.stderr
    proc = gridcoll_cli(
        "run", "--grid", "magpie:2,2", "--op", "reduce", "--size", "96", "--non-commutative"
    )
    assert proc.returncode == 2 and "--itemsize 32" in proc.stderr


# -- every buffer kind mpi4py accepts ----------------------------------------------------


def check_kinds(proc, nranks: int, emulated: bool) -> dict:
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = last_json(proc)
    assert out["failures"] == []
    assert out["nranks"] == nranks and out["emulated"] is emulated
    assert out["cases"] >= 300
    return out


@pytest.mark.parametrize("n", [2, 3])
def test_every_buffer_kind_without_emulation(n):
    check_kinds(mpirun(n, "buffer_kinds.py", timeout=300), n, emulated=False)


@pytest.mark.parametrize(
    ("clusters", "placement"),
    [({"A": 2, "B": 2}, ["A", "B", "B", "A"]), ({"A": 2, "B": 2, "C": 1}, None)],
)
def test_every_buffer_kind_with_emulation(tmp_path, clusters, placement):
    grid = write_grid(tmp_path, fast_grid(clusters, placement))
    env = clean_env(GRIDCOLL_GRID=str(grid), GRIDCOLL_EMULATE="1")
    n = sum(clusters.values())
    check_kinds(mpirun(n, "buffer_kinds.py", env=env, timeout=600), n, emulated=True)
