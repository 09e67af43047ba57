"""The state of a :class:`gridcoll.Comm`: its grid, options, private communicator, caches.

Every ``Comm`` carries one :class:`State` in its attribute ``gridcoll_state`` (made
by :func:`attach`, found by :func:`state_of`): the physical grid (the emulator's links
and latencies), the effective grid plans are made on (the grid plus the runtime's host
overhead, :mod:`gridcoll.runtime.host`), the algorithm table
(:func:`gridcoll.runtime.choice.algo_table`), the timeout, and, from the first
collective on (:func:`ready`), the private duplicate of the communicator, the emulator
of the WAN, the doorbells and the call counter.

Caches are explicit and bounded: each state has a :class:`~gridcoll.memo.Memo` with the
tables ``prepared`` (a plan, compiled program and layout per call signature,
:func:`gridcoll.runtime.prepare.prepare`) and ``programs`` (compiled programs of
schedules run with ``Comm.execute``), each bounded by ``Comm.CACHE_SIZE`` (read when
the communicator is made); the process shares one :class:`~gridcoll.tune.PlanCache`
(:data:`PROCESS`), keyed by the grid's fingerprint and the call's
:class:`~gridcoll.tune.Call` and :class:`~gridcoll.tune.PlanOptions`
(:func:`gridcoll.runtime.prepare.plan_call`), so a duplicate or a new communicator of
the same grid does not search again.
:func:`cache_info` shows them, :func:`cache_clear` drops a communicator's.

The process-wide parts (:class:`Process`): the plan cache, the one watchdog thread of
blocking native calls (:mod:`gridcoll.runtime.watchdog`), and the live states whose
private communicators are freed before mpi4py finalizes MPI.

Where this sits in :mod:`gridcoll.runtime`: ``buffers`` and ``state`` (this module),
then ``prepare`` (the one path from a call to its plan and program), ``collectives``
(one helper per collective), ``comm`` (the ``Comm`` class). It imports the executor,
the emulation, the doorbells, the watchdog and the host overhead, never a module after
it.
"""

from __future__ import annotations

import atexit as _atexit
import contextlib as _contextlib
import os as _os
import sys as _sys
import time as _time
import zlib as _zlib
from dataclasses import dataclass, field
from typing import Any

import numpy as _np
from mpi4py import MPI

from gridcoll.errors import (
    CollectiveError,
    CollectiveTimeout,
    GridError,
    ParameterError,
    UnknownAlgorithm,
)
from gridcoll.memo import Memo
from gridcoll.network.grid import Grid, place_by_host, placement_summary
from gridcoll.network.presets import get_grid, lan
from gridcoll.runtime import emulation as _emu
from gridcoll.runtime import host as _host
from gridcoll.runtime import hostnames as _hostnames
from gridcoll.runtime.choice import algo_table
from gridcoll.runtime.doorbell import Doorbells
from gridcoll.runtime.executor import DEFAULT_TIMEOUT, Program, wait
from gridcoll.runtime.layout import Layout
from gridcoll.runtime.notices import Ledger, held_notice, take_notice
from gridcoll.runtime.record import CallLog, open_log
from gridcoll.runtime.watchdog import (
    GRACE_S,
    Watchdog,
    abort_job,
    note_fault,
    note_for_launcher,
)
from gridcoll.tune import Plan, PlanCache
from gridcoll.tune.select import native_reason

__all__ = [
    "ENV_ADAPTIVE",
    "ENV_ALGO",
    "ENV_CHECK",
    "ENV_TIMEOUT",
    "PLAN_CACHE_SIZE",
    "PROCESS",
    "CacheInfo",
    "Prepared",
    "Process",
    "State",
    "attach",
    "attached",
    "cache_clear",
    "cache_info",
    "derive",
    "note_failure",
    "placement_note",
    "ready",
    "state_of",
    "subcomm",
]

