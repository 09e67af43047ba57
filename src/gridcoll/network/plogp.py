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
from dataclasses import dataclass

from gridcoll.errors import GridError

__all__ = ["LogGP", "PLogP", "PiecewiseLinear", "r_w", "s_w"]


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
    os, or_, g : PiecewiseLinear
        Send overhead, receive overhead and gap, in seconds, as functions of bytes.
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

    def scaled_bandwidth(self, factor: float) -> PLogP:
        """The same network with its gap multiplied by ``1/factor`` (factor < 1: loaded)."""
        return PLogP(self.L, self.os_fn, self.or_fn, self.g_fn.scaled(1.0 / factor), self.complete)


def s_w(lan: PLogP, wan: PLogP, m: float) -> float:
    """Wide-area sender completion ``s_w(m) = max(g_l(m), os_w(m))`` (seed 000, sec. 2.1)."""
    return max(lan.g(m), wan.os(m))


def r_w(wan: PLogP, m: float) -> float:
    """Wide-area receiver completion ``r_w(m) = L_w + g_w(m)`` (seed 000, sec. 2.1)."""
    return wan.L + wan.g(m)
