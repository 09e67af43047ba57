"""The group's heartbeats and failure detector.

:class:`Detector` beats every member, times round trips from the beats, tells the
senders of core messages how many it took in, and suspects the members it has not heard
from for too long, reporting them to the core as dead (``PeerFailed``).

Theory of operation
-------------------
*Beats.* Every ``heartbeat_s`` a member sends every member it knows a small ``BEAT``
frame carrying how many of that member's core messages it has fed to its core, when it
was sent, and the send time of the last beat it had from that member with how long it
held it since: so every beat times a round trip.

*Round trips.* The fastest round trip seen to each member stands for that member's RTT
in later probes (:mod:`gridcoll.group.probes`), and one ``RTT_GAIN`` times faster than
the core holds is given to the core (``Remeasured``: it judges its trees again), so a
LAN neighbour that a busy machine answered slowly at the first probe is seen near once a
quieter moment shows it. With it goes the peer's download rate recomputed with that
round trip (its chunks' passage kept, the half RTT replaced): a ping that queued behind
data on a wide-area link otherwise lowers the rate, and a gateway behind it may choose a
slower link.

*Acks.* Between beats, every ``ack_s`` (a quarter of a beat by default) a member sends
the same frame to each member whose core messages it took in since it last told it (its
parents in the trees of the broadcasts under way: a few), so the counts a data sender
holds are at most ``ack_s`` old. A failure report gives the counts of the last two such
frames: the one before the last says which messages the dead process had passed on
(taken in a frame before it died, their forwards had left it), and only later ones are
sent again; the last says which it had taken in (its own vnodes had them). Fresher
counts mean fewer broadcasts sent again after a death. (Not covered: a message passed on
only to another process that died too before passing it on, within about ``ack_s``: the
core's "Failures".)

*Suspicion.* Any frame on a peer's authenticated connection counts as a sign of life. A
member silent for more than ``heartbeat_timeout_s`` (counted from when it was first
known; time this process's own I/O thread was held up, e.g. by a long emulated transfer,
does not count) is suspected, checked on every turn of the I/O loop once it may be (not
only at the next beat): added to :attr:`Group.suspects <gridcoll.group.Group.suspects>`,
given to ``on_suspect`` and, with ``fail_suspects`` (the default), reported to the core
as dead (``PeerFailed``): its vnodes go to an heir and the broadcasts sent to it are
sent again (the core's "Failures"). A falsely suspected process is cut off (its vnodes
go to the heir), so ``heartbeat_timeout_s`` must exceed the longest pause a live
process may make.

Measured evidence for these choices: docs/phoenix.md, "Why the rules".

References
----------
H. Saito, K. Taura, T. Chikayama, *Collective operations for wide-area message passing
systems using adaptive spanning trees* (seed 004), sec. III (processes that leave),
IV-A (probes).
"""

from __future__ import annotations

import math
import struct
import time
from collections.abc import Callable, Iterable

import gridcoll.phoenix as p
from gridcoll.group.transport import BEAT, GroupStats
from gridcoll.phoenix.wire import Reader

__all__ = ["RTT_GAIN", "Detector"]

RTT_GAIN = 2.0
"""A heartbeat round trip this many times faster than the core's measurement is given
to the core (``Remeasured``)."""
_BEAT_BODY = struct.Struct("<Qddd")  # your messages taken, sent at, your last beat's
# sent-at (0: none yet), how long since it arrived here


