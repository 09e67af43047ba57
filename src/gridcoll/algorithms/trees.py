"""Tree shapes and the broadcast programs they induce.

A :class:`Tree` is a rooted spanning tree over some ranks, with each node's children in
the order it sends to them. The shape constructors take the ranks to span, root first
(so they serve a whole communicator, the coordinators of a WAN layer, or one cluster),
and run in O(P).

:func:`tree_broadcast` turns a tree into per-rank programs: every node receives each
segment from its parent and forwards it at once to all its children, in order
(seed 003's packet-level forwarding; seed 000's segmented trees).
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from gridcoll.errors import ParameterError
from gridcoll.schedule.ir import Op, PeriodicProgram, Recv, Send

__all__ = [
    "Tree",
    "append_tree_broadcast",
    "binary_tree",
    "binomial_tree",
    "chain_tree",
    "dary_tree",
    "flat_tree",
    "minimal_height",
    "refine_segments",
    "relative_ranks",
    "tree_broadcast",
]


@dataclass(frozen=True)
class Tree:
    """A rooted tree: ``children[v]`` lists v's children in send order."""

    root: int
    children: Mapping[int, tuple[int, ...]]

    def nodes(self) -> list[int]:
        """All nodes, in breadth-first order from the root."""
        order, i = [self.root], 0
        while i < len(order):
            order.extend(self.children.get(order[i], ()))
            i += 1
        return order

    def parents(self) -> dict[int, int]:
        """Parent of every non-root node."""
        return {c: v for v, kids in self.children.items() for c in kids}

    @property
    def degree(self) -> int:
        """``d``: the largest number of children of any node."""
        return max((len(k) for k in self.children.values()), default=0)

    @property
    def height(self) -> int:
        """``h``: the longest root-to-leaf path, in edges."""
        depth = {self.root: 0}
        for v in self.nodes():
            for c in self.children.get(v, ()):
                depth[c] = depth[v] + 1
        return max(depth.values())

    def graft(self, subtrees: Sequence[Tree]) -> Tree:
        """This tree with each subtree hung below its root (a node of this tree).

        The subtree's children come after the node's own children: a coordinator
        forwards to the other coordinators first, then into its LAN (seed 000, 3.1.2).
        """
        children = {v: tuple(k) for v, k in self.children.items()}
        for sub in subtrees:
            for v, kids in sub.children.items():
                children[v] = children.get(v, ()) + tuple(kids)
        return Tree(self.root, children)


def relative_ranks(nranks: int, root: int) -> list[int]:
    """Ranks ``root, root+1, ..., root-1`` (mod P): the root first, as MPICH numbers them."""
    return [(root + i) % nranks for i in range(nranks)]


def flat_tree(ranks: Sequence[int]) -> Tree:
    """The root sends to every other rank directly (d = P-1, h = 1)."""
    return Tree(ranks[0], {ranks[0]: tuple(ranks[1:])} if len(ranks) > 1 else {})


def chain_tree(ranks: Sequence[int]) -> Tree:
    """Each rank sends to the next (d = 1, h = P-1): the pipeline of seed 002, Table 1."""
    return Tree(ranks[0], {a: (b,) for a, b in itertools.pairwise(ranks)})


def dary_tree(ranks: Sequence[int], degree: int) -> Tree:
    """A complete d-ary tree: relative node i has children ``d*i+1 .. d*i+d``.

    It has the minimal height for its degree: the smallest h with
    ``sum_{i=0}^{h} d^i >= P`` (seed 000, sec. 3.1.1). Built in O(P).
    """
    if degree < 1:
        raise ParameterError(f"tree degree must be >= 1, got {degree!r}")
    n = len(ranks)
    children = {}
    for i in range(n):
        first = degree * i + 1
        if first >= n:
            break
        children[ranks[i]] = tuple(ranks[first : min(first + degree, n)])
    return Tree(ranks[0], children)


def binary_tree(ranks: Sequence[int]) -> Tree:
    """The binary tree (seed 002, Table 1): a complete 2-ary tree."""
    return dary_tree(ranks, 2)


def binomial_tree(ranks: Sequence[int]) -> Tree:
    """MPICH's binomial tree: relative node i receives from ``i - lowbit(i)`` and sends
    to ``i + 2^j`` for ``2^j < lowbit(i)``, largest subtree first. Height ceil(log2 P)."""
    n = len(ranks)
    children = {}
    for i in range(n):
        low = (i & -i) if i else 1 << max(n - 1, 1).bit_length()
        kids = []
        mask = low >> 1
        while mask:
            if i + mask < n:
                kids.append(ranks[i + mask])
            mask >>= 1
        if kids:
            children[ranks[i]] = tuple(kids)
    return Tree(ranks[0], children)


def minimal_height(nranks: int, degree: int) -> int:
    """The smallest ``h >= 1`` with ``sum_{i=0}^{h} d^i >= P`` (seed 000, sec. 3.1.1)."""
    if nranks <= 1:
        return 0
    if degree <= 1:
        return nranks - 1
    h, total, level = 0, 1, 1
    while total < nranks:
        h += 1
        level *= degree
        total += level
    return h


