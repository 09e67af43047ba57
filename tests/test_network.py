"""The network layer: P-LogP tables, grids, the grid file, presets and bounds."""

# ruff: noqa: SIM300  (``value == pytest.approx(expected)`` reads better than the reverse)

from __future__ import annotations

import json
import math

import pytest

from gridcoll.errors import GridcollError, GridError, ParameterError
from gridcoll.network import (
    Cluster,
    Grid,
    Link,
    LogGP,
    PiecewiseLinear,
    PLogP,
    Route,
    get_grid,
    grid_from_dict,
    grid_to_dict,
    load_grid,
    r_w,
    s_w,
    save_grid,
    throughput_rate,
)
from gridcoll.network.presets import (
    DAS2_BANDWIDTH_MBIT,
    DAS2_LATENCY_MS,
    DAS2_SITES,
    lan_plogp,
    wan_plogp,
)

MiB = 2**20
LAN = lan_plogp()
OS1 = LAN.os(1)  # 4 us + 1 B / 150 MB/s: one send overhead of a 1-byte message


# -- PiecewiseLinear --------------------------------------------------------------------
F = PiecewiseLinear((0.0, 100.0, 1000.0), (1.0, 2.0, 11.0))


@pytest.mark.parametrize(("m", "y"), [(0, 1.0), (100, 2.0), (1000, 11.0)])
def test_piecewise_exact_at_points(m, y):
    assert F(m) == y


@pytest.mark.parametrize(("m", "y"), [(50, 1.5), (25, 1.25), (550, 6.5), (900, 10.0)])
def test_piecewise_linear_between(m, y):
    assert F(m) == pytest.approx(y)


def test_piecewise_exact_at_awkward_points():
    sizes = (0.0, 131072.0, 262144.0, 1048576.0)
    values = (4e-06, 0.0008778133333333333, 0.0017516266666666668, 0.0069945066666666665)
    f = PiecewiseLinear(sizes, values)
    assert [f(m) for m in sizes] == list(values)


def test_piecewise_extrapolates_from_the_two_nearest_points():
    assert F(2000) == pytest.approx(21.0)  # slope 0.01 of the last piece
    assert F(10_000) == pytest.approx(101.0)
    g = PiecewiseLinear((10.0, 20.0), (5.0, 6.0))
    assert g(0) == pytest.approx(4.0)  # slope 0.1 of the first piece, backwards
    assert g(-1000) == 0.0  # never negative
    assert F.slope == pytest.approx(0.01)


def test_piecewise_single_point_is_constant():
    c = PiecewiseLinear((64.0,), (3.0,))
    assert c(0) == c(64) == c(1e9) == 3.0
    assert c.slope == 0.0


@pytest.mark.parametrize(
    ("sizes", "values", "match"),
    [
        ((), (), "as many values"),
        ((0.0, 1.0), (1.0,), "as many values"),
        ((0.0, 0.0), (1.0, 2.0), "increase strictly"),
        ((10.0, 5.0), (1.0, 2.0), "increase strictly"),
        ((0.0,), (-1.0,), "point 0"),
        ((-1.0,), (1.0,), "point 0"),
        ((0.0, 1.0), (1.0, math.nan), "point 1"),
        ((0.0, math.inf), (1.0, 1.0), "point 1"),
    ],
)
def test_piecewise_rejects_bad_points(sizes, values, match):
    with pytest.raises(GridError, match=match):
        PiecewiseLinear(sizes, values)


# -- P-LogP -------------------------------------------------------------------------------
def test_plogp_s_and_r():
    p = PLogP.linear(20e-6, 50e6, g0=8e-6, os0=4e-6, or0=4e-6)
    m = 1000.0
    assert p.g(m) == pytest.approx(8e-6 + m / 50e6)
    assert p.s(m) == p.g(m)  # s(m) = g(m)
    assert p.r(m) == pytest.approx(20e-6 + p.g(m))  # r(m) = L + g(m)
    assert p.os(m) == pytest.approx(4e-6)
    assert p.or_(m) == pytest.approx(4e-6)
    assert p.bandwidth == pytest.approx(50e6)


def test_plogp_linear_caps_overheads_at_the_gap():
    p = PLogP.linear(0.0, 1e6, os0=1.0, or0=1.0)  # overhead 1 s > gap of a small message
    for m in (0, 100, 10_000, MiB, 4 * MiB):
        assert p.os(m) <= p.g(m) + 1e-15  # g(m) >= os(m), or(m) (seed 000, sec. 2.1)
        assert p.or_(m) <= p.g(m) + 1e-15


