"""What ``gridcoll measure`` and ``gridcoll discover`` start on every rank.

``python -m gridcoll.measure.worker JOB.json``: the job file names the mode and its
arguments and a work directory. The ranks find the grid and the WAN emulation in the
environment the launcher set (:mod:`gridcoll.measure.launch`).

* ``plogp``: :func:`gridcoll.measure.measure_plogp` between two ranks; the measure rank
  appends a progress line per probe to ``progress.jsonl`` and keeps what it has found
  in ``partial-<direction>.json`` (replaced atomically after every probe), so an
  interruption at any moment leaves the sizes measured so far.
* ``matrix``: :func:`gridcoll.measure.measure_matrix`, repeated if asked, each round
  written to ``result.json`` and appended to the history.
* ``pairs``: :func:`gridcoll.measure.pairwise_matrices` (rank-to-rank, for discovery).

Rank 0 writes ``result.json``. A rank that fails writes ``error.json`` (and
``GRIDCOLL-ERROR {json}`` on stderr) and exits with status 1.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

__all__ = ["main"]

ERROR_PREFIX = "GRIDCOLL-ERROR "


def _write(path: Path, data: dict) -> None:
    tmp = path.with_suffix(path.suffix + f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps(data))
    os.replace(tmp, path)


def _plogp(job: dict, workdir: Path) -> dict | None:
    from mpi4py import MPI

    from gridcoll.measure.link import measure_plogp
    from gridcoll.measure.plogp_procedure import Settings, SizeProbe

    settings = Settings(**job.get("settings", {}))
    a, b = job["a"], job["b"]
    world = MPI.COMM_WORLD
    start = time.monotonic()
    progress_path = workdir / "progress.jsonl"

    def progress(proc, probe) -> None:
        direction = "forward" if world.Get_rank() == a else "backward"
        part = proc.measurement()
        _write(workdir / f"partial-{direction}.json", part.to_dict())
        line = {
            "direction": direction,
            "elapsed_s": time.monotonic() - start,
            "sizes_done": proc.sizes_done,
            "messages": part.cost.messages,
            "bytes": part.cost.bytes,
        }
        if isinstance(probe, SizeProbe):
            line |= {"m": probe.m, "reps": probe.reps}
        else:
            line |= {"n": probe.n}
        with open(progress_path, "a") as f:
            f.write(json.dumps(line) + "\n")

    link = measure_plogp(
        world,
        a,
        b,
        both_directions=job.get("both", False),
        settings=settings,
        timeout=job.get("timeout", 60.0),
        progress=progress,
        fail_after=job.get("fail_after"),
    )
    if world.Get_rank() != 0:
        return None
    return link.to_dict()


def _matrix(job: dict, workdir: Path) -> dict | None:
    from mpi4py import MPI

    from gridcoll.measure.matrix import measure_matrix

    world = MPI.COMM_WORLD
    count, every = job.get("count", 1), job.get("every", 0.0)
    history = job.get("history")
    result, i = None, 0
    while count == 0 or i < count:
        t0 = time.time()
        matrices = measure_matrix(
            world,
            clusters=job.get("clusters"),
            timeout=job.get("timeout", 60.0),
            size=job.get("size"),
        )
        if world.Get_rank() == 0:
            result = matrices.to_dict()
            _write(workdir / "result.json", result)
            if history:
                with open(history, "a") as f:
                    f.write(json.dumps(result) + "\n")
            with open(workdir / "progress.jsonl", "a") as f:
                f.write(json.dumps({"round": i + 1, "elapsed_s": time.time() - t0}) + "\n")
        i += 1
        if count == 0 or i < count:
            time.sleep(max(0.0, every - (time.time() - t0)))
    return result


def _pairs(job: dict, workdir: Path) -> dict | None:
    from mpi4py import MPI

    from gridcoll.measure.discover import pairwise_matrices

    world = MPI.COMM_WORLD
    matrices = pairwise_matrices(world, timeout=job.get("timeout", 60.0), size=job.get("size"))
    return matrices.to_dict() if world.Get_rank() == 0 else None


def _discover(job: dict, workdir: Path) -> dict | None:
    from mpi4py import MPI

    from gridcoll.measure.discover import (
        find_clusters,
        grid_from_cluster_matrices,
        grid_from_matrices,
        pairwise_matrices,
    )
    from gridcoll.measure.matrix import measure_matrix
    from gridcoll.network.gridfile import grid_to_dict

    world, timeout = MPI.COMM_WORLD, job.get("timeout", 60.0)
    t0 = time.monotonic()
    pairwise = pairwise_matrices(world, timeout=timeout)
    t1 = time.monotonic()
    clustering = find_clusters(pairwise.latency, pairwise.bandwidth, min_gap=job["min_gap"])
    matrices = None
    if job.get("refine", True):
        matrices = measure_matrix(world, clusters=clustering.clusters, timeout=timeout)
        grid = grid_from_cluster_matrices(clustering.clusters, matrices, name=job["name"])
    else:
        grid = grid_from_matrices(clustering, pairwise, name=job["name"])
    if world.Get_rank() != 0:
        return None
    return {
        "grid": grid_to_dict(grid),
        "clusters": [list(c) for c in clustering.clusters],
        "metric": clustering.metric,
        "separation": clustering.separation if clustering.separation < 1e300 else None,
        "reason": clustering.reason,
        "pairwise": pairwise.to_dict(),
        "matrices": matrices.to_dict() if matrices is not None else None,
        "pairwise_s": t1 - t0,
        "elapsed_s": time.monotonic() - t0,
    }


MODES = {"plogp": _plogp, "matrix": _matrix, "pairs": _pairs, "discover": _discover}


def main(argv: list[str] | None = None) -> int:
    """Run the job of ``argv[0]``; return the exit status."""
    argv = sys.argv[1:] if argv is None else argv
    job = json.loads(Path(argv[0]).read_text())
    workdir = Path(job["workdir"])
    from mpi4py import MPI

    rank = MPI.COMM_WORLD.Get_rank()
    try:
        result = MODES[job["mode"]](job, workdir)
    except Exception as err:  # report, then leave without MPI_Finalize (peers may be gone)
        info = {
            "rank": rank,
            "type": type(err).__name__,
            "message": " ".join(str(err).split()),
        }
        partial = getattr(err, "partial", None)
        if isinstance(partial, dict):  # both directions: {"forward": ..., "backward": ...}
            for direction, part in partial.items():
                if part is not None:
                    _write(workdir / f"partial-{direction}.json", part.to_dict())
        elif partial is not None and hasattr(partial, "to_dict"):
            direction = "forward" if rank == job.get("a") else "backward"
            _write(workdir / f"partial-{direction}.json", partial.to_dict())
        _write(workdir / f"error-{rank}.json", info)
        sys.stderr.write(ERROR_PREFIX + json.dumps(info) + "\n")
        sys.stderr.flush()
        os._exit(1)
    if result is not None:
        _write(workdir / "result.json", result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
