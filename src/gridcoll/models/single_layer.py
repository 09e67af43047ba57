"""Closed-form P-LogP models of the single-layer broadcasts.

Two sources, cited line by line:

* seed 002 (Barchet-Estefanel and Mounié), sec. 3, Table 1: flat, chain, binary and
  binomial trees, with their rendezvous and segmented variants;
* seed 000 (Kielmann et al.), sec. 3.1.1: a segmented broadcast of ``k = ceil(M/m)``
  segments down a tree with gap ``gamma(m)`` and latency ``lam(m)`` completes at
  ``T = (k-1) gamma(m) + lam(m)``, with the exact values for the flat tree and upper
  bounds for a tree of degree ``d`` and minimal height ``h``.

The formula functions take one P-LogP network ``net``, the number of processes ``P``,
the message size ``M`` and, for the segmented ones, the segment size ``m``. They use the
papers' symbols: ``g``, ``os``, ``or_``, ``L``, ``gamma``, ``lam``, ``k``, ``d``, ``h``.
``s(m)``, the sender completion time, is ``g(m)`` on one network (seed 000, sec. 2.1);
the ``s`` keyword replaces it, e.g. by ``s_w(m) = max(g_l(m), os_w(m))`` for a WAN layer.

The ``*_model`` functions are the registered models of the single-layer builders
(:data:`MODELS`): same signature as the builder, returning seconds. They evaluate seed
000's ``T = (k-1) gamma(m) + lam(m)`` edge by edge on the builder's actual tree
(:mod:`gridcoll.models.tree_model`), on one cluster as on a grid: the exact values of
``gamma`` and ``lam`` for that tree rather than the paper's bounds, so the tuner compares
every candidate on the same footing. On one cluster they equal the Table 1 formulas
where those are exact (flat tree, chain, one message); ``bench/model_vs_sim.py`` reports
the paper's formulas beside them. The rendezvous variants pay the handshake
``2 g(1) + 2 L`` on every edge before its data (Table 1's ``2 g(1) + 3 L`` minus the
``L`` the data message pays anyway).
"""

from __future__ import annotations

from collections.abc import Callable

from gridcoll.algorithms.trees import (
    Tree,
    binary_tree,
    binomial_tree,
    chain_tree,
    dary_tree,
    flat_tree,
    minimal_height,
    relative_ranks,
)
from gridcoll.errors import ParameterError
from gridcoll.models.tree_model import tree_time
from gridcoll.network.grid import Grid
from gridcoll.network.plogp import PLogP

__all__ = [
    "MODELS",
    "binary_model",
    "binary_time",
    "binomial_model",
    "binomial_rendezvous_model",
    "binomial_rendezvous_time",
    "binomial_segmented_model",
    "binomial_segmented_time",
    "binomial_time",
    "chain_model",
    "chain_rendezvous_model",
    "chain_rendezvous_time",
    "chain_segmented_model",
    "chain_segmented_time",
    "chain_time",
    "check_model_call",
    "dary_gamma",
    "dary_lam",
    "dary_segmented_model",
    "dary_segmented_time",
    "flat_gamma",
    "flat_lam",
    "flat_model",
    "flat_rendezvous_model",
    "flat_rendezvous_time",
    "flat_segmented_model",
    "flat_segmented_time",
    "flat_time",
    "nsegments",
    "segmented_time",
]

SendTime = Callable[[float], float]


