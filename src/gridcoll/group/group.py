"""Phoenix (seed 004) over real processes: :class:`Group`, the coordinator.

A :class:`Group` is one operating-system process's member of a computation whose
processes come and go: it drives the sans-I/O core of :mod:`gridcoll.phoenix.protocol`
(the very code the simulator of :mod:`gridcoll.simulate.phoenix` drives) with pyzmq
sockets, a real clock and the codec of :mod:`gridcoll.phoenix.wire`. The core decides
everything (who owns which virtual node, the trees, where a message goes); the group
only moves bytes, keeps time and hands results to the application, through four
collaborators it holds and wires together here:

* :class:`~gridcoll.group.transport.Transport` (:mod:`gridcoll.group.transport`): the
  sockets, the handshakes and their HMACs, the process directory and the emulated WAN's
  delay heap; security rules 1-4 are stated there;
* :class:`~gridcoll.group.detector.Detector` (:mod:`gridcoll.group.detector`):
  heartbeats, acks, round trips and the failure detector;
* :class:`~gridcoll.group.probes.Prober` (:mod:`gridcoll.group.probes`): the probes
  (sec. IV-A) over UDP, round trips and download rates;
* :class:`~gridcoll.group.reassembly.Reassembly` (:mod:`gridcoll.group.reassembly`):
  the segments of pipelined broadcasts, per virtual node.

Theory of operation
-------------------
*One I/O thread* owns the core (which is not thread-safe) and every collaborator. It
blocks in the transport's poll until a frame, the wake-up pipe of an application call,
the next timer, the next emulated delivery, a probe's deadline or the next heartbeat,
whichever is first: nothing spins. Each turn it reads what came, hands on the held
frames that are due, feeds the core what was read, fires the timers, expires the probes,
beats, and runs the application's calls. Application calls (:meth:`Group.bcast`,
:meth:`Group.reduce`, ...) are queued to it and wait for its answer; the callbacks
``on_deliver``/``on_reduce`` run on it (keep them short; they may call the group's
methods). What application threads read (:attr:`Group.vnodes`, :attr:`Group.members`,
...) is a snapshot published after every event.

*Actions.* ``Send`` is encoded and written to the destination (a ``Handover`` preceded
by the bytes of the segments its vnodes hold); ``SetTimer`` goes on a heap (a later
timer of the same key replaces the earlier); ``Probe`` goes to the prober; ``Deliver``
is reassembled per virtual node, and the application gets the whole payload once per
vnode; ``ReduceDone`` is kept for :meth:`Group.result` and given to ``on_reduce``;
``PeerLost`` and ``Abandoned`` are kept for :attr:`Group.failures` and
:attr:`Group.abandoned`.

*Timers.* The core sizes a reduction's waits from measured distances (sec. IV-E):
tens of microseconds on loopback, where a real process is often descheduled for
milliseconds. Inner nodes may send early (late data is forwarded as it comes), but the
root's give-up timer ends the reduction, so the group holds it to at least
``min_give_up_s`` (10 s by default): a result lacks data only when a process is gone
or much slower than that.

*Joining and ids.* :meth:`Group.start` founds a computation with every vnode in this
process; :meth:`Group.join` asks a member at an endpoint. A process id is its *site*
(``site``: its cluster or LAN, 0 to 1023; with an emulator, the rank's cluster) in the
core's :data:`~gridcoll.phoenix.protocol.SITE_SHIFT` top bits, then 52 random bits
(the core's rule 2 never reuses ids, and a collision among a few thousand processes of
one site has probability below 1e-8). The core gives a dead process's vnodes to a
member of its site while one lives, so the broadcast under way need not cross a
wide-area link again for it (module doc of :mod:`gridcoll.phoenix.protocol`,
"Failures").

What is guaranteed, and what is not
-----------------------------------
Among processes that join and leave politely (:meth:`Group.leave`), every vnode gets
every broadcast exactly once and every vnode's data counts once in a reduction: the
core's invariants B and R, with the transport giving FIFO pairs. A left process keeps
forwarding stragglers (the core's "Stragglers" rule) until :meth:`Group.close`; close
a left group only once the others have moved on. A process that dies without leaving
is detected by heartbeats (:mod:`gridcoll.group.detector`): its vnodes move to an heir
with a fresh history, broadcasts in flight to it are sent again, so every live vnode
gets them, and reductions report its vnodes' data as missing unless the heir supplies
it. An authenticated peer is trusted to follow the protocol: a message that breaks the
core's invariants puts the core in ``ERROR`` (reported by :attr:`Group.error`).

With ``emulator`` (:class:`gridcoll.runtime.emulation.Emulator`) and ``rank``, every
frame and datagram crosses the runtime's emulated WAN (:mod:`gridcoll.group.transport`,
"WAN emulation").

References
----------
H. Saito, K. Taura, T. Chikayama, *Collective operations for wide-area message passing
systems using adaptive spanning trees* (seed 004), sec. III (virtual nodes, joins and
leaves), IV-A (probes), IV-D (broadcast), IV-E (reduction).
"""

