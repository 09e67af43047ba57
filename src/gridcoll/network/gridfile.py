"""The grid file format: JSON, documented in ``docs/grid-format.md``.

A grid file is one JSON object::

    {
      "format": "gridcoll-grid/1",
      "name": "two-sites",
      "clusters": [
        {"name": "A", "ranks": 4, "lan": {"latency": "20us", "bandwidth": "50MB/s"}},
        {"name": "B", "ranks": 4, "lan": {"latency": "20us", "bandwidth": "50MB/s"}}
      ],
      "routes": [
        {"from": "A", "to": "B", "plogp": {"latency": "10ms", "bandwidth": "1MB/s"}},
        {"from": "B", "to": "A", "plogp": {"latency": "12ms", "bandwidth": "2MB/s"}}
      ]
    }

A P-LogP table is either the shorthand ``{"latency", "bandwidth"[, "overhead", "gap0",
"copy_bandwidth"]}`` (affine costs, human units allowed) or the measured form
``{"L": seconds, "points": [{"m": bytes, "os": s, "or": s, "g": s}, ...]}`` with an
optional ``"complete": false`` for an interrupted measurement. A route may name shared
``"links"`` (declared in a top-level ``"links"`` list with ``"name"`` and either
``"bandwidth"`` or ``"g"`` points, and an optional ``"sharing"``: ``"fifo"`` or ``"fair"``);
a route without links gets a private link of its own. The top-level ``"link_sharing"``
(default ``"fifo"``) is the sharing of every link that does not name its own.
``"placement"`` (optional) lists the cluster name of every rank; or every cluster names
the ``"hosts"`` its ranks run on (glob patterns), and the runtime places the ranks by
host (:func:`gridcoll.network.grid.place_by_host`).
"""

from __future__ import annotations

import itertools
import json
import math
import os
import stat
from pathlib import Path
from typing import Any

from gridcoll.errors import GridcollError, GridError
from gridcoll.limits import (
    MAX_BANDWIDTH,
    MAX_CLUSTERS,
    MAX_FILE_BYTES,
    MAX_HOST_PATTERNS,
    MAX_JSON_DEPTH,
    MAX_MESSAGE_BYTES,
    MAX_NAME_CHARS,
    MAX_RANKS,
    MAX_TIME_S,
    MIN_BANDWIDTH,
)
from gridcoll.network.grid import FIFO, SHARING_MODES, Cluster, Grid, Link, Route
from gridcoll.network.plogp import PiecewiseLinear, PLogP
from gridcoll.units import parse_bandwidth, parse_time

__all__ = [
    "ENV_ALLOW_INCOMPLETE",
    "FORMAT",
    "PLOGP_FORMAT",
    "check_complete",
    "grid_from_dict",
    "grid_to_dict",
    "incomplete_tables",
    "load_grid",
    "load_plogp",
    "plogp_from_dict",
    "plogp_to_dict",
    "read_file",
    "read_json",
    "save_grid",
    "save_plogp",
]

FORMAT = "gridcoll-grid/1"
"""The format tag written into every grid file."""
PLOGP_FORMAT = "gridcoll-plogp/1"
"""The format tag of a P-LogP file (``gridcoll measure --out``)."""
ENV_ALLOW_INCOMPLETE = "GRIDCOLL_ALLOW_INCOMPLETE"
"""Environment variable: ``1`` lets grids with incomplete P-LogP tables be used."""