def nsegments(M: int, m: int) -> int:
    """``k = ceil(M/m)``, the number of segments (seed 000, sec. 3.1)."""
    return -(-M // m)


def _log2_floor(P: int) -> int:
    return P.bit_length() - 1


def _log2_ceil(P: int) -> int:
    return (P - 1).bit_length()


# -- seed 002, Table 1 ------------------------------------------------------------------
def flat_time(net: PLogP, P: int, M: int) -> float:
    """Flat tree: ``(P-1) g(M) + L`` (seed 002, Table 1, row "Flat Tree")."""
    if P <= 1:
        return 0.0
    return (P - 1) * net.g(M) + net.L


def flat_rendezvous_time(net: PLogP, P: int, M: int) -> float:
    """``(P-1) g(M) + 2 g(1) + 3 L`` (seed 002, Table 1, row "Flat Tree Rendezvous")."""
    if P <= 1:
        return 0.0
    return (P - 1) * net.g(M) + 2 * net.g(1) + 3 * net.L


def flat_segmented_time(net: PLogP, P: int, M: int, m: int) -> float:
    """``(P-1) (g(m) k) + L`` (seed 002, Table 1, row "Segmented Flat Tree")."""
    if P <= 1:
        return 0.0
    k = nsegments(M, m)
    return (P - 1) * (net.g(m) * k) + net.L


def chain_time(net: PLogP, P: int, M: int) -> float:
    """Chain: ``(P-1) (g(M) + L)`` (seed 002, Table 1, row "Chain")."""
    return (P - 1) * (net.g(M) + net.L)


def chain_rendezvous_time(net: PLogP, P: int, M: int) -> float:
    """``(P-1) (g(M) + 2 g(1) + 3 L)`` (seed 002, Table 1, row "Chain Rendezvous")."""
    return (P - 1) * (net.g(M) + 2 * net.g(1) + 3 * net.L)


def chain_segmented_time(net: PLogP, P: int, M: int, m: int) -> float:
    """Pipeline: ``(P-1) (g(m) + L) + g(m) (k-1)`` (seed 002, Table 1, "Seg. Chain")."""
    if P <= 1:
        return 0.0
    k = nsegments(M, m)
    return (P - 1) * (net.g(m) + net.L) + net.g(m) * (k - 1)


def binary_time(net: PLogP, P: int, M: int) -> float:
    """Binary tree: ``ceil(log2 P) (2 g(M) + L)``, an upper bound (seed 002, Table 1)."""
    return _log2_ceil(P) * (2 * net.g(M) + net.L)


def binomial_time(net: PLogP, P: int, M: int) -> float:
    """``floor(log2 P) g(M) + ceil(log2 P) L`` (seed 002, Table 1, "Binomial Tree")."""
    if P <= 1:
        return 0.0
    return _log2_floor(P) * net.g(M) + _log2_ceil(P) * net.L


def binomial_rendezvous_time(net: PLogP, P: int, M: int) -> float:
    """``floor(log2 P) g(M) + ceil(log2 P) (2 g(1) + 3 L)`` (seed 002, Table 1)."""
    if P <= 1:
        return 0.0
    return _log2_floor(P) * net.g(M) + _log2_ceil(P) * (2 * net.g(1) + 3 * net.L)


def binomial_segmented_time(net: PLogP, P: int, M: int, m: int) -> float:
    """``floor(log2 P) g(m) k + ceil(log2 P) L`` (seed 002, Table 1, "Seg. Binomial")."""
    if P <= 1:
        return 0.0
    k = nsegments(M, m)
    return _log2_floor(P) * net.g(m) * k + _log2_ceil(P) * net.L


# -- seed 000, sec. 3.1.1 ---------------------------------------------------------------
def segmented_time(gamma: float, lam: float, k: int) -> float:
    """``T = (k-1) gamma(m) + lam(m)`` (seed 000, sec. 3.1.1)."""
    return (k - 1) * gamma + lam


def flat_gamma(net: PLogP, P: int, m: float, *, s: SendTime | None = None) -> float:
    """Flat tree: ``gamma(m) = max(g(m), (P-1) s(m))`` (seed 000, sec. 3.1.1)."""
    s = s or net.s
    return max(net.g(m), (P - 1) * s(m))


def flat_lam(net: PLogP, P: int, m: float, *, s: SendTime | None = None) -> float:
    """Flat tree: ``lam(m) = (P-2) s(m) + r(m)`` (seed 000, sec. 3.1.1)."""
    s = s or net.s
    return (P - 2) * s(m) + net.r(m)


def dary_gamma(net: PLogP, d: int, m: float, *, s: SendTime | None = None) -> float:
    """Upper bound ``gamma(m) <= max(g(m), or(m) + d s(m))`` (seed 000, sec. 3.1.1)."""
    s = s or net.s
    return max(net.g(m), net.or_(m) + d * s(m))


def dary_lam(net: PLogP, P: int, d: int, m: float, *, s: SendTime | None = None) -> float:
    """Upper bound ``lam(m) <= h ((d-1) s(m) + r(m))``, ``h = minimal_height(P, d)``
    (seed 000, sec. 3.1.1)."""
    s = s or net.s
    h = minimal_height(P, d)
    return h * ((d - 1) * s(m) + net.r(m))


def dary_segmented_time(
    net: PLogP, P: int, M: int, m: int, d: int, *, s: SendTime | None = None
) -> float:
    """Segmented d-ary tree: ``(k-1) gamma(m) + lam(m)`` with the d/h upper bounds.

    d = P-1 is the flat tree; the bounds then exceed the exact flat-tree values of
    :func:`flat_gamma` / :func:`flat_lam` by at most ``or(m)`` and ``s(m)`` (seed 000
    uses the bounds "for the rest of this paper").
    """
    if P <= 1:
        return 0.0
    k = nsegments(M, m)
    return segmented_time(dary_gamma(net, d, m, s=s), dary_lam(net, P, d, m, s=s), k)


# -- registered models: the builders' signatures, on a grid ------------------------------
def check_model_call(
    grid: Grid,
    nbytes: int,
    root: int,
    itemsize: int,
    segment_size: int | None = None,
    degree: int | None = None,
) -> int:
    """Validate a model call as the builder would; return the effective ``m``.

    Raises :class:`ParameterError` for a root out of range, a size <= 0 or not a whole
    number of elements, a segment size <= 0 or not a multiple of ``itemsize``, or a
    degree < 1 (the messages of :func:`gridcoll.schedule.split_segments`).
    """
    grid.check_rank(root, "root")
    if not isinstance(itemsize, int) or isinstance(itemsize, bool) or itemsize < 1:
        raise ParameterError(f"itemsize must be >= 1, got {itemsize!r}")
    if not isinstance(nbytes, int) or isinstance(nbytes, bool) or nbytes <= 0:
        raise ParameterError(f"message size must be a positive number of bytes, got {nbytes!r}")
    if nbytes % itemsize:
        raise ParameterError(
            f"message size {nbytes} is not a whole number of {itemsize}-byte elements"
        )
    if degree is not None and (not isinstance(degree, int) or degree < 1):
        raise ParameterError(f"tree degree must be >= 1, got {degree!r}")
    if segment_size is None:
        return nbytes
    if not isinstance(segment_size, int) or isinstance(segment_size, bool) or segment_size <= 0:
        raise ParameterError(f"segment size must be > 0 bytes, got {segment_size!r}")
    if segment_size % itemsize:
        raise ParameterError(
            f"segment size {segment_size} does not divide into the {itemsize}-byte datatype"
        )
    return min(segment_size, nbytes)


_SHAPES: dict[str, Callable[[list[int]], Tree]] = {
    "flat": flat_tree,
    "chain": chain_tree,
    "binary": binary_tree,
    "binomial": binomial_tree,
}


BUILDER_TREES = 64
"""Single-layer builder trees kept per grid (least recently used dropped)."""


def _builder_tree(grid: Grid, shape: str, root: int, degree: int = 0) -> Tree:
    """The tree the builder uses: ``shape`` over MPICH's relative ranks, memoised in
    ``grid.memo`` (a Tree is never modified)."""

    def make() -> Tree:
        ranks = relative_ranks(grid.nranks, root)
        return dary_tree(ranks, degree) if shape == "dary" else _SHAPES[shape](ranks)

    return grid.memo.get("single_layer.trees", (shape, root, degree), make, BUILDER_TREES)


def _on_tree(
    grid: Grid,
    nbytes: int,
    root: int,
    shape: str,
    m: int,
    *,
    degree: int = 0,
    rendezvous: bool = False,
) -> float:
    """The per-edge model (:func:`tree_time`) on the builder's tree."""
    tree = _builder_tree(grid, shape, root, degree)
    return tree_time(grid, tree, nbytes, m, rendezvous=rendezvous)


def flat_model(grid: Grid, nbytes: int, root: int = 0, *, itemsize: int = 1) -> float:
    """Model of :func:`gridcoll.algorithms.flat_tree.flat` (seconds)."""
    M = check_model_call(grid, nbytes, root, itemsize)
    return _on_tree(grid, M, root, "flat", M)


def flat_rendezvous_model(grid: Grid, nbytes: int, root: int = 0, *, itemsize: int = 1) -> float:
    """Model of :func:`gridcoll.algorithms.flat_tree.flat_rendezvous` (seconds)."""
    M = check_model_call(grid, nbytes, root, itemsize)
    return _on_tree(grid, M, root, "flat", M, rendezvous=True)


def flat_segmented_model(
    grid: Grid, nbytes: int, root: int = 0, *, segment_size: int, itemsize: int = 1
) -> float:
    """Model of :func:`gridcoll.algorithms.flat_tree.flat_segmented` (seconds)."""
    m = check_model_call(grid, nbytes, root, itemsize, segment_size)
    return _on_tree(grid, nbytes, root, "flat", m)


def chain_model(grid: Grid, nbytes: int, root: int = 0, *, itemsize: int = 1) -> float:
    """Model of :func:`gridcoll.algorithms.chain.chain` (seconds)."""
    M = check_model_call(grid, nbytes, root, itemsize)
    return _on_tree(grid, M, root, "chain", M)


def chain_rendezvous_model(grid: Grid, nbytes: int, root: int = 0, *, itemsize: int = 1) -> float:
    """Model of :func:`gridcoll.algorithms.chain.chain_rendezvous` (seconds)."""
    M = check_model_call(grid, nbytes, root, itemsize)
    return _on_tree(grid, M, root, "chain", M, rendezvous=True)


def chain_segmented_model(
    grid: Grid, nbytes: int, root: int = 0, *, segment_size: int, itemsize: int = 1
) -> float:
    """Model of :func:`gridcoll.algorithms.chain.chain_segmented` (seconds)."""
    m = check_model_call(grid, nbytes, root, itemsize, segment_size)
    return _on_tree(grid, nbytes, root, "chain", m)


def binary_model(grid: Grid, nbytes: int, root: int = 0, *, itemsize: int = 1) -> float:
    """Model of :func:`gridcoll.algorithms.binary_tree.binary` (seconds)."""
    M = check_model_call(grid, nbytes, root, itemsize)
    return _on_tree(grid, M, root, "binary", M)


def binomial_model(grid: Grid, nbytes: int, root: int = 0, *, itemsize: int = 1) -> float:
    """Model of :func:`gridcoll.algorithms.binomial_tree.binomial` (seconds)."""
    M = check_model_call(grid, nbytes, root, itemsize)
    return _on_tree(grid, M, root, "binomial", M)


def binomial_rendezvous_model(
    grid: Grid, nbytes: int, root: int = 0, *, itemsize: int = 1
) -> float:
    """Model of :func:`gridcoll.algorithms.binomial_tree.binomial_rendezvous` (seconds)."""
    M = check_model_call(grid, nbytes, root, itemsize)
    return _on_tree(grid, M, root, "binomial", M, rendezvous=True)


def binomial_segmented_model(
    grid: Grid, nbytes: int, root: int = 0, *, segment_size: int, itemsize: int = 1
) -> float:
    """Model of :func:`gridcoll.algorithms.binomial_tree.binomial_segmented` (seconds)."""
    m = check_model_call(grid, nbytes, root, itemsize, segment_size)
    return _on_tree(grid, nbytes, root, "binomial", m)


def dary_segmented_model(
    grid: Grid,
    nbytes: int,
    root: int = 0,
    *,
    segment_size: int,
    degree: int,
    itemsize: int = 1,
) -> float:
    """Model of :func:`gridcoll.algorithms.dary_tree.dary_segmented` (seconds)."""
    m = check_model_call(grid, nbytes, root, itemsize, segment_size, degree)
    return _on_tree(grid, nbytes, root, "dary", m, degree=degree)


MODELS: dict[tuple[str, str], Callable[..., float]] = {
    ("bcast", "flat"): flat_model,
    ("bcast", "flat-rendezvous"): flat_rendezvous_model,
    ("bcast", "flat-segmented"): flat_segmented_model,
    ("bcast", "chain"): chain_model,
    ("bcast", "chain-rendezvous"): chain_rendezvous_model,
    ("bcast", "chain-segmented"): chain_segmented_model,
    ("bcast", "binary"): binary_model,
    ("bcast", "binomial"): binomial_model,
    ("bcast", "binomial-rendezvous"): binomial_rendezvous_model,
    ("bcast", "binomial-segmented"): binomial_segmented_model,
    ("bcast", "dary-segmented"): dary_segmented_model,
}
"""The models of the single-layer broadcast builders, by ``(op, name)``."""
