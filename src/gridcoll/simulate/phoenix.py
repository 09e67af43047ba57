"""Phoenix (seed 004) in simulation: one :mod:`gridcoll.phoenix` process per rank.

Theory of operation
-------------------
:mod:`gridcoll.phoenix` is sans-I/O: a :class:`~gridcoll.phoenix.protocol.Process` takes
events and returns actions and holds no clock or socket. :class:`PhoenixSim` is its
I/O in virtual time, on the simulator's :class:`~gridcoll.simulate.engine.Environment`
and link model (:class:`~gridcoll.simulate.links.LinkModel`: NICs, gateways and shared
wide-area links, cut-through FIFO, P-LogP costs):

* **One CPU per process.** A process handles one event at a time; its ``cpu`` is when
  it is next free. A message that arrives at ``A`` is handled at
  ``max(A, cpu + or(m))`` (the executor's receive rule); a timer, a probe result or a
  request at its time once the CPU is free.
* **Actions.** ``Send(dst, message, nbytes)`` puts ``nbytes`` on the path at ``cpu``
  and the CPU is busy ``os(nbytes)``; the actions of one handling go out in order, so
  a pair's messages arrive in send order (FIFO per process pair). ``Deliver`` is
  counted at ``cpu`` (the checker below). ``SetTimer(timer, delay)`` becomes an engine
  timeout ``delay`` from ``cpu``. ``Probe(peer, nbytes)`` runs, through the same
  links, a 1-byte ping and its 1-byte pong (``RTT``: from the ping's start to the
  pong's arrival) and then an ``nbytes`` download from the peer (the core's
  :data:`~gridcoll.phoenix.protocol.PROBE_BYTES`, 128 KiB as sec. IV-A; none if 0, a
  probe of pings only; ``bw = nbytes / its transfer time``,
  latency included as in :mod:`gridcoll.algorithms.phoenix`); by default the values
  reported are the unloaded model's (``measure="model"``, see :class:`PhoenixSim`),
  each with a seeded relative noise of up to :data:`PROBE_JITTER`, and
  ``ProbeResult`` is fed to the prober when the download arrives. Probes take the
  links' time but no CPU.
  A later ``SetTimer`` with the same key replaces the earlier (the core's rule 1); a
  probe of a process that is gone measures ``rtt = inf``.
* **Processes and ranks.** A process runs on a rank of the grid (a machine); founders
  ``0 .. n-1`` on ranks ``0 .. n-1``, given the whole vnode mapping and fed ``Start``.
  Ids are never reused (the core's rule 2): a machine that comes back joins as a new
  process on its old rank. Two processes of one rank talk without the wire.
* **Requests.** Joins, leaves, broadcasts and reductions happen at given times
  (:meth:`PhoenixSim.join`, :meth:`~PhoenixSim.leave`, :meth:`~PhoenixSim.bcast`,
  :meth:`~PhoenixSim.reduce`); a broadcast's request goes to the process owning its
  root vnode then (``Process.owned``), a reduction's to every active process.
* **Crashes.** :meth:`PhoenixSim.crash` kills a process at a given time, as a SIGKILL
  does: it handles nothing more (what was sent to it still takes the links' time),
  and a failure detector's time later every live member is fed ``PeerFailed`` with
  the counts it would have acknowledged (those of
  :class:`~gridcoll.group.Group`: its last two beats or acks, ``ack_s`` apart).
  ``PeerLost`` and ``Abandoned`` reports are kept in :attr:`PhoenixSim.failures`.
* **The checker.** Every ``Deliver(op_id, vnodes, payload, segment, nsegments)`` is
  counted per ``(op, vnode, segment)``. A vnode has a broadcast when it has every
  segment (its arrival time: its last segment's delivery); a broadcast is complete
  when every vnode of the namespace has it. ``lost`` counts the ``(vnode, segment)``
  pairs never delivered when the run ends (vnodes, for a one-segment broadcast),
  ``duplicated`` the deliveries beyond the first of a ``(vnode, segment)``. A
  reduction is complete at its ``ReduceDone``.

Rules: time never goes backwards (the engine refuses it); a process whose ``handle``
raises (the core then sits in ERROR, rule 4) is recorded in ``PhoenixRun.errors`` with
its reason and gets no more events; nothing is dropped silently.

References
----------
H. Saito, K. Taura, T. Chikayama, *Collective operations for wide-area message passing
systems using adaptive spanning trees* (seed 004), sec. IV (probes, trees, virtual
nodes, broadcast and reduction) and V (the experiments this driver runs).
"""

