"""Load traces: cross traffic on wide-area links, one definition for every executor.

Theory of operation
-------------------
A trace lists loads ``(link, fraction f, from, to)``: during ``[from, to)`` (seconds,
trace time) other traffic takes the share ``f`` of the link. Loads overlapping on one
link add up, capped at :data:`MAX_FRACTION` (a link is never wholly taken). The
fraction on a link is thus a step function ``f(t)``, its *profile* (:meth:`LoadTrace.profile`).

Semantics (seed 001, sec. 3: load removes 50-90% of a link's bandwidth)
    A message needing ``g(m)`` seconds of a link's exclusive service is served at
    ``1 - f(t)`` of the link's speed, so starting at ``s`` it ends at the ``E`` with::

        int_s^E (1 - f(t)) dt = g(m)                 (:func:`occupancy_end`)

    computed exactly piecewise over the profile's steps. Under constant ``f`` that is
    ``g(m) / (1 - f)``: a 50% load doubles a lone message's time on the link.

    FIFO links (simulator and emulator): a message holds the link from its head's
    entry ``h`` to ``occupancy_end(g(m), h, profile)`` instead of ``h + g(m)``.
    Fair links (simulator): the load is one competing flow pinned at the fraction
    ``f(t)`` of the capacity; the application's flows share the rest, max-min, i.e.
    the link's capacity seen by them is ``1 - f(t)``, re-shared at every step of the
    profile. A lone flow then also obeys the integral above, so both modes agree.

Traces do not change the grid description (:class:`gridcoll.network.grid.Grid`).

File format ``gridcoll-load/1`` (``docs/load-format.md``)::

    {"format": "gridcoll-load/1",
     "loads": [{"link": "wan-C3", "fraction": 0.5, "from": 0, "to": 420}]}
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from gridcoll.errors import GridError

__all__ = [
    "FORMAT",
    "MAX_FRACTION",
    "Load",
    "LoadTrace",
    "cluster_links",
    "fraction_in",
    "load_from_spec",
    "loads_from_json",
    "occupancy_end",
    "read_load",
    "seed001_trace",
]

FORMAT = "gridcoll-load/1"
"""The ``format`` tag of a load trace document."""
MAX_FRACTION = 0.99
"""Overlapping loads on one link add up to at most this fraction."""
MAX_LOAD_BYTES = 4 * 1024 * 1024
"""Largest trace file read."""

Profile = tuple[tuple[float, float], ...]
"""A link's load: ``((t_0, f_0), (t_1, f_1), ...)``, ``f_k`` from ``t_k`` to ``t_{k+1}``
(0 before ``t_0``; the last ``f`` is 0)."""


@dataclass(frozen=True, slots=True)
class Load:
    """Other traffic taking ``fraction`` of ``link`` during ``[start, end)`` seconds."""

    link: str
    fraction: float
    start: float
    end: float

    def __post_init__(self) -> None:
        if not isinstance(self.link, str) or not self.link:
            raise GridError(f"load: link must be a non-empty name, got {self.link!r:.80}")
        for what, v in (("fraction", self.fraction), ("from", self.start), ("to", self.end)):
            if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v):
                raise GridError(f"load on {self.link!r}: {what} must be a number, got {v!r:.80}")
        if not 0 <= self.fraction < 1:
            raise GridError(
                f"load on {self.link!r}: fraction must be in [0, 1), got {self.fraction}"
            )
        if self.start < 0:
            raise GridError(f"load on {self.link!r}: from must be >= 0, got {self.start}")
        if not self.start < self.end:
            raise GridError(
                f"load on {self.link!r}: from ({self.start}) must be before to ({self.end})"
            )


@dataclass(frozen=True, slots=True)
class LoadTrace:
    """A set of loads (module docstring). Time 0 is the start of the run it applies to."""

    loads: tuple[Load, ...] = ()

    @property
    def links(self) -> frozenset[str]:
        """The names of the loaded links."""
        return frozenset(load.link for load in self.loads)

    def check(self, grid) -> None:
        """Raise GridError if a load names a link ``grid`` lacks."""
        missing = sorted(self.links - set(grid.links))
        if missing:
            raise GridError(
                f"load trace names link(s) grid {grid.name!r} lacks: {', '.join(missing[:5])}"
            )

    def scaled(self, factor: float) -> LoadTrace:
        """The trace with every time multiplied by ``factor`` (> 0)."""
        if not (isinstance(factor, int | float) and math.isfinite(factor) and factor > 0):
            raise GridError(f"load trace: time scale must be a positive number, got {factor!r}")
        return LoadTrace(
            tuple(Load(x.link, x.fraction, x.start * factor, x.end * factor) for x in self.loads)
        )

    def fraction_at(self, link: str, t: float) -> float:
        """The fraction of ``link`` taken at trace time ``t`` (sum, capped)."""
        total = sum(x.fraction for x in self.loads if x.link == link and x.start <= t < x.end)
        return min(total, MAX_FRACTION)

    def profile(self, link: str) -> Profile:
        """The step function of ``link``'s load (empty when unloaded)."""
        times = sorted({t for x in self.loads if x.link == link for t in (x.start, x.end)})
        steps: list[tuple[float, float]] = []
        for t in times:
            f = self.fraction_at(link, t)
            if not steps or steps[-1][1] != f:
                steps.append((t, f))
        while steps and steps[0][1] == 0:  # 0 before the first step anyway
            steps.pop(0)
        return tuple(steps)

    def to_json(self) -> dict:
        """The trace as a ``gridcoll-load/1`` document."""
        return {
            "format": FORMAT,
            "loads": [
                {"link": x.link, "fraction": x.fraction, "from": x.start, "to": x.end}
                for x in self.loads
            ],
        }


