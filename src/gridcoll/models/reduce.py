"""Closed-form P-LogP models of the reduce builders (:mod:`gridcoll.algorithms.reduce`).

A reduction is a broadcast run backwards: segments flow up the builder's tree, every
node combining its children's partial results (free in the P-LogP model and in the
simulator: add the computation to ``or`` when it matters). With ``k = ceil(M/m)``
segments, seed 000's ``T = (k-1) gamma(m) + lam(m)`` (sec. 3.1.1) holds with the roles
of sender and receiver swapped: ``gamma`` is the busiest per segment of a node
(``sum or`` of its children plus ``os`` to its parent), its NIC, an edge's gap or a
shared link, and ``lam`` the time the first segment needs to reach the top, a node
being ready at ``max over children, in order, of max(ready_c + r_c, previous + or_c)``
(:func:`gridcoll.models._collective.reduce_gamma_lambda`). The binomial tree's whole
vector is ``k = 1``: ``ceil(log2 P) (L + g(M))`` on one network (seed 002, Table 1).

For a non-commutative operation the builders reduce over ranks in natural order and
send the result from the tree's top to the root: one more ``r(m)`` in ``lam``.
"""

from __future__ import annotations

from gridcoll.algorithms._collective import check_commutative
from gridcoll.algorithms.magpie import check_degree
from gridcoll.algorithms.reduce import binomial_reduce_tree, two_level_reduce_tree
from gridcoll.algorithms.trees import Tree, chain_tree, dary_tree, relative_ranks
from gridcoll.models._collective import Costs, reduce_gamma_lambda
from gridcoll.models.single_layer import check_model_call, nsegments
from gridcoll.network.grid import Grid

__all__ = [
    "MODELS",
    "binomial_reduce_model",
    "chain_segmented_reduce_model",
    "dary_segmented_reduce_model",
    "reduce_time",
    "two_level_reduce_model",
]


def reduce_time(grid: Grid, tree: Tree, nbytes: int, m: int, root: int) -> float:
    """``(k-1) gamma(m) + lam(m)`` of reducing ``nbytes`` up ``tree`` to ``root``."""
    gamma, lam = reduce_gamma_lambda(Costs(grid), tree, m, to=root)
    return (nsegments(nbytes, m) - 1) * gamma + lam


def _order(grid: Grid, root: int, commutative: bool) -> list[int]:
    return relative_ranks(grid.nranks, root) if commutative else list(range(grid.nranks))


def binomial_reduce_model(
    grid: Grid, nbytes: int, root: int = 0, *, itemsize: int = 1, commutative: bool = True
) -> float:
    """Model of :func:`~gridcoll.algorithms.reduce.binomial_reduce` (seconds)."""
    M = check_model_call(grid, nbytes, root, itemsize)
    check_commutative(commutative, "binomial")
    return reduce_time(grid, binomial_reduce_tree(_order(grid, root, commutative)), M, M, root)


def chain_segmented_reduce_model(
    grid: Grid,
    nbytes: int,
    root: int = 0,
    *,
    segment_size: int,
    itemsize: int = 1,
    commutative: bool = True,
) -> float:
    """Model of :func:`~gridcoll.algorithms.reduce.chain_segmented_reduce`: the
    pipelined chain backwards, ``(P-1) r(m) + (k-1) gamma(m)`` on one network."""
    m = check_model_call(grid, nbytes, root, itemsize, segment_size)
    check_commutative(commutative, "chain-segmented")
    return reduce_time(grid, chain_tree(_order(grid, root, commutative)), nbytes, m, root)


def dary_segmented_reduce_model(
    grid: Grid,
    nbytes: int,
    root: int = 0,
    *,
    segment_size: int,
    degree: int,
    itemsize: int = 1,
    commutative: bool = True,
) -> float:
    """Model of :func:`~gridcoll.algorithms.reduce.dary_segmented_reduce` (commutative
    operations only, as the builder)."""
    m = check_model_call(grid, nbytes, root, itemsize, segment_size, degree)
    check_commutative(commutative, "dary-segmented", supported=False)
    tree = dary_tree(relative_ranks(grid.nranks, root), degree)
    return reduce_time(grid, tree, nbytes, m, root)


def two_level_reduce_model(
    grid: Grid,
    nbytes: int,
    root: int = 0,
    *,
    segment_size: int,
    wan_degree: int,
    lan_degree: int,
    itemsize: int = 1,
    commutative: bool = True,
) -> float:
    """Model of :func:`~gridcoll.algorithms.reduce.two_level_reduce`: the same
    evaluation on its two-level tree, so ``gamma`` holds the coordinators' double
    combining (``d_l or_l + d_w or_w + s_w``, seed 000 sec. 3.1.2 backwards)."""
    m = check_model_call(grid, nbytes, root, itemsize, segment_size)
    check_degree(wan_degree, "wan_degree")
    check_degree(lan_degree, "lan_degree")
    check_commutative(commutative, "two-level")
    tree = two_level_reduce_tree(grid, root, wan_degree, lan_degree, commutative)
    return reduce_time(grid, tree, nbytes, m, root)


MODELS = {
    ("reduce", "binomial"): binomial_reduce_model,
    ("reduce", "chain-segmented"): chain_segmented_reduce_model,
    ("reduce", "dary-segmented"): dary_segmented_reduce_model,
    ("reduce", "two-level"): two_level_reduce_model,
}
"""The reduce models, by ``(op, name)``."""
