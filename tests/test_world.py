"""``MPI.COMM_WORLD`` as a ``gridcoll.Comm`` (``gridcoll.runtime.world``), in single
processes: how ``python -m gridcoll`` tells a program from a command, the launch's
environment, the ``sitecustomize`` it ships (lazy, chained to a site's own), and the
swap itself in singleton MPI processes (each in a subprocess: a swap is for the whole
process, and must not reach the test run's).

The runs under ``mpiexec`` are in ``test_world_mpi.py``.
"""

from __future__ import annotations

import fnmatch
import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from gridcoll.__main__ import main, runs_program
from gridcoll.cli.main import build_parser, command_names
from gridcoll.runtime import world

ROOT = Path(__file__).resolve().parents[1]


def clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GRIDCOLL_")}
    env.pop("PYTHONPATH", None)
    env.update(extra)
    return env


def python(*argv: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """``python ARGV...`` in a clean environment (no GRIDCOLL_ variables, no PYTHONPATH)."""
    return subprocess.run(
        [sys.executable, *argv],
        env=env or clean_env(),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def last_json(proc: subprocess.CompletedProcess) -> dict:
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


# -- python -m gridcoll: program or command ----------------------------------------------


def test_runs_program_tells_programs_from_commands(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "app.py").write_text("")
    (tmp_path / "script").write_text("")
    (tmp_path / "plan").write_text("")  # a file named like a command is still the command
    for argv in (["-m", "mod"], ["-c", "pass", "x"], ["-"], ["app.py", "-n", "3"], ["script"]):
        assert runs_program(argv), argv
    assert runs_program(["missing.py"])  # a program, refused with one line (below)
    for argv in ([], ["plan", "--grid", "lan:2"], ["--help"], ["--version"], ["missing"]):
        assert not runs_program(argv), argv
    for name in command_names():
        assert not runs_program([name])
    assert "mpirun" in command_names() and "plan" in command_names()
    assert "python -m gridcoll app.py" in build_parser().format_help()


def test_bad_program_lines_are_one_line_errors(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for argv, message in [
        (["-m"], "-m needs a module name"),
        (["-c"], "-c needs a command string"),
        (["missing.py"], "cannot open file 'missing.py'"),
    ]:
        assert main(argv) == 2
        out, err = capsys.readouterr()
        assert out == "" and err.count("\n") == 1 and message in err, err


def test_python_m_gridcoll_still_runs_commands():
    proc = python("-m", "gridcoll", "plan", "--grid", "magpie:2,1", "--size", "1KiB", "--json")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["grid"] == "magpie:2,1"


# -- the launch's environment and the shipped sitecustomize -------------------------------


def test_environment_puts_the_site_dir_first_once():
    site = str(world.SITE_DIR)
    assert world.environment({}) == {"GRIDCOLL_WORLD": "1", "PYTHONPATH": site}
    env = world.environment({"PYTHONPATH": os.pathsep.join(["/a", site, "/b"])})
    assert env["PYTHONPATH"].split(os.pathsep) == [site, "/a", "/b"]
    assert world.requested({"GRIDCOLL_WORLD": "1"}) and world.requested({"GRIDCOLL_WORLD": "yes"})
    for value in ("", " ", "0"):
        assert not world.requested({"GRIDCOLL_WORLD": value})
    assert not world.requested({})


def test_the_sitecustomize_is_package_data():
    path = world.SITE_DIR / "sitecustomize.py"
    assert path.is_file()
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    patterns = config["tool"]["setuptools"]["package-data"]["gridcoll.runtime"]
    relative = path.relative_to(ROOT / "src" / "gridcoll" / "runtime").as_posix()
    assert any(fnmatch.fnmatch(relative, p) for p in patterns)
    assert not world.SITE_DIR.name.isidentifier()  # not a package: nothing imports it by name


PROBE = """
import builtins, json, sys
import mpi4py
print(json.dumps({
    "site": getattr(builtins, "SITE_RAN", False),
    "hook": any(getattr(f, "gridcoll_world_hook", False) for f in sys.meta_path),
    "loaded": sorted(m for m in ("gridcoll", "numpy", "mpi4py.MPI") if m in sys.modules),
    "sitecustomize": sys.modules["sitecustomize"].__file__,
}))
"""


@pytest.mark.parametrize("wanted", ["1", "0"])
def test_sitecustomize_is_lazy_and_runs_the_sites_own(tmp_path, wanted):
    own = tmp_path / "site"
    own.mkdir()
    (own / "sitecustomize.py").write_text("import builtins\nbuiltins.SITE_RAN = True\n")
    path = os.pathsep.join([str(world.SITE_DIR), str(own)])
    out = last_json(python("-c", PROBE, env=clean_env(PYTHONPATH=path, GRIDCOLL_WORLD=wanted)))
    assert out == {
        "site": True,
        "hook": wanted == "1",
        "loaded": [],  # not gridcoll, numpy nor MPI: mpi4py.MPI was never imported
        "sitecustomize": str(own / "sitecustomize.py"),
    }


def test_sitecustomize_alone():
    proc = python("-c", PROBE, env=clean_env(PYTHONPATH=str(world.SITE_DIR), GRIDCOLL_WORLD="1"))
    out = last_json(proc)
    assert out["hook"] and out["loaded"] == [] and proc.stderr == ""
    assert out["sitecustomize"] == str(world.SITE_DIR / "sitecustomize.py")


# -- the swap, in singleton MPI processes --------------------------------------------------

SWAP = """
import json, sys
from gridcoll.runtime.world import swap, swapped
assert not swapped() and "mpi4py.MPI" not in sys.modules
first = swap()
from mpi4py import MPI
from mpi4py.MPI import COMM_WORLD
again = swap()
other = swap(algo="binomial")
print(json.dumps({
    "class": type(first).__module__ + "." + type(first).__qualname__,
    "from-import": COMM_WORLD is first,
    "idempotent": again is first,
    "options replace": other is MPI.COMM_WORLD and other is not first,
    "options": other.gridcoll_state.spec[0],
    "view": type(MPI.Intracomm(other)) is MPI.Intracomm and MPI.Intracomm(other) == first,
    "self": type(MPI.COMM_SELF).__qualname__,
    "swapped": swapped(),
    "rank": MPI.COMM_WORLD.Get_rank(), "size": MPI.COMM_WORLD.Get_size(),
}))
"""


@pytest.mark.mpi
def test_swap_is_idempotent_and_leaves_comm_self():
    pytest.importorskip("mpi4py")
    assert last_json(python("-c", SWAP)) == {
        "class": "gridcoll.runtime.comm.Comm",
        "from-import": True,
        "idempotent": True,
        "options replace": True,
        "options": "binomial",
        "view": True,
        "self": "Intracomm",
        "swapped": True,
        "rank": 0,
        "size": 1,
    }


HOOK = """
import json, sys, warnings
from gridcoll.runtime.world import swap_on_import
hook = swap_on_import(algo="binomial")
assert swap_on_import() is hook and "mpi4py.MPI" not in sys.modules
import mpi4py
mpi4py.rc.thread_level = "serialized"  # the program's own settings still count
from mpi4py import MPI
print(json.dumps({
    "class": type(MPI.COMM_WORLD).__name__,
    "options": MPI.COMM_WORLD.gridcoll_state.spec[0],
    "thread level kept": MPI.Query_thread() == MPI.THREAD_SERIALIZED,
    "hook left": hook not in sys.meta_path,
    "now": swap_on_import() is None,
}))
"""


@pytest.mark.mpi
def test_the_hook_swaps_on_import_and_keeps_mpi4py_rc():
    pytest.importorskip("mpi4py")
    assert last_json(python("-c", HOOK)) == {
        "class": "Comm",
        "options": "binomial",
        "thread level kept": True,
        "hook left": True,
        "now": True,
    }


@pytest.mark.mpi
def test_the_hook_does_not_swap_before_mpi_init():
    pytest.importorskip("mpi4py")
    code = (
        "import mpi4py\nmpi4py.rc.initialize = False\n"
        "from gridcoll.runtime.world import swap, swap_on_import\nswap_on_import()\n"
        "from mpi4py import MPI\nprint(type(MPI.COMM_WORLD).__name__)\n"
        "try:\n    swap()\nexcept RuntimeError as err:\n    print(err)\n"
        "MPI.Init()\nprint(type(swap()).__name__)\n"
    )
    proc = python("-c", code)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == [
        "Intracomm",
        "cannot swap MPI.COMM_WORLD: MPI is not initialized",
        "Comm",
    ]
    assert "MPI.COMM_WORLD stays mpi4py's" in proc.stderr


@pytest.mark.mpi
def test_a_pickled_swapped_world_is_the_receivers_world(tmp_path):
    """Written by a swapped process, read by one that is not (and back)."""
    pytest.importorskip("mpi4py")
    dump = (
        "import pickle, sys\nfrom mpi4py import MPI\n"
        "open(sys.argv[1], 'wb').write(pickle.dumps((MPI.COMM_WORLD, MPI.COMM_SELF)))\n"
        "print(type(MPI.COMM_WORLD).__name__)\n"
    )
    load = (
        "import pickle, sys\nfrom mpi4py import MPI\n"
        "w, s = pickle.loads(open(sys.argv[1], 'rb').read())\n"
        "print(type(w).__name__, w is MPI.COMM_WORLD, s is MPI.COMM_SELF)\n"
    )
    blob = str(tmp_path / "world.pickle")
    swapped = python("-m", "gridcoll", "-c", dump, blob)
    assert swapped.stdout.split() == ["Comm"], swapped.stderr
    plain = python("-c", load, blob)
    assert plain.stdout.split() == ["Intracomm", "True", "True"], plain.stderr
    plain = python("-c", dump, blob)
    assert plain.stdout.split() == ["Intracomm"], plain.stderr
    swapped = python("-m", "gridcoll", "-c", load, blob)
    assert swapped.stdout.split() == ["Comm", "True", "True"], swapped.stderr


@pytest.mark.mpi
def test_an_uncaught_exception_ends_the_program_as_under_python_m_mpi4py():
    pytest.importorskip("mpi4py")
    proc = python("-m", "gridcoll", "-c", "from mpi4py import MPI\nraise SystemExit(3)")
    assert proc.returncode == 3, proc.stderr
    proc = python("-m", "gridcoll", "-c", "raise SystemExit(0)")
    assert proc.returncode == 0 and proc.stderr == ""
