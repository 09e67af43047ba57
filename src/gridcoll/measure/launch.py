"""Start a measurement job under ``mpiexec`` on an (emulated) grid and watch it.

The job supervisor of ``gridcoll run`` (:mod:`gridcoll.runtime.supervisor`: its
:func:`~gridcoll.runtime.supervisor.session`, the work directory, grid file, link state
and environment, and :func:`~gridcoll.runtime.supervisor.watch`, which stops the ranks
still running 10 s after the first one failed), with the measurement worker
(:mod:`gridcoll.measure.worker`) as the program: its results go to files in the work
directory, and the caller is told about every progress line while it runs
(``on_progress``). Several jobs may run in one session (:meth:`Job.run`). The job runs
in its own session: Ctrl-C (or the CLI's SIGTERM/SIGHUP, turned into the same
exception) reaches only this process, which then stops the job
(:class:`gridcoll.runtime.processes.LaunchedJob`: ``mpiexec`` and every process carrying
the launch's mark, nothing else), removes the shared-memory files it left, and
re-raises, leaving the work directory's partial results readable until the context
ends.
"""

from __future__ import annotations

import contextlib
import json
import signal
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from gridcoll.network.grid import Grid
from gridcoll.runtime.netns import Network
from gridcoll.runtime.processes import LaunchedJob, mpiexec_command
from gridcoll.runtime.supervisor import session, watch

__all__ = ["Job", "JobOutcome", "job"]

HUNG_S = 10.0
"""A rank still running this long after another reported an error is hung: stopped."""


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

    def __init__(self, workdir: Path, env: dict, grid: Grid, network: Network | None = None):
        self.workdir = workdir
        self.env = env
        self.grid = grid
        self.network = network

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
        cmd = mpiexec_command(
            self.grid.nranks, program, mpiexec=mpiexec, keep_going=True, network=self.network
        )
        err_path = self.workdir / "stderr"
        progress_path = self.workdir / "progress.jsonl"
        seen = 0

        def failed() -> bool:  # and the progress lines so far, handed on
            nonlocal seen
            seen = _follow(progress_path, seen, on_progress)
            return any(self.workdir.glob("error-*.json"))

        with (
            open(err_path, "w") as err,
            open(self.workdir / "stdout", "w") as out,
            LaunchedJob(
                cmd, self.env, self.workdir, stdout=out, stderr=err, preexec_fn=_die_with_parent
            ) as running,
        ):
            killed = watch(running, grace=HUNG_S, wall=wall_timeout, failed=failed)
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
def job(grid: Grid, *, emulate: bool = True, network: Network | None = None) -> Iterator[Job]:
    """A work directory, the grid file and the shared link state, and the environment
    every rank reads (:func:`gridcoll.runtime.supervisor.session`: the measurements run
    on the unloaded links, or on a namespace ``network``'s real ones); removed
    afterwards."""
    with session(grid, emulate=emulate, prefix="gridcoll-measure-", network=network) as (
        workdir,
        env,
    ):
        yield Job(workdir, env, grid, network)