from __future__ import annotations

import heapq
import itertools
import math
import pickle
import queue
import random
import secrets as _secrets
import threading
import time
from collections.abc import Callable, Hashable, Iterator, Mapping
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

import gridcoll.phoenix as p
from gridcoll.errors import GroupError, ParameterError, WireError
from gridcoll.group.detector import Detector
from gridcoll.group.probes import RTT_RESOLUTION_S, Prober
from gridcoll.group.reassembly import Reassembly
from gridcoll.group.transport import BEAT, MSG, SEGS, GroupStats, Transport
from gridcoll.phoenix.wire import MAX_MESSAGE, OPS, Codec, Writer
from gridcoll.runtime.emulation import Emulator

__all__ = ["Delivery", "Group", "GroupError", "GroupStats", "ReduceResult"]

_SITES = 1 << (62 - p.SITE_SHIFT)
"""How many sites a process id can name (module doc, "Joining and ids")."""
_POLL_CAP_S = 0.25
"""The longest the I/O thread waits in one poll."""


@dataclass(frozen=True)
class Delivery:
    """A broadcast delivered whole to some of this process's vnodes."""

    op_id: Hashable
    vnodes: frozenset[int]
    data: object


@dataclass(frozen=True)
class ReduceResult:
    """A reduction's result at the owner of its root vnode; ``missing`` lists the vnodes
    whose data it lacks (empty when complete)."""

    op_id: Hashable
    value: object
    missing: frozenset[int]


@dataclass(frozen=True)
class _View:
    """What application threads may read: a snapshot taken after every event."""

    state: p.State = p.State.IDLE
    vnodes: frozenset[int] = frozenset()
    members: frozenset[int] = frozenset()
    suspects: frozenset[int] = frozenset()
    failures: tuple[p.PeerLost, ...] = ()
    abandoned: tuple[p.Abandoned, ...] = ()


def _as_bytes(obj: object) -> bytes | None:
    """The raw bytes of a buffer (bytes, bytearray, memoryview, numpy...), or None."""
    if isinstance(obj, bytes):
        return obj
    try:
        view = memoryview(obj)  # type: ignore[arg-type]
    except TypeError:
        return None
    return view.tobytes()


