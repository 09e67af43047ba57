"""Phoenix (seed 004): an instant, in-memory driver for the core, and a grid's stable trees.

:class:`Network` moves the actions of a set of :class:`~gridcoll.phoenix.protocol.Process`
objects as if the network took no time: each step delivers the head of one non-empty channel
(FIFO per ordered pair, the channel drawn at random across pairs) or answers one
probe, drawn from one seeded ``random.Random``. A virtual clock ``now`` only moves
when nothing else is pending: then the timer due first fires (with ``timer_chance``,
a timer that ``early`` accepts may also fire early at random, to exercise the
timeouts). With ``batch_chance``, a step may instead take, after the head it drew, more
heads of the channels into the same process, and feed them together
(:meth:`~gridcoll.phoenix.protocol.Process.handle_all`, as a busy driver feeds its
backlog).
Probe results come from a ``measure(p, q) -> (rtt_s, bw_Bps)`` callback.
:meth:`Network.crash` kills a process as SIGKILL does: messages to it vanish (and,
unless told otherwise, what it sent that was not delivered yet), probes of it time out
(``rtt = inf``); the test then tells the survivors with
:class:`~gridcoll.phoenix.protocol.PeerFailed`, as a failure detector would (``taken``
counts what each process was fed from each other, as heartbeats report it).

:func:`stable_trees` runs the founders of a grid to quiescence with
:func:`grid_measure` (the grid's P-LogP figures: ``RTT = r_pq(1) + r_qp(1)``,
``bw = 128 KiB / r_qp(128 KiB)``, each with a seeded relative noise of up to ``jitter``)
and returns every root's latency and bandwidth parents: the trees the core converges
to. It simulates every message. With every root's trees that is O(P^3) messages:
seconds for 36 processes, 13 minutes for 136. With ``roots={r}`` (and
``remote_probes``, :class:`~gridcoll.phoenix.protocol.Process`'s options) the processes
keep root r's two trees only: O(P (log P + 40)) probes, each moving O(depth) messages
(das2:34, 136 processes: 3.7 thousand probes, 31 thousand messages, about 1.4 s). That
is how the ``phoenix-*`` builders of :mod:`gridcoll.algorithms.phoenix` get their trees.
"""

from __future__ import annotations

import random
from collections import deque
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass, field

from gridcoll.errors import Unfeasible
from gridcoll.network.grid import Grid
from gridcoll.phoenix.protocol import (
    PROBE_BYTES,
    Action,
    Deliver,
    Event,
    Probe,
    ProbeResult,
    Process,
    Received,
    ReduceDone,
    Send,
    SetTimer,
    Start,
    TimerExpired,
)

__all__ = ["QUIET_STEPS_PER_PROCESS", "Network", "StableTrees", "grid_measure", "stable_trees"]

Measure = Callable[[int, int], tuple[float, float]]

QUIET_STEPS_PER_PROCESS = 2000
"""Most steps per process :func:`stable_trees` takes to go quiet: about ten times what
the presets need (116-217 per process, ``das2:8`` to ``transit-stub:60,1``). Some
probe results make trees trade parents without end (``teragrid`` with C7's two links
80% loaded ran 10 million steps, 22 minutes); the budget turns that into a refusal in
seconds."""


