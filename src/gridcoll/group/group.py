"""Phoenix (seed 004) over real processes: :class:`Group`.

A :class:`Group` is one operating-system process's member of a computation whose
processes come and go: it drives the sans-I/O core of :mod:`gridcoll.phoenix.protocol`
(the very code the simulator of :mod:`gridcoll.simulate.phoenix` drives) with pyzmq
sockets, a real clock and the codec of :mod:`gridcoll.phoenix.wire`. The core decides
everything (who owns which virtual node, the trees, where a message goes); this module
only moves bytes, keeps time and hands results to the application.

Theory of operation
-------------------
*Sockets.* Each process binds one ROUTER socket (``tcp://127.0.0.1`` on a free port
unless ``bind=`` names another interface; :attr:`Group.address` is its endpoint) and
opens one DEALER socket per peer it sends to, connected to the peer's ROUTER. Core
messages always travel on the sender's DEALER into the receiver's ROUTER, so the
frames from A to B share one TCP connection: FIFO per ordered pair, the core's rule 1.
The ROUTER only answers on the same connection (the handshake, probe replies), which
needs no address of the asker. ROUTER identities are assigned by libzmq, not chosen by
the peer, so a connection, once authenticated, cannot be taken over by another.

*One I/O thread* owns the core (which is not thread-safe) and every socket. It blocks
in ``zmq.Poller.poll`` until a frame, the wake-up pipe of an application call, the next
timer, the next emulated delivery or a probe's deadline, whichever is first: nothing
spins. Application calls (:meth:`Group.bcast`, :meth:`Group.reduce`, ...) are queued
to it and wait for its answer; the callbacks ``on_deliver``/``on_reduce`` run on it
(keep them short; they may call the group's methods).

*Actions.* ``Send`` is encoded and written to the destination's DEALER; ``SetTimer``
goes on a heap (a later timer of the same key replaces the earlier); ``Probe`` is
``probe_pings`` ping-pongs and then a 128 KiB download from the peer (sec. IV-A; see
"Probes and round trips"), with ``rtt = inf`` if no answer comes within
``probe_timeout_s``; ``Deliver`` is reassembled per virtual node: the segments of a
pipelined broadcast are kept until a vnode has them all, then the application gets the
whole payload once per vnode; ``ReduceDone`` is kept for :meth:`Group.result` and given
to ``on_reduce``.
A vnode handed to another process halfway through a pipelined broadcast carries the
indices of its segments (``VNodeState.partial``) but not their bytes, so before
sending a ``Handover`` the driver sends the segments' bytes (a ``SEGS`` frame) on the
same connection, which the new owner stores before the handover reaches its core.

*Probes and round trips.* A probe is timed as NTP times a round trip, so that it leaves
out how long either process took to be scheduled: each answer says how long the request
waited at the peer (from its arrival to the answer's sending), and the asker takes that
off the time from its sending to the answer's arrival. A probe's datagrams (ping, pong,
the download's fetch and its chunks) travel over UDP, on a socket with the ROUTER's port
number, and the kernel stamps their arrival (``SO_TIMESTAMPNS``, Linux; elsewhere they
are timed when read); one that crossed the emulated WAN arrives at its emulated delivery
time. So on a machine whose cores many processes share, a LAN ping measures the LAN's
tens of microseconds, not the milliseconds until the peer runs. (Timed when read, as TCP
frames through libzmq must be, the LAN pings of fig. 9's measured run on 32 processes
and 2 cores took 9-18 ms at the median, above the 3-8 ms wide-area round trips, and LAN
downloads 0.6-9 MB/s, below the 3.2 MB/s of the fastest wide-area link: LAN neighbours
looked remote.) The fastest of the ``probe_pings`` round trips is the RTT, or a
heartbeat's faster one ("Heartbeats and failures"), but never less than
``rtt_resolution_s`` (:data:`RTT_RESOLUTION_S`, 0.1 ms): below it, timings of one link
differ by more than the core's ``NEAR_RATIO`` of 2, and a LAN neighbour would look
remote by chance. The download's rate is its bytes over half the RTT plus its chunks'
passage, timed by their spacing on arrival (:func:`_download_rate`): the link's rate
with latency, as the simulator's probe measures, not what queued ahead. Each datagram
ends with an HMAC-SHA256 of it under the group secret, truncated to 16 bytes, and is
answered only for a process in the directory. A datagram may be lost: a ping unanswered
for ``_PING_AGAIN_S`` is sent again (its answer echoes its sending time, so an answer to
either copy times right), a fetch that brought no chunk in ``_FETCH_AGAIN_S`` likewise,
and a download missing chunks that long ends with the rate of those that came.

*Timers.* The core sizes a reduction's waits from measured distances (sec. IV-E):
tens of microseconds on loopback, where a real process is often descheduled for
milliseconds. Inner nodes may send early (late data is forwarded as it comes), but the
root's give-up timer ends the reduction, so the driver holds it to at least
``min_give_up_s`` (10 s by default): a result lacks data only when a process is gone
or much slower than that.

*Heartbeats and failures.* Every ``heartbeat_s`` a member sends every member it knows a
small ``BEAT`` frame carrying how many of that member's core messages it has fed to its
core, when it was sent, and the send time of the last beat it had from that member with
how long it held it since: so every beat times a round trip. The fastest round trip seen
to each member stands for that member's RTT in later probes, and one ``RTT_GAIN`` times
faster than the core holds is given to the core (``Remeasured``: it judges its trees
again), so a LAN neighbour that a busy machine answered slowly at the first probe is
seen near once a quieter moment shows it; with it goes the peer's download rate
recomputed with that round trip (its chunks' passage kept, the half RTT replaced): a
ping that queued behind data on an emulated wide-area link (0.15-0.43 s instead of
3-8 ms, while the trees form) made the rate of a 0.74 MB/s link 0.36 MB/s, and the
gateway behind it chose a slower link. Between beats, every ``ack_s`` (a quarter of
a beat by default) a member sends the same frame to each member whose core messages it
took in since it last told it (its parents in the trees of the broadcasts under way: a
few), so the counts a data sender holds are at most ``ack_s`` old. A failure report
gives the counts of the last two such frames: the one before the last says which
messages the dead process had passed on (taken in a frame before it died, their
forwards had left it), and only later ones are sent again; the last says which it had
taken in (its own vnodes had them). Fresher counts mean fewer broadcasts sent again
after a death: on fig. 9's crash simulated on ``das2-spread:32,4`` at 256 KiB, counts a
beat (1 s) apart made the broadcast under way complete 4.54 s after the crash and the
next one 5.25 s after it, counts 0.25 s apart 3.47 s and 4.18 s. (Not covered: a
message passed on only to another process that died too before passing it on, within
about ``ack_s``: the core's "Failures".) Any frame on a peer's authenticated
connection counts as a sign of life. A member silent for more than
``heartbeat_timeout_s`` (counted from when it was first known; time this process's own
I/O thread was held up, e.g. by a long emulated transfer, does not count) is suspected,
checked on every turn of the I/O loop once it may be (not only at the next beat): added to
:attr:`Group.suspects`, given to ``on_suspect`` and, with ``fail_suspects`` (the
default), reported to the core as dead (``PeerFailed``): its vnodes go to an heir and
the broadcasts sent to it are sent again (the core's "Failures"). Each such failure is
kept in :attr:`Group.failures` (the core's ``PeerLost``: the vnodes re-mapped, the heir,
the broadcasts sent again), and a pipelined broadcast whose root died before every
segment reached a vnode here in :attr:`Group.abandoned`. A falsely suspected process is
cut off (its vnodes go to the heir), so ``heartbeat_timeout_s`` must exceed the longest
pause a live process may make.

*Addresses.* The core names processes by id. The process directory (id -> endpoint,
rank) spreads with the messages: before a core message to a peer, the sender sends it
the directory entries it has not told it yet. A process learns of another only through
a core message, which its sender preceded by the entries it knew, so every member known
to the core has a known endpoint.

*Joining and ids.* :meth:`Group.start` founds a computation with every vnode in this
process; :meth:`Group.join` asks a member at an endpoint. A process id is its *site*
(``site``: its cluster or LAN, 0 to 1023; with an emulator, the rank's cluster) in the
core's :data:`~gridcoll.phoenix.protocol.SITE_SHIFT` top bits, then 52 random bits
(the core's rule 2 never reuses ids, and a collision among a few thousand processes of
one site has probability below 1e-8). The core gives a dead process's vnodes to a
member of its site while one lives: on fig. 9's measured crash, a random heir was in
another cluster for most of the dead, and the broadcast under way then crossed the
slowest wide-area link again for it (module doc of :mod:`gridcoll.phoenix.protocol`,
"Failures").

Security rules
--------------
1. Every connection starts with a handshake: the connector sends ``HELLO`` (its id,
   rank, endpoint and a random nonce ``a``), the ROUTER answers ``CHALLENGE`` (nonce
   ``b``), the connector proves it knows the group's secret with
   ``AUTH = HMAC-SHA256(secret, "client" | a | b | hello fields)``, and the ROUTER proves
   it back with ``ACK`` (its id, rank, endpoint, and the HMAC with ``"server"``). MACs
   are compared with :func:`hmac.compare_digest`. Nonces make a recorded handshake
   useless on a new connection.
2. A frame on a connection that has not authenticated, a failed MAC, a frame that does
   not parse (:class:`~gridcoll.phoenix.wire.WireError`), or one above ``max_message``
   bytes is dropped and counted in :attr:`Group.stats`; nothing of it reaches the core,
   so it cannot change the mapping. libzmq closes a connection that sends more than
   twice ``max_message`` at once (``MAXMSGSIZE``) before it is read.
3. Sockets bind to loopback unless ``bind=`` says otherwise. Frames are authenticated
   once per connection, ping datagrams each by its MAC ("Probes and round trips");
   nothing is encrypted: across untrusted networks use a tunnel.
4. Payloads are bytes, numbers, strings, tuples and numeric numpy arrays; arbitrary
   objects travel as pickles only if every process of the group opted in with
   ``trusted_pickle=True`` (pickle runs code chosen by the sender).

What is guaranteed, and what is not
-----------------------------------
Among processes that join and leave politely (:meth:`Group.leave`), every vnode gets
every broadcast exactly once and every vnode's data counts once in a reduction: the
core's invariants B and R, with this transport giving FIFO pairs. A left process keeps
forwarding stragglers (the core's "Stragglers" rule) until :meth:`Group.close`; close
a left group only once the others have moved on. A process that dies without leaving
is detected by heartbeats (see "Heartbeats and failures"): its vnodes move to an heir
with a fresh history, broadcasts in flight to it are sent again, so every live vnode
gets them, and reductions report its vnodes' data as missing unless the heir supplies
it. An
authenticated peer is trusted to follow the protocol: a message that breaks the
core's invariants puts the core in ``ERROR`` (reported by :attr:`Group.error`).

WAN emulation
-------------
With ``emulator`` (an object with the interface of
:class:`gridcoll.runtime.emulation.Emulator`, injected because this low layer may not
import the runtime), each process has a ``rank`` in the emulated grid. A frame from
rank a to rank b that ``emulator.crosses(a, b)`` is stamped at send with
``emulator.reserve(a, b, nbytes, time.monotonic())``; the receiver keeps it in a delay
heap keyed by its stamp, per sender in FIFO order, and feeds it to the core only once
``emulator.wait(stamp, a, b, nbytes)`` returns (at the stamp, so it does not sleep).
Other frames go on meanwhile. Probes cross the same emulation, so they measure the
emulated WAN. A fair-shared link's stamp (negative: a flow) is waited for on the I/O
thread and blocks it for that time; the sender's WAN overhead ``os_w`` is not charged.

References
----------
H. Saito, K. Taura, T. Chikayama, *Collective operations for wide-area message passing
systems using adaptive spanning trees* (seed 004), sec. III (virtual nodes, joins and
leaves), IV-A (probes), IV-D (broadcast), IV-E (reduction).
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import heapq
import hmac
import itertools
import math
import os
import pickle
import queue
import random
import secrets as _secrets
import socket
import struct
import threading
import time
from collections import deque
from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any, Protocol

import zmq

from gridcoll.errors import GroupError, ParameterError, WireError
from gridcoll.phoenix import protocol as p
from gridcoll.phoenix.wire import MAX_MESSAGE, OPS, Codec, Reader, Writer

__all__ = ["Delivery", "Emulation", "Group", "GroupError", "GroupStats", "ReduceResult"]

_MAGIC, _VERSION = b"GZ", 2
_BEAT_BODY = struct.Struct("<Qddd")  # your messages taken, sent at, your last beat's
# sent-at (0: none yet), how long since it arrived here
RTT_GAIN = 2.0
"""A heartbeat round trip this many times faster than the core's measurement is given
to the core (``Remeasured``)."""
RTT_RESOLUTION_S = 1e-4
"""The smallest round trip a probe or heartbeat reports to the core (``rtt_resolution_s``).
The core tells a LAN neighbour from a remote peer by ratios of RTTs (``NEAR_RATIO``), and
below about a tenth of a millisecond two timings of one loopback link differ by that
much: in fig. 9's measured run on 32 processes and 2 cores, sponsors' fastest LAN round
trips were 24-51 us and their joiners' 45-72 us, so 5 of 16 joiners found their own
LAN's sponsor remote and probed every member over the wide area. Real LANs are above
it or near it; wide-area links far above."""
_SITES = 1 << (62 - p.SITE_SHIFT)
"""How many sites a process id can name (module doc, "Joining and ids")."""
_HEAD = struct.Struct("<2sBBd")  # magic, version, kind, emulation stamp (NaN: none)
_HELLO, _CHALLENGE, _AUTH, _ACK, _REFUSED = 1, 2, 3, 4, 5
_DIR, _MSG, _PING, _PONG, _FETCH, _DATA, _SEGS, _BEAT = 6, 7, 8, 9, 10, 11, 12, 13
_NONCE = 32
_MAX_PENDING = 256
"""Unauthenticated connections remembered at once (older ones are forgotten)."""
_POLL_CAP_S = 0.25
_DRAIN = 256
_PING_BODY = struct.Struct("<QQd")  # token, the pinger's id, its send time
_PONG_BODY = struct.Struct("<Qdd")  # token, the ping's send time, how long it waited here
_FETCH_BODY = struct.Struct("<QQdI")  # token, the asker's id, its send time, bytes wanted
_DATA_HEAD = struct.Struct("<QddHH")  # token, the fetch's send time, its wait here,
# this chunk's index, the chunk count; then the chunk's bytes
_CHUNK = 32 * 1024  # a download's bytes per datagram
_UDP_MAC = 16  # bytes of HMAC-SHA256 that end a datagram
_PING_AGAIN_S = 0.5
"""A ping unanswered this long is sent again (a datagram may be lost)."""
_FETCH_AGAIN_S = 1.0
"""A download with no new chunk for this long is asked again if none came, else ends
with the chunks that came."""
_SO_TIMESTAMPNS = getattr(socket, "SO_TIMESTAMPNS", 35)  # Linux's value; SCM_ the same
_UDP_LAYOUTS = {_PING: _PING_BODY, _PONG: _PONG_BODY, _FETCH: _FETCH_BODY, _DATA: _DATA_HEAD}
_NO_RANK = 2**64 - 1


class Emulation(Protocol):
    """What :class:`Group` needs of :class:`gridcoll.runtime.emulation.Emulator`."""

    def crosses(self, a: int, b: int) -> bool: ...

    def site(self, rank: int) -> int: ...

    def reserve(self, a: int, b: int, nbytes: int, now: float) -> float: ...

    def wait(self, stamp: float, a: int, b: int, nbytes: int) -> float: ...


@dataclass
class GroupStats:
    """Counters of one process's transport (module doc, security rule 2)."""

    frames_in: int = 0
    frames_out: int = 0
    malformed: int = 0
    """Frames dropped because they did not parse."""
    oversized: int = 0
    """Frames dropped because they exceeded ``max_message``."""
    unauthenticated: int = 0
    """Frames dropped because their connection had not authenticated."""
    auth_failed: int = 0
    """Handshakes refused (wrong secret, bad MAC)."""
    unroutable: int = 0
    """Core messages for a process whose endpoint is unknown (should stay 0)."""
    undeliverable: int = 0
    """Completed broadcasts the application could not be given (a pickle without
    ``trusted_pickle``, missing segments)."""
    probes: int = 0
    pings: int = 0
    """Ping-pongs answered (``probe_pings`` per probe)."""
    kernel_stamped: int = 0
    """Probe datagrams whose arrival the kernel timed (module doc, "Probes and round
    trips"); the others are timed when read."""
    downloads: int = 0
    """Probe downloads made (a probe of a climbed-to ancestor may ping only)."""
    rtt_samples: int = 0
    """Round trips timed by heartbeats (module doc, "Heartbeats and failures")."""
    remeasured: int = 0
    """Times the core was told of a faster round trip (``Remeasured``)."""
    segments: int = 0
    """Segments of pipelined broadcasts delivered here."""
    emulated: int = 0
    """Frames held back by the WAN emulation."""


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


