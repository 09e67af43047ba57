"""The MPI side of the measurement: *measure* and *mirror* over mpi4py, on the emulated WAN.

Theory of operation
-------------------
:class:`MPITransport` runs the probes of :mod:`gridcoll.measure.plogp_procedure` on the
*measure* rank; :func:`run_mirror` is the *mirror* rank's loop (seed 000, figure 4).
Both sit on a private duplicate of the caller's communicator and never block inside
MPI: every wait tests its request and sleeps (on a futex doorbell when the ranks share
a machine, :mod:`gridcoll.runtime.doorbell`), as the runtime does.

Rule 1: the mirror learns what to do from the tag. ``GAP`` messages are only
received; ``GAP_LAST`` gets one empty reply; ``DATA`` (m bytes) gets one empty reply;
``OR`` (empty) gets an m-byte reply, m announced before by one ``CTRL`` message per
probe; ``STOP`` ends the loop. Payload sizes are the procedure's ``m``.

Rule 2: the WAN emulation (:mod:`gridcoll.runtime.emulation`) sits below, exactly as
in the runtime's executor: a cross-cluster send reserves the emulated links and carries
the delivery time ``deliver_at`` in a 16-byte header in front of its payload; the
receiver does not take the message before ``deliver_at``; the sender stays busy
``max(0, os_w(m) - os_l(m))`` after its ``Isend``. LAN messages are real.

Rule 3: when both ranks share one machine (:mod:`gridcoll.runtime.hostnames`),
``time.monotonic`` is one clock: the mirror writes the instant it took a ``DATA``
message into the reply's header, which gives the one-way time (and so asymmetric
latencies; seed 000 notes this needs synchronised clocks). Messages carry the header
only when emulated or on one machine. On several hosts there is no one-way time, and
the emulation is refused (it needs one machine's shared memory and clock).

Timings: ``os`` is from the start of the send call (the emulated reservation included)
until it returns (the emulated busy time included); ``rtt`` until the reply is taken
(at its ``deliver_at``); ``or`` from posting the receive, ``Delta = delta_factor *
RTT(m) + DELTA_MARGIN`` after asking the mirror, until it completes. Every timestamp is
``time.monotonic`` (``CLOCK_MONOTONIC``, nanosecond resolution; ``perf_counter`` is the
same clock on Linux): the emulator's delivery times are on it, and it is the one clock
both ranks of a machine share. A delivery is awaited by :meth:`_Wire.sleep_until`,
which never yields the CPU to a busy neighbour for a scheduler slice; what lateness
remains, the procedure's lower envelopes ignore (:mod:`gridcoll.measure.plogp_procedure`,
Rule 5).
"""

from __future__ import annotations

import contextlib
import gc
import os
import time
from dataclasses import dataclass

import numpy as np

from gridcoll.errors import GridError, MeasurementError
from gridcoll.measure.plogp_procedure import (
    Cost,
    GapProbe,
    Sample,
    SizeProbe,
)
from gridcoll.network.grid import Grid

__all__ = [
    "DELTA_MARGIN",
    "Endpoint",
    "MPITransport",
    "open_endpoint",
    "run_mirror",
]

DELTA_MARGIN = 2e-3
"""Seconds added to ``delta_factor * RTT(m)`` before the or-receive (ours)."""
BACKOFF_START = 20e-6
BACKOFF_MAX = 1e-3
FINE_SLEEP = 150e-6
"""The last stretch of an emulated delivery, slept in halves (see ``sleep_until``)."""
SPIN = 20e-6
"""The very last stretch, spent looking at the clock (see ``sleep_until``)."""
HEADER = 16  # deliver_at, aux (float64 each)
_FLOOD_RING = 64  # ring the mirror every this many flood messages
_FLOOD_WINDOW = 1024  # at most this many flood sends in flight (the rest wait, sleeping)
TAG_CTRL, TAG_GAP, TAG_GAP_LAST, TAG_DATA, TAG_OR, TAG_REPLY, TAG_STOP = range(7101, 7108)


def _set_timer_slack() -> None:
    """1 us timer slack, so short sleeps are short (as the runtime asks too)."""
    try:
        import ctypes

        ctypes.CDLL(None).prctl(29, 1000, 0, 0, 0)  # PR_SET_TIMERSLACK
    except (OSError, AttributeError):
        pass


