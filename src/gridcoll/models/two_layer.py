"""Closed-form P-LogP models of MagPIe's two-layer broadcasts (seed 000, sec. 3.1).

Symbols as in seed 000 (Appendix A): ``M`` message size, ``m`` segment size,
``k = ceil(M/m)``, ``d`` degree, ``h`` height, ``gamma(m)`` and ``lam(m)`` gap and
latency of a broadcast tree; subscripts ``w`` and ``l`` for the WAN and the LAN; the
wide-area sender and receiver completion times ``s_w(m) = max(g_l(m), os_w(m))`` and
``r_w(m) = L_w + g_w(m)`` (sec. 2.1).

The registered models (``*_model``) evaluate seed 000's ``T = (k-1) gamma + lam`` edge by
edge on the builder's own trees (:mod:`gridcoll.models.tree_model`), so every route keeps
its own parameters. The paper's closed forms are kept beside them as ``*_paper``, cited
below, and ``bench/model_vs_sim.py`` reports both.

The paper's formulas assume one WAN parameter set. On a grid whose routes differ (the
DAS of ``das2:N``, Table 2) we do as seed 000 does for its real-system runs (sec. 4):
"we have used P-LogP parameters according to the slowest available link" - the route
of least bandwidth (ties: the larger latency) - and likewise the LAN of least
bandwidth for ``s_w``'s ``g_l``. Clusters of different sizes each get their own LAN
term and the largest one counts.

* :func:`magpie_original_model` - flat WAN tree (sec. 3.1.1's exact flat-tree ``lam``)
  then a binomial LAN tree (seed 002, Table 1), whole message.
* :func:`magpie_sequential_model` - ``T = T_w + T_l`` (sec. 3.1.2) with sec. 3.1.1's
  d-ary upper bounds in each layer.
* :func:`magpie_segmented_model` - ``T = (k-1) gamma(m) + lam_w(m) + lam_l(m)`` with
  ``gamma(m) <= max(g_w(m), or_w(m) + d_w s_w(m) + d_l s_l(m))`` (sec. 3.1.2).
"""

from __future__ import annotations

from collections.abc import Callable

from gridcoll.algorithms.magpie import (
    check_degree,
    cluster_ranks,
    coordinator_order,
    original_tree,
    two_layer_tree,
    wan_tree,
)
from gridcoll.algorithms.trees import dary_tree
from gridcoll.models.single_layer import (
    binomial_time,
    check_model_call,
    dary_gamma,
    dary_lam,
    flat_lam,
    nsegments,
    segmented_time,
)
from gridcoll.models.tree_model import tree_time
from gridcoll.network.grid import Grid
from gridcoll.network.plogp import PLogP, s_w

__all__ = [
    "MODELS",
    "magpie_original_model",
    "magpie_original_paper",
    "magpie_segmented_model",
    "magpie_segmented_paper",
    "magpie_sequential_model",
    "magpie_sequential_paper",
    "slowest_lan",
    "slowest_wan",
    "wan_link_gap",
]


def slowest_wan(grid: Grid) -> PLogP:
    """The P-LogP parameters of the slowest WAN route: least bandwidth, then largest L
    (seed 000, sec. 4). Raises ValueError on a single-cluster grid."""
    route = min(grid.routes.values(), key=lambda r: (r.plogp.bandwidth, -r.plogp.L))
    return route.plogp


def slowest_lan(grid: Grid) -> PLogP:
    """The LAN parameters of least bandwidth (then largest ``L``) among the clusters."""
    return min((c.lan for c in grid.clusters), key=lambda p: (p.bandwidth, -p.L))


def _wan_send(grid: Grid, wan: PLogP) -> Callable[[float], float]:
    """``s_w(m) = max(g_l(m), os_w(m))`` (seed 000, sec. 2.1) on the slowest networks."""
    lan = slowest_lan(grid)
    return lambda m: s_w(lan, wan, m)