def test_wide_area_composition_seed000():
    wan = wan_plogp(10e-3, 1e6, LAN)
    for m in (1, 1024, 64 * 1024, 100_000, MiB):
        assert s_w(LAN, wan, m) == max(LAN.g(m), wan.os(m))
        assert r_w(wan, m) == wan.L + wan.g(m)
    # short messages: Isend returns as on the LAN, so s_w = g_l
    assert s_w(LAN, wan, 1024) == pytest.approx(LAN.g(1024))
    # long (rendezvous) messages: the sender is busy for the whole WAN transfer
    assert s_w(LAN, wan, MiB) == pytest.approx(8e-6 + MiB / 1e6)
    assert r_w(wan, MiB) == pytest.approx(10e-3 + 8e-6 + MiB / 1e6)


@pytest.mark.parametrize(
    ("L", "sizes", "os", "or_", "g", "message"),
    [
        (-1.0, (0.0,), (0.0,), (0.0,), (1.0,), "latency L"),
        (math.inf, (0.0,), (0.0,), (0.0,), (1.0,), "latency L"),
        (0.0, (0.0, 10.0), (0.0, 0.0), (0.0, 0.0), (2.0, 1.0), "must not decrease"),
    ],
)
def test_plogp_rejects_bad_tables(L, sizes, os, or_, g, message):
    with pytest.raises(GridError, match=message):
        PLogP.from_points(L, sizes, os, or_, g)


def test_loggp_from_plogp_is_seed000_table1():
    sizes = (1.0, 1000.0, 10_000.0)
    os, or_, g = (2e-6, 5e-6, 40e-6), (3e-6, 6e-6, 50e-6), (9e-6, 30e-6, 210e-6)
    p = PLogP.from_points(30e-6, sizes, os, or_, g)
    logp = p.to_loggp()
    assert logp.L == pytest.approx(30e-6 + 9e-6 - 2e-6 - 3e-6)  # L + g(1) - os(1) - or(1)
    assert logp.o == pytest.approx((2e-6 + 3e-6) / 2)  # (os(1) + or(1)) / 2
    assert logp.g == pytest.approx(9e-6)  # g(1)
    assert logp.G == pytest.approx(210e-6 / 10_000)  # g(m)/m, m large
    assert p.to_loggp(large=1000.0).G == pytest.approx(30e-6 / 1000)


@pytest.mark.parametrize(
    "params",
    [
        LogGP(L=20e-6, o=4e-6, g=8e-6, G=2e-8),
        LogGP(L=10e-3, o=5e-6, g=12e-6, G=1e-6),
        LogGP(L=5e-6, o=1e-6, g=1e-6, G=0.0),
    ],
)
def test_loggp_round_trip(params):
    back = PLogP.from_loggp(params).to_loggp()
    assert back.L == pytest.approx(params.L)
    assert back.o == pytest.approx(params.o)
    assert back.g == pytest.approx(params.g)
    assert back.G == pytest.approx(params.G, rel=1e-6, abs=1e-15)


def test_plogp_round_trip_through_loggp_keeps_table1_quantities():
    logp = LAN.to_loggp()
    again = PLogP.from_loggp(logp)
    assert again.L + again.g(1) - again.os(1) - again.or_(1) == pytest.approx(logp.L)
    assert again.to_loggp().L == pytest.approx(logp.L)


# -- grids ---------------------------------------------------------------------------------
def _clusters(*sizes: int, site: str = "") -> tuple[Cluster, ...]:
    return tuple(Cluster(f"c{i}", n, LAN, site) for i, n in enumerate(sizes))


def _pair_grid(latency_ms, bandwidth, nranks=1, name="hand") -> Grid:
    """A grid with a private link per ordered cluster pair; matrices from row to column."""
    n = len(latency_ms)
    clusters = _clusters(*([nranks] * n))
    routes, links = {}, {}
    for a in range(n):
        for b in range(n):
            if a != b:
                plogp = wan_plogp(latency_ms[a][b] * 1e-3, bandwidth[a][b], LAN)
                links[f"{a}->{b}"] = Link(f"{a}->{b}", plogp.g_fn)
                routes[(a, b)] = Route(plogp, (f"{a}->{b}",))
    return Grid(name, clusters, routes, links)


