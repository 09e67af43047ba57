"""Phoenix (seed 004): the four experiments (sec. V, figs. 6-9) measured on real processes.

:mod:`gridcoll.experiments.phoenix_simulated` runs figs. 6-9 in simulation; this module
runs the same experiments with ``N`` operating-system processes, each a spawned Python
process with its own :class:`gridcoll.group.Group` (pyzmq, the unchanged protocol
core) on an emulated grid (:mod:`gridcoll.runtime.emulation`), and returns the same
JSON fields, with measured extras.

Theory of operation
-------------------
*Processes.* The caller's process is an *orchestrator*, not a member. It spawns one
worker per rank of the grid (``multiprocessing``, spawn) and talks to each over its
own duplex pipe: commands go down, replies and every delivery come up, each delivery
stamped with ``time.monotonic()`` at the receiver. ``time.monotonic`` is one clock for
the whole machine, so a root's send time and a receiver's delivery time compare. A
pipe per worker (not one shared queue) means a worker killed with SIGKILL breaks only
its own pipe (an EOF the orchestrator notes), never a lock others need. The
orchestrator blocks in :func:`multiprocessing.connection.wait` with a timeout: it
never spins. Every worker builds ``Emulator(grid, LinkState(path, grid))`` on one
shared link-state file, so the grid means what it means under MPI and the simulator.

*Forming the group.* Rank 0 founds the computation with ``N`` vnodes
(:meth:`Group.start`). The lowest rank of each other cluster joins through rank 0,
then every other rank joins through the first member of its own cluster (a join
only crosses the WAN once per cluster). A join hands the joiner half of its
contact's vnodes, which leaves some with none and some with several, so the
orchestrator then asks the owners to migrate (:meth:`Group.migrate`) until rank
``i`` owns exactly vnode ``i`` (vnode 0, the root, stays on rank 0). Start-up cost
is the time from ``Process.start`` to the worker's first message (Python, imports);
join cost is :meth:`Group.join`'s wall time in the worker.

*Settling.* Stable-state experiments (figs. 6-8) start once no process is probing
(the core's :meth:`~gridcoll.phoenix.protocol.Process.probing`, asked on the group's
I/O thread) and the probe counts did not move between two rounds of asking, or after
``settle_timeout_s`` (then ``settled`` is false and the figures are of trees still
being built).

*Experiments.* ``latency``: repeated 1-byte broadcasts from vnode 0, each receiver's
arrival minus the root's send time; the last arrival's median over the repeats.
``bandwidth``: each size broadcast from vnode 0 (the root's model picks the tree), the
time to the last delivery, ``nbytes * P / time``. ``reduction``: every process adds
``v + 1`` for its vnode ``v`` towards vnode 0, started together at an agreed instant;
the time to the result at the root, checked exact. ``transition``: broadcasts back to
back from vnode 0 once the trees have settled (each starts when the previous reached
every vnode, or after ``op_timeout_s``); at ``leave_s`` the odd ranks migrate their
vnode to their even neighbour and leave (``crash``: are SIGKILLed instead), at
``rejoin_s`` new processes on the same ranks join through that neighbour, which hands
each one vnode back. A checker counts every vnode's deliveries of every broadcast:
``delivered``, ``lost`` (vnodes never given a broadcast, after a final drain),
``duplicated``.

*The churn checker* (sec. III: a broadcast reaches every vnode once; the goal is zero
lost and zero duplicated deliveries over 20 runs with random joins and leaves):
:func:`churn` forms a new group per run and
broadcasts back to back from vnode 0 while :func:`churn_steps` (seeded per run) makes
founders leave, giving their vnodes to another founder, and brings left ranks back as
new processes through a founder; the same checker counts every vnode's deliveries. The
churn starts at once, while the trees are still being built.

*Baselines.* MPICH-like, MagPIe-like and List are not re-implemented on processes:
their figures are the simulator's on the same grid (``baseline: "simulated"``), next
to ours simulated (``ours_simulated``) and ours measured (``ours``).

*Crashes.* With ``crash`` the leavers are SIGKILLed. Each survivor's heartbeats
detect them after ``heartbeat_timeout_s`` (``CRASH_HEARTBEAT``: 3 s), and the core
hands their vnodes to heirs and sends again what was sent to them (the protocol's
"Failures"), so broadcasts complete again: ``in_flight_complete_s`` is the time from
the kill until the broadcast under way then reached every vnode (the dead processes'
at their heirs), ``complete_again_s`` until the first broadcast started after it
ended; both are to compare with ``heartbeat_timeout_s + 1``. A vnode taken over
starts with a fresh history, so a broadcast the dead process had delivered to it and
that was sent again counts as ``duplicated``; ``killed_detected_by_root`` says how
many of the killed processes the root vnode's owner saw die.
"""

from __future__ import annotations

import contextlib
import multiprocessing as mp
import random
import statistics
import threading
import time
from collections.abc import Callable, Hashable, Sequence
from dataclasses import asdict, dataclass, field
from multiprocessing.connection import Connection, wait
from pathlib import Path
from typing import Any

from gridcoll.errors import MeasurementError, ParameterError
from gridcoll.experiments import phoenix_simulated as sim
from gridcoll.network.grid import Grid

__all__ = [
    "DEFAULT_PROCESSES",
    "MEASURE_EXPERIMENTS",
    "bandwidth",
    "churn",
    "churn_steps",
    "default_grid",
    "latency",
    "reduction",
    "transition",
]

