"""Named grids that every part of gridcoll accepts (``--grid NAME``).

=====================  ==================================================================
``magpie:C,N``          C clusters of N ranks; LAN L = 20 us, 50 MB/s; WAN L = 10 ms,
                        1 MB/s per pair link (seed 000, sec. 2).
``das2:N``              the four DAS clusters with seed 000's Table 2 latency and bandwidth
                        matrices (asymmetric), N ranks each.
``das2-spread:P,C``     P ranks spread over the first C (2-4) DAS clusters as evenly as
                        possible (the first clusters take the remainder): seed 004's
                        set-ups, ``das2-spread:201,3``, ``:137,4``, ``:128,3``, ``:160,4``.
``teragrid``            seed 001's emulated TeraGrid: 4 sites, 8 clusters, 64 nodes.
``transit-stub:N,SEED`` N single-rank nodes on a random transit-stub WAN in the style of
                        seed 003 (GT-ITM; 10-1000 ms, 10 Kbps-10 Mbps).
``lan:N``               one cluster of N ranks with the MagPIe LAN (a single-layer network).
=====================  ==================================================================

Values the papers do not give are chosen in their spirit and documented here and in
``docs/grid-format.md``.
"""

from __future__ import annotations

import itertools
import math
import os
import random
import re
from pathlib import Path

from gridcoll.errors import GridError
from gridcoll.limits import MAX_CLUSTERS, MAX_RANKS
from gridcoll.network.grid import Cluster, Grid, Link, Route
from gridcoll.network.gridfile import load_grid
from gridcoll.network.plogp import PLogP

__all__ = [
    "PRESETS",
    "das2",
    "das2_spread",
    "get_grid",
    "lan",
    "lan_plogp",
    "magpie",
    "teragrid",
    "transit_stub",
    "wan_plogp",
]

KiB = 1024
MiB = 1024 * 1024
WAN_GAP0 = 8e-6
"""``g_w(0)``: the per-message cost of a wide-area link, in seconds."""


def lan_plogp(latency: float = 20e-6, bandwidth: float = 50e6) -> PLogP:
    """A Myrinet-like LAN (seed 000, sec. 2: L = 20 us, 50 MB/s at MPI level).

    ``g(m) = 8 us + m/bandwidth``. The CPU overheads ``os(m) = or(m) = 4 us + m/150 MB/s``
    are close to but below the gap, as seed 000's figure 2 shows for Myrinet ("the
    difference between overhead o and gap g is small").
    """
    return PLogP.linear(latency, bandwidth, g0=8e-6, os0=4e-6, or0=4e-6, copy_bandwidth=150e6)


def wan_plogp(
    latency: float,
    bandwidth: float,
    lan: PLogP | None = None,
    *,
    eager_limit: int = 64 * KiB,
    rendezvous_limit: int = 128 * KiB,
) -> PLogP:
    """A wide-area link as seed 000's figure 2 (right) measures it.

    ``g_w(m) = 8 us + m/bandwidth``. For short messages ``MPI_Isend`` returns as fast as
    on the LAN (``os_w = os_l``); from ``eager_limit`` it starts to block on flow control,
    and from ``rendezvous_limit`` (MPICH's switch to rendezvous) the sender is busy for
    the whole transfer, ``os_w(m) = g_w(m)``: "as large messages have a high send
    overhead, the root can only send over one WAN link at a time" (seed 000, sec. 3.1).
    ``or_w = or_l``.
    """
    lan = lan or lan_plogp()
    sizes = (0.0, float(eager_limit), float(rendezvous_limit), float(MiB))
    g = [WAN_GAP0 + m / bandwidth for m in sizes]
    os = [lan.os(sizes[0]), lan.os(sizes[1]), g[2], g[3]]
    or_ = [lan.or_(m) for m in sizes]
    return PLogP.from_points(latency, sizes, os, or_, g)


def _link_gap(bandwidth: float):
    """Occupancy ``g(m) = 8 us + m/bandwidth`` of a shared link, the same affine gap
    :func:`wan_plogp` gives a route, so an uncontended message sees ``r_w = L_w + g_w``."""
    return PLogP.linear(0.0, bandwidth, g0=WAN_GAP0).g_fn


def _pair_grid(name: str, clusters: list[Cluster], wan: dict[tuple[int, int], PLogP]) -> Grid:
    """A grid whose every ordered cluster pair has a private link (seed 000, figure 1)."""
    routes, links = {}, {}
    for (a, b), plogp in wan.items():
        link = f"{clusters[a].name}->{clusters[b].name}"
        links[link] = Link(link, plogp.g_fn)
        routes[(a, b)] = Route(plogp, (link,))
    return Grid(name, tuple(clusters), routes, links)


