"""The job supervisor: start a program on every rank of a grid, watch it, report.

One launch is one :func:`session` (a fresh work directory with the grid file, the
shared link state of the WAN emulation, :mod:`~gridcoll.runtime.emulation`, and the
environment every :class:`gridcoll.Comm` reads: ``GRIDCOLL_GRID``, ``GRIDCOLL_EMULATE``,
``GRIDCOLL_LINK_STATE``, and for a program the supervisor does not know,
``GRIDCOLL_TIMEOUT`` and ``GRIDCOLL_HOST_OVERHEAD``) and one ``mpiexec`` job in it
(:mod:`~gridcoll.runtime.processes`: the command, the rank wrapper, the clean-up),
watched by :func:`watch` until it ends, fails or reaches its wall-clock limit.

* :func:`launch` runs any command, its output on this terminal (``gridcoll mpirun``);
* :func:`run_job` runs a *rank program*, one that speaks the supervisor's protocol
  below, and returns a :class:`LaunchResult`: rank 0's result and every rank's fate.
  The programs: :mod:`gridcoll.runtime.worker` (``gridcoll run``, the measured
  benchmarks), the experiment harnesses' workers (:mod:`gridcoll.experiments`);
  :mod:`gridcoll.measure.launch` runs the measurement worker in a :func:`session`,
  under :func:`watch`, with its own result files.

The protocol of a rank program. Each rank appends its progress to
``$GRIDCOLL_STATUS_DIR/rank-R`` (:class:`RankStatus`: ``joined``, ``rep``, ``done`` or
``error``); rank 0 prints one line ``GRIDCOLL-RESULT {json}`` (:data:`RESULT_PREFIX`) on
stdout; a rank that fails prints ``GRIDCOLL-ERROR {json}`` (:data:`ERROR_PREFIX`) on
stderr (:meth:`RankStatus.fail`) and exits with status 1 without finalizing MPI.

Failure behaviour: the ranks never block inside MPI, so a rank whose peer died or never
joined raises within its timeout and reports it. Hydra is told not to kill the job when
one rank exits (``-disable-auto-cleanup``), so every surviving rank gets to say what it
waited for; a rank still running ``timeout`` seconds after the first error is killed
and reported as hung. :meth:`LaunchResult.describe_failure` names each failed rank in
one line, and a result is never ``verified`` unless every rank finished with the right
bytes.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from gridcoll.errors import LaunchError
from gridcoll.network.grid import Grid
from gridcoll.network.gridfile import load_grid, save_grid
from gridcoll.network.load import LoadTrace
from gridcoll.runtime import emulation as _emu
from gridcoll.runtime import netns as _netns
from gridcoll.runtime import world as _world
from gridcoll.runtime.host import ENV_HOST_OVERHEAD, default_host_overhead
from gridcoll.runtime.netns import Network
from gridcoll.runtime.processes import (
    ENV_LAUNCH,
    OVERSUBSCRIBE_ENV,
    LaunchedJob,
    describe_exit,
    describe_exits,
    exit_of,
    mpiexec_command,
    read_lines,
    read_procs,
    wrap_ranks,
)

__all__ = [
    "ENV_STATUS_DIR",
    "ENV_TIMEOUT",
    "ERROR_PREFIX",
    "RESULT_PREFIX",
    "STARTUP_S",
    "LaunchResult",
    "RankReport",
    "RankStatus",
    "launch",
    "run_job",
    "session",
    "watch",
]

ENV_TIMEOUT = "GRIDCOLL_TIMEOUT"
"""Environment variable: the seconds a collective may go without progress."""

ENV_STATUS_DIR = "GRIDCOLL_STATUS_DIR"
"""Environment variable: directory where each rank appends its progress."""

RESULT_PREFIX = "GRIDCOLL-RESULT "
"""Rank 0's result line on stdout: the prefix, then one JSON object."""

