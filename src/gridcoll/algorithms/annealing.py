"""Simulated annealing for broadcast trees: seed 001's basicSA, driverSA and clusteredSA.

Gupta and Vadhiyar (seed 001, sec. 2.2-2.4, figures 1, 2 and 4) search the space of
broadcast trees with simulated annealing; this module follows their three algorithms
step by step, with an explicit ``random.Random`` everywhere (no global RNG), so a run
is reproducible from its seed and its budget.

basicSA (figure 1)
    Temperature from 100 down to 1, times 0.8 per step, Boltzmann constant 1; at each
    temperature at most 80 moves, ending early after 20 acceptances; the annealing
    quits when a temperature accepted at most 3% of its moves and found no new best.
    A move takes a random node on the path from the root to the leaf that completes
    last and makes it the child of another random node (not in its own subtree, not
    its parent), at a random place in that node's send order. A worse tree is accepted
    with probability ``exp(-diff / T)``, the cost difference in milliseconds (the unit
    of the paper's figures: with seconds every move would be accepted). Every tree
    within 10% of the best seen so far goes into the *good_list*.
driverSA (figure 2)
    A randomisation phase of basicSA runs from random trees (rooted at the broadcast
    root when it is among the nodes), then a refinement phase cycling through the
    good_list with wrap-around: 50 then 25 runs without a budget; with one, the switch
    comes when the best tree has not changed for 1.5x the remaining budget, and the
    refinement runs until the budget is spent.
clusteredSA (figure 4)
    Above 16 nodes, the nodes are partitioned into pools by bandwidth, one pool set per
    percentage 10, 25, 50 and 75 of the largest bandwidth (:func:`form_pool_sets`);
    sets with a pool of more than 16 nodes are dropped (all kept if every set has
    one); driverSA builds a tree in every pool, the pool roots are joined recursively
    the same way, and each pool's tree hangs below its root. The budget is split
    evenly among all the pools the run will anneal, counted beforehand.

The cost of a tree (seed 001 uses Mateescu's model) is seed 000's per-edge model of
gridcoll, ``lam(M)`` of :func:`gridcoll.models.tree_model.tree_time` for the whole
message, shared links included (:class:`TreeCost` computes exactly that, faster).

Budgets: ``evaluations`` counts cost evaluations (deterministic: the same tree on every
machine, which the tuner needs so all MPI ranks agree); ``time_budget_s`` is the
paper's wall-clock ``time_duration`` (results then depend on the machine's speed).
A budget is also checked between the moves of a basicSA run, so it is never overrun
by more than one evaluation. Our additions, both documented at their parameters: a
pool set whose pools are all single nodes is skipped (it would recurse forever), and
``warm_start`` puts the MPICH-G2 tree in the good_list first, so the result is never
worse than that tree in the model.

References
----------
R. Gupta, S. Vadhiyar, *Application-oriented adaptive MPI_Bcast for grids* (seed 001),
sec. 2.2-2.4, figures 1, 2, 4 and table 1.
"""

from __future__ import annotations

import heapq
import math
import random
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from gridcoll.algorithms._hetero import cached_tree, tree_family
from gridcoll.algorithms.mpich_g2 import mpich_g2_tree
from gridcoll.algorithms.trees import Tree
from gridcoll.errors import ParameterError
from gridcoll.network.grid import Grid

__all__ = [
    "ACCEPT_LIMIT",
    "GOOD_FRACTION",
    "INITIAL_TEMP",
    "MAX_POOL",
    "MIN_TEMP",
    "MOVES_PER_TEMP",
    "POOL_PERCENTAGES",
    "QUIT_FRACTION",
    "REFINEMENTS",
    "RESTARTS",
    "SA",
    "SA_CLUSTERED",
    "TEMP_FACTOR",
    "TREES",
    "GoodList",
    "TreeCost",
    "basic_sa",
    "clustered_sa",
    "driver_sa",
    "form_pool_sets",
    "full_run_evaluations",
    "nominal_evaluation_s",
    "nominal_setup_s",
    "random_tree",
    "sa",
    "sa_clustered",
    "sa_clustered_segmented",
    "sa_segmented",
]

