"""Start MPI programs on a grid, with the WAN emulation switched on.

A launch writes the grid file and the shared link state (:mod:`~gridcoll.runtime.emulation`)
into fresh places, sets the environment every :class:`gridcoll.Comm` reads
(``GRIDCOLL_GRID``, ``GRIDCOLL_EMULATE``, ``GRIDCOLL_LINK_STATE``, ``GRIDCOLL_TIMEOUT``,
and ``GRIDCOLL_HOST_OVERHEAD`` when the caller fixed the per-message host overhead the
ranks plan with, :mod:`~gridcoll.runtime.host`),
starts ``mpiexec -n <grid.nranks> ...`` and removes the files afterwards.

* :func:`launch` runs any command (``gridcoll mpirun``);
* :func:`run_worker` runs :mod:`gridcoll.runtime.worker` and collects its result and
  every rank's fate (``gridcoll run``); :func:`measure_schedule` runs one schedule,
  :func:`measure_schedules` several in one launch (``gridcoll demo``, the benchmarks).

The embedded default is the ``mpiexec`` of the ``mpich`` wheel (next to the Python
executable); any other can be named. Oversubscription is allowed (Open MPI needs to be
told; MPICH's Hydra allows it by default).

Failure behaviour of :func:`run_worker`: the ranks never block inside MPI, so a rank
whose peer died or never joined raises within its timeout and reports it
(``GRIDCOLL-ERROR`` line, status file). Hydra is told not to kill the job when one
rank exits (``-disable-auto-cleanup``), so every surviving rank gets to say what it
waited for; a rank still running ``timeout`` seconds after the first error is killed
and reported as hung. The result names each failed rank, and is never ``verified``
unless every rank finished every repetition with the right bytes.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import shutil
import signal
import subprocess
import sys
import sysconfig
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from gridcoll.errors import GridcollError
from gridcoll.network.grid import Grid
from gridcoll.network.gridfile import load_grid, save_grid
from gridcoll.runtime import emulation as _emu
from gridcoll.runtime.host import ENV_HOST_OVERHEAD
from gridcoll.runtime.worker import ENV_STATUS_DIR, ERROR_PREFIX, RESULT_PREFIX

__all__ = [
    "LaunchError",
    "LaunchResult",
    "RankReport",
    "default_mpiexec",
    "launch",
    "measure_calls",
    "measure_schedule",
    "measure_schedules",
    "mpiexec_command",
    "run_worker",
]

ENV_TIMEOUT = "GRIDCOLL_TIMEOUT"

OVERSUBSCRIBE_ENV = {
    "OMPI_MCA_rmaps_base_oversubscribe": "1",  # Open MPI <= 4
    "PRTE_MCA_rmaps_default_mapping_policy": ":oversubscribe",  # Open MPI 5
}
"""Environment that lets any MPI start more ranks than cores."""

STARTUP_S = 30.0
"""Wall-clock allowance for starting the ranks (plus 2 s per rank), on top of the runs."""


class LaunchError(GridcollError):
    """``mpiexec`` could not be found or run, or the launched job failed."""


def default_mpiexec() -> str:
    """The ``mpiexec`` of the mpich wheel if installed, else the first on ``PATH``."""
    wheel = Path(sysconfig.get_path("scripts")) / "mpiexec"
    if wheel.exists():
        return str(wheel)
    found = shutil.which("mpiexec") or shutil.which("mpirun")
    if not found:
        raise LaunchError(
            "no mpiexec found: install the MPICH wheel (pip install mpich) or name one "
            "with --mpiexec"
        )
    return found


@functools.lru_cache(maxsize=8)
def _is_hydra(mpiexec: str) -> bool:
    try:
        out = subprocess.run(
            [mpiexec, "--version"], capture_output=True, text=True, timeout=20, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return "HYDRA" in (out.stdout + out.stderr).upper()


def mpiexec_command(
    nprocs: int, program: Sequence[str], *, mpiexec: str | None = None, keep_going: bool = False
) -> list[str]:
    """``[mpiexec, -n, N, (-disable-auto-cleanup,) *program]``.

    ``keep_going`` asks Hydra not to kill the other ranks when one exits with an error,
    so they can report what they were waiting for.
    """
    exe = mpiexec or default_mpiexec()
    cmd = [exe, "-n", str(nprocs)]
    if keep_going and _is_hydra(exe):
        cmd.append("-disable-auto-cleanup")
    return cmd + [str(p) for p in program]


# -- one launch's files and environment -------------------------------------------------


@contextlib.contextmanager
def _session(
    grid: Grid,
    *,
    emulate: bool,
    timeout: float | None,
    status: bool,
    host_overhead: float | None = None,
):
    """A temporary directory with the grid file (and status dir), the link state, the env."""
    workdir = Path(tempfile.mkdtemp(prefix="gridcoll-launch-"))
    link_state = None
    try:
        grid_file = workdir / "grid.json"
        save_grid(grid, grid_file)
        env = dict(os.environ)
        env.update(OVERSUBSCRIBE_ENV)
        env["PYTHONUNBUFFERED"] = "1"
        env[_emu.ENV_GRID] = str(grid_file)
        env[_emu.ENV_EMULATE] = "1" if emulate else "0"
        env.pop(_emu.ENV_LINK_STATE, None)
        if emulate:
            link_state = _emu.create_link_state(load_grid(grid_file))
            env[_emu.ENV_LINK_STATE] = str(link_state)
        if timeout is not None:
            env[ENV_TIMEOUT] = repr(float(timeout))
        if host_overhead is not None:
            env[ENV_HOST_OVERHEAD] = repr(float(host_overhead))
        env.pop(ENV_STATUS_DIR, None)
        if status:
            (workdir / "status").mkdir()
            env[ENV_STATUS_DIR] = str(workdir / "status")
        yield workdir, env
    finally:
        if link_state is not None:
            with contextlib.suppress(OSError):
                link_state.unlink()
        shutil.rmtree(workdir, ignore_errors=True)


def launch(
    grid: Grid,
    program: Sequence[str],
    *,
    nprocs: int | None = None,
    emulate: bool = True,
    timeout: float | None = None,
    mpiexec: str | None = None,
    host_overhead: float | None = None,
) -> int:
    """Run ``program`` under ``mpiexec`` on ``grid`` (output goes to this terminal).

    Every ``gridcoll.Comm(MPI.COMM_WORLD)`` inside finds the grid and the emulation by
    itself (and plans with ``host_overhead`` if given). Returns mpiexec's exit status.
    """
    n = grid.nranks if nprocs is None else nprocs
    if n != grid.nranks:
        raise LaunchError(f"grid {grid.name!r} has {grid.nranks} ranks; cannot start {n}")
    with _session(
        grid, emulate=emulate, timeout=timeout, status=False, host_overhead=host_overhead
    ) as (_, env):
        cmd = mpiexec_command(n, program, mpiexec=mpiexec)
        try:
            return subprocess.run(cmd, env=env, check=False).returncode
        except OSError as err:
            raise LaunchError(f"cannot run {cmd[0]!r}: {err.strerror}") from err


# -- the worker: results and every rank's fate ------------------------------------------


@dataclass(frozen=True)
class RankReport:
    """What became of one rank of a :func:`run_worker` launch.

    ``state``: ``done``; ``error`` (it raised: ``message``, and ``peer`` is the rank it
    waited for, if any); ``died`` (it exited without a word); ``hung`` (still running
    after the others had failed or finished: killed); ``never-started``.
    """

    rank: int
    state: str
    message: str = ""
    peer: int | None = None


@dataclass
class LaunchResult:
    """The outcome of :func:`run_worker`."""

    command: list[str]
    returncode: int | None
    stdout: str
    stderr: str
    result: dict | None
    ranks: list[RankReport] = field(default_factory=list)
    killed: bool = False
    """True when the launcher had to kill the job (hung ranks or wall-clock limit)."""

    @property
    def ok(self) -> bool:
        """Every rank finished and rank 0 reported a result."""
        return (
            self.returncode == 0
            and self.result is not None
            and all(r.state == "done" for r in self.ranks)
        )

    @property
    def verified(self) -> bool:
        """True only if the job succeeded and every rank's bytes were checked equal."""
        return self.ok and bool(self.result.get("verified"))

    @property
    def failed_ranks(self) -> list[int]:
        """The ranks at fault: those that died, hung or never started; if none did, the
        ranks that raised."""
        culprits = [r.rank for r in self.ranks if r.state in ("died", "hung", "never-started")]
        if culprits:
            return culprits
        return [r.rank for r in self.ranks if r.state == "error"]

    def describe_failure(self) -> str:
        """One paragraph: which rank failed and what the others said."""
        if self.ok:
            return ""
        parts = []
        for r in self.ranks:
            if r.state in ("died", "hung", "never-started"):
                what = {
                    "died": "exited before finishing, without reporting an error",
                    "hung": "was still running after the others had stopped (killed)",
                    "never-started": "never started (no status)",
                }[r.state]
                parts.append(f"rank {r.rank} failed: it {what}")
        errors = [r for r in self.ranks if r.state == "error"]
        if errors:
            first = errors[0]
            others = ", ".join(str(r.rank) for r in errors)
            parts.append(f"rank(s) {others} raised; rank {first.rank}: {first.message}")
        if not parts:
            if self.killed:
                parts.append("the job was killed at its wall-clock limit")
            parts.append(f"mpiexec exited with status {self.returncode}")
            tail = self.stderr.strip().splitlines()[-3:]
            if tail:
                parts.append("stderr: " + " | ".join(tail))
        return "; ".join(parts)


