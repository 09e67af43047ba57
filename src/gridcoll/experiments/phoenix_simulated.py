"""Phoenix (seed 004): the four experiments (sec. V, figs. 6-9) in simulation, with the
paper's baselines.

Each function runs one experiment on a grid and returns a plain ``dict`` (the JSON
``gridcoll phoenix --json`` prints): every series and the headline figure. *Ours* is
:class:`~gridcoll.simulate.phoenix.PhoenixSim` running :mod:`gridcoll.phoenix`; the
baselines are gridcoll's builders replayed by :func:`~gridcoll.simulate.simulate`:

* **MPICH-like** (topology-unaware): ``binomial`` for short broadcasts (MPICH's
  short-message tree, fig. 6 a), ``mpich`` for long ones (its long-message algorithm,
  fig. 7), ``binomial`` reduction (fig. 8);
* **MagPIe-like** (static, topology-aware): ``magpie-original`` broadcast (flat WAN
  tree to the coordinators, binomial LAN trees; the paper's long-message variant uses
  MPICH's long algorithm inside clusters, which the LAN never makes the bottleneck of),
  ``two-level`` reduction (LAN trees, then the coordinators' WAN tree), its
  parameters the best of a few simulated;
* **List**: ``list``, segments pipelined down the widest-bottleneck chain, its segment
  size the best of 16 KiB-1 MiB simulated.

Stable-state experiments (figs. 6-8) start once the processes have settled
(:meth:`PhoenixSim.settle`: no probe or message left in flight), and so does fig. 9's
clock (:func:`transition`, ``settle_s``). Bandwidth is the
paper's: ``nbytes * P / time`` (sec. V-A.2).

The ``progress`` argument of each function is called ``progress(done, total)``.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from gridcoll.algorithms.registry import get_builder
from gridcoll.errors import ParameterError
from gridcoll.network.grid import Grid
from gridcoll.simulate.executor import simulate
from gridcoll.simulate.phoenix import OpResult, PhoenixSim

__all__ = [
    "CRASH_ACK_S",
    "CRASH_DETECT_S",
    "DEFAULT_GRIDS",
    "EXPERIMENTS",
    "bandwidth",
    "complete_again",
    "in_flight_complete",
    "latency",
    "recovery_times",
    "reduction",
    "transition",
]

DEFAULT_GRIDS = {
    "latency": "das2-spread:201,3",
    "bandwidth": "das2-spread:137,4",
    "reduction": "das2-spread:128,3",
    "transition": "das2-spread:160,4",
}
"""The paper's set-up per experiment (figs. 6, 7, 8, 9), as :func:`das2_spread` grids."""

BANDWIDTH_SIZES = (*(32 * 1024 * 4**k for k in range(6)), 64 * 1024 * 1024)
"""Fig. 7's range: 32 KiB to 64 MiB."""

REDUCTION_SIZES = (8, 1024, 64 * 1024)
"""Fig. 8: an array of 64-bit integers per process ("gave an array of integers to each
processor", sec. V-B), 1 to 8192 of them. Ours sends each partial sum whole (sec. IV-E
does not segment reductions), so its lead shrinks as the arrays grow."""

TRANSITION = (60.0, 90.0, 120.0, 4 * 1024 * 1024)
"""Fig. 9: half the processes leave at 60 s, rejoin at 90 s; run to 120 s; 4 MB."""

RECOVERY_TOLERANCE = 0.10
"""Recovered once broadcasts are back within 10% of the stable time."""

DRAIN_S = 600.0
"""After the last request of fig. 9, how long the last broadcast may take to finish."""

SETTLE_LIMIT_S = 600.0
"""The longest the processes may take to settle before a stable-state experiment."""

Progress = Callable[[int, int], None]


def _noop(done: int, total: int) -> None:
    pass


def _arrivals(schedule_name: str, grid: Grid, nbytes: int, **params: Any) -> list[float]:
    """Every non-root rank's first receive completion under a builder (record=True)."""
    schedule = get_builder("bcast", schedule_name).build(grid, nbytes, 0, **params)
    timeline = simulate(schedule, grid, record=True).timeline
    first: dict[int, float] = {}
    for msg in timeline.messages:
        if msg.dst not in first or msg.recv_done < first[msg.dst]:
            first[msg.dst] = msg.recv_done
    return sorted(first.values())


