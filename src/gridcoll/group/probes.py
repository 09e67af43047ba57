"""The group's probes: round trips and download rates over UDP (sec. IV-A).

:class:`Prober` carries out the core's ``Probe`` actions and answers other processes'
probes; it feeds the core each probe's ``ProbeResult``.

Theory of operation
-------------------
*A probe* is ``probe_pings`` ping-pongs and then a 128 KiB download from the peer
(sec. IV-A), with ``rtt = inf`` if no answer comes within ``probe_timeout_s``.

*Round trips.* A probe is timed as NTP times a round trip, so that it leaves out how
long either process took to be scheduled: each answer says how long the request waited
at the peer (from its arrival to the answer's sending), and the asker takes that off the
time from its sending to the answer's arrival. A probe's datagrams (ping, pong, the
download's fetch and its chunks) travel over UDP, on a socket with the ROUTER's port
number (:mod:`gridcoll.group.transport`), and the kernel stamps their arrival
(``SO_TIMESTAMPNS``, Linux; elsewhere they are timed when read); one that crossed the
emulated WAN arrives at its emulated delivery time. So on a machine whose cores many
processes share, a LAN ping measures the LAN's tens of microseconds, not the
milliseconds until the peer runs (timed when read, as TCP frames through libzmq must
be, LAN neighbours look remote). The fastest of the ``probe_pings`` round trips is the
RTT, or a heartbeat's faster one (:mod:`gridcoll.group.detector`), but never less than
``rtt_resolution_s`` (:data:`RTT_RESOLUTION_S`).

*Rates.* The download's rate is its bytes over half the RTT plus its chunks' passage,
timed by their spacing on arrival (:func:`download_rate`): the link's rate with
latency, as the simulator's probe measures, not what queued ahead.

*Rules.* Each datagram ends with an HMAC-SHA256 of it under the group secret, truncated
to 16 bytes, and is answered only for a process in the directory. A datagram may be
lost: a ping unanswered for ``_PING_AGAIN_S`` is sent again (its answer echoes its
sending time, so an answer to either copy times right), a fetch that brought no chunk in
``_FETCH_AGAIN_S`` likewise, and a download missing chunks that long ends with the rate
of those that came.

Measured evidence for these choices: docs/phoenix.md, "Why the rules".

References
----------
H. Saito, K. Taura, T. Chikayama, *Collective operations for wide-area message passing
systems using adaptive spanning trees* (seed 004), sec. IV-A.

C. Dovrolis, P. Ramanathan, D. Moore, *What do packet dispersion techniques measure?*,
INFOCOM 2001.
"""

from __future__ import annotations

import functools
import hmac
import itertools
import math
import struct
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import gridcoll.phoenix as p
from gridcoll.group.detector import Detector
from gridcoll.group.transport import DATA, FETCH, PING, PONG, UDP_MAC, GroupStats, Transport

__all__ = ["RTT_RESOLUTION_S", "Prober", "download_rate"]

RTT_RESOLUTION_S = 1e-4
"""The smallest round trip a probe or heartbeat reports to the core (``rtt_resolution_s``).
The core tells a LAN neighbour from a remote peer by ratios of RTTs (``NEAR_RATIO``), and
below about a tenth of a millisecond two timings of one loopback link differ by that
much, so a LAN neighbour would look remote by chance. Real LANs are above it or near it;
wide-area links far above."""
_PING_BODY = struct.Struct("<QQd")  # token, the pinger's id, its send time
_PONG_BODY = struct.Struct("<Qdd")  # token, the ping's send time, how long it waited here
_FETCH_BODY = struct.Struct("<QQdI")  # token, the asker's id, its send time, bytes wanted
_DATA_HEAD = struct.Struct("<QddHH")  # token, the fetch's send time, its wait here,
# this chunk's index, the chunk count; then the chunk's bytes
_CHUNK = 32 * 1024  # a download's bytes per datagram
_PING_AGAIN_S = 0.5
"""A ping unanswered this long is sent again (a datagram may be lost)."""
_FETCH_AGAIN_S = 1.0
"""A download with no new chunk for this long is asked again if none came, else ends
with the chunks that came."""
_UDP_LAYOUTS = {PING: _PING_BODY, PONG: _PONG_BODY, FETCH: _FETCH_BODY, DATA: _DATA_HEAD}


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


