"""The group's transport: sockets, handshakes, frames and the emulated WAN's delay heap.

:class:`Transport` moves a :class:`~gridcoll.group.Group`'s bytes: it owns every socket,
authenticates every connection, keeps the process directory and holds back the frames
that cross the emulated WAN. It knows nothing of the core's messages: an authenticated
frame goes to the group (``on_frame``), a datagram to the probes (``on_datagram``).

Theory of operation
-------------------
*Sockets.* Each process binds one ROUTER socket (``tcp://127.0.0.1`` on a free port
unless ``bind=`` names another interface; :attr:`Transport.address` is its endpoint) and
opens one DEALER socket per peer it sends to, connected to the peer's ROUTER. Core
messages always travel on the sender's DEALER into the receiver's ROUTER, so the
frames from A to B share one TCP connection: FIFO per ordered pair, the core's rule 1.
The ROUTER only answers on the same connection (the handshake), which needs no address
of the asker. ROUTER identities are assigned by libzmq, not chosen by the peer, so a
connection, once authenticated, cannot be taken over by another. Beside the ROUTER, a
UDP socket with the ROUTER's port number carries the probes' datagrams
(:mod:`gridcoll.group.probes`), and a pipe wakes the I/O thread for an application call.

*Frames.* A frame is a header (:data:`HEAD`: magic, version, kind, emulation stamp)
and a body; the kinds are the handshake's (``HELLO`` ... ``REFUSED``), the directory
(``DIR``), a core message (``MSG``), the probes' datagrams (``PING`` ... ``DATA``),
carried segments (``SEGS``) and heartbeats (``BEAT``).

*Addresses.* The core names processes by id. The process directory (id -> endpoint,
rank) spreads with the messages: before a core message to a peer, the sender sends it
the directory entries it has not told it yet. A process learns of another only through
a core message, which its sender preceded by the entries it knew, so every member known
to the core has a known endpoint.

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
   not parse (:class:`~gridcoll.errors.WireError`), or one above ``max_message``
   bytes is dropped and counted in :class:`GroupStats`; nothing of it reaches the core,
   so it cannot change the mapping. libzmq closes a connection that sends more than
   twice ``max_message`` at once (``MAXMSGSIZE``) before it is read.
3. Sockets bind to loopback unless ``bind=`` says otherwise. Frames are authenticated
   once per connection, datagrams each by its MAC (:meth:`Transport.datagram`):
   HMAC-SHA256 under the group secret, truncated to 16 bytes; nothing is encrypted:
   across untrusted networks use a tunnel.
4. Payloads are bytes, numbers, strings, tuples and numeric numpy arrays; arbitrary
   objects travel as pickles only if every process of the group opted in with
   ``trusted_pickle=True`` (pickle runs code chosen by the sender).

WAN emulation
-------------
With an ``emulator`` (:class:`gridcoll.runtime.emulation.Emulator`), each process has a
``rank`` in the emulated grid. A frame from rank a to rank b that
``emulator.crosses(a, b)`` is stamped at send with
``emulator.reserve(a, b, nbytes, time.monotonic())``; the receiver keeps it in a delay
heap keyed by its stamp, per sender in FIFO order, and hands it on only once
``emulator.wait(stamp, a, b, nbytes)`` returns (at the stamp, so it does not sleep).
Other frames go on meanwhile. Probes cross the same emulation, so they measure the
emulated WAN. A fair-shared link's stamp (negative: a flow) is waited for on the I/O
thread and blocks it for that time; the sender's WAN overhead ``os_w`` is not charged.

References
----------
H. Saito, K. Taura, T. Chikayama, *Collective operations for wide-area message passing
systems using adaptive spanning trees* (seed 004), sec. III (joins), IV-A (probes).
"""

from __future__ import annotations

import contextlib
import hashlib
import heapq
import hmac
import itertools
import math
import os
import secrets as _secrets
import socket
import struct
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

import zmq

from gridcoll.errors import WireError
from gridcoll.phoenix.wire import Reader, Writer
from gridcoll.runtime.emulation import Emulator

__all__ = ["GroupStats", "Transport"]

