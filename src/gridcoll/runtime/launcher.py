"""Start MPI programs on a grid: the names of the job supervisor and its programs, in one place.

The work is done in three modules, each its own concern:

* :mod:`gridcoll.runtime.processes` - the ``mpiexec`` command, the rank wrapper, the
  job's processes and shared-memory files found, stopped and removed
  (:class:`LaunchedJob`);
* :mod:`gridcoll.runtime.supervisor` - one launch's session and environment, a job
  watched to its end (timeouts, hung ranks), rank 0's result and every rank's fate
  (:func:`run_job`, :class:`LaunchResult`), and :func:`launch` for any command
  (``gridcoll mpirun``);
* :mod:`gridcoll.runtime.worker` - the program ``gridcoll run`` and the measured
  benchmarks start on every rank, and :func:`run_batch`, :func:`run_worker`,
  :func:`measure_calls`, :func:`measure_schedules` that start it.

This module only re-exports them.
"""

from gridcoll.errors import LaunchError
from gridcoll.runtime.processes import (
    ENV_LAUNCH,
    OVERSUBSCRIBE_ENV,
    RANK_WRAPPER,
    LaunchedJob,
    default_mpiexec,
    describe_exit,
    describe_exits,
    mpiexec_command,
    read_procs,
    wrap_ranks,
)
from gridcoll.runtime.supervisor import (
    STARTUP_S,
    LaunchResult,
    RankReport,
    launch,
    run_job,
    session,
    watch,
)
from gridcoll.runtime.worker import (
    Batch,
    measure_calls,
    measure_schedule,
    measure_schedules,
    run_batch,
    run_worker,
)

__all__ = [
    "ENV_LAUNCH",
    "OVERSUBSCRIBE_ENV",
    "RANK_WRAPPER",
    "STARTUP_S",
    "Batch",
    "LaunchError",
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
    "run_batch",
    "run_job",
    "run_worker",
    "session",
    "watch",
    "wrap_ranks",
]
