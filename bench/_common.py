"""Shared plumbing of the benchmark scripts: arguments, JSON output, rich summaries.

Every script is run as ``python bench/<name>.py [--quick] [--out FILE]``. It writes one
JSON document (default ``bench/results/<name>.json``) holding the command, the machine,
every measured row and a summary, and prints a rich table whose last columns relate
each time to the physical bound of :func:`gridcoll.network.broadcast_bound`.
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

import gridcoll
from gridcoll.units import format_time

__all__ = [
    "RESULTS",
    "Bench",
    "console",
    "percent",
    "rel_error",
    "seconds",
    "table",
    "timed",
    "times",
]

RESULTS = Path(__file__).resolve().parent / "results"
"""Default output folder (ignored by git)."""


def console() -> Console:
    """A console 140 columns wide when not on a terminal (CI logs)."""
    return Console(width=None if sys.stdout.isatty() else 140, highlight=False, soft_wrap=True)


def rel_error(value: float, reference: float) -> float:
    """``(value - reference) / reference``."""
    return (value - reference) / reference


def timed(fn: Callable[[], Any], repeat: int = 1) -> tuple[Any, float]:
    """Run ``fn`` ``repeat`` times; return its last result and the best wall time (s)."""
    best, result = math.inf, None
    for _ in range(max(1, repeat)):
        start = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - start)
    return result, best


def _clean(value: Any) -> Any:
    """JSON-safe: non-finite floats become None, tuples lists, mappings dicts."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, Mapping):
        return {str(k): _clean(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_clean(v) for v in value]
    return value


class Bench:
    """One benchmark run: parses ``--quick``/``--out``, collects rows, writes JSON.

    >>> bench = Bench("headline", "seed 000's headline")  # doctest: +SKIP
    >>> bench.add(grid="magpie:8,1", simulated_s=1.08)  # doctest: +SKIP
    >>> bench.finish(summary={...})  # doctest: +SKIP
    """

    def __init__(self, name: str, description: str, argv: Sequence[str] | None = None):
        parser = argparse.ArgumentParser(prog=f"bench/{name}.py", description=description)
        parser.add_argument(
            "--quick", action="store_true", help="a smaller case table (CI smoke run, < 1 min)"
        )
        parser.add_argument(
            "--out",
            type=Path,
            default=RESULTS / f"{name}.json",
            help=f"JSON output file (default: bench/results/{name}.json)",
        )
        self.parser = parser
        self.name = name
        self.description = description
        self._argv = argv
        self.args: argparse.Namespace | None = None
        self.rows: list[dict[str, Any]] = []
        self.started = time.perf_counter()

    def parse(self) -> argparse.Namespace:
        """Parse the command line (subclass-free: add arguments to ``self.parser`` first)."""
        self.args = self.parser.parse_args(self._argv)
        return self.args

    @property
    def quick(self) -> bool:
        """True for the CI smoke run."""
        return bool(self.args and self.args.quick)

    def add(self, **row: Any) -> dict[str, Any]:
        """Record one row (any JSON-able fields)."""
        self.rows.append(row)
        return row

    def finish(self, summary: Mapping[str, Any], **extra: Any) -> Path:
        """Write the JSON document; return its path."""
        assert self.args is not None, "call parse() first"
        data = {
            "bench": self.name,
            "description": self.description,
            "command": " ".join([f"python bench/{self.name}.py", *sys.argv[1:]]),
            "quick": self.quick,
            "gridcoll": gridcoll.__version__,
            "python": platform.python_version(),
            "machine": platform.machine(),
            "date": datetime.now(UTC).isoformat(timespec="seconds"),
            "wall_s": time.perf_counter() - self.started,
            "summary": summary,
            **extra,
            "rows": self.rows,
        }
        path: Path = self.args.out
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(_clean(data), indent=2) + "\n")
        return path


def table(
    title: str,
    rows: Iterable[Mapping[str, Any]],
    columns: Sequence[tuple[str, str, Callable[[Any], str] | None]],
) -> Table:
    """A rich table: ``columns`` are (header, row key, formatter or None for str)."""
    out = Table(title=title, title_justify="left")
    for header, _, _ in columns:
        left = header in ("grid", "algorithm", "chosen")
        out.add_column(header, justify="left" if left else "right")
    for row in rows:
        cells = []
        for _, key, fmt in columns:
            value = row.get(key)
            cells.append("-" if value is None else (fmt(value) if fmt else str(value)))
        out.add_row(*cells)
    return out


def seconds(x: float) -> str:
    """A time in seconds with a sensible unit."""
    return format_time(x)


def times(x: float) -> str:
    """A ratio: ``1.23x``."""
    return f"{x:.2f}x"


def percent(x: float) -> str:
    """A signed percentage: ``+2.3%``."""
    return f"{x:+.1%}"
