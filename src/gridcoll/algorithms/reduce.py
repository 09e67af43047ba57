"""Reduce builders: the root ends with ``x_0 (op) x_1 (op) ... (op) x_{P-1}``.

The data space is the ``M = nbytes`` bytes of the vector each rank contributes. Data
flows up a tree: a node combines each child's partial result into its own (a combining
:class:`~gridcoll.schedule.ir.Recv`) and sends the result to its parent: a broadcast down
the tree run backwards (:func:`~gridcoll.algorithms._collective.append_tree_reduce`,
:func:`gridcoll.schedule.transform.reverse`).

Operation order. ``commutative=True`` (the default, MPI's predefined operations) lets a
builder number ranks from the root, as MPICH does, so the tree needs no extra hop.
``commutative=False`` makes the order-preserving builders reduce over ranks in their
natural order with trees whose subtrees are contiguous rank intervals, combining each
child on the right (:func:`~gridcoll.algorithms._collective.preorder_tree`); the result
then forms at rank 0 (or at the lowest rank of the first cluster) and one more message
takes it to the root, as MPICH does for non-commutative operations. The schedule
records ``params["commutative"]`` and the validator proves the order.

* :func:`binomial_reduce` - MPICH's binomial tree, whole vector;
* :func:`chain_segmented_reduce` - a pipeline along a chain, segment by segment;
* :func:`dary_segmented_reduce` - a pipelined complete ``d``-ary tree numbered from the
  root breadth first, the broadcast's tree upside down; it interleaves subtrees, so it
  needs a commutative operation;
* :func:`two_level_reduce` - WAN-aware: each cluster reduces to its coordinator along a
  ``d_l``-ary tree, the coordinators along a ``d_w``-ary WAN tree, all pipelined.
"""

from __future__ import annotations

from collections.abc import Sequence

from gridcoll.algorithms._collective import (
    append_tree_reduce,
    check_reduction,
    finish,
    preorder_tree,
    reduction_params,
    runs,
)
from gridcoll.algorithms.magpie import cluster_ranks, coordinator_order
from gridcoll.algorithms.trees import Tree, chain_tree, dary_tree, relative_ranks
from gridcoll.network.grid import Grid
from gridcoll.schedule.ir import Op, Schedule, split_segments

__all__ = [
    "binomial_reduce",
    "binomial_reduce_tree",
    "chain_segmented_reduce",
    "dary_segmented_reduce",
    "reduce_tree",
    "two_level_reduce",
    "two_level_reduce_tree",
]


def binomial_reduce_tree(ranks: Sequence[int]) -> Tree:
    """MPICH's binomial reduce tree over ``ranks`` (root first): relative node ``i``
    receives from ``i + 2^j`` for ``2^j < lowbit(i)``, smallest subtree first, so node
    ``i``'s subtree is the interval ``[i, i + lowbit(i))``."""
    n = len(ranks)
    children = {}
    for i in range(n):
        low = i & -i if i else 1 << max(n - 1, 1).bit_length()
        kids, mask = [], 1
        while mask < low and i + mask < n:
            kids.append(ranks[i + mask])
            mask <<= 1
        if kids:
            children[ranks[i]] = tuple(kids)
    return Tree(ranks[0], children)


def _order(grid: Grid, root: int, commutative: bool) -> list[int]:
    """The ranks a single-layer tree spans, its root first."""
    return relative_ranks(grid.nranks, root) if commutative else list(range(grid.nranks))


def reduce_tree(
    algorithm: str,
    grid: Grid,
    nbytes: int,
    root: int,
    tree: Tree,
    *,
    itemsize: int,
    commutative: bool,
    segment_size: int | None = None,
    **params: int,
) -> Schedule:
    """The reduce schedule of ``nbytes`` up ``tree`` (then to ``root`` if it is not
    the tree's root), in segments of ``segment_size`` bytes (None: whole), recording
    ``segment_size`` (if given), ``params`` and ``commutative``. O(P k)."""
    segments = split_segments(nbytes, segment_size, itemsize)
    messages = [(s,) for s in range(len(segments))]
    programs: list[list[Op]] = [[] for _ in range(grid.nranks)]
    append_tree_reduce(programs, tree, messages, to=root)  # one more hop if not the root
    if segment_size is not None:
        params = {"segment_size": segment_size, **params}
    params = reduction_params(commutative, **params)
    return finish("reduce", algorithm, grid, root, nbytes, segments, programs, params)


