"""A real multi-site network on one machine: one Linux network namespace per cluster.

Theory of operation
-------------------
gridcoll's WAN emulator (:mod:`gridcoll.runtime.emulation`) holds each wide-area
message in user space for the link's latency and serialisation time. This module builds
the other kind of test bed: the kernel's network stack between the sites, so that every
wide-area byte crosses TCP, a router and a rate shaper for real.

Each cluster of a grid becomes a network namespace with its own host name (a UTS
namespace per rank process, so ``MPI.Get_processor_name()`` names the site). Routers
join them, each a namespace too: one per site of the grid (:attr:`Cluster.site`; a
cluster without one is a site of its own) and a core. Cluster ``i`` is on
``10.213.i.0/24``: its end of a veth pair (``wan0``, ``.2``) in its own namespace, the
other (``c<i>``, ``.1``) in its site router's; site router ``j`` is on
``10.214.j.0/24`` (``uplink``, ``.2``) towards the core (``s<j>``, ``.1``). Ranks of one
cluster talk over the namespace's loopback (unshaped); ranks of two clusters of one site
through the site router; of two sites through the core.

Shaping follows the grid's shared links (:class:`gridcoll.network.grid.Link`), with the
Hierarchical Token Bucket queueing discipline (``htb``), each link on the one interface
all its traffic crosses (:func:`shapers`): a link every route of which leaves one
cluster (a pair link, a cluster's uplink) on that cluster's ``wan0``; one whose routes
all enter one cluster on the site router's ``c<i>``; one whose routes all leave one site
for others on the site router's ``uplink``; one whose routes all enter one site from
others on the core's ``s<j>``. The classes of one interface must nest (a pair link
inside its cluster's uplink); a link shared by routes of unrelated sources and
destinations (a backbone) cannot be placed on one interface and is refused. Each peer
cluster gets a leaf class under the smallest link covering it, a short ``pfifo`` queue
(:data:`QUEUE_S`) and a ``u32`` filter on the peer's subnet; traffic no link covers is
not shaped.

What is not emulated: **latency**. The kernel here has no ``netem``, and ``tbf``/``htb``
only shape rates, so a message's latency on this network is the real stack's (tens of
microseconds through the router, plus MPI's own costs), not the grid's ``L``. The
namespace network is therefore a bandwidth test bed: plan on what P-LogP measures on it
(``gridcoll measure --netns``, ``gridcoll discover --netns``), not on the grid it was
made from. Where latency matters, the emulator is the tool. The LAN is the machine's
loopback, also unshaped. Concurrent messages on one link share it as TCP flows do (about
fairly), not first come first served.

MPI across it: MPICH must not use shared memory between the namespaces (they share one
machine) and must use its TCP path on the site's own interface:
``MPIR_CVAR_NOLOCAL=1``, ``UCX_TLS=tcp`` and ``UCX_NET_DEVICES=wan0`` (UCX netmod), or
``FI_PROVIDER=tcp`` and ``FI_TCP_IFACE=wan0`` (OFI netmod). :func:`rank_prefix` puts
one rank in its namespace with its host name and those settings;
:func:`gridcoll.runtime.processes.mpiexec_command` starts each rank under it.

The set-up is kernel state that outlives the process: :func:`up` records the network in
``/run/gridcoll/netns/NAME.json`` and :func:`down` removes every namespace whose name
starts with ``NAME-`` even if the record is lost. :func:`network` is the context
manager that tests and benchmarks use: up, then down however the block ends.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import re
import shutil
import subprocess
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from gridcoll.errors import GridError, LaunchError
from gridcoll.network.grid import Grid
from gridcoll.network.gridfile import grid_from_dict, grid_to_dict
from gridcoll.network.load import LoadTrace

__all__ = [
    "DEFAULT_NAME",
    "FRAME_PAYLOAD",
    "MPI_ENV",
    "STATE_DIR",
    "Network",
    "Shaper",
    "Site",
    "down",
    "driving",
    "find",
    "load_steps",
    "loaded",
    "network",
    "not_permitted",
    "plan",
    "rank_prefix",
    "shapers",
    "up",
]

DEFAULT_NAME = "gridcoll"
"""Name of a network when none is given: its namespaces are ``gridcoll-0``,
``gridcoll-1``... and ``gridcoll-wan`` (the router)."""

STATE_DIR = Path("/run/gridcoll/netns")
"""Where :func:`up` records each network (``NAME.json``)."""

SUBNET = "10.213.{i}.0/24"
"""Cluster ``i``'s subnet; the router is ``.1`` and the cluster ``.2`` on it."""

