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
   copy of ``M`` bytes per rank is the price of keeping the trailer out of the executor.
3. **Passive measurement.** While the call runs, every wide-area message is timed.
   On the emulated WAN, the emulator notes every one this rank sends (clusters, bytes,
   send time, ``deliver_at``: :attr:`Emulator.observed`). On a real network (no
   emulator), the executor reads the clock once per wide-area message
   (:class:`~gridcoll.runtime.executor.WanTimes`): the sender before its ``Isend``, the
   receiver when the receive completes (at or after the arrival: a receive completed
   late only loosens the load bound the monitor takes its least of). After the call
   each rank other than the root sends the root a small *report* on the
   communicator's report tag: its rank, end time and those messages (fire and forget,
   ``MPI_Isend``; counted as the monitor's traffic). The root pairs each real message's
   send with its receive (per ordered rank pair, in order: MPI's non-overtaking rule)
   and puts both times on its own clock: ``T_r - theta_r`` and ``T_s - theta_s``
   (:func:`matched_transfers`).
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
6. **Clocks** (a real network only): ranks on several hosts read several clocks. The
   root estimates each other clock's offset ``theta`` from it as NTP does
   (:mod:`gridcoll.adapt.clock`, RFC 5905 sec. 8): :data:`SYNC_ROUNDS` exchanges of
   four timestamps with one rank of each (host, cluster) group, the one of least
   delay kept; the rest of the group takes its figure, the root's group 0. It does
   so after its first call and again every :data:`SYNC_EVERY_S`.
7. **Probes.** Links no call crossed for a monitor period
   (``GRIDCOLL_MONITOR_PERIOD``, default 300 s) and none crossed in the current one
   are probed (:meth:`RootSide._probe`): on the emulated WAN, the probe is reserved on
   the route's links at the root; on a real network, it is a real message of
   ``PROBE_BYTES`` from the first rank of one cluster to the first of the other,
   sent when the receiver says it is ready and timed as the calls' messages are.
   Probe bytes are rationed to ``GRIDCOLL_PROBE_SHARE`` (default
   :data:`~gridcoll.adapt.monitor.PROBE_SHARE`) of the application's wide-area bytes
   over the last calls and over the run (:class:`~gridcoll.adapt.monitor.ProbeBudget`);
   a link over budget keeps its last forecast.

On a real network the root tells every rank what to do after a call (synchronise
clocks, which probes) in a few more trailer bytes (:data:`ORDERS_BYTES`), so every
rank knows it from the call's own bytes. The monitor's traffic (reports, probes,
clock exchanges) and its share of the application's wide-area bytes are counted
(:class:`~gridcoll.adapt.monitor.MonitorTraffic`): this rank's sends in
:attr:`Adaptive.traffic`, the whole communicator's in the root's
:meth:`RootSide.stats`. Clock exchanges and probes use a duplicate of the private
communicator, made at the first adaptive broadcast.

Without ``MPI_THREAD_MULTIPLE`` the root collects its reports at its next call instead.
A call log (``GRIDCOLL_LOG``) gets the call's line with the plan's size: the user's
bytes and the trailer. Non-blocking ``Ibcast`` and one-cluster communicators take the
ordinary path.
"""

from __future__ import annotations

import contextlib
import os
import queue
import threading
import time
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from mpi4py import MPI

from gridcoll.adapt.advisor import ADVISOR_MAX_BUDGET_S, Advisor
from gridcoll.adapt.clock import ntp_sample
from gridcoll.adapt.handoff import (
    Announcement,
    announcement,
    choose,
    decode,
    encode,
    planned,
    trailer_bytes,
)
from gridcoll.adapt.monitor import (
    PERIOD_S,
    PROBE_BYTES,
    PROBE_SHARE,
    MonitorTraffic,
    NetworkMonitor,
    ProbeBudget,
    Transfer,
)
from gridcoll.runtime.executor import WanTimes, compile_program, wait
from gridcoll.runtime.header import CallInfo
from gridcoll.runtime.prepare import plan_call, run
from gridcoll.runtime.state import PROCESS, Prepared, State
from gridcoll.tune import FRUGAL, PlanCache

__all__ = [
    "ENV_MONITOR_PERIOD",
    "ENV_PROBE_SHARE",
    "MAX_ORDERED_PROBES",
    "ORDERS_BYTES",
    "REPORT_WAIT_S",
    "SYNC_EVERY_S",
    "SYNC_ROUNDS",
    "Adaptive",
    "CallTimes",
    "RootSide",
    "matched_transfers",
    "of",
]

ENV_MONITOR_PERIOD = "GRIDCOLL_MONITOR_PERIOD"
"""Environment variable: the root's monitor period in seconds (default 300, seed 001's;
``gridcoll scenario --measure`` sets it to the scaled period)."""
ENV_PROBE_SHARE = "GRIDCOLL_PROBE_SHARE"
"""Environment variable: the most probe bytes as a share of the application's
wide-area bytes over a window of calls (default
:data:`~gridcoll.adapt.monitor.PROBE_SHARE`)."""
REPORT_WAIT_S = 1.0
"""How long past a call the root's thread waits for its reports."""
SYNC_ROUNDS = 4
"""Four-timestamp exchanges per clock synchronisation and peer (the least delay wins)."""
SYNC_EVERY_S = 60.0
"""How often the root refreshes the clock offsets (seconds; at its next call after)."""
MAX_ORDERED_PROBES = 4
"""The most probes one call's orders carry (more due ones wait for the next call)."""
ORDERS_BYTES = 2 * (2 + 2 * MAX_ORDERED_PROBES)
"""The orders in the trailer on a real network: ``uint16`` flags (bit 0: synchronise
clocks), the number of probes, then each probe's source and destination clusters."""
_PREPARED = 8
_SYNC, _READY, _PROBE = 1, 2, 3  # tags on the monitor's communicator
_REPORT_HEAD = 7  # rank, end, and the five lists' lengths
_SYNC_SENT = 8 + 16  # bytes of one exchange: the ping and the answer (T2, T3)