@dataclass
class Network:
    """Processes by id, wired together in memory (see the module doc)."""

    processes: dict[int, Process]
    measure: Measure
    rng: random.Random
    timer_chance: float = 0.0
    early: Callable[[Hashable], bool] = lambda timer: True
    batch_chance: float = 0.0
    channels: dict[tuple[int, int], deque] = field(default_factory=dict)
    probes: list[tuple[int, int]] = field(default_factory=list)
    timers: dict[tuple[int, Hashable], float] = field(default_factory=dict)
    now: float = 0.0
    delivered: list[tuple[int, Hashable, frozenset[int]]] = field(default_factory=list)
    done: list[tuple[int, ReduceDone]] = field(default_factory=list)
    messages: int = 0
    dead: set[int] = field(default_factory=set)
    taken: dict[tuple[int, int], int] = field(default_factory=dict)
    """``(src, dst)``: how many messages from src dst has been fed (what a heartbeat
    reports, ``PeerFailed.received``)."""
    _busy: list[tuple[int, int]] = field(default_factory=list)
    _busy_at: dict[tuple[int, int], int] = field(default_factory=dict)

    def feed(self, pid: int, event: Event) -> None:
        """Feed one event to process ``pid`` and carry out its actions."""
        self.apply(pid, self.processes[pid].handle(event))

    def feed_all(self, pid: int, events: list[Event]) -> None:
        """Feed events to process ``pid`` together and carry out their actions."""
        self.apply(pid, self.processes[pid].handle_all(events))

    def apply(self, pid: int, actions: Iterable[Action]) -> None:
        for a in actions:
            if isinstance(a, Send):
                if a.dst in self.dead:
                    continue
                key = (pid, a.dst)
                self.channels.setdefault(key, deque()).append(a.message)
                if key not in self._busy_at:
                    self._busy_at[key] = len(self._busy)
                    self._busy.append(key)
            elif isinstance(a, Probe):
                self.probes.append((pid, a.peer))
            elif isinstance(a, SetTimer):
                self.timers[pid, a.timer] = self.now + a.delay_s
            elif isinstance(a, Deliver):
                self.delivered.append((pid, a.op_id, a.vnodes))
            elif isinstance(a, ReduceDone):
                self.done.append((pid, a))

    def step(self) -> bool:
        """Carry out one pending thing; False if nothing is pending."""
        busy = self._busy
        if self.timers and not busy and not self.probes:  # idle: the clock jumps
            key = min(self.timers, key=lambda k: (self.timers[k], repr(k)))
            self.now = max(self.now, self.timers[key])
            return self._fire_timer([key])
        if self.timer_chance and self.rng.random() < self.timer_chance:
            early = [k for k in self.timers if self.early(k[1])]
            if early:
                return self._fire_timer(early)
        if not busy and not self.probes:
            return False
        pick = self.rng.randrange(len(busy) + len(self.probes))
        if pick < len(busy):
            src, dst = busy[pick]
            events = [self._take(src, dst)]
            if self.batch_chance and self.rng.random() < self.batch_chance:
                for key in [k for k in busy if k[1] == dst]:  # (a copy: _take edits busy)
                    while key in self._busy_at and self.rng.random() < 0.75:
                        events.append(self._take(*key))
            if len(events) == 1:
                self.feed(dst, events[0])
            else:
                self.feed_all(dst, events)
        else:
            pid, peer = self.probes.pop(pick - len(busy))
            rtt, bw = self.measure(pid, peer) if peer not in self.dead else (float("inf"), 0.0)
            self.feed(pid, ProbeResult(peer, rtt, bw))
        return True

    def _take(self, src: int, dst: int) -> Received:
        """The head of channel ``(src, dst)``, as ``dst`` receives it."""
        queue = self.channels[src, dst]
        message = queue.popleft()
        if not queue:
            self._idle((src, dst))
        self.messages += 1
        self.taken[src, dst] = self.taken.get((src, dst), 0) + 1
        return Received(src, message)

    def crash(self, pid: int, lose_sent: bool = True) -> None:
        """Kill ``pid`` (module doc): messages to it are lost, and, with ``lose_sent``,
        also those it sent that were not delivered yet (else they still arrive, as
        what a process wrote to TCP before it died does)."""
        self.dead.add(pid)
        for key in [k for k in self.channels if pid == k[1] or (lose_sent and pid == k[0])]:
            self.channels[key].clear()
            if key in self._busy_at:
                self._idle(key)
        self.probes = [(a, b) for a, b in self.probes if a != pid]
        self.timers = {k: t for k, t in self.timers.items() if k[0] != pid}

    def _idle(self, key: tuple[int, int]) -> None:
        """Swap-remove an emptied channel from the busy list."""
        i = self._busy_at.pop(key)
        last = self._busy.pop()
        if last != key:
            self._busy[i] = last
            self._busy_at[last] = i

    def _fire_timer(self, keys: list[tuple[int, Hashable]]) -> bool:
        pid, timer = keys[self.rng.randrange(len(keys))]
        del self.timers[pid, timer]
        self.feed(pid, TimerExpired(timer))
        return True

    def run(self, max_steps: int = 10_000_000) -> int:
        """Step until nothing is pending; the number of steps."""
        for n in range(max_steps):
            if not self.step():
                return n
        raise RuntimeError(f"the network did not go quiet within {max_steps} steps")

    def busy(self) -> bool:
        """True while a message or a probe is pending (timers aside)."""
        return bool(self._busy or self.probes)

    def pending(self) -> bool:
        return bool(self.probes or self.timers or self._busy)