INITIAL_TEMP = 100.0
MIN_TEMP = 1.0
TEMP_FACTOR = 0.8
BOLTZMANN = 1.0
MOVES_PER_TEMP = 80
ACCEPT_LIMIT = 20
QUIT_FRACTION = 0.03
GOOD_FRACTION = 0.10
"""Figure 1's constants: temperatures, moves per temperature, acceptances that end a
temperature, the acceptance share below which annealing quits, the good_list margin."""
RESTARTS = 50
REFINEMENTS = 25
"""driverSA's runs without a time budget (figure 2, lines 8 and 26)."""
POOL_PERCENTAGES = (10, 25, 50, 75)
MAX_POOL = 16
"""clusteredSA's bandwidth percentages and largest pool (sec. 2.4, figure 4)."""
GOOD_LIST_SIZE = 32
"""At most this many trees are kept in the good_list (the best ones)."""
COST_UNIT = 1e-3
"""Costs enter the acceptance test in milliseconds."""


def nominal_evaluation_s(grid: Grid) -> float:
    """Nominal seconds of one annealing move and cost evaluation on ``grid`` (a move,
    a copy and an O(P) evaluation): what the tuner divides its budget by."""
    return 1e-5 + 1.5e-6 * grid.nranks


def nominal_setup_s(grid: Grid) -> float:
    """Nominal seconds of a run's set-up on ``grid``: :class:`TreeCost`'s rank-pair
    tables and the pool sets, O(P^2) (0.4-1 s at 200 ranks). The tuner adds it to the
    evaluations' cost when it checks a run against its planning deadline."""
    return 2e-5 * grid.nranks**2


def full_run_evaluations() -> int:
    """An upper bound on the cost evaluations of driverSA without a budget:
    ``(50 + 25)`` basicSA runs of at most 21 temperatures x 80 moves."""
    temps = math.ceil(math.log(MIN_TEMP / INITIAL_TEMP) / math.log(TEMP_FACTOR))
    return (RESTARTS + REFINEMENTS) * (temps * MOVES_PER_TEMP + 1)


