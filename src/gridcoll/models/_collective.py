"""Per-edge evaluators shared by the models of scatter, gather, allgather, all-to-all,
reduce, allreduce and barrier.

Every quantity is seed 000's (sec. 2.1), evaluated per message ``a -> b`` of ``m`` bytes
with the parameters of its route (:class:`Costs`): the sender is busy
``s = max(g_l(m), os(m))`` on its NIC (``g_l`` of its own LAN: the ``s_w``
composition) and ``os(m)`` on its CPU, the message arrives ``r = L + g(m)`` after it
starts, the receiver is busy ``or(m)``, and every shared link of the route is occupied
``g_link(m)``. The evaluators compose these along the shapes the builders use:

* :func:`sized_tree` - data flowing *down* a tree whose edges carry different sizes
  (scatter trees): seed 000's ``gamma`` and ``lam`` of :mod:`~gridcoll.models.tree_model`
  with a size per edge;
* :func:`upward_tree` - whole messages flowing *up* a tree (gather trees): a node sends
  when it has received from all its children, in order;
* :func:`reduce_gamma_lambda` - segments reduced up a tree, pipelined;
* :func:`many_to_one` - one receiver taking one message from each of many senders that
  all start at once (flat gathers), with the queues at its NIC and on shared links;
* :func:`exchange_step` - one step of pairwise exchanges, all starting at once;
* :func:`rounds_time` - rounds of exchanges (recursive doubling, Bruck, Rabenseifner),
  each rank starting a round when it has finished the previous one;
* :func:`pipeline_time` - a chain streaming many messages, each hop forwarding at once.

They are as exact as the simulator where no two messages compete for a resource the
formulas do not count, and otherwise upper-bound style. All are O(edges).

References
----------
Kielmann et al. (seed 000), sec. 2.1 and 3.1.1; Barchet-Estefanel and Mounié (seed 002),
Tables 1-3.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from gridcoll.algorithms.trees import Tree
from gridcoll.network.grid import Grid

__all__ = [
    "Cost",
    "Costs",
    "Inbound",
    "exchange_step",
    "many_to_one",
    "pipeline_time",
    "reduce_gamma_lambda",
    "rounds_time",
    "sized_tree",
    "upward_tree",
]


@dataclass(frozen=True, slots=True)
class Cost:
    """The P-LogP costs of one m-byte message from rank a to rank b (seconds)."""

    s: float  # sender NIC busy: max(g_l(m), os(m))
    os: float  # sender CPU busy
    or_: float  # receiver CPU busy
    g: float  # gap of the route
    L: float  # latency of the route
    r: float  # L + g: arrival after the send starts
    nic_in: float  # the receiver's NIC (its LAN's g(m)) is occupied this long
    links: tuple[tuple[str, float], ...]  # shared links crossed, with g_link(m)


class Costs:
    """:class:`Cost` of any message, memoised per ordered cluster pair and size (in
    ``grid.memo``, shared by every model of the grid: a search weighs many models and
    parameters at each segment size)."""

    def __init__(self, grid: Grid):
        self.grid = grid
        self.tables: dict[float, dict[tuple[int, int], Cost]] = {}

    def __call__(self, a: int, b: int, m: float) -> Cost:
        grid = self.grid
        ca, cb = grid.cluster_of[a], grid.cluster_of[b]
        table = self.tables.get(m)
        if table is None:
            table = self.tables[m] = grid.memo.get("models.costs", m, dict, maxsize=COST_SIZES)
        key = (ca, cb)
        cost = table.get(key)
        if cost is None:
            lan_a, lan_b = grid.clusters[ca].lan, grid.clusters[cb].lan
            if ca == cb:
                net, links = lan_a, ()
            else:
                route = grid.routes[(ca, cb)]
                net = route.plogp
                links = tuple((name, grid.links[name].g(m)) for name in route.links)
            g, os = net.g(m), net.os(m)
            cost = Cost(max(lan_a.g(m), os), os, net.or_(m), g, net.L, net.L + g, lan_b.g(m), links)
            table[key] = cost
        return cost


COST_SIZES = 256
"""Message sizes whose :class:`Cost` tables ``grid.memo`` keeps (least recently used
dropped)."""


Size = Callable[[int, int], float]
"""``size(parent, child)``: bytes of the message on a tree edge."""


def sized_tree(
    costs: Costs, tree: Tree, size: Size, start: float = 0.0
) -> tuple[float, float, dict[int, float]]:
    """``(gamma, lam, arrival)`` of one segment round sent down ``tree``.

    Each node sends to its children in order as soon as it has its own message, the
    sends ``s`` apart, a message leaving when every shared link of its route is free;
    ``arrival[v]`` is when v has its message (the root: ``start``). ``gamma`` is the
    busiest per round of: an edge's own gap, a node's NIC (``sum s``), its CPU (``or``
    of what it receives plus ``sum os``), a shared link (``sum g_link``);
    ``lam = max(arrival) - start`` (seed 000, sec. 3.1.1, per edge).
    """
    arrival = {tree.root: start}
    or_in = {tree.root: 0.0}
    link_free: dict[str, float] = {}
    link_busy: dict[str, float] = {}
    gamma = 0.0
    for v in tree.nodes():
        t = arrival[v]
        nic, cpu = 0.0, or_in[v]
        for c in tree.children.get(v, ()):
            e = costs(v, c, size(v, c))
            depart = t
            if e.links:
                depart = max(depart, *(link_free.get(name, 0.0) for name, _ in e.links))
                for name, g_link in e.links:
                    link_free[name] = depart + g_link
                    link_busy[name] = link_busy.get(name, 0.0) + g_link
            arrival[c] = depart + e.r
            or_in[c] = e.or_
            t += e.s
            nic += e.s
            cpu += e.os
            gamma = max(gamma, e.g)
        gamma = max(gamma, nic, cpu)
    if link_busy:
        gamma = max(gamma, *link_busy.values())
    return gamma, max(arrival.values()) - start, arrival


class Inbound:
    """Queues of messages into ranks: each receiver's NIC and every shared link.

    A message that starts at ``depart`` enters the links of its route when they are
    free (in the order messages are offered) and the receiver's NIC likewise, and
    arrives ``L`` after the later of its tail on the route (``g``) and on the NIC
    (the receiver's LAN ``g``): the simulator's cut-through rule.
    """

    def __init__(self, costs: Costs):
        self.costs = costs
        self.link_free: dict[str, float] = {}
        self.nic_free: dict[int, float] = {}

    def arrival(self, src: int, dst: int, nbytes: float, depart: float) -> float:
        return self.enter(self.costs(src, dst, nbytes), dst, depart)

    def enter(self, e: Cost, dst: int, depart: float) -> float:
        """:meth:`arrival` of a message whose :class:`Cost` is ``e``."""
        queue = depart
        for name, _ in e.links:
            queue = max(queue, self.link_free.get(name, 0.0))
        for name, g_link in e.links:
            self.link_free[name] = queue + g_link
        head = max(depart, self.nic_free.get(dst, 0.0))
        self.nic_free[dst] = head + e.nic_in
        return max(queue + e.g, head + e.nic_in) + e.L


def upward_tree(
    costs: Costs, tree: Tree, size: Size, ready: dict[int, float] | None = None
) -> float:
    """When the root of ``tree`` has received from all its children (whole messages).

    A node takes its children's messages in the tree's order, each receive completing
    at ``max(arrival, previous + or)``, then sends its own message (``size(parent,
    node)`` bytes) to its parent; ``ready`` gives nodes a later start (default 0).
    Messages into one node queue at its NIC, and messages on one shared link queue
    there, in the order they start (nodes taken bottom-up). O(P log P).
    """
    ready = dict(ready or {})
    inbound = Inbound(costs)
    for v in reversed(tree.nodes()):  # children before parents
        kids = tree.children.get(v, ())
        arrival = {
            c: inbound.arrival(c, v, size(v, c), ready[c])
            for c in sorted(kids, key=lambda c: (ready[c], c))
        }
        t = ready.get(v, 0.0)
        for c in kids:
            t = max(arrival[c], t + costs(c, v, size(v, c)).or_)
        ready[v] = t
    return ready[tree.root]


def reduce_gamma_lambda(
    costs: Costs, tree: Tree, m: float, to: int | None = None
) -> tuple[float, float]:
    """``(gamma, lam)`` of reducing segments of ``m`` bytes up ``tree`` (then to ``to``).

    Per segment a node receives one message per child (``or`` each on its CPU, its
    LAN's ``g`` each on its NIC) and sends one to its parent (``os`` on its CPU, ``s``
    on its NIC); with ``to``, the top sends each result there too. ``gamma`` is the
    busiest per segment of any rank's CPU, NIC in or NIC out, an edge's gap or a shared
    link; ``lam`` the time the first segment needs to reach the top (then ``to``): a
    node's segment is ready at ``max over children, in order, of max(arrival_c,
    previous + or_c)``, arrivals queueing at NICs and links as in :func:`upward_tree`
    (seed 000's broadcast ``lam`` with sender and receiver swapped). The combining
    itself costs nothing, as in the simulator.
    """
    parents = dict(tree.parents())
    if to is not None and to != tree.root:
        parents[tree.root] = to
    cpu: dict[int, float] = {}
    nic_in: dict[int, float] = {}
    nic_out: dict[int, float] = {}
    link_busy: dict[str, float] = {}
    gamma = 0.0
    for child, parent in parents.items():
        e = costs(child, parent, m)
        cpu[child] = cpu.get(child, 0.0) + e.os
        nic_out[child] = nic_out.get(child, 0.0) + e.s
        cpu[parent] = cpu.get(parent, 0.0) + e.or_
        nic_in[parent] = nic_in.get(parent, 0.0) + e.nic_in
        gamma = max(gamma, e.g)
        for name, g_link in e.links:
            link_busy[name] = link_busy.get(name, 0.0) + g_link
    for busy in (cpu, nic_in, nic_out, link_busy):
        gamma = max(gamma, *busy.values(), 0.0)
    ready: dict[int, float] = {}
    inbound = Inbound(costs)
    for v in reversed(tree.nodes()):
        kids = tree.children.get(v, ())
        arrival = {
            c: inbound.arrival(c, v, m, ready[c]) for c in sorted(kids, key=lambda c: ready[c])
        }
        t = 0.0
        for c in kids:
            t = max(arrival[c], t + costs(c, v, m).or_)
        ready[v] = t
    lam = ready[tree.root]
    if to is not None and to != tree.root:
        lam = inbound.arrival(tree.root, to, m, lam)
    return gamma, lam


def many_to_one(
    costs: Costs,
    root: int,
    messages: Sequence[tuple[int, float]],
    ready: dict[int, float] | None = None,
    start: float = 0.0,
) -> tuple[float, float]:
    """``(gamma, lam)`` of ``root`` receiving one message ``(src, bytes)`` from each
    sender, in the order listed, every sender starting at once (or at ``ready[src]``).

    The messages queue at the root's NIC and on shared links in the order they start
    (ties by rank, as the simulator starts ranks in rank order); the root completes each
    receive at ``max(arrival, previous + or)``, reaching its first one at ``start``.
    ``lam`` is its last completion. ``gamma`` is the busiest per round of the root's CPU
    (``sum or``), its NIC (``sum g_l``), a shared link (``sum g_link``) and a sender's
    own ``s``: the period when every sender streams one such message per round (seed
    000, sec. 3.3).
    """
    ready = ready or {}
    inbound = Inbound(costs)
    arrival = {}
    for src, nbytes in sorted(messages, key=lambda msg: (ready.get(msg[0], 0.0), msg[0])):
        arrival[src] = inbound.arrival(src, root, nbytes, ready.get(src, 0.0))
    t = start
    cpu = nic = gamma = 0.0
    link_busy: dict[str, float] = {}
    for src, nbytes in messages:
        e = costs(src, root, nbytes)
        t = max(arrival[src], t + e.or_)
        cpu += e.or_
        nic += e.nic_in
        gamma = max(gamma, e.s, e.g)
        for name, g_link in e.links:
            link_busy[name] = link_busy.get(name, 0.0) + g_link
    return max(gamma, cpu, nic, *link_busy.values(), 0.0), t


def exchange_step(costs: Costs, grid: Grid, messages: Sequence[tuple[int, int, float]]) -> float:
    """Time of one step in which every ``(a, b, bytes)`` is sent at once and received.

    The slowest pair's ``max(r, os + or)``, or the busiest shared link's ``sum g_link``
    plus its largest latency if more than one message crosses it. O(messages).
    """
    step = 0.0
    busy: dict[str, list[float]] = {}
    for a, b, nbytes in messages:
        if not nbytes:
            continue
        e = costs(a, b, nbytes)
        step = max(step, e.r, e.os + e.or_)
        for name, g_link in e.links:
            load = busy.setdefault(name, [0.0, 0.0, 0])
            load[0] += g_link
            load[1] = max(load[1], e.L)
            load[2] += 1
    shared = max((g + L for g, L, count in busy.values() if count > 1), default=0.0)
    return max(step, shared)


def rounds_time(
    costs: Costs,
    rounds: Sequence[Sequence[tuple[int, int, float]]],
    clock: dict[int, float] | None = None,
) -> dict[int, float]:
    """Per-rank finishing times of rounds of messages ``(a, b, bytes)``.

    In each round a rank first makes its sends, in the order listed (its NIC ``s``
    apart, its CPU ``os`` each), then takes its receives in the order listed, each
    completing at ``max(arrival, previous + or)``; arrivals queue at NICs and shared
    links (:class:`Inbound`). A rank starts a round as soon as it has finished the
    previous one, as the schedule's program order allows. Zero-byte messages are
    skipped. ``clock`` gives start times (default 0). O(messages log messages).
    """
    clock = dict(clock or {})
    inbound = Inbound(costs)
    for messages in rounds:
        sent = [(a, b, costs(a, b, n)) for a, b, n in messages if n]
        nic: dict[int, float] = {}
        depart = []
        for i, (a, _, e) in enumerate(sent):
            start = max(clock.get(a, 0.0), nic.get(a, 0.0))
            nic[a] = start + e.s
            clock[a] = clock.get(a, 0.0) + e.os
            depart.append((start, a, i))
        depart.sort()
        arrival = [0.0] * len(sent)
        for start, _, i in depart:
            _, b, e = sent[i]
            arrival[i] = inbound.enter(e, b, start)
        for (_, b, e), t in zip(sent, arrival, strict=True):
            clock[b] = max(t, clock.get(b, 0.0) + e.or_)
    return clock


def pipeline_time(costs: Costs, chain: Sequence[int], counts: Sequence[int], m: float) -> float:
    """A chain ``chain[0] -> chain[1] -> ...`` streaming single-segment messages.

    ``counts[i]`` messages reach ``chain[i]`` (``i >= 1``) and the last of them is the
    one that matters to it; messages follow each other at the slowest per-message cost
    ``sigma`` of the hops they crossed (a sender's NIC ``s``, a forwarding rank's CPU
    ``or + os``, the hop's own gap), each hop adding its ``r``:
    ``T = max_i ((counts[i] - 1) sigma_i + sum_{h <= i} r_h)``. For seed 002's
    pipelined chain (Table 2) this is ``(P-1) (g(m) + L)``.
    """
    T, R, sigma, or_in = 0.0, 0.0, 0.0, 0.0
    for i in range(1, len(chain)):
        e = costs(chain[i - 1], chain[i], m)
        sigma = max(sigma, e.s, e.g, or_in + e.os)
        R += e.r
        or_in = e.or_
        T = max(T, (counts[i] - 1) * sigma + R)
    return T
