"""Models of the heterogeneous tree builders: seed 000's per-edge model on their trees.

Every builder of :mod:`gridcoll.algorithms.heuristics` (FEF, ECEF, look-ahead),
:mod:`~gridcoll.algorithms.hlot`, :mod:`~gridcoll.algorithms.tps`,
:mod:`~gridcoll.algorithms.mateescu`, :mod:`~gridcoll.algorithms.annealing`,
:mod:`~gridcoll.algorithms.phoenix` and :mod:`~gridcoll.algorithms.mpich_g2` sends the
message down one tree, built from the whole message (``TREES`` of its module). Its
model is ``T = (k-1) gamma(m) + lam(m)`` evaluated edge by edge on that same tree
(:func:`gridcoll.models.tree_model.tree_time`, seed 000 sec. 3.1.1 generalised): the
sender's serialisation, each edge's own latency and gap, and the shared links, so the
gap between what a tree's builder believed (its own metric) and what the network does
shows up between this model and the simulator, as seed 001 warns.

The model of ``name`` takes the builder's parameters (``segment_size`` for the
segmented variants; ``seed``, ``evaluations``, ``time_budget_s``, ``warm_start`` for
the randomised builders) and evaluates the memoised tree, so the tuner's segment-size
search builds each tree once. O(P) to compile the tree once, then O(E log h) numpy per
evaluation (:func:`~gridcoll.models.tree_model.tree_gamma_lambda`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from gridcoll.algorithms import annealing, heuristics, hlot, mateescu, mpich_g2, phoenix, tps
from gridcoll.models.single_layer import check_model_call
from gridcoll.models.tree_model import tree_time
from gridcoll.network.grid import Grid

__all__ = ["MODELS", "TREES", "tree_of"]

TREES: dict[str, Callable[..., Any]] = {
    **heuristics.TREES,
    **hlot.TREES,
    **tps.TREES,
    **mateescu.TREES,
    **annealing.TREES,
    **phoenix.TREES,
    **mpich_g2.TREES,
}
"""Tree family -> ``tree(grid, nbytes, root, **tree_params)``, as the builders use."""

SEGMENTED_ONLY = ("list",)
"""Families registered only with a segment size (``list`` pipelines by definition)."""


def tree_of(name: str, grid: Grid, nbytes: int, root: int = 0, **params: Any):
    """The tree builder ``name`` (segmented or not) sends down, with ``params`` minus
    ``segment_size``."""
    family = name.removesuffix("-segmented")
    tree_params = {k: v for k, v in params.items() if k != "segment_size"}
    return TREES[family](grid, nbytes, root, **tree_params)


def _model(name: str, segmented: bool) -> Callable[..., float]:
    def model(grid: Grid, nbytes: int, root: int = 0, *, itemsize: int = 1, **params: Any) -> float:
        seg = params.get("segment_size") if segmented else None
        if segmented and seg is None:
            raise TypeError(f"the {name} model needs segment_size")
        m = check_model_call(grid, nbytes, root, itemsize, seg)
        tree = tree_of(name, grid, nbytes, root, **params)
        return tree_time(grid, tree, nbytes, m)

    model.__name__ = f"{name.replace('-', '_')}_model"
    model.__doc__ = f"Per-edge model of the ``{name}`` builder's tree (seconds)."
    return model


def _models() -> dict[tuple[str, str], Callable[..., float]]:
    out = {}
    for family in TREES:
        if family not in SEGMENTED_ONLY:
            out[("bcast", family)] = _model(family, False)
            out[("bcast", f"{family}-segmented")] = _model(f"{family}-segmented", True)
        else:
            out[("bcast", family)] = _model(family, True)
    return out


MODELS: dict[tuple[str, str], Callable[..., float]] = _models()
"""The models of the heterogeneous tree builders, by ``(op, name)``."""