def _read_status(directory: Path, nranks: int) -> dict[int, list[dict]]:
    out: dict[int, list[dict]] = {}
    for rank in range(nranks):
        path = directory / f"rank-{rank}"
        if not path.exists():
            continue
        events = []
        for line in path.read_text().splitlines():
            with contextlib.suppress(json.JSONDecodeError):
                events.append(json.loads(line))
        out[rank] = events
    return out


def _alive(pid: int | None) -> bool:
    if not pid:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a zombie is not alive
        stat = Path(f"/proc/{pid}/stat").read_text()
        return stat.rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return True


def _reports(status: dict[int, list[dict]], nranks: int, alive: set[int]) -> list[RankReport]:
    reports = []
    for rank in range(nranks):
        events = status.get(rank)
        if not events:
            reports.append(RankReport(rank, "never-started"))
            continue
        error = next((e for e in events if e.get("event") == "error"), None)
        if error is not None:
            reports.append(RankReport(rank, "error", error.get("message", ""), error.get("peer")))
        elif events[-1].get("event") == "done":
            reports.append(RankReport(rank, "done"))
        else:
            reports.append(RankReport(rank, "hung" if rank in alive else "died"))
    return reports


def _kill(proc: subprocess.Popen) -> None:
    """Stop the job we started: its own process group, politely, then not."""
    for sig, grace in ((signal.SIGTERM, 3.0), (signal.SIGKILL, 5.0)):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, sig)
        try:
            proc.wait(timeout=grace)
            return
        except subprocess.TimeoutExpired:
            continue