def wan_link_gap(grid: Grid, root: int, degree: int, m: float) -> float:
    """Per-segment occupancy of the busiest WAN link under the d-ary coordinator tree.

    ``max_link sum g_link(m)`` over the tree edges whose route crosses the link. Our
    extension for shared access links (``teragrid``): a node's ``d`` copies of a segment
    then queue on one uplink, which seed 000's pair-link model does not see. On pair
    links it is one route's ``g_w(m)``, no more than the slowest route's.
    """
    tree = dary_tree(coordinator_order(grid, root), degree)
    busy: dict[str, float] = {}
    cluster_of = grid.cluster_of
    for v, kids in tree.children.items():
        for c in kids:
            for name in grid.routes[(cluster_of[v], cluster_of[c])].links:
                busy[name] = busy.get(name, 0.0) + grid.links[name].g(m)
    return max(busy.values(), default=0.0)


def _lan_degree(nranks: int, degree: int) -> int:
    """The degree a complete tree of ``degree`` really has over ``nranks`` nodes."""
    return min(degree, nranks - 1)


def magpie_original_paper(grid: Grid, nbytes: int, root: int = 0, *, itemsize: int = 1) -> float:
    """Seed 000's form for :func:`gridcoll.algorithms.magpie.magpie_original` (seconds).

    ``T = max(lam_w(M) + max_c T_l(N_c), (P_w - 1) s_w(M) + T_l(N_root))`` where

    * ``lam_w(M) = (P_w - 2) s_w(M) + r_w(M)``: the flat WAN tree's latency, seed 000
      sec. 3.1.1, the time the last coordinator has the message;
    * ``T_l(N) = floor(log2 N) g_l(M) + ceil(log2 N) L_l``: the binomial LAN tree,
      seed 002 Table 1, started by every coordinator when it has the message (the root
      only after its ``P_w - 1`` WAN sends).

    For ``M >= 128 KiB`` the presets have ``os_w(M) = g_w(M)`` (MPICH's rendezvous mode),
    so ``s_w(M) ~ g_w(M)`` and the root feeds one WAN link at a time: on ``magpie:8,1``
    a 1 MiB broadcast takes ``7 g_w(M) + L_w ~ 7.36 s`` (seed 000, sec. 3.1.3: 7425 ms).
    """
    M = check_model_call(grid, nbytes, root, itemsize)
    home = grid.cluster_of[root]

    def lan_time(c: int) -> float:
        return binomial_time(grid.clusters[c].lan, grid.clusters[c].nranks, M)

    if grid.is_single_cluster:
        return lan_time(home)
    wan = slowest_wan(grid)
    s = _wan_send(grid, wan)
    P_w = grid.nclusters
    lam_w = flat_lam(wan, P_w, M, s=s)
    remote = max(lan_time(c) for c in range(P_w) if c != home)
    return max(lam_w + remote, (P_w - 1) * s(M) + lan_time(home))


def _lan_phase(grid: Grid, M: int, m: int, degree: int) -> float:
    """``max_c (k_l - 1) gamma_l(m) + lam_l(m)`` over the clusters' d_l-ary trees."""
    k = nsegments(M, m)
    worst = 0.0
    for cluster in grid.clusters:
        N = cluster.nranks
        if N > 1:
            d = _lan_degree(N, degree)
            lan = cluster.lan
            worst = max(worst, segmented_time(dary_gamma(lan, d, m), dary_lam(lan, N, d, m), k))
    return worst


