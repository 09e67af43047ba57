"""The runtime's per-message host overhead: what this software layer costs per message.

The presets describe seed 000's testbed: a Myrinet LAN whose MPI costs 4 us of CPU per
message. gridcoll's runtime is Python over mpi4py and MPICH, and on one machine it also
runs the WAN emulation; each message costs it tens of microseconds of CPU on each side
(reading the program, ``Isend``/``Test``, the doorbell, the emulated link's reservation,
the inline header and its check, sleeping until the emulated delivery), and more when
several ranks share a core. A plan tuned for 4 us per message cuts a 1 MB broadcast into
260-byte segments that the runtime cannot push: measured 2-6x the simulation.

P-LogP's answer (seed 000, sec. 2: "o and g depend ... on the behavior of the
underlying MPI implementation") is that ``os`` and ``or`` are those of the software layer
actually used. So the runtime plans, predicts and simulates on the *effective grid*
:meth:`Grid.with_host_overhead(h) <gridcoll.network.Grid.with_host_overhead>`: every
``os`` and ``or`` raised by ``h``, the gaps raised to cover them, the wide-area links
unchanged. The emulated WAN itself stays the physical grid's.

``h`` is, in order of precedence: the caller's value (``gridcoll.Comm(...,
host_overhead=)``, ``gridcoll run --host-overhead``), the environment variable
``GRIDCOLL_HOST_OVERHEAD`` (``40us``, ``0.00004``; the launcher sets it so every rank
plans on the same grid as the command that started them), else the calibrated default
:func:`default_host_overhead`.

Calibration (the default's numbers)
-----------------------------------
``h = c * max(1, (P + load) / cpus)``: ``c`` seconds of CPU per message and side,
stretched by the oversubscription when ``P`` ranks share ``cpus`` cores with ``load``
other runnable processes (every rank of a pipelined broadcast is busy at once, so each
gets about ``cpus / (P + load)`` of a core, and wakes up that much later after each
emulated delivery). ``load`` is the machine's one-minute load average when the
launcher plans (``gridcoll run``, ``gridcoll demo``, the benchmarks: read before their
ranks start, :func:`external_load`); a ``gridcoll.Comm`` computing its own default
inside a job counts no load (its own ranks are the load by then). ``c`` is
:data:`HOST_COST_EMULATED_S` when the WAN is emulated (cross-cluster messages carry the
emulation's work) and :data:`HOST_COST_PLAIN_S` when it is not.

Method (``python bench/host_overhead.py``, which prints and stores every figure): run
schedules whose time is bound by the per-message cost (multitree with 0.25-4 KiB
segments on ``magpie:4,1``, ``magpie:2,2``, ``magpie:8,1``, ``magpie:4,2``,
``magpie:16,1`` with the WAN emulated; flat and chain trees of 256-byte segments on
``lan:2``, ``lan:4``, ``lan:8`` without), measure each (median of 5 verified runs), find
by bisection the ``h`` at which the simulator on ``grid.with_host_overhead(h)`` gives the
measured time, divide by ``max(1, (P + load) / cpus)``, and take the median over the
cases.

Figures, on the 2-core development machine (Python 3.11, mpi4py 4.1, the ``mpich`` 5.0
wheel). Otherwise idle: ``c`` = 21-103 us per case with the WAN emulated, median
45 us; 0-7 us without, median 4 us. Shared with other jobs (load average 5-8 before the
first launch): median 64 us and 9.5 us counting only our ranks, 99 us and 12 us with
the load term (the others' load grew during that run). The defaults take the idle
figure with the WAN emulated (45 us; the load term covers a shared machine, in part)
and a plain cost a little above it (8 us). The two errors do not cost the same: an
overhead planned too high makes segments coarser than needed (on ``magpie:8,1`` at
1 MiB, 180 us instead of 0 makes multitree's segments 4 KiB instead of 1 KiB,
predicted 177 ms instead of 172 ms); one planned too low cuts segments the runtime
cannot push (1 KiB segments measured 0.4-0.8 s instead of 0.17 s). On a busy machine
pass a larger ``--host-overhead`` (800 us brought multitree on ``magpie:8,1`` and
``magpie:4,2`` at 1 MiB within 2-5% of its simulation at load average 4.6).
"""

from __future__ import annotations

import os as _os

from gridcoll.errors import ParameterError
from gridcoll.network.grid import Grid
from gridcoll.units import format_time, parse_time

__all__ = [
    "ENV_HOST_OVERHEAD",
    "HOST_COST_EMULATED_S",
    "HOST_COST_PLAIN_S",
    "HOST_COST_TCP_S",
    "cpus",
    "default_host_overhead",
    "describe",
    "effective_grid",
    "external_load",
    "host_overhead_from_env",
    "local_ranks",
    "parse_host_overhead",
    "resolve_host_overhead",
]

ENV_HOST_OVERHEAD = "GRIDCOLL_HOST_OVERHEAD"
"""Environment variable: the per-message host overhead the runtime plans with
(a duration such as ``40us``; ``auto`` or empty: the calibrated default)."""