def download_rate(probe: _Probe) -> float:
    """A probe download's rate (sec. IV-A) from its chunks' arrivals: the download's
    bytes over ``rtt / 2 + count * gap``, its way there plus its chunks' passage, where
    ``gap`` is the time between two chunks' arrivals at the bottleneck's rate. Sent
    back to back, the chunks are spaced by the slowest link they cross, whatever queued
    ahead of them (packet-train dispersion: Dovrolis, Ramanathan and Moore, module doc),
    so the rate is the link's, as the simulator's probe gives the model's
    ``nbytes / (L + g(nbytes))``, where the bytes over the time to the last chunk would
    count the traffic queued ahead. With one chunk only (the rest lost): its bytes over
    the time from the fetch, less the fetch's wait at the peer."""
    if not probe.arrived:
        return 0.0
    first, last = min(probe.arrived), max(probe.arrived)
    spread = probe.arrived[last] - probe.arrived[first]
    if last > first and spread > 0 and math.isfinite(probe.rtt):
        gap = spread / (last - first)
        return _rate_bytes(probe) / (probe.rtt / 2 + gap * probe.count)
    return min(probe.nbytes, _CHUNK) / max(probe.took, 1e-9)


def _rate_bytes(probe: _Probe) -> int:
    """The bytes :func:`download_rate` counts (a whole download's)."""
    return min(probe.nbytes, p.PROBE_BYTES)


def _again(probe: _Probe) -> float:
    """How long a probe waits for its next datagram before it acts (module doc)."""
    return _FETCH_AGAIN_S if probe.fetch_started else _PING_AGAIN_S


