"""Faults end the job by name, and nothing is left behind.

Fast tests (no MPI): the CLI turns SIGINT, SIGTERM and SIGHUP into one exception and
an exit status of ``128 + signal``; :class:`LaunchedJob` stops processes that left the
launcher's session (as Hydra's ranks do) and removes the shared-memory files they map;
the rank wrapper records how a rank ended; the launcher's reports name that rank.

Slow MPI tests: each signal sent to ``gridcoll run`` while its ranks run, and SIGTERM to
``gridcoll mpirun``, leave no process of the job, none of the job's files in
``/dev/shm`` and no temporary directory; a rank that dies under ``gridcoll mpirun`` or
``run_worker`` is named with its exit status or signal.

Other helpers' jobs may run on the same machine at the same time, so "nothing left"
is checked for this job's own files: the ones its processes were seen to map while it
ran, found by the launch's mark (``GRIDCOLL_LAUNCH``) under this test's ``TMPDIR``.
"""

from __future__ import annotations

import contextlib
import glob
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
import uuid
from pathlib import Path

import pytest

from gridcoll.cli import algorithms as algorithms_cli
from gridcoll.cli.main import Interrupted, interrupts_raise, main
from gridcoll.errors import LaunchError
from gridcoll.runtime.processes import (
    ENV_LAUNCH,
    LaunchedJob,
    _open_files,
    describe_exit,
    describe_exits,
    read_procs,
    wrap_ranks,
)
from gridcoll.runtime.supervisor import LaunchResult, RankReport, _reports

SRC = Path(__file__).resolve().parent.parent / "src"


# -- helpers ----------------------------------------------------------------------------


def marked(prefix: str) -> set[int]:
    """Live processes whose ``GRIDCOLL_LAUNCH`` starts with ``prefix`` (zombies excluded)."""
    found = set()
    needle = f"{ENV_LAUNCH}={prefix}".encode()
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            environ = Path(f"/proc/{name}/environ").read_bytes()
        except OSError:
            continue
        if any(entry.startswith(needle) for entry in environ.split(b"\0")):
            found.add(int(name))
    return found


def mapped_shm(pids: set[int]) -> set[Path]:
    out = set()
    for pid in pids:
        with contextlib.suppress(OSError):
            for line in Path(f"/proc/{pid}/maps").read_text().splitlines():
                fields = line.split(maxsplit=5)
                path = fields[5] if len(fields) == 6 else ""
                if path.startswith("/dev/shm/") and not path.endswith("(deleted)"):
                    out.add(Path(path))
    return out


