"""The record of a run: one JSON line per collective call (``GRIDCOLL_LOG``).

``GRIDCOLL_LOG=FILE`` (or ``Comm(..., log=FILE)``) makes every gridcoll collective that
reaches a plan write one line (:func:`record_line`): the collective, its size (bytes per
block, as :func:`gridcoll.tune.plan` counts it), root, the algorithm and parameters the
plan chose, its prediction and the bound (seconds), and the time the call took on this
rank (``time.monotonic`` around the call: copying in, running, copying out; the
lookup of its plan before, which plans and compiles on a signature's first call, is
``prepare_s``), with the rank, the call's number on this rank, the communicator's
size and the grid's name. ``gridcoll report FILE...`` summarises such logs. Each rank
times from its own entry: a rank that enters late sees less than the collective took.

Several ranks: ``{rank}`` in ``FILE`` is replaced by the rank in ``MPI.COMM_WORLD``
(``run-{rank}.jsonl``: one file per rank, for any file system); without it every rank
appends to the one file, opened with ``O_APPEND`` and each line written with a single
``write`` (lines are a few hundred bytes, below ``PIPE_BUF``), so lines of different
ranks never interleave on a local file system. A call that fails writes no line, nor
does one that plans nothing (a one-rank communicator, a call moving no byte); an object
call (``comm.bcast(obj)``...) writes the lines of the buffer calls it is made of.

Off, it costs nothing: a communicator without a log keeps the one-cluster ``Bcast``
hot path untouched (:func:`gridcoll.runtime.collectives.bcast`), and every other call
tests one attribute.

Reading back (``gridcoll report``): :func:`read_log` (a regular file of bounded size,
every line checked by :func:`parse_line`), :func:`summarize` (one :class:`Row` per op
and size: calls, algorithms, the median of each call's slowest rank against the
prediction) and :func:`most_wrong`. Pure Python (no MPI); the runtime's ``state``
opens the log, ``collectives`` writes it.
"""

from __future__ import annotations

import json as _json
import math as _math
import os as _os
from dataclasses import dataclass
from typing import Any

from gridcoll.errors import LogError, ParameterError
from gridcoll.limits import MAX_LOG_BYTES
from gridcoll.network.gridfile import read_file

__all__ = [
    "ENV_LOG",
    "FORMAT",
    "CallLog",
    "Record",
    "Row",
    "log_path",
    "most_wrong",
    "open_log",
    "parse_line",
    "read_log",
    "record_line",
    "summarize",
]

ENV_LOG = "GRIDCOLL_LOG"
"""Environment variable: the log file of every ``Comm`` without ``log=`` (off if unset)."""

FORMAT = "gridcoll-log/1"
"""The ``format`` field of every line."""

RANK_FIELD = "{rank}"
"""Replaced in a log file's name by the rank in ``MPI.COMM_WORLD``."""


@dataclass(slots=True)
class CallLog:
    """An open log: its path, its unbuffered append-only file, this process's rank and
    the number of lines it wrote. Shared by a communicator and those made from it."""

    path: str
    fd: int
    rank: int
    calls: int = 0

    def write(self, plan: Any, measured_s: float, prepare_s: float, nranks: int, grid: str) -> None:
        """Append the line of one call (one ``write``)."""
        self.calls += 1
        line = record_line(
            plan,
            measured_s=measured_s,
            prepare_s=prepare_s,
            rank=self.rank,
            nranks=nranks,
            call=self.calls,
            grid=grid,
        )
        _os.write(self.fd, line.encode())

    def close(self) -> None:
        """Close the file (later writes fail); idempotent."""
        if self.fd >= 0:
            _os.close(self.fd)
            self.fd = -1

    def __del__(self) -> None:
        self.close()


def log_path(spec: str | _os.PathLike, rank: int) -> str:
    """The file of ``rank``: ``spec`` with ``{rank}`` replaced (only that field)."""
    text = _os.fspath(spec)
    if not isinstance(text, str) or not text.strip():
        raise ParameterError(f"log file name {spec!r} is empty")
    return text.replace(RANK_FIELD, str(rank))


