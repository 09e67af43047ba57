"""Phoenix (seed 004): figures 6-9 from :mod:`gridcoll.experiments.phoenix_simulated`' results.

:func:`plot_phoenix` draws whichever experiment a result ``dict`` holds:

* ``latency`` (fig. 6): each process's arrival time of a 1-byte broadcast, processes
  sorted by it, one line per implementation;
* ``bandwidth`` (fig. 7): bandwidth ``nbytes * P / time`` against the message size;
* ``reduction`` (fig. 8): reduction time against the array size;
* ``transition`` (fig. 9): each 4 MB broadcast's completion time against the wall
  time it started at, the leave and rejoin times marked, the stable time and the
  recovery line (``RECOVERY_TOLERANCE`` above it) drawn.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from matplotlib.figure import Figure

from gridcoll.experiments.phoenix_simulated import RECOVERY_TOLERANCE
from gridcoll.units import format_size

__all__ = ["plot_phoenix"]

_LABELS = {
    "mpich_like": "MPICH-like",
    "magpie_like": "MagPIe-like",
    "list": "List",
    "ours": "gridcoll.phoenix",
    "ours_simulated": "gridcoll.phoenix (simulated)",
}
_STYLE = {
    "mpich_like": "v--",
    "magpie_like": "s--",
    "list": "^--",
    "ours": "o-",
    "ours_simulated": "d:",
}


def _sizes_axis(ax: Any, sizes: list[int]) -> None:
    ax.set_xscale("log", base=2)
    ax.set_xticks(sizes)
    ax.set_xticklabels([format_size(s) for s in sizes], rotation=30)


def plot_phoenix(result: dict, path: str | Path) -> Path:
    """Draw the figure of one experiment ``result`` and save it to ``path``.

    Parameters
    ----------
    result : dict
        What :data:`gridcoll.experiments.phoenix_simulated.EXPERIMENTS` returns.
    path : str or Path
        ``.png``, ``.svg`` or ``.pdf``; parent folders are created.

    Returns
    -------
    Path
        ``path``.

    Raises
    ------
    ValueError
        If ``result`` names no known experiment.
    """
    kind = result.get("experiment")
    fig = Figure(figsize=(7.0, 4.2), layout="constrained")
    ax = fig.add_subplot()
    title = f"{result['grid']} ({result['nprocs']} processes)"
    if result.get("mode") == "measure":
        labels = {**_LABELS, "ours": "gridcoll.phoenix (measured)"}
    else:
        labels = _LABELS
    if kind == "latency":
        for name, times in result["arrivals_ms"].items():
            ax.plot(range(1, len(times) + 1), times, _STYLE[name][0], ms=2, label=labels[name])
        ax.set_xlabel("process (sorted by arrival)")
        ax.set_ylabel("arrival of a 1-byte broadcast (ms)")
        ax.set_title(f"Fig. 6: 1-byte broadcast, {title}")
    elif kind in ("bandwidth", "reduction"):
        sizes = [row["nbytes"] for row in result["rows"]]
        key = "bandwidth_MBps" if kind == "bandwidth" else "time_s"
        for name in result["rows"][0][key]:
            ys = [row[key][name] for row in result["rows"]]
            ax.plot(sizes, ys, _STYLE[name], label=labels[name])
        _sizes_axis(ax, sizes)
        if kind == "bandwidth":
            ax.set_ylim(bottom=0)
            ax.set_ylabel("bandwidth, bytes x P / time (MB/s)")
            ax.set_title(f"Fig. 7: broadcast bandwidth, {title}")
        else:
            ax.set_yscale("log")
            ax.set_ylabel("reduction time (s)")
            ax.set_title(f"Fig. 8: reduction, {title}")
        ax.set_xlabel("message size")
    elif kind == "transition":
        done = [b for b in result["broadcasts"] if b["time_s"] is not None]
        ax.plot([b["start_s"] for b in done], [b["time_s"] for b in done], "o-", ms=3)
        gone = "crash" if result.get("crash") else "leave"
        for key, label in (("leave", gone), ("rejoin", "rejoin")):
            at = result["changes_s"][key]
            ax.axvline(at, color="grey", ls=":")
            ax.annotate(label, (at, 1), xycoords=("data", "axes fraction"), va="top")
        if result["stable_s"] is not None:
            ax.axhline(result["stable_s"], color="grey", lw=0.8, ls="--", label="stable")
            back = result["stable_s"] * (1 + RECOVERY_TOLERANCE)
            pct = f"{RECOVERY_TOLERANCE:.0%}"
            ax.axhline(back, color="tab:red", lw=0.8, ls="--", label=f"stable + {pct} (recovered)")
        ax.set_ylim(bottom=0)
        ax.set_xlabel("wall time at the broadcast's start (s)")
        ax.set_ylabel("completion time (s)")
        size = format_size(result["nbytes"])
        how = ", measured" if result.get("mode") == "measure" else ""
        ax.set_title(f"Fig. 9: {size} broadcasts, half the processes {gone} and rejoin{how}")
    else:
        raise ValueError(f"no figure for experiment {kind!r}")
    ax.grid(True, alpha=0.3)
    if ax.get_legend_handles_labels()[0]:
        ax.legend()
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=120)
    return out