def grid_measure(grid: Grid, rng: random.Random, jitter: float = 0.05) -> Measure:
    """Probe results from a grid's P-LogP figures with seeded relative noise: RTTs
    times ``1 + jitter U``, bandwidths times ``1 - jitter U``."""
    base: dict[tuple[int, int], tuple[float, float]] = {}

    def measure(p: int, q: int) -> tuple[float, float]:
        key = (grid.cluster_of[p], grid.cluster_of[q])
        if key not in base:
            there, back = grid.plogp(p, q), grid.plogp(q, p)
            base[key] = (there.r(1) + back.r(1), PROBE_BYTES / back.r(PROBE_BYTES))
        rtt, bw = base[key]
        return rtt * (1 + jitter * rng.random()), bw * (1 - jitter * rng.random())

    return measure


@dataclass(frozen=True)
class StableTrees:
    """Per root, each process's parent in the latency and the bandwidth tree."""

    latency: dict[int, dict[int, int]]
    bandwidth: dict[int, dict[int, int]]
    probes: int
    messages: int


def founders(n: int, *, seed: int, extra_probes: int = 10, **kwargs) -> dict[int, Process]:
    """``n`` founder processes with one vnode each (vnode i on process i)."""
    mapping = {p: (p,) for p in range(n)}
    return {
        p: Process(
            p,
            rng=random.Random(f"{seed}:{p}"),
            extra_probes=extra_probes,
            founder_vnodes=mapping,
            **kwargs,
        )
        for p in range(n)
    }


def stable_trees(
    grid: Grid,
    *,
    seed: int = 0,
    extra_probes: int = 10,
    jitter: float = 0.05,
    roots: frozenset[int] | None = None,
    remote_probes: bool = False,
) -> StableTrees:
    """Run the core on ``grid`` (one process and one vnode per rank) until the probing
    stops, and return the trees it built (see the module doc); with ``roots``, the
    processes keep (and the result holds) only those roots' trees. ``roots`` and
    ``remote_probes`` are :class:`~gridcoll.phoenix.protocol.Process`'s options.
    Raises Unfeasible when the probing is not quiet within
    :data:`QUIET_STEPS_PER_PROCESS` steps per process."""
    procs = founders(
        grid.nranks,
        seed=seed,
        extra_probes=extra_probes,
        roots=roots,
        remote_probes=remote_probes,
    )
    net = Network(
        procs, grid_measure(grid, random.Random(f"{seed}:measure"), jitter), random.Random(seed)
    )
    for p in procs:
        net.feed(p, Start())
    budget = QUIET_STEPS_PER_PROCESS * grid.nranks
    try:
        net.run(budget)
    except RuntimeError:
        raise Unfeasible(
            f"the probing of {grid.nranks} processes did not settle within {budget} steps"
        ) from None
    trees = {}
    for kind in ("latency", "bandwidth"):
        trees[kind] = {
            r: {
                p: procs[p].parent(kind, r)
                for p in procs
                if p != r and procs[p].parent(kind, r) is not None
            }
            for r in (procs if roots is None else sorted(roots))
        }
    return StableTrees(
        trees["latency"],
        trees["bandwidth"],
        sum(p.probes_made for p in procs.values()),
        net.messages,
    )