def alive(pid: int) -> bool:
    """Running (a zombie, already dead and holding nothing, does not count)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def kill_all(pids: set[int]) -> None:
    for pid in pids:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)


# -- the CLI: signals become one exception and 128 + signal -----------------------------


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT])
def test_interrupts_raise_turns_each_signal_into_interrupted(sig):
    before = signal.getsignal(sig)
    with interrupts_raise():
        with pytest.raises(Interrupted) as caught:
            os.kill(os.getpid(), sig)
            time.sleep(5)  # the handler raises at once; never reached
        assert caught.value.signum == sig and isinstance(caught.value, KeyboardInterrupt)
        os.kill(os.getpid(), sig)  # a second signal during the clean-up is ignored
        time.sleep(0.05)
    assert signal.getsignal(sig) == before


def test_an_ignored_signal_stays_ignored():
    previous = signal.signal(signal.SIGHUP, signal.SIG_IGN)
    try:
        with interrupts_raise():
            assert signal.getsignal(signal.SIGHUP) == signal.SIG_IGN
            os.kill(os.getpid(), signal.SIGHUP)
            time.sleep(0.05)
    finally:
        signal.signal(signal.SIGHUP, previous)


@pytest.mark.parametrize(
    ("sig", "status"), [(signal.SIGINT, 130), (signal.SIGTERM, 143), (signal.SIGHUP, 129)]
)
def test_main_exits_with_128_plus_the_signal_and_one_line(monkeypatch, capsys, sig, status):
    def interrupted(args):
        os.kill(os.getpid(), sig)
        time.sleep(5)
        return 0

    monkeypatch.setattr(algorithms_cli, "run", interrupted)
    assert main(["algorithms"]) == status
    err = capsys.readouterr().err
    assert err == f"gridcoll: interrupted by {signal.Signals(sig).name}\n"


# -- LaunchedJob: processes in sessions of their own, their segments ---------------------

FAKE_MPIEXEC = textwrap.dedent(
    """
    import mmap, os, subprocess, sys, time
    # like Hydra: the "rank" runs in a session of its own, so killing the launcher's
    # process group does not reach it
    child = subprocess.Popen([sys.executable, "-c", sys.argv[1]], start_new_session=True)
    time.sleep(60)
    """
)

FAKE_RANK = textwrap.dedent(
    """
    import mmap, os, sys, time
    from pathlib import Path
    fd = os.open("{segment}", os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
    os.ftruncate(fd, 4096)
    mapped = mmap.mmap(fd, 4096)
    orphan = os.open("{orphan}", os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)  # not mapped
    Path("{ready}").write_text(str(os.getpid()))
    time.sleep(60)
    """
)


def test_launched_job_stops_every_process_and_removes_its_segments(tmp_path):
    """The job's "rank" left the launcher's session; an exception in the block stops it
    all the same, removes the segment it mapped and the unmapped segment created during
    the job, and leaves alone a segment that existed before (someone else's)."""
    tag = uuid.uuid4().hex[:10]
    segment = Path(f"/dev/shm/mpich_shm_gctest{tag}_0")
    orphan = Path(f"/dev/shm/mpich_shm_gctest{tag}_1")
    foreign = Path(f"/dev/shm/mpich_shm_gctest{tag}_2")
    foreign.write_bytes(b"")  # before the launch, mapped by nobody
    workdir = tmp_path / "work"
    workdir.mkdir()
    ready = tmp_path / "ready"
    env = dict(os.environ, **{ENV_LAUNCH: str(workdir)})
    rank = FAKE_RANK.format(segment=segment, orphan=orphan, ready=ready)
    cmd = [sys.executable, "-c", FAKE_MPIEXEC, rank]
    try:
        with pytest.raises(KeyboardInterrupt), LaunchedJob(cmd, env, workdir) as job:
            deadline = time.monotonic() + 30
            while not ready.exists() and time.monotonic() < deadline:
                assert job.poll(wait=0.1) is None
            assert ready.exists()
            rank_pid = int(ready.read_text())
            assert alive(rank_pid) and segment.exists()
            raise KeyboardInterrupt
        assert job.returncode is not None  # mpiexec reaped
        assert not alive(rank_pid) and not marked(str(workdir))
        assert not segment.exists() and not orphan.exists()
        assert foreign.exists()
    finally:
        kill_all(marked(str(workdir)))
        for path in (segment, orphan, foreign):
            with contextlib.suppress(OSError):
                path.unlink()


def test_a_signal_during_the_clean_up_is_held_until_it_is_done(tmp_path):
    finished = []

    class Job(LaunchedJob):
        def clean(self) -> None:
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(0.05)  # would raise here if the signal were not held back
            super().clean()
            finished.append(True)

    env = dict(os.environ, **{ENV_LAUNCH: str(tmp_path)})
    with (
        interrupts_raise(),
        pytest.raises(Interrupted) as caught,
        Job([sys.executable, "-c", "pass"], env, tmp_path) as job,
    ):
        assert job.poll(wait=30) == 0
    assert finished == [True] and caught.value.signum == signal.SIGTERM


def test_launched_job_needs_the_launch_mark(tmp_path):
    with pytest.raises(ValueError, match=ENV_LAUNCH):
        LaunchedJob(["true"], dict(os.environ), tmp_path)


# -- the rank wrapper and the reports ---------------------------------------------------


@pytest.mark.parametrize(
    ("body", "code"),
    [("os._exit(3)", 3), ("os.kill(os.getpid(), 9)", -9), ("pass", 0)],
)
def test_the_rank_wrapper_records_how_its_rank_ended(tmp_path, body, code):
    cmd = wrap_ranks([sys.executable, "-c", f"import os; {body}"], tmp_path)
    env = dict(os.environ, **{ENV_LAUNCH: str(tmp_path), "PMI_RANK": "1"})
    proc = subprocess.run(cmd, env=env, timeout=60, check=False)
    assert proc.returncode == code  # the wrapper ends as its rank did
    events = read_procs(tmp_path, 2)[1]
    assert [e["event"] for e in events] == ["started", "exit"]
    assert events[1]["code"] == code and events[0]["pid"] == events[1]["pid"]


def test_describe_exit():
    assert describe_exit(3) == "exited with status 3"
    assert describe_exit(-9) == "killed by signal 9, SIGKILL"


def procs(**ranks):
    out = {}
    for name, code in ranks.items():
        rank = int(name[1:])
        out[rank] = [{"event": "started", "pid": 100 + rank, "t": 1.0}]
        if code is not None:
            out[rank].append({"event": "exit", "pid": 100 + rank, "code": code, "t": 2.0 + rank})
    return out


def test_describe_exits_names_the_rank_that_died():
    text = describe_exits(procs(r0=None, r1=3, r2=None, r3=None), 4, 3)
    assert text == "rank 1 died (exited with status 3); ranks 0, 2, 3 stopped with the job; " + (
        "mpiexec exited with status 3"
    )
    text = describe_exits(procs(r0=None, r1=-9, r2=1), 4, 9)
    assert text.startswith("rank 1 died (killed by signal 9, SIGKILL) first; rank 2 died")
    assert "rank 3 never started" in text


def test_reports_say_how_a_rank_ended_and_whether_it_joined():
    status = {
        0: [{"event": "joined", "pid": 1}, {"event": "error", "message": "timed out", "peer": 1}],
        1: [{"event": "joined", "pid": 101}],
        3: [],
    }
    ranks = _reports(status, 4, alive={2}, procs=procs(r0=1, r1=3, r2=None, r3=-9))
    assert [(r.state, r.exit, r.joined) for r in ranks] == [
        ("error", "exited with status 1", True),
        ("died", "exited with status 3", True),
        ("hung", "", False),
        ("died", "killed by signal 9, SIGKILL", False),
    ]
    text = LaunchResult(["mpiexec"], 1, "", "", None, ranks).describe_failure()
    assert "rank 1 failed: it died (exited with status 3) before finishing" in text
    assert "rank 2 failed: it never joined the collective" in text
    assert "rank 3 failed: it died (killed by signal 9, SIGKILL) before joining" in text
    assert RankReport(0, "done").what() == ""


def test_an_unverified_launch_raises_one_line_naming_what_ran():
    done = [RankReport(0, "done"), RankReport(1, "done")]
    LaunchResult(["mpiexec"], 0, "", "", {"verified": True}, done).require_verified("x")
    unchecked = LaunchResult(["mpiexec"], 0, "", "", {"verified": False}, done)
    with pytest.raises(LaunchError, match=r"^running bcast on g: the bytes were not verified$"):
        unchecked.require_verified("running bcast on g")
    died = LaunchResult(["mpiexec"], 1, "", "", None, [RankReport(0, "died", exit="exited")])
    with pytest.raises(LaunchError, match=r"^the scenario: rank 0 failed: it died"):
        died.require_verified("the scenario")


# -- MPI: signals to the commands, ranks named -----------------------------------------


def cli_env(tmp: Path) -> dict:
    """The command's environment: this checkout, no GRIDCOLL_ setting, its own TMPDIR."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GRIDCOLL_")}
    env["PYTHONPATH"] = os.pathsep.join([str(SRC), *filter(None, [env.get("PYTHONPATH")])])
    env["TMPDIR"] = str(tmp)
    return env


def start(tmp: Path, *args: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "gridcoll", *args],
        env=cli_env(tmp),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def wait_for_ranks(
    tmp: Path, proc: subprocess.Popen, nranks: int, seconds: float = 180, suffix: str = ""
):
    """Until every rank of the job maps MPICH's segment (MPI is up), and some rank a
    file ending with ``suffix`` (``.links``: the emulation is up): the job's PIDs and
    the /dev/shm files they map."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.communicate()
        pids = marked(str(tmp))
        ranks = {p for p in pids if any(m.name.startswith("mpich_shm_") for m in mapped_shm({p}))}
        files = mapped_shm(pids)
        if len(ranks) >= nranks and any(f.name.endswith(suffix) for f in files):
            time.sleep(1.0)  # a little into the run
            pids = marked(str(tmp))
            return pids, mapped_shm(pids)
        time.sleep(0.2)
    raise AssertionError("the ranks did not start in time")


def check_nothing_left(tmp: Path, pids: set[int], files: set[Path]) -> None:
    assert not marked(str(tmp)), "a process of the job is still running"
    assert not [p for p in pids if alive(p)]
    assert any(f.name.startswith("mpich_shm_") for f in files)  # the check means something
    assert not [f for f in files if f.exists()]
    assert not list(tmp.glob("gridcoll-*")), list(tmp.iterdir())


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP])
@pytest.mark.slow
@pytest.mark.mpi
def test_a_signal_to_gridcoll_run_stops_the_job_and_leaves_nothing(tmp_path, sig):
    pytest.importorskip("mpi4py")
    args = ["run", "--grid", "magpie:2,2", "--size", "16MiB", "--repeat", "50"]
    proc = start(tmp_path, *args, "--timeout", "120")
    pids: set[int] = set()
    try:
        pids, files = wait_for_ranks(tmp_path, proc, 4, suffix=".links")
        assert any(f.name.endswith(".links") for f in files)  # the emulation's link state
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == 128 + sig, err
        assert f"gridcoll: interrupted by {signal.Signals(sig).name}" in err
        assert "Traceback" not in err
        check_nothing_left(tmp_path, pids, files)
    finally:
        if proc.poll() is None:
            proc.kill()
        kill_all(marked(str(tmp_path)) | pids)