# -- the cost of a tree --------------------------------------------------------------------
class TreeCost:
    """Seed 000's per-edge ``lam(M)`` of trees over a subset of a grid's ranks, fast.

    The same value as :func:`gridcoll.models.tree_model.tree_time` with one segment
    (each node sends to its children in order, ``s = max(g_l, os)`` apart; a child
    receives ``L + g(M)`` after the send starts, later if a shared link of the route is
    still busy), from tables of every rank pair's costs built once. ``evaluations``
    counts the trees evaluated. Trees here are local: node ``i`` is ``ranks[i]``.
    """

    def __init__(self, grid: Grid, nbytes: int, ranks: Sequence[int] | None = None):
        self.grid, self.nbytes = grid, nbytes
        self.ranks = list(range(grid.nranks) if ranks is None else ranks)
        self.evaluations = 0
        cl = [grid.cluster_of[r] for r in self.ranks]
        pairs: dict[tuple[int, int], tuple] = {}
        link_ids: dict[str, int] = {}
        m = nbytes
        n = len(self.ranks)
        self.s = [[0.0] * n for _ in range(n)]
        self.r = [[0.0] * n for _ in range(n)]
        self.links: list[list[tuple]] = [[()] * n for _ in range(n)]
        for i in range(n):
            for j in range(n):
                key = (cl[i], cl[j])
                if key not in pairs:
                    pairs[key] = self._pair(key, m, link_ids)
                self.s[i][j], self.r[i][j], self.links[i][j] = pairs[key]
        self.nlinks = len(link_ids)

    def _pair(self, key: tuple[int, int], m: int, link_ids: dict[str, int]) -> tuple:
        ca, cb = key
        grid = self.grid
        lan = grid.clusters[ca].lan
        if ca == cb:
            return max(lan.g(m), lan.os(m)), lan.L + lan.g(m), ()
        route = grid.routes[(ca, cb)]
        net = route.plogp
        ids = tuple(link_ids.setdefault(name, len(link_ids)) for name in route.links)
        gaps = tuple(grid.links[name].g(m) for name in route.links)
        return (
            max(lan.g(m), net.os(m)),
            net.L + net.g(m),
            (tuple(zip(ids, gaps, strict=True)) if ids else ()),
        )

    def sub(self, local: Sequence[int]) -> TreeCost:
        """The evaluator of the nodes ``local`` (indices into :attr:`ranks`)."""
        out = object.__new__(TreeCost)
        out.grid, out.nbytes, out.evaluations = self.grid, self.nbytes, 0
        out.nlinks = self.nlinks
        out.ranks = [self.ranks[i] for i in local]
        out.s = [[self.s[i][j] for j in local] for i in local]
        out.r = [[self.r[i][j] for j in local] for i in local]
        out.links = [[self.links[i][j] for j in local] for i in local]
        return out

    def arrivals(self, root: int, children: Sequence[Sequence[int]]) -> list[float]:
        """Arrival time of every node, as the per-edge model: the sends take the shared
        links in the order of their nominal start (breadth-first order breaks ties)."""
        self.evaluations += 1
        s, r, links = self.s, self.r, self.links
        arrival = [0.0] * len(s)
        order = [root]
        for v in order:
            order.extend(children[v])
        if not self.nlinks:  # nothing to wait for: breadth first is the model's order
            for v in order:
                t, sv, rv = arrival[v], s[v], r[v]
                for c in children[v]:
                    arrival[c] = t + rv[c]
                    t += sv[c]
            return arrival
        position = {v: i for i, v in enumerate(order)}
        free = [0.0] * self.nlinks
        sends: list[tuple[float, int, int, int]] = []  # (nominal start, order, v, c)
        heapq.heappush(sends, (0.0, 0, root, root))
        while sends:
            depart, _, v, c = heapq.heappop(sends)
            if c != v:  # the send v -> c
                route = links[v][c]
                if route:  # wait until every link of the route is free
                    for lid, _ in route:
                        if free[lid] > depart:
                            depart = free[lid]
                    for lid, g in route:
                        free[lid] = depart + g
                arrival[c] = depart + r[v][c]
            t, sc = arrival[c], s[c]
            for child in children[c]:  # c's sends, back to back from its arrival
                heapq.heappush(sends, (t, position[child], c, child))
                t += sc[child]
        return arrival


# -- trees as basicSA moves them -----------------------------------------------------------
@dataclass(eq=False)
class _Tree:
    """A tree over local nodes ``0..n-1`` with its cost and arrivals (once evaluated)."""

    root: int
    parent: list[int]  # -1 at the root
    children: list[list[int]]
    cost: float = math.inf
    arrival: list[float] = field(default_factory=list)

    def key(self) -> tuple:
        return tuple(tuple(k) for k in self.children)

    def copy(self) -> _Tree:
        return _Tree(self.root, self.parent[:], [k[:] for k in self.children])

    def evaluate(self, cost: TreeCost) -> _Tree:
        self.arrival = cost.arrivals(self.root, self.children)
        self.cost = max(self.arrival)
        return self

    def to_tree(self, ranks: Sequence[int]) -> Tree:
        return Tree(
            ranks[self.root],
            {
                ranks[v]: tuple(ranks[c] for c in kids)
                for v, kids in enumerate(self.children)
                if kids
            },
        )

    @classmethod
    def from_tree(cls, tree: Tree, ranks: Sequence[int]) -> _Tree:
        index = {rank: i for i, rank in enumerate(ranks)}
        n = len(ranks)
        parent, children = [-1] * n, [[] for _ in range(n)]
        for v, kids in tree.children.items():
            for c in kids:
                parent[index[c]] = index[v]
                children[index[v]].append(index[c])
        if sorted(index[v] for v in tree.nodes()) != list(range(n)):
            raise ParameterError("the start tree must span exactly the nodes annealed")
        return cls(index[tree.root], parent, children)