@dataclass
class Endpoint:
    """What every rank of a measurement needs: the private communicator, the grid, the
    emulator (or None), the doorbells (or None) and whether the ranks share a clock."""

    comm: object  # MPI.Intracomm, private
    grid: Grid
    emulator: object | None
    bells: object | None
    shared_clock: bool
    timeout: float
    _link_state: object | None = None

    @property
    def rank(self) -> int:
        return self.comm.Get_rank()

    def close(self) -> None:
        """Free the private communicator and the doorbells (local)."""
        from mpi4py import MPI

        if self.bells is not None:
            self.bells.close()
            self.bells = None
        if self._link_state is not None:
            self._link_state.close()
            self._link_state = None
        if self.comm is not None and not MPI.Is_finalized():
            with contextlib.suppress(MPI.Exception):
                self.comm.Free()
        self.comm = None


def _resolve_grid(comm, grid) -> tuple[Grid, Grid]:
    """(grid of ``comm``, grid of the launch's link state): as :class:`gridcoll.Comm`."""
    from mpi4py import MPI

    from gridcoll.network.presets import get_grid, lan
    from gridcoll.runtime import emulation as emu

    size = comm.Get_size()
    if grid is None and hasattr(comm, "grid") and isinstance(comm.grid, Grid):
        grid = comm.grid  # a gridcoll.Comm knows its grid
    if grid is not None:
        resolved = get_grid(grid)
        base = resolved
        spec = os.environ.get(emu.ENV_GRID, "").strip()
        if spec:
            env_grid = get_grid(spec)
            if env_grid.nranks == MPI.COMM_WORLD.Get_size() and size != env_grid.nranks:
                base = env_grid
    else:
        spec = os.environ.get(emu.ENV_GRID, "").strip()
        if not spec:
            return lan(size), lan(size)
        base = get_grid(spec)
        resolved = base
        if base.nranks == MPI.COMM_WORLD.Get_size():
            g1, g2 = comm.Get_group(), MPI.COMM_WORLD.Get_group()
            try:
                ranks = g1.Translate_ranks(list(range(size)), g2)
            finally:
                g1.Free()
                g2.Free()
            resolved = emu.subgrid(base, list(ranks))
    if resolved.nranks != size:
        raise GridError(
            f"grid {resolved.name!r} has {resolved.nranks} ranks but the communicator has "
            f"{size}: pass grid= with one rank per process"
        )
    return resolved, base


def open_endpoint(comm, grid=None, *, emulate: bool | None = None, timeout: float = 60.0):
    """Set up a measurement on ``comm`` (collective over it).

    ``grid``: the grid the ranks run on (default: ``comm.grid`` for a
    :class:`gridcoll.Comm`, else the launch's ``GRIDCOLL_GRID``, else one cluster).
    ``emulate``: emulate its WAN links (default: when ``GRIDCOLL_EMULATE`` asks).
    """
    from mpi4py import MPI

    from gridcoll.runtime import emulation as emu
    from gridcoll.runtime.doorbell import Doorbells
    from gridcoll.runtime.executor import wait
    from gridcoll.runtime.hostnames import gather_hosts, one_host, one_host_or_raise

    _set_timer_slack()
    resolved, base = _resolve_grid(comm, grid)
    private, req = MPI.Intracomm(comm).Idup()
    wait(req, timeout, what="duplicating the communicator for the measurement")
    hosts = gather_hosts(private, wait, timeout)
    shared_clock = one_host(hosts)
    bells = Doorbells.open_for(private, wait, timeout) if private.Get_size() > 1 else None
    emulate = emu.emulation_requested() if emulate is None else emulate
    emulator = link_state = None
    if emulate and not resolved.is_single_cluster:
        one_host_or_raise(hosts, "the WAN emulation")
        link_state = _link_state(private, base, timeout)
        emulator = emu.Emulator(resolved, link_state, *emu.environment_load())
    return Endpoint(private, resolved, emulator, bells, shared_clock, timeout, link_state)


