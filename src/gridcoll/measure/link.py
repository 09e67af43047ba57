"""``measure_plogp``: seed 000's procedure between two ranks of a communicator.

An application measures at start-up and passes the result to :class:`gridcoll.Comm`::

    from mpi4py import MPI
    import gridcoll
    from gridcoll.measure import measure_plogp

    link = measure_plogp(MPI.COMM_WORLD, 0, 2, both_directions=True)
    print(link.forward.L, link.forward.plogp().g(65536))

Every rank of the communicator calls it (it is collective); rank ``a`` plays *measure*
and rank ``b`` *mirror* (then the other way round with ``both_directions``); every rank
gets the result.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from gridcoll.errors import MeasurementError, ParameterError
from gridcoll.measure.plogp_procedure import (
    PLogPMeasurement,
    PLogPProcedure,
    Settings,
    run_procedure,
    with_cost,
)
from gridcoll.network.plogp import PLogP

__all__ = ["LinkMeasurement", "measure_plogp", "share"]


@dataclass(frozen=True)
class LinkMeasurement:
    """The P-LogP parameters measured from rank ``a`` to rank ``b`` (``forward``) and,
    if asked, from ``b`` to ``a`` (``backward``)."""

    a: int
    b: int
    forward: PLogPMeasurement
    backward: PLogPMeasurement | None = None
    elapsed_s: float = 0.0
    emulated: bool = False

    @property
    def complete(self) -> bool:
        return self.forward.complete and (self.backward is None or self.backward.complete)

    def plogp(self, direction: str = "forward") -> PLogP:
        """The table of one direction."""
        found = self.forward if direction == "forward" else self.backward
        if found is None:
            raise MeasurementError(f"the {direction} direction was not measured")
        return found.plogp()

    def to_dict(self) -> dict[str, Any]:
        """``gridcoll measure --json``: one object with ``L_s`` and ``points``, or one per
        direction under ``forward`` and ``backward``."""
        meta = {"between": [self.a, self.b], "elapsed_s": self.elapsed_s, "emulated": self.emulated}
        if self.backward is None:
            return self.forward.to_dict() | meta
        return {"forward": self.forward.to_dict(), "backward": self.backward.to_dict()} | meta


def share(comm, obj: Any, root: int, timeout: float | None, what: str) -> Any:
    """Broadcast a picklable object from ``root`` without blocking inside MPI
    (``MPI_Ibcast`` of its length, then of its bytes, each tested with sleeps)."""
    import pickle

    import numpy as np
    from mpi4py import MPI

    data = pickle.dumps(obj) if comm.Get_rank() == root else b""
    n = np.array([len(data)], dtype=np.int64)
    _wait(comm.Ibcast([n, MPI.INT64_T], root), timeout, what)
    buf = np.frombuffer(data, dtype=np.uint8).copy() if data else np.empty(n[0], np.uint8)
    _wait(comm.Ibcast([buf, MPI.BYTE], root), timeout, what)
    return obj if comm.Get_rank() == root else pickle.loads(buf.tobytes())


def _wait(req, timeout: float | None, what: str) -> None:
    """Complete a request by testing and sleeping (up to 10 ms: idle ranks may wait
    for a whole measurement)."""
    deadline = None if timeout is None else time.monotonic() + timeout
    delay = 20e-6
    while not req.Test():
        if deadline is not None and time.monotonic() > deadline:
            raise MeasurementError(f"{what} did not complete within {timeout:g} s")
        time.sleep(delay)
        delay = min(2 * delay, 10e-3)


def _direction(
    ep,
    measure: int,
    mirror: int,
    settings: Settings,
    progress: Callable | None,
    fail_after: int | None,
) -> PLogPMeasurement:
    """One direction; collective over ``ep.comm``; returns the result on every rank."""
    from gridcoll.measure.transport import MPITransport, run_mirror

    rank = ep.rank
    status: tuple = ("ok", None)
    if rank == measure:
        transport = MPITransport(ep, mirror)
        proc = PLogPProcedure(settings)
        try:
            result = run_procedure(proc, transport, progress)
            transport.close()
            status = ("ok", with_cost(result, transport.control))
        except MeasurementError as err:
            status = ("error", f"measuring {measure} -> {mirror}: {err}", err.partial)
    elif rank == mirror:
        try:
            run_mirror(ep, measure, fail_after=fail_after)
        except MeasurementError as err:
            raise MeasurementError(f"mirror rank {mirror} (measure rank {measure}): {err}") from err
    # every rank learns the outcome from the measure rank
    bounded = ep.timeout if rank in (measure, mirror) else None
    status = share(
        ep.comm,
        status if rank == measure else None,
        measure,
        bounded,
        f"rank {rank}: sharing the result of {measure} -> {mirror}",
    )
    if status[0] != "ok":
        raise MeasurementError(status[1], partial=status[2])
    return status[1]


def measure_plogp(
    comm,
    a: int,
    b: int,
    *,
    both_directions: bool = False,
    settings: Settings | None = None,
    grid=None,
    emulate: bool | None = None,
    timeout: float = 60.0,
    progress: Callable | None = None,
    fail_after: int | None = None,
) -> LinkMeasurement:
    """Measure the P-LogP parameters from rank ``a`` to rank ``b`` (seed 000, sec. 2.2).

    Collective over ``comm`` (an ``mpi4py`` intracommunicator or a
    :class:`gridcoll.Comm`); every rank returns the same :class:`LinkMeasurement`.

    Parameters
    ----------
    comm : MPI.Intracomm
        The communicator; a private duplicate carries the measurement.
    a, b : int
        The *measure* and *mirror* ranks.
    both_directions : bool
        Measure again with the roles swapped (asymmetric links).
    settings : Settings, optional
        The procedure's constants (epsilon, k_max, repetitions...).
    grid : Grid or str, optional
        The grid the ranks run on, for the WAN emulation; default ``comm.grid`` or the
        launch's ``GRIDCOLL_GRID``.
    emulate : bool, optional
        Emulate the WAN (default: when ``GRIDCOLL_EMULATE`` asks, as under
        ``gridcoll mpirun``).
    timeout : float
        Seconds either end waits for the other's next message before deciding it is
        lost.
    progress : callable, optional
        ``progress(procedure, probe)`` on the measure rank before each probe.
    fail_after : int, optional
        Testing only: the mirror vanishes after this many messages.

    Returns
    -------
    LinkMeasurement

    Raises
    ------
    ParameterError
        If ``a`` or ``b`` is not a rank of ``comm`` or they are equal (before any message).
    MeasurementError
        If the other end is lost or the results make no sense; ``partial`` holds the
        sizes measured so far (marked incomplete).
    """
    size = comm.Get_size()
    for what, r in (("a", a), ("b", b)):
        if not isinstance(r, int) or not 0 <= r < size:
            raise ParameterError(f"rank {what}={r!r} is out of range for {size} ranks")
    if a == b:
        raise ParameterError(f"measure and mirror must be two ranks, got {a} twice")
    from gridcoll.measure.transport import open_endpoint

    settings = settings or Settings()
    start = time.monotonic()
    ep = open_endpoint(comm, grid, emulate=emulate, timeout=timeout)
    try:
        emulated = ep.emulator is not None and ep.emulator.crosses(a, b)
        forward = _direction(ep, a, b, settings, progress, fail_after)
        backward = None
        if both_directions:
            try:
                backward = _direction(ep, b, a, settings, progress, fail_after)
            except MeasurementError as err:
                err.partial = {"forward": forward, "backward": err.partial}
                raise
        return LinkMeasurement(a, b, forward, backward, time.monotonic() - start, emulated)
    finally:
        ep.close()