DEFAULT_PROCESSES = {
    "latency": 32,
    "bandwidth": 32,
    "reduction": 32,
    "transition": 32,
    "churn": 8,
}
"""32 processes on a 2-core machine; the churn checker's 20 runs, 8 each
(and up to 6 newcomers)."""

BANDWIDTH_SIZES = (64 * 1024, 256 * 1024, 1024 * 1024)
"""Fig. 7's range cut to fit a 5-minute run (the paper goes to 64 MiB): das2's
wide-area links carry 0.4-3.5 MB/s, so one 4 MiB broadcast takes seconds."""

TRANSITION = (30.0, 45.0, 60.0, 256 * 1024)
"""Fig. 9 time-scaled by 1/2 (leave at 30 s, rejoin at 45 s, end at 60 s, counted from
when the trees have settled) and its 4 MB scaled down to 256 KiB, so that a few
broadcasts fit between two changes on das2's slow wide-area links."""

_IDLE_S = 900.0
"""A worker with no command for this long exits (its orchestrator is gone)."""

Progress = Callable[[int, int], None]


def default_grid(experiment: str, nprocs: int | None = None) -> str:
    """``das2-spread:N,3`` for latency and reduction, ``das2-spread:N,4`` otherwise
    (``N`` defaults to the experiment's :data:`DEFAULT_PROCESSES`)."""
    nprocs = DEFAULT_PROCESSES[experiment] if nprocs is None else nprocs
    return f"das2-spread:{nprocs},{3 if experiment in ('latency', 'reduction') else 4}"


def _noop(done: int, total: int) -> None:
    pass


def _stats(values: Sequence[float]) -> dict[str, float | None]:
    if not values:
        return {"median": None, "max": None}
    return {"median": statistics.median(values), "max": max(values)}


# -- the worker (one spawned process per rank) ---------------------------------------------
class _Member:
    """A worker's state: its group, and a lock for the pipe two threads write to."""

    def __init__(self, rank: int, conn: Connection, grid: Grid, links: str) -> None:
        from gridcoll.group import Group  # imported before "up": start-up cost
        from gridcoll.runtime.emulation import Emulator, LinkState

        self.group_type = Group
        self.rank, self.conn = rank, conn
        self.lock = threading.Lock()
        self.emulator = Emulator(grid, LinkState(links, grid))
        self.group: Any = None

    def put(self, *msg: object) -> None:
        with self.lock, contextlib.suppress(OSError):
            self.conn.send(msg)

    def on_deliver(self, op_id: Hashable, vnodes: frozenset[int], data: object) -> None:
        size = len(data) if isinstance(data, bytes) else -1
        self.put("deliver", self.rank, op_id, tuple(sorted(vnodes)), time.monotonic(), size)

    def options(self, opts: dict) -> dict:
        return {"rank": self.rank, "emulator": self.emulator, "on_deliver": self.on_deliver, **opts}

    def handle(self, cmd: tuple) -> bool:
        """Run one command; False once told to stop."""
        name, args = cmd[0], cmd[1:]
        g = self.group
        if name == "start":
            t = time.monotonic()
            self.group = self.group_type.start(args[0], **self.options(args[1]))
            self.put("member", self.rank, self.group.pid, self.group.address, time.monotonic() - t)
        elif name == "join":
            t = time.monotonic()
            self.group = self.group_type.join(args[0], args[1], **self.options(args[2]))
            self.put("member", self.rank, self.group.pid, self.group.address, time.monotonic() - t)
        elif name == "secret":
            self.put("secret", self.rank, g.secret)
        elif name == "state":
            vnodes, members = tuple(sorted(g.vnodes)), len(g.members)
            self.put("state", self.rank, vnodes, g.probing(), g.stats.probes, members)
        elif name == "migrate":
            g.migrate(frozenset(args[0]), args[1])
            self.put("migrated", self.rank)
        elif name == "bcast":
            t = time.monotonic()
            op = g.bcast(bytes(args[0]), 0, kind=args[1])
            self.put("sent", self.rank, op, t)
        elif name == "reduce":
            self._reduce(*args)
        elif name == "leave":
            if args[0] is not None and g.vnodes:
                g.migrate(g.vnodes, args[0])
            g.leave(timeout=60.0)
            self.put("left", self.rank, time.monotonic())
        elif name == "parents":  # in process args[0]'s trees
            self.put(
                "parents",
                self.rank,
                *(g.parent(kind, args[0]) for kind in ("latency", "bandwidth")),
            )
        elif name == "failures":
            self.put("failures", self.rank, tuple(f.pid for f in g.failures))
        elif name == "stop":
            error = None if g is None else g.error
            self.put("stopped", self.rank, None if g is None else asdict(g.stats), error)
            return False
        else:
            raise MeasurementError(f"unknown command {name!r}")
        return True

    def _reduce(self, tag: str, nvnodes: int, start_at: float, timeout: float) -> None:
        threading.Event().wait(max(0.0, start_at - time.monotonic()))
        g = self.group
        op = g.reduce({v: v + 1 for v in range(nvnodes)}, "sum", 0, tag=tag)
        if 0 in g.vnodes:
            res = g.result(op, timeout=timeout)
            self.put(
                "reduced", self.rank, tag, res.value, tuple(sorted(res.missing)), time.monotonic()
            )


