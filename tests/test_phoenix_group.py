"""Group: Phoenix (seed 004) over real processes and pyzmq.

The founder runs in the test's process; the joiners are separate processes
(``multiprocessing``, spawn) that report every delivery on a queue. Each test is
bounded by a timeout, and every wait blocks (queue gets, condition waits). Every test
here runs real processes and sockets (``slow``), and all are skipped without pyzmq.
"""

from __future__ import annotations

import hashlib
import hmac
import multiprocessing as mp
import os
import struct
import time
from collections import Counter
from collections.abc import Hashable
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pytest

zmq = pytest.importorskip("zmq")

from gridcoll.errors import GroupError, ParameterError  # noqa: E402
from gridcoll.group import Group  # noqa: E402
from gridcoll.phoenix.nodesets import NodeSet  # noqa: E402
from gridcoll.phoenix.protocol import PROBE_BYTES, SITE_SHIFT, Bcast  # noqa: E402
from gridcoll.phoenix.wire import encode  # noqa: E402

pytestmark = pytest.mark.slow

NV = 8
PAYLOAD = bytes((i * 7 + 3) % 251 for i in range(300 * 1024))  # 300 KiB: 3 segments
DIGEST = hashlib.sha256(PAYLOAD).hexdigest()
CTX = mp.get_context("spawn")


def _emulator(emu: tuple[str, str] | None) -> Any:
    if emu is None:
        return None
    from gridcoll.network import get_grid
    from gridcoll.runtime.emulation import Emulator, LinkState

    grid = get_grid(emu[0])
    return Emulator(grid, LinkState(emu[1], grid))


def _worker(
    address: str,
    secret: bytes,
    commands: Any,
    out: Any,
    rank: int | None = None,
    emu: tuple[str, str] | None = None,
) -> None:
    """A joiner: reports deliveries, then obeys commands until "stop"."""
    me: list[int] = []

    def on_deliver(op_id: Hashable, vnodes: frozenset[int], data: object) -> None:
        digest = hashlib.sha256(data).hexdigest()  # type: ignore[arg-type]
        out.put(("deliver", me[0] if me else -1, op_id, sorted(vnodes), digest, time.monotonic()))

    group = Group.join(address, secret, on_deliver=on_deliver, rank=rank, emulator=_emulator(emu))
    me.append(group.pid)
    out.put(("joined", group.pid, rank, os.getpid()))
    while True:
        cmd = commands.get(timeout=120)
        if cmd[0] == "reduce":
            group.reduce(cmd[2], "sum", 0, tag=cmd[1])
        elif cmd[0] == "leave":
            group.leave()
            out.put(("left", group.pid))
        elif cmd[0] == "migrate_on_segment":  # hand our vnodes over mid-broadcast
            assert group.wait_until(lambda g: g.stats.segments >= 1, 20), asdict(group.stats)
            moved = group.vnodes
            group.migrate(moved, cmd[1])
            out.put(("migrated", group.pid, sorted(moved)))
        elif cmd[0] == "stop":
            out.put(("stats", group.pid, asdict(group.stats), group.error))
            group.close()
            return


