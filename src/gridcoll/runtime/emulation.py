"""WAN emulation below every algorithm: gateways that hold and serialise messages.

Theory of operation
-------------------
All ranks of an emulated grid run on one machine, where ``time.monotonic`` is one
system-wide clock. Asked to span hosts, the emulation is refused with one line naming
them (:func:`gridcoll.runtime.hostnames.one_host_or_raise`). A message from rank ``a``
to rank ``b`` in another cluster crosses the shared links ``grid.path(a, b)`` names
(``("link", name)`` resources). When the sender starts the message at time ``t`` it
*reserves* every link of the route, in order, with the simulator's cut-through FIFO
rule (seed 000, sec. 2.1: a link carries one message at a time, for ``g_link(m)``)::

    h_0 = t
    h_i = max(h_{i-1}, free[link_i])          # head of the message enters link i
    free[link_i] = h_i + g_link_i(m)          # the link is busy until the tail passed
    e_i = max(h_i + g_link_i(m), e_{i-1})     # tail leaves link i
    deliver_at = e_last + L                   # L of the route: grid.plogp(a, b).L

The message itself goes straight over MPI at once; the sender tells the receiver
``deliver_at`` in a small header, and the receiver does not complete the receive before
then (it sleeps; see :mod:`gridcoll.runtime.executor`). Two messages on one link thus
queue behind each other exactly as in the simulator, whichever ranks send them.

The link free-times live in a small shared-memory file (:class:`LinkState`, an ``mmap``
of a file in ``/dev/shm`` named per launch) updated under POSIX record locks, one per
link (``fcntl.lockf`` on the link's 8 bytes, taken in index order), so every rank of the
machine sees one link, and senders on different links never wait for each other (a
whole-file lock made every sender of ``magpie:8,1`` queue behind whichever rank the
oversubscribed scheduler had just preempted while holding it).

The sender also pays the WAN send overhead: after the ``Isend`` of a cross-cluster
message its CPU stays busy for ``os_w(m)`` on top of its own work (the presets' ``os_w``
rises to ``g_w(m)`` above 128 KiB: MPICH's rendezvous makes ``MPI_Isend`` block for the
whole transfer on a slow link, seed 000 sec. 3.1). It used to be ``max(0, os_w(m) -
os_l(m))``, assuming the host had spent the LAN's ``os_l``; this machine's shared memory
does not spend Myrinet's 4 us + m/150 MB/s, so a 64 KiB WAN send cost 0.44 ms less than
in the simulator. The runtime's own per-message work is the host overhead it plans
with (:mod:`gridcoll.runtime.host`). LAN messages are not touched. With emulation off
none of this runs.

Environment (set by the launcher, ``gridcoll run`` and ``gridcoll mpirun``):

``GRIDCOLL_GRID``        path of a grid file (or a preset name)
``GRIDCOLL_EMULATE``     ``1`` switches the emulation on
``GRIDCOLL_LINK_STATE``  path of the shared link-state file
``GRIDCOLL_LOAD``        path of a load trace (optional; :mod:`gridcoll.network.load`)
``GRIDCOLL_LOAD_T0``     ``time.monotonic`` of the launch's start: the trace's time 0

Load (seed 001, sec. 3)
    Under a load trace the reservation serves link ``i`` at ``1 - f(t)`` of its speed:
    ``free[link_i] = occupancy_end(g_link_i(m), h_i, profile_i)`` (and ``e_i`` with it),
    the very helper the simulator uses, with the trace shifted by ``GRIDCOLL_LOAD_T0``.
    The load takes its share in the link state itself, so every rank's messages slow
    down alike.

Fair links
    A link with ``Link.sharing == "fair"`` is shared max-min fairly among the messages
    crossing it at once, by the simulator's rules: the sender registers the message's
    *flow* in a table in the same shared file and sends the flow's stamp (a negative
    number) in place of ``deliver_at``; the receiver asks the table when the flow ends
    (:meth:`Emulator.delivery`; :mod:`gridcoll.runtime.flow_table` tells how). FIFO
    links of the same route are reserved as above.
"""