@pytest.mark.parametrize(
    ("args", "nranks", "sig"),
    [
        (["demo", "--grid", "magpie:2,1", "--sizes", "1MiB", "--repeat", "40"], 2, signal.SIGTERM),
        (["measure", "--grid", "magpie:2,2", "--between", "0,2"], 2, signal.SIGHUP),
    ],
    ids=["demo", "measure"],
)
@pytest.mark.slow
@pytest.mark.mpi
def test_a_signal_to_demo_or_measure_stops_the_job_and_leaves_nothing(tmp_path, args, nranks, sig):
    pytest.importorskip("mpi4py")
    out = tmp_path / "out"
    out.mkdir()
    target = ["--out", str(out / "x.json")] if args[0] == "measure" else ["--out", str(out)]
    proc = start(tmp_path, *args, *target)
    pids: set[int] = set()
    try:
        pids, files = wait_for_ranks(tmp_path, proc, nranks)
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == 128 + sig, err
        assert f"gridcoll: interrupted by {signal.Signals(sig).name}" in err
        check_nothing_left(tmp_path, pids, files)
    finally:
        if proc.poll() is None:
            proc.kill()
        kill_all(marked(str(tmp_path)) | pids)


SLEEPER = """
import time
from mpi4py import MPI
MPI.COMM_WORLD.Barrier()
time.sleep(120)
"""