ENV_TIMEOUT = "GRIDCOLL_TIMEOUT"
"""Environment variable: default timeout (seconds) of every ``Comm``."""
ENV_ALGO = "GRIDCOLL_ALGO"
"""Environment variable: default ``algo`` of every ``Comm`` (``auto`` if unset)."""
ENV_ADAPTIVE = "GRIDCOLL_ADAPTIVE"
"""Environment variable: ``1`` makes every communicator's broadcasts adaptive
(:mod:`gridcoll.runtime.adaptive`; ``gridcoll mpirun --adaptive``)."""
ENV_CHECK = "GRIDCOLL_CHECK"
"""Environment variable: ``1`` checks that the ranks agree on every call the MPI
library runs itself, which carries no gridcoll header
(:func:`gridcoll.runtime.prepare.check_agreement`)."""
PLAN_CACHE_SIZE = 1024
"""Plans the process keeps (:attr:`Process.plans`), least recently used dropped."""


@dataclass(slots=True)
class Prepared:
    """One call signature made ready: its plan, this rank's program, its layout."""

    plan: Plan
    """The plan of the call (:func:`gridcoll.tune.plan`)."""
    program: Program | None
    """This rank's compiled program; None: the MPI library's own collective."""
    layout: Layout | None = None
    """Where the rank's blocks live (collectives other than bcast and barrier)."""
    staging: _np.ndarray | None = None
    """The packed local buffer of a staged layout, reused call to call."""


@dataclass
class State:
    """A communicator's grid, options, private communicator and caches (module notes)."""

    grid: Grid
    """The physical grid: the emulator's links and latencies."""
    base_grid: Grid
    """The grid the launch's link state describes (``grid`` or a grid it is part of)."""
    algos: dict
    """Per collective: (algorithm, fixed parameters or None)."""
    spec: tuple
    """The ``algo=`` and ``params=`` the caller gave (for ``Dup``, ``Split``...)."""
    timeout: float
    host_overhead: float
    """Seconds per message and side the plans count (:mod:`gridcoll.runtime.host`)."""
    plan_grid: Grid
    """``grid.with_host_overhead(host_overhead)``: the grid plans are made and built on."""
    link_state: list
    """[LinkState or None], shared by a communicator and the ones made from it."""
    cache_size: int
    """Entries of each table of :attr:`memo`."""
    doorbells: bool
    """Whether to open futex doorbells with the private communicator."""
    native_bcast: bool
    """Every broadcast is the MPI library's own (the hot path of ``Bcast``)."""
    memo: Memo = field(default_factory=Memo)
    grid_id: int = 0
    """CRC-32 of the grid's fingerprint, in every header."""
    private: MPI.Intracomm | None = None
    emulator: _emu.Emulator | None = None
    bells: Doorbells | None = None
    watchdog: Watchdog | None = None
    seq: int = 0
    ntags: int = 1
    tag_offset: int = 0
    last: Any = None
    """The last call's plan, or (nbytes, root, itemsize) of a hot-path native broadcast."""
    broken: str | None = None
    """Why the collectives cannot run at all (the WAN emulation asked for on several
    hosts: never run unemulated), or None. A failed call does not set it."""
    notice_tag: int = 0
    """The tag of notices (``2 * ntags``: above every call's two tags)."""
    ledger: Ledger = field(default_factory=Ledger)
    """Failed calls, held notices, empty calls, orphaned sends
    (:class:`~gridcoll.runtime.notices.Ledger`): how a failed call leaves the
    communicator usable."""
    prior: int = 0
    """Digest of the calls that moved no byte since the last call that did
    (:func:`~gridcoll.runtime.header.empty_digest`); the next call's headers carry it."""
    progress: Any = None
    """The progress thread of the non-blocking calls
    (:class:`gridcoll.runtime.nonblocking.Progress`), from the first one."""
    deferring: Any = None
    """While a non-blocking call is being started: where the collective hands its run
    (a callable taking the job) instead of running it (:mod:`gridcoll.runtime.nonblocking`)."""
    hosts: tuple[str, ...] | None = None
    """The host of every rank (:mod:`gridcoll.runtime.hostnames`) once gathered: when
    the grid placed the ranks by host, or when the emulation checked for one machine."""
    by_host: bool = False
    """Whether the ranks were placed by host (:func:`gridcoll.network.place_by_host`)."""
    check: bool = False
    """Whether the ranks check that they agree on each native call (``GRIDCOLL_CHECK``)."""
    log: CallLog | None = None
    """Where each call is recorded (:mod:`gridcoll.runtime.record`); None: off."""
    adaptive_on: bool = False
    """Broadcasts adapt (``Comm(adaptive=True)``, ``GRIDCOLL_ADAPTIVE=1``)."""
    adaptive: Any = None
    """The :class:`gridcoll.runtime.adaptive.Adaptive` of the first adaptive broadcast."""
    report_tag: int = 0
    """The tag of an adaptive broadcast's reports to its root (``notice_tag + 1``)."""

    def close(self) -> None:
        """Free the private communicator and the doorbells (a later call makes new ones).

        Raises the :class:`~gridcoll.errors.CollectiveError` of a notice
        waiting here about a call this rank never made (the ranks made different
        numbers of calls), after everything is freed. Notices of calls this rank
        completed are dropped: its results stand.
        """
        if self.progress is not None:  # its outstanding calls end first
            self.progress.stop()
            self.progress = None
        if self.adaptive is not None:
            self.adaptive.close()
            self.adaptive = None
        err = None
        if self.private is not None and not MPI.Is_finalized():
            if self.broken is None:
                with _contextlib.suppress(MPI.Exception):  # a call never made here
                    err = take_notice(self.private, self.notice_tag, self.seq + 1)
                    if err is None:
                        err = held_notice(self.private, self.seq + 1, self.ledger, later=True)
            self._flush_notices()
            with _contextlib.suppress(MPI.Exception):
                self.private.Free()
        self.private = None
        self.ledger, self.prior = Ledger(), 0
        if self.bells is not None:
            self.bells.close()
            self.bells = None
        PROCESS.live.pop(id(self), None)
        if err is not None:
            raise err

    def _flush_notices(self) -> None:
        """Let the notices of a failed call leave, and the sends it left in flight
        complete, for up to a second (a notice is small: MPI sends it at once; a send
        of a mismatched call may never be received), then drop their buffers."""
        pending = [req for _buffers, reqs in self.ledger.orphans for req in reqs]
        deadline = _time.monotonic() + min(self.timeout, 1.0)
        while pending and _time.monotonic() < deadline:
            with _contextlib.suppress(MPI.Exception):
                pending = [req for req in pending if not req.Test()]
            if pending:
                _time.sleep(1e-3)
        self.ledger.orphans.clear()


