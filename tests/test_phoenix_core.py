"""The protocol core driven event by event (as h11's tests drive its state machine),
plus its pure parts: node sets and tree rules."""

from __future__ import annotations

import copy
import math
import random
from dataclasses import replace
from operator import add

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gridcoll.errors import LocalProtocolError
from gridcoll.phoenix.nodesets import NodeSet
from gridcoll.phoenix.protocol import (
    HEADER_BYTES,
    KINDS,
    PROBE_BYTES,
    SITE_SHIFT,
    WANTS,
    Abandoned,
    Adopt,
    AdoptItem,
    Bcast,
    BcastRequested,
    ChildItem,
    ChildUpdates,
    Deliver,
    Handover,
    Info,
    InfoRequest,
    JoinRequest,
    JoinRequested,
    LeaveAck,
    LeaveRequested,
    Leaving,
    MigrateRequested,
    Near,
    ParentUpdates,
    PeerFailed,
    PeerLost,
    Position,
    Probe,
    ProbeResult,
    Process,
    Received,
    ReduceDone,
    ReduceRequested,
    Remeasured,
    Send,
    SetTimer,
    Start,
    State,
    TimerExpired,
    Update,
    Want,
    Welcome,
)
from gridcoll.phoenix.static import Network, founders
from gridcoll.phoenix.trees import (
    NEAR_RATIO,
    NOISE_SLACK,
    Edge,
    Summary,
    bandwidth_bar,
    bandwidth_better,
    bandwidth_offer,
    bandwidth_summary,
    chained,
    child_order,
    choose_tree,
    latency_bar,
    latency_better,
    latency_summary,
    summary_moved,
)
from gridcoll.phoenix.vnodes import HANDOVER_STEP, VNodeState, VNodeTable

# -- node sets ----------------------------------------------------------------------------
small_sets = st.frozensets(st.integers(0, 200), max_size=60)


@given(a=small_sets, b=small_sets)
def test_nodeset_matches_python_sets(a: frozenset, b: frozenset) -> None:
    na, nb = NodeSet.of(a), NodeSet.of(b)
    assert set(na) == a and len(na) == len(a)
    assert set(na | nb) == a | b
    assert set(na & nb) == a & b
    assert set(na - nb) == a - b
    assert na.isdisjoint(nb) == a.isdisjoint(b)
    assert all((v in na) == (v in a) for v in range(-1, 202))
    assert NodeSet.decode(na.encode()) == na
    assert na.nbytes == len(na.encode())


def test_nodeset_is_compressed_and_canonical() -> None:
    assert NodeSet.span(0, 1000).ranges == ((0, 1000),)
    assert NodeSet.span(0, 1000).nbytes == 4  # count, gap, length (two bytes)
    assert NodeSet.of([3, 1, 2, 7]) == NodeSet(((1, 4), (7, 8)))
    assert NodeSet.span(0, 5) - NodeSet.of([2]) == NodeSet(((0, 2), (3, 5)))
    # a cluster's vnodes on das2-spread (every fourth): a bitmap, not 40 two-byte ranges
    strided = NodeSet.of(range(2, 160, 4))
    assert strided.nbytes == len(strided.encode()) == 23  # header (2), first node, 20 bytes
    assert strided.encode()[0] & 1 and NodeSet.decode(strided.encode()) == strided
    assert not NodeSet.span(0, 1000).encode()[0] & 1  # ranges where they are smaller
    with pytest.raises(ValueError):
        NodeSet.decode(b"\x02\x00")  # truncated
    for bad in (b"\x05\x00\x02", b"\x05\x00\x03\x00", b"\x01\x00"):
        with pytest.raises(ValueError):  # a bitmap not from member to member, or too long
            NodeSet.decode(bad)
    with pytest.raises(ValueError):
        NodeSet.of([-1])


# -- tree rules ---------------------------------------------------------------------------
LAN, WAN = 1e-4, 5e-3


def test_latency_rule_n_prefers_a_lan_neighbour_with_a_similar_route() -> None:
    # p hangs directly below a remote parent; a LAN neighbour also direct, noise makes
    # its distance a bit larger: the paper's condition II refuses, rule N accepts.
    kw = {"rtt_parent": WAN, "dist": WAN, "lan_rtt": LAN}
    assert latency_better(rtt_cand=LAN, cand_dist=WAN * 1.04, cand_children=0, **kw)
    # ... but not a neighbour whose route is chained through a third LAN.
    assert not latency_better(rtt_cand=LAN, cand_dist=2 * WAN, cand_children=0, **kw)


def test_latency_rule_s_takes_the_shorter_route_despite_a_longer_hop() -> None:
    # p's parent is 4 ms away but 3 ms from the root; a root-LAN process is 5 ms away.
    kw = {"rtt_parent": 4e-3, "dist": 7e-3, "lan_rtt": LAN}
    assert latency_better(rtt_cand=5e-3, cand_dist=LAN, cand_children=0, **kw)
    # A LAN reached directly is not split up for a few LAN hops.
    kw = {"rtt_parent": LAN, "dist": 5e-3 + 4 * LAN, "lan_rtt": LAN}
    assert not latency_better(rtt_cand=5e-3, cand_dist=0.0, cand_children=0, **kw)


def test_latency_rule_p_is_the_papers_inside_a_lan_and_refuses_chaining() -> None:
    kw = {"rtt_parent": 1.2 * LAN, "dist": WAN + 3 * LAN, "lan_rtt": LAN}
    assert latency_better(rtt_cand=LAN, cand_dist=WAN + LAN, cand_children=3, **kw)
    assert not latency_better(rtt_cand=1.3 * LAN, cand_dist=WAN + LAN, cand_children=3, **kw)
    assert not latency_better(rtt_cand=LAN, cand_dist=WAN + 4 * LAN, cand_children=3, **kw)
    # DAS-2: a direct 5 ms edge is not swapped for a 4 ms edge behind a 3 ms one.
    kw = {"rtt_parent": 5e-3, "dist": 5e-3, "lan_rtt": LAN}
    assert not latency_better(rtt_cand=4e-3, cand_dist=3e-3, cand_children=0, **kw)
    # No parent yet: anything connected; an unconnected candidate never.
    assert latency_better(
        rtt_cand=WAN,
        cand_dist=WAN,
        cand_children=9,
        rtt_parent=math.inf,
        dist=math.inf,
        lan_rtt=LAN,
    )
    assert not latency_better(
        rtt_cand=LAN,
        cand_dist=math.inf,
        cand_children=0,
        rtt_parent=math.inf,
        dist=math.inf,
        lan_rtt=LAN,
    )


def test_forwarding_overhead_counts() -> None:
    kw = {"rtt_cand": LAN, "cand_dist": WAN, "rtt_parent": WAN, "dist": WAN, "lan_rtt": LAN}
    assert latency_better(cand_children=10, overhead=0.0, **kw)
    assert not latency_better(cand_children=10, overhead=1e-3, **kw)


def test_chained_sees_property_one_broken_locally() -> None:
    assert chained(rtt_parent=4e-3, dist=7e-3, lan_rtt=LAN)
    assert not chained(rtt_parent=5e-3, dist=5e-3 + LAN, lan_rtt=LAN)
    assert not chained(rtt_parent=LAN, dist=7e-3, lan_rtt=LAN)


def test_a_parent_as_near_as_a_known_lan_is_not_remote() -> None:
    """A root a few LAN hops away through the nearest peer: with nothing to say that
    peer is in our LAN it may be a remote one (chained); a joiner that took its LAN's
    figures knows it is, and a LAN tree is not chained. A remote parent still is."""
    assert chained(rtt_parent=LAN, dist=3 * LAN, lan_rtt=LAN)
    assert not chained(rtt_parent=LAN, dist=3 * LAN, lan_rtt=LAN, lan_known=True)
    assert chained(rtt_parent=4e-3, dist=7e-3, lan_rtt=LAN, lan_known=True)


def test_bandwidth_rule() -> None:
    assert bandwidth_offer(math.inf, 100.0, 1) == 100.0
    assert bandwidth_offer(30.0, 100.0, 2) == 30.0
    assert bandwidth_offer(80.0, 100.0, 4) == 25.0
    assert bandwidth_better(106.0, 100.0) and not bandwidth_better(104.0, 100.0)
    # a LAN neighbour below the same WAN bottleneck: same rate, taken (fewer branches)
    assert bandwidth_better(97.0, 100.0, nearer=True)
    assert not bandwidth_better(85.0, 100.0, nearer=True)
    with pytest.raises(ValueError):
        bandwidth_offer(1.0, 1.0, 0)


rates = st.floats(1e3, 1e9)
times = st.floats(1e-6, 1.0)


@given(times, times, st.integers(0, 50), times, times, times, times, st.floats(0.0, 1.0))
def test_a_latency_position_past_the_bar_is_never_taken(
    rtt_cand, cand_dist, children, rtt_parent, dist, lan_rtt, overhead, beyond
) -> None:
    """:func:`latency_bar` is sound: a candidate at or beyond it loses whatever its RTT
    and child count, so a peer may leave its position out of an Info."""
    bar = latency_bar(dist=dist, rtt_parent=rtt_parent, lan_rtt=lan_rtt)
    assert dist < bar < math.inf
    assert not latency_better(
        rtt_cand=rtt_cand,
        cand_dist=bar + beyond,
        cand_children=children,
        rtt_parent=rtt_parent,
        dist=dist,
        lan_rtt=lan_rtt,
        overhead=overhead,
    )
    assert latency_bar(dist=math.inf, rtt_parent=rtt_parent, lan_rtt=lan_rtt) == math.inf
    # knowing the RTT to the candidate, the bar is lower by it, and still sound
    bar = latency_bar(dist=dist, rtt_parent=rtt_parent, lan_rtt=lan_rtt, rtt_cand=rtt_cand)
    assert not latency_better(
        rtt_cand=rtt_cand,
        cand_dist=max(0.0, bar) + beyond,
        cand_children=children,
        rtt_parent=rtt_parent,
        dist=dist,
        lan_rtt=lan_rtt,
        overhead=overhead,
    )


@given(rates, rates, rates, st.integers(1, 50), st.floats(0.0, 1.0), st.booleans(), st.booleans())
def test_a_bandwidth_position_below_the_bar_is_never_taken(
    current, bw, lan_bw, n, below, nearer, remote
) -> None:
    """:func:`bandwidth_bar` is sound: no offer a candidate at or below it makes wins."""
    est_cand = bandwidth_bar(current) * below
    offer = bandwidth_offer(est_cand, bw, n, lan_bw)
    assert not bandwidth_better(offer, current, nearer=nearer, remote=remote)
    assert bandwidth_bar(current) < current


@given(rates, rates, rates, rates, st.integers(1, 50), st.floats(0.0, 1.0))
def test_a_bandwidth_bar_through_a_measured_link_is_sound(
    current, bw, parent_bw, lan_bw, n, below
) -> None:
    """With the rate p measured to the candidate (``bw``) and to its parent, the bar is
    the candidate's own class's threshold, infinite when ``bw`` cannot pass it: no
    candidate at or below it wins, whatever its ``est``, the test :meth:`_judge` makes."""
    bar = bandwidth_bar(current, bw, parent_bw)
    assert bar >= bandwidth_bar(current)  # never looser than without the link
    est_cand = bar * below if math.isfinite(bar) else 1e12 * below
    offer = bandwidth_offer(est_cand, bw, n, lan_bw)
    nearer, remote = bw > NEAR_RATIO * parent_bw, NEAR_RATIO * bw < parent_bw  # _judge's
    assert not bandwidth_better(offer, current, nearer=nearer, remote=remote)
    assert math.isfinite(bar) == (bw > bar)  # barred outright iff the link cannot pass


def test_a_wide_area_hop_is_not_shared_by_the_parents_lan_children() -> None:
    """A remote parent with 5 LAN children and a 50 MB/s interface: the 0.75 MB/s link
    is p's alone (not a sixth of it); its interface still divides by the fan-out, and
    a LAN hop (bw = lan_bw) keeps the paper's bw / n_children."""
    assert bandwidth_offer(3.0e6, 0.75e6, 6, lan_bw=50e6) == 0.75e6
    assert bandwidth_offer(3.0e6, 0.75e6, 6) == pytest.approx(0.125e6)  # the paper's
    assert bandwidth_offer(3.0e6, 0.75e6, 100, lan_bw=50e6) == pytest.approx(0.5e6)
    assert bandwidth_offer(9.0e6, 50e6, 10, lan_bw=50e6) == pytest.approx(5e6)
    lan_parent = [Edge(LAN, 50e6, Summary())] * 4
    remote_child = Edge(WAN, 0.75e6, Summary())
    assert bandwidth_summary([*lan_parent, remote_child], 50e6).b == pytest.approx(1 / 0.75e6)
    assert bandwidth_summary([*lan_parent, remote_child]).b == pytest.approx(5 / 0.75e6)