def fraction_in(profile: Sequence[tuple[float, float]], t: float) -> float:
    """The fraction a profile (:meth:`LoadTrace.profile`) holds at ``t``."""
    f = 0.0
    for b, fb in profile:
        if b > t:
            break
        f = fb
    return f


def occupancy_end(work: float, start: float, profile: Sequence[tuple[float, float]]) -> float:
    """When a message needing ``work`` seconds of a link's exclusive service, started at
    ``start``, has been served: the ``E`` with ``int_start^E (1 - f(t)) dt = work``.

    Parameters
    ----------
    work : float
        ``g(m)``, the occupancy without load.
    start : float
        When the message's head enters the link (trace time).
    profile : sequence of (time, fraction)
        The link's load (:meth:`LoadTrace.profile`); empty: no load.

    Examples
    --------
    >>> occupancy_end(2.0, 0.0, ((1.0, 0.5), (10.0, 0.0)))  # 1 s at full speed, 1 s at half
    3.0
    """
    if not profile:
        return start + work
    t, remaining, f = start, work, 0.0
    for b, fb in profile:
        if b <= t:
            f = fb
            continue
        served = (b - t) * (1.0 - f)
        if served >= remaining:
            return t + remaining / (1.0 - f)
        remaining -= served
        t, f = b, fb
    return t + remaining / (1.0 - f)


def loads_from_json(doc: object, what: str = "load trace") -> LoadTrace:
    """Validate a parsed ``gridcoll-load/1`` document (one-line GridError otherwise)."""
    if not isinstance(doc, dict):
        raise GridError(f"{what}: expected a JSON object")
    if doc.get("format") != FORMAT:
        raise GridError(f"{what}: format must be {FORMAT!r}, got {doc.get('format')!r:.80}")
    extra = sorted(set(doc) - {"format", "loads"})
    if extra:
        raise GridError(f"{what}: unknown key {extra[0]!r:.80}")
    items = doc.get("loads")
    if not isinstance(items, list):
        raise GridError(f"{what}: 'loads' must be a list")
    loads = []
    for k, item in enumerate(items):
        if not isinstance(item, dict):
            raise GridError(f"{what}: load {k} must be an object")
        keys = {"link", "fraction", "from", "to"}
        if set(item) != keys:
            bad = sorted(set(item) ^ keys)[0]
            raise GridError(f"{what}: load {k} must have link, fraction, from, to ({bad!r:.80})")
        try:
            loads.append(Load(item["link"], item["fraction"], item["from"], item["to"]))
        except GridError as err:
            raise GridError(f"{what}: load {k}: {err}") from None
    return LoadTrace(tuple(loads))


