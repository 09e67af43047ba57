"""gridcoll measure / discover: arguments checked before any launch; discover --in."""

import json

import pytest

from gridcoll.cli.main import main
from gridcoll.network import load_grid
from test_measure_discover import model_matrices


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--between", "0,0"], "two different ranks"),
        (["--between", "0,9"], "rank 9 is out of range"),
        (["--between", "0,x"], "expected two ranks A,B"),
        (["--between", "0,1", "--max-size", "3000"], "power of two"),
        (["--between", "0,1", "--max-reps", "2"], "--max-reps must be >= 4"),
        (["--between", "0,1", "--matrix"], "not allowed with"),
    ],
)
def test_measure_refuses_bad_arguments_before_launching(args, message, tmp_path, capsys):
    out = tmp_path / "x.json"
    status = main(["measure", "--grid", "magpie:2,2", *args, "--out", str(out)])
    assert status == 2
    assert message in capsys.readouterr().err
    assert not out.exists()


def test_discover_from_a_matrix_file_writes_a_grid_every_command_accepts(tmp_path, capsys):
    grid, m = model_matrices("das2:2", lan=(20e-6, 3e9), noise=0.05, seed=3)
    m.save(tmp_path / "m.json")
    out = tmp_path / "found.json"
    assert main(["discover", "--in", str(tmp_path / "m.json"), "--out", str(out), "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["clusters"] == [list(c) for c in grid.members]
    assert load_grid(out).members == grid.members
    assert main(["plan", "--grid", str(out), "--size", "1MiB"]) == 0


def test_discover_needs_a_source(capsys):
    assert main(["discover", "--out", "x.json"]) == 2
    assert "one of the arguments --grid --in is required" in capsys.readouterr().err
