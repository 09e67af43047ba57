"""gridcoll as a drop-in: unchanged mpi4py programs with ``MPI.COMM_WORLD`` swapped.

Two figures, each measured plain and swapped side by side in one run.

1. **Zero-byte collectives on an emulated grid.** ``bench/dropin_zero.py``, an mpi4py
   program that knows nothing of gridcoll, times ``--calls`` back-to-back calls of each
   of ``Bcast``, ``Allreduce``, ``Gather``, ``Scatter``, ``Allgather``, ``Alltoall``
   and ``Reduce`` with zero-length ``int32`` numpy buffers and with ``[None, MPI.INT]``,
   on 4 ranks: (a) plain mpi4py, ``mpiexec -n 4 python bench/dropin_zero.py``; (b)
   swapped, ``python -m gridcoll mpirun --grid magpie:2,2 --world -- python -m gridcoll
   bench/dropin_zero.py`` (two clusters of two ranks, the 10 ms WAN links emulated; the
   program checks the emulation with a 4-byte round trip across it). Per call: each
   rank's mean over the calls, the median over the ranks, the median over ``--runs``
   alternating launches. Goal (the project's): a zero-byte gridcoll collective costs
   under 100 us on an emulated grid (the verdict is on that figure). Beside it, the
   per-call time of each rank's fastest tenth of the calls (``best_batch_s``): what a call
   costs when its rank is not preempted (4 ranks on 2 shared cores are, often).

2. **A third-party library's test suite, one cluster.** pylops-mpi (PyPI
   ``pylops-mpi``; its operators default to ``base_comm=MPI.COMM_WORLD`` and call
   ``allreduce``, ``allgather``, ``Allreduce``... on it) is not a dependency of
   gridcoll: the bench needs it installed (``pip install -e ".[bench]"``; without it the
   script says so and exits 2). Its tests are not in the wheel: the source distribution
   of the installed version is fetched once with ``pip download --no-deps --no-binary
   :all: pylops-mpi==V`` into ``~/.cache/gridcoll/pylops-mpi-V/`` (``$XDG_CACHE_HOME``
   honoured) without its ``pylops_mpi/`` package folder, so the installed package is
   what the tests import. pylops-mpi's CI runs ``mpiexec -n N pytest tests/
   --with-mpi`` (N = 2 and 4; ``--with-mpi`` is pytest-mpi's, which only un-skips the
   tests marked ``mpi``: without the plugin they all run, the mark unknown); here N = 2,
   ``TEST_CUPY_PYLOPS=0`` as in its Makefile, ``-p no:cacheprovider`` (two ranks, one
   cache folder):

   * plain: ``mpiexec -n 2 python -m pytest -q tests/...``
   * swapped: ``mpiexec -n 2 python -m gridcoll -m pytest -q tests/...``;
   * once more swapped, not timed against plain, with ``GRIDCOLL_LOG=<dir>/log-{rank}.jsonl``
     (one file per rank): a call log writes a line per call, which the timed runs do not.

   Each is timed as a whole process (``mpiexec`` start to exit), alternately A B A B
   (``--pairs``, default 3; ``--quick`` 1). Per pair: swapped over plain (goal: the
   median within 1.3x); per run and rank the tests passed, failed, errored and skipped
   (pytest's closing line of each rank; pylops-mpi's ``conftest.py`` appends ``[Rank
   r]`` to every test id), which must be equal plain and swapped: a test failing only
   under gridcoll is listed with its error (pytest's short summary line), never hidden;
   the gridcoll collective calls in the log (per rank and by collective) and the
   planning share, the sum of ``prepare_s`` over the log's lines divided by the logged
   run's wall time (``planning_share``: every rank's lines; ``planning_share_rank``: the
   largest one rank's sum, since the ranks plan in parallel); the share of the wall time
   a rank spent inside gridcoll's collectives (``collective_share_rank``: the sum of its
   ``measured_s``, the largest rank's); and the wall-time difference over the most calls
   one rank made (``extra_per_call_s``).

   The whole suite takes about 9 minutes per run on 2 busy cores, too long for 6 runs:
   by default the bench runs the subset :data:`SUBSET` (7 of the 17 files, about
   580,000 gridcoll calls per rank; ``--quick``: :data:`QUICK_SUBSET`; ``--all-tests``:
   every ``tests/test_*.py``; ``--tests`` names others). ``test_ffts.py`` is left out of both:
   its 48 tests need ``mpi4py-fft`` (an optional extra of pylops-mpi) and fail with
   ``NameError: name 'Subcomm' is not defined`` without it, plain and swapped alike.

Each run's full output is kept in ``<out>-logs/`` beside the JSON (``bench/results/
dropin-logs/`` by default). Times depend on what else runs on the machine (the JSON
records the load average at the end).

Run: ``python bench/dropin.py [--quick] [--only zero|suite] [--out bench/results/dropin.json]``.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from collections import Counter
from pathlib import Path

from _common import Bench, console, table, times

HERE = Path(__file__).resolve().parent
ZERO_PROGRAM = HERE / "dropin_zero.py"
ZERO_GRID = "magpie:2,2"
ZERO_RANKS = 4
ZERO_GOAL_S = 100e-6
"""A zero-byte gridcoll collective on an emulated grid costs less than this."""
SUITE_RANKS = 2
SUITE_GOAL = 1.3
"""The swapped test suite may take at most this times the plain one (median of pairs)."""
SUBSET = (
    "tests/test_blockdiag.py",
    "tests/test_eigs.py",
    "tests/test_halo.py",
    "tests/test_prox.py",
    "tests/test_solver.py",
    "tests/test_sparsity.py",
    "tests/test_stackedlinearop.py",
)
"""The default test files: every file making over 1,000 gridcoll calls per rank
(measured file by file, swapped) that runs in under 40 s plain on 2 busy cores, less
``test_linearop.py`` and ``test_stackedarray.py`` (about 2,000 calls each for 20 s):
about 580,000 calls per rank (``test_sparsity.py`` 516,000, ``test_eigs.py`` 43,000,
``test_solver.py`` 12,000), about 2 minutes plain. Left out for time:
``test_derivative.py`` (22,000 calls, 80 s) and ``test_proxsolver.py`` (490,000 calls,
165 s); for few calls: ``test_distributedarray.py``, ``test_fredholm.py``,
``test_matrixmult.py``, ``test_nonstatconvolve.py``, ``test_stack.py``."""
QUICK_SUBSET = ("tests/test_eigs.py", "tests/test_solver.py")
"""``--quick``: about 55,000 calls per rank, 25 s plain."""
EXCLUDED = ("tests/test_ffts.py",)
"""Never run: needs ``mpi4py-fft`` (pylops-mpi's optional extra), fails without it."""
RUN_TIMEOUT_S = 3600.0
ZERO_RESULT = "DROPIN-ZERO "
PYTEST_ARGS = ("-q", "-p", "no:cacheprovider")
INSTALL_HINT = (
    "bench/dropin.py needs pylops-mpi and pytest for its second figure (the bench extra): "
    'pip install -e ".[bench]"  (or run only the first: --only zero)'
)


def us(x: float | None) -> str:
    return "-" if x is None else (f"{x * 1e6:.1f} us" if x < 1e-3 else f"{x * 1e3:.2f} ms")


def _clean_env(**extra: str) -> dict[str, str]:
    """This environment without any GRIDCOLL_ variable, oversubscription allowed."""
    from gridcoll.runtime.processes import OVERSUBSCRIBE_ENV

    env = {k: v for k, v in os.environ.items() if not k.startswith("GRIDCOLL_")}
    env.update(OVERSUBSCRIBE_ENV)
    env.update(extra)
    return env


def _run(cmd: list[str], env: dict[str, str], cwd: Path | None, log: Path) -> tuple[int, float]:
    """Run ``cmd`` (its own session) with its output in ``log``; (status, wall seconds).
    A run past :data:`RUN_TIMEOUT_S` is killed (its process group) and returns -9."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("w") as out:
        out.write("$ " + " ".join(cmd) + "\n")
        out.flush()
        start = time.perf_counter()
        proc = subprocess.Popen(
            cmd, env=env, cwd=cwd, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
        try:
            code = proc.wait(timeout=RUN_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            code = -9
        wall = time.perf_counter() - start
    return code, wall


# -- 1. zero-byte collectives --------------------------------------------------------------
def zero_run(swapped: bool, calls: int, logdir: Path, index: int) -> dict:
    """One launch of the zero-byte program; its ``DROPIN-ZERO`` document."""
    program = [str(ZERO_PROGRAM), "--calls", str(calls)]
    if swapped:
        cmd = [sys.executable, "-m", "gridcoll", "mpirun", "--grid", ZERO_GRID, "--world"]
        cmd += ["--", sys.executable, "-m", "gridcoll", *program]
    else:
        from gridcoll.runtime.processes import mpiexec_command

        cmd = mpiexec_command(ZERO_RANKS, [sys.executable, *program])
    log = logdir / f"zero-{'swapped' if swapped else 'plain'}-{index}.txt"
    code, wall = _run(cmd, _clean_env(), None, log)
    for line in log.read_text().splitlines():
        if line.startswith(ZERO_RESULT):
            doc = json.loads(line[len(ZERO_RESULT) :])
            doc.update(wall_s=wall, status=code, command=cmd)
            return doc
    tail = "\n".join(log.read_text().splitlines()[-15:])
    raise RuntimeError(f"zero-byte run failed ({code}), see {log}:\n{tail}")


def zero_part(bench: Bench, runs: int, calls: int, logdir: Path) -> dict:
    out = console()
    docs: dict[str, list[dict]] = {"plain": [], "swapped": []}
    for i in range(runs):
        for which in ("plain", "swapped") if i % 2 == 0 else ("swapped", "plain"):
            out.print(f"zero-byte collectives: {which} run {i + 1}/{runs} ({calls} calls each)")
            docs[which].append(zero_run(which == "swapped", calls, logdir, i))
    rows = []
    for n, case in enumerate(docs["plain"][0]["cases"]):
        plain = [d["cases"][n]["median_s"] for d in docs["plain"]]
        mine = [d["cases"][n]["median_s"] for d in docs["swapped"]]
        p, g = statistics.median(plain), statistics.median(mine)
        rows.append(
            bench.add(
                part="zero",
                op=case["op"],
                form=case["form"],
                calls=calls,
                plain_s=p,
                gridcoll_s=g,
                plain_runs_s=plain,
                gridcoll_runs_s=mine,
                gridcoll_per_rank_s=[d["cases"][n]["per_rank_s"] for d in docs["swapped"]],
                plain_best_batch_s=statistics.median(
                    d["cases"][n]["best_batch_s"] for d in docs["plain"]
                ),
                gridcoll_best_batch_s=statistics.median(
                    d["cases"][n]["best_batch_s"] for d in docs["swapped"]
                ),
                ratio=g / p if p > 0 else None,
                within_goal=g < ZERO_GOAL_S,
            )
        )
    swapped = docs["swapped"]
    wan = statistics.median(d["bcast_4B_s"] for d in swapped)
    summary = {
        "goal": f"a zero-byte gridcoll collective < {ZERO_GOAL_S * 1e6:.0f} us on {ZERO_GRID}",
        "grid": ZERO_GRID,
        "nranks": ZERO_RANKS,
        "runs": runs,
        "calls": calls,
        "cases": len(rows),
        "cases_within_goal": sum(r["within_goal"] for r in rows),
        "goal_met": all(r["within_goal"] for r in rows),
        "worst_gridcoll_s": max(r["gridcoll_s"] for r in rows),
        "worst_case": "{op} {form}".format(**max(rows, key=lambda r: r["gridcoll_s"])),
        "worst_gridcoll_best_batch_s": max(r["gridcoll_best_batch_s"] for r in rows),
        "cases_within_goal_best_batch": sum(r["gridcoll_best_batch_s"] < ZERO_GOAL_S for r in rows),
        "swapped_world": swapped[0]["world"],
        "plain_world": docs["plain"][0]["world"],
        "swapped_grid": swapped[0]["grid"],
        "swapped_env": swapped[0]["env"],
        "wan_check_bcast_4B_s": wan,
        "wan_emulated": wan >= 5e-3,
        "plain_wan_check_bcast_4B_s": statistics.median(d["bcast_4B_s"] for d in docs["plain"]),
        "launch_wall_s": {k: [d["wall_s"] for d in v] for k, v in docs.items()},
    }
    out.print(
        table(
            f"zero-byte collectives, {ZERO_RANKS} ranks, per call (median over ranks of each "
            f"rank's mean of {calls}; median of {runs} run(s)): plain mpi4py under mpiexec vs "
            f"swapped on {ZERO_GRID} (WAN emulated)",
            rows,
            [
                ("collective", "op", None),
                ("buffers", "form", lambda f: "numpy, 0 items" if f == "numpy" else "[None, INT]"),
                ("plain", "plain_s", us),
                ("gridcoll", "gridcoll_s", us),
                ("ratio", "ratio", times),
                ("< 100 us", "within_goal", lambda v: "yes" if v else "NO"),
                ("plain, best tenth", "plain_best_batch_s", us),
                ("gridcoll, best tenth", "gridcoll_best_batch_s", us),
            ],
        )
    )
    verdict = "met" if summary["goal_met"] else "NOT met"
    out.print(
        f"goal (zero-byte gridcoll collective < 100 us on an emulated grid): {verdict}: "
        f"{summary['cases_within_goal']}/{summary['cases']} within; worst "
        f"{us(summary['worst_gridcoll_s'])} ({summary['worst_case']}); on the fastest tenth "
        f"of each rank's calls {summary['cases_within_goal_best_batch']}/{summary['cases']} "
        f"within, worst {us(summary['worst_gridcoll_best_batch_s'])}. WAN check (half a "
        f"4-byte Bcast round trip across it): swapped {us(wan)} "
        f"({'emulated' if summary['wan_emulated'] else 'NOT emulated?'}), plain "
        f"{us(summary['plain_wan_check_bcast_4B_s'])}"
    )
    return summary


# -- 2. pylops-mpi's test suite ------------------------------------------------------------
def cache_root() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "gridcoll"


def fetch_sources(version: str) -> Path:
    """The folder holding pylops-mpi ``version``'s sdist (less its package folder)."""
    folder = cache_root() / f"pylops-mpi-{version}"
    if (folder / "tests" / "conftest.py").exists():
        return folder
    folder.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="pylops-mpi-sdist-") as tmp:
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:"]
        cmd += ["--disable-pip-version-check", f"pylops-mpi=={version}", "-d", tmp]
        done = subprocess.run(cmd, capture_output=True, text=True, check=False)
        archives = sorted(Path(tmp).glob("*.tar.gz"))
        if done.returncode or not archives:
            raise RuntimeError(f"{' '.join(cmd)} failed:\n{done.stdout[-1500:]}{done.stderr}")
        staging = Path(tmp) / "src"
        with tarfile.open(archives[0]) as tar:
            members = []
            for m in tar.getmembers():
                parts = Path(m.name).parts
                if len(parts) > 1 and parts[1] == "pylops_mpi":
                    continue  # the installed package is the one tested
                members.append(m)
            safe = {"filter": "data"} if hasattr(tarfile, "data_filter") else {}
            tar.extractall(staging, members=members, **safe)
        (top,) = list(staging.iterdir())
        shutil.rmtree(folder, ignore_errors=True)
        shutil.move(str(top), folder)
    return folder


