"""Closed-form P-LogP models of the allgather builders
(:mod:`gridcoll.algorithms.allgather`).

``b = nbytes`` is the block of one rank, ``m`` the segment size, ``k = ceil(b/m)``,
``P_w`` the number of clusters (coordinators), ``N_c`` the ranks of cluster ``c``.

Flat-network algorithms (Thakur, Rabenseifner and Gropp 2005), evaluated per edge:

* ring: ``T = (P-2) lam + max_e r_e(b)`` with the max-plus cycle mean ``lam`` of the
  ring (the largest of an edge's gap, a rank's ``os + or``, the mean ``r`` round the
  ring, and a shared link's load): ``(P-1) (L + g(b))`` on one network;
* recursive doubling and Bruck: the sum over steps of the slowest exchange
  (:func:`~gridcoll.models._collective.exchange_step`).

Seed 000, sec. 3.4, for the exchange among coordinators:
``T = (k-1) gamma(m) + lam(m)`` with ``gamma(m) = max((P_w-1) (s_w(m) + max(g_l(m),
or_w(m))), g_w(m))`` and ``lam(m) = (P_w-2) s_w(m) + g_w(m) + L_w``
(:func:`magpie_segmented_exchange_paper`). MagPIe's complete algorithm adds the local
gather before and the local broadcast after (:func:`magpie_original_allgather_model`);
the pipelined variant overlaps the three (:func:`magpie_segmented_allgather_model`).
"""

from __future__ import annotations

from gridcoll.algorithms.allgather import mpich_allgather_variant
from gridcoll.algorithms.magpie import check_degree, cluster_ranks
from gridcoll.algorithms.trees import binomial_tree, dary_tree
from gridcoll.models._collective import (
    Costs,
    Inbound,
    many_to_one,
    rounds_time,
    sized_tree,
)
from gridcoll.models.single_layer import check_model_call, nsegments
from gridcoll.models.two_layer import slowest_lan, slowest_wan
from gridcoll.network.grid import Grid
from gridcoll.network.plogp import s_w

__all__ = [
    "MODELS",
    "bruck_allgather_model",
    "magpie_original_allgather_model",
    "magpie_segmented_allgather_model",
    "magpie_segmented_exchange_paper",
    "mpich_allgather_model",
    "recursive_doubling_allgather_model",
    "ring_allgather_model",
]


def ring_time(grid: Grid, costs: Costs, nbytes: float) -> float:
    """``(P-2) lam + max_e r_e(b)`` of a ring over ranks ``0 .. P-1`` (module notes)."""
    P = grid.nranks
    if P < 2:
        return 0.0
    edges = [costs(a, (a + 1) % P, nbytes) for a in range(P)]
    cpu = max(edges[a].os + edges[a - 1].or_ for a in range(P))
    mean = sum(e.r for e in edges) / P
    busy: dict[str, list[float]] = {}
    for e in edges:
        for name, g_link in e.links:
            load = busy.setdefault(name, [0.0, 0.0, 0])
            load[0] += g_link
            load[1] = max(load[1], e.L)
            load[2] += 1
    shared = max((g + L for g, L, n in busy.values() if n > 1), default=0.0)
    lam = max(max(e.g for e in edges), max(e.s for e in edges), cpu, mean, shared)
    return (P - 2) * lam + max(e.r for e in edges)


def ring_allgather_model(grid: Grid, nbytes: int, root: int = 0, *, itemsize: int = 1) -> float:
    """Model of :func:`~gridcoll.algorithms.allgather.ring_allgather` (seconds)."""
    b = check_model_call(grid, nbytes, root, itemsize)
    return ring_time(grid, Costs(grid), b)


def _finish(clock: dict[int, float]) -> float:
    return max(clock.values(), default=0.0)


def recursive_doubling_allgather_model(
    grid: Grid, nbytes: int, root: int = 0, *, itemsize: int = 1
) -> float:
    """Model of :func:`~gridcoll.algorithms.allgather.recursive_doubling_allgather`:
    fold, ``log2 p`` exchanges of the blocks held, unfold
    (:func:`~gridcoll.models._collective.rounds_time`)."""
    b = check_model_call(grid, nbytes, root, itemsize)
    P = grid.nranks
    p = 1 << (P.bit_length() - 1)
    holds = [1 + (r + p < P) for r in range(p)]
    rounds = [[(r, r - p, b) for r in range(p, P)]]
    mask = 1
    while mask < p:
        rounds.append([(r, r ^ mask, holds[r] * b) for r in range(p)])
        holds = [holds[r] + holds[r ^ mask] for r in range(p)]
        mask <<= 1
    rounds.append([(r - p, r, (P - 1) * b) for r in range(p, P)])
    return _finish(rounds_time(Costs(grid), rounds))


