"""Seed 000's figure 2: ``os``, ``or`` and ``g`` against the message size."""

from __future__ import annotations

from pathlib import Path
from typing import Any

__all__ = ["plot_plogp"]


def plot_plogp(directions: dict[str, Any], path: str | Path, *, title: str = "") -> None:
    """One panel per direction: ``os(m)``, ``or(m)`` and ``g(m)`` in microseconds against
    ``m`` (log-log; the measured sizes marked). ``directions`` maps a label to a
    :class:`~gridcoll.measure.PLogPMeasurement` or its ``to_dict()`` object."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(5.5 * len(directions), 4.2), layout="constrained")
    axes = fig.subplots(1, len(directions), squeeze=False)[0]
    for ax, (label, d) in zip(axes, directions.items(), strict=True):
        data = d.to_dict() if hasattr(d, "to_dict") else d
        points = [p for p in data["points"] if p["m"] > 0]
        ms = [p["m"] for p in points]
        for key, name, marker in (
            ("os_s", "os(m)", "o"),
            ("or_s", "or(m)", "s"),
            ("g_s", "g(m)", "^"),
        ):
            ys = [max(p[key], 1e-9) * 1e6 for p in points]
            ax.plot(ms, ys, marker=marker, markersize=3, linewidth=1, label=name)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("message size m (bytes)")
        ax.set_ylabel("time (us)")
        L = data.get("L_s")
        ax.set_title(f"{label}: L = {L * 1e3:.3f} ms" if L is not None else label)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend()
    if title:
        fig.suptitle(title)
    fig.savefig(path, dpi=110)
