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
  :func:`measure_schedules` several in one launch (``gridcoll demo``, the benchmarks);
* :func:`run_job` runs any worker program that reports as the worker does (the
  experiment harnesses' workers, :mod:`gridcoll.experiments`).

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

Nothing left behind. Hydra starts each rank in a session of its own, so the job's
process group holds ``mpiexec`` alone; every process of a launch instead carries
``GRIDCOLL_LAUNCH=<its work directory>`` in its environment, and :class:`LaunchedJob`
finds them by it. Each rank runs under a small wrapper (:data:`RANK_WRAPPER`) that
records the rank's process id and how it ended (exit status or signal) in
``<workdir>/procs/rank-R``: that is how a dead rank is named, not by its PID. While the
job runs the launcher notes the shared-memory files its ranks map (MPICH's
``/dev/shm/mpich_shm_*``, gridcoll's doorbells); however the launch ends (done, failed,
an exception, SIGINT/SIGTERM/SIGHUP turned into one by the CLI), it stops ``mpiexec``
(SIGTERM, then SIGKILL), kills any process of the job still alive, and removes those
files, the link state and the work directory.
"""

from __future__ import annotations

import contextlib
import functools
import glob
import json
import os
import shutil
import signal
import subprocess
import sys
import sysconfig
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from gridcoll.errors import LaunchError
from gridcoll.network.grid import Grid
from gridcoll.network.gridfile import load_grid, save_grid
from gridcoll.network.load import LoadTrace
from gridcoll.runtime import emulation as _emu
from gridcoll.runtime import watchdog as _watchdog
from gridcoll.runtime import world as _world
from gridcoll.runtime.host import ENV_HOST_OVERHEAD
from gridcoll.runtime.worker import ENV_STATUS_DIR, ERROR_PREFIX, RESULT_PREFIX

__all__ = [
    "ENV_LAUNCH",
    "RANK_WRAPPER",
    "LaunchResult",
    "LaunchedJob",
    "RankReport",
    "default_mpiexec",
    "describe_exit",
    "describe_exits",
    "launch",
    "measure_calls",
    "measure_schedule",
    "measure_schedules",
    "mpiexec_command",
    "read_procs",
    "run_job",
    "run_worker",
    "wrap_ranks",
]

ENV_TIMEOUT = "GRIDCOLL_TIMEOUT"

OVERSUBSCRIBE_ENV = {
    "OMPI_MCA_rmaps_base_oversubscribe": "1",  # Open MPI <= 4
    "PRTE_MCA_rmaps_default_mapping_policy": ":oversubscribe",  # Open MPI 5
}
"""Environment that lets any MPI start more ranks than cores."""

STARTUP_S = 30.0
"""Wall-clock allowance for starting the ranks (plus 2 s per rank), on top of the runs."""


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


# -- the job's processes and files: found by the launch's mark, stopped, removed ---------

ENV_LAUNCH = _watchdog.ENV_LAUNCH
"""The launch's work directory, in the environment of every process of its job: Hydra
puts each rank in a session of its own, so this mark (not a process group) is what
finds all of them."""

SHM_DIR = Path("/dev/shm")
"""Where MPICH and gridcoll put their shared-memory files (POSIX ``shm_open``)."""

SHM_PREFIXES = ("mpich_shm_", "gridcoll-")
"""Names of the shared-memory files a launch may remove: MPICH's segments and
gridcoll's own (link state, doorbells); nothing else a program creates is touched."""

HYDRA_TOPOLOGY_FILES = "/tmp/hydra_hwloc_xmlfile_*"
"""The hwloc topology file MPICH's Hydra ``mpiexec`` writes (always under ``/tmp``) and
leaves behind when its job aborts or is killed; a launch removes the ones created
while its job ran that no process holds open."""

DEFERRED_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
"""Held back while a job is being stopped and cleaned up, then delivered."""

TERM_GRACE_S = 3.0
"""After SIGTERM, how long ``mpiexec`` gets to stop its ranks before SIGKILL."""

KILL_WAIT_S = 5.0
"""How long the launcher keeps killing the job's processes until none is left."""

SCAN_S = (0.5, 5.0)
"""While the job runs, how often the launcher notes the shared-memory files its ranks
map: every 0.5 s until it has seen an MPICH segment (it lives from ``MPI_Init`` to
``MPI_Finalize``, one per job and host), then every 5 s. A scan reads ``/proc/PID/maps``
of each rank (about 0.5 ms each), so it costs the timed runs nothing measurable."""

RANK_WRAPPER = r'''"""gridcoll: run one rank of a launch and note how it ended (see launcher.py)."""
import json, os, signal, sys, time

rank = next((os.environ[k] for k in ("PMI_RANK", "OMPI_COMM_WORLD_RANK", "PMIX_RANK")
             if os.environ.get(k, "").isdigit()), "pid%d" % os.getpid())
path = os.path.join(os.environ["GRIDCOLL_LAUNCH"], "procs", "rank-%s" % rank)


def note(**fields):
    with open(path, "a") as f:
        f.write(json.dumps(dict(fields, wrapper=os.getpid(), t=time.time())) + "\n")


child = os.fork()
if child == 0:
    try:
        os.execvp(sys.argv[1], sys.argv[1:])
    except OSError as err:
        sys.stderr.write("gridcoll: cannot run %r: %s\n" % (sys.argv[1], err.strerror))
    os._exit(127)
note(event="started", pid=child)


def forward(signum, frame):
    try:
        os.kill(child, signum)
    except ProcessLookupError:
        pass


FORWARDED = [signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1,
             signal.SIGUSR2]
for sig in FORWARDED:
    signal.signal(sig, forward)
status = os.waitpid(child, 0)[1]
for sig in FORWARDED:  # the rank is gone: mpiexec's notices (SIGUSR1) must not end us
    signal.signal(sig, signal.SIG_IGN)
code = os.waitstatus_to_exitcode(status)
note(event="exit", pid=child, code=code)
if code < 0:  # end as the rank did, so mpiexec reports the same
    try:
        signal.signal(-code, signal.SIG_DFL)
    except (OSError, ValueError):  # SIGKILL, SIGSTOP: their action cannot be changed
        pass
    os.kill(os.getpid(), -code)
    os._exit(128 - code)  # a signal whose default is not to end the process
os._exit(code)  # no interpreter shutdown, which would restore the default handlers
'''
"""What runs each rank (``python -E -S rank.py PROGRAM...``, written into the launch's
work directory): it forks and execs the rank's program unchanged (same environment,
file descriptors and process group, so MPI and ``mpiexec``'s clean-up see no
difference), forwards the catchable signals, and appends ``started`` (the program's
PID) and ``exit`` (``code``: the exit status, or minus the signal that ended it) to
``procs/rank-R``. Standard library only, so it starts in a tenth of a second."""


def wrap_ranks(program: Sequence[str], workdir: Path) -> list[str]:
    """``program`` run under :data:`RANK_WRAPPER` (written into ``workdir``)."""
    wrapper = workdir / "rank.py"
    if not wrapper.exists():
        wrapper.write_text(RANK_WRAPPER)
    (workdir / "procs").mkdir(exist_ok=True)
    return [sys.executable, "-E", "-S", str(wrapper), *(str(p) for p in program)]


def read_procs(workdir: Path, nranks: int) -> dict[int, list[dict]]:
    """The wrapper's records per rank (``started``, ``exit``); ranks without any are absent."""
    out: dict[int, list[dict]] = {}
    for rank in range(nranks):
        events = _read_lines(workdir / "procs" / f"rank-{rank}")
        if events:
            out[rank] = events
    return out


def describe_exit(code: int) -> str:
    """``exited with status 3`` or ``killed by signal 9, SIGKILL``, from a wrapper's
    ``code`` (minus the signal number for a signal, as ``waitstatus_to_exitcode``)."""
    if code >= 0:
        return f"exited with status {code}"
    try:
        name = signal.Signals(-code).name
    except ValueError:
        return f"killed by signal {-code}"
    return f"killed by signal {-code}, {name}"


def _exit_of(events: Sequence[dict]) -> dict | None:
    return next((e for e in reversed(events) if e.get("event") == "exit"), None)


def describe_exits(procs: dict[int, list[dict]], nranks: int, returncode: int | None) -> str:
    """Which ranks ended the job, for ``gridcoll mpirun``. The wrapper's records name
    the rank, never only a PID.

    When gridcoll collectives failed, the ranks they waited for come first (the
    ``fault`` records: :func:`gridcoll.runtime.watchdog.note_fault`): each died, exited
    without joining, or never joined (alive until the job was stopped); a fault that
    names no peer (the MPI library's own collective) points at every rank that
    reported none. Then the failing ranks, the other ranks that exited with a non-zero
    status or were killed by a signal (first one first), those that ended the job
    (``abort`` records: :func:`gridcoll.runtime.watchdog.abort_job`), those stopped
    with the job (no exit of their own: ``mpiexec`` killed them with their wrapper),
    and those that never started."""
    faults = {rank: [e for e in ev if e.get("event") == "fault"] for rank, ev in procs.items()}
    faults = {rank: f for rank, f in faults.items() if f}
    parts, culprits = [], []
    if faults:
        first = min(e.get("t", 0.0) for f in faults.values() for e in f)
        named = {p for f in faults.values() for e in f for p in e.get("peers", [])}
        culprits = sorted(named - set(faults)) or [
            r for r in sorted(procs) if r not in faults and _exit_of(procs[r]) is None
        ]
        for rank in culprits:
            events = procs.get(rank, [])
            e = _exit_of(events)
            left = next((x for x in events if x.get("event") == "exiting"), None)
            if e is not None and e["t"] <= first:
                how = f"died ({describe_exit(e['code'])})" if e["code"] else "exited early"
            elif left is not None and left["t"] <= first:
                how = "left the program (it reached its exit) without joining the collective"
            elif rank in procs:
                how = "never joined the collective (alive until the job was stopped)"
            else:
                how = "never started"
            parts.append(f"rank {rank} {how}")
        errors = sorted({e.get("error", "an error") for f in faults.values() for e in f})
        parts.append(f"{_ranks(sorted(faults))} failed waiting ({', '.join(errors)})")
    explained = set(culprits) | set(faults)
    died = sorted(
        (
            (e["t"], rank, e)
            for rank, ev in procs.items()
            if rank not in explained and (e := _exit_of(ev)) and e["code"]
        ),
        key=lambda item: (item[0], item[1]),
    )
    dead = [f"rank {rank} died ({describe_exit(e['code'])})" for _, rank, e in died]
    if len(dead) > 1:
        dead[0] += " first"
    parts += dead
    aborted = [r for r, ev in sorted(procs.items()) if any(e.get("event") == "abort" for e in ev)]
    if aborted:
        parts.append(f"{_ranks(aborted)} ended the job (MPI_Abort)")
    stopped = [r for r, ev in sorted(procs.items()) if _exit_of(ev) is None and r not in explained]
    if (died or faults) and stopped:
        parts.append(f"{_ranks(stopped)} stopped with the job")
    never = [r for r in range(nranks) if r not in procs and r not in explained]
    if never and len(never) < nranks:
        parts.append(f"{_ranks(never)} never started")
    parts.append(f"mpiexec exited with status {returncode}")
    return "; ".join(parts)


def _ranks(ranks: Sequence[int]) -> str:
    if len(ranks) == 1:
        return f"rank {ranks[0]}"
    return "ranks " + ", ".join(str(r) for r in ranks)


def _read_lines(path: Path) -> list[dict]:
    try:
        text = path.read_text()
    except OSError:
        return []
    events = []
    for line in text.splitlines():
        with contextlib.suppress(json.JSONDecodeError):
            events.append(json.loads(line))
    return events


def _pids() -> list[int]:
    try:
        return [int(n) for n in os.listdir("/proc") if n.isdigit()]
    except OSError:
        return []


def _marked(marker: bytes) -> set[int]:
    """Every live process whose environment holds ``marker`` (``NAME=value``)."""
    found = set()
    me = os.getpid()
    for pid in _pids():
        if pid == me:
            continue
        try:
            environ = Path(f"/proc/{pid}/environ").read_bytes()
        except OSError:  # gone, or not ours to read
            continue
        if marker in environ.split(b"\0"):
            found.add(pid)
    return found


def _mapped_shm(pid: int) -> set[Path]:
    """The files in /dev/shm that process ``pid`` maps (not yet unlinked)."""
    try:
        text = Path(f"/proc/{pid}/maps").read_text()
    except OSError:
        return set()
    if str(SHM_DIR) + "/" not in text:
        return set()
    out = set()
    for line in text.splitlines():
        fields = line.split(maxsplit=5)
        path = fields[5] if len(fields) == 6 else ""
        if path.startswith(str(SHM_DIR) + "/") and not path.endswith(" (deleted)"):
            out.add(Path(path))
    return out


def _open_files() -> set[str]:
    """The paths of the files some live process holds open (``/proc/PID/fd``)."""
    out = set()
    for pid in _pids():
        with contextlib.suppress(OSError):
            for fd in os.listdir(f"/proc/{pid}/fd"):
                with contextlib.suppress(OSError):
                    out.add(os.readlink(f"/proc/{pid}/fd/{fd}"))
    return out


def _shm_names() -> set[str]:
    try:
        return {n for n in os.listdir(SHM_DIR) if n.startswith(SHM_PREFIXES)}
    except OSError:
        return set()


class LaunchedJob:
    """One ``mpiexec`` started by a launch, everything it started, and their files.

    A context manager: on the way out, however the block ends (the job done, a failure,
    an exception such as ``KeyboardInterrupt`` or the CLI's SIGTERM/SIGHUP), every
    process of the job is stopped and reaped and the shared-memory files it left are
    removed. ``mpiexec`` runs in a session of its own, so a Ctrl-C at the terminal
    reaches only the launcher, which then stops the job itself (SIGTERM to ``mpiexec``,
    which kills its ranks and cleans up after itself; then SIGKILL to every process
    still carrying the launch's mark).

    MPICH's segments cannot be found after the fact by name (they are named after a
    hash of the job), so they are found by the job's PIDs: while the job runs,
    :meth:`poll` notes the files in ``/dev/shm`` its ranks map. At the end the noted
    files still present are removed, and so is any ``mpich_shm_*`` segment created
    since the launch started that no live process maps (a rank killed before the
    launcher looked); the doorbell files of gridcoll carry their creator's PID.
    """

    def __init__(
        self,
        cmd: Sequence[str],
        env: dict[str, str],
        workdir: Path,
        *,
        stdout=None,
        stderr=None,
        preexec_fn: Callable[[], None] | None = None,
    ):
        self.workdir = workdir
        self.marker = f"{ENV_LAUNCH}={workdir}".encode()
        if env.get(ENV_LAUNCH) != str(workdir):
            raise ValueError(f"the job's environment must set {ENV_LAUNCH}={workdir}")
        self.shm_before = _shm_names()
        self.topology_before = set(glob.glob(HYDRA_TOPOLOGY_FILES))
        self.shm: set[Path] = set()
        self.pids: set[int] = set()
        self._next_scan = 0.0
        try:
            self.proc = subprocess.Popen(
                list(cmd),
                env=env,
                stdout=stdout,
                stderr=stderr,
                start_new_session=True,
                preexec_fn=preexec_fn,
            )
        except OSError as err:
            raise LaunchError(f"cannot run {cmd[0]!r}: {err.strerror}") from err
        except BaseException:  # interrupted while starting it: it may run, unknown to Popen
            for pid in _marked(self.marker):
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
            raise

    @property
    def returncode(self) -> int | None:
        """``mpiexec``'s exit status once it has ended (negative: killed by a signal)."""
        return self.proc.returncode

    def poll(self, wait: float = 0.0) -> int | None:
        """``mpiexec``'s exit status if it has ended, else None (after waiting up to
        ``wait`` seconds); now and then (:data:`SCAN_S`) notes the files the ranks map."""
        now = time.monotonic()
        if now >= self._next_scan:
            self._note(self._rank_pids())
            seen = any(p.name.startswith("mpich_shm_") for p in self.shm)
            self._next_scan = now + SCAN_S[seen]
        if wait > 0:
            try:
                return self.proc.wait(timeout=wait)
            except subprocess.TimeoutExpired:
                return None
        return self.proc.poll()

    def _rank_pids(self) -> set[int]:
        """The ranks' PIDs from the wrapper's records, else (no wrapper) by the mark."""
        pids = set()
        procs = self.workdir / "procs"
        if procs.is_dir():
            for path in procs.iterdir():
                pids.update(e["pid"] for e in _read_lines(path) if e.get("event") == "started")
        return pids or _marked(self.marker)

    def _note(self, pids: set[int]) -> None:
        self.pids |= pids
        for pid in pids:
            self.shm |= _mapped_shm(pid)

    def stop(self) -> None:
        """Stop the whole job: SIGTERM to ``mpiexec`` (it kills its ranks), then
        SIGKILL to every process of the job still alive, until none is left or
        :data:`KILL_WAIT_S` has passed; ``mpiexec`` is reaped (no zombie)."""
        self._note(_marked(self.marker))
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.proc.pid, signal.SIGTERM)  # its own session: mpiexec alone
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout=TERM_GRACE_S)
        deadline = time.monotonic() + KILL_WAIT_S
        while True:
            left = _marked(self.marker)
            if self.proc.poll() is None:
                left.add(self.proc.pid)
            if not left or time.monotonic() > deadline:
                break
            self._note(left)
            for pid in left:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.05)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=1.0)

    def clean(self) -> None:
        """Remove the shared-memory files the job left (see the class docstring)."""
        doomed = {p for p in self.shm if p.name.startswith(SHM_PREFIXES)}
        new = _shm_names() - self.shm_before
        bells = {n for n in new for pid in self.pids if n.startswith(f"gridcoll-bells-{pid}-")}
        doomed |= {SHM_DIR / n for n in bells}
        orphans = {n for n in new if n.startswith("mpich_shm_")} - {p.name for p in doomed}
        if orphans:
            mapped = set()
            for pid in _pids():
                mapped |= {p.name for p in _mapped_shm(pid)}
            doomed |= {SHM_DIR / n for n in orphans - mapped}
        for path in doomed:
            with contextlib.suppress(OSError):
                path.unlink()
        topology = set(glob.glob(HYDRA_TOPOLOGY_FILES)) - self.topology_before
        if topology:
            for path in topology - _open_files():
                with contextlib.suppress(OSError):
                    os.unlink(path)

    def __enter__(self) -> LaunchedJob:
        return self

    def __exit__(self, *exc: object) -> None:
        with _signals_held():  # a second Ctrl-C must not cut the clean-up short
            try:
                if self.proc.poll() is None or _marked(self.marker):
                    self.stop()
            finally:
                self.clean()


