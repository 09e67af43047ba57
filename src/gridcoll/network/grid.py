"""The grid: clusters of ranks joined by wide-area links.

The structure is seed 000's figure 1 (clusters with fully connected LANs, one gateway
per cluster, a WAN between the gateways), generalised so that real sites can be
described too:

* each cluster has ranks and one LAN P-LogP table;
* each ordered pair of clusters ``(A, B)`` has a :class:`Route`: the end-to-end P-LogP
  parameters a message from A to B sees (``L_w``, ``os_w``, ``or_w``, ``g_w``; they may
  differ from B to A), and the names of the shared :class:`Link` resources it crosses;
* a link carries one message at a time, for ``g_link(m)`` (``sharing="fifo"``, the
  default), or divides its capacity max-min fairly among the messages crossing it at
  once (``sharing="fair"``, as concurrent TCP flows share a bottleneck; the simulator's
  rules are in :mod:`gridcoll.simulate.executor`). With one private link per route
  ("pair links") every pair of clusters has its own wire; with per-site access links
  all of a site's traffic shares its uplink and downlink.

A message from rank a in cluster A to rank b in cluster B travels
``a -> gateway(A) -> link(s) -> gateway(B) -> b`` (seed 000, sec. 2.1); :meth:`Grid.path`
names the resources it occupies, which is what the simulator and the WAN emulator
serialise on.
"""

from __future__ import annotations

import fnmatch
import hashlib
import math
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property

import numpy as np

from gridcoll.errors import GridError, ParameterError
from gridcoll.memo import Memo
from gridcoll.network.plogp import PiecewiseBatch, PiecewiseLinear, PLogP

__all__ = [
    "FAIR",
    "FIFO",
    "SHARING_MODES",
    "Cluster",
    "Grid",
    "Link",
    "Route",
    "RouteBatch",
    "host_pattern",
    "place_by_host",
    "placement_summary",
]


@dataclass(frozen=True, slots=True)
class Cluster:
    """A cluster: ``nranks`` processes on one LAN with parameters ``lan``.

    ``hosts``: glob patterns (:mod:`fnmatch`, case-insensitive) of the host names its
    ranks run on, for :func:`place_by_host`; empty when ranks are placed by number.
    """

    name: str
    nranks: int
    lan: PLogP
    site: str = ""
    hosts: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.nranks < 1:
            raise GridError(
                f"cluster {self.name!r} must have at least one rank, not {self.nranks!r}"
            )


FIFO = "fifo"
"""Sharing mode: a resource carries one message at a time, first come first served."""
FAIR = "fair"
"""Sharing mode: a link divides its capacity max-min fairly among the messages on it."""
SHARING_MODES = (FIFO, FAIR)
"""The sharing modes a :class:`Link` accepts."""


@dataclass(frozen=True, slots=True)
class Link:
    """A shared wide-area resource, busy ``g(m)`` per message of ``m`` bytes.

    ``sharing`` says how it serves messages that cross it at once: ``"fifo"`` (the
    default) one at a time in the order their heads reach it; ``"fair"`` all together,
    each at its max-min fair share of the capacity (Bertsekas & Gallager, *Data
    Networks*, sec. 6.5.2). NICs and gateways are always FIFO: their gap ``g_l`` is
    P-LogP's least interval between two messages of one host (seed 000, sec. 2.1), a
    serial cost that ``s_w = max(g_l, os_w)`` and every closed-form model rely on.
    """

    name: str
    g: PiecewiseLinear
    sharing: str = FIFO

    def __post_init__(self) -> None:
        if self.sharing not in SHARING_MODES:
            raise GridError(
                f"link {self.name!r}: sharing must be one of {', '.join(SHARING_MODES)}, "
                f"got {self.sharing!r:.80}"
            )

    @property
    def bandwidth(self) -> float:
        """Asymptotic capacity in bytes/s (``1/slope`` of ``g``)."""
        slope = self.g.slope
        return 1.0 / slope if slope > 0 else float("inf")


@dataclass(frozen=True, slots=True)
class Route:
    """How messages go from one cluster to another: end-to-end P-LogP and links crossed."""

    plogp: PLogP
    links: tuple[str, ...]