SITE_DEVICE = "wan0"
"""A cluster's interface towards its site's router, in its namespace."""

UPLINK_DEVICE = "uplink"
"""A site router's interface towards the core router."""

CLUSTER_NET, SITE_NET = 213, 214
"""Second octets: cluster ``i`` is on ``10.213.i.0/24`` (its site router ``.1``, the
cluster ``.2``), site ``j``'s router on ``10.214.j.0/24`` (the core ``.1``, the site
router ``.2``)."""

MAX_SITES = 250
"""Most clusters a namespace network holds (one ``/24`` each in ``10.213.0.0/16``)."""

MPI_ENV = {
    "MPIR_CVAR_NOLOCAL": "1",
    "UCX_TLS": "tcp",
    "FI_PROVIDER": "tcp",
}
"""MPICH's settings for every rank on a namespace network: no shared memory between
ranks (they share the machine, not a site), TCP for UCX and OFI alike."""

NO_OFFLOAD = ("gso_max_size", "1500", "gso_max_segs", "1")
"""Set on both ends of every veth: no segmentation offload. With it, the kernel hands
``htb`` one packet of up to 64 KiB, which a bucket of one frame lets through at once
(then owes): a 16 KiB probe after a pause crossed a 1 MB/s link at 3.5 MB/s."""

QUEUE_S = 0.015
"""The router's buffer on a shaped link: this many seconds of data at its rate (at
least :data:`QUEUE_MIN` frames), as a shallow-buffered WAN router. A deep queue (the
default 1000 frames, 1.5 s at 1 MB/s) holds the ACKs of an exchange's return traffic
behind data: a 1 MiB allreduce on ``magpie:4,2`` took 1.58x its simulated time with it,
1.05x with 10 frames."""

QUEUE_MIN = 4
"""Fewest frames a shaped link's queue holds."""

LEAF = 1000
"""Class ids of the per-peer leaves: ``LEAF + peer``; links take 1, 2, ..."""

QUANTUM = 1514
"""Bytes an ``htb`` class sends per round when it borrows (one Ethernet frame)."""

FRAME_PAYLOAD = 1448 / 1514
"""Of a shaped link's rate, the share that is TCP payload: the shaper counts whole
frames (1514 bytes) and a segment carries 1448 (MSS with timestamps). It is what P-LogP
and discovery measure on the link."""

_NAME = re.compile(r"^[a-z][a-z0-9]{0,11}$")
_HOST = re.compile(r"[^A-Za-z0-9-]+")


@dataclass(frozen=True, slots=True)
class Site:
    """Cluster ``cluster`` of the grid as a namespace: its host name, its address on
    ``wan0``, and its site's router (``router``, where it is ``router_device``)."""

    cluster: int
    namespace: str
    host: str
    address: str
    router: str
    router_device: str
    device: str = SITE_DEVICE


@dataclass(frozen=True, slots=True)
class Shaper:
    """One ``htb`` class on ``device`` of ``namespace``, under ``parent`` (0: the
    root), for grid link ``link``: at most ``ceil`` bits/s, ``rate`` of them guaranteed
    (``htb`` lends the rest among siblings); ``peers`` are the clusters whose traffic
    it carries, matched on ``match`` (``dst`` or ``src``) address. A class id of
    :data:`LEAF` or more is a peer's leaf, carrying its covering link's ``ceil``."""

    namespace: str
    device: str
    classid: int
    parent: int
    ceil: int
    link: str
    peers: tuple[int, ...]
    match: str
    rate: int = 0

    @property
    def is_leaf(self) -> bool:
        """True for a peer's leaf class (it holds the queue and the filter)."""
        return self.classid >= LEAF