def binomial_reduce(
    grid: Grid, nbytes: int, root: int = 0, *, itemsize: int = 1, commutative: bool = True
) -> Schedule:
    """MPICH's binomial reduce: ``ceil(log2 P)`` steps of whole vectors.

    Parameters
    ----------
    grid : Grid
    nbytes : int
        ``M``, the vector size in bytes (a whole number of ``itemsize`` elements).
    root : int
    itemsize : int
    commutative : bool
        False: ranks in natural order, the result formed at rank 0 and sent to the root.

    Returns
    -------
    Schedule

    Raises
    ------
    ParameterError
        For a bad root, a size <= 0 or not whole elements.

    Notes
    -----
    ``T = ceil(log2 P) (L + g(M))`` on one network (seed 002, Table 1's binomial tree
    run backwards, each node receiving its children in turn); one more ``L + g(M)`` for
    a non-commutative operation with ``root != 0``. Builds in O(P).

    References
    ----------
    Thakur, Rabenseifner and Gropp 2005, sec. 4.4 (MPICH's reduce); seed 002, Table 1.

    Examples
    --------
    >>> from gridcoll.network import magpie
    >>> s = binomial_reduce(magpie(1, 4), 8, root=2, commutative=False)
    >>> [(type(op).__name__, op.peer) for op in s.programs[0]]
    [('Recv', 1), ('Recv', 2), ('Send', 2)]
    """
    check_reduction(grid, nbytes, root, "binomial", commutative)
    tree = binomial_reduce_tree(_order(grid, root, commutative))
    return reduce_tree(
        "binomial", grid, nbytes, root, tree, itemsize=itemsize, commutative=commutative
    )


def chain_segmented_reduce(
    grid: Grid,
    nbytes: int,
    root: int = 0,
    *,
    segment_size: int,
    itemsize: int = 1,
    commutative: bool = True,
) -> Schedule:
    """Pipelined chain reduce: segments flow along a chain towards the root.

    Relative rank ``P-1`` sends each segment to ``P-2``, which combines it with its own
    and sends it on, and so on; every rank works on a different segment at once.

    Parameters
    ----------
    grid : Grid
    nbytes : int
        ``M`` in bytes.
    root : int
    segment_size : int
        ``m`` (a multiple of ``itemsize``).
    itemsize : int
    commutative : bool

    Notes
    -----
    ``T = (P-1) (g(m) + L) + (k-1) max(g(m), or(m) + os(m))`` (seed 002, Table 1's
    pipelined chain, backwards; seed 000's ``(k-1) gamma + lam``). Builds in O(P k).

    References
    ----------
    Seed 002, Table 1; Open MPI's pipeline reduce.
    """
    check_reduction(
        grid, nbytes, root, "chain-segmented", commutative,
        itemsize=itemsize, segment_size=segment_size,
    )  # fmt: skip
    tree = chain_tree(_order(grid, root, commutative))
    return reduce_tree(
        "chain-segmented", grid, nbytes, root, tree,
        itemsize=itemsize, commutative=commutative, segment_size=segment_size,
    )  # fmt: skip


def dary_segmented_reduce(
    grid: Grid,
    nbytes: int,
    root: int = 0,
    *,
    segment_size: int,
    degree: int,
    itemsize: int = 1,
    commutative: bool = True,
) -> Schedule:
    """Pipelined reduce up a complete ``d``-ary tree (the broadcast's tree reversed).

    Relative node ``i`` has children ``d i + 1 .. d i + d``: subtrees interleave ranks,
    so the operation must be commutative.

    Parameters
    ----------
    grid : Grid
    nbytes : int
        ``M`` in bytes.
    root : int
    segment_size : int
        ``m``.
    degree : int
        ``d >= 1``.
    itemsize : int
    commutative : bool
        Must be True.

    Raises
    ------
    ParameterError
        For ``commutative=False``, and the usual bad sizes, root or degree.

    Notes
    -----
    ``T = (k-1) gamma(m) + lam(m)`` with ``gamma(m) <= max(g(m), d or(m) + s(m))`` and
    ``lam(m) <= h (d or(m) + r(m))``: seed 000, sec. 3.1.1 with the roles of sender and
    receiver swapped. Builds in O(P k).

    References
    ----------
    Seed 000, sec. 3.1.1; Open MPI's tree reduces, which likewise need commutativity.
    """
    check_reduction(
        grid, nbytes, root, "dary-segmented", commutative, itemsize=itemsize,
        segment_size=segment_size, degrees={"degree": degree}, supported=False,
    )  # fmt: skip
    tree = dary_tree(relative_ranks(grid.nranks, root), degree)
    return reduce_tree(
        "dary-segmented", grid, nbytes, root, tree,
        itemsize=itemsize, commutative=commutative, segment_size=segment_size, degree=degree,
    )  # fmt: skip


