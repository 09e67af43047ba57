"""A watchdog for blocking MPI calls: the job ends, with a reason, instead of hanging.

gridcoll's own schedules never block inside MPI: they test requests and sleep, so a
dead or absent peer raises :class:`~gridcoll.runtime.CollectiveTimeout`. The MPI
library's own collectives (the ``native`` broadcast that ``auto`` picks on one cluster)
are fastest called blocking: no request object, no test loop, the library's progress
engine waits as it was tuned to. MPI cannot cancel a blocking collective, so a peer that
never joins would hang the job; the watchdog turns that into a bounded failure: when a
guarded call outlives its timeout, it writes which rank and call it was to stderr and
aborts the job (``MPI_Abort``), which ``mpiexec`` and gridcoll's launcher report. It
waits :data:`GRACE_S` between its last words and the abort: the other ranks waiting in
the same call reach their deadlines a little later (their threads are woken at their
own times, later still on a loaded machine), and each should have said why before the
first abort ends them.

A rank launched by gridcoll (``gridcoll mpirun``, ``run``) also leaves a line about
its fault in the launch's record of that rank (:func:`note_fault`): the launcher then
names the rank that died or never joined, not only the ones that waited for it.

Arming and disarming are two stores into a list (the per-call cost is ~0.1 us; the
progress thread of non-blocking collectives arms a slot of its own); one daemon
thread per process, started with the first gridcoll collective, checks the armed call a few
times per timeout. It needs mpi4py's default thread support (``MPI_THREAD_MULTIPLE``) to
call ``MPI_Abort`` from its thread; with less, it ends the process with ``os._exit``.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from collections.abc import Callable, Sequence

ENV_LAUNCH = "GRIDCOLL_LAUNCH"
"""Environment variable: the launch directory of a job gridcoll started (its mark)."""
MAIN, PROGRESS = 0, 1
"""The watchdog's slots: the caller's thread, the progress thread."""
ABORT_CODE = 70
"""Exit code of a job the watchdog ended (``EX_SOFTWARE``)."""
GRACE_S = 1.0
"""Seconds between a rank's last words and its abort of the job (module notes)."""


class Watchdog:
    """Ends the job when a guarded blocking call runs past its deadline.

    ``watchdog.arm(timeout, what)``, the blocking call, then ``watchdog.disarm()``
    (in a ``finally``). One call is guarded at a time per slot: :data:`MAIN` (the
    caller's thread) and :data:`PROGRESS` (the progress thread of non-blocking
    collectives, :mod:`gridcoll.runtime.nonblocking`).
    """

    def __init__(
        self,
        abort: Callable[[str], None] | None = None,
        period: float = 1.0,
        grace: float = GRACE_S,
    ):
        self._armed: list[tuple[float, float, str] | None] = [None, None]  # per slot:
        # (deadline, timeout, what)
        self._abort = abort or abort_job
        self.last_words: list[Callable[[str], None]] = []
        """Called with the reason before the job is ended (a launcher's worker reports
        its failure there, as it does for an exception)."""
        self._period = period
        self._grace = grace
        self._thread = threading.Thread(target=self._watch, name="gridcoll-watchdog")
        self._thread.daemon = True
        self._thread.start()

    def arm(self, timeout: float, what: str, slot: int = 0) -> None:
        """Start guarding a call that must end within ``timeout`` seconds."""
        self._armed[slot] = (time.monotonic() + timeout, timeout, what)

    def disarm(self, slot: int = 0) -> None:
        """The guarded call returned."""
        self._armed[slot] = None

    def _watch(self) -> None:
        while True:
            calls = [(slot, a) for slot, a in enumerate(self._armed) if a is not None]
            if not calls:
                time.sleep(self._period)
                continue
            slot, armed = min(calls, key=lambda item: item[1][0])
            left = armed[0] - time.monotonic()
            if left > 0:
                time.sleep(min(left, self._period) + 1e-3)
                continue
            if self._armed[slot] is armed:  # still the same call, past its deadline
                reason = f"{armed[2]} did not complete within {armed[1]:g} s"
                note_fault("CollectiveTimeout", reason)
                for hook in self.last_words:
                    hook(reason)
                time.sleep(self._grace)
                self._abort(f"{reason} (a rank died or never joined)")
                return


def abort_job(reason: str) -> None:
    """Say ``reason`` on stderr and in the launcher's record (``abort``: Hydra may kill
    the ranks before it forwards the last lines of their stderr), then end the whole
    job (``MPI_Abort``, exit status :data:`ABORT_CODE`; ``os._exit`` without
    ``MPI_THREAD_MULTIPLE`` off the main thread)."""
    from mpi4py import MPI  # here: the launcher imports this module without MPI

    me = f"rank {MPI.COMM_WORLD.Get_rank()}: "
    note_for_launcher("abort", reason=reason[:2000])  # mpiexec may drop the line below
    sys.stderr.write(f"gridcoll: {'' if reason.startswith(me) else me}{reason}; aborting the job\n")
    sys.stderr.flush()
    main = threading.current_thread() is threading.main_thread()
    if main or MPI.Query_thread() == MPI.THREAD_MULTIPLE:
        MPI.COMM_WORLD.Abort(ABORT_CODE)
    os._exit(ABORT_CODE)


def note_fault(error: str, message: str, peers: Sequence[int] = ()) -> None:
    """Add this rank's fault to its launcher's record (:func:`note_for_launcher`):
    ``error`` (the exception's class name), ``message``, and ``peers``, the ranks of
    ``MPI.COMM_WORLD`` it waited for."""
    note_for_launcher("fault", error=error, message=message[:2000], peers=sorted(peers))


def note_for_launcher(event: str, **fields: object) -> None:
    """Append ``event`` to the launch's record of this rank (``procs/rank-R`` in the
    launch directory ``$GRIDCOLL_LAUNCH``, where the rank wrapper notes ``started`` and
    ``exit``), so the launcher can name the rank at fault. Nothing outside a gridcoll
    launch; best effort (one short append)."""
    directory = os.environ.get(ENV_LAUNCH)
    if not directory:
        return
    from mpi4py import MPI  # here: the launcher imports this module without MPI

    line = json.dumps(dict(fields, event=event, t=time.time()))
    path = os.path.join(directory, "procs", f"rank-{MPI.COMM_WORLD.Get_rank()}")
    try:
        with open(path, "a") as f:
            f.write(line + "\n")
    except OSError:
        pass