def magpie_sequential_paper(
    grid: Grid,
    nbytes: int,
    root: int = 0,
    *,
    wan_segment_size: int,
    wan_degree: int,
    lan_segment_size: int,
    lan_degree: int,
    itemsize: int = 1,
) -> float:
    """Seed 000's form for :func:`gridcoll.algorithms.magpie.magpie_sequential` (seconds).

    ``T = T_w + T_l = (k_w - 1) gamma_w(m_w) + lam_w(m_w) + (k_l - 1) gamma_l(m_l) +
    lam_l(m_l)`` (seed 000, sec. 3.1.2), each layer with sec. 3.1.1's upper bounds
    ``gamma(m) <= max(g(m), or(m) + d s(m))`` and ``lam(m) <= h ((d-1) s(m) + r(m))``:
    on the WAN with ``s = s_w``, ``r = r_w`` over ``P_w`` coordinators and degree
    ``d_w = min(wan_degree, P_w - 1)``; on each LAN with ``s = g_l``, ``r = L_l + g_l``
    over its ``N`` ranks and ``d_l = min(lan_degree, N - 1)`` (the largest counts).
    ``gamma_w`` is also at least the busiest shared WAN link's per-segment occupancy
    (:func:`wan_link_gap`; inert on pair links).
    """
    m_w = check_model_call(grid, nbytes, root, itemsize, wan_segment_size)
    m_l = check_model_call(grid, nbytes, root, itemsize, lan_segment_size)
    check_degree(wan_degree, "wan_degree")
    check_degree(lan_degree, "lan_degree")
    T_l = _lan_phase(grid, nbytes, m_l, lan_degree)
    if grid.is_single_cluster:
        return T_l
    wan = slowest_wan(grid)
    s = _wan_send(grid, wan)
    P_w = grid.nclusters
    d_w = _lan_degree(P_w, wan_degree)
    gamma_w = max(dary_gamma(wan, d_w, m_w, s=s), wan_link_gap(grid, root, wan_degree, m_w))
    lam_w = dary_lam(wan, P_w, d_w, m_w, s=s)
    return segmented_time(gamma_w, lam_w, nsegments(nbytes, m_w)) + T_l


def magpie_segmented_paper(
    grid: Grid,
    nbytes: int,
    root: int = 0,
    *,
    segment_size: int,
    wan_degree: int,
    lan_degree: int,
    itemsize: int = 1,
) -> float:
    """Seed 000's form for :func:`gridcoll.algorithms.magpie.magpie_segmented` (seconds).

    ``T = (k - 1) gamma(m) + lam_w(m) + lam_l(m)`` with
    ``gamma(m) <= max(g_w(m), or_w(m) + d_w s_w(m) + d_l s_l(m))`` "to reflect the
    double forwarding in the coordinator nodes" (seed 000, sec. 3.1.2), also at least
    every LAN's own ``max(g_l(m), or_l(m) + d_l s_l(m))``;
    ``lam_w(m) <= h_w ((d_w - 1) s_w(m) + r_w(m))`` and ``lam_l(m) <= h_l ((d_l - 1)
    s_l(m) + r_l(m))`` (sec. 3.1.1), the largest cluster's ``lam_l`` counting;
    ``gamma`` is also at least the busiest shared WAN link's per-segment occupancy
    (:func:`wan_link_gap`; inert on pair links). On a single cluster it is the d-ary
    segmented tree of sec. 3.1.1.
    """
    m = check_model_call(grid, nbytes, root, itemsize, segment_size)
    check_degree(wan_degree, "wan_degree")
    check_degree(lan_degree, "lan_degree")
    k = nsegments(nbytes, m)
    gamma = lam_l = coordinator_lan = 0.0
    for cluster in grid.clusters:
        N = cluster.nranks
        if N > 1:
            d_l, lan = _lan_degree(N, lan_degree), cluster.lan
            gamma = max(gamma, dary_gamma(lan, d_l, m))
            lam_l = max(lam_l, dary_lam(lan, N, d_l, m))
            coordinator_lan = max(coordinator_lan, d_l * lan.s(m))
    if grid.is_single_cluster:
        return segmented_time(gamma, lam_l, k)
    wan = slowest_wan(grid)
    s = _wan_send(grid, wan)
    P_w = grid.nclusters
    d_w = _lan_degree(P_w, wan_degree)
    gamma = max(
        gamma,
        wan.g(m),
        wan.or_(m) + d_w * s(m) + coordinator_lan,
        wan_link_gap(grid, root, wan_degree, m),
    )
    lam_w = dary_lam(wan, P_w, d_w, m, s=s)
    return segmented_time(gamma, lam_w + lam_l, k)