def test_property_one_for_the_bandwidth_tree() -> None:
    """Below a LAN parent (50 MB/s hop) a remote candidate (a 3 MB/s hop) offering a
    little more than the LAN's rate is refused: its flow would share the wide-area link
    with the LAN gateway's. Twice the rate (another, faster link) is taken."""
    assert bandwidth_better(3.1e6, 2.9e6) and not bandwidth_better(3.1e6, 2.9e6, remote=True)
    assert bandwidth_better(6.0e6, 2.9e6, remote=True)


def test_children_most_descendants_first() -> None:
    assert child_order([4, 7, 9, 2], [0, 5, 5, 1]) == [7, 9, 2, 4]


def test_model_picks_latency_tree_for_short_and_bandwidth_tree_for_long() -> None:
    leaf = Summary()
    # latency tree: a star of 8 over a 1e7 B/s link; bandwidth tree: a chain at 1e7.
    star = latency_summary([Edge(WAN, 1e7, leaf)] * 8)
    chain = bandwidth_summary([Edge(WAN, 1e7, Summary(7 * WAN / 2, 1e-7, 6))])
    assert star.descendants == 8 and chain.descendants == 7
    assert star.a == pytest.approx(WAN / 2) and star.b == pytest.approx(8e-7)
    assert choose_tree(star, chain, 1) == "latency"
    assert choose_tree(star, chain, 1 << 22) == "bandwidth"


# -- the state machine, event by event ----------------------------------------------------
def _founders(n: int, vnodes_each: int = 1, **kw) -> dict[int, Process]:
    mapping = {p: range(p * vnodes_each, (p + 1) * vnodes_each) for p in range(n)}
    return {p: Process(p, rng=random.Random(p), founder_vnodes=mapping, **kw) for p in range(n)}


def _sends(actions, kind=None) -> list[Send]:
    return [
        a for a in actions if isinstance(a, Send) and (kind is None or isinstance(a.message, kind))
    ]


def _two_lans(p: int, q: int) -> tuple[float, float]:
    return (LAN, 1e8) if p % 2 == q % 2 else (WAN, 1e6)


def _started(procs: dict[int, Process], links, seed: int) -> Network:
    """``procs`` started on a network whose links are ``links(p, q) -> (rtt, bw)``, run
    until quiet."""
    net = Network(procs, links, random.Random(seed))
    for p in procs:
        net.feed(p, Start())
    net.run()
    return net


def _converged(n: int, vnodes_each: int = 1, seed: int = 0, **kw) -> Network:
    return _started(_founders(n, vnodes_each, **kw), _two_lans, seed)


def test_error_state_is_sticky_and_says_why() -> None:
    p = Process(0, rng=random.Random(0))
    assert p.state is State.IDLE
    with pytest.raises(LocalProtocolError):
        p.handle(BcastRequested("op", 0, 1))
    assert p.state is State.ERROR and "IDLE" in p.error
    with pytest.raises(LocalProtocolError, match="ERROR"):
        p.handle(JoinRequested(1))


def test_start_needs_a_founder_mapping() -> None:
    p = Process(0, rng=random.Random(0))
    with pytest.raises(LocalProtocolError, match="not a founder"):
        p.handle(Start())
    assert p.state is State.ERROR


def test_probe_info_and_attach_step_by_step() -> None:
    a, b = _founders(2).values()
    out = a.handle(Start())
    assert a.state is State.ACTIVE and a.owned == {0}
    assert Probe(1) in out and _sends(out, InfoRequest)[0].dst == 1
    b.handle(Start())
    (reply,) = _sends(b.handle(Received(0, InfoRequest())), Info)
    assert reply.dst == 0
    own = {(p.kind, p.root): p for p in reply.message.positions}
    assert own["latency", 1].dist == 0 and own["bandwidth", 1].est == math.inf
    assert a.handle(ProbeResult(1, WAN, 1e6)) == []  # waits for the Info
    out = a.handle(Received(1, reply.message))
    assert a.parent("latency", 1) == 1 and a.parent("bandwidth", 1) == 1
    (attach,) = _sends(out, ChildUpdates)
    assert attach.dst == 1 and {i.kind for i in attach.message.items} == {"latency", "bandwidth"}
    assert all(i.attach and i.reach == NodeSet.of([0]) for i in attach.message.items)
    assert a.trees["latency", 1].dist == WAN
    assert a.trees["bandwidth", 1].est == 1e6
    b.handle(Received(0, attach.message))
    assert set(b.trees["latency", 1].children) == {0}


def test_broadcast_headers_partition_the_namespace() -> None:
    net = _converged(6)
    root = net.processes[0]
    out = root.handle(BcastRequested("b", 0, 1000, payload="x"))
    delivers = [a for a in out if isinstance(a, Deliver)]
    assert delivers == [Deliver("b", frozenset({0}), "x")]
    sends = _sends(out, Bcast)
    seen = NodeSet.of([0])
    for s in sends:
        assert s.message.targets.isdisjoint(seen)
        seen = seen | s.message.targets
        assert s.nbytes == 1000 + HEADER_BYTES + s.message.targets.nbytes
    assert seen == NodeSet.span(0, 6)
    # Stable trees: everything goes along the tree (rules I and II), nothing p2p.
    assert all(s.message.via_tree for s in sends)
    net.apply(0, out)
    net.run()
    got = sorted(v for _, op, vs in net.delivered if op == "b" for v in vs)
    assert got == [0, 1, 2, 3, 4, 5]


def test_vnode_handed_over_while_a_broadcast_is_in_flight() -> None:
    net = _converged(4, vnodes_each=2)
    root = net.processes[0]
    net.apply(0, root.handle(BcastRequested("b", 0, 8, kind="latency")))
    # Before anything is delivered, process 3 gives vnode 7 to process 2.
    out = net.processes[3].handle(MigrateRequested(frozenset({7, 99}), 2))
    assert net.processes[3].owned == {6}  # 99 is not its own: ignored
    net.apply(3, out)
    net.run()
    got = [(p, v) for p, op, vs in net.delivered if op == "b" for v in vs]
    assert sorted(v for _, v in got) == list(range(8))
    assert (2, 7) in got  # delivered by the new owner, once
    assert net.processes[2].table.owned[7].delivered == frozenset({"b"})


def test_reduction_counts_every_vnode_once() -> None:
    net = _converged(5, vnodes_each=2)
    values = {v: 1 << v for v in range(10)}
    for p in net.processes:
        net.feed(p, ReduceRequested("r", 3, values, add))
    net.run()
    assert [(p, d) for p, d in net.done] == [(1, ReduceDone("r", 1023, frozenset()))]


def test_reduction_needs_no_timeout_when_every_child_reports() -> None:
    """Sec. IV-E: in a stable tree each process waits for its children, not its timer."""
    net = _converged(6, vnodes_each=2)
    values = {v: v + 1 for v in range(12)}
    for p in net.processes:
        net.feed(p, ReduceRequested("r", 4, values, add, nbytes=4096))
    while net.busy():  # messages only: no timer ever fires
        net.step()
    assert [d for _, d in net.done] == [ReduceDone("r", sum(range(1, 13)), frozenset())]
    owner = next(p for p, proc in net.processes.items() if 4 in proc.owned)
    leaf = next(
        p
        for p, proc in net.processes.items()
        if p != owner and not proc.trees["latency", owner].children
    )
    out = net.processes[leaf].handle(ReduceRequested("s", 4, values, add, nbytes=4096))
    (send,) = [a for a in out if isinstance(a, Send)]  # a leaf sends at once, no timer
    mine = NodeSet.of(net.processes[leaf].owned)
    assert send.message.covered == mine
    assert send.nbytes == HEADER_BYTES + mine.nbytes + 4096  # as large as its terms


def test_reduction_timeout_then_late_data() -> None:
    net = _converged(4)
    values = {v: 10 + v for v in range(4)}
    for p in (0, 1, 2):
        out = net.processes[p].handle(ReduceRequested("r", 0, values, add))
        assert SetTimer(("reduce", "r"), net.processes[p].timeout(8)) in out
        net.apply(p, out)
    while net.busy():
        net.step()
    for p in (1, 2):  # their timeouts pass: they forward what they have
        net.feed(p, TimerExpired(("reduce", "r")))
    while net.busy():
        net.step()
    assert net.done == []  # process 3's data is still missing
    net.feed(3, ReduceRequested("r", 0, values, add))  # late: forwarded as it arrives
    net.run()
    assert [d for _, d in net.done] == [ReduceDone("r", 10 + 11 + 12 + 13, frozenset())]


def test_root_gives_up_and_names_the_missing_vnodes() -> None:
    net = _converged(4, give_up_factor=3.0)
    values = {v: v for v in range(4)}
    for p in (0, 1, 2):
        net.feed(p, ReduceRequested("r", 1, values, add))
    net.run()  # process 3 never calls
    assert [d for _, d in net.done] == [ReduceDone("r", 0 + 1 + 2, frozenset({3}))]


def test_join_receives_vnodes_and_broadcasts_reach_it() -> None:
    net = _converged(3, vnodes_each=4)
    net.processes[9] = joiner = Process(9, rng=random.Random(9))
    net.feed(9, JoinRequested(contact=1))
    assert joiner.state is State.JOINING
    net.run()
    assert joiner.state is State.ACTIVE and joiner.owned == {6, 7}
    assert net.processes[1].owned == {4, 5}
    assert all(9 in p.members for p in net.processes.values())
    assert joiner.parent("latency", 0) is not None  # it found parents in every tree
    net.feed(0, BcastRequested("b", 0, 1))
    net.run()
    assert sorted((p, v) for p, op, vs in net.delivered for v in vs if v in (6, 7)) == [
        (9, 6),
        (9, 7),
    ]


def _welcomed(joiner: Process, sponsor: int, welcome: Welcome, rtt: float = LAN) -> list[Send]:
    """What ``joiner`` sends once welcomed and its first probe (its sponsor) returned."""
    if joiner.state is State.IDLE:
        joiner.handle(JoinRequested(contact=sponsor))
    out = joiner.handle(Received(sponsor, welcome))
    if welcome.measured:  # it tells the members once it knows if it is near its sponsor
        assert not _sends(out, Update) and _sends(out, InfoRequest)[0].dst == sponsor
        out = joiner.handle(ProbeResult(sponsor, rtt, 1e8))
    return _sends(out)


@pytest.mark.parametrize("near", [True, False])
def test_a_joiner_tells_the_members_of_its_welcome_that_it_joined(near) -> None:
    """The Welcome carries the sponsor's members; the joiner, not the sponsor, tells each
    of them that it joined, naming only itself (module doc, "Membership"), once its
    probe of the sponsor said whether it is near it, and then with its Near (module doc,
    "Joins"): the sponsor, which knows it, is sent the Near alone."""
    net = _converged(3)
    sponsor = net.processes[1]
    out = sponsor.handle(Received(9, JoinRequest()))
    (welcome,) = [s.message for s in _sends(out, Welcome)]
    assert welcome.members == {0, 1, 2, 9}
    assert all(not s.message.members for s in _sends(out, Update))  # routes only
    sent = _welcomed(Process(9, rng=random.Random(9)), 1, welcome, LAN if near else 1.0)
    hello = [
        (s.dst, s.message.members, s.message.near) for s in sent if isinstance(s.message, Update)
    ]
    said = Near(1, LAN, 1e8) if near else None
    assert sorted(hello) == [(0, {9}, said), (2, {9}, said)]
    assert [(s.dst, s.message) for s in sent if isinstance(s.message, Near)] == (
        [(1, said)] if near else []
    )


def test_a_sponsor_introduces_its_joiner_to_members_it_learns_of_later() -> None:
    """Joins that cross: 8 joins through 0 and 9 through 2, and neither Welcome names the
    other joiner. The sponsor 0 learns of 9 (from 9, or from a member telling it 9
    exists) and names 9 to 8; 8, told of 9 by a third party, tells 9 that it is a member.
    Then each knows the other, and nothing larger than one id crossed for it."""
    net = _converged(3)
    s0, s2 = net.processes[0], net.processes[2]
    (w8,) = [s.message for s in _sends(s0.handle(Received(8, JoinRequest())), Welcome)]
    (w9,) = [s.message for s in _sends(s2.handle(Received(9, JoinRequest())), Welcome)]
    assert 9 not in w8.members and 8 not in w9.members
    j8, j9 = Process(8, rng=random.Random(8)), Process(9, rng=random.Random(9))
    _welcomed(j8, 0, w8)
    hello9 = [s for s in _welcomed(j9, 2, w9, WAN) if isinstance(s.message, Update) and s.dst == 0]
    assert [s.message.members for s in hello9] == [{9}]
    intro = [s for s in _sends(s0.handle(Received(9, hello9[0].message)), Update) if s.dst == 8]
    assert [s.message.members for s in intro] == [{9}]
    back = [s for s in _sends(j8.handle(Received(0, intro[0].message)), Update) if s.dst == 9]
    assert [s.message.members for s in back] == [{8}]
    j9.handle(Received(8, back[0].message))
    assert 9 in j8.members and 8 in j9.members