@dataclass
class Process:
    """What the process shares: the plan cache, the watchdog thread, the live states."""

    plans: PlanCache = field(default_factory=lambda: PlanCache(maxsize=PLAN_CACHE_SIZE))
    live: dict = field(default_factory=dict)
    dog: Watchdog | None = None
    slack_set: bool = False
    fault: CollectiveError | None = None
    """The first failed gridcoll call of the process (:func:`note_failure`): at exit
    it decides how the process ends (:func:`_at_exit`)."""

    def watchdog(self) -> Watchdog:
        """The watchdog of blocking MPI calls (one thread, started on first use)."""
        if self.dog is None:
            self.dog = Watchdog()
        return self.dog


PROCESS = Process()
"""The process's shared parts (:class:`Process`)."""


def note_failure(state: State, err: CollectiveError) -> None:
    """Record a failed call: the first one of the process (:attr:`Process.fault`), and,
    in a job gridcoll launched, a line in the launcher's record of this rank naming the
    peer it waited for, as a rank of ``MPI.COMM_WORLD``
    (:func:`~gridcoll.runtime.watchdog.note_fault`)."""
    if PROCESS.fault is None:
        PROCESS.fault = err
    peers = []
    if err.peer is not None and state.private is not None:
        with _contextlib.suppress(MPI.Exception, IndexError):
            peers = [_translate(state.private, MPI.COMM_WORLD)[err.peer]]
    if not err.relayed:
        note_fault(type(err).__name__, str(err), peers)


