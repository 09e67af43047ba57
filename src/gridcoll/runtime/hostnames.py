"""Which hosts the ranks run on: one machine, or several.

Theory of operation
-------------------
Three parts of the runtime hold only when every rank of a communicator runs on one
machine: the futex doorbells live in a shared-memory file
(:mod:`gridcoll.runtime.doorbell`), the WAN emulation's link state lives in ``/dev/shm``
and its delivery times are read on one ``time.monotonic`` clock
(:mod:`gridcoll.runtime.emulation`), and the worker's common start instant is read on
that clock too (:mod:`gridcoll.runtime.worker`, as is the measurement's one-way time,
:mod:`gridcoll.measure.transport`). Each asks this module whether the ranks share one
host, by their processor names (:func:`processor_name`), and falls back when they do
not: no doorbells (plain sleeps with the executor's backoff), the emulation refused
(:func:`one_host_or_raise`), the worker's barrier-to-barrier timing, no one-way time.
A grid that places its ranks by host (:func:`gridcoll.network.grid.place_by_host`) is
resolved from the same names (:func:`gather_hosts`).

Testing on one machine: ``GRIDCOLL_FAKE_HOSTNAME`` makes every rank report a host name
of the test's choosing instead of ``MPI.Get_processor_name()`` (:func:`fake_hostname`),
so the several-hosts paths and placement by host run under one ``mpiexec`` here. It is
a testing aid: real host names are always the MPI library's.
"""

from __future__ import annotations

import os as _os
import re as _re
from collections.abc import Callable, Sequence
from typing import Any

import numpy as _np

from gridcoll.errors import GridError, ParameterError

__all__ = [
    "ENV_FAKE_HOSTNAME",
    "NAME_BYTES",
    "fake_hostname",
    "gather_hosts",
    "one_host",
    "one_host_or_raise",
    "processor_name",
]

ENV_FAKE_HOSTNAME = "GRIDCOLL_FAKE_HOSTNAME"
"""Environment variable (a testing aid): the host name each rank reports, a template
with ``{rank}`` or ``{rank//K}`` (the rank in ``MPI.COMM_WORLD``: ``host-{rank//2}``
puts ranks 0 and 1 on ``host-0``, 2 and 3 on ``host-1``...) or a comma-separated list
(rank ``r`` reports item ``r``)."""

NAME_BYTES = 256
"""Bytes of a host name exchanged between ranks (``MPI_MAX_PROCESSOR_NAME`` is 128 in
MPICH, 256 in Open MPI); longer names are cut there."""

_FIELD = _re.compile(r"\{rank(?://([1-9][0-9]{0,8}))?\}")


def fake_hostname(spec: str, rank: int) -> str:
    """The host name ``GRIDCOLL_FAKE_HOSTNAME=spec`` gives the process of world rank
    ``rank``.

    >>> fake_hostname("host-{rank//2}", 5)
    'host-2'
    >>> fake_hostname("a,a,b,b", 2)
    'b'

    Raises ParameterError for a template with another field, a list too short for
    ``rank``, or an empty name.
    """
    if "{" in spec or "}" in spec:
        rest = _FIELD.sub("", spec)
        if "{" in rest or "}" in rest:
            raise ParameterError(
                f"{ENV_FAKE_HOSTNAME}={spec!r:.80}: the only fields are {{rank}} and {{rank//K}}"
            )
        name = _FIELD.sub(lambda m: str(rank // int(m.group(1) or 1)), spec)
    else:
        items = [item.strip() for item in spec.split(",")]
        if rank >= len(items):
            raise ParameterError(
                f"{ENV_FAKE_HOSTNAME}={spec!r:.80} names {len(items)} hosts; rank {rank} has none"
            )
        name = items[rank]
    if not name or not name.isprintable():
        raise ParameterError(f"{ENV_FAKE_HOSTNAME} gives rank {rank} the host name {name!r:.80}")
    return name


def processor_name() -> str:
    """This process's host: ``MPI.Get_processor_name()``, or its fake name when
    ``GRIDCOLL_FAKE_HOSTNAME`` is set (:func:`fake_hostname`)."""
    from mpi4py import MPI

    spec = _os.environ.get(ENV_FAKE_HOSTNAME, "").strip()
    if spec:
        return fake_hostname(spec, MPI.COMM_WORLD.Get_rank())
    return MPI.Get_processor_name()


def gather_hosts(
    comm: Any, wait: Callable[..., Any], timeout: float, mine: str | None = None
) -> tuple[str, ...]:
    """The host of every rank of ``comm``, in rank order (collective: one
    ``MPI_Iallgather`` of :data:`NAME_BYTES` per rank, completed by ``wait(request,
    timeout, what=...)``). ``mine``: this rank's name (default :func:`processor_name`)."""
    raw = (processor_name() if mine is None else mine).encode()[:NAME_BYTES]
    send = _np.zeros(NAME_BYTES, dtype=_np.uint8)
    send[: len(raw)] = _np.frombuffer(raw, dtype=_np.uint8)
    recv = _np.empty((comm.Get_size(), NAME_BYTES), dtype=_np.uint8)
    wait(comm.Iallgather(send, recv), timeout, what="gathering the ranks' host names")
    return tuple(row.tobytes().rstrip(b"\0").decode("utf-8", errors="replace") for row in recv)


def one_host(names: Sequence[str]) -> bool:
    """True when every rank runs on one host (``names``: :func:`gather_hosts`)."""
    return len(set(names)) <= 1


def one_host_or_raise(names: Sequence[str], what: str) -> None:
    """Raise GridError naming the hosts unless every rank runs on one: ``what`` (the WAN
    emulation) needs one machine's shared memory and clock."""
    if one_host(names):
        return
    hosts = list(dict.fromkeys(names))
    shown = ", ".join(repr(h) for h in hosts[:6]) + (", ..." if len(hosts) > 6 else "")
    raise GridError(
        f"{what} runs on one machine (its link state is shared memory, its delivery "
        f"times one machine's monotonic clock), but the ranks run on {len(hosts)} hosts: "
        f"{shown}; run every rank on one host, or turn the emulation off "
        "(GRIDCOLL_EMULATE=0)"
    )