from __future__ import annotations

import fcntl as _fcntl
import mmap as _mmap
import os as _os
import struct as _struct
import time as _time
import uuid as _uuid
import zlib as _zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from gridcoll.errors import GridError
from gridcoll.network.grid import FAIR, Cluster, Grid, Route
from gridcoll.network.load import LoadTrace, occupancy_end, read_load
from gridcoll.runtime.flow_table import FlowTable, is_flow_stamp, stamp_table, table_bytes

__all__ = [
    "ENV_EMULATE",
    "ENV_GRID",
    "ENV_LINK_STATE",
    "ENV_LOAD",
    "ENV_LOAD_T0",
    "Emulator",
    "LinkState",
    "create_link_state",
    "emulation_requested",
    "environment_load",
    "subgrid",
]

ENV_GRID = "GRIDCOLL_GRID"
"""Environment variable naming the grid file (or preset) of the launch."""
ENV_EMULATE = "GRIDCOLL_EMULATE"
"""Environment variable switching the WAN emulation on (``1``)."""
ENV_LINK_STATE = "GRIDCOLL_LINK_STATE"
"""Environment variable naming the shared link-state file of the launch."""

ENV_LOAD = "GRIDCOLL_LOAD"
"""Environment variable naming the load trace file of the launch (optional)."""
ENV_LOAD_T0 = "GRIDCOLL_LOAD_T0"
"""Environment variable: ``time.monotonic()`` at the launch's start, the trace's time 0."""
_MAGIC = b"GCLINK01"
_HEAD = _struct.Struct("<8sQ16s")  # magic, number of links, grid fingerprint
_DATA_OFFSET = 64


def emulation_requested() -> bool:
    """True when the environment switches the WAN emulation on."""
    return _os.environ.get(ENV_EMULATE, "").strip().lower() in ("1", "true", "yes", "on")


def environment_load() -> tuple[LoadTrace | None, float]:
    """The load trace and its time 0 the launcher put in the environment (``None, 0``
    without ``GRIDCOLL_LOAD``). Raises GridError on a bad file or time."""
    path = _os.environ.get(ENV_LOAD, "").strip()
    if not path:
        return None, 0.0
    raw = _os.environ.get(ENV_LOAD_T0, "").strip()
    try:
        t0 = float(raw)
    except ValueError:
        raise GridError(
            f"{ENV_LOAD_T0} must be a monotonic time in seconds, got {raw!r:.80}"
        ) from None
    key = (path, t0)
    if key not in _LOADS:
        _LOADS[key] = read_load(path)
    return _LOADS[key], t0


_LOADS: dict[tuple[str, float], LoadTrace] = {}


def _link_names(grid: Grid) -> list[str]:
    return sorted(grid.links)


