"""gridcoll's simulator against SimGrid: ``sharing.py``'s ten broadcasts replayed in both.

Every case of ``bench/sharing.py`` (a broadcast from rank 0, planned on the FIFO grid
with ``tune.plan(..., check=False)``) is simulated by gridcoll with FIFO links and with
every link fair (``Grid.with_link_sharing("fair")``), and replayed in SimGrid (4.1, its
Python bindings) as follows:

* one host per rank; one SimGrid link per gridcoll resource of :meth:`Grid.path`: NIC
  out and NIC in of every rank, gateway out and gateway in of every cluster, every
  wide-area ``Link``; each link's bandwidth is the resource's peak rate
  (:func:`gridcoll.network.bounds.peak_rate` of its ``g(m)``: ``1/slope`` on the
  presets' affine gaps, so the per-message ``g(0)`` of 8 us is not charged), latency 0;
  a route per communicating rank pair, the resources of ``grid.path(a, b)`` in order;
* CM02 (``network/model:CM02``, ``network/crosstraffic:0``, ``network/TCP-gamma:0``,
  latency and bandwidth factors 1, ``network/weight-S:0``): every flow gets its max-min
  fair share of every link it crosses, NICs and gateways included;
* a rank runs its program (``schedule.programs[rank]``) in order: a ``Send`` hands the
  message to the pair's courier at ``t`` and keeps the CPU ``os(m)`` (a sleep); a
  ``Recv`` reached at ``t`` waits for the next message of its pair, which arrives at
  ``A = end of its transfer + L`` (the route's latency added after the transfer), and
  completes at ``max(A, t + or(m))``;
* messages of one ordered rank pair stay in order, as on one connection: one mailbox
  per pair, every receive of a rank posted (``get_async``) at the start in program
  order, and one courier actor per pair that starts the pair's next transfer when the
  previous one has ended (so a pair holds one share of a link at a time, as gridcoll's
  fair links count it);
* the SimGrid time is the latest rank's completion, as ``SimResult.total_s``.

Goal: gridcoll with fair links within 2% of SimGrid on all ten cases; with
FIFO links, within 2% on the eight cases without contention (all but teragrid ``ecef``
and transit-stub ``tps``). The JSON also holds ``checks``: a lone message and chains,
where FIFO and fair agree, to validate the mapping.

SimGrid is not a dependency of gridcoll and this script is run by no test and no CI
job. Without SimGrid's Python module it prints one line with the install recipe
(``bench/install_simgrid.sh``) and exits 0 writing nothing. SimGrid allows one engine
per process, so every replay runs in a forked child.

Run: ``LD_LIBRARY_PATH=<folder of libsimgrid.so> python bench/simgrid_check.py [--quick]
[--out bench/results/simgrid_check.json]``.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import math
import multiprocessing
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from _common import Bench, console, percent, rel_error, seconds, table
from gridcoll.network import Grid, get_grid
from gridcoll.network.bounds import peak_rate
from gridcoll.schedule import Recv, Schedule, Send
from gridcoll.simulate import simulate
from gridcoll.simulate.streams import resource_gap
from gridcoll.tune import Call, PlanOptions, plan
from sharing import CASES, QUICK

KiB, MiB = 1024, 1024 * 1024

GOAL = 0.02
"""The goal: |gridcoll - SimGrid| / SimGrid at most 2%."""

CONTENTION = (("teragrid", "ecef"), ("transit-stub:20,3", "tps"))
"""The two cases with contention (FIFO and fair differ there)."""

SIMGRID_CONFIG = (
    "network/model:CM02",
    "network/crosstraffic:0",
    "network/TCP-gamma:0",
    "network/latency-factor:1",
    "network/bandwidth-factor:1",
    "network/weight-S:0",
)
"""SimGrid configuration of the replay (CM02, no cross traffic, no TCP window)."""

INSTALL = (
    "simgrid_check: SimGrid's Python module is not importable; install it with "
    "bench/install_simgrid.sh (apt-get install -y libboost-dev; pip install wheel "
    "'pybind11<3'; pip install --no-build-isolation simgrid; about 10+ minutes) and set "
    "LD_LIBRARY_PATH to the site-packages folder holding libsimgrid.so. Nothing written."
)
"""The one line printed when SimGrid is missing (exit status 0)."""

CHECKS = (
    ("magpie:2,1", "flat", MiB),
    ("lan:2", "flat", MiB),
    ("magpie:4,1", "chain", MiB),
    ("magpie:4,2", "chain-segmented", MiB),
    ("das2:1", "chain", 64 * KiB),
)
"""Validation cases (grid, algorithm, bytes): no contention, FIFO and fair agree."""


# -- the pure translation: a schedule on a grid -> SimGrid's platform and programs ----
@dataclass(frozen=True)
class Replay:
    """Everything SimGrid needs to replay one schedule, without gridcoll objects.

    ``hosts``: one host name per rank. ``links``: SimGrid link name -> bandwidth
    (bytes/s), in the order first met along the routes. ``routes``: (sender, receiver)
    -> (link names in path order, latency ``L`` in s) for every pair that communicates.
    ``programs``: per rank, its ops as ``(is_send, peer, nbytes, overhead_s)`` with
    ``overhead_s = os(m)`` for a send and ``or(m)`` for a receive.
    """

    hosts: tuple[str, ...]
    links: dict[str, float]
    routes: dict[tuple[int, int], tuple[tuple[str, ...], float]]
    programs: tuple[tuple[tuple[bool, int, int, float], ...], ...]

    @property
    def nmessages(self) -> int:
        """Number of messages sent."""
        return sum(op[0] for program in self.programs for op in program)


def link_name(grid: Grid, resource: tuple[str, int | str]) -> str:
    """The SimGrid link of one resource of :meth:`Grid.path`: ``nic_out:<rank>``,
    ``nic_in:<rank>``, ``gw_out:<cluster>``, ``gw_in:<cluster>``, ``link:<name>``."""
    kind, key = resource
    if kind in ("gw_out", "gw_in"):
        return f"{kind}:{grid.clusters[int(key)].name}"
    return f"{kind}:{key}"


def link_bandwidth(grid: Grid, resource: tuple[str, int | str]) -> float:
    """The resource's capacity in bytes/s: the peak rate of its occupancy ``g(m)``."""
    rate = peak_rate(resource_gap(grid, resource))
    if not math.isfinite(rate):
        raise ValueError(f"resource {resource!r} of grid {grid.name!r} has no finite rate")
    return rate