@_atexit.register
def _at_exit() -> None:
    """Before mpi4py finalizes MPI: free the private communicators (no leak warnings),
    saying any notice no later call saw. Then, if a gridcoll call of this process
    failed (:attr:`Process.fault`): when the program is ending on an uncaught
    exception (the error has been reported), end the job now (``MPI_Abort``): the
    peer of a timed-out call died or never joined, and ``MPI_Finalize`` would wait for
    it forever; when the program handled the error and ends normally, ``MPI_Finalize``
    runs under the watchdog, which ends the job if it outlives the timeout."""
    if not MPI.Is_initialized() or MPI.Is_finalized():
        return
    note_for_launcher("exiting")  # the launcher tells "left" from "never joined"
    timeout = max((s.timeout for s in PROCESS.live.values()), default=DEFAULT_TIMEOUT)
    for state in list(PROCESS.live.values()):
        try:
            state.close()
        except CollectiveError as err:  # a notice no later call or Free has seen
            print(f"gridcoll: {type(err).__name__}: {err}", file=_sys.stderr, flush=True)
            if PROCESS.fault is None:
                PROCESS.fault = err
    fault = PROCESS.fault
    if fault is None:
        return
    uncaught = getattr(_sys, "last_value", None)  # set when a traceback was printed
    if uncaught is not None:
        _time.sleep(GRACE_S)  # the other ranks of the call say why before the abort
        why = "timed out" if isinstance(fault, CollectiveTimeout) else "failed"
        abort_job(
            f"the program ended on {type(uncaught).__name__} after a gridcoll collective "
            f"{why}; its peers may be dead or absent, and MPI_Finalize would wait for them"
        )
    PROCESS.watchdog().arm(timeout, "MPI_Finalize after a failed gridcoll collective")


# -- making a state ----------------------------------------------------------------------


def attach(
    comm: MPI.Intracomm,
    grid: Grid | str | None,
    algo: str | dict | None = None,
    params: dict | None = None,
    timeout: float | None = None,
    host_overhead: float | str | None = None,
    *,
    base: Grid | None = None,
    link_state: list | None = None,
    hosts: tuple[str, ...] | None = None,
    log: str | CallLog | None = None,
    adaptive: bool | None = None,
) -> State:
    """Make ``comm``'s state and attach it (local, no MPI call).

    ``grid`` None: the launch's (``GRIDCOLL_GRID``, its sub-grid for a part of
    ``COMM_WORLD``), else ``lan(size)``. A grid whose clusters name their ``hosts`` is
    placed by host: then this is collective (:func:`_place_by_host`).
    ``base``/``link_state``/``hosts``: the launch grid, link state and ranks' hosts of
    the communicator ``comm`` was made from. ``log``: a file name
    (:func:`gridcoll.runtime.record.open_log`; None: ``GRIDCOLL_LOG``) or the open log
    of that communicator; with a log, ``Bcast`` takes the general path (its line needs
    the plan). ``adaptive``: broadcasts adapt (:mod:`gridcoll.runtime.adaptive`; None:
    ``GRIDCOLL_ADAPTIVE``). The tunables ``CACHE_SIZE`` and ``DOORBELLS`` are read from ``comm``'s
    class.
    """
    algos = _algos(algo, params)
    timeout = _env_timeout() if timeout is None else float(timeout)
    if not timeout > 0:
        raise ParameterError(f"timeout must be > 0 seconds, got {timeout!r}")
    by_host = False
    if base is None:
        grid, base = _resolve_grid(comm, grid)
        if grid.clusters[0].hosts:
            grid, hosts = _place_by_host(comm, grid, timeout)
            base, by_host = grid, True
    emulated = _emu.emulation_requested() and not grid.is_single_cluster
    overhead = _host.resolve_host_overhead(
        host_overhead, _host.local_ranks(MPI.COMM_WORLD.Get_size()), emulated=emulated
    )
    name = algos["bcast"][0]
    check = _os.environ.get(ENV_CHECK, "").strip() not in ("", "0")
    if not isinstance(log, CallLog):
        log = open_log(log, MPI.COMM_WORLD.Get_rank())
    state = State(
        grid,
        base,
        algos,
        (algo, params),
        timeout,
        overhead,
        _host.effective_grid(grid, overhead),
        link_state or [None],
        int(getattr(type(comm), "CACHE_SIZE", 64)),
        bool(getattr(type(comm), "DOORBELLS", True)),
        bool(native_reason(grid, name)) and log is None and not check,  # tune.plan's rule
    )
    state.log = log
    state.check = check
    if adaptive is None:
        adaptive = _os.environ.get(ENV_ADAPTIVE, "").strip() not in ("", "0")
    state.adaptive_on = bool(adaptive) and not grid.is_single_cluster
    if state.adaptive_on:
        state.native_bcast = False
    state.grid_id = _zlib.crc32(grid.fingerprint.encode())
    state.hosts, state.by_host = hosts, by_host
    comm.gridcoll_state = state
    return state