def _random_local(n: int, root: int | None, rng: random.Random) -> _Tree:
    """A random tree: each node below a random node already placed (figure 2, line 4)."""
    root = rng.randrange(n) if root is None else root
    others = [v for v in range(n) if v != root]
    rng.shuffle(others)
    parent, children, placed = [-1] * n, [[] for _ in range(n)], [root]
    for v in others:
        p = rng.choice(placed)
        parent[v] = p
        children[p].append(v)
        placed.append(v)
    return _Tree(root, parent, children)


def random_tree(ranks: Sequence[int], root: int, rng: random.Random) -> Tree:
    """A random tree over ``ranks`` rooted at ``root``: each rank, in a random order,
    below a random rank already placed (driverSA's ``generateRandomTree``)."""
    ranks = list(ranks)
    return _random_local(len(ranks), ranks.index(root), rng).to_tree(ranks)


def _subtree(tree: _Tree, v: int) -> set[int]:
    out, stack = {v}, [v]
    while stack:
        for c in tree.children[stack.pop()]:
            out.add(c)
            stack.append(c)
    return out


def _transform(tree: _Tree, rng: random.Random) -> _Tree:
    """Figure 1's move: a random node on the path to the slowest leaf becomes the child
    of another random node (at a random place in its send order)."""
    leaf = max(range(len(tree.arrival)), key=tree.arrival.__getitem__)
    path = []
    while leaf != tree.root:
        path.append(leaf)
        leaf = tree.parent[leaf]
    new = tree.copy()
    if not path:
        return new
    v = rng.choice(path)
    below = _subtree(tree, v)
    targets = [u for u in range(len(tree.parent)) if u not in below and u != tree.parent[v]]
    if not targets:
        return new
    u = rng.choice(targets)
    new.children[new.parent[v]].remove(v)
    new.children[u].insert(rng.randint(0, len(new.children[u])), v)
    new.parent[v] = u
    return new


# -- the good list and the clock -----------------------------------------------------------
class GoodList:
    """Trees whose cost is within 10% of the best seen (seed 001, sec. 2.2)."""

    def __init__(self, clock: _Clock | None = None):
        self.entries: dict[tuple, _Tree] = {}
        self.best: _Tree | None = None
        self.clock = clock
        self.changed_at = 0.0

    def update(self, tree: _Tree) -> None:
        """Figure 1, line 12: offer a tree just evaluated."""
        if self.best is None or tree.cost < self.best.cost:
            self.best = tree
            self.changed_at = self.clock.now() if self.clock else 0.0
            limit = tree.cost * (1 + GOOD_FRACTION)
            self.entries = {k: t for k, t in self.entries.items() if t.cost <= limit}
        if tree.cost <= self.best.cost * (1 + GOOD_FRACTION):
            self.entries.setdefault(tree.key(), tree)
            if len(self.entries) > GOOD_LIST_SIZE:
                worst = max(self.entries, key=lambda k: self.entries[k].cost)
                del self.entries[worst]

    def trees(self) -> list[_Tree]:
        """The kept trees, best first (ties in insertion order)."""
        return sorted(self.entries.values(), key=lambda t: t.cost)


class _Clock:
    """driverSA's clock: wall seconds (``time_duration``) or cost evaluations."""

    def __init__(self, cost: TreeCost, evaluations: float | None, seconds: float | None):
        if evaluations is not None and seconds is not None:
            raise ParameterError("give an evaluation budget or a time budget, not both")
        for name, value in (("evaluations", evaluations), ("time_budget_s", seconds)):
            if value is not None and not value > 0:
                raise ParameterError(f"{name} must be > 0, got {value!r}")
        self.cost = cost
        self.by_evaluations = evaluations is not None
        self.budget = evaluations if evaluations is not None else seconds
        self.start_evals = cost.evaluations
        self.start_time = time.perf_counter()

    @property
    def budgeted(self) -> bool:
        return self.budget is not None

    def now(self) -> float:
        if self.by_evaluations:
            return float(self.cost.evaluations - self.start_evals)
        return time.perf_counter() - self.start_time

    def remaining(self) -> float:
        return math.inf if self.budget is None else self.budget - self.now()

    def exhausted(self) -> bool:
        return self.budget is not None and self.remaining() <= 0


