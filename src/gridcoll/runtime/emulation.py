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
    The emulator serves every link FIFO. A grid with fair links (``Link.sharing ==
    "fair"``) is emulated FIFO, and the emulator says so once per process (a
    ``RuntimeWarning``; the launcher says it once per launch and silences the ranks').
"""

from __future__ import annotations

import fcntl as _fcntl
import mmap as _mmap
import os as _os
import struct as _struct
import uuid as _uuid
from dataclasses import dataclass
from pathlib import Path

from gridcoll.errors import GridError
from gridcoll.network.grid import Cluster, Grid, Route
from gridcoll.network.load import LoadTrace, occupancy_end, read_load

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
ENV_FAIR_NOTICE = "GRIDCOLL_FAIR_NOTICE"
"""``0``: the launcher already said fair links are emulated FIFO."""

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
_FAIR_SAID = [False]


def _say_fair_is_fifo(grid: Grid) -> None:
    if _FAIR_SAID[0] or _os.environ.get(ENV_FAIR_NOTICE, "") == "0":
        return
    _FAIR_SAID[0] = True
    import warnings

    names = ", ".join(sorted(grid.fair_links)[:4])
    warnings.warn(
        f"grid {grid.name!r} has fair links ({names}...); the WAN emulator serves them FIFO",
        RuntimeWarning,
        stacklevel=3,
    )


def _link_names(grid: Grid) -> list[str]:
    return sorted(grid.links)


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
    finally:
        _os.close(fd)
    return path


def _tmpdir() -> str:
    import tempfile

    return tempfile.gettempdir()


class LinkState:
    """The free-times of a grid's links, shared by every process of the machine.

    Opened on a file made by :func:`create_link_state`; :meth:`reserve` applies the
    cut-through FIFO rule atomically (under a record lock per link).
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
        if size < _DATA_OFFSET + 8 * len(names):
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
        order = self._order.get(links)
        if order is None:  # lock in increasing index order: no deadlock between routes
            order = self._order[links] = tuple(_DATA_OFFSET + 8 * i for i in sorted(set(links)))
        fd, lockf = self._fd, _fcntl.lockf
        for offset in order:
            lockf(fd, _fcntl.LOCK_EX, 8, offset)
        try:
            free = self._free
            head, tail = now, now
            if profiles is None:
                for i, cost in zip(links, costs, strict=True):
                    if free[i] > head:
                        head = free[i]
                    free[i] = head + cost
                    tail = max(head + cost, tail)
                return tail
            for i, cost, profile in zip(links, costs, profiles, strict=True):
                if free[i] > head:
                    head = free[i]
                end = occupancy_end(cost, head, profile) if profile else head + cost
                free[i] = end
                tail = max(end, tail)
            return tail
        finally:
            for offset in reversed(order):
                lockf(fd, _fcntl.LOCK_UN, 8, offset)

    def free_times(self) -> dict[str, float]:
        """A snapshot of every link's free-time (for tests and debugging)."""
        return {name: float(self._free[i]) for name, i in self.index.items()}

    def close(self) -> None:
        """Unmap and close the file (it stays on disk)."""
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


@dataclass(frozen=True, slots=True)
class _Route:
    links: tuple[int, ...]
    link_g: tuple  # PiecewiseLinear per link
    profiles: tuple | None  # load profile per link (monotonic time), None: unloaded
    latency: float
    os_wan: object
    os_lan: object


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
        self._profiles: dict[str, tuple] = {}
        if load is not None:
            for name in load.links & set(grid.links):  # the launcher checked the names
                self._profiles[name] = tuple((b + t0, f) for b, f in load.profile(name))
        if grid.fair_links:
            _say_fair_is_fifo(grid)
        self._routes: dict[tuple[int, int], _Route] = {}
        self._costs: dict[tuple[int, int, int], tuple] = {}
        self._busy: dict[tuple[int, int, int], float] = {}
        self._os_w: dict[tuple[int, int, int], float] = {}
        self.observed: list | None = None
        """While a list: every message reserved is appended as ``(src cluster, dst
        cluster, bytes, sent, deliver_at)``, the passive measurements of an adaptive
        broadcast (:mod:`gridcoll.runtime.adaptive`)."""

    def crosses(self, a: int, b: int) -> bool:
        """True when a message from rank a to rank b leaves its cluster (is emulated)."""
        cluster = self.grid.cluster_of
        return cluster[a] != cluster[b]

    def _route(self, a: int, b: int) -> _Route:
        key = (self.grid.cluster_of[a], self.grid.cluster_of[b])
        route = self._routes.get(key)
        if route is None:
            names = [key for kind, key in self.grid.path(a, b) if kind == "link"]
            wan = self.grid.plogp(a, b)
            profiles = tuple(self._profiles.get(name) for name in names)
            route = _Route(
                tuple(self.state.index[name] for name in names),
                tuple(self.grid.links[name].g for name in names),
                profiles if any(profiles) else None,
                wan.L,
                wan.os_fn,
                self.grid.lan(a).os_fn,
            )
            self._routes[key] = route
        return route

    def reserve(self, a: int, b: int, nbytes: int, now: float) -> float:
        """Reserve the links of a message of ``nbytes`` from a to b started at ``now``;
        return its delivery time ``deliver_at`` (``time.monotonic`` seconds)."""
        cluster = self.grid.cluster_of
        key = (cluster[a], cluster[b], nbytes)
        cached = self._costs.get(key)
        if cached is None:
            route = self._route(a, b)
            costs = tuple(g(nbytes) for g in route.link_g)
            cached = self._costs[key] = (route.links, costs, route.latency, route.profiles)
        links, costs, latency, profiles = cached
        deliver = self.state.reserve(links, costs, now, profiles) + latency
        if self.observed is not None:
            self.observed.append((key[0], key[1], nbytes, now, deliver))
        return deliver

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
