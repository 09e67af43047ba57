"""The personalised collectives at the physical limit: the segmented all-to-all
(gridcoll.algorithms.alltoall) and the multi-path scatter and gather
(gridcoll.algorithms.multipath): exact data on uneven grids, the bound on the presets,
and the models beside the simulator."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gridcoll.algorithms import get_builder, multipath
from gridcoll.algorithms._collective import Blocks
from gridcoll.errors import ParameterError
from gridcoll.models.registry import MODELS
from gridcoll.network import collective_bound, get_grid
from gridcoll.schedule.validate import validate
from gridcoll.simulate import simulate
from gridcoll.tune import Call, plan
from test_packing import uneven_grids
from test_runtime_mpi import clean_env, last_json

MiB = 2**20
NEW = (
    ("alltoall", "direct-segmented"),
    ("alltoall", "multipath"),
    ("scatter", "multipath"),
    ("gather", "multipath"),
)


@settings(max_examples=40)
@given(
    grid=uneven_grids(),
    case=st.sampled_from(NEW),
    itemsize=st.sampled_from([1, 4, 8]),
    items=st.integers(1, 30),
    data=st.data(),
)
def test_every_new_schedule_delivers_exactly_the_right_data(grid, case, itemsize, items, data):
    """The validator replays the programs: every rank ends with exactly its blocks,
    without deadlock, for any segment size and root, on uneven clusters of 2-16 ranks
    (asymmetric links, shared access links); never below the bound."""
    op, name = case
    nbytes = items * itemsize
    m = itemsize * data.draw(st.integers(1, items))
    root = data.draw(st.integers(0, grid.nranks - 1)) if op != "alltoall" else 0
    schedule = get_builder(op, name).build(grid, nbytes, root, segment_size=m, itemsize=itemsize)
    validate(schedule)
    assert (schedule.op, schedule.algorithm) == case
    sim = simulate(schedule, grid).total_s
    assert sim >= collective_bound(grid, op, nbytes, root).time_s * (1 - 1e-9)


@pytest.mark.parametrize(
    ("spec", "op", "name", "m"),
    [
        ("magpie:8,1", "alltoall", "direct-segmented", 4096),
        ("magpie:4,2", "alltoall", "direct-segmented", 16384),
        ("teragrid", "alltoall", "direct-segmented", 65536),
        ("das2:4", "alltoall", "multipath", 4096),
        ("das2:4", "scatter", "multipath", 4096),
        ("das2:4", "gather", "multipath", 4096),
        ("teragrid", "scatter", "multipath", 16384),
        ("teragrid", "gather", "multipath", 16384),
    ],
)
def test_the_new_schedules_reach_the_limit_and_their_models_see_it(spec, op, name, m):
    """Within 1.10x of the bound at 1 MiB, simulated, where whole blocks one after
    another took 2-7x (a sender busy for each WAN transfer; das2's single routes); the
    model within 10% of the simulation."""
    grid = get_grid(spec)
    schedule = get_builder(op, name).build(grid, MiB, 0, segment_size=m)
    sim = simulate(schedule, grid).total_s
    assert sim <= 1.10 * collective_bound(grid, op, MiB).time_s
    assert MODELS[op, name](grid, MiB, 0, segment_size=m) == pytest.approx(sim, rel=0.10)


def test_relays_carry_what_the_direct_route_cannot():
    """On das2 the root's route to Leiden gives 0.625 MB/s, the one through UvA 0.75
    MB/s more: some of Leiden's segments go through UvA's coordinator; on a uniform
    mesh every segment goes direct."""
    for spec, relayed in (("das2:4", True), ("magpie:4,2", False)):
        grid = get_grid(spec)
        blocks = Blocks.cut(grid.nranks, 4096 * 8, 4096)
        paths = multipath.segment_paths("scatter", grid, 0, blocks)
        leiden = [path for _, path in paths if grid.cluster_of[path[-1]] == 1]
        assert any(len(path) == 3 for path in leiden) is relayed
        assert all(path[0] == 0 for _, path in paths)


@pytest.mark.parametrize(
    ("spec", "op"),
    [
        ("magpie:8,1", "alltoall"),
        ("das2:4", "alltoall"),
        ("das2:4", "scatter"),
        ("das2:4", "gather"),
    ],
)
def test_auto_chooses_them(spec, op):
    grid = get_grid(spec)
    p = plan(grid, Call(op, MiB))
    assert p.algorithm in ("direct-segmented", "multipath")
    assert simulate(p.build(grid), grid).total_s <= 1.10 * p.bound_s


@pytest.mark.slow
@pytest.mark.mpi
def test_the_transpose_example_computes_the_2d_fft_over_the_emulated_wan():
    """examples/transpose_fft.py on 8 ranks of magpie:4,2: every column of numpy's
    fft2 where it belongs (the example asserts it), both all-to-alls timed."""
    example = Path(__file__).parent.parent / "examples" / "transpose_fft.py"
    cmd = [sys.executable, "-m", "gridcoll", "mpirun", "--grid", "magpie:4,2", "--"]
    cmd += [sys.executable, str(example), "--n", "64", "--repeat", "1"]
    proc = subprocess.run(
        cmd, env=clean_env(), capture_output=True, text=True, timeout=300, check=False
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = last_json(proc)
    assert out["checked"] == "numpy.fft.fft2" and out["ranks"] == 8
    assert out["bytes_per_pair"] == 8 * 8 * 16
    assert out["auto_s"] > 0 and out["mpich_s"] > 0 and out["bound_s"] > 0


def test_the_new_builders_decline_past_their_limits():
    """Weighing relays grows with the clusters cubed for an all-to-all, squared for a
    scatter; a segmented all-to-all holds P^2 b/m segments: past the documented limits
    the builders and their models decline with the reason, and auto plans without them."""
    wide = get_grid("transit-stub:60,1")
    for op in ("scatter", "gather"):
        with pytest.raises(ParameterError, match="up to 33 clusters, the grid has 60"):
            get_builder(op, "multipath").build(wide, 1024, 0, segment_size=64)
        with pytest.raises(ParameterError, match="up to 33 clusters"):
            MODELS[op, "multipath"](wide, 1024, 0, segment_size=64)
    many = get_grid("magpie:4,64")
    with pytest.raises(ParameterError, match="more than"):
        get_builder("alltoall", "direct-segmented").build(many, MiB, segment_size=64)
    with pytest.raises(ParameterError, match="more than"):
        MODELS["alltoall", "direct-segmented"](many, MiB, segment_size=64)
    assert plan(wide, Call("scatter", MiB)).algorithm != "multipath"