@dataclass(frozen=True, slots=True)
class Network:
    """A namespace network made from ``grid``: its sites, routers and shapers.

    ``routers``: one per site of the grid (:attr:`Cluster.site`; a cluster without one
    is a site of its own), ``core`` joins them. ``ranks``: the site of every rank a
    launch starts (by default the grid's placement; :meth:`for_ranks` picks some of
    them, as a measurement between two ranks does).
    """

    name: str
    grid: Grid
    sites: tuple[Site, ...]
    routers: tuple[str, ...]
    core: str
    shapers: tuple[Shaper, ...]
    ranks: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        if not self.ranks:
            object.__setattr__(self, "ranks", tuple(self.grid.cluster_of))

    def for_ranks(self, ranks: Sequence[int]) -> Network:
        """The network for a launch of ``ranks`` (world ranks of the grid), in order."""
        return replace(self, ranks=tuple(self.ranks[self.grid.check_rank(r)] for r in ranks))

    @property
    def namespaces(self) -> tuple[str, ...]:
        """Every namespace of the network: sites, routers, core."""
        return (*(s.namespace for s in self.sites), *self.routers, self.core)

    @property
    def host_grid(self) -> Grid:
        """The grid placing its ranks by host: each cluster's ``hosts`` its site's host
        name (what a grid file for a multi-host job says; ``gridcoll netns up`` writes
        it)."""
        clusters = tuple(
            replace(c, hosts=(site.host,))
            for c, site in zip(self.grid.clusters, self.sites, strict=True)
        )
        return replace(self.grid, clusters=clusters, placement=None)

    def site_of(self, rank: int) -> Site:
        """The site rank ``rank`` of a launch runs in."""
        return self.sites[self.ranks[rank]]

    def to_json(self) -> dict:
        """The record :func:`up` writes (the grid in its file format)."""
        return {"format": "gridcoll-netns/1", "name": self.name, "grid": grid_to_dict(self.grid)}

    @classmethod
    def from_json(cls, data: dict) -> Network:
        """The network a record describes (its plan is made again from the grid)."""
        if not isinstance(data, dict) or data.get("format") != "gridcoll-netns/1":
            raise LaunchError("not a gridcoll namespace network record")
        return plan(grid_from_dict(data["grid"]), name=str(data["name"]))


def _bits(bytes_per_s: float) -> int:
    return max(8, round(bytes_per_s * 8))


def site_indices(grid: Grid) -> tuple[int, ...]:
    """The site of every cluster, numbered in order of appearance; a cluster that names
    no site is a site of its own."""
    index: dict[str, int] = {}
    out = []
    for i, cluster in enumerate(grid.clusters):
        key = cluster.site or f"\0{i}"
        out.append(index.setdefault(key, len(index)))
    return tuple(out)


def _place(grid: Grid, name: str, pairs: list[tuple[int, int]]) -> tuple[tuple[str, int], set]:
    """Where link ``name`` goes: (side, cluster or site) and the peers it carries."""
    site = site_indices(grid)
    sources, targets = {a for a, _ in pairs}, {b for _, b in pairs}
    source_sites, target_sites = {site[a] for a in sources}, {site[b] for b in targets}
    if len(sources) == 1:
        return ("out", next(iter(sources))), targets
    if len(targets) == 1:
        return ("in", next(iter(targets))), sources
    if len(source_sites) == 1 and not source_sites & target_sites:
        return ("site-out", next(iter(source_sites))), targets
    if len(target_sites) == 1 and not source_sites & target_sites:
        return ("site-in", next(iter(target_sites))), sources
    raise GridError(
        f"link {name!r} carries routes of several sources and destinations: a namespace "
        "network shapes the links of one cluster or one site, each way"
    )


def _interface(net_sites: Sequence[Site], routers: Sequence[str], core: str, key):
    """(namespace, device, match) of the interface a placed link is a class on."""
    side, index = key
    if side == "out":
        return net_sites[index].namespace, SITE_DEVICE, "dst"
    if side == "in":
        return net_sites[index].router, net_sites[index].router_device, "src"
    if side == "site-out":
        return routers[index], UPLINK_DEVICE, "dst"
    return core, f"s{index}", "src"