@pytest.mark.slow
@pytest.mark.mpi
def test_sigterm_to_gridcoll_mpirun_stops_the_job_and_leaves_nothing(tmp_path):
    pytest.importorskip("mpi4py")
    app = tmp_path / "app" / "sleeper.py"
    app.parent.mkdir()
    app.write_text(SLEEPER)
    proc = start(tmp_path, "mpirun", "--grid", "magpie:2,1", "--", sys.executable, str(app))
    pids: set[int] = set()
    try:
        pids, files = wait_for_ranks(tmp_path, proc, 2)  # magpie:2,1: two ranks
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == 143, err
        assert "gridcoll: interrupted by SIGTERM" in err
        check_nothing_left(tmp_path, pids, files)
    finally:
        if proc.poll() is None:
            proc.kill()
        kill_all(marked(str(tmp_path)) | pids)


DIES = """
import os, sys
import numpy as np
from mpi4py import MPI
import gridcoll
comm = gridcoll.Comm(MPI.COMM_WORLD)
if comm.Get_rank() == 1:
    {death}
data = np.zeros(1000, dtype=np.uint8)
comm.Bcast(data, root=0)
print("done", comm.Get_rank(), flush=True)
"""


@pytest.mark.parametrize(
    ("death", "how"),
    [
        ("os._exit(3)", "rank 1 died (exited with status 3)"),
        ("os.kill(os.getpid(), 9)", "rank 1 died (killed by signal 9, SIGKILL)"),
    ],
)
@pytest.mark.slow
@pytest.mark.mpi
def test_gridcoll_mpirun_names_the_rank_that_died(tmp_path, death, how):
    pytest.importorskip("mpi4py")
    app = tmp_path / "app" / "dies.py"
    app.parent.mkdir()
    app.write_text(DIES.format(death=death))
    proc = start(
        tmp_path, "mpirun", "--grid", "magpie:2,2", "--timeout", "5", "--", sys.executable, str(app)
    )
    try:
        _, err = proc.communicate(timeout=180)
    finally:
        if proc.poll() is None:
            proc.kill()
        kill_all(marked(str(tmp_path)))
    assert proc.returncode != 0
    lines = [line for line in err.splitlines() if line.startswith("gridcoll mpirun: ")]
    assert len(lines) == 1, err
    assert lines[0].startswith(f"gridcoll mpirun: {how}"), err
    assert not marked(str(tmp_path)) and not list(tmp_path.glob("gridcoll-*"))