def check_size(spec: str, nclusters: int, nranks: int) -> None:
    """Refuse, before building anything, a grid beyond :mod:`gridcoll.limits`."""
    if nclusters > MAX_CLUSTERS:
        raise GridError(f"{spec} has {nclusters} clusters; at most {MAX_CLUSTERS} are supported")
    if nranks > MAX_RANKS:
        raise GridError(f"{spec} has {nranks} ranks; at most {MAX_RANKS} are supported")


def magpie(nclusters: int, nranks: int) -> Grid:
    """``magpie:C,N``: seed 000's simulated WAN (10 ms, 1 MB/s per link) over Myrinet."""
    if nclusters < 1 or nranks < 1:
        raise GridError(f"magpie needs C >= 1 clusters and N >= 1 ranks, got {nclusters},{nranks}")
    check_size(f"magpie:{nclusters},{nranks}", nclusters, nclusters * nranks)
    lan = lan_plogp()
    wan = wan_plogp(10e-3, 1e6, lan)
    clusters = [Cluster(f"c{i}", nranks, lan) for i in range(nclusters)]
    pairs = {(a, b): wan for a in range(nclusters) for b in range(nclusters) if a != b}
    return _pair_grid(f"magpie:{nclusters},{nranks}", clusters, pairs)


DAS2_SITES = ("VU", "Leiden", "UvA", "Delft")
"""The four DAS clusters of seed 000, Table 2, in its order."""

DAS2_LATENCY_MS = (
    (0.0, 3.5, 1.5, 2.5),
    (3.5, 0.0, 3.0, 4.0),
    (1.5, 3.0, 0.0, 2.0),
    (2.5, 4.0, 2.0, 0.0),
)
"""Seed 000, Table 2: one-way latency in ms, from row to column."""

DAS2_BANDWIDTH_MBIT = (
    (0.0, 5.0, 26.0, 7.0),
    (3.5, 0.0, 4.0, 3.0),
    (28.0, 6.0, 0.0, 7.5),
    (6.0, 4.5, 6.5, 0.0),
)
"""Seed 000, Table 2: TCP bandwidth in Mb/s, from row to column (asymmetric)."""


def das2(nranks: int) -> Grid:
    """``das2:N``: the four DAS clusters with both of seed 000's Table 2 matrices.

    The DAS links are short (up to 50 km), so "the sender can transmit messages larger
    than 64KB without stalling" (seed 000, sec. 4): the flow-control stall starts at
    128 KiB and rendezvous at 256 KiB.
    """
    if nranks < 1:
        raise GridError(f"das2 needs N >= 1 ranks per cluster, got {nranks}")
    check_size(f"das2:{nranks}", 4, 4 * nranks)
    return _das2_grid(f"das2:{nranks}", [nranks] * 4)


def das2_spread(nranks: int, nclusters: int) -> Grid:
    """``das2-spread:P,C``: P ranks over the first C of the four DAS clusters.

    Seed 004 runs its experiments on "128 to 201 real processors distributed over 3 or
    4 clusters" (sec. V) with RTTs of "several hundred microseconds within a cluster
    and several milliseconds between clusters"; the paper does not give its clusters'
    sizes or links, so these grids take :func:`das2`'s clusters and Table 2 links and
    spread the ranks evenly: cluster ``i`` gets ``P // C`` ranks, plus one for
    ``i < P % C``. Fig. 6 is ``das2-spread:201,3`` (67 each), fig. 7 ``:137,4``
    (35, 34, 34, 34), fig. 8 ``:128,3`` (43, 43, 42), fig. 9 ``:160,4``.
    """
    if not 2 <= nclusters <= 4:
        raise GridError(f"das2-spread needs C in 2..4 DAS clusters, got {nclusters}")
    if nranks < nclusters:
        raise GridError(
            f"das2-spread needs P >= C (one rank per cluster at least), got {nranks},{nclusters}"
        )
    check_size(f"das2-spread:{nranks},{nclusters}", nclusters, nranks)
    base, extra = divmod(nranks, nclusters)
    sizes = [base + (i < extra) for i in range(nclusters)]
    return _das2_grid(f"das2-spread:{nranks},{nclusters}", sizes)


