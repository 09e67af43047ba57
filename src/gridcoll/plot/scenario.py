"""Seed 001's figure 8: each broadcast's completion time, one line per strategy.

:func:`plot_scenario` draws what ``gridcoll scenario`` computes
(:func:`gridcoll.experiments.adaptive.summarize`): completion time against broadcast number
(log scale: the strategies differ by orders of magnitude), the calls made while a load
was on shaded, so a reader sees at once where the static trees slow down and whether
the adaptive one stays low and comes back after each load.
"""

from __future__ import annotations

from pathlib import Path

from matplotlib.figure import Figure

__all__ = ["plot_scenario"]

_STYLES = {
    "mpich-g2": "tab:red",
    "mateescu": "tab:purple",
    "sa-clustered": "tab:orange",
    "adaptive": "tab:green",
    "static": "tab:blue",
}


def plot_scenario(summary: dict, path: str | Path, *, title: str | None = None) -> Path:
    """Draw ``summary``'s per-call times (``strategies[name]["times_s"]``) against the
    broadcast number, with the ``loaded`` calls shaded, and save it to ``path``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig = Figure(figsize=(9, 4.8), layout="constrained")
    ax = fig.add_subplot()
    loaded = summary["loaded"]
    shaded = False
    start = None
    for i, on in enumerate([*loaded, False]):
        if on and start is None:
            start = i
        elif not on and start is not None:
            ax.axvspan(
                start + 0.5, i + 0.5, color="0.88", zorder=0, label=None if shaded else "load on"
            )
            shaded, start = True, None
    for name, entry in summary["strategies"].items():
        times = entry["times_s"]
        ax.plot(
            range(1, len(times) + 1),
            times,
            marker=".",
            linewidth=1.4,
            color=_STYLES.get(name),
            label=name,
        )
    ax.set_yscale("log")
    ax.set_xlabel("broadcast number")
    ax.set_ylabel("completion time (s)")
    ax.set_xlim(0.5, len(loaded) + 0.5)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(loc="best", fontsize="small")
    if title:
        ax.set_title(title)
    fig.savefig(path, dpi=120)
    return path
