"""Non-blocking collectives: ``Ibcast``, ``Iallreduce``... on gridcoll's schedules.

A non-blocking call does at once what a blocking one does first: it parses and checks
its arguments (a bad buffer, root or operation raises in the call, before any message,
as in mpi4py), makes the communicator ready, and plans and compiles the call (cached).
The rest, copying in, running the program and copying out, is a *job* handed to the
communicator's **progress thread**, which runs its jobs one after the other in the order
they were started. So the collective progresses while the caller computes, and several
outstanding collectives on one communicator run in call order, which is MPI's rule
(every rank starts them in the same order). A blocking gridcoll collective on a
communicator with outstanding ones first waits until they are done
(:func:`gridcoll.runtime.state.ready`), for the same reason.

The request is an MPI *generalized request* (``MPI.Grequest``) that the progress thread
completes when its job ends, so it works with all of mpi4py's ``Request`` API:
``Wait``, ``Test``, and ``Request.Waitall``, ``Testall``, ``Waitany``, ``Testany``, mixed
with the requests of point-to-point calls. :class:`CollectiveRequest` overrides
``Wait`` and ``Test`` (and ``wait``, ``test``): ``Wait`` sleeps on an event, never
spinning, and both raise the collective's error (a ``MismatchError``, a timeout, a
user operation's exception) in the caller. ``Request.Waitall`` and the other static
functions of mpi4py are MPI's own: they complete the request (a failed collective's
status says ``MPI.ERR_OTHER``, and mpi4py raises ``MPI.Exception``), but they poll
(MPICH tests generalized requests in its progress loop: about a fifth of a core
while it waits, measured with ``MPI.Request.Waitall`` on one such request for 1 s).

The progress thread needs ``MPI_THREAD_MULTIPLE`` (mpi4py's default). With less, the
job runs when the request is first waited on or tested (no overlap), which is what MPI
itself guarantees at the least.

Where this sits in :mod:`gridcoll.runtime`: after ``prepare``, before ``collectives``
(which hands a job to :attr:`State.deferring <gridcoll.runtime.state.State.deferring>`
when it is set, without importing this module) and ``comm``.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable
from typing import Any

from mpi4py import MPI

from gridcoll.runtime.state import State, state_of

__all__ = ["CollectiveRequest", "Progress", "start"]


def _query(status: MPI.Status, box: list) -> None:
    request = box[0]
    status.Set_source(MPI.UNDEFINED)
    status.Set_tag(MPI.UNDEFINED)
    status.Set_elements(MPI.BYTE, 0)
    status.Set_cancelled(False)
    if request.error is not None and not request.raising:
        # Request.Waitall and the like: they raise MPI.Exception (and mpi4py prints
        # this traceback, whose cause is the collective's error)
        status.Set_error(MPI.ERR_OTHER)
        raise MPI.Exception(MPI.ERR_OTHER) from request.error
    status.Set_error(MPI.SUCCESS)


def _free(box: list) -> None:
    """Nothing to free but the reference to the request object."""
    box.clear()


def _cancel(completed: bool, box: list) -> None:
    """A collective cannot be cancelled (``MPI_Cancel`` of a collective is erroneous);
    the request completes when its job ends."""


class CollectiveRequest(MPI.Grequest):
    """The request of a gridcoll non-blocking collective (module notes).

    ``Wait`` and ``Test`` raise the collective's error, if it failed, in the caller;
    ``error`` holds it (None while it runs, and when it succeeded).
    """

    error: BaseException | None
    done: threading.Event
    raising: bool
    """Set when ``Wait`` or ``Test`` raises ``error`` itself."""

    @classmethod
    def started(cls) -> CollectiveRequest:
        """A new request, not yet complete."""
        box: list = []
        request = cls(MPI.Grequest.Start(_query, _free, _cancel, args=(box,)))
        request.error = None
        request.raising = False
        request.done = threading.Event()
        box.append(request)
        return request

    def finish(self, error: BaseException | None = None) -> None:
        """The job ended (``error`` if it failed): complete the MPI request."""
        self.error = error
        self.done.set()
        MPI.Grequest.Complete(self)

    def Wait(self, status: MPI.Status | None = None) -> bool:
        """Wait until the collective completes (sleeping, never spinning)."""
        while not self.done.wait(0.1):  # in slices: Ctrl-C is seen
            pass
        return self._complete(status)

    def Test(self, status: MPI.Status | None = None) -> bool:
        """True, after raising its error if it failed, once the collective completed."""
        if not self.done.is_set():
            return False
        return self._complete(status)

    def wait(self, status: MPI.Status | None = None) -> None:
        """Wait until the collective completes (the buffer methods return nothing)."""
        self.Wait(status)

    def test(self, status: MPI.Status | None = None) -> tuple[bool, None]:
        """``(completed, None)``."""
        return self.Test(status), None

    def _complete(self, status: MPI.Status | None) -> bool:
        self.raising = self.error is not None
        MPI.Grequest.Wait(self, status)  # completed: returns at once, frees the handle
        if self.error is not None:
            raise self.error
        return True


class Progress:
    """A communicator's progress thread: runs its jobs in the order they came."""

    def __init__(self, name: str):
        self._jobs: deque[tuple[Callable[[], None], CollectiveRequest]] = deque()
        self._ready = threading.Condition()
        self._idle = threading.Event()
        self._idle.set()
        self._stopped = False
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def submit(self, job: Callable[[], None], request: CollectiveRequest) -> None:
        """Run ``job`` after the jobs before it; then complete ``request``."""
        with self._ready:
            self._idle.clear()
            self._jobs.append((job, request))
            self._ready.notify()

    def runs_here(self) -> bool:
        """Whether the caller is this progress thread."""
        return threading.current_thread() is self._thread

    @property
    def busy(self) -> bool:
        """Whether a job is queued or running."""
        return not self._idle.is_set()

    def drain(self) -> None:
        """Wait (sleeping) until every job submitted so far has ended."""
        while not self._idle.wait(0.1):
            pass

    def stop(self) -> None:
        """Let the queued jobs end, then end the thread."""
        with self._ready:
            self._stopped = True
            self._ready.notify()
        self._thread.join()

    def _run(self) -> None:
        while True:
            with self._ready:
                while not self._jobs and not self._stopped:
                    self._idle.set()
                    self._ready.wait()
                if not self._jobs:
                    return
                job, request = self._jobs.popleft()
            try:
                job()
            except BaseException as err:  # the caller gets it from Wait or Test
                request.finish(err)
            else:
                request.finish()


