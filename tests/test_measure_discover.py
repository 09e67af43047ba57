"""Cluster discovery on matrices (no MPI): seed 001's pools, the gap method, grids."""

import math
import random

import pytest

from gridcoll.errors import GridError, ParameterError
from gridcoll.measure import (
    LinkMatrices,
    SyntheticTransport,
    discover,
    find_clusters,
    grid_from_matrices,
    pool_sets,
    pools,
    probe_link,
)
from gridcoll.measure.discover import _rounds
from gridcoll.network import PLogP, get_grid, load_grid, save_grid
from gridcoll.tune import Call, plan

TABLE1 = [  # seed 001, Table 1 (Mb/s); h8's row completes the h7,h8 column
    [100, 80, 80, 60, 60, 20, 10, 10],
    [80, 100, 80, 60, 60, 20, 10, 10],
    [80, 80, 100, 60, 60, 20, 10, 10],
    [60, 60, 60, 100, 80, 40, 50, 50],
    [60, 60, 60, 80, 100, 40, 50, 50],
    [20, 20, 20, 40, 40, 100, 30, 30],
    [10, 10, 10, 50, 50, 30, 100, 80],
    [10, 10, 10, 50, 50, 30, 80, 100],
]


def test_pools_reproduce_seed_001_table_1():
    assert pools(TABLE1, 20) == ((0, 1, 2, 3, 4, 5), (6, 7))
    assert pools(TABLE1, 70) == ((0, 1, 2), (3, 4), (5,), (6, 7))
    sets = pool_sets(TABLE1)
    assert set(sets) == {10, 25, 50, 75}
    assert sets[10] == ((0, 1, 2, 3, 4, 5, 6, 7),)
    # the literal "average" reading cannot separate h7, h8 at 20 %
    assert pools(TABLE1, 20, linkage="average") != pools(TABLE1, 20)


def model_matrices(spec, *, lan=None, noise=0.0, seed=0, perm=None):
    """What an ideal measurement of ``spec`` gives: L and 1/G per rank pair, with
    ``lan=(latency, bandwidth)`` replacing the LAN (the emulator's LAN is real memory)."""
    grid = get_grid(spec)
    n, rng = grid.nranks, random.Random(seed)
    perm = perm or list(range(n))
    lat = [[math.nan] * n for _ in range(n)]
    bw = [[math.nan] * n for _ in range(n)]
    for i in range(n):
        for j in range(n):
            if i == j:
                continue
            a, b = perm[i], perm[j]
            p = grid.plogp(a, b)
            same = grid.cluster_of[a] == grid.cluster_of[b]
            la, ba = lan if (lan and same) else (p.L, p.bandwidth)
            lat[i][j] = la * (1 + rng.uniform(0, noise))
            bw[i][j] = ba / (1 + rng.uniform(0, noise))
    return grid, LinkMatrices(
        tuple(f"r{i}" for i in range(n)),
        tuple(range(n)),
        tuple(map(tuple, lat)),
        tuple(map(tuple, bw)),
        tuple(tuple([0] * n) for _ in range(n)),
        0.0,
        False,
    )


@pytest.mark.parametrize("spec", ["das2:2", "magpie:4,2", "teragrid", "das2:3", "magpie:3,5"])
@pytest.mark.parametrize("lan", [None, (20e-6, 3e9)], ids=["paper-lan", "shared-memory-lan"])
def test_the_gap_finds_exactly_the_configured_clusters(spec, lan):
    grid, m = model_matrices(spec, lan=lan, noise=0.1, seed=5)
    found = find_clusters(m.latency, m.bandwidth)
    assert sorted(found.clusters) == sorted(tuple(c) for c in grid.members), found.reason


@pytest.mark.parametrize(
    ("spec", "expect"), [("das2:1", 4), ("magpie:4,1", 4), ("lan:5", 1), ("transit-stub:8,1", 8)]
)
def test_without_a_gap_all_wan_or_one_lan(spec, expect):
    _, m = model_matrices(spec)
    found = find_clusters(m.latency, m.bandwidth)
    assert len(found.clusters) == expect and found.metric == "none"