def translate(schedule: Schedule, grid: Grid) -> Replay:
    """The SimGrid description of ``schedule`` on ``grid`` (pure; no SimGrid needed).

    A link per resource that some message crosses, a route per communicating pair,
    every op with its bytes (an empty send is a ``CONTROL_BYTES`` message) and CPU
    overhead (``os`` of the pair's P-LogP for a send, ``or`` for a receive).
    """
    links: dict[str, float] = {}
    routes: dict[tuple[int, int], tuple[tuple[str, ...], float]] = {}
    programs = []
    for rank, program in enumerate(schedule.programs):
        ops = []
        for op in program:
            nbytes = schedule.nbytes_of(op)
            if isinstance(op, Send):
                pair = (rank, op.peer)
                ops.append((True, op.peer, nbytes, grid.plogp(*pair).os(nbytes)))
            elif isinstance(op, Recv):
                pair = (op.peer, rank)
                ops.append((False, op.peer, nbytes, grid.plogp(*pair).or_(nbytes)))
            else:  # pragma: no cover - the IR has two ops
                raise TypeError(f"unknown op {op!r}")
            if pair not in routes:
                names = []
                for resource in grid.path(*pair):
                    name = link_name(grid, resource)
                    if name not in links:
                        links[name] = link_bandwidth(grid, resource)
                    names.append(name)
                routes[pair] = (tuple(names), grid.plogp(*pair).L)
        programs.append(tuple(ops))
    hosts = tuple(f"rank{r}" for r in range(schedule.nranks))
    return Replay(hosts, links, routes, tuple(programs))


# -- the SimGrid side (only in a child process) ---------------------------------------
def simgrid_available() -> bool:
    """True if ``import simgrid`` works (the shared library found, the bindings built)."""
    try:
        importlib.import_module("simgrid")
    except Exception:  # ImportError, or OSError from a missing libsimgrid.so
        return False
    return True


