"""Adaptive broadcasts over MPI: ``Comm(..., adaptive=True)`` (seed 001, sec. 2.5).

A communicator made adaptive runs every blocking ``Bcast``/``bcast`` on a multi-cluster
grid this way (:meth:`Adaptive.bcast`):

1. **Which plan.** Every rank holds the last :class:`~gridcoll.adapt.handoff.Announcement`
   of each root, taken from that root's previous broadcast. The call runs
   :func:`~gridcoll.adapt.handoff.planned`'s plan for its size (every parameter pinned,
   on the announced view), or, if none fits, the communicator's ordinary plan; both for
   ``M + trailer`` bytes. Every rank decides alike, from bytes they all received.
2. **The data space** is the user's ``M`` bytes and the trailer: the root copies its
   buffer in and writes its advisor's current announcement after it; the others copy
   the ``M`` bytes out and keep the announcement for the next call from that root. One
   copy of ``M`` bytes per rank is the price of not touching the executor.
3. **Passive measurement.** While the call runs, the emulator notes every wide-area
   message this rank sends (clusters, bytes, send time, ``deliver_at``:
   :attr:`Emulator.observed`). After the call each rank other than the root sends the
   root a small *report* on the communicator's report tag: its end time and those
   messages (fire and forget, ``MPI_Isend``; counted as the monitor's traffic).
4. **The root's advisor** runs in a background thread (:class:`RootSide`): it collects
   the call's reports (``MPI_Iprobe`` with sleeps, for at most a second past the call),
   feeds the :class:`~gridcoll.adapt.monitor.NetworkMonitor` and the
   :class:`~gridcoll.adapt.advisor.Advisor` (the call's size and time; its measured
   time, the slowest rank's end, against the plan's prediction: a stale view falls
   back to the safe plan), plans ahead with a wall-clock budget, and publishes the
   next announcement, which the main thread reads without waiting.
5. **Every rank prepares** the announced plan for the forecast size in the same
   background thread as soon as it has the announcement, so an anytime builder's run
   (repeated from its recorded evaluation count: the same tree on every rank) does not
   sit in the next call. Planning is serialised by a lock per communicator.

Without ``MPI_THREAD_MULTIPLE`` the root collects its reports at its next call instead.
A call log (``GRIDCOLL_LOG``) gets the call's line with the plan's size: the user's
bytes and the trailer. Links no call crossed for a monitor period
(``GRIDCOLL_MONITOR_PERIOD``, default 300 s) are probed on the emulated WAN
(:meth:`RootSide._probe`); on a real network there are no probes yet, and such links
keep their last forecast. Non-blocking
``Ibcast`` and one-cluster communicators take the ordinary path.
"""

from __future__ import annotations

import contextlib
import os
import queue
import threading
import time
from collections import OrderedDict
from typing import Any

import numpy as np
from mpi4py import MPI

from gridcoll.adapt.advisor import ADVISOR_MAX_BUDGET_S, Advisor
from gridcoll.adapt.handoff import (
    Announcement,
    announcement,
    choose,
    decode,
    encode,
    planned,
    trailer_bytes,
)
from gridcoll.adapt.monitor import PERIOD_S, PROBE_BYTES, NetworkMonitor, Transfer
from gridcoll.runtime.executor import compile_program
from gridcoll.runtime.header import CallInfo
from gridcoll.runtime.prepare import plan_call, run
from gridcoll.runtime.state import PROCESS, Prepared, State
from gridcoll.tune import FRUGAL, PlanCache

__all__ = ["ENV_MONITOR_PERIOD", "REPORT_WAIT_S", "Adaptive", "RootSide", "of"]

ENV_MONITOR_PERIOD = "GRIDCOLL_MONITOR_PERIOD"
"""Environment variable: the root's monitor period in seconds (default 300, seed 001's;
``gridcoll scenario --measure`` sets it to the scaled period)."""
REPORT_WAIT_S = 1.0
"""How long past a call the root's thread waits for its reports."""
_PREPARED = 8


def of(state: State) -> Adaptive:
    """The communicator's adaptive machinery (made at its first adaptive broadcast)."""
    if state.adaptive is None:
        state.adaptive = Adaptive(state)
    return state.adaptive