def start(comm: Any, collective: Callable[..., Any], *args: Any) -> CollectiveRequest:
    """Start ``collective(comm, *args)`` (a helper of
    :mod:`gridcoll.runtime.collectives`) without blocking: its checks and plan now, its
    run on the progress thread (module notes); the request completes when it ends."""
    state = state_of(comm)
    request = CollectiveRequest.started()
    threaded = MPI.Query_thread() == MPI.THREAD_MULTIPLE
    if threaded and state.progress is None:
        state.progress = Progress(f"gridcoll-progress-{id(state):x}")
    jobs: list[Callable[[], None]] = []
    state.deferring = jobs.append
    try:
        collective(comm, *args)
    except BaseException:
        request.finish()  # nothing was started: complete the MPI request, then raise
        raise
    finally:
        state.deferring = None
    if not jobs:  # nothing to move (one rank, an empty buffer...): done already
        request.finish()
    elif threaded:
        state.progress.submit(jobs[0], request)
    else:
        _run_on_first_wait(state, jobs[0], request)
    return request


def _run_on_first_wait(state: State, job: Callable[[], None], request: CollectiveRequest) -> None:
    """Without ``MPI_THREAD_MULTIPLE``: the job runs in the first ``Wait`` or ``Test``."""
    wait, test = request.Wait, request.Test

    def run_job() -> None:
        if not request.done.is_set():
            try:
                job()
            except BaseException as err:
                request.finish(err)
            else:
                request.finish()

    request.Wait = lambda status=None: (run_job(), wait(status))[1]  # type: ignore[method-assign]
    request.Test = lambda status=None: (run_job(), test(status))[1]  # type: ignore[method-assign]