from __future__ import annotations

import math
import random
from collections import Counter, deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from gridcoll.errors import ParameterError
from gridcoll.network.grid import Grid
from gridcoll.phoenix import protocol as _p
from gridcoll.simulate.engine import NORMAL, Environment, Event, Timeout
from gridcoll.simulate.links import LinkModel, Transfer

__all__ = [
    "PROBE_JITTER",
    "OpResult",
    "PhoenixRun",
    "PhoenixSim",
]

PROBE_JITTER = 0.02
"""Relative noise of a simulated measurement (uniform in +-2%, seeded): real probes
never measure twice the same, and exact ties would freeze the trees' choices."""

ProcessFactory = Callable[..., Any]
"""``factory(pid, *, rng, extra_probes, founder_vnodes) -> Process``; founders get the
mapping ``{pid: vnodes}``, joiners None."""


@dataclass(frozen=True, slots=True)
class OpResult:
    """One broadcast or reduction as the checker saw it (times in seconds)."""

    op_id: int
    kind: str
    """``"bcast"`` or ``"reduce"``."""
    nbytes: int
    start_s: float
    end_s: float | None
    """When the last vnode got the broadcast / the root its ``ReduceDone``; None if
    it never completed."""
    delivered: int
    """Vnodes that got the whole broadcast (a reduction: vnodes counted in its value)."""
    lost: int
    """``(vnode, segment)`` pairs never delivered (a one-segment broadcast: vnodes; a
    reduction: the ``missing`` of its ``ReduceDone``)."""
    duplicated: int
    """Deliveries beyond the first of a ``(vnode, segment)``."""
    value: Any = None
    """A reduction's result."""
    arrival_s: Mapping[int, float] = field(default_factory=dict, repr=False)
    """When each vnode that got the whole broadcast got its last segment."""
    nsegments: int = 1
    """How many segments the broadcast was cut into (1 if none was delivered)."""

    @property
    def time_s(self) -> float | None:
        """Completion time from the request, or None."""
        return None if self.end_s is None else self.end_s - self.start_s


@dataclass(frozen=True, slots=True)
class PhoenixRun:
    """What :meth:`PhoenixSim.result` returns."""

    grid: str
    ops: tuple[OpResult, ...]
    end_s: float
    nmessages: int
    """Protocol messages sent (probes not counted)."""
    nprobes: int
    errors: tuple[str, ...]
    """``pid: error`` of every process that went into its error state."""

    @property
    def delivered(self) -> int:
        return sum(op.delivered for op in self.ops if op.kind == "bcast")

    @property
    def lost(self) -> int:
        return sum(op.lost for op in self.ops)

    @property
    def duplicated(self) -> int:
        return sum(op.duplicated for op in self.ops)


@dataclass(slots=True)
class _Proc:
    """The driver's side of one process: its rank, CPU and queue of pending events."""

    pid: int
    rank: int
    core: Any
    cpu: float = 0.0
    inbox: deque = field(default_factory=deque)  # (ready at, event, receive overhead)
    scheduled: bool = False
    failed: bool = False  # raised (ERROR) or crashed: handles nothing more
    fed_from: Counter = field(default_factory=Counter)  # pid -> its messages handled


@dataclass(slots=True)
class _Op:
    op_id: int
    kind: str
    nbytes: int
    start_s: float
    end_s: float | None = None
    counts: Counter = field(default_factory=Counter)  # (vnode, segment) -> deliveries
    got: Counter = field(default_factory=Counter)  # vnode -> distinct segments delivered
    nsegments: int = 1
    first: dict = field(default_factory=dict)  # vnode -> when it had every segment
    value: Any = None
    missing: frozenset = frozenset()
    on_done: Callable[[OpResult], None] | None = None


class _Call:
    """A zero-delay engine event that calls ``fn()`` (requests, hand-offs)."""

    __slots__ = ("_defused", "_ok", "callbacks")

    def __init__(self, fn: Callable[[], None]):
        self.callbacks = [lambda _event: fn()]
        self._ok = True
        self._defused = False


