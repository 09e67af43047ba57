"""Pipelined long broadcasts (seed 004, sec. IV-D): the model's segment size, and the
core driven event by event on a three-process chain."""

from __future__ import annotations

import math
import random
from collections import Counter
from dataclasses import dataclass, field

import pytest

from gridcoll.network.presets import das2_spread
from gridcoll.phoenix.nodesets import NodeSet
from gridcoll.phoenix.protocol import (
    Bcast,
    BcastRequested,
    Deliver,
    Handover,
    MigrateRequested,
    Process,
    Received,
    Send,
    Start,
)
from gridcoll.phoenix.static import Network
from gridcoll.phoenix.trees import (
    MAX_SEGMENT,
    MIN_SEGMENT,
    Edge,
    Summary,
    bandwidth_summary,
    choose_tree,
    latency_summary,
    pipelined_time,
    segment_size,
)
from gridcoll.phoenix.vnodes import VNodeTable
from gridcoll.simulate.phoenix import PhoenixSim

FAST, SLOW = 1e8, 1e6


# -- the model ------------------------------------------------------------------------------
def _chain(depth: int, bw: float, rtt: float = 1e-4) -> Summary:
    s = Summary()
    for _ in range(depth):
        s = bandwidth_summary([Edge(rtt, bw, s)])
    return s


def test_bandwidth_summary_knows_the_fill_and_the_depth() -> None:
    chain = _chain(3, FAST)
    assert chain.depth == 3 and chain.descendants == 3
    assert chain.b == pytest.approx(1 / FAST)  # the steady rate: one hop's
    assert chain.path_b == pytest.approx(3 / FAST)  # one segment's way down: three
    star = bandwidth_summary([Edge(1e-4, FAST, Summary())] * 4)
    assert star.depth == 1 and star.b == pytest.approx(star.path_b) == pytest.approx(4 / FAST)


def test_segment_size_is_the_square_root_law_clamped() -> None:
    chain, c = _chain(5, 1e7), 20e-6
    m = 64 << 20
    s = segment_size(chain, m, c)
    best = math.sqrt(m * c / (chain.path_b - chain.b))
    assert MIN_SEGMENT <= s <= MAX_SEGMENT and abs(s - best) / best < 0.01
    # it is (close to) the minimum of the model's time over segment sizes
    t = pipelined_time(chain, m, s, c)
    assert all(t <= pipelined_time(chain, m, x, c) * 1.001 for x in range(4096, 1 << 20, 4096))
    # short: one segment; one hop: cutting gains nothing, the largest segment
    assert segment_size(chain, 1000, c) == 1000
    assert segment_size(_chain(1, FAST), m, c) == MAX_SEGMENT
    # costly messages: larger segments, clamped to the probe's size
    assert segment_size(chain, m, 1.0) == MAX_SEGMENT
    # segments are evened out
    n = math.ceil(m / s)
    assert s == math.ceil(m / n)


def test_choose_tree_compares_store_and_forward_with_the_pipeline() -> None:
    # latency tree: a star of 8 over slow links; bandwidth tree: a chain of 8 fast
    # hops, each as long as the star's.
    star = latency_summary([Edge(5e-3, SLOW, Summary())] * 8)
    chain = _chain(8, FAST, 5e-3)
    assert choose_tree(star, chain, 1, 20e-6) == "latency"
    assert choose_tree(star, chain, 1 << 22, 20e-6) == "bandwidth"
    # pipelining is what makes a deep chain worth it: store and forward down 8 hops
    # of 1e8 B/s would take 8 M / 1e8, the pipeline about M / 1e8.
    m = 64 << 20
    t = pipelined_time(chain, m, segment_size(chain, m, 20e-6), 20e-6)
    assert t < 1.1 * m / FAST < 8 * m / FAST


