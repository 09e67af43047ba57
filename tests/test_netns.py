"""The namespace network: a grid as real namespaces, veths, a router and htb shapers.

The plan (which shaper goes where, the commands, the MPMD launch line) is checked
everywhere; the network itself only where namespaces are permitted (root here): a
two-site network is made, a broadcast crosses it over MPICH's TCP path, the bytes are
seen on the shaped link, discovery finds its two clusters and its rate, and nothing is
left once it is down -- nor after a SIGTERM.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gridcoll.errors import GridError, LaunchError
from gridcoll.network import get_grid, grid_from_dict
from gridcoll.runtime import netns
from gridcoll.runtime.processes import mpiexec_command
from test_measure_mpi import gridcoll

REASON = netns.not_permitted()
needs_namespaces = pytest.mark.skipif(REASON is not None, reason=f"no namespaces: {REASON}")

LAN = {"latency": "20us", "bandwidth": "500MB/s", "overhead": "10us"}


def grid_data(links: dict[str, str] | None = None, routes: list[dict] | None = None) -> dict:
    """Two sites of two ranks: A -> B at 1 MB/s, B -> A at 0.5 MB/s (private links)."""
    data = {
        "format": "gridcoll-grid/1",
        "name": "two-sites",
        "clusters": [{"name": n, "ranks": 2, "lan": LAN} for n in ("A", "B")],
        "routes": routes
        or [
            {"from": "A", "to": "B", "plogp": {"latency": "1ms", "bandwidth": "1MB/s"}},
            {"from": "B", "to": "A", "plogp": {"latency": "1ms", "bandwidth": "0.5MB/s"}},
        ],
    }
    if links:
        data["links"] = [{"name": k, "bandwidth": v} for k, v in links.items()]
    return data


def sites_grid(names: str, links: dict[str, str], crossing) -> dict:
    """Clusters ``names``, every route crossing the links ``crossing(a, b)`` names."""
    routes = [
        {
            "from": a,
            "to": b,
            "plogp": {"latency": "1ms", "bandwidth": "10MB/s"},
            "links": crossing(a, b),
        }
        for a in names
        for b in names
        if a != b
    ]
    data = grid_data(links, routes)
    data["clusters"] = [{"name": n, "ranks": 1, "lan": LAN} for n in names]
    return data


def unique_name() -> str:
    return f"t{os.getpid() % 100000}{int(time.monotonic() * 1000) % 1000}"


# -- the plan --------------------------------------------------------------------------


def test_every_pair_link_is_a_class_on_its_source_at_its_rate():
    for spec in ("magpie:4,2", "das2:2"):
        grid = get_grid(spec)
        net = netns.plan(grid)
        links = {sh.link: sh for sh in net.shapers if sh.classid < netns.LEAF}
        assert set(links) == set(grid.links)
        for (a, b), route in grid.routes.items():
            (name,) = route.links
            sh = links[name]
            assert (sh.namespace, sh.device, sh.match) == (net.sites[a].namespace, "wan0", "dst")
            assert sh.peers == (b,)
            assert sh.ceil == sh.rate == round(grid.links[name].bandwidth * 8)
        leaves = [sh for sh in net.shapers if sh.classid >= netns.LEAF]
        assert len(leaves) == len(grid.routes)


def test_uplinks_hold_their_pair_links_and_downlinks_sit_on_the_router():
    def crossing(a, b):
        return [f"{a}:up", f"{a}->{b}", f"{b}:down"]

    links = {f"{n}:up": "4MB/s" for n in "ABC"} | {f"{n}:down": "3MB/s" for n in "ABC"}
    links |= {f"{a}->{b}": "1MB/s" for a in "ABC" for b in "ABC" if a != b}
    grid = grid_from_dict(sites_grid("ABC", links, crossing))
    net = netns.plan(grid)
    by_link = {sh.link: sh for sh in net.shapers if sh.classid < netns.LEAF}
    up, pair, down = by_link["A:up"], by_link["A->B"], by_link["B:down"]
    assert (up.namespace, up.parent, up.peers, up.ceil) == ("gridcoll-0", 0, (1, 2), 32_000_000)
    assert (pair.namespace, pair.parent, pair.peers) == ("gridcoll-0", up.classid, (1,))
    assert (down.namespace, down.device, down.match) == (net.sites[1].router, "c1", "src")
    assert down.peers == (0, 2) and down.ceil == 24_000_000


def test_site_links_sit_on_the_site_routers_and_the_core():
    grid = get_grid("teragrid")
    net = netns.plan(grid)
    assert len(net.routers) == 4 and net.sites[0].router == net.sites[1].router
    by_link = {sh.link: sh for sh in net.shapers if sh.classid < netns.LEAF}
    sdsc_up, anl_down = by_link["SDSC:up"], by_link["ANL:down"]
    assert (sdsc_up.namespace, sdsc_up.device, sdsc_up.match) == ("gridcoll-s0", "uplink", "dst")
    assert sdsc_up.peers == (2, 3, 4, 5, 6, 7)
    assert (anl_down.namespace, anl_down.device, anl_down.match) == ("gridcoll-wan", "s1", "src")
    assert anl_down.peers == (0, 1, 4, 5, 6, 7)
    c3_down = by_link["C3:down"]
    assert (c3_down.namespace, c3_down.device) == ("gridcoll-s1", "c2")
    cmds = [" ".join(c) for c in netns.commands(net)]
    assert "ip -n gridcoll-wan route add 10.213.2.0/24 via 10.214.1.2" in cmds


def test_a_link_shared_by_unrelated_routes_or_links_that_overlap_are_refused():
    backbone = sites_grid("ABCD", {"core": "1MB/s"}, lambda a, b: ["core"])
    with pytest.raises(GridError, match="'core' carries routes of several sources"):
        netns.plan(grid_from_dict(backbone))

    def overlapping(a, b):
        if a != "A":
            return []
        return {"B": ["x"], "C": ["x", "y"], "D": ["y"]}[b]

    overlap = sites_grid("ABCD", {"x": "1MB/s", "y": "1MB/s"}, overlapping)
    with pytest.raises(GridError, match="neither contains the other"):
        netns.plan(grid_from_dict(overlap))


def test_the_commands_disable_offload_and_bound_each_queue():
    net = netns.plan(grid_from_dict(grid_data()))
    cmds = [" ".join(c) for c in netns.commands(net)]
    offload = " ".join(netns.NO_OFFLOAD)
    for ns, dev in (("gridcoll-0", "wan0"), ("gridcoll-1", "wan0"), (net.sites[0].router, "c0")):
        assert f"ip -n {ns} link set dev {dev} {offload}" in cmds
    # 1 MB/s * 15 ms / 1514 B -> 10 frames; 0.5 MB/s -> 5
    assert any("gridcoll-0 qdisc add dev wan0 parent 1:1001 pfifo limit 10" in c for c in cmds)
    assert any("gridcoll-1 qdisc add dev wan0 parent 1:1000 pfifo limit 5" in c for c in cmds)
    assert any("match ip dst 10.213.1.0/24 flowid 1:1001" in c for c in cmds)


def test_a_launch_starts_each_run_of_ranks_in_its_site():
    grid = grid_from_dict(dict(grid_data(), placement=["A", "B", "B", "A"]))
    net = netns.plan(grid)
    cmd = mpiexec_command(4, ["prog"], mpiexec="mpiexec", network=net)
    sections = " ".join(cmd[1:]).split(" : ")
    assert len(sections) == 3
    for section, (ns, host, count) in zip(
        sections,
        (("gridcoll-0", "A", 1), ("gridcoll-1", "B", 2), ("gridcoll-0", "A", 1)),
        strict=True,
    ):
        words = section.split()
        assert words[:2] == ["-n", str(count)]
        assert f"ip netns exec {ns} unshare --uts" in section and words[-1] == "prog"
        assert host in words and "UCX_NET_DEVICES=wan0" in words
    two = net.for_ranks([3, 1])
    assert [two.site_of(r).host for r in range(2)] == ["A", "B"]
    with pytest.raises(LaunchError, match="has 2 ranks; cannot start 4"):
        mpiexec_command(4, ["prog"], mpiexec="mpiexec", network=two)


def test_names_and_missing_networks_are_one_line_errors(tmp_path):
    with pytest.raises(LaunchError, match="lower-case letters"):
        netns.plan(get_grid("magpie:2,1"), name="Bad Name")
    path = tmp_path / "g.json"
    path.write_text(json.dumps(grid_data()))
    out = gridcoll("run", "--grid", str(path), "--netns", "nosuch", "--size", "1KiB")
    assert out.returncode != 0 and "Traceback" not in out.stderr
    assert "no namespace network 'nosuch' is up" in out.stderr


# -- the network, for real -------------------------------------------------------------


def left_behind(name: str) -> list[str]:
    listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=False)
    spaces = [ln.split()[0] for ln in listed.stdout.splitlines() if ln.startswith(name + "-")]
    record = netns.STATE_DIR / f"{name}.json"
    return spaces + ([str(record)] if record.exists() else [])


def htb_class(namespace: str, device: str, classid: int) -> tuple[str, int]:
    """The ``tc`` line of class ``1:classid`` and the bytes it has sent."""
    out = subprocess.run(
        ["tc", "-n", namespace, "-s", "class", "show", "dev", device],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split("\n")
    for i, line in enumerate(out):
        if line.startswith(f"class htb 1:{classid} "):
            return line, int(out[i + 1].split()[1])
    raise AssertionError(f"no class 1:{classid} on {namespace}/{device}")


@needs_namespaces
@pytest.mark.slow
@pytest.mark.mpi
def test_a_broadcast_crosses_the_shaped_link_over_tcp_and_nothing_is_left(tmp_path):
    grid = grid_from_dict(grid_data())
    path = tmp_path / "g.json"
    path.write_text(json.dumps(grid_data()))
    with netns.network(grid, name=unique_name()) as net:
        assert left_behind(net.name)  # it is up
        before = htb_class(f"{net.name}-0", "wan0", netns.LEAF + 1)[1]
        out = gridcoll(
            "run",
            "--grid",
            str(path),
            "--netns",
            net.name,
            "--size",
            "256KiB",
            "--root",
            "0",
            "--repeat",
            "2",
            "--json",
        )
        assert out.returncode == 0, out.stderr[-2000:]
        result = json.loads(out.stdout)
        assert result["verified"] and result["netns"] == net.name
        assert result["emulated"] is False
        crossed = htb_class(f"{net.name}-0", "wan0", netns.LEAF + 1)[1] - before
        assert crossed >= 2 * 256 * 1024  # both repetitions, over A's shaped link to B
        # no emulator holds the data: 256 KiB at 1 MB/s cannot take less than the wire
        assert min(result["measured_all_s"]) >= 256 * 1024 / 1e6
    assert left_behind(net.name) == []


@needs_namespaces
@pytest.mark.slow
@pytest.mark.mpi
def test_discovery_on_the_namespace_network_finds_the_sites_and_their_rates(tmp_path):
    grid = grid_from_dict(grid_data())
    with netns.network(grid, name=unique_name()) as net:
        path = tmp_path / "g.json"
        path.write_text(json.dumps(grid_data()))
        out = gridcoll(
            "discover",
            "--grid",
            str(path),
            "--netns",
            net.name,
            "--out",
            str(tmp_path / "found.json"),
            "--json",
        )
        assert out.returncode == 0, out.stderr[-2000:]
        assert json.loads(out.stdout)["matches_grid"] is True
        from gridcoll.network.gridfile import load_grid

        found = load_grid(tmp_path / "found.json")
        for (a, b), shaped in (((0, 1), 1e6), ((1, 0), 0.5e6)):
            g = found.routes[(a, b)].plogp.g
            rate = 2**20 / (g(2**20) - g(0))
            assert rate == pytest.approx(shaped * netns.FRAME_PAYLOAD, rel=0.10)


@needs_namespaces
def test_the_command_line_brings_it_up_lists_it_and_takes_it_down(tmp_path):
    name = unique_name()
    path = tmp_path / "g.json"
    path.write_text(json.dumps(grid_data()))
    try:
        up = gridcoll(
            "netns",
            "up",
            str(path),
            "--name",
            name,
            "--json",
            "--grid-out",
            str(tmp_path / "hosts.json"),
        )
        assert up.returncode == 0, up.stderr
        described = json.loads(up.stdout)
        assert [s["host"] for s in described["sites"]] == ["A", "B"]
        assert {s["link"] for s in described["shapers"]} == {"A->B", "B->A"}
        hosts = json.loads((tmp_path / "hosts.json").read_text())
        assert [c["hosts"] for c in hosts["clusters"]] == [["A"], ["B"]]
        status = json.loads(gridcoll("netns", "status", "--json").stdout)
        assert name in [n["name"] for n in status["networks"]]
        again = gridcoll("netns", "up", str(path), "--name", name)
        assert again.returncode != 0 and "already up" in again.stderr
        assert "Traceback" not in again.stderr
        down = gridcoll("netns", "down", name, "--json")
        assert sorted(json.loads(down.stdout)["removed"]) == sorted(
            [f"{name}-0", f"{name}-1", f"{name}-s0", f"{name}-s1", f"{name}-wan"]
        )
    finally:
        netns.down(name)
    assert left_behind(name) == []


@needs_namespaces
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_network_that_lives_for_a_command_is_gone_after_a_signal(tmp_path, signum):
    name = unique_name()
    path = tmp_path / "g.json"
    path.write_text(json.dumps(grid_data()))
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "gridcoll",
            "netns",
            "up",
            str(path),
            "--name",
            name,
            "--run",
            "sleep 120",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        while not left_behind(name) or not (netns.STATE_DIR / f"{name}.json").exists():
            assert time.monotonic() < deadline and proc.poll() is None
            time.sleep(0.1)
        proc.send_signal(signum)
        assert proc.wait(timeout=60) == 128 + signum
        assert "Traceback" not in proc.stderr.read()
    finally:
        proc.kill()
        netns.down(name)
    assert left_behind(name) == []


def test_the_record_reads_back_to_the_same_plan():
    net = netns.plan(get_grid("das2:2"), name="rt")
    again = netns.Network.from_json(json.loads(json.dumps(net.to_json())))
    assert again.shapers == net.shapers and again.sites == net.sites
    assert again.ranks == net.ranks


def test_hosts_grid_places_by_the_sites_host_names(tmp_path):
    net = netns.plan(get_grid("das2:2"))
    hosts = net.host_grid
    assert [c.hosts for c in hosts.clusters] == [(s.host,) for s in net.sites]
    from gridcoll.network.grid import place_by_host

    names = [net.site_of(r).host for r in range(net.grid.nranks)]
    assert place_by_host(hosts, names).cluster_of == net.grid.cluster_of


@pytest.mark.skipif(REASON is None, reason="namespaces are permitted here")
def test_where_namespaces_are_not_permitted_up_says_why():
    with pytest.raises(LaunchError):
        netns.up(netns.plan(get_grid("magpie:2,1"), name=unique_name()))


def test_the_help_says_what_is_not_emulated():
    out = gridcoll("netns", "--help", timeout=60)
    assert out.returncode == 0 and "latency is not emulated" in " ".join(out.stdout.split())


# -- load on the real links ------------------------------------------------------------


def test_a_load_slows_its_link_and_every_guarantee_stays_within_its_parent():
    from gridcoll.network.load import Load, LoadTrace

    net = netns.plan(get_grid("magpie:4,2"))
    trace = LoadTrace((Load("c0->c1", 0.5, 1.0, 3.0), Load("c0->c1", 0.25, 2.0, 4.0)))
    steps = netns.load_steps(net, trace)
    assert [t for t, _ in steps] == [1.0, 2.0, 3.0, 4.0]
    nominal = {(c.namespace, c.classid): c for c in net.shapers}
    for (_, classes), f in zip(steps, (0.5, 0.75, 0.25, 0.0), strict=True):
        for c in classes:
            full = nominal[(c.namespace, c.classid)].ceil
            share = f if c.link == "c0->c1" else 0.0
            assert c.ceil == round(full * (1 - share))
    with pytest.raises(GridError, match="lacks: nowhere"):
        netns.load_steps(net, LoadTrace((Load("nowhere", 0.5, 0.0, 1.0),)))
    # teragrid: a cluster's uplink over seven leaves, a site's over six
    tera = netns.plan(get_grid("teragrid"))
    for classes in (tera.shapers, netns.loaded(tera.shapers, {"C1:up": 0.9, "SDSC:up": 0.5})):
        by_id = {(c.namespace, c.device, c.classid): c for c in classes}
        for c in classes:
            assert 0 < c.rate <= c.ceil
            if c.parent:
                siblings = [
                    x for x in classes
                    if (x.namespace, x.device, x.parent) == (c.namespace, c.device, c.parent)
                ]  # fmt: skip
                assert (
                    sum(x.rate for x in siblings) <= by_id[(c.namespace, c.device, c.parent)].rate
                )


@needs_namespaces
@pytest.mark.slow
@pytest.mark.mpi
def test_a_load_trace_slows_the_real_link_for_the_run_and_no_longer(tmp_path):
    path = tmp_path / "g.json"
    path.write_text(json.dumps(grid_data()))
    trace = tmp_path / "load.json"
    trace.write_text(json.dumps({
        "format": "gridcoll-load/1",
        "loads": [{"link": "A->B", "fraction": 0.75, "from": 0, "to": 3600}],
    }))  # fmt: skip
    with netns.network(grid_from_dict(grid_data()), name=unique_name()) as net:
        ns = f"{net.name}-0"
        assert "rate 8Mbit ceil 8Mbit" in htb_class(ns, "wan0", netns.LEAF + 1)[0]
        out = gridcoll("run", "--grid", str(path), "--netns", net.name, "--size", "256KiB",
                       "--root", "0", "--load", str(trace), "--json")  # fmt: skip
        assert out.returncode == 0, out.stderr[-2000:]
        result = json.loads(out.stdout)
        assert result["verified"]
        # a quarter of 1 MB/s is left: 256 KiB needs at least 1.05 s on the wire
        assert min(result["measured_all_s"]) >= 256 * 1024 / 0.25e6
        assert "rate 8Mbit ceil 8Mbit" in htb_class(ns, "wan0", netns.LEAF + 1)[0]


@needs_namespaces
@pytest.mark.slow
@pytest.mark.mpi
def test_a_grid_placing_by_host_finds_each_rank_in_its_namespace(tmp_path):
    """Ranks 0 and 3 at site A, 1 and 2 at B; the grid file says only the host names,
    which the ranks read from their UTS namespaces (no faked names)."""
    grid = grid_from_dict(dict(grid_data(), placement=["A", "B", "B", "A"]))
    with netns.network(grid, name=unique_name()) as net:
        hosts = tmp_path / "hosts.json"
        from gridcoll.network.gridfile import save_grid

        save_grid(net.host_grid, hosts)
        script = Path(__file__).parent / "mpi" / "hosts.py"
        out = gridcoll("mpirun", "--grid", str(hosts), "--netns", net.name, "--",
                       sys.executable, str(script), "-", "collectives", timeout=600)  # fmt: skip
        assert out.returncode == 0, out.stderr[-2000:]
        reports = json.loads(out.stdout.strip().splitlines()[-1])["ranks"]
    for report in reports:
        assert report["wrong"] == []
        assert report["hosts"] == ["A", "B", "B", "A"]
        assert report["cluster_of"] == [0, 1, 1, 0]
        assert report["doorbells"] is False


def test_the_scenario_runs_on_a_namespace_network_only_when_measured():
    out = gridcoll("scenario", "--netns", "--app", "seed001:2", timeout=120)
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert "--netns runs the measured scenario: add --measure" in out.stderr