_CLOSING = re.compile(r"^=+ (.*?) in [0-9.]+s( \([0-9:]+\))? =+$")
_COUNT = re.compile(r"(\d+) (passed|failed|errors?|skipped|xfailed|xpassed|deselected)")
_RANK = re.compile(r"\[Rank (\d+)\]")


def parse_pytest(text: str) -> dict:
    """Per rank's closing line: counts; and the FAILED / ERROR short-summary lines."""
    closings = []
    for line in text.splitlines():
        m = _CLOSING.match(line.strip())
        if m:
            counts = Counter()
            for n, what in _COUNT.findall(m.group(1)):
                counts["errors" if what.startswith("error") else what] += int(n)
            closings.append(dict(counts))
    failures = {}
    for line in text.splitlines():
        if line.startswith(("FAILED ", "ERROR ")):
            kind, _, rest = line.partition(" ")
            test, _, why = rest.partition(" - ")
            failures[test.strip()] = f"{kind}: {why.strip()}" if why else kind
    total = Counter()
    for c in closings:
        total.update(c)
    return {
        "ranks_reported": len(closings),
        "per_rank": closings,
        **dict(total),
        "failures": failures,
    }


def _outcome(result: dict) -> tuple:
    """What must be equal plain and swapped: every rank's counts, the failing tests."""
    ranks = sorted(json.dumps(c, sort_keys=True) for c in result["per_rank"])
    return ranks, sorted(result["failures"])


