"""What a simulation recorded: every message and every resource occupancy interval.

Built only by ``simulate(..., record=True)``. Resources are named as
:meth:`gridcoll.network.Grid.path` names them: ``("nic_out", rank)``,
``("gw_out", cluster)``, ``("link", name)``, ``("gw_in", cluster)``, ``("nic_in", rank)``.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from functools import cached_property
from typing import NamedTuple

__all__ = ["RESOURCE_KINDS", "Interval", "MessageRecord", "Timeline"]

Resource = tuple[str, int | str]

RESOURCE_KINDS = ("link", "gw_out", "gw_in", "nic_out", "nic_in")
"""Resource kinds, WAN links first, then gateways, then NICs (the plot's row order)."""


@dataclass(frozen=True, slots=True)
class MessageRecord:
    """One message: who sent what, when it left, arrived and was taken.

    ``send_start`` is when the sender reached its Send (the head entered the path),
    ``arrival`` when the tail reached the receiver (``+ L``), ``recv_done`` when the
    receiver's Recv completed: ``max(arrival, reached + or(m))``.
    """

    src: int
    dst: int
    segments: tuple[int, ...]
    nbytes: int
    send_start: float
    arrival: float
    recv_done: float


class Interval(NamedTuple):
    """A resource busy with one message from ``start`` (head enters) to ``end``.

    A named tuple rather than a dataclass: a long run records millions of them, and
    they unpack as ``(resource, start, end, message)``.
    """

    resource: Resource
    start: float
    end: float
    message: int
    """Index of the message in :attr:`Timeline.messages`."""


@dataclass(frozen=True)
class Timeline:
    """The recorded messages, in send order, and resource occupancy intervals.

    ``intervals`` are in the order the simulator granted them, so for each resource
    they are in FIFO (start time) order. On a fair link an interval spans a message's
    flow, from its start to its end, and intervals overlap while flows share the link.
    """

    messages: tuple[MessageRecord, ...]
    intervals: tuple[Interval, ...]

    @cached_property
    def by_resource(self) -> dict[Resource, tuple[Interval, ...]]:
        """The intervals of every resource that carried traffic, in start order."""
        out: dict[Resource, list[Interval]] = defaultdict(list)
        for interval in self.intervals:
            out[interval.resource].append(interval)
        return {res: tuple(ivs) for res, ivs in out.items()}

    def busy_s(self, resource: Resource) -> float:
        """Total time ``resource`` was occupied (0 if it carried nothing)."""
        return sum(iv.end - iv.start for iv in self.by_resource.get(resource, ()))

    def messages_to(self, rank: int) -> tuple[MessageRecord, ...]:
        """The messages rank received, in send order."""
        return tuple(m for m in self.messages if m.dst == rank)