def _das2_grid(name: str, sizes: list[int]) -> Grid:
    """The first ``len(sizes)`` DAS clusters with these ranks, Table 2's links."""
    lan = lan_plogp()
    n = len(sizes)
    clusters = [Cluster(site, size, lan) for site, size in zip(DAS2_SITES, sizes, strict=False)]
    wan = {
        (a, b): wan_plogp(
            DAS2_LATENCY_MS[a][b] * 1e-3,
            DAS2_BANDWIDTH_MBIT[a][b] * 1e6 / 8,
            lan,
            eager_limit=128 * KiB,
            rendezvous_limit=256 * KiB,
        )
        for a in range(n)
        for b in range(n)
        if a != b
    }
    return _pair_grid(name, clusters, wan)


TERAGRID_SITES = ("SDSC", "ANL", "NCSA", "PSC")
TERAGRID_SITE_ACCESS_MBIT = {"SDSC": 40.0, "ANL": 30.0, "NCSA": 40.0, "PSC": 20.0}
"""Access bandwidth of each site to the backbone (Mb/s, each direction); our choice."""
TERAGRID_SITE_LATENCY_MS = {
    ("SDSC", "ANL"): 28.0,
    ("SDSC", "NCSA"): 30.0,
    ("SDSC", "PSC"): 35.0,
    ("ANL", "NCSA"): 5.0,
    ("ANL", "PSC"): 12.0,
    ("NCSA", "PSC"): 14.0,
}
"""One-way latency between sites (ms), roughly their geographic distance; our choice."""