# -- figure 1 ------------------------------------------------------------------------------
def _basic_sa(
    cost: TreeCost, start: _Tree, rng: random.Random, good: GoodList, clock: _Clock
) -> _Tree:
    """Figure 1 on local trees; returns the best tree (``start`` or better)."""
    cur = start if start.arrival else start.copy().evaluate(cost)
    best = cur
    good.update(cur)
    temp = INITIAL_TEMP
    while temp > MIN_TEMP:  # line 6
        accepted, found = 0, False
        for _ in range(MOVES_PER_TEMP):  # line 8
            if clock.exhausted():
                return best
            new = _transform(cur, rng).evaluate(cost)
            good.update(new)
            if new.cost < best.cost:  # lines 14-18
                best = cur = new
                accepted += 1
                found = True
            else:  # lines 20-27: Metropolis, costs in ms
                diff = (new.cost - cur.cost) / COST_UNIT
                if rng.random() < math.exp(min(0.0, -diff / (BOLTZMANN * temp))):
                    cur = new
                    accepted += 1
            if accepted == ACCEPT_LIMIT:  # line 30
                break
        if accepted <= QUIT_FRACTION * MOVES_PER_TEMP and not found:  # line 33
            break
        temp *= TEMP_FACTOR  # line 37
    return best


def basic_sa(
    cost: TreeCost,
    start: Tree,
    rng: random.Random,
    *,
    good: GoodList | None = None,
    evaluations: int | None = None,
) -> tuple[Tree, float]:
    """Seed 001's basicSA (figure 1) from ``start``; returns the best tree and its cost.

    Parameters
    ----------
    cost : TreeCost
        The evaluator of the nodes to span (``start`` spans exactly ``cost.ranks``).
    start : Tree
        The initial tree; the result is never worse.
    rng : random.Random
        The only source of randomness: the same seed gives the same tree.
    good : GoodList, optional
        Updated with every tree within 10% of the best.
    evaluations : int, optional
        Stop after this many cost evaluations.
    """
    clock = _Clock(cost, evaluations, None)
    best = _basic_sa(cost, _Tree.from_tree(start, cost.ranks), rng, good or GoodList(clock), clock)
    return best.to_tree(cost.ranks), best.cost


# -- figure 2 ------------------------------------------------------------------------------
def _driver_sa(
    cost: TreeCost,
    root: int | None,
    rng: random.Random,
    clock: _Clock,
    initial: Iterable[_Tree] = (),
) -> _Tree:
    """Figure 2 on local trees (``root`` a local index, or None for a random root)."""
    good = GoodList(clock)
    n = len(cost.ranks)
    for tree in initial:
        good.update(tree.copy().evaluate(cost))
    if n <= 2:  # one tree per root: nothing to anneal
        for r in range(n) if root is None else (root,):
            kids = [[] for _ in range(n)]
            kids[r] = [v for v in range(n) if v != r]
            good.update(_Tree(r, [r if v != r else -1 for v in range(n)], kids).evaluate(cost))
        return good.best
    runs = 0
    while not clock.exhausted():  # the randomisation phase
        _basic_sa(cost, _random_local(n, root, rng), rng, good, clock)
        runs += 1
        if not clock.budgeted:
            if runs == RESTARTS:
                break
        elif clock.now() - good.changed_at >= 1.5 * clock.remaining():  # line 15
            break
    runs, turn = 0, 0
    while not clock.exhausted():  # the refinement phase, through good_list
        trees = good.trees()
        _basic_sa(cost, trees[turn % len(trees)], rng, good, clock)
        turn += 1
        runs += 1
        if not clock.budgeted and runs == REFINEMENTS:
            break
    return good.best


