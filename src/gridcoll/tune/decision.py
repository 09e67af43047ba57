"""The decision of one call: :class:`Plan`, the chosen algorithm with its parameters and
prediction, and the :class:`Candidate` builders it was chosen from.

:func:`gridcoll.tune.plan` makes them (:mod:`gridcoll.tune.select`); :meth:`Plan.build`
turns one into the schedule of the chosen algorithm (:func:`build_schedule`), and
:meth:`Plan.explain` says in readable lines why it was chosen (the prediction against
the physical bound, the search's reasoning, the runners-up).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gridcoll.algorithms.registry import get_builder
from gridcoll.errors import GridcollError, ParameterError
from gridcoll.network.grid import Grid
from gridcoll.network.presets import get_grid
from gridcoll.schedule.ir import Schedule
from gridcoll.schedule.transform import trimmed
from gridcoll.units import format_size, format_time

__all__ = ["NATIVE", "ROOTED", "Candidate", "Plan", "build_schedule"]

NATIVE = "native"
"""The algorithm name of the MPI library's own collective (``PlanOptions(native=True)``)."""

ROOTED = ("bcast", "scatter", "gather", "reduce")
"""The collectives with a root; the others ignore ``root`` (their plans say none)."""


@dataclass(frozen=True)
class Candidate:
    """One builder with the best parameters the search found for it."""

    algorithm: str
    params: dict[str, Any]
    segment_size: int
    """The segment size ``m`` in bytes (the WAN one for sequential two-layer trees;
    the whole message for unsegmented builders)."""
    predicted_s: float
    reasoning: str = field(default="", compare=False)
    """How the search chose the parameters."""
    simulated_s: float | None = field(default=None, compare=False)
    """The simulator's time, for the candidates ``auto`` checked (:data:`VERIFY_TOP`)."""


