"""The parameterized LogP (P-LogP) model of one network.

Implements seed 000 (Kielmann et al., *Network performance-aware collective
communication for clustered wide area systems*, Parallel Computing 2001), sec. 2.1.
A network is ``N = (L, os, or, g, P)``: the end-to-end latency ``L`` and three functions
of the message size ``m``: the send overhead ``os(m)``, the receive overhead ``or(m)``
and the gap ``g(m)``. The functions are measured at a few sizes and are piecewise
linear between them: exact at the measured points, linear between, and extrapolated
from the two nearest points beyond them.

``or`` is a Python keyword, so the receive overhead is the method ``or_``.
"""

from __future__ import annotations

import math
from bisect import bisect_right
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise

import numpy as np

from gridcoll.errors import GridError

__all__ = ["LogGP", "PLogP", "PiecewiseBatch", "PiecewiseLinear", "r_w", "s_w"]


@dataclass(frozen=True, slots=True)
class PiecewiseLinear:
    """A function of the message size given by points ``(m_i, y_i)``.

    Exact at the points, linear between them, and extrapolated linearly beyond the
    first and last points from the two nearest ones (a single point is a constant).
    Evaluation is O(log n) by bisection.
    """

    sizes: tuple[float, ...]
    values: tuple[float, ...]

    def __post_init__(self) -> None:
        if len(self.sizes) != len(self.values) or not self.sizes:
            raise GridError("a piecewise-linear function needs as many values as sizes (>= 1)")
        for i, (m, y) in enumerate(zip(self.sizes, self.values, strict=True)):
            if not (math.isfinite(m) and math.isfinite(y)) or m < 0 or y < 0:
                raise GridError(f"point {i} (m={m!r}, value={y!r}) must be finite and >= 0")
            if i and m <= self.sizes[i - 1]:
                raise GridError(
                    f"sizes must increase strictly: m={m!r} follows {self.sizes[i - 1]!r}"
                )

    def __call__(self, m: float) -> float:
        sizes, values = self.sizes, self.values
        n = len(sizes)
        if n == 1:
            return values[0]
        i = bisect_right(sizes, m) - 1
        i = 0 if i < 0 else (n - 2 if i > n - 2 else i)
        m0, m1 = sizes[i], sizes[i + 1]
        y0, y1 = values[i], values[i + 1]
        if m == m1:  # exact at the points, to the last bit
            return y1
        y = y0 + (y1 - y0) * (m - m0) / (m1 - m0)
        return y if y > 0.0 else 0.0

    @property
    def slope(self) -> float:
        """Slope of the last piece: the asymptotic cost per byte (LogGP's ``G`` for g)."""
        if len(self.sizes) < 2:
            return 0.0
        return (self.values[-1] - self.values[-2]) / (self.sizes[-1] - self.sizes[-2])

    def scaled(self, factor: float) -> PiecewiseLinear:
        """The same function multiplied by ``factor`` (a link slowed down by load)."""
        return PiecewiseLinear(self.sizes, tuple(v * factor for v in self.values))

    def shifted(self, delta: float) -> PiecewiseLinear:
        """The same function plus the constant ``delta`` (a fixed per-message cost)."""
        return PiecewiseLinear(self.sizes, tuple(v + delta for v in self.values))

    def maximum(self, other: PiecewiseLinear) -> PiecewiseLinear:
        """The pointwise maximum of two functions, exactly (again piecewise linear).

        The breakpoints are those of both functions, the sizes where an extrapolated
        head or tail reaches 0 (where the clamp bends it), and every size where the two
        cross; each is evaluated at every breakpoint, and a last point past them all
        pins the slope of the extrapolation. Cost O((n1 + n2) log(n1 + n2)).
        """
        points = sorted({0.0, *self.sizes, *other.sizes, *self._kinks(), *other._kinks()})
        extra = []
        for lo, hi in pairwise(points):
            extra += _crossings(self, other, lo, hi)
        last = points[-1]
        diff = self(last) - other(last)  # past `last` both are straight lines
        slope = (self(last + 1.0) - self(last)) - (other(last + 1.0) - other(last))
        if slope != 0 and diff * slope < 0:
            last -= diff / slope
            extra.append(last)
        sizes = sorted({*points, *extra, 2.0 * last + 1.0})
        return PiecewiseLinear(tuple(sizes), tuple(max(self(m), other(m)) for m in sizes))

    def _kinks(self) -> list[float]:
        """Sizes >= 0 outside the points where the extrapolation is clamped at 0."""
        sizes, values = self.sizes, self.values
        if len(sizes) < 2:
            return []
        out = []
        head = (values[1] - values[0]) / (sizes[1] - sizes[0])
        if head > 0 and values[0] > 0 and sizes[0] - values[0] / head > 0:
            out.append(sizes[0] - values[0] / head)
        if self.slope < 0 and values[-1] > 0:
            out.append(sizes[-1] - values[-1] / self.slope)
        return out