class Adaptive:
    """One communicator's adaptive broadcasts (module docstring)."""

    def __init__(self, state: State):
        self.state = state
        self.grid = state.grid
        self.trailer = trailer_bytes(self.grid)
        self.announced: dict[int, Announcement | None] = {}
        self.roots: dict[int, RootSide] = {}
        self.prepared: OrderedDict = OrderedDict()
        self.lock = threading.Lock()  # planning (grid memos, plan caches)
        self.table = threading.Lock()  # self.prepared
        self.idle = threading.Event()  # set while the main thread is in no call
        self.idle.set()
        self.jobs: queue.SimpleQueue = queue.SimpleQueue()
        self.sent: list = []  # (buffer, request) of reports in flight
        self.staging: dict[int, np.ndarray] = {}
        self.threaded = MPI.Query_thread() == MPI.THREAD_MULTIPLE
        self.report_bytes = 0
        self.size = state.private.Get_size()
        self.thread = threading.Thread(target=self._work, name="gridcoll-adaptive", daemon=True)
        self.thread.start()

    # -- one call ---------------------------------------------------------------------
    def bcast(self, view: np.ndarray, root: int, itemsize: int, dtype: str) -> None:
        """Broadcast ``view`` (this rank's bytes) from ``root`` (module docstring)."""
        rank = self.state.private.Get_rank()
        nbytes = view.size
        start = time.monotonic()
        self.idle.clear()
        try:
            self._call(view, root, itemsize, dtype, rank, nbytes, start)
        finally:
            self.idle.set()

    def _call(
        self,
        view: np.ndarray,
        root: int,
        itemsize: int,
        dtype: str,
        rank: int,
        nbytes: int,
        start: float,
    ) -> None:
        state = self.state
        prepared = self._prepare(rank, root, nbytes, itemsize)
        total = nbytes + self.trailer
        buf = self.staging.get(total)
        if buf is None:
            self.staging = {total: np.empty(total, dtype=np.uint8)}  # the last size only
            buf = self.staging[total]
        side = None
        if rank == root:
            side = self._root_side(root, itemsize)
            if not self.threaded:
                side.collect(wait=False)
            buf[:nbytes] = view
            buf[nbytes:] = np.frombuffer(side.trailer, dtype=np.uint8)
        emulator = state.emulator
        if emulator is not None:
            emulator.observed = []
        ran = time.monotonic()
        try:
            run(state, prepared.program, buf, None, dtype)
        finally:
            observed = [] if emulator is None else emulator.observed
            if emulator is not None:
                emulator.observed = None
        end = time.monotonic()
        state.last = prepared.plan
        if state.log is not None:  # the call's line, as collectives.log_call writes it
            state.log.write(prepared.plan, end - ran, ran - start, self.size, self.grid.name)
        if rank != root:
            view[:] = buf[:nbytes]
        ann = decode(buf[nbytes:], self.grid)
        self.announced[root] = ann
        if side is not None:
            side.called(nbytes, start, end, prepared.plan.predicted_s, observed)
        else:
            self._report(root, end, observed)
        self._retire()
        if ann is not None and ann.entries:  # the forecast size's plan, ready before its call
            self.jobs.put(lambda: self._prepare(rank, root, ann.entries[0].nbytes, itemsize))

    # -- plans --------------------------------------------------------------------------
    def _prepare(self, rank: int, root: int, nbytes: int, itemsize: int) -> Prepared:
        ann = self.announced.get(root)
        key = (root, nbytes, itemsize, choose(ann, nbytes), ann and ann.load)
        with self.table:
            hit = self.prepared.get(key)
            if hit is not None:
                self.prepared.move_to_end(key)
                return hit
        with self.lock:
            state = self.state
            chosen = planned(
                self.grid,
                ann,
                nbytes,
                root,
                extra=self.trailer,
                itemsize=itemsize,
                host_overhead=state.host_overhead,
                cache=PROCESS.plans,
            )
            if chosen is None:
                chosen = plan_call(state, "bcast", nbytes + self.trailer, root, itemsize)
            schedule = chosen.build()
            call = CallInfo.of(schedule, itemsize=itemsize, grid_id=state.grid_id)
            program = compile_program(schedule, rank, emulator=state.emulator, call=call)
        made = Prepared(chosen, program)
        with self.table:
            self.prepared[key] = made
            while len(self.prepared) > _PREPARED:
                self.prepared.popitem(last=False)
        return made

    def _root_side(self, root: int, itemsize: int) -> RootSide:
        side = self.roots.get(root)
        if side is None:
            side = self.roots[root] = RootSide(self, root, itemsize)
        return side

    # -- reports ------------------------------------------------------------------------
    def _report(self, root: int, end: float, observed: list) -> None:
        """Send the root this rank's end time and wide-area messages of the call."""
        data = np.array([end, *[x for t in observed for x in t]], dtype=np.float64)
        req = self.state.private.Isend([data, MPI.DOUBLE], dest=root, tag=self.state.report_tag)
        self.sent.append((data, req))
        self.report_bytes += data.nbytes

    def _retire(self) -> None:
        """Drop the reports MPI has sent."""
        if self.sent:
            self.sent = [(d, r) for d, r in self.sent if not r.Test()]

    # -- the background thread ------------------------------------------------------------
    def _work(self) -> None:
        while True:
            job = self.jobs.get()
            if job is None:
                return
            self.idle.wait()  # never beside a call: it would take the GIL from it
            with contextlib.suppress(Exception):  # a failed look-ahead costs a later plan
                job()

    def close(self) -> None:
        """Stop the background thread (the communicator is being freed)."""
        self.jobs.put(None)
        self.thread.join(timeout=5.0)