def bruck_allgather_model(grid: Grid, nbytes: int, root: int = 0, *, itemsize: int = 1) -> float:
    """Model of :func:`~gridcoll.algorithms.allgather.bruck_allgather`: its
    ``ceil(log2 P)`` steps (:func:`~gridcoll.models._collective.rounds_time`)."""
    b = check_model_call(grid, nbytes, root, itemsize)
    P = grid.nranks
    rounds, dist = [], 1
    while dist < P:
        count = min(dist, P - dist)
        rounds.append([(r, (r - dist) % P, count * b) for r in range(P)])
        dist <<= 1
    return _finish(rounds_time(Costs(grid), rounds))


def mpich_allgather_model(grid: Grid, nbytes: int, root: int = 0, *, itemsize: int = 1) -> float:
    """Model of :func:`~gridcoll.algorithms.allgather.mpich_allgather`: the model of the
    variant MPICH picks."""
    check_model_call(grid, nbytes, root, itemsize)
    variant = mpich_allgather_variant(grid.nranks, nbytes)
    model = {
        "recursive-doubling": recursive_doubling_allgather_model,
        "bruck": bruck_allgather_model,
        "ring": ring_allgather_model,
    }[variant]
    return model(grid, nbytes, root, itemsize=itemsize)


def _coordinators(grid: Grid) -> list[int]:
    return [ranks[0] for ranks in grid.members]


def magpie_original_allgather_model(
    grid: Grid, nbytes: int, root: int = 0, *, itemsize: int = 1
) -> float:
    """Model of :func:`~gridcoll.algorithms.allgather.magpie_original_allgather`:
    ``T_gather + T_exchange + T_bcast`` per cluster (seed 000, sec. 3.4), the exchange
    with each coordinator's whole-cluster messages sent one after the other."""
    b = check_model_call(grid, nbytes, root, itemsize)
    P, C = grid.nranks, grid.nclusters
    costs = Costs(grid)
    coordinators = _coordinators(grid)
    members = grid.members
    gathered = [
        many_to_one(costs, coordinators[c], [(r, b) for r in members[c][1:]])[1] for c in range(C)
    ]
    inbound = Inbound(costs)
    arrival: dict[tuple[int, int], float] = {}
    sends = []
    for c in range(C):
        t = gathered[c]
        for i in range(1, C):
            q = (c + i) % C
            sends.append((t, c, q))
            t += costs(coordinators[c], coordinators[q], len(members[c]) * b).s
    for t, c, q in sorted(sends):
        n = len(members[c]) * b
        arrival[(c, q)] = inbound.arrival(coordinators[c], coordinators[q], n, t)
    T = 0.0
    for q in range(C):
        me = coordinators[q]
        t = gathered[q] + sum(
            costs(me, coordinators[(q + i) % C], len(members[q]) * b).os for i in range(1, C)
        )
        for i in range(1, C):
            c = (q - i) % C
            t = max(arrival[(c, q)], t + costs(coordinators[c], me, len(members[c]) * b).or_)
        tree = binomial_tree(cluster_ranks(grid, q, me))
        T = max(T, t + sized_tree(costs, tree, lambda a, c: P * b)[1])
    return T


def magpie_segmented_exchange_paper(grid: Grid, m: int) -> tuple[float, float]:
    """Seed 000, sec. 3.4: ``(gamma(m), lam(m))`` of the coordinators' segmented
    exchange, on the slowest WAN route and LAN (sec. 4)."""
    P_w = grid.nclusters
    lan = slowest_lan(grid)
    if P_w < 2:
        return 0.0, 0.0
    wan = slowest_wan(grid)
    sw = s_w(lan, wan, m)
    gamma = max((P_w - 1) * (sw + max(lan.g(m), wan.or_(m))), wan.g(m))
    lam = (P_w - 2) * sw + wan.g(m) + wan.L
    return gamma, lam


