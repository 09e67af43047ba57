"""MPICH-G2's multilevel topology-aware broadcast tree (seed 001, figure 7).

MPICH-G2 (Karonis, Toonen, Foster) groups processes by the levels of the network that
the user declares: wide area (sites), local area (the clusters of a site), and the
machine (one cluster). Its broadcast is a tree per level:

1. **sites** - the root sends the whole message to one representative of every other
   site, a flat tree ("does not allow more than one communication between clusters in
   two different sites", seed 001, sec. 2.1);
2. **clusters** - each site's representative (the root in its own site) sends it to
   one representative of every other cluster of its site, again flat;
3. **inside a cluster** - each cluster's representative runs a binomial tree ("binomial
   trees for broadcast communication are used within clusters in MPICH-G2", seed 001,
   sec. 3).

Representatives are the root in its own cluster and site, else the lowest rank of the
site's first cluster and of each cluster (:meth:`Grid.coordinators`). A representative
sends to the levels in that order: sites first, then its site's clusters, then its
cluster. Clusters without a ``site`` are sites of their own, so on ``das2`` or
``transit-stub`` this is MagPIe's original flat WAN tree with binomial LAN trees. The
whole message moves at each step (MPICH-G2 does not segment; ``mpich-g2-segmented``
pipelines segments down the same tree). O(P).

References
----------
N. T. Karonis, B. Toonen, I. Foster, *MPICH-G2: a grid-enabled implementation of the
Message Passing Interface*, JPDC 63(5), 2003; seed 001, sec. 2.1, 3 and figure 7
(C3, the representative of ANL, relays to C4: the bottleneck once C3's links are
loaded).
"""

from __future__ import annotations

from gridcoll.algorithms._hetero import cached_tree, tree_family
from gridcoll.algorithms.magpie import lan_trees
from gridcoll.algorithms.trees import Tree, binomial_tree
from gridcoll.network.grid import Grid

__all__ = [
    "MPICH_G2",
    "TREES",
    "mpich_g2",
    "mpich_g2_segmented",
    "mpich_g2_tree",
    "sites",
]


def sites(grid: Grid) -> list[list[int]]:
    """Cluster indices grouped by site, in order of first appearance; a cluster with
    no site is a site of its own."""
    groups: dict[str, list[int]] = {}
    for i, cluster in enumerate(grid.clusters):
        groups.setdefault(cluster.site or f"\0{cluster.name}", []).append(i)
    return list(groups.values())


def mpich_g2_tree(grid: Grid, root: int = 0) -> Tree:
    """The three-level tree: flat over sites, flat over a site's clusters, binomial in
    each cluster (each representative serves the levels in that order)."""
    coordinators = grid.coordinators(root)
    home = grid.cluster_of[root]
    children: dict[int, list[int]] = {}
    site_reps = []
    for group in sites(grid):
        rep = root if home in group else coordinators[group[0]]
        site_reps.append(rep)
        cluster_reps = [coordinators[c] for c in group if coordinators[c] != rep]
        if cluster_reps:
            children.setdefault(rep, []).extend(cluster_reps)
    others = [rep for rep in site_reps if rep != root]
    children[root] = others + children.get(root, [])  # the site level comes first
    tree = Tree(root, {v: tuple(k) for v, k in children.items() if k})
    return tree.graft(lan_trees(grid, root, binomial_tree))


def _mpich_g2_on(grid: Grid, nbytes: int, root: int = 0) -> Tree:
    """The MPICH-G2 tree (independent of ``nbytes``), memoised."""
    return cached_tree(grid, ("mpich-g2", root), lambda: mpich_g2_tree(grid, root))


TREES = {"mpich-g2": _mpich_g2_on}
"""Builder name -> ``tree(grid, nbytes, root)``."""


MPICH_G2 = tree_family(
    "mpich-g2",
    TREES["mpich-g2"],
    "MPICH-G2's multilevel tree: flat over sites, then clusters, binomial inside",
    """MPICH-G2's multilevel tree.

    Notes
    -----
    Model: seed 000's per-edge ``lam(M)`` on the tree. O(P) to build.

    References
    ----------
    Karonis, Toonen, Foster (2003); seed 001, figure 7.

    Examples
    --------
    >>> from gridcoll.network import teragrid
    >>> s = mpich_g2(teragrid(), 1024, root=8)  # root in C2 (SDSC), as in seed 001
    >>> [op.peer for op in s.programs[8]][:4]  # ANL, NCSA, PSC, then C1 of SDSC
    [16, 32, 48, 0]
    """,
    module=__name__,
    quadratic=False,
)
mpich_g2, mpich_g2_segmented = MPICH_G2.build, MPICH_G2.build_segmented
