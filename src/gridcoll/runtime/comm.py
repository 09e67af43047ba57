"""``gridcoll.Comm``: an mpi4py communicator whose collectives are gridcoll's.

Modelled on ``mpi4py.util.pkl5``: a subclass of :class:`mpi4py.MPI.Intracomm` built by
wrapping an existing communicator (the same MPI handle, not a copy), whose collective
methods are one-liners calling module helpers (:mod:`gridcoll.runtime.collectives`, and
:mod:`gridcoll.runtime.objects` for the object forms).
Methods gridcoll does not implement are mpi4py's own, on the wrapped communicator.

Each ``Comm`` keeps a private duplicate of the wrapped communicator, created with
``MPI_Comm_idup`` on its first gridcoll collective, so gridcoll's messages never mix
with the application's; a per-call tag keeps calls apart on it
(:mod:`gridcoll.runtime.state`).

Where this sits in :mod:`gridcoll.runtime`: last of ``buffers``, ``state``, ``prepare``,
``nonblocking``, ``mpi_ops``, ``collectives``, ``objects``, ``comm``; nothing in the
package imports it but the worker.
"""

from __future__ import annotations

import os as _os
from collections.abc import Callable
from typing import Any

from mpi4py import MPI

from gridcoll.network.grid import Grid
from gridcoll.runtime import collectives as _coll
from gridcoll.runtime import nonblocking as _nb
from gridcoll.runtime import objects as _obj
from gridcoll.runtime import prepare as _prepare
from gridcoll.runtime import state as _state
from gridcoll.runtime.executor import wait
from gridcoll.schedule.ir import Schedule

__all__ = ["Comm"]