def test_grid_ranks_clusters_and_coordinators():
    grid = get_grid("magpie:3,4")
    assert (grid.nranks, grid.nclusters) == (12, 3)
    assert grid.cluster_of[:5] == (0, 0, 0, 0, 1)
    assert grid.members[2] == (8, 9, 10, 11)
    assert grid.coordinators(root=5) == (0, 5, 8)
    assert grid.path(0, 1) == (("nic_out", 0), ("nic_in", 1))
    assert grid.path(0, 4) == (
        ("nic_out", 0),
        ("gw_out", 0),
        ("link", "c0->c1"),
        ("gw_in", 1),
        ("nic_in", 4),
    )
    assert grid.plogp(0, 1) is grid.clusters[0].lan
    assert grid.plogp(0, 4) is grid.wan(0, 1)


@pytest.mark.parametrize("rank", [-1, 12, 100, 1.0, True, "0"])
def test_check_rank_names_the_rank_and_the_range(rank):
    with pytest.raises(ParameterError, match=r"root .* is out of range for grid .* \(0\.\.11\)"):
        get_grid("magpie:3,4").check_rank(rank, "root")


def test_grid_validation_errors_name_the_problem():
    one = _clusters(1)
    two = _clusters(1, 1)
    wan = wan_plogp(10e-3, 1e6)
    link = Link("w", wan.g_fn)
    with pytest.raises(GridError, match="at least one cluster"):
        Grid("g", ())
    with pytest.raises(GridError, match="at least one rank, not 0"):
        Cluster("empty", 0, LAN)
    with pytest.raises(GridError, match="names must be unique"):
        Grid("g", (Cluster("x", 1, LAN), Cluster("x", 1, LAN)), {(0, 1): Route(wan, ())})
    with pytest.raises(GridError, match="no route from cluster 'c1' to cluster 'c0'"):
        Grid("g", two, {(0, 1): Route(wan, ("w",))}, {"w": link})
    with pytest.raises(GridError, match="crosses unknown link 'v'"):
        Grid("g", two, {(0, 1): Route(wan, ("w",)), (1, 0): Route(wan, ("v",))}, {"w": link})
    with pytest.raises(GridError, match="does not join two distinct clusters"):
        Grid("g", one, {(0, 0): Route(wan, ())})
    with pytest.raises(GridError, match="unknown cluster index 5"):
        Grid("g", one, placement=(5,))
    with pytest.raises(GridError, match="placement puts 2 ranks in cluster 'c0'"):
        Grid("g", one, placement=(0, 0))


def test_placement_interleaves_ranks():
    wan = wan_plogp(10e-3, 1e6)
    links = {"a": Link("a", wan.g_fn)}
    routes = {(0, 1): Route(wan, ("a",)), (1, 0): Route(wan, ("a",))}
    grid = Grid("g", _clusters(2, 2), routes, links, placement=(0, 1, 0, 1))
    assert grid.members == ((0, 2), (1, 3))
    assert grid.coordinators(3) == (0, 3)


def test_with_links_scaled_slows_only_that_cluster():
    grid = get_grid("magpie:3,1")
    loaded = grid.with_links_scaled(0.5, 1)
    assert loaded.wan(0, 1).bandwidth == pytest.approx(0.5e6)
    assert loaded.wan(0, 2).bandwidth == pytest.approx(1e6)
    with pytest.raises(ParameterError, match="load factor"):
        grid.with_links_scaled(0.0, 1)


# -- the grid file -------------------------------------------------------------------------
PRESET_NAMES = [
    "magpie:8,1",
    "magpie:4,4",
    "magpie:1,1",
    "das2:2",
    "teragrid",
    "transit-stub:10,1",
    "transit-stub:24,7",
    "lan:5",
]


@pytest.mark.parametrize("name", PRESET_NAMES)
def test_grid_file_round_trip_every_preset(name, tmp_path):
    grid = get_grid(name)
    path = tmp_path / "grid.json"
    save_grid(grid, path)
    back = load_grid(path)
    assert back.fingerprint == grid.fingerprint
    assert grid_to_dict(back) == grid_to_dict(grid)
    assert back.nranks == grid.nranks
    assert back.routes.keys() == grid.routes.keys()
    for key, route in grid.routes.items():
        assert back.routes[key].links == route.links
        for m in (0, 1, 1000, 65536, 300_000, MiB, 8 * MiB):
            for f in ("os", "or_", "g"):
                assert getattr(back.routes[key].plogp, f)(m) == pytest.approx(
                    getattr(route.plogp, f)(m), rel=1e-12
                )
    assert get_grid(str(path)).fingerprint == grid.fingerprint  # a file path is a GRID too


