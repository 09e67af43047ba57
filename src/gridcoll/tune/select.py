"""Per-call selection: search every builder's parameters, predict, pick the fastest.

:func:`plan` is what a collective call asks before it runs: for each builder of the
collective (or the one named by ``algo``) it searches the tunable parameters with seed
000's heuristics (:func:`gridcoll.tune.search.heuristic_search`) on the builder's model
(:data:`gridcoll.models.MODELS`), and returns a :class:`Plan` holding every candidate,
fastest first, and the physical bound of the call for comparison.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gridcoll.algorithms.registry import Builder, get_builder, list_builders
from gridcoll.errors import GridcollError, ParameterError, Unfeasible, UnknownAlgorithm
from gridcoll.models.registry import MODELS
from gridcoll.models.single_layer import check_model_call
from gridcoll.network.bounds import broadcast_bound
from gridcoll.network.grid import Grid
from gridcoll.network.presets import get_grid
from gridcoll.schedule.ir import Schedule
from gridcoll.tune.cache import PlanCache
from gridcoll.tune.search import heuristic_search
from gridcoll.units import format_size, format_time

__all__ = ["Candidate", "Plan", "plan"]


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


@dataclass(frozen=True)
class Plan:
    """The choice for one call: algorithm, parameters, prediction and the alternatives.

    ``candidates`` holds one :class:`Candidate` per builder that could be modelled, best
    first; ``skipped`` names the builders that could not, with the reason.
    """

    op: str
    grid: str
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

    def build(self, grid: Grid | str | Path) -> Schedule:
        """The schedule of the chosen algorithm with the chosen parameters.

        Raises :class:`ParameterError` if ``grid`` is not the grid the plan was made for
        (compared by name).
        """
        grid = get_grid(grid)
        if grid.name != self.grid:
            raise ParameterError(
                f"this plan was made for grid {self.grid!r}, not {grid.name!r}; plan again"
            )
        builder = get_builder(self.op, self.algorithm)
        return builder.build(grid, self.nbytes, self.root, itemsize=self.itemsize, **self.params)

    def explain(self) -> str:
        """Readable lines: the choice, its prediction against the bound, how the
        parameters were found, the runners-up and by how much they lose."""
        best = self.candidates[0]
        lines = [
            f"{self.op} of {format_size(self.nbytes)} ({self.nbytes} B) from root {self.root} "
            f"on {self.grid}, itemsize {self.itemsize}",
            f"chosen: {_describe(best)}",
            f"  predicted {format_time(self.predicted_s)}; {_versus_bound(self)}",
        ]
        if best.reasoning:
            lines.append(f"  search: {best.reasoning}")
        if len(self.candidates) > 1:
            lines.append("runners-up:")
            for rank, other in enumerate(self.candidates[1:], start=2):
                lines.append(f"  {rank}. {_describe(other)}: {_loss(other, best)}")
        if self.skipped:
            lines.append("skipped:")
            lines += [f"  {name}: {reason}" for name, reason in self.skipped]
        return "\n".join(lines)


def _describe(candidate: Candidate) -> str:
    params = ", ".join(f"{k}={v}" for k, v in candidate.params.items())
    return f"{candidate.algorithm}({params})"


def _versus_bound(p: Plan) -> str:
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


def _segment_of(params: dict[str, Any], nbytes: int) -> int:
    m = params.get("segment_size", params.get("wan_segment_size", nbytes))
    return min(int(m), nbytes)


def _builders(op: str, algo: str) -> list[Builder]:
    """The builders to consider; UnknownAlgorithm for an unknown op or name."""
    if algo != "auto":
        return [get_builder(op, algo)]
    builders = list_builders(op)
    if not builders:
        ops = sorted({b.op for b in list_builders()})
        raise UnknownAlgorithm(f"no algorithms are registered for {op!r}; choose one of: {ops}")
    return builders


def _candidate(builder: Builder, grid: Grid, nbytes: int, root: int, itemsize: int) -> Candidate:
    """The builder's best parameters; raises GridcollError if it cannot be modelled."""
    model = MODELS.get((builder.op, builder.name))
    if model is None:
        raise Unfeasible("no model is registered")
    found = heuristic_search(
        grid, nbytes, root, model=model, params=builder.params, itemsize=itemsize
    )
    if not math.isfinite(found.predicted_s):
        raise Unfeasible(f"the model predicts {found.predicted_s!r}")
    m = _segment_of(found.params, nbytes)
    return Candidate(builder.name, found.params, m, found.predicted_s, found.reasoning)


def _make_plan(
    grid: Grid, op: str, nbytes: int, root: int, itemsize: int, builders: list[Builder]
) -> Plan:
    candidates, skipped = [], []
    for builder in builders:
        try:
            candidates.append(_candidate(builder, grid, nbytes, root, itemsize))
        except GridcollError as err:
            skipped.append((builder.name, str(err)))
    if not candidates:
        reasons = "; ".join(f"{name}: {why}" for name, why in skipped)
        raise Unfeasible(f"no {op} algorithm could be modelled on {grid.name!r}: {reasons}")
    candidates.sort(key=lambda c: c.predicted_s)  # stable: registry order breaks ties
    best = candidates[0]
    bound = broadcast_bound(grid, nbytes, root).time_s if op == "bcast" else math.nan
    return Plan(
        op,
        grid.name,
        nbytes,
        root,
        itemsize,
        best.algorithm,
        dict(best.params),
        best.segment_size,
        best.predicted_s,
        bound,
        tuple(candidates),
        tuple(skipped),
    )


def plan(
    grid: Grid | str | Path,
    op: str,
    nbytes: int,
    root: int = 0,
    *,
    algo: str = "auto",
    itemsize: int = 1,
    cache: PlanCache | None = None,
) -> Plan:
    """Choose the algorithm and parameters for one collective call.

    Parameters
    ----------
    grid : Grid, preset name or grid file
        Pass a :class:`Grid` object on hot paths: a name is parsed on every call.
    op : str
        The collective (``"bcast"``).
    nbytes, root : int
        The call: ``M`` bytes from ``root``.
    algo : str
        ``"auto"`` searches every builder of ``op``; a builder name only that one.
    itemsize : int
        The datatype extent: segment sizes are multiples of it.
    cache : PlanCache, optional
        A repeated call with the same grid, op, size, root, itemsize and algo returns
        the cached :class:`Plan` object.

    Returns
    -------
    Plan

    Raises
    ------
    UnknownAlgorithm
        For an ``op`` without builders or an unknown ``algo``.
    ParameterError
        For a root out of range, a size <= 0 or not a multiple of ``itemsize``.
    Unfeasible
        If no builder could be modelled (the reasons are listed).

    Notes
    -----
    Every builder with tunable parameters costs one heuristic search (about
    ``log2(M) |d|`` plus ``4 |d|`` per hill-climbing move model evaluations); the bound
    costs one max-flow per cluster. A cache hit costs a dictionary lookup.

    Examples
    --------
    >>> p = plan("magpie:8,1", "bcast", 2**20, algo="dary-segmented")
    >>> p.params["degree"], round(p.predicted_s, 2)
    (7, 1.06)
    """
    grid = get_grid(grid)
    builders = _builders(op, algo)
    check_model_call(grid, nbytes, root, itemsize)
    if cache is None:
        return _make_plan(grid, op, nbytes, root, itemsize, builders)
    key = PlanCache.key(grid, op, nbytes, root, itemsize, algo)
    found = cache.get(key)
    if found is None:
        found = _make_plan(grid, op, nbytes, root, itemsize, builders)
        cache.put(key, found)
    return found