def test_a_leaving_sponsor_names_to_its_joiner_the_members_its_acks_list() -> None:
    """A sponsor that leaves before it heard of a member that joined elsewhere learns of
    it from the LeaveAcks it waits for, and names it to the joiner it welcomed."""
    net = _converged(3)
    s0 = net.processes[0]
    s0.handle(Received(8, JoinRequest()))  # 8 joins through 0
    s0.handle(LeaveRequested(heir=1))
    ack = LeaveAck(frozenset({1, 2, 8, 9}), s0.membership.round)  # 1 knows 9
    out = s0.handle(Received(1, ack))
    assert [s.message.members for s in _sends(out, Update) if s.dst == 8] == [{9}]
    assert any(s.dst == 9 for s in _sends(out, Leaving))  # and asks 9 to ack too


def test_a_sponsor_keeps_what_it_hands_a_joiner_in_its_reach_until_it_attaches() -> None:
    """The vnodes a sponsor hands a joiner stay in its reach until the joiner attaches
    below it, so no tree hears of the join twice, the vnodes gone and back (module
    doc, "Joins"); the loan ends at the joiner's first ChildUpdates, or its timer."""
    net = _converged(4, vnodes_each=2)
    sponsor = net.processes[1]
    out = sponsor.handle(Received(9, JoinRequest()))
    (handover,) = [s.message for s in _sends(out, Handover)]
    (lent,) = [v for v, _ in handover.states]
    assert lent not in sponsor.owned and SetTimer(("lent", 9), sponsor.stall_s) in out
    assert not _sends(out, ChildUpdates)  # every reach set as it was: nothing goes up
    keys = [k for k, t in sorted(sponsor.trees.items()) if t.parent is not None]
    ups = _sends(sponsor.handle(TimerExpired(("lent", 9))), ChildUpdates)
    items = {(i.kind, i.root): i for s in ups for i in s.message.items}
    assert set(items) == set(keys) and all(lent not in i.reach for i in items.values())
    # a joiner that attaches in time: its own reach brings the vnode up instead
    net = _converged(4, vnodes_each=2)
    sponsor = net.processes[1]
    sponsor.handle(Received(9, JoinRequest()))
    key = keys[0]
    attach = ChildItem(*key, True, NodeSet.of([lent]), Summary(), LAN, 1e8)
    ups = _sends(sponsor.handle(Received(9, ChildUpdates((attach,)))), ChildUpdates)
    assert all(lent in i.reach for s in ups for i in s.message.items if (i.kind, i.root) == key)
    others = {(i.kind, i.root) for s in ups for i in s.message.items} - {key}
    assert others  # where it did not attach, the vnode leaves our reach now


def test_a_summary_goes_up_only_when_it_moved_beyond_the_noise() -> None:
    old = Summary(1e-3, 2e-6, 40, 3e-6, 5)
    assert not summary_moved(replace(old, descendants=41), old)  # one more below: noise
    assert not summary_moved(replace(old, a=1.05e-3), old)
    assert summary_moved(replace(old, descendants=46), old)
    assert summary_moved(replace(old, b=2.5e-6), old)
    assert summary_moved(replace(old, path_b=math.inf), old)
    assert summary_moved(replace(old, depth=6), old) and not summary_moved(old, old)


def test_an_ack_to_a_founder_lists_only_members_that_joined() -> None:
    net = _converged(4)
    member = net.processes[0]
    acks = _sends(member.handle(Received(2, Leaving(()))), LeaveAck)
    assert [(s.dst, s.message.members) for s in acks] == [(2, frozenset())]  # it knows them
    member.handle(Received(1, Update(frozenset({0, 1, 3, 9}))))
    acks = _sends(member.handle(Received(3, Leaving(()))), LeaveAck)
    assert [(s.dst, s.message.members) for s in acks] == [(3, frozenset({9}))]


def test_leave_gives_vnodes_away_and_ends_left() -> None:
    net = _converged(4, vnodes_each=2)
    net.feed(2, LeaveRequested(heir=3))
    assert net.processes[2].state is State.LEAVING and net.processes[2].owned == frozenset()
    net.run()
    assert net.processes[2].state is State.LEFT
    assert net.processes[3].owned == {4, 5, 6, 7}
    for p in (0, 1, 3):
        assert 2 not in net.processes[p].members and 2 in net.processes[p].departed
        assert all(t.parent != 2 for t in net.processes[p].trees.values())
    net.feed(0, BcastRequested("b", 0, 1))
    net.run()
    assert sorted(v for p, op, vs in net.delivered for v in vs) == list(range(8))
    with pytest.raises(LocalProtocolError):
        net.processes[2].handle(BcastRequested("c", 4, 1))


def test_the_last_member_cannot_leave() -> None:
    net = _converged(1)
    with pytest.raises(LocalProtocolError, match="last member"):
        net.feed(0, LeaveRequested())
    assert net.processes[0].state is State.ERROR


def test_founders_helper_gives_one_vnode_each() -> None:
    procs = founders(3, seed=1)
    for p in procs.values():
        p.handle(Start())
    assert [sorted(p.owned) for p in procs.values()] == [[0], [1], [2]]


def test_stable_trees_report_reach_sets_and_the_model_picks_a_tree() -> None:
    net = _converged(8)
    root = net.processes[0]
    for kind in ("latency", "bandwidth"):
        tree = root.trees[kind, 0]
        reach = NodeSet()
        for child in tree.children.values():
            assert reach.isdisjoint(child.reach)
            reach = reach | child.reach
        assert reach == NodeSet.span(1, 8)
        assert sum(1 + c.summary.descendants for c in tree.children.values()) == 7
    assert root.choose_kind(1) == "latency"
    # a forced tree is honoured
    out = root.handle(BcastRequested("b", 0, 1, kind="bandwidth"))
    assert {s.message.kind for s in _sends(out, Bcast)} == {"bandwidth"}


def test_roots_option_keeps_only_those_trees_and_still_spans() -> None:
    """``roots``: every process keeps (and its Info carries) only the given roots' trees;
    a probe still connects everyone, and a broadcast from the root goes down them."""
    a, b = founders(2, seed=0, roots=frozenset({1})).values()
    a.handle(Start())
    b.handle(Start())
    assert set(a.trees) == set(b.trees) == {("latency", 1), ("bandwidth", 1)}
    assert a.members == b.members == {0, 1}
    (reply,) = _sends(b.handle(Received(0, InfoRequest())), Info)
    assert {(p.kind, p.root) for p in reply.message.positions} == set(b.trees)
    procs = founders(6, seed=3, roots=frozenset({2}), remote_probes=True)
    net = _started(procs, lambda p, q: (WAN if (p < 3) != (q < 3) else 1e-4, 1e6), 3)
    assert all(set(p.trees) == {("latency", 2), ("bandwidth", 2)} for p in procs.values())
    parents = {p: procs[p].parent("latency", 2) for p in procs if p != 2}
    assert None not in parents.values()
    assert sum((p < 3) != (q < 3) for p, q in parents.items()) == 1  # Property I
    net.feed(2, BcastRequested("b", 2, 1))
    net.run()
    assert sorted(v for _, op, vs in net.delivered if op == "b" for v in vs) == list(range(6))


def test_the_end_of_round_sweep_gives_one_root_property_one() -> None:
    """With one root a process makes few probes; at the end of its first round it asks
    its LAN peers about the trees it hangs on a remote parent by (``_sweep``, module
    doc, "Probes after a loss"), which leaves one wide-area edge into each other cluster
    (das2:9: 36 ranks, 4 clusters; without that sweep, seed 0 left 7 and 4). The
    ``remote_probes`` option (probing on while a parent is remote) gives the same at more
    probes."""
    from gridcoll.network import get_grid
    from gridcoll.phoenix.static import stable_trees

    grid = get_grid("das2:9")

    def wan(parents: dict[int, int]) -> int:
        return sum(grid.cluster_of[v] != grid.cluster_of[p] for v, p in parents.items())

    plain = stable_trees(grid, seed=0, roots=frozenset({0}))
    more = stable_trees(grid, seed=0, roots=frozenset({0}), remote_probes=True)
    assert set(plain.latency) == set(more.latency) == {0}
    assert wan(plain.latency[0]) == 3 and wan(plain.bandwidth[0]) == 3
    assert wan(more.latency[0]) == 3 and wan(more.bandwidth[0]) == 3
    assert more.probes > plain.probes


# -- repair: adoption by the grandparent, a joiner's first probe ---------------------------
def _line(p: int, q: int) -> tuple[float, float]:
    """Processes on a line: RTT grows with the square of the gap, so the chain
    0 - 1 - 2 - 3 is every tree-of-0's best shape (rule N) and the bandwidth tree's."""
    gap = abs(p - q)
    return 1e-3 * gap * gap, 1e8 / (gap * gap)


def _chain(n: int, **kw) -> Network:
    procs = _founders(n, **kw)
    net = _started(procs, _line, 1)
    for kind in ("latency", "bandwidth"):
        assert [procs[p].parent(kind, 0) for p in range(1, n)] == list(range(n - 1))
    return net


def test_a_leavers_child_moves_up_to_its_grandparent_without_probing() -> None:
    net = _chain(3)
    out = net.processes[1].handle(LeaveRequested(heir=0))
    to_child = [type(s.message) for s in _sends(out) if s.dst == 2]
    assert to_child.index(Adopt) < to_child.index(Leaving)  # FIFO: acted on first
    (adopt,) = [s.message for s in _sends(out, Adopt) if s.dst == 2]
    items = {(i.kind, i.root): i for i in adopt.items}
    assert items["latency", 0].parent == 0 and items["bandwidth", 0].parent == 0
    child = net.processes[2]
    moved = child.handle(Received(1, adopt))
    assert child.parent("latency", 0) == 0 and child.parent("bandwidth", 0) == 0
    assert child.trees["latency", 0].rtt == pytest.approx(1e-3 + 1e-3)  # bound via 1
    assert child.trees["bandwidth", 0].bw == pytest.approx(1e8)
    (attach,) = [s for s in _sends(moved, ChildUpdates) if s.dst == 0]
    assert {(i.kind, i.root) for i in attach.message.items if i.attach} >= {
        ("latency", 0),
        ("bandwidth", 0),
    }
    assert all(i.reach == NodeSet.of([2]) for i in attach.message.items if i.root == 0)
    # The grandparent takes it as a child on the attach alone: no probe was needed.
    net.processes[0].handle(Received(2, attach.message))
    assert 2 in net.processes[0].trees["latency", 0].children
    net.apply(1, out)
    net.apply(2, moved)
    net.run()
    assert child.parent("latency", 0) == 0 and not child.trees["latency", 0].estimated
    net.feed(0, BcastRequested("b", 0, 1))
    net.run()
    assert sorted(v for _, op, vs in net.delivered if op == "b" for v in vs) == [0, 1, 2]


def test_adoption_climbs_past_a_grandparent_that_leaves_too() -> None:
    net = _chain(4)
    left = {p: net.processes[p].handle(LeaveRequested(heir=0)) for p in (1, 2)}
    (adopt,) = [s.message for s in _sends(left[2], Adopt) if s.dst == 3]
    last = net.processes[3]
    out = last.handle(Received(2, adopt))
    assert last.parent("latency", 0) == 1  # 1 is leaving too, 3 does not know yet
    (attach,) = [s.message for s in _sends(out, ChildUpdates) if s.dst == 1]
    (redirect,) = _sends(net.processes[1].handle(Received(3, attach)), Adopt)
    assert redirect.dst == 3 and {i.parent for i in redirect.message.items} == {0}
    last.handle(Received(1, redirect.message))
    assert last.parent("latency", 0) == 0 and last.parent("bandwidth", 0) == 0
    assert last.trees["latency", 0].path == (0,)
    # An Adopt from anyone but the parent, or naming a departed process, is ignored.
    last.handle(Received(2, Adopt((AdoptItem("latency", 0, 2, 1e-3, 1e8),))))
    assert last.parent("latency", 0) == 0


