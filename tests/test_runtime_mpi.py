"""The runtime under mpiexec: every builder's bytes, the drop-in promise, mismatches,
the WAN emulator's timing, failures, and the two launch commands.

Each test starts ``mpiexec -n N`` (N from 2 to 16) on a script of ``tests/mpi/`` with a
subprocess timeout, so a hang fails the test instead of the run. Correctness runs with
emulation use fast grids (1-2 ms, 50-100 MB/s links) so they stay quick on two cores.
"""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("mpi4py")

from gridcoll.network import get_grid, grid_from_dict
from gridcoll.runtime.processes import default_mpiexec, mpiexec_command
from gridcoll.runtime.worker import Batch, measure_schedule, run_worker
from gridcoll.tune import Call, PlanOptions

pytestmark = [pytest.mark.slow, pytest.mark.mpi]

HERE = Path(__file__).parent / "mpi"
LAN = {"latency": "20us", "bandwidth": "500MB/s", "overhead": "10us"}


def fast_grid(clusters: dict[str, int], placement: list[str] | None = None) -> dict:
    """A grid file object: fully connected 1 ms / 100 MB/s WAN (A<->C 2 ms, 50 MB/s).

    Per-message overheads are not zero, or the tuner would cut messages into 1-byte
    segments (free in a model where g(0) = 0).
    """
    names = list(clusters)
    routes = []
    for a in names:
        for b in names:
            if a != b:
                slow = {a, b} == {"A", "C"}
                plogp = {
                    "latency": "2ms" if slow else "1ms",
                    "bandwidth": "50MB/s" if slow else "100MB/s",
                    "overhead": "20us",
                }
                routes.append({"from": a, "to": b, "plogp": plogp})
    data = {
        "format": "gridcoll-grid/1",
        "name": "fast-" + "-".join(f"{k}{v}" for k, v in clusters.items()),
        "clusters": [{"name": k, "ranks": v, "lan": LAN} for k, v in clusters.items()],
        "routes": routes,
    }
    if placement:
        data["placement"] = placement
    return data


def write_grid(tmp_path: Path, data: dict) -> Path:
    grid_from_dict(data)  # a bad test grid fails here, not under mpiexec
    path = tmp_path / "grid.json"
    path.write_text(json.dumps(data))
    return path


def clean_env(**extra: str) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GRIDCOLL_")}
    env.update(extra)
    return env


def mpirun(n: int, script: str, *args: str, env: dict | None = None, timeout: float = 600):
    cmd = mpiexec_command(n, [sys.executable, str(HERE / script), *args])
    return subprocess.run(
        cmd, env=env or clean_env(), capture_output=True, text=True, timeout=timeout, check=False
    )


def last_json(proc) -> dict:
    for line in reversed(proc.stdout.splitlines()):
        if line.startswith("{"):
            return json.loads(line)
    raise AssertionError(f"no JSON line; rc={proc.returncode}\n{proc.stdout}\n{proc.stderr}")


def check_matrix(proc, nranks: int, emulated: bool) -> dict:
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = last_json(proc)
    assert out["failures"] == []
    assert out["nranks"] == nranks and out["emulated"] is emulated
    from gridcoll.algorithms import list_builders

    assert set(out["builders"]) == {b.name for b in list_builders("bcast")} | {"auto", "native"}
    return out


# -- correctness: every builder, size, root, dtype -------------------------------------


@pytest.mark.parametrize(("n", "sizes"), [(2, "1,2,7,1000,65536"), (5, None), (7, "random:5")])
def test_every_builder_without_emulation(n, sizes):
    args = ["--seed", str(n)] + (["--sizes", sizes] if sizes else [])
    out = check_matrix(mpirun(n, "bcast_matrix.py", *args), n, emulated=False)
    assert out["cases"] >= 16 * n


