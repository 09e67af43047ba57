"""The call header: what identifies one collective call, checked by every receiver.

Rule 4 of :mod:`gridcoll.runtime.executor`: every first message between two ranks in a
call carries a 128-byte header, so ranks that call a collective with other arguments
raise :class:`~gridcoll.errors.MismatchError` instead of corrupting data. Layout
(little-endian, :data:`HEADER_BYTES` bytes)::

    magic "GCH3" | grid id | call number (epoch << 32 | seq) | root | size | item size
    | algorithm id (CRC-32 of the collective, algorithm and parameters) | message bytes
    | deliver_at (the emulated delivery time, seconds) | algorithm name (20 B)
    | collective (12 B) | datatype signature (16 B) | reduction operation (16 B)
    | CRC-32 of the datatype signature | digest of the empty calls before

A matching header's bytes are known but for ``deliver_at``, so the receiver checks it
with one comparison (:meth:`CallInfo.check`); only a mismatch is unpacked field by
field to say what differs. The calls that move no byte complete without a message;
their arguments go into the next call's header as a chained CRC
(:func:`empty_digest`).
"""

from __future__ import annotations

import struct as _struct
import zlib as _zlib
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from gridcoll.errors import MismatchError
from gridcoll.schedule.ir import Schedule

__all__ = ["HEADER_BYTES", "CallInfo", "empty_digest"]

_HEADER = _struct.Struct("<4sIQqQIIQd20s12s16s16sII")
_MAGIC = b"GCH3"
HEADER_BYTES = _HEADER.size  # 128
_NAME = 20  # bytes of the algorithm's name in a header (its parameters' CRC follows)
_DELIVER_AT = 48  # offset of deliver_at in the header; the algorithm name follows it
_NAME_AT = 56
_DOUBLE = _struct.Struct("<d")
_TEXT = 16  # bytes of the datatype's and the reduction operation's names in a header


class _Step(Protocol):
    """The step of a compiled program a header arrives for
    (:class:`gridcoll.runtime.executor.Program`'s steps)."""

    peer: int
    index: int
    nbytes: int

    def describe(self) -> str: ...


def _crc(text: str) -> int:
    return _zlib.crc32(text.encode())


def _text(raw: bytes) -> str:
    return raw.rstrip(b"\0").decode(errors="replace")