def test_a_child_whose_parent_left_unannounced_climbs_to_its_grandparent() -> None:
    """No usable Adopt (it named a process that left too): at the parent's Leaving
    the child attaches at once to the nearest ancestor on its path still a member,
    taking the hop on bounds and probing that ancestor next; it is never cut off."""
    net = _chain(4)
    left = {p: net.processes[p].handle(LeaveRequested(heir=0)) for p in (1, 2)}
    last = net.processes[3]
    (leaving1,) = [s.message for s in _sends(left[1], Leaving) if s.dst == 3]
    (leaving2,) = [s.message for s in _sends(left[2], Leaving) if s.dst == 3]
    last.handle(Received(1, leaving1))  # 1 is gone before 2's Adopt names it
    (adopt,) = [s.message for s in _sends(left[2], Adopt) if s.dst == 3]
    last.handle(Received(2, adopt))
    assert last.parent("latency", 0) == 2  # every parent the Adopt names has left
    out = last.handle(Received(2, leaving2))
    for kind in ("latency", "bandwidth"):
        tree = last.trees[kind, 0]
        assert (tree.parent, tree.path, tree.estimated) == (0, (0,), False)  # 0 measured
    (attach,) = [s.message for s in _sends(out, ChildUpdates) if s.dst == 0]
    assert {(i.kind, i.root) for i in attach.items if i.attach} >= {
        ("latency", 0),
        ("bandwidth", 0),
    }


def _answer_ping(proc: Process, peer: int, ref: int, like: bool, far: float) -> None:
    """Answer ``proc``'s ping of ``peer``: within ``NOISE_SLACK`` of measured peer
    ``ref``'s RTT (``like``), whose rate ``peer`` then takes with no download; else at
    ``far`` times it, like no peer measured, so the download follows."""
    ref_result = proc.measured[ref]
    rtt = ref_result.rtt_s * (1 + NOISE_SLACK / 2 if like else far)
    out = proc.handle(ProbeResult(peer, rtt, 0.0))
    probes = [a for a in out if isinstance(a, Probe)]
    if like:
        assert proc.measured[peer] == ProbeResult(peer, rtt, ref_result.bw_Bps) and not probes
    else:
        assert peer not in proc.measured and probes == [Probe(peer, PROBE_BYTES)]


@pytest.mark.parametrize("like_1", [True, False])
def test_a_climbed_to_ancestor_is_pinged_and_takes_the_rate_of_a_peer_at_its_rtt(like_1) -> None:
    """Climbing to an ancestor it never measured, a child pings it only (a ``Probe`` of
    0 bytes): a peer measured at an RTT within ``NOISE_SLACK`` of it is behind the same
    links, so that peer's rate stands for the ancestor's; with none, the 128 KiB
    download follows. (A download on a thin wide-area link slows the broadcasts the
    repair is for.)"""
    net = _chain(4)
    last = net.processes[3]
    del last.measured[0]  # as if 3 had never probed 0
    left = {p: net.processes[p].handle(LeaveRequested(heir=0)) for p in (1, 2)}
    for p, kind in ((1, Leaving), (2, Adopt), (2, Leaving)):
        (m,) = [s.message for s in _sends(left[p], kind) if s.dst == 3]
        out = last.handle(Received(p, m))
    assert last.parent("bandwidth", 0) == 0 and last.trees["bandwidth", 0].estimated
    assert [a for a in out if isinstance(a, Probe)] == [Probe(0, 0)]
    _answer_ping(last, 0, ref=1, like=like_1, far=1.5)


def _remote_root(p: int, q: int) -> tuple[float, float]:
    """Process 0 across a wide-area link (5 ms, 1 MB/s) from a LAN of the others, where
    the RTT grows with the square of the gap: every tree of 0 is 0 -> 2 -> {1, 3}."""
    if 0 in (p, q):
        return 5e-3, 1e6
    gap = abs(p - q)
    return 1e-4 * gap * gap, 1e8 / (gap * gap)


def test_a_child_climbing_to_an_ancestor_it_never_measured_takes_the_routes_figures() -> None:
    """The hop to an ancestor never measured stands as the route we had from it, as an
    Adopt's bounds do: our distance for its RTT, our rate for its bandwidth; not as the
    LAN hop we lost, which would tell the ancestor that a child across the wide area
    is in its LAN. (After fig. 9's leave on ``das2-spread:64,4``, seed 1, a Leiden
    member that climbed to root 0 so reported 0.06 ms and 49 MB/s; root 0's model then
    chose its latency tree for 4 MiB, which crossed VU-Leiden at 5 Mb/s: every
    broadcast took 6.75 s, not 5.6, until the rejoin.)"""
    procs = _founders(4)
    _started(procs, _remote_root, 1)
    child = procs[3]
    before = {}
    for kind in KINDS:
        tree = child.trees[kind, 0]
        assert (tree.parent, tree.path, tree.bw) == (2, (0, 2), 1e8)
        before[kind] = (tree.dist, tree.est)
    child.measured.pop(0)  # never measured: the climb is on bounds
    out = child.handle(Received(2, Leaving(())))  # no Adopt came: climb
    (attach,) = [s.message for s in _sends(out, ChildUpdates) if s.dst == 0]
    items = {i.kind: i for i in attach.items if i.root == 0}
    for kind in KINDS:
        dist, est = before[kind]
        assert child.parent(kind, 0) == 0 and child.trees[kind, 0].estimated
        assert (items[kind].rtt, items[kind].bw) == (dist, est)
        assert dist > 5e-3 and est == pytest.approx(1e6)  # the wide-area route's


def test_a_child_climbing_to_the_leavers_parent_takes_the_routes_figures() -> None:
    """The last parent an Adopt names is the leaver's parent, often across the wide
    area: climbing to it (the nearer sibling named first left too) takes the route's
    figures, as for an ancestor, not the lost LAN hop's, and probes it. (After fig. 9's
    leave on ``das2-spread:64,4``, seed 1, without this rule, a Leiden
    member so climbed to a VU process with 0.06 ms and 50 MB/s: root 0's model chose
    its latency tree for 4 MiB, and every broadcast took 6.73 s, not 5.6.)"""
    procs = _founders(4)
    _started(procs, _remote_root, 1)
    child = procs[3]
    before = {kind: (child.trees[kind, 0].dist, child.trees[kind, 0].est) for kind in KINDS}
    child.measured.pop(0)  # never measured: the climb is on bounds
    lan = child.measured[1]
    items = tuple(AdoptItem(kind, 0, 1, lan.rtt_s, lan.bw_Bps, (0,)) for kind in KINDS)
    child.handle(Received(2, Adopt(items)))  # 2 leaves: below 1, else below 0
    assert all(child.parent(kind, 0) == 1 for kind in KINDS)
    out = child.handle(Received(1, Leaving(())))  # 1 leaves too: the last one named
    (attach,) = [s.message for s in _sends(out, ChildUpdates) if s.dst == 0]
    got = {i.kind: i for i in attach.items if i.root == 0}
    for kind in KINDS:
        dist, est = before[kind]
        tree = child.trees[kind, 0]
        assert tree.parent == 0 and tree.estimated and tree.path == (0,)
        assert got[kind].rtt >= dist > 5e-3 and got[kind].bw <= est == pytest.approx(1e6)
    assert 0 in child.prober.unmeasured  # measured next (a probe of another is under way)


def test_a_climbed_to_ancestor_is_asked_only_about_the_trees_hung_on_it() -> None:
    net = _converged(12, seed=0)
    child, leaver, key = next(
        (p, t.parent, k)
        for p in net.processes.values()
        for k, t in sorted(p.trees.items())
        if t.parent not in (None, k[1]) and p.trees[k].path[-2:-1]
    )
    up = child.trees[key].path[-2]  # the leaver's parent: where the child climbs to
    child.measured.pop(up, None)  # never measured: probed next (module doc, "Repair")
    out = child.handle(Received(leaver, Leaving(())))  # no Adopt came: climb
    hanging = {r for (_, r), t in child.trees.items() if t.parent == up and t.estimated}
    asked = [s.message.roots for s in _sends(out, InfoRequest) if s.dst == up]
    assert key[1] in hanging and asked == [tuple(sorted(hanging))]
    assert len(hanging) < len({r for _, r in child.trees})  # not every tree


def test_a_member_a_loss_leaves_on_a_remote_parent_asks_its_lan_first() -> None:
    """A member whose LAN parent leaves with no Adopt climbs to the remote process above
    it; its extra probes go to its LAN first (each measured LAN peer once), asking about
    the trees it hangs on a remote parent by: a LAN member reached already is the
    parent that keeps one wide-area edge into the LAN (module doc, "Probes after a
    loss")."""
    cases = 0
    for seed in range(4):
        net = _converged(8, seed=seed)
        for child in net.processes.values():
            for key, tree in sorted(child.trees.items()):
                up = tree.path[-2] if len(tree.path) >= 2 else None
                lan = tree.parent is not None and tree.parent % 2 == child.pid % 2
                if not lan or up is None or up % 2 == child.pid % 2 or up not in child.measured:
                    continue
                fresh = copy.deepcopy(child)
                out = fresh.handle(Received(tree.parent, Leaving(())))  # no Adopt came
                assert fresh.parent(*key) == up
                repaired = {r for (_, r), t in child.trees.items() if t.parent == tree.parent}
                hung = {r for (_, r), t in fresh.trees.items() if r in repaired and t.rtt > 2 * LAN}
                (ask,) = _sends(out, InfoRequest)
                assert ask.dst % 2 == child.pid % 2 and ask.dst in fresh.measured
                assert set(ask.message.roots) == hung and key[1] in hung
                cases += 1
    assert cases >= 3


def test_a_probe_of_a_measured_peer_bars_what_its_link_cannot_carry() -> None:
    """A gateway below a remote parent at the wide-area rate probes another measured
    remote peer: no bandwidth position of it can beat that rate by the hysteresis
    through the same 1 MB/s link, so the bar leaves them all out of its Info; a LAN
    peer (a nearer class) is asked with the nearer class's bar."""
    net = _converged(8, seed=0)
    p, key = next(
        (p, k)
        for p in net.processes.values()
        for k, t in sorted(p.trees.items())
        if k[0] == "bandwidth" and t.parent is not None and t.parent % 2 != p.pid % 2
    )
    tree = p.trees[key]
    remote = next(q for q in sorted(p.measured) if q % 2 != p.pid % 2 and q != tree.parent)
    lan = next(q for q in sorted(p.measured) if q % 2 == p.pid % 2)
    (_, _, est_bar), *_ = [b for b in p.prober._bars(remote, (key[1],)) if b[0] == key[1]]
    assert est_bar == math.inf and bandwidth_bar(tree.est) < math.inf
    (_, _, lan_bar), *_ = [b for b in p.prober._bars(lan, (key[1],)) if b[0] == key[1]]
    assert lan_bar == pytest.approx(bandwidth_bar(tree.est))
    out = net.processes[remote].handle(
        Received(p.pid, InfoRequest((key[1],), p.prober._bars(remote, (key[1],))))
    )
    (info,) = _sends(out, Info)
    assert not [pos for pos in info.message.positions if pos.kind == "bandwidth"]


def test_a_tree_that_moves_onto_a_remote_parent_after_a_loss_is_swept_afresh() -> None:
    """After a loss (``_focus`` a set), a tree that moves onto a remote parent is a
    repaired tree: its LAN peers are asked about it again, even those asked before the
    move (one may have become the LAN's gateway since), with no extra probe left
    (module doc, "Probes after a loss")."""
    net = _converged(8, seed=0)
    p = net.processes[1]
    key = ("bandwidth", 0)
    tree = p.trees[key]
    lan = {q for q in p.measured if q % 2 == 1}
    q = next(q for q in (0, 2, 4, 6) if q != tree.parent)
    p.prober.focus, p.prober.swept, p.prober.extra_left = set(), {0: set(lan)}, 0
    p.forest._move(tree, q, net.processes[q].trees[key].position(q), WAN, 1e6)
    assert 0 in p.prober.focus and not p.prober.swept[0] and p.prober.extra_left == 0
    sweep = p.prober._sweep()
    assert sweep and set(sweep) <= lan and all(0 in roots for roots in sweep.values())


def test_a_joiner_that_borrowed_sweeps_its_lan_too() -> None:
    """A joiner that borrowed its sponsor's figures and hangs a tree on a remote parent
    after its probes (or a loss) asks its LAN peers about it like any member (``_sweep``):
    on real processes, a LAN that joined through its first member all at once left
    several of its joiners on wide-area parents (module doc, "Probes after a loss")."""
    net = _converged(8, seed=0)
    joiner = net.processes[20] = Process(20, rng=random.Random(0))  # even: the evens' LAN
    net.feed(20, JoinRequested(contact=2))
    net.run()
    assert joiner.prober.lan_only
    key = ("bandwidth", 1)
    tree = joiner.trees[key]
    q = next(q for q in (1, 3, 5, 7) if q != tree.parent)
    joiner.prober.focus, joiner.prober.swept, joiner.prober.extra_left = set(), {}, 0
    joiner.forest._move(tree, q, net.processes[q].trees[key].position(q), WAN, 1e6)
    sweep = joiner.prober._sweep()
    assert sweep and all(p % 2 == 0 for p in sweep) and all(1 in r for r in sweep.values())
    net.apply(20, joiner.handle(Received(q, Info((), False))))  # (any event lets it probe)
    net.run()
    assert joiner.trees[key].parent % 2 == 0  # back in its LAN