class Cluster:
    """The founder (here) and its spawned joiners."""

    def __init__(
        self, rank: int | None = None, emu: tuple[str, str] | None = None, **options: Any
    ) -> None:
        self.out: Any = CTX.Queue()
        self.emu = emu
        self.procs: list[tuple[Any, Any]] = []
        self.founder = Group.start(
            NV, on_deliver=self._local, rank=rank, emulator=_emulator(emu), seed=4, **options
        )

    def _local(self, op_id: Hashable, vnodes: frozenset[int], data: object) -> None:
        digest = hashlib.sha256(data).hexdigest()  # type: ignore[arg-type]
        self.out.put(("deliver", self.founder.pid, op_id, sorted(vnodes), digest, time.monotonic()))

    def spawn(self, rank: int | None = None, out: Any = None) -> int:
        """A joiner reporting on ``out`` (default: the shared queue; one to be killed
        needs its own, since it may die holding a shared queue's lock)."""
        commands = CTX.Queue()
        out = self.out if out is None else out
        args = (self.founder.address, self.founder.secret, commands, out, rank, self.emu)
        proc = CTX.Process(target=_worker, args=args, daemon=True)
        proc.start()
        self.procs.append((proc, commands))
        return len(self.procs) - 1

    def expect(self, kind: str, n: int, timeout: float = 60.0) -> list[tuple]:
        """Take messages until ``n`` of ``kind`` came; keep the deliveries seen."""
        got, deadline = [], time.monotonic() + timeout
        while len(got) < n:
            msg = self.out.get(timeout=max(0.1, deadline - time.monotonic()))
            if msg[0] == "deliver":
                self.deliveries.append(msg)
            if msg[0] == kind:
                got.append(msg)
        return got

    deliveries: list[tuple]

    def wait_delivered(self, op_id: Hashable, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while self.count(op_id) < NV:
            msg = self.out.get(timeout=max(0.1, deadline - time.monotonic()))
            if msg[0] == "deliver":
                self.deliveries.append(msg)

    def count(self, op_id: Hashable) -> int:
        return sum(len(d[3]) for d in self.deliveries if d[2] == op_id)

    def stop(self) -> list[tuple]:
        for _, commands in self.procs:
            commands.put(("stop",))
        stats = self.expect("stats", len(self.procs))
        for proc, _ in self.procs:
            proc.join(10)
        self.founder.close()
        return stats

    def kill(self) -> None:
        for proc, _ in self.procs:
            if proc.is_alive():
                proc.kill()
        self.founder.close()


@pytest.fixture
def cluster() -> Any:
    made: list[Cluster] = []

    def make(**kw: Any) -> Cluster:
        c = Cluster(**kw)
        c.deliveries = []
        made.append(c)
        return c

    yield make
    for c in made:
        c.kill()


def _exactly_once(deliveries: list[tuple], op_id: Hashable) -> None:
    per_vnode = Counter(v for d in deliveries if d[2] == op_id for v in d[3])
    assert per_vnode == Counter(range(NV)), f"{op_id}: {per_vnode}"
    assert {d[4] for d in deliveries if d[2] == op_id} == {DIGEST}


@pytest.mark.timeout(120)
def test_four_processes_broadcast_and_reduce(cluster: Any) -> None:
    c = cluster()
    for _ in range(3):
        c.spawn()
    c.expect("joined", 3)
    assert c.founder.wait_until(lambda g: len(g.members) == 4 and len(g.vnodes) < NV, 30)
    op = c.founder.bcast(PAYLOAD, root=0, kind="bandwidth")  # pipelined: 3 segments
    c.wait_delivered(op)
    values = {v: 1 << v for v in range(NV)}  # every process offers every vnode's data
    for _, commands in c.procs:
        commands.put(("reduce", "r", values))
    rid = c.founder.reduce(values, "sum", 0, tag="r")
    res = c.founder.result(rid, timeout=30)
    assert res.value == (1 << NV) - 1 and not res.missing
    stats = c.stop()
    _exactly_once(c.deliveries, op)
    assert sum(len(d[3]) for d in c.deliveries) == NV
    assert all(err is None for *_, err in stats)
    assert sum(s[2]["undeliverable"] for s in stats) == c.founder.stats.undeliverable == 0
    assert sum(s[2]["segments"] for s in stats) + c.founder.stats.segments >= 3
    assert {d[1] for d in c.deliveries} == {c.founder.pid, *(s[1] for s in stats)}


@pytest.mark.timeout(150)
def test_leave_and_join_while_broadcasting(cluster: Any) -> None:
    c = cluster()
    for _ in range(3):
        c.spawn()
    c.expect("joined", 3)
    assert c.founder.wait_until(lambda g: len(g.members) == 4, 30)
    first = c.founder.bcast(PAYLOAD, root=0, kind="bandwidth")
    c.procs[0][1].put(("leave",))  # leaves while the broadcast is under way
    second = c.founder.bcast(PAYLOAD, root=0, kind="bandwidth")
    c.expect("left", 1)
    c.spawn()
    c.expect("joined", 1)
    third = c.founder.bcast(PAYLOAD, root=0)
    for op in (first, second, third):
        c.wait_delivered(op)
    assert c.founder.wait_until(lambda g: len(g.members) == 4, 30)
    stats = c.stop()
    for op in (first, second, third):
        _exactly_once(c.deliveries, op)
    assert all(err is None for *_, err in stats)
    assert sum(s[2]["undeliverable"] for s in stats) == 0


@pytest.mark.timeout(60)
def test_a_left_process_blocks_between_events() -> None:
    """A LEFT process beats no one, so its I/O thread must not wait for a beat: before,
    the beat time it no longer advanced stayed in the past, every poll returned at once,
    and the 16 left processes of fig. 9's measured run took the whole machine."""
    beat = 0.1
    with (
        Group.start(NV, seed=1, heartbeat_s=beat) as founder,
        Group.join(founder.address, founder.secret, heartbeat_s=beat) as leaver,
    ):
        leaver.leave()
        time.sleep(3 * beat)  # past the beat it would have sent next
        turns = 0
        step = leaver._step

        def counted() -> None:
            nonlocal turns
            turns += 1
            step()

        leaver._step = counted  # type: ignore[method-assign]
        time.sleep(1.0)
        # blocked in poll: woken by its poll cap (0.25 s) and a stray frame, not spinning
        assert 1 <= turns < 20, turns


@pytest.mark.timeout(60)
def test_wrong_secret_is_refused_and_counted() -> None:
    with Group.start(NV, seed=1) as founder:
        before = (founder.members, founder.vnodes)
        with pytest.raises(GroupError, match="refused"):
            Group.join(founder.address, b"not the secret, wrong length ok", timeout=10)
        assert founder.wait_until(lambda g: g.stats.auth_failed == 1, 10)
        assert (
            (founder.members, founder.vnodes)
            == before
            == (
                frozenset({founder.pid}),
                frozenset(range(NV)),
            )
        )


def _client_mac(secret: bytes, a: bytes, b: bytes, pid: int, addr: str) -> bytes:
    """The handshake's client proof, written from the transport's security rule 1."""
    msg = b"gridcoll-dynamic-v1/client" + a + b + struct.pack("<QQ", pid, 2**64 - 1)
    return hmac.new(secret, msg + addr.encode(), hashlib.sha256).digest()


def _frame(kind: int, body: bytes) -> bytes:
    return struct.pack("<2sBBd", b"GZ", 2, kind, float("nan")) + body


@pytest.mark.timeout(60)
def test_malformed_and_oversized_frames_are_dropped(cluster: Any) -> None:
    c = cluster()
    founder = c.founder
    ctx = zmq.Context()
    raw = ctx.socket(zmq.DEALER)
    raw.connect(founder.address)
    try:
        bcast = Bcast(("x", 1, "raw"), 0, "latency", 1, NodeSet.span(0, NV), False, 0, 3, b"bad")
        raw.send(b"junk")  # no header
        raw.send(_frame(99, b""))  # unknown kind
        raw.send(_frame(7, encode(bcast)))  # a core message before any handshake
        raw.send(_frame(7, b"\x00" * (founder.max_message + 70000)))  # oversized
        raw.send(_frame(1, b"short hello"))  # malformed handshake
        assert founder.wait_until(
            lambda g: g.stats.malformed >= 3 and g.stats.unauthenticated >= 1, 10
        )
        assert founder.stats.oversized == 1
        # an authenticated peer's malformed message is dropped as well
        auth = ctx.socket(zmq.DEALER)
        auth.connect(founder.address)
        nonce, pid, addr = b"a" * 32, 12345, "tcp://127.0.0.1:1"
        hello = nonce + struct.pack("<QQ", pid, 2**64 - 1) + struct.pack("<I", len(addr))
        auth.send(_frame(1, hello + addr.encode()))
        assert auth.poll(10000)
        challenge = auth.recv()[12:]
        auth.send(_frame(3, _client_mac(founder.secret, nonce, challenge, pid, addr)))
        assert auth.poll(10000)
        assert auth.recv()[3] == 4  # ACK
        before = founder.stats.malformed
        auth.send(_frame(7, encode(bcast)[:-3]))  # truncated
        assert founder.wait_until(lambda g: g.stats.malformed == before + 1, 10)
        auth.close(0)
    finally:
        raw.close(0)
        ctx.term()
    assert founder.vnodes == frozenset(range(NV)) and founder.error is None
    c.spawn()
    c.expect("joined", 1)
    op = founder.bcast(PAYLOAD, root=0)
    c.wait_delivered(op)
    c.stop()
    _exactly_once(c.deliveries, op)


@pytest.mark.timeout(120)
def test_emulated_wan_delays_cross_cluster_delivery(cluster: Any, tmp_path: Path) -> None:
    from gridcoll.network import get_grid
    from gridcoll.runtime.emulation import create_link_state

    grid = get_grid("magpie:2,2")
    path = create_link_state(grid, tmp_path / "links")
    try:
        c = cluster(rank=0, emu=("magpie:2,2", str(path)))
        for rank in (1, 2, 3):
            c.spawn(rank)
        joined = c.expect("joined", 3)
        assert c.founder.wait_until(lambda g: len(g.members) == 4, 30)
        far_pids = {j[1] for j in joined if grid.cluster_of[j[2]] != grid.cluster_of[0]}
        sites = {pid >> SITE_SHIFT for pid in far_pids}  # an id names its cluster
        assert sites == {grid.cluster_of[2]} != {c.founder.pid >> SITE_SHIFT} == {0}
        start = time.monotonic()
        op = c.founder.bcast(b"w" * 1024, root=0, kind="latency")
        c.wait_delivered(op)
        far = [d for d in c.deliveries if d[2] == op and d[1] in far_pids]
        assert far, "no vnode in the other cluster"
        wan = grid.plogp(0, 2).L
        assert min(d[5] for d in far) - start >= wan
        stats = c.stop()
        assert sum(s[2]["emulated"] for s in stats) > 0
        assert c.founder.stats.emulated > 0
    finally:
        path.unlink(missing_ok=True)


def test_parameters_are_checked() -> None:
    with pytest.raises(GroupError):
        Group.join("tcp://127.0.0.1:1", b"s" * 32, timeout=0.3)
    with Group.start(2, seed=0) as g, pytest.raises(Exception, match="trusted_pickle"):
        g.bcast({"a": 1})
    with Group.start(2, seed=0) as g, pytest.raises(Exception, match="not owned"):
        g.bcast(b"x", root=5)
    with pytest.raises(ParameterError, match="probe_pings"):
        Group.start(2, probe_pings=0)
    with pytest.raises(ParameterError, match="site"):
        Group.start(2, site=1 << 10)
    with Group.start(2, site=7) as g:
        assert g.pid >> SITE_SHIFT == 7


def test_a_probe_pings_several_times_and_the_trees_can_be_asked() -> None:
    """Each probe makes ``probe_pings`` ping-pongs (the fastest is its RTT); a member
    can say who its parent is in any member's tree."""
    with Group.start(2, seed=1, probe_pings=4) as a, Group.join(a.address, a.secret) as b:
        assert b.wait_until(lambda g: len(g.members) == 2, 10)
        assert _eventually(lambda: not a.probing() and not b.probing(), 20)
        assert a.stats.probes > 0 and a.stats.pings == 4 * a.stats.probes
        assert b.stats.probes > 0 and b.stats.pings == 3 * b.stats.probes  # the default
        for kind in ("latency", "bandwidth"):
            assert a.parent(kind, a.pid) is None  # the root
            assert b.parent(kind, a.pid) == a.pid
        for nbytes, downloads in ((0, 0), (PROBE_BYTES, 1)):  # 0: pings only
            pings, before = b.stats.pings, b.stats.downloads
            b._call(lambda n=nbytes: b._prober.start(a.pid, n))
            assert _eventually(lambda p=pings: b.stats.pings == p + 3, 10)
            assert _eventually(lambda d=before + downloads: b.stats.downloads == d, 10)
            assert b.stats.downloads == before + downloads


def test_heartbeats_time_round_trips() -> None:
    """Each beat echoes the peer's last one: both ends time round trips from them."""
    with (
        Group.start(2, seed=1, heartbeat_s=0.05) as a,
        Group.join(a.address, a.secret, heartbeat_s=0.05) as b,
    ):
        assert _eventually(lambda: a.stats.rtt_samples > 2 and b.stats.rtt_samples > 2, 10)


def test_a_faster_round_trip_recomputes_the_peer_s_download_rate() -> None:
    """A download's rate counts half the RTT (``download_rate``); a round trip timed
    faster later (``Remeasured``) comes with the rate recomputed with it, the chunks'
    passage kept, so a ping that queued behind data no longer lowers the rate."""
    options = {"heartbeat_s": None, "rtt_resolution_s": 0.0}
    with (
        Group.start(2, seed=1, **options) as a,
        Group.join(a.address, a.secret, **options) as b,
    ):
        assert b.wait_until(lambda g: a.pid in g.core.measured, 30)
        assert b.stats.downloads >= 1
        held = b._call(lambda: b.core.measured[a.pid])
        nbytes, passage = b._call(lambda: b._detector.passage[a.pid])
        assert nbytes == PROBE_BYTES and held.bw_Bps == pytest.approx(
            nbytes / (held.rtt_s / 2 + passage)
        )
        best = held.rtt_s / 4
        b._call(lambda: b._detector.sample_rtt(a.pid, best))
        now = b._call(lambda: b.core.measured[a.pid])
        assert now.rtt_s == best and now.bw_Bps == pytest.approx(nbytes / (best / 2 + passage))
        assert now.bw_Bps > held.bw_Bps


def test_a_member_acks_the_messages_it_took_between_beats() -> None:
    """Between beats (30 s apart here), a member tells each member it took core
    messages from how many, every ``ack_s``: a broadcast's sender holds the count within
    a fraction of a second, so after a death it sends again only what the last
    ``ack_s`` may have lost (gridcoll.group.detector, "Acks")."""
    options = {"heartbeat_s": 30.0, "heartbeat_timeout_s": 60.0, "ack_s": 0.05}
    with (
        Group.start(2, seed=1, **options) as a,
        Group.join(a.address, a.secret, **options) as b,
    ):
        assert a.wait_until(lambda g: len(g.members) == 2, 30)
        op = a.bcast(PAYLOAD, root=0, kind="bandwidth")
        assert any(d.op_id == op for d in b.deliveries(timeout=30))
        sent = a._call(lambda: a.core.sends_to[b.pid])

        def acked() -> int:  # the count b last told a of a's messages
            return a._call(lambda: a._detector.acked.get(b.pid, (0, 0))[1])

        assert _eventually(lambda: acked() >= sent, 2.0), (acked(), sent)
    with pytest.raises(ParameterError, match="ack_s"):
        Group.start(1, heartbeat_s=1.0, ack_s=2.0)


def _eventually(condition: Any, timeout: float) -> bool:
    """Poll ``condition()`` (which may ask a group's I/O thread) until true."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


@pytest.mark.timeout(120)
def test_vnodes_moved_between_segments_get_the_whole_payload(cluster: Any, tmp_path: Path) -> None:
    """Segments cross the emulated WAN ~0.1 s apart; a far process hands its vnodes to a
    process near the root (which has long finished its own vnodes and dropped the
    segments) after the first one, so the heir needs the segments' bytes carried with
    the handover to assemble the payload."""
    from gridcoll.network import get_grid
    from gridcoll.runtime.emulation import create_link_state

    grid = get_grid("magpie:2,2")
    path = create_link_state(grid, tmp_path / "links")
    try:
        c = cluster(rank=0, emu=("magpie:2,2", str(path)))
        for rank in (1, 2, 3):
            c.spawn(rank)
        pid_of = {rank: pid for _, pid, rank, _ in c.expect("joined", 3)}
        assert c.founder.wait_until(lambda g: len(g.members) == 4, 30)
        heir = pid_of[1]  # near the root: done with its own vnodes, its segments dropped
        c.procs[1][1].put(("migrate_on_segment", heir))  # procs[1] has rank 2
        op = c.founder.bcast(PAYLOAD, root=0, kind="bandwidth")
        moved = c.expect("migrated", 1)[0][2]
        assert moved
        c.wait_delivered(op)
        stats = c.stop()
        _exactly_once(c.deliveries, op)
        by_heir = {v for d in c.deliveries if d[2] == op and d[1] == heir for v in d[3]}
        assert set(moved) <= by_heir
        assert sum(s[2]["undeliverable"] for s in stats) == 0
    finally:
        path.unlink(missing_ok=True)


@pytest.mark.timeout(120)
def test_a_killed_process_is_detected_and_its_vnodes_taken_over(cluster: Any) -> None:
    """SIGKILL a member: heartbeats detect it, an heir takes its vnodes, a broadcast
    sent to it before anyone knew still reaches every vnode once, and a reduction in
    progress ends saying whose data it lacks."""
    suspected: list[int] = []
    c = cluster(heartbeat_s=0.5, heartbeat_timeout_s=2.0, on_suspect=suspected.append)
    own = CTX.Queue()
    c.spawn(out=own)
    (_, victim, _, _) = own.get(timeout=60)
    for _ in range(2):
        c.spawn()
    pid_of = {os_pid: pid for _, pid, _, os_pid in c.expect("joined", 2)}
    assert c.founder.wait_until(lambda g: len(g.members) == 4, 30)
    killed = c.procs[0][0]
    killed.kill()  # SIGKILL: no leave, no goodbye
    killed.join(10)
    for i in (1, 2):  # a reduction the victim cannot join
        c.procs[i][1].put(("reduce", "r", 1))
    c.founder.reduce(1, "sum", 0, tag="r")
    after = c.founder.bcast(PAYLOAD)  # sent before anyone knows
    c.wait_delivered(after, timeout=60)
    _exactly_once(c.deliveries, after)  # the victim's vnodes at their heir
    assert c.founder.wait_until(lambda g: g.failures, 20)
    (lost,) = c.founder.failures
    assert suspected == [victim] and lost.pid == victim
    assert lost.vnodes and lost.heir in c.founder.members
    assert victim not in c.founder.members and not c.founder.suspects
    result = c.founder.result(("reduce", "r"), timeout=30)
    assert lost.vnodes <= result.missing  # its data died with it
    assert result.value == NV - len(result.missing)  # the rest counted once each
    assert {d[1] for d in c.deliveries if d[2] == after} <= {*pid_of.values(), c.founder.pid}
    c.procs.pop(0)
    assert all(error is None for *_, error in c.stop())


@pytest.mark.timeout(60)
def test_iterator_pickle_opt_in_and_array_reduction() -> None:
    """Two groups in this process (real sockets, two I/O threads)."""
    import numpy as np

    with (
        Group.start(4, seed=2, trusted_pickle=True) as a,
        Group.join(a.address, a.secret, trusted_pickle=True) as b,
    ):
        assert a.wait_until(lambda g: len(g.vnodes) == 2, 10)
        assert b.wait_until(lambda g: len(g.vnodes) == 2, 10)
        op = a.bcast({"work": [1, 2, 3]}, root=0)
        got = next(b.deliveries(timeout=10))
        assert (got.op_id, got.data, got.vnodes) == (op, {"work": [1, 2, 3]}, b.vnodes)
        assert next(b.deliveries(timeout=0.2), None) is None  # once
        values = {v: np.full(3, v, dtype=np.int64) for v in range(4)}
        for g in (a, b):
            g.reduce(values, "sum", root=0, tag="arr")
        res = a.result(("reduce", "arr"), timeout=10)
        assert res.value.tolist() == [6, 6, 6] and not res.missing
        b.leave()
        assert a.wait_until(lambda g: len(g.vnodes) == 4 and len(g.members) == 1, 10)


def _probed_over_magpie(tmp_path: Path, wrap: Any) -> tuple[Any, Any, Any]:
    """Found at rank 0 and join at rank 2 of ``magpie:2,2`` (ranks 0, 1 | 2, 3; 10 ms
    and about 1 MB/s between), the founder's answers to probes passed through
    ``wrap(founder, answer)``; returns the grid, the joiner's figures for the founder
    and the joiner's stats."""
    from gridcoll.network import get_grid
    from gridcoll.runtime.emulation import create_link_state

    grid = get_grid("magpie:2,2")
    path = create_link_state(grid, tmp_path / "links")
    emu = ("magpie:2,2", str(path))
    try:
        with Group.start(NV, seed=2, rank=0, emulator=_emulator(emu)) as founder:
            founder._prober.answer = wrap(founder, founder._prober.answer)  # type: ignore[method-assign]
            with Group.join(
                founder.address, founder.secret, rank=2, emulator=_emulator(emu)
            ) as joiner:
                assert joiner.wait_until(lambda g: founder.pid in g.core.measured, 30)
                return grid, joiner.core.measured[founder.pid], joiner.stats
    finally:
        path.unlink(missing_ok=True)


@pytest.mark.timeout(60)
def test_a_probe_never_measures_an_emulated_link_faster_than_it_is(tmp_path: Path) -> None:
    """A probe's rate is its download's bytes over the time from the request, so no
    delay of the pings can raise it, and neither it nor the RTT counts how long the peer
    took to answer. Here the peer answers each request 0.1 s late (a busy machine): with
    half the pings' RTT taken off the download's time, as before, the 128 KiB download
    over the 1 MB/s emulated link measured about 1.4 MB/s, and the RTT was over 0.1 s;
    with the waits counted, the download would measure under 0.6 MB/s."""

    def slow(founder: Group, answer: Any) -> Any:
        def slow_answer(*args: Any) -> None:  # to pings and the download's request
            time.sleep(0.1)
            answer(*args)

        return slow_answer

    grid, got, stats = _probed_over_magpie(tmp_path, slow)
    link = PROBE_BYTES / grid.plogp(0, 2).g(PROBE_BYTES)  # the link's rate
    assert stats.downloads >= 1 and stats.pings >= 3
    assert 0.8 * link < got.bw_Bps <= link
    wan = grid.plogp(0, 2).L + grid.plogp(2, 0).L  # 20 ms
    assert wan <= got.rtt_s < wan + 0.05


@pytest.mark.timeout(60)
def test_a_ping_times_the_network_not_the_peers_scheduling() -> None:
    """A LAN ping's round trip leaves out how long the peer took to read and answer it:
    the kernel stamps the datagram's arrival and the pong says how long it waited. Here
    the founder's I/O thread reads its ping socket 0.05 s late each time (a busy
    machine), which a ping timed when read would count twice over."""
    import sys

    with Group.start(NV, seed=2, heartbeat_s=None) as founder:
        drain = founder._transport.drain_udp

        def late_drain() -> None:
            time.sleep(0.05)
            drain()

        founder._transport.drain_udp = late_drain  # type: ignore[method-assign]
        with Group.join(founder.address, founder.secret, heartbeat_s=None) as joiner:
            assert joiner.wait_until(lambda g: founder.pid in g.core.measured, 30)
            assert joiner.stats.pings >= 3 and founder.stats.frames_in > 0
            rtt = joiner.core.measured[founder.pid].rtt_s
            if sys.platform == "linux":  # kernel arrival stamps
                assert founder.stats.kernel_stamped >= 3 and joiner.stats.kernel_stamped >= 3
                assert 0 < rtt < 0.02
            else:
                assert rtt >= 0.05


def test_no_round_trip_below_the_resolution_reaches_the_core() -> None:
    """A round trip faster than ``rtt_resolution_s`` is reported as it, so that two
    timings of one LAN differ by no more than the core's ``NEAR_RATIO`` allows (module
    doc, "Probes and round trips"): here every loopback ping is far below 0.25 s."""
    coarse = {"heartbeat_s": None, "rtt_resolution_s": 0.25}
    with (
        Group.start(NV, seed=2, **coarse) as founder,
        Group.join(founder.address, founder.secret, **coarse) as joiner,
    ):
        assert joiner.wait_until(lambda g: founder.pid in g.core.measured, 30)
        assert joiner.core.measured[founder.pid].rtt_s == 0.25
    with pytest.raises(ParameterError, match="rtt_resolution_s"):
        Group.start(NV, rtt_resolution_s=-1.0)


@pytest.mark.timeout(60)
def test_forged_and_malformed_ping_datagrams_are_dropped() -> None:
    """Security rule 2 for the ping socket: a datagram too short, of a wrong kind, with
    a MAC made without the secret, or from a process not in the directory is dropped,
    counted and never answered; a well-made ping is answered."""
    import socket

    with (
        Group.start(NV, seed=2, heartbeat_s=None) as founder,
        Group.join(founder.address, founder.secret, heartbeat_s=None) as joiner,
    ):
        assert joiner.wait_until(lambda g: founder.pid in g.core.measured, 30)
        host, port = founder.address.removeprefix("tcp://").rsplit(":", 1)
        raw = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        raw.bind((host, 0))
        raw.settimeout(0.5)
        to = (host, int(port))

        def datagram(kind: int, pid: int, secret: bytes) -> bytes:
            body = struct.pack("<QQd", 7, pid, time.monotonic())
            data = struct.pack("<2sBBd", b"GZ", 2, kind, float("nan")) + body
            return data + hmac.new(secret, b"gridcoll-udp/" + data, hashlib.sha256).digest()[:16]

        before = asdict(founder.stats)
        try:
            raw.sendto(b"junk", to)  # short
            raw.sendto(datagram(7, joiner.pid, founder.secret), to)  # not a ping's kind
            raw.sendto(datagram(8, joiner.pid, b"x" * 32), to)  # not the secret
            raw.sendto(datagram(8, 424242, founder.secret), to)  # not in the directory
            assert founder.wait_until(
                lambda g: (
                    g.stats.malformed == before["malformed"] + 2
                    and g.stats.unauthenticated == before["unauthenticated"] + 2
                ),
                10,
            )
            with pytest.raises(TimeoutError):
                raw.recvfrom(256)  # none answered
            assert (founder.members, founder.error) == (frozenset({founder.pid, joiner.pid}), None)
            # the pong goes to the pinger's ping socket, found by its directory entry
            pings = joiner.stats.frames_in
            raw.sendto(datagram(8, joiner.pid, founder.secret), to)
            assert joiner.wait_until(lambda g: g.stats.frames_in > pings, 10)
        finally:
            raw.close()


@pytest.mark.timeout(60)
def test_a_probe_survives_lost_datagrams() -> None:
    """Probe datagrams may be lost: here the first pong (the ping is sent again after
    a while) and a chunk of the download (the rate is then that of the chunks that
    came, once no more come for a while)."""
    from gridcoll.group import transport as frames

    with Group.start(NV, seed=2, heartbeat_s=None) as founder:
        send = founder._transport.datagram
        dropped: list[tuple[int, int]] = []

        def lossy(address: str, to_rank: Any, kind: int, body: bytes) -> None:
            index = struct.unpack_from("<QddH", body)[3] if kind == frames.DATA else -1
            if kind == frames.PONG and not dropped:
                dropped.append((kind, 0))
                return
            if kind == frames.DATA and index == 1 and len(dropped) == 1:
                dropped.append((kind, index))
                return
            send(address, to_rank, kind, body)

        founder._transport.datagram = lossy  # type: ignore[method-assign]
        with Group.join(founder.address, founder.secret, heartbeat_s=None) as joiner:
            assert joiner.wait_until(lambda g: founder.pid in g.core.measured, 30)
            got = joiner.core.measured[founder.pid]
            assert dropped == [(frames.PONG, 0), (frames.DATA, 1)]
            assert 0 < got.rtt_s < 0.1 and got.bw_Bps > 0
            assert joiner.stats.pings >= 3 and joiner.stats.downloads == 1


@pytest.mark.timeout(60)
def test_a_download_measures_the_link_not_the_queue_ahead(tmp_path: Path) -> None:
    """A probe's rate comes from its chunks' spacing on arrival, so traffic queued on
    the link ahead of the download does not lower it. Here 0.5 s of other traffic takes
    the emulated link just before the peer answers the fetch: timed to the last chunk,
    the 128 KiB download would measure about a fifth of the link's rate."""
    from gridcoll.group import transport as frames

    def queue_ahead(founder: Group, answer: Any) -> Any:
        def answer_later(kind: int, *args: Any) -> None:
            if kind == frames.FETCH:  # someone else's 500 kB first
                founder.emulator.reserve(0, 2, 500_000, time.monotonic())
            answer(kind, *args)

        return answer_later

    grid, got, stats = _probed_over_magpie(tmp_path, queue_ahead)
    link = PROBE_BYTES / grid.plogp(0, 2).g(PROBE_BYTES)
    assert grid.plogp(0, 2).g(500_000) > 0.4 and stats.downloads == 1
    assert 0.8 * link < got.bw_Bps <= link