@dataclass(frozen=True, eq=False)
class RouteBatch:
    """Every route's P-LogP parameters, batched: ``g(m)``, ``os(m)``, ``or_(m)`` return
    one array over the routes (in ``Grid.routes`` order, bit for bit the routes' own
    values; :class:`~gridcoll.network.plogp.PiecewiseBatch`). Per-size tables over the
    C(C-1) routes of many-cluster grids cost a few numpy operations, not C^2 calls."""

    src: np.ndarray
    """The sending cluster of each route."""
    dst: np.ndarray
    """The receiving cluster of each route."""
    latency: np.ndarray
    g: PiecewiseBatch
    os: PiecewiseBatch
    or_: PiecewiseBatch


@dataclass(frozen=True)
class Grid:
    """A multi-cluster system.

    Parameters
    ----------
    name : str
        A label (the preset name or file name).
    clusters : tuple of Cluster
        The clusters, in order. Cluster ``i`` is also called cluster index ``i``.
    routes : mapping (i, j) -> Route
        One route for every ordered pair of distinct clusters.
    links : mapping name -> Link
        Every link a route names.
    placement : tuple of int, optional
        The cluster index of each rank. Default: ranks are numbered cluster by cluster
        (the first ``clusters[0].nranks`` ranks are in cluster 0, and so on). A grid
        whose clusters name ``hosts`` has none: :func:`place_by_host` sets it from the
        hosts the ranks run on (every cluster names hosts, or none does; no host name
        written out matches two clusters' patterns).
    """

    name: str
    clusters: tuple[Cluster, ...]
    routes: Mapping[tuple[int, int], Route] = field(default_factory=dict)
    links: Mapping[str, Link] = field(default_factory=dict)
    placement: tuple[int, ...] | None = None

    def __post_init__(self) -> None:
        if not self.clusters:
            raise GridError("a grid needs at least one cluster")
        names = [c.name for c in self.clusters]
        if len(set(names)) != len(names):
            raise GridError(f"cluster names must be unique, got {names!r}")
        n = len(self.clusters)
        for i in range(n):
            for j in range(n):
                if i != j and (i, j) not in self.routes:
                    raise GridError(f"no route from cluster {names[i]!r} to cluster {names[j]!r}")
        for (i, j), route in self.routes.items():
            if not (0 <= i < n and 0 <= j < n) or i == j:
                raise GridError(f"route ({i!r}, {j!r}) does not join two distinct clusters")
            for link in route.links:
                if link not in self.links:
                    raise GridError(
                        f"route {names[i]!r} -> {names[j]!r} crosses unknown link {link!r}"
                    )
        placed_by_host = [bool(c.hosts) for c in self.clusters]
        if any(placed_by_host):
            if not all(placed_by_host):
                bare = names[placed_by_host.index(False)]
                raise GridError(
                    f"cluster {bare!r} names no 'hosts' while others do: with placement by "
                    "host every cluster names its hosts"
                )
            if self.placement is not None:
                raise GridError(
                    "a grid places its ranks by host ('hosts' of every cluster) or by "
                    "number ('placement'), not both"
                )
            _check_hosts(self.clusters)
        if self.placement is not None:
            counts = [0] * n
            for rank, c in enumerate(self.placement):
                if not 0 <= c < n:
                    raise GridError(f"rank {rank} is placed in unknown cluster index {c!r}")
                counts[c] += 1
            for cluster, count in zip(self.clusters, counts, strict=True):
                if count != cluster.nranks:
                    raise GridError(
                        f"placement puts {count} ranks in cluster {cluster.name!r}, "
                        f"which declares {cluster.nranks}"
                    )

    @cached_property
    def memo(self) -> Memo:
        """This grid's memo of derived values (:mod:`gridcoll.memo`): every layer keeps
        its bounded tables here; ``grid.memo.sizes()`` shows them, ``.clear()`` drops them."""
        return Memo()

    # -- ranks and clusters ------------------------------------------------------------
    @cached_property
    def route_batch(self) -> RouteBatch:
        """The routes' :class:`RouteBatch` (computed once per grid object)."""
        pairs = np.array(list(self.routes), dtype=int).reshape(-1, 2)
        nets = [route.plogp for route in self.routes.values()]
        return RouteBatch(
            pairs[:, 0],
            pairs[:, 1],
            np.array([net.L for net in nets]),
            PiecewiseBatch([net.g_fn for net in nets]),
            PiecewiseBatch([net.os_fn for net in nets]),
            PiecewiseBatch([net.or_fn for net in nets]),
        )

    @cached_property
    def nranks(self) -> int:
        """Total number of ranks ``P``."""
        return sum(c.nranks for c in self.clusters)

    @property
    def nclusters(self) -> int:
        """Number of clusters ``P_w``."""
        return len(self.clusters)

    @cached_property
    def cluster_of(self) -> tuple[int, ...]:
        """The cluster index of every rank."""
        if self.placement is not None:
            return tuple(self.placement)
        return tuple(i for i, c in enumerate(self.clusters) for _ in range(c.nranks))

    @cached_property
    def members(self) -> tuple[tuple[int, ...], ...]:
        """The ranks of every cluster, in increasing order."""
        out: list[list[int]] = [[] for _ in self.clusters]
        for rank, c in enumerate(self.cluster_of):
            out[c].append(rank)
        return tuple(tuple(ranks) for ranks in out)

    def coordinators(self, root: int) -> tuple[int, ...]:
        """One coordinator per cluster: ``root`` in its own cluster, else the lowest rank.

        This is MagPIe's choice (seed 000, sec. 3.1): "the root process acts as
        coordinator of its own cluster".
        """
        self.check_rank(root, "root")
        root_cluster = self.cluster_of[root]
        return tuple(
            root if i == root_cluster else ranks[0] for i, ranks in enumerate(self.members)
        )

    def check_rank(self, rank: int, what: str = "rank") -> int:
        """Return ``rank`` if it is a rank of this grid, else raise ParameterError."""
        if not isinstance(rank, int) or isinstance(rank, bool) or not 0 <= rank < self.nranks:
            raise ParameterError(
                f"{what} {rank!r} is out of range for grid {self.name!r} with "
                f"{self.nranks} ranks (0..{self.nranks - 1})"
            )
        return rank

    # -- parameters between ranks ------------------------------------------------------
    def plogp(self, a: int, b: int) -> PLogP:
        """The P-LogP parameters of messages from rank a to rank b."""
        ca, cb = self.cluster_of[a], self.cluster_of[b]
        if ca == cb:
            return self.clusters[ca].lan
        return self.routes[(ca, cb)].plogp

    def lan(self, rank: int) -> PLogP:
        """The LAN parameters of ``rank``'s cluster."""
        return self.clusters[self.cluster_of[rank]].lan

    def wan(self, ca: int, cb: int) -> PLogP:
        """The P-LogP parameters of the route from cluster ``ca`` to cluster ``cb``."""
        return self.routes[(ca, cb)].plogp

    def path(self, a: int, b: int) -> tuple[tuple[str, int | str], ...]:
        """The shared resources a message from rank a to rank b occupies, in order.

        Inside a cluster: the sender's NIC out, the receiver's NIC in. Across clusters:
        the sender's NIC out, its gateway's LAN side, each wide-area link of the route,
        the remote gateway's LAN side, the receiver's NIC in. Each resource is a pair
        ``(kind, key)`` with kind one of ``nic_out``, ``gw_out``, ``link``, ``gw_in``,
        ``nic_in``.
        """
        ca, cb = self.cluster_of[a], self.cluster_of[b]
        if ca == cb:
            return (("nic_out", a), ("nic_in", b))
        links = tuple(("link", name) for name in self.routes[(ca, cb)].links)
        return (("nic_out", a), ("gw_out", ca), *links, ("gw_in", cb), ("nic_in", b))

    def is_fair(self, resource: tuple[str, int | str]) -> bool:
        """True if ``resource`` (a pair of :meth:`path`) shares its capacity fairly:
        a ``link`` whose :attr:`Link.sharing` is ``"fair"``. NICs and gateways never do."""
        kind, key = resource
        return kind == "link" and self.links[key].sharing == FAIR

    @cached_property
    def fair_links(self) -> frozenset[str]:
        """The names of the links that share fairly (empty: the grid is all FIFO)."""
        return frozenset(name for name, link in self.links.items() if link.sharing == FAIR)

    @property
    def is_single_cluster(self) -> bool:
        """True when all ranks share one LAN (a single-layer network)."""
        return len(self.clusters) == 1

    @cached_property
    def fingerprint(self) -> str:
        """A short hash of the full description, for caches keyed on the grid (every
        field's exact ``repr``, routes and links in sorted order, each fair link's
        sharing: the same on every process that builds the same grid)."""
        texts: dict[int, str] = {}  # presets share one PLogP among many routes

        def text(x: object) -> str:
            found = texts.get(id(x))
            if found is None:
                found = texts[id(x)] = repr(x)
            return found

        digest = hashlib.sha1(repr((self.name, self.placement, self.clusters)).encode())
        for key, route in sorted(self.routes.items()):
            digest.update(f"{key}{text(route.plogp)}{route.links}".encode())
        for name, link in sorted(self.links.items()):
            # A FIFO link hashes as before sharing modes existed: old fingerprints hold.
            shared = "" if link.sharing == FIFO else f"sharing={link.sharing}"
            digest.update(f"{name!r}{text(link.g)}{shared}".encode())
        return digest.hexdigest()[:16]

    def with_link_sharing(self, mode: str, links: Sequence[str] | None = None) -> Grid:
        """A copy whose links (every one, or those named in ``links``) share by ``mode``
        (``"fifo"`` or ``"fair"``). The name gets a ``+fair`` suffix when every link is
        made fair (``magpie:8,1+fair``, what :func:`~gridcoll.network.get_grid`
        accepts), ``+<mode>-links`` when only some are set, and loses such a suffix
        when every link is made FIFO again (the original grid, fingerprint included).
        The fingerprint says which links share fairly, so plans never mix. A grid
        already in that state is returned as is."""
        if mode not in SHARING_MODES:
            raise GridError(f"sharing must be one of {', '.join(SHARING_MODES)}, got {mode!r:.80}")
        chosen = set(self.links) if links is None else set(links)
        unknown = sorted(chosen - set(self.links))
        if unknown:
            raise GridError(f"grid {self.name!r} has no link {unknown[0]!r:.80}")
        if all(self.links[name].sharing == mode for name in chosen):
            return self
        new = {
            name: replace(link, sharing=mode) if name in chosen else link
            for name, link in self.links.items()
        }
        base = re.sub(r"\+(fifo|fair)(-links)?$", "", self.name)
        if links is not None:
            name = f"{base}+{mode}-links"
        else:
            name = base if mode == FIFO else f"{base}+{mode}"
        return Grid(name, self.clusters, self.routes, new, self.placement)

    def with_host_overhead(self, seconds: float, receive: float | None = None) -> Grid:
        """The grid as a software layer with a per-message host cost sees it.

        Every cluster's LAN and every route get :meth:`PLogP.with_overhead`
        (``seconds`` more send overhead per message, ``receive`` - default ``seconds`` -
        more receive overhead, the gap raised to cover them); the shared wide-area
        :class:`Link` resources keep their occupancy (a wire does not slow down because
        the hosts are slow). The name gets a ``+host<us>us`` suffix and the fingerprint
        changes, so plans made for the physical grid are never reused for this one.
        ``seconds == receive == 0`` returns the grid itself.

        This is how :mod:`gridcoll.runtime` plans on the grid it actually runs on: the
        presets' LAN costs Myrinet's 4 us per message, the Python runtime tens of
        microseconds (:func:`gridcoll.runtime.host.default_host_overhead`).
        """
        receive = seconds if receive is None else receive
        if seconds == 0 and receive == 0:
            return self
        clusters = tuple(
            Cluster(c.name, c.nranks, c.lan.with_overhead(seconds, receive), c.site)
            for c in self.clusters
        )
        routes = {
            key: Route(r.plogp.with_overhead(seconds, receive), r.links)
            for key, r in self.routes.items()
        }
        label = (
            f"{seconds * 1e6:g}us"
            if receive == seconds
            else (f"{seconds * 1e6:g}us/{receive * 1e6:g}us")
        )
        return Grid(f"{self.name}+host{label}", clusters, routes, dict(self.links), self.placement)

    def with_links_scaled(self, factor: float, cluster: int) -> Grid:
        """A copy where the routes to and from ``cluster``, and the links only they cross,
        have their bandwidth multiplied by ``factor`` (0 < factor <= 1: background load,
        as on seed 001's loaded TeraGrid links)."""
        if not 0 < factor <= 1:
            raise ParameterError(f"load factor must be in (0, 1], got {factor!r}")
        involved = {
            name for (i, j), r in self.routes.items() if cluster in (i, j) for name in r.links
        }
        shared = {
            name for (i, j), r in self.routes.items() if cluster not in (i, j) for name in r.links
        }
        loaded = involved - shared  # links that only this cluster's traffic crosses
        routes = {
            (i, j): Route(r.plogp.scaled_bandwidth(factor), r.links) if cluster in (i, j) else r
            for (i, j), r in self.routes.items()
        }
        links = {
            name: replace(link, g=link.g.scaled(1.0 / factor)) if name in loaded else link
            for name, link in self.links.items()
        }
        return Grid(f"{self.name}+load", self.clusters, routes, links, self.placement)

    def with_link_load(self, load: Mapping[str, float]) -> Grid:
        """The grid as cross traffic leaves it: link ``l`` keeps ``1 - load[l]`` of its
        bandwidth (its ``g`` times ``1/(1 - f)``, the rate at which
        :func:`~gridcoll.network.load.occupancy_end` serves it), and every route
        crossing a loaded link has ``g = max(g_route, g_link')``: a route slows down
        only where a loaded link becomes its bottleneck (a 50% load on a 100 Mb/s
        cluster link behind a 20 Mb/s site link changes nothing). What the network
        monitor forecasts (:mod:`gridcoll.adapt.monitor`), as a grid to plan on; the
        name gets ``+view``, the fingerprint the loads. Loads of 0 are ignored; an
        empty or all-zero ``load`` returns the grid itself. Memoised in ``memo``
        (table ``link_load``): one load, one grid object, whose own memo keeps the
        trees and tables planned on it."""
        key = tuple(sorted((name, f) for name, f in load.items() if f))
        if not key:
            return self
        return self.memo.get("link_load", key, lambda: self._with_link_load(dict(key)), 64)

    def _with_link_load(self, load: Mapping[str, float]) -> Grid:
        unknown = sorted(set(load) - set(self.links))
        if unknown:
            raise GridError(f"grid {self.name!r} has no link {unknown[0]!r:.80}")
        for name, f in load.items():
            if not (math.isfinite(f) and 0 <= f < 1):
                raise ParameterError(f"load on link {name!r} must be in [0, 1), got {f!r}")
        scaled = {name: self.links[name].g.scaled(1.0 / (1.0 - f)) for name, f in load.items() if f}
        if not scaled:
            return self
        links = {
            name: replace(link, g=scaled[name]) if name in scaled else link
            for name, link in self.links.items()
        }
        routes = {}
        for key, route in self.routes.items():
            g = route.plogp.g_fn
            for name in route.links:
                if name in scaled:
                    g = g.maximum(scaled[name])
            plogp = route.plogp if g is route.plogp.g_fn else replace(route.plogp, g_fn=g)
            routes[key] = Route(plogp, route.links)
        base = re.sub(r"\+view$", "", self.name)
        return Grid(f"{base}+view", self.clusters, routes, links, self.placement)


