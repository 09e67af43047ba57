"""The physical limits (network/bounds/): exact values on small grids, the quotient
graphs against the per-rank graphs, and validity against the simulator on random grids
(no builder's simulated time falls below the bound)."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gridcoll.algorithms.registry import get_builder, list_builders
from gridcoll.errors import GridcollError, ParameterError
from gridcoll.network import (
    Cluster,
    Grid,
    Link,
    PiecewiseLinear,
    PLogP,
    Route,
    broadcast_bound,
    capacity_graph,
    get_grid,
    latency_bound,
    throughput_rate,
)
from gridcoll.network.bounds import (
    BOUND_OPS,
    cluster_classes,
    collective_bound,
    peak_rate,
    set_flow,
    site_groups,
)
from gridcoll.network.bounds import broadcast as B
from gridcoll.network.bounds.paths import hops
from gridcoll.network.presets import das2, lan_plogp, magpie, transit_stub, wan_plogp
from gridcoll.simulate import simulate
from gridcoll.tune import Call, PlanOptions, plan

MiB = 2**20
LAN = lan_plogp()
OS1 = LAN.os(1)  # 4 us + 1 B / 150 MB/s: one send overhead of a 1-byte message


def _pair_grid(latency_ms, bandwidth, nranks=1, name="hand", lans=None) -> Grid:
    """A grid with a private link per ordered cluster pair; matrices from row to column;
    ``nranks`` one count for all clusters or one per cluster."""
    n = len(latency_ms)
    sizes = [nranks] * n if isinstance(nranks, int) else list(nranks)
    lans = lans or [LAN] * n
    clusters = tuple(Cluster(f"c{i}", k, lans[i]) for i, k in enumerate(sizes))
    routes, links = {}, {}
    for a in range(n):
        for b in range(n):
            if a != b:
                plogp = wan_plogp(latency_ms[a][b] * 1e-3, bandwidth[a][b], lans[a])
                links[f"{a}->{b}"] = Link(f"{a}->{b}", plogp.g_fn)
                routes[(a, b)] = Route(plogp, (f"{a}->{b}",))
    return Grid(name, clusters, routes, links)


# -- values ------------------------------------------------------------------------------
@pytest.mark.parametrize(("clusters", "rate"), [(8, 7e6), (4, 3e6), (2, 1e6)])
def test_throughput_rate_magpie_one_rank_per_cluster(clusters, rate):
    # root -> c directly, plus root -> c' -> c through each of the other C-2 clusters
    assert throughput_rate(get_grid(f"magpie:{clusters},1")) == pytest.approx(rate)


def test_throughput_bound_magpie_8_1_is_about_0_16s_for_1MiB():
    bound = broadcast_bound(get_grid("magpie:8,1"), MiB)
    assert bound.rate == pytest.approx(7e6)
    assert bound.throughput_s == pytest.approx(MiB / 7e6 + 10e-3)
    assert bound.time_s == max(bound.latency_s, bound.throughput_s, bound.windowed_s)
    assert bound.time_s == bound.windowed_s > bound.throughput_s
    assert 0.15 < bound.time_s < 0.17
    single_tree = MiB / 1e6  # any one tree sends everything over one 1 MB/s link
    assert single_tree / bound.time_s > 6


def test_throughput_rate_is_root_independent_on_symmetric_grids():
    grid = get_grid("magpie:4,4")
    assert [throughput_rate(grid, r) for r in (0, 5, 15)] == pytest.approx([3e6] * 3)


def test_latency_bound_magpie_is_wan_latency_plus_one_send_overhead():
    for spec in ("magpie:8,1", "magpie:4,4", "magpie:2,16"):
        assert latency_bound(get_grid(spec)) == pytest.approx(10e-3 + OS1)


def test_latency_bound_of_a_lan_is_one_hop():
    assert latency_bound(get_grid("lan:16")) == pytest.approx(20e-6 + OS1)
    assert throughput_rate(get_grid("lan:16")) == pytest.approx(50e6)


def test_single_rank_grid_has_no_bound():
    bound = broadcast_bound(get_grid("lan:1"), MiB)
    assert math.isinf(bound.rate)
    assert bound.time_s == 0.0


def test_bounds_two_clusters_asymmetric_links():
    grid = _pair_grid([[0, 5], [20, 0]], [[2e6, 2e6], [0.5e6, 0.5e6]], nranks=3)
    assert throughput_rate(grid, root=0) == pytest.approx(2e6)
    assert throughput_rate(grid, root=3) == pytest.approx(0.5e6)
    assert latency_bound(grid, root=0) == pytest.approx(5e-3 + OS1)
    assert latency_bound(grid, root=4) == pytest.approx(20e-3 + OS1)
    bound = broadcast_bound(grid, 10**6, root=3)
    assert bound.throughput_s == pytest.approx(10**6 / 0.5e6 + 20e-3)


def test_latency_bound_takes_the_shortest_path_through_clusters():
    # A -> C directly costs 100 ms; A -> B -> C costs 2 x 10 ms and two send overheads
    ms = [[0, 10, 100], [10, 0, 10], [100, 10, 0]]
    grid = _pair_grid(ms, [[1e6] * 3] * 3)
    assert latency_bound(grid, root=0) == pytest.approx(20e-3 + 2 * OS1)
    assert broadcast_bound(grid, 1, root=0).latency_s == pytest.approx(20e-3 + 2 * OS1)


def _site_grid(shared: bool) -> Grid:
    """Clusters A, B at site X and C at site Y; 1 MB/s WAN, 10 MB/s between A and B.

    With ``shared``, everything A and B send off-site crosses X's uplink (1 MB/s), and
    everything they receive from off-site crosses X's downlink; otherwise each ordered
    pair has its own 1 MB/s wire.
    """
    clusters = (Cluster("A", 2, LAN, "X"), Cluster("B", 2, LAN, "X"), Cluster("C", 2, LAN, "Y"))
    wan = wan_plogp(10e-3, 1e6, LAN)
    near = wan_plogp(1e-3, 10e6, LAN)
    links, routes = {}, {}

    def link(name: str, plogp: PLogP) -> str:
        links[name] = Link(name, plogp.g_fn)
        return name

    for a in range(3):
        for b in range(3):
            if a == b:
                continue
            ends = {clusters[a].site, clusters[b].site}
            if ends == {"X"}:
                routes[(a, b)] = Route(near, (link(f"{a}->{b}", near),))
            elif shared:
                up, down = f"{clusters[a].site}:up", f"{clusters[b].site}:down"
                routes[(a, b)] = Route(wan, (link(up, wan), link(down, wan)))
            else:
                routes[(a, b)] = Route(wan, (link(f"{a}->{b}", wan),))
    return Grid("sites", clusters, routes, links)


def test_shared_uplink_halves_the_rate():
    private, shared = _site_grid(shared=False), _site_grid(shared=True)
    # root in A: to C directly, and through B (A -> B is fast): 2 MB/s on private wires
    assert throughput_rate(private, root=0) == pytest.approx(2e6)
    # both ways out of site X cross X's one uplink
    assert throughput_rate(shared, root=0) == pytest.approx(1e6)
    # root in C: everything into X crosses X's downlink
    assert throughput_rate(private, root=4) == pytest.approx(2e6)
    assert throughput_rate(shared, root=4) == pytest.approx(1e6)
    # latency is unchanged by sharing
    assert latency_bound(private, 0) == pytest.approx(latency_bound(shared, 0))


def test_bounds_reject_a_bad_root():
    with pytest.raises(ParameterError, match="root 8 is out of range"):
        broadcast_bound(get_grid("magpie:8,1"), MiB, root=8)


# -- the quotient against networkx ---------------------------------------------------
# -- the max-flows of the throughput bound, against networkx ------------------------------
@pytest.mark.parametrize(
    "spec", ["teragrid", "das2:3", "transit-stub:12,4", "magpie:3,2", "magpie:4,3", "lan:5"]
)
def test_receiver_flows_match_networkx_on_the_per_rank_graph(spec):
    """The quotient's max-flows (own Dinic, one per class of receivers) are networkx's
    on the per-rank capacity graph, for every receiver."""
    import networkx as nx

    grid = get_grid(spec)
    graph = capacity_graph(grid)
    root = grid.nranks - 1
    flows = {}
    for cls in cluster_classes(grid, (grid.cluster_of[root],)):
        for receiver in B._receivers(grid, root):
            if receiver.cluster == cls[0]:
                flows.update(dict.fromkeys(cls, receiver.flow))
    for c, ranks in enumerate(grid.members):
        for x in ranks:
            if x != root:
                theirs = nx.maximum_flow_value(graph, ("rank", root), ("rank", x))
                assert flows[c] == pytest.approx(theirs, rel=1e-9), (c, x)


# -- the windowed-cut bound ------------------------------------------------------------
@pytest.mark.parametrize("nbytes", [1024, 16384, MiB])
def test_windowed_bound_of_the_papers_grid(nbytes):
    """magpie:8,1: a byte reaches x over its own 1 MB/s link from L on, or relayed over
    one of 6 others from 2 L + os(1) on (the relay holds it no earlier than L + os(1));
    the 7 links into x are the binding cut: sum 1e6 (T - lam) = M."""
    grid = get_grid("magpie:8,1")
    L, cap = 10e-3, 1e6
    direct = nbytes / cap + L
    relayed = (nbytes + cap * L + 6 * cap * (2 * L + OS1)) / (7 * cap)
    expected = direct if direct <= 2 * L + OS1 else relayed
    bound = broadcast_bound(grid, nbytes)
    assert bound.windowed_s == pytest.approx(expected, rel=1e-12)
    assert bound.time_s == bound.windowed_s
    assert bound.throughput_s < bound.windowed_s


def test_windowed_bound_at_16KiB_is_tighter_than_throughput():
    # the throughput bound alone says 12.3 ms; the best direct schedule needs 27.7 ms
    bound = broadcast_bound(get_grid("magpie:8,1"), 16384)
    assert round(bound.throughput_s * 1e3, 1) == 12.3
    assert round(bound.time_s * 1e3, 1) == 20.9


def test_windowed_bound_tends_to_the_streaming_bound():
    grid = get_grid("das2:3")
    for nbytes in (1, 1024, MiB, 64 * MiB):
        bound = broadcast_bound(grid, nbytes, 2)
        assert bound.windowed_s >= bound.throughput_s * (1 - 1e-12)
        assert bound.windowed_s >= latency_bound(grid, 2) * (1 - 1e-12)
    big = broadcast_bound(grid, 256 * MiB, 2)
    assert big.windowed_s == pytest.approx(big.throughput_s, rel=2e-3)


def test_peak_rate_is_the_best_bytes_per_second_of_any_size():
    assert peak_rate(PiecewiseLinear((0.0, 1e6), (1e-5, 1 + 1e-5))) == pytest.approx(1e6)
    convex = PiecewiseLinear((0.0, 1000.0, 2000.0), (0.0, 1e-4, 2e-3))  # 10 MB/s, then 0.5
    assert peak_rate(convex) == pytest.approx(1e7)
    assert peak_rate(PiecewiseLinear((0.0,), (1e-3,))) == math.inf


def test_cluster_classes_group_interchangeable_clusters():
    assert cluster_classes(magpie(4, 2), (0,)) == ((0,), (1, 2, 3))
    assert cluster_classes(magpie(4, 2), (0, 2)) == ((0,), (1, 3), (2,))
    lat = [[0, 10, 10, 10], [10, 0, 10, 10], [10, 10, 0, 20], [10, 10, 20, 0]]
    grid = _pair_grid(lat, [[1e6] * 4] * 4)
    assert cluster_classes(grid, (0,)) == ((0,), (1,), (2, 3))
    sizes = _pair_grid([[0, 5, 5], [5, 0, 5], [5, 5, 0]], [[1e6] * 3] * 3, nranks=(1, 2, 1))
    assert cluster_classes(sizes, (0,)) == ((0,), (1,), (2,))
    stub = transit_stub(8, 1)  # shared links: no symmetry claimed
    assert cluster_classes(stub) == tuple((c,) for c in range(8))


def test_bounds_memoise_in_the_grid_memo():
    grid = magpie(3, 2)
    broadcast_bound(grid, 4096, 1)
    collective_bound(grid, "alltoall", 4096, 1)
    tables = grid.memo.sizes()
    for name in ("bounds.receivers", "bounds.windowed", "bounds.set_flows", "bounds.hops"):
        assert tables[name] >= 1, name
    assert not [k for k in vars(grid) if k.startswith("_")]  # nothing written into the grid
    before = broadcast_bound(grid, 4096, 1)
    grid.memo.clear()
    assert broadcast_bound(grid, 4096, 1) == before


# -- random grids ------------------------------------------------------------------------
BANDWIDTHS = (1e5, 3e5, 1e6, 2e6, 1e7)


@st.composite
def grids(draw) -> Grid:
    """magpie-like, das2-like, transit-stub, random asymmetric pair grids (cluster
    sizes, LANs and links all differ) and sites sharing up/down links; <= 12 ranks."""
    kind = draw(st.sampled_from(["magpie", "das2", "transit", "asym", "sites"]))
    if kind == "magpie":
        return magpie(draw(st.integers(1, 4)), draw(st.integers(1, 3)))
    if kind == "das2":
        return das2(draw(st.integers(1, 3)))
    if kind == "transit":
        return transit_stub(draw(st.integers(2, 8)), draw(st.integers(0, 50)))
    C = draw(st.integers(2, 4))
    sizes = [draw(st.integers(1, 3)) for _ in range(C)]
    lans = [
        lan_plogp(draw(st.sampled_from([5e-6, 20e-6, 1e-4])), draw(st.sampled_from([1e7, 5e7])))
        for _ in range(C)
    ]
    lat = [[draw(st.floats(0.5, 40.0)) for _ in range(C)] for _ in range(C)]
    bw = [[draw(st.sampled_from(BANDWIDTHS)) for _ in range(C)] for _ in range(C)]
    if kind == "asym":
        return _pair_grid(lat, bw, sizes, "asym", lans)
    site = [draw(st.integers(0, 1)) for _ in range(C)]
    clusters = tuple(Cluster(f"c{i}", k, lans[i], f"s{site[i]}") for i, k in enumerate(sizes))
    links, routes = {}, {}
    for s in (0, 1):
        for way in ("up", "down"):
            plogp = wan_plogp(1e-3, draw(st.sampled_from(BANDWIDTHS)), LAN)
            links[f"s{s}:{way}"] = Link(f"s{s}:{way}", plogp.g_fn)
    for a in range(C):
        for b in range(C):
            if a == b:
                continue
            plogp = wan_plogp(lat[a][b] * 1e-3, bw[a][b], lans[a])
            if site[a] == site[b]:
                links[f"{a}->{b}"] = Link(f"{a}->{b}", plogp.g_fn)
                routes[(a, b)] = Route(plogp, (f"{a}->{b}",))
            else:
                routes[(a, b)] = Route(plogp, (f"s{site[a]}:up", f"s{site[b]}:down"))
    return Grid("sites", clusters, routes, links)


@settings(max_examples=40)
@given(grid=grids(), nbytes=st.sampled_from([1, 1000, 16384, 200_000, MiB]), data=st.data())
def test_quotient_equals_the_per_rank_graph(grid, nbytes, data):
    """Every max-flow and windowed time of the quotient (classes of ranks, symmetric
    clusters computed once) equals the per-rank graph's (every rank its own class, every
    cluster solved)."""
    root = data.draw(st.integers(0, grid.nranks - 1))
    if grid.nranks == 1:
        return
    quotient = {r.cluster: r for r in B._receivers(grid, root)}
    per_rank = {r.cluster: r for r in B._receivers(grid, root, per_rank=True)}
    for cls in cluster_classes(grid, (grid.cluster_of[root],)):
        for c in cls:
            if c in per_rank:
                assert per_rank[c].flow == pytest.approx(quotient[cls[0]].flow, rel=1e-12)
                assert per_rank[c].after == quotient[cls[0]].after
    fast = B._windowed(grid, nbytes, root)
    assert fast == pytest.approx(B._windowed(grid, nbytes, root, per_rank=True), rel=1e-12)
    assert fast == broadcast_bound(grid, nbytes, root).windowed_s


@settings(max_examples=30)
@given(grid=grids(), data=st.data())
def test_set_flow_matches_networkx_on_the_per_rank_graph(grid, data):
    import networkx as nx

    ranks = list(range(grid.nranks))
    sources = frozenset(data.draw(st.sets(st.sampled_from(ranks), min_size=1)))
    rest = [r for r in ranks if r not in sources]
    if not rest:
        return
    sinks = frozenset(data.draw(st.sets(st.sampled_from(rest), min_size=1)))
    graph = capacity_graph(grid)
    for r in sources:
        graph.add_edge("source", ("rank", r))
    for r in sinks:
        graph.add_edge(("rank", r), "sink")
    theirs = nx.maximum_flow_value(graph, "source", "sink")
    assert set_flow(grid, sources, sinks) == pytest.approx(theirs, rel=1e-9)


def _bcast_schedules(grid: Grid, nbytes: int, root: int):
    """Every registered broadcast builder: the tuned candidates of ``plan``, each
    builder with its defaults, the segmented ones with four segments, the annealing ones
    on a small budget."""
    out = [(c.algorithm, c.params) for c in plan(grid, Call("bcast", nbytes, root)).candidates]
    for builder in list_builders("bcast"):
        if builder.anytime:
            out.append((builder.name, {"evaluations": 200}))
            continue
        out.append((builder.name, {}))
        if builder.params == ("segment_size",):
            out.append((builder.name, {"segment_size": max(1, nbytes // 4)}))
    return out


@settings(max_examples=25)
@given(grid=grids(), nbytes=st.sampled_from([1, 1000, 16384, 200_000, MiB]), data=st.data())
def test_no_broadcast_beats_the_bound(grid, nbytes, data):
    """Validity (bounds.windowed_time's docstring): no builder, with tuned, default or
    extreme parameters, is simulated below ``Bound.time_s``."""
    root = data.draw(st.integers(0, grid.nranks - 1))
    bound = broadcast_bound(grid, nbytes, root)
    for name, params in _bcast_schedules(grid, nbytes, root):
        try:
            schedule = get_builder("bcast", name).build(grid, nbytes, root, **params)
        except (GridcollError, TypeError):
            continue  # parameters this builder does not take on this grid
        sim = simulate(schedule, grid).total_s
        assert sim >= bound.time_s * (1 - 1e-9), (name, params, sim, bound)


OPS = tuple(op for op in BOUND_OPS if op != "bcast")  # every other collective


@settings(max_examples=12)
@given(
    grid=grids(),
    nbytes=st.sampled_from([1, 4096, 65536]),
    fair=st.booleans(),
    data=st.data(),
)
def test_no_collective_beats_its_bound(grid, nbytes, fair, data):
    """Validity of every cut, the sites' and the allreduce's exchange included: no
    builder's tuned schedule is simulated below the bound, with FIFO or fair links."""
    if fair:
        grid = grid.with_link_sharing("fair")
    root = data.draw(st.integers(0, grid.nranks - 1))
    for op in OPS:
        size = 0 if op == "barrier" else nbytes
        bound = collective_bound(grid, op, size, root).time_s
        for cand in plan(grid, Call(op, size, root), PlanOptions(check=False)).candidates:
            schedule = get_builder(op, cand.algorithm).build(grid, size, root, **cand.params)
            sim = simulate(schedule, grid).total_s
            assert sim >= bound * (1 - 1e-9), (op, cand.algorithm, sim, bound)


def test_the_allreduce_exchange_tightens_the_bound_on_the_papers_grid():
    """Each rank's own cut says ``M / (7 MB/s)``; the exchange across the 8 clusters,
    ``2 * 7 M`` bytes into clusters that take ``8 * 7 MB/s``, says ``M / (4 MB/s)``; the
    two-level allreduce is simulated within 5% of it."""
    grid = magpie(8, 1)
    bound = collective_bound(grid, "allreduce", MiB)
    assert bound.time_s == pytest.approx(MiB / 4e6 + 10e-3, rel=0.01)
    assert collective_bound(grid, "reduce", MiB).time_s < bound.time_s
    p = plan(grid, Call("allreduce", MiB), PlanOptions(algo="two-level"))
    assert simulate(p.build(grid), grid).total_s <= 1.05 * bound.time_s


def test_a_site_cut_bounds_the_clusters_that_share_its_access_link():
    """teragrid's PSC holds two clusters behind one 20 Mb/s access link: the 48 other
    ranks' blocks must all come through it, which no single cluster's cut sees."""
    grid = get_grid("teragrid")
    assert site_groups(grid) == ((0, 1), (2, 3), (4, 5), (6, 7))
    bound = collective_bound(grid, "allgather", MiB).time_s
    assert bound >= 48 * MiB / (20e6 / 8)
    assert bound <= 1.05 * 48 * MiB / (20e6 / 8)


def test_bounds_reject_unknown_ops_and_ranks():
    with pytest.raises(ParameterError, match="no bound"):
        collective_bound(magpie(2, 1), "nosuch", 8)
    with pytest.raises(ParameterError, match="out of range"):
        set_flow(magpie(2, 1), frozenset({5}), frozenset({0}))


def test_a_reduction_waits_for_its_sources_to_mix():
    """On ``magpie:8,1`` the links into the root carry only their senders' own values
    until the others' arrive (one hop, ``w``): ``M / (7 MB/s) + (6/7) w`` before the
    last hop's latency, where the plain cut says ``M / (7 MB/s)``."""
    grid = magpie(8, 1)
    w = hops(grid, 1.0).w[1, 2]
    for nbytes in (64 * 1024, MiB):
        plain = nbytes / 7e6 + grid.wan(1, 0).L
        assert collective_bound(grid, "reduce", nbytes).time_s == pytest.approx(
            plain + 6 / 7 * w, rel=1e-3
        )
    # an allgather's blocks are not combined: no wait, each cluster's cut is plain
    assert collective_bound(grid, "allgather", MiB).time_s == pytest.approx(
        7 * MiB / 7e6 + grid.wan(1, 0).L, rel=1e-3
    )


def test_a_byte_past_the_cut_still_travels_to_the_root():
    """teragrid's PSC sends through its 20 Mb/s access link, then 36 ms to SDSC, where
    the root is: the route's latency counts, not that of the link's nearest route."""
    grid = get_grid("teragrid")
    nbytes = 64 * 1024
    psc_to_sdsc = grid.wan(6, 0).L
    assert psc_to_sdsc > grid.wan(6, 2).L + 0.02  # PSC's access link's nearest route
    bound = collective_bound(grid, "reduce", nbytes, root=0).time_s
    assert bound >= nbytes / (20e6 / 8) + psc_to_sdsc


def test_an_all_to_all_also_leaves_every_cluster():
    """das2's Leiden sends its 4 ranks' blocks to the 12 others through 1.3125 MB/s
    out, where 1.9375 MB/s come in: the outgoing cut sets the bound."""
    grid = get_grid("das2:4")
    out = sum(MiB / grid.wan(1, b).g(MiB) for b in (0, 2, 3))  # bytes/s out of Leiden
    bound = collective_bound(grid, "alltoall", MiB).time_s
    assert bound >= 4 * 12 * MiB / out
    assert bound <= 1.05 * 4 * 12 * MiB / out