def shapers(
    grid: Grid, sites: Sequence[Site], routers: Sequence[str], core: str
) -> tuple[Shaper, ...]:
    """The ``htb`` classes that give ``grid``'s links their bandwidths.

    Each link goes on the one interface all its traffic crosses: the source cluster's
    ``wan0`` when its routes leave one cluster; the interface of the cluster's site
    router towards it when they enter one; the site router's uplink when they leave one
    site for others; the core's interface towards a site when they enter one from
    others. On an interface, a link whose peers contain another's is its parent; every
    peer gets a leaf under the smallest link covering it. A route without links is
    shaped by its own gap ``g_w`` (a private link).

    Raises GridError naming a link that cannot be placed or two links of one interface
    that overlap without nesting. Runs in O(K^2 C) for K links and C clusters.
    """
    placed: dict[tuple[str, int], dict[str, tuple[int, frozenset[int]]]] = {}
    users: dict[str, list[tuple[int, int]]] = {}
    for (a, b), route in sorted(grid.routes.items()):
        if not route.links:
            slope = route.plogp.g_fn.slope
            if slope > 0:
                name = f"{grid.clusters[a].name}->{grid.clusters[b].name}"
                placed.setdefault(("out", a), {})[name] = (_bits(1 / slope), frozenset([b]))
        for name in route.links:
            users.setdefault(name, []).append((a, b))
    for name, pairs in sorted(users.items()):
        bandwidth = grid.links[name].bandwidth
        if bandwidth == float("inf"):
            continue
        key, peers = _place(grid, name, pairs)
        placed.setdefault(key, {})[name] = (_bits(bandwidth), frozenset(peers))
    out: list[Shaper] = []
    for key, links in sorted(placed.items()):
        namespace, device, match = _interface(sites, routers, core, key)
        order = sorted(links.items(), key=lambda kv: (-len(kv[1][1]), kv[0]))
        classid: dict[str, int] = {}
        covering: dict[int, str] = {}
        for name, (rate, peers) in order:
            parents = [p for p in classid if links[p][1] >= peers]
            for other in classid:
                if other not in parents and links[other][1] & peers:
                    raise GridError(
                        f"links {other!r} and {name!r} share traffic on {namespace}/{device} "
                        "but neither contains the other"
                    )
            parent = min(parents, key=lambda p: len(links[p][1]), default=None)
            classid[name] = len(classid) + 1
            parent_id = classid[parent] if parent else 0
            out.append(
                Shaper(namespace, device, classid[name], parent_id, rate, name,
                       tuple(sorted(peers)), match)
            )  # fmt: skip
            for peer in peers:
                covering[peer] = name
        for peer, name in sorted(covering.items()):
            out.append(
                Shaper(namespace, device, LEAF + peer, classid[name], links[name][0], name,
                       (peer,), match)
            )  # fmt: skip
    return loaded(out, {})