def _supervise(
    proc: subprocess.Popen,
    status_dir: Path,
    nranks: int,
    grace: float,
    wall: float,
    on_progress: Callable[[int], None] | None = None,
) -> tuple[bool, set[int]]:
    """Wait for the job; kill it if ranks hang after an error, or at the wall limit.

    ``on_progress(n)`` is called whenever rank 0 has finished ``n`` repetitions in all.
    Returns (killed, ranks alive when killed).
    """
    deadline = time.monotonic() + wall
    first_error = None
    done = 0
    while proc.poll() is None:
        time.sleep(0.1)
        now = time.monotonic()
        if first_error is None:
            status = _read_status(status_dir, nranks)
            if any(e.get("event") == "error" for ev in status.values() for e in ev):
                first_error = now
            reps = sum(1 for e in status.get(0, ()) if e.get("event") == "rep")
            if on_progress is not None and reps != done:
                done = reps
                on_progress(done)
        if now > deadline or (first_error is not None and now - first_error > grace):
            status = _read_status(status_dir, nranks)
            alive = {
                rank
                for rank, ev in status.items()
                if ev and ev[-1].get("event") not in ("done", "error") and _alive(ev[-1].get("pid"))
            }
            _kill(proc)
            return True, alive
    return False, set()


def run_worker(
    grid: Grid,
    nbytes: int | None = None,
    *,
    op: str = "bcast",
    commutative: bool = True,
    cases: Sequence[dict] | None = None,
    root: int = 0,
    itemsize: int = 1,
    algo: str = "auto",
    params: dict | None = None,
    schedule_file: str | Path | Sequence[str | Path] | None = None,
    repeat: int = 1,
    emulate: bool = True,
    timeout: float = 60.0,
    wall_timeout: float | None = None,
    mpiexec: str | None = None,
    fail_rank: int | None = None,
    fail_mode: str = "exit",
    host_overhead: float | None = None,
    on_progress: Callable[[int], None] | None = None,
) -> LaunchResult:
    """Run a collective ``repeat`` times on ``grid`` with :mod:`gridcoll.runtime.worker`.

    ``op`` is the collective (``nbytes``: per rank per peer for scatter, gather,
    allgather and all-to-all; ``commutative=False``: reductions of 2x2 int64 matrices,
    ``itemsize`` 32); ``cases`` instead runs several calls in one launch (dicts with
    ``op``, ``size``, ``root``, ``algo``, ``params``, ``itemsize``, ``commutative``).

    ``timeout`` bounds each rank's wait for any one message; ``wall_timeout`` (default:
    a startup allowance plus ``repeat * timeout``) bounds the whole job. ``fail_rank``
    makes that rank exit (``fail_mode="exit"``) or never join (``"hang"``), to test the
    failure behaviour. ``host_overhead`` (seconds per message) is what the ranks plan
    with (``GRIDCOLL_HOST_OVERHEAD``); default: theirs (:mod:`gridcoll.runtime.host`).
    ``schedule_file`` may be a list: the schedules run one after the other in this one
    launch (the default wall limit then allows ``repeat * timeout`` for each).
    ``on_progress(n)`` is called as rank 0 completes its ``n``-th repetition in all.
    """
    program = [sys.executable, "-m", "gridcoll.runtime.worker", "--repeat", str(repeat)]
    files = []
    if schedule_file is not None:
        files = [schedule_file] if isinstance(schedule_file, str | Path) else list(schedule_file)
        for path in files:
            program += ["--schedule", str(path)]
    elif cases:
        files = list(cases)  # one repetition budget per case, as per schedule file
        for case in cases:
            program += ["--case", json.dumps(case)]
    else:
        program += ["--op", op] + ([] if commutative else ["--non-commutative"])
        program += ["--size", str(nbytes), "--root", str(root), "--algo", algo]
        program += ["--itemsize", str(itemsize)]
        if params:
            program += ["--params", json.dumps(params)]
    program += ["--timeout", repr(float(timeout))]
    if fail_rank is not None:
        program += ["--fail-rank", str(fail_rank), "--fail-mode", fail_mode]
    n = grid.nranks
    runs = repeat * max(1, len(files))
    wall = wall_timeout if wall_timeout is not None else STARTUP_S + 2 * n + runs * timeout
    with _session(
        grid, emulate=emulate, timeout=timeout, status=True, host_overhead=host_overhead
    ) as (workdir, env):
        cmd = mpiexec_command(n, program, mpiexec=mpiexec, keep_going=True)
        out_path, err_path = workdir / "stdout", workdir / "stderr"
        with open(out_path, "w") as out, open(err_path, "w") as err:
            try:
                proc = subprocess.Popen(
                    cmd, env=env, stdout=out, stderr=err, start_new_session=True
                )
            except OSError as error:
                raise LaunchError(f"cannot run {cmd[0]!r}: {error.strerror}") from error
            try:
                killed, alive = _supervise(
                    proc, workdir / "status", n, timeout + 5.0, wall, on_progress
                )
            except BaseException:
                _kill(proc)
                raise
        stdout, stderr = out_path.read_text(), err_path.read_text()
        reports = _reports(_read_status(workdir / "status", n), n, alive)
    result = None
    for line in stdout.splitlines():
        if line.startswith(RESULT_PREFIX):
            result = json.loads(line[len(RESULT_PREFIX) :])
    for line in stderr.splitlines():  # an error line also counts if its status was lost
        if line.startswith(ERROR_PREFIX):
            info = json.loads(line[len(ERROR_PREFIX) :])
            rank = info.get("rank")
            if isinstance(rank, int) and 0 <= rank < n and reports[rank].state != "error":
                reports[rank] = RankReport(rank, "error", info.get("message", ""), info.get("peer"))
    return LaunchResult(cmd, proc.returncode, stdout, stderr, result, reports, killed)