def read_logs(folder: Path) -> dict:
    """Calls, ops and planning time of one swapped run's per-rank logs."""
    per_rank, prepare, measured, ops = {}, {}, {}, Counter()
    for path in sorted(folder.glob("log-*.jsonl")):
        rank = path.stem.split("-", 1)[1]
        n = prep = meas = 0.0
        for line in path.read_text().splitlines():
            if not line.strip():
                continue
            rec = json.loads(line)
            n += 1
            prep += rec.get("prepare_s") or 0.0
            meas += rec.get("measured_s") or 0.0
            ops[rec["op"]] += 1
        per_rank[rank], prepare[rank], measured[rank] = int(n), prep, meas
    return {
        "calls": sum(per_rank.values()),
        "calls_per_rank": per_rank,
        "calls_by_op": dict(ops.most_common()),
        "prepare_s": sum(prepare.values()),
        "prepare_s_per_rank": prepare,
        "measured_s": sum(measured.values()),
        "measured_s_per_rank": measured,
    }


def suite_run(
    swapped: bool, folder: Path, tests: list[str], logdir: Path, index: int, logged: bool = False
) -> dict:
    """One run of the suite; ``logged`` (swapped only): with ``GRIDCOLL_LOG``, for the
    call counts and ``prepare_s`` (a timed run has no log: writing one line per call
    costs time plain mpi4py does not spend)."""
    from gridcoll.runtime.processes import mpiexec_command

    which = ("swapped-logged" if logged else "swapped") if swapped else "plain"
    program = [sys.executable, "-m", "gridcoll", "-m"] if swapped else [sys.executable, "-m"]
    cmd = mpiexec_command(SUITE_RANKS, [*program, "pytest", *PYTEST_ARGS, *tests])
    env = _clean_env(TEST_CUPY_PYLOPS="0", COLUMNS="400")
    with tempfile.TemporaryDirectory(prefix="gridcoll-dropin-") as tmp:
        if logged:
            env["GRIDCOLL_LOG"] = str(Path(tmp) / "log-{rank}.jsonl")
        log = logdir / f"suite-{which}-{index}.txt"
        code, wall = _run(cmd, env, folder, log)
        calls = read_logs(Path(tmp)) if logged else None
    result = parse_pytest(log.read_text())
    return {
        "which": which,
        "pair": index,
        "status": code,
        "wall_s": wall,
        "log": str(log),
        "command": cmd,
        "pytest": result,
        "gridcoll_log": calls,
    }


