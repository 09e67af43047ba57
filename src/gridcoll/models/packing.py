"""Closed-form P-LogP models of the tree-packing collectives
(:mod:`gridcoll.algorithms.packing`): the busiest resource plus the deepest tree.

The packed trees keep many resources busy at once, so seed 000's segmented-tree form
``T = (k-1) gamma(m) + lam(m)`` (sec. 3.1.1) is applied to every shared resource ``x``
and the largest counts, as in the multi-tree broadcast's model
(:mod:`gridcoll.models.multitree`)::

    T = max_x (B_x(m) - b_x(m)) + lam(m)

* ``B_x``, the total work of resource ``x`` over the whole call: for every tree edge
  ``a -> b`` of a part of ``n`` segments averaging ``m'`` bytes, ``n g_x(m')`` on each
  resource of the route (the coordinators' NICs and the gateways at the LAN's ``g_l``,
  each wide-area link at its own ``g``: shared links add up, as ``teragrid``'s site
  access links do); ``n os_w(m')`` and ``n or_w(m')`` on the two coordinators'
  processors; inside every cluster, the owners' hand-over to their coordinator, and
  the chain: the coordinator passes every segment on once (``g_l(m)`` on its NIC out,
  ``os_l(m)`` on its processor; in a reduction it receives it: NIC in, ``or_l(m)``);
* ``b_x(m)``, the largest single occupancy of ``x`` (the last segment's, counted in
  ``lam``: seed 000's ``(k-1) gamma``, not ``k gamma``);
* ``lam(m)``, one segment's way down the deepest tree: per wide-area hop
  ``os_w + g_w + L_w + or_w``, plus the longest chain (``N - 1`` hops of
  ``os_l + g_l + L_l + or_l``).

The reductions (reduce-scatter, reduce) are the same flows on the transposed routes
(:func:`gridcoll.algorithms.packing.cluster_trees`, a reduction phase): the same work
on the same resources. The allreduce's reduce-scatter and allgather overlap: their
work adds up on one account, their depths add. Calls of at most
:data:`REPLAY_MESSAGES` messages are estimated by the builders' own event replay
instead. Every model evaluation is O(C K C
|path|) (the trees are memoised per grid).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

from gridcoll.algorithms._collective import check_commutative
from gridcoll.algorithms.packing import (
    check_packable,
    cluster_trees,
    owned_chunks,
    replay_time,
)
from gridcoll.models.single_layer import check_model_call
from gridcoll.network.grid import Grid

__all__ = [
    "MODELS",
    "multitree_allgather_model",
    "multitree_allreduce_model",
    "multitree_reduce_model",
    "multitree_reduce_scatter_model",
]


def _packed_time(
    grid: Grid, blocks: Sequence[tuple[int, int]], m: int, phases: tuple[bool, ...]
) -> float:
    """``T = max_x (B_x(m) - b_x(m)) + lam(m)`` (module docstring) for the segments of
    ``blocks``
    (``(rank, bytes)``: what each rank sources) cut into ``m``-byte segments, carried
    in every phase of ``phases`` (True: reduced up the trees; all phases at once, on one
    account of work, as :func:`~gridcoll.algorithms.packing.cluster_trees` packs them)."""
    C = grid.nclusters
    coords = grid.coordinators(0)
    units = [0] * C  # segments each cluster sources
    nbytes = [0] * C
    work: dict = defaultdict(float)
    one: dict = defaultdict(float)  # the largest single occupancy of each resource

    def add(x, n: float, occupancy: float) -> None:
        work[x] += n * occupancy
        one[x] = max(one[x], occupancy)

    for rank, size in blocks:
        if size <= 0:
            continue
        c = grid.cluster_of[rank]
        k = -(-size // m)
        units[c] += k
        nbytes[c] += size
        if rank != coords[c]:  # owner <-> coordinator, once per phase
            lan = grid.lan(rank)
            for x in (("nic_out", rank), ("nic_in", coords[c])):
                add(x, len(phases) * k, lan.g(m))
            add(("cpu", rank), len(phases) * k, lan.os(m))
            add(("cpu", coords[c]), len(phases) * k, lan.or_(m))
    weights = nbytes if any(nbytes) else [len(r) for r in grid.members]
    packed = cluster_trees(grid, weights, phases)
    lam = 0.0
    for up, trees in zip(phases, packed, strict=True):
        deepest = 0.0
        for c in range(C):
            if not units[c]:
                continue
            K = len(trees[c])
            for t, tree in enumerate(trees[c]):
                n = units[c] // K + (t < units[c] % K)
                if not n:
                    continue
                each = nbytes[c] / units[c]  # bytes per segment of this source
                depth = {c: 0.0}
                for a, b in tree.edges():
                    src, dst = (coords[b], coords[a]) if up else (coords[a], coords[b])
                    plogp = grid.plogp(src, dst)
                    for kind, key in grid.path(src, dst):
                        if kind == "link":
                            add((kind, key), n, grid.links[key].g(each))
                        else:
                            side = src if kind in ("nic_out", "gw_out") else dst
                            add((kind, key), n, grid.lan(side).g(each))
                    add(("cpu", src), n, plogp.os(each))
                    add(("cpu", dst), n, plogp.or_(each))
                    hop = plogp.os(each) + plogp.g(each) + plogp.L + plogp.or_(each)
                    depth[b] = depth[a] + hop
                deepest = max(deepest, max(depth.values()))
        lam += deepest
    lan_depth = 0.0
    for c in range(C):
        size = grid.clusters[c].nranks
        if size < 2:
            continue
        lan = grid.clusters[c].lan
        # down the chain: the coordinator sends every segment once, but its cluster's
        # own segments when only the owner is left
        sends = sum(units) - (units[c] if size == 2 else 0)
        for up in phases:  # sent down the chain or, reducing, received from it
            nic, cpu = ("nic_in", lan.or_) if up else ("nic_out", lan.os)
            add((nic, coords[c]), sends, lan.g(m))
            add(("cpu", coords[c]), sends, cpu(m))
        hop = lan.os(m) + lan.g(m) + lan.L + lan.or_(m)
        lan_depth = max(lan_depth, len(phases) * (size - 1) * hop)
    busiest = max((work[x] - one[x] for x in work), default=0.0)
    return busiest + lam + lan_depth


REPLAY_MESSAGES = 2000
"""Calls of at most this many messages are estimated by the builders' own event replay
(:func:`gridcoll.algorithms.packing.replay_time`): there the fill of the chains and
trees, which the closed form charges coarsely, is most of the time."""


def _small(grid: Grid, segments: int, phases: int) -> bool:
    """Whether a call of ``segments`` segments is small enough to replay."""
    return segments * (grid.nranks - 1) * phases <= REPLAY_MESSAGES


def _check(grid: Grid, nbytes: int, root: int, itemsize: int, m: int) -> int:
    check_packable(grid)  # the builder declines too
    return check_model_call(grid, nbytes, root, itemsize, m)


def multitree_allgather_model(
    grid: Grid, nbytes: int, root: int = 0, *, segment_size: int,
    itemsize: int = 1,
) -> float:  # fmt: skip
    """:func:`~gridcoll.algorithms.packing.multitree_allgather`: every rank sources its
    block of ``b = nbytes``."""
    m = _check(grid, nbytes, root, itemsize, segment_size)
    if _small(grid, grid.nranks * -(-nbytes // m), 1):
        return replay_time("allgather", grid, nbytes, root, m, itemsize)
    blocks = [(r, nbytes) for r in range(grid.nranks)]
    return _packed_time(grid, blocks, m, (False,))


def multitree_reduce_scatter_model(
    grid: Grid, nbytes: int, root: int = 0, *, segment_size: int,
    itemsize: int = 1, commutative: bool = True,
) -> float:  # fmt: skip
    """:func:`~gridcoll.algorithms.packing.multitree_reduce_scatter`: the allgather's
    work on the transposed routes."""
    check_commutative(commutative, "multitree", supported=False)
    m = _check(grid, nbytes, root, itemsize, segment_size)
    if _small(grid, grid.nranks * -(-nbytes // m), 1):
        return replay_time("reduce_scatter", grid, nbytes, root, m, itemsize)
    blocks = [(r, nbytes) for r in range(grid.nranks)]
    return _packed_time(grid, blocks, m, (True,))


def multitree_reduce_model(
    grid: Grid, nbytes: int, root: int = 0, *, segment_size: int,
    itemsize: int = 1, commutative: bool = True,
) -> float:  # fmt: skip
    """:func:`~gridcoll.algorithms.packing.multitree_reduce`: the root's broadcast over
    packed trees, on the transposed routes."""
    check_commutative(commutative, "multitree", supported=False)
    m = _check(grid, nbytes, root, itemsize, segment_size)
    if _small(grid, -(-nbytes // m), 1):
        return replay_time("reduce", grid, nbytes, root, m, itemsize)
    return _packed_time(grid, [(root, nbytes)], m, (True,))


def multitree_allreduce_model(
    grid: Grid, nbytes: int, root: int = 0, *, segment_size: int,
    itemsize: int = 1, commutative: bool = True,
) -> float:  # fmt: skip
    """:func:`~gridcoll.algorithms.packing.multitree_allreduce`: the reduce-scatter of
    the ``P`` chunks, then their allgather."""
    check_commutative(commutative, "multitree", supported=False)
    m = _check(grid, nbytes, root, itemsize, segment_size)
    if _small(grid, -(-nbytes // m) + grid.nranks, 2):
        return replay_time("allreduce", grid, nbytes, root, m, itemsize)
    chunks = [(r, length) for r, (_, length) in enumerate(owned_chunks(grid, nbytes, itemsize))]
    chunk_m = max(min(m, max(length for _, length in chunks)), 1)
    return _packed_time(grid, chunks, chunk_m, (True, False))


MODELS = {
    ("allgather", "multitree"): multitree_allgather_model,
    ("reduce_scatter", "multitree"): multitree_reduce_scatter_model,
    ("reduce", "multitree"): multitree_reduce_model,
    ("allreduce", "multitree"): multitree_allreduce_model,
}
"""The tree-packing models, by ``(op, name)``."""
