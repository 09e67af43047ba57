"""Placement by host: the grid file's ``hosts``, the pure resolution
``place_by_host``, and the runtime's host names (``GRIDCOLL_FAKE_HOSTNAME``), without
MPI. The MPI side is ``tests/test_runtime_mpi.py::test_several_hosts_*``."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gridcoll.errors import GridError, ParameterError
from gridcoll.network import (
    Grid,
    grid_from_dict,
    grid_to_dict,
    load_grid,
    place_by_host,
    placement_summary,
    save_grid,
)
from gridcoll.runtime.hostnames import (
    NAME_BYTES,
    fake_hostname,
    gather_hosts,
    one_host,
    one_host_or_raise,
)

LAN = {"latency": "20us", "bandwidth": "50MB/s", "overhead": "4us"}
WAN = {"latency": "10ms", "bandwidth": "1MB/s", "overhead": "20us"}


def hosts_grid(hosts: dict[str, list[str]], ranks: dict[str, int]) -> dict:
    """A grid file object whose clusters name ``hosts``."""
    names = list(hosts)
    return {
        "format": "gridcoll-grid/1",
        "name": "by-host",
        "clusters": [{"name": n, "ranks": ranks[n], "lan": LAN, "hosts": hosts[n]} for n in names],
        "routes": [{"from": a, "to": b, "plogp": WAN} for a in names for b in names if a != b],
    }


TWO_SITES = hosts_grid(
    {"ams": ["node-a*", "login1"], "par": ["par[0-9][0-9]"]}, {"ams": 3, "par": 2}
)


def test_hosts_place_the_ranks_where_they_run():
    grid = grid_from_dict(TWO_SITES)
    assert grid.clusters[0].hosts == ("node-a*", "login1")
    assert grid.placement is None and grid.cluster_of == (0, 0, 0, 1, 1)  # by number
    names = ["par01", "node-a7", "LOGIN1", "par02", "Node-A8"]  # case-insensitive
    placed = place_by_host(grid, names)
    assert placed.placement == (1, 0, 0, 1, 0)
    assert placed.members == ((1, 2, 4), (0, 3))
    assert all(not c.hosts for c in placed.clusters)  # the patterns did their work
    assert placed.fingerprint != grid.fingerprint
    assert placement_summary(placed, names).splitlines() == [
        "cluster 'ams': ranks 1-2, 4 on 'node-a7', 'LOGIN1', 'Node-A8'",
        "cluster 'par': ranks 0, 3 on 'par01', 'par02'",
    ]


def test_a_placed_grid_saves_its_placement_and_an_unplaced_one_its_hosts(tmp_path):
    grid = grid_from_dict(TWO_SITES)
    assert grid_to_dict(grid)["clusters"][1]["hosts"] == ["par[0-9][0-9]"]
    save_grid(grid, tmp_path / "g.json")
    assert load_grid(tmp_path / "g.json").fingerprint == grid.fingerprint
    placed = place_by_host(grid, ["node-a1", "par11", "node-a2", "login1", "par12"])
    data = grid_to_dict(placed)
    assert data["placement"] == ["ams", "par", "ams", "ams", "par"]
    assert all("hosts" not in c for c in data["clusters"])
    assert grid_from_dict(json.loads(json.dumps(data))).fingerprint == placed.fingerprint


@pytest.mark.parametrize(
    ("names", "message"),
    [
        (["node-a1"] * 4, "4 host names for grid 'by-host' of 5 ranks"),
        (
            ["node-a1", "node-a1", "node-a1", "par01", "gpu7"],
            "rank 4 runs on host 'gpu7', which matches no cluster's 'hosts'",
        ),
        (
            ["node-a1", "node-a2", "par01", "par02", "par03"],
            "cluster 'ams' declares 3 ranks but 2 run on hosts matching its patterns "
            "('node-a1', 'node-a2')",
        ),
        (
            ["node-a1"] * 5,
            "cluster 'ams' declares 3 ranks but 5 run",
        ),
        (
            ["node-a1", "node-a1", "node-a1", "x\x1b[31m", "par01"],
            "rank 3 runs on host 'x\\x1b[31m'",  # escaped, never printed raw
        ),
    ],
)
def test_host_placement_errors_are_one_line(names, message):
    with pytest.raises(GridError) as info:
        place_by_host(grid_from_dict(TWO_SITES), names)
    text = str(info.value)
    assert message in text and "\n" not in text and "\x1b" not in text


def test_a_host_two_globs_match_is_refused_when_found():
    grid = grid_from_dict(hosts_grid({"A": ["node-*"], "B": ["*-b*"]}, {"A": 1, "B": 1}))
    with pytest.raises(GridError, match=r"host 'node-b1' matches cluster 'A' .* and cluster 'B'"):
        place_by_host(grid, ["node-a1", "node-b1"])


def test_a_grid_without_hosts_is_not_placed_by_host():
    plain = {"name": "A", "ranks": 2, "lan": LAN}
    grid = grid_from_dict({**hosts_grid({"A": ["a"]}, {"A": 2}), "clusters": [plain]})
    with pytest.raises(GridError, match="does not place its ranks by host"):
        place_by_host(grid, ["a", "a"])


def _edit(cluster: int, **entry) -> dict:
    data = json.loads(json.dumps(TWO_SITES))
    data["clusters"][cluster].update(entry)
    return data


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (_edit(0, hosts="node-a*"), "cluster 'ams': 'hosts' must be a non-empty list"),
        (_edit(0, hosts=[]), "cluster 'ams': 'hosts' must be a non-empty list"),
        (_edit(0, hosts=[""]), "cluster 'ams': 'hosts'[0] must be a non-empty printable"),
        (_edit(0, hosts=[7]), "cluster 'ams': 'hosts'[0] must be a non-empty printable"),
        (_edit(0, hosts=[None]), "'hosts'[0] must be a non-empty printable"),
        (_edit(1, hosts=["par 1"]), "cluster 'par': 'hosts'[0] 'par 1' holds a space"),
        (_edit(1, hosts=["x" * 201]), "'hosts'[0] must be a non-empty printable"),
        (_edit(1, hosts=["p\x07"]), "'hosts'[0] must be a non-empty printable"),
        (
            _edit(1, hosts=["Login1"]),
            "host pattern 'Login1' is given twice (clusters 'ams' and 'par')",
        ),
        (
            _edit(1, hosts=["node-a3"]),
            "host 'node-a3' of cluster 'par' also matches pattern 'node-a*' of cluster 'ams'",
        ),
        (
            {**TWO_SITES, "placement": ["ams", "ams", "ams", "par", "par"]},
            "by host ('hosts' of every cluster) or by number ('placement'), not both",
        ),
        (
            {
                **TWO_SITES,
                "clusters": [
                    TWO_SITES["clusters"][0],
                    {k: v for k, v in TWO_SITES["clusters"][1].items() if k != "hosts"},
                ],
            },
            "cluster 'par' names no 'hosts' while others do",
        ),
        (
            _edit(0, hosts=[f"n{i}" for i in range(1025)]),
            "more than 1024 host patterns",
        ),
    ],
)
def test_bad_hosts_are_refused_with_one_line(data, message):
    with pytest.raises(GridError) as info:
        grid_from_dict(data)
    assert message in str(info.value) and "\n" not in str(info.value)


# -- a property: hosts dealt to clusters at random come back where they were dealt ----


@settings(max_examples=150, deadline=None)
@given(
    st.lists(st.integers(0, 3), min_size=1, max_size=40),
    st.lists(st.integers(0, 5), min_size=1, max_size=40),
    st.booleans(),
)
def test_place_by_host_finds_every_rank_where_its_host_was_dealt(owner, ranks_host, glob):
    """Hosts ``h0..hK`` dealt to up to 4 clusters (by literal name, or by one glob per
    host); ranks dealt to hosts. Every cluster that got ranks is in the grid, and
    ``place_by_host`` puts every rank in its host's cluster; a host of no cluster is a
    one-line error naming the rank."""
    nhosts = len(owner)
    names = [f"h{k % nhosts}x" for k in ranks_host]
    clusters = sorted({owner[int(n[1:-1])] for n in names})
    hosts = {
        f"C{c}": [f"h{k}{'*' if glob else 'x'}" for k in range(nhosts) if owner[k] == c]
        for c in clusters
    }
    counts = {f"C{c}": sum(owner[int(n[1:-1])] == c for n in names) for c in clusters}
    grid = grid_from_dict(hosts_grid(hosts, counts))
    placed = place_by_host(grid, names)
    index = {c: i for i, c in enumerate(clusters)}
    assert placed.cluster_of == tuple(index[owner[int(n[1:-1])]] for n in names)
    with pytest.raises(GridError, match=r"rank 0 runs on host 'zz'") as info:
        place_by_host(grid, ["zz", *names[1:]])
    assert "\n" not in str(info.value)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.text(min_size=0, max_size=12), min_size=1, max_size=6))
def test_any_hosts_list_loads_or_says_why(patterns):
    data = hosts_grid({"A": patterns, "B": ["b-only"]}, {"A": 1, "B": 1})
    try:
        grid = grid_from_dict(data)
    except GridError as err:
        assert "\n" not in str(err)
        return
    assert isinstance(grid, Grid) and grid.clusters[0].hosts == tuple(patterns)


# -- the runtime's host names ------------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "rank", "name"),
    [
        ("host-{rank//2}", 0, "host-0"),
        ("host-{rank//2}", 5, "host-2"),
        ("n{rank}", 3, "n3"),
        ("a, b ,c", 1, "b"),
        ("solo", 0, "solo"),
    ],
)
def test_fake_hostnames(spec, rank, name):
    assert fake_hostname(spec, rank) == name


@pytest.mark.parametrize(
    ("spec", "rank", "message"),
    [
        ("host-{size}", 0, "the only fields are {rank} and {rank//K}"),
        ("host-{rank//0}", 0, "the only fields are"),
        ("a,b", 2, "names 2 hosts; rank 2 has none"),
        ("a,,b", 1, "gives rank 1 the host name ''"),
    ],
)
def test_bad_fake_hostnames(spec, rank, message):
    with pytest.raises(ParameterError, match=message.replace("{", r"\{").replace("}", r"\}")):
        fake_hostname(spec, rank)


def test_one_host_or_raise_names_the_hosts():
    assert one_host(["a", "a"]) and one_host([]) and not one_host(["a", "b"])
    one_host_or_raise(["a", "a"], "the WAN emulation")
    with pytest.raises(GridError) as info:
        one_host_or_raise(["a", "b", "a", "c"], "the WAN emulation")
    text = str(info.value)
    assert text.startswith("the WAN emulation runs on one machine")
    assert "3 hosts: 'a', 'b', 'c'" in text and "GRIDCOLL_EMULATE=0" in text


class _Request:
    pass


class _Comm:
    """A stand-in communicator: ``Iallgather`` copies the other ranks' rows in."""

    def __init__(self, others: list[str], rank: int):
        self.others, self.rank = others, rank

    def Get_size(self) -> int:
        return len(self.others)

    def Iallgather(self, send, recv):
        for r, name in enumerate(self.others):
            raw = name.encode()[:NAME_BYTES]
            recv[r] = 0
            recv[r, : len(raw)] = np.frombuffer(raw, dtype=np.uint8)
        recv[self.rank] = send
        return _Request()


