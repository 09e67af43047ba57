"""Plumbing shared by the heterogeneous tree builders: a per-grid tree cache, the
spanning-tree check, and tree -> schedule for the unsegmented and segmented variants.

Every family module (``heuristics``, ``hlot``, ``tps``, ``mateescu``, ``annealing``,
``phoenix``, ``mpich_g2``) computes one :class:`~gridcoll.algorithms.trees.Tree` per
``(grid, M, root, parameters)``, from the whole message ``M`` as the papers do, and
exports it in a ``TREES`` dict; the unsegmented builder sends the whole message down
it, the segmented one cuts it into segments that every node forwards as they arrive
(seed 003's packet-level transfer). The tuner evaluates the model at many segment
sizes, so the tree is memoised on the grid object, as :mod:`gridcoll.network.bounds`
memoises its flows: a grid is immutable, and hashing a large one is slow.

A family is declared once (:func:`tree_family`: its tree function and the algorithm's
own docstring, with its citation and complexity); that makes both builders, ``X`` and
``X-segmented``, with their signatures and docstrings, and
:mod:`gridcoll.algorithms.registry` registers both from the declaration.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from gridcoll.algorithms._common import check_call
from gridcoll.algorithms.trees import Tree, binomial_tree, tree_broadcast
from gridcoll.errors import ParameterError
from gridcoll.network.grid import Grid
from gridcoll.schedule.ir import Schedule, split_segments

TREE_CACHE_SIZE = 512
"""Trees kept per grid (least recently used dropped)."""


def cached_tree(grid: Grid, key: Hashable, make: Callable[[], Tree]) -> Tree:
    """``make()``, memoised in ``grid.memo`` under ``key`` (a Tree is never modified)."""
    return grid.memo.get("hetero.trees", key, make, TREE_CACHE_SIZE)


COORDINATOR_RANKS = 256
"""Above this many ranks, on a grid whose clusters hold several ranks, the per-rank
heuristics of :func:`coordinator_tree` run over the coordinators."""


def coordinator_tree(
    grid: Grid, key: Hashable, root: int, make: Callable[[Grid, int], Tree]
) -> Tree:
    """``make(grid, root)``, memoised like :func:`cached_tree`; on a large grid, the
    same rule over the coordinators with a fixed LAN subtree in each cluster.

    The ranks of one cluster share every P-LogP parameter (its LAN, its routes), so a
    per-rank heuristic (FEF, ECEF, look-ahead, TPS, Mateescu, Phoenix) spends O(P^2)
    time and memory deciding among interchangeable ranks. Above
    :data:`COORDINATOR_RANKS` ranks, on a grid with a cluster of two or more ranks,
    ``make`` runs on the *coordinator grid* (:func:`coordinator_grid`: one rank per
    cluster, the same LANs, routes and links), so the heuristic keeps its paper's rule
    for the wide-area tree, which is where the grid is heterogeneous; then every
    coordinator (:meth:`Grid.coordinators`) forwards into its cluster down MPICH's
    binomial tree, after its wide-area children (seed 000 sec. 3.1.2's two layers,
    MPICH-G2's LAN tree, seed 001 fig. 7). O(C^2) instead of O(P^2).
    """

    def build() -> Tree:
        if grid.nranks <= COORDINATOR_RANKS or grid.nclusters == grid.nranks:
            return make(grid, root)
        wide = make(coordinator_grid(grid), grid.cluster_of[root])
        coordinators = grid.coordinators(root)
        children = {
            coordinators[v]: tuple(coordinators[c] for c in kids)
            for v, kids in wide.children.items()
        }
        lans = [
            binomial_tree([coordinators[c], *(r for r in grid.members[c] if r != coordinators[c])])
            for c in range(grid.nclusters)
        ]
        return Tree(root, children).graft(lans)

    return grid.memo.get("hetero.trees", key, build, TREE_CACHE_SIZE)


def coordinator_grid(grid: Grid) -> Grid:
    """``grid`` with one rank per cluster (rank ``c`` is cluster ``c``): the same
    clusters' LANs, routes and links. Memoised in ``grid.memo``."""

    def make() -> Grid:
        clusters = tuple(replace(c, nranks=1) for c in grid.clusters)
        return Grid(f"{grid.name}/coordinators", clusters, grid.routes, grid.links)

    return grid.memo.get("hetero.coordinator_grid", None, make, 1)


def make_tree(root: int, parent: Mapping[int, int], order: Sequence[int]) -> Tree:
    """A Tree from parent links; each node's children in the order they appear in
    ``order`` (the order the algorithm attached them: its send order)."""
    children: dict[int, list[int]] = {}
    for v in order:
        if v != root:
            children.setdefault(parent[v], []).append(v)
    return Tree(root, {v: tuple(k) for v, k in children.items()})


def check_spanning(tree: Tree, nranks: int, root: int) -> None:
    """Raise ParameterError unless ``tree`` spans ranks ``0..nranks-1`` from ``root``."""
    if tree.root != root:
        raise ParameterError(f"tree is rooted at {tree.root!r}, not at root {root!r}")
    nodes = tree.nodes()
    if sorted(nodes) != list(range(nranks)):
        missing = sorted(set(range(nranks)) - set(nodes))
        raise ParameterError(
            f"tree does not span the {nranks} ranks exactly once (missing {missing[:5]!r})"
        )


def tree_bcast(
    algorithm: str,
    grid: Grid,
    nbytes: int,
    root: int,
    tree: Callable[[], Tree],
    *,
    segment_size: int | None = None,
    itemsize: int = 1,
    params: Mapping[str, Any] | None = None,
) -> Schedule:
    """The broadcast of ``nbytes`` down ``tree()`` (built after the call is checked)."""
    check_call(grid, nbytes, root)
    segments = split_segments(nbytes, segment_size, itemsize)
    shape = tree()
    check_spanning(shape, grid.nranks, root)
    programs = tree_broadcast(shape, grid.nranks, len(segments))
    return Schedule(
        "bcast", algorithm, grid.nranks, root, nbytes, segments, programs, dict(params or {})
    )


# -- one family, two builders ------------------------------------------------------------
SEGMENTED_NOTE = (
    "Every node forwards each segment as it arrives (seed 003's packet-level\n"
    "transfer). Model: seed 000's ``T = (k-1) gamma(m) + lam(m)`` edge by edge on the\n"
    "tree (sec. 3.1.1), O(P) per segment size."
)
"""What the segmented builder of every family adds to the family's Notes."""


@dataclass(frozen=True)
class TreeFamily:
    """One heterogeneous broadcast tree and its two builders (module docstring).

    ``name`` sends the whole message down ``tree(grid, nbytes, root, **options)``;
    ``name-segmented`` (``segment_size``) the same tree, each node forwarding every
    segment as it arrives. :func:`tree_family` makes both from one declaration, and
    :mod:`gridcoll.algorithms.registry` registers both from it.
    """

    name: str
    summary: str
    tree: Callable[..., Tree]
    build: Callable[..., Schedule]
    build_segmented: Callable[..., Schedule]
    quadratic: bool = True
    """O(P^2) to build (the planning cost, :func:`planning_cost`)."""
    anytime: bool = False
    """Simulated annealing: the tuner hands it an ``evaluations`` budget."""
    build_cost: Callable[[Grid], float] | None = None
    """Nominal seconds to build the tree on a grid, if neither O(P^2) nor O(P) at the
    per-edge rate says it (:func:`planning_cost`)."""


def _sections(doc: str) -> tuple[str, dict[str, str]]:
    """A numpydoc docstring as its text before the first section and its sections."""
    text = inspect.cleandoc(doc)
    parts = re.split(r"^(\w[\w ]*)\n-+\n", text, flags=re.M)
    return parts[0].strip(), {parts[i]: parts[i + 1].strip() for i in range(1, len(parts), 2)}


def _docstring(head: str, sections: Mapping[str, str]) -> str:
    body = "".join(f"\n\n{name}\n{'-' * len(name)}\n{text}" for name, text in sections.items())
    return head + body + "\n"


def _builder(
    algorithm: str,
    tree: Callable[..., Tree],
    options: Sequence[inspect.Parameter],
    *,
    segmented: bool,
) -> Callable[..., Schedule]:
    """``build(grid, nbytes, root=0, *, [segment_size,] **options, itemsize=1)``."""
    keyword = inspect.Parameter.KEYWORD_ONLY
    positional = inspect.Parameter.POSITIONAL_OR_KEYWORD
    parameters = [  # annotated as the hand-written builders are (postponed: strings)
        inspect.Parameter("grid", positional, annotation="Grid"),
        inspect.Parameter("nbytes", positional, annotation="int"),
        inspect.Parameter("root", positional, default=0, annotation="int"),
        *([inspect.Parameter("segment_size", keyword, annotation="int")] if segmented else []),
        *options,
        inspect.Parameter("itemsize", keyword, default=1, annotation="int"),
    ]
    signature = inspect.Signature(parameters, return_annotation="Schedule")
    names = [p.name for p in options]

    def build(*args: Any, **kwargs: Any) -> Schedule:
        call = signature.bind(*args, **kwargs)
        call.apply_defaults()
        a = call.arguments
        grid, nbytes, root = a["grid"], a["nbytes"], a["root"]
        chosen = {k: a[k] for k in names}
        params = {k: v for k, v in chosen.items() if v is not None}
        segment_size = a["segment_size"] if segmented else None
        if segmented:
            params["segment_size"] = segment_size
        return tree_bcast(
            algorithm,
            grid,
            nbytes,
            root,
            lambda: tree(grid, nbytes, root, **chosen),
            segment_size=segment_size,
            itemsize=a["itemsize"],
            params=params,
        )

    build.__signature__ = signature  # type: ignore[attr-defined]
    return build


def tree_family(
    name: str,
    tree: Callable[..., Tree],
    summary: str,
    doc: str,
    *,
    module: str,
    quadratic: bool = True,
    anytime: bool = False,
    build_cost: Callable[[Grid], float] | None = None,
) -> TreeFamily:
    """The family ``name`` of ``tree``: both builders, named after ``name``
    (``look-ahead`` -> ``look_ahead``, ``look_ahead_segmented``) in ``module``.

    ``doc`` is the algorithm's own docstring (numpydoc: a headline without the way the
    message is sent, Parameters of the tree's keyword options, Notes with the build
    complexity, References, Examples). The whole-message builder gets it with ", whole
    message."; the segmented one with ", segments forwarded as they arrive.", the
    ``segment_size`` parameter, :data:`SEGMENTED_NOTE`, and no Examples. The options
    are the tree's keyword-only parameters, with their defaults; the schedule records
    those that are not None, then ``segment_size``.
    """
    options = [
        p
        for p in inspect.signature(tree).parameters.values()
        if p.kind is inspect.Parameter.KEYWORD_ONLY
    ]
    head, sections = _sections(doc)
    headline, _, rest = head.partition("\n")
    headline = headline.rstrip(".")
    fn = name.replace("-", "_")
    plain = _builder(name, tree, options, segmented=False)
    segmented = _builder(f"{name}-segmented", tree, options, segmented=True)
    parameters = "segment_size : int\n    ``m``, a multiple of ``itemsize``."
    if "Parameters" in sections:
        parameters += "\n" + sections["Parameters"]
    notes = f"The tree of :func:`{fn}`.\n{sections.get('Notes', '')}".strip()
    seg_sections = {"Parameters": parameters, "Notes": f"{notes}\n\n{SEGMENTED_NOTE}"}
    if "References" in sections:
        seg_sections["References"] = sections["References"]
    for build, fn_name, how, secs in (
        (plain, fn, "whole message.", sections),
        (segmented, f"{fn}_segmented", "segments forwarded as they arrive.", seg_sections),
    ):
        build.__name__ = build.__qualname__ = fn_name
        build.__module__ = module
        build.__doc__ = _docstring(f"{headline}, {how}\n{rest}".rstrip(), secs)
    return TreeFamily(name, summary, tree, plain, segmented, quadratic, anytime, build_cost)


# -- nominal planning costs (for the tuner's budget; calibrated on a 2020s x86 core) -----
EDGE_MODEL_S = 6e-6
"""Nominal seconds of the per-edge model per tree edge (one tuner evaluation is O(P))."""
SEARCH_EVALUATIONS = 40
"""Nominal model evaluations of the tuner's segment-size search of one builder."""
QUADRATIC_BUILD_S = 4e-8
"""Nominal seconds per rank pair of an O(P^2) tree construction."""


def planning_cost(
    *,
    segmented: bool,
    quadratic: bool = True,
    build: Callable[[Grid], float] | None = None,
) -> Callable[[Grid], float]:
    """A builder's nominal planning seconds on a grid: its tree (``build(grid)`` if
    given), then one model evaluation (unsegmented) or a segment-size search.
    Deterministic: a function of the grid's shape only, so every MPI rank makes the
    same budget decisions."""

    def cost(grid: Grid) -> float:
        P = grid.nranks
        if build is not None:
            tree_s = build(grid)
        else:
            tree_s = QUADRATIC_BUILD_S * P * P if quadratic else EDGE_MODEL_S * P
        return tree_s + (SEARCH_EVALUATIONS if segmented else 1) * EDGE_MODEL_S * P

    return cost