def magpie_segmented_allgather_model(
    grid: Grid,
    nbytes: int,
    root: int = 0,
    *,
    segment_size: int,
    lan_degree: int,
    itemsize: int = 1,
) -> float:
    """Model of :func:`~gridcoll.algorithms.allgather.magpie_segmented_allgather`.

    Per cluster ``q`` with ``n_c = N_c m``: phase A, its own rounds (gather ``N_q - 1``
    segments, send ``n_q`` to ``P_w - 1`` coordinators and ``d_l`` LAN children), each
    round taking ``gamma_A``; the WAN rounds from ``c`` arriving ``max(gamma_A(c),
    g_w(n_c))`` apart after seed 000's ``lam``; phase B, forwarding the ``k (P_w - 1)``
    received rounds down the LAN tree (``or_w + d_l os_l`` each); the members
    forwarding ``k P_w`` messages; plus the LAN tree's ``lam`` for the last one. At
    least the busiest wide-area link's work, where routes share links
    (:func:`_shared_links`).
    """
    m = check_model_call(grid, nbytes, root, itemsize, segment_size)
    check_degree(lan_degree, "lan_degree")
    k = nsegments(nbytes, m)
    C = grid.nclusters
    costs = Costs(grid)
    coordinators = _coordinators(grid)
    members = grid.members
    n = [len(members[c]) * m for c in range(C)]
    trees = [dary_tree(cluster_ranks(grid, c, coordinators[c]), lan_degree) for c in range(C)]
    last_round, gamma_a, first, sends = [], [], [], []
    for c, me in enumerate(coordinators):
        g_gather, lam_gather = many_to_one(costs, me, [(r, m) for r in members[c][1:]])
        kids = trees[c].children.get(me, ())
        wan = [costs(me, coordinators[(c + i) % C], n[c]) for i in range(1, C)]
        lan = [costs(me, kid, n[c]) for kid in kids]
        cpu = sum(e.or_ for e in (costs(r, me, m) for r in members[c][1:]))
        cpu += sum(e.os for e in wan + lan)
        nic = sum(e.s for e in wan + lan)
        gamma = max(g_gather if len(members[c]) > 1 else 0.0, cpu, nic)
        gamma_a.append(gamma)
        first.append(lam_gather)
        last_round.append(lam_gather + (k - 1) * gamma)  # its last round's sends start
        sends.append((sum(e.s for e in wan), sum(e.os for e in wan + lan)))
    T = 0.0
    for q, me in enumerate(coordinators):
        kids = trees[q].children.get(me, ())
        lan_lam = sized_tree(costs, trees[q], lambda a, c: max(n))[1]
        own = last_round[q] + sends[q][0] + lan_lam  # its own last round, down the tree
        forward, last = 0.0, last_round[q] + sends[q][1]
        for i in range(1, C):
            c = (q - i) % C
            e = costs(coordinators[c], me, n[c])
            down = [costs(me, kid, n[c]) for kid in kids]
            forward += max(e.or_ + sum(d.os for d in down), sum(d.s for d in down))
            position = sum(
                costs(coordinators[c], coordinators[(c + j) % C], n[c]).s for j in range(1, i)
            )
            link = max((g for _, g in e.links), default=e.g)
            arrive = first[c] + (k - 1) * max(gamma_a[c], link) + position + e.r
            last = max(last, arrive + e.or_)
        done = max(last_round[q] + sends[q][1] + k * forward, last) + lan_lam
        member_rate = 0.0
        for v, vkids in trees[q].children.items():
            if v == me:
                continue
            down = [costs(v, kid, max(n)) for kid in vkids]
            inc = costs(me, v, max(n)).or_
            member_rate = max(member_rate, inc + sum(d.os for d in down), sum(d.s for d in down))
        own_sends = k * max((costs(r, me, m).s for r in members[q][1:]), default=0.0)
        members_done = max(first[q], own_sends) + (k * C - 1) * member_rate + lan_lam
        T = max(T, own, done if C > 1 else own, members_done)
    return max(T, _shared_links(grid, [k] * C, n))


def _shared_links(grid: Grid, rounds: list[int], sizes: list[float]) -> float:
    """The busiest wide-area link when every cluster ``c`` sends ``rounds[c]`` messages
    of ``sizes[c]`` bytes straight to every other coordinator: ``sum g_link`` over the
    routes that cross it (a site's access link carries all its clusters' rounds; a
    private pair link one cluster's), plus the least route latency. The rounds' own
    ``gamma`` sees one route at a time (seed 000's model: links never shared)."""
    work: dict[str, float] = {}
    latency = min((r.plogp.L for r in grid.routes.values()), default=0.0)
    for a in range(grid.nclusters):
        for b in range(grid.nclusters):
            if a == b:
                continue
            for name in grid.routes[(a, b)].links:
                work[name] = work.get(name, 0.0) + rounds[a] * grid.links[name].g(sizes[a])
    return max(work.values(), default=0.0) + latency if work else 0.0


MODELS = {
    ("allgather", "ring"): ring_allgather_model,
    ("allgather", "recursive-doubling"): recursive_doubling_allgather_model,
    ("allgather", "bruck"): bruck_allgather_model,
    ("allgather", "mpich"): mpich_allgather_model,
    ("allgather", "magpie-original"): magpie_original_allgather_model,
    ("allgather", "magpie-segmented"): magpie_segmented_allgather_model,
}
"""The allgather models, by ``(op, name)``."""
