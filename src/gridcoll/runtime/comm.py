"""``gridcoll.Comm``: an mpi4py communicator whose collectives are gridcoll's.

Modelled on ``mpi4py.util.pkl5``: a subclass of :class:`mpi4py.MPI.Intracomm` built by
wrapping an existing communicator (the same MPI handle, not a copy), whose collective
methods are one-liners calling module helpers. Methods gridcoll does not implement are
mpi4py's own, on the wrapped communicator.

Each ``Comm`` keeps a private duplicate of the wrapped communicator, created with
``MPI_Comm_idup`` on its first gridcoll collective, so gridcoll's messages never mix
with the application's; a per-call tag keeps calls apart on it.
"""

from __future__ import annotations

import atexit as _atexit
import collections as _collections
import contextlib as _contextlib
import json as _json
import math as _math
import os as _os
import zlib as _zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as _np
from mpi4py import MPI

from gridcoll.algorithms.registry import get_builder
from gridcoll.errors import GridcollError, GridError, ParameterError
from gridcoll.network.grid import Grid
from gridcoll.network.presets import get_grid, lan
from gridcoll.runtime import emulation as _emu
from gridcoll.runtime import host as _host
from gridcoll.runtime import layout as _layout
from gridcoll.runtime.doorbell import Doorbells
from gridcoll.runtime.executor import (
    DEFAULT_TIMEOUT,
    CallInfo,
    CollectiveError,
    MismatchError,
    Program,
    compile_program,
    execute,
    wait,
)
from gridcoll.runtime.watchdog import Watchdog
from gridcoll.schedule.ir import Schedule
from gridcoll.tune import PlanCache, plan

__all__ = ["ENV_ALGO", "ENV_TIMEOUT", "Comm", "FixedPlan"]

ENV_TIMEOUT = "GRIDCOLL_TIMEOUT"
"""Environment variable: default timeout (seconds) of every ``Comm``."""
ENV_ALGO = "GRIDCOLL_ALGO"
"""Environment variable: default ``algo`` of every ``Comm`` (``auto`` if unset)."""

NATIVE = "native"
"""The ``algo`` name of the MPI library's own broadcast (``MPI_Bcast``)."""


# -- plans ----------------------------------------------------------------------------


@dataclass(frozen=True)
class FixedPlan:
    """A plan the caller fixed (``algo=`` with ``params=``), or the native broadcast.

    It has the fields of :class:`gridcoll.tune.Plan` that the runtime reads.
    """

    op: str
    grid: str
    nbytes: int
    root: int
    itemsize: int
    algorithm: str
    params: dict = field(default_factory=dict)
    segment_size: int = 0
    predicted_s: float = _math.nan
    bound_s: float = _math.nan
    candidates: tuple = ()
    reason: str = ""

    def build(self, grid: Grid) -> Schedule:
        """The schedule of this plan on ``grid``."""
        if self.algorithm == NATIVE:
            raise GridcollError("the native broadcast has no gridcoll schedule")
        builder = get_builder(self.op, self.algorithm)
        return builder.build(grid, self.nbytes, self.root, itemsize=self.itemsize, **self.params)

    def explain(self) -> str:
        """Why this algorithm ran."""
        params = ", ".join(f"{k}={v}" for k, v in self.params.items())
        return (
            f"{self.op} of {self.nbytes} B from root {self.root} on {self.grid}: "
            f"{self.algorithm}({params}) because {self.reason}"
        )


def _tuned_plan(state: _State, nbytes: int, root: int, itemsize: int) -> Any:
    """The plan of one call, made on the effective grid (``state.plan_grid``: the grid
    plus the runtime's per-message host overhead, :mod:`gridcoll.runtime.host`)."""
    algo = state.algo
    if state.native_reason:
        return _native_plan(state, nbytes, root, itemsize)
    if state.params is not None:
        return FixedPlan(
            "bcast",
            state.plan_grid.name,
            nbytes,
            root,
            itemsize,
            algo,
            dict(state.params),
            int(state.params.get("segment_size", nbytes)),
            reason=f"the caller fixed algo={algo!r} with params={state.params!r}",
        )
    if state.plan_cache is None:
        state.plan_cache = _shared_cache()
    return plan(
        state.plan_grid,
        "bcast",
        nbytes,
        root,
        algo=algo,
        itemsize=itemsize,
        cache=state.plan_cache,
    )