def open_log(spec: str | _os.PathLike | None, rank: int) -> CallLog | None:
    """Open the log of ``spec`` (None: ``GRIDCOLL_LOG``; unset or empty: no log) for
    appending; raises :class:`ParameterError` naming the file if it cannot."""
    if spec is None:
        spec = _os.environ.get(ENV_LOG, "").strip()
        if not spec:
            return None
    path = log_path(spec, rank)
    flags = _os.O_WRONLY | _os.O_CREAT | _os.O_APPEND | getattr(_os, "O_CLOEXEC", 0)
    try:
        fd = _os.open(path, flags, 0o644)
    except OSError as err:
        raise ParameterError(f"cannot open log file {path!r}: {err.strerror}") from err
    return CallLog(path, fd, rank)


def _finite(x: float | None) -> float | None:
    return x if x is not None and _math.isfinite(x) else None


def record_line(
    plan: Any,
    *,
    measured_s: float,
    prepare_s: float = 0.0,
    rank: int,
    nranks: int,
    call: int,
    grid: str,
) -> str:
    """One call as one JSON line (ending in a newline), from its
    :class:`gridcoll.tune.Plan`: ``format``, ``op``, ``size``, ``root`` (null for a
    rootless collective), ``algorithm``, ``params``, ``segment_size``, ``predicted_s``,
    ``bound_s``, ``host_overhead_s``, ``measured_s`` (the call on this rank),
    ``prepare_s`` (its plan's lookup before it: planning and compiling on the first
    call of a signature), ``rank``, ``nranks``, ``call``, ``grid``. Non-finite
    numbers are null; parameters JSON cannot hold are text."""
    data = {
        "format": FORMAT,
        "op": plan.op,
        "size": plan.nbytes,
        "root": plan.root if plan.rooted else None,
        "algorithm": plan.algorithm,
        "params": dict(plan.params),
        "segment_size": plan.segment_size,
        "predicted_s": _finite(plan.predicted_s),
        "bound_s": _finite(plan.bound_s),
        "host_overhead_s": plan.host_overhead_s,
        "measured_s": measured_s,
        "prepare_s": prepare_s,
        "rank": rank,
        "nranks": nranks,
        "call": call,
        "grid": grid,
    }
    return _json.dumps(data, separators=(",", ":"), default=str) + "\n"


# -- reading logs back (gridcoll report) ---------------------------------------------


@dataclass(frozen=True, slots=True)
class Record:
    """One line of a log, as :func:`parse_line` checked it."""

    op: str
    size: int
    root: int | None
    algorithm: str
    predicted_s: float | None
    bound_s: float | None
    measured_s: float
    rank: int
    nranks: int
    grid: str


def _number(data: dict, key: str, *, optional: bool = False) -> float | None:
    value = data.get(key)
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not _math.isfinite(value):
        raise ValueError(f"{key!r} is not a finite number: {value!r}")
    if value < 0:
        raise ValueError(f"{key!r} is negative: {value!r}")
    return float(value)


def _integer(data: dict, key: str, *, optional: bool = False) -> int | None:
    value = data.get(key)
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"{key!r} is not a whole number >= 0: {value!r}")
    return value


def _text(data: dict, key: str) -> str:
    value = data.get(key)
    if not isinstance(value, str) or not value:
        raise ValueError(f"{key!r} is not a name: {value!r}")
    return value


