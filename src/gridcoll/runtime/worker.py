"""The program ``gridcoll run`` starts on every rank, and how to start it.

The parent side: :func:`run_batch` writes a :class:`Batch` (the calls, each a
:class:`gridcoll.tune.Call` with the :class:`gridcoll.tune.PlanOptions` the ranks plan
it with, or broadcast schedule files; the repetitions, the timeout) as one JSON
document and runs ``python -m gridcoll.runtime.worker BATCH.json`` on every rank under
the job supervisor (:func:`gridcoll.runtime.supervisor.run_job`); :func:`run_worker`
builds the batch of one call, :func:`measure_calls` and :func:`measure_schedules` of
several. A call is checked once, when its :class:`~gridcoll.tune.Call` is made, and
:func:`verifiable` refuses, before anything starts, a reduction the worker cannot verify.

The rank side (:func:`main`): each rank reads the batch, wraps ``MPI.COMM_WORLD`` in a
:class:`gridcoll.Comm` with the call's algorithm, parameters and host overhead (the grid
and the WAN emulation come from the environment the supervisor set), plans the call
once (before the timed runs), then runs it ``repeat`` times.

A broadcast: before each run the root fills its buffer with pseudo-random bytes (seeded
by the repetition) and every other rank fills its own with bytes that differ from them
everywhere; after it, every rank compares its bytes with the root's (which it
regenerates from the seed) exactly.

Timing: on one machine ``time.monotonic()`` is one system-wide clock, so the ranks
agree on a start instant instead of trusting a barrier's exit: after a barrier, rank 0
picks ``T = now + START_MARGIN_S`` and sends it to all (non-blocking), every rank sleeps
until ``T`` and calls ``Bcast``, and notes when it returns. The measured time is
``max over ranks (end) - T``: from the moment every rank (the root included) is in the
call to the moment the last rank has its data. Neither a barrier's latency nor the skew
of its exit (ranks that sleep while they wait leave a barrier up to a millisecond
apart, more on an oversubscribed machine) is inside the interval. A rank that got ``T``
only after ``T`` starts late; the result counts such starts (``late_starts``). If the
ranks span several hosts (:mod:`gridcoll.runtime.hostnames`; ``GRIDCOLL_FAKE_HOSTNAME``
fakes that for a test) the clocks are not comparable, and the time is rank 0's from its
barrier exit to the exit of a second barrier after the broadcast (an upper bound
including one barrier). The result says which (``"timing"``).

Several schedule files run one after the other in one launch (the demo and the
benchmarks: one ``mpiexec`` start-up per grid instead of one per row); so do several
calls; the result has a row per schedule or call in ``cases``, the first one's fields
also at the top level. A call with ``counts`` (bytes per block: ``P``, or ``P * P`` for
all-to-all) runs the uneven form, ``Scatterv``, ``Gatherv``, ``Allgatherv`` or
``Alltoallv``, on packed buffers; its ``nbytes`` is the largest count.

Other collectives (scatter, gather, allgather, alltoall, reduce, allreduce, barrier...;
``nbytes`` is the bytes per rank per peer, MPI's count times the extent): every rank
generates every rank's input from the repetition's seed, so it computes its expected
result with numpy alone (the blocks it must receive; the element-wise sum of all ranks'
vectors of unsigned integers of ``itemsize`` bytes, or with ``commutative`` false the
rank-ordered product of 2x2 int64 matrices, ``itemsize`` 32), never with a schedule,
and compares its bytes exactly. A barrier is verified by the shared clock: no rank may
leave before the last one entered (on several hosts, whose clocks are not comparable,
only by its completing).

Output: the supervisor's protocol (:mod:`gridcoll.runtime.supervisor`): rank 0's
``GRIDCOLL-RESULT`` line, a failed rank's ``GRIDCOLL-ERROR`` line and exit status 1
without finalizing MPI, every rank's progress (``joined``, ``rep`` with its case and
repetition, ``done`` or ``error``), which lets the supervisor name a rank that died
without a word and report progress while the job runs.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from gridcoll.errors import ParameterError
from gridcoll.network.grid import Grid
from gridcoll.network.load import LoadTrace
from gridcoll.runtime.netns import Network
from gridcoll.runtime.supervisor import STARTUP_S, LaunchResult, RankStatus, run_job
from gridcoll.tune.call import Call, PlanOptions

__all__ = [
    "Batch",
    "main",
    "measure_calls",
    "measure_schedule",
    "measure_schedules",
    "run_batch",
    "run_worker",
    "verifiable",
]


START_MARGIN_S = 0.005
"""How far ahead of the barrier exit rank 0 puts the common start instant."""

REDUCTIONS = ("reduce", "allreduce", "reduce_scatter", "scan", "exscan")
"""The collectives the worker verifies as sums (or 2x2 int64 matrix products)."""


# -- the batch: what one launch runs -------------------------------------------------------


@dataclass(frozen=True)
class Batch:
    """What one launch of the worker runs, shipped to the ranks as one JSON document.

    ``calls``: (call, the options its ranks plan it with) pairs, each run on a
    :class:`gridcoll.Comm` of its own; or ``schedules``: broadcast schedule files, run
    with ``Comm.execute``. Each ``repeat`` times; ``timeout`` bounds each call's time
    without progress. ``fail_rank`` makes that rank exit (``fail_mode="exit"``) or
    never join (``"hang"``), to test the failure behaviour.
    """

    calls: tuple[tuple[Call, PlanOptions], ...] = ()
    schedules: tuple[str, ...] = ()
    repeat: int = 1
    timeout: float = 60.0
    fail_rank: int | None = None
    fail_mode: str = "exit"

    def __post_init__(self) -> None:
        if bool(self.calls) == bool(self.schedules):
            raise ParameterError("a batch runs calls or schedule files, and at least one")
        if not isinstance(self.repeat, int) or self.repeat < 1:
            raise ParameterError(f"repeat must be >= 1, got {self.repeat!r}")
        if not self.timeout > 0:
            raise ParameterError(f"timeout must be > 0 seconds, got {self.timeout!r}")
        if self.fail_mode not in ("exit", "hang"):
            raise ParameterError(f"fail_mode must be 'exit' or 'hang', got {self.fail_mode!r}")
        for call, _options in self.calls:
            verifiable(call)

    def to_json(self) -> dict[str, Any]:
        """The batch as one JSON object (:meth:`from_json` reads it back)."""
        return {
            "calls": [{"call": c.to_json(), "options": o.to_json()} for c, o in self.calls],
            "schedules": list(self.schedules),
            "repeat": self.repeat,
            "timeout": self.timeout,
            "fail_rank": self.fail_rank,
            "fail_mode": self.fail_mode,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Batch:
        """The batch of a :meth:`to_json` object, every call checked again."""
        calls = tuple(
            (Call.from_json(c["call"]), PlanOptions.from_json(c["options"]))
            for c in data.get("calls", ())
        )
        return cls(
            calls,
            tuple(data.get("schedules", ())),
            data.get("repeat", 1),
            data.get("timeout", 60.0),
            data.get("fail_rank"),
            data.get("fail_mode", "exit"),
        )


def verifiable(call: Call) -> Call:
    """``call`` if the worker can verify it, else ParameterError before anything starts:
    reductions sum unsigned integers (``itemsize`` 1, 2, 4 or 8), or, not commutative,
    multiply 2x2 int64 matrices (``itemsize`` 32)."""
    if call.op not in REDUCTIONS:
        return call
    if call.commutative and call.itemsize not in (1, 2, 4, 8):
        raise ParameterError(
            f"the worker verifies {call.op} with unsigned integer sums: --itemsize must be "
            f"1, 2, 4 or 8, not {call.itemsize}"
        )
    if not call.commutative and call.itemsize != 32:
        raise ParameterError(
            f"the worker verifies a non-commutative {call.op} with 2x2 int64 matrix "
            f"products: pass --itemsize 32 (got {call.itemsize})"
        )
    return call


# -- the parent's side: start the worker under the supervisor -------------------------------


def run_batch(
    grid: Grid,
    batch: Batch,
    *,
    emulate: bool = True,
    wall_timeout: float | None = None,
    mpiexec: str | None = None,
    on_progress: Callable[[int], None] | None = None,
    load: LoadTrace | None = None,
    network: Network | None = None,
) -> LaunchResult:
    """Run ``batch`` on every rank of ``grid`` (one rank per grid rank; the WAN emulated
    unless ``emulate`` is False or the ranks run on a namespace ``network``, under
    ``load``'s cross traffic if given) and collect
    rank 0's result and every rank's fate (:func:`gridcoll.runtime.supervisor.run_job`).

    ``wall_timeout`` bounds the whole job (default: a start-up allowance plus ``repeat *
    timeout`` per call or schedule); ``on_progress(n)`` is called as rank 0 completes
    its ``n``-th repetition in all.
    """
    runs = batch.repeat * max(1, len(batch.calls) + len(batch.schedules))
    wall = wall_timeout
    if wall is None:
        wall = STARTUP_S + 2 * grid.nranks + runs * batch.timeout
    with tempfile.TemporaryDirectory(prefix="gridcoll-batch-") as tmp:
        path = Path(tmp) / "batch.json"
        path.write_text(json.dumps(batch.to_json()))
        program = [sys.executable, "-m", "gridcoll.runtime.worker", str(path)]
        return run_job(
            grid,
            program,
            timeout=batch.timeout,
            wall=wall,
            emulate=emulate,
            mpiexec=mpiexec,
            on_progress=on_progress,
            load=load,
            network=network,
        )


def run_worker(
    grid: Grid,
    call: Call | int,
    options: PlanOptions | None = None,
    *,
    repeat: int = 1,
    timeout: float = 60.0,
    fail_rank: int | None = None,
    fail_mode: str = "exit",
    **launch: Any,
) -> LaunchResult:
    """Run one collective ``call`` ``repeat`` times on ``grid``, every rank's bytes
    verified, its ranks planning it with ``options`` (:func:`run_batch`; ``launch``:
    its ``emulate``, ``wall_timeout``, ``mpiexec``, ``on_progress``, ``load``,
    ``network``).

    For a quick broadcast ``call`` may be its size and ``options`` the keywords of
    :class:`~gridcoll.tune.PlanOptions` among ``launch`` (``algo``, ``params``,
    ``host_overhead``): ``run_worker(grid, 4096, algo="binomial")``.
    """
    fields = {k: launch.pop(k) for k in ("algo", "params", "host_overhead") if k in launch}
    if not isinstance(call, Call):
        call = Call("bcast", call)
    if options is None:
        options = PlanOptions(**fields)
    elif fields:
        raise ParameterError(f"give the options once: options= or {sorted(fields)}")
    batch = Batch(((call, options),), (), repeat, timeout, fail_rank, fail_mode)
    return run_batch(grid, batch, **launch)


def measure_schedule(
    grid: Grid,
    schedule,
    *,
    repeat: int = 3,
    emulate: bool = True,
    timeout: float = 60.0,
    mpiexec: str | None = None,
) -> list[float]:
    """Run one broadcast schedule for real on ``grid``; return the measured seconds of
    each repetition. Raises :class:`LaunchError` if it failed or was not verified.
    """
    return measure_schedules(
        grid, [schedule], repeat=repeat, emulate=emulate, timeout=timeout, mpiexec=mpiexec
    )[0]


def measure_schedules(
    grid: Grid,
    schedules: Sequence,
    *,
    repeat: int = 3,
    emulate: bool = True,
    timeout: float = 60.0,
    mpiexec: str | None = None,
    wall_timeout: float | None = None,
    on_progress: Callable[[int], None] | None = None,
) -> list[list[float]]:
    """Run several broadcast schedules for real on ``grid`` in one launch, one after
    the other, each ``repeat`` times; return each one's measured seconds.

    One ``mpiexec`` start-up (seconds of Python imports on an oversubscribed machine)
    serves them all. ``on_progress(n)``: ``n`` repetitions done in all. Raises
    :class:`LaunchError` unless every run of every schedule was verified.
    """
    from gridcoll.schedule import schedule_to_json

    if not schedules:
        return []
    with tempfile.TemporaryDirectory(prefix="gridcoll-schedule-") as tmp:
        paths = []
        for i, schedule in enumerate(schedules):
            path = Path(tmp) / f"schedule-{i}.json"
            path.write_text(schedule_to_json(schedule))
            paths.append(str(path))
        outcome = run_batch(
            grid,
            Batch(schedules=tuple(paths), repeat=repeat, timeout=timeout),
            emulate=emulate,
            wall_timeout=wall_timeout,
            mpiexec=mpiexec,
            on_progress=on_progress,
        )
    names = ", ".join(sorted({s.algorithm for s in schedules}))
    outcome.require_verified(f"running {names} on {grid.name}")
    return [list(case["measured_all_s"]) for case in outcome.result["cases"]]


def measure_calls(
    grid: Grid,
    calls: Sequence[tuple[Call, PlanOptions]],
    *,
    repeat: int = 3,
    emulate: bool = True,
    timeout: float = 60.0,
    mpiexec: str | None = None,
    wall_timeout: float | None = None,
    on_progress: Callable[[int], None] | None = None,
) -> list[dict]:
    """Run several collective calls for real on ``grid`` in one launch, each ``repeat``
    times through :class:`gridcoll.Comm`, every rank's bytes verified.

    ``calls``: (call, the options its ranks plan it with: the algorithm, fixed builder
    parameters, the host overhead) pairs. Returns the worker's row per call
    (``measured_all_s``, ``algorithm``, ``params``, ``explanation``...). Raises
    :class:`LaunchError` unless every run was verified.
    """
    if not calls:
        return []
    outcome = run_batch(
        grid,
        Batch(calls=tuple(calls), repeat=repeat, timeout=timeout),
        emulate=emulate,
        wall_timeout=wall_timeout,
        mpiexec=mpiexec,
        on_progress=on_progress,
    )
    names = ", ".join(sorted({f"{c.op}:{o.algo}" for c, o in calls}))
    outcome.require_verified(f"running {names} on {grid.name}")
    return list(outcome.result["cases"])


# -- the rank's side --------------------------------------------------------------------------


def _expected(nbytes: int, rep: int, root: int) -> np.ndarray:
    rng = np.random.default_rng([rep, root, nbytes])
    return rng.integers(0, 256, nbytes, dtype=np.uint8)


def _ctl_gather(ctl, values: list[float], timeout: float) -> np.ndarray | None:
    """Gather a few floats at rank 0 without blocking in MPI."""
    from mpi4py import MPI

    from gridcoll.runtime.executor import wait

    send = np.asarray(values, dtype=np.float64)
    recv = np.empty((ctl.Get_size(), send.size)) if ctl.Get_rank() == 0 else None
    req = ctl.Igather([send, MPI.DOUBLE], [recv, MPI.DOUBLE] if recv is not None else None, 0)
    wait(req, timeout, what="gathering the timings")
    return recv


def _fail(mode: str) -> None:
    """Leave without a word (``exit``), or never join the broadcast (``hang``)."""
    sys.stdout.flush()
    if mode == "exit":
        os._exit(3)
    while True:
        time.sleep(1.0)


def _common_start(ctl, timeout: float) -> float:
    """Rank 0 picks an instant a little ahead; every rank sleeps until it; return it."""
    from mpi4py import MPI

    from gridcoll.runtime.executor import wait

    at = np.array([time.monotonic() + START_MARGIN_S])
    wait(ctl.Ibcast([at, MPI.DOUBLE], 0), timeout, what="agreeing on a start time")
    left = at[0] - time.monotonic()
    if left > 0:
        time.sleep(left)
    return float(at[0])


def _one_host(ctl, timeout: float) -> bool:
    """Whether every rank shares one clock (:mod:`gridcoll.runtime.hostnames`)."""
    from gridcoll.runtime.executor import wait
    from gridcoll.runtime.hostnames import gather_hosts, one_host

    return one_host(gather_hosts(ctl, wait, timeout))


@dataclass(frozen=True)
class _Case:
    """One entry of a batch on a rank: a call (planned with ``options``) or a schedule."""

    call: Call
    options: PlanOptions | None = None
    schedule: Any = None
    file: str | None = None


def _cases(batch: Batch) -> list[_Case]:
    """What to run: one entry per call, or per schedule file."""
    if batch.calls:
        return [_Case(call, options) for call, options in batch.calls]
    from gridcoll.schedule import schedule_from_json

    cases = []
    for path in batch.schedules:
        schedule = schedule_from_json(Path(path).read_text())
        if schedule.op != "bcast":
            raise ValueError(f"schedule file {path}: only broadcast schedules run from files")
        call = Call("bcast", schedule.nbytes, schedule.root)
        cases.append(_Case(call, schedule=schedule, file=path))
    return cases


def _run(batch: Batch, status: RankStatus) -> dict | None:
    from mpi4py import MPI

    from gridcoll.runtime.executor import wait
    from gridcoll.runtime.state import PROCESS, ready, state_of

    world = MPI.COMM_WORLD
    cases = _cases(batch)
    comm = _comm_for(cases[0], batch)
    timeout = state_of(comm).timeout
    ctl, req = MPI.Intracomm(world).Idup()
    wait(req, timeout, what="duplicating COMM_WORLD")
    status.write("joined")
    state = ready(comm)  # private communicator, emulator: outside the timed runs
    last_words = PROCESS.watchdog().last_words
    last_words.append(lambda reason: status.fail("CollectiveTimeout", reason))
    one_host = _one_host(ctl, timeout)
    results = []
    for index, case in enumerate(cases):
        if index and case.schedule is None:  # each call its own algorithm: its own Comm
            state.close()
            comm = _comm_for(case, batch)
            state = ready(comm)
        results.append(_run_case(comm, ctl, state, case, index, batch, status, one_host))
    wait(ctl.Ibarrier(), timeout, what="the final barrier")
    ctl.Free()
    state.close()  # the private communicator; COMM_WORLD itself is not ours to free
    if world.Get_rank() != 0:
        return None
    result = dict(results[0])  # the first (usually only) case at the top level
    result.update(
        nranks=world.Get_size(),
        grid=comm.grid.name,
        emulated=state.emulator is not None,
        host_overhead_s=state.host_overhead,
        plan_grid=state.plan_grid.name,
        timing="shared-clock" if one_host else "barrier",
        verified=all(r["verified"] for r in results),
        cases=results,
    )
    return result


def _comm_for(case: _Case, batch: Batch):
    """A gridcoll.Comm on COMM_WORLD planning the case's collective with its options."""
    from mpi4py import MPI

    from gridcoll.runtime.comm import Comm

    options = case.options or PlanOptions()
    op = case.call.op
    fixed = None if options.params is None else {op: options.fixed}
    return Comm(
        MPI.COMM_WORLD,
        algo={op: options.algo},
        params=fixed,
        timeout=batch.timeout,
        host_overhead=options.host_overhead,
    )


def _pattern(rep: int, src: int, dst: int, n: int) -> np.ndarray:
    """``n`` pseudo-random bytes of the block ``src`` sends ``dst`` in repetition ``rep``
    (a multiplicative hash: cheap enough for 16 ranks x 16 MB)."""
    i = np.arange(n, dtype=np.uint32)
    i *= np.uint32(2654435761)
    i += np.uint32((rep * 7919 + src * 131 + dst * 17 + n) & 0xFFFFFFFF)
    return (i >> np.uint32(13)).astype(np.uint8)


class _Call:
    """One rank's buffers, call and expected result of one collective (module notes)."""

    def __init__(self, comm, case: _Case):
        self.comm, self.case, call = comm, case, case.call
        self.op, self.root, self.n = call.op, call.root, call.nbytes
        self.itemsize, self.commutative, self.counts = call.itemsize, call.commutative, call.counts
        self.rank, self.size = comm.Get_rank(), comm.Get_size()
        self.send = self.recv = self.expected = None
        self.message = None
        self.entered = 0.0

    def fill(self, rep: int) -> None:
        """Fresh inputs for ``rep``; outputs poisoned; the expected result, by numpy."""
        op, P, r, n, root = self.op, self.size, self.rank, self.n, self.root
        block = _pattern
        if op == "bcast":
            self.expected = _expected(n, rep, root)
            if self.recv is None:
                self.recv = np.empty(n, dtype=np.uint8)
                self.message = self.recv
                itemsize = self.itemsize
                if itemsize > 1 and self.case.schedule is None:
                    from mpi4py import MPI

                    element = MPI.BYTE.Create_contiguous(itemsize).Commit()
                    self.message = [self.recv, n // itemsize, element]
            if r == root:
                self.recv[:] = self.expected
            else:
                np.bitwise_xor(self.expected, (r % 255) + 1, out=self.recv)
            return
        if op == "barrier":
            return
        if op in REDUCTIONS:
            self._fill_reduction(rep)
            return
        counts = self.counts
        if counts is not None:
            self._fill_uneven(rep, counts)
            return
        if op == "scatter":
            self.send = (
                np.concatenate([block(rep, r, d, n) for d in range(P)]) if r == root else None
            )
            self.expected = block(rep, root, r, n)
        elif op in ("gather", "allgather"):
            self.send = block(rep, r, 0, n)
            everyone = np.concatenate([block(rep, s, 0, n) for s in range(P)])
            self.expected = everyone if op == "allgather" or r == root else None
        else:
            self.send = np.concatenate([block(rep, r, d, n) for d in range(P)])
            self.expected = np.concatenate([block(rep, s, r, n) for s in range(P)])
        out = n if op == "scatter" else P * n
        self.recv = np.full(out, 0xA5, dtype=np.uint8) if self.expected is not None else None

    def _fill_uneven(self, rep: int, counts: tuple[int, ...]) -> None:
        """The v-variants: block ``i`` of ``counts[i]`` bytes, buffers packed."""
        op, P, r, root = self.op, self.size, self.rank, self.root

        def row(src: int, dsts: range, sizes) -> np.ndarray:
            return np.concatenate(
                [_pattern(rep, src, d, c) for d, c in zip(dsts, sizes, strict=True)]
            )

        if op == "scatter":
            self.send = row(root, range(P), counts) if r == root else None
            self.expected = _pattern(rep, root, r, counts[r])
        elif op in ("gather", "allgather"):
            self.send = _pattern(rep, r, 0, counts[r])
            everyone = np.concatenate([_pattern(rep, s, 0, counts[s]) for s in range(P)])
            self.expected = everyone if op == "allgather" or r == root else None
        else:
            self.send = row(r, range(P), counts[r * P : (r + 1) * P])
            self.expected = np.concatenate(
                [_pattern(rep, s, r, counts[s * P + r]) for s in range(P)]
            )
        if self.expected is not None:
            self.recv = np.full(self.expected.size, 0xA5, dtype=np.uint8)

    def _fill_reduction(self, rep: int) -> None:
        """Reductions, scans and the reduce-scatter (``--size``: one rank's block, the
        vector ``P`` of them): the expected result is the fold of the ranks whose
        inputs the rank's result is made of (all; ``0..r``; ``0..r-1``), in rank order."""
        op, P, r, itemsize = self.op, self.size, self.rank, self.itemsize
        n = self.n * P if op == "reduce_scatter" else self.n
        upto = {"scan": r + 1, "exscan": r}.get(op, P)
        has = op != "reduce" or r == self.root
        if op == "exscan" and r == 0:
            has = False  # MPI leaves rank 0's result undefined
        if self.commutative:
            dtype = np.dtype(f"u{itemsize}")
            vectors = [_pattern(rep, s, 0, n).view(dtype) for s in range(P)]
            self.send = vectors[r].copy()
            total = np.zeros(n // itemsize, dtype=dtype)
            for v in vectors[:upto]:
                total += v  # unsigned: wraps as MPI.SUM does
        else:
            count = n // 32
            mats = [
                (_pattern(rep, s, 0, 4 * count).astype(np.int64) % 3 - 1).reshape(count, 2, 2)
                for s in range(P)
            ]
            self.send = mats[r].reshape(count, 4).copy()
            total = mats[0]
            for m in mats[1:upto]:
                total = np.einsum("nij,njk->nik", total, m)  # x_0 x_1 ... in rank order
            total = total.reshape(count, 4)
        if op == "reduce_scatter":  # this rank's block of the total
            k = len(total) // P
            total = total[r * k : (r + 1) * k]
        self.expected = total.copy() if has else None
        self.recv = np.zeros_like(total) if has or op == "exscan" else None

    def run(self) -> None:
        from mpi4py import MPI

        comm, op, root = self.comm, self.op, self.root
        self.entered = time.monotonic()
        if op == "bcast":
            if self.case.schedule is None:
                comm.Bcast(self.message, root=root)
            else:
                comm.execute(self.case.schedule, self.recv)
        elif op == "barrier":
            comm.Barrier()
        elif self.counts is not None:
            self._run_uneven(comm, self.counts)
        elif op == "scatter":
            comm.Scatter(self.send, self.recv, root)
        elif op == "gather":
            comm.Gather(self.send, self.recv, root)
        elif op == "allgather":
            comm.Allgather(self.send, self.recv)
        elif op == "alltoall":
            comm.Alltoall(self.send, self.recv)
        else:
            mop = MPI.SUM if self.commutative else _matmul_op()
            send, recv = self.send, self.recv
            if not self.commutative:
                quad = _quad()
                send = [send, len(send), quad]
                recv = None if recv is None else [recv, len(recv), quad]
            if op == "reduce":
                comm.Reduce(send, recv, mop, root)
            elif op == "allreduce":
                comm.Allreduce(send, recv, mop)
            elif op == "reduce_scatter":
                if not self.commutative:  # per block: the count is a block's
                    send = [self.send, len(self.send) // self.size, _quad()]
                comm.Reduce_scatter_block(send, recv, mop)
            else:
                getattr(comm, op.capitalize())(send, recv, mop)

    def _run_uneven(self, comm, counts: tuple[int, ...]) -> None:
        op, P, r, root = self.op, self.size, self.rank, self.root
        if op == "scatter":
            comm.Scatterv([self.send, list(counts)] if r == root else None, self.recv, root)
        elif op == "gather":
            comm.Gatherv(self.send, [self.recv, list(counts)] if r == root else None, root)
        elif op == "allgather":
            comm.Allgatherv(self.send, [self.recv, list(counts)])
        else:
            comm.Alltoallv(
                [self.send, list(counts[r * P : (r + 1) * P])], [self.recv, list(counts[r::P])]
            )

    def ok(self) -> bool:
        """This rank's bytes equal the expected ones (a barrier: checked at rank 0)."""
        if self.op == "barrier" or self.expected is None:
            return True
        return bool(np.array_equal(self.recv, self.expected))


_OPS: dict = {}


def _quad():
    """The 2x2 int64 matrix datatype (32 bytes) of non-commutative reductions."""
    if "quad" not in _OPS:
        from mpi4py import MPI

        _OPS["quad"] = MPI.INT64_T.Create_contiguous(4).Commit()
    return _OPS["quad"]


def _matmul_op():
    """x (op) y = x @ y on 2x2 int64 matrices: associative, not commutative."""
    if "matmul" not in _OPS:
        from mpi4py import MPI

        def matmul(inbuf, inoutbuf, datatype):
            x = np.frombuffer(inbuf, dtype=np.int64).reshape(-1, 2, 2)
            y = np.frombuffer(inoutbuf, dtype=np.int64).reshape(-1, 2, 2)
            y[...] = np.einsum("nij,njk->nik", x, y)

        _OPS["matmul"] = MPI.Op.Create(matmul, commute=False)
    return _OPS["matmul"]


def _run_case(comm, ctl, state, case, index, batch, status, one_host) -> dict:
    """``repeat`` verified, timed runs of one case; rank 0 gets the result row."""
    from gridcoll.runtime.executor import wait
    from gridcoll.runtime.prepare import plan_call, prepare

    rank = comm.Get_rank()
    call, schedule = case.call, case.schedule
    op, nbytes, root = call.op, call.nbytes, call.root
    plan = None
    if schedule is None and call.counts is not None:  # the plan the call makes
        plan = plan_call(state, op, nbytes, root, call.itemsize, counts=call.counts)
    elif schedule is None:  # the rank's one plan, made before the timed runs
        itemsize = 1 if op == "barrier" else call.itemsize
        commutative = call.commutative or op not in REDUCTIONS
        plan = prepare(state, rank, op, nbytes, root, itemsize, commutative).plan
    timeout = state.timeout
    times, verified, late_starts = [], True, 0
    call = _Call(comm, case)
    if call.counts is not None:  # its layout and its agreement's plans, untimed
        call.fill(0)
        call.run()
    for rep in range(batch.repeat):
        call.fill(rep)
        wait(ctl.Ibarrier(), timeout, what="the barrier before a repetition")
        start, late = time.monotonic(), False
        if one_host:
            start = _common_start(ctl, timeout)
            late = time.monotonic() > start + 1e-3
        if batch.fail_rank == rank:  # testing the failure behaviour: leave, or never join
            _fail(batch.fail_mode)
        call.run()
        end = time.monotonic()
        if not one_host:
            wait(ctl.Ibarrier(), timeout, what="the barrier after a repetition")
            end = time.monotonic()
        ok = call.ok()
        status.write("rep", case=index, rep=rep, ok=ok)
        table = _ctl_gather(ctl, [start, end, float(ok), float(late), call.entered], timeout)
        if rank == 0:
            late_starts += int(table[:, 3].sum())
            times.append(float(table[:, 1].max() - start) if one_host else end - start)
            verified = verified and bool(table[:, 2].all())
            if op == "barrier" and one_host:  # nobody left before the last one came in
                verified = verified and bool(table[:, 1].min() >= table[:, 4].max())
    if schedule is not None:
        algorithm, params_out = schedule.algorithm, dict(schedule.params)
        segment = schedule.segment_size
        explanation = f"schedule file {case.file}"
    else:
        algorithm, params_out = plan.algorithm, dict(plan.params)
        segment, explanation = plan.segment_size, plan.explain()
    return {
        "op": op,
        "size": nbytes,
        "counts": None if call.counts is None else list(call.counts),
        "root": root,
        "algorithm": algorithm,
        "params": params_out,
        "segment_size": segment,
        "measured_all_s": times,
        "verified": verified and len(times) == batch.repeat,
        "repetitions": batch.repeat,
        "late_starts": late_starts,
        "explanation": explanation,
    }


def main(argv: list[str] | None = None) -> int:
    """Run the batch of the JSON document ``argv[0]`` on this rank; return the exit
    status (0: done, 1: this rank failed)."""
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1:
        sys.stderr.write("usage: python -m gridcoll.runtime.worker BATCH.json\n")
        return 2
    from mpi4py import MPI

    status = RankStatus(MPI.COMM_WORLD.Get_rank())
    try:
        batch = Batch.from_json(json.loads(Path(argv[0]).read_text()))
        result = _run(batch, status)
    except Exception as err:  # report, then leave without MPI_Finalize (peers may be gone)
        status.fail(type(err).__name__, str(err), getattr(err, "peer", None))
        os._exit(1)
    status.write("done")
    if result is not None:
        RankStatus.result(result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