ERROR_PREFIX = "GRIDCOLL-ERROR "
"""A failed rank's line on stderr: the prefix, then ``{"rank", "type", "message", "peer"}``."""

STARTUP_S = 30.0
"""Wall-clock allowance for starting the ranks (plus 2 s per rank), on top of the runs."""

GRACE_S = 5.0
"""How long past its timeout a rank may keep running after another rank failed."""


# -- the rank's side of the protocol -------------------------------------------------------


class RankStatus:
    """A rank's progress lines in ``$GRIDCOLL_STATUS_DIR/rank-R`` (none if unset)."""

    def __init__(self, rank: int):
        directory = os.environ.get(ENV_STATUS_DIR)
        self.path = Path(directory) / f"rank-{rank}" if directory else None
        self.rank = rank

    def write(self, event: str, **fields: object) -> None:
        """Append one event (``joined``, ``rep``, ``done``, ``error``) with ``fields``."""
        if self.path is None:
            return
        line = json.dumps({"event": event, "rank": self.rank, "pid": os.getpid(), **fields})
        with open(self.path, "a") as f:
            f.write(line + "\n")

    def fail(self, kind: str, message: str, peer: int | None = None) -> None:
        """This rank's failure, for the supervisor: a status line and an error line."""
        info = {"rank": self.rank, "type": kind, "message": " ".join(message.split()), "peer": peer}
        self.write("error", **{k: v for k, v in info.items() if k != "rank"})
        sys.stderr.write(ERROR_PREFIX + json.dumps(info) + "\n")
        sys.stderr.flush()
        sys.stdout.flush()

    @staticmethod
    def result(result: dict) -> None:
        """Rank 0's result line on stdout."""
        sys.stdout.write(RESULT_PREFIX + json.dumps(result) + "\n")
        sys.stdout.flush()


# -- one launch's files and environment -------------------------------------------------