def state_of(comm: MPI.Intracomm) -> State:
    """``comm``'s state (made with the defaults for a ``Comm`` mpi4py itself made)."""
    state = comm.gridcoll_state
    if state is None:
        state = attach(comm, None)
    return state


def attached(comm: MPI.Intracomm) -> State | None:
    """``comm``'s state if it has one (a ``Comm`` wrapping ``COMM_NULL`` has none)."""
    return comm.gridcoll_state


def derive(
    comm: MPI.Intracomm,
    new: MPI.Intracomm,
    grid: Grid | None = None,
    hosts: tuple[str, ...] | None = None,
) -> Any:
    """``new`` (a handle made from ``comm``) wrapped as ``comm``'s class, with ``comm``'s
    options, on ``grid`` and ``hosts`` (default: ``comm``'s)."""
    state = state_of(comm)
    out = type(comm).__new__(type(comm), new)
    attach(
        out,
        grid or state.grid,
        *state.spec,
        state.timeout,
        state.host_overhead,
        base=state.base_grid,
        link_state=state.link_state,
        hosts=state.hosts if hosts is None else hosts,
        log=state.log,
        adaptive=state.adaptive_on,
    )
    out.gridcoll_state.by_host = state.by_host
    return out


def subcomm(comm: MPI.Intracomm, new: MPI.Intracomm) -> Any:
    """A communicator made from a part of ``comm`` (``Split``...), on its sub-grid."""
    if new == MPI.COMM_NULL:
        return new
    ranks = _translate(new, comm)
    state = state_of(comm)
    hosts = None if state.hosts is None else tuple(state.hosts[r] for r in ranks)
    return derive(comm, new, _emu.subgrid(state.grid, ranks), hosts)


def _algos(algo: str | dict | None, params: dict | None) -> dict:
    """The algorithm table of ``algo=``, else of ``GRIDCOLL_ALGO`` (same syntax,
    :func:`~gridcoll.runtime.choice.parse_algo`; an error names the variable)."""
    if algo:
        return algo_table(algo, params)
    text = _os.environ.get(ENV_ALGO, "")
    try:
        return algo_table(text, params)
    except (ParameterError, UnknownAlgorithm) as err:
        if not text.strip():
            raise
        raise type(err)(f"{ENV_ALGO}={text!r}: {err}") from err


def _env_timeout() -> float:
    text = _os.environ.get(ENV_TIMEOUT, "").strip()
    if not text:
        return DEFAULT_TIMEOUT
    try:
        value = float(text)
    except ValueError as err:
        raise ParameterError(f"{ENV_TIMEOUT}={text!r} is not a number of seconds") from err
    return value


