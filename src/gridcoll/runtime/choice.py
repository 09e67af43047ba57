"""Which algorithm each collective of a :class:`gridcoll.Comm` runs (pure Python: the
CLI checks ``--algo`` with it without starting MPI).

``algo`` comes as ``Comm(algo=...)``, ``GRIDCOLL_ALGO`` or ``gridcoll mpirun --algo``,
all read by :func:`algo_table`: a name for every collective (``"binomial"``, ``"auto"``,
``"native"``), a mapping ``{op: name}``, or the same mapping as text,
``"bcast:multitree;allreduce:two-level"`` (:func:`parse_algo`; ``;`` or ``,`` between
the parts, spaces ignored, collectives not named ``auto``).
"""

from __future__ import annotations

import json as _json
from collections.abc import Mapping

from gridcoll.algorithms.registry import get_builder, list_builders
from gridcoll.errors import ParameterError, UnknownAlgorithm
from gridcoll.schedule.ir import OPERATIONS
from gridcoll.tune import NATIVE

__all__ = ["NATIVE", "algo_table", "params_from_json", "parse_algo"]


def algo_table(
    algo: str | Mapping[str, str], params: Mapping | None
) -> dict[str, tuple[str, dict | None]]:
    """Per collective: (algorithm, fixed parameters or None), from ``Comm``'s arguments.

    ``algo`` is ``"auto"``, ``"native"``, a builder name (used by every collective that
    has a builder of that name, the others ``auto``; ``params`` are its parameters), or
    a mapping ``{op: name}``, as a dict or as text (:func:`parse_algo`; ops not named:
    ``auto``; ``params`` then maps ops to their parameters). Raises
    :class:`UnknownAlgorithm` or :class:`ParameterError`, naming the bad part and the
    choices.
    """
    table: dict[str, tuple[str, dict | None]] = {op: ("auto", None) for op in OPERATIONS}
    if isinstance(algo, str):
        algo = parse_algo(algo)
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
            f"choose one of: {', '.join(names)}; or one per collective, as in "
            "'bcast:multitree;allreduce:two-level'"
        )
    for op in ops:
        table[op] = (algo, dict(params) if params is not None else None)
    return table


def parse_algo(text: str) -> str | dict[str, str]:
    """The text form of ``algo``: one name (``"binomial"``, returned stripped; empty:
    ``"auto"``), or per-collective choices ``"bcast:multitree;allreduce:two-level"``
    (``;`` or ``,`` between parts, an empty part skipped), returned as ``{op: name}``.

    Only the syntax and the collectives' names are checked here (raises
    :class:`ParameterError` naming the bad part and the collectives); the algorithms
    are checked by :func:`algo_table`. O(length of the text).
    """
    text = text.strip()
    if not any(c in text for c in ":;,"):
        return text or "auto"
    choices: dict[str, str] = {}
    for part in text.replace(",", ";").split(";"):
        part = part.strip()
        if not part:
            continue
        op, colon, name = (x.strip() for x in part.partition(":"))
        if not colon or not op or not name or ":" in name:
            raise ParameterError(
                f"algo part {part!r} of {text!r} is not 'collective:algorithm' (e.g. "
                f"'bcast:multitree;allreduce:two-level'); collectives: {', '.join(OPERATIONS)}"
            )
        if op not in OPERATIONS:
            raise ParameterError(
                f"algo part {part!r} of {text!r} names no collective: {op!r}; choose one "
                f"of: {', '.join(OPERATIONS)}"
            )
        if op in choices:
            raise ParameterError(f"algo {text!r} names {op!r} twice")
        choices[op] = name
    return choices


def _one(op: str, name: str, params: Mapping | None) -> tuple[str, dict | None]:
    if name in ("auto", NATIVE):
        if params is not None:
            raise ParameterError(f"params= needs a named algorithm, not {op}={name!r}")
        return name, None
    try:
        get_builder(op, name)
    except UnknownAlgorithm as err:  # it lists the choices; name the part too
        raise UnknownAlgorithm(f"algo part '{op}:{name}': {err}") from err
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