def _native_reason(grid: Grid, algo: str) -> str | None:
    """Why every broadcast of a communicator goes to the MPI library's own, or None."""
    if algo == NATIVE:
        return "the caller asked for the MPI library's own broadcast"
    if algo == "auto" and grid.is_single_cluster:
        # One cluster, no wide-area link: gridcoll knows nothing of this network that
        # the MPI library does not, and the library's broadcast runs its tuned algorithms
        # in C with per-message costs below a microsecond, where a schedule executed from
        # Python pays the host overhead (several us per message, more when ranks share
        # cores) on every segment. No model of this machine's shared memory says
        # otherwise, so auto hands the call to MPI_Bcast (bench/native.py measures it).
        return (
            "the communicator is one cluster (no wide-area link to plan around): the "
            "MPI library's own broadcast is faster than any schedule run from Python"
        )
    return None


def _native_plan(state: _State, nbytes: int, root: int, itemsize: int) -> FixedPlan:
    return FixedPlan(
        "bcast",
        state.plan_grid.name,
        nbytes,
        root,
        itemsize,
        NATIVE,
        segment_size=nbytes,
        reason=state.native_reason or "",
    )


_PLAN_CACHE: list = []
_WATCHDOG: list = []


def _watchdog() -> Watchdog:
    """The process's watchdog of blocking MPI calls (one thread, started on first use:
    the first gridcoll collective of the process)."""
    if not _WATCHDOG:
        _WATCHDOG.append(Watchdog())
    return _WATCHDOG[0]


def _shared_cache() -> PlanCache:
    """One PlanCache for every Comm of the process: plans are deterministic given the
    grid (fingerprint), size, root, itemsize and algo, and a plan can cost a max-flow
    per cluster, so a duplicate or a new communicator should not search again."""
    if not _PLAN_CACHE:
        _PLAN_CACHE.append(PlanCache(maxsize=1024))
    return _PLAN_CACHE[0]


# -- per-communicator state -----------------------------------------------------------


@dataclass(slots=True)
class _Prepared:
    plan: Any
    program: Program | None  # None: native
    layout: Any = None  # collectives other than bcast: runtime.layout.Layout
    staging: _np.ndarray | None = None  # the packed local buffer, reused call to call


@dataclass
class _State:
    grid: Grid  # the physical grid: the emulator's links and latencies
    base_grid: Grid  # the grid the launch's link state describes
    algo: str
    params: dict | None
    timeout: float
    link_state: list  # [LinkState | None], shared by a Comm and its duplicates
    host_overhead: float = 0.0
    plan_grid: Grid | None = None  # grid + host overhead: what plans and builds use
    private: MPI.Intracomm | None = None
    emulator: _emu.Emulator | None = None
    bells: Doorbells | None = None
    seq: int = 0
    ntags: int = 1
    tag_offset: int = 0
    plan_cache: Any = None
    prepared: _collections.OrderedDict = field(default_factory=_collections.OrderedDict)
    schedules: dict = field(default_factory=dict)
    last_plan: Any = None  # a plan, or (nbytes, root, itemsize) of a native broadcast
    native_reason: str | None = None  # set: every broadcast is the MPI library's own
    watchdog: Watchdog | None = None  # of blocking native calls, set with ``private``
    broken: str | None = None
    grid_id: int = 0
    algos: dict = field(default_factory=dict)  # op -> (algorithm, fixed params or None)
    spec: tuple = (None, None)  # the algo= and params= the caller gave (for Dup, Split...)

    def close(self) -> None:
        if self.private is not None and not MPI.Is_finalized():
            with _contextlib.suppress(MPI.Exception):
                self.private.Free()
        self.private = None
        if self.bells is not None:
            self.bells.close()
            self.bells = None
        _STATES.pop(id(self), None)


_STATES: dict[int, _State] = {}


@_atexit.register
def _free_private_comms() -> None:
    """Free the private communicators before mpi4py finalizes MPI (no leak warnings)."""
    if not MPI.Is_initialized() or MPI.Is_finalized():
        return
    for state in list(_STATES.values()):
        state.close()


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
        if base.nranks == MPI.COMM_WORLD.Get_size():
            resolved = _emu.subgrid(base, _translate(comm, MPI.COMM_WORLD))
    if resolved.nranks != size:
        raise GridError(
            f"grid {resolved.name!r} has {resolved.nranks} ranks but the communicator has "
            f"{size}: pass grid= with one rank per process"
        )
    return resolved, base


def _translate(comm: MPI.Comm, other: MPI.Comm) -> list[int]:
    mine, theirs = comm.Get_group(), other.Get_group()
    try:
        return list(mine.Translate_ranks(list(range(mine.Get_size())), theirs))
    finally:
        mine.Free()
        theirs.Free()


