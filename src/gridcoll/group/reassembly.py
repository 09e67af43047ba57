"""The group's reassembly of pipelined broadcasts (sec. IV-D), per virtual node.

Theory of operation
-------------------
The core delivers a pipelined broadcast segment by segment (``Deliver``), to the vnodes
of this process that the segment reached. :class:`Reassembly` keeps the segments' bytes
until each vnode has them all, then hands out the whole payload once per vnode: ``got``
mirrors the core's ``VNodeState.partial`` (the segment indices each vnode holds).

A vnode handed to another process halfway through a pipelined broadcast carries the
indices of its segments (``partial``) but not their bytes, so before sending a
``Handover`` the group sends the segments' bytes (one ``SEGS`` frame each,
:meth:`Reassembly.carry`) on the same connection, which the new owner keeps
(:meth:`Reassembly.take`) until the handover reaches its core
(:meth:`Reassembly.on_message`). A broadcast whose root died before every segment reached
a vnode is abandoned by the core, and that vnode forgotten here.

References
----------
H. Saito, K. Taura, T. Chikayama, *Collective operations for wide-area message passing
systems using adaptive spanning trees* (seed 004), sec. III (virtual nodes), IV-D.
"""

from __future__ import annotations

from collections.abc import Hashable

import gridcoll.phoenix as p
from gridcoll.errors import WireError
from gridcoll.group.transport import GroupStats
from gridcoll.phoenix.wire import Reader, Writer

__all__ = ["Reassembly"]


class Reassembly:
    """The segments of the pipelined broadcasts under way at one process (module doc)."""

    def __init__(self, stats: GroupStats) -> None:
        self.stats = stats
        self._segs: dict[Hashable, dict[int, bytes]] = {}
        self._got: dict[Hashable, dict[int, set[int]]] = {}
        self._carried: dict[bytes, list[tuple[Hashable, list[tuple[int, bytes]]]]] = {}

    def add(self, d: p.Deliver) -> tuple[frozenset[int], object] | None:
        """One segment for some vnodes; returns the vnodes it completed and the whole
        payload, or None. A vnode is complete when it holds all ``nsegments``, and is
        then handed out once."""
        if d.nsegments == 1:
            return d.vnodes, d.payload
        self.stats.segments += 1
        if isinstance(d.payload, bytes):
            self._segs.setdefault(d.op_id, {})[d.segment] = d.payload
        got = self._got.setdefault(d.op_id, {})
        done = []
        for v in d.vnodes:
            have = got.setdefault(v, set())
            have.add(d.segment)
            if len(have) == d.nsegments:
                del got[v]
                done.append(v)
        if not done:
            return None
        store = self._segs.get(d.op_id, {})
        parts = [store.get(i) for i in range(d.nsegments)]
        if any(part is None for part in parts):
            self.stats.undeliverable += len(done)
            return None
        return frozenset(done), b"".join(parts)  # type: ignore[arg-type]

    def abandon(self, a: p.Abandoned) -> None:
        """Forget the vnodes of a broadcast whose root died halfway."""
        got = self._got.get(a.op_id, {})
        for v in a.vnodes:
            got.pop(v, None)

    def gc(self) -> None:
        """Forget the bytes of broadcasts no vnode here is halfway through."""
        for op in [op for op in self._segs if not self._got.get(op)]:
            del self._segs[op]
            self._got.pop(op, None)

    def carry(self, m: p.Handover) -> list[bytes]:
        """The ``SEGS`` bodies to send before a Handover: the bytes of the segments its
        vnodes hold, one segment each (small frames)."""
        wanted: dict[Hashable, set[int]] = {}
        for v, state in m.states:
            for op, got in state.partial.items():
                wanted.setdefault(op, set()).update(got)
                self._got.get(op, {}).pop(v, None)
        bodies = []
        for op, segments in sorted(wanted.items(), key=lambda kv: repr(kv[0])):
            store = self._segs.get(op, {})
            for i in sorted(i for i in segments if i in store):
                w = Writer()
                w.value(op)
                w.u32(1)
                w.u32(i)
                w.raw(store[i])
                bodies.append(bytes(w.out))
        return bodies

    def take(self, route: bytes, body: memoryview) -> None:
        """Keep carried segments until the connection's next core message (the
        Handover they precede) is fed, so no collection runs in between."""
        r = Reader(body)
        op = r.value()
        if not isinstance(op, Hashable):
            raise WireError("segment op id is not hashable")
        items = [(r.u32(), r.raw()) for _ in range(r.count(8))]
        r.end()
        self._carried.setdefault(route, []).append((op, items))

    def on_message(self, route: bytes, m: p.Message) -> None:
        """A core message came on ``route``: store the segments carried before it, and
        note those each vnode of a Handover brings."""
        for op, items in self._carried.pop(route, ()):
            self._segs.setdefault(op, {}).update(items)
        if isinstance(m, p.Handover):
            for v, state in m.states:
                for op, got in state.partial.items():
                    self._got.setdefault(op, {})[v] = set(got)