class Detector:
    """Heartbeats, acks, round trips and suspicion for one process (module doc).

    Args:
        pid: this process's id.
        core: the process's sans-I/O core (read: ``members``, ``state``, ``measured``).
        heartbeat_s: beat every member this often (None: never).
        heartbeat_timeout_s: a member heard nothing from for this long is suspected.
        ack_s: between beats, tell the members we took core messages from how many,
            this often (None: never).
        rtt_resolution_s: the smallest round trip kept.
        on_suspect: ``f(pid)`` when a member is first suspected, or None.
        fail_suspects: report a suspect to the core as dead.
        stats: the group's counters.
        send_frame: ``f(dst, kind, body)``, the transport's.
        feed: ``f(event)``, feed an event to the core now (the group's).
        publish: ``f()``, publish the group's view to the application's threads.
        callback: ``f(fn, *args)``, run an application callback (the group's).
    """

    def __init__(
        self,
        *,
        pid: int,
        core: p.Process,
        heartbeat_s: float | None,
        heartbeat_timeout_s: float,
        ack_s: float | None,
        rtt_resolution_s: float,
        on_suspect: Callable[[int], None] | None,
        fail_suspects: bool,
        stats: GroupStats,
        send_frame: Callable[[int, int, bytes], None],
        feed: Callable[[p.Event], None],
        publish: Callable[[], None],
        callback: Callable[..., None],
    ) -> None:
        self.pid, self.core = pid, core
        self.heartbeat_s, self.heartbeat_timeout_s, self.ack_s = (
            heartbeat_s,
            heartbeat_timeout_s,
            ack_s,
        )
        self.rtt_resolution_s = rtt_resolution_s
        self._on_suspect, self.fail_suspects = on_suspect, fail_suspects
        self.stats = stats
        self._send_frame, self._feed, self._publish = send_frame, feed, publish
        self._callback = callback
        self._beat_at: float | None = None
        self._fed_from: dict[int, int] = {}  # peer -> its core messages fed to our core
        self.acked: dict[int, tuple[int, int]] = {}
        """Peer -> how many of our core messages it took, by its beat before the last
        and by its last."""
        self._last_seen: dict[int, float] = {}
        self._beat_in: dict[int, tuple[float, float]] = {}  # peer -> its last beat's time
        # (its clock) and when it arrived (ours): echoed in our next beat to it
        self.rtt_floor: dict[int, float] = {}
        """Peer -> the fastest round trip seen."""
        self.passage: dict[int, tuple[int, float]] = {}
        """Peer -> its last download's bytes and their time less half the RTT: the
        chunks' passage (:func:`gridcoll.group.probes.download_rate`)."""
        self.suspects: set[int] = set()
        self._next_beat = self._next_ack = 0.0
        self._watched: frozenset[int] = frozenset()  # the members at the last watch
        self._watch_at = 0.0  # when one of them may time out (heartbeat)
        self._told: dict[int, int] = {}  # peer -> the count of its messages we last sent it

    # -- what the transport and the group tell it ------------------------------------------
    def seen(self, pid: int) -> None:
        """A frame came on ``pid``'s authenticated connection: a sign of life."""
        self._last_seen[pid] = time.monotonic()

    def took(self, pid: int) -> None:
        """One of ``pid``'s core messages was taken in (it is fed after the drain)."""
        self._fed_from[pid] = self._fed_from.get(pid, 0) + 1

    def on_beat(self, pid: int, body: memoryview, arrival: float) -> None:
        """A beat or ack from ``pid``: how many of our messages it took, and the round
        trip its echo of our last beat times."""
        r = Reader(body)
        took, sent_at, echo, held = r.fields(_BEAT_BODY)
        r.end()
        last = self.acked.get(pid, (0, 0))[1]
        self.acked[pid] = (last, max(took, last))
        self._beat_in[pid] = (sent_at, arrival)
        if echo > 0:  # our beat's time, and how long it waited there
            self.sample_rtt(pid, arrival - echo - held)

    def note_download(self, pid: int, nbytes: int, passage: float) -> None:
        """A probe's download from ``pid``: its bytes and their passage (kept to
        recompute the rate with a faster round trip)."""
        self.passage[pid] = (nbytes, passage)

    # -- the I/O loop's turn ----------------------------------------------------------------
    def deadlines(self) -> list[float]:
        """The next beat or ack, and the next member to time out (only while beating)."""
        if not self.beating():
            return []
        return [min(self._next_beat, self._next_ack, self._watch_at)]

    def heartbeat(self) -> None:
        """Beat every member every ``heartbeat_s``; suspect the members silent too long
        (checked on every turn of the loop once the least recently heard member may
        have timed out, or the members changed: a death is found when the timeout
        passes, not at the next beat)."""
        if not self.beating():
            return
        now = time.monotonic()
        if now >= self._next_beat:
            self._beat(now, self.heartbeat_s)  # type: ignore[arg-type]
        elif now >= self._next_ack:
            self._ack(now)
        members = self.core.members
        if now < self._watch_at and not self.suspects and members == self._watched:
            return  # no one can have timed out yet (last sights only move later)
        dead, known = [], len(self.suspects)
        for pid in members - {self.pid}:
            seen = self._last_seen.setdefault(pid, now)  # silence counts from first sight
            if now - seen <= self.heartbeat_timeout_s:
                self.suspects.discard(pid)
            elif pid not in self.suspects:
                self.suspects.add(pid)
                dead.append(pid)
                if self._on_suspect is not None:
                    self._callback(self._on_suspect, pid)
        self._watched = frozenset(members)
        self._watch_at = self._silence_deadline()
        for pid in dead if self.fail_suspects else ():
            # the beat before the last: what it had passed on; the last: what it took in
            acked = self.acked.get(pid)
            self._feed(p.PeerFailed(pid, *acked) if acked else p.PeerFailed(pid))
        self.suspects &= self.core.members
        if dead or len(self.suspects) != known:
            self._publish()

    def _silence_deadline(self) -> float:
        """When the member heard from least recently (suspects aside) times out."""
        watched = self.core.members - self.suspects - {self.pid}
        seen = [self._last_seen[pid] for pid in watched if pid in self._last_seen]
        return min(seen, default=math.inf) + self.heartbeat_timeout_s

    def beating(self) -> bool:
        """Whether this process beats and watches its members: only a member (ACTIVE or
        LEAVING). The I/O loop waits for the next beat only then: a JOINING or LEFT
        process never sends it, and a beat time left in the past would make every poll
        return at once (and spin a core)."""
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
            self._send_frame(pid, BEAT, _BEAT_BODY.pack(fed, now, echo, now - got_at))

    def sample_rtt(self, pid: int, rtt: float) -> None:
        """A round trip to ``pid`` timed by a heartbeat and its echo: the fastest seen is
        kept (a probe takes it if faster), and the core is told when it beats by
        ``RTT_GAIN`` what the core holds (``Remeasured``), with the download rate
        recomputed with it."""
        if not rtt > 0:
            return
        rtt = max(rtt, self.rtt_resolution_s)
        self.stats.rtt_samples += 1
        best = self.rtt_floor[pid] = min(rtt, self.rtt_floor.get(pid, math.inf))
        held = self.core.measured.get(pid)
        if held is not None and best * RTT_GAIN < held.rtt_s and self.core.state is p.State.ACTIVE:
            self.stats.remeasured += 1
            nbytes, passage = self.passage.get(pid, (0, 0.0))
            bw = nbytes / (best / 2 + passage) if nbytes else None
            self._feed(p.Remeasured(pid, best, bw))
