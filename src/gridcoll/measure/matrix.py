"""Latency and bandwidth matrices between clusters (seed 001, sec. 2.5).

"Our communication benchmark program periodically collects resource information and
forms N x N latency and bandwidth matrices where N represents the number of clusters.
The off-diagonal elements [...] are obtained by choosing a representative node in each
cluster and conducting benchmarking experiments between the representative nodes. The
diagonal elements represent intra-cluster communication performance and are obtained
by choosing 2 nodes in a cluster" (seed 001, sec. 2.5; it refreshes them every 5
minutes). :func:`measure_matrix` does one round; :func:`monitor` repeats it every T
seconds and keeps a history (the network monitor of the adaptive layer).

One entry, from rank ``i`` to rank ``j`` (:func:`probe_link`): the round trip of an
empty message ``RTT(0)`` (median of 5), the latency ``RTT(0)/2`` (or the one-way time
when both ranks share a clock, so asymmetric latencies show), and the bandwidth
``m / (RTT(m) - RTT(0))`` for a message ``m`` from i to j grown by 4x from 64 KiB until
its transfer takes at least 3 round trips (so latency noise is under a third of it;
at most 4 MiB); a transfer shorter than ``RTT(0)`` (a fast LAN probed with a fixed small
message) gives the lower bound ``m / RTT(0)`` instead of noise. The entries are
measured one pair at a time, so no two share a link.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gridcoll.errors import GridError, MeasurementError, ParameterError
from gridcoll.measure.plogp_procedure import SizeProbe
from gridcoll.measure.stats import summarize
from gridcoll.network.gridfile import read_json

__all__ = ["LinkEstimate", "LinkMatrices", "measure_matrix", "monitor", "probe_link"]

FORMAT = "gridcoll-matrix/1"
START_SIZE = 64 * 1024
MAX_SIZE = 4 * 1024 * 1024
SETTLED = 0.03
"""A bandwidth probe grows its message (x4) until two sizes agree within this share."""


@dataclass(frozen=True, slots=True)
class LinkEstimate:
    """Latency (s), bandwidth (B/s) from one rank to another, how they were found."""

    latency: float
    bandwidth: float
    size: int
    rtt0: float
    os0: float
    one_way: bool


def probe_link(
    transport: Any,
    *,
    size: int | None = None,
    reps0: int = 5,
    reps: int = 3,
    estimator: str = "median",
) -> LinkEstimate:
    """Latency and bandwidth over ``transport`` (anything with ``run(SizeProbe)``).

    The latency is the fastest of the ``reps0`` empty round trips (ping's choice: delays
    only add, so the fastest repetition is the least disturbed, on a busy machine too).
    ``estimator`` is for the transfers: the ``"median"`` of the repetitions (a shared
    link's sustained slowdown shows), or ``"min"`` (for ranks sharing overloaded cores).
    Without ``size``, the message grows from :data:`START_SIZE` (x4, up to
    :data:`MAX_SIZE`) until its transfer takes three round trips and its rate agrees
    with the previous size's within :data:`SETTLED`.
    """
    if estimator not in ("median", "min"):
        raise ParameterError(f"estimator must be median or min, not {estimator!r}")

    def est(xs: list[float]) -> float:
        return min(xs) if estimator == "min" else summarize(xs).mean

    zero = transport.run(SizeProbe(0, reps0, with_or=False))
    rtt0 = min(s.rtt for s in zero)
    os0 = min(s.os for s in zero)
    owds = [s.owd for s in zero if s.owd is not None]
    one_way = len(owds) == len(zero)
    latency = min(owds) if one_way else rtt0 / 2
    m = size or START_SIZE
    previous = math.nan
    while True:
        samples = transport.run(SizeProbe(m, reps, with_or=False))
        transfer = est([s.rtt for s in samples]) - rtt0
        rate = m / transfer if transfer > 0 else math.inf
        # long enough to dwarf the round trip, and settled: a rate shaper's first
        # frames, TCP's window and a rendezvous weigh on a short transfer (a 64 KiB
        # probe crossed a 0.96 MB/s shaped link at 1.03 MB/s, 256 KiB at 0.96)
        settled = abs(rate - previous) <= SETTLED * rate
        if size is not None or (transfer >= 3 * rtt0 and settled) or m >= MAX_SIZE:
            break
        previous = rate
        m *= 4
    # a transfer shorter than a round trip is lost in the latency's noise (a LAN probed
    # with a small message): report the lower bound m / RTT(0) rather than noise
    bandwidth = m / max(transfer, rtt0) if rtt0 > 0 else math.inf
    return LinkEstimate(latency, bandwidth, m, rtt0, os0, one_way)


@dataclass(frozen=True)
class LinkMatrices:
    """N x N latency (s) and bandwidth (B/s) matrices, from row to column.

    ``names`` and ``ranks`` are the clusters and their representatives; the diagonal
    is inside the cluster (between its first two ranks; NaN if it has one rank).
    ``sizes`` is the message size each bandwidth was measured with.
    """

    names: tuple[str, ...]
    ranks: tuple[int, ...]
    latency: tuple[tuple[float, ...], ...]
    bandwidth: tuple[tuple[float, ...], ...]
    sizes: tuple[tuple[int, ...], ...]
    time: float
    one_way: bool
    elapsed_s: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        def clean(rows):
            return [[None if not math.isfinite(x) else x for x in row] for row in rows]

        return {
            "format": FORMAT,
            "names": list(self.names),
            "ranks": list(self.ranks),
            "latency_s": clean(self.latency),
            "bandwidth_Bps": clean(self.bandwidth),
            "sizes": [list(r) for r in self.sizes],
            "time": self.time,
            "latency_method": "one-way" if self.one_way else "rtt/2",
            "elapsed_s": self.elapsed_s,
        }

    @classmethod
    def from_dict(cls, data: Any, where: str = "matrix") -> LinkMatrices:
        """Parse :meth:`to_dict`'s object; GridError names the bad entry."""
        if not isinstance(data, dict) or data.get("format", FORMAT) != FORMAT:
            raise GridError(f"{where}: not a {FORMAT!r} object")
        try:
            names = tuple(str(n) for n in data["names"])
            n = len(names)

            def rows(key: str) -> tuple[tuple[float, ...], ...]:
                raw = data[key]
                if len(raw) != n or any(len(r) != n for r in raw):
                    raise GridError(f"{where}: {key!r} must be {n} x {n}")
                out = tuple(tuple(math.nan if x is None else float(x) for x in r) for r in raw)
                for i, r in enumerate(out):
                    for j, x in enumerate(r):
                        if x < 0:
                            raise GridError(f"{where}: {key}[{i}][{j}] = {x!r} is negative")
                return out

            return cls(
                names,
                tuple(int(r) for r in data.get("ranks", range(n))),
                rows("latency_s"),
                rows("bandwidth_Bps"),
                tuple(tuple(int(x) for x in r) for r in data.get("sizes", [[0] * n] * n)),
                float(data.get("time", 0.0)),
                data.get("latency_method") == "one-way",
                float(data.get("elapsed_s", 0.0)),
            )
        except (KeyError, TypeError, ValueError) as err:
            raise GridError(f"{where}: {err}") from err

    def save(self, path: str | Path) -> None:
        Path(path).write_text(json.dumps(self.to_dict(), indent=2) + "\n")

    @classmethod
    def load(cls, path: str | Path) -> LinkMatrices:
        data = read_json(path, "matrix file")  # regular file, bounded size and depth
        return cls.from_dict(data, f"matrix file {str(path)!r}")


def _clusters_of(grid, clusters: Sequence[Sequence[int]] | None) -> list[list[int]]:
    if clusters is not None:
        return [list(c) for c in clusters]
    return [list(m) for m in grid.members]


def measure_pairs(ep, pairs: Sequence[tuple[int, int]], *, size: int | None = None):
    """Measure ``(i, j)`` for every pair, one pair at a time; every rank gets a dict
    ``(i, j) -> LinkEstimate``. Collective over ``ep.comm``."""
    from gridcoll.measure.link import share
    from gridcoll.measure.transport import MPITransport, run_mirror

    rank, out = ep.rank, {}
    for i, j in pairs:
        status: tuple = ("ok", None)
        if rank == i:
            transport = MPITransport(ep, j)
            try:
                status = ("ok", probe_link(transport, size=size))
                transport.close()
            except MeasurementError as err:
                status = ("error", f"measuring {i} -> {j}: {err}")
        elif rank == j:
            run_mirror(ep, i)
        bounded = ep.timeout if rank in (i, j) else None
        status = share(ep.comm, status if rank == i else None, i, bounded, f"pair {i} -> {j}")
        if status[0] != "ok":
            raise MeasurementError(status[1])
        out[(i, j)] = status[1]
    return out


def measure_matrix(
    comm,
    *,
    grid=None,
    clusters: Sequence[Sequence[int]] | None = None,
    names: Sequence[str] | None = None,
    size: int | None = None,
    emulate: bool | None = None,
    timeout: float = 60.0,
) -> LinkMatrices:
    """One round of seed 001's benchmark: latency and bandwidth between the clusters'
    representatives (their first rank) and inside each cluster (its first two ranks).

    Collective over ``comm``; every rank returns the same :class:`LinkMatrices`.
    ``clusters`` lists the ranks of each cluster (default: the grid's clusters);
    ``size`` fixes the bandwidth message size (default: grown from 64 KiB).
    """
    from gridcoll.measure.transport import open_endpoint

    start = time.monotonic()
    ep = open_endpoint(comm, grid, emulate=emulate, timeout=timeout)
    try:
        groups = _clusters_of(ep.grid, clusters)
        for k, g in enumerate(groups):
            if not g:
                raise ParameterError(f"cluster {k} has no rank")
            for r in g:
                if not 0 <= r < comm.Get_size():
                    raise ParameterError(f"cluster {k} names rank {r!r}, not in the communicator")
        labels = (
            tuple(names)
            if names
            else (
                tuple(c.name for c in ep.grid.clusters)
                if clusters is None
                else tuple(f"c{k}" for k in range(len(groups)))
            )
        )
        reps = [g[0] for g in groups]
        pairs = [(a, b) for a in reps for b in reps if a != b]
        pairs += [(g[0], g[1]) for g in groups if len(g) > 1]
        found = measure_pairs(ep, pairs, size=size)
        n = len(groups)
        lat = [[math.nan] * n for _ in range(n)]
        bw = [[math.nan] * n for _ in range(n)]
        sz = [[0] * n for _ in range(n)]
        for a in range(n):
            for b in range(n):
                key = (
                    (reps[a], reps[b])
                    if a != b
                    else (groups[a][0], groups[a][1])
                    if len(groups[a]) > 1
                    else None
                )
                if key is None:
                    continue
                est = found[key]
                lat[a][b], bw[a][b], sz[a][b] = est.latency, est.bandwidth, est.size
        one_way = all(e.one_way for e in found.values()) if found else False
        return LinkMatrices(
            tuple(labels),
            tuple(reps),
            tuple(tuple(r) for r in lat),
            tuple(tuple(r) for r in bw),
            tuple(tuple(r) for r in sz),
            time.time(),
            one_way,
            time.monotonic() - start,
        )
    finally:
        ep.close()


def monitor(
    comm,
    every: float,
    *,
    count: int | None = None,
    history: str | Path | None = None,
    callback: Callable[[LinkMatrices], None] | None = None,
    **kwargs: Any,
) -> Iterator[LinkMatrices]:
    """Measure the matrices every ``every`` seconds (``count`` times, or forever),
    appending each round to ``history`` (JSON lines, rank 0) and yielding it.

    Collective: every rank iterates. Seed 001 refreshes its matrices every 5 minutes.
    """
    if not every >= 0:
        raise ParameterError(f"every must be >= 0 seconds, got {every!r}")
    i = 0
    while count is None or i < count:
        t0 = time.monotonic()
        matrices = measure_matrix(comm, **kwargs)
        if history is not None and comm.Get_rank() == 0:
            with open(history, "a") as f:
                f.write(json.dumps(matrices.to_dict()) + "\n")
        if callback is not None:
            callback(matrices)
        yield matrices
        i += 1
        if count is None or i < count:
            time.sleep(max(0.0, every - (time.monotonic() - t0)))