def _crossings(f: PiecewiseLinear, h: PiecewiseLinear, lo: float, hi: float) -> list[float]:
    """Where ``f - h`` changes sign strictly inside ``(lo, hi)`` (both linear there)."""
    d_lo, d_hi = f(lo) - h(lo), f(hi) - h(hi)
    if d_lo * d_hi >= 0:
        return []
    at = lo + (hi - lo) * d_lo / (d_lo - d_hi)
    return [at] if lo < at < hi else []


@dataclass(frozen=True, slots=True)
class LogGP:
    """The LogP/LogGP parameters (Culler et al. 1993; Alexandrov et al. 1995)."""

    L: float
    o: float
    g: float
    G: float


@dataclass(frozen=True, slots=True)
class PLogP:
    """P-LogP parameters of one network or link (seed 000, sec. 2.1).

    Parameters
    ----------
    L : float
        End-to-end latency in seconds.
    os_fn, or_fn, g_fn : PiecewiseLinear
        Send overhead, receive overhead and gap, in seconds, as functions of bytes
        (evaluated by :meth:`os`, :meth:`or_` and :meth:`g`).
    complete : bool
        False when a measurement was interrupted: the values are partial and must not
        be used as if they were complete (see :mod:`gridcoll.network.gridfile`).
    """

    L: float
    os_fn: PiecewiseLinear
    or_fn: PiecewiseLinear
    g_fn: PiecewiseLinear
    complete: bool = True

    def __post_init__(self) -> None:
        if not (math.isfinite(self.L) and self.L >= 0):
            raise GridError(f"latency L must be finite and >= 0, got {self.L!r}")
        values = self.g_fn.values
        for i in range(1, len(values)):
            if values[i] < values[i - 1]:
                raise GridError(
                    f"g(m) must not decrease with m: g({self.g_fn.sizes[i]!r})={values[i]!r} "
                    f"< g({self.g_fn.sizes[i - 1]!r})={values[i - 1]!r}"
                )

    # -- the model's functions, named as in the paper ---------------------------------
    def os(self, m: float) -> float:
        """Send overhead ``os(m)``: time the sender's CPU is busy sending m bytes."""
        return self.os_fn(m)

    def or_(self, m: float) -> float:
        """Receive overhead ``or(m)``: time the receiver's CPU is busy receiving m bytes."""
        return self.or_fn(m)

    def g(self, m: float) -> float:
        """Gap ``g(m)``: minimum interval between two messages of m bytes on one link."""
        return self.g_fn(m)

    def s(self, m: float) -> float:
        """Sender completion time ``s(m) = g(m)`` (seed 000, sec. 2.1)."""
        return self.g_fn(m)

    def r(self, m: float) -> float:
        """Receiver completion time ``r(m) = L + g(m)`` (seed 000, sec. 2.1)."""
        return self.L + self.g_fn(m)

    @property
    def bandwidth(self) -> float:
        """Asymptotic end-to-end bandwidth in bytes/s: ``1 / G`` (inf if g is flat)."""
        slope = self.g_fn.slope
        return 1.0 / slope if slope > 0 else math.inf

    # -- constructors and conversions ---------------------------------------------------
    @classmethod
    def from_points(
        cls,
        L: float,
        sizes: tuple[float, ...] | list[float],
        os: tuple[float, ...] | list[float],
        or_: tuple[float, ...] | list[float],
        g: tuple[float, ...] | list[float],
        *,
        complete: bool = True,
    ) -> PLogP:
        """Build from measured points ``(m, os(m), or(m), g(m))``."""
        sizes = tuple(float(m) for m in sizes)
        return cls(
            float(L),
            PiecewiseLinear(sizes, tuple(float(v) for v in os)),
            PiecewiseLinear(sizes, tuple(float(v) for v in or_)),
            PiecewiseLinear(sizes, tuple(float(v) for v in g)),
            complete,
        )

    @classmethod
    def linear(
        cls,
        L: float,
        bandwidth: float,
        *,
        g0: float = 0.0,
        os0: float = 0.0,
        or0: float = 0.0,
        copy_bandwidth: float = math.inf,
    ) -> PLogP:
        """A network with affine costs: ``g(m) = g0 + m/bandwidth``.

        The overheads are ``os(m) = os0 + m/copy_bandwidth`` and likewise ``or(m)``
        (the CPU copies the data at ``copy_bandwidth``), capped at ``g(m)`` since the
        gap covers the overheads (seed 000, sec. 2.1: ``g(m) >= os(m), or(m)``).
        """
        if bandwidth <= 0:
            raise GridError(f"bandwidth must be > 0, got {bandwidth!r}")
        sizes = (0.0, float(2**20))
        g = tuple(g0 + m / bandwidth for m in sizes)
        per_byte = 0.0 if math.isinf(copy_bandwidth) else 1.0 / copy_bandwidth
        os = tuple(min(os0 + m * per_byte, gm) for m, gm in zip(sizes, g, strict=True))
        or_ = tuple(min(or0 + m * per_byte, gm) for m, gm in zip(sizes, g, strict=True))
        return cls.from_points(L, sizes, os, or_, g)

    @classmethod
    def from_loggp(cls, params: LogGP) -> PLogP:
        """Inverse of seed 000 Table 1: ``os = or = o``, ``g(m) = g + (m-1)G``,
        ``L_plogp = L_logp - g(1) + os(1) + or(1)``."""
        L = params.L - params.g + 2 * params.o
        big = float(2**30)
        return cls.from_points(
            L,
            (1.0, big),
            (params.o, params.o),
            (params.o, params.o),
            (params.g, params.g + (big - 1) * params.G),
        )

    def to_loggp(self, large: float | None = None) -> LogGP:
        """LogP/LogGP parameters as in seed 000 Table 1.

        ``L = L + g(1) - os(1) - or(1)``, ``o = (os(1) + or(1))/2``, ``g = g(1)``,
        ``G = g(m)/m`` for a sufficiently large m (default: the largest tabulated size).
        """
        m = large if large is not None else self.g_fn.sizes[-1]
        return LogGP(
            L=self.L + self.g(1) - self.os(1) - self.or_(1),
            o=(self.os(1) + self.or_(1)) / 2,
            g=self.g(1),
            G=self.g(m) / m if m > 0 else 0.0,
        )

    def with_overhead(self, os_extra: float, or_extra: float | None = None) -> PLogP:
        """The same network seen through a software layer that costs ``os_extra``
        seconds more CPU per sent message and ``or_extra`` (default ``os_extra``) per
        received one.

        ``os(m)`` and ``or(m)`` are shifted by the extras; the gap is raised where
        needed so that ``g(m) >= os(m), or(m)`` still holds (seed 000, sec. 2.1: the gap
        covers the overheads), ``g'(m) = max(g(m), os'(m), or'(m))``, exactly. ``L``
        does not change. This is P-LogP's own answer to a different software stack:
        "o and g depend ... on the behavior of the underlying MPI implementation"
        (seed 000, sec. 2), so they are those of the layer actually used.

        Raises :class:`GridError` for a negative or non-finite extra.

        Examples
        --------
        >>> net = PLogP.linear(20e-6, 50e6, g0=8e-6, os0=4e-6, or0=4e-6)
        >>> slow = net.with_overhead(40e-6)
        >>> round(slow.os(0) * 1e6, 3), round(slow.g(0) * 1e6, 3), round(slow.g(2**20), 6)
        (44.0, 44.0, 0.02098)
        """
        or_extra = os_extra if or_extra is None else or_extra
        for name, value in (("os_extra", os_extra), ("or_extra", or_extra)):
            if not (math.isfinite(value) and value >= 0):
                raise GridError(f"{name} must be finite and >= 0 seconds, got {value!r}")
        if os_extra == 0 and or_extra == 0:
            return self
        os_fn, or_fn = self.os_fn.shifted(os_extra), self.or_fn.shifted(or_extra)
        g_fn = _monotone(self.g_fn.maximum(os_fn).maximum(or_fn))
        return PLogP(self.L, os_fn, or_fn, g_fn, self.complete)

    def scaled_bandwidth(self, factor: float) -> PLogP:
        """The same network with its gap multiplied by ``1/factor`` (factor < 1: loaded)."""
        return PLogP(self.L, self.os_fn, self.or_fn, self.g_fn.scaled(1.0 / factor), self.complete)