def driver_sa(
    cost: TreeCost,
    root: int | None,
    rng: random.Random,
    *,
    evaluations: int | None = None,
    time_budget_s: float | None = None,
    initial: Sequence[Tree] = (),
) -> tuple[Tree, float]:
    """Seed 001's driverSA (figure 2) over ``cost.ranks``; returns (tree, cost).

    ``root`` is a rank of ``cost.ranks`` (every random tree is rooted there) or None
    (random roots). ``initial`` trees enter the good_list first (our addition).
    """
    local_root = None if root is None else cost.ranks.index(root)
    clock = _Clock(cost, evaluations, time_budget_s)
    starts = [_Tree.from_tree(t, cost.ranks) for t in initial]
    best = _driver_sa(cost, local_root, rng, clock, starts)
    return best.to_tree(cost.ranks), best.cost


# -- figure 4 ------------------------------------------------------------------------------
def form_pool_sets(bandwidth, nodes: Sequence[int], percentage: float) -> list[list[int]]:
    """Partition ``nodes`` into pools of well-connected nodes (seed 001, sec. 2.4).

    ``bandwidth[a][b]`` is the bandwidth from node a to b (``bandwidth[a][a]`` that of
    a node's own network). The threshold is ``percentage`` % of the largest bandwidth
    among ``nodes``. Nodes are taken in order; a node joins the pool where its
    narrowest bandwidth to (and from) the members is widest, if that is at least the
    threshold, else it starts a pool. The paper states the criterion as an average
    bandwidth; this pass is the one that reproduces its Table 1 example (both pool sets,
    at 20% and at 70%). O(n^2).
    """
    top = max(bandwidth[a][b] for a in nodes for b in nodes)
    threshold = percentage / 100.0 * top
    pools: list[list[int]] = []
    for v in nodes:
        best, where = -math.inf, None
        for i, pool in enumerate(pools):
            narrowest = min(min(bandwidth[v][u], bandwidth[u][v]) for u in pool)
            if narrowest > best:
                best, where = narrowest, i
        if where is not None and best >= threshold:
            pools[where].append(v)
        else:
            pools.append([v])
    return pools


def _bandwidths(grid: Grid, ranks: Sequence[int]) -> list[list[float]]:
    """Rank-to-rank bandwidth (bytes/s): the route's, or the cluster LAN's."""
    cl = grid.cluster_of
    per = {}
    for a in range(grid.nclusters):
        for b in range(grid.nclusters):
            net = grid.clusters[a].lan if a == b else grid.wan(a, b)
            per[a, b] = net.bandwidth
    return [[per[cl[a], cl[b]] for b in ranks] for a in ranks]


def _pool_sets(bandwidth, nodes: list[int]) -> list[list[list[int]]]:
    """Lines 7-11 of figure 4: the distinct pool sets that shrink the problem; those
    with a pool above 16 nodes dropped unless every set has one."""
    sets, seen = [], set()
    for per in POOL_PERCENTAGES:
        ps = form_pool_sets(bandwidth, nodes, per)
        key = frozenset(frozenset(p) for p in ps)
        if key in seen or len(ps) == len(nodes):  # a repeat, or all single nodes
            continue
        seen.add(key)
        sets.append(ps)
    small = [ps for ps in sets if max(len(p) for p in ps) <= MAX_POOL]
    return small or sets


def _count_pools(bandwidth, nodes: list[int], root: int) -> int:
    """Line 2 of figure 4: the number of driverSA invocations of a run, counted with
    each pool's root taken as the broadcast root or its first node."""
    if len(nodes) <= MAX_POOL:
        return 1
    sets = _pool_sets(bandwidth, nodes)
    if not sets:
        return 1
    total = 0
    for ps in sets:
        total += len(ps)
        if len(ps) > 1:
            roots = [root if root in p else p[0] for p in ps]
            total += _count_pools(bandwidth, roots, root)
    return total


