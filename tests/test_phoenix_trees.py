"""Properties I and II of seed 004's latency-aware trees (sec. IV-B), as the protocol
core builds them with the paper's 10 extra probes on DAS-2-like grids, and the
bandwidth-aware rule's effect. Probe results come from the grid's P-LogP figures
with 5% seeded noise (:func:`gridcoll.phoenix.static.grid_measure`)."""

from __future__ import annotations

import math
from functools import cache

import pytest

from gridcoll.network import get_grid
from gridcoll.phoenix.static import StableTrees, stable_trees


@cache
def _trees(name: str, seed: int) -> StableTrees:
    return stable_trees(get_grid(name), seed=seed, extra_probes=10)


def _shape(cluster_of, parents: dict[int, int], root: int) -> dict[str, object]:
    """WAN edges, WAN hops on each path, consecutive LAN hops, children counts."""
    wan_hops, lan_run = {root: 0}, {root: 0}

    def walk(v: int) -> None:
        if v in wan_hops:
            return
        p = parents[v]
        walk(p)
        remote = cluster_of[v] != cluster_of[p]
        wan_hops[v] = wan_hops[p] + remote
        lan_run[v] = 0 if remote else lan_run[p] + 1

    for v in parents:
        walk(v)
    children: dict[int, int] = {}
    for p in parents.values():
        children[p] = children.get(p, 0) + 1
    return {
        "wan": sum(cluster_of[v] != cluster_of[p] for v, p in parents.items()),
        "chained": sum(h > 1 for h in wan_hops.values()),
        "lan_depth": max(lan_run.values()),
        "children": children,
    }


CASES = [("das2:4", s) for s in range(4)] + [("das2:9", 0), ("das2:9", 1)]


@pytest.mark.parametrize(("name", "seed"), CASES)
def test_every_tree_spans_every_process(name: str, seed: int) -> None:
    grid, trees = get_grid(name), _trees(name, seed)
    for kind in (trees.latency, trees.bandwidth):
        assert sorted(kind) == list(range(grid.nranks))
        for root, parents in kind.items():
            assert set(parents) == set(range(grid.nranks)) - {root}
            _shape(grid.cluster_of, parents, root)  # no cycle: the walk terminates


@pytest.mark.parametrize(("name", "seed"), CASES)
def test_property_one_no_chained_wide_area_latencies(name: str, seed: int) -> None:
    grid, trees = get_grid(name), _trees(name, seed)
    shapes = [_shape(grid.cluster_of, p, r) for r, p in trees.latency.items()]
    need = grid.nclusters - 1
    wan = [s["wan"] for s in shapes]
    # One WAN edge into each LAN would do; the static imitation had 22-37 of them.
    assert min(wan) == need and max(wan) <= need + 2
    assert sum(wan) / len(wan) <= need + 0.5
    # Paths that cross two WAN edges: at most 1% of all (root, process) pairs.
    chained = sum(s["chained"] for s in shapes)
    assert chained <= 0.01 * grid.nranks * (grid.nranks - 1)


@pytest.mark.parametrize(("name", "seed"), CASES)
def test_property_two_sensible_depth_inside_a_lan(name: str, seed: int) -> None:
    grid, trees = get_grid(name), _trees(name, seed)
    per_lan = min(len(m) for m in grid.members)
    deepest = 2 * math.ceil(math.log2(per_lan)) + 1
    depths = []
    for root, parents in trees.latency.items():
        shape = _shape(grid.cluster_of, parents, root)
        depths.append(shape["lan_depth"])
        assert 1 <= shape["lan_depth"] <= deepest  # neither a chain ...
        assert max(shape["children"].values()) < grid.nranks - 1  # ... nor one star
    if per_lan >= 8:
        assert max(depths) >= 2  # the LAN part is a tree, not only stars


def test_bandwidth_trees_use_few_wide_area_edges() -> None:
    grid, trees = get_grid("das2:9"), _trees("das2:9", 0)
    wan = [_shape(grid.cluster_of, p, r)["wan"] for r, p in trees.bandwidth.items()]
    # est = min(est_cand, bw / n_children), plus the nearer-class preference, keeps
    # WAN branches few: the static imitation had 48-70 on das2:34.
    assert min(wan) == grid.nclusters - 1
    assert sum(wan) / len(wan) <= 2 * (grid.nclusters - 1)


def test_probing_stops_and_is_seeded() -> None:
    a, b = _trees("das2:4", 0), stable_trees(get_grid("das2:4"), seed=0)
    assert a.latency == b.latency and a.bandwidth == b.bandwidth
    grid = get_grid("das2:4")
    # parent-finding plus 10 extra probes each, plus up to 30 while a gateway is chained
    assert grid.nranks * 10 <= a.probes <= grid.nranks * 80


def test_probing_that_does_not_settle_is_refused_in_one_line(monkeypatch):
    from gridcoll.errors import Unfeasible
    from gridcoll.phoenix import static
    from gridcoll.tune import Call, PlanOptions, plan

    grid = get_grid("das2:2")
    monkeypatch.setattr(static, "QUIET_STEPS_PER_PROCESS", 5)
    with pytest.raises(Unfeasible, match="did not settle within 40 steps"):
        static.stable_trees(grid, roots=frozenset({0}), remote_probes=True)
    with pytest.raises(Unfeasible, match="did not settle"):
        plan(grid, Call("bcast", 65536, 0), PlanOptions(algo="phoenix-bandwidth"))