@dataclass(frozen=True)
class Plan:
    """The choice for one call: algorithm, parameters, prediction and the alternatives.

    ``candidates`` holds one :class:`Candidate` per builder that could be modelled, best
    first; ``skipped`` names the builders that could not, with the reason.
    """

    op: str
    grid: str
    """The name of the grid planned on (with ``+host...`` when ``host_overhead`` was
    given: the effective grid)."""
    nbytes: int
    root: int
    itemsize: int
    algorithm: str
    params: dict[str, Any]
    segment_size: int
    predicted_s: float
    bound_s: float
    candidates: tuple[Candidate, ...]
    skipped: tuple[tuple[str, str], ...] = ()
    budget_s: float | None = None
    """The planning budget the plan was made with (None: no anytime builders)."""
    simulated_s: float | None = None
    """The simulator's time of this plan's schedule, when it was checked (``check``)."""
    host_overhead_s: float = 0.0
    """The per-message host overhead planned with (:meth:`Grid.with_host_overhead`)."""
    reason: str = ""
    """Why this algorithm, when it was not the search's choice (native, fixed, ...)."""
    pruned: tuple[tuple[str, float], ...] = ()
    """Builders not searched, with the lower bound on their model
    (:func:`gridcoll.models.optimistic_s`) that put them beyond the best found; each is
    also in ``skipped`` with the reason."""
    network: Grid | None = field(default=None, compare=False, repr=False)
    """The grid object planned on: :meth:`build` uses it when given no grid."""
    budget_note: str = ""
    """What the planning budget's deadline cut short or left out ('' when
    planning ended within it: then the plan is the nominal budget's, deterministic)."""
    counts: tuple[int, ...] | None = None
    """The uneven (``v``) form's bytes per block (:attr:`Call.counts`; ``nbytes``
    is then the largest, the blocks' stride); None: every block ``nbytes``."""

    @property
    def rooted(self) -> bool:
        """True for the collectives that have a root (:data:`ROOTED`)."""
        return self.op in ROOTED

    @property
    def native(self) -> bool:
        """True when the call goes to the MPI library's own collective."""
        return self.algorithm == NATIVE

    def build(self, grid: Grid | str | Path | None = None) -> Schedule:
        """The schedule of the chosen algorithm with the chosen parameters, on the grid
        the plan was made for (``grid``, if given, must be that grid: compared by name).

        Raises :class:`ParameterError` for another grid, :class:`GridcollError` for a
        native plan (the MPI library's collective has no gridcoll schedule).
        """
        if self.native:
            raise GridcollError(f"the native {self.op} has no gridcoll schedule")
        if grid is None:
            if self.network is None:
                raise ParameterError("this plan holds no grid: pass the grid to build on")
            grid = self.network
        grid = get_grid(grid)
        if grid.name != self.grid:
            raise ParameterError(
                f"this plan was made for grid {self.grid!r}, not {grid.name!r}; plan again"
            )
        return build_schedule(
            grid, self.op, self.algorithm, self.nbytes, self.root, self.itemsize, self.params,
            self.counts,
        )  # fmt: skip

    def explain(self) -> str:
        """Readable lines: the choice, its prediction against the bound, how the
        parameters were found, the runners-up and by how much they lose."""
        best = self.candidates[0]
        origin = f" from root {self.root}" if self.rooted else ""
        what = f"{format_size(self.nbytes)} ({self.nbytes} B)"
        if self.counts is not None:
            what = (
                f"{len(self.counts)} uneven blocks of {min(self.counts)}-{self.nbytes} B "
                f"({format_size(sum(self.counts))} in all)"
            )
        lines = [
            f"{self.op} of {what}{origin} on {self.grid}, itemsize {self.itemsize}",
            f"chosen: {_describe(best)}",
        ]
        if self.reason:
            lines.append(f"  because {self.reason}")
        if math.isfinite(self.predicted_s):
            lines.append(f"  predicted {format_time(self.predicted_s)}; {_versus_bound(self)}")
        if self.host_overhead_s and not self.native:
            lines.append(
                f"  planned with a host overhead of {format_time(self.host_overhead_s)} "
                "per message and side (the runtime's software layer)"
            )
        if best.simulated_s is not None:
            checked = sum(c.simulated_s is not None for c in self.candidates)
            what = (
                f"the fastest of the {checked} best predictions, checked on the simulator"
                if checked > 1
                else "checked on the simulator"
            )
            lines.append(f"  simulated {format_time(best.simulated_s)}: {what}")
        elif any(c.simulated_s is not None for c in self.candidates):
            lines.append(
                "  not simulated (too many messages for the check): its prediction beats "
                "the simulated times of the runners-up"
            )
        elif not self.native:
            lines.append("  ranked on the models alone (no candidate was simulated)")
        if best.reasoning:
            lines.append(f"  search: {best.reasoning}")
        if len(self.candidates) > 1:
            lines.append("runners-up:")
            for rank, other in enumerate(self.candidates[1:], start=2):
                lines.append(f"  {rank}. {_describe(other)}: {_loss(other, best)}")
        if self.budget_s is not None:
            lines.append(f"planning budget (--budget): {format_time(self.budget_s)} (nominal)")
        if self.budget_note:
            lines.append(f"  {self.budget_note}")
        if self.skipped:
            lines.append("skipped:")
            lines += [f"  {name}: {reason}" for name, reason in self.skipped]
        return "\n".join(lines)


def _describe(candidate: Candidate) -> str:
    params = ", ".join(f"{k}={v}" for k, v in candidate.params.items())
    return f"{candidate.algorithm}({params})"


def _versus_bound(p: Plan) -> str:
    if math.isnan(p.bound_s) and p.budget_note:
        return "the bound was not computed (planning budget)"
    if math.isnan(p.bound_s):
        return f"no bound is computed for {p.op}"
    if p.bound_s <= 0:
        return "bound 0 (one rank: nothing to send)"
    return f"bound {format_time(p.bound_s)}, {p.predicted_s / p.bound_s:.2f}x the bound"


def _loss(other: Candidate, best: Candidate) -> str:
    delta = other.predicted_s - best.predicted_s
    text = f"{format_time(other.predicted_s)} (+{format_time(delta)}"
    if best.predicted_s > 0:
        text += f", +{delta / best.predicted_s * 100:.1f}%"
    return text + ")"


def build_schedule(
    grid: Grid,
    op: str,
    algorithm: str,
    nbytes: int,
    root: int,
    itemsize: int,
    params: dict[str, Any],
    counts: tuple[int, ...] | None = None,
) -> Schedule:
    """The builder's schedule; with ``counts``, its uneven form
    (:func:`gridcoll.schedule.transform.trimmed`, blocks of stride ``nbytes``)."""
    schedule = get_builder(op, algorithm).build(grid, nbytes, root, itemsize=itemsize, **params)
    return schedule if counts is None else trimmed(schedule, counts)