def test_fingerprint_tells_grids_apart():
    prints = {get_grid(name).fingerprint for name in PRESET_NAMES}
    assert len(prints) == len(PRESET_NAMES)


TWO_SITES = {
    "format": "gridcoll-grid/1",
    "name": "two-sites",
    "clusters": [
        {"name": "A", "ranks": 4, "lan": {"latency": "20us", "bandwidth": "50MB/s"}},
        {"name": "B", "ranks": 2, "lan": {"latency": "20us", "bandwidth": "50MB/s"}},
    ],
    "routes": [
        {"from": "A", "to": "B", "plogp": {"latency": "10ms", "bandwidth": "1MB/s"}},
        {"from": "B", "to": "A", "plogp": {"latency": "12ms", "bandwidth": "2MB/s"}},
    ],
}


def test_shorthand_file_with_human_units(tmp_path):
    path = tmp_path / "two.json"
    path.write_text(json.dumps(TWO_SITES))
    grid = load_grid(path)
    assert grid.name == "two-sites"
    assert (grid.nranks, grid.nclusters) == (6, 2)
    assert grid.wan(0, 1).L == pytest.approx(10e-3)
    assert grid.wan(1, 0).L == pytest.approx(12e-3)
    assert grid.wan(0, 1).bandwidth == pytest.approx(1e6)
    assert grid.wan(1, 0).bandwidth == pytest.approx(2e6)
    assert grid.clusters[0].lan.L == pytest.approx(20e-6)
    assert set(grid.links) == {"A->B", "B->A"}  # a route without links gets a private one
    assert throughput_rate(grid, root=0) == pytest.approx(1e6)
    assert throughput_rate(grid, root=4) == pytest.approx(2e6)


def _edit(**changes):
    data = json.loads(json.dumps(TWO_SITES))
    for key, value in changes.items():
        data[key] = value
    return data


def _lan(**extra):
    return {"latency": "20us", "bandwidth": "50MB/s", **extra}


MALFORMED = {
    "bad-json": ("{not json", "is not valid JSON"),
    "not-an-object": ("[1, 2]", "must hold one JSON object"),
    "wrong-format": (_edit(format="other/9"), "unknown grid format 'other/9'"),
    "no-clusters": (_edit(clusters=[]), "non-empty 'clusters' list"),
    "cluster-without-lan": (
        _edit(clusters=[{"name": "A", "ranks": 2}]),
        "cluster 0 needs 'name', 'ranks' and 'lan'",
    ),
    "cluster-without-name": (
        _edit(clusters=[{"ranks": 2, "lan": _lan()}]),
        "cluster 0 needs 'name'",
    ),
    "ranks-not-int": (
        _edit(clusters=[{"name": "A", "ranks": "four", "lan": _lan()}]),
        "cluster 'A': 'ranks' must be a positive integer",
    ),
    "zero-ranks": (
        _edit(clusters=[{"name": "A", "ranks": 0, "lan": _lan()}], routes=[]),
        "cluster 'A': 'ranks' must be a positive integer",
    ),
    "bad-bandwidth": (
        _edit(clusters=[{"name": "A", "ranks": 1, "lan": _lan(bandwidth="fast")}], routes=[]),
        "cluster 'A' lan: cannot parse bandwidth 'fast'",
    ),
    "plogp-neither-form": (
        _edit(clusters=[{"name": "A", "ranks": 1, "lan": {"latency": "1ms"}}], routes=[]),
        "cluster 'A' lan: needs either 'points' and 'L', or 'latency' and 'bandwidth'",
    ),
    "negative-g": (
        _edit(
            clusters=[
                {
                    "name": "A",
                    "ranks": 1,
                    "lan": {"L": 1e-5, "points": [{"m": 0, "os": 0, "or": 0, "g": -1e-6}]},
                }
            ],
            routes=[],
        ),
        "cluster 'A' lan: point 0 .* must be finite, >= 0",
    ),
    "non-monotone-g": (
        _edit(
            routes=[
                TWO_SITES["routes"][0],
                {
                    "from": "B",
                    "to": "A",
                    "plogp": {
                        "L": 0.01,
                        "points": [
                            {"m": 0, "os": 1e-6, "or": 1e-6, "g": 2e-3},
                            {"m": 1024, "os": 1e-6, "or": 1e-6, "g": 1e-3},
                        ],
                    },
                },
            ]
        ),
        "route 'B' -> 'A': g\\(m\\) must not decrease",
    ),
    "point-missing-field": (
        _edit(
            clusters=[{"name": "A", "ranks": 1, "lan": {"L": 1e-5, "points": [{"m": 0, "g": 1}]}}],
            routes=[],
        ),
        "cluster 'A' lan: point 0 lacks os, or",
    ),
    "unknown-link": (
        _edit(
            routes=[
                {**TWO_SITES["routes"][0], "links": ["backbone"]},
                TWO_SITES["routes"][1],
            ]
        ),
        "route 'A' -> 'B' crosses unknown link 'backbone'",
    ),
    "route-to-unknown-cluster": (
        _edit(routes=[{"from": "A", "to": "Z", "plogp": _lan()}]),
        "route 0: 'to' names unknown cluster 'Z'",
    ),
    "missing-route": (_edit(routes=TWO_SITES["routes"][:1]), "no route from cluster 'B'"),
    "link-without-capacity": (
        _edit(links=[{"name": "up"}]),
        "link 'up' needs 'bandwidth' or 'g'",
    ),
    "placement-unknown-cluster": (
        _edit(placement=["A", "Q"]),
        "placement names unknown cluster 'Q'",
    ),
}


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_malformed_grid_files_name_the_entry(case, tmp_path):
    content, message = MALFORMED[case]
    path = tmp_path / f"{case}.json"
    path.write_text(content if isinstance(content, str) else json.dumps(content))
    with pytest.raises(GridError, match=message) as info:
        load_grid(path)
    assert str(path) in str(info.value)  # the file is named too
    assert "\n" not in str(info.value)


