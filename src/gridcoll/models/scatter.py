"""Closed-form P-LogP models of the scatter builders (:mod:`gridcoll.algorithms.scatter`).

``b = nbytes`` is the block of one rank, ``m`` the segment size, ``k = ceil(b/m)``.

Seed 002, Table 2 (one network), cited per function:

=====================  ===============================================================
flat                   ``(P-1) g(b) + L``
chain                  ``sum_{j=1}^{P-1} g(j b) + (P-1) L``
pipelined chain        ``(P-1) (g(b) + L)``
binomial               ``sum_{j=0}^{ceil(log2 P)-1} g(2^j b) + ceil(log2 P) L``
=====================  ===============================================================

Seed 000, sec. 3.2, for the segmented flat tree walking the clusters round-robin:
``T = (k-1) gamma(m) + lam(m)``,
``gamma(m) <= P_l max(g_w(m), (P_w-1) s_w(m) + s_l(m)) + or_l(m)``,
``lam(m) <= (P_l-1) max(g_w(m), (P_w-1) s_w(m) + s_l(m)) + (P_w-1) s_w(m) + r_w(m)``
(:func:`magpie_segmented_scatter_paper`).

The registered models evaluate these shapes edge by edge on the builder's own tree
(:func:`gridcoll.models._collective.sized_tree`), each edge with its route's
parameters and its own message size, so they also hold on grids whose routes differ;
where the formulas above are exact (one network, no contention) they coincide with
them, and with the simulator.
"""

from __future__ import annotations

from collections.abc import Callable

from gridcoll.algorithms.magpie import cluster_ranks, coordinator_order
from gridcoll.algorithms.scatter import round_robin_order
from gridcoll.algorithms.trees import Tree, binomial_tree, flat_tree, relative_ranks
from gridcoll.models._collective import Costs, pipeline_time, sized_tree
from gridcoll.models.single_layer import check_model_call, nsegments
from gridcoll.models.two_layer import slowest_lan, slowest_wan
from gridcoll.network.grid import Grid
from gridcoll.network.plogp import s_w

__all__ = [
    "MODELS",
    "binomial_scatter_model",
    "chain_pipelined_scatter_model",
    "chain_scatter_model",
    "cluster_aware_scatter_model",
    "flat_scatter_model",
    "magpie_original_scatter_model",
    "magpie_segmented_scatter_model",
    "magpie_segmented_scatter_paper",
    "scatter_table2",
]


def scatter_table2(shape: str, g: Callable[[float], float], L: float, P: int, b: int) -> float:
    """Seed 002, Table 2, on one network: ``shape`` is ``flat``, ``chain``,
    ``chain-pipelined`` or ``binomial``; ``g`` the gap function."""
    if P <= 1:
        return 0.0
    if shape == "flat":
        return (P - 1) * g(b) + L
    if shape == "chain":
        return sum(g(j * b) for j in range(1, P)) + (P - 1) * L
    if shape == "chain-pipelined":
        return (P - 1) * (g(b) + L)
    if shape == "binomial":
        steps = (P - 1).bit_length()
        return sum(g(2**j * b) for j in range(steps)) + steps * L
    raise ValueError(f"no Table 2 row for {shape!r}")


def _blocks(b: int) -> Callable[[int, int], float]:
    return lambda parent, child: b


def flat_scatter_model(grid: Grid, nbytes: int, root: int = 0, *, itemsize: int = 1) -> float:
    """Model of :func:`~gridcoll.algorithms.scatter.flat_scatter`: Table 2's flat tree,
    edge by edge (seconds)."""
    b = check_model_call(grid, nbytes, root, itemsize)
    tree = flat_tree(relative_ranks(grid.nranks, root))
    return sized_tree(Costs(grid), tree, _blocks(b))[1]


def chain_scatter_model(grid: Grid, nbytes: int, root: int = 0, *, itemsize: int = 1) -> float:
    """Model of :func:`~gridcoll.algorithms.scatter.chain_scatter`: Table 2's chain,
    hop ``i`` carrying ``(P - i) b`` bytes."""
    b = check_model_call(grid, nbytes, root, itemsize)
    rel = relative_ranks(grid.nranks, root)
    position = {r: i for i, r in enumerate(rel)}
    tree = Tree(rel[0], {rel[i - 1]: (rel[i],) for i in range(1, len(rel))})
    P = grid.nranks
    return sized_tree(Costs(grid), tree, lambda a, c: (P - position[c]) * b)[1]


def chain_pipelined_scatter_model(
    grid: Grid, nbytes: int, root: int = 0, *, segment_size: int, itemsize: int = 1
) -> float:
    """Model of :func:`~gridcoll.algorithms.scatter.chain_pipelined_scatter`: Table 2's
    pipelined chain with ``k`` segments per block (:func:`pipeline_time`): the
    ``(P - i) k`` messages reaching relative rank ``i`` end with its own."""
    m = check_model_call(grid, nbytes, root, itemsize, segment_size)
    k = nsegments(nbytes, m)
    rel = relative_ranks(grid.nranks, root)
    P = grid.nranks
    return pipeline_time(Costs(grid), rel, [(P - i) * k for i in range(P)], m)


