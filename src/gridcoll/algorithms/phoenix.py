"""Seed 004's static spanning trees (Phoenix), built from probes, and the ``list`` chain.

Saito, Taura and Chikayama build, for every root, a latency-aware tree for short
messages and a bandwidth-aware tree for long ones, without any configuration: each
processor repeatedly picks another processor at random, measures the round-trip time
(a 1-byte ping-pong) and the bandwidth (a 128-kilobyte download), and decides whether
that *candidate* is a better parent than its current one (sec. IV-A to IV-C). A
processor first takes any candidate that is connected to the tree as its parent,
then keeps probing: "each processor performs 10 extra measurements". This module runs
that protocol against the grid's P-LogP parameters, with an explicit seeded
``random.Random``, so a tree is reproducible:

* a probe of q by p measures ``RTT = r_pq(1) + r_qp(1)`` and
  ``bw = 128 KiB / r_qp(128 KiB)`` (the download from q to p, latency included), each
  with a seeded relative noise of up to :data:`PROBE_JITTER` (5%), as real measurements
  have: with exact values, every processor of a cluster measures the same RTT to the
  same remote parent, ``dist`` ties, condition II below never holds between them and
  the wide-area edges are never replaced by local ones;
* each processor keeps what it measured to its parent when it chose it
  (``RTT_p,parent``, ``bw``); ``dist`` sums those along the tree path (figure 3);
* **latency-aware** (sec. IV-B): p becomes q's child when ``RTT_p,q < RTT_p,parent``
  and ``dist_q < dist_p``, where ``dist`` sums the RTTs of the tree path from the root;
* **bandwidth-aware** (sec. IV-C): p estimates the rate it would receive at below q as
  ``est_p,q = min(est_q, bw / n_children)`` and moves when that beats its current
  ``est_p,parent`` (``est_root = inf``). ``n_children`` counts q's children with p
  among them ("the number of siblings p would have", plus p itself: dividing by the
  siblings alone would be infinite below a leaf).

The protocol runs in rounds: every processor still probing makes one probe per round,
in rank order; it stops after its 10 extra probes. The tree state each decision reads
(distances, children counts, estimates) is the current one, as if every processor
learnt its ancestors' changes at once. One ``random.Random(seed)`` draws the probed
processors and the noise, so a tree is reproducible. A parent sends to its children in the order
they joined it (the paper fixes no order).

The probes run among all ranks up to :data:`~gridcoll.algorithms._hetero.COORDINATOR_RANKS`;
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
import random

from gridcoll.algorithms._hetero import cached_tree, coordinator_tree, tree_bcast, tree_family
from gridcoll.algorithms.trees import Tree, chain_tree
from gridcoll.errors import ParameterError
from gridcoll.network.grid import Grid
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

PROBE_BYTES = 128 * 1024
"""The bandwidth probe: a 128-kilobyte download (seed 004, sec. IV-A)."""

PROBE_JITTER = 0.05
"""Relative noise of a probe (our model of a real measurement; see the module doc)."""

LIST_EXACT_CLUSTERS = 12
"""Up to this many clusters the ``list`` order is found exactly (O(2^C C^2))."""


class _Probes:
    """Probe results: the grid's values (per ordered cluster pair, memoised) times a
    seeded measurement noise ``1 + jitter * U(0, 1)`` on each RTT, ``1 - jitter * U``
    on each bandwidth."""

    def __init__(self, grid: Grid, rng: random.Random, jitter: float):
        self.grid, self.rng, self.jitter = grid, rng, jitter
        self._rtt: dict[tuple[int, int], float] = {}
        self._bw: dict[tuple[int, int], float] = {}

    def rtt(self, p: int, q: int) -> float:
        """A 1-byte ping-pong between p and q."""
        key = (self.grid.cluster_of[p], self.grid.cluster_of[q])
        base = self._rtt.get(key)
        if base is None:
            there, back = self.grid.plogp(p, q), self.grid.plogp(q, p)
            base = self._rtt[key] = there.r(1) + back.r(1)
        return base * (1 + self.jitter * self.rng.random())

    def bandwidth(self, source: int, dest: int) -> float:
        """A 128-kilobyte download from ``source`` to ``dest``."""
        key = (self.grid.cluster_of[source], self.grid.cluster_of[dest])
        base = self._bw.get(key)
        if base is None:
            net = self.grid.plogp(source, dest)
            base = self._bw[key] = PROBE_BYTES / net.r(PROBE_BYTES)
        return base * (1 - self.jitter * self.rng.random())


class _SpanningTree:
    """One root's tree as the processors hold it: parents, children in join order, and
    what each processor measured to its parent (``up``: RTT or bandwidth)."""

    def __init__(self, n: int, root: int):
        self.root = root
        self.parent: list[int | None] = [None] * n
        self.children: list[list[int]] = [[] for _ in range(n)]
        self.up = [0.0] * n

    def connected(self, v: int) -> bool:
        return v == self.root or self.parent[v] is not None

    def below(self, v: int, ancestor: int) -> bool:
        """True if ``v`` is ``ancestor`` or in its subtree."""
        while v is not None:
            if v == ancestor:
                return True
            v = self.parent[v]
        return False

    def move(self, p: int, new_parent: int, measured: float) -> None:
        old = self.parent[p]
        if old is not None:
            self.children[old].remove(p)
        self.parent[p] = new_parent
        self.children[new_parent].append(p)
        self.up[p] = measured

    def tree(self) -> Tree:
        return Tree(self.root, {v: tuple(k) for v, k in enumerate(self.children) if k})


def _dist(tree: _SpanningTree, v: int) -> float:
    """``dist_v,root``: the measured RTTs of the tree path, summed (figure 3)."""
    total = 0.0
    while v != tree.root:
        total += tree.up[v]
        v = tree.parent[v]
    return total


def _est(tree: _SpanningTree, v: int) -> float:
    """``est_v``: the rate v receives at, ``min(est_parent, bw / n_children)``."""
    if v == tree.root:
        return math.inf
    up = tree.parent[v]
    return min(_est(tree, up), tree.up[v] / len(tree.children[up]))


def _judge(probes: _Probes, tree: _SpanningTree, kind: str, p: int, cand: int) -> float | None:
    """The measurement to store if p should move below ``cand``, else None."""
    if kind == "latency":  # sec. IV-B, conditions I and II
        rtt = probes.rtt(p, cand)
        return rtt if rtt < tree.up[p] and _dist(tree, cand) < _dist(tree, p) else None
    if tree.parent[p] == cand:
        return None
    bw = probes.bandwidth(cand, p)  # sec. IV-C
    offer = min(_est(tree, cand), bw / (len(tree.children[cand]) + 1))
    return bw if offer > _est(tree, p) else None


def _probe_tree(grid: Grid, root: int, kind: str, seed: int, extra: int, jitter: float) -> Tree:
    """Run the probing protocol for one root's tree of ``kind``; see the module doc."""
    grid.check_rank(root, "root")
    if extra < 0:
        raise ParameterError(f"extra probes must be >= 0, got {extra!r}")
    if not 0 <= jitter < 1:
        raise ParameterError(f"jitter must be in [0, 1), got {jitter!r}")
    n = grid.nranks
    rng = random.Random(seed)
    probes = _Probes(grid, rng, jitter)
    tree = _SpanningTree(n, root)
    left = {p: extra for p in range(n) if p != root}
    while left:
        for p in sorted(left):
            q = rng.randrange(n - 1)
            q += q >= p  # a uniformly random other processor
            if tree.parent[p] is None:
                if tree.connected(q):  # "any processor connected to that tree"
                    measure = probes.rtt if kind == "latency" else probes.bandwidth
                    tree.move(p, q, measure(p, q) if kind == "latency" else measure(q, p))
                    if left[p] == 0:
                        del left[p]
                continue
            if tree.connected(q) and not tree.below(q, p):
                measured = _judge(probes, tree, kind, p, q)
                if measured is not None:
                    tree.move(p, q, measured)
            left[p] -= 1  # one of the extra measurements
            if left[p] == 0:
                del left[p]
    return tree.tree()