HOST_COST_EMULATED_S = 45e-6
"""CPU seconds per message and side with the WAN emulated (calibrated, see above)."""

HOST_COST_PLAIN_S = 8e-6
"""CPU seconds per message and side without emulation (calibrated, see above)."""

HOST_COST_TCP_S = 50e-6
"""CPU seconds per message and side over MPICH's TCP path (a namespace network,
:mod:`gridcoll.runtime.netns`: every message crosses the kernel's TCP stack). Set from
a 256 KiB broadcast on a ``magpie:4,2`` namespace network at 8 ranks on 2 cores
(``gridcoll run --netns --host-overhead H``): 100 us per message gave
measured/simulated 1.21, 200 us 1.09."""


def cpus() -> int:
    """The cores this process may run on."""
    try:
        return max(1, len(_os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # pragma: no cover - not Linux
        return max(1, _os.cpu_count() or 1)


def local_ranks(world_size: int) -> int:
    """Ranks sharing this machine: the launcher's local size if it says (Hydra's
    ``MPI_LOCALNRANKS``, Open MPI's ``OMPI_COMM_WORLD_LOCAL_SIZE``), else all of them."""
    for name in ("MPI_LOCALNRANKS", "OMPI_COMM_WORLD_LOCAL_SIZE"):
        text = _os.environ.get(name, "").strip()
        if text.isdigit() and int(text) > 0:
            return int(text)
    return world_size


def external_load() -> float:
    """The machine's one-minute load average (0 where unknown): the other runnable
    processes our ranks will share the cores with, if read before they start."""
    try:
        return max(0.0, _os.getloadavg()[0])
    except (AttributeError, OSError):  # pragma: no cover - not Unix
        return 0.0


def default_host_overhead(
    nranks: int,
    *,
    emulated: bool,
    ncpus: int | None = None,
    load: float = 0.0,
    tcp: bool = False,
) -> float:
    """The calibrated per-message host overhead for ``nranks`` ranks on one machine
    that runs ``load`` other processes.

    ``c * max(1, (nranks + load) / ncpus)`` with ``c`` = :data:`HOST_COST_TCP_S` if the
    ranks talk over TCP (``tcp``), else :data:`HOST_COST_EMULATED_S` if the WAN is
    emulated, else :data:`HOST_COST_PLAIN_S`.

    >>> round(default_host_overhead(8, emulated=True, ncpus=2) * 1e6, 3)
    180.0
    >>> round(default_host_overhead(8, emulated=True, ncpus=2, load=2.0) * 1e6, 3)
    225.0
    >>> round(default_host_overhead(2, emulated=False, ncpus=4) * 1e6, 3)
    8.0
    """
    cost = HOST_COST_TCP_S if tcp else HOST_COST_EMULATED_S if emulated else HOST_COST_PLAIN_S
    return cost * max(1.0, (nranks + max(0.0, load)) / (ncpus or cpus()))


def parse_host_overhead(text: str | float | None) -> float | None:
    """A host overhead from the command line or environment: seconds, or None for the
    default (``None``, empty or ``auto``). Raises ParameterError for a bad value."""
    if text is None:
        return None
    if isinstance(text, str):
        text = text.strip()
        if text.lower() in ("", "auto", "default"):
            return None
    value = parse_time(text)
    if not (value >= 0 and value < 1.0):
        raise ParameterError(f"host overhead must be >= 0 and below 1 s per message, got {text!r}")
    return value


def host_overhead_from_env() -> float | None:
    """``GRIDCOLL_HOST_OVERHEAD`` in seconds, or None if unset / ``auto``."""
    text = _os.environ.get(ENV_HOST_OVERHEAD)
    try:
        return parse_host_overhead(text)
    except ParameterError as err:
        raise ParameterError(f"{ENV_HOST_OVERHEAD}={text!r}: {err}") from err


def resolve_host_overhead(
    explicit: float | str | None,
    nranks: int,
    *,
    emulated: bool,
    load: float = 0.0,
    tcp: bool = False,
) -> float:
    """The overhead to plan with: ``explicit``, else the environment, else the default
    (for ``load`` other processes on the machine; ``tcp``: over MPICH's TCP path)."""
    value = parse_host_overhead(explicit)
    if value is None:
        value = host_overhead_from_env()
    if value is None:
        value = default_host_overhead(nranks, emulated=emulated, load=load, tcp=tcp)
    return value


def effective_grid(grid: Grid, host_overhead: float) -> Grid:
    """The grid the runtime plans and simulates on: :meth:`Grid.with_host_overhead`,
    memoised on the grid (table ``host_overhead``: the very object
    ``tune.plan(grid, ..., host_overhead=h)`` plans on)."""
    if not host_overhead:
        return grid
    return grid.memo.get(
        "host_overhead", float(host_overhead), lambda: grid.with_host_overhead(host_overhead), 8
    )


def describe(host_overhead: float) -> str:
    """``160 us per message``."""
    return f"{format_time(host_overhead)} per message"