def measure_schedule(
    grid: Grid,
    schedule,
    *,
    repeat: int = 3,
    emulate: bool = True,
    timeout: float = 60.0,
    mpiexec: str | None = None,
) -> list[float]:
    """Run one broadcast schedule for real on ``grid``; return the measured seconds of
    each repetition. Raises :class:`LaunchError` if it failed or was not verified.
    """
    return measure_schedules(
        grid, [schedule], repeat=repeat, emulate=emulate, timeout=timeout, mpiexec=mpiexec
    )[0]


def measure_schedules(
    grid: Grid,
    schedules: Sequence,
    *,
    repeat: int = 3,
    emulate: bool = True,
    timeout: float = 60.0,
    mpiexec: str | None = None,
    wall_timeout: float | None = None,
    on_progress: Callable[[int], None] | None = None,
) -> list[list[float]]:
    """Run several broadcast schedules for real on ``grid`` in one launch, one after
    the other, each ``repeat`` times; return each one's measured seconds.

    One ``mpiexec`` start-up (seconds of Python imports on an oversubscribed machine)
    serves them all. ``on_progress(n)``: ``n`` repetitions done in all. Raises
    :class:`LaunchError` unless every run of every schedule was verified.
    """
    from gridcoll.schedule import schedule_to_json

    if not schedules:
        return []
    with tempfile.TemporaryDirectory(prefix="gridcoll-schedule-") as tmp:
        paths = []
        for i, schedule in enumerate(schedules):
            path = Path(tmp) / f"schedule-{i}.json"
            path.write_text(schedule_to_json(schedule))
            paths.append(path)
        outcome = run_worker(
            grid,
            schedule_file=paths,
            repeat=repeat,
            emulate=emulate,
            timeout=timeout,
            wall_timeout=wall_timeout,
            mpiexec=mpiexec,
            on_progress=on_progress,
        )
    if not outcome.verified:
        names = ", ".join(sorted({s.algorithm for s in schedules}))
        raise LaunchError(
            f"running {names} on {grid.name}: "
            f"{outcome.describe_failure() or 'the bytes were not verified'}"
        )
    return [list(case["measured_all_s"]) for case in outcome.result["cases"]]