@dataclass
class _Peer:
    """Our DEALER to one peer's ROUTER."""

    address: str
    sock: zmq.Socket
    nonce: bytes
    pid: int | None = None
    rank: int | None = None
    challenge: bytes | None = None
    verified: bool = False
    failed: bool = False
    queue: list[tuple[int, bytes, int | None]] = field(default_factory=list)
    told: set[int] = field(default_factory=set)


@dataclass
class _Conn:
    """A connection into our ROUTER."""

    pid: int
    rank: int | None
    address: str
    nonce_a: bytes
    nonce_b: bytes
    authed: bool = False


@dataclass
class _Probe:
    peer: int
    asked: float  # the last ping or fetch sent, or chunk come (module doc)
    deadline: float
    nbytes: int  # the download after the pings (0: none)
    rtt: float = math.inf
    fetch_started: float = 0.0
    pings: int = 0  # ping-pongs done
    arrived: dict[int, float] = field(default_factory=dict)  # the download's chunks come:
    # index -> arrival
    count: int = 0  # the download's chunks
    took: float = 0.0  # from the fetch to the last chunk come, less its wait there


def _mac(secret: bytes, role: bytes, a: bytes, b: bytes, pid: int, rank: int, addr: str) -> bytes:
    msg = b"gridcoll-dynamic-v1/" + role + a + b + struct.pack("<QQ", pid, rank) + addr.encode()
    return hmac.new(secret, msg, hashlib.sha256).digest()