def _is_number(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


def _seconds(v: Any, what: str) -> float:
    """A time of a table: a number of seconds or a string with a unit, finite, in
    ``[0, MAX_TIME_S]`` (booleans are not numbers)."""
    if isinstance(v, bool) or not isinstance(v, int | float | str):
        raise GridError(f"{what} must be a number of seconds or a time such as '10ms', got {v!r}")
    t = parse_time(v)
    if not (math.isfinite(t) and 0 <= t <= MAX_TIME_S):
        raise GridError(f"{what} must be finite and >= 0 (at most {MAX_TIME_S:g} s), got {v!r}")
    return t


def _rate(v: Any, what: str) -> float:
    """A bandwidth: bytes/s or a string with a unit, in ``[MIN_BANDWIDTH, MAX_BANDWIDTH]``."""
    if isinstance(v, bool) or not isinstance(v, int | float | str):
        raise GridError(f"{what} must be a number of bytes/s or a rate such as '1MB/s', got {v!r}")
    r = parse_bandwidth(v)
    if not (math.isfinite(r) and MIN_BANDWIDTH <= r <= MAX_BANDWIDTH):
        raise GridError(
            f"{what} must be finite and between {MIN_BANDWIDTH:g} and {MAX_BANDWIDTH:g} B/s, "
            f"got {v!r}"
        )
    return r


def _name(v: Any, what: str) -> str:
    """A name: a non-empty printable string of at most MAX_NAME_CHARS characters."""
    if not isinstance(v, str) or not v or len(v) > MAX_NAME_CHARS or not v.isprintable():
        raise GridError(
            f"{what} must be a non-empty printable string of at most {MAX_NAME_CHARS} "
            f"characters, got {v!r:.80}"
        )
    return v


def _list(v: Any, what: str) -> list:
    if not isinstance(v, list):
        raise GridError(f"{what} must be a list, got {v!r:.80}")
    return v


GAP_SLACK = 1.05
"""A measured table may show ``os(m)`` or ``or(m)`` up to 5% (plus 1 us) above ``g(m)``:
measurement noise. Beyond it the table breaks seed 000's ``g(m) >= os(m), or(m)``."""


def _points(data: dict[str, Any]) -> PLogP:
    points = data["points"]
    if not isinstance(points, list) or not points:
        raise GridError("'points' must be a non-empty list")
    if len(points) > 4096:
        raise GridError(f"'points' holds {len(points)} entries; at most 4096")
    for i, p in enumerate(points):
        if not isinstance(p, dict):
            raise GridError(f"point {i} must be an object, got {p!r:.80}")
        missing = [k for k in ("m", "os", "or", "g") if k not in p]
        if missing:
            raise GridError(f"point {i} lacks {', '.join(missing)}")
        for k in ("m", "os", "or", "g"):
            v, top = p[k], (MAX_MESSAGE_BYTES if k == "m" else MAX_TIME_S)
            if not _is_number(v):
                raise GridError(f"point {i} (m={p['m']!r:.40}) {k}={v!r:.40} is not a number")
            if not (math.isfinite(v) and 0 <= v <= top):
                raise GridError(
                    f"point {i} (m={p['m']!r}) has {k}={v!r}: must be finite, >= 0 and <= {top:g}"
                )
        for k in ("os", "or"):
            if p[k] > GAP_SLACK * p["g"] + 1e-6:
                raise GridError(
                    f"point {i} (m={p['m']!r}) has {k}={p[k]!r} above g={p['g']!r}: the gap "
                    "covers the overheads (seed 000, sec. 2.1: g(m) >= os(m), or(m))"
                )
    sizes = [float(p["m"]) for p in points]
    if any(b <= a for a, b in itertools.pairwise(sizes)):
        raise GridError("the points' sizes must increase strictly")
    if "L" not in data:
        raise GridError("a measured table needs 'L' (seconds)")
    complete = data.get("complete", True)
    if not isinstance(complete, bool):
        raise GridError(f"'complete' must be true or false, got {complete!r}")
    g = [float(p["g"]) for p in points]
    if g[-1] <= 0:
        raise GridError("g(m) is 0 at every size: a link must take some time per byte")
    return PLogP.from_points(
        _seconds(data["L"], "latency L"),
        sizes,
        [float(p["os"]) for p in points],
        [float(p["or"]) for p in points],
        g,
        complete=complete,
    )


def _shorthand(data: dict[str, Any]) -> PLogP:
    overhead = _seconds(data.get("overhead", 0.0), "'overhead'")
    gap0 = _seconds(data.get("gap0", overhead), "'gap0'")
    if overhead > gap0:
        raise GridError(
            f"'overhead' {overhead!r} s is larger than 'gap0' {gap0!r} s: the gap covers "
            "the overheads (seed 000, sec. 2.1: g(m) >= os(m), or(m))"
        )
    copy = data.get("copy_bandwidth")
    return PLogP.linear(
        _seconds(data["latency"], "'latency'"),
        _rate(data["bandwidth"], "'bandwidth'"),
        g0=gap0,
        os0=overhead,
        or0=overhead,
        copy_bandwidth=math.inf if copy is None else _rate(copy, "'copy_bandwidth'"),
    )


def plogp_from_dict(data: Any, where: str) -> PLogP:
    """Parse one P-LogP table; ``where`` names it in error messages.

    Strict: numbers are JSON numbers (booleans are not) or strings with units, finite
    and within :mod:`gridcoll.limits`; the overheads stay below the gap."""
    if not isinstance(data, dict):
        raise GridError(f"{where}: a P-LogP table must be an object, got {data!r:.80}")
    try:
        if "points" in data:
            return _points(data)
        if "latency" in data and "bandwidth" in data:
            return _shorthand(data)
    except (GridcollError, KeyError, TypeError, ValueError, OverflowError) as err:
        raise GridError(f"{where}: {err}") from err
    raise GridError(f"{where}: needs either 'points' and 'L', or 'latency' and 'bandwidth'")


def plogp_to_dict(plogp: PLogP) -> dict[str, Any]:
    """The measured (exact) form of a P-LogP table."""
    out: dict[str, Any] = {
        "L": plogp.L,
        "points": [
            {"m": m, "os": plogp.os(m), "or": plogp.or_(m), "g": plogp.g(m)}
            for m in sorted(set(plogp.g_fn.sizes) | set(plogp.os_fn.sizes) | set(plogp.or_fn.sizes))
        ],
    }
    if not plogp.complete:
        out["complete"] = False
    return out


def _sharing(v: Any, what: str) -> str:
    """A sharing mode: ``"fifo"`` or ``"fair"`` (:data:`gridcoll.network.grid.SHARING_MODES`)."""
    if not isinstance(v, str) or v not in SHARING_MODES:
        raise GridError(
            f"{what} must be one of {', '.join(map(repr, SHARING_MODES))}, got {v!r:.80}"
        )
    return v


def _link_from_dict(raw: Any, index: int, default_sharing: str = FIFO) -> Link:
    """Parse one entry of the top-level ``links`` list (``default_sharing``: the file's
    ``link_sharing``, for a link that names none)."""
    if not isinstance(raw, dict) or "name" not in raw:
        raise GridError(f"link {index} must be an object with a 'name'")
    name = _name(raw["name"], f"link {index}'s 'name'")
    where = f"link {name!r}"
    sharing = _sharing(raw.get("sharing", default_sharing), f"{where}: 'sharing'")
    if "g" not in raw and "bandwidth" not in raw:
        raise GridError(f"{where} needs 'bandwidth' or 'g' points")
    try:
        if "g" in raw:
            points = _list(raw["g"], "'g'")
            if not points or len(points) > 4096:
                raise GridError("'g' must hold 1 to 4096 points")
            for i, p in enumerate(points):
                if not isinstance(p, dict) or not all(_is_number(p.get(k)) for k in "mg"):
                    raise GridError(f"point {i} must be an object with numbers 'm' and 'g'")
                if not (0 <= p["m"] <= MAX_MESSAGE_BYTES and 0 <= p["g"] <= MAX_TIME_S):
                    raise GridError(f"point {i} is out of range: {p!r:.80}")
            g = PiecewiseLinear(
                tuple(float(p["m"]) for p in points), tuple(float(p["g"]) for p in points)
            )
            if any(b <= a for a, b in itertools.pairwise(g.sizes)):
                raise GridError("the points' sizes must increase strictly")
            if any(b < a for a, b in itertools.pairwise(g.values)):
                raise GridError("g(m) must not decrease with m")
            if g.values[-1] <= 0:
                raise GridError("g(m) is 0 at every size: a link must take some time per byte")
        else:
            bandwidth = _rate(raw["bandwidth"], "'bandwidth'")
            g = PiecewiseLinear((0.0, 2.0**20), (0.0, 2.0**20 / bandwidth))
    except (GridcollError, KeyError, TypeError, ValueError, OverflowError) as err:
        detail = f"missing {err}" if isinstance(err, KeyError) else str(err)
        raise GridError(f"{where}: {detail}") from err
    return Link(name, g, sharing)


def _hosts(raw: Any, cluster: str) -> tuple[str, ...]:
    """A cluster's ``hosts``: a non-empty list of host names or glob patterns, each a
    printable string without spaces (:func:`gridcoll.network.grid.host_pattern`)."""
    where = f"cluster {cluster!r}: 'hosts'"
    if not isinstance(raw, list) or not raw:
        raise GridError(f"{where} must be a non-empty list of host names or patterns")
    out = []
    for i, pattern in enumerate(raw):
        _name(pattern, f"{where}[{i}]")
        if any(ch.isspace() for ch in pattern):
            raise GridError(f"{where}[{i}] {pattern!r:.80} holds a space: no host name does")
        out.append(pattern)
    return tuple(out)


def grid_from_dict(data: Any) -> Grid:
    """Build a :class:`Grid` from the parsed JSON object of a grid file.

    Strict (docs/grid-format.md, :mod:`gridcoll.limits`): names are printable strings
    and unique, ``ranks`` a positive integer (not a boolean), numbers finite and in
    range, ``placement`` a list of cluster names, every route named once, ``hosts`` on
    every cluster or none (never with ``placement``), no host in two clusters. Raises
    :class:`GridError` naming the first problem, before anything large is built.
    """
    if not isinstance(data, dict):
        raise GridError("a grid file must hold one JSON object")
    if data.get("format", FORMAT) != FORMAT:
        raise GridError(f"unknown grid format {data.get('format')!r:.80}; expected {FORMAT!r}")
    raw_clusters = data.get("clusters")
    if not isinstance(raw_clusters, list) or not raw_clusters:
        raise GridError("a grid file needs a non-empty 'clusters' list")
    if len(raw_clusters) > MAX_CLUSTERS:
        raise GridError(f"{len(raw_clusters)} clusters: at most {MAX_CLUSTERS} are supported")
    total = 0
    for i, c in enumerate(raw_clusters):
        if not isinstance(c, dict) or "name" not in c or "ranks" not in c or "lan" not in c:
            raise GridError(f"cluster {i} needs 'name', 'ranks' and 'lan'")
        name = _name(c["name"], f"cluster {i}'s 'name'")
        ranks = c["ranks"]
        if isinstance(ranks, bool) or not isinstance(ranks, int) or ranks < 1:
            raise GridError(
                f"cluster {name!r}: 'ranks' must be a positive integer, got {ranks!r:.40}"
            )
        total += ranks
        if total > MAX_RANKS:
            raise GridError(f"the clusters hold more than {MAX_RANKS} ranks, the most supported")
    clusters = []
    npatterns = 0
    for c in raw_clusters:
        lan = plogp_from_dict(c["lan"], f"cluster {c['name']!r} lan")
        site = c.get("site", "")
        if site != "":
            site = _name(site, f"cluster {c['name']!r}: 'site'")
        hosts = _hosts(c["hosts"], c["name"]) if "hosts" in c else ()
        npatterns += len(hosts)
        if npatterns > MAX_HOST_PATTERNS:
            raise GridError(f"the clusters name more than {MAX_HOST_PATTERNS} host patterns")
        clusters.append(Cluster(c["name"], c["ranks"], lan, site, hosts))
    index = {c.name: i for i, c in enumerate(clusters)}
    if len(index) != len(clusters):
        dup = next(c.name for k, c in enumerate(clusters) if index[c.name] != k)
        raise GridError(f"cluster name {dup!r} is used twice")

    default_sharing = _sharing(data.get("link_sharing", FIFO), "'link_sharing'")
    links: dict[str, Link] = {}
    for i, raw in enumerate(_list(data.get("links", []), "'links'")):
        link = _link_from_dict(raw, i, default_sharing)
        if link.name in links:
            raise GridError(f"link name {link.name!r} is used twice")
        links[link.name] = link

    routes: dict[tuple[int, int], Route] = {}
    for i, raw in enumerate(_list(data.get("routes", []), "'routes'")):
        if not isinstance(raw, dict):
            raise GridError(f"route {i} must be an object, got {raw!r:.80}")
        for end in ("from", "to"):
            if end not in raw:
                raise GridError(f"route {i} lacks '{end}' (a cluster name)")
            if not isinstance(raw[end], str) or raw[end] not in index:
                raise GridError(f"route {i}: '{end}' names unknown cluster {raw[end]!r:.80}")
        a, b = index[raw["from"]], index[raw["to"]]
        where = f"route {raw['from']!r} -> {raw['to']!r}"
        if a == b:
            raise GridError(f"{where} joins a cluster to itself")
        if (a, b) in routes:
            raise GridError(f"{where} is given twice")
        plogp = plogp_from_dict(raw.get("plogp"), where)
        names = tuple(_list(raw.get("links", []), f"{where}: 'links'"))
        for name in names:
            if not isinstance(name, str) or name not in links:
                raise GridError(f"{where} crosses unknown link {name!r:.80}")
        if not names:
            private = f"{raw['from']}->{raw['to']}"
            links.setdefault(private, Link(private, plogp.g_fn, default_sharing))
            names = (private,)
        routes[(a, b)] = Route(plogp, names)

    placement = None
    if "placement" in data:
        names = _list(data["placement"], "'placement'")
        for n in names:
            if not isinstance(n, str) or n not in index:
                raise GridError(f"placement names unknown cluster {n!r:.80}")
        placement = tuple(index[n] for n in names)
    grid_name = _name(data.get("name", "grid"), "'name'")
    return Grid(grid_name, tuple(clusters), routes, links, placement)


def grid_to_dict(grid: Grid) -> dict[str, Any]:
    """The JSON object of a grid file (the exact, measured form of every table)."""
    names = [c.name for c in grid.clusters]
    out: dict[str, Any] = {
        "format": FORMAT,
        "name": grid.name,
        "clusters": [
            {"name": c.name, "ranks": c.nranks, "lan": plogp_to_dict(c.lan)}
            | ({"site": c.site} if c.site else {})
            | ({"hosts": list(c.hosts)} if c.hosts else {})
            for c in grid.clusters
        ],
        "links": [
            {
                "name": link.name,
                "g": [{"m": m, "g": v} for m, v in zip(link.g.sizes, link.g.values, strict=True)],
            }
            | ({"sharing": link.sharing} if link.sharing != FIFO else {})
            for link in grid.links.values()
        ],
        "routes": [
            {
                "from": names[a],
                "to": names[b],
                "plogp": plogp_to_dict(r.plogp),
                "links": list(r.links),
            }
            for (a, b), r in sorted(grid.routes.items())
        ],
    }
    if grid.placement is not None:
        out["placement"] = [names[c] for c in grid.placement]
    return out


def incomplete_tables(grid: Grid) -> list[str]:
    """The names of ``grid``'s P-LogP tables marked incomplete (interrupted measurements)."""
    names = [c.name for c in grid.clusters]
    out = [f"cluster {c.name!r} lan" for c in grid.clusters if not c.lan.complete]
    out += [
        f"route {names[a]!r} -> {names[b]!r}"
        for (a, b), r in sorted(grid.routes.items())
        if not r.plogp.complete
    ]
    return out


def _allowed_by_env() -> bool:
    return os.environ.get(ENV_ALLOW_INCOMPLETE, "").strip().lower() in ("1", "true", "yes", "on")


def check_complete(grid: Grid, *, allow_incomplete: bool | None = None) -> Grid:
    """Return ``grid`` if every P-LogP table in it is complete; else raise GridError
    naming the incomplete ones, unless ``allow_incomplete`` (default: the environment
    variable ``GRIDCOLL_ALLOW_INCOMPLETE=1``) says to use the partial values anyway."""
    allow = _allowed_by_env() if allow_incomplete is None else allow_incomplete
    bad = incomplete_tables(grid)
    if bad and not allow:
        raise GridError(
            f"grid {grid.name!r}: {', '.join(bad)} "
            f'{"is" if len(bad) == 1 else "are"} marked incomplete ("complete": false: an '
            "interrupted measurement); measure again, or set GRIDCOLL_ALLOW_INCOMPLETE=1 "
            "to use the partial values"
        )
    return grid


def _depth(value: Any) -> int:
    """The nesting depth of parsed JSON, without recursion."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, depth = stack.pop()
        deepest = max(deepest, depth)
        if depth > MAX_JSON_DEPTH:
            break
        if isinstance(item, dict):
            stack += [(v, depth + 1) for v in item.values()]
        elif isinstance(item, list):
            stack += [(v, depth + 1) for v in item]
    return deepest


def read_file(
    path: str | os.PathLike,
    what: str,
    limit: int = MAX_FILE_BYTES,
    error: type[Exception] = GridError,
) -> bytes:
    """The bytes of a file the user named, read safely: only a regular file (never a
    FIFO or a device, which would block or never end), at most ``limit`` bytes. Raises
    ``error`` naming the file (``what``: "grid file", "log"...)."""
    shown = repr(os.fspath(path))
    try:
        info = os.stat(path)
        if not stat.S_ISREG(info.st_mode):
            raise error(f"{what} {shown} is not a regular file")
        if info.st_size > limit:
            raise error(f"{what} {shown} holds {info.st_size} bytes; at most {limit} are read")
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
        with os.fdopen(fd, "rb") as f:
            raw = f.read(limit + 1)
    except OSError as err:
        raise error(f"cannot read {what} {shown}: {err.strerror}") from err
    if len(raw) > limit:
        raise error(f"{what} {shown} is larger than {limit} bytes")
    return raw


def read_json(path: str | Path, what: str) -> Any:
    """The JSON document of a file the user named, read safely (:func:`read_file`: a
    regular file of at most :data:`~gridcoll.limits.MAX_FILE_BYTES`), nested at most
    :data:`~gridcoll.limits.MAX_JSON_DEPTH` deep. Raises :class:`GridError` naming the
    file (``what``: "grid file", ...)."""
    shown = repr(str(path))
    raw = read_file(path, what)
    try:
        data = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as err:
        raise GridError(f"{what} {shown} is not UTF-8 text") from err
    except json.JSONDecodeError as err:
        raise GridError(f"{what} {shown} is not valid JSON: {err}") from err
    except RecursionError as err:
        raise GridError(f"{what} {shown} is nested too deeply") from err
    if _depth(data) > MAX_JSON_DEPTH:
        raise GridError(f"{what} {shown} is nested more than {MAX_JSON_DEPTH} levels deep")
    return data


def load_grid(path: str | Path, *, allow_incomplete: bool | None = None) -> Grid:
    """Read a grid file. Raises :class:`GridError` naming the file and the problem.

    A grid holding a P-LogP table marked ``"complete": false`` is refused unless
    ``allow_incomplete`` (default: ``GRIDCOLL_ALLOW_INCOMPLETE=1``) is true.
    """
    path = Path(path)
    data = read_json(path, "grid file")
    try:
        return check_complete(grid_from_dict(data), allow_incomplete=allow_incomplete)
    except GridError as err:
        raise GridError(f"grid file {str(path)!r}: {err}") from err


def save_grid(grid: Grid, path: str | Path) -> None:
    """Write a grid file that :func:`load_grid` reads back to an equal grid."""
    Path(path).write_text(json.dumps(grid_to_dict(grid), indent=2) + "\n")


def save_plogp(
    tables: PLogP | dict[str, PLogP], path: str | Path, extra: dict[str, Any] | None = None
) -> None:
    """Write a P-LogP file: one table, or one per direction (``forward``, ``backward``).

    ``extra`` (the measurement's details) is stored under ``"measurement"``;
    :func:`load_plogp` ignores it.
    """
    out: dict[str, Any] = {"format": PLOGP_FORMAT}
    if isinstance(tables, PLogP):
        out |= plogp_to_dict(tables)
        out["complete"] = tables.complete
    else:
        for key, table in tables.items():
            out[key] = plogp_to_dict(table) | {"complete": table.complete}
    if extra:
        out["measurement"] = extra
    Path(path).write_text(json.dumps(out, indent=2) + "\n")


def load_plogp(
    path: str | Path, *, allow_incomplete: bool | None = None
) -> PLogP | dict[str, PLogP]:
    """Read a P-LogP file (``gridcoll measure --out``): a table, or a dict of them per
    direction. Raises GridError naming the file and the entry; a table marked
    incomplete is refused unless ``allow_incomplete`` (or
    ``GRIDCOLL_ALLOW_INCOMPLETE=1``)."""
    path = Path(path)
    data = read_json(path, "P-LogP file")
    where = f"P-LogP file {str(path)!r}"
    if not isinstance(data, dict):
        raise GridError(f"{where} must hold one JSON object")
    if data.get("format", PLOGP_FORMAT) != PLOGP_FORMAT:
        raise GridError(
            f"{where}: unknown format {data.get('format')!r}; expected {PLOGP_FORMAT!r}"
        )
    allow = _allowed_by_env() if allow_incomplete is None else allow_incomplete
    if "points" in data or "latency" in data:
        tables = {"": plogp_from_dict(data, where)}
    else:
        keys = [k for k in ("forward", "backward") if k in data]
        if not keys:
            raise GridError(f"{where}: needs 'L' and 'points', or 'forward'/'backward' tables")
        tables = {k: plogp_from_dict(data[k], f"{where}: {k}") for k in keys}
    for key, table in tables.items():
        if not table.complete and not allow:
            name = f"{where}: the {key} table" if key else where
            raise GridError(
                f'{name} is marked incomplete ("complete": false: an interrupted '
                "measurement); measure again, or set GRIDCOLL_ALLOW_INCOMPLETE=1 to use "
                "the partial values"
            )
    return tables.get("", tables)