@pytest.mark.slow
@pytest.mark.mpi
def test_run_worker_says_how_the_rank_that_died_ended():
    pytest.importorskip("mpi4py")
    from gridcoll.network import get_grid
    from gridcoll.runtime.worker import run_worker

    result = run_worker(
        get_grid("lan:4"),
        4096,
        algo="binomial",
        params={},
        repeat=2,
        emulate=False,
        timeout=3.0,
        fail_rank=2,
    )
    assert result.failed_ranks == [2]
    report = {r.rank: r for r in result.ranks}[2]
    assert (report.state, report.exit, report.joined) == ("died", "exited with status 3", True)
    assert "rank 2 failed: it died (exited with status 3) before finishing" in (
        result.describe_failure()
    )


# -- faults: a rank that dies or never joins ends the job by name ----------------------


def test_describe_exits_names_the_rank_the_others_waited_for():
    base = procs(r0=None, r1=None, r2=None, r3=None)
    fault = {"event": "fault", "error": "CollectiveTimeout", "peers": [3], "t": 5.0}
    base[2].append(fault)
    text = describe_exits(base, 4, 70)
    assert text == (
        "rank 3 never joined the collective (alive until the job was stopped); "
        "rank 2 failed waiting (CollectiveTimeout); ranks 0, 1 stopped with the job; "
        "mpiexec exited with status 70"
    )
    base[2].append({"event": "abort", "reason": "timed out", "t": 6.0})
    assert describe_exits(base, 4, 70) == (
        "rank 3 never joined the collective (alive until the job was stopped); "
        "rank 2 failed waiting (CollectiveTimeout); rank 2 ended the job (MPI_Abort); "
        "ranks 0, 1 stopped with the job; mpiexec exited with status 70"
    )
    left = procs(r0=None, r1=None, r2=None, r3=None)
    left[2].append(fault)
    left[3].append({"event": "exiting", "t": 2.0})
    assert describe_exits(left, 4, 70).startswith(
        "rank 3 left the program (it reached its exit) without joining the collective; "
    )
    died = procs(r0=None, r1=None, r2=None, r3=3)  # its exit at t = 5.0 + ... is late
    died[3][-1]["t"] = 1.5
    died[2].append(fault)
    assert describe_exits(died, 4, 70).startswith("rank 3 died (exited with status 3); rank 2")
    native = procs(r0=None, r1=None, r2=None, r3=None)  # no peer named: who said nothing
    for r in (0, 1, 2):
        native[r].append(dict(fault, peers=[]))
    assert describe_exits(native, 4, 70).startswith(
        "rank 3 never joined the collective (alive until the job was stopped); "
        "ranks 0, 1, 2 failed waiting (CollectiveTimeout); mpiexec"
    )