# -- placement by host ------------------------------------------------------------------

_GLOB = frozenset("*?[")


def host_pattern(*patterns: str) -> re.Pattern[str]:
    """The compiled form of host patterns (any of them): :func:`fnmatch.translate` of
    their lower case (host names are case-insensitive, RFC 4343), to ``fullmatch`` a
    lower-cased name. ``*``, ``?`` and ``[seq]`` are the only special characters."""
    return re.compile("|".join(f"(?:{fnmatch.translate(p.lower())})" for p in patterns))


def _is_literal(pattern: str) -> bool:
    return not _GLOB & set(pattern)


def _check_hosts(clusters: Sequence[Cluster]) -> None:
    """Refuse patterns that place one host in two clusters as written: a pattern given
    twice, or a plain host name that another cluster's pattern matches. (Two globs may
    still both match a host the job runs on: :func:`place_by_host` refuses that.)"""
    owner: dict[str, int] = {}
    for c, cluster in enumerate(clusters):
        for pattern in cluster.hosts:
            low = pattern.lower()
            if low in owner:
                first = clusters[owner[low]].name
                where = (
                    f"in cluster {first!r}"
                    if owner[low] == c
                    else f"(clusters {first!r} and {cluster.name!r})"
                )
                raise GridError(f"host pattern {pattern!r} is given twice {where}")
            owner[low] = c
    globs = [
        (c, p, host_pattern(p))
        for c, cl in enumerate(clusters)
        for p in cl.hosts
        if not _is_literal(p)
    ]
    for c, cluster in enumerate(clusters):
        for name in (p for p in cluster.hosts if _is_literal(p)):
            for k, text, pattern in globs:
                if k != c and pattern.fullmatch(name.lower()):
                    raise GridError(
                        f"host {name!r} of cluster {cluster.name!r} also matches pattern "
                        f"{text!r} of cluster {clusters[k].name!r}: a host belongs to one "
                        "cluster"
                    )