@dataclass
class _Clustered:
    """One clusteredSA run's shared state (local node indices throughout)."""

    cost: TreeCost
    bandwidth: list[list[float]]
    rng: random.Random
    evaluations: float | None
    seconds: float | None

    def driver(self, nodes: list[int], root: int | None) -> _Tree:
        """driverSA on the pool ``nodes``; the tree comes back in the full node indices."""
        sub = self.cost.sub(nodes)
        clock = _Clock(sub, self.evaluations, self.seconds)
        local_root = None if root is None else nodes.index(root)
        best = _driver_sa(sub, local_root, self.rng, clock)
        self.cost.evaluations += sub.evaluations
        return _lift(best, nodes, len(self.cost.ranks))

    def run(self, nodes: list[int], root: int) -> _Tree:
        if len(nodes) <= MAX_POOL:  # lines 4-5
            return self.driver(nodes, root)
        sets = _pool_sets(self.bandwidth, nodes)
        if not sets:  # no pool set shrinks the problem: anneal the nodes as they are
            return self.driver(nodes, root)
        best = None
        for ps in sets:  # lines 13-41
            trees = [self.driver(pool, root if root in pool else None) for pool in ps]
            if len(trees) == 1:
                candidate = trees[0]
            else:
                upper = self.run([t.root for t in trees], root)
                candidate = _graft(upper, trees)
            candidate.evaluate(self.cost)  # the joined tree, on the full node set
            if best is None or candidate.cost < best.cost:
                best = candidate
        return best


def _lift(tree: _Tree, nodes: list[int], n: int) -> _Tree:
    """A tree over ``nodes`` (local to them) expressed over ``0..n-1`` (others absent)."""
    parent, children = [-1] * n, [[] for _ in range(n)]
    for i, kids in enumerate(tree.children):
        children[nodes[i]] = [nodes[c] for c in kids]
        for c in kids:
            parent[nodes[c]] = nodes[i]
    return _Tree(nodes[tree.root], parent, children)


def _graft(upper: _Tree, pools: list[_Tree]) -> _Tree:
    """The pool-root tree with every pool's tree hung below its root (upper level first)."""
    joined = upper.copy()
    for pool in pools:
        for v, kids in enumerate(pool.children):
            if kids:
                joined.children[v] = joined.children[v] + kids
                for c in kids:
                    joined.parent[c] = v
    return joined


def clustered_sa(
    cost: TreeCost,
    root: int,
    rng: random.Random,
    *,
    evaluations: int | None = None,
    time_budget_s: float | None = None,
) -> tuple[Tree, float]:
    """Seed 001's clusteredSA (figure 4) over ``cost.ranks`` from ``root``.

    The budget (evaluations or seconds) is split evenly among the driverSA runs the
    pools need, counted beforehand (line 2); without one every driverSA run makes
    50 + 25 basicSA runs. Returns (tree, cost) with the cost on all the nodes.
    """
    if root not in cost.ranks:
        raise ParameterError(f"root {root!r} is not among the nodes to anneal")
    _Clock(cost, evaluations, time_budget_s)  # validates the budget
    nodes = list(range(len(cost.ranks)))
    local_root = cost.ranks.index(root)
    bandwidth = _bandwidths(cost.grid, cost.ranks)
    pools = _count_pools(bandwidth, nodes, local_root)  # line 2
    run = _Clustered(
        cost,
        bandwidth,
        rng,
        None if evaluations is None else evaluations / pools,  # line 3: new_td
        None if time_budget_s is None else time_budget_s / pools,
    )
    best = run.run(nodes, local_root)
    return best.to_tree(cost.ranks), best.cost


# -- builders ------------------------------------------------------------------------------
def _check_budget(evaluations, time_budget_s) -> None:
    if evaluations is not None and (
        not isinstance(evaluations, int) or isinstance(evaluations, bool) or evaluations < 1
    ):
        raise ParameterError(f"evaluations must be an integer >= 1, got {evaluations!r}")
    if time_budget_s is not None and not (
        isinstance(time_budget_s, int | float) and time_budget_s > 0
    ):
        raise ParameterError(f"time_budget_s must be > 0 seconds, got {time_budget_s!r}")
    if evaluations is not None and time_budget_s is not None:
        raise ParameterError("give evaluations or time_budget_s, not both")