@contextlib.contextmanager
def _signals_held() -> Iterator[None]:
    """Hold :data:`DEFERRED_SIGNALS` back during the block, then deliver them.

    The job's clean-up is bounded (:data:`TERM_GRACE_S` + :data:`KILL_WAIT_S`), so a
    signal that arrives meanwhile is noted and raised again after it, to whatever
    handler it was meant for (a signal ignored before stays ignored). Python runs
    handlers in the main thread only, and only there can it change them: elsewhere this
    does nothing. (Blocking the signal with ``pthread_sigmask`` would not do: another
    thread, such as a progress bar's, would take it.)"""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    pending: list[int] = []

    def hold(signum: int, frame: object) -> None:
        pending.append(signum)

    previous = {}
    for sig in DEFERRED_SIGNALS:
        if signal.getsignal(sig) not in (signal.SIG_IGN, None):
            previous[sig] = signal.signal(sig, hold)
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        for sig in dict.fromkeys(pending):
            signal.raise_signal(sig)


# -- one launch's files and environment -------------------------------------------------


@contextlib.contextmanager
def _session(
    grid: Grid,
    *,
    emulate: bool,
    timeout: float | None,
    status: bool,
    host_overhead: float | None = None,
    load: LoadTrace | None = None,
    extra_env: dict[str, str] | None = None,
):
    """A temporary directory with the grid file (and status dir), the link state, the env
    (``extra_env`` added last).

    With ``load`` (checked against ``grid`` first) and the emulation on, the trace is
    saved beside the grid file and its time 0 is ``time.monotonic()`` now, just before
    mpiexec starts (``GRIDCOLL_LOAD``, ``GRIDCOLL_LOAD_T0``)."""
    if load is not None:
        load.check(grid)
    workdir = Path(tempfile.mkdtemp(prefix="gridcoll-launch-"))
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
        if host_overhead is not None:
            env[ENV_HOST_OVERHEAD] = repr(float(host_overhead))
        env.pop(ENV_STATUS_DIR, None)
        env.update(extra_env or {})
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
    on_failure: Callable[[str], None] | None = None,
    load: LoadTrace | None = None,
    world: bool = False,
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
    :func:`gridcoll.runtime.world.environment`).
    """
    n = grid.nranks if nprocs is None else nprocs
    if n != grid.nranks:
        raise LaunchError(f"grid {grid.name!r} has {grid.nranks} ranks; cannot start {n}")
    with _session(
        grid,
        emulate=emulate,
        timeout=timeout,
        status=False,
        host_overhead=host_overhead,
        load=load,
        extra_env=_world.environment() if world else None,
    ) as (workdir, env):
        cmd = mpiexec_command(n, wrap_ranks(program, workdir), mpiexec=mpiexec)
        with LaunchedJob(cmd, env, workdir) as job:
            while job.poll(wait=0.2) is None:
                pass
        code = job.returncode
        if code != 0 and on_failure is not None:
            on_failure(describe_exits(read_procs(workdir, n), n, code))
    return code


# -- the worker: results and every rank's fate ------------------------------------------


@dataclass(frozen=True)
class RankReport:
    """What became of one rank of a :func:`run_worker` launch.

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
            out[rank] = _read_lines(path)
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
    ranks still running when the launcher killed the job."""
    procs = procs or {}
    reports = []
    for rank in range(nranks):
        events = status.get(rank) or []
        ended = _exit_of(procs.get(rank, ()))
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
        if _exit_of(started) is None:
            pids |= {e.get("pid") for e in started if e.get("event") == "started"}
        if any(_alive(pid) for pid in pids):
            alive.add(rank)
    return alive


def _supervise(
    job: LaunchedJob,
    workdir: Path,
    nranks: int,
    grace: float,
    wall: float,
    on_progress: Callable[[int], None] | None = None,
) -> tuple[bool, set[int]]:
    """Wait for the job; stop it if ranks hang after an error, or at the wall limit.

    ``on_progress(n)`` is called whenever rank 0 has finished ``n`` repetitions in all.
    Returns (killed, ranks alive when killed).
    """
    status_dir = workdir / "status"
    deadline = time.monotonic() + wall
    first_error = None
    done = 0
    while job.poll(wait=0.1) is None:
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
            alive = _running(_read_status(status_dir, nranks), read_procs(workdir, nranks))
            job.stop()
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
    load: LoadTrace | None = None,
) -> LaunchResult:
    """Run a collective ``repeat`` times on ``grid`` with :mod:`gridcoll.runtime.worker`.

    ``op`` is the collective (``nbytes``: per rank per peer for scatter, gather,
    allgather and all-to-all; ``commutative=False``: reductions of 2x2 int64 matrices,
    ``itemsize`` 32); ``cases`` instead runs several calls in one launch (dicts with
    ``op``, ``size``, ``root``, ``algo``, ``params``, ``itemsize``, ``commutative``).

    ``timeout`` bounds each call's time without progress on every rank; ``wall_timeout`` (default:
    a startup allowance plus ``repeat * timeout``) bounds the whole job. ``fail_rank``
    makes that rank exit (``fail_mode="exit"``) or never join (``"hang"``), to test the
    failure behaviour. ``host_overhead`` (seconds per message) is what the ranks plan
    with (``GRIDCOLL_HOST_OVERHEAD``); default: theirs (:mod:`gridcoll.runtime.host`).
    ``schedule_file`` may be a list: the schedules run one after the other in this one
    launch (the default wall limit then allows ``repeat * timeout`` for each).
    ``on_progress(n)`` is called as rank 0 completes its ``n``-th repetition in all.
    ``load`` puts cross traffic on the emulated links (as :func:`launch`).
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
    return run_job(
        grid,
        program,
        timeout=timeout,
        wall=wall,
        emulate=emulate,
        mpiexec=mpiexec,
        host_overhead=host_overhead,
        on_progress=on_progress,
        load=load,
    )