class RootSide:
    """A root's monitor and advisor, fed after each of its calls in the background
    thread; ``trailer`` is the announcement the next call carries."""

    def __init__(self, owner: Adaptive, root: int, itemsize: int):
        state = owner.state
        self.owner, self.root = owner, root
        self.size = state.private.Get_size()
        period = float(os.environ.get(ENV_MONITOR_PERIOD, "") or PERIOD_S)
        self.monitor = NetworkMonitor(owner.grid, period_s=period, start=time.monotonic())
        name = state.algos.get("bcast", ("auto", None))[0]
        self.advisor = Advisor(
            owner.grid,
            "bcast",
            root,
            algo=name if name != "auto" else "auto",
            itemsize=itemsize,
            host_overhead=state.host_overhead,
            max_budget_s=ADVISOR_MAX_BUDGET_S,
            extra_bytes=owner.trailer,
            lead=2,
            frugal=FRUGAL,
            cache=PlanCache(256),
            clock=time.monotonic,
        )
        self.trailer = bytes(owner.trailer)
        self.version = 0
        self.cpu_s = 0.0
        self.pending: list[np.ndarray] = []  # reports received, oldest call first
        self.wan_bytes = 0  # the application's wide-area bytes the reports told of

    def called(self, nbytes: int, start: float, end: float, predicted: float, own: list) -> None:
        """The root's part of a call is done: hand the rest to the background thread."""
        self.owner.jobs.put(lambda: self._after(nbytes, start, end, predicted, own))

    def collect(self, wait: bool, until: float = 0.0, want: int = 0) -> None:
        """Receive the reports that have arrived (for the oldest call still missing
        some), sleeping between probes while ``wait`` and before ``until``."""
        state = self.owner.state
        nap = 1e-3
        status = MPI.Status()
        while True:
            got = False
            while state.private.Iprobe(MPI.ANY_SOURCE, state.report_tag, status):
                data = np.empty(status.Get_count(MPI.DOUBLE), dtype=np.float64)
                state.private.Recv([data, MPI.DOUBLE], status.Get_source(), state.report_tag)
                self.pending.append(data)
                got = True
            if not wait or len(self.pending) >= want or time.monotonic() >= until:
                return
            if not got:
                time.sleep(nap)
                nap = min(2 * nap, 20e-3)

    def _after(self, nbytes: int, start: float, end: float, predicted: float, own: list) -> None:
        cpu = time.process_time()
        if self.owner.threaded:
            self.collect(True, until=end + REPORT_WAIT_S, want=self.size - 1)
        reports, self.pending = self.pending[: self.size - 1], self.pending[self.size - 1 :]
        ends = [end] + [float(r[0]) for r in reports]
        transfers = [Transfer(*t) for t in own]
        for r in reports:
            rows = r[1:].reshape(-1, 5)
            transfers += [Transfer(int(a), int(b), int(m), s, d) for a, b, m, s, d in rows]
        self.wan_bytes += sum(x.nbytes for x in transfers)
        with self.owner.lock:
            monitor, advisor = self.monitor, self.advisor
            monitor.observe(transfers)
            advisor.record_call(nbytes, start)
            if len(reports) == self.size - 1 and advisor.measured(predicted, max(ends) - start):
                grid = self.owner.grid
                monitor.forget({n for x in transfers for n in grid.routes[(x.src, x.dst)].links})
            self._probe()
            monitor.end_period(time.monotonic())
        for _ in advisor.targets():  # one plan at a time, between calls
            self.owner.idle.wait()
            with self.owner.lock:
                made = advisor.plan_ahead(monitor.load(), monitor.worst_load(), limit=1)
            if not made:
                break
        load, ready = advisor.offer()
        self.version += 1
        grid = self.owner.grid
        self.trailer = encode(announcement(self.version, grid, load, ready), grid)
        self.cpu_s += time.process_time() - cpu

    def _probe(self) -> None:
        """Probe the links no call crossed for a period: on the emulated WAN, a probe of
        ``PROBE_BYTES`` between the two clusters' first ranks is reserved on the route's
        links in the shared link state (it takes its share of them, as a cluster
        representative's message would) and its delivery time is the measurement."""
        emulator = self.owner.state.emulator
        if emulator is None:
            return
        members = self.owner.grid.members
        for a, b in self.monitor.probes_due(time.monotonic()):
            src, dst, sent = members[a][0], members[b][0], time.monotonic()
            stamp = emulator.reserve(src, dst, PROBE_BYTES, sent)
            arrived = emulator.wait(stamp, src, dst, PROBE_BYTES)
            self.monitor.observe([Transfer(a, b, PROBE_BYTES, sent, arrived)], probe=True)

    def stats(self) -> dict[str, Any]:
        """What the advisor and the monitor cost so far (the scenario's JSON)."""
        return {
            "advisor_cpu_s": self.cpu_s,
            "plans_made": self.advisor.plans_made,
            "monitor": self.monitor.cost.to_json(),
            "version": self.monitor.version,
            "app_wan_bytes": self.wan_bytes,
        }
