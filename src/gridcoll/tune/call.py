"""One collective call and the options it is planned with: two frozen values.

:class:`Call` is what the program asks for (the collective, its size, root, datatype
extent, the uneven form's counts, whether the reduction commutes); :class:`PlanOptions`
is how the planner may answer (which algorithm, fixed parameters, a planning budget, the
runtime's host overhead, the MPI library's own collective, the simulator check, the
frugal tolerance). Both validate themselves once, in ``__post_init__`` (as h11's events
do), raising :class:`~gridcoll.errors.ParameterError` naming the bad value; whatever
holds one afterwards trusts it. Checks that need the grid (a root in range, the number
of uneven blocks) are :func:`gridcoll.tune.plan`'s.

The pair is :func:`gridcoll.tune.plan`'s argument and, with the grid's fingerprint, the
plan cache's key (:class:`~gridcoll.tune.PlanCache`): a new field enters the key by
being declared. ``to_json``/``from_json`` give the JSON form the launcher ships to the
ranks in one document (:mod:`gridcoll.runtime.worker`).

Sizes follow MPI: ``nbytes`` is the count times the datatype extent (``itemsize``): the
whole message for a broadcast or a reduction, one rank's block per peer for the
personalised collectives.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields
from typing import Any

from gridcoll.errors import ParameterError, UnknownAlgorithm
from gridcoll.limits import MAX_BUDGET_S, MAX_MESSAGE_BYTES
from gridcoll.schedule.ir import OPERATIONS
from gridcoll.schedule.transform import PERSONALISED

__all__ = ["Call", "PlanOptions"]


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


@dataclass(frozen=True, slots=True)
class Call:
    """One collective call, checked on construction.

    Parameters
    ----------
    op : str
        The collective, one of :data:`gridcoll.schedule.OPERATIONS`.
    nbytes : int
        Bytes of the call (module docstring), in ``(0, MAX_MESSAGE_BYTES]`` and a whole
        number of ``itemsize``-byte items; a barrier's is ignored (0). With ``counts``,
        the largest count (the blocks' stride).
    root : int
        The root rank (checked against the grid by :func:`~gridcoll.tune.plan`;
        rootless collectives ignore it).
    itemsize : int
        The datatype extent in bytes: segment sizes are multiples of it.
    counts : tuple of int, optional
        The uneven (``v``) form of a personalised collective: the bytes of every block
        (``P``; ``P * P`` for all-to-all), each a whole number of items.
    commutative : bool
        Reductions only: False for a non-commutative operation.

    Raises
    ------
    ParameterError
        For any value out of range (the message names it).
    UnknownAlgorithm
        For an ``op`` that is not a collective.
    """

    op: str
    nbytes: int = 0
    root: int = 0
    itemsize: int = 1
    counts: tuple[int, ...] | None = None
    commutative: bool = True

    def __post_init__(self) -> None:
        if self.op not in OPERATIONS:
            raise UnknownAlgorithm(
                f"no algorithms are registered for {self.op!r}; choose one of: {list(OPERATIONS)}"
            )
        if not isinstance(self.commutative, bool):
            raise ParameterError(f"commutative must be True or False, got {self.commutative!r}")
        if not _is_int(self.root):
            raise ParameterError(f"root {self.root!r} is out of range: a rank is a whole number")
        if not _is_int(self.itemsize) or self.itemsize < 1:
            raise ParameterError(f"itemsize must be >= 1, got {self.itemsize!r}")
        if self.op == "barrier":
            if not _is_int(self.nbytes) or self.nbytes < 0:
                raise ParameterError(
                    f"a barrier's size must be 0 (it is ignored), got {self.nbytes!r}"
                )
            object.__setattr__(self, "nbytes", 0)
        else:
            self._check_size()
        if self.counts is not None:
            object.__setattr__(self, "counts", self._checked_counts())

    def _check_size(self) -> None:
        nbytes, itemsize = self.nbytes, self.itemsize
        if not _is_int(nbytes) or nbytes <= 0:
            raise ParameterError(
                f"message size must be > 0, a positive number of bytes; got {nbytes!r}"
            )
        if nbytes > MAX_MESSAGE_BYTES:
            raise ParameterError(
                f"a call of {nbytes} bytes is above the largest supported, {MAX_MESSAGE_BYTES}"
            )
        if nbytes % itemsize:
            raise ParameterError(
                f"message size {nbytes} is not a whole number of {itemsize}-byte elements"
            )

    def _checked_counts(self) -> tuple[int, ...]:
        counts, itemsize = self.counts, self.itemsize
        if self.op not in PERSONALISED:
            raise ParameterError(
                f"counts= is for the uneven collectives {PERSONALISED}, not {self.op!r}"
            )
        if not isinstance(counts, tuple | list) or not counts:
            raise ParameterError(
                f"counts must be a tuple of byte counts, got {type(counts).__name__}"
            )
        for c in counts:
            if not _is_int(c) or c < 0 or c % itemsize:
                raise ParameterError(
                    f"every count must be a whole number of {itemsize}-byte items >= 0, got {c!r}"
                )
        if max(counts) != self.nbytes:
            raise ParameterError(
                f"with counts, nbytes is the largest count ({max(counts)}), got {self.nbytes}"
            )
        return tuple(counts)

    def to_json(self) -> dict[str, Any]:
        """The call as a JSON object (:meth:`from_json` reads it back)."""
        out = asdict(self)
        out["counts"] = None if self.counts is None else list(self.counts)
        return out

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Call:
        """The call of a :meth:`to_json` object, checked again."""
        if not isinstance(data, dict):
            raise ParameterError(f"a call is a JSON object, got {type(data).__name__}")
        _no_unknown(cls, data, "call")
        counts = data.get("counts")
        if isinstance(counts, list):
            data = {**data, "counts": tuple(counts)}
        return cls(**data)


@dataclass(frozen=True, slots=True)
class PlanOptions:
    """How :func:`~gridcoll.tune.plan` may answer a :class:`Call`, checked on construction.

    Parameters
    ----------
    algo : str
        ``"auto"`` searches every builder of the collective; a builder name only that
        one; ``"native"`` the MPI library's own collective.
    params : dict, optional
        Parameters the caller fixes (``{"segment_size": 8192}``, a degree, an
        annealing ``seed``): kept as given, only the others are searched. Held as a
        tuple of ``(name, value)`` pairs in the given order (:attr:`fixed` is the dict),
        so the options hash: values must be hashable.
    budget_s : float, optional
        Planning budget in nominal seconds, in ``(0, MAX_BUDGET_S]``
        (:mod:`gridcoll.tune.select`).
    host_overhead : float, optional
        Seconds of software cost per message and side, in ``[0, 1)``: the plan is made on
        ``grid.with_host_overhead(host_overhead)``.
    native : bool
        The MPI library's own collective may serve the call (``auto`` on one cluster).
    check : bool, optional
        Simulate the best candidates (None: the default, ``auto`` only).
    frugal : float
        Accept a prediction up to this fraction above the best for fewer messages, in
        ``[0, 1)``.
    """

    algo: str = "auto"
    params: tuple[tuple[str, Any], ...] | None = None
    budget_s: float | None = None
    host_overhead: float | None = None
    native: bool = False
    check: bool | None = None
    frugal: float = 0.0

    def __post_init__(self) -> None:
        params = self.params
        if isinstance(params, dict):
            params = tuple(params.items())
        elif params is not None and not (
            isinstance(params, tuple) and all(isinstance(p, tuple) and len(p) == 2 for p in params)
        ):
            raise ParameterError(f"params must be a dict of builder parameters, got {params!r}")
        object.__setattr__(self, "params", params or None)
        budget = self.budget_s
        if budget is not None and not (
            _is_number(budget) and math.isfinite(budget) and 0 < budget <= MAX_BUDGET_S
        ):
            raise ParameterError(
                f"budget_s must be a number of seconds in (0, {MAX_BUDGET_S:g}], got {budget!r}"
            )
        host = self.host_overhead
        if host and not (_is_number(host) and 0 < host < 1):
            raise ParameterError(
                f"host_overhead must be a number of seconds in [0, 1), got {host!r}"
            )
        if not (_is_number(self.frugal) and 0 <= self.frugal < 1):
            raise ParameterError(f"frugal must be a fraction in [0, 1), got {self.frugal!r}")

    @property
    def fixed(self) -> dict[str, Any]:
        """The fixed parameters as a dict (empty without any)."""
        return dict(self.params or ())

    @property
    def named(self) -> bool:
        """True when the caller named one algorithm (not ``auto``)."""
        return self.algo != "auto"

    def to_json(self) -> dict[str, Any]:
        """The options as a JSON object (:meth:`from_json` reads them back)."""
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        out["params"] = None if self.params is None else self.fixed
        return out

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> PlanOptions:
        """The options of a :meth:`to_json` object, checked again."""
        if not isinstance(data, dict):
            raise ParameterError(f"plan options are a JSON object, got {type(data).__name__}")
        _no_unknown(cls, data, "plan options")
        return cls(**data)


def _no_unknown(cls: type, data: dict[str, Any], what: str) -> None:
    unknown = sorted(set(data) - {f.name for f in fields(cls)})
    if unknown:
        raise ParameterError(f"unknown field(s) {unknown} in the JSON {what}")
