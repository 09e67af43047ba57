"""Shared plumbing of the builders of scatter, gather, allgather, all-to-all, reduce,
allreduce and barrier.

Data spaces (:mod:`gridcoll.schedule.ir`)
    * personalised (scatter, gather, allgather): ``P`` blocks of ``b = nbytes`` bytes,
      block ``i`` at offset ``i b`` belongs to rank ``i``;
    * all-to-all: ``P * P`` blocks, block ``src * P + dst`` goes from ``src`` to ``dst``;
    * reductions: the ``M = nbytes`` bytes of the vector every rank contributes.

:class:`Blocks` cuts every block into ``k`` segments of ``m`` bytes (the last one may be
shorter; ``m`` a multiple of the datatype) so segment ``j`` of block ``i`` is schedule
segment ``i k + j``.

Trees for reductions
    A reduction down a tree (children send to parents) keeps rank order when every
    subtree spans a contiguous interval of ranks rooted at its lowest rank and every
    node combines its children in increasing order, each on the right of what it holds
    (:func:`preorder_tree`, :func:`append_tree_reduce`): the held interval
    ``[v, c)`` then meets the child's ``[c, ...)``. Grids whose clusters are not
    contiguous rank ranges are split into *runs* (:func:`runs`), maximal ranges of
    consecutive ranks in one cluster.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from gridcoll.algorithms._common import check_call
from gridcoll.algorithms.magpie import check_degree
from gridcoll.algorithms.trees import Tree, append_tree_broadcast, dary_tree
from gridcoll.errors import ParameterError
from gridcoll.limits import MAX_SEGMENTS
from gridcoll.network.grid import Grid
from gridcoll.schedule.ir import Op, Recv, Schedule, split_segments
from gridcoll.schedule.transform import reverse_program

__all__ = [
    "Blocks",
    "append_tree_reduce",
    "check_commutative",
    "check_reduction",
    "check_segment_count",
    "check_segment_size",
    "finish",
    "mirrored",
    "preorder_tree",
    "reduction_params",
    "rotated",
    "runs",
]


def check_segment_size(segment_size: object, itemsize: int) -> int:
    """Return ``segment_size`` if it is an integer >= 1 multiple of ``itemsize``."""
    if not isinstance(segment_size, int) or isinstance(segment_size, bool) or segment_size < 1:
        raise ParameterError(f"segment size must be an integer >= 1 bytes, got {segment_size!r}")
    if segment_size % itemsize:
        raise ParameterError(
            f"segment size {segment_size} does not divide into the {itemsize}-byte datatype"
        )
    return segment_size


def check_commutative(commutative: object, algorithm: str, *, supported: bool = True) -> bool:
    """Return ``commutative`` as a bool; raise if the algorithm needs a commutative op.

    ``supported=False`` marks an algorithm whose tree reorders operands.
    """
    if not isinstance(commutative, bool):
        raise ParameterError(f"commutative must be True or False, got {commutative!r}")
    if not commutative and not supported:
        raise ParameterError(
            f"{algorithm!r} reorders operands and needs a commutative operation; for a "
            "non-commutative one choose an order-preserving algorithm (binomial, "
            "chain-segmented, two-level, recursive-doubling, rabenseifner)"
        )
    return commutative


_WHOLE = object()
"""``check_reduction``'s default: the builder takes no segment size."""


def check_reduction(
    grid: Grid,
    nbytes: int,
    root: int,
    algorithm: str,
    commutative: object,
    *,
    itemsize: int = 1,
    segment_size: object = _WHOLE,
    degrees: Mapping[str, object] | None = None,
    supported: bool = True,
) -> None:
    """The checks every reduce and allreduce builder makes before building, in order:
    the call, the segment size (if the builder takes one: any value passed, None
    included, is checked), each named degree, then :func:`check_commutative`."""
    check_call(grid, nbytes, root)
    if segment_size is not _WHOLE:
        check_segment_size(segment_size, itemsize)
    for name, degree in (degrees or {}).items():
        check_degree(degree, name)
    check_commutative(commutative, algorithm, supported=supported)


def reduction_params(commutative: bool, **params: object) -> dict:
    """A reduction schedule's parameters: the builder's, then ``commutative``."""
    return {**params, "commutative": commutative}


@dataclass(frozen=True)
class Blocks:
    """``nblocks`` blocks of ``nbytes`` each, cut into ``k`` segments of ``m`` bytes."""

    nblocks: int
    nbytes: int
    k: int
    segments: tuple[tuple[int, int], ...]

    @classmethod
    def cut(
        cls, nblocks: int, nbytes: int, segment_size: int | None = None, itemsize: int = 1
    ) -> Blocks:
        """Cut every block alike; ParameterError for sizes that are not whole elements."""
        first = split_segments(nbytes, segment_size, itemsize)
        k = len(first)
        segments = tuple(
            (i * nbytes + offset, length) for i in range(nblocks) for offset, length in first
        )
        return cls(nblocks, nbytes, k, segments)

    def seg(self, block: int, j: int) -> int:
        """Schedule segment index of segment ``j`` of ``block``."""
        return block * self.k + j

    def block(self, block: int) -> tuple[int, ...]:
        """All segments of ``block``."""
        return tuple(range(block * self.k, (block + 1) * self.k))

    def blocks(self, blocks: Sequence[int]) -> tuple[int, ...]:
        """All segments of several blocks, block by block."""
        return tuple(s for b in blocks for s in self.block(b))

    def round(self, blocks: Sequence[int], j: int) -> tuple[int, ...]:
        """Segment ``j`` of each of ``blocks``: one round's message."""
        return tuple(self.seg(b, j) for b in blocks)