def _three_lans(p: int, q: int) -> tuple[float, float]:
    """Three LANs by ``pid % 3``: LAN 1 reaches LAN 0 at 0.6 MB/s and LAN 2 at 0.75 MB/s,
    LAN 2 reaches LAN 0 at 3 MB/s (DAS-2's Leiden, UvA and VU, module doc of
    :mod:`gridcoll.simulate.phoenix`), each link at a round trip of its own, as there (a
    ping tells them apart: "Repair")."""
    a, b = p % 3, q % 3
    if a == b:
        return LAN, 1e8
    link = frozenset((a, b))
    rtt = {frozenset((0, 1)): 1.3 * WAN, frozenset((1, 2)): WAN}.get(link, 0.8 * WAN)
    return rtt, {frozenset((0, 1)): 0.6e6, frozenset((1, 2)): 0.75e6}.get(link, 3e6)


def test_crossing_moves_make_no_endless_cycle() -> None:
    """A group formed as the measured experiments form it (a founder; one process per
    other LAN joins through it; the rest join through their LAN's first process, all
    at once) goes quiet with a parent in every tree. With seed 1, two LAN peers below
    one remote parent moved below each other (crossing probes), both dropped their
    parent, and the next round's sweep made the cycle again, for ever (80,000
    ParentUpdates in 150,000 steps); now only the cycle's highest id leaves it (module
    doc, "Trees")."""
    for seed in range(4):
        procs = {0: Process(0, rng=random.Random(0), founder_vnodes={0: range(4)})}
        net = Network(procs, _three_lans, random.Random(seed))
        net.feed(0, Start())
        net.run()
        for first in (1, 2):
            procs[first] = Process(first, rng=random.Random(first))
            net.feed(first, JoinRequested(0))
        while procs[1].state is not State.ACTIVE or procs[2].state is not State.ACTIVE:
            assert net.step()
        for p in range(3, 12):
            procs[p] = Process(p, rng=random.Random(p))
            net.feed(p, JoinRequested(p % 3))
        net.run(max_steps=200_000)  # quiet in about 2,000 steps
        assert all(proc.state is State.ACTIVE for proc in procs.values())
        for root in procs:
            for kind in KINDS:
                orphans = [
                    p for p in procs if p != root and procs[p].trees[kind, root].parent is None
                ]
                assert not orphans, (seed, kind, root, orphans)


def test_a_loss_that_leaves_a_bandwidth_tree_on_a_slower_link_asks_the_faster_peers() -> None:
    """LAN 1's gateway hangs below LAN 2 (0.75 MB/s); its ancestors in LAN 2 leave, and
    the repair puts it below LAN 0 (0.6 MB/s). With no extra probes at all, it still
    asks the measured peers left in LAN 2, whose link alone beats its new rate, about
    that tree (``_sweep``), and moves back below one of them: a repaired tree is not
    left on the slower link for want of a random probe (module doc, "Probes after a
    loss")."""
    cases = 0
    for seed in range(6):
        net = _started(_founders(9, extra_probes=0), _three_lans, seed)
        for g, proc in sorted(net.processes.items()):
            tree = proc.trees["bandwidth", 0]
            leavers = [a for a in tree.path if a % 3 == 2]
            faster = {q for q in proc.measured if q % 3 == 2} - set(leavers)
            if g % 3 != 1 or tree.parent not in leavers or not faster:
                continue
            fresh = copy.deepcopy(net)
            for a in leavers:
                fresh.feed(a, LeaveRequested(heir=0))
            fresh.run()
            moved = fresh.processes[g].trees["bandwidth", 0]
            assert moved.parent in faster, (seed, g, leavers, moved.parent)
            assert moved.est == pytest.approx(0.75e6, rel=0.1)
            cases += 1
    assert cases >= 2


def _a_leaver_with_three_children():
    """A converged 12-process network, a process with a parent and at least 3 children
    in some tree (``key``), its children nearest first (``order``) and the actions of
    its LeaveRequested (``out``)."""
    net = _converged(12, seed=0)
    leaver, key, tree = next(
        (p, key, t)
        for p in net.processes.values()
        for key, t in sorted(p.trees.items())
        if len(t.children) >= 3 and t.parent is not None
    )
    kids = tree.children
    order = sorted(kids, key=lambda c: (kids[c].rtt, -kids[c].summary.descendants, c))
    out = leaver.handle(LeaveRequested(heir=tree.parent))
    return net, leaver, key, tree, order, out


def test_an_adopt_falls_back_to_the_next_nearest_sibling() -> None:
    """A leaver's Adopt names, for each child but the nearest, the nearer siblings and
    then its own parent: if the nearest child leaves too, the next takes its place."""
    net, leaver, key, tree, order, out = _a_leaver_with_three_children()
    items = {
        s.dst: i for s in _sends(out, Adopt) for i in s.message.items if (i.kind, i.root) == key
    }
    assert (items[order[0]].parent, items[order[0]].fallback) == (tree.parent, ())
    assert (items[order[1]].parent, items[order[1]].fallback) == (order[0], (tree.parent,))
    assert items[order[2]].fallback == (order[1], tree.parent)
    third = net.processes[order[2]]
    third.departed.add(order[0])  # the nearest child left too, and the third knows it
    third.handle(Received(leaver.pid, Adopt((items[order[2]],))))
    assert third.parent(*key) == order[1]


def test_a_child_climbs_to_a_fallback_on_bounds_without_downloading() -> None:
    """The Adopt's first choice leaves too: the child climbs to the next one named, a
    sibling nearer the leaver than itself, on its old hop's figures as an Adopt's
    (module doc, "Repair"), and downloads nothing from it even if never measured."""
    net, leaver, key, _, order, out = _a_leaver_with_three_children()
    (adopt,) = [s.message for s in _sends(out, Adopt) if s.dst == order[2]]
    third = net.processes[order[2]]
    third.measured.pop(order[1], None)
    third.handle(Received(leaver.pid, adopt))
    assert third.parent(*key) == order[0]
    out = third.handle(Received(order[0], Leaving((), 0)))  # the nearest child leaves too
    assert third.parent(*key) == order[1] and third.trees[key].estimated
    assert Probe(order[1]) not in out
    climbed = [  # another tree whose climb went to it as an ancestor queues a download
        t for k, t in third.trees.items() if k != key and t.parent == order[1] and t.estimated
    ]
    assert order[1] not in third.prober.unmeasured or climbed  # this tree's climb queued none


def test_probes_after_a_leave_go_only_to_peers_already_measured() -> None:
    """A leave brings no one new to measure: the extra probes it renews ask measured
    peers for their Info and download nothing (module doc, "Repair")."""
    net = _converged(32, seed=0)
    procs = net.processes
    assert any(len(p.measured) < 31 for p in procs.values())  # some peers never measured
    leaver = next(p for p in procs.values() if p.pid and p.trees["latency", 0].children)
    kids = list(leaver.trees["latency", 0].children)
    measured = {q: set(p.measured) for q, p in procs.items()}
    made = {q: p.probes_made for q, p in procs.items()}
    net.feed(leaver.pid, LeaveRequested(heir=0))
    net.run()
    assert all(procs[c].probes_made > made[c] for c in kids)  # the repair probed ...
    assert all(set(p.measured) == measured[q] for q, p in procs.items())  # ... no one new
    assert all(procs[c].parent("latency", 0) is not None for c in kids)


def test_a_leaving_gateways_lan_keeps_one_wide_area_edge() -> None:
    for seed in range(20):  # a converged tree where LAN 1's gateway has two children
        net = _converged(12, seed=seed)
        gates = [p for p in range(1, 12, 2) if net.processes[p].parent("latency", 0) % 2 == 0]
        assert len(gates) == 1  # Property I: one wide-area edge into LAN 1
        gate = net.processes[gates[0]]
        if len(gate.trees["latency", 0].children) >= 2:
            break
    else:
        pytest.fail("no gateway with two children")
    kids = sorted(gate.trees["latency", 0].children)
    out = gate.handle(LeaveRequested(heir=kids[0]))
    adopts = {s.dst: s.message for s in _sends(out, Adopt)}
    for c in kids:
        net.processes[c].handle(Received(gate.pid, adopts[c]))
    parents = {c: net.processes[c].parent("latency", 0) for c in kids}
    wide = [c for c, p in parents.items() if p % 2 == 0]
    assert len(wide) == 1  # the nearest child took the gateway's place ...
    assert all(p == wide[0] for c, p in parents.items() if c != wide[0])  # ... the rest below


def test_a_joiners_first_probe_is_the_member_that_welcomed_it() -> None:
    for seed in range(5):
        net = _converged(8, seed=seed)
        joiner = net.processes[20] = Process(20, rng=random.Random(seed))
        contact = 3 + seed % 4
        (req,) = _sends(joiner.handle(JoinRequested(contact)))
        out = net.processes[contact].handle(Received(20, req.message))
        (welcome,) = _sends(out, Welcome)
        first = joiner.handle(Received(contact, welcome.message))
        assert [a.peer for a in first if isinstance(a, Probe)] == [contact]
        assert [s.dst for s in _sends(first, InfoRequest)] == [contact]


def _recording_downloads(net: Network) -> list[tuple[int, int]]:
    """Every Probe (a 128 KiB download) any process asks for from now on."""
    log: list[tuple[int, int]] = []
    apply = net.apply

    def recording(pid, actions):
        actions = list(actions)
        log.extend((pid, a.peer) for a in actions if isinstance(a, Probe))
        apply(pid, actions)

    net.apply = recording
    return log


def test_a_joiner_in_its_sponsors_lan_borrows_its_measurements() -> None:
    """Joins (module doc): the joiner downloads from its sponsor only, takes what the
    sponsor measured, tells every member it is near the sponsor (Near), and members that
    measured the sponsor take those figures for it: no one downloads from it either."""
    net = _converged(8, vnodes_each=2, seed=0)
    before = {q: dict(p.measured) for q, p in net.processes.items()}
    log = _recording_downloads(net)
    joiner = net.processes[20] = Process(20, rng=random.Random(0))  # even: the evens' LAN
    net.feed(20, JoinRequested(contact=2))
    net.run()
    assert log == [(20, 2)]
    assert set(joiner.measured) == (set(before[2]) | {2}) - {20}
    assert joiner.measured[4] == before[2][4]  # the sponsor's figures, as they were
    link = joiner.measured[2]  # the sponsor takes the joiner's figures for their link
    assert net.processes[2].measured[20] == ProbeResult(20, link.rtt_s, link.bw_Bps)
    for q, p in net.processes.items():
        if q not in (2, 20) and 2 in before[q]:
            assert p.measured[20] == ProbeResult(20, before[q][2].rtt_s, before[q][2].bw_Bps)
    assert all(
        p.parent(k, 20) is not None for p in net.processes.values() if p.pid != 20 for k in KINDS
    )
    assert all(joiner.parent(k, r) is not None for r in range(8) for k in KINDS)
    assert joiner.owned == {5}
    net.feed(0, BcastRequested("b", 0, 1))
    net.run()
    got = sorted((v, p) for p, op, vs in net.delivered if op == "b" for v in vs)
    assert [v for v, _ in got] == list(range(16)) and (5, 20) in got


def test_a_joiner_near_its_sponsor_starts_with_copies_of_the_sponsors_trees() -> None:
    """Joins (module doc): a member that hears the joiner is in its sponsor's LAN (Near)
    takes, in each of the joiner's trees, the parent it has in the sponsor's tree of
    that kind, and attaches there; the sponsor attaches to the joiner. No probe."""
    net = _converged(8, seed=0)
    joiner = net.processes[20] = Process(20, rng=random.Random(0))
    (req,) = _sends(joiner.handle(JoinRequested(2)))
    (welcome,) = _sends(net.processes[2].handle(Received(20, req.message)), Welcome)
    sent = _welcomed(joiner, 2, welcome.message, 1.0)  # not near yet: a Near comes later
    hello = {s.dst: s.message for s in sent if isinstance(s.message, Update)}
    for pid in (2, 4, 5):  # the sponsor, a LAN member, a member across the wide area
        member = net.processes[pid]
        if pid != 2:
            member.handle(Received(20, hello[pid]))  # 20 is a member: its trees have no parent
        assert all(member.parent(k, 20) is None for k in KINDS)
        out = member.handle(Received(20, Near(2)))
        for kind in KINDS:
            want = 20 if pid == 2 else member.parent(kind, 2)
            assert want is not None and member.parent(kind, 20) == want
            tree = member.trees[kind, 20]
            assert tree.path[0] == 20 and tree.path[-1] == want and tree.dist < math.inf
            attach = [
                i
                for s in _sends(out, ChildUpdates)
                if s.dst == want
                for i in s.message.items
                if (i.kind, i.root) == (kind, 20)
            ]
            assert len(attach) == 1 and attach[0].attach
        assert not [a for a in out if isinstance(a, Probe)]


