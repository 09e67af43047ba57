"""Phoenix (seed 004): its spanning trees, taken from the protocol core; the ``list`` chain.

Saito, Taura and Chikayama build, for every root, a latency-aware tree for short
messages and a bandwidth-aware tree for long ones, without any configuration: each
processor repeatedly picks another processor at random, measures the round-trip time
(a 1-byte ping-pong) and the bandwidth (a 128-kilobyte download), and decides whether
that *candidate* is a better parent than its current one (sec. IV-A to IV-C); "each
processor performs 10 extra measurements" once it has a parent.

There is one implementation of that protocol: :mod:`gridcoll.phoenix` (the sans-I/O
core, :class:`~gridcoll.phoenix.protocol.Process`, with its tree rules in
:mod:`gridcoll.phoenix.trees`). The ``phoenix-*`` builders run it:
:func:`core_trees` starts one founder process per rank and runs them to quiescence
with the instant in-memory driver :func:`gridcoll.phoenix.static.stable_trees`, probe
results coming from the grid's P-LogP figures (``RTT = r_pq(1) + r_qp(1)``,
``bw = 128 KiB / r_qp(128 KiB)``, each with a seeded relative noise of up to
:data:`PROBE_JITTER`), the paper's :data:`EXTRA_PROBES` and a seed, and reads the
requested root's latency and bandwidth parents. Two options of the core make one
root's trees affordable:

* ``roots={root}``: the processes keep that root's two trees only, not ``2 P`` (the
  full protocol costs O(P^3) messages: 13 minutes for 136 processes);
* ``remote_probes=True``: a process also spends its ``chain_probes`` budget while its
  parent in either tree is remote. With all roots a process makes hundreds of probes
  (it keeps probing while any of its ``2 P`` trees lacks a parent); with one root
  about ``log P + 10``, often before its LAN neighbours are connected, and most LANs
  then kept several wide-area edges (19 into 3 LANs on das2:34), which the extra
  budget removes (3, Property I of sec. IV-B).

A parent sends to its children most descendants first, ties by rank (the core's
broadcast order, :func:`~gridcoll.phoenix.trees.child_order`). Both trees come from
one run, memoised per ``(grid, root, seed, extra, jitter)`` in ``grid.memo``. Measured
(first build, CPU on a machine shared with other jobs): 16 ranks 0.04 s, 64 ranks
0.44 s, 136 ranks 1.4 s, 200 ranks 2.2 s, 256 ranks 2.8 s.

The core runs among all ranks up to :data:`~gridcoll.algorithms._hetero.COORDINATOR_RANKS`;
above, on a grid with clusters of several ranks, among the coordinators only (the same
protocol on the coordinator grid), each cluster then getting MPICH's binomial tree
below its coordinator (:func:`~gridcoll.algorithms._hetero.coordinator_tree`).

``list`` is the paper's strongest static baseline for long messages (sec. V-A.2):
"the processors were lined up in a list that made the bottleneck as wide as possible,
and messages were pipelined along that list". Ranks of a cluster are consecutive in
the list (the LAN is never the bottleneck); the clusters are ordered, from the root's,
to maximise the narrowest wide-area hop (exactly, by dynamic programming over subsets,
for up to :data:`LIST_EXACT_CLUSTERS` clusters; greedily widest-next-hop beyond), ties
broken by the smaller sum of latencies.

References
----------
H. Saito, K. Taura, T. Chikayama, *Collective operations for wide-area message passing
systems using adaptive spanning trees* (seed 004), sec. IV-A to IV-D and V-A.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from gridcoll.algorithms._hetero import (
    COORDINATOR_RANKS,
    cached_tree,
    coordinator_tree,
    tree_bcast,
    tree_family,
)
from gridcoll.algorithms.trees import Tree, chain_tree
from gridcoll.errors import GridcollError, ParameterError
from gridcoll.network.grid import Grid
from gridcoll.phoenix.protocol import PROBE_BYTES
from gridcoll.phoenix.static import stable_trees
from gridcoll.phoenix.trees import child_order
from gridcoll.schedule.ir import Schedule

__all__ = [
    "EXTRA_PROBES",
    "LIST_EXACT_CLUSTERS",
    "PHOENIX_BANDWIDTH",
    "PHOENIX_LATENCY",
    "PROBE_BYTES",
    "PROBE_JITTER",
    "TREES",
    "bandwidth_tree",
    "core_cost",
    "core_trees",
    "latency_tree",
    "list_bcast",
    "list_order",
    "phoenix_bandwidth",
    "phoenix_bandwidth_segmented",
    "phoenix_latency",
    "phoenix_latency_segmented",
]

EXTRA_PROBES = 10
"""Probes a processor makes after it has found a parent (seed 004, sec. IV-A)."""

PROBE_JITTER = 0.05
"""Relative noise of a probe (our model of a real measurement)."""

LIST_EXACT_CLUSTERS = 12
"""Up to this many clusters the ``list`` order is found exactly (O(2^C C^2))."""

CORE_CACHE_SIZE = 64
"""Core runs (one root's two trees) kept per grid."""

CORE_RANK_S = 1.5e-3
"""Nominal seconds per ``P log2 P`` of a core run (measured: 0.56 s for 64 ranks,
2.3 s for 200, one core of a shared 2020s x86 machine)."""


def core_cost(grid: Grid) -> float:
    """Nominal seconds of the first ``phoenix-*`` build on ``grid`` (the tuner's
    planning budget): ``CORE_RANK_S P log2 P`` over the ranks the core runs among
    (the coordinators above :data:`~gridcoll.algorithms._hetero.COORDINATOR_RANKS`)."""
    n = grid.nranks
    if n > COORDINATOR_RANKS and grid.nclusters < n:
        n = grid.nclusters
    return CORE_RANK_S * n * math.log2(max(n, 2))


def _tree_of_parents(root: int, parents: Mapping[int, int]) -> Tree:
    """The tree of ``parents`` (child -> parent), each node's children most descendants
    first, ties by rank, as the core's broadcast sends (O(P depth))."""
    below = dict.fromkeys(parents, 0)
    below[root] = 0
    for v in parents:
        u = parents[v]
        for _ in parents:  # v counts once for every ancestor
            below[u] += 1
            if u == root:
                break
            u = parents[u]
        else:
            raise GridcollError(f"the core's tree for root {root} has a cycle through {v}")
    kids: dict[int, list[int]] = {}
    for v in sorted(parents):
        kids.setdefault(parents[v], []).append(v)
    return Tree(root, {v: tuple(child_order(k, [below[c] for c in k])) for v, k in kids.items()})


def core_trees(
    grid: Grid,
    root: int = 0,
    *,
    seed: int = 0,
    extra: int = EXTRA_PROBES,
    jitter: float = PROBE_JITTER,
) -> tuple[Tree, Tree]:
    """``root``'s latency-aware and bandwidth-aware trees, from one run of the protocol
    core (module doc), memoised in ``grid.memo``.

    Seed 004 sec. IV-A to IV-C. O(P (log P + extra + chain probes)) probes, each
    moving O(depth) messages up and down the two trees.
    """
    grid.check_rank(root, "root")
    if isinstance(extra, bool) or not isinstance(extra, int) or extra < 0:
        raise ParameterError(f"extra probes must be an int >= 0, got {extra!r}")
    if not 0 <= jitter < 1:
        raise ParameterError(f"jitter must be in [0, 1), got {jitter!r}")

    def run() -> tuple[Tree, Tree]:
        found = stable_trees(
            grid,
            seed=seed,
            extra_probes=extra,
            jitter=jitter,
            roots=frozenset({root}),
            remote_probes=True,
        )
        others = set(range(grid.nranks)) - {root}
        trees = []
        for parents in (found.latency[root], found.bandwidth[root]):
            if set(parents) != others:
                missing = sorted(others - set(parents))[:5]
                raise GridcollError(f"the core left ranks {missing} without a parent")
            trees.append(_tree_of_parents(root, parents))
        return trees[0], trees[1]

    key = (root, seed, extra, jitter)
    return grid.memo.get("phoenix.core", key, run, CORE_CACHE_SIZE)


def latency_tree(
    grid: Grid,
    root: int = 0,
    *,
    seed: int = 0,
    extra: int = EXTRA_PROBES,
    jitter: float = PROBE_JITTER,
) -> Tree:
    """Seed 004's latency-aware spanning tree for ``root``, as the protocol core builds
    it (sec. IV-B; :func:`core_trees`, whose cost it shares)."""
    return core_trees(grid, root, seed=seed, extra=extra, jitter=jitter)[0]


def bandwidth_tree(
    grid: Grid,
    root: int = 0,
    *,
    seed: int = 0,
    extra: int = EXTRA_PROBES,
    jitter: float = PROBE_JITTER,
) -> Tree:
    """Seed 004's bandwidth-aware spanning tree for ``root``, as the protocol core
    builds it (sec. IV-C; :func:`core_trees`, whose cost it shares)."""
    return core_trees(grid, root, seed=seed, extra=extra, jitter=jitter)[1]


# -- list --------------------------------------------------------------------------------
def _widest_order(width, latency, start: int, count: int) -> list[int]:
    """The order of ``count`` clusters from ``start`` maximising the narrowest hop
    (then minimising the latency sum): exact DP over subsets, or greedy beyond
    :data:`LIST_EXACT_CLUSTERS`."""
    if count > LIST_EXACT_CLUSTERS:
        order, left = [start], set(range(count)) - {start}
        while left:
            here = order[-1]
            nxt = min(left, key=lambda c: (-width[here][c], latency[here][c], c))
            order.append(nxt)
            left.remove(nxt)
        return order
    # best[(mask, last)] = (narrowest width, -latency sum), with the path
    best = {(1 << start, start): ((math.inf, 0.0), [start])}
    for _ in range(count - 1):
        grown: dict[tuple[int, int], tuple[tuple[float, float], list[int]]] = {}
        for (mask, last), ((w, neg_lat), path) in best.items():
            for c in range(count):
                if mask >> c & 1:
                    continue
                value = (min(w, width[last][c]), neg_lat - latency[last][c])
                key = (mask | 1 << c, c)
                if key not in grown or value > grown[key][0]:
                    grown[key] = (value, [*path, c])
        best = grown
    return max(best.values(), key=lambda item: item[0])[1]


def list_order(grid: Grid, root: int = 0) -> list[int]:
    """The ranks in ``list`` order: the root's cluster (root first), then the clusters
    ordered to make the narrowest wide-area hop as wide as possible."""
    grid.check_rank(root, "root")
    coordinators = grid.coordinators(root)
    home, count = grid.cluster_of[root], grid.nclusters
    width = [
        [grid.wan(a, b).bandwidth if a != b else math.inf for b in range(count)]
        for a in range(count)
    ]
    latency = [[grid.wan(a, b).L if a != b else 0.0 for b in range(count)] for a in range(count)]
    ranks = []
    for c in _widest_order(width, latency, home, count):
        first = coordinators[c]
        ranks += [first] + [r for r in grid.members[c] if r != first]
    return ranks


def _phoenix_on(kind: str):
    make = latency_tree if kind == "latency" else bandwidth_tree

    def tree(grid: Grid, nbytes: int, root: int = 0, *, seed: int = 0) -> Tree:
        return coordinator_tree(
            grid, (f"phoenix-{kind}", root, seed), root, lambda g, r: make(g, r, seed=seed)
        )

    tree.__doc__ = f"Seed 004's {kind}-aware tree from the core (independent of ``nbytes``)."
    return tree


def _list_on(grid: Grid, nbytes: int, root: int = 0) -> Tree:
    """The ``list`` chain, memoised."""
    return cached_tree(grid, ("list", root), lambda: chain_tree(list_order(grid, root)))


TREES = {
    "phoenix-latency": _phoenix_on("latency"),
    "phoenix-bandwidth": _phoenix_on("bandwidth"),
    "list": _list_on,
}
"""Builder name -> ``tree(grid, nbytes, root, **params)``."""


PHOENIX_LATENCY = tree_family(
    "phoenix-latency",
    TREES["phoenix-latency"],
    "seed 004's latency-aware spanning tree, as the protocol core builds it",
    """Seed 004's latency-aware tree (for short messages), from the protocol core.

    Parameters
    ----------
    seed : int
        Seeds the core's processes (which peer each probes), the driver's message order
        and the probes' noise.

    Notes
    -----
    The tree :func:`core_trees` reads from :mod:`gridcoll.phoenix` run to quiescence
    with the paper's 10 extra probes. Model: seed 000's per-edge ``lam(M)`` on the
    tree. O(P (log P + 10 + 30)) probes to build, each moving O(depth) protocol
    messages (0.5 s for 64 ranks, 2.3 s for 200).

    References
    ----------
    Seed 004, sec. IV-B; sec. IV-D (pipelining).

    Examples
    --------
    >>> from gridcoll.network import magpie
    >>> phoenix_latency(magpie(2, 4), 1024).nmessages
    7
    """,
    module=__name__,
    quadratic=False,
    build_cost=core_cost,
)
phoenix_latency, phoenix_latency_segmented = PHOENIX_LATENCY.build, PHOENIX_LATENCY.build_segmented


PHOENIX_BANDWIDTH = tree_family(
    "phoenix-bandwidth",
    TREES["phoenix-bandwidth"],
    "seed 004's bandwidth-aware spanning tree, as the protocol core builds it",
    """Seed 004's bandwidth-aware tree, from the protocol core.

    Parameters
    ----------
    seed : int
        Seeds the core's processes, the driver's message order and the probes' noise.

    Notes
    -----
    The paper pipelines long messages down this tree: ``phoenix-bandwidth-segmented``.
    The tree :func:`core_trees` reads from the same run as ``phoenix-latency``'s.
    Model: seed 000's per-edge ``lam(M)`` on the tree. O(P (log P + 10 + 30)) probes
    to build, each moving O(depth) protocol messages.

    References
    ----------
    Seed 004, sec. IV-C; sec. IV-D (pipelining).
    """,
    module=__name__,
    quadratic=False,
    build_cost=core_cost,
)
phoenix_bandwidth, phoenix_bandwidth_segmented = (
    PHOENIX_BANDWIDTH.build,
    PHOENIX_BANDWIDTH.build_segmented,
)


def list_bcast(
    grid: Grid, nbytes: int, root: int = 0, *, segment_size: int, itemsize: int = 1
) -> Schedule:
    """``list``: segments pipelined down the chain with the widest bottleneck.

    Notes
    -----
    ``T = (k-1) gamma(m) + lam(m)`` on a chain: ``gamma`` is the narrowest hop's gap,
    so for long messages the rate is the bottleneck bandwidth the order maximises.
    O(2^C C^2 + P) to build for C <= 12 clusters, O(C^2 + P) beyond.

    References
    ----------
    Seed 004, sec. V-A.2 ("List").

    Examples
    --------
    >>> from gridcoll.network import das2
    >>> list_order(das2(1), 0)  # VU -> Delft (7 Mb/s) -> UvA (6.5) -> Leiden (6)
    [0, 3, 2, 1]
    """
    return tree_bcast(
        "list",
        grid,
        nbytes,
        root,
        lambda: _list_on(grid, nbytes, root),
        segment_size=segment_size,
        itemsize=itemsize,
        params={"segment_size": segment_size},
    )