def _run_simgrid(replay: Replay, config: Sequence[str]) -> dict[str, Any]:
    """Replay in SimGrid in this process (one engine per process): the latest rank's
    completion, every rank's, when each rank's last receive completed, and the engine's
    final clock."""
    from simgrid import Engine, LinkInRoute, Semaphore, this_actor

    args = ["simgrid_check", *(f"--cfg={c}" for c in config)]
    args += ["--log=root.thresh:warning"]
    engine = Engine(args)
    zone = engine.netzone_root.add_netzone_full("gridcoll")
    hosts = [zone.add_host(name, 1e9).seal() for name in replay.hosts]
    links = {
        name: zone.add_link(name, bandwidth).set_latency(0.0).seal()
        for name, bandwidth in replay.links.items()
    }
    for (a, b), (names, _) in replay.routes.items():
        zone.add_route(hosts[a], hosts[b], [LinkInRoute(links[n]) for n in names], False)
    zone.seal()

    mailboxes = {
        pair: engine.mailbox_by_name_or_create(f"{pair[0]}->{pair[1]}") for pair in replay.routes
    }
    queues: dict[tuple[int, int], list[int]] = {pair: [] for pair in replay.routes}
    ready = {pair: Semaphore(0) for pair in replay.routes}
    sends = dict.fromkeys(replay.routes, 0)
    for rank, program in enumerate(replay.programs):
        for is_send, peer, _, _ in program:
            if is_send:
                sends[(rank, peer)] += 1
    finish = [0.0] * len(replay.hosts)
    received = [0.0] * len(replay.hosts)  # when each rank's last receive completed

    def courier(pair: tuple[int, int], count: int) -> None:
        mailbox, queue, semaphore = mailboxes[pair], queues[pair], ready[pair]
        for k in range(count):
            semaphore.acquire()
            mailbox.put(k, queue[k])

    def rank_actor(rank: int) -> None:
        program = replay.programs[rank]
        posted = [
            mailboxes[(peer, rank)].get_async() for is_send, peer, _, _ in program if not is_send
        ]
        count = 0
        for is_send, peer, nbytes, overhead in program:
            if is_send:
                pair = (rank, peer)
                queues[pair].append(nbytes)
                ready[pair].release()
                if overhead > 0:
                    this_actor.sleep_for(overhead)
            else:
                start = Engine.clock
                comm = posted[count]
                count += 1
                comm.wait()
                arrival = comm.finish_time + replay.routes[(peer, rank)][1]
                done = max(arrival, start + overhead)
                if done > Engine.clock:
                    this_actor.sleep_until(done)
                received[rank] = done
        finish[rank] = Engine.clock

    for pair, count in sends.items():
        if count:
            hosts[pair[0]].add_actor(f"courier{pair[0]}->{pair[1]}", courier, pair, count)
    for rank, host in enumerate(hosts):
        host.add_actor(f"rank{rank}", rank_actor, rank)
    engine.run()
    return {
        "total_s": max(finish),
        "finish_s": finish,
        "received_s": received,
        "clock_s": Engine.clock,
    }


def _child(connection: Any, replay: Replay, config: Sequence[str]) -> None:
    try:
        connection.send(("ok", _run_simgrid(replay, config)))
    except BaseException as err:  # report everything to the parent, then exit
        connection.send(("error", f"{type(err).__name__}: {err}"))
    finally:
        connection.close()


def simgrid_time(replay: Replay, config: Sequence[str] = SIMGRID_CONFIG) -> dict[str, Any]:
    """Replay ``replay`` in SimGrid in a forked child (SimGrid allows one engine per
    process); raise RuntimeError if the child fails or dies."""
    context = multiprocessing.get_context("fork")
    parent, child = context.Pipe(duplex=False)
    process = context.Process(target=_child, args=(child, replay, tuple(config)))
    process.start()
    child.close()
    try:
        status, value = parent.recv()
    except EOFError:
        status, value = "error", "the SimGrid child exited without an answer"
    process.join()
    if status != "ok":
        raise RuntimeError(f"SimGrid replay failed ({value}; exit code {process.exitcode})")
    return value