def test_a_joiner_near_its_sponsor_says_so_in_its_update_and_no_member_probes_for_it() -> None:
    """A joiner tells the members it joined once its probe of its sponsor returned, so
    its Near comes in the same Update: a member copies the sponsor's trees before it
    would probe for the joiner's (module doc, "Joins")."""
    net = _converged(8, seed=0)
    joiner = net.processes[20] = Process(20, rng=random.Random(0))
    (req,) = _sends(joiner.handle(JoinRequested(2)))
    (welcome,) = _sends(net.processes[2].handle(Received(20, req.message)), Welcome)
    hello = {s.dst: s.message for s in _welcomed(joiner, 2, welcome.message) if s.dst != 2}
    assert {type(m) for m in hello.values()} == {Update} and len(hello) == 7
    for pid in (4, 5):  # a LAN member, a member across the wide area
        member = net.processes[pid]
        assert hello[pid].near == Near(2, LAN, 1e8)
        out = member.handle(Received(20, hello[pid]))
        assert all(member.parent(k, 20) == member.parent(k, 2) is not None for k in KINDS)
        assert member.prober._complete()  # no tree without a parent: nothing to probe for
        assert not [a for a in out if isinstance(a, Probe)]


@pytest.mark.parametrize("near", [True, False])
def test_a_member_renews_its_extra_probes_only_if_it_probed_for_a_new_tree(near) -> None:
    """Sec. IV-A: a join makes a member probe until it has a parent in every tree, then
    make the extra probes. A member whose new trees were copied meanwhile (Near) has
    its parents without probing, and makes no extra probe."""
    net = _converged(8, seed=0)
    member = net.processes[4]
    joiner = net.processes[20] = Process(20, rng=random.Random(0))
    (req,) = _sends(joiner.handle(JoinRequested(2)))
    (welcome,) = _sends(net.processes[2].handle(Received(20, req.message)), Welcome)
    sent = _welcomed(joiner, 2, welcome.message, 1.0)  # not near yet: the Near comes later
    (hello,) = [s.message for s in sent if isinstance(s.message, Update) and s.dst == 4]
    assert member.prober.extra_left == 0  # converged: the extra probes are spent
    out = member.handle(Received(20, hello))
    (ask,) = _sends(out, InfoRequest)  # the new trees have no parent: probe, for them only
    assert ask.message.roots == (20,) and member.prober.extra_left == 0
    if near:
        member.handle(Received(20, Near(2)))
    member.handle(ProbeResult(ask.dst, LAN, 1e8))
    here = tuple(Position(k, 20, LAN, 1e8, 1, (20,)) for k in KINDS)  # ask.dst is below 20
    member.handle(Received(ask.dst, Info(here, False)))
    assert all(member.parent(k, 20) is not None for k in KINDS)
    assert member.prober.extra_left == (0 if near else member.extra_probes)


def test_a_joiner_near_its_sponsor_probes_only_its_lan() -> None:
    """Joins (module doc): its LAN's one wide-area edge per tree is there already, so a
    joiner that borrowed its sponsor's measurements asks no peer across the wide area."""
    net = _converged(8, seed=0)
    asked: list[int] = []
    apply = net.apply

    def recording(pid, actions):
        actions = list(actions)
        asked.extend(s.dst for s in _sends(actions, InfoRequest) if pid == 20)
        apply(pid, actions)

    net.apply = recording
    net.processes[20] = Process(20, rng=random.Random(0))  # even: the evens' LAN
    net.feed(20, JoinRequested(contact=2))
    net.run()
    assert len(asked) > 1 and all(q % 2 == 0 for q in asked), asked


@pytest.mark.parametrize("like", [True, False])
def test_a_joiner_that_borrowed_measures_a_new_peer_by_pings(like) -> None:
    """Joins (module doc, (3)): a joiner that borrowed, probing a member it never
    measured (another joiner's tree's root, before that joiner's Near came), pings it
    only; a peer it holds at a like RTT is behind the same links and lends its rate,
    else the 128 KiB download follows. (In fig. 9's rejoin such downloads cross the
    wide area under the broadcast.)"""
    net = _converged(8, seed=0)
    joiner = net.processes[20] = Process(20, rng=random.Random(0))  # even: the evens' LAN
    net.feed(20, JoinRequested(contact=2))
    net.run()
    assert joiner.prober.lan_only and 23 not in joiner.measured
    joiner.prober.lan_misses = len(joiner.measured) + 1  # its LAN gave 23's trees no parent
    out = joiner.handle(Received(3, Update(frozenset({3, 23}))))
    assert [a for a in out if isinstance(a, Probe)] == [Probe(23, 0)]
    _answer_ping(joiner, 23, ref=3, like=like, far=3.0)


def test_a_joiner_in_another_lan_than_its_sponsor_measures_for_itself() -> None:
    net = _converged(8, seed=0)
    log = _recording_downloads(net)
    joiner = net.processes[21] = Process(21, rng=random.Random(0))  # odd: not 2's LAN
    net.feed(21, JoinRequested(contact=2))
    net.run()
    mine = [peer for pid, peer in log if pid == 21]
    assert mine[0] == 2 and len(mine) > 1  # the sponsor first, then its own probes
    assert set(joiner.measured) == set(mine)  # nothing borrowed
    for q, p in net.processes.items():  # no Near: only a download measures it
        if q != 21 and 21 in p.measured:
            assert (q, 21) in log


def test_a_member_measures_a_process_that_joined_since_it_settled_by_pings() -> None:
    """Joins (module doc, (3)): a joiner with no Near (it is not in its sponsor's LAN)
    gives the members no figures for it; a member that had settled measures it by
    pings, and a peer it holds at a like RTT (the joiner's LAN) lends the rate: no
    member downloads from it."""
    net = _converged(8, seed=0)
    log: list[tuple[int, int, int]] = []
    apply = net.apply

    def recording(pid, actions):
        actions = list(actions)
        log.extend((pid, a.peer, a.nbytes) for a in actions if isinstance(a, Probe))
        apply(pid, actions)

    net.apply = recording
    net.processes[21] = Process(21, rng=random.Random(0))  # odd: not 2's LAN
    net.feed(21, JoinRequested(contact=2))
    net.run()
    of_21 = [(pid, n) for pid, peer, n in log if peer == 21]
    assert of_21 and all(n == 0 for _, n in of_21), of_21
    for q, p in net.processes.items():  # the rate of an odd peer measured before
        if q != 21 and 21 in p.measured:
            odd = [m.bw_Bps for r, m in p.measured.items() if r % 2 and r != 21]
            assert p.measured[21].bw_Bps in odd


def test_a_joiner_borrows_once_a_faster_round_trip_shows_its_sponsor_near() -> None:
    """Joins (module doc): on a busy machine the joiner's first ping-pongs with its
    sponsor can take longer than a wide-area round trip; the offer stands until a
    faster round trip (``Remeasured``) puts the sponsor in its LAN class."""
    net = _converged(8, seed=0)
    sponsor = net.processes[2]
    joiner = net.processes[20] = Process(20, rng=random.Random(0))
    (req,) = _sends(joiner.handle(JoinRequested(2)))
    (welcome,) = _sends(sponsor.handle(Received(20, req.message)), Welcome)
    first = joiner.handle(Received(2, welcome.message))
    assert [a.peer for a in first if isinstance(a, Probe)] == [2]
    out = joiner.handle(ProbeResult(2, 20 * WAN, 1e8))  # descheduled: slower than the WAN
    assert not _sends(out, Near) and set(joiner.measured) == {2}
    out = joiner.handle(Remeasured(2, 4 * WAN))  # faster, still not the sponsor's LAN class
    assert not _sends(out, Near) and set(joiner.measured) == {2}
    out = joiner.handle(Remeasured(2, 1.5 * welcome.message.lan_rtt))
    assert {s.dst for s in _sends(out, Near)} == set(net.processes) - {20}
    assert set(joiner.measured) == (set(sponsor.measured) | {2}) - {20}
    out = joiner.handle(Remeasured(2, welcome.message.lan_rtt))  # borrowed once only
    assert not _sends(out, Near)


def test_a_sponsor_that_measured_nothing_lends_nothing() -> None:
    """Joins (module doc): a founder alone has measured no one, so its smallest RTT says
    nothing of a LAN; its joiner, wherever it is, borrows nothing and sends no Near (a
    measured group formed by joins had every cluster's first process borrow the
    founder's figures and claim to be in its LAN)."""
    founder = Process(0, rng=random.Random(0), founder_vnodes={0: [0, 1]})
    founder.handle(Start())
    joiner = Process(20, rng=random.Random(0))
    (req,) = _sends(joiner.handle(JoinRequested(0)))
    (welcome,) = _sends(founder.handle(Received(20, req.message)), Welcome)
    assert welcome.message.measured == ()
    joiner.handle(Received(0, welcome.message))
    for event in (ProbeResult(0, LAN, 1e8), Remeasured(0, LAN / 10)):
        out = joiner.handle(event)
        assert not _sends(out, Near)
    assert set(joiner.measured) == {0}


def test_a_faster_round_trip_makes_a_process_probe_that_peer_again() -> None:
    """``Remeasured``: a lower RTT replaces the one held, and the peer is probed again
    (its Info only) though probing had ended, so the trees are judged with it."""
    net = _converged(4)
    p2 = net.processes[2]
    assert not p2.probing()
    held = p2.measured[0]
    out = p2.handle(Remeasured(0, held.rtt_s * 2))  # slower: nothing
    assert out == [] and p2.measured[0] == held
    out = p2.handle(Remeasured(0, held.rtt_s / 10))
    assert p2.measured[0] == ProbeResult(0, held.rtt_s / 10, held.bw_Bps)
    assert [(s.dst, type(s.message)) for s in _sends(out)] == [(0, InfoRequest)]
    assert not [a for a in out if isinstance(a, Probe)]  # measured: no download
    net.apply(2, out)
    net.run()
    assert not p2.probing() and p2.state is State.ACTIVE
    assert p2.handle(Remeasured(99, 1e-6)) == []  # not a member: nothing
    rtt, bw = p2.measured[0].rtt_s, p2.measured[0].bw_Bps
    p2.handle(Remeasured(0, rtt / 2, bw / 2))  # a rate recomputed lower: the held stays
    assert p2.measured[0] == ProbeResult(0, rtt / 2, bw)
    p2.handle(Remeasured(0, rtt / 4, bw * 3))  # higher: taken
    assert p2.measured[0] == ProbeResult(0, rtt / 4, bw * 3)


def test_a_probe_asks_its_peer_to_leave_out_the_positions_it_could_not_take() -> None:
    """``InfoRequest.bars``: a probe names, in each tree with a parent other than the
    peer, the worst position the rules could take there; the peer's Info leaves out the
    others, and the prober decides as it would on the whole Info."""
    left_out = kept_total = 0
    for seed in range(3):
        net = _converged(8, seed=seed)
        for pid, p in net.processes.items():
            for peer in sorted(p.measured):
                barred, whole = copy.deepcopy(p), copy.deepcopy(p)
                faster = Remeasured(peer, p.measured[peer].rtt_s * 0.9)
                (ask,) = _sends(barred.handle(faster), InfoRequest)
                whole.handle(faster)
                bars = {r: (d, e) for r, d, e in ask.message.bars}
                for (kind, root), t in p.trees.items():
                    if t.parent in (None, peer):  # no bar: every position counts
                        none = (math.inf, -math.inf)
                        j = kind == "bandwidth"
                        assert bars.get(root, none)[j] == none[j]
                q = net.processes[peer]
                (reply,) = _sends(copy.deepcopy(q).handle(Received(pid, ask.message)), Info)
                (full,) = _sends(copy.deepcopy(q).handle(Received(pid, InfoRequest())), Info)
                kept = set(reply.message.positions)
                assert kept <= set(full.message.positions)
                for pos in set(full.message.positions) - kept:
                    dist, est = bars[pos.root]
                    assert pos.dist >= dist if pos.kind == "latency" else pos.est <= est
                left_out += len(full.message.positions) - len(kept)
                kept_total += len(kept)
                barred.handle(Received(peer, reply.message))
                whole.handle(Received(peer, full.message))
                assert {k: (t.parent, t.dist, t.est) for k, t in barred.trees.items()} == {
                    k: (t.parent, t.dist, t.est) for k, t in whole.trees.items()
                }
    assert left_out > 0 and kept_total > 0