class Group:
    """One process's member of a Phoenix computation (module doc).

    Build it with :meth:`start` (found) or :meth:`join`; use it as a context manager or
    call :meth:`close`.

    Args (of both constructors):
        rank: this process's machine in the emulated grid (with ``emulator``).
        emulator: the WAN emulation (:mod:`gridcoll.group.transport`, "WAN
            emulation"); None: real network.
        on_deliver: ``f(op_id, vnodes, data)`` for each broadcast delivered whole to
            some of this process's vnodes, on the I/O thread; without it, deliveries
            queue for :meth:`deliveries`.
        on_reduce: ``f(ReduceResult)`` at the root vnode's owner.
        trusted_pickle: carry arbitrary objects as pickles (trusted peers only).
        max_message: the largest frame accepted (bytes).
        probe_timeout_s: a probe unanswered this long measures ``rtt = inf``.
        probe_pings: ping-pongs per probe; the fastest is its RTT
            (:mod:`gridcoll.group.probes`).
        rtt_resolution_s: the smallest round trip reported to the core; a faster one
            is reported as this (:mod:`gridcoll.group.probes`, "Round trips").
        min_give_up_s: the root of a reduction waits at least this long before it
            reports missing vnodes (module doc, "Timers").
        heartbeat_s: send every member a heartbeat this often (None: never).
        heartbeat_timeout_s: a member heard nothing from for this long is suspected.
        ack_s: between beats, tell the members we took core messages from how many,
            this often (:mod:`gridcoll.group.detector`; None: ``heartbeat_s / 4``).
        on_suspect: ``f(pid)`` when a member is first suspected
            (:mod:`gridcoll.group.detector`), on the I/O thread.
        fail_suspects: report a suspect to the core as dead
            (:mod:`gridcoll.group.detector`); False: only suspect it.
        site: this process's site, 0 to 1023 (its cluster or LAN: module doc, "Joining
            and ids"); None: the emulator's cluster of ``rank``, or 0 without one.
        seed: the core's random numbers (None: from the OS).
        core_options: passed to :class:`~gridcoll.phoenix.protocol.Process`.
    """

    def __init__(
        self,
        *,
        secret: bytes,
        bind: str = "127.0.0.1",
        rank: int | None = None,
        emulator: Emulator | None = None,
        on_deliver: Callable[[Hashable, frozenset[int], object], None] | None = None,
        on_reduce: Callable[[ReduceResult], None] | None = None,
        trusted_pickle: bool = False,
        max_message: int = MAX_MESSAGE,
        probe_timeout_s: float = 5.0,
        probe_pings: int = 3,
        rtt_resolution_s: float = RTT_RESOLUTION_S,
        min_give_up_s: float = 10.0,
        heartbeat_s: float | None = 1.0,
        heartbeat_timeout_s: float = 5.0,
        ack_s: float | None = None,
        on_suspect: Callable[[int], None] | None = None,
        fail_suspects: bool = True,
        site: int | None = None,
        seed: int | None = None,
        founder_vnodes: int | None = None,
        core_options: Mapping[str, Any] | None = None,
    ) -> None:
        if not isinstance(secret, bytes) or len(secret) < 16:
            raise ParameterError("the group secret must be at least 16 bytes")
        if emulator is not None and rank is None:
            raise ParameterError("a rank is needed with an emulator")
        if max_message < 1024:
            raise ParameterError(f"max_message must be >= 1024, got {max_message!r}")
        self.secret = secret
        self.rank = rank
        if site is None:
            site = 0 if emulator is None else emulator.site(rank) % _SITES  # type: ignore[arg-type]
        if not 0 <= site < _SITES:
            raise ParameterError(f"site must be in [0, {_SITES}), got {site!r}")
        self.pid = site << p.SITE_SHIFT | _secrets.randbits(p.SITE_SHIFT)
        self.emulator = emulator
        self.trusted_pickle = trusted_pickle
        self.max_message = max_message
        self.probe_timeout_s = probe_timeout_s
        if probe_pings < 1:
            raise ParameterError(f"probe_pings must be at least 1, got {probe_pings!r}")
        self.probe_pings = probe_pings
        if not rtt_resolution_s >= 0:
            raise ParameterError(f"rtt_resolution_s must be >= 0, got {rtt_resolution_s!r}")
        self.rtt_resolution_s = rtt_resolution_s
        self.min_give_up_s = min_give_up_s
        if heartbeat_s is not None and not 0 < heartbeat_s < heartbeat_timeout_s:
            raise ParameterError(
                f"need 0 < heartbeat_s < heartbeat_timeout_s, got {heartbeat_s!r}, "
                f"{heartbeat_timeout_s!r}"
            )
        self.heartbeat_s, self.heartbeat_timeout_s = heartbeat_s, heartbeat_timeout_s
        if ack_s is None and heartbeat_s is not None:
            ack_s = heartbeat_s / 4
        if ack_s is not None and not (heartbeat_s is not None and 0 < ack_s <= heartbeat_s):
            raise ParameterError(f"need 0 < ack_s <= heartbeat_s, got {ack_s!r}, {heartbeat_s!r}")
        self.ack_s = ack_s
        self.fail_suspects = fail_suspects
        self._failures: list[p.PeerLost] = []
        self._abandoned: list[p.Abandoned] = []
        self._inbox: list[p.Event] = []  # messages read, fed to the core after the drain
        self._fed = False  # the core was fed this step: publish its view
        self._on_deliver, self._on_reduce = on_deliver, on_reduce
        self._codec = Codec(trusted_pickle=trusted_pickle, max_size=max_message)
        founders = None if founder_vnodes is None else {self.pid: range(founder_vnodes)}
        rng = random.Random(seed if seed is not None else _secrets.randbits(64))
        self.core = p.Process(
            self.pid, rng=rng, founder_vnodes=founders, **dict(core_options or {})
        )
        self.stats = GroupStats()
        self.error: str | None = None
        # the collaborators (module doc), and what each is given of the others
        self._transport = Transport(
            secret=secret,
            pid=self.pid,
            rank=rank,
            bind=bind,
            emulator=emulator,
            max_message=max_message,
            stats=self.stats,
            on_frame=self._on_frame,
            on_datagram=lambda data, arrival: self._prober.on_datagram(data, arrival),
            on_seen=lambda pid: self._detector.seen(pid),
            on_verified=self._on_verified,
            on_refused=self._on_refused,
        )
        self.address: str = self._transport.address
        self._detector = Detector(
            pid=self.pid,
            core=self.core,
            heartbeat_s=heartbeat_s,
            heartbeat_timeout_s=heartbeat_timeout_s,
            ack_s=ack_s,
            rtt_resolution_s=rtt_resolution_s,
            on_suspect=on_suspect,
            fail_suspects=fail_suspects,
            stats=self.stats,
            send_frame=self._transport.send_frame,
            feed=self._feed,
            publish=self._publish,
            callback=self._callback,
        )
        self._prober = Prober(
            pid=self.pid,
            pings=probe_pings,
            timeout_s=probe_timeout_s,
            rtt_resolution_s=rtt_resolution_s,
            transport=self._transport,
            detector=self._detector,
            stats=self.stats,
            feed=self._feed,
        )
        self._segments = Reassembly(self.stats)
        self._commands: queue.SimpleQueue[tuple[Callable[[], Any], Future]] = queue.SimpleQueue()
        self._timers: list[tuple[float, int, Hashable]] = []
        self._timer_seq: dict[Hashable, int] = {}
        self.callback_error: BaseException | None = None
        """The last exception an ``on_deliver``/``on_reduce`` callback raised."""
        self._results: dict[Hashable, ReduceResult] = {}
        self._deliveries: queue.SimpleQueue[Delivery] = queue.SimpleQueue()
        self._seq = itertools.count()
        self._ops = itertools.count()
        self._reduce_calls = itertools.count()
        self._view = _View()
        self._changed = threading.Condition()
        self._stop = self._closed = False
        self._refused: list[str] = []
        self._thread = threading.Thread(target=self._run, name=f"gridcoll-group-{self.pid}")
        self._thread.daemon = True

    # -- construction ---------------------------------------------------------------------
    @classmethod
    def start(cls, nvnodes: int, *, secret: bytes | None = None, **options: Any) -> Group:
        """Found a computation of ``nvnodes`` virtual nodes, all owned by this process.

        Give :attr:`address` and :attr:`secret` (a fresh ``secrets.token_bytes(32)``
        unless given) to the processes that will :meth:`join`. Options: see the class.
        """
        if not isinstance(nvnodes, int) or nvnodes < 1:
            raise ParameterError(f"nvnodes must be a positive int, got {nvnodes!r}")
        group = cls(secret=secret or _secrets.token_bytes(32), founder_vnodes=nvnodes, **options)
        group._thread.start()
        group._call(lambda: group._feed(p.Start()))
        return group

    @classmethod
    def join(cls, address: str, secret: bytes, *, timeout: float = 30.0, **options: Any) -> Group:
        """Join the computation a member at ``address`` belongs to; returns once this
        process is a member (it may own no vnode yet: the contact hands it half of its
        own). Raises :class:`GroupError` if the handshake is refused or times out."""
        group = cls(secret=secret, **options)
        group._thread.start()
        group._call(lambda: group._transport.peer(address))
        try:
            group._wait(lambda v: v.state is not p.State.IDLE or group._refused, timeout)
            if group._refused:
                raise GroupError(f"join refused by {address}: {group._refused[0]}")
            group._wait(lambda v: v.state is p.State.ACTIVE, timeout)
        except BaseException:
            group.close()
            raise
        return group

    # -- the application's API -------------------------------------------------------------
    @property
    def vnodes(self) -> frozenset[int]:
        """The virtual nodes this process owns now."""
        return self._view.vnodes

    @property
    def members(self) -> frozenset[int]:
        """The process ids this process knows as members (itself included)."""
        return self._view.members

    @property
    def suspects(self) -> frozenset[int]:
        """Members silent for longer than ``heartbeat_timeout_s``
        (:mod:`gridcoll.group.detector`); a member is dropped from it when heard from again."""
        return self._view.suspects

    @property
    def failures(self) -> tuple[p.PeerLost, ...]:
        """The members this process learnt had died, in order
        (:mod:`gridcoll.group.detector`): each with the vnodes it re-mapped, their heir and the
        broadcasts it sent again."""
        return self._view.failures

    @property
    def abandoned(self) -> tuple[p.Abandoned, ...]:
        """Pipelined broadcasts whose root died before these vnodes had every segment."""
        return self._view.abandoned

    @property
    def state(self) -> p.State:
        return self._view.state

    def probing(self) -> bool:
        """Whether the core is still probing (its trees not settled), asked on the I/O
        thread (the core is not thread-safe)."""
        return bool(self._call(self.core.probing))

    def parent(self, kind: str, root: int) -> int | None:
        """This process's parent (a process id) in process ``root``'s tree of ``kind``
        (``"latency"`` or ``"bandwidth"``); None at the root or with no parent yet."""
        return self._call(lambda: self.core.parent(kind, root))  # type: ignore[no-any-return]

    def wait_until(self, predicate: Callable[[Group], bool], timeout: float) -> bool:
        """Block until ``predicate(self)`` holds (checked after every event); False on
        timeout."""
        with self._changed:
            return self._changed.wait_for(lambda: predicate(self), timeout)

    def bcast(self, obj: object, root: int = 0, *, kind: str | None = None) -> Hashable:
        """Broadcast ``obj`` from vnode ``root`` (owned by this process) to every vnode;
        returns the operation id the deliveries carry. Buffers (bytes, bytearray,
        memoryview, numpy arrays) arrive as ``bytes``; other objects need
        ``trusted_pickle``. ``kind`` forces a tree (``"latency"``, or ``"bandwidth"``:
        pipelined in segments); None lets the core's model choose (sec. IV-D)."""
        if kind not in (None, *p.KINDS):
            raise ParameterError(f"kind must be None or one of {p.KINDS}, got {kind!r}")
        data, codec = _as_bytes(obj), "raw"
        if data is None:
            if not self.trusted_pickle:
                raise ParameterError(
                    f"cannot broadcast a {type(obj).__name__} without trusted_pickle=True "
                    "(give a bytes-like buffer)"
                )
            data, codec = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL), "pickle"
        if len(data) > self.max_message - 4096:
            raise ParameterError(f"payload of {len(data)} bytes exceeds max_message")
        op_id = (self.pid, next(self._ops), codec)

        def go() -> Hashable:
            self._require_active()
            if root not in self.core.owned:
                raise ParameterError(f"root vnode {root!r} is not owned by this process")
            self._feed(p.BcastRequested(op_id, root, len(data), data, kind))
            return op_id

        return self._call(go)

    def reduce(
        self, value: object, op: str = "sum", root: int = 0, *, tag: Hashable = None
    ) -> Hashable:
        """Contribute to a reduction towards vnode ``root``: ``value`` is a mapping
        vnode -> value, or one value used for each vnode this process owns. Every
        process contributing to one reduction must use the same ``tag`` (default: the
        number of :meth:`reduce` calls this process made before, which agrees only
        among processes that made the same calls). Returns the operation id; the root
        vnode's owner gets the result (:meth:`result`, ``on_reduce``)."""
        if op not in OPS:
            raise ParameterError(f"unknown reduction operator {op!r} (one of {list(OPS)})")
        op_id = ("reduce", next(self._reduce_calls) if tag is None else tag)

        def go() -> Hashable:
            self._require_active()
            if isinstance(value, Mapping):
                values = dict(value)
            else:
                values = dict.fromkeys(self.core.owned, value)
            sample = next(iter(values.values()), None)
            w = Writer(self.trusted_pickle)
            w.value(sample)
            self._feed(p.ReduceRequested(op_id, root, values, OPS[op], len(w.out)))
            return op_id

        return self._call(go)

    def result(self, op_id: Hashable, timeout: float | None = None) -> ReduceResult:
        """The result of reduction ``op_id`` at this process (the root vnode's owner);
        raises :class:`GroupError` on timeout."""
        if not self._wait(lambda v: op_id in self._results, timeout, raise_=False):
            raise GroupError(f"no result for reduction {op_id!r} within {timeout} s")
        return self._results[op_id]

    def deliveries(self, timeout: float | None = None) -> Iterator[Delivery]:
        """Deliveries as they come (when no ``on_deliver`` was given); stops when none
        arrives for ``timeout`` seconds."""
        while True:
            try:
                yield self._deliveries.get(timeout=timeout)
            except queue.Empty:
                return

    def migrate(self, vnodes: frozenset[int], dst: int) -> None:
        """Give the listed vnodes this process owns to member ``dst``."""

        def go() -> None:
            self._require_active()
            if dst not in self.core.members:
                raise ParameterError(f"{dst!r} is not a member")
            self._feed(p.MigrateRequested(frozenset(vnodes), dst))

        self._call(go)

    def leave(self, timeout: float = 30.0) -> None:
        """Leave politely: give every vnode away and return once every member has
        acknowledged (the core's LEFT). The process keeps forwarding stragglers until
        :meth:`close`."""

        def go() -> None:
            self._require_active()
            if len(self.core.members) < 2:
                raise GroupError("the last member cannot leave")
            self._feed(p.LeaveRequested())

        self._call(go)
        self._wait(lambda v: v.state is p.State.LEFT, timeout)

    def close(self) -> None:
        """Stop the I/O thread and close the sockets (without leaving: see :meth:`leave`)."""
        if self._closed:
            return
        self._closed = True
        if self._thread.is_alive():
            self._stop = True
            self._wake()
            self._thread.join()
        self._transport.close()

    def __enter__(self) -> Group:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- calls into the I/O thread -----------------------------------------------------------
    def _wake(self) -> None:
        self._transport.wake()

    def _call(self, fn: Callable[[], Any], timeout: float = 30.0) -> Any:
        if threading.current_thread() is self._thread:
            return fn()
        if not self._thread.is_alive():
            raise GroupError("the group is closed")
        future: Future = Future()
        self._commands.put((fn, future))
        self._wake()
        return future.result(timeout)

    def _wait(
        self, pred: Callable[[_View], object], timeout: float | None, raise_: bool = True
    ) -> bool:
        with self._changed:
            ok = self._changed.wait_for(lambda: pred(self._view) or self.error, timeout)
        if self.error:
            raise GroupError(f"the protocol core failed: {self.error}")
        if not ok and raise_:
            raise GroupError(f"timed out after {timeout} s in state {self._view.state.name}")
        return bool(ok)

    def _require_active(self) -> None:
        if self.core.state is not p.State.ACTIVE:
            raise GroupError(f"this process is {self.core.state.name}, not ACTIVE")

    # -- the I/O thread ---------------------------------------------------------------------
    def _run(self) -> None:
        while not self._stop:
            try:
                self._step()
            except Exception as err:  # a bug here: fail loudly for the waiters
                self.error = f"I/O thread: {type(err).__name__}: {err}"
                self._publish()
                break
        self._run_commands(closing=True)

    def _step(self) -> None:
        """One turn: wait for a frame, a call or a deadline, then handle what is due."""
        ready = self._transport.poll(self._poll_ms())
        self._transport.drain(ready)
        self._transport.release_held()
        self._feed_inbox()
        self._fire_timers()
        self._prober.expire()
        self._detector.heartbeat()
        self._run_commands()
        if ready or self._fed:
            self._fed = False
            self._publish()  # the core or the counters may have moved: wake the waiters

    def _poll_ms(self) -> int:
        deadlines = [self._timers[0][0]] if self._timers else []
        deadlines += self._transport.deadlines()
        deadlines += self._prober.deadlines()
        deadlines += self._detector.deadlines()
        if not deadlines:
            return int(_POLL_CAP_S * 1000)
        left = min(deadlines) - time.monotonic()
        return max(0, min(int(_POLL_CAP_S * 1000), math.ceil(left * 1000)))

    def _run_commands(self, closing: bool = False) -> None:
        while not self._commands.empty():  # (the one reader: this thread)
            fn, future = self._commands.get_nowait()
            if closing:
                future.set_exception(GroupError("the group is closed"))
                continue
            try:
                future.set_result(fn())
            except BaseException as err:  # handed to the caller's thread
                future.set_exception(err)

    def _publish(self) -> None:
        view = _View(
            self.core.state,
            self.core.owned,
            frozenset(self.core.members),
            frozenset(self._detector.suspects),
            tuple(self._failures),
            tuple(self._abandoned),
        )
        with self._changed:
            self._view = view
            self._changed.notify_all()

    # -- what the transport hands up --------------------------------------------------------
    def _on_frame(
        self, route: bytes, pid: int, kind: int, body: memoryview, arrival: float
    ) -> None:
        """An authenticated frame from ``pid``, delivered by the emulated WAN: a core
        message (fed after the drain), carried segments, or a beat."""
        if kind == MSG:
            m = self._codec.decode(body)
            self._segments.on_message(route, m)
            self._detector.took(pid)
            self._inbox.append(p.Received(pid, m))  # fed after the drain
        elif kind == SEGS:
            self._segments.take(route, body)
        elif kind == BEAT:  # (the transport noted the time) and how many we sent it took
            self._detector.on_beat(pid, body, arrival)
        else:
            self.stats.malformed += 1

    def _on_verified(self, pid: int) -> None:
        """A peer we connected to proved the secret: if we were joining, through it."""
        if self.core.state is p.State.IDLE and self.core.table is None and not self._refused:
            self._feed(p.JoinRequested(pid))  # we were joining through this peer

    def _on_refused(self, reason: str) -> None:
        """A peer refused us: if we were joining, the join failed."""
        if self.core.state is p.State.IDLE:
            self._refused.append(reason)
            self._publish()

    # -- the core -----------------------------------------------------------------------------
    def _feed(self, event: p.Event) -> None:
        """Feed ``event`` to the core now, after the messages read before it."""
        self._inbox.append(event)
        self._feed_inbox()

    def _feed_inbox(self) -> None:
        """Feed the core the events read since it was last fed, together (its rule 5: a
        backlog of tree updates sends one update per neighbour, not one per update)."""
        events, self._inbox = self._inbox, []
        if not events or self.core.state is p.State.ERROR:
            return
        try:
            actions = self.core.handle_all(events)
        except Exception as err:  # the core is now in ERROR (its rule 4)
            self.error = f"{type(err).__name__}: {err}"
            self._publish()
            if isinstance(events[-1], p.BcastRequested | p.ReduceRequested | p.MigrateRequested):
                raise GroupError(self.error) from err
            return
        for action in actions:
            self._act(action)
        self._segments.gc()
        self._fed = True  # published at the end of the step

    def _act(self, action: p.Action) -> None:
        if isinstance(action, p.Send):
            self._send_message(action.dst, action.message)
        elif isinstance(action, p.Deliver):
            whole = self._segments.add(action)
            if whole is not None:
                self._hand_out(action.op_id, *whole)
        elif isinstance(action, p.SetTimer):
            seq = next(self._seq)
            self._timer_seq[action.timer] = seq
            delay = action.delay_s
            if isinstance(action.timer, tuple) and action.timer[:1] == ("reduce-give-up",):
                delay = max(delay, self.min_give_up_s)
            heapq.heappush(self._timers, (time.monotonic() + delay, seq, action.timer))
        elif isinstance(action, p.Probe):
            self._prober.start(action.peer, action.nbytes)
        elif isinstance(action, p.PeerLost):
            self._failures.append(action)
        elif isinstance(action, p.Abandoned):
            self._abandoned.append(action)
            self._segments.abandon(action)
        elif isinstance(action, p.ReduceDone):
            res = ReduceResult(action.op_id, action.value, action.missing)
            self._results[action.op_id] = res
            if self._on_reduce is not None:
                self._callback(self._on_reduce, res)

    def _callback(self, fn: Callable[..., object], *args: object) -> None:
        try:
            fn(*args)
        except Exception as err:  # the application's bug must not stop the transport
            self.callback_error = err

    def _fire_timers(self) -> None:
        now = time.monotonic()
        while self._timers and self._timers[0][0] <= now:
            _, seq, key = heapq.heappop(self._timers)
            if self._timer_seq.get(key) == seq:
                del self._timer_seq[key]
                self._feed(p.TimerExpired(key))

    def _send_message(self, dst: int, m: p.Message) -> None:
        """A core message to ``dst``; a Handover is preceded by the bytes of the
        segments its vnodes hold (:mod:`gridcoll.group.reassembly`)."""
        if isinstance(m, p.Handover):
            for body in self._segments.carry(m):
                self._transport.send_frame(dst, SEGS, body)
        try:
            body = self._codec.encode(m)
        except WireError as err:  # e.g. a value the codec cannot carry: the core is stuck
            self.error = f"cannot send {type(m).__name__}: {err}"
            return
        self._transport.send_frame(dst, MSG, body)

    def _hand_out(self, op_id: Hashable, vnodes: frozenset[int], payload: object) -> None:
        """A broadcast whole for ``vnodes``: to ``on_deliver``, or queued."""
        data = payload
        if isinstance(op_id, tuple) and len(op_id) == 3 and op_id[2] == "pickle":
            if not self.trusted_pickle or not isinstance(payload, bytes):
                self.stats.undeliverable += 1
                return
            data = pickle.loads(payload)  # trusted peers only (transport, security rule 4)
        if self._on_deliver is not None:
            self._callback(self._on_deliver, op_id, vnodes, data)
        else:
            self._deliveries.put(Delivery(op_id, vnodes, data))