def loaded(classes: Sequence[Shaper], fraction: Mapping[str, float]) -> tuple[Shaper, ...]:
    """``classes`` with the links of ``fraction`` (link name -> share taken by other
    traffic, a :class:`~gridcoll.network.load.LoadTrace`'s ``f(t)``) slowed to ``1 - f``
    of their nominal ``ceil``, and every guarantee set top-down: a class of the root
    gets its ``ceil``, a child ``min(ceil, parent's rate / siblings)``. ``htb`` lets a
    class send at its guarantee whatever its parent does, so guarantees that add up to
    more than the parent's would void the parent's limit; kept at most an equal share,
    a parent's ``ceil`` bounds its subtree.

    The classes of each link carry its nominal ``ceil`` in ``classes``; only its rate
    changes under load (seed 001, sec. 3: load removes a share of a link's bandwidth).
    """
    nominal = [
        replace(c, ceil=max(8, round(c.ceil * (1.0 - fraction.get(c.link, 0.0))))) for c in classes
    ]
    by_id = {(c.namespace, c.device, c.classid): c for c in nominal}
    children: dict[tuple[str, str, int], int] = {}
    for c in nominal:
        key = (c.namespace, c.device, c.parent)
        children[key] = children.get(key, 0) + 1
    out: dict[tuple[str, str, int], Shaper] = {}

    def settle(c: Shaper) -> Shaper:
        key = (c.namespace, c.device, c.classid)
        if key not in out:
            if c.parent == 0:
                rate = c.ceil
            else:
                parent = settle(by_id[(c.namespace, c.device, c.parent)])
                rate = min(c.ceil, parent.rate // children[(c.namespace, c.device, c.parent)])
            out[key] = replace(c, rate=max(8, rate))
        return out[key]

    return tuple(settle(c) for c in nominal)


def _host_names(grid: Grid) -> list[str]:
    names: list[str] = []
    for i, cluster in enumerate(grid.clusters):
        host = _HOST.sub("-", cluster.name).strip("-")[:48] or f"site{i}"
        names.append(host if host not in names else f"{host}-{i}")
    return names


def plan(grid: Grid, *, name: str = DEFAULT_NAME) -> Network:
    """The namespace network for ``grid`` (nothing is created: see :func:`up`).

    A grid that places its ranks by host is taken with its clusters' ranks in order
    (the patterns are for real hosts; here each cluster is one site).
    """
    if not _NAME.match(name):
        raise LaunchError(
            f"network name {name!r:.40}: 1-12 lower-case letters and digits, starting with a letter"
        )
    if grid.nclusters > MAX_SITES:
        raise GridError(
            f"a namespace network holds at most {MAX_SITES} clusters, not {grid.nclusters}"
        )
    hosts = _host_names(grid)
    site = site_indices(grid)
    routers = tuple(f"{name}-s{j}" for j in range(max(site) + 1))
    sites = tuple(
        Site(i, f"{name}-{i}", hosts[i], _address(i, 2), routers[site[i]], f"c{i}")
        for i in range(grid.nclusters)
    )
    if any(c.hosts for c in grid.clusters):
        grid = replace(grid, clusters=tuple(replace(c, hosts=()) for c in grid.clusters))
    core = f"{name}-wan"
    return Network(name, grid, sites, routers, core, shapers(grid, sites, routers, core))


def _address(i: int, host: int, net: int = CLUSTER_NET) -> str:
    return f"10.{net}.{i}.{host}"


def commands(net: Network) -> list[list[str]]:
    """The ``ip`` and ``tc`` commands that make ``net``, in order."""
    core = net.core
    cmds = [f"ip netns add {ns}".split() for ns in net.namespaces]
    cmds += [f"ip -n {ns} link set lo up".split() for ns in net.namespaces]

    def wire(a: str, dev_a: str, b: str, dev_b: str, net_id: int, i: int) -> list[list[str]]:
        """A veth from ``a`` (``.1``, the gateway) to ``b`` (``.2``) on 10.net_id.i.0/24."""
        gateway, address = _address(i, 1, net_id), _address(i, 2, net_id)
        return [
            f"ip -n {a} link add {dev_a} type veth peer name {dev_b} netns {b}".split(),
            [*f"ip -n {a} link set dev {dev_a}".split(), *NO_OFFLOAD],
            [*f"ip -n {b} link set dev {dev_b}".split(), *NO_OFFLOAD],
            f"ip -n {a} addr add {gateway}/24 dev {dev_a}".split(),
            f"ip -n {b} addr add {address}/24 dev {dev_b}".split(),
            f"ip -n {a} link set {dev_a} up".split(),
            f"ip -n {b} link set {dev_b} up".split(),
        ]

    for j, router in enumerate(net.routers):
        cmds += wire(core, f"s{j}", router, UPLINK_DEVICE, SITE_NET, j)
        cmds.append(f"ip -n {router} route add default via {_address(j, 1, SITE_NET)}".split())
    for s in net.sites:
        cmds += wire(s.router, s.router_device, s.namespace, s.device, CLUSTER_NET, s.cluster)
        cmds.append(f"ip -n {s.namespace} route add default via {_address(s.cluster, 1)}".split())
        j = net.routers.index(s.router)
        cmds.append(
            f"ip -n {core} route add {SUBNET.format(i=s.cluster)} via "
            f"{_address(j, 2, SITE_NET)}".split()
        )
    for ns in (*net.routers, core):
        cmds.append(f"ip netns exec {ns} sysctl -qw net.ipv4.ip_forward=1".split())
    roots: set[tuple[str, str]] = set()
    for sh in net.shapers:
        tc = f"tc -n {sh.namespace}".split()
        if (sh.namespace, sh.device) not in roots:
            roots.add((sh.namespace, sh.device))
            cmds.append([*tc, *f"qdisc add dev {sh.device} root handle 1: htb".split()])
        cmds.append([*tc, *_class_words("add", sh)])
        if sh.is_leaf:
            (peer,) = sh.peers
            frames = max(QUEUE_MIN, math.ceil(sh.ceil / 8 * QUEUE_S / QUANTUM))
            cmds.append(
                [*tc, *f"qdisc add dev {sh.device} parent 1:{sh.classid} pfifo "
                 f"limit {frames}".split()]
            )  # fmt: skip
            cmds.append(
                [*tc, *f"filter add dev {sh.device} parent 1: protocol ip prio 1 u32 "
                 f"match ip {sh.match} {SUBNET.format(i=peer)} flowid 1:{sh.classid}".split()]
            )  # fmt: skip
    return cmds


def _class_words(verb: str, sh: Shaper) -> list[str]:
    return (
        f"class {verb} dev {sh.device} parent 1:{sh.parent or ''} classid 1:{sh.classid} "
        f"htb rate {sh.rate}bit ceil {sh.ceil}bit quantum {QUANTUM}"
    ).split()


def rank_prefix(site: Site) -> list[str]:
    """The command words that run a program as a rank of ``site``: in its namespace,
    under its host name (a UTS namespace of its own), with MPICH's TCP path on its
    interface (:data:`MPI_ENV` is set for the whole job)."""
    return [
        "ip",
        "netns",
        "exec",
        site.namespace,
        "unshare",
        "--uts",
        "sh",
        "-c",
        'hostname "$0" && exec "$@"',
        site.host,
        "env",
        f"UCX_NET_DEVICES={site.device}",
        f"FI_TCP_IFACE={site.device}",
    ]


def load_steps(net: Network, trace: LoadTrace) -> list[tuple[float, tuple[Shaper, ...]]]:
    """Every class's setting from each time the load on one of ``net``'s links changes
    (trace time, in order; :func:`loaded` with the trace's ``f(t)``).

    Raises GridError if the trace names a link the network's grid lacks.
    """
    trace.check(net.grid)
    links = sorted(trace.links)
    times = sorted({t for link in links for t, _ in trace.profile(link)})
    return [
        (t, loaded(net.shapers, {link: trace.fraction_at(link, t) for link in links}))
        for t in times
    ]


def apply(classes: Sequence[Shaper], current: Sequence[Shaper]) -> None:
    """Change the ``htb`` classes whose rate or ceiling differs from ``current``."""
    now = {(c.namespace, c.device, c.classid): c for c in current}
    for c in classes:
        old = now.get((c.namespace, c.device, c.classid))
        if old is None or (old.rate, old.ceil) != (c.rate, c.ceil):
            _run(["tc", "-n", c.namespace, *_class_words("change", c)], check=False)


@contextlib.contextmanager
def driving(net: Network, trace: LoadTrace) -> Iterator[None]:
    """Cross traffic on the real links for the block: from now (the trace's time 0) a
    background thread sets each loaded link's rate to ``1 - f(t)`` of its own at every
    step of the trace (the shaper's rate change, not a competing flow: what the
    emulator and the simulator do, :mod:`gridcoll.network.load`); the nominal rates
    are back when the block ends."""
    steps = load_steps(net, trace)
    stop = threading.Event()
    t0 = time.monotonic()
    state = {"current": net.shapers}

    def follow() -> None:
        for t, classes in steps:
            if stop.wait(max(0.0, t0 + t - time.monotonic())):
                return
            apply(classes, state["current"])
            state["current"] = classes

    thread = threading.Thread(target=follow, name="gridcoll-netns-load", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()
        apply(net.shapers, state["current"])


def not_permitted() -> str | None:
    """Why namespace networks cannot be made here (one line), or None if they can."""
    missing = [tool for tool in ("ip", "tc", "unshare") if shutil.which(tool) is None]
    if missing:
        return f"{', '.join(missing)} not found (iproute2 and util-linux are needed)"
    if os.geteuid() != 0:
        return "network namespaces need root (CAP_SYS_ADMIN and CAP_NET_ADMIN)"
    probe = f"gcprobe{os.getpid()}"
    made = _run(["ip", "netns", "add", probe], check=False)
    if made.returncode != 0:
        return f"network namespaces are not permitted here: {_first_line(made.stderr)}"
    _run(["ip", "netns", "del", probe], check=False)
    return None


def _first_line(text: str) -> str:
    return next((ln.strip() for ln in text.splitlines() if ln.strip()), "no message")


def _run(cmd: Sequence[str], *, check: bool = True) -> subprocess.CompletedProcess:
    done = subprocess.run(list(cmd), capture_output=True, text=True, timeout=60, check=False)
    if check and done.returncode != 0:
        raise LaunchError(f"{' '.join(cmd[:6])}...: {_first_line(done.stderr)}")
    return done


def _namespaces() -> list[str]:
    done = _run(["ip", "netns", "list"], check=False)
    return [line.split()[0] for line in done.stdout.splitlines() if line.split()]


def up(net: Network) -> Network:
    """Create ``net``'s namespaces, links and shapers and record it; return it.

    Raises LaunchError (one line) where namespaces are not permitted, where a network
    of that name is already up (``gridcoll netns down NAME`` first), or when a command
    fails; nothing is left behind on failure.
    """
    reason = not_permitted()
    if reason is not None:
        raise LaunchError(reason)
    if any(ns.startswith(net.name + "-") for ns in _namespaces()):
        raise LaunchError(
            f"a namespace network {net.name!r} is already up: gridcoll netns down {net.name}"
        )
    try:
        for cmd in commands(net):
            _run(cmd)
        STATE_DIR.mkdir(parents=True, exist_ok=True)
        (STATE_DIR / f"{net.name}.json").write_text(json.dumps(net.to_json()))
    except BaseException:
        down(net.name)
        raise
    return net


def down(name: str = DEFAULT_NAME) -> list[str]:
    """Remove every namespace of network ``name`` and its record; return the
    namespaces removed (their veth pairs and shapers go with them)."""
    gone = [ns for ns in _namespaces() if ns.startswith(name + "-")]
    for ns in gone:
        _run(["ip", "netns", "del", ns], check=False)
    with contextlib.suppress(OSError):
        (STATE_DIR / f"{name}.json").unlink()
    return gone


def find(name: str | None = None) -> Network:
    """The network ``name`` that :func:`up` recorded (the only one if ``name`` is None).

    Raises LaunchError naming the networks that are up, or how to bring one up.
    """
    records = sorted(STATE_DIR.glob("*.json")) if STATE_DIR.is_dir() else []
    names = [p.stem for p in records]
    if name is None:
        if len(names) != 1:
            raise LaunchError(
                "no namespace network is up: gridcoll netns up GRID"
                if not names
                else f"several namespace networks are up ({', '.join(names)}): name one"
            )
        name = names[0]
    path = STATE_DIR / f"{name}.json"
    if not path.exists():
        raise LaunchError(
            f"no namespace network {name!r} is up: gridcoll netns up GRID --name {name}"
        )
    net = Network.from_json(json.loads(path.read_text()))
    if not any(ns.startswith(name + "-") for ns in _namespaces()):
        raise LaunchError(
            f"namespace network {name!r} is recorded but gone: gridcoll netns down {name}"
        )
    return net


@contextlib.contextmanager
def network(grid: Grid, *, name: str = DEFAULT_NAME) -> Iterator[Network]:
    """``grid`` as a namespace network for the block: up on entry, down however it ends."""
    net = up(plan(grid, name=name))
    try:
        yield net
    finally:
        down(net.name)