def binomial_scatter_model(grid: Grid, nbytes: int, root: int = 0, *, itemsize: int = 1) -> float:
    """Model of :func:`~gridcoll.algorithms.scatter.binomial_scatter`: Table 2's
    binomial tree, each edge carrying its subtree's blocks."""
    b = check_model_call(grid, nbytes, root, itemsize)
    P = grid.nranks
    rel = relative_ranks(P, root)
    position = {r: i for i, r in enumerate(rel)}

    def size(parent: int, child: int) -> float:
        i = position[child]
        return min(i & -i, P - i) * b

    return sized_tree(Costs(grid), binomial_tree(rel), size)[1]


def _original_tree(grid: Grid, root: int) -> tuple[Tree, dict[int, int]]:
    """MagPIe's original scatter as a tree, and the blocks each edge carries."""
    coordinators = coordinator_order(grid, root)
    members = {c: cluster_ranks(grid, grid.cluster_of[c], c) for c in coordinators}
    children = {root: tuple(coordinators[1:]) + tuple(members[root][1:])}
    nblocks = {c: len(members[c]) for c in coordinators[1:]}
    for c in coordinators[1:]:
        if len(members[c]) > 1:
            children[c] = tuple(members[c][1:])
    return Tree(root, children), nblocks


def magpie_original_scatter_model(
    grid: Grid, nbytes: int, root: int = 0, *, itemsize: int = 1
) -> float:
    """Model of :func:`~gridcoll.algorithms.scatter.magpie_original_scatter`: whole
    cluster shares over the WAN one after the other, then local flat trees."""
    b = check_model_call(grid, nbytes, root, itemsize)
    tree, nblocks = _original_tree(grid, root)
    size = lambda parent, child: nblocks.get(child, 1) * b if parent == root else b  # noqa: E731
    return sized_tree(Costs(grid), tree, size)[1]


def magpie_segmented_scatter_model(
    grid: Grid, nbytes: int, root: int = 0, *, segment_size: int, itemsize: int = 1
) -> float:
    """Model of :func:`~gridcoll.algorithms.scatter.magpie_segmented_scatter`:
    ``T = (k-1) gamma(m) + lam(m)`` with ``gamma`` and ``lam`` of one round of the
    root's flat tree in round-robin order, edge by edge (seed 000, sec. 3.2)."""
    m = check_model_call(grid, nbytes, root, itemsize, segment_size)
    k = nsegments(nbytes, m)
    tree = flat_tree([root, *round_robin_order(grid, root)])
    gamma, lam, _ = sized_tree(Costs(grid), tree, _blocks(m))
    return (k - 1) * gamma + lam


def magpie_segmented_scatter_paper(
    grid: Grid, nbytes: int, root: int = 0, *, segment_size: int, itemsize: int = 1
) -> float:
    """Seed 000, sec. 3.2, as printed: ``(k-1) gamma(m) + lam(m)`` with the upper bounds
    on ``gamma`` and ``lam``, on the slowest WAN route and LAN (sec. 4)."""
    m = check_model_call(grid, nbytes, root, itemsize, segment_size)
    k = nsegments(nbytes, m)
    P_w = grid.nclusters
    P_l = max(c.nranks for c in grid.clusters)
    lan = slowest_lan(grid)
    if P_w < 2:
        round_ = lan.s(m)
        gamma = (P_l - 1) * round_ + lan.or_(m)
        return (k - 1) * gamma + (P_l - 2) * round_ + lan.L + lan.g(m)
    wan = slowest_wan(grid)
    sw = s_w(lan, wan, m)
    per = max(wan.g(m), (P_w - 1) * sw + lan.s(m))
    gamma = P_l * per + lan.or_(m)
    lam = (P_l - 1) * per + (P_w - 1) * sw + wan.L + wan.g(m)
    return (k - 1) * gamma + lam


def _cluster_aware_tree(grid: Grid, root: int) -> tuple[Tree, dict[int, int]]:
    """One round of the cluster-aware scatter as a tree: the root sends the remote
    coordinators their cluster's round, then its own ranks their segments."""
    return _original_tree(grid, root)


def cluster_aware_scatter_model(
    grid: Grid, nbytes: int, root: int = 0, *, segment_size: int, itemsize: int = 1
) -> float:
    """Model of :func:`~gridcoll.algorithms.scatter.cluster_aware_scatter`:
    ``(k-1) gamma(m) + lam(m)`` of one round of its two-level tree, a WAN edge carrying
    ``N_c m`` bytes, a LAN edge ``m``."""
    m = check_model_call(grid, nbytes, root, itemsize, segment_size)
    k = nsegments(nbytes, m)
    tree, nblocks = _cluster_aware_tree(grid, root)
    size = lambda parent, child: nblocks.get(child, 1) * m if parent == root else m  # noqa: E731
    gamma, lam, _ = sized_tree(Costs(grid), tree, size)
    return (k - 1) * gamma + lam


MODELS = {
    ("scatter", "flat"): flat_scatter_model,
    ("scatter", "chain"): chain_scatter_model,
    ("scatter", "chain-pipelined"): chain_pipelined_scatter_model,
    ("scatter", "binomial"): binomial_scatter_model,
    ("scatter", "magpie-original"): magpie_original_scatter_model,
    ("scatter", "magpie-segmented"): magpie_segmented_scatter_model,
    ("scatter", "cluster-aware"): cluster_aware_scatter_model,
}
"""The scatter models, by ``(op, name)``."""
