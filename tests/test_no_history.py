"""The product describes what the code does, not how it got there.

README.md, docs/, src/, tests/ and bench/ name no numbered issue, work session or round of
work: a docstring cites
the paper and section, a figure the command that reproduces it. The history stays in git
and, for users, in CHANGELOG.md. The word "round" alone is left alone: algorithms have
rounds (recursive doubling, a probe round, a work farm's rounds).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCANNED = ("README.md", "docs", "src", "tests", "bench", "examples")
SUFFIXES = {".py", ".md", ".txt", ".sh", ".toml", ".yml", ".yaml", ".cfg", ".ini", ".rst", ""}

HISTORY = re.compile(
    r"""
    \b(?:issues?|sessions?|tickets?)[\s#-]*\d+   # an issue or session and its number
    | \brounds?\s+\d+\s+of\s+(?:the\s+)?work\b     # a numbered round of work
    | \bwork\s+rounds?\s+\d+
    """,
    re.IGNORECASE | re.VERBOSE,
)
"""A numbered reference to a round of work (not the word "round" of an algorithm)."""


def _files() -> list[Path]:
    out = []
    for name in SCANNED:
        path = ROOT / name
        if path.is_file():
            out.append(path)
            continue
        for file in sorted(path.rglob("*")):
            parts = file.relative_to(ROOT).parts
            if not file.is_file() or file.suffix not in SUFFIXES:
                continue
            if any(
                p.startswith(".") or p == "__pycache__" or p.endswith(".egg-info") for p in parts
            ):
                continue
            if "results" in parts:  # bench/results/: run outputs, not committed
                continue
            out.append(file)
    return out


def test_the_pattern_hits_history_and_spares_algorithms():
    for word, tail in [
        ("issue", " 14"),
        ("Issue", " 13's goal"),
        ("issues", " 14/15"),
        ("session", " 28"),
        ("Sessions", " 30 and 31"),
        ("issue", " #3"),
        ("round", " 3 of work"),
        ("work round", " 2"),
    ]:
        assert HISTORY.search(word + tail), word + tail
    for text in (
        "round 0: 4 members",
        "each round of recursive doubling",
        "a probe round",
        "round-robin",
        "the issue's builders",
        "start_new_session=True",
        "a session of its own",
        "rounds 2 and 3",
        "round 3 of 5",
    ):
        assert not HISTORY.search(text), text


@pytest.mark.parametrize("path", _files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_no_history_in_the_product(path):
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        return
    hits = [
        f"{path.relative_to(ROOT)}:{text.count(chr(10), 0, m.start()) + 1}: {m.group(0)!r}"
        for m in HISTORY.finditer(text)
    ]
    assert not hits, "development history in the product:\n" + "\n".join(hits)