def _monotone(fn: PiecewiseLinear) -> PiecewiseLinear:
    """``fn`` made non-decreasing at its points (a gap may not fall with ``m``)."""
    values, top = [], 0.0
    for v in fn.values:
        top = max(top, v)
        values.append(top)
    return PiecewiseLinear(fn.sizes, tuple(values))


class PiecewiseBatch:
    """Many :class:`PiecewiseLinear` functions evaluated at one size at once.

    ``batch(m)`` is ``numpy.array([f(m) for f in fns])``, bit for bit (the same
    operations in the same order, elementwise), at the cost of one bisection per
    distinct breakpoint tuple instead of one Python call per function: the route tables
    of a grid of C clusters hold C(C-1) functions that usually share their sizes.
    """

    def __init__(self, fns: Sequence[PiecewiseLinear]):
        self.n = len(fns)
        groups: dict[tuple[float, ...], list[int]] = {}
        for i, fn in enumerate(fns):
            groups.setdefault(fn.sizes, []).append(i)
        self._groups = [
            (sizes, np.array(idx), np.array([fns[i].values for i in idx], dtype=float))
            for sizes, idx in groups.items()
        ]

    def __call__(self, m: float) -> np.ndarray:
        out = np.empty(self.n)
        for sizes, idx, values in self._groups:
            n = len(sizes)
            if n == 1:
                out[idx] = values[:, 0]
                continue
            i = bisect_right(sizes, m) - 1
            i = 0 if i < 0 else (n - 2 if i > n - 2 else i)
            m0, m1 = sizes[i], sizes[i + 1]
            y0, y1 = values[:, i], values[:, i + 1]
            if m == m1:  # exact at the points, as PiecewiseLinear.__call__
                out[idx] = y1
                continue
            y = y0 + (y1 - y0) * (m - m0) / (m1 - m0)
            out[idx] = np.where(y > 0.0, y, 0.0)
        return out


def s_w(lan: PLogP, wan: PLogP, m: float) -> float:
    """Wide-area sender completion ``s_w(m) = max(g_l(m), os_w(m))`` (seed 000, sec. 2.1)."""
    return max(lan.g(m), wan.os(m))


def r_w(wan: PLogP, m: float) -> float:
    """Wide-area receiver completion ``r_w(m) = L_w + g_w(m)`` (seed 000, sec. 2.1)."""
    return wan.L + wan.g(m)