class PhoenixSim:
    """Run seed 004's processes on ``grid`` in virtual time (module docstring).

    Parameters
    ----------
    grid : Grid
        One rank per process; its links must be FIFO.
    founders : int, optional
        Processes ``0 .. founders-1`` start as members on ranks ``0 .. founders-1``,
        founder ``i`` holding vnode ``i`` (seed 004, sec. V: "one virtual node was
        mapped to each processor"); default every rank. Each is given the whole mapping
        and fed ``Start``. Process ids are never reused: a process that joins later
        gets the next id, on the rank :meth:`join` names.
    seed : int
        Seeds every process's ``random.Random`` and the probes' noise.
    extra_probes : int
        The paper's extra probes per tree (sec. IV-A: 10).
    factory : callable, optional
        Builds a process; default :class:`gridcoll.phoenix.protocol.Process`.
    measure : {"model", "links"}
        What a probe measures. A probe always takes its messages' time on the links
        (its result arrives when the download does). ``"model"`` (default) returns the
        unloaded network's values, ``RTT = r_pq(1) + r_qp(1)`` and ``bw = nbytes /
        r_qp(nbytes)`` (as :mod:`gridcoll.algorithms.phoenix`): on FIFO links a 1-byte
        ping queued behind another probe's 128 KiB download would otherwise measure
        that download (hundreds of ms on a DAS link), which packet-level sharing
        does not do. ``"links"`` returns the times the probe's own messages took.
    """

    def __init__(
        self,
        grid: Grid,
        *,
        founders: int | None = None,
        seed: int = 0,
        extra_probes: int = 10,
        factory: ProcessFactory | None = None,
        measure: str = "model",
    ):
        n = grid.nranks if founders is None else founders
        if not 1 <= n <= grid.nranks:
            raise ParameterError(f"founders must be in 1..{grid.nranks}, got {founders!r}")
        if measure not in ("model", "links"):
            raise ParameterError(f"measure must be 'model' or 'links', got {measure!r}")
        self.measure = measure
        self.grid = grid
        self.env = Environment()
        self.links = LinkModel(grid, self.env)
        self.seed = seed
        self.extra_probes = extra_probes
        self.factory = factory or _p.Process
        self.noise = random.Random(f"probe-noise-{seed}")
        self.vnodes = frozenset(range(n))
        """The namespace: every broadcast must reach each of these once."""
        self.procs: dict[int, _Proc] = {}
        self.next_pid = n
        self.timers: dict[tuple[int, Any], object] = {}  # (pid, timer) -> live token
        self.ops: list[_Op] = []
        self.errors: list[str] = []
        self.failures: list[tuple[int, Any]] = []
        """What processes reported of crashes: ``(pid, PeerLost | Abandoned)``."""
        self.nprobes = 0
        self.nsent = 0
        self.probes_out = 0
        self.inflight = 0
        mapping = {pid: (pid,) for pid in range(n)}
        for pid in range(n):
            proc = self._spawn(pid, pid, mapping)
            self._feed(proc, 0.0, _p.Start(), 0.0)

    # -- processes ---------------------------------------------------------------------
    def _spawn(self, pid: int, rank: int, founders: Mapping | None) -> _Proc:
        rng = random.Random(f"process-{self.seed}-{pid}")
        core = self.factory(pid, rng=rng, extra_probes=self.extra_probes, founder_vnodes=founders)
        proc = self.procs[pid] = _Proc(pid, rank, core, cpu=self.env.now)
        return proc

    def _feed(self, proc: _Proc, ready: float, event: Any, overhead: float) -> None:
        """Queue ``event`` for ``proc``, ready at ``ready``."""
        proc.inbox.append((ready, event, overhead))
        self._wake(proc)

    def _wake(self, proc: _Proc) -> None:
        if proc.scheduled or not proc.inbox or proc.failed:
            return
        ready, _, overhead = proc.inbox[0]
        at = max(ready, proc.cpu + overhead, self.env.now)
        proc.scheduled = True
        self.env.schedule_at(at, _Call(lambda: self._handle(proc)), NORMAL)

    def _handle(self, proc: _Proc) -> None:
        proc.scheduled = False
        _, event, _ = proc.inbox.popleft()
        proc.cpu = self.env.now
        if type(event) is _p.Received:
            proc.fed_from[event.src] += 1
        try:
            actions = proc.core.handle(event)
        except Exception as err:  # the core is in ERROR and says why (rule 4)
            proc.failed = True
            why = getattr(proc.core, "error", None) or f"{type(err).__name__}: {err}"
            self.errors.append(f"{proc.pid}: {why}")
            return
        for action in actions:
            self._act(proc, action)
        self._wake(proc)

    def _act(self, proc: _Proc, action: Any) -> None:
        kind = type(action)
        if kind is _p.Send:
            self._send(proc, action.dst, action.message, action.nbytes)
        elif kind is _p.Deliver:
            self._deliver(proc.cpu, action)
        elif kind is _p.SetTimer:  # a later SetTimer with the same key replaces it
            key = (proc.pid, action.timer)
            token = self.timers[key] = object()
            timeout = Timeout(self.env, max(0.0, proc.cpu - self.env.now) + action.delay_s)
            timeout.callbacks.append(lambda _e: self._expire(proc, key, token))
        elif kind is _p.Probe:
            self._probe(proc, action.peer, action.nbytes)
        elif kind is _p.ReduceDone:
            self._reduce_done(proc.cpu, action)
        elif kind is _p.PeerLost or kind is _p.Abandoned:
            self.failures.append((proc.pid, action))
        else:
            raise TypeError(f"process {proc.pid} returned {action!r}, not an action")

    def _expire(self, proc: _Proc, key: tuple, token: object) -> None:
        if self.timers.get(key) is token:
            del self.timers[key]
            self._feed(proc, self.env.now, _p.TimerExpired(key[1]), 0.0)

    # -- messages and probes -----------------------------------------------------------
    def _send(self, proc: _Proc, dst: int, message: Any, nbytes: int) -> None:
        target = self.procs.get(dst)
        if target is None:
            raise RuntimeError(f"process {proc.pid} sent to process {dst!r}, which never existed")
        self.nsent += 1
        if target.rank == proc.rank:  # same machine (itself, or its successor): no wire
            self._feed(target, proc.cpu, _p.Received(proc.pid, message), 0.0)
            return
        os_, or_ = self.links.overheads(proc.rank, target.rank, nbytes)
        self.inflight += 1
        payload = (proc.pid, target, message, or_)
        self.links.send(proc.rank, target.rank, nbytes, proc.cpu, self._arrived, payload)
        proc.cpu += os_

    def _arrived(self, transfer: Transfer) -> None:
        self.inflight -= 1
        src, target, message, or_ = transfer.payload
        self._feed(target, self.env.now, _p.Received(src, message), or_)

    def _reachable(self, pid: int) -> _Proc | None:
        proc = self.procs.get(pid)
        if proc is None or proc.failed or _state(proc.core) in ("LEFT", "ERROR", "IDLE"):
            return None
        return proc

    def _probe(self, proc: _Proc, peer_pid: int, nbytes: int) -> None:
        """A 1-byte ping-pong, then an ``nbytes`` download (none if 0; module docstring); an
        unreachable peer (gone, or never there) measures ``rtt = inf``."""
        self.nprobes += 1
        target = self._reachable(peer_pid)
        if target is None or target.rank == proc.rank:
            rtt, bw = (math.inf, 0.0) if target is None else (1e-6, math.inf)
            self._feed(proc, proc.cpu, _p.ProbeResult(peer_pid, rtt, bw), 0.0)
            return
        self.probes_out += 1
        start = proc.cpu
        p, peer = proc.rank, target.rank
        there, back = self.grid.plogp(p, peer), self.grid.plogp(peer, p)

        def done(rtt: float, bw: float) -> None:
            self.probes_out -= 1
            if self.measure != "links":  # what the model gives an unloaded network
                rtt = there.L + there.g(1) + back.L + back.g(1)
                bw = nbytes / (back.L + back.g(nbytes)) if nbytes else 0.0
            result = _p.ProbeResult(peer_pid, rtt * self._jitter(), bw * self._jitter())
            self._feed(proc, self.env.now, result, 0.0)

        def download_done(t: Transfer) -> None:
            done(t.payload, nbytes / (t.arrival_s - t.start_s))

        def pong_done(t: Transfer) -> None:
            rtt = self.env.now - start
            if nbytes:
                self.links.send(peer, p, nbytes, self.env.now, download_done, rtt)
            else:  # pings only
                done(rtt, 0.0)

        def ping_done(t: Transfer) -> None:
            self.links.send(peer, p, 1, self.env.now, pong_done)

        self.links.send(p, peer, 1, start, ping_done)

    def _jitter(self) -> float:
        return 1.0 + self.noise.uniform(-PROBE_JITTER, PROBE_JITTER)

    # -- the checker -------------------------------------------------------------------
    def _deliver(self, at: float, action: Any) -> None:
        op = self._op(action.op_id)
        seg, n = getattr(action, "segment", 0), getattr(action, "nsegments", 1)
        op.nsegments = n
        for v in action.vnodes:
            op.counts[v, seg] += 1
            if op.counts[v, seg] == 1:
                op.got[v] += 1
                if op.got[v] == n:
                    op.first[v] = at
        if op.end_s is None and op.kind == "bcast" and self.vnodes <= op.first.keys():
            op.end_s = at
            if op.on_done is not None:
                done = self._result(op)
                self.env.schedule_at(at, _Call(lambda: op.on_done(done)), NORMAL)

    def _reduce_done(self, at: float, action: Any) -> None:
        op = self._op(action.op_id)
        if op.end_s is not None:
            raise RuntimeError(f"reduction {action.op_id!r} completed twice")
        op.end_s = at
        op.value = action.value
        op.missing = frozenset(action.missing)
        if op.on_done is not None:
            done = self._result(op)
            self.env.schedule_at(at, _Call(lambda: op.on_done(done)), NORMAL)

    def _op(self, op_id: int) -> _Op:
        if not isinstance(op_id, int) or not 0 <= op_id < len(self.ops):
            raise RuntimeError(f"a process delivered for unknown operation {op_id!r}")
        return self.ops[op_id]

    def _result(self, op: _Op) -> OpResult:
        if op.kind == "bcast":
            delivered = len(self.vnodes & op.first.keys())
            lost = sum(op.nsegments - op.got[v] for v in self.vnodes)
            dup = sum(c - 1 for c in op.counts.values() if c > 1) + sum(
                c for (v, _), c in op.counts.items() if v not in self.vnodes
            )
        else:
            lost = len(op.missing) if op.end_s is not None else len(self.vnodes)
            delivered = len(self.vnodes) - lost
            dup = 0
        return OpResult(
            op.op_id,
            op.kind,
            op.nbytes,
            op.start_s,
            op.end_s,
            delivered,
            lost,
            dup,
            op.value,
            dict(op.first),
            op.nsegments,
        )

    # -- requests ----------------------------------------------------------------------
    def _at(self, at: float, fn: Callable[[], None]) -> None:
        self.env.schedule_at(max(at, self.env.now), _Call(fn), NORMAL)

    def _holder(self, vnode: int) -> _Proc:
        """The process that owns ``vnode`` now (``Process.owned``).

        Raises
        ------
        RuntimeError
            If no live process owns it (a vnode lost: the checker's business too).
        """
        for proc in self.procs.values():
            if not proc.failed and vnode in getattr(proc.core, "owned", ()):
                return proc
        raise RuntimeError(f"no process owns vnode {vnode!r} at t={self.env.now!r}")

    def bcast(
        self,
        at: float,
        root: int,
        nbytes: int,
        on_done: Callable[[OpResult], None] | None = None,
    ) -> int:
        """Request a broadcast of ``nbytes`` from vnode ``root`` at time ``at``;
        returns its op id. ``on_done(result)`` is called when every vnode has it."""
        if root not in self.vnodes:
            raise ParameterError(f"root vnode {root!r} is not one of the {len(self.vnodes)}")
        op_id = len(self.ops)
        self.ops.append(_Op(op_id, "bcast", nbytes, max(at, self.env.now), on_done=on_done))

        def request() -> None:
            proc = self._holder(root)
            self.ops[op_id].start_s = self.env.now
            self._feed(proc, self.env.now, _p.BcastRequested(op_id, root, nbytes), 0.0)

        self._at(at, request)
        return op_id

    def reduce(
        self,
        at: float,
        root: int,
        values: Mapping[int, Any],
        op: Callable[[Any, Any], Any],
        nbytes: int = 8,
        on_done: Callable[[OpResult], None] | None = None,
    ) -> int:
        """Request a reduction of ``values`` (vnode -> value) to vnode ``root`` at
        ``at``: every active process is given the whole mapping and counts the vnodes it
        owns; ``nbytes`` is the size of each vnode's data (and so of each partial sum)."""
        if root not in self.vnodes:
            raise ParameterError(f"root vnode {root!r} is not one of the {len(self.vnodes)}")
        op_id = len(self.ops)
        self.ops.append(_Op(op_id, "reduce", nbytes, max(at, self.env.now), on_done=on_done))

        def request() -> None:
            self.ops[op_id].start_s = self.env.now
            event = _p.ReduceRequested(op_id, root, dict(values), op, nbytes)
            for proc in list(self.procs.values()):
                if not proc.failed and _state(proc.core) in ("ACTIVE", None):
                    self._feed(proc, self.env.now, event, 0.0)

        self._at(at, request)
        return op_id

    def leave(self, at: float, pid: int, heir: int | None = None) -> None:
        """Process ``pid`` is asked at ``at`` to leave, giving its vnodes to ``heir``
        (None: the process picks one)."""
        if pid not in self.procs:
            raise ParameterError(f"no process {pid!r} to leave")
        event = _p.LeaveRequested(heir)
        self._at(at, lambda: self._feed(self.procs[pid], self.env.now, event, 0.0))

    def join(self, at: float, rank: int, contact: int) -> int:
        """A new process joins at ``at`` on ``rank`` by contacting process ``contact``;
        returns its id (the next one: ids are never reused)."""
        if not 0 <= rank < self.grid.nranks:
            raise ParameterError(f"{rank!r} is not a rank of grid {self.grid.name!r}")
        pid = self.next_pid
        self.next_pid += 1
        proc = self._spawn(pid, rank, None)
        event = _p.JoinRequested(contact)
        self._at(at, lambda: self._feed(proc, self.env.now, event, 0.0))
        return pid

    def crash(self, at: float, pid: int, detect_s: float = 3.0, ack_s: float = 0.25) -> None:
        """Process ``pid`` dies at ``at`` without a word (a SIGKILL): it handles nothing
        more, and what is sent to it still crosses the links. ``detect_s`` later (a
        heartbeat timeout) every live member is told :class:`~gridcoll.phoenix.protocol.
        PeerFailed` with what the dead process acknowledged, as
        :class:`~gridcoll.group.Group` passes it (its beats and, every ``ack_s``
        between them, to the members it took messages from): its last count half a
        period ``ack_s`` before it died (``delivered``: how many of the member's messages
        it had taken in), the one before a period earlier (``received``)."""
        if pid not in self.procs:
            raise ParameterError(f"no process {pid!r} to crash")
        if detect_s < 0 or ack_s < 0:
            raise ParameterError(f"need detect_s, ack_s >= 0, got {detect_s!r}, {ack_s!r}")
        dead = self.procs[pid]
        beats: list[dict[int, int]] = []

        def snapshot() -> None:
            beats.append(dict(dead.fed_from))

        def kill() -> None:
            dead.failed = True
            dead.inbox.clear()

        def detect() -> None:
            for proc in list(self.procs.values()):
                if not proc.failed and _state(proc.core) in ("ACTIVE", "LEAVING", "JOINING"):
                    took = [beat.get(proc.pid, 0) for beat in beats]
                    self._feed(proc, self.env.now, _p.PeerFailed(pid, *took), 0.0)

        self._at(max(self.env.now, at - 1.5 * ack_s), snapshot)
        self._at(max(self.env.now, at - 0.5 * ack_s), snapshot)
        self._at(at, kill)
        self._at(at + detect_s, detect)

    # -- running -----------------------------------------------------------------------
    def quiet(self) -> bool:
        """No message or probe in flight, no event waiting to be handled, and no
        process with probes left to make (``Process.probing()``)."""
        if self.inflight or self.probes_out:
            return False
        for p in self.procs.values():
            if p.failed:
                continue
            probing = getattr(p.core, "probing", None)
            if p.inbox or (callable(probing) and probing()):
                return False
        return True

    def settle(self, limit_s: float) -> float:
        """Run until :meth:`quiet` (the trees stable: probing done) or ``limit_s``;
        returns the time reached."""
        env = self.env
        while env.peek() <= limit_s:
            env.step()
            if self.quiet():
                break
        return env.now

    def run(self, until: float | Event | None = None) -> None:
        """Run the engine (:meth:`Environment.run`)."""
        self.env.run(until)

    def result(self) -> PhoenixRun:
        """Every operation's outcome so far, with the checker's counts."""
        return PhoenixRun(
            self.grid.name,
            tuple(self._result(op) for op in self.ops),
            self.env.now,
            self.nsent,
            self.nprobes,
            tuple(self.errors),
        )


def _state(core: Any) -> str | None:
    """The name of a core's ``state`` (``"ACTIVE"``...), None if it has none."""
    state = getattr(core, "state", None)
    return getattr(state, "name", None)