# -- registered models: the paper's gamma/lambda on the builder's own trees -----------------
def magpie_original_model(grid: Grid, nbytes: int, root: int = 0, *, itemsize: int = 1) -> float:
    """Model of :func:`gridcoll.algorithms.magpie.magpie_original` (seconds).

    Seed 000's ``lam`` of the flat WAN tree and the binomial LAN trees, evaluated edge by
    edge on the builder's tree with every route's own parameters
    (:func:`gridcoll.models.tree_model.tree_time`, one segment). On identical WAN links
    it equals :func:`magpie_original_paper`; on uneven ones (``das2``) it does not need
    the paper's slowest-link simplification.
    """
    M = check_model_call(grid, nbytes, root, itemsize)
    tree = grid.memo.get("two_layer.trees", ("original", root), lambda: original_tree(grid, root))
    return tree_time(grid, tree, M)


def magpie_sequential_model(
    grid: Grid,
    nbytes: int,
    root: int = 0,
    *,
    wan_segment_size: int,
    wan_degree: int,
    lan_segment_size: int,
    lan_degree: int,
    itemsize: int = 1,
) -> float:
    """Model of :func:`gridcoll.algorithms.magpie.magpie_sequential` (seconds).

    ``T = T_w + T_l`` (seed 000, sec. 3.1.2) with each phase's ``(k-1) gamma + lam``
    evaluated edge by edge on its tree: the WAN tree over the coordinators, then the
    slowest cluster's LAN tree.
    """
    m_w = check_model_call(grid, nbytes, root, itemsize, wan_segment_size)
    m_l = check_model_call(grid, nbytes, root, itemsize, lan_segment_size)
    check_degree(wan_degree, "wan_degree")
    check_degree(lan_degree, "lan_degree")
    wan = grid.memo.get(
        "two_layer.trees", ("wan", root, wan_degree), lambda: wan_tree(grid, root, wan_degree)
    )
    lans = grid.memo.get(
        "two_layer.trees", ("lan", root, lan_degree), lambda: _distinct_lans(grid, root, lan_degree)
    )
    T_w = tree_time(grid, wan, nbytes, m_w)
    T_l = max(tree_time(grid, lan, nbytes, m_l) for lan in lans)
    return T_w + T_l


def _distinct_lans(grid: Grid, root: int, lan_degree: int) -> list:
    """The d_l-ary LAN trees of :func:`lan_trees`, one per distinct (LAN, cluster size):
    the ranks of a cluster are interchangeable, so equal clusters take equal times."""
    seen: dict[tuple[int, int], int] = {}
    for c, cluster in enumerate(grid.clusters):
        seen.setdefault((id(cluster.lan), cluster.nranks), c)
    coordinators = grid.coordinators(root)
    return [dary_tree(cluster_ranks(grid, c, coordinators[c]), lan_degree) for c in seen.values()]


def magpie_segmented_model(
    grid: Grid,
    nbytes: int,
    root: int = 0,
    *,
    segment_size: int,
    wan_degree: int,
    lan_degree: int,
    itemsize: int = 1,
) -> float:
    """Model of :func:`gridcoll.algorithms.magpie.magpie_segmented` (seconds).

    ``T = (k-1) gamma(m) + lam(m)`` evaluated edge by edge on the two-layer tree: the
    coordinators' double forwarding (seed 000, sec. 3.1.2) is their NIC's
    ``sum s_w + sum s_l`` and their CPU's ``or_w + sum os`` per segment, and ``lam`` is
    ``lam_w + lam_l`` along the slowest path. Equals :func:`magpie_segmented_paper`'s
    bounds on identical links up to the refinements of the tree model.
    """
    m = check_model_call(grid, nbytes, root, itemsize, segment_size)
    check_degree(wan_degree, "wan_degree")
    check_degree(lan_degree, "lan_degree")
    tree = grid.memo.get(
        "two_layer.trees",
        ("segmented", root, wan_degree, lan_degree),
        lambda: two_layer_tree(grid, root, wan_degree, lan_degree),
    )
    return tree_time(grid, tree, nbytes, m)


MODELS: dict[tuple[str, str], Callable[..., float]] = {
    ("bcast", "magpie-original"): magpie_original_model,
    ("bcast", "magpie-sequential"): magpie_sequential_model,
    ("bcast", "magpie-segmented"): magpie_segmented_model,
}
"""The models of the two-layer broadcast builders, by ``(op, name)``."""