class Comm(MPI.Intracomm):
    """An mpi4py intracommunicator whose collectives are gridcoll's.

    ``Comm(comm, grid=None, *, algo=None, params=None, timeout=None, host_overhead=None,
    log=None, adaptive=None)`` wraps ``comm`` (same MPI handle, like
    ``mpi4py.util.pkl5.Intracomm``). Construction is local; the
    first gridcoll collective duplicates ``comm`` into a private communicator
    (collectively, without blocking in MPI).

    Parameters
    ----------
    comm : MPI.Intracomm
        The communicator to wrap (typically ``MPI.COMM_WORLD``).
    grid : Grid or str, optional
        The grid the ranks run on, one grid rank per communicator rank (a Grid, a preset
        name or a grid file). Default: the grid of ``GRIDCOLL_GRID`` (set by
        ``gridcoll mpirun``; for a sub-communicator of ``COMM_WORLD`` its sub-grid),
        else ``lan(size)``, a single cluster. A grid whose clusters name their
        ``hosts`` places the ranks by host: then construction is collective (every rank
        gathers the ranks' host names; docs/grid-format.md, "Placement by host").
    algo : str or mapping, optional
        ``"auto"`` (the tuner chooses per call; on a one-cluster communicator, the MPI
        library's own collective), a builder name (every collective that has a builder
        of that name uses it, the tuner choosing only its parameters; the others
        ``auto``), ``"native"`` (the MPI library's own), or a mapping from collectives
        to any of these (``{"scatter": "magpie-segmented", "allreduce": "auto"}``, or
        as text, ``"scatter:magpie-segmented;allreduce:auto"``).
        Default ``GRIDCOLL_ALGO`` (either text form) or ``"auto"``.
    params : dict, optional
        With a builder name: parameters fixed as given (``{"segment_size": 8192}``), the
        others searched by :func:`gridcoll.tune.plan`; with a mapping ``algo``, a mapping
        from those collectives to their parameters.
    timeout : float, optional
        Seconds a call may go without progress (or a send stay in flight) before the
        rank raises :class:`~gridcoll.runtime.CollectiveTimeout`; after a timeout, a
        program that ends on the error ends the job (``MPI_Abort``) instead of waiting
        in ``MPI_Finalize``. Default ``GRIDCOLL_TIMEOUT`` or 60.
    host_overhead : float or str, optional
        This runtime's CPU cost per message and side, in seconds (or ``"40us"``): the
        tuner plans on ``grid.with_host_overhead(host_overhead)``, so segments are not
        cut finer than the software can push. Default ``GRIDCOLL_HOST_OVERHEAD``, else
        the calibrated :func:`gridcoll.runtime.host.default_host_overhead`.
    log : str or path, optional
        Write one JSON line per collective call to this file (``{rank}`` in the name:
        one file per rank; else every rank appends to it): op, size, root, algorithm,
        parameters, prediction, bound, measured seconds on this rank
        (:mod:`gridcoll.runtime.record`; ``gridcoll report`` summarises it). Default
        ``GRIDCOLL_LOG``, else none. Communicators made from this one share it.
    adaptive : bool, optional
        Broadcasts adapt to the network while the program runs (seed 001):
        each root's advisor watches its calls and the emulated WAN messages' times,
        plans ahead in a background thread and hands the plan over in the next
        broadcast's trailer (:mod:`gridcoll.runtime.adaptive`). Default
        ``GRIDCOLL_ADAPTIVE`` (``gridcoll mpirun --adaptive``), else off; no effect on
        one cluster. Communicators made from this one inherit it.

    Notes
    -----
    gridcoll's collectives, with mpi4py's signatures and results: ``Bcast``,
    ``Scatter``, ``Gather``, ``Allgather``, ``Alltoall``, ``Reduce``, ``Allreduce``
    (``op=``: predefined, ``MPI.Op.Create`` user ops, non-commutative ones combined in
    rank order), ``Reduce_scatter_block``, ``Reduce_scatter``, ``Scan``, ``Exscan``,
    ``Barrier``, the v-forms ``Scatterv``, ``Gatherv``, ``Allgatherv``, ``Alltoallv``,
    the non-blocking form of each (``Ibcast``, ``Ibarrier``, ``Iscatter``, ...,
    ``Ialltoallv``, ``Iscan``, ``Iexscan``: requests run in start order by the
    communicator's progress thread), and the object forms ``bcast``, ``scatter``,
    ``gather``, ``allgather``, ``alltoall``, ``reduce``, ``allreduce``, ``scan``,
    ``exscan``, ``barrier``; ``MPI.IN_PLACE`` where MPI allows it; every buffer spec
    mpi4py takes over every buffer object it takes (:mod:`gridcoll.runtime.buffers`),
    with mpi4py's errors. ``execute(schedule, buf)`` runs any gridcoll schedule. The MPI
    library's own collective serves a call (blocking in MPI, as in a plain mpi4py
    program, and without the WAN emulation) on a one-cluster communicator under
    ``auto``, with ``algo="native"``, for a buffer in device memory, a datatype with
    holes, and ``Alltoallv`` with ``MPI.IN_PLACE``; on the first two the object forms
    are mpi4py's own object collectives. gridcoll's own calls never block inside MPI
    (they test requests and sleep), raise bad arguments before any message is sent,
    check arguments across ranks (mismatched sizes, datatypes or roots raise
    :class:`~gridcoll.runtime.MismatchError`), complete a call that moves no data
    without a message, and cross the emulated WAN when the launcher switched it on. A
    failed call leaves the communicator usable: a program that catches the error and
    carries on gets correct results from its next call. ``explain()`` and
    ``last_plan`` tell why the last call chose its algorithm; ``cache_info()`` and
    ``cache_clear()`` show and drop the plans and programs kept per call signature
    (at most ``CACHE_SIZE`` of each).

    Passed through to mpi4py on the wrapped communicator: everything else: ``Get_rank``,
    ``Get_size``, point-to-point (``Send``, ``Recv``, ``Isend``, ``send``...),
    ``Alltoallw``, the persistent and neighbourhood collectives, attributes, groups and
    topologies. These
    do not cross the WAN emulation. ``Dup``, ``Clone``, ``Idup``, ``Split``,
    ``Split_type``, ``Create`` and ``Create_group`` return ``gridcoll.Comm`` objects on
    the matching sub-grid; ``Free`` also frees the private communicator. Pickling and
    ``free`` follow mpi4py's rules for predefined communicators
    (:mod:`gridcoll.runtime.world`: ``MPI.COMM_WORLD`` itself may be a ``Comm``).
    """

    CACHE_SIZE = 64
    """Prepared calls (plan, program, layout) and compiled schedules kept per
    communicator, each (least recently used go); read when a communicator is made."""
    DOORBELLS = _os.environ.get("GRIDCOLL_DOORBELLS", "1").strip() != "0"
    """Wake sleeping ranks with futex doorbells when all ranks share one machine
    (``GRIDCOLL_DOORBELLS=0`` switches them off)."""
    gridcoll_state: _state.State | None = None
    """This communicator's grid, options, private communicator and caches
    (:mod:`gridcoll.runtime.state`); None for a wrapper of ``COMM_NULL``."""

    def __new__(cls, comm: MPI.Intracomm | None = None, *args: Any, **kwargs: Any) -> Comm:
        """Create a new communicator object wrapping ``comm``'s handle."""
        if comm is not None and comm != MPI.COMM_NULL and comm.Is_inter():
            raise TypeError("gridcoll.Comm wraps intracommunicators only")
        return MPI.Intracomm.__new__(cls, comm)

    @classmethod
    def fromhandle(cls, handle: int) -> Comm:
        """A ``Comm`` around an MPI handle (mpi4py's ``fromhandle``)."""
        return cls(MPI.Intracomm.fromhandle(handle))

    def __init__(
        self,
        comm: MPI.Intracomm | None = None,
        grid: Grid | str | None = None,
        *,
        algo: str | None = None,
        params: dict | None = None,
        timeout: float | None = None,
        host_overhead: float | str | None = None,
        log: str | _os.PathLike | None = None,
        adaptive: bool | None = None,
    ):
        if comm is None or self == MPI.COMM_NULL:
            return
        _state.attach(self, grid, algo, params, timeout, host_overhead, log=log, adaptive=adaptive)

    # gridcoll's collectives
    def Bcast(self, buf: Any, root: int = 0) -> None:
        """Broadcast a buffer from ``root`` (gridcoll's algorithms)."""
        _coll.bcast(self, buf, root)

    def bcast(self, obj: Any, root: int = 0) -> Any:
        """Broadcast a picklable object from ``root`` (gridcoll's algorithms)."""
        return _obj.call(self, "bcast", obj, root)

    def Barrier(self) -> None:
        """Barrier synchronization (gridcoll's algorithms), without blocking in MPI."""
        _coll.barrier(self)

    def barrier(self) -> None:
        """Barrier synchronization (gridcoll's algorithms), without blocking in MPI."""
        _coll.barrier(self)

    def Scatter(self, sendbuf: Any, recvbuf: Any, root: int = 0) -> None:
        """Scatter blocks of the root's buffer, one to each rank (gridcoll's algorithms)."""
        _coll.scatter(self, sendbuf, recvbuf, root)

    def scatter(self, sendobj: Any, root: int = 0) -> Any:
        """Scatter the items of the root's sequence, one to each rank."""
        return _obj.call(self, "scatter", sendobj, root)

    def Gather(self, sendbuf: Any, recvbuf: Any, root: int = 0) -> None:
        """Gather every rank's buffer into blocks of the root's (gridcoll's algorithms)."""
        _coll.gather(self, sendbuf, recvbuf, root)

    def gather(self, sendobj: Any, root: int = 0) -> list[Any] | None:
        """Gather every rank's object into a list at the root."""
        return _obj.call(self, "gather", sendobj, root)

    def Allgather(self, sendbuf: Any, recvbuf: Any) -> None:
        """Gather every rank's buffer into blocks of every rank's (gridcoll's algorithms)."""
        _coll.allgather(self, sendbuf, recvbuf)

    def allgather(self, sendobj: Any) -> list[Any]:
        """Gather every rank's object into a list on every rank."""
        return _obj.call(self, "allgather", sendobj)

    def Alltoall(self, sendbuf: Any, recvbuf: Any) -> None:
        """Send block j of every rank's buffer to rank j (gridcoll's algorithms)."""
        _coll.alltoall(self, sendbuf, recvbuf)

    def alltoall(self, sendobj: Any) -> list[Any]:
        """Send item j of every rank's sequence to rank j."""
        return _obj.call(self, "alltoall", sendobj)

    def Scatterv(self, sendbuf: Any, recvbuf: Any, root: int = 0) -> None:
        """Scatter uneven blocks of the root's buffer (gridcoll's algorithms, trimmed)."""
        _coll.scatterv(self, sendbuf, recvbuf, root)

    def Gatherv(self, sendbuf: Any, recvbuf: Any, root: int = 0) -> None:
        """Gather every rank's buffer into uneven blocks of the root's (gridcoll's)."""
        _coll.gatherv(self, sendbuf, recvbuf, root)

    def Allgatherv(self, sendbuf: Any, recvbuf: Any) -> None:
        """Gather every rank's buffer into uneven blocks of every rank's (gridcoll's)."""
        _coll.allgatherv(self, sendbuf, recvbuf)

    def Alltoallv(self, sendbuf: Any, recvbuf: Any) -> None:
        """Send uneven block j of every rank's buffer to rank j (gridcoll's algorithms)."""
        _coll.alltoallv(self, sendbuf, recvbuf)

    def Reduce(self, sendbuf: Any, recvbuf: Any, op: MPI.Op = MPI.SUM, root: int = 0) -> None:
        """Reduce every rank's buffer with ``op`` to the root (gridcoll's algorithms)."""
        _coll.reduce(self, sendbuf, recvbuf, op, root)

    def reduce(self, sendobj: Any, op: Any = MPI.SUM, root: int = 0) -> Any:
        """Reduce every rank's object with ``op`` (in rank order) to the root."""
        return _obj.call(self, "reduce", sendobj, op, root)

    def Allreduce(self, sendbuf: Any, recvbuf: Any, op: MPI.Op = MPI.SUM) -> None:
        """Reduce every rank's buffer with ``op`` to every rank (gridcoll's algorithms)."""
        _coll.allreduce(self, sendbuf, recvbuf, op)

    def allreduce(self, sendobj: Any, op: Any = MPI.SUM) -> Any:
        """Reduce every rank's object with ``op`` (in rank order) to every rank."""
        return _obj.call(self, "allreduce", sendobj, op)

    def Reduce_scatter_block(self, sendbuf: Any, recvbuf: Any, op: MPI.Op = MPI.SUM) -> None:
        """Reduce every rank's buffer, block i to rank i (gridcoll's algorithms)."""
        _coll.reduce_scatter_block(self, sendbuf, recvbuf, op)

    def Reduce_scatter(
        self, sendbuf: Any, recvbuf: Any, recvcounts: Any = None, op: MPI.Op = MPI.SUM
    ) -> None:
        """Reduce every rank's buffer, uneven block i to rank i (gridcoll's algorithms)."""
        _coll.reduce_scatter(self, sendbuf, recvbuf, recvcounts, op)

    def Scan(self, sendbuf: Any, recvbuf: Any, op: MPI.Op = MPI.SUM) -> None:
        """Inclusive prefix reduction (gridcoll's algorithms)."""
        _coll.scan(self, sendbuf, recvbuf, op)

    def scan(self, sendobj: Any, op: Any = MPI.SUM) -> Any:
        """Inclusive prefix reduction of objects (in rank order)."""
        return _obj.call(self, "scan", sendobj, op)

    def Exscan(self, sendbuf: Any, recvbuf: Any, op: MPI.Op = MPI.SUM) -> None:
        """Exclusive prefix reduction (gridcoll's algorithms)."""
        _coll.exscan(self, sendbuf, recvbuf, op)

    def exscan(self, sendobj: Any, op: Any = MPI.SUM) -> Any:
        """Exclusive prefix reduction of objects (in rank order; None on rank 0)."""
        return _obj.call(self, "exscan", sendobj, op)

    # non-blocking: the same collectives, run by the communicator's progress thread
    def Ibcast(self, buf: Any, root: int = 0) -> _nb.CollectiveRequest:
        """Nonblocking broadcast (gridcoll's algorithms)."""
        return _nb.start(self, _coll.bcast, buf, root)

    def Ibarrier(self) -> _nb.CollectiveRequest:
        """Nonblocking barrier (gridcoll's algorithms)."""
        return _nb.start(self, _coll.barrier)

    def Iscatter(self, sendbuf: Any, recvbuf: Any, root: int = 0) -> _nb.CollectiveRequest:
        """Nonblocking scatter (gridcoll's algorithms)."""
        return _nb.start(self, _coll.scatter, sendbuf, recvbuf, root)

    def Igather(self, sendbuf: Any, recvbuf: Any, root: int = 0) -> _nb.CollectiveRequest:
        """Nonblocking gather (gridcoll's algorithms)."""
        return _nb.start(self, _coll.gather, sendbuf, recvbuf, root)

    def Iallgather(self, sendbuf: Any, recvbuf: Any) -> _nb.CollectiveRequest:
        """Nonblocking allgather (gridcoll's algorithms)."""
        return _nb.start(self, _coll.allgather, sendbuf, recvbuf)

    def Ialltoall(self, sendbuf: Any, recvbuf: Any) -> _nb.CollectiveRequest:
        """Nonblocking all-to-all (gridcoll's algorithms)."""
        return _nb.start(self, _coll.alltoall, sendbuf, recvbuf)

    def Iscatterv(self, sendbuf: Any, recvbuf: Any, root: int = 0) -> _nb.CollectiveRequest:
        """Nonblocking scatterv (gridcoll's algorithms)."""
        return _nb.start(self, _coll.scatterv, sendbuf, recvbuf, root)

    def Igatherv(self, sendbuf: Any, recvbuf: Any, root: int = 0) -> _nb.CollectiveRequest:
        """Nonblocking gatherv (gridcoll's algorithms)."""
        return _nb.start(self, _coll.gatherv, sendbuf, recvbuf, root)

    def Iallgatherv(self, sendbuf: Any, recvbuf: Any) -> _nb.CollectiveRequest:
        """Nonblocking allgatherv (gridcoll's algorithms)."""
        return _nb.start(self, _coll.allgatherv, sendbuf, recvbuf)

    def Ialltoallv(self, sendbuf: Any, recvbuf: Any) -> _nb.CollectiveRequest:
        """Nonblocking all-to-all with uneven blocks (gridcoll's algorithms)."""
        return _nb.start(self, _coll.alltoallv, sendbuf, recvbuf)

    def Ireduce(
        self, sendbuf: Any, recvbuf: Any, op: MPI.Op = MPI.SUM, root: int = 0
    ) -> _nb.CollectiveRequest:
        """Nonblocking reduce (gridcoll's algorithms)."""
        return _nb.start(self, _coll.reduce, sendbuf, recvbuf, op, root)

    def Iallreduce(self, sendbuf: Any, recvbuf: Any, op: MPI.Op = MPI.SUM) -> _nb.CollectiveRequest:
        """Nonblocking allreduce (gridcoll's algorithms)."""
        return _nb.start(self, _coll.allreduce, sendbuf, recvbuf, op)

    def Ireduce_scatter_block(
        self, sendbuf: Any, recvbuf: Any, op: MPI.Op = MPI.SUM
    ) -> _nb.CollectiveRequest:
        """Nonblocking reduce-scatter with equal blocks (gridcoll's algorithms)."""
        return _nb.start(self, _coll.reduce_scatter_block, sendbuf, recvbuf, op)

    def Ireduce_scatter(
        self, sendbuf: Any, recvbuf: Any, recvcounts: Any = None, op: MPI.Op = MPI.SUM
    ) -> _nb.CollectiveRequest:
        """Nonblocking reduce-scatter (gridcoll's algorithms)."""
        return _nb.start(self, _coll.reduce_scatter, sendbuf, recvbuf, recvcounts, op)

    def Iscan(self, sendbuf: Any, recvbuf: Any, op: MPI.Op = MPI.SUM) -> _nb.CollectiveRequest:
        """Nonblocking inclusive scan (gridcoll's algorithms)."""
        return _nb.start(self, _coll.scan, sendbuf, recvbuf, op)

    def Iexscan(self, sendbuf: Any, recvbuf: Any, op: MPI.Op = MPI.SUM) -> _nb.CollectiveRequest:
        """Nonblocking exclusive scan (gridcoll's algorithms)."""
        return _nb.start(self, _coll.exscan, sendbuf, recvbuf, op)

    def execute(self, schedule: Schedule, buf: Any, *, reduce: Callable | None = None) -> None:
        """Run any gridcoll schedule on ``buf`` (every rank calls it with the same one)."""
        _coll.execute(self, schedule, buf, reduce)

    # communicators made from this one are gridcoll.Comm objects too
    def Dup(self, info: MPI.Info | None = None) -> Comm:
        """Duplicate the communicator (a gridcoll.Comm with the same grid and options)."""
        new, req = self.Idup(info)
        wait(req, _state.state_of(self).timeout, what="MPI_Comm_idup")
        return new

    def Clone(self) -> Comm:
        """Clone the communicator (same as ``Dup``)."""
        return self.Dup()

    def Dup_with_info(self, info: MPI.Info) -> Comm:
        """Duplicate the communicator with hints."""
        return self.Dup(info)

    def Idup(self, info: MPI.Info | None = None) -> tuple[Comm, MPI.Request]:
        """Nonblocking duplicate (a gridcoll.Comm with the same grid and options)."""
        base = MPI.Intracomm(self)
        new, req = base.Idup(info) if info is not None else base.Idup()
        return _state.derive(self, new), req

    def Idup_with_info(self, info: MPI.Info) -> tuple[Comm, MPI.Request]:
        """Nonblocking duplicate with hints."""
        return self.Idup(info)

    def Split(self, color: int = 0, key: int = 0) -> Comm:
        """Split into sub-communicators (gridcoll.Comm on the sub-grid)."""
        return _state.subcomm(self, MPI.Intracomm.Split(MPI.Intracomm(self), color, key))

    def Split_type(self, split_type: int, key: int = 0, info: MPI.Info = MPI.INFO_NULL) -> Comm:
        """Split by type (gridcoll.Comm on the sub-grid)."""
        return _state.subcomm(self, MPI.Intracomm(self).Split_type(split_type, key, info))

    def Create(self, group: MPI.Group) -> Comm:
        """Create a communicator from a group (gridcoll.Comm on the sub-grid)."""
        return _state.subcomm(self, MPI.Intracomm(self).Create(group))

    def Create_group(self, group: MPI.Group, tag: int = 0) -> Comm:
        """Create a communicator from a group (gridcoll.Comm on the sub-grid)."""
        return _state.subcomm(self, MPI.Intracomm(self).Create_group(group, tag))

    def Free(self) -> None:
        """Free the communicator and gridcoll's private duplicate of it.

        The private duplicate is freed first, so on a permanent communicator (a wrapper
        of ``COMM_WORLD``), where MPI refuses with ``ERR_COMM`` as mpi4py does, gridcoll's
        resources are still released (a later collective makes a new duplicate).
        """
        state = _state.attached(self)
        if state is not None:
            state.close()
        MPI.Intracomm.Free(self)

    def free(self) -> None:
        """Call ``Free`` if not null or predefined, as mpi4py does: the object that is
        ``MPI.COMM_WORLD`` (or ``COMM_SELF``) after a swap is one of mpi4py's
        constants and stays; another ``Comm`` around a predefined communicator's handle
        becomes null, its private duplicate freed."""
        if any(self is getattr(MPI, name) for name in ("COMM_WORLD", "COMM_SELF")):
            return
        state = _state.attached(self)
        if state is not None and self.handle in (MPI.COMM_WORLD.handle, MPI.COMM_SELF.handle):
            state.close()
        MPI.Intracomm.free(self)

    # explanations and caches
    @property
    def grid(self) -> Grid:
        """The grid this communicator's ranks run on."""
        return _state.state_of(self).grid

    @property
    def host_overhead(self) -> float:
        """The per-message host overhead (seconds) this communicator plans with."""
        return _state.state_of(self).host_overhead

    @property
    def plan_grid(self) -> Grid:
        """The grid plans are made on: :attr:`grid` plus :attr:`host_overhead`."""
        return _state.state_of(self).plan_grid

    @property
    def last_plan(self) -> Any:
        """The :class:`gridcoll.tune.Plan` of the last gridcoll collective (``None``
        before the first)."""
        return _prepare.last_plan(_state.state_of(self))

    def explain(self) -> str:
        """Why the last gridcoll collective chose its algorithm."""
        return _coll.explain(self)

    def cache_info(self) -> _state.CacheInfo:
        """What this communicator keeps per call signature, and the process's plans."""
        return _state.cache_info(_state.state_of(self))

    def cache_clear(self, plans: bool = False) -> None:
        """Drop this communicator's prepared calls (and, with ``plans``, the process's
        plans): the next call of each signature plans and compiles again."""
        _state.cache_clear(_state.state_of(self), plans)

    def __reduce__(self) -> tuple:
        """Pickle as mpi4py pickles communicators: by the name of a predefined one.

        The object that is ``MPI.COMM_WORLD`` (a swapped world,
        :mod:`gridcoll.runtime.world`) unpickles to ``MPI.COMM_WORLD`` of the unpickling
        process, whatever that is there; another ``Comm`` around a predefined
        communicator's handle to a new ``Comm`` around that communicator (the options
        read from the environment, as ``Comm(comm)`` reads them); any other ``Comm``
        raises ``ValueError`` (a communicator cannot leave its process), as mpi4py
        does.
        """
        names = ("COMM_WORLD", "COMM_SELF", "COMM_NULL")
        for name in names:
            if self is getattr(MPI, name):
                return (_predefined, (name,))
        for name in names:
            predefined = getattr(MPI, name)
            if self == predefined:
                return (type(self), (predefined,))
        cls = type(self)
        raise ValueError(f"cannot serialize '{cls.__module__}.{cls.__name__}' instance")

    def __repr__(self) -> str:
        state = _state.attached(self)
        where = f" on {state.grid.name!r}, algo={state.spec[0] or 'auto'!r}" if state else ""
        return f"<gridcoll.Comm of {self.Get_size()} ranks{where}>"


def _predefined(name: str) -> MPI.Comm:
    """``MPI.<name>`` of this process (a predefined communicator, swapped or not): what a
    pickled ``MPI.COMM_WORLD`` becomes (:meth:`Comm.__reduce__`)."""
    return getattr(MPI, name)