def _link_state(comm, base: Grid, timeout: float):
    """The launch's shared link state if it belongs to ``base``, else a fresh one."""
    from mpi4py import MPI

    from gridcoll.network.presets import get_grid
    from gridcoll.runtime import emulation as emu
    from gridcoll.runtime.executor import wait

    path = os.environ.get(emu.ENV_LINK_STATE, "").strip()
    spec = os.environ.get(emu.ENV_GRID, "").strip()
    if path and spec and get_grid(spec).fingerprint == base.fingerprint:
        return emu.LinkState(path, base)
    name = np.zeros(512, dtype=np.uint8)
    if comm.Get_rank() == 0:
        raw = str(emu.create_link_state(base)).encode()
        name[: len(raw)] = np.frombuffer(raw, dtype=np.uint8)
    wait(comm.Ibcast([name, MPI.BYTE], 0), timeout, what="sharing the link state")
    state = emu.LinkState(name.tobytes().rstrip(b"\0").decode(), base)
    wait(comm.Ibarrier(), timeout, what="opening the link state")
    if comm.Get_rank() == 0:
        os.unlink(state.path)
    return state


class _Wire:
    """One end of the measure-mirror pair: framed, emulated, never spinning."""

    def __init__(self, ep: Endpoint, peer: int):
        self.ep = ep
        self.comm = ep.comm
        self.me = ep.rank
        self.peer = peer
        self.emu = (
            ep.emulator if ep.emulator is not None and ep.emulator.crosses(ep.rank, peer) else None
        )
        self.framed = self.emu is not None or ep.shared_clock
        self.H = HEADER if self.framed else 0
        self.pending: list = []
        self.sent = Cost()
        self.small = np.zeros(HEADER + 8, dtype=np.uint8)  # control, empty messages
        self.big = np.zeros(HEADER, dtype=np.uint8)
        self.rbuf = np.zeros(HEADER + 8, dtype=np.uint8)

    def grow(self, m: int) -> None:
        if self.big.size < self.H + m:
            self.finish_sends()
            self.big = np.zeros(self.H + m, dtype=np.uint8)
            self.big[self.H :] = 0xA5
        if self.rbuf.size < self.H + m:
            self.rbuf = np.zeros(self.H + m, dtype=np.uint8)

    # -- sending -----------------------------------------------------------------------
    def send(self, tag: int, m: int, *, aux: float = 0.0, buf: np.ndarray | None = None) -> float:
        """Send ``m`` payload bytes; return when the send call started."""
        from mpi4py import MPI

        t0 = time.monotonic()
        deliver = self.emu.reserve(self.me, self.peer, m, t0) if self.emu is not None else 0.0
        if buf is None:
            buf = self.big if m > 8 else self.small
        if self.framed:
            head = buf[:HEADER].view(np.float64)
            head[0], head[1] = deliver, aux
        self.pending.append(self.comm.Isend([buf[: self.H + m], MPI.BYTE], self.peer, tag))
        if self.ep.bells is not None:
            self.ep.bells.ring(self.peer)
        if self.emu is not None:
            busy = self.emu.send_overhead(self.me, self.peer, m)
            if busy > 0:
                self.sleep_until(time.monotonic() + busy)
        self.sent += Cost(1, m, 0.0)
        return t0

    def progress(self) -> bool:
        """Test pending sends, oldest first; True if any completed."""
        done = 0
        for req in self.pending:
            if not req.Test():
                break
            done += 1
        if done:
            del self.pending[:done]
        return done > 0

    def drain(self, keep: int) -> None:
        """Sleep until at most ``keep`` sends are in flight (flow control of a flood)."""
        deadline = time.monotonic() + self.ep.timeout
        delay = BACKOFF_START
        while len(self.pending) > keep:
            seen = self.ep.bells.seen() if self.ep.bells is not None else 0
            if self.progress():
                delay = BACKOFF_START
                continue
            if time.monotonic() > deadline:
                raise MeasurementError(self._lost("did not take our messages"))
            if self.ep.bells is not None:
                self.ep.bells.ring(self.peer)
            self.nap(seen, delay)
            delay = min(2 * delay, BACKOFF_MAX)

    def finish_sends(self) -> None:
        deadline = time.monotonic() + self.ep.timeout
        delay = BACKOFF_START
        while self.pending:
            seen = self.ep.bells.seen() if self.ep.bells is not None else 0
            if self.progress():
                delay = BACKOFF_START
                continue
            if time.monotonic() > deadline:
                raise MeasurementError(self._lost("did not take our message"))
            self.nap(seen, delay)
            delay = min(2 * delay, BACKOFF_MAX)

    # -- receiving ---------------------------------------------------------------------
    def recv(self, tag: int, m: int | None = None, *, ring: bool = False) -> tuple[int, int, float]:
        """Take the next message from the peer (``tag`` or any); return (tag, payload
        bytes, aux) once its emulated delivery time has passed."""
        from mpi4py import MPI

        size = self.H + (m if m is not None else max(self.rbuf.size - self.H, 8))
        if self.rbuf.size < size:
            self.rbuf = np.zeros(size, dtype=np.uint8)
        status = MPI.Status()
        req = self.comm.Irecv([self.rbuf[:size], MPI.BYTE], self.peer, tag)
        if ring and self.ep.bells is not None:
            self.ep.bells.ring(self.peer)
        self.wait(req, status, ring=ring)
        count = status.Get_count(MPI.BYTE) - self.H
        deliver = aux = 0.0
        if self.framed:
            head = self.rbuf[:HEADER].view(np.float64)
            deliver, aux = float(head[0]), float(head[1])
        if self.emu is not None and self.framed:
            self.emu.wait(deliver, self.peer, self.me, count, self.sleep_until)
        return status.Get_tag(), count, aux

    def wait(self, req, status, *, ring: bool = False) -> None:
        bells = self.ep.bells
        deadline = time.monotonic() + self.ep.timeout
        delay = BACKOFF_START
        while True:
            seen = bells.seen() if bells is not None else 0
            if req.Test(status):
                return
            if self.progress():
                delay = BACKOFF_START
            if time.monotonic() > deadline:
                with contextlib.suppress(Exception):
                    req.Cancel()
                raise MeasurementError(self._lost("sent nothing"))
            if ring and bells is not None:
                bells.ring(self.peer)  # a large message moves only while both ends are in MPI
            self.nap(seen, delay)
            delay = min(2 * delay, BACKOFF_MAX)

    def _lost(self, what: str) -> str:
        return (
            f"rank {self.peer} {what} within {self.ep.timeout:g} s: it was lost (died, "
            "hung or never joined) or the measurement was interrupted"
        )

    def nap(self, seen: int, seconds: float) -> None:
        if self.ep.bells is not None:
            self.ep.bells.sleep(seen, seconds)
        else:
            time.sleep(seconds)

    def sleep_until(self, deadline: float) -> None:
        """Sleep until ``deadline``, driving pending sends now and then.

        A sleep overshoots by tens of microseconds, and by milliseconds now and then on
        a busy machine; a ``sched_yield`` on a core another process keeps busy returns
        only when the scheduler's slice of that process ends (about 2 ms measured on a
        2-core machine with a CPU hog on each core). So the rank sleeps until
        :data:`FINE_SLEEP` before ``deadline``, then sleeps half of what is left, each
        wake-up costing a few microseconds, and looks at the clock without sleeping for
        the last :data:`SPIN` seconds only (never a spin that starves a peer).
        """
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return
            if self.pending:
                self.progress()
            if left > FINE_SLEEP:
                time.sleep(
                    min(BACKOFF_MAX, left - FINE_SLEEP) if self.pending else left - FINE_SLEEP
                )
            elif left > SPIN:
                time.sleep(left / 2)


