"""Doorbells: wake a sleeping rank when a message for it has been posted (Linux futex).

Theory of operation
-------------------
The executor never spins: a rank whose message has not arrived sleeps and tests again.
With plain sleeps the rank notices the message only when its sleep ends (up to
:data:`gridcoll.runtime.executor.BACKOFF_MAX` late, at every hop of a pipeline). When all
ranks of a communicator share one machine, each has a *doorbell*: a 32-bit word in a
shared-memory file. A sender, after its ``Isend``, bumps the receiver's word and calls
``FUTEX_WAKE`` on it; a waiting rank reads its word, tests its request, and if the
message is not there sleeps in ``FUTEX_WAIT`` on the word it read (with the backoff as
timeout). The kernel returns at once if the word changed since it was read, so no
wake-up is lost, and the rank wakes within microseconds of the message being posted
while still using no CPU when idle.

A lost increment (two senders bumping one word at once) does no harm: the word still
changed, and both senders call ``FUTEX_WAKE``. Ranks on several hosts (by their
processor names, :func:`gridcoll.runtime.hostnames.processor_name`, which
``GRIDCOLL_FAKE_HOSTNAME`` can fake for a test), or systems without futexes, get no
doorbells and fall back to plain sleeps with the executor's backoff.
"""

from __future__ import annotations

import ctypes as _ctypes
import mmap as _mmap
import os as _os
import platform as _platform
import uuid as _uuid
import zlib as _zlib
from pathlib import Path

import numpy as _np

from gridcoll.runtime.hostnames import processor_name

__all__ = ["Doorbells", "futex_available"]

_SYS_FUTEX = {"x86_64": 202, "amd64": 202, "aarch64": 98, "arm64": 98, "ppc64le": 221}.get(
    _platform.machine().lower()
)
_FUTEX_WAIT, _FUTEX_WAKE = 0, 1
_STRIDE = 16  # int32 words per rank: one 64-byte cache line each


class _Timespec(_ctypes.Structure):
    _fields_ = [("tv_sec", _ctypes.c_long), ("tv_nsec", _ctypes.c_long)]


try:
    _libc = _ctypes.CDLL(None, use_errno=True)
    _syscall = _libc.syscall
except (OSError, AttributeError):  # pragma: no cover - not Linux
    _syscall = None


def futex_available() -> bool:
    """True on Linux where the futex system call can be made through ctypes."""
    return _syscall is not None and _SYS_FUTEX is not None and _os.name == "posix"


class Doorbells:
    """The doorbells of one communicator's ranks, in one shared-memory file.

    Build them with :meth:`open_for` (collective over the communicator).
    """

    def __init__(self, path: str | Path, nranks: int, rank: int):
        fd = _os.open(path, _os.O_RDWR)
        try:
            self._mm = _mmap.mmap(fd, 4 * _STRIDE * nranks)
        finally:
            _os.close(fd)
        self._anchor = _ctypes.c_char.from_buffer(self._mm)
        self._base = _ctypes.addressof(self._anchor)
        self.words = memoryview(self._mm).cast("i")
        self.rank = rank
        self._mine = rank * _STRIDE
        self._addr = [_ctypes.c_void_p(self._base + 4 * r * _STRIDE) for r in range(nranks)]
        self._ts = _Timespec()
        self._ts_ref = _ctypes.byref(self._ts)

    @classmethod
    def open_for(cls, comm, wait, timeout: float) -> Doorbells | None:
        """Doorbells for every rank of ``comm`` if they all run on this machine, else
        None. Collective; ``wait(request, timeout, what=...)`` completes requests."""
        from mpi4py import MPI

        host = _zlib.crc32(processor_name().encode())
        usable = 1 if futex_available() and Path("/dev/shm").is_dir() else 0
        mine = _np.array([host, -host, usable], dtype=_np.int64)
        low = _np.empty_like(mine)
        wait(comm.Iallreduce(mine, low, MPI.MIN), timeout, what="comparing hosts")
        if low[0] != -low[1] or low[2] == 0:  # several hosts, or no futex somewhere
            return None
        size, rank = comm.Get_size(), comm.Get_rank()
        name = _np.zeros(256, dtype=_np.uint8)
        if rank == 0:
            path = f"/dev/shm/gridcoll-bells-{_os.getpid()}-{_uuid.uuid4().hex[:12]}"
            fd = _os.open(path, _os.O_RDWR | _os.O_CREAT | _os.O_EXCL, 0o600)
            try:
                _os.ftruncate(fd, 4 * _STRIDE * size)
            finally:
                _os.close(fd)
            raw = path.encode()
            name[: len(raw)] = _np.frombuffer(raw, dtype=_np.uint8)
        wait(comm.Ibcast([name, MPI.BYTE], 0), timeout, what="sharing the doorbells")
        path = name.tobytes().rstrip(b"\0").decode()
        bells = cls(path, size, rank)
        wait(comm.Ibarrier(), timeout, what="opening the doorbells")
        if rank == 0:
            _os.unlink(path)
        return bells

    def ring(self, peer: int) -> None:
        """Tell ``peer`` that a message for it has been posted."""
        i = peer * _STRIDE
        words = self.words
        words[i] = (words[i] + 1) & 0x7FFFFFFF
        if words[i + 1]:  # it is (about to be) asleep; a missed wake costs one timeout
            _syscall(_SYS_FUTEX, self._addr[peer], _FUTEX_WAKE, 0x7FFFFFFF, None, None, 0)

    def seen(self) -> int:
        """This rank's doorbell word, to pass to :meth:`sleep` after testing."""
        return self.words[self._mine]

    def sleep(self, seen: int, seconds: float) -> None:
        """Sleep up to ``seconds``, or until the doorbell rings (at once if it rang
        since :meth:`seen` returned ``seen``)."""
        ts = self._ts
        ts.tv_sec = int(seconds)
        ts.tv_nsec = int((seconds - int(seconds)) * 1e9)
        words, me = self.words, self._mine
        words[me + 1] = 1  # "asleep": senders call FUTEX_WAKE only then
        _syscall(_SYS_FUTEX, self._addr[self.rank], _FUTEX_WAIT, seen, self._ts_ref, None, 0)
        words[me + 1] = 0

    def close(self) -> None:
        """Unmap the doorbells."""
        if self.words is not None:
            self.words.release()
        self.words = None
        self._anchor = None
        if self._mm is not None:
            self._mm.close()
            self._mm = None

    _mm: _mmap.mmap | None = None