def suite_part(bench: Bench, pairs: int, tests: list[str], logdir: Path) -> dict:
    out = console()
    version = importlib.metadata.version("pylops-mpi")
    folder = fetch_sources(version)
    out.print(f"pylops-mpi {version}: tests from {folder}: {' '.join(tests)}")
    runs: dict[str, list[dict]] = {"plain": [], "swapped": []}
    for i in range(pairs):
        for which in ("plain", "swapped"):
            out.print(f"test suite: pair {i + 1}/{pairs}, {which}")
            runs[which].append(suite_run(which == "swapped", folder, tests, logdir, i))
    out.print("test suite: swapped, with GRIDCOLL_LOG (calls and planning, not timed)")
    logged = suite_run(True, folder, tests, logdir, 0, logged=True)
    log = logged["gridcoll_log"]
    rows = []
    for plain, mine in zip(runs["plain"], runs["swapped"], strict=True):
        pp, gp = plain["pytest"], mine["pytest"]
        only_swapped = sorted(set(gp["failures"]) - set(pp["failures"]))
        rows.append(
            bench.add(
                part="suite",
                pair=plain["pair"] + 1,
                plain_s=plain["wall_s"],
                gridcoll_s=mine["wall_s"],
                ratio=mine["wall_s"] / plain["wall_s"],
                plain_status=plain["status"],
                gridcoll_status=mine["status"],
                plain_passed=pp.get("passed", 0),
                gridcoll_passed=gp.get("passed", 0),
                plain_failed=pp.get("failed", 0) + pp.get("errors", 0),
                gridcoll_failed=gp.get("failed", 0) + gp.get("errors", 0),
                plain_ranks_reported=pp["ranks_reported"],
                gridcoll_ranks_reported=gp["ranks_reported"],
                plain_per_rank=pp["per_rank"],
                gridcoll_per_rank=gp["per_rank"],
                same_outcome=_outcome(pp) == _outcome(gp),
                failed_only_gridcoll={t: gp["failures"][t] for t in only_swapped},
                failed_only_plain=sorted(set(pp["failures"]) - set(gp["failures"])),
                calls=log["calls"],
                calls_per_rank=log["calls_per_rank"],
                extra_per_call_s=(mine["wall_s"] - plain["wall_s"])
                / max(max(log["calls_per_rank"].values(), default=1), 1),
                calls_by_op=log["calls_by_op"],
                prepare_s=log["prepare_s"],
                prepare_s_per_rank=log["prepare_s_per_rank"],
                collective_measured_s=log["measured_s"],
                collective_share_rank=max(log["measured_s_per_rank"].values(), default=0.0)
                / logged["wall_s"],
                planning_share=log["prepare_s"] / logged["wall_s"],
                planning_share_rank=max(log["prepare_s_per_rank"].values(), default=0.0)
                / logged["wall_s"],
                plain_log=plain["log"],
                gridcoll_log=mine["log"],
            )
        )
    ratios = [r["ratio"] for r in rows]
    median_ratio = statistics.median(ratios)
    failed_only = {}
    for r in rows:
        failed_only.update(r["failed_only_gridcoll"])
    summary = {
        "pylops_mpi": version,
        "source": str(folder),
        "tests": tests,
        "nranks": SUITE_RANKS,
        "pairs": pairs,
        "goal": f"swapped suite <= {SUITE_GOAL}x plain (median of pairs)",
        "ratios": ratios,
        "median_ratio": median_ratio,
        "goal_met": median_ratio <= SUITE_GOAL,
        "plain_passed": [r["plain_passed"] for r in rows],
        "gridcoll_passed": [r["gridcoll_passed"] for r in rows],
        "same_outcome": all(r["same_outcome"] for r in rows),
        "failed_only_gridcoll": failed_only,
        "calls": statistics.median(r["calls"] for r in rows),
        "calls_by_op": rows[-1]["calls_by_op"],
        "extra_per_call_s": statistics.median(r["extra_per_call_s"] for r in rows),
        "planning_share": statistics.median(r["planning_share"] for r in rows),
        "planning_share_rank": statistics.median(r["planning_share_rank"] for r in rows),
        "collective_share_rank": statistics.median(r["collective_share_rank"] for r in rows),
    }
    out.print(
        table(
            f"pylops-mpi {version} tests on {SUITE_RANKS} ranks, one cluster: plain mpi4py vs "
            "python -m gridcoll (whole processes, alternately)",
            rows,
            [
                ("pair", "pair", None),
                ("plain", "plain_s", lambda x: f"{x:.1f} s"),
                ("gridcoll", "gridcoll_s", lambda x: f"{x:.1f} s"),
                ("ratio", "ratio", times),
                ("passed plain", "plain_passed", None),
                ("passed gridcoll", "gridcoll_passed", None),
                ("failed plain", "plain_failed", None),
                ("failed gridcoll", "gridcoll_failed", None),
                ("gridcoll calls", "calls", None),
                ("prepare", "prepare_s", lambda x: f"{x:.2f} s"),
                ("planning share", "planning_share", lambda x: f"{x:.1%}"),
            ],
        )
    )
    verdict = "met" if summary["goal_met"] else "NOT met"
    out.print(
        f"goal (swapped within {SUITE_GOAL}x of plain): {verdict}: median ratio "
        f"{median_ratio:.2f}x over {pairs} pair(s); tests passed plain "
        f"{summary['plain_passed']}, swapped {summary['gridcoll_passed']} (counted over both "
        f"ranks); same outcome: {'yes' if summary['same_outcome'] else 'NO'}; "
        f"gridcoll calls (both ranks) {summary['calls']:.0f}, the wall-time difference per "
        f"call of one rank {us(summary['extra_per_call_s'])}; planning share "
        f"{summary['planning_share']:.1%} (every rank's prepare_s / wall; largest rank "
        f"{summary['planning_share_rank']:.1%}); inside gridcoll collectives (measured_s, "
        f"largest rank) {summary['collective_share_rank']:.0%} of the wall time"
    )
    ops = ", ".join(f"{k} {v}" for k, v in summary["calls_by_op"].items())
    out.print(f"gridcoll calls by collective (last pair, both ranks): {ops}")
    for r in rows:
        for which in ("plain", "gridcoll"):
            if r[f"{which}_status"] not in (0, 1) or r[f"{which}_ranks_reported"] != SUITE_RANKS:
                out.print(
                    f"[bold]pair {r['pair']}, {which}: exit status {r[f'{which}_status']}, "
                    f"{r[f'{which}_ranks_reported']} of {SUITE_RANKS} ranks closed pytest[/bold] "
                    f"(see {r[f'{which}_log']})"
                )
    for test, why in failed_only.items():
        out.print(f"[bold]failed only under gridcoll[/bold]: {test}: {why}")
    return summary


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    bench = Bench("dropin", "unchanged mpi4py programs, MPI.COMM_WORLD swapped", argv)
    bench.parser.add_argument(
        "--only", choices=("zero", "suite"), default=None, help="run only one of the two parts"
    )
    bench.parser.add_argument("--runs", type=int, default=None, help="zero-byte launches each")
    bench.parser.add_argument("--calls", type=int, default=None, help="zero-byte calls per case")
    bench.parser.add_argument("--pairs", type=int, default=None, help="test-suite pairs")
    bench.parser.add_argument(
        "--tests", nargs="+", default=None, metavar="FILE", help="pylops-mpi test files"
    )
    bench.parser.add_argument(
        "--all-tests", action="store_true", help="every tests/test_*.py (about 9 min a run)"
    )
    args = bench.parse()
    want_suite = args.only in (None, "suite")
    if want_suite and not all(importlib.util.find_spec(m) for m in ("pylops_mpi", "pytest")):
        print(INSTALL_HINT, file=sys.stderr)
        return 2
    logdir = args.out.with_name(args.out.stem + "-logs")
    shutil.rmtree(logdir, ignore_errors=True)
    summary = {}
    if args.only in (None, "zero"):
        runs = args.runs or (1 if bench.quick else 3)
        calls = args.calls or (200 if bench.quick else 2000)
        summary["zero"] = zero_part(bench, runs, calls, logdir)
    if want_suite:
        pairs = args.pairs or (1 if bench.quick else 3)
        if args.tests:
            tests = list(args.tests)
        elif args.all_tests:
            folder = fetch_sources(importlib.metadata.version("pylops-mpi"))
            tests = sorted(str(p.relative_to(folder)) for p in (folder / "tests").glob("test_*.py"))
            tests = [t for t in tests if t not in EXCLUDED]
        else:
            tests = list(QUICK_SUBSET if bench.quick else SUBSET)
        summary["suite"] = suite_part(bench, pairs, tests, logdir)
    path = bench.finish(summary, loadavg_at_end=os.getloadavg(), logs=str(logdir))
    console().print(f"wrote {path} (run outputs in {logdir})", soft_wrap=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