def _sa_tree(
    kind: str,
    grid: Grid,
    nbytes: int,
    root: int,
    seed: int,
    evaluations: int | None,
    time_budget_s: float | None,
    warm_start: bool,
) -> Tree:
    _check_budget(evaluations, time_budget_s)
    grid.check_rank(root, "root")
    cost = TreeCost(grid, nbytes)
    rng = random.Random(seed)
    warm = [mpich_g2_tree(grid, root)] if warm_start else []
    budget = {"evaluations": evaluations, "time_budget_s": time_budget_s}
    if kind == "sa":
        tree, _ = driver_sa(cost, root, rng, initial=warm, **budget)
        return tree
    tree, value = clustered_sa(cost, root, rng, **budget)
    for start in warm:  # never worse than the warm start, in the model
        local = _Tree.from_tree(start, cost.ranks).evaluate(cost)
        if local.cost < value:
            tree, value = start, local.cost
    return tree


def _on_grid(kind: str):
    def tree(
        grid: Grid,
        nbytes: int,
        root: int = 0,
        *,
        seed: int = 0,
        evaluations: int | None = None,
        time_budget_s: float | None = None,
        warm_start: bool = True,
    ) -> Tree:
        key = (kind, nbytes, root, seed, evaluations, time_budget_s, bool(warm_start))
        return cached_tree(
            grid,
            key,
            lambda: _sa_tree(
                kind, grid, nbytes, root, seed, evaluations, time_budget_s, warm_start
            ),
        )

    tree.__doc__ = f"The {kind} tree of ``grid`` for ``nbytes`` from ``root`` (memoised)."
    return tree


TREES = {"sa": _on_grid("sa"), "sa-clustered": _on_grid("sa-clustered")}
"""Builder name -> ``tree(grid, nbytes, root, *, seed, evaluations, time_budget_s,
warm_start)``."""


SA = tree_family(
    "sa",
    TREES["sa"],
    "simulated annealing over all ranks: basicSA + driverSA (seed 001)",
    """driverSA's tree over all ranks (seed 001, figures 1 and 2).

    Parameters
    ----------
    seed : int
        Seeds the run's ``random.Random``.
    evaluations : int, optional
        Budget in cost evaluations (deterministic); the tuner sets it from its
        planning budget.
    time_budget_s : float, optional
        The paper's ``time_duration`` in wall seconds (machine-dependent result).
    warm_start : bool
        Put the MPICH-G2 tree in the good_list first (our addition; the paper starts
        from random trees only).

    Notes
    -----
    Without a budget, 50 + 25 basicSA runs of up to 1680 evaluations, each O(P):
    seconds for 64 ranks. Model: seed 000's per-edge ``lam(M)`` on the tree.

    References
    ----------
    Seed 001, sec. 2.2-2.3.

    Examples
    --------
    >>> from gridcoll.network import magpie
    >>> sa(magpie(2, 2), 2**20, evaluations=500).nmessages
    3
    """,
    module=__name__,
    anytime=True,
)
sa, sa_segmented = SA.build, SA.build_segmented


SA_CLUSTERED = tree_family(
    "sa-clustered",
    TREES["sa-clustered"],
    "clusteredSA: annealing in bandwidth pools (seed 001)",
    """clusteredSA's tree (seed 001, figure 4).

    Parameters as :func:`sa`; with ``warm_start`` the result is the better (in the
    model) of clusteredSA's tree and the MPICH-G2 tree.

    Notes
    -----
    Pools of at most 16 nodes by bandwidth; driverSA per pool, recursively over the
    pool roots. The budget is split among the pools. O(P^2) per pool set to form the
    pools (four percentages), then the driverSA runs: O(evaluations x pool size).

    References
    ----------
    Seed 001, sec. 2.4.
    """,
    module=__name__,
    anytime=True,
)
sa_clustered, sa_clustered_segmented = SA_CLUSTERED.build, SA_CLUSTERED.build_segmented