def _worker(rank: int, conn: Connection, grid: Grid, links: str) -> None:
    """A spawned process: report "up", then obey commands until "stop"."""
    member = _Member(rank, conn, grid, links)
    member.put("up", rank, time.monotonic())
    try:
        while conn.poll(_IDLE_S):
            cmd = conn.recv()
            try:
                if not member.handle(cmd):
                    break
            except Exception as err:  # reported, not fatal: the orchestrator decides
                member.put("error", rank, f"{cmd[0]}: {type(err).__name__}: {err}")
    except (EOFError, OSError):
        pass  # the orchestrator is gone
    finally:
        if member.group is not None:
            member.group.close()


# -- the orchestrator ------------------------------------------------------------------------
@dataclass
class _Proc:
    rank: int
    proc: Any
    conn: Connection
    spawned: float
    up: float | None = None
    pid: int | None = None
    address: str | None = None
    alive: bool = True


@dataclass
class _Op:
    """One broadcast as the checker sees it (the attributes recovery_times reads)."""

    op_id: Hashable
    nbytes: int
    sent: float
    start_s: float
    end_s: float | None = None
    time_s: float | None = None
    counts: dict[int, int] = field(default_factory=dict)
    arrivals: dict[int, float] = field(default_factory=dict)
    bad_size: int = 0


