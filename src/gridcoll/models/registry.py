"""The table of models, by collective and name, and :func:`predict`.

Each model family module exports ``MODELS = {(op, name): model}``; this module merges
them. ``model(grid, nbytes, root=0, *, itemsize=1, **params) -> float`` has the same
signature as the builder registered under the same key and returns seconds.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from pathlib import Path

from gridcoll.algorithms.mpich import mpich_variant
from gridcoll.errors import UnknownAlgorithm
from gridcoll.models.allreduce import exchange_lower_bound
from gridcoll.models.tree_model import tree_lower_bound
from gridcoll.network.grid import Grid
from gridcoll.network.presets import get_grid

__all__ = ["FAMILIES", "MODELS", "get_model", "optimistic_s", "predict"]

Model = Callable[..., float]

FAMILIES = (
    "gridcoll.models.single_layer",
    "gridcoll.models.two_layer",
    "gridcoll.models.mpich",
    "gridcoll.models.multitree",
    "gridcoll.models.heterogeneous",
    "gridcoll.models.scatter",
    "gridcoll.models.gather",
    "gridcoll.models.allgather",
    "gridcoll.models.alltoall",
    "gridcoll.models.reduce",
    "gridcoll.models.allreduce",
    "gridcoll.models.barrier",
    "gridcoll.models.reduce_scatter",
    "gridcoll.models.scan",
    "gridcoll.models.packing",
    "gridcoll.models.multipath",
)
"""The modules whose ``MODELS`` dicts are merged, in this order."""


def _merge(families: tuple[str, ...]) -> dict[tuple[str, str], Model]:
    """Import every family module and merge their ``MODELS``.

    A family module that does not exist (yet) is left out; any other import error, and a
    key claimed by two families, is raised.
    """
    merged: dict[tuple[str, str], Model] = {}
    for family in families:
        try:
            module = importlib.import_module(family)
        except ModuleNotFoundError as err:
            if err.name != family:  # the module exists but one of its imports is missing
                raise
            continue
        for key, model in module.MODELS.items():
            if key in merged:
                raise RuntimeError(f"model {key!r} is defined twice (again in {family})")
            merged[key] = model
    return merged


MODELS: dict[tuple[str, str], Model] = _merge(FAMILIES)
"""Every model by ``(op, name)``; read-only."""


def get_model(op: str, name: str) -> Model:
    """The model of builder ``name`` of collective ``op``; UnknownAlgorithm lists choices."""
    try:
        return MODELS[(op, name)]
    except KeyError:
        names = ", ".join(n for o, n in MODELS if o == op) or "none"
        raise UnknownAlgorithm(
            f"no model for {op} algorithm {name!r}; models exist for: {names}"
        ) from None


def predict(
    grid: Grid | str | Path,
    op: str,
    name: str,
    nbytes: int,
    root: int = 0,
    *,
    itemsize: int = 1,
    **params: int,
) -> float:
    """Predicted completion time in seconds of builder ``name`` of ``op`` on ``grid``.

    ``grid`` is a :class:`Grid`, a preset name or a grid file. Raises
    :class:`UnknownAlgorithm` if no model is registered, and :class:`ParameterError`
    for arguments the builder would reject.

    Examples
    --------
    >>> round(predict("lan:4", "bcast", "flat", 1000) * 1e6, 3)
    104.0
    """
    return get_model(op, name)(get_grid(grid), nbytes, root, itemsize=itemsize, **params)


SINGLE_TREE = frozenset(
    {
        "flat",
        "flat-rendezvous",
        "chain",
        "chain-rendezvous",
        "binary",
        "binomial",
        "binomial-rendezvous",
        "magpie-original",
        "fef",
        "ecef",
        "look-ahead",
        "hlot",
        "tps",
        "mateescu",
        "sa",
        "sa-clustered",
        "phoenix-latency",
        "phoenix-bandwidth",
        "mpich-g2",
    }
)
"""Broadcast builders whose model is the per-edge ``lam(M)`` of one tree over every
rank (:func:`gridcoll.models.tree_model.tree_time`, one segment); their ``-segmented``
variants send the same tree's segments."""

SEGMENTED_TREE = frozenset(
    {
        "flat-segmented",
        "chain-segmented",
        "binomial-segmented",
        "dary-segmented",
        "magpie-segmented",
        "magpie-sequential",
        "fef-segmented",
        "ecef-segmented",
        "look-ahead-segmented",
        "hlot-segmented",
        "tps-segmented",
        "mateescu-segmented",
        "sa-segmented",
        "sa-clustered-segmented",
        "phoenix-latency-segmented",
        "phoenix-bandwidth-segmented",
        "mpich-g2-segmented",
        "list",
    }
)
"""Broadcast builders whose model is ``(k-1) gamma(m) + lam(m)`` on one tree over every
rank, or (``magpie-sequential``) adds a LAN phase to such a tree over the
coordinators; ``m`` is a parameter."""


def optimistic_s(
    grid: Grid, op: str, name: str, nbytes: int, root: int = 0, itemsize: int = 1
) -> float:
    """A lower bound on what the model of builder ``name`` can predict, for any
    parameters: a search whose incumbent is already below it need not run.

    Single-tree broadcasts (:data:`SINGLE_TREE`, :data:`SEGMENTED_TREE`, MPICH's
    binomial regime) get :func:`gridcoll.models.tree_model.tree_lower_bound`: every
    tree pushes every segment across one edge into each remote cluster, so
    ``T >= (k-1) G(m) + D(m)`` (the least gap into a cluster, the shortest path).
    MPICH's exchange allreduces (recursive doubling, Rabenseifner) get
    :func:`gridcoll.models.allreduce.exchange_lower_bound`, their busiest link's
    load. Every other model (the multi-tree, MPICH's scatter + allgather, the other
    collectives) gets 0.0: no bound, always searched. O(C^2 log M) numpy once per
    ``(M, root cluster)`` (memoised in ``grid.memo``), then O(1).

    The call is not checked (the search checks it); ``nbytes`` is the message size.
    """
    if op == "allreduce":
        return exchange_lower_bound(grid, name, nbytes, itemsize)
    if op != "bcast":
        return 0.0
    if name in SINGLE_TREE or (
        name == "mpich" and mpich_variant(grid.nranks, nbytes) == "binomial"
    ):
        return tree_lower_bound(grid, nbytes, root, segmented=False, itemsize=itemsize)
    if name in SEGMENTED_TREE:
        return tree_lower_bound(grid, nbytes, root, segmented=True, itemsize=itemsize)
    return 0.0