def _best(op: str, name: str, grid: Grid, nbytes: int, candidates: Sequence[dict]) -> float:
    """The best simulated time of builder ``name`` over parameter ``candidates``."""
    builder = get_builder(op, name)
    return min(
        simulate(builder.build(grid, nbytes, 0, **params), grid).total_s for params in candidates
    )


def _segments(nbytes: int) -> list[int]:
    sizes = [s for s in (16 * 1024 * 4**k for k in range(4)) if s < nbytes]
    return [*sizes, max(nbytes, 1)]


def _settled(grid: Grid, seed: int, factory: Any) -> tuple[PhoenixSim, float]:
    sim = PhoenixSim(grid, seed=seed, factory=factory)
    t = sim.settle(SETTLE_LIMIT_S)
    if sim.errors:
        raise RuntimeError(f"processes failed while settling: {'; '.join(sim.errors[:3])}")
    return sim, t


def _ours_bcast(sim: PhoenixSim, at: float, nbytes: int) -> OpResult:
    holder: list[OpResult] = []
    sim.bcast(at, 0, nbytes, on_done=holder.append)
    while not holder and sim.env.peek() < float("inf"):
        sim.env.step()
    result = sim.result().ops[-1]
    if not holder or result.lost or result.duplicated or sim.errors:
        raise RuntimeError(
            f"the Phoenix broadcast of {nbytes} B did not complete cleanly: {result!r}, "
            f"errors {list(sim.errors[:3])}"
        )
    return holder[0]


def _root_core(sim: PhoenixSim) -> Any:
    """The core of the live process that owns vnode 0 (the broadcasts' root)."""
    return next(p.core for p in sim.procs.values() if not p.failed and 0 in p.core.owned)


def _switch_size(core: Any, largest: int) -> int | None:
    """The smallest size up to ``largest`` for which ``core``'s model picks the
    bandwidth tree, by bisection (which assumes the choice switches once with the size:
    the bandwidth tree has the larger start-up and the smaller time per byte); None if
    it never picks it."""
    if core.choose_kind(largest) != "bandwidth":
        return None
    lo, hi = 0, largest  # latency at lo (a 0-byte message), bandwidth at hi
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if core.choose_kind(mid) == "bandwidth" else (mid, hi)
    return hi


def latency(grid: Grid, *, seed: int = 0, factory: Any = None, progress: Progress = _noop) -> dict:
    """Fig. 6: when a 1-byte broadcast from rank (vnode) 0 reaches each process.

    Returns the arrival times (ms, sorted) of MPICH-like, MagPIe-like and ours, each
    one's last arrival, and ``ratio_to_magpie_like`` = ours / MagPIe-like (our
    goal: at most 1.3; the paper: about 2, 11 ms against 6 ms).
    """
    progress(0, 3)
    series = {"mpich_like": _arrivals("binomial", grid, 1)}
    progress(1, 3)
    series["magpie_like"] = _arrivals("magpie-original", grid, 1)
    progress(2, 3)
    sim, t0 = _settled(grid, seed, factory)
    op = _ours_bcast(sim, t0, 1)
    series["ours"] = sorted(t - op.start_s for v, t in op.arrival_s.items() if v != 0)
    progress(3, 3)
    last = {name: max(times) for name, times in series.items()}
    return {
        "experiment": "latency",
        "grid": grid.name,
        "nprocs": grid.nranks,
        "settle_s": t0,
        "last_arrival_ms": {k: v * 1e3 for k, v in last.items()},
        "arrivals_ms": {k: [t * 1e3 for t in v] for k, v in series.items()},
        "ratio_to_magpie_like": last["ours"] / last["magpie_like"],
        "ratio_to_mpich_like": last["ours"] / last["mpich_like"],
        "nprobes": sim.nprobes,
    }


