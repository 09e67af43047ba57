"""Gantt chart of a simulated collective: which resource carries which segment when.

One row per shared resource that carried traffic (WAN links first, then gateways, then
NICs), bars coloured by segment index, and each rank's completion time: a marker on its
NIC rows and a strip of all ranks below the chart. Drawn with matplotlib's Agg canvas
directly, so importing this module changes no global matplotlib state.
"""

from __future__ import annotations

import re
from os import PathLike
from pathlib import Path

from matplotlib import colormaps
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.cm import ScalarMappable
from matplotlib.colors import Normalize
from matplotlib.figure import Figure

from gridcoll.errors import ParameterError
from gridcoll.network.grid import Grid
from gridcoll.simulate.executor import SimResult
from gridcoll.simulate.timeline import RESOURCE_KINDS, Timeline

__all__ = ["MAX_ROWS", "plot_timeline", "resource_label", "resource_rows"]

MAX_ROWS = 40
"""At most this many resources are drawn: the most used ones (by busy time)."""

_CONTROL_COLOUR = "0.55"  # control messages (rendezvous handshakes) carry no segment


def resource_label(resource: tuple[str, int | str], grid: Grid) -> str:
    """A row label: ``link c0->c1``, ``gw_out c0``, ``nic_in 5``."""
    kind, key = resource
    if kind in ("gw_out", "gw_in"):
        return f"{kind} {grid.clusters[key].name}"
    return f"{kind} {key}"


def resource_rows(
    timeline: Timeline, max_rows: int = MAX_ROWS
) -> tuple[list[tuple[str, int | str]], int]:
    """The resources to draw, top row first, and how many carried traffic in all.

    The ``max_rows`` busiest resources are kept, then ordered WAN links, gateways
    (out, in), NICs (out, in), and by name or number within a kind.
    """
    if max_rows < 1:
        raise ParameterError(f"max_rows must be >= 1, got {max_rows!r}")
    used = timeline.by_resource
    busy = {res: sum(iv.end - iv.start for iv in ivs) for res, ivs in used.items()}
    chosen = sorted(busy, key=lambda res: -busy[res])[:max_rows]
    order = {kind: i for i, kind in enumerate(RESOURCE_KINDS)}
    chosen.sort(key=lambda res: (order.get(res[0], len(order)), _natural(str(res[1]))))
    return chosen, len(used)


def _natural(text: str) -> tuple:
    """Sort key that orders ``c2->c3`` before ``c10->c11``."""
    return tuple(int(part) if part.isdigit() else part for part in re.split(r"(\d+)", text))


def plot_timeline(
    result: SimResult,
    grid: Grid,
    path: str | PathLike[str],
    *,
    max_rows: int = MAX_ROWS,
    title: str | None = None,
) -> Path:
    """Draw ``result``'s timeline as a Gantt chart and write it to ``path`` (PNG).

    Parameters
    ----------
    result : SimResult
        From ``simulate(schedule, grid, record=True)``.
    grid : Grid
        The grid it ran on (for cluster names).
    path : path-like
        The PNG file to write.
    max_rows : int
        Draw at most this many resources, the most used; the title says when some are
        left out.
    title : str, optional
        First title line; default: the grid's name.

    Returns
    -------
    Path
        ``path``.

    Raises
    ------
    ParameterError
        If the result holds no timeline (it was simulated without ``record=True``).
    """
    timeline = result.timeline
    if timeline is None:
        raise ParameterError("plot_timeline needs a result of simulate(..., record=True)")
    rows, nused = resource_rows(timeline, max_rows)
    scale, unit = (1e3, "ms") if result.total_s < 1.0 else (1.0, "s")
    nsegments = 1 + max((max(m.segments) for m in timeline.messages if m.segments), default=0)
    cmap = colormaps["viridis"]
    norm = Normalize(vmin=0, vmax=max(nsegments - 1, 1))

    height = 2.5 + 0.28 * max(len(rows), 4)
    fig = Figure(figsize=(12, height), layout="constrained")
    FigureCanvasAgg(fig)
    gantt, ranks = fig.subplots(
        2, 1, sharex=True, height_ratios=(max(len(rows), 4), 4), squeeze=True
    )
    _draw_gantt(gantt, timeline, rows, grid, scale, cmap, norm)
    _draw_completion(gantt, ranks, result, rows, scale)

    head = title or f"grid {grid.name}"
    shown = (
        f"all {nused} resources that carried traffic"
        if nused <= len(rows)
        else f"the {len(rows)} most used of {nused} resources that carried traffic"
    )
    gantt.set_title(
        f"{head}: {result.nmessages} messages, total {result.total_s * scale:.4g} {unit}\n"
        f"rows: {shown}"
    )
    ranks.set_xlabel(f"time ({unit})")
    colourbar = fig.colorbar(ScalarMappable(norm=norm, cmap=cmap), ax=gantt, pad=0.01)
    colourbar.set_label("segment index (grey: control)")
    path = Path(path)
    fig.savefig(path, format="png", dpi=110)
    return path


def _draw_gantt(ax, timeline, rows, grid, scale, cmap, norm) -> None:
    """One row of bars per resource, top row first."""
    messages = timeline.messages
    by_resource = timeline.by_resource
    for y, resource in enumerate(rows):
        spans, colours = [], []
        for iv in by_resource[resource]:
            spans.append((iv.start * scale, (iv.end - iv.start) * scale))
            segments = messages[iv.message].segments
            colours.append(cmap(norm(segments[0])) if segments else _CONTROL_COLOUR)
        ax.broken_barh(spans, (y - 0.4, 0.8), facecolors=colours, linewidth=0)
    ax.set_yticks(range(len(rows)), [resource_label(r, grid) for r in rows], fontsize=7)
    ax.set_ylim(len(rows) - 0.5, -0.5)  # first row on top
    ax.grid(axis="x", alpha=0.3)


def _draw_completion(gantt, ax, result, rows, scale) -> None:
    """Completion markers: on each rank's NIC rows, and every rank in the strip below."""
    finish = result.finish_s
    xs, ys = [], []
    for y, (kind, key) in enumerate(rows):
        if kind in ("nic_out", "nic_in") and isinstance(key, int) and key < len(finish):
            xs.append(finish[key] * scale)
            ys.append(y)
    if xs:
        gantt.scatter(xs, ys, marker="D", s=14, color="crimson", zorder=3, label="rank done")
        gantt.legend(loc="lower right", fontsize=7)
    ax.scatter([f * scale for f in finish], range(len(finish)), marker="|", s=20, color="crimson")
    for axis in (gantt, ax):
        axis.axvline(result.total_s * scale, color="black", linestyle="--", linewidth=0.8)
    ax.set_ylabel("rank done", fontsize=8)
    ax.set_ylim(len(finish) - 0.5 if finish else 0.5, -0.5)
    ax.grid(axis="x", alpha=0.3)
