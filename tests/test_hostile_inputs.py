"""Hostile inputs: every bad grid file or command-line value is one clear
error (exit status 2, never a traceback, never a hang), raised before any work.

The fixed cases are the ones a hostile user found; the fuzz tests mutate a valid grid
file at random places with values at the edges (0, negative, NaN, inf, huge, tiny,
booleans, wrong types) and throw random values at the command line's arguments.
"""

from __future__ import annotations

import contextlib
import copy
import json
import math
import os
import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gridcoll.cli.main import EXIT_ERROR, main
from gridcoll.errors import GridcollError, GridError
from gridcoll.limits import MAX_JSON_DEPTH, MAX_RANKS
from gridcoll.network import get_grid, grid_from_dict, load_grid, place_by_host
from gridcoll.tune import Call, PlanOptions, plan

VALID = {
    "format": "gridcoll-grid/1",
    "name": "two-sites",
    "clusters": [
        {"name": "A", "ranks": 3, "lan": {"latency": "20us", "bandwidth": "50MB/s"}},
        {"name": "B", "ranks": 2, "lan": {"latency": "20us", "bandwidth": "50MB/s"}},
    ],
    "links": [{"name": "up", "bandwidth": "2MB/s"}],
    "routes": [
        {
            "from": "A",
            "to": "B",
            "plogp": {"latency": "10ms", "bandwidth": "1MB/s", "overhead": "5us"},
            "links": ["up"],
        },
        {
            "from": "B",
            "to": "A",
            "plogp": {
                "L": 0.012,
                "points": [
                    {"m": 0, "os": 1e-6, "or": 1e-6, "g": 2e-6},
                    {"m": 65536, "os": 2e-6, "or": 2e-6, "g": 0.03},
                ],
            },
        },
    ],
    "placement": ["A", "B", "A", "B", "A"],
}


