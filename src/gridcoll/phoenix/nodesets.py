"""Phoenix (seed 004): compressed sets of virtual nodes, as broadcast headers carry them
(sec. VI).

Seed 004 lists, in each broadcast message's header, the virtual nodes to be reached
through the child it is sent to (sec. IV-D), and names the header's size as the reason
its broadcast trails the static trees for short messages (sec. V-A.1); its future work
is to compress that list. A :class:`NodeSet` is a sorted tuple of disjoint, non-adjacent
half-open ranges ``[lo, hi)``: with one virtual node per process and children that
cover runs of consecutive nodes, a header is a handful of ranges whatever the count.

Invariants: ``ranges`` is sorted, every ``lo < hi``, and ranges neither overlap nor
touch (``hi < next lo``), so equal sets have equal representations.

Wire format (:meth:`NodeSet.encode`), the smaller of two forms (ranges on a tie), told
apart by the low bit of the first unsigned LEB128 number ``h``:

* **ranges** (``h = 2 * count``): per range the gap from the previous range's end and the
  length, both unsigned LEB128. Two or three bytes per range for namespaces below 2**14:
  a handful of bytes for the runs of consecutive nodes a subtree of one LAN covers.
* **bitmap** (``h = 2 * span + 1``): the first node (unsigned LEB128), then ``span``
  bits, least significant first, in ``ceil(span / 8)`` bytes; the first and the last bit
  are set. One bit per node between the first and the last: the form for sets that
  alternate, such as a cluster's nodes on a grid whose processes are numbered across
  its clusters in turn (``das2-spread``: every fourth node, 2 bytes a node as ranges, a
  bit a node here), or the even nodes after fig. 9's leave.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

__all__ = ["NodeSet"]


def _normalise(ranges: Iterable[tuple[int, int]]) -> tuple[tuple[int, int], ...]:
    out: list[tuple[int, int]] = []
    lo0 = hi0 = -1  # the range being merged (none while hi0 < 0)
    for lo, hi in sorted(ranges):
        if lo >= hi:
            continue
        if hi0 < 0 or lo > hi0:
            if hi0 >= 0:
                out.append((lo0, hi0))
            lo0, hi0 = lo, hi
        elif hi > hi0:
            hi0 = hi
    if hi0 >= 0:
        out.append((lo0, hi0))
    return tuple(out)


def _uleb(value: int) -> bytes:
    out = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def _uleb_len(value: int) -> int:
    return max(1, (value.bit_length() + 6) // 7)


def _read_uleb(data: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if pos >= len(data):
            raise ValueError("truncated node set encoding")
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return value, pos


@dataclass(frozen=True, slots=True)
class NodeSet:
    """An immutable set of non-negative ints stored as sorted disjoint ranges."""

    ranges: tuple[tuple[int, int], ...] = ()

    def __post_init__(self) -> None:
        norm = _normalise(self.ranges)
        if norm and norm[0][0] < 0:
            raise ValueError(f"virtual nodes are non-negative, got {norm[0][0]!r}")
        object.__setattr__(self, "ranges", norm)

    @classmethod
    def of(cls, nodes: Iterable[int]) -> NodeSet:
        """The set of the given ints."""
        return cls(tuple((v, v + 1) for v in nodes))

    @classmethod
    def span(cls, lo: int, hi: int) -> NodeSet:
        """``{lo, ..., hi - 1}``."""
        return cls(((lo, hi),))

    def __iter__(self) -> Iterator[int]:
        for lo, hi in self.ranges:
            yield from range(lo, hi)

    def __len__(self) -> int:
        return sum(hi - lo for lo, hi in self.ranges)

    def __bool__(self) -> bool:
        return bool(self.ranges)

    def __contains__(self, v: object) -> bool:
        if not isinstance(v, int):
            return False
        lo_i, hi_i = 0, len(self.ranges)
        while lo_i < hi_i:  # binary search on the range starts
            mid = (lo_i + hi_i) // 2
            if self.ranges[mid][0] <= v:
                lo_i = mid + 1
            else:
                hi_i = mid
        return lo_i > 0 and v < self.ranges[lo_i - 1][1]

    def __or__(self, other: NodeSet) -> NodeSet:
        if not other.ranges:
            return self
        if not self.ranges:
            return other
        return NodeSet(self.ranges + other.ranges)

    def __and__(self, other: NodeSet) -> NodeSet:
        out, i, j = [], 0, 0
        a, b = self.ranges, other.ranges
        while i < len(a) and j < len(b):
            lo, hi = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
            if lo < hi:
                out.append((lo, hi))
            if a[i][1] < b[j][1]:
                i += 1
            else:
                j += 1
        return NodeSet(tuple(out))

    def __sub__(self, other: NodeSet) -> NodeSet:
        out = []
        for lo, hi in self.ranges:
            for olo, ohi in other.ranges:
                if ohi <= lo or olo >= hi:
                    continue
                if olo > lo:
                    out.append((lo, olo))
                lo = max(lo, ohi)
                if lo >= hi:
                    break
            if lo < hi:
                out.append((lo, hi))
        return NodeSet(tuple(out))

    def isdisjoint(self, other: NodeSet) -> bool:
        return not (self & other)

    def encode(self) -> bytes:
        """The wire form (see the module doc)."""
        if self._bitmap_smaller():
            (start, _), end = self.ranges[0], self.ranges[-1][1]
            bits = 0
            for lo, hi in self.ranges:
                bits |= ((1 << (hi - lo)) - 1) << (lo - start)
            span = end - start
            return _uleb(2 * span + 1) + _uleb(start) + bits.to_bytes((span + 7) // 8, "little")
        out, prev = bytearray(_uleb(2 * len(self.ranges))), 0
        for lo, hi in self.ranges:
            out += _uleb(lo - prev) + _uleb(hi - lo)
            prev = hi
        return bytes(out)

    @classmethod
    def decode(cls, data: bytes) -> NodeSet:
        """The inverse of :meth:`encode`; raises ValueError on malformed input."""
        head, pos = _read_uleb(data, 0)
        if head & 1:
            return cls._decode_bitmap(data, head >> 1, pos)
        ranges, prev = [], 0
        for _ in range(head >> 1):
            gap, pos = _read_uleb(data, pos)
            length, pos = _read_uleb(data, pos)
            if length == 0:
                raise ValueError("empty range in node set encoding")
            ranges.append((prev + gap, prev + gap + length))
            prev += gap + length
        if pos != len(data):
            raise ValueError("trailing bytes after node set encoding")
        return cls(tuple(ranges))

    @classmethod
    def _decode_bitmap(cls, data: bytes, span: int, pos: int) -> NodeSet:
        start, pos = _read_uleb(data, pos)
        if len(data) - pos != (span + 7) // 8:
            raise ValueError("node set bitmap of the wrong length")
        bits = int.from_bytes(data[pos:], "little")
        if span == 0 or not bits & 1 or bits.bit_length() != span:
            raise ValueError("node set bitmap must begin and end with a member")
        ranges, offset = [], start
        while bits:  # one run of set bits per step: skip the zeros, then the ones
            zeros = (bits & -bits).bit_length() - 1
            bits >>= zeros
            ones = (~bits & (bits + 1)).bit_length() - 1
            bits >>= ones
            offset += zeros
            ranges.append((offset, offset + ones))
            offset += ones
        return cls(tuple(ranges))

    def _ranges_nbytes(self) -> int:
        size, prev = _uleb_len(2 * len(self.ranges)), 0
        for lo, hi in self.ranges:  # one byte per value below 128 (most of them)
            gap, length = lo - prev, hi - lo
            size += 1 if gap < 0x80 else _uleb_len(gap)
            size += 1 if length < 0x80 else _uleb_len(length)
            prev = hi
        return size

    def _bitmap_nbytes(self) -> int:
        """The bitmap form's size; the set is not empty."""
        (start, _), span = self.ranges[0], self.ranges[-1][1] - self.ranges[0][0]
        return _uleb_len(2 * span + 1) + _uleb_len(start) + (span + 7) // 8

    def _bitmap_smaller(self) -> bool:
        """Whether :meth:`encode` sends a bitmap (never for the empty set: one byte as
        ranges)."""
        return bool(self.ranges) and self._bitmap_nbytes() < self._ranges_nbytes()

    @property
    def nbytes(self) -> int:
        """The size of :meth:`encode`'s output, for the link model."""
        return self._bitmap_nbytes() if self._bitmap_smaller() else self._ranges_nbytes()

    def __repr__(self) -> str:
        parts = [str(lo) if hi == lo + 1 else f"{lo}-{hi - 1}" for lo, hi in self.ranges]
        return f"NodeSet({', '.join(parts)})"