class _Run:
    """The orchestrator of one experiment: spawns, commands and watches the workers."""

    def __init__(self, grid: Grid, links: Path, timeout_s: float, group_options: dict) -> None:
        self.grid, self.links, self.timeout_s = grid, str(links), timeout_s
        self.group_options = group_options
        self.ctx = mp.get_context("spawn")
        self.procs: dict[int, _Proc] = {}  # rank -> the current worker there
        self.retired: list[_Proc] = []  # left or killed: left ones still forward
        self.spares: list[_Proc] = []  # started, not yet given a rank's place
        self.closed = False
        self.inbox: list[tuple] = []
        self.ops: dict[Hashable, _Op] = {}
        self.early: dict[Hashable, list[tuple]] = {}
        self.join_s: list[float] = []
        self.secret = b""

    # messages
    def spawn(self, rank: int, spare: bool = False) -> _Proc:
        ours, theirs = self.ctx.Pipe()
        proc = self.ctx.Process(
            target=_worker, args=(rank, theirs, self.grid, self.links), daemon=True
        )
        spawned = time.monotonic()
        proc.start()
        theirs.close()
        made = _Proc(rank, proc, ours, spawned)
        if spare:
            self.spares.append(made)
        else:
            self.procs[rank] = made
        return made

    def promote(self, spare: _Proc) -> None:
        """A spare takes its rank's place; the worker it replaces is retired."""
        self.spares.remove(spare)
        self.retired.append(self.procs[spare.rank])
        self.procs[spare.rank] = spare

    def send(self, rank: int, *cmd: object) -> None:
        p = self.procs[rank]
        if not p.alive:
            raise MeasurementError(f"rank {rank}'s worker is gone")
        p.conn.send(cmd)

    def _live(self) -> list[_Proc]:
        return [p for p in (*self.procs.values(), *self.retired, *self.spares) if p.alive]

    def pump(self, timeout: float) -> None:
        """Take what the workers sent within ``timeout`` (blocking): deliveries go to
        the checker, the rest to the inbox."""
        live = {p.conn: p for p in self._live()}
        for conn in wait(list(live), max(0.0, timeout)):
            p = live[conn]  # type: ignore[index]
            while p.alive and p.conn.poll():
                try:
                    msg = p.conn.recv()
                except (EOFError, OSError):
                    p.alive = False
                    break
                self._dispatch(p, msg)

    def _dispatch(self, p: _Proc, msg: tuple) -> None:
        if msg[0] == "deliver":
            op = self.ops.get(msg[2])
            if op is None:  # the root's own delivery can come before its "sent"
                self.early.setdefault(msg[2], []).append(msg)
            else:
                self._count(op, msg)
        elif msg[0] == "up":
            p.up = msg[2]
        elif msg[0] == "error":
            raise MeasurementError(f"rank {msg[1]}: {msg[2]}")
        else:
            self.inbox.append(msg)

    @staticmethod
    def _count(op: _Op, msg: tuple) -> None:
        _, _rank, _op_id, vnodes, t, size = msg
        for v in vnodes:
            op.counts[v] = op.counts.get(v, 0) + 1
            op.arrivals[v] = t - op.sent
        op.bad_size += size != op.nbytes

    def expect(self, kind: str, n: int, timeout: float | None = None) -> list[tuple]:
        """Wait for ``n`` messages of ``kind``; raise :class:`MeasurementError` on timeout."""
        deadline = time.monotonic() + (self.timeout_s if timeout is None else timeout)
        while True:
            got = [m for m in self.inbox if m[0] == kind]
            if len(got) >= n:
                taken = got[:n]
                for m in taken:
                    self.inbox.remove(m)
                return taken
            left = deadline - time.monotonic()
            if left <= 0:
                raise MeasurementError(f"timed out waiting for {n} {kind!r} (got {len(got)})")
            self.pump(min(left, 1.0))

    def ask(self, kind: str, ranks: Sequence[int], *cmd: object) -> dict[int, tuple]:
        for r in ranks:
            self.send(r, *cmd)
        return {m[1]: m for m in self.expect(kind, len(ranks))}

    def close(self) -> list[tuple]:
        """Stop every live worker; kill those that do not exit. Returns their reports."""
        if self.closed:
            return []
        stopped: list[tuple] = []
        live = self._live()
        for p in live:
            with contextlib.suppress(OSError):
                p.conn.send(("stop",))
        with contextlib.suppress(MeasurementError):
            stopped = self.expect("stopped", len(live), timeout=20.0)
        self.closed = True
        for p in (*self.procs.values(), *self.retired, *self.spares):
            p.proc.join(5.0)
            if p.proc.is_alive():
                p.proc.kill()
                p.proc.join(5.0)
            p.alive = False
            p.conn.close()
        return stopped

    # forming the group
    def up_costs(self, procs: Sequence[_Proc], timeout: float) -> list[float]:
        deadline = time.monotonic() + timeout
        while any(p.up is None for p in procs):
            if time.monotonic() > deadline:
                raise MeasurementError("workers did not start in time")
            if any(not p.alive and p.up is None for p in procs):
                raise MeasurementError("a worker exited while starting (see its stderr)")
            self.pump(1.0)
        return [p.up - p.spawned for p in procs]  # type: ignore[operator]

    def found(self) -> None:
        self.send(0, "start", self.grid.nranks, self.group_options)
        self._members(self.expect("member", 1))
        self.secret = self.ask("secret", [0], "secret")[0][2]

    def join(self, ranks: Sequence[int], contact: Callable[[int], int]) -> None:
        for r in ranks:
            self.send(r, "join", self.procs[contact(r)].address, self.secret, self.group_options)
        self._members(self.expect("member", len(ranks)))

    def _members(self, msgs: list[tuple]) -> None:
        for _, rank, pid, address, took in msgs:
            self.procs[rank].pid, self.procs[rank].address = pid, address
            self.join_s.append(took)

    def form(self) -> None:
        """Found at rank 0, join the others by cluster, then map vnode i to rank i."""
        cluster_of = self.grid.cluster_of
        first: dict[int, int] = {}
        for r in range(self.grid.nranks):
            first.setdefault(cluster_of[r], r)
        self.found()
        leaders = [r for c, r in first.items() if c != cluster_of[0]]
        self.join(leaders, lambda r: 0)
        rest = [r for r in range(1, self.grid.nranks) if r not in leaders]
        self.join(rest, lambda r: first[cluster_of[r]])
        self.place()

    def states(self) -> dict[int, tuple]:
        return self.ask("state", sorted(self.procs), "state")

    def place(self, timeout: float = 120.0) -> None:
        """Migrate vnodes until rank i owns exactly vnode i."""
        n, deadline = self.grid.nranks, time.monotonic() + timeout
        while time.monotonic() < deadline:
            states = self.states()
            known = all(m[5] == n for m in states.values())
            owned = {r: set(m[2]) for r, m in states.items()}
            if all(owned[r] == {r} for r in range(n)):
                return
            if not known or sum(len(v) for v in owned.values()) != n:  # still spreading
                self.pump(0.2)
                continue
            moves: dict[tuple[int, int], list[int]] = {}
            for r, vs in owned.items():
                for v in vs - {r}:
                    moves.setdefault((r, v), []).append(v)
            for (r, dst), vs in moves.items():
                self.send(r, "migrate", vs, self.procs[dst].pid)
            self.expect("migrated", len(moves))
        raise MeasurementError(f"vnodes not placed one per process within {timeout} s")

    def settle(self, timeout: float) -> tuple[float, bool]:
        """Wait until no process probes and the probe counts stand still."""
        started, before = time.monotonic(), None
        while time.monotonic() - started < timeout:
            states = self.states()
            probes = tuple(states[r][4] for r in sorted(states))
            if not any(m[3] for m in states.values()) and probes == before:
                return time.monotonic() - started, True
            before = probes
            self.pump(0.5)
        return time.monotonic() - started, False

    def wan_edges(self) -> dict[str, list[str]]:
        """The wide-area edges of root 0's latency and bandwidth trees, each as
        ``"parent cluster->child cluster"`` (each process asked for its parent;
        ``clusters - 1`` edges is the fewest that span)."""
        pid_rank = {p.pid: r for r, p in self.procs.items()}
        got = self.ask("parents", sorted(self.procs), "parents", self.procs[0].pid)
        cluster = self.grid.cluster_of
        out = {}
        for i, kind in enumerate(("latency", "bandwidth")):
            parents = ((r, pid_rank.get(m[2 + i])) for r, m in got.items())
            out[kind] = sorted(
                f"{cluster[q]}->{cluster[r]}"
                for r, q in parents
                if q is not None and cluster[q] != cluster[r]
            )
        return out

    def nprobes(self) -> int:
        return sum(m[4] for m in self.states().values())

    # broadcasts
    def bcast(self, nbytes: int, t0: float, kind: str | None = None) -> _Op:
        self.send(0, "bcast", nbytes, kind)
        _, _, op_id, sent = self.expect("sent", 1)[0]
        op = _Op(op_id, nbytes, sent, sent - t0)
        self.ops[op_id] = op
        for msg in self.early.pop(op_id, []):
            self._count(op, msg)
        return op

    def finish(self, op: _Op, deadline: float) -> bool:
        """Wait until ``op`` reached every vnode (True) or ``deadline`` (False)."""
        n = self.grid.nranks
        while len(op.counts) < n:
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            self.pump(min(left, 1.0))
        if op.end_s is None:
            op.time_s = max(op.arrivals.values())
            op.end_s = op.start_s + op.time_s
        return True

    def bcast_done(self, nbytes: int, kind: str | None = None) -> _Op:
        op = self.bcast(nbytes, time.monotonic())
        if not self.finish(op, time.monotonic() + self.timeout_s):
            raise MeasurementError(
                f"a {nbytes}-byte broadcast reached {len(op.counts)} of "
                f"{self.grid.nranks} vnodes in {self.timeout_s} s"
            )
        if any(c != 1 for c in op.counts.values()) or op.bad_size:
            raise MeasurementError(f"a {nbytes}-byte broadcast was delivered wrongly: {op.counts}")
        return op