def parse_line(text: str) -> Record:
    """Check one line of a log (:func:`record_line`'s format); raises ``ValueError``
    saying what is wrong."""
    try:
        data = _json.loads(text)
    except (_json.JSONDecodeError, RecursionError) as err:
        raise ValueError(f"not JSON ({err})") from err
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise ValueError(f"not a {FORMAT} line")
    return Record(
        op=_text(data, "op"),
        size=_integer(data, "size"),
        root=_integer(data, "root", optional=True),
        algorithm=_text(data, "algorithm"),
        predicted_s=_number(data, "predicted_s", optional=True),
        bound_s=_number(data, "bound_s", optional=True),
        measured_s=_number(data, "measured_s"),
        rank=_integer(data, "rank"),
        nranks=_integer(data, "nranks"),
        grid=_text(data, "grid"),
    )


def read_log(path: str | _os.PathLike) -> list[Record]:
    """Every line of a log file, checked: only a regular file of at most
    :data:`~gridcoll.limits.MAX_LOG_BYTES`, UTF-8, every non-blank line a
    :data:`FORMAT` line, at least one. Raises :class:`~gridcoll.errors.LogError`
    naming the file (as ``repr``) and the first bad line."""
    shown = repr(_os.fspath(path))
    raw = read_file(path, "log", MAX_LOG_BYTES, LogError)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as err:
        raise LogError(f"log {shown} is not UTF-8 text") from err
    records = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            records.append(parse_line(line))
        except ValueError as err:
            raise LogError(f"log {shown}, line {number}: {err}") from err
    if not records:
        raise LogError(f"log {shown} holds no calls")
    return records


@dataclass(frozen=True, slots=True)
class Row:
    """The calls of one collective and size on one grid (:func:`summarize`)."""

    grid: str
    op: str
    size: int
    nranks: int
    ranks: int
    """Ranks whose lines were read."""
    calls: int
    """Calls (the most lines any one rank wrote for this op and size)."""
    algorithms: tuple[tuple[str, int], ...]
    """Each algorithm chosen and its number of lines, most used first."""
    measured_s: float
    """Median over calls of the call's slowest rank."""
    predicted_s: float | None
    bound_s: float | None

    @property
    def ratio(self) -> float | None:
        """Measured over predicted (None without a prediction)."""
        if not self.predicted_s:
            return None
        return self.measured_s / self.predicted_s


def summarize(records: list[Record]) -> list[Row]:
    """One :class:`Row` per (grid, communicator size, op, size), ordered by them.

    A call's time is its slowest rank's: the ``i``-th line a rank wrote for an op and
    size is that rank's part of the ``i``-th such call (ranks make the same collective
    calls in the same order). Predictions and bounds are medians over the lines (one
    value when one plan served every call). O(lines log lines).
    """
    groups: dict[tuple, dict[int, list[Record]]] = {}
    for rec in records:
        key = (rec.grid, rec.nranks, rec.op, rec.size)
        groups.setdefault(key, {}).setdefault(rec.rank, []).append(rec)
    rows = []
    for (grid, nranks, op, size), per_rank in sorted(groups.items()):
        calls = max(len(lines) for lines in per_rank.values())
        slowest = [
            max(lines[i].measured_s for lines in per_rank.values() if i < len(lines))
            for i in range(calls)
        ]
        every = [rec for lines in per_rank.values() for rec in lines]
        names: dict[str, int] = {}
        for rec in every:
            names[rec.algorithm] = names.get(rec.algorithm, 0) + 1
        rows.append(
            Row(
                grid=grid,
                op=op,
                size=size,
                nranks=nranks,
                ranks=len(per_rank),
                calls=calls,
                algorithms=tuple(sorted(names.items(), key=lambda kv: (-kv[1], kv[0]))),
                measured_s=_median(slowest),
                predicted_s=_median([r.predicted_s for r in every if r.predicted_s is not None]),
                bound_s=_median([r.bound_s for r in every if r.bound_s is not None]),
            )
        )
    return rows


def most_wrong(rows: list[Row]) -> Row | None:
    """The row whose measured time is furthest from its prediction, by ratio either
    way (None if no row has a prediction)."""
    judged = [row for row in rows if row.ratio]
    if not judged:
        return None
    return max(judged, key=lambda row: abs(_math.log(row.ratio)))


def _median(values: list[float]) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2