def _init_state(
    comm: Comm,
    grid: Grid,
    base: Grid,
    algo: str | None,
    params: dict | None,
    timeout: float | None,
    link_state: list | None = None,
    host_overhead: float | str | None = None,
) -> None:
    spec = (algo, params)
    algos = _coll.algo_table(algo or _os.environ.get(ENV_ALGO, "").strip() or "auto", params)
    algo, params = algos["bcast"]
    timeout = _env_timeout() if timeout is None else float(timeout)
    if not timeout > 0:
        raise ParameterError(f"timeout must be > 0 seconds, got {timeout!r}")
    emulated = _emu.emulation_requested() and not grid.is_single_cluster
    overhead = _host.resolve_host_overhead(
        host_overhead, _host.local_ranks(MPI.COMM_WORLD.Get_size()), emulated=emulated
    )
    state = _State(
        grid,
        base,
        algo,
        dict(params) if params else params,
        timeout,
        link_state or [None],
        overhead,
        _host.effective_grid(grid, overhead),
    )
    state.grid_id = _zlib.crc32(grid.fingerprint.encode())
    state.algos, state.spec = algos, spec
    state.native_reason = None if params else _native_reason(grid, algo)
    comm._gc = state


def _state(comm: Comm) -> _State:
    state = comm.__dict__.get("_gc")
    if state is None:  # made by mpi4py itself (e.g. a duplicate made by a subclass call)
        grid, base = _resolve_grid(comm, None)
        _init_state(comm, grid, base, None, None, None)
        state = comm._gc
    return state


