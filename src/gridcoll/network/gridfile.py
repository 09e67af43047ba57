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
``"bandwidth"`` or ``"g"`` points); a route without links gets a private link of its own.
``"placement"`` (optional) lists the cluster name of every rank.
"""

from __future__ import annotations

import itertools
import json
import os
from pathlib import Path
from typing import Any

from gridcoll.errors import GridcollError, GridError
from gridcoll.network.grid import Cluster, Grid, Link, Route
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
    "save_grid",
    "save_plogp",
]

FORMAT = "gridcoll-grid/1"
"""The format tag written into every grid file."""
PLOGP_FORMAT = "gridcoll-plogp/1"
"""The format tag of a P-LogP file (``gridcoll measure --out``)."""
ENV_ALLOW_INCOMPLETE = "GRIDCOLL_ALLOW_INCOMPLETE"
"""Environment variable: ``1`` lets grids with incomplete P-LogP tables be used."""


def plogp_from_dict(data: Any, where: str) -> PLogP:
    """Parse one P-LogP table; ``where`` names it in error messages."""
    if not isinstance(data, dict):
        raise GridError(f"{where}: a P-LogP table must be an object, got {data!r}")
    try:
        if "points" in data:
            points = data["points"]
            if not isinstance(points, list) or not points:
                raise GridError(f"{where}: 'points' must be a non-empty list")
            for i, p in enumerate(points):
                if not isinstance(p, dict):
                    raise GridError(f"{where}: point {i} must be an object, got {p!r}")
                missing = [k for k in ("m", "os", "or", "g") if k not in p]
                if missing:
                    raise GridError(f"{where}: point {i} lacks {', '.join(missing)}")
                for k in ("m", "os", "or", "g"):
                    v = p[k]
                    if isinstance(v, bool) or not isinstance(v, int | float):
                        raise GridError(
                            f"{where}: point {i} (m={p['m']!r}) {k}={v!r} is not a number"
                        )
                    if not v >= 0 or v != v or v in (float("inf"), float("-inf")):
                        raise GridError(
                            f"{where}: point {i} (m={p['m']!r}) has {k}={v!r}: must be finite "
                            "and >= 0"
                        )
            if "L" not in data:
                raise GridError(f"{where}: a measured table needs 'L' (seconds)")
            complete = data.get("complete", True)
            if not isinstance(complete, bool):
                raise GridError(f"{where}: 'complete' must be true or false, got {complete!r}")
            return PLogP.from_points(
                float(data["L"]),
                [float(p["m"]) for p in points],
                [float(p["os"]) for p in points],
                [float(p["or"]) for p in points],
                [float(p["g"]) for p in points],
                complete=complete,
            )
        if "latency" in data and "bandwidth" in data:
            overhead = parse_time(data.get("overhead", 0.0))
            return PLogP.linear(
                parse_time(data["latency"]),
                parse_bandwidth(data["bandwidth"]),
                g0=parse_time(data.get("gap0", overhead)),
                os0=overhead,
                or0=overhead,
                copy_bandwidth=parse_bandwidth(data.get("copy_bandwidth", float("inf"))),
            )
    except GridError as err:
        raise GridError(f"{where}: {err}") from err
    except (KeyError, TypeError, ValueError, GridcollError) as err:
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


def _link_from_dict(raw: Any, index: int) -> Link:
    """Parse one entry of the top-level ``links`` list."""
    if not isinstance(raw, dict) or "name" not in raw:
        raise GridError(f"link {index} must be an object with a 'name'")
    where = f"link {raw['name']!r}"
    if "g" not in raw and "bandwidth" not in raw:
        raise GridError(f"{where} needs 'bandwidth' or 'g' points")
    try:
        if "g" in raw:
            points = raw["g"]
            g = PiecewiseLinear(
                tuple(float(p["m"]) for p in points), tuple(float(p["g"]) for p in points)
            )
            if any(b < a for a, b in itertools.pairwise(g.values)):
                raise GridError("g(m) must not decrease with m")
        else:
            bandwidth = parse_bandwidth(raw["bandwidth"])
            g = PiecewiseLinear((0.0, 2.0**20), (0.0, 2.0**20 / bandwidth))
    except (GridcollError, KeyError, TypeError, ValueError, ZeroDivisionError) as err:
        detail = f"missing {err}" if isinstance(err, KeyError) else str(err)
        raise GridError(f"{where}: {detail}") from err
    return Link(str(raw["name"]), g)


def grid_from_dict(data: Any) -> Grid:
    """Build a :class:`Grid` from the parsed JSON object of a grid file."""
    if not isinstance(data, dict):
        raise GridError("a grid file must hold one JSON object")
    if data.get("format", FORMAT) != FORMAT:
        raise GridError(f"unknown grid format {data.get('format')!r}; expected {FORMAT!r}")
    raw_clusters = data.get("clusters")
    if not isinstance(raw_clusters, list) or not raw_clusters:
        raise GridError("a grid file needs a non-empty 'clusters' list")
    clusters = []
    for i, c in enumerate(raw_clusters):
        if not isinstance(c, dict) or "name" not in c or "ranks" not in c or "lan" not in c:
            raise GridError(f"cluster {i} needs 'name', 'ranks' and 'lan'")
        if not isinstance(c["ranks"], int):
            raise GridError(f"cluster {c['name']!r}: 'ranks' must be an integer")
        lan = plogp_from_dict(c["lan"], f"cluster {c['name']!r} lan")
        clusters.append(Cluster(str(c["name"]), c["ranks"], lan, str(c.get("site", ""))))
    index = {c.name: i for i, c in enumerate(clusters)}

    links: dict[str, Link] = {}
    for i, raw in enumerate(data.get("links", [])):
        link = _link_from_dict(raw, i)
        links[link.name] = link

    routes: dict[tuple[int, int], Route] = {}
    for i, raw in enumerate(data.get("routes", [])):
        try:
            a, b = index[raw["from"]], index[raw["to"]]
        except KeyError as err:
            raise GridError(f"route {i} names unknown cluster {err.args[0]!r}") from err
        where = f"route {raw['from']!r} -> {raw['to']!r}"
        plogp = plogp_from_dict(raw.get("plogp"), where)
        names = tuple(raw.get("links", ()))
        if not names:
            private = f"{raw['from']}->{raw['to']}"
            links.setdefault(private, Link(private, plogp.g_fn))
            names = (private,)
        routes[(a, b)] = Route(plogp, names)

    placement = None
    if "placement" in data:
        try:
            placement = tuple(index[name] for name in data["placement"])
        except KeyError as err:
            raise GridError(f"placement names unknown cluster {err.args[0]!r}") from err
    return Grid(str(data.get("name", "grid")), tuple(clusters), routes, links, placement)


def grid_to_dict(grid: Grid) -> dict[str, Any]:
    """The JSON object of a grid file (the exact, measured form of every table)."""
    names = [c.name for c in grid.clusters]
    out: dict[str, Any] = {
        "format": FORMAT,
        "name": grid.name,
        "clusters": [
            {"name": c.name, "ranks": c.nranks, "lan": plogp_to_dict(c.lan)}
            | ({"site": c.site} if c.site else {})
            for c in grid.clusters
        ],
        "links": [
            {
                "name": link.name,
                "g": [{"m": m, "g": v} for m, v in zip(link.g.sizes, link.g.values, strict=True)],
            }
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


def load_grid(path: str | Path, *, allow_incomplete: bool | None = None) -> Grid:
    """Read a grid file. Raises :class:`GridError` naming the file and the problem.

    A grid holding a P-LogP table marked ``"complete": false`` is refused unless
    ``allow_incomplete`` (default: ``GRIDCOLL_ALLOW_INCOMPLETE=1``) is true.
    """
    path = Path(path)
    try:
        data = json.loads(path.read_text())
    except OSError as err:
        raise GridError(f"cannot read grid file {str(path)!r}: {err.strerror}") from err
    except json.JSONDecodeError as err:
        raise GridError(f"grid file {str(path)!r} is not valid JSON: {err}") from err
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
    try:
        data = json.loads(path.read_text())
    except OSError as err:
        raise GridError(f"cannot read P-LogP file {str(path)!r}: {err.strerror}") from err
    except json.JSONDecodeError as err:
        raise GridError(f"P-LogP file {str(path)!r} is not valid JSON: {err}") from err
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