def test_gather_hosts_returns_every_rank_name_in_order():
    waited = []
    comm = _Comm(["n0", "", "n2-\u00e9", "x" * 300], rank=1)
    names = gather_hosts(comm, lambda req, timeout, what: waited.append(what), 5.0, "mine")
    assert names == ("n0", "mine", "n2-\u00e9", "x" * NAME_BYTES)
    assert waited == ["gathering the ranks' host names"]


def test_the_documented_two_site_example_places_by_host():
    import re
    from pathlib import Path

    doc = (Path(__file__).resolve().parents[1] / "docs" / "grid-format.md").read_text()
    section = doc.split("## Placement by host", 1)[1]
    data = json.loads(re.search(r"```json\n(.*?)```", section, re.S).group(1))
    grid = grid_from_dict(data)
    names = ["node-a1"] * 2 + ["par01"] * 2 + ["node-a2"] * 2 + ["par02"] * 2 + ["login1"] * 2
    placed = place_by_host(grid, names)
    assert placed.members == ((0, 1, 4, 5, 8, 9), (2, 3, 6, 7))
    assert "GRIDCOLL_FAKE_HOSTNAME" in section and "MAX_HOST_PATTERNS" in doc


def test_a_pattern_twice_in_one_cluster_is_named_once():
    with pytest.raises(GridError, match=r"host pattern 'N\*' is given twice in cluster 'A'$"):
        grid_from_dict(hosts_grid({"A": ["n*", "N*"], "B": ["b"]}, {"A": 1, "B": 1}))
