"""The soak test: 1,000 mixed collectives on 8 ranks against mpi4py's
own results, with the memory growth reported.

``tests/mpi/soak.py`` runs under ``mpiexec -n 8`` through one ``gridcoll.Comm`` with
``algo="auto"``: random collectives (the buffer forms, ``Barrier`` and three object
forms), sizes (0 to 64 KiB mostly, some up to 1 MiB), roots, dtypes and reduction
operations drawn from a fixed seed, every result compared byte for byte with
``MPI.COMM_WORLD``'s (a duplicate) on the same inputs.

The grid: three clusters of 3, 3 and 2 ranks with interleaved placement (ranks of one
cluster are not consecutive), the WAN emulated. Emulation is on so the calls take the
runtime's emulated path (inline headers, link reservations, delivery times), but on
``fast_grid``'s links (1-2 ms, 50-100 MB/s) rather than a MagPIe preset (10 ms, 1 MB/s:
one 64 KiB message alone would take 65 ms), so 1,000 calls with their 1,000 references
stay within about two minutes on two shared cores. Random sizes make most calls a new
call signature, so the tuner plans hundreds of calls and the plan and program caches
fill and evict as in a long job: the memory check covers them.

Bounded: the launch has a subprocess timeout (a hang fails the test), the calls a
per-call gridcoll timeout. The memory bound is generous (64 MiB per rank after a
100-call warm-up): a real leak (a buffer, a plan or a schedule kept per call) exceeds
it; allocator noise does not.
"""

import time

import pytest

pytest.importorskip("mpi4py")

from test_runtime_mpi import clean_env, fast_grid, last_json, mpirun, write_grid

pytestmark = [pytest.mark.slow, pytest.mark.mpi]

CALLS = 1000
WARMUP = 100
MAX_GROWTH_KIB = 64 * 1024
TIMEOUT_S = 420
"""The launch's wall-clock bound (a run takes about 2 minutes on the loaded 2-core
development machine)."""


def test_soak_1000_mixed_calls_on_8_ranks(tmp_path, capsys):
    placement = ["A", "B", "C", "A", "B", "C", "A", "B"]
    grid = write_grid(tmp_path, fast_grid({"A": 3, "B": 3, "C": 2}, placement))
    env = clean_env(GRIDCOLL_GRID=str(grid), GRIDCOLL_EMULATE="1")
    args = ["--seed", "11", "--calls", str(CALLS), "--warmup", str(WARMUP)]
    start = time.monotonic()
    proc = mpirun(8, "soak.py", *args, env=env, timeout=TIMEOUT_S)
    wall = time.monotonic() - start
    assert proc.returncode in (0, 1), proc.stderr[-3000:]  # 1: a difference, listed below
    out = last_json(proc)
    with capsys.disabled():
        print(
            f"\nsoak: {out['calls']} calls on {out['nranks']} ranks in {out['elapsed_s']:.1f} s "
            f"({wall:.1f} s with the launch); RSS after {WARMUP} calls "
            f"{max(out['rss_warm_kib']) / 1024:.1f} MiB, at the end "
            f"{max(out['rss_end_kib']) / 1024:.1f} MiB; largest growth of a rank "
            f"{out['growth_kib'] / 1024:.2f} MiB (plan cache {out['plans_cached']} of "
            f"{out['plans_maxsize']} plans)"
        )
    assert out["nfailures"] == 0, out["failures"]
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert out["calls"] == CALLS and out["nranks"] == 8 and out["emulated"] is True
    assert sum(out["per_op"].values()) == CALLS and len(out["per_op"]) == 11  # every kind
    assert len(out["rss_end_kib"]) == 8 and min(out["rss_warm_kib"]) > 0
    assert out["growth_kib"] < MAX_GROWTH_KIB, out