def test_ranks_of_a_cluster_need_not_be_contiguous():
    perm = [0, 4, 1, 5, 2, 6, 3, 7]  # rank i of the job is rank perm[i] of magpie:2,4
    _, m = model_matrices("magpie:2,4", perm=perm)
    found = find_clusters(m.latency, m.bandwidth)
    assert found.clusters == ((0, 2, 4, 6), (1, 3, 5, 7))
    built = grid_from_matrices(found, m)
    assert built.members == ((0, 2, 4, 6), (1, 3, 5, 7))
    assert pytest.approx(10e-3) == built.plogp(0, 1).L


def test_a_discovered_grid_is_a_grid_file_every_command_accepts(tmp_path):
    grid, m = model_matrices("das2:2")
    found = discover(m)
    assert found.members == grid.members
    assert pytest.approx(grid.plogp(0, 2).L) == found.plogp(0, 2).L  # VU -> Leiden
    assert found.plogp(0, 2).bandwidth == pytest.approx(grid.plogp(0, 2).bandwidth, rel=1e-3)
    save_grid(found, tmp_path / "found.json")
    again = load_grid(tmp_path / "found.json")
    assert plan(again, Call("bcast", 65536)).predicted_s > 0


def test_matrix_files_round_trip_and_bad_ones_are_named(tmp_path):
    _, m = model_matrices("magpie:2,2")
    m.save(tmp_path / "m.json")
    back = LinkMatrices.load(tmp_path / "m.json")
    assert back.names == m.names and back.bandwidth[0][2] == m.bandwidth[0][2]
    data = m.to_dict()
    data["latency_s"][0][1] = -1.0
    with pytest.raises(GridError, match=r"latency_s\[0\]\[1\] = -1.0 is negative"):
        LinkMatrices.from_dict(data)
    data = m.to_dict()
    data["bandwidth_Bps"] = data["bandwidth_Bps"][:2]
    with pytest.raises(GridError, match="must be 4 x 4"):
        LinkMatrices.from_dict(data)


def test_round_robin_covers_every_pair_once_with_disjoint_rounds():
    for n in (2, 3, 8, 9):
        rounds = _rounds(n)
        pairs = [p for r in rounds for p in r]
        assert sorted(pairs) == [(a, b) for a in range(n) for b in range(a + 1, n)]
        for r in rounds:
            ranks = [x for p in r for x in p]
            assert len(ranks) == len(set(ranks))


def test_probe_link_measures_latency_and_bandwidth():
    link = PLogP.linear(10e-3, 1e6, g0=8e-6)
    est = probe_link(SyntheticTransport(link))
    assert est.latency == pytest.approx(10e-3, rel=1e-3)
    assert est.bandwidth == pytest.approx(1e6, rel=1e-3)
    # 64 KiB take 66 ms >= 3 RTT(0); 256 KiB confirm the rate within SETTLED
    assert est.size == 256 * 1024
    fast = probe_link(SyntheticTransport(PLogP.linear(1e-3, 100e6)))
    assert fast.size == 1024 * 1024  # grown by 4x until the transfer is >= 3 RTT(0), settled
    one_way = probe_link(SyntheticTransport(link, PLogP.linear(30e-3, 1e6), shared_clock=True))
    assert one_way.one_way and one_way.latency == pytest.approx(10e-3 + 8e-6, rel=1e-3)


def test_probe_link_grows_until_the_rate_settles():
    """A shaper's first frames and TCP's window make a short transfer look fast: a
    64 KiB probe at 1.08 MB/s, longer ones at 1 MB/s. The probe grows until two sizes
    agree, and reports the sustained rate."""
    from types import SimpleNamespace

    class Shaped:
        def run(self, probe):
            rate = 1.08e6 if probe.m <= 65536 else 1e6
            rtt = 2e-4 + probe.m / rate
            return [SimpleNamespace(rtt=rtt, os=1e-5, owd=None)] * probe.reps

    est = probe_link(Shaped())
    assert est.size == 1024 * 1024
    assert est.bandwidth == pytest.approx(1e6, rel=1e-3)


def test_bad_input():
    with pytest.raises(ParameterError, match="square"):
        find_clusters([[0, 1], [1]])
    with pytest.raises(ParameterError, match="communicator or LinkMatrices"):
        discover(42)
    assert find_clusters([[0.0]]).clusters == ((0,),)