def _rank_code(rank: int | None) -> int:
    return _NO_RANK if rank is None else rank


def _rank_of(code: int) -> int | None:
    return None if code == _NO_RANK else code


def _ping_socket(host: str) -> socket.socket:
    """A non-blocking UDP socket on a free port of ``host`` whose datagrams the kernel
    stamps with their arrival time, where it can (Linux)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_DGRAM)
    with contextlib.suppress(OSError):
        sock.setsockopt(socket.SOL_SOCKET, _SO_TIMESTAMPNS, 1)
    sock.bind((host.strip("[]"), 0))
    sock.setblocking(False)
    return sock


def _download_rate(probe: _Probe) -> float:
    """A probe download's rate (sec. IV-A) from its chunks' arrivals: the download's
    bytes over ``rtt / 2 + count * gap``, its way there plus its chunks' passage, where
    ``gap`` is the time between two chunks' arrivals at the bottleneck's rate. Sent
    back to back, the chunks are spaced by the slowest link they cross, whatever queued
    ahead of them (packet-train dispersion: C. Dovrolis, P. Ramanathan, D. Moore, "What
    do packet dispersion techniques measure?", INFOCOM 2001), so the rate is the
    link's, as the simulator's probe gives the model's ``nbytes / (L + g(nbytes))``: in
    fig. 9's measured run the bytes over the time to the last chunk gave 0.2-0.63 of the
    link's rate for 21 of 91 wide-area downloads made during broadcasts (queued behind
    their data), the dispersion 1.01-1.04 for all. With one chunk only (the rest
    lost): its bytes over the time from the fetch, less the fetch's wait at the peer."""
    if not probe.arrived:
        return 0.0
    first, last = min(probe.arrived), max(probe.arrived)
    spread = probe.arrived[last] - probe.arrived[first]
    if last > first and spread > 0 and math.isfinite(probe.rtt):
        gap = spread / (last - first)
        return _rate_bytes(probe) / (probe.rtt / 2 + gap * probe.count)
    return min(probe.nbytes, _CHUNK) / max(probe.took, 1e-9)


def _rate_bytes(probe: _Probe) -> int:
    """The bytes :func:`_download_rate` counts (a whole download's)."""
    return min(probe.nbytes, p.PROBE_BYTES)


def _again(probe: _Probe) -> float:
    """How long a probe waits for its next datagram before it acts (module doc)."""
    return _FETCH_AGAIN_S if probe.fetch_started else _PING_AGAIN_S


def _udp_address(address: str) -> tuple[str, int]:
    """The ping socket of the process whose ROUTER is at ``address`` (the same port)."""
    host, _, port = address.removeprefix("tcp://").rpartition(":")
    return host.strip("[]"), int(port)