def check_segment_count(op: str, grid: Grid, nbytes: int, segment_size: int) -> None:
    """Raise :class:`ParameterError` when a personalised call cut into ``m``-byte
    segments would hold more than :data:`~gridcoll.limits.MAX_SEGMENTS` of them (``P^2
    ceil(b/m)`` for all-to-all, ``P ceil(b/m)`` for the others)."""
    blocks = grid.nranks**2 if op == "alltoall" else grid.nranks
    count = blocks * -(-nbytes // max(segment_size, 1))
    if count > MAX_SEGMENTS:
        raise ParameterError(
            f"{op} of {nbytes} B per block in {segment_size}-byte segments on "
            f"{grid.nranks} ranks needs {count} segments, more than {MAX_SEGMENTS}"
        )


def check_blocks(grid: Grid, nbytes: int, root: int, itemsize: int) -> None:
    """The checks every personalised builder makes before building."""
    check_call(grid, nbytes, root)
    split_segments(nbytes, None, itemsize)  # a whole number of elements


def rotated(items: Sequence[int], start: int) -> list[int]:
    """``items[start:] + items[:start]``."""
    return list(items[start:]) + list(items[:start])


def runs(grid: Grid) -> list[list[int]]:
    """Maximal ranges of consecutive ranks in one cluster, in rank order.

    On the presets (ranks numbered cluster by cluster) these are the clusters.
    """
    out: list[list[int]] = []
    for rank, cluster in enumerate(grid.cluster_of):
        if out and grid.cluster_of[out[-1][-1]] == cluster:
            out[-1].append(rank)
        else:
            out.append([rank])
    return out


def preorder_tree(ranks: Sequence[int], degree: int) -> Tree:
    """The complete ``degree``-ary tree numbered in pre-order over ``ranks``.

    Same shape (degree, minimal height) as :func:`~gridcoll.algorithms.trees.dary_tree`,
    but every subtree spans a contiguous slice of ``ranks``, rooted at its first rank,
    children in increasing order: the order-preserving shape for non-commutative
    reductions. O(P).
    """
    shape = dary_tree(list(range(len(ranks))), degree)
    label: dict[int, int] = {}
    stack = [shape.root]
    while stack:  # pre-order: a node, then its subtrees left to right
        v = stack.pop()
        label[v] = ranks[len(label)]
        stack.extend(reversed(shape.children.get(v, ())))
    children = {label[v]: tuple(label[c] for c in kids) for v, kids in shape.children.items()}
    return Tree(ranks[0], children)


def mirrored(tree: Tree) -> Tree:
    """``tree`` with every node's children in reverse order. O(P)."""
    return Tree(tree.root, {v: tuple(reversed(kids)) for v, kids in tree.children.items()})


def append_tree_reduce(
    programs: Sequence[list[Op]],
    tree: Tree,
    messages: Sequence[tuple[int, ...]],
    *,
    to: int | None = None,
) -> None:
    """Append the ops that reduce ``messages`` up ``tree`` to the root, pipelined.

    For each message in order, every node receives it from each child in the tree's
    order, combining it on the right of what it holds, then sends the result to its
    parent. With ``to`` (another rank), the tree's root sends each message's result
    there as soon as it has it, and ``to`` receives them after its own ops.

    The reduce is the broadcast run backwards (:func:`gridcoll.schedule.transform.reverse`
    with combining receives): the broadcast of the messages in reverse order down the
    :func:`mirrored` tree, each program reversed, takes every node's children in the
    tree's order and the messages in order. The data flow is each broadcast path
    walked upwards, so the validator's proof of the broadcast carries over; with
    order-preserving trees (:func:`preorder_tree`) each combine joins the held interval
    with the next child's, so non-commutative operations stay in rank order. The hop
    to ``to`` is a plain receive there (it takes the result; it does not combine).
    O(P) per message.
    """
    hop = to is not None and to != tree.root
    down: list[list[Op]] = [[] for _ in programs]
    mirror = mirrored(tree)
    for message in reversed(messages):
        if hop:  # backwards: the root takes the message from ``to`` before forwarding it
            down[tree.root].append(Recv(to, message))
        append_tree_broadcast(down, mirror, [message])
    for v in tree.nodes():
        programs[v] += reverse_program(down[v], combine=True)
    if hop:
        programs[to] += [Recv(tree.root, message) for message in messages]


def finish(
    op: str,
    algorithm: str,
    grid: Grid,
    root: int,
    nbytes: int,
    segments: tuple[tuple[int, int], ...],
    programs: Sequence[Sequence[Op]],
    params: dict | None = None,
) -> Schedule:
    """The Schedule of ``programs``."""
    return Schedule(
        op,
        algorithm,
        grid.nranks,
        root,
        nbytes,
        segments,
        tuple(tuple(p) for p in programs),
        dict(params or {}),
    )