@contextlib.contextmanager
def session(
    grid: Grid,
    *,
    emulate: bool,
    timeout: float | None = None,
    status: bool = False,
    host_overhead: float | None = None,
    load: LoadTrace | None = None,
    extra_env: dict[str, str] | None = None,
    prefix: str = "gridcoll-launch-",
    network: Network | None = None,
) -> Iterator[tuple[Path, dict[str, str]]]:
    """A temporary directory with the grid file (and status dir), the link state, the env
    (``extra_env`` added last).

    On a namespace ``network`` (:mod:`gridcoll.runtime.netns`) the WAN is real: no
    emulation, MPICH's TCP path between the ranks (:data:`netns.MPI_ENV`), and ``load``
    changes the shapers' rates while the block runs (:func:`netns.driving`).

    With ``load`` (checked against ``grid`` first) and the emulation on, the trace is
    saved beside the grid file and its time 0 is ``time.monotonic()`` now, just before
    mpiexec starts (``GRIDCOLL_LOAD``, ``GRIDCOLL_LOAD_T0``)."""
    if load is not None:
        load.check(grid)
    emulate = emulate and network is None
    workdir = Path(tempfile.mkdtemp(prefix=prefix))
    link_state = None
    try:
        grid_file = workdir / "grid.json"
        save_grid(grid, grid_file)
        env = dict(os.environ)
        env.update(OVERSUBSCRIBE_ENV)
        env["PYTHONUNBUFFERED"] = "1"
        env[ENV_LAUNCH] = str(workdir)
        env[_emu.ENV_GRID] = str(grid_file)
        env[_emu.ENV_EMULATE] = "1" if emulate else "0"
        env.pop(_emu.ENV_LINK_STATE, None)
        for name in (_emu.ENV_LOAD, _emu.ENV_LOAD_T0):
            env.pop(name, None)
        if emulate:
            link_state = _emu.create_link_state(load_grid(grid_file))
            env[_emu.ENV_LINK_STATE] = str(link_state)
            if load is not None and load.loads:
                trace_file = workdir / "load.json"
                trace_file.write_text(json.dumps(load.to_json()))
                env[_emu.ENV_LOAD] = str(trace_file)
                env[_emu.ENV_LOAD_T0] = repr(time.monotonic())
        if timeout is not None:
            env[ENV_TIMEOUT] = repr(float(timeout))
        if host_overhead is None and network is not None and ENV_HOST_OVERHEAD not in env:
            # the ranks plan with TCP's per-message cost, which they cannot tell apart
            host_overhead = default_host_overhead(grid.nranks, emulated=False, tcp=True)
        if host_overhead is not None:
            env[ENV_HOST_OVERHEAD] = repr(float(host_overhead))
        env.pop(ENV_STATUS_DIR, None)
        if network is not None:
            env.update(_netns.MPI_ENV)
        env.update(extra_env or {})
        if status:
            (workdir / "status").mkdir()
            env[ENV_STATUS_DIR] = str(workdir / "status")
        if network is not None and load is not None and load.loads:
            with _netns.driving(network, load):  # time 0 now, as the emulator's
                yield workdir, env
        else:
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
    on_failure: Callable[[str], None] | None = None,
    load: LoadTrace | None = None,
    world: bool = False,
    network: Network | None = None,
) -> int:
    """Run ``program`` under ``mpiexec`` on ``grid`` (output goes to this terminal).

    Every ``gridcoll.Comm(MPI.COMM_WORLD)`` inside finds the grid and the emulation by
    itself (and plans with ``host_overhead`` if given). Returns mpiexec's exit status.
    If the job fails, ``on_failure`` gets one paragraph naming the ranks that died and
    how (:func:`describe_exits`). However the call ends, the job's processes and files
    are gone when it returns or raises (:class:`LaunchedJob`). ``load``: cross traffic
    on the emulated links (:mod:`gridcoll.network.load`), time 0 at the launch.
    ``world``: every Python process of the job makes ``MPI.COMM_WORLD`` a
    ``gridcoll.Comm`` when it imports ``mpi4py.MPI`` (``GRIDCOLL_WORLD=1`` and
    gridcoll's ``sitecustomize`` first on ``PYTHONPATH``,
    :func:`gridcoll.runtime.world.environment`). ``network``: run on a namespace
    network instead of the emulation (:mod:`gridcoll.runtime.netns`).
    """
    n = grid.nranks if nprocs is None else nprocs
    if n != grid.nranks:
        raise LaunchError(f"grid {grid.name!r} has {grid.nranks} ranks; cannot start {n}")
    with session(
        grid,
        emulate=emulate,
        timeout=timeout,
        status=False,
        host_overhead=host_overhead,
        load=load,
        extra_env=_world.environment() if world else None,
        network=network,
    ) as (workdir, env):
        cmd = mpiexec_command(n, wrap_ranks(program, workdir), mpiexec=mpiexec, network=network)
        with LaunchedJob(cmd, env, workdir) as job:
            while job.poll(wait=0.2) is None:
                pass
        code = job.returncode
        if code != 0 and on_failure is not None:
            on_failure(describe_exits(read_procs(workdir, n), n, code))
    return code


# -- a rank program's results and every rank's fate ------------------------------------


@dataclass(frozen=True)
class RankReport:
    """What became of one rank of a :func:`run_job` launch.

    ``state``: ``done``; ``error`` (it raised: ``message``, and ``peer`` is the rank it
    waited for, if any); ``died`` (it exited without a word); ``hung`` (still running
    after the others had failed or finished: killed); ``never-started``.
    ``exit`` says how a rank's process ended when the rank wrapper saw it (``exited
    with status 3``, ``killed by signal 9, SIGKILL``); ``joined`` is False for a rank
    that never reached the collective (no ``joined`` status line).
    """

    rank: int
    state: str
    message: str = ""
    peer: int | None = None
    exit: str = ""
    joined: bool = True

    def what(self) -> str:
        """What became of a rank at fault, as a clause: ``died (exited with status 3)
        before joining the collective, ...``; empty for ``done`` and ``error``."""
        if self.state == "died":
            how = f"died ({self.exit})" if self.exit else "exited"
            when = "before joining the collective" if not self.joined else "before finishing"
            return f"{how} {when}, without reporting an error"
        if self.state == "hung":
            if not self.joined:
                return (
                    "never joined the collective: it was still running after the others "
                    "had stopped (killed)"
                )
            return "was still running after the others had stopped (killed)"
        if self.state == "never-started":
            return "never started (no status)"
        return ""