def _shown(names: Sequence[str], most: int = 4) -> str:
    """``'a', 'b', 'c'`` or ``'a', 'b', ... (9 in all)``."""
    head = ", ".join(repr(n) for n in names[:most])
    return head if len(names) <= most else f"{head}, ... ({len(names)} in all)"


def _cluster_of_host(grid: Grid, host: str, compiled: list[re.Pattern[str]]) -> int | None:
    """The one cluster whose patterns (``compiled``: one regex per cluster) match
    ``host``; None if none; GridError naming both patterns if two clusters' do."""
    low = host.lower()
    found = [c for c, pattern in enumerate(compiled) if pattern.fullmatch(low)]
    if len(found) > 1:
        a, b = found[:2]
        pa, pb = (
            next(p for p in grid.clusters[c].hosts if host_pattern(p).fullmatch(low))
            for c in (a, b)
        )
        raise GridError(
            f"host {host!r:.80} matches cluster {grid.clusters[a].name!r} (pattern {pa!r}) "
            f"and cluster {grid.clusters[b].name!r} (pattern {pb!r}): a host belongs to one "
            "cluster"
        )
    return found[0] if found else None


def place_by_host(grid: Grid, names: Sequence[str]) -> Grid:
    """``grid`` with its ranks placed by the host each runs on.

    Parameters
    ----------
    grid : Grid
        A grid whose clusters name their ``hosts`` (glob patterns, :func:`host_pattern`).
    names : sequence of str
        The host (``MPI.Get_processor_name()``) of every rank, in rank order.

    Returns
    -------
    Grid
        The same grid with ``placement`` set (rank ``r`` in the cluster whose patterns
        match ``names[r]``) and the patterns dropped: they have done their work, and the
        placement is the one fact a plan depends on (``save_grid`` writes it).

    Raises
    ------
    GridError
        One line: the grid places no cluster by host; ``names`` has not one name per
        rank; a host matches the patterns of two clusters; a rank's host matches none;
        a cluster's declared ``ranks`` differs from the ranks found on its hosts (the
        declared sizes are checked, never redefined).

    Notes
    -----
    Each distinct host is matched once against each cluster's patterns (one regular
    expression per cluster): O(H * C) matches for H hosts and C clusters, then O(P) to
    place the ranks.
    """
    if not all(c.hosts for c in grid.clusters):
        raise GridError(f"grid {grid.name!r} does not place its ranks by host (no 'hosts')")
    if len(names) != grid.nranks:
        raise GridError(
            f"{len(names)} host names for grid {grid.name!r} of {grid.nranks} ranks: one per rank"
        )
    compiled = [host_pattern(*c.hosts) for c in grid.clusters]
    of_host: dict[str, int | None] = {}
    placement = []
    for rank, host in enumerate(names):
        if host not in of_host:
            of_host[host] = _cluster_of_host(grid, host, compiled)
        cluster = of_host[host]
        if cluster is None:
            raise GridError(
                f"rank {rank} runs on host {host!r:.80}, which matches no cluster's "
                f"'hosts' (clusters {_shown([c.name for c in grid.clusters])})"
            )
        placement.append(cluster)
    counts = Counter(placement)
    for c, cluster in enumerate(grid.clusters):
        found = counts[c]
        if found != cluster.nranks:
            hosts = sorted({h for h, k in of_host.items() if k == c})
            where = _shown(hosts) if hosts else "no host of the job matches them"
            raise GridError(
                f"cluster {cluster.name!r} declares {cluster.nranks} ranks but {found} run "
                f"on hosts matching its patterns ({where}): make 'ranks' match the job"
            )
    clusters = tuple(replace(c, hosts=()) for c in grid.clusters)
    return Grid(grid.name, clusters, grid.routes, grid.links, tuple(placement))


def placement_summary(grid: Grid, names: Sequence[str]) -> str:
    """One line per cluster: its ranks and the hosts they run on (``names[r]`` is rank
    ``r``'s host), e.g. ``cluster 'A': ranks 0-3 on 'node-a1', 'node-a2'``."""
    lines = []
    for c, members in enumerate(grid.members):
        hosts = list(dict.fromkeys(names[r] for r in members))
        lines.append(f"cluster {grid.clusters[c].name!r}: {_ranges(members)} on {_shown(hosts)}")
    return "\n".join(lines)


def _ranges(ranks: Sequence[int]) -> str:
    """``ranks 0-3, 6`` (runs of consecutive ranks)."""
    parts: list[str] = []
    start = prev = None
    for r in [*ranks, None]:
        if prev is not None and r == prev + 1:
            prev = r
            continue
        if start is not None:
            parts.append(f"{start}" if start == prev else f"{start}-{prev}")
        start = prev = r
    word = "rank" if len(ranks) == 1 else "ranks"
    return f"{word} {', '.join(parts)}"