def test_missing_grid_file_is_a_grid_error(tmp_path):
    with pytest.raises(GridError, match="unknown grid"):
        get_grid(str(tmp_path / "absent.json"))
    with pytest.raises(GridError, match="cannot read grid file"):
        load_grid(tmp_path / "absent.json")


def test_grid_from_dict_accepts_shared_links_and_measured_tables():
    data = _edit(
        links=[{"name": "backbone", "bandwidth": "1MB/s"}],
        routes=[{**r, "links": ["backbone"]} for r in TWO_SITES["routes"]],
    )
    grid = grid_from_dict(data)
    assert grid.routes[(0, 1)].links == ("backbone",)
    assert grid.links["backbone"].bandwidth == pytest.approx(1e6)
    # both directions share one wire: the broadcast rate is that wire's
    assert throughput_rate(grid, 0) == pytest.approx(1e6)


# -- presets ----------------------------------------------------------------------------------
def test_magpie_preset_values_seed000_sec2():
    grid = get_grid("magpie:4,2")
    assert grid.name == "magpie:4,2"
    lan = grid.clusters[0].lan
    assert lan.L == pytest.approx(20e-6)
    assert lan.bandwidth == pytest.approx(50e6)
    wan = grid.wan(0, 3)
    assert wan.L == pytest.approx(10e-3)
    assert wan.bandwidth == pytest.approx(1e6)
    assert len(grid.links) == 4 * 3  # one private link per ordered pair


def test_das2_matrices_are_seed000_table2_and_asymmetric():
    grid = get_grid("das2:3")
    assert [c.name for c in grid.clusters] == list(DAS2_SITES) == ["VU", "Leiden", "UvA", "Delft"]
    assert grid.nranks == 12
    table_latency = {
        ("VU", "Leiden"): 3.5, ("VU", "UvA"): 1.5, ("VU", "Delft"): 2.5,
        ("Leiden", "VU"): 3.5, ("Leiden", "UvA"): 3.0, ("Leiden", "Delft"): 4.0,
        ("UvA", "VU"): 1.5, ("UvA", "Leiden"): 3.0, ("UvA", "Delft"): 2.0,
        ("Delft", "VU"): 2.5, ("Delft", "Leiden"): 4.0, ("Delft", "UvA"): 2.0,
    }  # fmt: skip
    table_mbit = {
        ("VU", "Leiden"): 5.0, ("VU", "UvA"): 26.0, ("VU", "Delft"): 7.0,
        ("Leiden", "VU"): 3.5, ("Leiden", "UvA"): 4.0, ("Leiden", "Delft"): 3.0,
        ("UvA", "VU"): 28.0, ("UvA", "Leiden"): 6.0, ("UvA", "Delft"): 7.5,
        ("Delft", "VU"): 6.0, ("Delft", "Leiden"): 4.5, ("Delft", "UvA"): 6.5,
    }  # fmt: skip
    index = {name: i for i, name in enumerate(DAS2_SITES)}
    for (a, b), ms in table_latency.items():
        assert grid.wan(index[a], index[b]).L == pytest.approx(ms * 1e-3)
        assert DAS2_LATENCY_MS[index[a]][index[b]] == ms
    for (a, b), mbit in table_mbit.items():
        assert grid.wan(index[a], index[b]).bandwidth == pytest.approx(mbit * 1e6 / 8)
        assert DAS2_BANDWIDTH_MBIT[index[a]][index[b]] == mbit
    bw = [[DAS2_BANDWIDTH_MBIT[a][b] for b in range(4)] for a in range(4)]
    assert any(bw[a][b] != bw[b][a] for a in range(4) for b in range(4))
    assert grid.wan(0, 1).bandwidth != grid.wan(1, 0).bandwidth  # VU->Leiden 5, back 3.5