def _costs(run: _Run, startup: list[float], formed_s: float, settle: tuple) -> dict:
    return {
        "mode": "measure",
        "processes": run.grid.nranks,
        "baseline": "simulated (gridcoll.simulate, same grid); ours also measured",
        "startup_s": _stats(startup),
        "join_s": _stats(run.join_s),
        "form_s": formed_s,
        "settle_s": settle[0],
        "settled": settle[1],
    }


def _session(
    grid: Grid,
    body: Callable[[_Run], dict],
    *,
    timeout_s: float,
    settle_timeout_s: float | None,
    group_options: dict | None,
    progress: Progress,
) -> dict:
    """Spawn, form, (settle,) run ``body``, stop: the common frame of every experiment."""
    from gridcoll.runtime.emulation import create_link_state

    links = create_link_state(grid)
    run = _Run(grid, links, timeout_s, dict(group_options or {}))
    try:
        started = time.monotonic()
        progress(0, 4)
        workers = [run.spawn(r) for r in range(grid.nranks)]
        startup = run.up_costs(workers, timeout_s)
        progress(1, 4)
        run.form()
        formed = time.monotonic() - started
        progress(2, 4)
        settle = (0.0, False) if settle_timeout_s is None else run.settle(settle_timeout_s)
        progress(3, 4)
        result = body(run)
        result.update(_costs(run, startup, formed, settle))
        result["startup_s"] = _stats(startup + result.pop("rejoin_startup", []))
        progress(4, 4)
        reports = run.close()
        result["worker_errors"] = [r[3] for r in reports if r[3]]
        return result
    finally:
        run.close()
        links.unlink(missing_ok=True)


def _with_measured(simulated: dict, measured: Any) -> dict:
    """A simulated series with ``ours`` renamed ``ours_simulated`` and the measured
    ``ours`` last."""
    out = {k: v for k, v in simulated.items() if k != "ours"}
    return {**out, "ours_simulated": simulated["ours"], "ours": measured}


