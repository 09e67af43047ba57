"""The architecture, enforced: layers, import cycles, private names.

docs/architecture.md gives the order of the layers; a module may import only from its
own package or from the layers below it, at module level or inside a function alike.
No two modules import each other (directly or round a longer cycle), and no module
reaches into another's private (underscore) names.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "gridcoll"
DOCS = Path(__file__).resolve().parents[1] / "docs" / "architecture.md"

LAYERS = (
    "errors",
    "units",
    "limits",
    "memo",
    "network",
    "schedule",
    "phoenix",
    "algorithms",
    "models",
    "simulate",
    "tune",
    "adapt",
    "runtime",
    "group",
    "measure",
    "experiments",
    "plot",
    "cli",
)
"""Bottom to top, as docs/architecture.md states them."""

TOP = ("__init__", "__main__")
"""The package's face: ``gridcoll`` re-exports and ``python -m gridcoll``."""


def _modules() -> dict[str, Path]:
    out = {}
    for path in sorted(SRC.rglob("*.py")):
        parts = path.relative_to(SRC.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out[name] = path
    return out


MODULES = _modules()


def _imports(name: str, path: Path) -> list[tuple[str, list[str], int]]:
    """``(module, names imported from it, line)`` for every gridcoll import in a file,
    at any depth (function-level imports included)."""
    tree = ast.parse(path.read_text(), str(path))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    typing_only = {  # `if TYPE_CHECKING:` imports are for annotations, never executed
        id(inner)
        for node in ast.walk(tree)
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
        for stmt in node.body
        for inner in ast.walk(stmt)
    }
    found = []
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        if isinstance(node, ast.Import):
            found += [(a.name, [], node.lineno) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                module = ".".join([*base, node.module] if node.module else base)
            else:
                module = node.module or ""
            names = [a.name for a in node.names]
            found.append((module, names, node.lineno))
    return [(m, n, line) for m, n, line in found if m == "gridcoll" or m.startswith("gridcoll.")]


def _layer(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def _resolve(module: str, names: list[str]) -> list[str]:
    """The gridcoll modules an import statement loads (``from pkg import module``
    counts as the submodule)."""
    out = []
    for name in names or [""]:
        sub = f"{module}.{name}" if name else module
        out.append(sub if sub in MODULES else module)
    return out


def test_the_documented_order_is_the_tested_order():
    text = DOCS.read_text()
    match = re.search(r"Layers import only from layers above them: `([^`]+)`", text)
    assert match, "docs/architecture.md must state the layer order"
    documented = [part.strip() for part in match.group(1).split("→")]
    flat = [p for part in documented for p in part.split("/")]
    assert flat == [layer for layer in LAYERS if layer not in ("errors", "units", "limits", "memo")]
    for layer in LAYERS:
        assert layer in MODULES or f"gridcoll.{layer}" in MODULES


@pytest.mark.parametrize("name", sorted(MODULES))
def test_layers_import_only_downwards(name):
    layer = _layer(name)
    if layer in TOP:
        return
    rank = LAYERS.index(layer)
    bad = []
    for module, _names, line in _imports(name, MODULES[name]):
        target = _layer(module)
        if target == layer:
            continue
        if target in TOP and layer == "cli":
            continue  # the command prints the package's version
        if target in TOP or LAYERS.index(target) > rank:
            bad.append(f"line {line}: imports {module} ({target} is above {layer})")
    assert not bad, f"{name}: " + "; ".join(bad)


def test_no_import_cycles():
    graph = {
        name: {
            dep
            for module, names, _ in _imports(name, path)
            for dep in _resolve(module, names)
            if dep != name and dep in MODULES
        }
        for name, path in MODULES.items()
    }
    # a package's __init__ importing its own submodules is how packages are made
    for name in graph:
        graph[name] = {d for d in graph[name] if not (name.startswith(d + ".") and d in MODULES)}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []

    def connect(v: str) -> None:  # Tarjan's strongly connected components
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for v in graph:
        if v not in index:
            connect(v)
    assert not cycles, f"import cycles: {cycles}"


def test_no_module_uses_another_modules_private_names():
    bad = []
    for name, path in MODULES.items():
        tree = ast.parse(path.read_text(), str(path))
        aliases = {}
        for module, names, line in _imports(name, path):
            for imported in names:
                if imported.startswith("_") and not imported.startswith("__"):
                    bad.append(f"{name}:{line} imports {module}.{imported}")
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.ImportFrom)
                and node.module
                and node.module.startswith("gridcoll")
            ):
                for a in node.names:
                    if f"{node.module}.{a.name}" in MODULES:
                        aliases[a.asname or a.name] = f"{node.module}.{a.name}"
            elif isinstance(node, ast.Import):
                for a in node.names:
                    if a.name.startswith("gridcoll") and a.asname:
                        aliases[a.asname] = a.name
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id in aliases
                and node.attr.startswith("_")
                and not node.attr.startswith("__")
                and aliases[node.value.id] != name
            ):
                bad.append(f"{name}:{node.lineno} uses {aliases[node.value.id]}.{node.attr}")
    assert not bad, "private names used across modules: " + "; ".join(bad)