def _resolve_grid(comm: MPI.Intracomm, grid: Grid | str | None) -> tuple[Grid, Grid]:
    """(the grid of ``comm``, the launch grid the emulated links belong to)."""
    size = comm.Get_size()
    if grid is not None:
        resolved = get_grid(grid)
        base = resolved
    else:
        spec = _os.environ.get(_emu.ENV_GRID, "").strip()
        if not spec:
            resolved = lan(size)
            return resolved, resolved
        base = get_grid(spec)
        resolved = base
        by_number = not base.clusters[0].hosts  # a grid placed by host: on comm's hosts
        if by_number and base.nranks == MPI.COMM_WORLD.Get_size():
            resolved = _emu.subgrid(base, _translate(comm, MPI.COMM_WORLD))
    if resolved.nranks != size:
        raise GridError(
            f"grid {resolved.name!r} has {resolved.nranks} ranks but the communicator has "
            f"{size}: pass grid= with one rank per process"
        )
    return resolved, base


def _place_by_host(comm: MPI.Intracomm, grid: Grid, timeout: float) -> tuple[Grid, tuple[str, ...]]:
    """``grid`` placed by the hosts of ``comm``'s ranks (collective: every rank gathers
    every rank's host, :func:`gridcoll.runtime.hostnames.gather_hosts`, and places them
    alike, :func:`gridcoll.network.place_by_host`), and those hosts. The WAN emulation
    needs one host: asked for on several, it is refused here, before any call."""
    hosts = _hostnames.gather_hosts(MPI.Intracomm(comm), wait, timeout)  # not Comm.Iallgather
    placed = place_by_host(grid, hosts)
    if _emu.emulation_requested() and not placed.is_single_cluster:
        _hostnames.one_host_or_raise(hosts, f"the WAN emulation of grid {grid.name!r}")
    return placed, hosts


def placement_note(state: State) -> str:
    """How the ranks were placed by host (one line per cluster), or "" when by number."""
    if not state.by_host or state.hosts is None:
        return ""
    return "ranks placed by host:\n" + placement_summary(state.grid, state.hosts)


def _translate(comm: MPI.Comm, other: MPI.Comm) -> list[int]:
    mine, theirs = comm.Get_group(), other.Get_group()
    try:
        return list(mine.Translate_ranks(list(range(mine.Get_size())), theirs))
    finally:
        mine.Free()
        theirs.Free()


# -- the first collective ----------------------------------------------------------------


def ready(comm: MPI.Intracomm) -> State:
    """The state, with the private communicator and the emulator set up (collective:
    every rank's first gridcoll collective calls it)."""
    state = state_of(comm)
    progress = state.progress
    if (
        progress is not None
        and state.deferring is None
        and progress.busy
        and not progress.runs_here()  # a job's own calls (a v-variant's counts first)
    ):
        progress.drain()  # MPI's order: the outstanding non-blocking calls first
    if state.broken:
        raise CollectiveError(
            f"this communicator's gridcoll collectives cannot run: {state.broken}"
        )
    if state.private is None:
        try:
            _set_up(comm, state)
        except CollectiveTimeout as err:  # a rank died or never joined
            note_failure(state, err)
            raise
    return state