def test_every_builder_with_emulation(tmp_path):
    grid = write_grid(tmp_path, fast_grid({"A": 2, "B": 2, "C": 1}, ["A", "B", "A", "C", "B"]))
    env = clean_env(GRIDCOLL_GRID=str(grid), GRIDCOLL_EMULATE="1")
    args = ["--seed", "11", "--sizes", "random:6"]
    out = check_matrix(mpirun(5, "bcast_matrix.py", *args, env=env), 5, emulated=True)
    assert out["cases"] >= 16 * 5


def test_every_builder_on_16_emulated_ranks(tmp_path):
    """16 ranks in 4 interleaved clusters: every builder from 5 random roots (every root
    is covered on 2, 5 and 7 ranks above)."""
    clusters = {f"c{i}": 4 for i in range(4)}
    placement = [f"c{r % 4}" for r in range(16)]
    grid = write_grid(tmp_path, fast_grid(clusters, placement))
    env = clean_env(GRIDCOLL_GRID=str(grid), GRIDCOLL_EMULATE="1")
    args = ["--seed", "3", "--max-cases-per-builder", "1", "--sizes", "1,777,20000"]
    args += ["--roots", "5"]
    out = check_matrix(mpirun(16, "bcast_matrix.py", *args, env=env, timeout=900), 16, True)
    assert out["cases"] >= 5 * (len(out["builders"]) - 1)  # auto runs 1


# -- the drop-in promise and mismatched arguments --------------------------------------


def _dropin(proc) -> dict:
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = last_json(proc)
    assert out["differences"] == []
    results = out["gridcoll"]["results"]
    assert results["Bcast root=size"] == ["MPI.Exception", 7]  # MPI.ERR_ROOT
    assert results["bcast root=size"] == ["MPI.Exception", 7]
    assert results["Dup bcast"] == ["value", "(True, 1)"]
    assert out["gridcoll"]["type"] == out["gridcoll"]["dup_type"] == "Comm"
    return out


def test_dropin_identical_to_mpi4py():
    _dropin(mpirun(3, "dropin.py"))


def test_dropin_on_an_emulated_grid(tmp_path):
    """Same program under emulation: Split finds the sub-grid by itself."""
    grid = write_grid(tmp_path, fast_grid({"A": 2, "B": 2}))
    env = clean_env(GRIDCOLL_GRID=str(grid), GRIDCOLL_EMULATE="1")
    out = _dropin(mpirun(4, "dropin.py", env=env))
    assert "fast-A2-B2" in out["gridcoll"]["explain"]


def test_mismatched_arguments_raise_not_hang():
    start = time.monotonic()
    proc = mpirun(3, "mismatch.py", timeout=120)
    lines = [json.loads(x) for x in proc.stdout.splitlines() if x.startswith("{")]
    assert proc.returncode == 0, proc.stdout + proc.stderr[-2000:]
    assert [c["case"] for c in lines] == [
        "case_size",
        "case_dtype",
        "case_root",
        "case_extra_call",
        "case_large_size",
    ]
    for case in lines:
        assert case["ok"], case
        for rank in case["ranks"]:
            assert rank["seconds"] < 2.0 + 1.5  # the 2 s timeout at most, never a hang
    size = lines[0]["ranks"][1]
    assert size["raised"] == "MismatchError" and "size 48 vs 64" in size["message"]
    # rank 1, a root that only sent, completed the first call; ranks 0 or 2 raised there
    # and left the case, so rank 1's next call finds the strays of the first (a stale
    # message of an earlier case's communicator in front must not hide them) or times
    # out naming that earlier failure
    root = lines[2]["ranks"][1]
    assert root["raised"] in ("MismatchError", "CollectiveTimeout"), root
    assert "mismatched" in root["message"], root
    assert time.monotonic() - start < 100


MISMATCH_CASES = {
    # case: the stage by which some rank has raised ("call": in that call)
    "allreduce_op": "call",
    "allreduce_dtype": "call",
    "bcast_root": "next call",  # two roots only send: a stray tells, maybe after the next
    "bcast_root_large": "next call",
    "bcast_zero_length": "next call",
    "gather_root": "call",  # the trees wait on each other: NOTICE_WAITING tells
    "reduce_root": "call",
}
STAGES = ("call", "next call", "then", "free")