@dataclass(frozen=True, slots=True)
class CallInfo:
    """What identifies one collective call; every header carries it.

    ``op`` is the collective (``schedule.op``), ``dtype`` the signature of the
    datatype (``gridcoll.runtime.buffers.signature``: a numpy type string such as
    ``'<f8'``, so ``float64`` and ``int64`` differ although their size does not),
    ``redop`` the reduction operation (``'SUM'``, ``'MAX'``..., ``'user:<crc>'`` for a
    user's, ``''`` for a collective that does not reduce). Headers carry the first 16
    bytes of ``dtype`` and its CRC-32 (a long structured signature is compared whole).
    ``prior`` is the digest of the calls that moved no byte since the communicator's
    last call that did (:func:`empty_digest`): they complete without a message, so
    their arguments are checked in this call's headers.
    """

    seq: int
    root: int
    nbytes: int
    itemsize: int
    algorithm: str
    algo_id: int
    grid_id: int
    op: str = ""
    dtype: str = ""
    redop: str = ""
    prior: int = 0
    _expect: dict = field(default_factory=dict, compare=False, repr=False)
    """Per message size: the header bytes a matching message carries (fast check)."""

    @classmethod
    def of(
        cls, schedule: Schedule, *, seq: int = 0, itemsize: int = 1, grid_id: int = 0
    ) -> CallInfo:
        """The identity of a call running ``schedule``."""
        params = ",".join(f"{k}={schedule.params[k]}" for k in sorted(schedule.params))
        algo_id = _crc(f"{schedule.op}|{schedule.algorithm}|{params}")
        return cls(
            seq,
            schedule.root,
            schedule.nbytes,
            itemsize,
            schedule.algorithm,
            algo_id,
            grid_id,
            schedule.op,
        )

    def numbered(
        self, seq: int, dtype: str | None = None, redop: str | None = None, prior: int = 0
    ) -> CallInfo:
        """The same call with sequence number ``seq`` (and the caller's datatype
        signature, reduction operation and digest of the empty calls before it, which
        the cached program does not know)."""
        return CallInfo(
            seq,
            self.root,
            self.nbytes,
            self.itemsize,
            self.algorithm,
            self.algo_id,
            self.grid_id,
            self.op,
            self.dtype if dtype is None else dtype,
            self.redop if redop is None else redop,
            prior,
        )

    def pack(self, msg_nbytes: int, deliver_at: float) -> np.ndarray:
        """The header of one message."""
        raw = _HEADER.pack(
            _MAGIC,
            self.grid_id,
            self.seq,
            self.root,
            self.nbytes,
            self.itemsize,
            self.algo_id,
            msg_nbytes,
            deliver_at,
            self.algorithm.encode()[:_NAME],
            self.op.encode()[:12],
            self.dtype.encode()[:_TEXT],
            self.redop.encode()[:_TEXT],
            _crc(self.dtype),
            self.prior,
        )
        return np.frombuffer(raw, dtype=np.uint8).copy()

    def check(self, raw: np.ndarray, step: _Step, rank: int) -> float:
        """Check a received header against this call; return its ``deliver_at``.

        Fast path (every emulated message carries a header): the bytes of a matching
        header are known but for ``deliver_at``, so one comparison accepts it; only a
        mismatch is unpacked field by field to say what differs.
        """
        data = raw.tobytes()
        expect = self._expect.get(step.nbytes)
        if expect is None:
            packed = self.pack(step.nbytes, 0.0).tobytes()
            expect = self._expect[step.nbytes] = (packed[:_DELIVER_AT], packed[_NAME_AT:])
        if data[:_DELIVER_AT] == expect[0] and data[_NAME_AT:] == expect[1]:
            return _DOUBLE.unpack_from(data, _DELIVER_AT)[0]
        return self._check_fields(data, step, rank)

    def _fields(self) -> dict:
        return {
            "call number": self.seq & 0xFFFFFFFF,
            "collective": self.op[:12],
            "root": self.root,
            "size": self.nbytes,
            "itemsize": self.itemsize,
            "datatype": self.dtype[:_TEXT],
            "reduction operation": self.redop[:_TEXT],
            "algorithm": self.algorithm[:_NAME],
            "empty calls before": self.prior,
        }

    def _check_fields(self, data: bytes, step: _Step, rank: int) -> float:
        differ, detail, deliver_at = self.differences(data, step.nbytes)
        if differ == ["communicator"]:
            raise MismatchError(
                f"rank {rank}: the message from rank {step.peer} (op {step.index}) belongs "
                "to another communicator (a stray message of a failed call)",
                rank=rank,
                peer=step.peer,
            )
        if differ:
            raise MismatchError(
                f"rank {rank}: the message from rank {step.peer} (op {step.index}) belongs to "
                f"a call with other arguments ({detail}, sender's vs this rank's): all ranks "
                f"must call the collective in the same order with the same root, size, "
                f"datatype and reduction operation",
                rank=rank,
                peer=step.peer,
            )
        return deliver_at

    def compare_waiting(self, data: bytes, peer: int, rank: int) -> None:
        """Raise :class:`MismatchError` if ``peer``, waiting for this rank in this call
        (a :data:`NOTICE_WAITING` notice carrying its header), runs it with other
        arguments. Two ranks whose schedules wait for each other (the roots of a gather
        that differ) send each other no message, so no header: this is how they learn."""
        differ, detail, _ = self.differences(data, None)
        if differ and differ != ["communicator"]:
            raise MismatchError(
                f"rank {rank}: rank {peer} waits for this rank in a call with other "
                f"arguments ({detail}, that rank's vs this rank's): all ranks must call the "
                "collective in the same order with the same root, size, datatype and "
                "reduction operation",
                rank=rank,
                peer=peer,
            )

    def differences(self, data: bytes, expected: int | None) -> tuple[list, str, float]:
        """Where header ``data`` differs from this call: the fields' names (or
        ``["communicator"]`` for another communicator's), as text (``field theirs vs
        mine``), and the header's ``deliver_at``. ``expected``: the message size this
        rank expects (None: not compared)."""
        if len(data) != HEADER_BYTES or data[:4] != _MAGIC:
            return ["header"], "header '?' vs '?'", 0.0
        (
            _magic,
            grid_id,
            seq,
            root,
            nbytes,
            itemsize,
            algo_id,
            msg_nbytes,
            deliver_at,
            name,
            op,
            dtype,
            redop,
            dtype_id,
            prior,
        ) = _HEADER.unpack(data)
        if seq >> 32 != self.seq >> 32:
            return ["communicator"], "", deliver_at
        theirs = {
            "call number": seq & 0xFFFFFFFF,
            "collective": _text(op),
            "root": root,
            "size": nbytes,
            "itemsize": itemsize,
            "datatype": _text(dtype),
            "reduction operation": _text(redop),
            "algorithm": _text(name),
            "empty calls before": prior,
        }
        mine = self._fields()
        differ = [k for k in mine if mine[k] != theirs[k]]
        if not differ and dtype_id != _crc(self.dtype):
            differ = ["datatype"]
        elif not differ and algo_id != self.algo_id:
            differ = ["algorithm parameters"]
        elif not differ and grid_id != self.grid_id:
            differ = ["grid"]
        elif not differ and expected is not None and msg_nbytes != expected:
            differ = ["message size"]
        detail = ", ".join(f"{k} {theirs.get(k, '?')!r} vs {mine.get(k, '?')!r}" for k in differ)
        return differ, detail, deliver_at


def empty_digest(prior: int, call: CallInfo) -> int:
    """The digest of the empty calls so far (``prior``) extended by ``call``: CRC-32
    of its collective, root, item size, datatype and reduction operation, chained."""
    text = f"{call.op}|{call.root}|{call.itemsize}|{call.dtype}|{call.redop}"
    return _zlib.crc32(text.encode(), prior)