HEAD = struct.Struct("<2sBBd")
"""A frame's header: magic, version, kind, emulation stamp (NaN: none)."""
_MAGIC, _VERSION = b"GZ", 2
HELLO, CHALLENGE, AUTH, ACK, REFUSED = 1, 2, 3, 4, 5
"""The handshake's frame kinds (security rule 1)."""
DIR, MSG, PING, PONG, FETCH, DATA, SEGS, BEAT = 6, 7, 8, 9, 10, 11, 12, 13
"""The other frame kinds: the directory, a core message, the probes' four datagrams,
carried segments and heartbeats."""
UDP_MAC = 16
"""Bytes of HMAC-SHA256 that end a datagram (security rule 3)."""
_NONCE = 32
_MAX_PENDING = 256
"""Unauthenticated connections remembered at once (older ones are forgotten)."""
_DRAIN = 256
"""Frames read from one socket per turn of the I/O loop."""
_SO_TIMESTAMPNS = getattr(socket, "SO_TIMESTAMPNS", 35)  # Linux's value; SCM_ the same
_NO_RANK = 2**64 - 1

Handler = Callable[[float], None]
"""What runs a frame once the emulated WAN delivers it, given its arrival time."""


@dataclass
class GroupStats:
    """Counters of one process's transport (:mod:`gridcoll.group.transport`, security
    rule 2)."""

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
    """Probe datagrams whose arrival the kernel timed (:mod:`gridcoll.group.probes`);
    the others are timed when read."""
    downloads: int = 0
    """Probe downloads made (a probe of a climbed-to ancestor may ping only)."""
    rtt_samples: int = 0
    """Round trips timed by heartbeats (:mod:`gridcoll.group.detector`)."""
    remeasured: int = 0
    """Times the core was told of a faster round trip (``Remeasured``)."""
    segments: int = 0
    """Segments of pipelined broadcasts delivered here."""
    emulated: int = 0
    """Frames held back by the WAN emulation."""


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


def _mac(secret: bytes, role: bytes, a: bytes, b: bytes, pid: int, rank: int, addr: str) -> bytes:
    """The handshake's proof of the secret (security rule 1)."""
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