@dataclass
class CallTimes:
    """What one rank saw of one call's wide-area traffic: ``emulated`` rows
    ``(src cluster, dst cluster, bytes, sent, deliver_at)`` (:attr:`Emulator.observed`),
    and on a real network ``sent``/``received`` rows ``(peer rank, bytes, time)`` of
    the call's messages and ``probe_sent``/``probe_received`` of its probes (local
    clock)."""

    emulated: list = field(default_factory=list)
    sent: list = field(default_factory=list)
    received: list = field(default_factory=list)
    probe_sent: list = field(default_factory=list)
    probe_received: list = field(default_factory=list)

    def encode(self, rank: int, end: float) -> np.ndarray:
        """The report: ``[rank, end, lengths..., rows...]`` as float64."""
        lists = (self.sent, self.received, self.probe_sent, self.probe_received)
        head = [rank, end, len(self.emulated), *map(len, lists)]
        rows = [x for t in self.emulated for x in t]
        rows += [x for rows_ in lists for t in rows_ for x in t]
        return np.array(head + rows, dtype=np.float64)

    @staticmethod
    def decode(data: np.ndarray) -> tuple[int, float, CallTimes]:
        """The rank, end time and times of a report made by :meth:`encode`."""
        rank, end = int(data[0]), float(data[1])
        counts = [int(c) for c in data[2:_REPORT_HEAD]]
        at = _REPORT_HEAD
        emulated = data[at : at + 5 * counts[0]].reshape(-1, 5)
        at += 5 * counts[0]
        times = CallTimes([(int(a), int(b), int(m), s, d) for a, b, m, s, d in emulated])
        for name, n in zip(
            ("sent", "received", "probe_sent", "probe_received"), counts[1:], strict=True
        ):
            rows = data[at : at + 3 * n].reshape(-1, 3)
            at += 3 * n
            getattr(times, name).extend((int(p), int(m), float(t)) for p, m, t in rows)
        return rank, end, times