class MPITransport:
    """The *measure* side: runs probes against a mirror (see the module docstring).

    Made by :func:`gridcoll.measure.measure_plogp`; ``run(probe)`` is what
    :func:`~gridcoll.measure.plogp_procedure.run_procedure` calls.
    """

    def __init__(self, ep: Endpoint, mirror: int):
        self.wire = _Wire(ep, mirror)
        self.control = Cost()
        self.shared_clock = ep.shared_clock

    @property
    def cost(self) -> Cost:
        """Everything this side sent (the mirror's replies are counted by the procedure)."""
        return self.wire.sent

    def run(self, probe: GapProbe | SizeProbe):
        if isinstance(probe, GapProbe):
            return self._gap(probe.n)
        return self._sizes(probe)

    def _announce(self, m: int) -> None:
        w = self.wire
        w.finish_sends()
        w.small[w.H : w.H + 8].view(np.int64)[0] = m
        w.send(TAG_CTRL, 8)
        self.control += Cost(1, 8, 0.0)
        w.finish_sends()

    def _gap(self, n: int) -> float:
        w = self.wire
        w.finish_sends()
        flood = np.zeros(HEADER, dtype=np.uint8)
        last = np.zeros(HEADER, dtype=np.uint8)
        t0 = time.monotonic()
        bells, ring = w.ep.bells, w.ep.bells is not None
        emu, comm, peer, view, byte = w.emu, w.comm, w.peer, flood[: w.H], _byte()
        gc_was = gc.isenabled()
        gc.disable()  # millions of short-lived requests: no cyclic collection mid-flood
        try:
            for i in range(n - 1):
                if emu is not None:
                    emu.reserve(w.me, peer, 0, time.monotonic())
                w.pending.append(comm.Isend([view, byte], peer, TAG_GAP))
                if i % _FLOOD_RING == _FLOOD_RING - 1:
                    if ring:
                        bells.ring(peer)
                    w.progress()
                    if len(w.pending) > _FLOOD_WINDOW:
                        w.drain(_FLOOD_WINDOW // 2)
        finally:
            if gc_was:
                gc.enable()
        w.sent += Cost(n - 1, 0, 0.0)
        w.send(TAG_GAP_LAST, 0, buf=last)
        w.recv(TAG_REPLY, 0)
        rtt = time.monotonic() - t0
        w.finish_sends()
        return rtt

    def _sizes(self, probe: SizeProbe) -> list[Sample]:
        w, m = self.wire, probe.m
        w.grow(m)
        self._announce(m)
        samples = []
        for _ in range(probe.reps):
            # roundtrip 1: m bytes there (os, RTT), an empty reply back
            w.finish_sends()
            t0 = time.monotonic()
            w.send(TAG_DATA, m)
            os_ = time.monotonic() - t0
            _, _, t_mirror = w.recv(TAG_REPLY, 0)
            rtt = time.monotonic() - t0
            owd = t_mirror - t0 if self.shared_clock and t_mirror > 0 else None
            w.finish_sends()
            if not probe.with_or:
                samples.append(Sample(os_, rtt, 0.0, owd))
                continue
            # roundtrip 2: an empty message there, wait Delta > RTT(m), receive m bytes
            delta = probe.delta_factor * rtt + DELTA_MARGIN
            t2 = w.send(TAG_OR, 0)
            w.finish_sends()
            w.sleep_until(t2 + delta)
            t3 = time.monotonic()
            w.recv(TAG_REPLY, m, ring=m > 8192)
            or_ = time.monotonic() - t3
            samples.append(Sample(os_, rtt, or_, owd))
        return samples

    def close(self) -> None:
        """Tell the mirror to stop."""
        w = self.wire
        with contextlib.suppress(MeasurementError):
            w.finish_sends()
        w.send(TAG_STOP, 0)
        self.control += Cost(1, 0, 0.0)
        w.finish_sends()


def _byte():
    from mpi4py import MPI

    return MPI.BYTE


def run_mirror(ep: Endpoint, measure: int, *, fail_after: int | None = None) -> Cost:
    """The *mirror* rank's loop (seed 000, figure 4), until the measure rank says STOP.

    Returns what it sent. ``fail_after`` (tests) makes it vanish after that many
    messages (a flood of ``GAP`` messages counting once), as a lost rank would.
    """
    w = _Wire(ep, measure)
    m, seen = 0, 0
    while True:
        tag, _, _ = w.recv(_any_tag())
        seen += tag != TAG_GAP  # a flood counts once (its last message)
        if fail_after is not None and seen > fail_after:
            os._exit(3)
        if tag == TAG_STOP:
            w.finish_sends()
            return w.sent
        if tag == TAG_CTRL:
            m = int(w.rbuf[w.H : w.H + 8].view(np.int64)[0])
            w.finish_sends()
            w.grow(m)
        elif tag in (TAG_GAP_LAST, TAG_DATA):
            taken = time.monotonic()
            w.finish_sends()  # the reply reuses a buffer
            w.send(TAG_REPLY, 0, aux=taken if w.framed else 0.0)
        elif tag == TAG_OR:
            w.finish_sends()
            w.send(TAG_REPLY, m)
        # TAG_GAP: only received


def _any_tag() -> int:
    from mpi4py import MPI

    return MPI.ANY_TAG