def measure_calls(
    grid: Grid,
    cases: Sequence[dict],
    *,
    repeat: int = 3,
    emulate: bool = True,
    timeout: float = 60.0,
    mpiexec: str | None = None,
    wall_timeout: float | None = None,
    host_overhead: float | None = None,
    on_progress: Callable[[int], None] | None = None,
) -> list[dict]:
    """Run several collective calls for real on ``grid`` in one launch, each ``repeat``
    times through :class:`gridcoll.Comm`, every rank's bytes verified.

    ``cases``: dicts with ``op``, ``size``, and optionally ``root``, ``algo`` (default
    ``auto``), ``params`` (fixed builder parameters), ``itemsize``, ``commutative``.
    Returns the worker's row per case (``measured_all_s``, ``algorithm``, ``params``,
    ``explanation``...). Raises :class:`LaunchError` unless every run was verified.
    """
    if not cases:
        return []
    outcome = run_worker(
        grid,
        cases=cases,
        repeat=repeat,
        emulate=emulate,
        timeout=timeout,
        wall_timeout=wall_timeout,
        mpiexec=mpiexec,
        host_overhead=host_overhead,
        on_progress=on_progress,
    )
    if not outcome.verified:
        names = ", ".join(sorted({f"{c['op']}:{c.get('algo', 'auto')}" for c in cases}))
        raise LaunchError(
            f"running {names} on {grid.name}: "
            f"{outcome.describe_failure() or 'the bytes were not verified'}"
        )
    return list(outcome.result["cases"])
