"""The table of builders, by collective and name (the names ``--algo`` takes).

The heterogeneous broadcast trees are registered by family (:data:`TREE_FAMILIES`,
:func:`tree_family_builders`): one :class:`~gridcoll.algorithms._hetero.TreeFamily`
declared in its module gives the builders ``X`` and ``X-segmented``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from gridcoll.algorithms import (
    allgather,
    allreduce,
    alltoall,
    annealing,
    barrier,
    binary_tree,
    binomial_tree,
    chain,
    dary_tree,
    flat_tree,
    gather,
    heuristics,
    hlot,
    magpie,
    mateescu,
    mpich,
    mpich_g2,
    multipath,
    multitree,
    packing,
    phoenix,
    reduce,
    reduce_scatter,
    scan,
    scatter,
    tps,
)
from gridcoll.algorithms._hetero import TreeFamily, planning_cost
from gridcoll.errors import UnknownAlgorithm
from gridcoll.network.grid import Grid
from gridcoll.schedule.ir import Schedule

__all__ = [
    "BUILDERS",
    "MESSAGE_MODEL_S",
    "PAIRWISE_MODEL_S",
    "TREE_FAMILIES",
    "Builder",
    "all_pairs_cost",
    "get_builder",
    "list_builders",
    "pairwise_cost",
    "tree_family_builders",
]


@dataclass(frozen=True, slots=True)
class Builder:
    """A registered algorithm.

    ``build(grid, nbytes, root=0, *, itemsize=1, **params) -> Schedule``; ``params``
    names the keyword parameters the tuner chooses (``segment_size``, ``degree``...).
    """

    op: str
    name: str
    build: Callable[..., Schedule]
    summary: str
    params: tuple[str, ...] = ()
    cost: Callable[[Grid], float] | None = None
    """Nominal planning seconds on a grid (None: negligible); :func:`gridcoll.tune.plan`
    skips the builder when it exceeds what is left of a planning budget, or what is
    left of its deadline on the wall clock. For an ``anytime`` builder: nominal seconds
    per cost evaluation; for a model that walks every cluster pair
    (:func:`pairwise_cost`): its first evaluation (the search stops at the deadline)."""
    anytime: str | None = None
    """Anytime builders (simulated annealing) name their tree family; they take an
    ``evaluations`` budget, which the tuner derives from its planning budget. Builders
    of one family share their tree (and their budget)."""
    commutative_only: bool = False
    """Reductions only: the tree reorders operands, so :func:`gridcoll.tune.plan`
    refuses it for a non-commutative operation (``commutative=False``)."""


def _table() -> dict[tuple[str, str], Builder]:
    seg = ("segment_size",)
    entries = [
        Builder("bcast", "flat", flat_tree.flat, "root sends the whole message to every rank"),
        Builder(
            "bcast",
            "flat-rendezvous",
            flat_tree.flat_rendezvous,
            "flat tree with a request/clear-to-send handshake per rank",
        ),
        Builder(
            "bcast",
            "flat-segmented",
            flat_tree.flat_segmented,
            "flat tree, message sent as k segments",
            seg,
        ),
        Builder("bcast", "chain", chain.chain, "each rank passes the whole message to the next"),
        Builder(
            "bcast",
            "chain-rendezvous",
            chain.chain_rendezvous,
            "chain with a handshake on every hop",
        ),
        Builder(
            "bcast",
            "chain-segmented",
            chain.chain_segmented,
            "pipeline: segments flow down the chain",
            seg,
        ),
        Builder("bcast", "binary", binary_tree.binary, "complete binary tree, whole message"),
        Builder(
            "bcast", "binomial", binomial_tree.binomial, "MPICH's binomial tree, whole message"
        ),
        Builder(
            "bcast",
            "binomial-rendezvous",
            binomial_tree.binomial_rendezvous,
            "binomial tree with a handshake on every edge",
        ),
        Builder(
            "bcast",
            "binomial-segmented",
            binomial_tree.binomial_segmented,
            "binomial tree forwarding each segment as it arrives",
            seg,
        ),
        Builder(
            "bcast",
            "dary-segmented",
            dary_tree.dary_segmented,
            "segmented tree of any degree d, minimal height (seed 000, 3.1.1)",
            ("segment_size", "degree"),
        ),
        Builder(
            "bcast",
            "magpie-original",
            magpie.magpie_original,
            "MagPIe's original: flat WAN tree, then binomial LAN trees, whole message",
        ),
        Builder(
            "bcast",
            "magpie-sequential",
            magpie.magpie_sequential,
            "segmented d-ary WAN tree, then segmented d-ary LAN trees (seed 000, 3.1.2)",
            ("wan_segment_size", "wan_degree", "lan_segment_size", "lan_degree"),
        ),
        Builder(
            "bcast",
            "magpie-segmented",
            magpie.magpie_segmented,
            "pipelined two-layer tree, LAN trees grafted on the WAN tree (seed 000, 3.1.2)",
            ("segment_size", "wan_degree", "lan_degree"),
        ),
        Builder(
            "bcast",
            "mpich",
            mpich.mpich,
            "MPICH's choice, clusters ignored: binomial or scatter + allgather",
        ),
        Builder(
            "bcast",
            "multitree",
            multitree.multitree,
            "one part per remote cluster, relayed to all others: every WAN link busy",
            ("segment_size", "lan_degree"),
        ),
    ]
    entries += _heterogeneous()
    entries += _collectives()
    return {(b.op, b.name): b for b in entries}


TREE_FAMILIES: tuple[TreeFamily, ...] = (
    heuristics.FEF,
    heuristics.ECEF,
    heuristics.LOOK_AHEAD,
    hlot.HLOT,
    tps.TPS,
    mateescu.MATEESCU,
    phoenix.PHOENIX_LATENCY,
    phoenix.PHOENIX_BANDWIDTH,
    mpich_g2.MPICH_G2,
    annealing.SA,
    annealing.SA_CLUSTERED,
)
"""The heterogeneous trees (seeds 001, 003, 004), each registered as two builders."""


def tree_family_builders(family: TreeFamily) -> list[Builder]:
    """``X`` (the whole message down the family's tree) and ``X-segmented`` (the same
    tree, segments forwarded as they arrive), with their planning costs: an anytime
    family (annealing) costs per evaluation and shares one budget between the two."""
    name, segmented = family.name, f"{family.name}-segmented"
    if family.anytime:
        per_eval = annealing.nominal_evaluation_s
        return [
            Builder("bcast", name, family.build, family.summary, (), per_eval, anytime=name),
            Builder(
                "bcast",
                segmented,
                family.build_segmented,
                f"{name}'s tree, segments forwarded as they arrive",
                ("segment_size",),
                per_eval,
                anytime=name,
            ),
        ]
    return [
        Builder(
            "bcast",
            name,
            family.build,
            family.summary,
            (),
            planning_cost(segmented=False, quadratic=family.quadratic, build=family.build_cost),
        ),
        Builder(
            "bcast",
            segmented,
            family.build_segmented,
            family.summary.split(":")[0] + ", segments forwarded as they arrive",
            ("segment_size",),
            planning_cost(segmented=True, quadratic=family.quadratic, build=family.build_cost),
        ),
    ]


def _heterogeneous() -> list[Builder]:
    """The tree builders for grids where every link differs (seeds 001, 003, 004): two
    per :data:`TREE_FAMILIES`, in that order (the annealing ones last), and ``list``."""
    families = [f for f in TREE_FAMILIES if not f.anytime]
    out = [b for family in families for b in tree_family_builders(family)]
    out.append(
        Builder(
            "bcast",
            "list",
            phoenix.list_bcast,
            "segments pipelined down the chain with the widest bottleneck (seed 004's List)",
            ("segment_size",),
            planning_cost(segmented=True, quadratic=False),
        )
    )
    out += [b for family in TREE_FAMILIES if family.anytime for b in tree_family_builders(family)]
    return out


PAIRWISE_MODEL_S = 3e-5
"""Nominal seconds per ordered cluster pair of one evaluation of a model that walks
every cluster pair (the WAN-aware allgather, all-to-all and two-level allreduce: 16-60
us of CPU per pair measured on the development machine, 0.6-2.5 s at 200 clusters)."""


def pairwise_cost(grid: Grid) -> float:
    """The declared planning cost of a builder whose model walks every cluster pair:
    one evaluation, :data:`PAIRWISE_MODEL_S` per pair. One evaluation, not a whole
    search: the search stops at the planning deadline with its best so far, so what
    must fit the budget is its first evaluation."""
    return PAIRWISE_MODEL_S * grid.nclusters * max(grid.nclusters - 1, 1)


MESSAGE_MODEL_S = 1e-5
"""Nominal seconds per message of one evaluation of a model that follows every message
of a ``P (P-1)``-message exchange (the pairwise reduce-scatter: 5-18 us per message
measured on the development machine, 0.7 s at 200 ranks)."""


def all_pairs_cost(grid: Grid) -> float:
    """The declared planning cost of a builder whose model follows a message between
    every ordered pair of ranks: one evaluation, :data:`MESSAGE_MODEL_S` per message."""
    return MESSAGE_MODEL_S * grid.nranks * max(grid.nranks - 1, 1)


PACKING_STEP_S = 5e-5
"""Nominal seconds per step of the tree packing (``C K`` trees of ``C`` steps, each
weighing every attachment at once in numpy: 0.12 s for the 20 clusters of
``transit-stub:20,3``, both phases, on the development machine; memoised per grid)."""


def packing_cost(grid: Grid) -> float:
    """The declared planning cost of a tree-packing builder
    (:mod:`gridcoll.algorithms.packing`): its packing, :data:`PACKING_STEP_S` per
    step, then one model evaluation (:func:`pairwise_cost`)."""
    C = grid.nclusters
    return PACKING_STEP_S * C**2 * packing.tree_count(C) + pairwise_cost(grid)


def _collectives() -> list[Builder]:
    """scatter, gather, allgather, alltoall, reduce, allreduce and barrier;
    reduce_scatter, scan and exscan.

    For scatter, gather, allgather, alltoall and reduce_scatter ``nbytes`` is the count
    of one rank per peer (MPI's ``sendcount``, ``recvcount``); the reductions take
    ``commutative=True`` or False.
    """
    seg = ("segment_size",)
    seg_lan = ("segment_size", "lan_degree")
    two_layer = ("segment_size", "wan_degree", "lan_degree")
    personal = [  # (name, scatter builder, gather builder, summary, params)
        ("flat", "flat", "every rank directly, one block each (seed 002, Table 2)", ()),
        ("chain", "chain", "along a chain, whole remaining blocks per hop (Table 2)", ()),
        ("chain-pipelined", "chain_pipelined", "chain, one segment per message (Table 2)", seg),
        ("binomial", "binomial", "MPICH's binomial tree, subtree blocks per message", ()),
        (
            "magpie-original",
            "magpie_original",
            "MagPIe's: one whole message per cluster via its coordinator",
            (),
        ),
        (
            "magpie-segmented",
            "magpie_segmented",
            "segmented flat tree, clusters round-robin (seed 000, 3.2-3.3)",
            seg,
        ),
        (
            "cluster-aware",
            "cluster_aware",
            "each cluster's share once over the WAN per round, via its coordinator",
            seg,
        ),
    ]
    out = []
    for name, fn, summary, params in personal:
        out.append(Builder("scatter", name, getattr(scatter, f"{fn}_scatter"), summary, params))
        out.append(Builder("gather", name, getattr(gather, f"{fn}_gather"), summary, params))
    out += [
        Builder("allgather", "ring", allgather.ring_allgather, "P-1 steps around a ring"),
        Builder(
            "allgather",
            "recursive-doubling",
            allgather.recursive_doubling_allgather,
            "log2 P exchanges of doubling size",
        ),
        Builder("allgather", "bruck", allgather.bruck_allgather, "Bruck: ceil(log2 P) steps"),
        Builder(
            "allgather",
            "mpich",
            allgather.mpich_allgather,
            "MPICH's choice, clusters ignored: doubling, Bruck or ring",
        ),
        Builder(
            "allgather",
            "magpie-original",
            allgather.magpie_original_allgather,
            "MagPIe's: local gather, coordinators' exchange, local broadcast (seed 000, 3.4)",
            cost=pairwise_cost,
        ),
        Builder(
            "allgather",
            "magpie-segmented",
            allgather.magpie_segmented_allgather,
            "the same pipelined in segments, WAN exchange segmented (seed 000, 3.4)",
            seg_lan,
            cost=pairwise_cost,
        ),
        Builder(
            "alltoall",
            "direct",
            alltoall.direct_alltoall,
            "Direct Exchange: all sends, then all receives (seed 002, sec. 5)",
            cost=pairwise_cost,
        ),
        Builder(
            "alltoall",
            "direct-rotated",
            alltoall.direct_rotated_alltoall,
            "Direct Exchange in rotated order (seed 002, sec. 5)",
            cost=pairwise_cost,
        ),
        Builder(
            "alltoall",
            "cluster-aware",
            alltoall.cluster_aware_alltoall,
            "one combined WAN message per ordered cluster pair, via agent ranks",
            cost=pairwise_cost,
        ),
        Builder(
            "scatter",
            "multipath",
            multipath.multipath_scatter,
            "segments over the direct route or a relay cluster, whichever is less busy",
            seg,
            cost=pairwise_cost,
        ),
        Builder(
            "gather",
            "multipath",
            multipath.multipath_gather,
            "the multi-path scatter's routes reversed",
            seg,
            cost=pairwise_cost,
        ),
        Builder(
            "alltoall",
            "multipath",
            multipath.multipath_alltoall,
            "segments dealt to the peers, each cluster pair's over direct or relayed routes",
            seg,
            cost=pairwise_cost,
        ),
        Builder(
            "alltoall",
            "direct-segmented",
            alltoall.segmented_alltoall,
            "rotated Direct Exchange in segments dealt to the peers in turn: every link busy",
            seg,
            cost=pairwise_cost,
        ),
        Builder("reduce", "binomial", reduce.binomial_reduce, "MPICH's binomial tree"),
        Builder(
            "reduce",
            "chain-segmented",
            reduce.chain_segmented_reduce,
            "pipeline: segments combined along a chain",
            seg,
        ),
        Builder(
            "reduce",
            "dary-segmented",
            reduce.dary_segmented_reduce,
            "pipelined d-ary tree, the broadcast's reversed (commutative ops only)",
            ("segment_size", "degree"),
            commutative_only=True,
        ),
        Builder(
            "reduce",
            "two-level",
            reduce.two_level_reduce,
            "local trees, then a WAN tree of coordinators, pipelined",
            two_layer,
        ),
        Builder(
            "allreduce",
            "reduce-bcast",
            allreduce.reduce_bcast_allreduce,
            "binomial reduce to rank 0, then binomial broadcast",
        ),
        Builder(
            "allreduce",
            "recursive-doubling",
            allreduce.recursive_doubling_allreduce,
            "log2 P exchanges of the whole vector",
        ),
        Builder(
            "allreduce",
            "rabenseifner",
            allreduce.rabenseifner_allreduce,
            "reduce-scatter by recursive halving, then allgather by recursive doubling",
        ),
        Builder(
            "allreduce",
            "mpich",
            allreduce.mpich_allreduce,
            "MPICH's choice, clusters ignored: recursive doubling or Rabenseifner",
        ),
        Builder(
            "allreduce",
            "two-level",
            allreduce.two_level_allreduce,
            "local reduce, WAN reduce-scatter + allgather, local broadcast, pipelined",
            seg_lan,
            cost=pairwise_cost,
        ),
        Builder(
            "allreduce",
            "two-level-exchange",
            allreduce.two_level_exchange_allreduce,
            "local reduce, partial vectors to every coordinator (one WAN round), broadcast",
            seg_lan,
            cost=pairwise_cost,
        ),
        Builder(
            "reduce_scatter",
            "pairwise",
            reduce_scatter.pairwise_reduce_scatter,
            "every rank sends block j straight to rank j, staggered (MPICH's pairwise)",
            cost=all_pairs_cost,
        ),
        Builder(
            "reduce_scatter",
            "reduce-then-scatter",
            reduce_scatter.reduce_then_scatter,
            "binomial reduce of the whole vector to rank 0, then a flat scatter",
        ),
        Builder(
            "reduce_scatter",
            "two-level",
            reduce_scatter.two_level_reduce_scatter,
            "local reduce, each cluster's blocks once over the WAN, local hand-out",
            seg_lan,
            cost=pairwise_cost,
        ),
        Builder(
            "allgather",
            "multitree",
            packing.multitree_allgather,
            "every cluster's blocks over trees packed on the cluster graph, all links busy",
            seg,
            cost=packing_cost,
        ),
        Builder(
            "reduce_scatter",
            "multitree",
            packing.multitree_reduce_scatter,
            "the packed allgather reversed: partial blocks combine up its trees",
            seg,
            cost=packing_cost,
            commutative_only=True,
        ),
        Builder(
            "reduce",
            "multitree",
            packing.multitree_reduce,
            "a broadcast over packed trees reversed: partial results cross each link once",
            seg,
            cost=packing_cost,
            commutative_only=True,
        ),
        Builder(
            "allreduce",
            "multitree",
            packing.multitree_allreduce,
            "reduce-scatter then allgather over trees packed on the cluster graph",
            seg,
            cost=packing_cost,
            commutative_only=True,
        ),
        Builder("scan", "chain", scan.chain_scan, "prefix passed along the rank chain"),
        Builder(
            "scan",
            "chain-segmented",
            scan.chain_segmented_scan,
            "pipelined chain: crosses each WAN link once on cluster-ordered ranks",
            seg,
        ),
        Builder(
            "scan",
            "recursive-doubling",
            scan.recursive_doubling_scan,
            "Hillis-Steele doubling: ceil(log2 P) steps of whole vectors",
        ),
        Builder(
            "exscan",
            "chain",
            scan.chain_exscan,
            "prefix passed along the rank chain, sent twice per hop",
        ),
        Builder(
            "exscan",
            "chain-segmented",
            scan.chain_segmented_exscan,
            "pipelined chain: crosses each WAN link once on cluster-ordered ranks",
            seg,
        ),
        Builder(
            "exscan",
            "recursive-doubling",
            scan.recursive_doubling_exscan,
            "doubling scan, then a shift by one rank",
        ),
        Builder(
            "barrier",
            "dissemination",
            barrier.dissemination_barrier,
            "ceil(log2 P) rounds of signals, clusters ignored (MPICH's)",
        ),
        Builder(
            "barrier",
            "two-level",
            barrier.two_level_barrier,
            "local signals to coordinators, one WAN round, local release",
        ),
    ]
    return out


BUILDERS: dict[tuple[str, str], Builder] = _table()
"""Every builder by ``(op, name)``; read-only."""


def list_builders(op: str | None = None) -> list[Builder]:
    """Every registered builder (of one collective, if ``op`` is given), in table order."""
    return [b for (o, _), b in BUILDERS.items() if op is None or o == op]


def get_builder(op: str, name: str) -> Builder:
    """The builder ``name`` of collective ``op``; UnknownAlgorithm lists the choices."""
    try:
        return BUILDERS[(op, name)]
    except KeyError:
        names = ", ".join(b.name for b in list_builders(op)) or "none"
        raise UnknownAlgorithm(f"unknown {op} algorithm {name!r}; choose one of: {names}") from None