def test_a_move_detaches_from_the_old_parent_only_once_the_new_one_took_it() -> None:
    net = _chain(3, remember=False)  # measure again: 2 moved meanwhile
    log: list[tuple[str, int, object]] = []
    feed, apply = net.feed, net.apply

    def logged_feed(pid, event):
        log.append(("fed", pid, event))
        feed(pid, event)

    def logged_apply(pid, actions):
        actions = list(actions)
        log.extend(("sent", pid, a) for a in actions if isinstance(a, Send))
        apply(pid, actions)

    net.feed, net.apply = logged_feed, logged_apply
    # Process 2 now sits next to 0 (and 9 far away); a join makes everyone probe again.
    net.measure = lambda p, q: (
        (1e-1, 1e5) if 9 in (p, q) else (5e-4, 1e9) if {p, q} == {0, 2} else _line(p, q)
    )
    net.processes[9] = Process(9, rng=random.Random(9))
    net.feed(9, JoinRequested(contact=1))
    net.run()
    assert net.processes[2].parent("latency", 0) == 0

    def at(pred) -> int:
        return next(i for i, e in enumerate(log) if pred(e))

    def item(m, cls, attach):
        return isinstance(m, cls) and any(
            (i.kind, i.root, i.attach) == ("latency", 0, attach) for i in m.items
        )

    attach = at(
        lambda e: e[:2] == ("sent", 2) and e[2].dst == 0 and item(e[2].message, ChildUpdates, True)
    )
    taken = at(
        lambda e: (
            e[:2] == ("fed", 2)
            and isinstance(e[2], Received)
            and e[2].src == 0
            and isinstance(e[2].message, ParentUpdates)
            and any((p.kind, p.root) == ("latency", 0) for p in e[2].message.items)
        )
    )
    detach = at(
        lambda e: e[:2] == ("sent", 2) and e[2].dst == 1 and item(e[2].message, ChildUpdates, False)
    )
    assert attach < taken < detach
    assert 2 not in net.processes[1].trees["latency", 0].children


def test_a_peer_is_measured_once_then_only_asked_for_its_info() -> None:
    a, b = _founders(2).values()
    b.handle(Start())
    out = a.handle(Start())
    assert Probe(1) in out
    info = _sends(b.handle(Received(0, InfoRequest())), Info)[0].message
    a.handle(ProbeResult(1, WAN, 1e6))
    again = a.handle(Received(1, info))  # a parent everywhere: the extra probes start
    assert not any(isinstance(x, Probe) for x in again)  # 1 is measured: no download
    assert [s.dst for s in _sends(again, InfoRequest)] == [1]
    assert a.measured[1] == ProbeResult(1, WAN, 1e6)


def test_a_left_process_forwards_a_late_tree_broadcast_along_its_old_children() -> None:
    net = _chain(3)
    net.feed(1, LeaveRequested(heir=0))
    net.run()
    gone = net.processes[1]
    assert gone.state is State.LEFT and net.processes[2].parent("latency", 0) == 0
    late = Bcast("b", 0, "latency", 0, NodeSet.of([1, 2]), True, 1, 1 << 20)
    out = gone.handle(Received(0, late))  # its parent sent it before the detach arrived
    sent = {s.dst: (s.message.via_tree, s.message.targets) for s in _sends(out, Bcast)}
    # 2's subtree along the tree; vnode 1, handed to 0, point-to-point to its owner
    assert sent == {2: (True, NodeSet.of([2])), 0: (False, NodeSet.of([1]))}


def test_a_late_broadcast_follows_a_child_that_moved_away() -> None:
    net = _chain(3)
    mid = net.processes[1]
    mid.handle(Received(2, ChildUpdates((ChildItem("latency", 0, attach=False),))))
    assert 2 not in mid.trees["latency", 0].children
    late = Bcast("b", 0, "latency", 0, NodeSet.of([1, 2]), True, 1, 1 << 20)
    out = mid.handle(Received(0, late))
    sent = {s.dst: (s.message.via_tree, s.message.targets) for s in _sends(out, Bcast)}
    assert sent == {2: (True, NodeSet.of([2]))}  # one tree message, not per vnode


def test_a_vnode_a_child_stopped_reaching_still_goes_down_that_child() -> None:
    # On 0 - 1 - 2 - 3, 2's reach loses vnode 3 (as a sponsor's loses a vnode handed to a
    # joiner that has not attached yet): a broadcast for 2 and 3 reaching 1 goes down the
    # tree to 2 in one message, not point-to-point from 1 for vnode 3.
    net = _chain(4)
    mid = net.processes[1]
    kept = mid.trees["latency", 0].children[2]
    shrunk = ChildItem("latency", 0, True, NodeSet.of([2]), kept.summary, kept.rtt, kept.bw)
    mid.handle(Received(2, ChildUpdates((shrunk,))))
    assert mid.trees["latency", 0].former == {2: NodeSet.of([3])}
    late = Bcast("b", 0, "latency", 0, NodeSet.of([1, 2, 3]), True, 1, 1 << 20)
    out = mid.handle(Received(0, late))
    sent = [(s.dst, s.message.via_tree, s.message.targets) for s in _sends(out, Bcast)]
    assert sent == [(2, True, NodeSet.of([2, 3]))]
    # once 2 reaches vnode 3 again, it is an ordinary child once more
    mid.handle(Received(2, ChildUpdates((replace(shrunk, reach=NodeSet.of([2, 3])),))))
    assert mid.trees["latency", 0].former == {}


def test_a_former_child_is_remembered_only_for_what_no_child_reached_since() -> None:
    net = _chain(4)
    mid = net.processes[1]
    mid.handle(Received(2, ChildUpdates((ChildItem("latency", 0, attach=False),))))
    assert mid.trees["latency", 0].former == {2: NodeSet.of([2, 3])}
    mid.handle(Received(3, ChildUpdates((ChildItem("latency", 0, True, NodeSet.of([3])),))))
    assert mid.trees["latency", 0].former == {2: NodeSet.of([2])}  # 3 is reached by 3 now
    late = Bcast("b", 0, "latency", 0, NodeSet.of([2, 3]), True, 1, 1 << 20)
    sent = {s.dst: s.message.targets for s in _sends(mid.handle(Received(0, late)), Bcast)}
    assert sent == {2: NodeSet.of([2]), 3: NodeSet.of([3])}


def test_the_probes_a_leave_renews_ask_only_about_the_trees_it_repaired() -> None:
    net = _converged(8, seed=1)
    repaired = {
        q: {r for (_, r), t in p.trees.items() if t.parent == 3}
        for q, p in net.processes.items()
        if q != 3
    }
    asked: list[tuple[int, tuple[int, ...]]] = []
    apply = net.apply

    def logged_apply(pid, actions):
        actions = list(actions)
        asked.extend((pid, a.message.roots) for a in _sends(actions, InfoRequest))
        apply(pid, actions)

    net.apply = logged_apply
    net.feed(3, LeaveRequested(heir=2))
    net.run()
    assert asked and all(roots for _, roots in asked)  # none asks about every tree
    assert all(set(roots) <= repaired[q] for q, roots in asked)
    assert {q for q, _ in asked} <= {q for q, roots in repaired.items() if roots}


def test_a_late_broadcast_goes_through_a_child_that_left() -> None:
    net = _chain(3)
    out = net.processes[1].handle(LeaveRequested(heir=0))
    (leaving,) = [s.message for s in _sends(out, Leaving) if s.dst == 0]
    root = net.processes[0]
    root.handle(Received(1, leaving))  # before 2, adopted, has attached to 0
    assert root.trees["bandwidth", 0].children == {}
    out = root.handle(BcastRequested("b", 0, 1 << 20, kind="bandwidth"))
    sent = {s.dst: s.message.via_tree for s in _sends(out, Bcast)}
    assert sent == {1: True}  # through 1, which forwards along its old children


# -- failures (PeerFailed: beyond the paper) ------------------------------------------------
def _kill(net: Network, dead: int) -> list[PeerLost]:
    """Crash ``dead`` (what it sent still arrives) and tell every survivor, with how
    many of its messages ``dead`` took in; their PeerLost reports."""
    net.crash(dead, lose_sent=False)
    lost = []
    for p in sorted(set(net.processes) - net.dead):
        out = net.processes[p].handle(PeerFailed(dead, net.taken.get((p, dead), 0)))
        lost += [a for a in out if isinstance(a, PeerLost)]
        net.apply(p, out)
    return lost


def test_the_next_member_id_takes_a_dead_process_vnodes_over() -> None:
    net = _converged(4, vnodes_each=2)
    lost = _kill(net, 1)
    net.run()
    assert {(r.pid, r.heir, r.vnodes) for r in lost} == {(1, 2, frozenset({2, 3}))}
    heir = net.processes[2]
    assert heir.owned == {2, 3, 4, 5}
    assert all(heir.table.owned[v] == VNodeState(1, recovered=True) for v in (2, 3))
    for p in (0, 3):  # the others learn the heir's claim (epoch 0 + 1)
        assert net.processes[p].table.route[2] == (2, 1)
        assert 1 not in net.processes[p].members and 1 in net.processes[p].failed
    assert not any(1 in t.children for p in (0, 2, 3) for t in net.processes[p].trees.values())


def test_a_dead_process_vnodes_stay_in_its_site_while_one_of_it_lives() -> None:
    """Ids carry their site in the bits from ``SITE_SHIFT`` up: two LANs (the low bit,
    as ``_two_lans``) of three, sites 0 and 1. The last id of each site dies: by id
    order alone its heir would be in the other site; the rule wraps round its own."""
    for dead_k, heir_k in ((5, 1), (4, 0)):
        ids = {k: (k % 2) << SITE_SHIFT | k for k in range(6)}
        mapping = {pid: range(k, k + 1) for k, pid in ids.items()}
        procs = {
            pid: Process(pid, rng=random.Random(k), founder_vnodes=mapping)
            for k, pid in ids.items()
        }
        net = _started(procs, _two_lans, 0)
        lost = _kill(net, ids[dead_k])
        net.run()
        assert {(r.pid, r.heir) for r in lost} == {(ids[dead_k], ids[heir_k])}
        assert net.processes[ids[heir_k]].owned == {heir_k, dead_k}
    only = {0: 0, 1: 1 << SITE_SHIFT | 1, 2: 2}  # the dead's site has nobody left:
    procs = {
        pid: Process(
            pid, rng=random.Random(k), founder_vnodes={q: range(j, j + 1) for j, q in only.items()}
        )
        for k, pid in only.items()
    }
    net = _started(procs, _two_lans, 0)
    assert {(r.pid, r.heir) for r in _kill(net, only[1])} == {(only[1], 0)}  # the next id


def test_a_broadcast_sent_to_a_dead_process_is_sent_again() -> None:
    net = _converged(4, vnodes_each=2)
    dead = min(net.processes[0].trees["latency", 0].children)  # the root sends to it first
    heir, its = (dead + 1) % 4, net.processes[dead].owned  # the next member id
    net.feed(0, BcastRequested("b", 0, 100, kind="latency"))  # on its way, not delivered
    lost = _kill(net, dead)  # what it had not forwarded is lost with it
    net.run()
    got = sorted((v, p) for p, op, vs in net.delivered if op == "b" for v in vs)
    assert [v for v, _ in got] == list(range(8))  # every vnode once: none reached it
    assert {(v, heir) for v in its} <= set(got)  # the dead one's vnodes at the heir
    assert any("b" in r.resent for r in lost)  # whoever had sent to it sent again


def _resent_after_a_death(delivered_all: bool) -> tuple[frozenset, list[Bcast]]:
    """Root 0 broadcasts "a" (every vnode takes it), then its first child dies; its
    beats acknowledged none of "a" as passed on, and (``delivered_all``) all of it as
    taken in. The dead child's vnodes, and what root 0 sends again of "a"."""
    net = _converged(4, vnodes_each=2)
    dead = min(net.processes[0].trees["latency", 0].children)
    before = net.taken.get((0, dead), 0)
    net.feed(0, BcastRequested("a", 0, 100, kind="latency"))
    net.run()
    took = net.taken[0, dead]
    assert took > before  # it took "a" in
    net.crash(dead, lose_sent=False)
    out = net.processes[0].handle(PeerFailed(dead, before, took if delivered_all else None))
    resent = [s.message for s in _sends(out, Bcast) if s.message.op_id == "a"]
    return net.processes[dead].owned, resent