def bandwidth(
    grid: Grid,
    *,
    sizes: Sequence[int] = BANDWIDTH_SIZES,
    seed: int = 0,
    factory: Any = None,
    progress: Progress = _noop,
) -> dict:
    """Fig. 7: broadcast bandwidth ``nbytes * P / time`` against the message size.

    Ours broadcasts on the tree its root's model picks and pipelines the bandwidth
    tree in segments of the model's size (:mod:`gridcoll.phoenix.trees`, "Model");
    each row gives the tree (``ours_tree``) and the number of segments
    (``ours_segments``), and ``switch_nbytes`` is the smallest size for which the
    root picks the bandwidth tree once settled. ``ratio_to_list`` is ours over List's
    at the largest size (our goal: at least 0.95; the paper: 0.82), per size
    in ``ratio_to_list_by_size``.
    """
    P = grid.nranks
    total = 4 * len(sizes)
    done = 0
    rows = []
    sim, t0 = _settled(grid, seed, factory)
    for m in sizes:
        times = {"mpich_like": simulate(get_builder("bcast", "mpich").build(grid, m), grid).total_s}
        progress(done := done + 1, total)
        times["magpie_like"] = simulate(
            get_builder("bcast", "magpie-original").build(grid, m), grid
        ).total_s
        progress(done := done + 1, total)
        times["list"] = _best("bcast", "list", grid, m, [{"segment_size": s} for s in _segments(m)])
        progress(done := done + 1, total)
        tree = _root_core(sim).choose_kind(m)
        op = _ours_bcast(sim, sim.env.now, m)
        times["ours"] = op.time_s
        progress(done := done + 1, total)
        rows.append(
            {
                "nbytes": m,
                "time_s": times,
                "bandwidth_MBps": {k: m * P / t / 1e6 for k, t in times.items()},
                "ours_tree": tree,
                "ours_segments": op.nsegments,
            }
        )
    last = rows[-1]["bandwidth_MBps"]
    return {
        "experiment": "bandwidth",
        "grid": grid.name,
        "nprocs": P,
        "settle_s": t0,
        "rows": rows,
        "switch_nbytes": _switch_size(_root_core(sim), max(sizes)),
        "ratio_to_list": last["ours"] / last["list"],
        "ratio_to_list_by_size": {
            str(r["nbytes"]): r["bandwidth_MBps"]["ours"] / r["bandwidth_MBps"]["list"]
            for r in rows
        },
        "nprobes": sim.nprobes,
    }


def reduction(
    grid: Grid,
    *,
    sizes: Sequence[int] = REDUCTION_SIZES,
    seed: int = 0,
    factory: Any = None,
    progress: Progress = _noop,
) -> dict:
    """Fig. 8: the time to add every process's integers at rank (vnode) 0.

    Each vnode ``v`` gives ``v + 1`` (the checker verifies the sum), charged as an
    ``m``-byte array for each size ``m`` (:data:`REDUCTION_SIZES`);
    ``ratio_to_magpie_like`` is ours over MagPIe-like at the smallest size, per size
    in ``ratio_by_size``.
    """
    nclusters = len(grid.clusters)
    total = 3 * len(sizes)
    done = 0
    rows = []
    sim, t0 = _settled(grid, seed, factory)
    expected = sum(v + 1 for v in sim.vnodes)
    for m in sizes:
        times = {"mpich_like": simulate(get_builder("reduce", "binomial").build(grid, m), grid)}
        times["mpich_like"] = times["mpich_like"].total_s
        progress(done := done + 1, total)
        candidates = [
            {"segment_size": s, "wan_degree": max(1, nclusters - 1), "lan_degree": d}
            for s in _segments(m)
            for d in (1, 2, 4)
        ]
        times["magpie_like"] = _best("reduce", "two-level", grid, m, candidates)
        progress(done := done + 1, total)
        holder: list[OpResult] = []
        values = {v: v + 1 for v in sim.vnodes}
        sim.reduce(sim.env.now, 0, values, operator.add, nbytes=m, on_done=holder.append)
        while not holder and sim.env.peek() < float("inf"):
            sim.env.step()
        if not holder or holder[0].value != expected or holder[0].lost:
            raise RuntimeError(f"the Phoenix reduction of {m} B went wrong: {holder!r}")
        times["ours"] = holder[0].time_s
        progress(done := done + 1, total)
        rows.append({"nbytes": m, "time_s": times})
    ratios = {str(r["nbytes"]): r["time_s"]["ours"] / r["time_s"]["magpie_like"] for r in rows}
    return {
        "experiment": "reduction",
        "grid": grid.name,
        "nprocs": grid.nranks,
        "settle_s": t0,
        "rows": rows,
        "ratio_to_magpie_like": ratios[str(rows[0]["nbytes"])],
        "ratio_by_size": ratios,
        "nprobes": sim.nprobes,
    }