# -- the core, event by event -----------------------------------------------------------------
def _measure(p: int, q: int) -> tuple[float, float]:
    """0 - 1 - 2: fast between neighbours, slow between 0 and 2 (p probing q)."""
    return (1e-4, FAST) if abs(p - q) == 1 else (5e-3, SLOW)


@dataclass
class _Net(Network):
    """The in-memory network, also recording each delivery's segment."""

    segments: list[tuple[int, int, frozenset[int]]] = field(default_factory=list)

    def apply(self, pid, actions) -> None:
        actions = list(actions)
        self.segments += [(pid, a.segment, a.vnodes) for a in actions if isinstance(a, Deliver)]
        super().apply(pid, actions)


def _chain_net(seed: int = 0) -> _Net:
    mapping = {p: (p,) for p in range(3)}
    procs = {
        p: Process(p, rng=random.Random(p), founder_vnodes=mapping, extra_probes=6)
        for p in range(3)
    }
    net = _Net(procs, _measure, random.Random(seed))
    for p in procs:
        net.feed(p, Start())
    net.run()
    assert procs[2].parent("bandwidth", 0) == 1 and procs[1].parent("bandwidth", 0) == 0
    return net


def _bcasts(actions, dst: int | None = None) -> list[Bcast]:
    return [
        a.message
        for a in actions
        if isinstance(a, Send) and isinstance(a.message, Bcast) and dst in (None, a.dst)
    ]


def _delivers(actions) -> list[Deliver]:
    return [a for a in actions if isinstance(a, Deliver)]


