"""P-LogP files: what gridcoll measure writes, what is refused, incomplete tables."""

import json

import pytest

from gridcoll.errors import GridError, MeasurementError
from gridcoll.measure import (
    PLogPProcedure,
    Settings,
    SyntheticTransport,
    run_procedure,
)
from gridcoll.measure.discover import with_measured
from gridcoll.network import PLogP, get_grid, grid_to_dict, load_grid, save_grid
from gridcoll.network.gridfile import (
    check_complete,
    grid_from_dict,
    load_plogp,
    save_plogp,
)
from gridcoll.tune import Call, plan

LINK = PLogP.linear(10e-3, 1e6, g0=8e-6, os0=4e-6, or0=4e-6)
POINTS = [
    {"m": 0, "os": 4e-6, "or": 4e-6, "g": 8e-6},
    {"m": 1024, "os": 5e-6, "or": 5e-6, "g": 1e-3},
]


def measured(**kw):
    return run_procedure(PLogPProcedure(Settings(k_max=4)), SyntheticTransport(LINK, **kw))


def test_a_measured_table_round_trips(tmp_path):
    table = measured().plogp()
    save_plogp(table, tmp_path / "t.json", extra={"note": "x"})
    back = load_plogp(tmp_path / "t.json")
    assert back == table
    save_plogp({"forward": table, "backward": table}, tmp_path / "both.json")
    both = load_plogp(tmp_path / "both.json")
    assert set(both) == {"forward", "backward"} and both["backward"] == table


def test_an_incomplete_table_is_refused_unless_asked(tmp_path, monkeypatch):
    monkeypatch.delenv("GRIDCOLL_ALLOW_INCOMPLETE", raising=False)
    with pytest.raises(MeasurementError) as info:
        measured(fail_after=21)
    table = info.value.partial.plogp()
    save_plogp(table, tmp_path / "p.json")
    with pytest.raises(GridError, match="marked incomplete"):
        load_plogp(tmp_path / "p.json")
    assert not load_plogp(tmp_path / "p.json", allow_incomplete=True).complete
    monkeypatch.setenv("GRIDCOLL_ALLOW_INCOMPLETE", "1")
    assert not load_plogp(tmp_path / "p.json").complete


@pytest.fixture
def incomplete_grid():
    grid = get_grid("magpie:2,2")
    table = PLogP.from_points(
        10e-3, [0, 1024], [4e-6, 5e-6], [4e-6, 5e-6], [8e-6, 1e-3], complete=False
    )
    return with_measured(grid, 0, 2, table)


def test_gridcoll_refuses_to_plan_with_an_incomplete_table(incomplete_grid, monkeypatch):
    monkeypatch.delenv("GRIDCOLL_ALLOW_INCOMPLETE", raising=False)
    with pytest.raises(GridError, match=r"route 'c0' -> 'c1' is marked incomplete"):
        plan(incomplete_grid, Call("bcast", 65536))
    monkeypatch.setenv("GRIDCOLL_ALLOW_INCOMPLETE", "1")
    assert plan(incomplete_grid, Call("bcast", 65536)).predicted_s > 0


def test_an_incomplete_grid_file_is_refused_naming_the_entry(
    incomplete_grid, tmp_path, monkeypatch
):
    monkeypatch.delenv("GRIDCOLL_ALLOW_INCOMPLETE", raising=False)
    save_grid(incomplete_grid, tmp_path / "g.json")
    with pytest.raises(GridError, match=r"g.json.*route 'c0' -> 'c1' is marked incomplete"):
        load_grid(tmp_path / "g.json")
    assert load_grid(tmp_path / "g.json", allow_incomplete=True).fingerprint
    with pytest.raises(GridError, match="incomplete"):
        check_complete(incomplete_grid, allow_incomplete=False)


BAD = {
    "negative g": (
        {"L": 0.01, "points": [POINTS[0], {**POINTS[1], "g": -1.0}]},
        r"point 1 \(m=1024\) has g=-1.0",
    ),
    "missing size": (
        {"L": 0.01, "points": [POINTS[0], {"os": 1e-6, "or": 1e-6, "g": 1e-3}]},
        "point 1 lacks m",
    ),
    "missing or": ({"L": 0.01, "points": [{"m": 0, "os": 1e-6, "g": 1e-5}]}, "point 0 lacks or"),
    "non-monotone g": (
        {
            "L": 0.01,
            "points": [POINTS[0], POINTS[1], {"m": 2048, "os": 1e-6, "or": 1e-6, "g": 5e-4}],
        },
        r"g\(m\) must not decrease with m: g\(2048.0\)",
    ),
    "sizes out of order": (
        {"L": 0.01, "points": [POINTS[1], POINTS[0]]},
        "sizes must increase strictly",
    ),
    "text value": (
        {"L": 0.01, "points": [{**POINTS[0], "os": "fast"}]},
        "os='fast' is not a number",
    ),
    "no L": ({"points": POINTS}, "needs 'L'"),
    "no points": ({"L": 0.01, "points": []}, "non-empty"),
    "complete not bool": ({"L": 0.01, "points": POINTS, "complete": "no"}, "'complete' must be"),
    "negative L": ({"L": -0.01, "points": POINTS}, "latency L must be finite and >= 0"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_plogp_files_are_rejected_naming_the_entry(case, tmp_path):
    data, message = BAD[case]
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data))
    with pytest.raises(GridError, match=message) as info:
        load_plogp(path)
    assert "bad.json" in str(info.value)


def test_bad_route_table_in_a_grid_names_the_route():
    data = grid_to_dict(get_grid("magpie:2,1"))
    data["routes"][0]["plogp"] = {"L": 0.01, "points": [POINTS[0], {**POINTS[1], "os": -2e-6}]}
    with pytest.raises(GridError, match=r"route 'c0' -> 'c1': point 1 \(m=1024\) has os=-2e-06"):
        grid_from_dict(data)


def test_with_measured_replaces_the_route_and_its_private_link():
    grid = get_grid("magpie:2,2")
    table = measured().plogp()
    new = with_measured(grid, 0, 2, table, table)
    assert new.plogp(0, 2) == table and new.plogp(3, 1) == table
    assert new.links["c0->c1"].g == table.g_fn
    lan = with_measured(grid, 0, 1, table)
    assert lan.clusters[0].lan == table and lan.plogp(2, 3) == grid.plogp(2, 3)
