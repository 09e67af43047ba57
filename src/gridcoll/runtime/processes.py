"""The processes of one ``mpiexec`` job: the command, the rank wrapper, the clean-up.

Everything here is about processes and files, nothing about what the ranks run:

* :func:`mpiexec_command` builds the command line (the ``mpiexec`` of the ``mpich``
  wheel by default, :func:`default_mpiexec`; oversubscription allowed,
  :data:`OVERSUBSCRIBE_ENV`; Hydra told not to kill the job when one rank exits);
* :data:`RANK_WRAPPER` runs each rank (:func:`wrap_ranks`) and records how it ended,
  which :func:`read_procs` and :func:`describe_exits` read back;
* :class:`LaunchedJob` starts the job and, however the launch ends, stops it and removes
  what it left.

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
files.

The job supervisor (:mod:`gridcoll.runtime.supervisor`) drives this module.
"""

from __future__ import annotations

import contextlib
import functools
import glob
import itertools
import json
import os
import shutil
import signal
import subprocess
import sys
import sysconfig
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from gridcoll.errors import LaunchError
from gridcoll.runtime import watchdog as _watchdog
from gridcoll.runtime.netns import Network, rank_prefix

__all__ = [
    "ENV_LAUNCH",
    "OVERSUBSCRIBE_ENV",
    "RANK_WRAPPER",
    "LaunchedJob",
    "default_mpiexec",
    "describe_exit",
    "describe_exits",
    "exit_of",
    "mpiexec_command",
    "read_lines",
    "read_procs",
    "wrap_ranks",
]

OVERSUBSCRIBE_ENV = {
    "OMPI_MCA_rmaps_base_oversubscribe": "1",  # Open MPI <= 4
    "PRTE_MCA_rmaps_default_mapping_policy": ":oversubscribe",  # Open MPI 5
}
"""Environment that lets any MPI start more ranks than cores."""


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
    nprocs: int,
    program: Sequence[str],
    *,
    mpiexec: str | None = None,
    keep_going: bool = False,
    network: Network | None = None,
) -> list[str]:
    """``[mpiexec, -n, N, (-disable-auto-cleanup,) *program]``.

    ``keep_going`` asks Hydra not to kill the other ranks when one exits with an error,
    so they can report what they were waiting for. On a namespace ``network``
    (:mod:`gridcoll.runtime.netns`) each run of ranks of one site is a section of its
    own (``-n K PREFIX program : ...``, MPMD), started in the site's namespace.
    """
    exe = mpiexec or default_mpiexec()
    cmd = [exe]
    if keep_going and _is_hydra(exe):
        cmd.append("-disable-auto-cleanup")
    words = [str(p) for p in program]
    if network is None:
        return [*cmd, "-n", str(nprocs), *words]
    if nprocs != len(network.ranks):
        raise LaunchError(
            f"namespace network {network.name!r} has {len(network.ranks)} ranks; "
            f"cannot start {nprocs}"
        )
    sites = [network.site_of(rank) for rank in range(nprocs)]
    for i, (site, run) in enumerate(itertools.groupby(sites)):
        cmd += ([":"] if i else []) + ["-n", str(len(list(run))), *rank_prefix(site), *words]
    return cmd


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

RANK_WRAPPER = r'''"""gridcoll: run one rank of a launch and note how it ended (processes.py)."""
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
        events = read_lines(workdir / "procs" / f"rank-{rank}")
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


def exit_of(events: Sequence[dict]) -> dict | None:
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
            r for r in sorted(procs) if r not in faults and exit_of(procs[r]) is None
        ]
        for rank in culprits:
            events = procs.get(rank, [])
            e = exit_of(events)
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
            if rank not in explained and (e := exit_of(ev)) and e["code"]
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
    stopped = [r for r, ev in sorted(procs.items()) if exit_of(ev) is None and r not in explained]
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


def read_lines(path: Path) -> list[dict]:
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
                pids.update(e["pid"] for e in read_lines(path) if e.get("event") == "started")
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