def two_level_reduce_tree(
    grid: Grid, root: int, wan_degree: int, lan_degree: int, commutative: bool
) -> Tree:
    """The two-level reduce tree: ``d_l``-ary LAN trees below a ``d_w``-ary WAN tree.

    Commutative: one group per cluster, coordinated by :meth:`Grid.coordinators`
    (the root in its cluster). Otherwise one group per run of consecutive ranks in one
    cluster (:func:`~gridcoll.algorithms._collective.runs`; the clusters themselves on
    the presets), led by its lowest rank, every tree pre-order numbered. A leader takes
    its LAN children before its WAN children.
    """
    if commutative:
        leaders = coordinator_order(grid, root)
        groups = [cluster_ranks(grid, grid.cluster_of[c], c) for c in leaders]
        shape = dary_tree
    else:
        groups = runs(grid)
        leaders = [g[0] for g in groups]
        shape = preorder_tree
    wan = shape(leaders, wan_degree)
    children: dict[int, tuple[int, ...]] = {}
    for group in groups:
        lan = shape(group, lan_degree)
        for v, kids in lan.children.items():
            children[v] = tuple(kids)
    for v, kids in wan.children.items():
        children[v] = children.get(v, ()) + tuple(kids)
    return Tree(leaders[0], children)


def two_level_reduce(
    grid: Grid,
    nbytes: int,
    root: int = 0,
    *,
    segment_size: int,
    wan_degree: int,
    lan_degree: int,
    itemsize: int = 1,
    commutative: bool = True,
) -> Schedule:
    """WAN-aware reduce: each cluster reduces locally, then the coordinators over the WAN.

    Each cluster reduces the vector to its coordinator up a ``d_l``-ary tree; the
    coordinators reduce their clusters' results up a ``d_w``-ary tree to the root. All
    in segments of ``m`` bytes, every rank combining and forwarding a segment as soon as
    it has its children's, so the LAN and WAN phases overlap and every cluster's
    partial result crosses the WAN exactly once.

    Parameters
    ----------
    grid : Grid
    nbytes : int
        ``M`` in bytes.
    root : int
    segment_size : int
        ``m``, the same in both layers.
    wan_degree, lan_degree : int
        ``d_w`` and ``d_l``.
    itemsize : int
    commutative : bool
        False: groups are runs of consecutive ranks, trees pre-order numbered, the
        result formed at rank 0 and sent to the root (:func:`two_level_reduce_tree`).

    Notes
    -----
    ``T = (k-1) gamma(m) + lam_l(m) + lam_w(m)`` with
    ``gamma(m) <= max(g_w(m), d_l or_l(m) + d_w or_w(m) + s_w(m))``: seed 000's
    pipelined two-layer broadcast (sec. 3.1.2) run backwards, the double combining at
    the coordinators in place of its double forwarding. Builds in O(P k).

    References
    ----------
    Seed 000, sec. 3.1.2; seed 004 (Phoenix), reduction along spanning trees.
    """
    check_reduction(
        grid, nbytes, root, "two-level", commutative, itemsize=itemsize,
        segment_size=segment_size, degrees={"wan_degree": wan_degree, "lan_degree": lan_degree},
    )  # fmt: skip
    tree = two_level_reduce_tree(grid, root, wan_degree, lan_degree, commutative)
    return reduce_tree(
        "two-level", grid, nbytes, root, tree, itemsize=itemsize, commutative=commutative,
        segment_size=segment_size, wan_degree=wan_degree, lan_degree=lan_degree,
    )  # fmt: skip
