"""Non-blocking collectives: requests, order, overlap semantics.

Fast tests in this process: :class:`CollectiveRequest` works with mpi4py's ``Request``
API (``Wait``, ``Test``, ``Waitall``, ``Waitany``) and raises a failed job's error;
:class:`Progress` runs jobs in the order they came, one at a time. Slow MPI tests run
``tests/mpi/nonblocking.py`` (every I-collective against mpi4py's own, completed by
``Wait``, ``Test`` loops, ``Waitall`` over several outstanding calls and ``Waitany``)
on 2 to 16 ranks, with and without the emulated WAN.
"""

from __future__ import annotations

import json
import threading
import time

import pytest

MPI = pytest.importorskip("mpi4py.MPI")

from gridcoll.runtime.nonblocking import CollectiveRequest, Progress  # noqa: E402
from test_runtime_mpi import clean_env, fast_grid, mpirun, write_grid  # noqa: E402


def finish_later(request: CollectiveRequest, error: BaseException | None = None, after=0.05):
    threading.Thread(target=lambda: (time.sleep(after), request.finish(error))).start()


def test_a_request_completes_with_wait_and_test():
    request = CollectiveRequest.started()
    assert request.Test() is False
    finish_later(request)
    assert request.Wait() is True
    assert request == MPI.REQUEST_NULL  # freed, as MPI frees a completed request
    other = CollectiveRequest.started()
    finish_later(other)
    while not other.Test():
        time.sleep(0.01)


def test_wait_and_test_raise_the_collectives_error():
    request = CollectiveRequest.started()
    finish_later(request, RuntimeError("user op failed"))
    with pytest.raises(RuntimeError, match="user op failed"):
        request.Wait()
    other = CollectiveRequest.started()
    other.finish(ValueError("mismatch"))
    with pytest.raises(ValueError, match="mismatch"):
        other.Test()


def test_requests_work_with_mpi4pys_static_functions(capsys):
    a, b, c = (CollectiveRequest.started() for _ in range(3))
    finish_later(a, after=0.02)
    finish_later(b, after=0.1)
    MPI.Request.Waitall([a, b])
    assert a == MPI.REQUEST_NULL and b == MPI.REQUEST_NULL
    finish_later(c)
    d = CollectiveRequest.started()
    assert MPI.Request.Waitany([d, c]) == 1
    d.finish()
    assert MPI.Request.Testall([d])
    failed = CollectiveRequest.started()
    failed.finish(RuntimeError("the cause"))
    with pytest.raises(MPI.Exception):  # MPI's own Waitall: the status says it failed
        MPI.Request.Waitall([failed])
    assert "the cause" in capsys.readouterr().err  # mpi4py prints the cause


def test_progress_runs_jobs_in_order_one_at_a_time():
    progress = Progress("test-progress")
    seen: list[int] = []
    running = []

    def job(i: int):
        def run():
            running.append(i)
            assert len(running) == 1  # never two at once
            time.sleep(0.01)
            seen.append(i)
            running.pop()

        return run

    requests = [CollectiveRequest.started() for _ in range(5)]
    for i, request in enumerate(requests):
        progress.submit(job(i), request)
    assert progress.busy
    progress.drain()
    assert not progress.busy and seen == [0, 1, 2, 3, 4]
    MPI.Request.Waitall(requests)
    failing = CollectiveRequest.started()
    progress.submit(lambda: 1 / 0, failing)
    with pytest.raises(ZeroDivisionError):
        failing.Wait()
    progress.stop()


def check(proc) -> dict:
    lines = [x for x in proc.stdout.splitlines() if x.startswith("{")]
    assert proc.returncode == 0 and lines, proc.stdout[-2000:] + proc.stderr[-3000:]
    out = json.loads(lines[-1])
    assert out["differences"] == [] and out["cases"] >= 200, out
    assert out["errors"]["root out of range"][0] == out["errors"]["root out of range"][1]
    return out


@pytest.mark.slow
@pytest.mark.mpi
@pytest.mark.parametrize("n", [2, 5])
def test_every_nonblocking_collective_matches_mpi4py(n):
    check(mpirun(n, "nonblocking.py", timeout=600))


@pytest.mark.slow
@pytest.mark.mpi
def test_every_nonblocking_collective_matches_mpi4py_over_the_emulated_wan(tmp_path):
    grid = write_grid(tmp_path, fast_grid({"A": 2, "B": 2, "C": 1}, ["A", "B", "A", "C", "B"]))
    env = clean_env(GRIDCOLL_GRID=str(grid), GRIDCOLL_EMULATE="1")
    check(mpirun(5, "nonblocking.py", env=env, timeout=600))


@pytest.mark.slow
@pytest.mark.mpi
def test_nonblocking_collectives_on_16_ranks():
    env = clean_env(GRIDCOLL_GRID="magpie:4,4")
    check(mpirun(16, "nonblocking.py", env=env, timeout=900))