def test_a_dead_process_own_vnodes_get_again_only_what_it_had_not_taken_in() -> None:
    its, resent = _resent_after_a_death(delivered_all=False)
    assert any(m.resent and m.targets & NodeSet.of(its) for m in resent)  # not known: again
    its, resent = _resent_after_a_death(delivered_all=True)
    assert not any(m.targets & NodeSet.of(its) for m in resent)  # it delivered them


def test_the_heir_gets_every_segment_of_a_broadcast_the_dead_had_only_part_of() -> None:
    """The heir starts a vnode's history afresh, and a pipelined broadcast is handed to
    the application whole: a dead process that took in segment 0 only gets the whole
    broadcast again for its vnodes, segment 0 too."""
    for took_all in (False, True):
        net = _converged(3, vnodes_each=1)
        out = net.processes[0].handle(BcastRequested("b", 0, 1 << 20, kind="bandwidth"))
        segs = [s for s in _sends(out, Bcast) if s.dst == min(s.dst for s in _sends(out, Bcast))]
        dead, nseg = segs[0].dst, segs[0].message.nsegments
        assert nseg > 1 and len(segs) == nseg
        net.processes[dead].handle(Received(0, segs[0].message))  # segment 0 arrives
        sent = net.processes[0].sends_to[dead]  # what its beats would count
        took = sent - (0 if took_all else nseg - 1)
        out = net.processes[0].handle(PeerFailed(dead, sent - nseg, took))
        its = NodeSet.of(net.processes[dead].owned)
        again = sorted(  # sent to the heir, or delivered here if we are the heir
            [s.message.segment for s in _sends(out, Bcast) if s.message.targets & its]
            + [d.segment for d in out if isinstance(d, Deliver) and NodeSet.of(d.vnodes) & its]
        )
        assert again == ([] if took_all else list(range(nseg)))


def test_a_broadcast_sent_again_goes_to_the_nearest_owner_which_passes_it_on() -> None:
    """Sent again after a death, a message crosses each wide-area link once: down a
    chain of owners, each passing the rest to the owner it measured nearest."""
    net = _converged(6, vnodes_each=1)
    p0 = net.processes[0]
    assert {2, 4} & set(p0.measured)  # a LAN peer measured
    m = Bcast("r", 0, "latency", 0, NodeSet.of(range(1, 6)), False, 0, 100, resent=True)
    out = p0.handle(Received(3, m))
    assert [(s.dst % 2, s.message.targets) for s in _sends(out, Bcast)] == [
        (0, NodeSet.of(range(1, 6)))  # one message, to a LAN peer (an even id)
    ]
    net.apply(0, out)
    net.run()
    got = sorted(v for _, op, vs in net.delivered if op == "r" for v in vs)
    assert got == [1, 2, 3, 4, 5]


def test_a_reduction_ends_at_once_when_only_the_dead_are_missing() -> None:
    net = _converged(4, vnodes_each=2, give_up_factor=1e6)
    leaf = max(p for p in (1, 2, 3) if not net.processes[p].trees["latency", 0].children)
    mine = net.processes[leaf].owned
    for p in set(net.processes) - {leaf}:  # each gives its own vnodes' data (as Group)
        values = {v: 1 << v for v in net.processes[p].owned}
        net.feed(p, ReduceRequested("r", 0, values, add))
    while net.busy():  # messages only: no timer fires
        net.step()
    assert net.done == []  # the leaf never calls: the root waits for it
    _kill(net, leaf)
    while net.busy():
        net.step()
    rest = 255 - sum(1 << v for v in mine)
    assert [d for _, d in net.done] == [ReduceDone("r", rest, frozenset(mine))]


def test_a_recovered_vnode_s_data_counts_only_where_nothing_covers_it() -> None:
    """Process 1 contributed, then died: its heir's copy of the same vnodes' data is
    set aside at the root and dropped, so each vnode counts once."""
    net = _converged(4, vnodes_each=2, give_up_factor=1e6)
    values = {v: 1 << v for v in range(8)}
    net.feed(1, ReduceRequested("r", 0, values, add))
    while net.busy():
        net.step()
    _kill(net, 1)
    for p in (0, 2, 3):  # the heir (2) now owns 2 and 3 and gives their data too
        net.feed(p, ReduceRequested("r", 0, values, add))
    net.run()
    assert [d for _, d in net.done] == [ReduceDone("r", 255, frozenset())]


def test_told_that_it_died_itself_is_an_error() -> None:
    net = _converged(2)
    with pytest.raises(LocalProtocolError, match="told that it died"):
        net.processes[0].handle(PeerFailed(0))
    assert net.processes[0].state is State.ERROR


def test_a_pipelined_broadcast_whose_root_dies_is_abandoned() -> None:
    net = _converged(3, vnodes_each=1)
    out = net.processes[0].handle(BcastRequested("b", 0, 1 << 20, kind="bandwidth"))
    first = next(a for a in out if isinstance(a, Send) and isinstance(a.message, Bcast))
    assert first.message.nsegments > 1
    net.processes[first.dst].handle(Received(0, first.message))  # one segment arrives
    net.crash(0)  # the rest dies with the root
    out = net.processes[first.dst].handle(PeerFailed(0))
    (ab,) = [a for a in out if isinstance(a, Abandoned)]
    assert ab.op_id == "b" and ab.vnodes == net.processes[first.dst].owned
    assert "b" in net.processes[first.dst].table.owned[first.dst].delivered  # ended


def _chain_dies_under_a_broadcast(**kw) -> tuple[Network, int]:
    """On the line 0 - 1 - 2 - 3, root 0 broadcasts "b" in segments down the bandwidth
    tree; 1 passes them all to 2, 2 passes only segment 0 to 3; then 1 and 2 die. The
    survivors are told with counts saying that each had passed on all it was sent, so
    nobody sends anything again: the segments 2 held died with it. The network and the
    number of segments."""
    net = _chain(4, **kw)
    p = net.processes
    segs = [s.message for s in _sends(p[0].handle(BcastRequested("b", 0, 1 << 20, "bandwidth")))]
    assert len(segs) > 2 and all(m.nsegments == len(segs) for m in segs)
    to_2 = [s.message for m in segs for s in _sends(p[1].handle(Received(0, m)), Bcast)]
    first = p[2].handle(Received(1, to_2[0]))
    for m in to_2[1:]:
        p[2].handle(Received(1, m))  # what it would send dies with it
    (to_3,) = _sends(first, Bcast)
    p[3].handle(Received(2, to_3.message))
    for dead in (1, 2):
        net.crash(dead)
    for q in (0, 3):
        for dead in (1, 2):
            sent = p[q].sends_to.get(dead, 0)
            net.apply(q, p[q].handle(PeerFailed(dead, sent, sent)))
    return net, len(segs)


def test_segments_lost_down_a_chain_of_dead_processes_are_asked_for() -> None:
    """3 (now the child of 0, and the heir of 1 and 2 with fresh states) gets no new
    segment for ``stall_s``: it asks 0 for every segment one of its vnodes lacks, for
    its whole subtree, and 0 sends them from its copies: every vnode ends with "b"."""
    net, n = _chain_dies_under_a_broadcast()
    p3 = net.processes[3]
    assert p3.parent("bandwidth", 0) == 0 and p3.owned == {1, 2, 3}
    assert net.timers[3, ("stall", "b")] == net.now + p3.stall_s
    del net.timers[3, ("stall", "b")]
    out = p3.handle(TimerExpired(("stall", "b")))
    assert [(s.dst, s.message) for s in _sends(out)] == [
        (0, Want("b", "bandwidth", 0, NodeSet.span(0, n), NodeSet.of({1, 2, 3})))
    ]
    assert SetTimer(("stall", "b"), 2 * p3.stall_s) in out  # then looks again, later
    net.apply(3, out)
    net.run()
    assert all("b" in p3.table.owned[v].delivered for v in (1, 2, 3))
    assert ("stall", "b") not in {t for _, t in net.timers}  # done: no more looks


def test_a_broadcast_asked_for_in_vain_is_abandoned_and_reported() -> None:
    """With no copies kept anywhere (``resend_ops=0``), 3's asks bring nothing: after
    ``WANTS`` of them, looking at doubling intervals, it reports what it abandons."""
    net, _ = _chain_dies_under_a_broadcast(resend_ops=0)
    p3 = net.processes[3]
    looks, wants, abandoned = [], 0, []
    while (3, ("stall", "b")) in net.timers:
        looks.append(net.timers.pop((3, ("stall", "b"))) - net.now)
        out = p3.handle(TimerExpired(("stall", "b")))
        wants += len(_sends(out, Want))
        abandoned += [a for a in out if isinstance(a, Abandoned)]
        net.apply(3, out)
        while net.busy():  # the answers, no timer
            net.step()
    assert wants == WANTS
    assert looks == [p3.stall_s] + [p3.stall_s * 2**k for k in range(1, WANTS + 1)]
    assert abandoned == [Abandoned("b", frozenset({1, 2, 3}))]
    assert all("b" in p3.table.owned[v].delivered for v in (1, 2, 3))  # ended


def test_failover_epochs_settle_disagreements() -> None:
    """A handover (+2) beats a failover from the same epoch (+1); two failovers at one
    epoch go to the lower id, in every table; a vnode with its history is given up only
    to the claimant's own claim, one taken over also to a third party's entry."""
    table = VNodeTable.founded(5, {7: [0, 1], 5: [2]})
    table.take_over(table.routed_to(7))  # 7 died: we (5) take vnodes 0, 1 at epoch 1
    assert table.owned[0].epoch == 1 and table.owned[0].recovered
    assert not table.learn(0, 9, 1, claimed=True)  # a tie with a higher id: ours
    assert table.learn(0, 3, 1, claimed=True)  # a tie with a lower id: theirs
    assert table.route[0] == (3, 1) and 0 not in table.owned
    assert table.learn(1, 9, HANDOVER_STEP)  # handed on before 7 died: a third party says
    assert not table.learn(2, 9, HANDOVER_STEP)  # our own, with its history: only a claim
    assert table.learn(2, 9, HANDOVER_STEP, claimed=True) and table.owned.keys() == set()
    # A table that only routes takes the same winner whichever claim it hears first.
    for first, second in ((9, 3), (3, 9)):
        router = VNodeTable.founded(4, {7: [0], 4: [1]})
        router.learn(0, first, 1)
        router.learn(0, second, 1)
        assert router.route[0] == (3, 1), (first, second)


def _attaches_to_a_middle_process() -> tuple[Process, int, tuple[str, int], list[Received]]:
    """A converged process with a parent in some tree, and attaches to it there from two
    processes its subtree did not reach: each moves its reach set."""
    net = _converged(8)
    for key in sorted(net.processes[0].trees):
        for pid, proc in net.processes.items():
            tree = proc.trees[key]
            reach = proc.forest.reach(tree)
            outside = [q for q in net.processes if q not in (*tree.path, pid) and q not in reach]
            if tree.parent is not None and len(outside) >= 2:
                attaches = [
                    Received(q, ChildUpdates((ChildItem(*key, True, NodeSet.of([q])),)))
                    for q in outside[:2]
                ]
                return proc, tree.parent, key, attaches
    raise AssertionError("no process with two processes outside its subtree")


def _ups(out, parent: int, key: tuple[str, int]) -> list[NodeSet]:
    return [
        i.reach
        for s in _sends(out, ChildUpdates)
        if s.dst == parent
        for i in s.message.items
        if (i.kind, i.root) == key
    ]


def test_a_run_of_tree_updates_fed_together_sends_its_updates_once() -> None:
    proc, parent, key, attaches = _attaches_to_a_middle_process()
    one_by_one = copy.deepcopy(proc)
    ups = [_ups(one_by_one.handle(a), parent, key) for a in attaches]
    assert [len(u) for u in ups] == [1, 1]  # an update per attach
    together = _ups(proc.handle_all(attaches), parent, key)
    assert together == ups[-1]  # one, the latest state
    assert proc.trees[key].children.keys() == one_by_one.trees[key].children.keys()
    assert proc.forest.reach(proc.trees[key]) == one_by_one.forest.reach(one_by_one.trees[key])


def test_an_event_that_is_no_tree_update_flushes_the_run_before_it() -> None:
    proc, parent, key, attaches = _attaches_to_a_middle_process()
    (vnode,) = proc.owned
    out = proc.handle_all([attaches[0], BcastRequested("b", vnode, 10), attaches[1]])
    sends = _sends(out)
    first_bcast = next(i for i, s in enumerate(sends) if isinstance(s.message, Bcast))
    ups = [i for i, s in enumerate(sends) if s.dst == parent and _ups([s], parent, key)]
    assert len(ups) == 2 and ups[0] < first_bcast < ups[1]  # the run before it went out first