def latency_tree(
    grid: Grid,
    root: int = 0,
    *,
    seed: int = 0,
    extra: int = EXTRA_PROBES,
    jitter: float = PROBE_JITTER,
) -> Tree:
    """Seed 004's latency-aware spanning tree for ``root``, from seeded random probes.

    ``extra`` probes after a parent is found; ``jitter`` the relative measurement noise.
    Expected O(P (log P + extra)) probes, each O(depth).
    """
    return _probe_tree(grid, root, "latency", seed, extra, jitter)


def bandwidth_tree(
    grid: Grid,
    root: int = 0,
    *,
    seed: int = 0,
    extra: int = EXTRA_PROBES,
    jitter: float = PROBE_JITTER,
) -> Tree:
    """Seed 004's bandwidth-aware spanning tree for ``root``, from seeded random probes."""
    return _probe_tree(grid, root, "bandwidth", seed, extra, jitter)


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

    tree.__doc__ = f"Seed 004's {kind}-aware tree (independent of ``nbytes``), memoised."
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
    "seed 004's latency-aware spanning tree, built from random probes",
    """Seed 004's latency-aware tree (for short messages).

    Parameters
    ----------
    seed : int
        Seeds the ``random.Random`` that picks the probed processors.

    Notes
    -----
    Model: seed 000's per-edge ``lam(M)`` on the tree. Expected O(P (log P + 10))
    probes to build.

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
)
phoenix_latency, phoenix_latency_segmented = PHOENIX_LATENCY.build, PHOENIX_LATENCY.build_segmented


PHOENIX_BANDWIDTH = tree_family(
    "phoenix-bandwidth",
    TREES["phoenix-bandwidth"],
    "seed 004's bandwidth-aware spanning tree, built from random probes",
    """Seed 004's bandwidth-aware tree.

    Notes
    -----
    The paper pipelines long messages down this tree: ``phoenix-bandwidth-segmented``.
    Model: seed 000's per-edge ``lam(M)`` on the tree. Expected O(P (log P + 10))
    probes to build, each O(depth) for ``est``.

    References
    ----------
    Seed 004, sec. IV-C; sec. IV-D (pipelining).
    """,
    module=__name__,
    quadratic=False,
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
