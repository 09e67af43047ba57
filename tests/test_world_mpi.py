"""An unchanged mpi4py program on gridcoll (``gridcoll.runtime.world``), under mpiexec.

``tests/mpi/world_prog.py`` never names gridcoll, yet its ``MPI.COMM_WORLD``, its
``from mpi4py.MPI import COMM_WORLD`` and a library's ``comm=MPI.COMM_WORLD`` default
must all be a ``gridcoll.Comm`` with exact results, started three ways: ``python -m
gridcoll prog.py``, ``python -m gridcoll -m module`` and ``gridcoll mpirun --world``
(4 ranks on ``magpie:2,2``, the WAN emulated). Pickling is checked swapped (inside the
program) and not (``world_pickle.py`` alone). Under ``--world`` a Python process that
never imports ``mpi4py.MPI`` is left alone and a site's own ``sitecustomize`` still
runs. Each launch takes a few seconds.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("mpi4py")

from gridcoll.runtime.processes import mpiexec_command
from gridcoll.runtime.world import SITE_DIR
from test_runtime_mpi import HERE, clean_env, fast_grid, last_json, write_grid

pytestmark = [pytest.mark.slow, pytest.mark.mpi]

TIMEOUT = 120


def run(cmd: list[str], env: dict | None = None, cwd: Path | None = None):
    return subprocess.run(
        cmd,
        env=env or clean_env(),
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
    )


def check_program(proc, size: int, argv: list[str]) -> dict:
    """The program's report: a gridcoll.Comm world on every rank, every check true."""
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = last_json(proc)
    assert out["class"] == "gridcoll.runtime.comm.Comm" and out["name"] == "Comm"
    assert out["size"] == size and out["argv"] == argv
    assert len(out["ranks"]) == size
    for rank, checks in enumerate(out["ranks"]):
        failed = [name for name, ok in checks.items() if not ok]
        assert not failed, (rank, failed)
        assert checks["swapped"] and len(checks) >= 18
    return out


def test_python_m_gridcoll_runs_an_unchanged_program():
    cmd = [sys.executable, "-m", "gridcoll", str(HERE / "world_prog.py"), "--flag", "x"]
    out = check_program(run(mpiexec_command(2, cmd)), 2, ["--flag", "x"])
    assert out["grid"] == "lan:2" and not out["emulated"]
    assert out["algorithms"] == {"Allreduce": "native", "Bcast": "native"}  # one cluster


def test_python_m_gridcoll_runs_a_module_on_an_emulated_grid(tmp_path):
    """``-m module`` finds the module in the working directory, as ``python -m`` does;
    the swapped world reads its grid from the environment as ``gridcoll.Comm()`` does."""
    grid = write_grid(tmp_path, fast_grid({"A": 1, "B": 1}))
    env = clean_env(GRIDCOLL_GRID=str(grid), GRIDCOLL_EMULATE="1")
    cmd = [sys.executable, "-m", "gridcoll", "-m", "world_prog", "arg"]
    out = check_program(run(mpiexec_command(2, cmd), env=env, cwd=HERE), 2, ["arg"])
    assert out["grid"] == "fast-A1-B1" and out["emulated"]
    assert "native" not in out["algorithms"].values()


def test_mpirun_world_runs_an_unchanged_program_on_magpie():
    cmd = [sys.executable, "-m", "gridcoll", "mpirun", "--grid", "magpie:2,2", "--world"]
    cmd += ["--", sys.executable, str(HERE / "world_prog.py")]
    out = check_program(run(cmd), 4, [])
    assert out["grid"] == "magpie:2,2" and out["emulated"]
    assert "native" not in out["algorithms"].values()


def test_pickling_without_the_swap():
    proc = run(mpiexec_command(2, [sys.executable, str(HERE / "world_pickle.py")]))
    assert proc.returncode == 0, proc.stderr[-3000:]
    for rank, checks in enumerate(last_json(proc)["ranks"]):
        assert checks.pop("swapped") is False
        failed = [name for name, ok in checks.items() if not ok]
        assert not failed, (rank, failed)


SCRIPT = """#!{python}
import builtins, json, os, pathlib, sys
import mpi4py  # the package only: MPI is initialised by importing mpi4py.MPI
# one file per rank: the launcher may interleave the ranks' stdout within a line
out = pathlib.Path(sys.argv[0]).with_suffix("." + os.environ.get("PMI_RANK", "0") + ".json")
out.write_text(json.dumps({{
    "site": getattr(builtins, "SITE_RAN", False),
    "hook": any(getattr(f, "gridcoll_world_hook", False) for f in sys.meta_path),
    "loaded": sorted(m for m in ("gridcoll", "numpy", "mpi4py.MPI") if m in sys.modules),
    "path": os.environ["PYTHONPATH"].split(os.pathsep),
    "world": os.environ.get("GRIDCOLL_WORLD"),
}}))
"""


def reports(script: Path) -> list[dict]:
    """What each rank of ``script`` wrote, in rank order."""
    return [json.loads(p.read_text()) for p in sorted(script.parent.glob(script.name + ".*.json"))]


@pytest.mark.parametrize("how", ["flag", "env"])
def test_mpirun_world_leaves_other_pythons_alone_and_runs_the_sites_sitecustomize(tmp_path, how):
    """A script with a shebang under ``--world`` (or ``GRIDCOLL_WORLD=1``) that never
    imports mpi4py.MPI: the hook is there, nothing is loaded, MPI never starts, and the
    site's own sitecustomize (later on PYTHONPATH) has run."""
    own = tmp_path / "site"
    own.mkdir()
    (own / "sitecustomize.py").write_text("import builtins\nbuiltins.SITE_RAN = True\n")
    script = tmp_path / "probe"
    script.write_text(SCRIPT.format(python=sys.executable))
    script.chmod(0o755)
    cmd = [sys.executable, "-m", "gridcoll", "mpirun", "--grid", "lan:2"]
    cmd += ["--world"] if how == "flag" else []
    env = clean_env(PYTHONPATH=str(own), **({"GRIDCOLL_WORLD": "1"} if how == "env" else {}))
    proc = run([*cmd, "--", str(script)], env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = reports(script)
    assert len(lines) == 2, (proc.stdout, proc.stderr[-3000:])
    for out in lines:
        assert out == {
            "site": True,
            "hook": True,
            "loaded": [],
            "path": [str(SITE_DIR), str(own)],
            "world": "1",
        }


def test_mpirun_without_world_adds_nothing(tmp_path):
    script = tmp_path / "probe"
    script.write_text(SCRIPT.format(python=sys.executable))
    script.chmod(0o755)
    cmd = [sys.executable, "-m", "gridcoll", "mpirun", "--grid", "lan:1", "--", str(script)]
    env = clean_env(PYTHONPATH=str(tmp_path))
    proc = run(cmd, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    (out,) = reports(script)
    assert out["path"] == [str(tmp_path)] and not out["hook"] and out["world"] is None