def teragrid() -> Grid:
    """``teragrid``: seed 001's emulated TeraGrid (sec. 3, figure 6).

    4 sites (SDSC, ANL, NCSA, PSC), 8 clusters C1..C8 of 8 nodes (64 nodes), 100 Mb/s
    inside clusters (as the paper states). The paper's figure labels are not in its
    text, so the WAN is our choice in its spirit: each cluster reaches its site router
    over a 100 Mb/s, 0.5 ms cluster link; each site reaches the backbone over an access
    link of 20-40 Mb/s (:data:`TERAGRID_SITE_ACCESS_MBIT`) that all its clusters share;
    sites are 5-35 ms apart (:data:`TERAGRID_SITE_LATENCY_MS`).
    """
    lan = lan_plogp(latency=100e-6, bandwidth=100e6 / 8)
    clusters = []
    for i in range(8):
        site = TERAGRID_SITES[i // 2]
        clusters.append(Cluster(f"C{i + 1}", 8, lan, site))
    links: dict[str, Link] = {}

    def link(name: str, mbit: float) -> str:
        links[name] = Link(name, _link_gap(mbit * 1e6 / 8))
        return name

    routes = {}
    for a, ca in enumerate(clusters):
        for b, cb in enumerate(clusters):
            if a == b:
                continue
            path = [link(f"{ca.name}:up", 100.0)]
            latency, bw = 1e-3, 100.0
            if ca.site != cb.site:
                key = tuple(sorted((ca.site, cb.site), key=TERAGRID_SITES.index))
                path += [
                    link(f"{ca.site}:up", TERAGRID_SITE_ACCESS_MBIT[ca.site]),
                    link(f"{cb.site}:down", TERAGRID_SITE_ACCESS_MBIT[cb.site]),
                ]
                latency += TERAGRID_SITE_LATENCY_MS[key] * 1e-3
                bw = min(TERAGRID_SITE_ACCESS_MBIT[ca.site], TERAGRID_SITE_ACCESS_MBIT[cb.site])
            path.append(link(f"{cb.name}:down", 100.0))
            routes[(a, b)] = Route(wan_plogp(latency, bw * 1e6 / 8, lan), tuple(path))
    return Grid("teragrid", tuple(clusters), routes, links)


def transit_stub(nnodes: int, seed: int) -> Grid:
    """``transit-stub:N,SEED``: a random WAN in the style of seed 003's GT-ITM set-up.

    ``max(2, N // 8)`` transit routers form a connected random graph (links 10-100 ms,
    10 Mb/s). Each of the N grid nodes (single-rank clusters) hangs off a random transit
    router by a stub link with log-uniform latency in 10-300 ms and bandwidth in
    10 Kb/s-10 Mb/s. A message crosses the sender's stub uplink, the transit links of the
    least-latency path, and the receiver's stub downlink, so routes that share transit
    links contend. End-to-end latencies fall in seed 003's 10-1000 ms range.
    """
    if nnodes < 2:
        raise GridError(f"transit-stub needs N >= 2 nodes, got {nnodes}")
    check_size(f"transit-stub:{nnodes},{seed}", nnodes, nnodes)
    import networkx as nx  # slow to import; only this preset needs it

    rng = random.Random(seed)
    ntransit = max(2, nnodes // 8)
    backbone = (
        nx.connected_watts_strogatz_graph(ntransit, min(2, ntransit - 1), 0.3, seed=seed)
        if ntransit > 2
        else nx.path_graph(ntransit)
    )
    for u, v in backbone.edges:
        backbone.edges[u, v]["latency"] = rng.uniform(10e-3, 100e-3)

    def log_uniform(lo: float, hi: float) -> float:
        return math.exp(rng.uniform(math.log(lo), math.log(hi)))

    lan = lan_plogp()
    attach, stub_latency, stub_bw = [], [], []
    for _ in range(nnodes):
        attach.append(rng.randrange(ntransit))
        stub_latency.append(log_uniform(10e-3, 300e-3))
        stub_bw.append(log_uniform(10e3 / 8, 10e6 / 8))
    clusters = tuple(Cluster(f"n{i}", 1, lan) for i in range(nnodes))
    links: dict[str, Link] = {}
    for i in range(nnodes):
        for direction in ("up", "down"):
            links[f"n{i}:{direction}"] = Link(f"n{i}:{direction}", _link_gap(stub_bw[i]))
    transit_bw = 10e6 / 8
    for u, v in backbone.edges:
        for x, y in ((u, v), (v, u)):
            links[f"t{x}->t{y}"] = Link(f"t{x}->t{y}", _link_gap(transit_bw))
    paths = dict(nx.all_pairs_dijkstra_path(backbone, weight="latency"))
    routes = {}
    for a in range(nnodes):
        for b in range(nnodes):
            if a == b:
                continue
            hops = paths[attach[a]][attach[b]]
            names = [f"n{a}:up"] + [f"t{x}->t{y}" for x, y in itertools.pairwise(hops)]
            names.append(f"n{b}:down")
            latency = (
                stub_latency[a]
                + stub_latency[b]
                + sum(backbone.edges[x, y]["latency"] for x, y in itertools.pairwise(hops))
            )
            bw = min(stub_bw[a], stub_bw[b], transit_bw)
            routes[(a, b)] = Route(
                wan_plogp(latency, bw, lan, eager_limit=64 * KiB, rendezvous_limit=128 * KiB),
                tuple(names),
            )
    return Grid(f"transit-stub:{nnodes},{seed}", clusters, routes, links)


def lan(nranks: int) -> Grid:
    """``lan:N``: one cluster of N ranks on the MagPIe LAN (a single-layer network)."""
    if nranks < 1:
        raise GridError(f"lan needs N >= 1 ranks, got {nranks}")
    check_size(f"lan:{nranks}", 1, nranks)
    return Grid(f"lan:{nranks}", (Cluster("lan", nranks, lan_plogp()),))


PRESETS = {
    "magpie": (magpie, 2, "magpie:C,N"),
    "das2": (das2, 1, "das2:N"),
    "das2-spread": (das2_spread, 2, "das2-spread:P,C"),
    "teragrid": (teragrid, 0, "teragrid"),
    "transit-stub": (transit_stub, 2, "transit-stub:N,SEED"),
    "lan": (lan, 1, "lan:N"),
}
"""Preset name -> (constructor, number of integer arguments, usage)."""


def get_grid(spec: str | Path | Grid) -> Grid:
    """A grid from a preset name (``magpie:8,1``) or a grid file path.

    A preset name may end with ``+fair`` (or ``+fifo``, the presets' own mode): every
    link of the preset then shares its capacity that way (:meth:`Grid.with_link_sharing`;
    ``teragrid+fair``, ``magpie:8,1+fair``). A grid file says it with ``link_sharing``.
    """
    if isinstance(spec, Grid):
        return spec
    text = str(spec)
    match = re.fullmatch(r"([a-z0-9-]+)(?::([0-9,\s]*))?(?:\+(fifo|fair))?", text)
    if match and match.group(1) in PRESETS and match.group(3) and not os.path.lexists(text):
        base = text[: match.start(3) - 1]
        return get_grid(base).with_link_sharing(match.group(3))
    if match and match.group(1) in PRESETS:
        build, nargs, usage = PRESETS[match.group(1)]
        raw = match.group(2)
        args = [a for a in (raw or "").split(",") if a.strip()]
        if len(args) != nargs or not all(a.strip().isdigit() and len(a) < 10 for a in args):
            raise GridError(
                f"preset {text!r} needs {nargs} integer argument(s) of at most 9 digits: "
                f"use {usage}"
            )
        return build(*(int(a) for a in args))
    if os.path.lexists(text):
        return load_grid(text)
    known = ", ".join(usage for _, _, usage in PRESETS.values())
    raise GridError(
        f"unknown grid {text!r}: not a preset ({known}; each may end with +fair) nor a grid file"
    )