def recovery_times(
    ops: Sequence[OpResult], changes: Sequence[float], stable_s: float
) -> list[float | None]:
    """For each change time: how long until broadcasts are back within
    :data:`RECOVERY_TOLERANCE` of ``stable_s``.

    The broadcasts a change can slow are those that end after it: the one in flight at
    the change, then the ones started after it, up to the next change. Recovery is
    measured from the change to the start of the first of them that completes within
    the tolerance and is followed only by such broadcasts, 0 if that is the one in
    flight (the change slowed nothing). A broadcast that ends after the next change
    counts if it should have ended before it (started at least the tolerated time
    before it: slow already) and is left out otherwise (the next change may be what
    slows it); one that never ends is slow. None if never back.
    """
    limit = stable_s * (1 + RECOVERY_TOLERANCE)
    out: list[float | None] = []
    bounds = [*changes[1:], float("inf")]
    for change, nxt in zip(changes, bounds, strict=True):
        window = [
            op
            for op in ops
            if (op.end_s is None or op.end_s > change)
            and op.start_s < nxt
            and ((op.end_s is not None and op.end_s <= nxt) or op.start_s + limit <= nxt)
        ]
        back = None
        for op in sorted(window, key=lambda op: op.start_s, reverse=True):
            if op.time_s is None or op.time_s > limit:
                break
            back = op
        out.append(None if back is None else max(0.0, back.start_s - change))
    return out


CRASH_DETECT_S = 3.0
"""How long after a crash the survivors are told of it: the heartbeat timeout of the
measured runs (:data:`gridcoll.experiments.phoenix_measured.CRASH_HEARTBEAT`)."""

CRASH_ACK_S = 0.25
"""How often a process tells the members it took messages from how many (the ``ack_s``
of the measured runs' :data:`~gridcoll.experiments.phoenix_measured.CRASH_HEARTBEAT`)."""


def complete_again(ops: Sequence[OpResult], at_s: float) -> float | None:
    """From ``at_s`` (a crash) to the end of the first broadcast started then or later
    that reached every vnode (None: none did)."""
    ends = [op.end_s for op in ops if op.start_s >= at_s and op.end_s is not None]
    return min(ends) - at_s if ends else None


def in_flight_complete(ops: Sequence[OpResult], at_s: float) -> float | None:
    """From ``at_s`` (a crash) to when the broadcasts under way then reached every vnode
    (None: none was under way, or one never did)."""
    under_way = [op for op in ops if op.start_s < at_s and (op.end_s is None or op.end_s > at_s)]
    if not under_way or any(op.end_s is None for op in under_way):
        return None
    return max(op.end_s for op in under_way) - at_s  # type: ignore[type-var]