def test_teragrid_preset_shares_site_access_links():
    grid = get_grid("teragrid")
    assert (grid.nranks, grid.nclusters) == (64, 8)
    assert {c.site for c in grid.clusters} == {"SDSC", "ANL", "NCSA", "PSC"}
    assert grid.clusters[0].lan.bandwidth == pytest.approx(100e6 / 8)
    # C1 and C2 (both SDSC) reach ANL's C3 through the same SDSC uplink
    assert "SDSC:up" in grid.routes[(0, 2)].links
    assert "SDSC:up" in grid.routes[(1, 2)].links
    assert "SDSC:up" not in grid.routes[(0, 1)].links  # same site: no backbone


def test_transit_stub_is_seeded_and_in_seed003_ranges():
    a, b = get_grid("transit-stub:12,5"), get_grid("transit-stub:12,5")
    c = get_grid("transit-stub:12,6")
    assert a.fingerprint == b.fingerprint != c.fingerprint
    assert a.nranks == a.nclusters == 12
    for route in a.routes.values():
        assert 10e-3 <= route.plogp.L <= 1.0
        assert 10e3 / 8 * 0.999 <= route.plogp.bandwidth <= 10e6 / 8 * 1.001


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("nosuch:1", "unknown grid 'nosuch:1'"),
        ("magpie", "preset 'magpie' needs 2 integer argument"),
        ("magpie:8", "preset 'magpie:8' needs 2 integer argument"),
        ("magpie:8,x", "unknown grid 'magpie:8,x'"),
        ("lan:1,2", "preset 'lan:1,2' needs 1 integer argument"),
        ("magpie:0,4", "magpie needs C >= 1"),
        ("das2:0", "das2 needs N >= 1"),
        ("transit-stub:1,3", "transit-stub needs N >= 2"),
    ],
)
def test_bad_presets_raise_grid_errors(spec, message):
    with pytest.raises(GridError, match=message):
        get_grid(spec)


def test_grid_errors_are_gridcoll_errors():
    with pytest.raises(GridcollError):
        get_grid("nosuch")


LINK_GAPS = {
    "link-negative-g": ([{"name": "up", "g": [{"m": 0, "g": -1.0}]}], "link 'up'"),
    "link-non-monotone-g": (
        [{"name": "up", "g": [{"m": 0, "g": 1.0}, {"m": 10, "g": 0.5}]}],
        "link 'up'",
    ),
    "link-point-missing-g": ([{"name": "up", "g": [{"m": 0}]}], "link 'up'"),
    "link-not-an-object": ([5], "link 0"),
}


@pytest.mark.parametrize("case", sorted(LINK_GAPS))
def test_malformed_link_entries_name_the_link(case, tmp_path):
    links, message = LINK_GAPS[case]
    path = tmp_path / f"{case}.json"
    path.write_text(json.dumps(_edit(links=links)))
    with pytest.raises(GridError, match=message):
        load_grid(path)


def test_piecewise_batch_is_the_functions_bit_for_bit():
    from gridcoll.network.plogp import PiecewiseBatch, PiecewiseLinear

    fns = [
        PiecewiseLinear((0.0, 10.0, 100.0), (1.0, 2.0, 0.5)),
        PiecewiseLinear((0.0, 10.0, 100.0), (0.3, 7.0, 9.0)),
        PiecewiseLinear((5.0,), (4.0,)),
        PiecewiseLinear((1.0, 2.0), (3.0, 1.0)),  # clamped at 0 beyond m = 3.5
    ]
    batch = PiecewiseBatch(fns)
    for m in (0.0, 0.5, 1.0, 2.0, 3.0, 10.0, 55.5, 100.0, 1e6):
        assert batch(m).tolist() == [fn(m) for fn in fns]