def _with(path: tuple, value):
    data = copy.deepcopy(VALID)
    node = data
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return data


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def assert_one_line_error(capsys, *argv: str, match: str = "") -> str:
    code, out, err = run(capsys, *argv)
    assert code == EXIT_ERROR, (code, out, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("gridcoll: error: "), err
    assert "Traceback" not in err and match in lines[0], lines[0]
    return lines[0]


# -- the cases found ----------------------------------------------------------------------
CASES = {
    "copy-bandwidth-zero": (
        ("clusters", 0, "lan"),
        {"latency": "20us", "bandwidth": "50MB/s", "copy_bandwidth": 0},
        "'copy_bandwidth' must be finite and between",
    ),
    "tiny-bandwidth": (("routes", 0, "plogp", "bandwidth"), 1e-300, "'bandwidth' must be"),
    "all-zero-gaps": (
        ("clusters", 1, "lan"),
        {
            "L": 1e-5,
            "points": [{"m": 0, "os": 0, "or": 0, "g": 0}, {"m": 9, "os": 0, "or": 0, "g": 0}],
        },
        "g(m) is 0 at every size",
    ),
    "ranks-true": (("clusters", 0, "ranks"), True, "'ranks' must be a positive integer"),
    "ranks-a-billion": (("clusters", 0, "ranks"), 10**9, f"more than {MAX_RANKS} ranks"),
    "bandwidth-true": (("routes", 0, "plogp", "bandwidth"), True, "'bandwidth' must be"),
    "bandwidth-infinity": (
        ("routes", 0, "plogp", "bandwidth"),
        math.inf,
        "must be finite",
    ),
    "bandwidth-1e400": (("routes", 0, "plogp", "bandwidth"), "1e400MB/s", "must be finite"),
    "latency-1e308": (("routes", 0, "plogp", "latency"), 1e308, "at most 3600 s"),
    "overhead-above-gap": (
        ("routes", 1, "plogp", "points", 1, "os"),
        0.5,
        "the gap covers the overheads",
    ),
    "overhead-above-gap0": (
        ("routes", 0, "plogp"),
        {"latency": "10ms", "bandwidth": "1MB/s", "overhead": "1ms", "gap0": "1us"},
        "the gap covers the overheads",
    ),
    "duplicate-link": (
        ("links",),
        [{"name": "up", "bandwidth": "1MB/s"}, {"name": "up", "bandwidth": "2MB/s"}],
        "link name 'up' is used twice",
    ),
    "duplicate-route": (
        ("routes",),
        [*VALID["routes"], VALID["routes"][0]],
        "route 'A' -> 'B' is given twice",
    ),
    "placement-a-string": (("placement",), "AABBA", "'placement' must be a list"),
    "link-name-a-list": (("links", 0, "name"), ["u", "p"], "'name' must be a non-empty printable"),
    "route-link-a-list": (("routes", 0, "links"), [["up"]], "crosses unknown link ['up']"),
    "missing-from": (
        ("routes", 0),
        {"to": "B", "plogp": {"latency": "1ms", "bandwidth": "1MB/s"}},
        "route 0 lacks 'from'",
    ),
    "name-with-escape": (("clusters", 0, "name"), "A\x1b[31m", "non-empty printable string"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_each_hostile_grid_file_is_one_clear_error(case, tmp_path, capsys):
    path, value, message = CASES[case]
    grid_file = tmp_path / "g.json"
    grid_file.write_text(json.dumps(_with(path, value)))
    line = assert_one_line_error(capsys, "plan", "--grid", str(grid_file), "--size", "1KiB")
    assert message in line
    assert line.count("route 'A' -> 'B'") <= 1  # the place is named once


def test_a_route_error_names_the_route_once(tmp_path):
    grid_file = tmp_path / "g.json"
    grid_file.write_text(json.dumps(_with(("routes", 1, "plogp", "points"), [])))
    with pytest.raises(GridError) as info:
        load_grid(grid_file)
    assert str(info.value).count("route 'B' -> 'A'") == 1


def test_deeply_nested_json_is_refused(tmp_path, capsys):
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100_000 + "]" * 100_000)
    assert_one_line_error(capsys, "plan", "--grid", str(deep), "--size", "1KiB", match="nested")
    nested = tmp_path / "nested.json"
    nested.write_text(json.dumps(_with(("name",), json.loads("[" * 40 + "]" * 40))))
    assert_one_line_error(
        capsys, "plan", "--grid", str(nested), "--size", "1KiB", match=f"{MAX_JSON_DEPTH} levels"
    )
    out = str(deep.with_name("out.json"))
    assert_one_line_error(capsys, "discover", "--in", str(deep), "--out", out, match="nested")


def test_only_regular_files_of_bounded_size_are_read(tmp_path, capsys):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    assert_one_line_error(
        capsys, "plan", "--grid", str(fifo), "--size", "1KiB", match="not a regular file"
    )
    assert_one_line_error(
        capsys, "plan", "--grid", "/dev/zero", "--size", "1KiB", match="not a regular file"
    )
    big = tmp_path / "big.json"
    with big.open("wb") as f:
        f.truncate(65 * 2**20)  # sparse: no disk used
    assert_one_line_error(capsys, "plan", "--grid", str(big), "--size", "1KiB", match="at most")


def test_report_reads_only_regular_logs_of_bounded_size(tmp_path, capsys):
    from gridcoll.limits import MAX_LOG_BYTES

    fifo = tmp_path / "fifo.jsonl"
    os.mkfifo(fifo)
    assert_one_line_error(capsys, "report", str(fifo), match="not a regular file")
    assert_one_line_error(capsys, "report", "/dev/zero", match="not a regular file")
    big = tmp_path / "big.jsonl"
    with big.open("wb") as f:
        f.truncate(MAX_LOG_BYTES + 1)  # sparse: no disk used
    assert_one_line_error(capsys, "report", str(big), match="at most")
    marked = tmp_path / "[bold red]x[not-a-tag].jsonl"
    marked.write_text("")
    line = assert_one_line_error(capsys, "report", str(marked), match="holds no calls")
    assert repr(str(marked)) in line  # the name as written, never markup


@pytest.mark.parametrize("name", ["g/[/].json", "[bold red]x.json"])
def test_names_are_shown_as_written_never_as_markup(name, tmp_path, capsys):
    path = tmp_path / name
    path.parent.mkdir(parents=True, exist_ok=True)
    data = json.loads(json.dumps(VALID).replace('"A"', '"[red]A[/]"'))  # a cluster too
    path.write_text(json.dumps(data))
    code, out, err = run(capsys, "plan", "--grid", str(path), "--size", "1KiB", "--explain")
    assert code == 0, err
    # the brackets printed as they are (the table title may wrap anywhere)
    assert re.sub(r"\s+", "", path.name) in re.sub(r"\s+", "", out)


@pytest.mark.parametrize(
    "spec", ["magpie:1000000,1000000", "lan:99999999999999999999", "lan:100001", "magpie:1001,1"]
)
def test_huge_presets_are_refused_at_once(spec, capsys):
    assert_one_line_error(capsys, "plan", "--grid", spec, "--size", "1KiB", match="at most")


@pytest.mark.parametrize(
    "argv",
    [
        ["--size", "1e30"],
        ["--size", "99999999999999999999"],
        ["--size", "1TiB"],
        ["--size", "1KiB", "--budget", "1e308"],
        ["--size", "1KiB", "--budget", "nan"],
        ["--size", "1KiB", "--budget", "-1"],
        ["--size", "1KiB", "--segment-size", "1MiB"],
        ["--size", "2147483647", "--segment-size", "7"],  # 300 M segments: refused, not built
        ["--size", "0"],
        ["--size", "1KiB", "--root", "99"],
        ["--size", "1KiB", "--itemsize", "3"],
    ],
)
def test_out_of_range_values_are_refused(argv, capsys):
    for command in ("plan", "simulate"):
        assert_one_line_error(capsys, command, "--grid", "magpie:2,2", *argv)


def test_planning_api_refuses_huge_calls():
    with pytest.raises(GridcollError, match="largest supported"):
        plan(get_grid("magpie:2,2"), Call("bcast", 10**30))


# -- fuzz -----------------------------------------------------------------------------------
EDGES = st.sampled_from(
    [0, -1, 1, 0.0, -0.0, 1e-300, 1e308, math.nan, math.inf, -math.inf, True, False, None,
     "", "x", "1e400MB/s", "-5ms", "10ms", "1MB/s", [], {}, [1], {"a": 1}, 2**63, 10**9]
)  # fmt: skip


def _paths(node, prefix=()):
    yield prefix
    if isinstance(node, dict):
        for k, v in node.items():
            yield from _paths(v, (*prefix, k))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from _paths(v, (*prefix, i))


PATHS = [p for p in _paths(VALID) if p]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.sampled_from(PATHS), EDGES), min_size=1, max_size=3))
def test_fuzzed_grid_files_load_and_plan_or_say_why(mutations):
    data = copy.deepcopy(VALID)
    for path, value in mutations:
        node = data
        try:
            for key in path[:-1]:
                node = node[key]
            node[path[-1]] = copy.deepcopy(value)  # drawn values may be one object: no cycles
        except (KeyError, IndexError, TypeError):
            continue  # an earlier mutation removed the place
    try:
        grid = grid_from_dict(json.loads(json.dumps(data, allow_nan=True)))
    except GridError:
        return
    for nbytes in (1, 4096):  # a grid that loads must plan
        with contextlib.suppress(GridcollError):
            plan(grid, Call("bcast", nbytes))


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(
    size=st.sampled_from(["1", "1KiB", "0", "-1", "1e30", "nan", "1.5", "x", "2147483647", ""]),
    extra=st.lists(
        st.sampled_from(
            [
                ["--root", "-1"],
                ["--root", "3"],
                ["--root", "x"],
                ["--itemsize", "0"],
                ["--itemsize", "8"],
                ["--budget", "inf"],
                ["--budget", "0.01"],
                ["--segment-size", "7"],
                ["--segment-size", "0"],
                ["--algo", "nope"],
                ["--algo", "binomial"],
                ["--op", "reduce"],
                ["--op", "barrier"],
            ]
        ),
        max_size=3,
    ),
)
def test_fuzzed_command_lines_never_trace_back(size, extra, capsys):
    argv = ["plan", "--grid", "magpie:2,2", "--size", size, *[a for pair in extra for a in pair]]
    code = main(argv)
    _, err = capsys.readouterr()
    assert code in (0, EXIT_ERROR) and "Traceback" not in err
    if code == EXIT_ERROR:
        assert len(err.strip().splitlines()) == 1