def run_job(
    grid: Grid,
    program: list[str],
    *,
    timeout: float,
    wall: float,
    emulate: bool = True,
    mpiexec: str | None = None,
    host_overhead: float | None = None,
    on_progress: Callable[[int], None] | None = None,
    load: LoadTrace | None = None,
    extra_env: dict[str, str] | None = None,
) -> LaunchResult:
    """Run a worker ``program`` (one that prints ``GRIDCOLL-RESULT`` at rank 0 and
    writes status lines) on every rank of ``grid``, supervised (:func:`_supervise`)."""
    n = grid.nranks
    with _session(
        grid,
        emulate=emulate,
        timeout=timeout,
        status=True,
        host_overhead=host_overhead,
        load=load,
        extra_env=extra_env,
    ) as (workdir, env):
        cmd = mpiexec_command(n, wrap_ranks(program, workdir), mpiexec=mpiexec, keep_going=True)
        out_path, err_path = workdir / "stdout", workdir / "stderr"
        with (
            open(out_path, "w") as out,
            open(err_path, "w") as err,
            LaunchedJob(cmd, env, workdir, stdout=out, stderr=err) as job,
        ):
            killed, alive = _supervise(job, workdir, n, timeout + 5.0, wall, on_progress)
        stdout, stderr = out_path.read_text(), err_path.read_text()
        reports = _reports(_read_status(workdir / "status", n), n, alive, read_procs(workdir, n))
    result = None
    for line in stdout.splitlines():
        if line.startswith(RESULT_PREFIX):
            result = json.loads(line[len(RESULT_PREFIX) :])
    for line in stderr.splitlines():  # an error line also counts if its status was lost
        if line.startswith(ERROR_PREFIX):
            info = json.loads(line[len(ERROR_PREFIX) :])
            rank = info.get("rank")
            if isinstance(rank, int) and 0 <= rank < n and reports[rank].state != "error":
                reports[rank] = RankReport(
                    rank, "error", info.get("message", ""), info.get("peer"), reports[rank].exit
                )
    return LaunchResult(cmd, job.returncode, stdout, stderr, result, reports, killed)


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