def transition(
    grid: Grid,
    *,
    leave_s: float = TRANSITION[0],
    rejoin_s: float = TRANSITION[1],
    until_s: float = TRANSITION[2],
    nbytes: int = TRANSITION[3],
    crash: bool = False,
    detect_s: float = CRASH_DETECT_S,
    seed: int = 0,
    factory: Any = None,
    progress: Progress = _noop,
) -> dict:
    """Fig. 9: broadcasts back to back while half the processes leave at ``leave_s``
    and rejoin at ``rejoin_s``; with ``crash``, they die at ``leave_s`` instead
    (:meth:`PhoenixSim.crash`, found ``detect_s`` later) and ``complete_again_s`` and
    ``in_flight_complete_s`` say when broadcasts reached every vnode again.

    **The clock.** The processes first settle (:meth:`PhoenixSim.settle`, as the
    stable experiments do); fig. 9's clock starts then, at ``settle_s`` of simulated
    time, and every time in the result (``changes_s``, the broadcasts' ``start_s``
    and ``end_s``) is on that clock. In the paper the trees were stable 11 s after
    start-up (sec. V-C); here the initial probing takes longer than fig. 9's 60 s
    at the paper's probe size: every probe downloads 128 KiB (sec. IV-A), three in
    four of them over a wide-area link of Table 2's 3-28 Mb/s shared by every
    process of the cluster, so the WAN links are busy for minutes with 160 processes
    (``settle_s`` in the result). Starting the clock at settling keeps the changes
    of fig. 9 on stable trees, as the paper's were.

    The odd-numbered processes leave, each giving its vnode to its even neighbour
    (rank 0 holds the root vnode and stays), and come back as new processes on the
    same ranks (process ids are never reused) through that neighbour, which hands
    each of them half its vnodes: one, as in the paper's fig. 9 (there, the very vnode
    it gave away; here, whichever half the core picks). Each broadcast starts when
    the previous one has reached every vnode. Returns each broadcast's start and
    completion time, ``stable_s`` (the median time of the broadcasts that start after
    ``leave_s / 2`` and end before the leave),
    ``recovery_s`` per change (:func:`recovery_times`; goal at most 2 s, paper about
    8 s) and the checker's ``delivered``, ``lost`` and ``duplicated`` over every
    broadcast (goal: 0 and 0).
    """
    if not 0 < leave_s < rejoin_s < until_s:
        raise ParameterError(
            f"need 0 < leave < rejoin < until, got {leave_s!r}, {rejoin_s!r}, {until_s!r}"
        )
    sim, t0 = _settled(grid, seed, factory)
    probes_settling = sim.nprobes
    leavers = [pid for pid in range(1, grid.nranks) if pid % 2]
    for pid in leavers:
        heir = pid - 1  # the even neighbour, in the same cluster but at a boundary
        if crash:
            sim.crash(t0 + leave_s, pid, detect_s, CRASH_ACK_S)
        else:
            sim.leave(t0 + leave_s, pid, heir)
        sim.join(t0 + rejoin_s, pid, heir)  # the same machine, a new process id

    def next_bcast(result: OpResult | None = None) -> None:
        now = sim.env.now - t0
        progress(min(int(now), int(until_s)), int(until_s))
        if now < until_s:
            sim.bcast(sim.env.now, 0, nbytes, on_done=next_bcast)

    first = len(sim.ops)
    next_bcast()
    sim.run(t0 + until_s)
    # No new broadcast from until_s: let the last one finish, so that lost counts
    # what never arrives rather than what was still on its way.
    while sim.ops and sim.ops[-1].end_s is None and sim.env.peek() <= t0 + until_s + DRAIN_S:
        sim.env.step()
    run = sim.result()
    mine = [_shifted(op, t0) for op in run.ops[first:]]
    ops = [op for op in mine if op.end_s is not None]
    # Stable: the broadcasts of the second half before the leave.
    before = sorted(op.time_s for op in ops if leave_s / 2 <= op.start_s and op.end_s <= leave_s)
    stable = before[len(before) // 2] if before else None
    recovery = (
        recovery_times(ops, [leave_s, rejoin_s], stable) if stable is not None else [None, None]
    )
    note = None
    if stable is None:
        note = (
            "no broadcast started after leave/2 and ended before the leave: one broadcast "
            "outlasts the window; move the changes later or the size down (--times, --size)"
        )
    return {
        "experiment": "transition",
        "grid": grid.name,
        "nprocs": grid.nranks,
        "nbytes": nbytes,
        "settle_s": t0,
        "changes_s": {"leave": leave_s, "rejoin": rejoin_s, "until": until_s},
        "leavers": len(leavers),
        "crash": crash,
        "broadcasts": [
            {"start_s": op.start_s, "end_s": op.end_s, "time_s": op.time_s} for op in mine
        ],
        "stable_s": stable,
        "note": note,
        "recovery_s": recovery,
        "delivered": run.delivered,
        "lost": run.lost,
        "duplicated": run.duplicated,
        "incomplete": sum(1 for op in mine if op.end_s is None),
        "killed": len(leavers) if crash else 0,
        "complete_again_s": complete_again(ops, leave_s) if crash else None,
        "in_flight_complete_s": in_flight_complete(mine, leave_s) if crash else None,
        "heartbeat_timeout_s": detect_s if crash else None,
        "errors": list(run.errors),
        "nprobes": run.nprobes,
        "nprobes_settling": probes_settling,
    }


def _shifted(op: OpResult, t0: float) -> OpResult:
    """``op`` with its times on a clock that starts at ``t0``."""
    return replace(
        op,
        start_s=op.start_s - t0,
        end_s=None if op.end_s is None else op.end_s - t0,
        arrival_s={v: t - t0 for v, t in op.arrival_s.items()},
    )


EXPERIMENTS = {
    "latency": latency,
    "bandwidth": bandwidth,
    "reduction": reduction,
    "transition": transition,
}
"""``--experiment`` name -> function."""
