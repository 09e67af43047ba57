"""An estimated replay of messages on the P-LogP resources: the order in which the
builders that route segments one by one (:mod:`gridcoll.algorithms.packing`,
:mod:`gridcoll.algorithms.multipath`) write every rank's program.

A message of ``m`` bytes sent at ``t`` charges ``os(m)`` on its sender's CPU, then
``g(m)`` on each resource of its path (:meth:`Grid.path`: NICs, gateways, wide-area
links; :func:`occupancy`) in the order heads reach it (each resource serves heads
first come, first served), arrives ``L`` after its last resource and costs its receiver
``or(m)``: the simulator's semantics (docs/architecture.md, "Simulator semantics") with
every message on its own. A builder sends, reacts to each arrival (forwarding,
combining) and to timers of its own, and the replay writes every ``Send`` and ``Recv``
in the order it happened. A replay is causal, so that order is an execution of the
schedule (deadlock-free), and the messages of one ordered pair arrive in the order they
were sent.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable, Sequence
from typing import Any

from gridcoll.network.grid import Grid
from gridcoll.schedule.ir import Op, Recv, Send

__all__ = ["Replay", "Resource", "occupancy"]

Resource = tuple[str, int | str]


def occupancy(grid: Grid, src: int, dst: int, m: int) -> list[tuple[Resource, float]]:
    """The resources an ``m``-byte message ``src -> dst`` occupies, each for its
    ``g(m)`` (a link's own, a NIC's or gateway's LAN's): the same for every pair of
    ranks of two clusters but for the NICs, so memoised per cluster pair and size in
    ``grid.memo``."""
    ca, cb = grid.cluster_of[src], grid.cluster_of[dst]

    def compute() -> list[tuple[Resource, float]]:
        a, b = grid.members[ca][0], grid.members[cb][-1]
        out = []
        for kind, key in grid.path(a, b):
            if kind == "link":
                out.append(((kind, key), grid.links[key].g(m)))
            else:
                side = a if kind in ("nic_out", "gw_out") else b
                out.append(((kind, key), grid.lan(side).g(m)))
        return out

    shape = grid.memo.get("replay.occupancy", (ca, cb, m), compute, maxsize=65536)
    rank = {"nic_out": src, "nic_in": dst}
    return [((kind, rank.get(kind, key)), g) for (kind, key), g in shape]


class Replay:
    """One replay (module docstring) of messages that carry one segment each.

    ``arrived(replay, rank, sender, s, done, tag)`` is called when segment ``s`` has
    reached ``rank`` and been received (``done``: its CPU is free again); ``due(replay,
    t, payload)`` when a timer set with :meth:`at` expires. Both may send more."""

    def __init__(
        self,
        grid: Grid,
        segments: Sequence[tuple[int, int]],
        arrived: Callable[[Replay, int, int, int, float, Any], None],
        due: Callable[[Replay, float, Any], None] | None = None,
    ):
        self.grid, self.segments = grid, segments
        self.arrived, self.due = arrived, due
        self.programs: list[list[Op]] = [[] for _ in range(grid.nranks)]
        self.cpu = [0.0] * grid.nranks
        self.free: dict[Resource, float] = {}
        self.heap: list = []
        self.seq = itertools.count()
        self.end = 0.0

    def send(self, src: int, dst: int, s: int, ready: float, tag: Any = None) -> None:
        """``src`` sends segment ``s`` to ``dst`` once ready (and its CPU free);
        ``tag`` comes back with the arrival."""
        plogp = self.grid.plogp(src, dst)
        m = self.segments[s][1]
        t = max(ready, self.cpu[src])
        self.cpu[src] = t + plogp.os(m)
        self.programs[src].append(Send(dst, (s,)))
        hops = occupancy(self.grid, src, dst, m)
        heapq.heappush(self.heap, (t, next(self.seq), 0, (src, dst, s, hops, plogp.L, tag)))

    def at(self, t: float, payload: Any) -> None:
        """A timer: ``due(replay, t, payload)`` at ``t``."""
        heapq.heappush(self.heap, (t, next(self.seq), -1, payload))

    def receive(self, rank: int, sender: int, s: int, **recv: bool) -> None:
        """Write ``rank``'s receive of segment ``s`` (``Recv`` flags in ``recv``)."""
        self.programs[rank].append(Recv(sender, (s,), **recv))

    def run(self) -> float:
        """Replay until no message or timer is left; the last receive's end."""
        heap, free = self.heap, self.free
        while heap:
            t, _, i, message = heapq.heappop(heap)
            if i < 0:
                self.due(self, t, message)
                continue
            src, dst, s, hops, L, tag = message
            if i < len(hops):  # the head reaches resource i
                resource, g = hops[i]
                t = max(t, free.get(resource, 0.0)) + g
                free[resource] = t
                heapq.heappush(
                    heap, (t + (L if i == len(hops) - 1 else 0.0), next(self.seq), i + 1, message)
                )
                continue
            done = max(t, self.cpu[dst]) + self.grid.plogp(src, dst).or_(self.segments[s][1])
            self.cpu[dst] = done
            self.end = max(self.end, done)
            self.arrived(self, dst, src, s, done, tag)
        return self.end