# -- the experiments ---------------------------------------------------------------------------
def latency(
    grid: Grid,
    *,
    repeats: int = 5,
    seed: int = 0,
    timeout_s: float = 60.0,
    settle_timeout_s: float | None = 180.0,
    group_options: dict | None = None,
    progress: Progress = _noop,
) -> dict:
    """Fig. 6 measured: ``repeats`` 1-byte broadcasts from vnode 0 on real processes.

    ``last_arrival_ms["ours"]`` is the median over the repeats of the last arrival;
    ``arrivals_ms["ours"]`` the repeat with the median last arrival. The baselines and
    ``ours_simulated`` come from :func:`gridcoll.experiments.phoenix_simulated.latency`;
    ``wan_edges`` lists the wide-area edges of root 0's trees (:meth:`_Run.wan_edges`).
    """
    base = sim.latency(grid, seed=seed)

    def body(run: _Run) -> dict:
        ops = [run.bcast_done(1) for _ in range(repeats)]
        lasts = [op.time_s for op in ops]
        med = sorted(ops, key=lambda op: op.time_s)[len(ops) // 2]
        arrivals = sorted(t for v, t in med.arrivals.items() if v != 0)
        return {
            "lasts": lasts,
            "arrivals": arrivals,
            "nprobes": run.nprobes(),
            "wan_edges": run.wan_edges(),
        }

    got = _session(
        grid,
        body,
        timeout_s=timeout_s,
        settle_timeout_s=settle_timeout_s,
        group_options=group_options,
        progress=progress,
    )
    last = _with_measured(base["last_arrival_ms"], statistics.median(got.pop("lasts")) * 1e3)
    arrivals = _with_measured(base["arrivals_ms"], [t * 1e3 for t in got.pop("arrivals")])
    return {
        "experiment": "latency",
        "grid": grid.name,
        "nprocs": grid.nranks,
        "repeats": repeats,
        "last_arrival_ms": last,
        "arrivals_ms": arrivals,
        "ratio_to_magpie_like": last["ours"] / last["magpie_like"],
        "ratio_to_mpich_like": last["ours"] / last["mpich_like"],
        "ratio_to_simulated": last["ours"] / last["ours_simulated"],
        "simulated_settle_s": base["settle_s"],
        **got,
    }


def bandwidth(
    grid: Grid,
    *,
    sizes: Sequence[int] = BANDWIDTH_SIZES,
    repeats: int = 2,
    seed: int = 0,
    timeout_s: float = 120.0,
    settle_timeout_s: float | None = 180.0,
    group_options: dict | None = None,
    progress: Progress = _noop,
) -> dict:
    """Fig. 7 measured: for each size, the median over ``repeats`` of the time from
    the root's send to the last delivery; bandwidth ``nbytes * P / time``;
    ``ratio_to_list`` at the largest size against List simulated; ``wan_edges`` as
    :func:`latency`'s."""
    base = sim.bandwidth(grid, sizes=sizes, seed=seed)
    P = grid.nranks

    def body(run: _Run) -> dict:
        times = {
            m: statistics.median([run.bcast_done(m).time_s for _ in range(repeats)]) for m in sizes
        }
        return {"times": times, "nprobes": run.nprobes(), "wan_edges": run.wan_edges()}

    got = _session(
        grid,
        body,
        timeout_s=timeout_s,
        settle_timeout_s=settle_timeout_s,
        group_options=group_options,
        progress=progress,
    )
    measured = got.pop("times")
    rows = []
    for row in base["rows"]:
        times = _with_measured(row["time_s"], measured[row["nbytes"]])
        bw = {k: row["nbytes"] * P / t / 1e6 for k, t in times.items()}
        rows.append({"nbytes": row["nbytes"], "time_s": times, "bandwidth_MBps": bw})
    ratios = {
        str(r["nbytes"]): r["bandwidth_MBps"]["ours"] / r["bandwidth_MBps"]["list"] for r in rows
    }
    return {
        "experiment": "bandwidth",
        "grid": grid.name,
        "nprocs": P,
        "repeats": repeats,
        "rows": rows,
        "ratio_to_list": ratios[str(rows[-1]["nbytes"])],
        "ratio_to_list_by_size": ratios,
        "ratio_to_simulated_by_size": {
            str(r["nbytes"]): r["time_s"]["ours"] / r["time_s"]["ours_simulated"] for r in rows
        },
        "simulated_settle_s": base["settle_s"],
        **got,
    }


def reduction(
    grid: Grid,
    *,
    repeats: int = 3,
    seed: int = 0,
    timeout_s: float = 60.0,
    settle_timeout_s: float | None = 180.0,
    group_options: dict | None = None,
    progress: Progress = _noop,
) -> dict:
    """Fig. 8 measured: every process adds ``v + 1`` for its vnode ``v`` (one 64-bit
    integer, 8 bytes) towards vnode 0, all started at one agreed instant; the median
    over ``repeats`` of the time to the result at the root, which must be exact and
    miss no vnode."""
    base = sim.reduction(grid, sizes=(8,), seed=seed)
    n = grid.nranks
    expected = n * (n + 1) // 2

    def body(run: _Run) -> dict:
        times = []
        for i in range(repeats):
            start_at = time.monotonic() + 0.5
            for r in range(n):
                run.send(r, "reduce", f"r{i}", n, start_at, timeout_s)
            _, _, _, value, missing, done = run.expect("reduced", 1)[0]
            if value != expected or missing:
                raise MeasurementError(
                    f"reduction {i}: {value!r} (want {expected}), missing {missing}"
                )
            times.append(done - start_at)
        return {"times": times, "sum": expected, "nprobes": run.nprobes()}

    got = _session(
        grid,
        body,
        timeout_s=timeout_s,
        settle_timeout_s=settle_timeout_s,
        group_options=group_options,
        progress=progress,
    )
    row = base["rows"][0]
    times = _with_measured(row["time_s"], statistics.median(got["times"]))
    return {
        "experiment": "reduction",
        "grid": grid.name,
        "nprocs": n,
        "repeats": repeats,
        "rows": [{"nbytes": row["nbytes"], "time_s": times}],
        "ratio_to_magpie_like": times["ours"] / times["magpie_like"],
        "ratio_by_size": {str(row["nbytes"]): times["ours"] / times["magpie_like"]},
        "ratio_to_simulated": times["ours"] / times["ours_simulated"],
        "simulated_settle_s": base["settle_s"],
        **got,
    }


@dataclass
class _Schedule:
    """Leaves, crashes and joins applied as time passes: ``steps`` of ``(at_s, action,
    rank, other)``, sorted by time. ``leave``: rank's process migrates its vnodes to
    rank ``other``'s process and leaves; ``crash``: it is SIGKILLed; ``join``: the spare
    spawned for rank joins through rank ``other``'s process."""

    run: _Run
    t0: float
    steps: list[tuple[float, str, int, int]]
    applied: int = 0
    left: int = 0
    joined: int = 0
    killed: list[int] = field(default_factory=list)

    def next_at(self) -> float:
        return self.steps[self.applied][0] if self.applied < len(self.steps) else float("inf")

    def apply(self) -> None:
        now = time.monotonic() - self.t0
        while self.applied < len(self.steps) and self.steps[self.applied][0] <= now:
            _, action, rank, other = self.steps[self.applied]
            self.applied += 1
            getattr(self, f"_{action}")(rank, other)

    def _leave(self, rank: int, other: int) -> None:
        self.killed.append(self.run.procs[rank].pid)  # type: ignore[arg-type]
        self.run.send(rank, "leave", self.run.procs[other].pid)
        self.left += 1

    def _crash(self, rank: int, other: int) -> None:
        p = self.run.procs[rank]
        self.killed.append(p.pid)  # type: ignore[arg-type]
        p.proc.kill()  # SIGKILL: no leave, no goodbye
        p.alive = False

    def _join(self, rank: int, other: int) -> None:
        spare = next(s for s in self.run.spares if s.rank == rank)
        contact = self.run.procs[other].address
        self.run.promote(spare)
        self.run.send(rank, "join", contact, self.run.secret, self.run.group_options)
        self.joined += 1


def _back_to_back(
    run: _Run, changes: _Schedule, nbytes: int, until_s: float, op_timeout_s: float
) -> list[_Op]:
    """Broadcasts from vnode 0 back to back while ``changes`` are applied, each given up
    after ``op_timeout_s``; then a drain, so that what is still on its way counts as
    late, not lost, and the leavers' and joiners' reports."""
    ops: list[_Op] = []
    while time.monotonic() - changes.t0 < until_s:
        changes.apply()
        op = run.bcast(nbytes, changes.t0)
        ops.append(op)
        deadline = time.monotonic() + op_timeout_s
        while not run.finish(op, min(deadline, changes.t0 + changes.next_at())):
            if time.monotonic() >= deadline:
                break
            changes.apply()
    changes.apply()
    drain = time.monotonic() + op_timeout_s
    for op in ops:
        run.finish(op, drain)
    run.expect("left", changes.left)
    run._members(run.expect("member", changes.joined))
    return ops


CRASH_HEARTBEAT = {
    "heartbeat_s": 1.0,
    "heartbeat_timeout_s": sim.CRASH_DETECT_S,
    "ack_s": sim.CRASH_ACK_S,
}
"""The group's heartbeat for ``transition(crash=True)`` (unless ``group_options`` says
otherwise): a beat a second, dead after 3 s of silence (32 processes on 2 cores may
pause a live one for a second, not three), and counts to the members sending us data
every 0.25 s (so the broadcasts sent again after a death are those of its last 0.4 s)."""


def _checked(ops: Sequence[_Op], nvnodes: int) -> dict[str, int]:
    """The checker's counts over ``ops``: every vnode's deliveries of every broadcast."""
    return {
        "delivered": sum(sum(op.counts.values()) for op in ops),
        "lost": sum(nvnodes - len(op.counts) for op in ops),
        "duplicated": sum(c - 1 for op in ops for c in op.counts.values() if c > 1),
        "wrong_size": sum(op.bad_size for op in ops),
        "incomplete": sum(1 for op in ops if op.end_s is None),
    }


def transition(
    grid: Grid,
    *,
    leave_s: float = TRANSITION[0],
    rejoin_s: float = TRANSITION[1],
    until_s: float = TRANSITION[2],
    nbytes: int = TRANSITION[3],
    crash: bool = False,
    op_timeout_s: float = 10.0,
    timeout_s: float = 60.0,
    settle_timeout_s: float | None = 120.0,
    seed: int = 0,
    group_options: dict | None = None,
    progress: Progress = _noop,
) -> dict:
    """Fig. 9 measured, time-scaled: broadcasts back to back from vnode 0 while the odd
    ranks leave at ``leave_s`` (``crash``: are SIGKILLed) and come back as new
    processes at ``rejoin_s`` (module doc). Times count from when the trees have
    settled (``settle_timeout_s``; None: from when the group is formed, as the
    simulation does, while the trees are still being built). A broadcast not complete
    within ``op_timeout_s`` is given up (``incomplete``) and the next one starts. Returns the
    simulation's fields (``broadcasts``, ``stable_s``, ``recovery_s``, ``delivered``,
    ``lost``, ``duplicated``, ``incomplete``) and the measured extras."""
    if not 0 < leave_s < rejoin_s < until_s:
        raise ParameterError(
            f"need 0 < leave < rejoin < until, got {leave_s!r}, {rejoin_s!r}, {until_s!r}"
        )
    n = grid.nranks
    leavers = [r for r in range(1, n) if r % 2]

    options = {**CRASH_HEARTBEAT, **(group_options or {})} if crash else group_options
    steps = [(leave_s, "crash" if crash else "leave", r, r - 1) for r in leavers]
    steps += [(rejoin_s, "join", r, r - 1) for r in leavers]

    def body(run: _Run) -> dict:
        fresh = [run.spawn(r, spare=True) for r in leavers]  # the rejoiners, idle till then
        run.up_costs(fresh, timeout_s)
        changes = _Schedule(run, time.monotonic(), steps)
        ops = _back_to_back(run, changes, nbytes, until_s, op_timeout_s)
        detected = run.ask("failures", [0], "failures")[0][2]
        return {
            "ops": ops,
            "killed": changes.killed,
            "detected": detected,
            "rejoin_startup": [p.up - p.spawned for p in fresh if p.up is not None],
        }

    got = _session(
        grid,
        body,
        timeout_s=timeout_s,
        settle_timeout_s=settle_timeout_s,
        group_options=options,
        progress=progress,
    )
    ops: list[_Op] = got.pop("ops")
    killed, detected = got.pop("killed"), set(got.pop("detected"))
    done = [op for op in ops if op.end_s is not None]
    before = sorted(op.time_s for op in done if leave_s / 2 <= op.start_s and op.end_s <= leave_s)
    stable = before[len(before) // 2] if before else None
    recovery = (
        sim.recovery_times(done, [leave_s, rejoin_s], stable)  # type: ignore[arg-type]
        if stable is not None
        else [None, None]
    )
    return {
        "experiment": "transition",
        "grid": grid.name,
        "nprocs": n,
        "nbytes": nbytes,
        "changes_s": {"leave": leave_s, "rejoin": rejoin_s, "until": until_s},
        "leavers": len(leavers),
        "crash": crash,
        "broadcasts": [
            {"start_s": op.start_s, "end_s": op.end_s, "time_s": op.time_s} for op in ops
        ],
        "stable_s": stable,
        "note": None if stable is not None else "no broadcast completed in [leave/2, leave]",
        "recovery_s": recovery,
        **_checked(ops, n),
        "killed": len(killed) if crash else 0,
        "killed_detected_by_root": len(detected & set(killed)) if crash else 0,
        "complete_again_s": sim.complete_again(ops, leave_s) if crash else None,
        "in_flight_complete_s": sim.in_flight_complete(ops, leave_s) if crash else None,
        "heartbeat_timeout_s": options["heartbeat_timeout_s"] if crash else None,
        "op_timeout_s": op_timeout_s,
        **got,
    }


def churn_steps(
    nprocs: int, changes: int, duration_s: float, rng: random.Random
) -> list[tuple[float, str, int, int]]:
    """A random schedule for :func:`churn`: ``changes`` leaves and joins at uniform
    times in the first 70% of ``duration_s``. A leave takes a founder that has not
    left (never rank 0, which holds the root vnode; at least half the ranks stay) and
    names a founder still there as the heir of its vnodes; a join brings a rank that
    left back as a new process, through a founder still there (the orchestrator knows
    the founders' addresses; a joiner's only once it has joined). A rank leaves at
    most once."""
    present, gone, back = set(range(nprocs)), [], set()
    steps = []
    for at in sorted(rng.uniform(0.05, 0.7) * duration_s for _ in range(changes)):
        founders = sorted(present - back)
        leavable = [r for r in founders if r != 0]
        if gone and (rng.random() < 0.5 or len(present) <= (nprocs + 1) // 2 or not leavable):
            r = gone.pop(rng.randrange(len(gone)))
            steps.append((at, "join", r, rng.choice(founders)))
            present.add(r)
            back.add(r)
        elif leavable and len(present) > (nprocs + 1) // 2:
            r = rng.choice(leavable)
            present.discard(r)
            gone.append(r)
            steps.append((at, "leave", r, rng.choice([f for f in founders if f != r])))
    return steps


def churn(
    grid: Grid,
    *,
    runs: int = 20,
    changes: int = 6,
    duration_s: float = 20.0,
    nbytes: int = 64 * 1024,
    op_timeout_s: float = 10.0,
    timeout_s: float = 60.0,
    seed: int = 0,
    group_options: dict | None = None,
    progress: Progress = _noop,
) -> dict:
    """The exactly-once checker: ``runs`` runs, each a group of real processes formed anew,
    broadcasting ``nbytes`` from vnode 0 back to back for ``duration_s`` while
    ``changes`` random leaves and joins happen (:func:`churn_steps`, seeded by
    ``seed`` and the run's index). It counts every vnode's deliveries of every
    broadcast; the goal is ``lost == 0`` and ``duplicated == 0`` over all runs. The
    trees are not left to settle first: churn starts while they are being built."""
    if runs < 1 or changes < 0 or duration_s <= 0 or nbytes < 1:
        raise ParameterError(
            f"need runs >= 1, changes >= 0, duration > 0 and nbytes >= 1, got {runs!r}, "
            f"{changes!r}, {duration_s!r}, {nbytes!r}"
        )
    n = grid.nranks
    if n < 3:
        raise ParameterError(f"churn needs at least 3 processes, got {n}")
    rows = []
    for i in range(runs):
        steps = churn_steps(n, changes, duration_s, random.Random(seed * 1_000_003 + i))

        def body(run: _Run, steps: list = steps) -> dict:
            fresh = [run.spawn(r, spare=True) for _, a, r, _ in steps if a == "join"]
            run.up_costs(fresh, timeout_s)
            changes = _Schedule(run, time.monotonic(), steps)
            return {"ops": _back_to_back(run, changes, nbytes, duration_s, op_timeout_s)}

        got = _session(
            grid,
            body,
            timeout_s=timeout_s,
            settle_timeout_s=None,
            group_options=group_options,
            progress=lambda done, total, i=i: progress(i * total + done, runs * total),
        )
        ops = got["ops"]
        rows.append(
            {
                "run": i,
                "steps": [{"at_s": t, "action": a, "rank": r, "via": o} for t, a, r, o in steps],
                "broadcasts": len(ops),
                **_checked(ops, n),
                "worker_errors": got["worker_errors"],
            }
        )
    totals = {k: sum(row[k] for row in rows) for k in _checked([], n)}
    return {
        "experiment": "churn",
        "mode": "measure",
        "grid": grid.name,
        "nprocs": n,
        "nbytes": nbytes,
        "runs": rows,
        "nruns": runs,
        "changes": changes,
        "duration_s": duration_s,
        "broadcasts": sum(row["broadcasts"] for row in rows),
        **totals,
        "worker_errors": [e for row in rows for e in row["worker_errors"]],
    }


MEASURE_EXPERIMENTS: dict[str, Callable[..., dict]] = {
    "latency": latency,
    "bandwidth": bandwidth,
    "reduction": reduction,
    "transition": transition,
    "churn": churn,
}
"""``--experiment`` name -> measured experiment function."""