def _set_up(comm: MPI.Intracomm, state: State) -> None:
    """The first collective's part of :func:`ready`."""
    _set_timer_slack()
    private, req = MPI.Intracomm(comm).Idup()
    wait(
        req,
        state.timeout,
        what=(
            f"rank {comm.Get_rank()}: duplicating the communicator (MPI_Comm_idup, the "
            "first gridcoll collective; some rank died or never joined)"
        ),
    )
    state.private = private
    state.watchdog = PROCESS.watchdog()
    tag_ub = private.Get_attr(MPI.TAG_UB) or 32767
    state.ntags = max(1, min((tag_ub - 2) // 2, 1 << 20))
    state.notice_tag = 2 * state.ntags  # <= tag_ub - 2, above every call's tags
    state.report_tag = state.notice_tag + 1
    # A random epoch, the same on all ranks, numbers this communicator's calls: MPI
    # recycles the context of a freed communicator, and a stray message of a failed
    # call on it must not match (tags differ) nor pass (headers differ) here.
    epoch = _np.array([int.from_bytes(_os.urandom(4), "little") & 0x7FFFFFFF])
    wait(private.Ibcast(epoch, 0), state.timeout, what="numbering the communicator")
    state.seq = int(epoch[0]) << 32
    state.tag_offset = int(epoch[0]) % state.ntags
    PROCESS.live[id(state)] = state
    if state.doorbells and private.Get_size() > 1:
        state.bells = Doorbells.open_for(private, wait, state.timeout)
    if _emu.emulation_requested() and not state.grid.is_single_cluster:
        state.emulator = _open_emulator(state)


def _open_emulator(state: State) -> _emu.Emulator:
    """The WAN emulator (collective): refused unless every rank runs on one host."""
    if state.hosts is None:
        state.hosts = _hostnames.gather_hosts(state.private, wait, state.timeout)
    try:
        _hostnames.one_host_or_raise(state.hosts, f"the WAN emulation of grid {state.grid.name!r}")
    except GridError as err:  # never run unemulated on a later call
        state.broken = str(err)
        raise
    if state.link_state[0] is None:
        path = _os.environ.get(_emu.ENV_LINK_STATE, "").strip()
        env_grid = _os.environ.get(_emu.ENV_GRID, "").strip()
        shared = (
            bool(path)
            and bool(env_grid)
            and get_grid(env_grid).fingerprint == state.base_grid.fingerprint
        )
        if shared:
            state.link_state[0] = _emu.LinkState(path, state.base_grid)
        else:
            state.link_state[0] = _make_link_state(state)
    return _emu.Emulator(state.grid, state.link_state[0], *_emu.environment_load())


def _make_link_state(state: State) -> _emu.LinkState:
    """Rank 0 creates a link-state file, every rank opens it, then rank 0 unlinks it."""
    comm = state.private
    name = _np.zeros(512, dtype=_np.uint8)
    if comm.Get_rank() == 0:
        path = str(_emu.create_link_state(state.base_grid)).encode()
        name[: len(path)] = _np.frombuffer(path, dtype=_np.uint8)
    wait(comm.Ibcast([name, MPI.BYTE], 0), state.timeout, what="sharing the link state")
    path = name.tobytes().rstrip(b"\0").decode()
    link_state = _emu.LinkState(path, state.base_grid)
    wait(comm.Ibarrier(), state.timeout, what="opening the link state")
    if comm.Get_rank() == 0:
        _os.unlink(path)
    return link_state


def _set_timer_slack() -> None:
    """Ask Linux for 1 us timer slack, so the 20 us sleeps of a wait are 20 us, not 70."""
    if PROCESS.slack_set:
        return
    PROCESS.slack_set = True
    try:
        import ctypes

        ctypes.CDLL(None).prctl(29, 1000, 0, 0, 0)  # PR_SET_TIMERSLACK, nanoseconds
    except (OSError, AttributeError):
        pass


# -- the caches ----------------------------------------------------------------------------


@dataclass(frozen=True)
class CacheInfo:
    """What a communicator's caches hold (:func:`cache_info`)."""

    prepared: int
    """Call signatures with a plan and a compiled program."""
    programs: int
    """Schedules compiled for ``Comm.execute``."""
    maxsize: int
    """The bound of each of the two (``Comm.CACHE_SIZE``)."""
    hits: int
    misses: int
    plans: int
    """Plans in the process's :class:`~gridcoll.tune.PlanCache` (every communicator)."""
    plans_maxsize: int


def cache_info(state: State) -> CacheInfo:
    """The sizes, bounds and hit counts of a communicator's caches and the process's."""
    sizes = state.memo.sizes()
    return CacheInfo(
        sizes.get("prepared", 0),
        sizes.get("programs", 0),
        state.cache_size,
        state.memo.hits,
        state.memo.misses,
        len(PROCESS.plans),
        PROCESS.plans.maxsize,
    )


def cache_clear(state: State, plans: bool = False) -> None:
    """Drop a communicator's prepared calls and programs (and, with ``plans``, every
    plan of the process): the next call of each signature plans and compiles again."""
    state.memo.clear()
    if plans:
        PROCESS.plans.clear()
