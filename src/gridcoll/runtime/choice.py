"""Which algorithm each collective of a :class:`gridcoll.Comm` runs (pure Python: the
CLI checks ``--algo`` with it without starting MPI)."""

from __future__ import annotations

import json as _json
from collections.abc import Mapping

from gridcoll.algorithms.registry import get_builder, list_builders
from gridcoll.errors import ParameterError, UnknownAlgorithm
from gridcoll.schedule.ir import OPERATIONS
from gridcoll.tune import NATIVE

__all__ = ["NATIVE", "algo_table", "params_from_json"]


def algo_table(
    algo: str | Mapping[str, str], params: Mapping | None
) -> dict[str, tuple[str, dict | None]]:
    """Per collective: (algorithm, fixed parameters or None), from ``Comm``'s arguments.

    ``algo`` is ``"auto"``, ``"native"``, a builder name (used by every collective that
    has a builder of that name, the others ``auto``; ``params`` are its parameters), or
    a mapping ``{op: name}`` (ops not named: ``auto``; ``params`` then maps ops to their
    parameters). Raises :class:`UnknownAlgorithm` or :class:`ParameterError`.
    """
    table: dict[str, tuple[str, dict | None]] = {op: ("auto", None) for op in OPERATIONS}
    if isinstance(algo, Mapping):
        unknown = sorted(set(algo) - set(OPERATIONS))
        if unknown:
            raise ParameterError(f"algo= names unknown collectives {unknown}; use {OPERATIONS}")
        params = params or {}
        if not isinstance(params, Mapping) or set(params) - set(algo):
            raise ParameterError("with algo={op: name}, params= must map those ops to dicts")
        for op, name in algo.items():
            table[op] = _one(op, name, params.get(op))
        return table
    if not isinstance(algo, str):
        raise ParameterError(f"algo must be a name or a mapping op -> name, got {algo!r}")
    if algo in ("auto", NATIVE):
        if params is not None:
            raise ParameterError(f"params= needs a named algorithm, not algo={algo!r}")
        return {op: (algo, None) for op in OPERATIONS}
    ops = [op for op in OPERATIONS if any(b.name == algo for b in list_builders(op))]
    if not ops:
        names = sorted({b.name for b in list_builders()})
        raise UnknownAlgorithm(
            f"unknown algorithm {algo!r}: no collective (bcast, scatter, ...) has it; "
            f"choose one of: {', '.join(names)}"
        )
    for op in ops:
        table[op] = (algo, dict(params) if params is not None else None)
    return table


def _one(op: str, name: str, params: Mapping | None) -> tuple[str, dict | None]:
    if name in ("auto", NATIVE):
        if params is not None:
            raise ParameterError(f"params= needs a named algorithm, not {op}={name!r}")
        return name, None
    get_builder(op, name)  # UnknownAlgorithm lists the choices
    return name, dict(params) if params is not None else None


def params_from_json(text: str | None) -> dict | None:
    """Parse a ``--params`` JSON object (the launcher's and the worker's); None if empty."""
    if not text:
        return None
    try:
        value = _json.loads(text)
    except _json.JSONDecodeError as err:
        raise ParameterError(f"params {text!r} is not a JSON object: {err}") from err
    if not isinstance(value, dict):
        raise ParameterError(f"params {text!r} is not a JSON object")
    return value