@dataclass
class LaunchResult:
    """The outcome of :func:`run_job`."""

    command: list[str]
    returncode: int | None
    stdout: str
    stderr: str
    result: dict | None
    ranks: list[RankReport] = field(default_factory=list)
    killed: bool = False
    """True when the supervisor had to kill the job (hung ranks or wall-clock limit)."""

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

    def require_verified(self, what: str) -> None:
        """Raise :class:`LaunchError` naming ``what`` ran unless :attr:`verified`."""
        if not self.verified:
            reason = self.describe_failure() or "the bytes were not verified"
            raise LaunchError(f"{what}: {reason}")

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
        parts = [
            f"rank {r.rank} failed: it {r.what()}"
            for r in self.ranks
            if r.state in ("died", "hung", "never-started")
        ]
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
        if path.exists():
            out[rank] = read_lines(path)
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


def _reports(
    status: dict[int, list[dict]],
    nranks: int,
    alive: set[int],
    procs: dict[int, list[dict]] | None = None,
) -> list[RankReport]:
    """Each rank's fate from its status lines (the worker's) and, if given, the rank
    wrapper's records (``procs``: it started; how its process ended). ``alive``: the
    ranks still running when the supervisor killed the job."""
    procs = procs or {}
    reports = []
    for rank in range(nranks):
        events = status.get(rank) or []
        ended = exit_of(procs.get(rank, ()))
        how = describe_exit(ended["code"]) if ended is not None else ""
        joined = any(e.get("event") == "joined" for e in events)
        error = next((e for e in events if e.get("event") == "error"), None)
        if not events and rank not in procs:
            reports.append(RankReport(rank, "never-started", joined=False))
        elif error is not None:
            reports.append(
                RankReport(rank, "error", error.get("message", ""), error.get("peer"), how)
            )
        elif events and events[-1].get("event") == "done":
            reports.append(RankReport(rank, "done", exit=how))
        else:
            state = "hung" if rank in alive else "died"
            reports.append(RankReport(rank, state, exit=how, joined=joined))
    return reports


def _running(status: dict[int, list[dict]], procs: dict[int, list[dict]]) -> set[int]:
    """The ranks still running: not done, no error, and their process alive."""
    alive = set()
    for rank in set(status) | set(procs):
        events = status.get(rank) or []
        if events and events[-1].get("event") in ("done", "error"):
            continue
        pids = {e.get("pid") for e in events}
        started = procs.get(rank, [])
        if exit_of(started) is None:
            pids |= {e.get("pid") for e in started if e.get("event") == "started"}
        if any(_alive(pid) for pid in pids):
            alive.add(rank)
    return alive


def watch(
    job: LaunchedJob,
    *,
    grace: float,
    wall: float | None,
    failed: Callable[[], bool],
    on_stop: Callable[[], None] | None = None,
) -> bool:
    """Wait for ``job``; stop it ``grace`` seconds after ``failed()`` first holds (the
    ranks still running then are hung), or at the ``wall`` limit (None: none).

    ``failed`` is asked every 0.1 s until it holds (it may report progress too);
    ``on_stop`` runs just before the job is stopped. Returns whether it was stopped.
    """
    deadline = None if wall is None else time.monotonic() + wall
    first_error = None
    while job.poll(wait=0.1) is None:
        now = time.monotonic()
        if first_error is None and failed():
            first_error = now
        late = deadline is not None and now > deadline
        if late or (first_error is not None and now - first_error > grace):
            if on_stop is not None:
                on_stop()
            job.stop()
            return True
    return False