MPI_SCRIPTS = Path(__file__).resolve().parent / "mpi"


def run_faults(tmp: Path, mode: str, handling: str, timeout: str) -> tuple[int, list, str]:
    """``gridcoll mpirun`` of tests/mpi/faults.py: its exit status, the ranks' JSON
    lines, stderr. The job leaves no process, no launch directory and none of Hydra's
    topology files (which ``mpiexec`` leaves in ``/tmp`` when its job aborts)."""
    topology = set(glob.glob("/tmp/hydra_hwloc_xmlfile_*"))
    proc = start(
        tmp, "mpirun", "--grid", "magpie:2,2", "--timeout", timeout, "--",
        sys.executable, str(MPI_SCRIPTS / "faults.py"), mode, handling,
    )  # fmt: skip
    try:
        out, err = proc.communicate(timeout=240)
    finally:
        if proc.poll() is None:
            proc.kill()
        kill_all(marked(str(tmp)))
    lines = [json.loads(x) for x in out.splitlines() if x.startswith("{")]
    assert not marked(str(tmp)) and not list(tmp.glob("gridcoll-*"))
    new = set(glob.glob("/tmp/hydra_hwloc_xmlfile_*")) - topology
    assert not new - _open_files()  # another job's, still in use, may have appeared
    return proc.returncode, lines, err


@pytest.mark.parametrize(
    ("mode", "named"),
    [
        ("hang", "rank 3 never joined the collective (alive until the job was stopped)"),
        ("exit", "rank 3 left the program (it reached its exit) without joining"),
    ],
)
@pytest.mark.slow
@pytest.mark.mpi
def test_a_rank_that_never_joins_ends_the_job_by_name(tmp_path, mode, named):
    """16 MiB over magpie:2,2's emulated WAN, timeout 5 s: rank 2 forwards the pipeline
    to rank 3 and learns within the timeout from its first message (the timeout is per
    call, from the last progress, and a send is never older than it: before, 16.7 s of
    emulated transfer plus 5 s); its error ends the program, then the job (MPI_Abort:
    no rank waits in MPI_Finalize for rank 3), and mpirun names rank 3 and the rank that
    ended the job. (A rank that
    ends with a non-zero status before MPI_Finalize ends the job at once, by mpiexec:
    test_gridcoll_mpirun_names_the_rank_that_died.)"""
    pytest.importorskip("mpi4py")
    code, lines, err = run_faults(tmp_path, mode, "raise", "5")
    assert code != 0
    waiting = {r["rank"]: r for r in lines if r["error"]}
    assert waiting and all(r["error"] == "CollectiveTimeout" for r in waiting.values()), lines
    assert all("rank 3" in r["message"] for r in waiting.values()), lines
    assert min(r["seconds"] for r in waiting.values()) < 2 * 5.0, lines  # never 5 + 16.7
    summary = [x for x in err.splitlines() if x.startswith("gridcoll mpirun: ")]
    assert len(summary) == 1 and summary[0].startswith(f"gridcoll mpirun: {named}"), err
    assert "ended the job (MPI_Abort)" in summary[0], err  # the rank's own line on stderr
    # ("aborting the job") may be lost: Hydra kills the ranks before it forwards it


@pytest.mark.slow
@pytest.mark.mpi
def test_a_rank_joining_late_gets_a_gridcoll_error(tmp_path):
    """The others give up after 2 s, handle it and go on; rank 3 joins 8 s late: it
    gets a gridcoll error saying its peer stopped (never a raw MPI error: the
    given-up sends' buffers are kept alive), and the job ends."""
    pytest.importorskip("mpi4py")
    _, lines, err = run_faults(tmp_path, "late", "catch", "2")
    late = [r for r in lines if r["rank"] == 3]
    assert len(late) == 1, (lines, err[-2000:])
    assert late[0]["error"] and late[0]["is_gridcoll_error"], late
    assert "rank 3" in late[0]["message"], late
    assert all(r["error"] is None or r["is_gridcoll_error"] for r in lines), lines