def read_load(path: str | os.PathLike) -> LoadTrace:
    """Read and validate a trace file (safely: :func:`gridcoll.network.gridfile.read_file`)."""
    from gridcoll.network.gridfile import read_file

    raw = read_file(path, "load trace", MAX_LOAD_BYTES)
    what = f"load trace {os.fspath(path)!r}"
    try:
        doc = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as err:
        raise GridError(f"{what} is not JSON: {err}") from None
    return loads_from_json(doc, what)


def cluster_links(grid, cluster: int | str) -> tuple[str, ...]:
    """The links to and from ``cluster`` (index or name), sorted: those on every route
    out of it plus those on every route into it (its access links: ``C3:up`` and
    ``C3:down`` on ``teragrid``); on a mesh of direct links with no such link, every
    link of a route to or from it."""
    names = [c.name for c in grid.clusters]
    if isinstance(cluster, str):
        if cluster not in names:
            raise GridError(f"grid {grid.name!r} has no cluster {cluster!r}")
        cluster = names.index(cluster)
    if not 0 <= cluster < len(names):
        raise GridError(f"grid {grid.name!r} has no cluster {cluster!r}")
    out = [set(r.links) for (a, b), r in grid.routes.items() if a == cluster and b != cluster]
    into = [set(r.links) for (a, b), r in grid.routes.items() if b == cluster and a != cluster]
    own = (set.intersection(*out) if out else set()) | (set.intersection(*into) if into else set())
    if not own:  # a mesh of direct links: every link of a route to or from the cluster
        own = set().union(*out, *into)
    return tuple(sorted(own))


def seed001_trace(
    grid,
    cluster: int | str = 2,
    seed: int = 0,
    duration: float = 3600.0,
    time_scale: float = 1.0,
) -> LoadTrace:
    """Seed 001's random load (sec. 3): the links to and from one cluster (C3, index 2,
    by default) carry a 50-90% load for 6-8 minutes, then none for 4-7 minutes, and so
    on until ``duration`` seconds; one draw per period, common to those links, from a
    ``numpy`` Generator seeded with ``seed``. Times are then multiplied by ``time_scale``.

    The trace starts with an off period.
    """
    links = cluster_links(grid, cluster)
    if not links:
        raise GridError(f"grid {grid.name!r}: cluster {cluster!r} has no wide-area link")
    rng = np.random.default_rng(seed)
    loads: list[Load] = []
    t = 0.0
    while True:
        t += float(rng.uniform(240.0, 420.0))  # off: 4-7 min
        if t >= duration:
            break
        on = float(rng.uniform(360.0, 480.0))  # on: 6-8 min
        f = float(rng.uniform(0.5, 0.9))
        end = min(t + on, duration)
        loads.extend(Load(name, f, t, end) for name in links)
        t += on
        if t >= duration:
            break
    trace = LoadTrace(tuple(loads))
    return trace if time_scale == 1.0 else trace.scaled(time_scale)


def load_from_spec(
    spec: str,
    grid,
    duration: float = 3600.0,
    time_scale: float = 1.0,
    cluster: int | str | None = None,
) -> LoadTrace:
    """A load trace named on the command line: ``seed001`` or ``seed001:SEED`` (the
    generator, :func:`seed001_trace`, over ``duration`` unscaled seconds, on the links
    of ``cluster``: C3's position, index 2, when None), or a ``gridcoll-load/1`` file;
    times multiplied by ``time_scale``; checked against ``grid``."""
    name, _, arg = spec.partition(":")
    if name == "seed001":
        try:
            seed = int(arg) if arg else 0
        except ValueError:
            raise GridError(f"--load seed001:SEED needs an integer seed, got {arg!r:.40}") from None
        where = 2 if cluster is None else cluster
        trace = seed001_trace(grid, where, seed=seed, duration=duration, time_scale=time_scale)
    else:
        trace = read_load(spec)
        if time_scale != 1.0:
            trace = trace.scaled(time_scale)
    trace.check(grid)
    return trace