def run_job(
    grid: Grid,
    program: list[str],
    *,
    timeout: float,
    wall: float,
    emulate: bool = True,
    mpiexec: str | None = None,
    on_progress: Callable[[int], None] | None = None,
    load: LoadTrace | None = None,
    extra_env: dict[str, str] | None = None,
    network: Network | None = None,
) -> LaunchResult:
    """Run a rank ``program`` (the protocol in the module docstring) on every rank of
    ``grid``: ``timeout`` is the ranks' per-call timeout (a rank still running
    ``timeout`` + :data:`GRACE_S` after the first error is hung), ``wall`` the job's
    limit; ``on_progress(n)`` is called as rank 0 completes its ``n``-th repetition;
    ``network``: a namespace network instead of the emulation."""
    n = grid.nranks
    with session(
        grid,
        emulate=emulate,
        timeout=timeout,
        status=True,
        load=load,
        extra_env=extra_env,
        network=network,
    ) as (workdir, env):
        cmd = mpiexec_command(
            n, wrap_ranks(program, workdir), mpiexec=mpiexec, keep_going=True, network=network
        )
        out_path, err_path = workdir / "stdout", workdir / "stderr"
        progress = _Progress(workdir, n, on_progress)
        with (
            open(out_path, "w") as out,
            open(err_path, "w") as err,
            LaunchedJob(cmd, env, workdir, stdout=out, stderr=err) as job,
        ):
            killed = watch(
                job,
                grace=timeout + GRACE_S,
                wall=wall,
                failed=progress.failed,
                on_stop=progress.note_alive,
            )
        stdout, stderr = out_path.read_text(), err_path.read_text()
        status = _read_status(workdir / "status", n)
        reports = _reports(status, n, progress.alive, read_procs(workdir, n))
    return LaunchResult(
        cmd, job.returncode, stdout, stderr, _result(stdout), _errors(stderr, reports), killed
    )


class _Progress:
    """What :func:`run_job` reads from the status files while the job runs."""

    def __init__(self, workdir: Path, nranks: int, on_progress: Callable[[int], None] | None):
        self.workdir, self.nranks, self.on_progress = workdir, nranks, on_progress
        self.done = 0
        self.alive: set[int] = set()

    def failed(self) -> bool:
        """Whether a rank reported an error (and rank 0's progress, reported)."""
        status = _read_status(self.workdir / "status", self.nranks)
        if any(e.get("event") == "error" for ev in status.values() for e in ev):
            return True
        reps = sum(1 for e in status.get(0, ()) if e.get("event") == "rep")
        if self.on_progress is not None and reps != self.done:
            self.done = reps
            self.on_progress(reps)
        return False

    def note_alive(self) -> None:
        """The ranks still running as the job is stopped: hung."""
        status = _read_status(self.workdir / "status", self.nranks)
        self.alive = _running(status, read_procs(self.workdir, self.nranks))


def _result(stdout: str) -> dict | None:
    """Rank 0's result line, if it printed one."""
    result = None
    for line in stdout.splitlines():
        if line.startswith(RESULT_PREFIX):
            result = json.loads(line[len(RESULT_PREFIX) :])
    return result


def _errors(stderr: str, reports: list[RankReport]) -> list[RankReport]:
    """``reports`` with the error lines of ``stderr`` (one counts even if its status line
    was lost)."""
    n = len(reports)
    for line in stderr.splitlines():
        if line.startswith(ERROR_PREFIX):
            info = json.loads(line[len(ERROR_PREFIX) :])
            rank = info.get("rank")
            if isinstance(rank, int) and 0 <= rank < n and reports[rank].state != "error":
                reports[rank] = RankReport(
                    rank, "error", info.get("message", ""), info.get("peer"), reports[rank].exit
                )
    return reports