class Transport:
    """One process's sockets, connections, directory and delay heap (module doc).

    Args:
        secret: the group's secret (security rule 1).
        pid: this process's id; rank: its rank in the emulated grid (or None).
        bind: the interface to bind (``"*"``: every one).
        emulator: the WAN emulation (module doc, "WAN emulation"); None: real network.
        max_message: the largest frame accepted (bytes).
        stats: the group's counters, which the transport updates.
        on_frame: ``f(route, pid, kind, body, arrival)`` for an authenticated frame
            other than the directory's, once the emulated WAN delivered it; it may
            raise :class:`~gridcoll.errors.WireError` (counted as malformed).
        on_datagram: ``f(data, arrival)`` for each datagram read (the probes').
        on_seen: ``f(pid)`` for any frame on ``pid``'s authenticated connection.
        on_verified: ``f(pid)`` when a peer we connected to proved the secret.
        on_refused: ``f(reason)`` when a peer we connected to refused us, or failed
            to prove the secret.

    Only the I/O thread calls its methods, except :meth:`wake`.
    """

    def __init__(
        self,
        *,
        secret: bytes,
        pid: int,
        rank: int | None,
        bind: str,
        emulator: Emulator | None,
        max_message: int,
        stats: GroupStats,
        on_frame: Callable[[bytes, int, int, memoryview, float], None],
        on_datagram: Callable[[bytes, float], None],
        on_seen: Callable[[int], None],
        on_verified: Callable[[int], None],
        on_refused: Callable[[str], None],
    ) -> None:
        self.secret, self.pid, self.rank = secret, pid, rank
        self.emulator, self.max_message, self.stats = emulator, max_message, stats
        self._on_frame, self._on_datagram, self._on_seen = on_frame, on_datagram, on_seen
        self._on_verified, self._on_refused = on_verified, on_refused
        self._open_sockets(bind)
        self.directory: dict[int, tuple[str, int | None]] = {pid: (self.address, rank)}
        """Process id -> (endpoint, rank) (module doc, "Addresses")."""
        self._peers: dict[str, _Peer] = {}
        self._by_sock: dict[zmq.Socket, _Peer] = {}
        self._conns: dict[bytes, _Conn] = {}
        self._pending: deque[bytes] = deque()
        self._held: dict[tuple[str, object], deque] = {}
        self._held_heap: list[tuple[float, int, tuple[str, object]]] = []
        self._seq = itertools.count()

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

    def close(self) -> None:
        """Close every socket and the wake-up pipe (the I/O thread has stopped)."""
        for sock in (self._router, *(peer.sock for peer in self._peers.values())):
            sock.close(linger=100)
        self._ctx.term()
        self._udp.close()
        for fd in (self._wake_r, self._wake_w):
            with contextlib.suppress(OSError):
                os.close(fd)
        self._wake_r = self._wake_w = -1

    def wake(self) -> None:
        """Wake the I/O thread from its poll (any thread)."""
        with contextlib.suppress(OSError):
            os.write(self._wake_w, b"x")

    # -- the I/O loop's turn ----------------------------------------------------------------
    def poll(self, timeout_ms: int) -> dict:
        """Wait up to ``timeout_ms`` for a frame, a datagram or a wake-up."""
        return dict(self._poller.poll(timeout_ms))

    def drain(self, ready: dict) -> None:
        """Read what :meth:`poll` found ready: the wake-up pipe, the ROUTER, the ping
        socket, then each peer's DEALER."""
        if self._wake_r in ready:
            with contextlib.suppress(BlockingIOError):
                os.read(self._wake_r, 4096)
        if self._router in ready:
            self._drain_router()
        if self._udp.fileno() in ready:
            self.drain_udp()
        for sock in [s for s in ready if s in self._by_sock]:
            self._drain_peer(self._by_sock[sock])

    def deadlines(self) -> list[float]:
        """When the next held frame is due (module doc, "WAN emulation")."""
        return [self._held_heap[0][0]] if self._held_heap else []

    # -- sending ----------------------------------------------------------------------------
    def send_frame(self, dst: int, kind: int, body: bytes) -> None:
        """A frame to process ``dst``, preceded for a core message by the directory
        entries it has not been told (module doc, "Addresses")."""
        entry = self.directory.get(dst)
        if entry is None:
            self.stats.unroutable += 1
            return
        peer = self.peer(entry[0])
        if kind == MSG:
            self._tell_directory(peer, entry[1])
        self._peer_send(peer, kind, body, entry[1])

    def _tell_directory(self, peer: _Peer, to_rank: int | None) -> None:
        new = [pid for pid in self.directory if pid not in peer.told]
        if not new:
            return
        w = Writer()
        w.u32(len(new))
        for pid in new:
            addr, rank = self.directory[pid]
            w.u64(pid)
            w.u64(_rank_code(rank))
            w.text(addr)
        peer.told.update(new)
        self._peer_send(peer, DIR, bytes(w.out), to_rank)

    def peer(self, address: str) -> _Peer:
        """Our DEALER to the ROUTER at ``address``, connected and greeted (``HELLO``)
        the first time."""
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
            self._write(sock, None, HELLO, bytes(w.out))
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
        nbytes += HEAD.size
        emu, me = self.emulator, self.rank
        if emu is not None and me is not None and to_rank is not None and emu.crosses(me, to_rank):
            stamp = emu.reserve(me, to_rank, nbytes, time.monotonic())
        return HEAD.pack(_MAGIC, _VERSION, kind, stamp)

    def _tune(self, sock: zmq.Socket) -> None:
        sock.setsockopt(zmq.SNDHWM, 0)
        sock.setsockopt(zmq.RCVHWM, 0)
        sock.setsockopt(zmq.LINGER, 1000)
        sock.setsockopt(zmq.MAXMSGSIZE, 2 * self.max_message + 65536)

    def datagram(self, address: str, to_rank: int | None, kind: int, body: bytes) -> None:
        """A datagram to the ping socket of the process whose ROUTER is at ``address``,
        stamped by the emulation as a frame is and ended by its MAC (security rule 3)."""
        data = self._head(to_rank, kind, len(body) + UDP_MAC) + body
        with contextlib.suppress(OSError):  # a lost ping is sent again
            self._udp.sendto(data + self.udp_mac(data), _udp_address(address))

    def udp_mac(self, data: bytes | memoryview) -> bytes:
        """A datagram's MAC (security rule 3)."""
        return hmac.new(self.secret, b"gridcoll-udp/" + data, hashlib.sha256).digest()[:UDP_MAC]

    # -- receiving --------------------------------------------------------------------------
    def parse(self, data: memoryview) -> tuple[int, float, memoryview] | None:
        """A frame's kind, stamp and body, or None (counted) if it is too long or does
        not parse (security rule 2)."""
        if len(data) > self.max_message + 65536:
            self.stats.oversized += 1
            return None
        if len(data) < HEAD.size:
            self.stats.malformed += 1
            return None
        magic, version, kind, stamp = HEAD.unpack_from(data)
        if magic != _MAGIC or version != _VERSION or not HELLO <= kind <= BEAT:
            self.stats.malformed += 1
            return None
        return kind, stamp, data[HEAD.size :]

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
            parsed = self.parse(data)
            if parsed is not None:
                self._from_conn(route, *parsed, len(data))

    def _drain_peer(self, peer: _Peer) -> None:
        for _ in range(_DRAIN):
            try:
                frame = peer.sock.recv(zmq.NOBLOCK, copy=False)
            except zmq.Again:
                return
            self.stats.frames_in += 1
            parsed = self.parse(frame.buffer)
            if parsed is not None:
                kind, stamp, body = parsed
                self.hold(
                    ("peer", peer.address),
                    stamp,
                    peer.rank,
                    len(frame.buffer),
                    lambda _, k=kind, b=body: self._from_peer(peer, k, b),
                )

    def drain_udp(self) -> None:
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

    def _from_conn(self, route: bytes, kind: int, stamp: float, body: memoryview, n: int) -> None:
        conn = self._conns.get(route)
        if conn is not None and conn.authed:
            self._on_seen(conn.pid)
        try:
            if kind == HELLO:
                self._on_hello(route, conn, body)
            elif kind == AUTH:
                self._on_auth(route, conn, body)
            elif conn is None or not conn.authed:
                self.stats.unauthenticated += 1
            else:
                self.hold(
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
        self._write(self._router, None, CHALLENGE, nonce_b, route)

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
            self._write(self._router, None, REFUSED, b"bad secret", route)
            return
        conn.authed = True
        self.directory.setdefault(conn.pid, (conn.address, conn.rank))
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
        self._write(self._router, None, ACK, bytes(w.out), route)

    def _on_conn_frame(
        self, route: bytes, conn: _Conn, kind: int, body: memoryview, arrival: float
    ) -> None:
        try:
            if kind == DIR:
                self._on_directory(body)
            else:
                self._on_frame(route, conn.pid, kind, body, arrival)
        except WireError:
            self.stats.malformed += 1

    def _on_directory(self, body: memoryview) -> None:
        r = Reader(body)
        entries = [(r.u64(), _rank_of(r.u64()), r.text()) for _ in range(r.count(20))]
        r.end()
        for pid, rank, addr in entries:
            if pid != self.pid:
                self.directory.setdefault(pid, (addr, rank))

    def _from_peer(self, peer: _Peer, kind: int, body: memoryview) -> None:
        try:
            if kind == CHALLENGE:
                self._on_challenge(peer, body)
            elif kind == ACK:
                self._on_ack(peer, body)
            elif kind == REFUSED:
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
        self._write(peer.sock, None, AUTH, mac)
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
        self.directory.setdefault(pid, (peer.address, rank))
        self._on_verified(pid)

    def _fail_peer(self, peer: _Peer, reason: str) -> None:
        peer.failed = True
        self.stats.unroutable += len(peer.queue)
        peer.queue.clear()
        self._on_refused(reason)

    # -- the WAN emulation's delay heap -------------------------------------------------------
    def hold(
        self,
        key: tuple[str, object],
        stamp: float,
        src_rank: int | None,
        nbytes: int,
        handler: Handler,
        read_at: float | None = None,
    ) -> None:
        """Run ``handler(arrival)`` once the emulated WAN delivers the frame (at once if
        not emulated), after every earlier frame of the same connection. ``arrival`` is
        when the frame came in: its emulated delivery time, else when it was read
        (``read_at``, by default now)."""
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

    def release_held(self) -> None:
        """Hand on the held frames whose emulated delivery time has come."""
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