@pytest.mark.parametrize("emulate", ["1", "0"])
def test_mismatched_arguments_are_found_and_the_ranks_carry_on(emulate):
    """On magpie:2,2: the collective, datatype, reduction operation and root are in
    every header, so a mismatch raises MismatchError in that call where a rank can see
    it (a header, a stray, a peer waiting for it), else after the next call (a stray
    still on its way), never as a timeout; a raising user op raises on its rank and
    fails the others' call with a CollectiveError. The ranks carry on: the call after
    those succeeds with the right data on every rank, and Free raises nowhere."""
    env = clean_env(GRIDCOLL_GRID="magpie:2,2", GRIDCOLL_EMULATE=emulate)
    proc = mpirun(4, "mismatch_args.py", env=env, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
    cases = {c["case"]: c["ranks"] for c in map(json.loads, proc.stdout.splitlines())}
    for case, by in MISMATCH_CASES.items():
        raised = [r for r in cases[case] if r["error"] is not None]
        assert any(r["error"] == "MismatchError" for r in raised), (case, cases[case])
        for r in cases[case]:
            where = (case, r)
            assert r["then_correct"], where  # the ranks carry on
            for stage, kind in r.get("errors", []):
                assert stage in STAGES[: STAGES.index(by) + 1], where
                assert kind in ("MismatchError", "CollectiveError"), where  # never a timeout
            if r["error"] is not None:
                assert r["collective_error"] and r["seconds"] < 6.0, where
    for r in cases["allreduce_op"]:
        assert r["stage"] == "call" and r["error"] == "MismatchError", r
        assert r["follow_up_correct"], r  # the very next call succeeds
    assert any("reduction operation" in r["message"] for r in cases["allreduce_op"])
    assert any("datatype" in r["message"] for r in cases["allreduce_dtype"])
    user = cases["user_op_raises"]  # raises on every rank that combines
    assert any(r["error"] == "RuntimeError" for r in user), user
    for r in user:
        assert r["stage"] == "call" and r["seconds"] < 6.0, r
        assert r["follow_up_correct"] and r["then_correct"], r
        if r["error"] == "RuntimeError":
            assert "user op failed" in r["message"], r
        else:  # told by a rank whose op raised
            assert r["error"] == "CollectiveError" and "user op failed" in r["message"], r
    for r in cases["matching"]:
        assert r["error"] is None and r["correct"] and r["follow_up_correct"], r


FAILURES = {
    # failure: the kinds a rank may raise in that call (None: it completed, correctly)
    "user_op_raises": {"RuntimeError", "CollectiveError"},
    "dtype_differs": {"MismatchError"},
    "size_differs": {"MismatchError", None},
    "late_rank": {"CollectiveTimeout", None},
    "counts_disagree": {"MismatchError", None},
    "bad_arguments_everywhere": {"Exception"},
}


@pytest.mark.parametrize("emulate", ["1", "0"])
def test_a_failed_call_leaves_the_communicator_usable(emulate):
    """A program that catches a failed call's error and carries on gets correct results
    afterwards, on every rank, in every collective: a raising user op, a datatype or
    size that differs, a rank late past the timeout, a Scatterv buffer that disagrees
    with the counts, bad arguments. Mismatched roots (every rank's own view
    consistent) are found by a stray, at the latest in the next call, and only there."""
    env = clean_env(GRIDCOLL_GRID="magpie:2,2", GRIDCOLL_EMULATE=emulate)
    proc = mpirun(4, "recovery.py", env=env, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
    found = {c["failure"]: c["ranks"] for c in map(json.loads, proc.stdout.splitlines())}
    assert set(found) == {*FAILURES, "root_differs"}
    for failure, kinds in FAILURES.items():
        ranks = found[failure]
        assert any(r["raised"] is not None for r in ranks), (failure, ranks)
        for r in ranks:
            assert r["raised"] in kinds and r["after"] == [], (failure, r)
    late = found["root_differs"]
    for r in late:
        assert r["raised"] in (None, "MismatchError"), r
        assert all(name == "bcast" and "call before this one" in why for name, why in r["after"]), r
    assert any(r["raised"] or r["after"] for r in late), late  # the strays tell


def test_calls_that_move_no_data_complete_without_a_message():
    """Every collective and v-form with zero-length or ``None`` buffers (mpi4py's
    forms) completes on an emulated grid without running a program, but the v-forms
    whose counts the ranks must first agree on (Scatterv, Gatherv: the root's;
    Alltoallv: every rank's), which run that agreement alone; the next call with data
    is right."""
    env = clean_env(GRIDCOLL_GRID="magpie:2,2", GRIDCOLL_EMULATE="1")
    proc = mpirun(4, "zero_size.py", env=env, timeout=180)
    assert proc.returncode == 0, proc.stderr[-3000:]
    ranks = json.loads(proc.stdout.strip().splitlines()[-1])
    agreeing = {"Scatterv", "Gatherv", "Alltoallv"}
    for r in ranks:
        assert r["errors"] == {} and r["after"], r
        assert len(r["programs"]) == 25, r
        for name, programs in r["programs"].items():
            assert programs == (1 if name in agreeing else 0), (name, r)


def test_scatter_of_none_at_the_root_fails_every_rank():
    """The root's Scatter(None) raises there (mpi4py's TypeError, no message sent); the
    other ranks raise MismatchError once the root makes its next call, well within
    their 20 s timeout."""
    proc = mpirun(4, "scatter_none.py", env=clean_env(GRIDCOLL_GRID="magpie:2,2"), timeout=180)
    assert proc.returncode == 0, proc.stderr[-3000:]
    ranks = json.loads(next(x for x in proc.stdout.splitlines() if x.startswith("[")))
    assert ranks[0]["error"] == "TypeError", ranks[0]
    for r in ranks[1:]:
        assert r["error"] == "MismatchError" and r["seconds"] < 10, r


def test_gridcoll_check_finds_disagreement_on_native_calls():
    """GRIDCOLL_CHECK=1: on one cluster (the MPI library's own collectives, no header)
    every rank of a call whose ranks disagree raises MismatchError naming the field."""
    proc = mpirun(4, "checked.py", env=clean_env(GRIDCOLL_CHECK="1"), timeout=180)
    assert proc.returncode == 0, proc.stderr[-3000:]
    ranks = json.loads(next(x for x in proc.stdout.splitlines() if x.startswith("[")))
    assert len(ranks) == 4
    for r in ranks:
        kind, text = r["allreduce_op"]
        assert kind == "MismatchError" and "reduction operation" in text, r
        kind, text = r["bcast_root"]
        assert kind == "MismatchError" and "different root" in text, r
        assert r["agreeing"] == ["ok", 12.0], r


# -- the WAN emulator --------------------------------------------------------------------


@pytest.mark.parametrize("sharing", ["fifo", "fair"])
def test_emulated_link_delivers_1MB_in_1_01_s_and_shares_it_as_the_grid_says(sharing):
    """magpie:2,2: 10 ms, 1 MB/s pair links; 10**6 bytes (tests/mpi/emulator_timing.py).
    FIFO serves two messages one after the other; fair sharing splits the link."""
    grid = "magpie:2,2" if sharing == "fifo" else "magpie:2,2+fair"
    proc = mpirun(4, "emulator_timing.py", grid, env=clean_env())
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = last_json(proc)
    assert out["one"] == pytest.approx(1.01, rel=0.15)
    first, second = sorted(out["two"])
    early, late = out["late"]  # the second message was sent 0.5 s after the first
    if sharing == "fifo":
        assert first == pytest.approx(1.01, rel=0.15)
        assert second == pytest.approx(2.01, rel=0.15)
        assert early == pytest.approx(1.01, rel=0.15)
    else:
        assert first == pytest.approx(2.01, rel=0.15)
        assert second == pytest.approx(2.01, rel=0.15)
        assert early == pytest.approx(1.51, rel=0.15)
    assert late == pytest.approx(1.51, rel=0.15)


# -- failures -----------------------------------------------------------------------------


def test_a_rank_that_exits_early_is_named():
    grid = get_grid("lan:4")
    start = time.monotonic()
    result = run_worker(
        grid, 4096, algo="binomial", params={}, repeat=2, emulate=False, timeout=3.0, fail_rank=2
    )
    assert time.monotonic() - start < 60
    assert not result.ok and not result.verified
    assert result.failed_ranks == [2]
    states = {r.rank: r.state for r in result.ranks}
    assert states[2] == "died"
    waiting = [r for r in result.ranks if r.state == "error" and r.peer == 2]
    assert waiting, result.ranks  # its parent or child says it waited for rank 2
    assert "rank 2 failed" in result.describe_failure()


def test_a_rank_that_never_joins_is_named():
    grid = get_grid("lan:3")
    result = run_worker(
        grid,
        1000,
        algo="flat",
        params={},
        repeat=1,
        emulate=False,
        timeout=2.0,
        fail_rank=1,
        fail_mode="hang",
    )
    assert result.killed and not result.verified
    assert result.failed_ranks == [1]
    assert {r.rank: r.state for r in result.ranks}[1] == "hung"


def test_a_root_that_never_joins_a_native_broadcast_is_named():
    """One cluster: auto calls the MPI library's blocking broadcast; the watchdog ends
    the job after the timeout and the waiting ranks say why."""
    start = time.monotonic()
    result = run_worker(
        get_grid("lan:3"),
        1000,
        algo="auto",
        repeat=1,
        emulate=False,
        timeout=2.0,
        fail_rank=0,
        fail_mode="hang",
    )
    assert time.monotonic() - start < 60
    assert not result.ok and not result.verified
    assert result.failed_ranks == [0]
    waiting = {r.rank: r.message for r in result.ranks if r.state == "error"}
    assert set(waiting) == {1, 2}
    assert all("native broadcast did not complete within 2 s" in m for m in waiting.values())


# -- the launch commands ----------------------------------------------------------------


def gridcoll_cli(*args: str, timeout: float = 180):
    cmd = [sys.executable, "-m", "gridcoll.cli.main", *args]
    return subprocess.run(
        cmd, env=clean_env(), capture_output=True, text=True, timeout=timeout, check=False
    )


def test_run_json(tmp_path):
    grid = write_grid(tmp_path, fast_grid({"A": 2, "B": 2}))
    proc = gridcoll_cli(
        "run",
        "--grid",
        str(grid),
        "--size",
        "100KB",
        "--repeat",
        "3",
        "--json",
        "--algo",
        "magpie-segmented",
    )
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    for key in (
        "op",
        "grid",
        "size",
        "root",
        "algorithm",
        "segment_size",
        "predicted_s",
        "bound_s",
        "candidates",
        "simulated_s",
        "measured_s",
        "measured_all_s",
        "verified",
    ):
        assert key in out, key
    assert out["verified"] is True and len(out["measured_all_s"]) == 3
    assert out["algorithm"] == "magpie-segmented" and out["emulated"] is True
    # the emulated WAN is what the simulator models: generous agreement
    assert out["measured_s"] == pytest.approx(out["simulated_s"], rel=0.5, abs=0.01)


def test_run_text_and_bad_arguments():
    proc = gridcoll_cli("run", "--grid", "magpie:2,1", "--size", "64KB", "--repeat", "1")
    assert proc.returncode == 0, proc.stderr
    assert "verified  yes" in proc.stdout and "simulated" in proc.stdout
    bad = gridcoll_cli("run", "--grid", "magpie:2,1", "--size", "64KB", "--root", "5")
    assert bad.returncode == 2 and "root 5 is out of range" in bad.stderr


def test_mpirun_runs_an_unchanged_app(tmp_path):
    grid = write_grid(tmp_path, fast_grid({"A": 3, "B": 1}))
    proc = gridcoll_cli("mpirun", "--grid", str(grid), "--", sys.executable, str(HERE / "app.py"))
    assert proc.returncode == 0, proc.stderr
    out = last_json(proc)
    assert out == {
        **out,
        "grid": "fast-A3-B1",
        "nranks": 4,
        "emulated": True,
        "verified": True,
        "object": {"hello": "grid"},
    }
    mismatch = gridcoll_cli("mpirun", "--grid", str(grid), "-n", "3", "--", "true")
    assert mismatch.returncode == 2 and "does not match" in mismatch.stderr


def test_measure_schedule_for_the_demo():
    from gridcoll.algorithms import get_builder

    grid = get_grid("magpie:2,1")
    schedule = get_builder("bcast", "flat").build(grid, 10_000, 0)
    times = measure_schedule(grid, schedule, repeat=2)
    assert len(times) == 2
    assert min(times) == pytest.approx(0.010 + 0.010008, rel=0.3)  # L + g(10 kB)


def test_default_mpiexec_is_the_wheels():
    assert Path(default_mpiexec()).name == "mpiexec"


# -- ranks on several hosts, faked on this machine --------------------------------------


def hosts_grid(tmp_path: Path, clusters: dict[str, int], hosts: dict[str, list[str]]) -> Path:
    """A fast grid whose clusters name the hosts their ranks run on."""
    data = fast_grid(clusters)
    for entry in data["clusters"]:
        entry["hosts"] = hosts[entry["name"]]
    return write_grid(tmp_path, data)


def _hosts_run(n: int, grid: str, mode: str, env: dict) -> list[dict]:
    proc = mpirun(n, "hosts.py", grid, mode, env=env, timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    return last_json(proc)["ranks"]


def test_several_hosts_place_ranks_by_host_and_run_without_doorbells(tmp_path):
    """Six ranks on three fake hosts (two each), cluster A on hosts 0 and 2: the ranks
    are placed 0-1 and 4-5 in A, 2-3 in B; Bcast, Gather and Allreduce give mpi4py's
    results with plain sleeps (no doorbells: they need one machine)."""
    grid = hosts_grid(tmp_path, {"A": 4, "B": 2}, {"A": ["host-[02]"], "B": ["HOST-1"]})
    env = clean_env(GRIDCOLL_FAKE_HOSTNAME="host-{rank//2}")
    ranks = _hosts_run(6, str(grid), "collectives", env)
    hosts = ["host-0", "host-0", "host-1", "host-1", "host-2", "host-2"]
    for report in ranks:
        assert report["wrong"] == [], report
        assert report["doorbells"] is False
        assert report["hosts"] == hosts
        assert report["cluster_of"] == [0, 0, 1, 1, 0, 0]
        assert report["grid_hosts"] == [[], []]  # resolved: the placement replaced them
        assert "two-level" in report["algorithms"][0]  # a gridcoll schedule, not native
    explain = ranks[0]["explain"].splitlines()
    assert explain[-3:] == [
        "ranks placed by host:",
        "cluster 'A': ranks 0-1, 4-5 on 'host-0', 'host-2'",
        "cluster 'B': ranks 2-3 on 'host-1'",
    ]
    assert ranks[1]["split_note"].splitlines()[-2:] == [  # odd ranks 1, 3, 5
        "cluster 'A': ranks 0, 2 on 'host-0', 'host-2'",
        "cluster 'B': rank 1 on 'host-1'",
    ]


def test_several_hosts_from_a_list_and_the_launch_grid(tmp_path):
    """Four ranks named one by one (``a1,b1,b1,a1``) on the launch's grid
    (``GRIDCOLL_GRID``, placed by host on the communicator's own hosts)."""
    grid = hosts_grid(tmp_path, {"A": 2, "B": 2}, {"A": ["a*"], "B": ["b1"]})
    env = clean_env(GRIDCOLL_GRID=str(grid), GRIDCOLL_FAKE_HOSTNAME="a1,b1,b1,a1")
    for report in _hosts_run(4, "-", "collectives", env):
        assert report["wrong"] == [], report
        assert report["doorbells"] is False and report["cluster_of"] == [0, 1, 1, 0]


def test_several_hosts_refuse_the_emulation_clearly(tmp_path):
    """The emulation needs one machine: placed by host, making the Comm raises; placed
    by number (the launch's grid), the first collective raises and the Comm stays
    unusable (never unemulated)."""
    by_host = hosts_grid(tmp_path, {"A": 4, "B": 2}, {"A": ["host-[02]"], "B": ["host-1"]})
    plain = tmp_path / "plain.json"
    plain.write_text(json.dumps(fast_grid({"A": 3, "B": 3})))
    env = clean_env(
        GRIDCOLL_FAKE_HOSTNAME="host-{rank//2}", GRIDCOLL_EMULATE="1", GRIDCOLL_GRID=str(plain)
    )
    why = (
        "runs on one machine (its link state is shared memory, its delivery times one "
        "machine's monotonic clock), but the ranks run on 3 hosts: 'host-0', 'host-1', "
        "'host-2'; run every rank on one host, or turn the emulation off"
    )
    for report in _hosts_run(6, str(by_host), "emulated", env):
        kind, text = report["by_host"]
        assert kind == "GridError" and text.startswith("the WAN emulation of grid 'fast-A4-B2'")
        assert why in text and "\n" not in text
        kind, text = report["first_call"]
        assert kind == "GridError" and "grid 'fast-A3-B3'" in text and why in text
        kind, text = report["second_call"]
        assert kind == "CollectiveError" and "cannot run: the WAN emulation" in text


def test_several_hosts_worker_times_barrier_to_barrier(tmp_path):
    """``gridcoll run``'s worker on fake hosts: no common clock, so barrier-to-barrier
    timing at rank 0 and a barrier verified by completing; bytes still verified."""
    grid = write_grid(tmp_path, fast_grid({"A": 2, "B": 2}))
    env = clean_env(GRIDCOLL_GRID=str(grid), GRIDCOLL_FAKE_HOSTNAME="host-{rank//2}")
    calls = ((Call("barrier"), PlanOptions()), (Call("bcast", 4096), PlanOptions()))
    batch = tmp_path / "batch.json"
    batch.write_text(json.dumps(Batch(calls, repeat=2).to_json()))
    cmd = mpiexec_command(4, [sys.executable, "-m", "gridcoll.runtime.worker", str(batch)])
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    line = next(x for x in proc.stdout.splitlines() if x.startswith("GRIDCOLL-RESULT "))
    result = json.loads(line.split(" ", 1)[1])
    assert result["timing"] == "barrier" and result["verified"] and not result["emulated"]
    assert [(c["op"], c["verified"]) for c in result["cases"]] == [
        ("barrier", True),
        ("bcast", True),
    ]


# -- the record of a run (GRIDCOLL_LOG, GRIDCOLL_ALGO) ---------------------------------


def _log_lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_a_logged_run_writes_one_line_per_call_and_the_report_reads_it(tmp_path, capsys):
    from gridcoll.cli.main import main

    grid = write_grid(tmp_path, fast_grid({"A": 2, "B": 2}, ["A", "B", "B", "A"]))
    algo = "bcast:binomial; allreduce:two-level"
    log = tmp_path / "run-{rank}.jsonl"
    proc = gridcoll_cli(
        "mpirun", "--grid", str(grid), "--algo", algo, "--log", str(log), "--",
        sys.executable, str(HERE / "logged.py"),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    out = last_json(proc)
    assert out["used"]["bcast"] == "binomial" and out["used"]["allreduce"] == "two-level"
    ncalls = sum(out["calls"].values())
    for rank in range(4):
        lines = _log_lines(tmp_path / f"run-{rank}.jsonl")
        assert len(lines) == ncalls, (rank, lines)
        assert [line["call"] for line in lines] == list(range(1, ncalls + 1))
        counts: dict[str, int] = {}
        for line in lines:
            counts[line["op"]] = counts.get(line["op"], 0) + 1
            assert line["format"] == "gridcoll-log/1"
            assert line["rank"] == rank and line["nranks"] == 4
            assert line["grid"] == "fast-A2-B2"
            assert line["algorithm"] == out["used"][line["op"]]
            assert line["measured_s"] > 0 and line["prepare_s"] >= 0
            assert line["predicted_s"] > 0 and line["bound_s"] > 0
            assert isinstance(line["params"], dict)
            assert (line["root"] is None) == (
                line["op"] not in ("bcast", "scatter", "gather", "reduce")
            )
        assert counts == out["calls"]
        by_op = {line["op"]: line for line in lines}
        assert by_op["bcast"]["size"] == 4096 and by_op["bcast"]["root"] == 0
        assert by_op["allreduce"]["size"] == 8000 and by_op["reduce"]["root"] == 3
        assert by_op["scatter"]["size"] == 80 and by_op["scatter"]["root"] == 1
        # crossing the emulated 1 ms WAN: no call of these is faster than a latency
        assert by_op["allreduce"]["measured_s"] > 1e-3
    files = [str(tmp_path / f"run-{rank}.jsonl") for rank in range(4)]
    assert main(["report", *files, "--json", "--plot", str(tmp_path / "r.png")]) == 0
    report = json.loads(capsys.readouterr().out)
    rows = {row["op"]: row for row in report["rows"]}
    assert set(rows) == set(out["calls"])
    assert rows["bcast"]["calls"] == 3 and rows["bcast"]["ranks"] == 4
    assert rows["bcast"]["algorithms"] == {"binomial": 12}
    assert rows["allreduce"]["calls"] == 2 and rows["allreduce"]["ratio"] > 0
    assert report["lines"] == 4 * ncalls and report["most_wrong"]["op"] in rows
    assert (tmp_path / "r.png").stat().st_size > 0


def test_ranks_share_one_log_line_by_line_and_the_hot_path_yields(tmp_path):
    log = tmp_path / "shared.jsonl"
    env = clean_env(GRIDCOLL_LOG=str(log))
    proc = mpirun(3, "logged.py", env=env, timeout=180)
    assert proc.returncode == 0, proc.stderr
    out = last_json(proc)
    lines = _log_lines(log)  # every line whole: json.loads would fail on a torn one
    ncalls = sum(out["calls"].values())
    assert len(lines) == 3 * ncalls
    assert sorted(line["rank"] for line in lines) == sorted(list(range(3)) * ncalls)
    bcasts = [line for line in lines if line["op"] == "bcast"]
    assert len(bcasts) == 9 and {line["algorithm"] for line in bcasts} == {"native"}
    assert all(line["grid"] == "lan:3" for line in lines)


# -- load on the emulated WAN (network.load) -----------------------------------------------


@pytest.mark.parametrize("sharing", ["fifo", "fair"])
def test_a_50_percent_load_doubles_an_emulated_wan_message(tmp_path, sharing):
    """gridcoll mpirun --load: 0 -> 1 crosses A->B, loaded 50%; 1 -> 0 crosses B->A, free.
    On fair links the load is a competing flow holding half the link (flow_table)."""
    grid = fast_grid({"A": 1, "B": 1})
    grid["link_sharing"] = sharing
    grid_file = write_grid(tmp_path, grid)
    trace = tmp_path / "load.json"
    loads = [{"link": "A->B", "fraction": 0.5, "from": 0, "to": 10**6}]
    trace.write_text(json.dumps({"format": "gridcoll-load/1", "loads": loads}))
    cmd = [sys.executable, "-m", "gridcoll", "mpirun", "--grid", str(grid_file)]
    cmd += ["--load", str(trace), "--", sys.executable, str(HERE / "load_timing.py")]
    proc = subprocess.run(
        cmd, env=clean_env(), capture_output=True, text=True, timeout=300, check=False
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = last_json(proc)
    # 1 ms + 20 us + g(4 MB) = 40 ms unloaded; 80 ms under the load
    assert 0.030 < out["free"] < 0.080, out
    assert 1.6 < out["loaded"] / out["free"] < 2.6, out
