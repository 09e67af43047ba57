"""Measured against predicted: one point per collective and size of a call log.

:func:`plot_report` draws what ``gridcoll report`` summarises: for every row (an op
and a size on a grid) its median measured time against the model's prediction, on
log-log axes with the line ``measured = predicted`` and the 2x band either side, so
the calls the model misjudged stand out; one marker per collective.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from matplotlib.figure import Figure

from gridcoll.units import format_size

__all__ = ["plot_report"]

_MARKERS = ("o", "s", "^", "v", "D", "P", "X", "*")


def plot_report(rows: Iterable[Any], path: str | Path, *, title: str | None = None) -> Path:
    """Draw measured against predicted seconds and save it to ``path``.

    Parameters
    ----------
    rows : iterable
        Records with attributes ``op``, ``size``, ``measured_s`` and ``predicted_s``
        (seconds), such as :class:`gridcoll.runtime.record.Row`; rows without a
        prediction are left out.
    path : str or Path
        The image file (``.png``, ``.svg``, ``.pdf``); parent folders are created.
    title : str, optional
        The figure title.

    Returns
    -------
    Path
        ``path``.
    """
    series: dict[str, list[tuple[float, float, int]]] = defaultdict(list)
    for row in rows:
        if row.predicted_s and row.measured_s > 0:
            series[row.op].append((row.predicted_s, row.measured_s, row.size))
    fig = Figure(figsize=(6, 5), layout="constrained")
    ax = fig.subplots()
    every = [v for points in series.values() for p in points for v in p[:2]]
    lo, hi = (min(every) / 2, max(every) * 2) if every else (1e-6, 1.0)
    ax.plot([lo, hi], [lo, hi], color="black", linewidth=1, label="measured = predicted")
    for factor in (2.0, 0.5):
        ax.plot([lo, hi], [lo * factor, hi * factor], color="grey", linestyle=":", linewidth=1)
    for i, (op, points) in enumerate(sorted(series.items())):
        xs, ys, sizes = zip(*points, strict=True)
        ax.scatter(xs, ys, marker=_MARKERS[i % len(_MARKERS)], label=op, alpha=0.8)
        for x, y, size in zip(xs, ys, sizes, strict=True):
            ax.annotate(format_size(size), (x, y), fontsize="x-small", alpha=0.7)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(lo, hi)
    ax.set_ylim(lo, hi)
    ax.set_xlabel("predicted, s (the plan's model)")
    ax.set_ylabel("measured, s (median call, slowest rank)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize="small", title="dotted: 2x either way", title_fontsize="x-small")
    if title:
        ax.set_title(title)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    return path