def _kernel_arrival(ancillary: list[tuple[int, int, bytes]]) -> float | None:
    """A datagram's arrival on the ``time.monotonic`` clock, from the kernel's
    ``SCM_TIMESTAMPNS`` (the wall clock), or None without one."""
    for level, kind, data in ancillary:
        if level == socket.SOL_SOCKET and kind == _SO_TIMESTAMPNS and len(data) >= 16:
            sec, nsec = struct.unpack_from("qq", data)
            return time.monotonic() - (time.time() - (sec + nsec * 1e-9))
    return None


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
        emulator: the WAN emulation (module doc, "WAN emulation"); None: real network.
        on_deliver: ``f(op_id, vnodes, data)`` for each broadcast delivered whole to
            some of this process's vnodes, on the I/O thread; without it, deliveries
            queue for :meth:`deliveries`.
        on_reduce: ``f(ReduceResult)`` at the root vnode's owner.
        trusted_pickle: carry arbitrary objects as pickles (trusted peers only).
        max_message: the largest frame accepted (bytes).
        probe_timeout_s: a probe unanswered this long measures ``rtt = inf``.
        probe_pings: ping-pongs per probe; the fastest is its RTT (module doc).
        rtt_resolution_s: the smallest round trip reported to the core; a faster one
            is reported as this (module doc, "Probes and round trips").
        min_give_up_s: the root of a reduction waits at least this long before it
            reports missing vnodes (module doc, "Timers").
        heartbeat_s: send every member a heartbeat this often (None: never).
        heartbeat_timeout_s: a member heard nothing from for this long is suspected.
        ack_s: between beats, tell the members we took core messages from how many,
            this often (module doc; None: ``heartbeat_s / 4``).
        on_suspect: ``f(pid)`` when a member is first suspected (module doc,
            "Heartbeats and failures"), on the I/O thread.
        fail_suspects: report a suspect to the core as dead (module doc); False: only
            suspect it.
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
        emulator: Emulation | None = None,
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
        self._on_suspect = on_suspect
        self.fail_suspects = fail_suspects
        self._failures: list[p.PeerLost] = []
        self._abandoned: list[p.Abandoned] = []
        self._beat_at: float | None = None
        self._fed_from: dict[int, int] = {}  # peer -> its core messages fed to our core
        self._inbox: list[p.Event] = []  # messages read, fed to the core after the drain
        self._fed = False  # the core was fed this step: publish its view
        self._acked: dict[int, tuple[int, int]] = {}  # peer -> how many of ours it took,
        # by its beat before the last and by its last
        self._last_seen: dict[int, float] = {}
        self._beat_in: dict[int, tuple[float, float]] = {}  # peer -> its last beat's time
        # (its clock) and when it arrived (ours): echoed in our next beat to it
        self._rtt_floor: dict[int, float] = {}  # peer -> the fastest round trip seen
        self._passage: dict[int, tuple[int, float]] = {}  # peer -> its last download's
        # bytes and their time less half the RTT: the chunks' passage (_download_rate)
        self._suspects: set[int] = set()
        self._next_beat = self._next_ack = 0.0
        self._watched: frozenset[int] = frozenset()  # the members at the last watch
        self._watch_at = 0.0  # when one of them may time out (_heartbeat)
        self._told: dict[int, int] = {}  # peer -> the count of its messages we last sent it
        self._on_deliver, self._on_reduce = on_deliver, on_reduce
        self._codec = Codec(trusted_pickle=trusted_pickle, max_size=max_message)
        founders = None if founder_vnodes is None else {self.pid: range(founder_vnodes)}
        rng = random.Random(seed if seed is not None else _secrets.randbits(64))
        self.core = p.Process(
            self.pid, rng=rng, founder_vnodes=founders, **dict(core_options or {})
        )
        self.stats = GroupStats()
        self.error: str | None = None
        self._open_sockets(bind)
        self._directory: dict[int, tuple[str, int | None]] = {self.pid: (self.address, rank)}
        self._peers: dict[str, _Peer] = {}
        self._by_sock: dict[zmq.Socket, _Peer] = {}
        self._conns: dict[bytes, _Conn] = {}
        self._pending: deque[bytes] = deque()
        self._commands: queue.SimpleQueue[tuple[Callable[[], Any], Future]] = queue.SimpleQueue()
        self._timers: list[tuple[float, int, Hashable]] = []
        self._timer_seq: dict[Hashable, int] = {}
        self._held: dict[tuple[str, object], deque] = {}
        self._held_heap: list[tuple[float, int, tuple[str, object]]] = []
        self._probes: dict[int, _Probe] = {}
        self._segs: dict[Hashable, dict[int, bytes]] = {}
        self._got: dict[Hashable, dict[int, set[int]]] = {}
        self._carried: dict[bytes, list[tuple[Hashable, list[tuple[int, bytes]]]]] = {}
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

    def _open_sockets(self, bind: str) -> None:
        """The ROUTER and the ping socket (UDP) on one free port of ``bind``, and the
        wake-up pipe, all polled."""
        self._ctx = zmq.Context()
        self._router = self._ctx.socket(zmq.ROUTER)
        self._tune(self._router)
        host = "0.0.0.0" if bind == "*" else bind
        for attempt in itertools.count(1):  # a free UDP port, then TCP on the same number
            self._udp = _ping_socket(host)
            try:
                self._router.bind(f"tcp://{bind}:{self._udp.getsockname()[1]}")
                break
            except zmq.ZMQError:
                self._udp.close()
                if attempt == 100:
                    raise
        self.address: str = self._router.getsockopt_string(zmq.LAST_ENDPOINT)
        self._poller = zmq.Poller()
        self._poller.register(self._router, zmq.POLLIN)
        self._poller.register(self._udp, zmq.POLLIN)
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_r, False)
        self._poller.register(self._wake_r, zmq.POLLIN)

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
        group._call(lambda: group._peer(address))
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
        """Members silent for longer than ``heartbeat_timeout_s`` (module doc,
        "Heartbeats"); a member is dropped from it when heard from again."""
        return self._view.suspects

    @property
    def failures(self) -> tuple[p.PeerLost, ...]:
        """The members this process learnt had died, in order (module doc, "Heartbeats
        and failures"): each with the vnodes it re-mapped, their heir and the
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
        for sock in (self._router, *(peer.sock for peer in self._peers.values())):
            sock.close(linger=100)
        self._ctx.term()
        self._udp.close()
        for fd in (self._wake_r, self._wake_w):
            with contextlib.suppress(OSError):
                os.close(fd)
        self._wake_r = self._wake_w = -1

    def __enter__(self) -> Group:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- calls into the I/O thread -----------------------------------------------------------
    def _wake(self) -> None:
        with contextlib.suppress(OSError):
            os.write(self._wake_w, b"x")

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
        """One round: wait for a frame, a call or a deadline, then handle what is due."""
        ready = dict(self._poller.poll(self._poll_ms()))
        if self._wake_r in ready:
            with contextlib.suppress(BlockingIOError):
                os.read(self._wake_r, 4096)
        if self._router in ready:
            self._drain_router()
        if self._udp.fileno() in ready:
            self._drain_udp()
        for sock in [s for s in ready if s in self._by_sock]:
            self._drain_peer(self._by_sock[sock])
        self._release_held()
        self._feed_inbox()
        self._fire_timers()
        self._expire_probes()
        self._heartbeat()
        self._run_commands()
        if ready or self._fed:
            self._fed = False
            self._publish()  # the core or the counters may have moved: wake the waiters

    def _poll_ms(self) -> int:
        deadlines = [h[0][0] for h in (self._timers, self._held_heap) if h]
        deadlines += [pr.deadline for pr in self._probes.values()]
        deadlines += [pr.asked + _again(pr) for pr in self._probes.values()]
        if self._beating():  # the next beat or ack, and the next member to time out
            deadlines.append(min(self._next_beat, self._next_ack, self._watch_at))
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
            frozenset(self._suspects),
            tuple(self._failures),
            tuple(self._abandoned),
        )
        with self._changed:
            self._view = view
            self._changed.notify_all()

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
        self._gc_segments()
        self._fed = True  # published at the end of the step

    def _act(self, action: p.Action) -> None:
        if isinstance(action, p.Send):
            self._send_message(action.dst, action.message)
        elif isinstance(action, p.Deliver):
            self._on_segment(action)
        elif isinstance(action, p.SetTimer):
            seq = next(self._seq)
            self._timer_seq[action.timer] = seq
            delay = action.delay_s
            if isinstance(action.timer, tuple) and action.timer[:1] == ("reduce-give-up",):
                delay = max(delay, self.min_give_up_s)
            heapq.heappush(self._timers, (time.monotonic() + delay, seq, action.timer))
        elif isinstance(action, p.Probe):
            self._start_probe(action.peer, action.nbytes)
        elif isinstance(action, p.PeerLost):
            self._failures.append(action)
        elif isinstance(action, p.Abandoned):
            self._abandoned.append(action)
            got = self._got.get(action.op_id, {})
            for v in action.vnodes:
                got.pop(v, None)
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

    # -- broadcasts: reassembly -------------------------------------------------------------
    def _on_segment(self, d: p.Deliver) -> None:
        """One segment for some vnodes. ``_got`` mirrors the core's ``partial`` (the
        segment indices each vnode holds, carried in with handovers); a vnode is
        complete when it holds all ``nsegments``, and is then handed out once."""
        if d.nsegments == 1:
            self._hand_out(d.op_id, d.vnodes, d.payload)
            return
        self.stats.segments += 1
        if isinstance(d.payload, bytes):
            self._segs.setdefault(d.op_id, {})[d.segment] = d.payload
        got = self._got.setdefault(d.op_id, {})
        done = []
        for v in d.vnodes:
            have = got.setdefault(v, set())
            have.add(d.segment)
            if len(have) == d.nsegments:
                del got[v]
                done.append(v)
        if not done:
            return
        store = self._segs.get(d.op_id, {})
        parts = [store.get(i) for i in range(d.nsegments)]
        if any(part is None for part in parts):
            self.stats.undeliverable += len(done)
            return
        self._hand_out(d.op_id, frozenset(done), b"".join(parts))  # type: ignore[arg-type]

    def _hand_out(self, op_id: Hashable, vnodes: frozenset[int], payload: object) -> None:
        data = payload
        if isinstance(op_id, tuple) and len(op_id) == 3 and op_id[2] == "pickle":
            if not self.trusted_pickle or not isinstance(payload, bytes):
                self.stats.undeliverable += 1
                return
            data = pickle.loads(payload)  # trusted peers only (module doc, rule 4)
        if self._on_deliver is not None:
            self._callback(self._on_deliver, op_id, vnodes, data)
        else:
            self._deliveries.put(Delivery(op_id, vnodes, data))

    def _gc_segments(self) -> None:
        """Forget the bytes of broadcasts no vnode here is halfway through."""
        for op in [op for op in self._segs if not self._got.get(op)]:
            del self._segs[op]
            self._got.pop(op, None)

    def _carry_segments(self, dst: int, m: p.Handover) -> None:
        """Before a Handover, send the bytes of the segments its vnodes hold (module doc)."""
        wanted: dict[Hashable, set[int]] = {}
        for v, state in m.states:
            for op, got in state.partial.items():
                wanted.setdefault(op, set()).update(got)
                self._got.get(op, {}).pop(v, None)
        for op, segments in sorted(wanted.items(), key=lambda kv: repr(kv[0])):
            store = self._segs.get(op, {})
            for i in sorted(i for i in segments if i in store):  # one frame each: small
                w = Writer()
                w.value(op)
                w.u32(1)
                w.u32(i)
                w.raw(store[i])
                self._send_frame(dst, _SEGS, bytes(w.out))

    def _take_segments(self, route: bytes, body: memoryview) -> None:
        """Keep carried segments until the connection's next core message (the
        Handover they precede) is fed, so no collection runs in between."""
        r = Reader(body)
        op = r.value()
        if not isinstance(op, Hashable):
            raise WireError("segment op id is not hashable")
        items = [(r.u32(), r.raw()) for _ in range(r.count(8))]
        r.end()
        self._carried.setdefault(route, []).append((op, items))

    # -- sending --------------------------------------------------------------------------------
    def _send_message(self, dst: int, m: p.Message) -> None:
        if isinstance(m, p.Handover):
            self._carry_segments(dst, m)
        try:
            body = self._codec.encode(m)
        except WireError as err:  # e.g. a value the codec cannot carry: the core is stuck
            self.error = f"cannot send {type(m).__name__}: {err}"
            return
        self._send_frame(dst, _MSG, body)

    def _send_frame(self, dst: int, kind: int, body: bytes) -> None:
        entry = self._directory.get(dst)
        if entry is None:
            self.stats.unroutable += 1
            return
        peer = self._peer(entry[0])
        if kind == _MSG:
            self._tell_directory(peer, entry[1])
        self._peer_send(peer, kind, body, entry[1])

    def _tell_directory(self, peer: _Peer, to_rank: int | None) -> None:
        new = [pid for pid in self._directory if pid not in peer.told]
        if not new:
            return
        w = Writer()
        w.u32(len(new))
        for pid in new:
            addr, rank = self._directory[pid]
            w.u64(pid)
            w.u64(_rank_code(rank))
            w.text(addr)
        peer.told.update(new)
        self._peer_send(peer, _DIR, bytes(w.out), to_rank)

    def _peer(self, address: str) -> _Peer:
        peer = self._peers.get(address)
        if peer is None:
            sock = self._ctx.socket(zmq.DEALER)
            self._tune(sock)
            sock.connect(address)
            peer = _Peer(address, sock, _secrets.token_bytes(_NONCE))
            self._peers[address] = peer
            self._by_sock[sock] = peer
            self._poller.register(sock, zmq.POLLIN)
            w = Writer()
            w.out += peer.nonce
            w.u64(self.pid)
            w.u64(_rank_code(self.rank))
            w.text(self.address)
            self._write(sock, None, _HELLO, bytes(w.out))
        return peer

    def _peer_send(self, peer: _Peer, kind: int, body: bytes, to_rank: int | None) -> None:
        if peer.failed:
            self.stats.unroutable += 1
        elif peer.challenge is None:
            peer.queue.append((kind, body, to_rank))
        else:
            self._write(peer.sock, to_rank, kind, body)

    def _write(
        self,
        sock: zmq.Socket,
        to_rank: int | None,
        kind: int,
        body: bytes,
        route: bytes | None = None,
    ) -> None:
        """One frame, stamped by the emulation when it crosses the emulated WAN."""
        frame = self._head(to_rank, kind, len(body)) + body
        self.stats.frames_out += 1
        if route is None:
            sock.send(frame, copy=len(frame) < 65536)
        else:
            sock.send_multipart([route, frame], copy=len(frame) < 65536)

    def _head(self, to_rank: int | None, kind: int, nbytes: int) -> bytes:
        """A frame's header: its emulation stamp if it crosses the emulated WAN."""
        stamp = math.nan
        nbytes += _HEAD.size
        emu, me = self.emulator, self.rank
        if emu is not None and me is not None and to_rank is not None and emu.crosses(me, to_rank):
            stamp = emu.reserve(me, to_rank, nbytes, time.monotonic())
        return _HEAD.pack(_MAGIC, _VERSION, kind, stamp)

    def _tune(self, sock: zmq.Socket) -> None:
        sock.setsockopt(zmq.SNDHWM, 0)
        sock.setsockopt(zmq.RCVHWM, 0)
        sock.setsockopt(zmq.LINGER, 1000)
        sock.setsockopt(zmq.MAXMSGSIZE, 2 * self.max_message + 65536)

    # -- receiving --------------------------------------------------------------------------
    def _parse(self, data: memoryview) -> tuple[int, float, memoryview] | None:
        if len(data) > self.max_message + 65536:
            self.stats.oversized += 1
            return None
        if len(data) < _HEAD.size:
            self.stats.malformed += 1
            return None
        magic, version, kind, stamp = _HEAD.unpack_from(data)
        if magic != _MAGIC or version != _VERSION or not _HELLO <= kind <= _BEAT:
            self.stats.malformed += 1
            return None
        return kind, stamp, data[_HEAD.size :]

    def _drain_router(self) -> None:
        for _ in range(_DRAIN):
            try:
                parts = self._router.recv_multipart(zmq.NOBLOCK, copy=False)
            except zmq.Again:
                return
            self.stats.frames_in += 1
            if len(parts) != 2:
                self.stats.malformed += 1
                continue
            route, data = parts[0].bytes, parts[1].buffer
            parsed = self._parse(data)
            if parsed is not None:
                self._from_conn(route, *parsed, len(data))

    def _drain_peer(self, peer: _Peer) -> None:
        for _ in range(_DRAIN):
            try:
                frame = peer.sock.recv(zmq.NOBLOCK, copy=False)
            except zmq.Again:
                return
            self.stats.frames_in += 1
            parsed = self._parse(frame.buffer)
            if parsed is not None:
                kind, stamp, body = parsed
                self._hold(
                    ("peer", peer.address),
                    stamp,
                    peer.rank,
                    len(frame.buffer),
                    lambda _, k=kind, b=body: self._from_peer(peer, k, b),
                )

    def _from_conn(self, route: bytes, kind: int, stamp: float, body: memoryview, n: int) -> None:
        conn = self._conns.get(route)
        if conn is not None and conn.authed:
            self._last_seen[conn.pid] = time.monotonic()
        try:
            if kind == _HELLO:
                self._on_hello(route, conn, body)
            elif kind == _AUTH:
                self._on_auth(route, conn, body)
            elif conn is None or not conn.authed:
                self.stats.unauthenticated += 1
            else:
                self._hold(
                    ("conn", route),
                    stamp,
                    conn.rank,
                    n,
                    lambda arrival: self._on_conn_frame(route, conn, kind, body, arrival),
                )
        except WireError:
            self.stats.malformed += 1

    def _on_hello(self, route: bytes, conn: _Conn | None, body: memoryview) -> None:
        if conn is not None:
            self.stats.unauthenticated += 1
            return
        r = Reader(body)
        nonce_a = bytes(r.take(_NONCE)) if len(body) >= _NONCE else b""
        if len(nonce_a) != _NONCE:
            raise WireError("short nonce")
        pid, rank, addr = r.u64(), _rank_of(r.u64()), r.text()
        r.end()
        nonce_b = _secrets.token_bytes(_NONCE)
        self._conns[route] = _Conn(pid, rank, addr, nonce_a, nonce_b)
        self._pending.append(route)
        while len(self._pending) > _MAX_PENDING:
            old = self._pending.popleft()
            if (c := self._conns.get(old)) is not None and not c.authed:
                del self._conns[old]
        self._write(self._router, None, _CHALLENGE, nonce_b, route)

    def _on_auth(self, route: bytes, conn: _Conn | None, body: memoryview) -> None:
        if conn is None or conn.authed:
            self.stats.unauthenticated += 1
            return
        want = _mac(
            self.secret,
            b"client",
            conn.nonce_a,
            conn.nonce_b,
            conn.pid,
            _rank_code(conn.rank),
            conn.address,
        )
        if len(body) != len(want) or not hmac.compare_digest(bytes(body), want):
            self.stats.auth_failed += 1
            del self._conns[route]
            self._write(self._router, None, _REFUSED, b"bad secret", route)
            return
        conn.authed = True
        self._directory.setdefault(conn.pid, (conn.address, conn.rank))
        w = Writer()
        w.u64(self.pid)
        w.u64(_rank_code(self.rank))
        w.text(self.address)
        w.out += _mac(
            self.secret,
            b"server",
            conn.nonce_a,
            conn.nonce_b,
            self.pid,
            _rank_code(self.rank),
            self.address,
        )
        self._write(self._router, None, _ACK, bytes(w.out), route)

    def _on_conn_frame(
        self, route: bytes, conn: _Conn, kind: int, body: memoryview, arrival: float
    ) -> None:
        try:
            if kind == _MSG:
                m = self._codec.decode(body)
                for op, items in self._carried.pop(route, ()):
                    self._segs.setdefault(op, {}).update(items)
                if isinstance(m, p.Handover):  # the segments each vnode brings
                    for v, state in m.states:
                        for op, got in state.partial.items():
                            self._got.setdefault(op, {})[v] = set(got)
                self._fed_from[conn.pid] = self._fed_from.get(conn.pid, 0) + 1
                self._inbox.append(p.Received(conn.pid, m))  # fed after the drain
            elif kind == _DIR:
                self._on_directory(body)
            elif kind == _SEGS:
                self._take_segments(route, body)
            elif kind == _BEAT:  # (_from_conn noted the time) and how many we sent it took
                r = Reader(body)
                took, sent_at, echo, held = r.fields(_BEAT_BODY)
                r.end()
                last = self._acked.get(conn.pid, (0, 0))[1]
                self._acked[conn.pid] = (last, max(took, last))
                self._beat_in[conn.pid] = (sent_at, arrival)
                if echo > 0:  # our beat's time, and how long it waited there
                    self._sample_rtt(conn.pid, arrival - echo - held)
            else:
                self.stats.malformed += 1
        except WireError:
            self.stats.malformed += 1

    def _on_directory(self, body: memoryview) -> None:
        r = Reader(body)
        entries = [(r.u64(), _rank_of(r.u64()), r.text()) for _ in range(r.count(20))]
        r.end()
        for pid, rank, addr in entries:
            if pid != self.pid:
                self._directory.setdefault(pid, (addr, rank))

    def _from_peer(self, peer: _Peer, kind: int, body: memoryview) -> None:
        try:
            if kind == _CHALLENGE:
                self._on_challenge(peer, body)
            elif kind == _ACK:
                self._on_ack(peer, body)
            elif kind == _REFUSED:
                self._fail_peer(peer, "the peer refused our secret")
            elif not peer.verified:
                self.stats.unauthenticated += 1
            else:
                self.stats.malformed += 1
        except WireError:
            self.stats.malformed += 1

    def _on_challenge(self, peer: _Peer, body: memoryview) -> None:
        if peer.challenge is not None or len(body) != _NONCE:
            raise WireError("unexpected challenge")
        peer.challenge = bytes(body)
        mac = _mac(
            self.secret,
            b"client",
            peer.nonce,
            peer.challenge,
            self.pid,
            _rank_code(self.rank),
            self.address,
        )
        self._write(peer.sock, None, _AUTH, mac)
        queued, peer.queue = peer.queue, []
        for kind, b, to_rank in queued:
            self._peer_send(peer, kind, b, to_rank)

    def _on_ack(self, peer: _Peer, body: memoryview) -> None:
        r = Reader(body)
        pid, rank, addr = r.u64(), _rank_of(r.u64()), r.text()
        mac = bytes(r.take(32))
        r.end()
        if peer.challenge is None or peer.verified:
            raise WireError("unexpected ack")
        want = _mac(self.secret, b"server", peer.nonce, peer.challenge, pid, _rank_code(rank), addr)
        if not hmac.compare_digest(mac, want):
            self.stats.auth_failed += 1
            self._fail_peer(peer, "the peer does not know the secret")
            return
        peer.verified, peer.pid, peer.rank = True, pid, rank
        self._directory.setdefault(pid, (peer.address, rank))
        if self.core.state is p.State.IDLE and self.core.table is None and not self._refused:
            self._feed(p.JoinRequested(pid))  # we were joining through this peer

    def _fail_peer(self, peer: _Peer, reason: str) -> None:
        peer.failed = True
        self.stats.unroutable += len(peer.queue)
        peer.queue.clear()
        if self.core.state is p.State.IDLE:
            self._refused.append(reason)
            self._publish()

    # -- heartbeats ---------------------------------------------------------------------------
    def _heartbeat(self) -> None:
        """Beat every member every ``heartbeat_s``; suspect the members silent too long
        (checked on every turn of the loop once the least recently heard member may
        have timed out, or the members changed: a death is found when the timeout
        passes, not at the next beat)."""
        if not self._beating():
            return
        now = time.monotonic()
        if now >= self._next_beat:
            self._beat(now, self.heartbeat_s)
        elif now >= self._next_ack:
            self._ack(now)
        members = self.core.members
        if now < self._watch_at and not self._suspects and members == self._watched:
            return  # no one can have timed out yet (last sights only move later)
        dead, known = [], len(self._suspects)
        for pid in members - {self.pid}:
            seen = self._last_seen.setdefault(pid, now)  # silence counts from first sight
            if now - seen <= self.heartbeat_timeout_s:
                self._suspects.discard(pid)
            elif pid not in self._suspects:
                self._suspects.add(pid)
                dead.append(pid)
                if self._on_suspect is not None:
                    self._callback(self._on_suspect, pid)
        self._watched = frozenset(members)
        self._watch_at = self._silence_deadline()
        for pid in dead if self.fail_suspects else ():
            # the beat before the last: what it had passed on; the last: what it took in
            acked = self._acked.get(pid)
            self._feed(p.PeerFailed(pid, *acked) if acked else p.PeerFailed(pid))
        self._suspects &= self.core.members
        if dead or len(self._suspects) != known:
            self._publish()

    def _silence_deadline(self) -> float:
        """When the member heard from least recently (suspects aside) times out."""
        watched = self.core.members - self._suspects - {self.pid}
        seen = [self._last_seen[pid] for pid in watched if pid in self._last_seen]
        return min(seen, default=math.inf) + self.heartbeat_timeout_s

    def _beating(self) -> bool:
        """Whether this process beats and watches its members: only a member (ACTIVE or
        LEAVING). The I/O loop waits for the next beat only then: a JOINING or LEFT
        process never sends it, and a beat time left in the past would make every poll
        return at once (a LEFT process of fig. 9's measured run spun a core so)."""
        return self.heartbeat_s is not None and self.core.state in (
            p.State.ACTIVE,
            p.State.LEAVING,
        )

    def _beat(self, now: float, period: float) -> None:
        """Send every member a beat with how many of its messages we took in."""
        self._next_beat = now + period
        if self._beat_at is not None and now - self._beat_at > 2 * period:
            held = now - self._beat_at - period
            for pid in self._last_seen:  # our own pause is not theirs
                self._last_seen[pid] += held
        self._beat_at = now
        self._ack(now, self.core.members - {self.pid})
        self._publish()

    def _ack(self, now: float, to: Iterable[int] | None = None) -> None:
        """Send a beat to each of ``to`` (None: each member whose count of messages we
        took in moved since we last told it), and look again in ``ack_s``."""
        if self.ack_s is not None:
            self._next_ack = now + self.ack_s
        if to is None:
            to = [q for q, n in self._fed_from.items() if n != self._told.get(q)]
        for pid in to:
            if pid not in self.core.members:
                continue
            fed = self._told[pid] = self._fed_from.get(pid, 0)
            echo, got_at = self._beat_in.get(pid, (0.0, now))
            self._send_frame(pid, _BEAT, _BEAT_BODY.pack(fed, now, echo, now - got_at))

    def _sample_rtt(self, pid: int, rtt: float) -> None:
        """A round trip to ``pid`` timed by a heartbeat and its echo: the fastest seen is
        kept (:meth:`_probe_done` takes it if faster), and the core is told when it
        beats by ``RTT_GAIN`` what the core holds (``Remeasured``)."""
        if not rtt > 0:
            return
        rtt = max(rtt, self.rtt_resolution_s)
        self.stats.rtt_samples += 1
        best = self._rtt_floor[pid] = min(rtt, self._rtt_floor.get(pid, math.inf))
        held = self.core.measured.get(pid)
        if held is not None and best * RTT_GAIN < held.rtt_s and self.core.state is p.State.ACTIVE:
            self.stats.remeasured += 1
            nbytes, passage = self._passage.get(pid, (0, 0.0))
            bw = nbytes / (best / 2 + passage) if nbytes else None
            self._feed(p.Remeasured(pid, best, bw))

    # -- the WAN emulation's delay heap ---------------------------------------------------------
    def _hold(
        self,
        key: tuple[str, object],
        stamp: float,
        src_rank: int | None,
        nbytes: int,
        handler: Callable[[float], None],
        read_at: float | None = None,
    ) -> None:
        """Run ``handler(arrival)`` once the emulated WAN delivers the frame (at once if
        not emulated), after every earlier frame of the same connection. ``arrival`` is
        when the frame came in: its emulated delivery time, else when it was read (module
        doc, "Probes and round trips")."""
        held = self._held.get(key)
        read_at = time.monotonic() if read_at is None else read_at
        if math.isnan(stamp) and not held:
            handler(read_at)
            return
        if not math.isnan(stamp):
            self.stats.emulated += 1
        item = (stamp, src_rank, nbytes, handler, read_at)
        if held:
            held.append(item)
            return
        self._held[key] = deque([item])
        self._push_held(key, stamp)

    def _push_held(self, key: tuple[str, object], stamp: float) -> None:
        at = stamp if stamp > 0 else time.monotonic()  # NaN and flow stamps: now
        heapq.heappush(self._held_heap, (at, next(self._seq), key))

    def _release_held(self) -> None:
        while self._held_heap and self._held_heap[0][0] <= time.monotonic():
            _, _, key = heapq.heappop(self._held_heap)
            held = self._held.get(key)
            while held:
                stamp, src_rank, nbytes, handler, arrival = held[0]
                if stamp > 0 and stamp > time.monotonic():
                    self._push_held(key, stamp)
                    break
                held.popleft()
                if not math.isnan(stamp) and self.emulator is not None and src_rank is not None:
                    arrival = self.emulator.wait(stamp, src_rank, self.rank, nbytes)
                handler(arrival)
            if not held:
                self._held.pop(key, None)

    # -- probes (sec. IV-A) -------------------------------------------------------------------
    def _start_probe(self, peer_pid: int, nbytes: int) -> None:
        self.stats.probes += 1
        now = time.monotonic()
        token = next(self._seq)
        if peer_pid not in self._directory:
            self._feed(p.ProbeResult(peer_pid, math.inf, 0.0))
            return
        self._probes[token] = _Probe(peer_pid, now, now + self.probe_timeout_s, nbytes)
        self._ping(peer_pid, token)

    def _ping(self, peer_pid: int, token: int) -> None:
        """A ping datagram to ``peer_pid``'s ping socket (module doc, "Probes and round
        trips"), stamped by the emulation as a frame is."""
        self._probes[token].asked = now = time.monotonic()
        address, rank = self._directory[peer_pid]
        self._datagram(address, rank, _PING, _PING_BODY.pack(token, self.pid, now))

    def _datagram(self, address: str, to_rank: int | None, kind: int, body: bytes) -> None:
        data = self._head(to_rank, kind, len(body) + _UDP_MAC) + body
        with contextlib.suppress(OSError):  # a lost ping is sent again
            self._udp.sendto(data + self._udp_mac(data), _udp_address(address))

    def _udp_mac(self, data: bytes | memoryview) -> bytes:
        return hmac.new(self.secret, b"gridcoll-udp/" + data, hashlib.sha256).digest()[:_UDP_MAC]

    def _drain_udp(self) -> None:
        """Probe datagrams, each timed by the kernel's arrival stamp (``SO_TIMESTAMPNS``;
        without one, when read)."""
        for _ in range(_DRAIN):
            try:
                data, ancillary, _, _ = self._udp.recvmsg(65536, 64)
            except (BlockingIOError, InterruptedError):
                return
            except OSError:  # e.g. an ICMP error for a datagram to a peer gone
                continue
            self.stats.frames_in += 1
            arrival = _kernel_arrival(ancillary)
            self.stats.kernel_stamped += arrival is not None
            self._on_datagram(data, time.monotonic() if arrival is None else arrival)

    def _on_datagram(self, data: bytes, arrival: float) -> None:
        """A probe's datagram, if its MAC proves the group's secret and its sender is
        known; then held as a frame is by the emulation."""
        parsed = self._parse(memoryview(data)[: max(len(data) - _UDP_MAC, 0)])
        if parsed is None:  # counted
            return
        kind, stamp, body = parsed
        layout = _UDP_LAYOUTS.get(kind)
        if layout is None or len(body) < layout.size or (kind != _DATA and len(body) > layout.size):
            self.stats.malformed += 1
            return
        if not hmac.compare_digest(self._udp_mac(data[:-_UDP_MAC]), data[-_UDP_MAC:]):
            self.stats.unauthenticated += 1
            return
        token, *fields = layout.unpack_from(body)
        if kind in (_PING, _FETCH):  # from a process asking: its id, its send time
            peer, answer = fields[0], functools.partial(self._answer, kind, token, *fields)
        elif token in self._probes:  # to our probe
            on = self._on_pong if kind == _PONG else self._on_chunk
            peer = self._probes[token].peer
            answer = functools.partial(on, token, *fields)
        else:
            return  # an expired probe's
        entry = self._directory.get(peer)
        if entry is None:
            self.stats.unauthenticated += 1
            return
        self._hold(("udp", peer), stamp, entry[1], len(data), answer, arrival)

    def _answer(self, kind: int, token: int, pid: int, sent: float, *rest: float) -> None:
        """Answer ``pid``'s ping with a pong, or its fetch with the chunks of the
        download (``rest[0]`` bytes, at most ``PROBE_BYTES``), each saying how long the
        request waited here since it arrived (``rest[-1]``, the arrival)."""
        address, rank = self._directory[pid]
        waited = time.monotonic() - rest[-1]
        if kind == _PING:
            self._datagram(address, rank, _PONG, _PONG_BODY.pack(token, sent, waited))
            return
        nbytes = min(int(rest[0]), p.PROBE_BYTES)
        count = max(1, -(-nbytes // _CHUNK))
        for i in range(count):
            size = min(_CHUNK, nbytes - i * _CHUNK)
            head = _DATA_HEAD.pack(token, sent, waited, i, count)
            self._datagram(address, rank, _DATA, head + bytes(size))

    def _on_pong(self, token: int, sent: float, waited: float, arrival: float) -> None:
        """A ping's answer: its round trip is the time from its sending to the pong's
        arrival, less how long it waited at the peer (module doc)."""
        probe = self._probes.get(token)
        if probe is None or probe.fetch_started:
            return  # expired, or an answer to a ping sent again
        probe.rtt = min(probe.rtt, max(arrival - sent - waited, self.rtt_resolution_s, 1e-9))
        probe.pings += 1
        self.stats.pings += 1
        if probe.pings < self.probe_pings:  # again: the fastest is the RTT
            self._ping(probe.peer, token)
        elif not probe.nbytes:  # pings only
            self._probe_done(token)
        else:
            self.stats.downloads += 1
            self._fetch(token)

    def _fetch(self, token: int) -> None:
        probe = self._probes[token]
        probe.fetch_started = probe.asked = now = time.monotonic()
        address, rank = self._directory[probe.peer]
        body = _FETCH_BODY.pack(token, self.pid, now, probe.nbytes)
        self._datagram(address, rank, _FETCH, body)

    def _on_chunk(
        self, token: int, sent: float, waited: float, i: int, count: int, at: float
    ) -> None:
        """A chunk of a download (its rate: :func:`_download_rate`)."""
        probe = self._probes.get(token)
        if probe is None or sent != probe.fetch_started or i in probe.arrived or i >= count:
            return  # expired, or of a fetch sent again
        probe.arrived[i], probe.count = at, count
        probe.took = max(probe.took, at - sent - waited)
        probe.asked = time.monotonic()
        if len(probe.arrived) == count:
            self._probe_done(token)

    def _probe_done(self, token: int) -> None:
        """Feed the core a probe's result: ``rtt`` its fastest ping, or a heartbeat's
        faster round trip ("Heartbeats and failures"), and its download's rate (0 if
        none: :func:`_download_rate`)."""
        probe = self._probes.pop(token)
        probe.rtt = min(probe.rtt, self._rtt_floor.get(probe.peer, math.inf))
        rate = _download_rate(probe)
        if rate > 0 and math.isfinite(probe.rtt):  # what a faster round trip leaves
            nbytes = _rate_bytes(probe)
            self._passage[probe.peer] = (nbytes, max(0.0, nbytes / rate - probe.rtt / 2))
        self._feed(p.ProbeResult(probe.peer, probe.rtt, rate))

    def _expire_probes(self) -> None:
        now = time.monotonic()
        for token, probe in list(self._probes.items()):
            if probe.deadline <= now:
                del self._probes[token]
                self._feed(p.ProbeResult(probe.peer, math.inf, 0.0))
            elif now < probe.asked + _again(probe):
                continue
            elif not probe.fetch_started:
                self._ping(probe.peer, token)
            elif not probe.arrived:
                self._fetch(token)
            else:  # a chunk lost: the rate of those that came
                self._probe_done(token)