def test_segments_are_forwarded_before_the_last_one_arrives() -> None:
    net = _chain_net()
    root, mid, leaf = (net.processes[p] for p in range(3))
    m = 1 << 20
    payload = bytes(range(256)) * (m // 256)
    out = root.handle(BcastRequested("b", 0, m, payload=payload, kind="bandwidth"))
    segs = _bcasts(out, dst=1)
    n = len(segs)
    assert n == math.ceil(m / root.segment_size(m)) and n > 1
    assert [s.segment for s in segs] == list(range(n)) and {s.nsegments for s in segs} == {n}
    assert sum(s.nbytes for s in segs) == m
    assert all(s.targets == NodeSet.of([1, 2]) and s.via_tree for s in segs)
    assert [d.segment for d in _delivers(out)] == list(range(n))  # the root's own vnode
    # The middle process gets segment 0 only: it delivers it and passes it on at once.
    out = mid.handle(Received(0, segs[0]))
    assert [(d.vnodes, d.segment) for d in _delivers(out)] == [(frozenset({1}), 0)]
    (fwd,) = _bcasts(out, dst=2)
    assert (fwd.segment, fwd.targets, fwd.nbytes) == (0, NodeSet.of([2]), segs[0].nbytes)
    assert mid.table.owned[1].partial == {"b": NodeSet.of([0])}
    assert "b" not in mid.table.owned[1].delivered
    # The leaf gets it and delivers segment 0, the payload's first slice.
    (d,) = _delivers(leaf.handle(Received(1, fwd)))
    assert d.segment == 0 and d.nsegments == n and d.payload == payload[: fwd.nbytes]
    # The rest, in order: every segment once at each vnode, then the broadcast is whole.
    got = Counter({(1, 0): 1, (2, 0): 1})
    parts = [d.payload]
    for s in segs[1:]:
        for f in _bcasts(mid.handle(Received(0, s)), dst=2):
            for d in _delivers(leaf.handle(Received(1, f))):
                got.update((v, d.segment) for v in d.vnodes)
                parts.append(d.payload)
        got[1, s.segment] += 1
    assert got == Counter({(v, i): 1 for v in (1, 2) for i in range(n)})
    assert b"".join(parts) == payload
    for p, v in ((mid, 1), (leaf, 2)):
        assert p.table.owned[v].delivered == frozenset({"b"}) and not p.table.owned[v].partial


def test_a_second_delivery_of_a_segment_raises() -> None:
    net = _chain_net()
    root, mid = net.processes[0], net.processes[1]
    segs = _bcasts(root.handle(BcastRequested("b", 0, 1 << 20, kind="bandwidth")), dst=1)
    mid.handle(Received(0, segs[0]))
    mid.handle(Received(0, segs[1]))  # another segment: fine
    with pytest.raises(Exception, match="segment 0 reached vnode 1 twice"):
        mid.handle(Received(0, segs[0]))


def test_segment_state_travels_with_a_vnode() -> None:
    t = VNodeTable.founded(0, {0: (0,), 1: (1,)})
    assert t.mark_delivered(0, "b", 0, 3) and t.mark_delivered(0, "b", 2, 3)
    assert not t.mark_delivered(0, "b", 2, 3)
    (state,) = t.give([0], 1).values()
    assert state.partial == {"b": NodeSet.of([0, 2])}
    u = VNodeTable.founded(1, {0: (0,), 1: (1,)})
    u.owned.pop(0, None)
    u.take({0: state})
    assert not u.mark_delivered(0, "b", 0, 3)
    assert u.mark_delivered(0, "b", 1, 3)
    assert u.owned[0].delivered == frozenset({"b"}) and not u.owned[0].partial


@pytest.mark.parametrize("seed", range(12))
def test_a_migration_between_segments_still_gives_each_segment_once(seed: int) -> None:
    net = _chain_net(seed)
    root, leaf = net.processes[0], net.processes[2]
    m = 1 << 20
    net.apply(0, root.handle(BcastRequested("b", 0, m, kind="bandwidth")))
    n = math.ceil(m / root.segment_size(m))
    # Run until the leaf has some but not all segments, then move vnode 2 to process 1
    # (the new owner learns of it by a Handover racing the remaining segments).
    rng = random.Random(seed)
    stop = rng.randrange(1, n)
    while len([1 for p, op, vs in net.delivered if p == 2]) < stop:
        assert net.step()
    before = dict(leaf.table.owned[2].partial)
    assert before and len(before["b"]) == stop
    out = leaf.handle(MigrateRequested(frozenset({2}), 1))
    (handover,) = [
        a.message for a in out if isinstance(a, Send) and isinstance(a.message, Handover)
    ]
    assert dict(handover.states)[2].partial == before
    net.apply(2, out)
    net.run()
    assert {op for _, op, _ in net.delivered} == {"b"}
    got = Counter((v, seg) for _, seg, vs in net.segments for v in vs)
    assert got == Counter({(v, i): 1 for v in range(3) for i in range(n)})
    # vnode 2 got `stop` segments at process 2, the rest at its new owner
    at = Counter(p for p, _, vs in net.segments if 2 in vs)
    assert at == Counter({2: stop, 1: n - stop})
    assert net.processes[1].table.owned[2].delivered == frozenset({"b"})


# -- in the simulator -------------------------------------------------------------------------
def test_simulated_pipelined_broadcast_runs_at_the_wide_area_rate() -> None:
    grid = das2_spread(8, 2)  # VU and Leiden, 5 Mb/s from VU to Leiden
    sim = PhoenixSim(grid, seed=0)
    sim.settle(600.0)
    m = 1 << 20
    root = sim.procs[0].core
    assert root.choose_kind(m) == "bandwidth"
    done: list = []
    sim.bcast(sim.env.now, 0, m, on_done=done.append)
    sim.run()
    (op,) = done
    assert op.nsegments == math.ceil(m / root.segment_size(m)) > 1
    assert (op.delivered, op.lost, op.duplicated) == (8, 0, 0)
    assert set(op.arrival_s) == set(range(8))
    wan = m / (5e6 / 8)  # the message over the VU -> Leiden link alone
    # Pipelined, the four Leiden processes behind the link add little; store and
    # forward would add a LAN hop's whole message time per level.
    assert wan < op.time_s < 1.02 * wan  # (store and forward: 1.06)