def _flow_offset(nlinks: int) -> int:
    """Where the flow tables of a grid with fair links start in its link-state file."""
    return -(-(_DATA_OFFSET + 8 * max(nlinks, 1)) // 64) * 64


def sharing_domains(grid: Grid) -> dict[str, int]:
    """The sharing domain of every fair link: fair links one route crosses together
    are in one domain, and flows in different domains never share a link, so each
    domain has a flow table and a lock of its own (:mod:`gridcoll.runtime.flow_table`).
    Domains are numbered in the order of their first link's name."""
    parent = {name: name for name in grid.fair_links}

    def root(name: str) -> str:
        while parent[name] != name:
            parent[name] = parent[parent[name]]
            name = parent[name]
        return name

    for route in grid.routes.values():
        fair = [name for name in route.links if name in parent]
        for other in fair[1:]:
            parent[root(other)] = root(fair[0])
    firsts = sorted({min(n for n in parent if root(n) == r) for r in map(root, parent)})
    number = {root(first): k for k, first in enumerate(firsts)}
    return {name: number[root(name)] for name in sorted(parent)}


def create_link_state(grid: Grid, path: str | Path | None = None) -> Path:
    """Create the shared link-state file of ``grid`` (every link free at time 0).

    ``path`` defaults to a fresh name in ``/dev/shm`` (the temporary directory when
    there is none). The caller removes the file when the launch is over.
    """
    if path is None:
        base = Path("/dev/shm") if Path("/dev/shm").is_dir() else Path(_tmpdir())
        path = base / f"gridcoll-{_os.getpid()}-{_uuid.uuid4().hex[:12]}.links"
    path = Path(path)
    names = _link_names(grid)
    head = _HEAD.pack(_MAGIC, len(names), grid.fingerprint.encode()[:16])
    data = head.ljust(_DATA_OFFSET, b"\0") + bytes(8 * max(len(names), 1))
    fd = _os.open(path, _os.O_RDWR | _os.O_CREAT | _os.O_EXCL, 0o600)
    try:
        _os.write(fd, data)
        if grid.fair_links:  # zeros, not written: the pages come when a table uses them
            ndomains = max(sharing_domains(grid).values()) + 1
            _os.ftruncate(fd, _flow_offset(len(names)) + ndomains * table_bytes())
    finally:
        _os.close(fd)
    return path


def _tmpdir() -> str:
    import tempfile

    return tempfile.gettempdir()


class LinkState:
    """The free-times of a grid's links, shared by every process of the machine.

    Opened on a file made by :func:`create_link_state`; :meth:`reserve` applies the
    cut-through FIFO rule atomically (under a record lock per link). On a grid with
    fair links, :attr:`tables` holds their flows, one table per sharing domain.
    """

    def __init__(self, path: str | Path, grid: Grid):
        self.path = Path(path)
        names = _link_names(grid)
        try:
            self._fd = _os.open(self.path, _os.O_RDWR)
        except OSError as err:
            raise GridError(
                f"cannot open the emulated link state {str(self.path)!r}: {err.strerror}"
            ) from err
        size = _os.fstat(self._fd).st_size
        need = _DATA_OFFSET + 8 * len(names)
        domains = sharing_domains(grid)
        ndomains = max(domains.values(), default=-1) + 1
        if ndomains:
            need = _flow_offset(len(names)) + ndomains * table_bytes()
        if size < need:
            _os.close(self._fd)
            raise GridError(f"link state {str(self.path)!r} is too short for grid {grid.name!r}")
        self._mm = _mmap.mmap(self._fd, size)
        magic, nlinks, fingerprint = _HEAD.unpack_from(self._mm, 0)
        if magic != _MAGIC or nlinks != len(names) or fingerprint != grid.fingerprint.encode():
            self.close()
            raise GridError(
                f"link state {str(self.path)!r} was made for another grid than {grid.name!r}"
            )
        self.index = {name: i for i, name in enumerate(names)}
        self._free = memoryview(self._mm)[_DATA_OFFSET : _DATA_OFFSET + 8 * len(names)].cast("d")
        self._order: dict[tuple[int, ...], tuple[int, ...]] = {}
        self.domain = {self.index[name]: k for name, k in domains.items()}
        """The sharing domain of every fair link (by link index)."""
        self.tables = tuple(
            FlowTable(
                self._fd,
                self._mm,
                _flow_offset(len(names)) + k * table_bytes(),
                index=k,
                count=ndomains,
            )
            for k in range(ndomains)
        )
        """The flow table of every sharing domain (none without fair links)."""

    def table_of(self, stamp: float) -> FlowTable:
        """The flow table that issued a flow stamp."""
        if not self.tables:
            raise GridError(
                f"a message stamped as a fair-link flow reached {str(self.path)!r}, whose "
                "grid has no fair link"
            )
        return self.tables[stamp_table(stamp, len(self.tables))]

    def reserve(
        self,
        links: tuple[int, ...],
        costs: tuple[float, ...],
        now: float,
        profiles: tuple | None = None,
    ) -> float:
        """Reserve ``links`` in order for a message starting at ``now``; return when its
        tail leaves the last link (``e_last``). ``profiles``: per link, its load profile
        in ``time.monotonic`` seconds or None (module docstring, "Load")."""
        return self.reserve_route(links, costs, now, profiles)[0]

    def reserve_route(
        self,
        links: tuple[int, ...],
        costs: tuple[float, ...],
        now: float,
        profiles: tuple | None = None,
        fair: tuple[bool, ...] | None = None,
    ) -> tuple[float, float]:
        """:meth:`reserve` on a route that may cross fair links (``fair``: per link):
        their head passes at once and they are not reserved here (their flow is:
        :mod:`gridcoll.runtime.flow_table`). Returns the FIFO hops' tail and when the
        head reaches the first fair link (``now`` without one)."""
        if fair is not None:
            kept = [k for k, f in enumerate(fair) if not f]
            first = fair.index(True) if True in fair else len(links)
            before = sum(1 for k in kept if k < first)
            links = tuple(links[k] for k in kept)
            costs = tuple(costs[k] for k in kept)
            profiles = None if profiles is None else tuple(profiles[k] for k in kept)
        else:
            before = len(links)
        if not links:
            return now, now
        order = self._order.get(links)
        if order is None:  # lock in increasing index order: no deadlock between routes
            order = self._order[links] = tuple(_DATA_OFFSET + 8 * i for i in sorted(set(links)))
        fd, lockf = self._fd, _fcntl.lockf
        for offset in order:
            lockf(fd, _fcntl.LOCK_EX, 8, offset)
        try:
            free = self._free
            head, tail, first_head = now, now, now
            for k, (i, cost) in enumerate(zip(links, costs, strict=True)):
                if free[i] > head:
                    head = free[i]
                if k < before:
                    first_head = head
                profile = None if profiles is None else profiles[k]
                end = occupancy_end(cost, head, profile) if profile else head + cost
                free[i] = end
                tail = max(end, tail)
            return tail, first_head
        finally:
            for offset in reversed(order):
                lockf(fd, _fcntl.LOCK_UN, 8, offset)

    def free_times(self) -> dict[str, float]:
        """A snapshot of every link's free-time (for tests and debugging)."""
        return {name: float(self._free[i]) for name, i in self.index.items()}

    def close(self) -> None:
        """Unmap and close the file (it stays on disk)."""
        for table in self.tables:
            table.close()
        self.tables = ()
        if self._free is not None:
            self._free.release()
        self._free = None
        if self._mm is not None:
            self._mm.close()
            self._mm = None
        if self._fd >= 0:
            _os.close(self._fd)
            self._fd = -1

    _mm: _mmap.mmap | None = None
    _fd: int = -1
    _free: memoryview | None = None
    tables: tuple[FlowTable, ...] = ()


FLOW_POLL_S = 1e-3
"""A receiver waiting for a flow looks whether a new flow was registered (which may
move its delivery: :mod:`gridcoll.runtime.flow_table`) after half the time left to its
projected delivery, and at least this long: ``log2(T / FLOW_POLL_S)`` looks at most
for a wait of ``T``, so a busy pipeline, which registers a flow every few hundred
microseconds, does not make every receiver ask the table again each time."""


def _sleep_until(deadline: float) -> None:
    left = deadline - _time.monotonic()
    if left > 0:
        _time.sleep(left)


@dataclass(frozen=True, slots=True)
class _Route:
    links: tuple[int, ...]
    link_g: tuple  # PiecewiseLinear per link
    profiles: tuple | None  # load profile per link (monotonic time), None: unloaded
    latency: float
    os_wan: object
    os_lan: object
    fair: tuple[bool, ...] | None  # per link: shared fairly (a flow); None: all FIFO


class Emulator:
    """The emulated gateways of one grid, for the ranks of one communicator.

    Parameters
    ----------
    grid : Grid
        The grid; rank ``i`` of the communicator is rank ``i`` of the grid.
    state : LinkState
        The shared link free-times (one per launch, shared by every communicator).
    load : LoadTrace, optional
        Cross traffic on the links (module docstring, "Load"); loads on links this
        (sub)grid does not cross are ignored: the launcher checks the names.
    t0 : float
        ``time.monotonic()`` at the trace's time 0.
    """

    def __init__(
        self, grid: Grid, state: LinkState, load: LoadTrace | None = None, t0: float = 0.0
    ):
        self.grid = grid
        self.state = state
        self.load, self.t0 = load, t0
        shifted = {}  # every link of the launch's load, in time.monotonic seconds
        if load is not None:  # the launcher checked the names
            shifted = {
                name: tuple((b + t0, f) for b, f in load.profile(name))
                for name in load.links & set(state.index)
            }
        self._profiles = {name: p for name, p in shifted.items() if name in grid.links}
        for table in state.tables:  # fair links: the flows of the whole launch
            table.set_load({state.index[name]: p for name, p in shifted.items()})
        self._pair_base = (_os.getpid(), _zlib.crc32(grid.name.encode()) << 24)
        self._routes: dict[tuple[int, int], _Route] = {}
        self._costs: dict[tuple[int, int, int], tuple] = {}
        self._busy: dict[tuple[int, int, int], float] = {}
        self._os_w: dict[tuple[int, int, int], float] = {}
        self.observed: list | None = None
        """While a list: every message reserved (on a route with fair links: every
        message received, once its flow has ended) is appended as ``(src cluster, dst
        cluster, bytes, sent, deliver_at)``, the passive measurements of an adaptive
        broadcast (:mod:`gridcoll.runtime.adaptive`)."""

    def crosses(self, a: int, b: int) -> bool:
        """True when a message from rank a to rank b leaves its cluster (is emulated)."""
        cluster = self.grid.cluster_of
        return cluster[a] != cluster[b]

    def site(self, rank: int) -> int:
        """The cluster of ``rank``: the site of a dynamic group's process there."""
        return self.grid.cluster_of[rank]

    def _route(self, a: int, b: int) -> _Route:
        key = (self.grid.cluster_of[a], self.grid.cluster_of[b])
        route = self._routes.get(key)
        if route is None:
            names = [key for kind, key in self.grid.path(a, b) if kind == "link"]
            wan = self.grid.plogp(a, b)
            profiles = tuple(self._profiles.get(name) for name in names)
            fair = tuple(self.grid.links[name].sharing == FAIR for name in names)
            route = _Route(
                tuple(self.state.index[name] for name in names),
                tuple(self.grid.links[name].g for name in names),
                profiles if any(profiles) else None,
                wan.L,
                wan.os_fn,
                self.grid.lan(a).os_fn,
                fair if any(fair) else None,
            )
            self._routes[key] = route
        return route

    def reserve(self, a: int, b: int, nbytes: int, now: float) -> float:
        """Reserve the links of a message of ``nbytes`` from a to b started at ``now``.

        Returns its *stamp*, which the message carries to its receiver: on a FIFO
        route, its delivery time ``deliver_at`` (``time.monotonic`` seconds); on a
        route with fair links, a negative number naming its flow. The receiver passes
        the stamp to :meth:`wait`."""
        cluster = self.grid.cluster_of
        key = (cluster[a], cluster[b], nbytes)
        cached = self._costs.get(key)
        if cached is None:
            route = self._route(a, b)
            costs = tuple(g(nbytes) for g in route.link_g)
            flow = None
            if route.fair is not None:  # c_l = g_l(m) / m on each fair link (flow_table)
                size = float(max(nbytes, 1))
                flow = (
                    tuple(
                        (i, c / size)
                        for i, c, f in zip(route.links, costs, route.fair, strict=True)
                        if f
                    ),
                    size,
                )
            cached = (route.links, costs, route.latency, route.profiles, route.fair, flow)
            self._costs[key] = cached
        links, costs, latency, profiles, fair, flow = cached
        if flow is None:
            deliver = self.state.reserve(links, costs, now, profiles) + latency
            if self.observed is not None:
                self.observed.append((key[0], key[1], nbytes, now, deliver))
            return deliver
        tail, head = self.state.reserve_route(links, costs, now, profiles, fair)
        pair = (self._pair_base[0], self._pair_base[1] + b)
        table = self.state.tables[self.state.domain[flow[0][0][0]]]
        return table.start(
            pair, flow[0], flow[1], start_at=head, tail=tail, latency=latency, sent=now, now=now
        )

    def wait(
        self,
        stamp: float,
        a: int,
        b: int,
        nbytes: int,
        sleep_until: Callable[[float], None] = _sleep_until,
    ) -> float:
        """Return, at the delivery time of the message of ``nbytes`` from a to b whose
        header carried ``stamp`` (:meth:`reserve`), that time. ``sleep_until(t)``
        sleeps until ``t`` (the executor's drives its progress meanwhile).

        A flow's delivery is projected, and projected again when another flow was
        registered meanwhile (looked at as :data:`FLOW_POLL_S` says) or when the
        projection is reached; the table answers a stamp's final time once."""
        if not is_flow_stamp(stamp):
            sleep_until(stamp)
            return stamp
        flows = self.state.table_of(stamp)
        sleep_until(flows.earliest(stamp))
        while True:
            at, generation, sent = flows.delivery(stamp, _time.monotonic())
            if generation is None:
                break
            while (now := _time.monotonic()) < at:
                sleep_until(min(at, now + max(FLOW_POLL_S, (at - now) / 2)))
                if flows.generation() != generation:
                    break
        if self.observed is not None:
            cluster = self.grid.cluster_of
            self.observed.append((cluster[a], cluster[b], nbytes, sent, at))
        sleep_until(at)
        return at

    def send_busy(self, a: int, b: int, nbytes: int) -> float:
        """The WAN send overhead ``os_w(m)`` of a cross-cluster message: the emulated
        sender's CPU is busy this long on top of the runtime's own work for it (which is
        the host overhead the runtime plans with, :mod:`gridcoll.runtime.host`)."""
        cluster = self.grid.cluster_of
        key = (cluster[a], cluster[b], nbytes)
        busy = self._os_w.get(key)
        if busy is None:
            busy = self._os_w[key] = self._route(a, b).os_wan(nbytes)
        return busy

    def send_overhead(self, a: int, b: int, nbytes: int) -> float:
        """Extra time the sender of a cross-cluster message stays busy after ``Isend``:
        ``max(0, os_w(m) - os_l(m))``."""
        cluster = self.grid.cluster_of
        key = (cluster[a], cluster[b], nbytes)
        busy = self._busy.get(key)
        if busy is None:
            route = self._route(a, b)
            busy = self._busy[key] = max(0.0, route.os_wan(nbytes) - route.os_lan(nbytes))
        return busy

    def for_subgrid(self, grid: Grid) -> Emulator:
        """The emulator of a sub-communicator: same links, ranks renumbered by ``grid``."""
        return Emulator(grid, self.state, self.load, self.t0)


def subgrid(grid: Grid, ranks: list[int] | tuple[int, ...], name: str | None = None) -> Grid:
    """The grid seen by a sub-communicator whose rank ``i`` is rank ``ranks[i]`` of ``grid``.

    Clusters with no member are dropped; routes and links between the others are kept
    (so an emulated sub-communicator shares the links of the whole launch).
    """
    ranks = tuple(ranks)
    if ranks == tuple(range(grid.nranks)):
        return grid
    for r in ranks:
        grid.check_rank(r)
    used = sorted({grid.cluster_of[r] for r in ranks})
    new_index = {c: i for i, c in enumerate(used)}
    counts = {c: 0 for c in used}
    for r in ranks:
        counts[grid.cluster_of[r]] += 1
    clusters = tuple(
        Cluster(grid.clusters[c].name, counts[c], grid.clusters[c].lan, grid.clusters[c].site)
        for c in used
    )
    routes = {
        (new_index[a], new_index[b]): Route(r.plogp, r.links)
        for (a, b), r in grid.routes.items()
        if a in new_index and b in new_index
    }
    links = {n: grid.links[n] for r in routes.values() for n in r.links}
    placement = tuple(new_index[grid.cluster_of[r]] for r in ranks)
    return Grid(name or f"{grid.name}[{len(ranks)} ranks]", clusters, routes, links, placement)