def matched_transfers(
    times: Mapping[int, CallTimes],
    offsets: Mapping[int, float],
    cluster: Sequence[int],
    *,
    probes: bool = False,
) -> list[Transfer]:
    """The real messages of ``times`` (per rank) as transfers on the root's clock.

    The ``k``-th message rank ``a`` sent to rank ``b`` is the ``k``-th one ``b``
    received from ``a`` (MPI's non-overtaking rule; pairs whose sizes disagree are
    dropped). A time ``T`` on rank ``r``'s clock is ``T - theta_r`` on the root's,
    ``theta_r = offsets[r]`` (0 if unknown), so the transfer took
    ``(T_recv - theta_b) - (T_send - theta_a)``. ``probes``: match the probes instead.
    """
    sent_of = "probe_sent" if probes else "sent"
    recv_of = "probe_received" if probes else "received"
    sends: dict[tuple[int, int], list] = {}
    for a, t in times.items():
        for b, m, when in getattr(t, sent_of):
            sends.setdefault((a, b), []).append((m, when - offsets.get(a, 0.0)))
    out = []
    for b, t in sorted(times.items()):
        got: dict[int, int] = {}
        for a, m, when in getattr(t, recv_of):
            k = got[a] = got.get(a, -1) + 1
            pair = sends.get((a, b), ())
            if k < len(pair) and pair[k][0] == m:
                arrived = when - offsets.get(b, 0.0)
                out.append(Transfer(cluster[a], cluster[b], m, pair[k][1], arrived))
    return out


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
        self.real = state.emulator is None  # a real network: time the messages
        self.ann_bytes = trailer_bytes(self.grid)
        self.trailer = self.ann_bytes + (ORDERS_BYTES if self.real else 0)
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
        self.traffic = MonitorTraffic()  # this rank's monitor sends, its own WAN bytes
        self.size = state.private.Get_size()
        self.monitor_comm: MPI.Intracomm | None = None
        self.probe_buf = np.zeros(0, dtype=np.uint8)
        if self.real:  # clock exchanges and probes, apart from every call's tags
            comm, req = state.private.Idup()
            wait(req, state.timeout, what="duplicating the communicator for the monitor")
            self.monitor_comm = comm
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
        ann_end = nbytes + self.ann_bytes
        if rank == root:
            side = self._root_side(root, itemsize)
            if not self.threaded:
                side.collect(wait=False)
            buf[:nbytes] = view
            buf[nbytes:ann_end] = np.frombuffer(side.trailer, dtype=np.uint8)
            if self.real:
                buf[ann_end:] = side.orders(time.monotonic()).view(np.uint8)
        emulator = state.emulator
        if emulator is not None:
            emulator.observed = []
        timing = WanTimes(self.grid.cluster_of) if self.real else None
        ran = time.monotonic()
        try:
            run(state, prepared.program, buf, None, dtype, timing=timing)
        finally:
            observed = [] if emulator is None else emulator.observed
            if emulator is not None:
                emulator.observed = None
        end = time.monotonic()
        times = CallTimes(observed)
        if timing is not None:
            times.sent, times.received = timing.sent, timing.received
        self.traffic.app_wan_bytes += sum(t[1] for t in times.sent) + sum(t[2] for t in observed)
        state.last = prepared.plan
        if state.log is not None:  # the call's line, as collectives.log_call writes it
            state.log.write(prepared.plan, end - ran, ran - start, self.size, self.grid.name)
        if rank != root:
            view[:] = buf[:nbytes]
        ann = decode(buf[nbytes:ann_end], self.grid)
        self.announced[root] = ann
        if self.real:  # the root's orders: every rank read the same bytes
            orders = buf[ann_end:total].copy().view(np.uint16)
            self._carry_out(orders, root, rank, side, times)
        if side is not None:
            side.called(nbytes, start, end, prepared.plan.predicted_s, times)
        else:
            self._report(root, rank, end, times)
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

    # -- the root's orders (a real network) ------------------------------------------------
    def _carry_out(
        self, orders: np.ndarray, root: int, rank: int, side: RootSide | None, times: CallTimes
    ) -> None:
        """Synchronise clocks and send or receive probes, as the call's orders say;
        every rank takes its part, in the orders' sequence (no two wait for each other)."""
        if orders[0] & 1:
            self._sync(root, rank, side)
        members = self.grid.members
        for i in range(min(int(orders[1]), MAX_ORDERED_PROBES)):
            a, b = int(orders[2 + 2 * i]), int(orders[3 + 2 * i])
            if a < len(members) and b < len(members) and a != b:
                self._probe(members[a][0], members[b][0], rank, times)

    def sync_peers(self, root: int) -> dict[int, tuple[int, ...]]:
        """One rank per (host, cluster) group other than the root's, with its group:
        the ranks whose clock offsets the root estimates (every rank computes alike)."""
        hosts = self.state.hosts
        cluster = self.grid.cluster_of
        groups: dict[tuple, list[int]] = {}
        for r in range(self.size):
            groups.setdefault((hosts[r] if hosts else "", cluster[r]), []).append(r)
        key = (hosts[root] if hosts else "", cluster[root])
        return {g[0]: tuple(g) for k, g in groups.items() if k != key}

    def _sync(self, root: int, rank: int, side: RootSide | None) -> None:
        """The clock exchanges (module docstring, item 6; RFC 5905 sec. 8): the root
        sends at ``T1`` and receives the answer at ``T4``, the peer receives at ``T2``
        and answers ``(T2, T3)``."""
        comm, timeout = self.monitor_comm, self.state.timeout
        peers = self.sync_peers(root)
        stamps = np.zeros(2, dtype=np.float64)
        if rank == root:
            assert side is not None
            ping = np.zeros(1, dtype=np.float64)
            for peer, group in peers.items():
                samples = []
                for _ in range(SYNC_ROUNDS):
                    req = comm.Irecv([stamps, MPI.DOUBLE], peer, _SYNC)
                    t1 = time.monotonic()
                    comm.Send([ping, MPI.DOUBLE], peer, _SYNC)
                    wait(req, timeout, what=f"the clock exchange with rank {peer}")
                    t4 = time.monotonic()
                    samples.append(ntp_sample(t1, float(stamps[0]), float(stamps[1]), t4))
                best = min(samples, key=lambda x: x.delay)  # NTP's clock filter
                side.clock[peer] = best
                for r in group:
                    side.offsets[r] = best.offset
            side.synced(len(peers) * SYNC_ROUNDS * _SYNC_SENT)
            self.traffic.sync_bytes += len(peers) * SYNC_ROUNDS * 8
        elif rank in peers:
            ping = np.zeros(1, dtype=np.float64)
            for _ in range(SYNC_ROUNDS):
                wait(comm.Irecv([ping, MPI.DOUBLE], root, _SYNC), timeout, what="a clock exchange")
                stamps[0] = time.monotonic()
                stamps[1] = time.monotonic()
                comm.Send([stamps, MPI.DOUBLE], root, _SYNC)
            self.traffic.sync_bytes += SYNC_ROUNDS * 16

    def _probe(self, src: int, dst: int, rank: int, times: CallTimes) -> None:
        """One probe of ``PROBE_BYTES`` from ``src`` to ``dst``: the receiver posts its
        receive and says it is ready (one byte), the sender then sends, each side
        noting its time as for a call's message."""
        if rank not in (src, dst):
            return
        comm, timeout = self.monitor_comm, self.state.timeout
        if self.probe_buf.size != PROBE_BYTES:
            self.probe_buf = np.zeros(PROBE_BYTES, dtype=np.uint8)
        ready = np.zeros(1, dtype=np.uint8)
        if rank == dst:
            req = comm.Irecv([self.probe_buf, MPI.BYTE], src, _PROBE)
            comm.Send([ready, MPI.BYTE], src, _READY)
            wait(req, timeout, what=f"a probe from rank {src}")
            times.probe_received.append((src, PROBE_BYTES, time.monotonic()))
            self.traffic.probe_bytes += 1
        else:
            wait(comm.Irecv([ready, MPI.BYTE], dst, _READY), timeout, what="a probe's receiver")
            sent = time.monotonic()
            wait(comm.Isend([self.probe_buf, MPI.BYTE], dst, _PROBE), timeout, what="a probe")
            times.probe_sent.append((dst, PROBE_BYTES, sent))
            self.traffic.probe_bytes += PROBE_BYTES

    # -- reports ------------------------------------------------------------------------
    @property
    def report_bytes(self) -> int:
        """The bytes of this rank's reports so far."""
        return self.traffic.report_bytes

    def _report(self, root: int, rank: int, end: float, times: CallTimes) -> None:
        """Send the root this rank's end time and wide-area messages of the call."""
        data = times.encode(rank, end)
        req = self.state.private.Isend([data, MPI.DOUBLE], dest=root, tag=self.state.report_tag)
        self.sent.append((data, req))
        self.traffic.report_bytes += data.nbytes

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
        if self.monitor_comm is not None and not MPI.Is_finalized():
            with contextlib.suppress(MPI.Exception):
                self.monitor_comm.Free()
            self.monitor_comm = None


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
        self.trailer = bytes(owner.ann_bytes)
        self.version = 0
        self.cpu_s = 0.0
        self.pending: list[np.ndarray] = []  # reports received, oldest call first
        self.wan_bytes = 0  # the application's wide-area bytes the reports told of
        self.traffic = MonitorTraffic()  # the communicator's monitor traffic
        share = float(os.environ.get(ENV_PROBE_SHARE, "") or PROBE_SHARE)
        self.budget = ProbeBudget(share)
        self.offsets: dict[int, float] = {}  # theta_r: rank r's clock minus the root's
        self.clock: dict[int, Any] = {}  # the ClockSample of each synchronised peer
        self.syncs = 0
        self.last_sync = -float("inf")
        self.to_probe: list[tuple[int, int]] = []  # a real network: the next call's

    def orders(self, now: float) -> np.ndarray:
        """The orders the next call carries (:data:`ORDERS_BYTES`): synchronise the
        clocks if :data:`SYNC_EVERY_S` passed since the last time, and the probes the
        background thread asked for."""
        out = np.zeros(ORDERS_BYTES // 2, dtype=np.uint16)
        if now - self.last_sync >= SYNC_EVERY_S:
            out[0] = 1
            self.last_sync = now
        probes = self.to_probe[:MAX_ORDERED_PROBES]
        self.to_probe = self.to_probe[MAX_ORDERED_PROBES:]
        out[1] = len(probes)
        for i, (a, b) in enumerate(probes):
            out[2 + 2 * i], out[3 + 2 * i] = a, b
        return out

    def synced(self, nbytes: int) -> None:
        """A clock synchronisation moved ``nbytes`` (both ways)."""
        self.syncs += 1
        self.traffic.sync_bytes += nbytes

    def called(
        self, nbytes: int, start: float, end: float, predicted: float, own: CallTimes
    ) -> None:
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

    def _after(
        self, nbytes: int, start: float, end: float, predicted: float, own: CallTimes
    ) -> None:
        cpu = time.process_time()
        if self.owner.threaded:
            self.collect(True, until=end + REPORT_WAIT_S, want=self.size - 1)
        reports, self.pending = self.pending[: self.size - 1], self.pending[self.size - 1 :]
        self.traffic.report_bytes += sum(r.nbytes for r in reports)
        times, ends = {self.root: own}, [end]
        for r in reports:
            rank, their_end, their = CallTimes.decode(r)
            times[rank] = their
            ends.append(their_end - self.offsets.get(rank, 0.0))
        transfers = [Transfer(*t) for x in times.values() for t in x.emulated]
        cluster = self.owner.grid.cluster_of
        transfers += matched_transfers(times, self.offsets, cluster)
        probes = matched_transfers(times, self.offsets, cluster, probes=True)
        app = sum(x.nbytes for x in transfers)
        self.wan_bytes += app
        self.traffic.app_wan_bytes += app
        self.budget.called(app)
        with self.owner.lock:
            monitor, advisor = self.monitor, self.advisor
            monitor.observe(transfers)
            monitor.observe(probes, probe=True)
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
        """Probe the links no call crossed for a period nor in this one, within the
        probe budget: on the emulated WAN, a probe of ``PROBE_BYTES`` between the two
        clusters' first ranks is reserved on the route's links in the shared link state
        (it takes its share of them, as a cluster representative's message would) and
        its delivery time is the measurement; on a real network, the next call's orders
        ask for it (:meth:`orders`) and its report brings its times."""
        emulator = self.owner.state.emulator
        cost = PROBE_BYTES + (emulator is None)  # a real probe's receiver sends 1 byte
        chosen = []
        for pair in self.monitor.probes_due(time.monotonic(), skip_measured=True):
            if len(chosen) == MAX_ORDERED_PROBES or not self.budget.allows(cost):
                break
            self.budget.spend(cost)
            chosen.append(pair)
        self.traffic.probe_bytes += len(chosen) * cost
        if emulator is None:
            self.to_probe = self.to_probe + chosen
            return
        members = self.owner.grid.members
        for a, b in chosen:
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
            "traffic": self.traffic.to_json(),
            "probe_share_limit": self.budget.share,
            "clock_syncs": self.syncs,
            "clock_offsets": {str(r): s.offset for r, s in sorted(self.clock.items())},
            "clock_delays": {str(r): s.delay for r, s in sorted(self.clock.items())},
        }