# -- the benchmark --------------------------------------------------------------------
def compare(spec: str, algo: str, nbytes: int) -> dict[str, Any]:
    """One case: plan on the FIFO grid, simulate FIFO and fair, replay in SimGrid."""
    grid = get_grid(spec)
    chosen = plan(grid, Call("bcast", nbytes, 0), PlanOptions(algo=algo, check=False))
    name, schedule = chosen.algorithm, chosen.build(grid)
    replay = translate(schedule, grid)
    fifo = simulate(schedule, grid).total_s
    fair = simulate(schedule, grid.with_link_sharing("fair")).total_s
    sg = simgrid_time(replay)
    simgrid_s = sg["total_s"]
    contention = (spec, algo) in CONTENTION
    fifo_err, fair_err = rel_error(fifo, simgrid_s), rel_error(fair, simgrid_s)
    return {
        "grid": spec,
        "algorithm": algo,
        "chosen": name,
        "nbytes": nbytes,
        "messages": replay.nmessages,
        "contention": contention,
        "fifo_s": fifo,
        "fair_s": fair,
        "simgrid_s": simgrid_s,
        "simgrid_clock_s": sg["clock_s"],
        "fifo_vs_simgrid": fifo_err,
        "fair_vs_simgrid": fair_err,
        "fair_meets_goal": abs(fair_err) <= GOAL,
        "fifo_within_goal": abs(fifo_err) <= GOAL,
        "fifo_meets_goal": None if contention else abs(fifo_err) <= GOAL,
    }


def main(argv: list[str] | None = None) -> int:
    bench = Bench("simgrid_check", "gridcoll's simulator (FIFO, fair) against SimGrid", argv)
    bench.parse()
    if not simgrid_available():
        print(INSTALL)
        return 0
    checks = []
    for spec, algo, nbytes in CHECKS:
        if bench.quick and algo != "flat":
            continue
        row = compare(spec, algo, nbytes)
        row.pop("fifo_meets_goal")
        checks.append(row)
    for spec, algo, nbytes, _ in CASES:
        if bench.quick and algo not in QUICK:
            continue
        bench.add(**compare(spec, algo, nbytes))
    columns = [
        ("grid", "grid", None),
        ("algorithm", "algorithm", None),
        ("chosen", "chosen", None),
        ("msgs", "messages", str),
        ("FIFO", "fifo_s", seconds),
        ("fair", "fair_s", seconds),
        ("SimGrid", "simgrid_s", seconds),
        ("FIFO/SG", "fifo_vs_simgrid", percent),
        ("fair/SG", "fair_vs_simgrid", percent),
        ("fair ok", "fair_meets_goal", str),
        ("FIFO ok", "fifo_meets_goal", str),
    ]
    out = console()
    check_columns = [*columns[:-1], ("FIFO ok", "fifo_within_goal", str)]
    out.print(table("checks: no contention (FIFO = fair)", checks, check_columns))
    out.print(table("the ten broadcasts: gridcoll vs SimGrid", bench.rows, columns))
    fifo_cases = [r for r in bench.rows if not r["contention"]]
    summary = {
        "cases": len(bench.rows),
        "goal": GOAL,
        "fair_meets_goal": sum(r["fair_meets_goal"] for r in bench.rows),
        "fifo_cases_without_contention": len(fifo_cases),
        "fifo_meets_goal": sum(bool(r["fifo_meets_goal"]) for r in fifo_cases),
        "worst_fair_error": max((abs(r["fair_vs_simgrid"]) for r in bench.rows), default=None),
        "worst_fifo_error_without_contention": max(
            (abs(r["fifo_vs_simgrid"]) for r in fifo_cases), default=None
        ),
        "checks_within_goal": sum(r["fair_meets_goal"] and r["fifo_within_goal"] for r in checks),
        "checks": len(checks),
    }
    try:
        version = importlib.metadata.version("simgrid")
    except importlib.metadata.PackageNotFoundError:
        version = None
    path = bench.finish(
        summary=summary,
        simgrid=version,
        simgrid_config=list(SIMGRID_CONFIG),
        checks=checks,
    )
    out.print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