def _ready(comm: Comm) -> _State:
    """The state, with the private communicator and the emulator set up (collective)."""
    state = _state(comm)
    if state.broken:
        raise CollectiveError(
            f"this communicator's gridcoll collectives are unusable after a failed call "
            f"({state.broken}); create a new gridcoll.Comm"
        )
    if state.private is None:
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
        state.watchdog = _watchdog()
        tag_ub = private.Get_attr(MPI.TAG_UB) or 32767
        state.ntags = max(1, min((tag_ub - 1) // 2, 1 << 20))
        # A random epoch, the same on all ranks, numbers this communicator's calls: MPI
        # recycles the context of a freed communicator, and a stray message of a failed
        # call on it must not match (tags differ) nor pass (headers differ) here.
        epoch = _np.array([int.from_bytes(_os.urandom(4), "little") & 0x7FFFFFFF])
        wait(private.Ibcast(epoch, 0), state.timeout, what="numbering the communicator")
        state.seq = int(epoch[0]) << 32
        state.tag_offset = int(epoch[0]) % state.ntags
        _STATES[id(state)] = state
        if Comm.DOORBELLS and private.Get_size() > 1:
            state.bells = Doorbells.open_for(private, wait, state.timeout)
        if _emu.emulation_requested() and not state.grid.is_single_cluster:
            state.emulator = _open_emulator(state)
    return state


def _open_emulator(state: _State) -> _emu.Emulator:
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
    return _emu.Emulator(state.grid, state.link_state[0])


def _make_link_state(state: _State) -> _emu.LinkState:
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


_SLACK_SET = False


def _set_timer_slack() -> None:
    """Ask Linux for 1 us timer slack, so the 20 us sleeps of a wait are 20 us, not 70."""
    global _SLACK_SET
    if _SLACK_SET:
        return
    _SLACK_SET = True
    try:
        import ctypes

        ctypes.CDLL(None).prctl(29, 1000, 0, 0, 0)  # PR_SET_TIMERSLACK, nanoseconds
    except (OSError, AttributeError):
        pass


# -- buffers --------------------------------------------------------------------------


@dataclass(slots=True)
class _Spec:
    """A parsed mpi4py buffer spec."""

    view: _np.ndarray  # the message's bytes (every block)
    itemsize: int  # the datatype's extent
    count: int  # elements per block (of the whole message for blocks < 2)
    datatype: MPI.Datatype | None  # None: the buffer's own format
    data: Any  # the buffer object


def _message(buf: Any, root_side: bool) -> tuple[_np.ndarray | None, int]:
    """Parse a broadcast's buffer spec: (byte view, item size); view None = native MPI."""
    spec = _spec(buf, root_side)
    return (None, 1) if spec is None else (spec.view, spec.itemsize)


def _spec(buf: Any, readonly: bool, blocks: int = 0) -> _Spec | None:
    """Parse an mpi4py buffer spec; None = a datatype with holes (use native MPI).

    Forms: ``buf``, ``[buf, datatype]``, ``[buf, count]``, ``[buf, count, datatype]``,
    ``[buf, (count, displ), datatype]``, ``[buf, count, displ, datatype]``. With
    ``blocks >= 2`` (a collective's per-rank row, mpi4py's ``BufSpecB``) an explicit
    count is per block and an inferred one the entries divided by ``blocks``. Errors are
    mpi4py's own: the spec first goes through ``MPI.COMM_SELF.Bcast``, a no-op on one
    process that raises exactly what mpi4py raises for a bad buffer.
    """
    if (
        type(buf) is _np.ndarray  # the common case, first: a plain contiguous array
        and buf.flags.c_contiguous
        and (readonly or buf.flags.writeable)
        and not buf.dtype.hasobject
    ):
        itemsize = max(buf.itemsize, 1)
        count = _per_block(buf.size, blocks)
        return _Spec(buf.reshape(-1).view(_np.uint8), itemsize, count, None, buf)
    MPI.COMM_SELF.Bcast(buf, 0)
    data, count, displ, dtype = buf, None, 0, None
    if isinstance(buf, list | tuple):
        data, rest = buf[0], list(buf[1:])
        if rest and (isinstance(rest[-1], MPI.Datatype | str)):
            dtype = rest.pop()
        if len(rest) == 2:
            count, displ = rest
        elif len(rest) == 1:
            count = rest[0]
            if isinstance(count, list | tuple):
                count, displ = count
    if isinstance(dtype, str):
        from mpi4py.util.dtlib import from_numpy_dtype

        dtype = from_numpy_dtype(dtype)
    if data is None or data is MPI.IN_PLACE or data is MPI.BOTTOM:
        if count:
            return None
        return _Spec(_np.empty(0, _np.uint8), 1, 0, dtype, data)
    if not readonly and memoryview(data).readonly:
        raise BufferError("Object is not writable.")
    view = _bytes_of(data)
    if dtype is None:
        itemsize = max(memoryview(data).itemsize, 1)
    else:
        lb, extent = dtype.Get_extent()
        tlb, textent = dtype.Get_true_extent()
        if not (lb == 0 and tlb == 0 and dtype.Get_size() == extent == textent):
            return None  # a datatype with holes: MPI's own collective handles it
        itemsize = extent
    if count is None:
        count = _per_block(view.size // itemsize - displ, blocks)
    start, nbytes = displ * itemsize, count * itemsize * max(blocks, 1)
    if start < 0 or start + nbytes > view.size:
        raise MPI.Exception(MPI.ERR_COUNT)
    return _Spec(view[start : start + nbytes], itemsize, count, dtype, data)


def _per_block(entries: int, blocks: int) -> int:
    """Elements per block of a row of ``entries`` elements (mpi4py's rule and error)."""
    if blocks < 2:
        return entries
    if entries % blocks:
        raise ValueError(
            f"message: cannot infer count, number of entries {entries} is not a multiple "
            f"of required number of blocks {blocks}"
        )
    return entries // blocks


def _bytes_of(data: Any) -> _np.ndarray:
    if isinstance(data, _np.ndarray):
        arr = data if data.flags.c_contiguous else data.T
        return arr.reshape(-1).view(_np.uint8)
    mv = memoryview(data)
    if not mv.c_contiguous:
        arr = _np.asarray(data)
        return _bytes_of(arr)
    return _np.frombuffer(mv.cast("B"), dtype=_np.uint8)


# -- the collectives ------------------------------------------------------------------


def _check_root(comm: MPI.Intracomm, root: int) -> None:
    if not isinstance(root, int) or isinstance(root, bool):
        raise TypeError("an integer is required")
    if not 0 <= root < comm.Get_size():
        raise MPI.Exception(MPI.ERR_ROOT)


def _prepare(
    state: _State,
    rank: int,
    nbytes: int,
    root: int,
    itemsize: int,
    op: str = "bcast",
    commutative: bool = True,
    inplace: bool = False,
) -> _Prepared:
    """The plan and compiled program of one call (cached per communicator).

    Collectives other than the broadcast also get the rank's buffer layout
    (:mod:`gridcoll.runtime.layout`; ``inplace``: ``MPI.IN_PLACE``), which the program
    is compiled for.
    """
    key: tuple = (nbytes, root, itemsize)
    if op != "bcast":
        key = (op, nbytes, root, itemsize, commutative, inplace)
    prepared = state.prepared.get(key)
    if prepared is not None:
        state.prepared.move_to_end(key)
        return prepared
    if op == "bcast":
        plan = _tuned_plan(state, nbytes, root, itemsize)
    else:
        plan = _coll.op_plan(state, op, nbytes, root, itemsize, commutative)
    program = layout = None
    if plan.algorithm != NATIVE:
        schedule = plan.build(state.plan_grid)
        call = CallInfo.of(schedule, itemsize=itemsize, grid_id=state.grid_id)
        if op not in ("bcast", "barrier"):
            layout = _layout.layout_for(schedule, rank, inplace=inplace)
        program = compile_program(
            schedule,
            rank,
            emulator=state.emulator,
            call=call,
            layout=None if layout is None else layout.offsets,
        )
    prepared = _Prepared(plan, program, layout)
    state.prepared[key] = prepared
    if len(state.prepared) > Comm.CACHE_SIZE:
        state.prepared.popitem(last=False)
    return prepared


def _bcast(comm: Comm, buf: Any, root: int) -> None:
    rank = comm.Get_rank()
    view, itemsize = _message(buf, root == rank)
    _check_root(comm, root)
    if view is not None and (view.size == 0 or comm.Get_size() == 1):
        return
    state = _ready(comm)
    if view is None:
        state.last_plan = FixedPlan(
            "bcast",
            state.plan_grid.name,
            0,
            root,
            1,
            NATIVE,
            reason="its datatype is not contiguous",
        )
        _native_bcast(state, buf, root)
        return
    prepared = _prepare(state, rank, view.size, root, itemsize)
    state.last_plan = prepared.plan
    if prepared.program is None:
        _native_bcast(state, [view, MPI.BYTE], root)
        return
    _execute(state, prepared.program, view)


def _native_bcast(state: _State, buf: Any, root: int) -> None:
    """The MPI library's own broadcast: :func:`_native_call` written out, since it is
    the hot path of a one-cluster communicator (no closure per call)."""
    dog = state.watchdog
    dog.arm(state.timeout, "native broadcast")
    try:
        state.private.Bcast(buf, root)
    finally:
        dog.disarm()


def _native_call(state: _State, call: Callable[[MPI.Intracomm], object], what: str) -> None:
    """``call(private communicator)``: one of the MPI library's own collectives, called
    blocking as a plain mpi4py program calls it (bench/native.py: a request and a test
    loop cost 2-7x on small messages), under the process's watchdog: a rank that never
    joins ends the job after the timeout instead of hanging it
    (:mod:`gridcoll.runtime.watchdog`)."""
    dog = state.watchdog
    dog.arm(state.timeout, what)
    try:
        call(state.private)
    finally:
        dog.disarm()


def _execute(state: _State, program: Program, view: _np.ndarray, reduce=None) -> None:
    """Run a compiled program as the next call: its own sequence number and tag."""
    state.seq += 1
    call = program.call.numbered(state.seq)
    tag = _tag(state, state.seq)
    _run(
        state,
        lambda: execute(
            program,
            state.private,
            view,
            emulator=state.emulator,
            timeout=state.timeout,
            tag=tag,
            reduce=reduce,
            doorbells=state.bells,
            call=call,
        ),
    )
    _run(state, lambda: _check_strays(state))


def _tag(state: _State, seq: int) -> int:
    return 2 * ((seq + state.tag_offset) % state.ntags)


def _check_strays(state: _State) -> None:
    """After a call, no message of it (or of the one before) may still be waiting here:
    all this rank expected has been received, so another rank ran a different schedule
    (a root, size or datatype that does not match, or a call this rank did not make).

    Fast path: one probe for any message; usually nothing is waiting. Otherwise the
    first waiting message proves nothing (a message of a later call from a rank that is
    already ahead is fine, and so is a stale one of an earlier communicator whose
    context MPI recycled: its tags differ), and it may hide a stray behind it, so the
    tags of this call and the one before are probed by name. A stray from a peer this
    rank received from in this call was sent before that peer's message of this call,
    and the library delivers one pair's messages in order (MPICH's queues do), so it is
    waiting here and found without fail; one from a rank that only sent to others may
    still be on its way, and is found by a later call's probe or header check.
    """
    comm = state.private
    if not comm.Iprobe(MPI.ANY_SOURCE, MPI.ANY_TAG):
        return
    status = MPI.Status()
    for seq in (state.seq, state.seq - 1):
        tag = _tag(state, seq)
        for t in (tag + 1, tag):  # a stray's header precedes its data
            if comm.Iprobe(MPI.ANY_SOURCE, t, status):
                src, rank = status.Get_source(), comm.Get_rank()
                raise MismatchError(
                    f"rank {rank}: rank {src} sent a message this rank does not expect in "
                    f"call {seq & 0xFFFFFFFF}: the ranks called the collective with "
                    "mismatched arguments (roots, sizes, datatypes or call order)",
                    rank=rank,
                    peer=src,
                )


def _execute_schedule(comm: Comm, schedule: Schedule, buf: Any, reduce=None) -> None:
    state = _ready(comm)
    if schedule.nranks != comm.Get_size():
        raise ParameterError(
            f"the schedule is for {schedule.nranks} ranks, the communicator has {comm.Get_size()}"
        )
    key = id(schedule)
    cached = state.schedules.get(key)
    if cached is None or cached[0] is not schedule:
        call = CallInfo.of(schedule, grid_id=state.grid_id)
        program = compile_program(schedule, comm.Get_rank(), emulator=state.emulator, call=call)
        cached = state.schedules[key] = (schedule, program)
        while len(state.schedules) > Comm.CACHE_SIZE:
            state.schedules.pop(next(iter(state.schedules)))
    state.last_plan = None
    _execute(state, cached[1], _bytes_of(buf), reduce)


def _run(state: _State, action) -> None:
    try:
        action()
    except CollectiveError as err:
        state.broken = str(err)
        raise


_HEAD = 256  # bytes of bcast()'s first broadcast: 8-byte length, then the first bytes


def _bcast_obj(comm: Comm, obj: Any, root: int) -> Any:
    rank = comm.Get_rank()
    _check_root(comm, root)
    head = _np.zeros(_HEAD, dtype=_np.uint8)
    data = b""
    if rank == root:
        data = MPI.pickle.dumps(obj)
        inline = min(len(data), _HEAD - 8)
        head[:8] = _np.frombuffer(len(data).to_bytes(8, "little"), dtype=_np.uint8)
        head[8 : 8 + inline] = _np.frombuffer(data[:inline], dtype=_np.uint8)
    if comm.Get_size() > 1:
        _bcast(comm, head, root)
    if rank == root:
        if len(data) > _HEAD - 8 and comm.Get_size() > 1:
            _bcast(comm, _np.frombuffer(data, dtype=_np.uint8)[_HEAD - 8 :], root)
        return MPI.pickle.loads(data)
    n = int.from_bytes(head[:8].tobytes(), "little")
    inline = min(n, _HEAD - 8)
    whole = _np.empty(n, dtype=_np.uint8)
    whole[:inline] = head[8 : 8 + inline]
    if n > inline:
        _bcast(comm, whole[inline:], root)
    return MPI.pickle.loads(whole)


def _derived(comm: Comm, new: MPI.Intracomm) -> MPI.Intracomm:
    """Wrap a communicator made from ``comm`` as a gridcoll.Comm on the matching sub-grid."""
    if new == MPI.COMM_NULL:
        return new
    state = _state(comm)
    ranks = _translate(new, comm)
    grid = _emu.subgrid(state.grid, ranks)
    out = Comm.__new__(type(comm), new)
    _init_state(
        out,
        grid,
        state.base_grid,
        *state.spec,
        state.timeout,
        state.link_state,
        state.host_overhead,
    )
    return out


# -- the class ------------------------------------------------------------------------


class Comm(MPI.Intracomm):
    """An mpi4py intracommunicator whose collectives are gridcoll's.

    ``Comm(comm, grid=None, *, algo=None, params=None, timeout=None)`` wraps ``comm``
    (same MPI handle, like ``mpi4py.util.pkl5.Intracomm``). Construction is local; the
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
        else ``lan(size)``, a single cluster.
    algo : str or mapping, optional
        ``"auto"`` (the tuner chooses per call; on a one-cluster communicator, the MPI
        library's own collective), a builder name (every collective that has a builder
        of that name uses it, the tuner choosing only its parameters; the others
        ``auto``), ``"native"`` (the MPI library's own), or a mapping from collectives
        to any of these (``{"scatter": "magpie-segmented", "allreduce": "auto"}``).
        Default ``GRIDCOLL_ALGO`` or ``"auto"``.
    params : dict, optional
        With a builder name: its parameters, fixed (``{"segment_size": 8192}``); with a
        mapping ``algo``, a mapping from those collectives to their parameters.
    timeout : float, optional
        Seconds a rank waits for one message before raising
        :class:`~gridcoll.runtime.CollectiveTimeout`. Default ``GRIDCOLL_TIMEOUT`` or 60.
    host_overhead : float or str, optional
        This runtime's CPU cost per message and side, in seconds (or ``"40us"``): the
        tuner plans on ``grid.with_host_overhead(host_overhead)``, so segments are not
        cut finer than the software can push. Default ``GRIDCOLL_HOST_OVERHEAD``, else
        the calibrated :func:`gridcoll.runtime.host.default_host_overhead`.

    Notes
    -----
    gridcoll's collectives, with mpi4py's signatures and results: ``Bcast``,
    ``Scatter``, ``Gather``, ``Allgather``, ``Alltoall``, ``Reduce``, ``Allreduce``
    (``op=``: predefined, ``MPI.Op.Create`` user ops, non-commutative ones combined in
    rank order), ``Barrier``, and the object forms ``bcast``, ``scatter``, ``gather``,
    ``allgather``, ``alltoall``, ``reduce``, ``allreduce``, ``barrier``; ``MPI.IN_PLACE``
    where MPI allows it; every buffer form (``buf``, ``[buf, type]``, ``[buf, count,
    type]``, ...). ``algo`` may also map collectives to builders (``{"allreduce":
    "two-level"}``, with ``params={"allreduce": {...}}``). They never block inside MPI
    (they test requests and sleep), raise bad arguments before any message is sent,
    check arguments across ranks (mismatched sizes, datatypes or roots raise
    :class:`~gridcoll.runtime.MismatchError` or time out with a message saying so), and
    cross the emulated WAN when the launcher switched it on. ``explain()`` and
    ``last_plan`` tell why the last call chose its algorithm.

    Passed through to mpi4py on the wrapped communicator: everything else: ``Get_rank``,
    ``Get_size``, point-to-point (``Send``, ``Recv``, ``Isend``, ``send``...), the
    vector and scan collectives (``Scatterv``, ``Gatherv``, ``Alltoallv``, ``Scan``,
    ``Reduce_scatter``...), every non-blocking ``I...`` collective including
    ``Ibcast``, attributes, groups and topologies. These do not cross the WAN
    emulation. ``Dup``, ``Clone``, ``Idup``, ``Split``, ``Split_type``, ``Create`` and
    ``Create_group`` return ``gridcoll.Comm`` objects on the matching sub-grid; ``Free``
    also frees the private communicator.
    """

    CACHE_SIZE = 64
    """Plans and compiled programs kept per communicator (least recently used go)."""
    DOORBELLS = _os.environ.get("GRIDCOLL_DOORBELLS", "1").strip() != "0"
    """Wake sleeping ranks with futex doorbells when all ranks share one machine
    (``GRIDCOLL_DOORBELLS=0`` switches them off)."""

    def __new__(cls, comm: MPI.Intracomm | None = None, *args: Any, **kwargs: Any) -> Comm:
        """Create a new communicator object wrapping ``comm``'s handle."""
        if comm is not None and comm != MPI.COMM_NULL and comm.Is_inter():
            raise TypeError("gridcoll.Comm wraps intracommunicators only")
        return MPI.Intracomm.__new__(cls, comm)

    def __init__(
        self,
        comm: MPI.Intracomm | None = None,
        grid: Grid | str | None = None,
        *,
        algo: str | None = None,
        params: dict | None = None,
        timeout: float | None = None,
        host_overhead: float | str | None = None,
    ):
        if comm is None or self == MPI.COMM_NULL:
            return
        resolved, base = _resolve_grid(self, grid)
        _init_state(self, resolved, base, algo, params, timeout, host_overhead=host_overhead)

    # gridcoll's collectives
    def Bcast(self, buf: Any, root: int = 0) -> None:
        """Broadcast a buffer from ``root`` (gridcoll's algorithms)."""
        state = self.__dict__.get("_gc")
        if (
            state is not None
            and state.native_reason
            and state.private is not None
            and type(buf) is _np.ndarray
        ):
            # The hot path of a one-cluster communicator: straight to MPI_Bcast, whose
            # mpi4py wrapper checks the buffer and the root (bench/native.py).
            state.last_plan = (buf.nbytes, root, buf.itemsize)
            _native_bcast(state, buf, root)
            return
        _bcast(self, buf, root)

    def bcast(self, obj: Any, root: int = 0) -> Any:
        """Broadcast a picklable object from ``root`` (gridcoll's algorithms)."""
        return _bcast_obj(self, obj, root)

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
        return _coll.scatter_obj(self, sendobj, root)

    def Gather(self, sendbuf: Any, recvbuf: Any, root: int = 0) -> None:
        """Gather every rank's buffer into blocks of the root's (gridcoll's algorithms)."""
        _coll.gather(self, sendbuf, recvbuf, root)

    def gather(self, sendobj: Any, root: int = 0) -> list[Any] | None:
        """Gather every rank's object into a list at the root."""
        return _coll.gather_obj(self, sendobj, root)

    def Allgather(self, sendbuf: Any, recvbuf: Any) -> None:
        """Gather every rank's buffer into blocks of every rank's (gridcoll's algorithms)."""
        _coll.allgather(self, sendbuf, recvbuf)

    def allgather(self, sendobj: Any) -> list[Any]:
        """Gather every rank's object into a list on every rank."""
        return _coll.allgather_obj(self, sendobj)

    def Alltoall(self, sendbuf: Any, recvbuf: Any) -> None:
        """Send block j of every rank's buffer to rank j (gridcoll's algorithms)."""
        _coll.alltoall(self, sendbuf, recvbuf)

    def alltoall(self, sendobj: Any) -> list[Any]:
        """Send item j of every rank's sequence to rank j."""
        return _coll.alltoall_obj(self, sendobj)

    def Reduce(self, sendbuf: Any, recvbuf: Any, op: MPI.Op = MPI.SUM, root: int = 0) -> None:
        """Reduce every rank's buffer with ``op`` to the root (gridcoll's algorithms)."""
        _coll.reduce(self, sendbuf, recvbuf, op, root)

    def reduce(self, sendobj: Any, op: Any = MPI.SUM, root: int = 0) -> Any:
        """Reduce every rank's object with ``op`` (in rank order) to the root."""
        return _coll.reduce_obj(self, sendobj, op, root)

    def Allreduce(self, sendbuf: Any, recvbuf: Any, op: MPI.Op = MPI.SUM) -> None:
        """Reduce every rank's buffer with ``op`` to every rank (gridcoll's algorithms)."""
        _coll.allreduce(self, sendbuf, recvbuf, op)

    def allreduce(self, sendobj: Any, op: Any = MPI.SUM) -> Any:
        """Reduce every rank's object with ``op`` (in rank order) to every rank."""
        return _coll.allreduce_obj(self, sendobj, op)

    def execute(self, schedule: Schedule, buf: Any, *, reduce=None) -> None:
        """Run any gridcoll schedule on ``buf`` (every rank calls it with the same one)."""
        _execute_schedule(self, schedule, buf, reduce)

    # communicators made from this one are gridcoll.Comm objects too
    def Dup(self, info: MPI.Info | None = None) -> Comm:
        """Duplicate the communicator (a gridcoll.Comm with the same grid and options)."""
        new, req = self.Idup(info)
        wait(req, _state(self).timeout, what="MPI_Comm_idup")
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
        state = _state(self)
        out = Comm.__new__(type(self), new)
        _init_state(
            out,
            state.grid,
            state.base_grid,
            *state.spec,
            state.timeout,
            state.link_state,
            state.host_overhead,
        )
        return out, req

    def Idup_with_info(self, info: MPI.Info) -> tuple[Comm, MPI.Request]:
        """Nonblocking duplicate with hints."""
        return self.Idup(info)

    def Split(self, color: int = 0, key: int = 0) -> Comm:
        """Split into sub-communicators (gridcoll.Comm on the sub-grid)."""
        return _derived(self, MPI.Intracomm.Split(MPI.Intracomm(self), color, key))

    def Split_type(self, split_type: int, key: int = 0, info: MPI.Info = MPI.INFO_NULL) -> Comm:
        """Split by type (gridcoll.Comm on the sub-grid)."""
        return _derived(self, MPI.Intracomm(self).Split_type(split_type, key, info))

    def Create(self, group: MPI.Group) -> Comm:
        """Create a communicator from a group (gridcoll.Comm on the sub-grid)."""
        return _derived(self, MPI.Intracomm(self).Create(group))

    def Create_group(self, group: MPI.Group, tag: int = 0) -> Comm:
        """Create a communicator from a group (gridcoll.Comm on the sub-grid)."""
        return _derived(self, MPI.Intracomm(self).Create_group(group, tag))

    def Free(self) -> None:
        """Free the communicator and gridcoll's private duplicate of it.

        The private duplicate is freed first, so on a permanent communicator (a wrapper
        of ``COMM_WORLD``), where MPI refuses with ``ERR_COMM`` as mpi4py does, gridcoll's
        resources are still released (a later collective makes a new duplicate).
        """
        state = self.__dict__.get("_gc")
        if state is not None:
            state.close()
        MPI.Intracomm.Free(self)

    # explanations
    @property
    def grid(self) -> Grid:
        """The grid this communicator's ranks run on."""
        return _state(self).grid

    @property
    def host_overhead(self) -> float:
        """The per-message host overhead (seconds) this communicator plans with."""
        return _state(self).host_overhead

    @property
    def plan_grid(self) -> Grid:
        """The grid plans are made on: :attr:`grid` plus :attr:`host_overhead`."""
        return _state(self).plan_grid

    @property
    def last_plan(self) -> Any:
        """The plan of the last gridcoll collective (``None`` before the first)."""
        state = _state(self)
        if isinstance(state.last_plan, tuple):  # a native broadcast's (nbytes, root, itemsize)
            state.last_plan = _native_plan(state, *state.last_plan)
        return state.last_plan

    def explain(self) -> str:
        """Why the last gridcoll collective chose its algorithm."""
        state = _state(self)
        plan = self.last_plan
        if plan is None:
            return "no gridcoll collective has run on this communicator yet"
        return (
            f"{plan.explain()}\n(planned on {state.plan_grid.name}: the grid plus this "
            f"runtime's host overhead of {_host.describe(state.host_overhead)})"
        )

    def __repr__(self) -> str:
        state = self.__dict__.get("_gc")
        where = f" on {state.grid.name!r}, algo={state.algo!r}" if state else ""
        return f"<gridcoll.Comm of {self.Get_size()} ranks{where}>"


def params_from_json(text: str | None) -> dict | None:
    """Parse a ``--params`` JSON object (used by the launcher and worker)."""
    if not text:
        return None
    try:
        value = _json.loads(text)
    except _json.JSONDecodeError as err:
        raise ParameterError(f"params {text!r} is not a JSON object: {err}") from err
    if not isinstance(value, dict):
        raise ParameterError(f"params {text!r} is not a JSON object")
    return value


from gridcoll.runtime import collectives as _coll  # noqa: E402  (its helpers use this module)
