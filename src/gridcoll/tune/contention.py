"""Seed 002's all-to-all contention ratio, fitted on the simulator.

Seed 002 (sec. 5) predicts a direct all-to-all as ``T = lower + (upper - lower) gamma``
between Table 3's bounds, with a contention ratio ``gamma`` "constant and depend[ing]
only on the network characteristics", fitted to measurements. The models
(:mod:`gridcoll.models.alltoall`) take ``gamma`` as data; this module measures it on
the simulator, which sits below the models and above the tuner in
docs/architecture.md's layering, and hands it to them:

* :func:`simulated_contention` - ``gamma`` of one algorithm on one grid: the
  least-squares fit (:func:`~gridcoll.models.alltoall.fit_contention`) of the simulated
  times at :data:`~gridcoll.models.alltoall.CONTENTION_SIZES`, memoised in
  ``grid.memo``;
* :func:`contention_model` - a model with that ``gamma`` bound in, for the tuner's
  search (the builder itself takes no such parameter).
"""

from __future__ import annotations

import functools
from collections.abc import Callable

from gridcoll.algorithms.registry import get_builder
from gridcoll.errors import ParameterError
from gridcoll.models.alltoall import CONTENTION_SIZES, DEFAULT_CONTENTION, fit_contention
from gridcoll.network.grid import Grid
from gridcoll.simulate import simulate

__all__ = ["FITTED", "MAX_FIT_RANKS", "contention_model", "simulated_contention"]

MAX_FIT_RANKS = 128
"""Above this many ranks :func:`simulated_contention` returns
:data:`~gridcoll.models.alltoall.DEFAULT_CONTENTION` instead of simulating (``P^2``
messages per size)."""

FITTED = ("direct", "direct-rotated")
"""The all-to-all builders whose model takes a fitted ``contention``."""


def simulated_contention(grid: Grid, algorithm: str = "direct") -> float:
    """``gamma`` of ``algorithm`` (``direct`` or ``direct-rotated``) on ``grid``: the
    least-squares fit of its simulated times at ``CONTENTION_SIZES`` (seed 002, sec. 5;
    relative errors). Grids of more than :data:`MAX_FIT_RANKS` ranks, and grids where
    Table 3's bounds coincide at every size, get ``DEFAULT_CONTENTION`` (seed 002's
    2/3). Memoised in ``grid.memo``; cost four simulations of ``P^2`` messages.

    >>> from gridcoll.network import lan
    >>> round(simulated_contention(lan(4), "direct-rotated"), 3) >= 0
    True
    """

    def fit() -> float:
        if not 2 <= grid.nranks <= MAX_FIT_RANKS:
            return DEFAULT_CONTENTION
        build = get_builder("alltoall", algorithm).build
        times = [(b, simulate(build(grid, b), grid).total_s) for b in CONTENTION_SIZES]
        try:
            return fit_contention(grid, times)
        except ParameterError:
            return DEFAULT_CONTENTION

    return grid.memo.get("tune.contention", algorithm, fit, maxsize=8)


def contention_model(model: Callable[..., float], grid: Grid, op: str, name: str):
    """``model`` with ``contention=`` :func:`simulated_contention` bound in when
    ``(op, name)`` is a fitted all-to-all builder (:data:`FITTED`), else ``model``
    itself. The tuner searches with the result; the chosen parameters stay the
    builder's own."""
    if op != "alltoall" or name not in FITTED:
        return model
    return functools.partial(model, contention=simulated_contention(grid, name))