def tree_broadcast(
    tree: Tree,
    nranks: int,
    nsegments: int,
    *,
    rendezvous: bool = False,
) -> tuple[Sequence[Op], ...]:
    """Per-rank programs that broadcast ``nsegments`` segments down ``tree``.

    Segmented (``nsegments > 1``): each node receives segment s from its parent, then
    sends it to each child in order, then moves to segment s+1; so forwarding of one
    segment overlaps the arrival of the next. Each such program is a
    :class:`~gridcoll.schedule.ir.PeriodicProgram` (the pattern ``Recv(parent)``,
    ``Send(c_1)``, ..., ``Send(c_d)`` over the segments): O(P) time and memory for any
    ``k``, instead of O(P k) op objects. A rank outside the tree gets ``()``.

    Rendezvous (seed 002, Table 1): before the data, a parent sends each child a
    request and waits for its clear-to-send, costing ``2 g(1) + 3 L`` per edge. A node
    starts its children's handshakes only once it holds the data (as ``MPI_Send`` in
    rendezvous mode does), first sending all requests, then each child's data as its
    answer comes. These programs are tuples, O(P k).
    """
    nodes = tree.nodes()
    if rendezvous or len(set(nodes)) != len(nodes):  # a malformed tree: repeated nodes
        return _explicit_tree_broadcast(tree, nranks, nsegments, rendezvous=rendezvous)
    programs: list[Sequence[Op]] = [()] * nranks
    parent = tree.parents()
    segments = tuple((s,) for s in range(nsegments))  # shared by every program
    for v in nodes:
        pattern = [(False, parent[v])] if v in parent else []
        pattern += [(True, c) for c in tree.children.get(v, ())]
        if pattern and segments:
            programs[v] = PeriodicProgram(tuple(pattern), segments)
    return tuple(programs)


def _explicit_tree_broadcast(
    tree: Tree, nranks: int, nsegments: int, *, rendezvous: bool
) -> tuple[tuple[Op, ...], ...]:
    """:func:`tree_broadcast` as tuples of ops, one object per op: O(P k)."""
    programs: list[list[Op]] = [[] for _ in range(nranks)]
    parent = tree.parents()
    segments = [(s,) for s in range(nsegments)]
    for v in tree.nodes():
        program = programs[v]
        kids = tree.children.get(v, ())
        if rendezvous:
            if v in parent:  # answer the parent's request, then take the data
                program += [Recv(parent[v], ()), Send(parent[v], ())]
                program += [Recv(parent[v], seg) for seg in segments]
            program += [Send(c, ()) for c in kids]
            for c in kids:
                program.append(Recv(c, ()))
                program += [Send(c, seg) for seg in segments]
            continue
        for seg in segments:
            if v in parent:
                program.append(Recv(parent[v], seg))
            program += [Send(c, seg) for c in kids]
    return tuple(tuple(p) for p in programs)


def append_tree_broadcast(
    programs: Sequence[list[Op]], tree: Tree, messages: Sequence[tuple[int, ...]]
) -> None:
    """Append to ``programs`` the ops that broadcast ``messages`` down ``tree``, in order.

    Like :func:`tree_broadcast`, but each message is a tuple of segment indices (one
    message may carry several segments), and the ops are appended to programs that may
    already hold earlier phases: a coordinator that first takes part in a WAN tree and
    then forwards into its LAN (seed 000, sec. 3.1.2) gets both by two calls.
    """
    parent = tree.parents()
    for v in tree.nodes():
        program = programs[v]
        kids = tree.children.get(v, ())
        for message in messages:
            if v in parent:
                program.append(Recv(parent[v], message))
            program += [Send(c, message) for c in kids]


def refine_segments(
    *cuts: Sequence[tuple[int, int]],
) -> tuple[tuple[tuple[int, int], ...], tuple[tuple[tuple[int, ...], ...], ...]]:
    """The common refinement of several cuts of one byte range into segments.

    Each cut is a tuple of contiguous ``(offset, length)`` segments covering the same
    range (as :func:`~gridcoll.schedule.ir.split_segments` returns). The refinement has
    a boundary wherever any cut has one; every segment of every cut is then the tuple
    of refined segment indices that covers it. Returns ``(segments, covers)`` with
    ``covers[i][j]`` the refined indices of segment j of cut i. O(total segments).
    """
    bounds = sorted({o for cut in cuts for o, _ in cut} | {o + n for cut in cuts for o, n in cut})
    segments = tuple((a, b - a) for a, b in itertools.pairwise(bounds))
    index = {offset: i for i, (offset, _) in enumerate(segments)}
    covers = []
    for cut in cuts:
        covers.append(
            tuple(tuple(range(index[o], index.get(o + n, len(segments)))) for o, n in cut)
        )
    return segments, tuple(covers)
