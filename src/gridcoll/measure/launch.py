"""Start a measurement job under ``mpiexec`` on an (emulated) grid and watch it.

Like :func:`gridcoll.runtime.launcher.run_worker`, but the job is
:mod:`gridcoll.measure.worker`, its output goes to files, and the caller is told about
every progress line while it runs (``on_progress``). The job runs in its own session:
Ctrl-C (or the CLI's SIGTERM/SIGHUP, turned into the same exception) reaches only this
process, which then stops the job (:class:`gridcoll.runtime.launcher.LaunchedJob`:
``mpiexec`` and every process carrying the launch's mark, nothing else), removes the
shared-memory files it left, and re-raises, leaving the work directory's partial
results readable until the context ends.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from gridcoll.network.grid import Grid
from gridcoll.network.gridfile import save_grid
from gridcoll.runtime import emulation as emu
from gridcoll.runtime.launcher import (
    ENV_LAUNCH,
    OVERSUBSCRIBE_ENV,
    LaunchedJob,
    mpiexec_command,
)

__all__ = ["Job", "JobOutcome", "job"]


@dataclass
class JobOutcome:
    """What a finished (or stopped) job left."""

    returncode: int | None
    result: dict | None
    errors: list[dict] = field(default_factory=list)
    partial: dict[str, dict] = field(default_factory=dict)
    stderr: str = ""
    killed: bool = False

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and self.result is not None and not self.errors

    def describe_failure(self) -> str:
        """One line: which rank said what, or how the job ended."""
        if self.errors:
            first = sorted(self.errors, key=lambda e: e.get("rank", 0))[0]
            return f"rank {first.get('rank')}: {first.get('message')}"
        if self.killed:
            return "the job was stopped"
        tail = " | ".join(self.stderr.strip().splitlines()[-3:])
        return f"mpiexec exited with status {self.returncode}" + (f" ({tail})" if tail else "")


class Job:
    """A measurement job's files: ``workdir`` with the job, progress and results."""

    def __init__(self, workdir: Path, env: dict, grid: Grid):
        self.workdir = workdir
        self.env = env
        self.grid = grid

    def run(
        self,
        spec: dict,
        *,
        on_progress: Callable[[dict], None] | None = None,
        wall_timeout: float | None = None,
        mpiexec: str | None = None,
    ) -> JobOutcome:
        """Run the worker with ``spec`` (``mode`` and its arguments) on every rank."""
        spec = dict(spec, workdir=str(self.workdir))
        job_file = self.workdir / "job.json"
        job_file.write_text(json.dumps(spec))
        program = [sys.executable, "-m", "gridcoll.measure.worker", str(job_file)]
        cmd = mpiexec_command(self.grid.nranks, program, mpiexec=mpiexec, keep_going=True)
        err_path = self.workdir / "stderr"
        progress_path = self.workdir / "progress.jsonl"
        deadline = None if wall_timeout is None else time.monotonic() + wall_timeout
        with (
            open(err_path, "w") as err,
            open(self.workdir / "stdout", "w") as out,
            LaunchedJob(
                cmd, self.env, self.workdir, stdout=out, stderr=err, preexec_fn=_die_with_parent
            ) as running,
        ):
            seen, killed, first_error = 0, False, None
            while running.poll(wait=0.1) is None:
                seen = _follow(progress_path, seen, on_progress)
                now = time.monotonic()
                if first_error is None and any(self.workdir.glob("error-*.json")):
                    first_error = now
                hung = first_error is not None and now - first_error > 10.0
                if hung or (deadline is not None and now > deadline):
                    running.stop()
                    killed = True
                    break
            _follow(progress_path, seen, on_progress)
        return self.outcome(running.returncode, killed)

    def outcome(self, returncode: int | None, killed: bool = False) -> JobOutcome:
        """Read the result, the errors and the partial results left in ``workdir``."""
        result = _read(self.workdir / "result.json")
        errors = [e for p in sorted(self.workdir.glob("error-*.json")) if (e := _read(p))]
        partial = {
            p.stem.removeprefix("partial-"): d
            for p in sorted(self.workdir.glob("partial-*.json"))
            if (d := _read(p))
        }
        stderr = (self.workdir / "stderr").read_text() if (self.workdir / "stderr").exists() else ""
        return JobOutcome(returncode, result, errors, partial, stderr, killed)


def _die_with_parent() -> None:
    """In the child: get SIGTERM if this process dies (so a killed ``gridcoll measure``
    leaves no job behind; Linux only)."""
    try:
        import ctypes

        ctypes.CDLL(None).prctl(1, signal.SIGTERM, 0, 0, 0)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def _read(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):
        return None


def _follow(path: Path, seen: int, on_progress) -> int:
    """Hand the progress lines after the first ``seen`` to ``on_progress``."""
    if on_progress is None or not path.exists():
        return seen
    lines = path.read_text().splitlines()
    for line in lines[seen:]:
        with contextlib.suppress(json.JSONDecodeError):
            on_progress(json.loads(line))
    return len(lines)


@contextlib.contextmanager
def job(grid: Grid, *, emulate: bool = True) -> Iterator[Job]:
    """A work directory, the grid file and the shared link state, and the environment
    every rank reads; removed afterwards."""
    workdir = Path(tempfile.mkdtemp(prefix="gridcoll-measure-"))
    link_state = None
    try:
        grid_file = workdir / "grid.json"
        save_grid(grid, grid_file)
        env = dict(os.environ)
        env.update(OVERSUBSCRIBE_ENV)
        env["PYTHONUNBUFFERED"] = "1"
        env[ENV_LAUNCH] = str(workdir)  # how LaunchedJob finds every process of the job
        env[emu.ENV_GRID] = str(grid_file)
        env[emu.ENV_EMULATE] = "1" if emulate else "0"
        for name in (emu.ENV_LINK_STATE, emu.ENV_LOAD, emu.ENV_LOAD_T0):
            env.pop(name, None)  # measurements run on the unloaded links
        if emulate and not grid.is_single_cluster:
            link_state = emu.create_link_state(grid)
            env[emu.ENV_LINK_STATE] = str(link_state)
        yield Job(workdir, env, grid)
    finally:
        if link_state is not None:
            with contextlib.suppress(OSError):
                link_state.unlink()
        shutil.rmtree(workdir, ignore_errors=True)
