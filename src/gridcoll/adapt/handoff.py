"""Handing a new plan to every rank without an extra collective.

Every rank of a call must run the same schedule. The root's advisor knows the plan;
the other ranks do not. Here the root's plan travels with the data: a broadcast's
data space is the user's ``M`` bytes and a *trailer* of :func:`trailer_bytes`, and in
call ``n`` from a root the trailer carries that root's :class:`Announcement`: the
network view it planned on (one load byte per link) and up to three ready plans
(size, builder, parameters). Every rank receives the whole data space, so after call
``n`` every rank holds the same announcement, and call ``n + 1`` from that root runs
:func:`choose`'s entry for its size, planned with every parameter pinned on the
announced view (:func:`view_of`): the same schedule on every rank, with no message
that the broadcast did not already send. A call no entry fits, or the first from a
root, runs the communicator's ordinary plan. The call header (algorithm, parameters'
hash, size) still checks that every rank runs the same schedule.

The price is the trailer's bytes in every adaptive broadcast (256 bytes on seed 001's
TeraGrid: 0.4% of a 64 KiB message) and one call of lag: the plan announced in call
``n`` was ready when call ``n`` started. Sans I/O: pure functions of bytes.
"""

from __future__ import annotations

import json
import math
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from gridcoll.adapt.monitor import LOAD_QUANTUM, quantized
from gridcoll.network.grid import Grid
from gridcoll.tune import Call, PlanCache, PlanOptions, plan
from gridcoll.tune.select import Plan

MAGIC = b"GCA1"
MAX_ENTRIES = 3
_HEAD = struct.Struct("<4sIHB")  # magic, version, links, entries
_ENTRY = struct.Struct("<QBH")  # nbytes, name length, params length


@dataclass(frozen=True)
class Entry:
    """One ready plan: for ``nbytes`` (the user's bytes), ``algorithm`` with every
    parameter in ``params`` (sorted pairs)."""

    nbytes: int
    algorithm: str
    params: tuple[tuple[str, Any], ...]


@dataclass(frozen=True)
class Announcement:
    """A root's plans for its next call: ``load`` per link of the grid in sorted name
    order (multiples of :data:`LOAD_QUANTUM`), ``entries`` best first."""

    version: int
    load: tuple[float, ...]
    entries: tuple[Entry, ...]


def trailer_bytes(grid: Grid) -> int:
    """The trailer's size on ``grid``: 64 bytes of header, a byte per link, 64 bytes
    per entry, rounded up to 64 (256 on ``teragrid``'s 24 links)."""
    raw = _HEAD.size + len(grid.links) + 64 * MAX_ENTRIES
    return 64 * math.ceil(raw / 64)


def announcement(
    version: int, grid: Grid, load: dict[str, float], plans: Sequence[tuple[int, Any]]
) -> Announcement:
    """The announcement of ``plans``, pairs of the user's size and the
    :class:`~gridcoll.tune.Plan` made for it on ``grid`` under ``load``."""
    return Announcement(
        version,
        tuple(load.get(name, 0.0) for name in sorted(grid.links)),
        tuple(Entry(m, p.algorithm, tuple(sorted(p.params.items()))) for m, p in plans),
    )


def encode(ann: Announcement, grid: Grid) -> bytes:
    """``ann`` as exactly :func:`trailer_bytes` bytes (zero-padded); entries that do
    not fit are left out, the last first."""
    size = trailer_bytes(grid)
    loads = bytes(min(255, round(f / LOAD_QUANTUM)) for f in ann.load)
    entries = []
    used = _HEAD.size + len(loads)
    for entry in ann.entries[:MAX_ENTRIES]:
        name = entry.algorithm.encode()
        params = json.dumps(dict(entry.params), sort_keys=True, separators=(",", ":")).encode()
        if used + _ENTRY.size + len(name) + len(params) > size:
            break  # (before packing: a name of 256 bytes or more does not pack)
        piece = _ENTRY.pack(entry.nbytes, len(name), len(params)) + name + params
        entries.append(piece)
        used += len(piece)
    head = _HEAD.pack(MAGIC, ann.version, len(loads), len(entries))
    return (head + loads + b"".join(entries)).ljust(size, b"\0")


def decode(data: bytes | memoryview, grid: Grid) -> Announcement | None:
    """The announcement in a trailer, or None if it holds none (all zero: the root had
    nothing to announce) or is not one of ``grid``'s (malformed, other links)."""
    data = bytes(data)
    if len(data) < _HEAD.size or data[:4] != MAGIC:
        return None
    try:
        _, version, nlinks, nentries = _HEAD.unpack_from(data)
        if nlinks != len(grid.links):
            return None
        at = _HEAD.size
        load = tuple(quantized(b) for b in _take(data, at, nlinks))
        if any(f >= 1 for f in load):
            return None  # no link loses all its bandwidth (Grid.with_link_load)
        at += nlinks
        entries = []
        for _ in range(nentries):
            nbytes, nname, nparams = _ENTRY.unpack_from(data, at)
            at += _ENTRY.size
            name = _take(data, at, nname).decode()
            at += nname
            params = json.loads(_take(data, at, nparams).decode())
            at += nparams
            if not isinstance(params, dict):
                return None
            entries.append(Entry(nbytes, name, tuple(sorted(params.items()))))
    except (struct.error, UnicodeDecodeError, ValueError):
        return None
    return Announcement(version, load, tuple(entries))


def _take(data: bytes, at: int, n: int) -> bytes:
    """``n`` bytes of ``data`` from ``at``; ValueError if the data end before."""
    if at + n > len(data):
        raise ValueError("truncated trailer")
    return data[at : at + n]


def choose(ann: Announcement | None, nbytes: int) -> Entry | None:
    """The entry a call of ``nbytes`` runs: the one for exactly this size, else the
    nearest within a factor of 2 (its algorithm and parameters at this size), else
    None (the ordinary plan). The same on every rank."""
    if ann is None or not ann.entries or nbytes <= 0:
        return None
    best = min(ann.entries, key=lambda e: (abs(math.log(nbytes / max(e.nbytes, 1))), e.nbytes))
    if best.nbytes == nbytes or abs(math.log(nbytes / max(best.nbytes, 1))) <= math.log(2):
        return best
    return None


def view_of(ann: Announcement, grid: Grid) -> Grid:
    """The grid the announcement's plans were made on."""
    names = sorted(grid.links)
    return grid.with_link_load({n: f for n, f in zip(names, ann.load, strict=True) if f > 0})


def planned(
    grid: Grid,
    ann: Announcement | None,
    nbytes: int,
    root: int,
    *,
    extra: int = 0,
    itemsize: int = 1,
    host_overhead: float | None = None,
    cache: PlanCache | None = None,
) -> Plan | None:
    """The plan every rank runs for a call of ``nbytes`` (plus ``extra`` trailer bytes)
    from ``root`` given the root's last announcement: :func:`choose`'s entry, every
    parameter pinned, on the announced view; None if no entry fits."""
    entry = choose(ann, nbytes)
    if entry is None:
        return None
    return plan(
        view_of(ann, grid),
        Call("bcast", nbytes + extra, root, itemsize=itemsize),
        PlanOptions(algo=entry.algorithm, params=dict(entry.params), host_overhead=host_overhead),
        cache=cache,
    )
