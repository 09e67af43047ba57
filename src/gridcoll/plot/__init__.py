"""Pictures of gridcoll's results (matplotlib, written straight to files)."""

from gridcoll.plot.timeline import plot_timeline

__all__ = ["plot_timeline"]