def test_documented_limits_exist():
    doc = (Path(__file__).resolve().parents[1] / "docs" / "grid-format.md").read_text()
    for what in ("MAX_RANKS", "MAX_CLUSTERS", "MAX_MESSAGE_BYTES", "MAX_BUDGET_S"):
        assert what in doc, what


def test_a_free_per_message_network_is_not_cut_into_millions_of_segments(tmp_path, capsys):
    """The documented shorthand with its default overhead of 0 makes every message free
    of per-message cost; the search stops at MAX_SEARCH_SEGMENTS segments."""
    from gridcoll.tune.search import MAX_SEARCH_SEGMENTS

    shorthand = {
        "name": "short",
        "clusters": [
            {"name": n, "ranks": 2, "lan": {"latency": "20us", "bandwidth": "50MB/s"}} for n in "AB"
        ],
        "routes": [
            {"from": a, "to": b, "plogp": {"latency": "10ms", "bandwidth": "1MB/s"}}
            for a, b in ("AB", "BA")
        ],
    }
    path = tmp_path / "short.json"
    path.write_text(json.dumps(shorthand))
    result = plan(load_grid(path), Call("bcast", 2**20), PlanOptions(budget_s=1.0))
    for cand in result.candidates:
        for name, value in cand.params.items():
            if name.endswith("segment_size"):
                assert -(-(2**20) // value) <= MAX_SEARCH_SEGMENTS, cand
    code, _, err = run(
        capsys,
        "compare",
        "--grid",
        str(path),
        "--sizes",
        "1MiB",
        "--algos",
        "binomial-segmented,flat",
    )
    assert code == 0, err


def test_a_placement_holding_null_is_refused(tmp_path):
    path = tmp_path / "g.json"
    path.write_text(json.dumps(_with(("placement", 0), None)))
    with pytest.raises(GridError, match="placement names unknown cluster None"):
        load_grid(path)


# -- placement by host ---------------------------------------------------------------------
BY_HOST = {k: v for k, v in copy.deepcopy(VALID).items() if k != "placement"}
BY_HOST["clusters"][0]["hosts"] = ["node-a*", "login1"]
BY_HOST["clusters"][1]["hosts"] = ["node-b[0-9]"]

HOST_CASES = {
    "hosts-a-string": ((0, "node-a*"), "cluster 'A': 'hosts' must be a non-empty list"),
    "hosts-empty": ((0, []), "cluster 'A': 'hosts' must be a non-empty list"),
    "pattern-empty": ((1, [""]), "cluster 'B': 'hosts'[0] must be a non-empty printable"),
    "pattern-a-number": ((1, [3]), "'hosts'[0] must be a non-empty printable string"),
    "pattern-true": ((1, [True]), "'hosts'[0] must be a non-empty printable string"),
    "pattern-escape": ((1, ["b\x1b[2J"]), "'hosts'[0] must be a non-empty printable"),
    "pattern-twice": ((1, ["LOGIN1"]), "host pattern 'LOGIN1' is given twice"),
    "host-in-two-clusters": (
        (1, ["node-a9"]),
        "host 'node-a9' of cluster 'B' also matches pattern 'node-a*' of cluster 'A'",
    ),
}


@pytest.mark.parametrize("case", sorted(HOST_CASES))
def test_each_hostile_hosts_entry_is_one_clear_error(case, tmp_path, capsys):
    (cluster, value), message = HOST_CASES[case]
    data = copy.deepcopy(BY_HOST)
    data["clusters"][cluster]["hosts"] = value
    grid_file = tmp_path / "g.json"
    grid_file.write_text(json.dumps(data))
    line = assert_one_line_error(capsys, "plan", "--grid", str(grid_file), "--size", "1KiB")
    assert message in line and "\x1b" not in line


def test_hosts_with_a_placement_or_on_some_clusters_only_are_refused(tmp_path, capsys):
    grid_file = tmp_path / "g.json"
    grid_file.write_text(json.dumps({**BY_HOST, "placement": VALID["placement"]}))
    assert_one_line_error(capsys, "plan", "--grid", str(grid_file), match="not both")
    data = copy.deepcopy(BY_HOST)
    del data["clusters"][1]["hosts"]
    grid_file.write_text(json.dumps(data))
    assert_one_line_error(
        capsys, "plan", "--grid", str(grid_file), match="cluster 'B' names no 'hosts'"
    )


def test_a_grid_placed_by_host_plans_offline_by_number(tmp_path, capsys):
    grid_file = tmp_path / "g.json"
    grid_file.write_text(json.dumps(BY_HOST))
    code, _, err = run(capsys, "plan", "--grid", str(grid_file), "--size", "1KiB")
    assert code == 0, err
    assert load_grid(grid_file).cluster_of == (0, 0, 0, 1, 1)


HOST_EDGES = st.one_of(
    EDGES,
    st.integers(1, 3),
    st.sampled_from(["*", "?", "[", "[!a]", "node-a1", "LOGIN1", "a b", "\x00", "é*"]),
    st.lists(st.sampled_from(["*", "node-a1", "", "node-b[0-9]", "x"]), max_size=3),
)
HOST_PATHS = [
    *(p for p in _paths(BY_HOST) if len(p) >= 3 and p[2] in ("hosts", "ranks")),
    ("placement",),
    ("clusters", 0, "hosts", 2),
]
HOSTS = ["node-a1", "login1", "node-b2", "gpu", "*", "NODE-B9"]


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(st.tuples(st.sampled_from(HOST_PATHS), HOST_EDGES), min_size=1, max_size=3),
    st.data(),
)
def test_fuzzed_host_placements_place_or_say_why_in_one_line(mutations, data):
    """Mutated ``hosts`` and ``ranks`` load or fail in one line; a grid that loads
    places any ranks' host names in one line or with every cluster's declared size."""
    raw = copy.deepcopy(BY_HOST)
    for path, value in mutations:
        node = raw
        try:
            for key in path[:-1]:
                node = node[key]
            node[path[-1]] = copy.deepcopy(value)  # a copy: no value inside itself
        except (KeyError, IndexError, TypeError):
            continue
    try:
        grid = grid_from_dict(json.loads(json.dumps(raw, allow_nan=True)))
        if grid.clusters[0].hosts:
            size = st.sampled_from([grid.nranks, grid.nranks, grid.nranks + 1])
            names = data.draw(
                size.flatmap(lambda n: st.lists(st.sampled_from(HOSTS), min_size=n, max_size=n))
            )
            placed = place_by_host(grid, names)
            assert [placed.cluster_of.count(c) for c in range(grid.nclusters)] == [
                c.nranks for c in grid.clusters
            ]
    except GridError as err:
        assert "\n" not in str(err)
