"""mpi4py's own test suite, unchanged, with ``MPI.COMM_WORLD`` a ``gridcoll.Comm``.

The test files come from mpi4py's source distribution of the installed version
(downloaded once with pip into ``~/.cache/gridcoll``, or ``GRIDCOLL_MPI4PY_TESTS``).
Every collective-related module runs on 4 ranks three times: with plain mpi4py; with
``gridcoll mpirun --world`` on an emulated two-cluster grid (gridcoll's schedules
cross the emulated WAN); and with ``python -m gridcoll`` on one cluster (the MPI
library's own collectives behind gridcoll's checks). Every test that passes with plain
mpi4py must pass with gridcoll, on every rank, but those in :data:`DIFFERENCES`, each
with its reason; and each of those must still differ, so the list stays true.
"""

import importlib.metadata
import json
import os
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

import pytest

pytest.importorskip("mpi4py")

from gridcoll.runtime.processes import mpiexec_command

pytestmark = [pytest.mark.slow, pytest.mark.mpi]

HERE = Path(__file__).parent / "mpi"
NRANKS = 4

MODULES = (
    "test_cco_buf",
    "test_cco_obj",
    "test_cco_vec",
    "test_cco_nb_buf",
    "test_cco_nb_vec",
    "test_msgzero",
    "test_comm",
    "test_op",
    "test_subclass",
    "test_pickle",
    "test_objmodel",
    "test_util_pkl5",
    "test_util_sync",
    "test_p2p_obj",
    "test_exceptions",
    "test_errhandler",
)
"""mpi4py's test modules that call collectives (or make communicators) on
``COMM_WORLD``; the rest (RMA, I/O, datatypes, spawning...) never reach gridcoll."""

DIFFERENCES: dict[str, str] = {}
"""mpi4py tests that pass with plain mpi4py and cannot with gridcoll, and why."""

GRID = {
    "format": "gridcoll-grid/1",
    "name": "suite-A2-B2",
    "clusters": [
        {
            "name": n,
            "ranks": 2,
            "lan": {"latency": "20us", "bandwidth": "500MB/s", "overhead": "10us"},
        }
        for n in ("A", "B")
    ],
    "routes": [
        {
            "from": a,
            "to": b,
            "plogp": {"latency": "1ms", "bandwidth": "100MB/s", "overhead": "20us"},
        }
        for a, b in (("A", "B"), ("B", "A"))
    ],
}
"""Two clusters of two ranks, 1 ms / 100 MB/s between them: every collective crosses
the emulated WAN, and the suite's thousands of calls stay quick."""


def mpi4py_tests() -> Path:
    """The ``test/`` folder of the installed mpi4py's source distribution (fetched with
    ``pip download`` on first use and kept)."""
    version = importlib.metadata.version("mpi4py")
    default = Path.home() / ".cache" / "gridcoll" / f"mpi4py-{version}-test"
    folder = Path(os.environ.get("GRIDCOLL_MPI4PY_TESTS") or default)
    if (folder / "mpiunittest.py").exists():
        return folder
    with tempfile.TemporaryDirectory() as tmp:
        pip = [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:"]
        got = subprocess.run(
            [*pip, f"mpi4py=={version}", "-d", tmp], capture_output=True, text=True, check=False
        )
        assert got.returncode == 0, f"cannot fetch mpi4py {version}'s tests:\n{got.stderr}"
        sdist = next(Path(tmp).glob("mpi4py-*.tar.gz"))
        prefix = f"{sdist.name.removesuffix('.tar.gz')}/test/"
        staging = Path(tempfile.mkdtemp(dir=folder.parent if folder.parent.exists() else None))
        with tarfile.open(sdist) as tar:
            members = [m for m in tar.getmembers() if m.name.startswith(prefix) and m.isfile()]
            for m in members:
                m.name = m.name[len(prefix) :]
            tar.extractall(staging, members=members, filter="data")
        folder.parent.mkdir(parents=True, exist_ok=True)
        staging.rename(folder)
    return folder


def _env(**extra: str) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GRIDCOLL_")}
    env.update(extra)
    return env


def _run(cmd: list[str], env: dict, out: Path) -> list[dict]:
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=1500, check=False)
    assert proc.returncode == 0, f"{cmd}\n{proc.stdout[-3000:]}\n{proc.stderr[-5000:]}"
    return [json.loads(Path(f"{out}.{r}.json").read_text()) for r in range(NRANKS)]


def _suite_args(out: Path) -> list[str]:
    return [str(HERE / "mpi4py_suite.py"), str(out), str(mpi4py_tests()), *MODULES]


@pytest.fixture(scope="module")
def plain(tmp_path_factory) -> list[dict]:
    out = tmp_path_factory.mktemp("plain") / "suite"
    cmd = mpiexec_command(NRANKS, [sys.executable, *_suite_args(out)])
    runs = _run(cmd, _env(), out)
    assert not any(run["swapped"] for run in runs)
    return runs


def _differences(plain: list[dict], swapped: list[dict]) -> dict[str, str]:
    """Per test that passes plain on some rank and not with gridcoll: its outcome and
    detail on the first such rank."""
    out = {}
    for mine, theirs in zip(plain, swapped, strict=True):
        for test, (outcome, _) in mine["tests"].items():
            got = theirs["tests"].get(test, ["missing", ""])
            if outcome in ("ok", "skip") and got[0] != outcome and test not in out:
                out[test] = f"{got[0]}: {got[1]}"
    return out


def _check(plain: list[dict], swapped: list[dict]) -> None:
    assert all(run["swapped"] for run in swapped)
    assert len(plain[0]["tests"]) > 500  # the suite really ran
    differ = _differences(plain, swapped)
    unexpected = {t: why for t, why in differ.items() if t not in DIFFERENCES}
    assert not unexpected, "\n\n".join(f"{t}\n{why}" for t, why in unexpected.items())
    stale = [t for t in DIFFERENCES if t not in differ]
    assert not stale, f"listed as differing, but passes with gridcoll: {stale}"


def test_mpi4py_suite_on_an_emulated_grid(plain, tmp_path):
    """``gridcoll mpirun --world`` on two emulated clusters: every plain pass passes."""
    grid = tmp_path / "grid.json"
    grid.write_text(json.dumps(GRID))
    out = tmp_path / "suite"
    gridcoll = [sys.executable, "-m", "gridcoll", "mpirun", "--grid", str(grid), "--world"]
    swapped = _run([*gridcoll, "--", sys.executable, *_suite_args(out)], _env(), out)
    _check(plain, swapped)


def test_mpi4py_suite_on_one_cluster(plain, tmp_path):
    """``python -m gridcoll`` on one cluster (no grid): every plain pass passes."""
    out = tmp_path / "suite"
    cmd = mpiexec_command(NRANKS, [sys.executable, "-m", "gridcoll", *_suite_args(out)])
    _check(plain, _run(cmd, _env(), out))
