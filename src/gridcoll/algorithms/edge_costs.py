"""Per-rank-pair costs of one message: what the heterogeneous tree heuristics see.

The heuristics of Bhat, Raghavendra and Prasanna (FEF, ECEF, look-ahead), seed 003's
TPS, HLOT and Mateescu's shortest-path tree all reason about a complete graph whose
edge ``(i, j)`` carries a message of ``m`` bytes from rank i to rank j. In P-LogP
terms (seed 000, sec. 2.1), with ``p = grid.plogp(i, j)``:

``completion[i, j] = r(m) = L + g(m)``
    when the message has arrived at j, counted from the start of the send: seed 003's
    ``completion_ij = latency_ij + messagesize / bandwidth_ij`` (sec. 4);
``busy[i, j] = max(g_l(m), os(m))``
    how long the send keeps i from starting its next one: ``s_w`` of seed 000
    (``g(m)`` on a LAN). Bhat et al.'s *ready time* of a sender grows by this.

Everything is per ordered cluster pair (ranks of one cluster are alike), then spread to
the ranks with numpy indexing: O(C^2) P-LogP evaluations and O(P^2) memory. The
diagonal is ``inf`` (no rank sends to itself). Shared links are not in these matrices:
a heuristic that reads only them cannot see that two of its edges share a wire, which
is seed 001's warning (sec. 2.1) and why every tree is also run in the simulator.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gridcoll.errors import ParameterError
from gridcoll.network.grid import Grid

__all__ = ["EdgeCosts", "edge_costs"]


@dataclass(frozen=True, eq=False)
class EdgeCosts:
    """Dense ``P x P`` cost matrices of one message size (seconds, bytes/s).

    Parameters
    ----------
    completion : ndarray
        ``C[i, j]``: arrival at j of a message sent by i, after the send starts.
    busy : ndarray
        ``S[i, j]``: how long sending to j keeps i busy (its ready time grows by it).
    latency : ndarray, optional
        ``L[i, j]``, the P-LogP latency (HLOT uses only this); default ``completion``.
    bandwidth : ndarray, optional
        Asymptotic bytes/s of the route ``i -> j``; default ``inf``.

    Any square matrices will do, which is how the hand-worked examples of the tests
    are stated; :func:`edge_costs` derives them from a grid.
    """

    completion: np.ndarray
    busy: np.ndarray
    latency: np.ndarray | None = None
    bandwidth: np.ndarray | None = None

    def __post_init__(self) -> None:
        c = np.array(self.completion, dtype=float)
        s = np.array(self.busy, dtype=float)
        if c.ndim != 2 or c.shape[0] != c.shape[1] or s.shape != c.shape:
            raise ParameterError(
                f"edge costs need two square matrices of one shape, got {c.shape} and {s.shape}"
            )
        np.fill_diagonal(c, np.inf)
        object.__setattr__(self, "completion", c)
        object.__setattr__(self, "busy", s)
        lat = c if self.latency is None else np.array(self.latency, dtype=float)
        bw = np.full(c.shape, np.inf) if self.bandwidth is None else np.array(self.bandwidth)
        object.__setattr__(self, "latency", lat)
        object.__setattr__(self, "bandwidth", np.asarray(bw, dtype=float))

    @property
    def n(self) -> int:
        """The number of ranks ``P``."""
        return int(self.completion.shape[0])


def _cluster_costs(grid: Grid, m: float) -> tuple[np.ndarray, ...]:
    """``(C, S, L, B)`` per ordered cluster pair; the diagonal is the cluster's LAN.

    The routes in one batch (:attr:`Grid.route_batch`, bit for bit their own values):
    O(C^2) numpy and O(C) Python.
    """
    n = grid.nclusters
    lans = [c.lan for c in grid.clusters]
    lan_g = np.array([lan.g(m) for lan in lans])
    lan_os = np.array([lan.os(m) for lan in lans])
    lan_L = np.array([lan.L for lan in lans])
    C, S, L, B = (np.empty((n, n)) for _ in range(4))
    diag = np.arange(n)
    C[diag, diag] = lan_L + lan_g  # r(m) = L + g(m)
    S[diag, diag] = np.maximum(lan_g, lan_os)
    L[diag, diag] = lan_L
    B[diag, diag] = [lan.bandwidth for lan in lans]
    if grid.routes:
        batch = grid.route_batch
        a, b = batch.src, batch.dst
        C[a, b] = batch.latency + batch.g(m)
        S[a, b] = np.maximum(lan_g[a], batch.os(m))  # s_w(m) = max(g_l(m), os_w(m))
        L[a, b] = batch.latency
        B[a, b] = grid.memo.get(
            "edge_costs.bandwidth",
            None,
            lambda: np.array([route.plogp.bandwidth for route in grid.routes.values()]),
            1,
        )
    return C, S, L, B


EDGE_COSTS_SIZES = 16
"""Message sizes whose dense ``P x P`` matrices are kept per grid (O(P^2) memory each)."""


def edge_costs(grid: Grid, m: float) -> EdgeCosts:
    """The :class:`EdgeCosts` of messages of ``m`` bytes between the ranks of ``grid``.

    Memoised in ``grid.memo``, keyed by ``m``. O(C^2) numpy P-LogP evaluations plus
    O(P^2) to spread them over the ranks.

    Examples
    --------
    >>> from gridcoll.network import magpie
    >>> costs = edge_costs(magpie(2, 2), 1000)
    >>> round(float(costs.completion[0, 2]) * 1e3, 3)  # 10 ms + 8 us + 1000 B at 1 MB/s
    11.008
    """

    def make() -> EdgeCosts:
        cl = np.asarray(grid.cluster_of)
        return EdgeCosts(*(x[np.ix_(cl, cl)] for x in _cluster_costs(grid, m)))

    return grid.memo.get("edge_costs", float(m), make, EDGE_COSTS_SIZES)
