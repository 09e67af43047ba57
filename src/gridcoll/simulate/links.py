"""The simulator's link model for message-driven protocols: NICs, gateways, WAN links.

:func:`gridcoll.simulate.simulate` replays a *schedule*, whose every message is known in
advance; a sans-I/O protocol (seed 004's :mod:`gridcoll.phoenix`) decides its messages
as it runs. :class:`LinkModel` gives such a driver the executor's resource model, on
the same :class:`~gridcoll.simulate.engine.Environment`, message by message:

* a message of ``m`` bytes from ``a`` to ``b`` crosses ``grid.path(a, b)`` (the sender's
  NIC, the gateways and wide-area links of its route, the receiver's NIC), each hop
  busy ``occ_i`` (``g_l(m)`` of the LAN for NICs and gateways, the link's ``g(m)``), with
  the executor's cut-through FIFO rule (:mod:`gridcoll.simulate.executor`, "Path
  traversal")::

      h_i = max(h_{i-1}, free[res_i]);  free[res_i] = h_i + occ_i
      e_i = max(h_i + occ_i, e_{i-1})

  and arrives at ``e_last + L``; hop ``i`` is one event at ``h_{i-1}``, so every
  resource serves heads in the order they reach it. A lone message sent at ``t``
  arrives at ``t + g(m) + L``, what the executor gives (``tests/test_phoenix_sim.py``
  checks it against :func:`~gridcoll.simulate.simulate`);
* messages of one ordered pair arrive in send order (on FIFO resources a later head
  can never overtake: each hop starts it after the earlier one's occupancy ends);
* the CPU overheads ``os(m)`` and ``or(m)`` belong to the driver (it knows when a
  process is busy): :meth:`LinkModel.overheads` gives them.

Fair links (``Link.sharing == "fair"``) and cross-traffic loads are not modelled here
yet: :class:`LinkModel` refuses a grid with fair links rather than time it wrongly.
The executor keeps its own inlined copy of these rules for speed.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from gridcoll.errors import GridError
from gridcoll.network.grid import Grid
from gridcoll.simulate.engine import NORMAL, Environment
from gridcoll.simulate.streams import occupancies, resource_gap

__all__ = ["LinkModel", "Transfer"]


@dataclass(slots=True)
class Transfer:
    """One message in flight through :class:`LinkModel` (times in seconds)."""

    src: int
    dst: int
    nbytes: int
    start_s: float
    """When its head entered the first hop (the send's start)."""
    on_arrival: Callable[[Transfer], None]
    """Called once, at ``arrival_s``."""
    ids: tuple[int, ...] = ()
    occs: tuple[float, ...] = ()
    latency_s: float = 0.0
    hop: int = 0
    tail_s: float = 0.0
    arrival_s: float | None = None
    """``e_last + L``; None until the last hop is granted."""
    payload: object = field(default=None, repr=False)
    """Whatever the driver attaches (the protocol's message)."""


class _Hop:
    """The engine event of a head reaching its next hop (a minimal :class:`Event`)."""

    __slots__ = ("_defused", "_ok", "callbacks", "transfer")

    def __init__(self, transfer: Transfer, callback: Callable[[_Hop], None]):
        self.transfer = transfer
        self.callbacks = [callback]
        self._ok = True
        self._defused = False


class _Arrival:
    """The engine event of a message's arrival at its receiver."""

    __slots__ = ("_defused", "_ok", "callbacks", "transfer")

    def __init__(self, transfer: Transfer):
        self.transfer = transfer
        self.callbacks = [_arrive]
        self._ok = True
        self._defused = False


def _arrive(event: _Arrival) -> None:
    transfer = event.transfer
    transfer.on_arrival(transfer)


class LinkModel:
    """The shared resources of ``grid``, driven by messages sent while ``env`` runs.

    Parameters
    ----------
    grid : Grid
        The network; its links must be FIFO.
    env : Environment
        The virtual clock and heap the driver runs on.

    Raises
    ------
    GridError
        If the grid has fair links (not modelled here yet).
    """

    def __init__(self, grid: Grid, env: Environment):
        if grid.fair_links:
            raise GridError(
                f"grid {grid.name!r} has fair links ({', '.join(sorted(grid.fair_links))}); "
                "the protocol driver models FIFO links only"
            )
        self.grid = grid
        self.env = env
        self.free: list[float] = []
        self._ids: dict[tuple, int] = {}
        self._paths: dict[tuple[int, int], tuple] = {}
        self._info: dict[tuple[int, int, int], tuple] = {}
        self._gaps: dict[tuple[int, int], float] = {}
        self.nmessages = 0
        self.nbytes = 0

    def _route(self, a: int, b: int, m: int) -> tuple[tuple[int, ...], tuple[float, ...], float]:
        """``(resource ids, occupancies, L)`` of an m-byte message a -> b, memoised."""
        info = self._info.get((a, b, m))
        if info is not None:
            return info
        pair = self._paths.get((a, b))
        if pair is None:
            path = self.grid.path(a, b)
            ids = []
            for resource in path:
                rid = self._ids.get(resource)
                if rid is None:
                    rid = self._ids[resource] = len(self.free)
                    self.free.append(0.0)
                ids.append(rid)
            gaps = tuple(resource_gap(self.grid, r) for r in path)
            pair = self._paths[(a, b)] = (tuple(ids), gaps, self.grid.plogp(a, b).L)
        ids, gaps, latency = pair
        info = self._info[(a, b, m)] = (ids, occupancies(self._gaps, gaps, m), latency)
        return info

    def overheads(self, a: int, b: int, m: int) -> tuple[float, float]:
        """``(os(m), or(m))`` of an m-byte message a -> b: the CPU time of each side."""
        p = self.grid.plogp(a, b)
        return p.os(m), p.or_(m)

    def send(
        self,
        src: int,
        dst: int,
        nbytes: int,
        at: float,
        on_arrival: Callable[[Transfer], None],
        payload: object = None,
    ) -> Transfer:
        """Put an ``nbytes`` message ``src -> dst`` on the path at time ``at`` (not
        before now); ``on_arrival(transfer)`` is called when it arrives.

        Raises
        ------
        ValueError
            If ``src == dst``, either is not a rank of the grid, or ``nbytes < 0``.
        """
        P = self.grid.nranks
        if not (0 <= src < P and 0 <= dst < P) or src == dst:
            raise ValueError(f"a message needs two distinct ranks of {P}, got {src!r} -> {dst!r}")
        if nbytes < 0:
            raise ValueError(f"a message cannot have {nbytes!r} bytes")
        ids, occs, latency = self._route(src, dst, nbytes)
        transfer = Transfer(src, dst, nbytes, at, on_arrival, ids, occs, latency, 0, at)
        transfer.payload = payload
        self.nmessages += 1
        self.nbytes += nbytes
        self.env.schedule_at(at, _Hop(transfer, self._hop), NORMAL)
        return transfer

    def _hop(self, event: _Hop) -> None:
        """The head of a message reaches hop ``transfer.hop`` now."""
        transfer = event.transfer
        t = self.env.now
        i = transfer.hop
        rid = transfer.ids[i]
        f = self.free[rid]
        h = t if t > f else f
        end = h + transfer.occs[i]
        self.free[rid] = end
        if end > transfer.tail_s:
            transfer.tail_s = end
        i += 1
        if i < len(transfer.ids):
            transfer.hop = i
            self.env.schedule_at(h, _Hop(transfer, self._hop), NORMAL)
            return
        transfer.arrival_s = transfer.tail_s + transfer.latency_s
        self.env.schedule_at(transfer.arrival_s, _Arrival(transfer), NORMAL)