class Prober:
    """One process's probes of its peers, and its answers to theirs (module doc).

    Args:
        pid: this process's id.
        pings: ping-pongs per probe; the fastest is its RTT.
        timeout_s: a probe unanswered this long measures ``rtt = inf``.
        rtt_resolution_s: the smallest round trip reported to the core.
        transport: the sockets and directory the datagrams use.
        detector: its fastest heartbeat round trips (``rtt_floor``), and where a
            download's passage is kept (``note_download``).
        stats: the group's counters.
        feed: ``f(event)``, feed an event to the core now (the group's).
    """

    def __init__(
        self,
        *,
        pid: int,
        pings: int,
        timeout_s: float,
        rtt_resolution_s: float,
        transport: Transport,
        detector: Detector,
        stats: GroupStats,
        feed: Callable[[p.Event], None],
    ) -> None:
        self.pid, self.pings, self.timeout_s = pid, pings, timeout_s
        self.rtt_resolution_s = rtt_resolution_s
        self._transport, self._detector = transport, detector
        self.stats, self._feed = stats, feed
        self._probes: dict[int, _Probe] = {}
        self._tokens = itertools.count()

    def deadlines(self) -> list[float]:
        """When a probe times out or acts again (a datagram lost)."""
        out = [pr.deadline for pr in self._probes.values()]
        return out + [pr.asked + _again(pr) for pr in self._probes.values()]

    # -- asking -------------------------------------------------------------------------------
    def start(self, peer_pid: int, nbytes: int) -> None:
        """The core's ``Probe``: ping ``peer_pid``, then download ``nbytes`` (0: none)."""
        self.stats.probes += 1
        now = time.monotonic()
        token = next(self._tokens)
        if peer_pid not in self._transport.directory:
            self._feed(p.ProbeResult(peer_pid, math.inf, 0.0))
            return
        self._probes[token] = _Probe(peer_pid, now, now + self.timeout_s, nbytes)
        self._ping(peer_pid, token)

    def _ping(self, peer_pid: int, token: int) -> None:
        """A ping datagram to ``peer_pid``'s ping socket (module doc, "Round trips"),
        stamped by the emulation as a frame is."""
        self._probes[token].asked = now = time.monotonic()
        address, rank = self._transport.directory[peer_pid]
        self._transport.datagram(address, rank, PING, _PING_BODY.pack(token, self.pid, now))

    def _fetch(self, token: int) -> None:
        probe = self._probes[token]
        probe.fetch_started = probe.asked = now = time.monotonic()
        address, rank = self._transport.directory[probe.peer]
        body = _FETCH_BODY.pack(token, self.pid, now, probe.nbytes)
        self._transport.datagram(address, rank, FETCH, body)

    # -- datagrams ----------------------------------------------------------------------------
    def on_datagram(self, data: bytes, arrival: float) -> None:
        """A probe's datagram, if its MAC proves the group's secret and its sender is
        known; then held as a frame is by the emulation."""
        transport = self._transport
        parsed = transport.parse(memoryview(data)[: max(len(data) - UDP_MAC, 0)])
        if parsed is None:  # counted
            return
        kind, stamp, body = parsed
        layout = _UDP_LAYOUTS.get(kind)
        if layout is None or len(body) < layout.size or (kind != DATA and len(body) > layout.size):
            self.stats.malformed += 1
            return
        if not hmac.compare_digest(transport.udp_mac(data[:-UDP_MAC]), data[-UDP_MAC:]):
            self.stats.unauthenticated += 1
            return
        token, *fields = layout.unpack_from(body)
        if kind in (PING, FETCH):  # from a process asking: its id, its send time
            peer, answer = fields[0], functools.partial(self.answer, kind, token, *fields)
        elif token in self._probes:  # to our probe
            on = self._on_pong if kind == PONG else self._on_chunk
            peer = self._probes[token].peer
            answer = functools.partial(on, token, *fields)
        else:
            return  # an expired probe's
        entry = transport.directory.get(peer)
        if entry is None:
            self.stats.unauthenticated += 1
            return
        transport.hold(("udp", peer), stamp, entry[1], len(data), answer, arrival)

    def answer(self, kind: int, token: int, pid: int, sent: float, *rest: float) -> None:
        """Answer ``pid``'s ping with a pong, or its fetch with the chunks of the
        download (``rest[0]`` bytes, at most ``PROBE_BYTES``), each saying how long the
        request waited here since it arrived (``rest[-1]``, the arrival)."""
        address, rank = self._transport.directory[pid]
        waited = time.monotonic() - rest[-1]
        if kind == PING:
            self._transport.datagram(address, rank, PONG, _PONG_BODY.pack(token, sent, waited))
            return
        nbytes = min(int(rest[0]), p.PROBE_BYTES)
        count = max(1, -(-nbytes // _CHUNK))
        for i in range(count):
            size = min(_CHUNK, nbytes - i * _CHUNK)
            head = _DATA_HEAD.pack(token, sent, waited, i, count)
            self._transport.datagram(address, rank, DATA, head + bytes(size))

    def _on_pong(self, token: int, sent: float, waited: float, arrival: float) -> None:
        """A ping's answer: its round trip is the time from its sending to the pong's
        arrival, less how long it waited at the peer (module doc)."""
        probe = self._probes.get(token)
        if probe is None or probe.fetch_started:
            return  # expired, or an answer to a ping sent again
        probe.rtt = min(probe.rtt, max(arrival - sent - waited, self.rtt_resolution_s, 1e-9))
        probe.pings += 1
        self.stats.pings += 1
        if probe.pings < self.pings:  # again: the fastest is the RTT
            self._ping(probe.peer, token)
        elif not probe.nbytes:  # pings only
            self._done(token)
        else:
            self.stats.downloads += 1
            self._fetch(token)

    def _on_chunk(
        self, token: int, sent: float, waited: float, i: int, count: int, at: float
    ) -> None:
        """A chunk of a download (its rate: :func:`download_rate`)."""
        probe = self._probes.get(token)
        if probe is None or sent != probe.fetch_started or i in probe.arrived or i >= count:
            return  # expired, or of a fetch sent again
        probe.arrived[i], probe.count = at, count
        probe.took = max(probe.took, at - sent - waited)
        probe.asked = time.monotonic()
        if len(probe.arrived) == count:
            self._done(token)

    # -- results ------------------------------------------------------------------------------
    def _done(self, token: int) -> None:
        """Feed the core a probe's result: ``rtt`` its fastest ping, or a heartbeat's
        faster round trip, and its download's rate (0 if none: :func:`download_rate`)."""
        probe = self._probes.pop(token)
        probe.rtt = min(probe.rtt, self._detector.rtt_floor.get(probe.peer, math.inf))
        rate = download_rate(probe)
        if rate > 0 and math.isfinite(probe.rtt):  # what a faster round trip leaves
            nbytes = _rate_bytes(probe)
            self._detector.note_download(
                probe.peer, nbytes, max(0.0, nbytes / rate - probe.rtt / 2)
            )
        self._feed(p.ProbeResult(probe.peer, probe.rtt, rate))

    def expire(self) -> None:
        """Time out the probes past their deadline; ask again where a datagram may have
        been lost (module doc, "Rules")."""
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
                self._done(token)
