"""Completion time against message size: one line per algorithm, plus the bound.

:func:`plot_sizes` draws what ``gridcoll demo`` and the benchmarks compute: for each grid
a log-log panel with one line per algorithm and the grid's physical bound (dashed), so
the gap between an algorithm and the limit can be read off at every size.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from matplotlib.figure import Figure

from gridcoll.units import format_size

__all__ = ["plot_sizes"]

_MARKERS = ("o", "s", "^", "v", "D", "P", "X", "*")


def plot_sizes(
    rows: Iterable[Any],
    path: str | Path,
    *,
    value: str = "simulated_s",
    title: str | None = None,
    reference: str | None = None,
) -> Path:
    """Draw completion time against message size and save it to ``path``.

    Parameters
    ----------
    rows : iterable
        Records with attributes ``grid``, ``algorithm``, ``nbytes``, ``bound_s`` and
        ``value`` (seconds), such as :class:`gridcoll.cli.demo.DemoRow`. Records whose
        ``value`` is None are skipped.
    path : str or Path
        The image file (``.png``, ``.svg``, ``.pdf``); parent folders are created.
    value : str
        The attribute to plot: ``simulated_s``, ``predicted_s`` or ``measured_s``.
    title : str, optional
        The figure title.
    reference : str, optional
        Another attribute (e.g. ``simulated_s`` beside measured values) drawn as a thin
        dotted line in each algorithm's colour.

    Returns
    -------
    Path
        ``path``.
    """
    series: dict[str, dict[str, list[tuple[int, float]]]] = defaultdict(lambda: defaultdict(list))
    refs: dict[str, dict[str, list[tuple[int, float]]]] = defaultdict(lambda: defaultdict(list))
    bounds: dict[str, dict[int, float]] = defaultdict(dict)
    for row in rows:
        seconds = getattr(row, value)
        if seconds is None:
            continue
        series[row.grid][row.algorithm].append((row.nbytes, seconds))
        bounds[row.grid][row.nbytes] = row.bound_s
        other = getattr(row, reference) if reference else None
        if other is not None:
            refs[row.grid][row.algorithm].append((row.nbytes, other))
    grids = list(series)
    fig = Figure(figsize=(5.5 * max(1, len(grids)), 4.5), layout="constrained")
    axes = fig.subplots(1, max(1, len(grids)), squeeze=False)[0]
    for ax, grid in zip(axes, grids, strict=False):
        for i, (algorithm, points) in enumerate(series[grid].items()):
            xs, ys = zip(*sorted(points), strict=True)
            (line,) = ax.plot(
                xs,
                ys,
                marker=_MARKERS[i % len(_MARKERS)],
                markersize=5,
                linewidth=2.5 if algorithm == "auto" else 1.5,
                alpha=0.7 if algorithm == "auto" else 1.0,
                label=algorithm,
            )
            if refs[grid].get(algorithm):
                rx, ry = zip(*sorted(refs[grid][algorithm]), strict=True)
                ax.plot(rx, ry, linestyle=":", linewidth=1.0, color=line.get_color())
        xs, ys = zip(*sorted(bounds[grid].items()), strict=True)
        ax.plot(xs, ys, linestyle="--", color="black", label="bound")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xticks(xs, [format_size(x) for x in xs])
        ax.set_xlabel("message size")
        what = value.removesuffix("_s")
        if reference:
            what += f"; dotted: {reference.removesuffix('_s')}"
        ax.set_ylabel(f"completion time, s ({what})")
        ax.set_title(grid)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize="small")
    if title:
        fig.suptitle(title)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    return path
