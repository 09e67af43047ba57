"""Closed-form P-LogP model of MPICH's broadcast on a grid (the ``mpich`` baseline).

MPICH ignores the clusters, so its messages cross WAN routes wherever the relative
numbering puts a cluster boundary between sender and receiver. Every term below is
therefore evaluated per edge ``a -> b`` with that edge's P-LogP parameters
(``grid.plogp(a, b)``): sender completion ``s_ab(m) = max(g_l(m), os_ab(m))`` (``g_l``
of a's LAN; seed 000 sec. 2.1's ``s_w``, which is ``g_l(m)`` inside a cluster) and
receiver completion ``r_ab(m) = L_ab + g_ab(m)``.

Binomial tree (``M < 12288`` or ``P < 8``)
    Seed 002, Table 1 on a single cluster (``floor(log2 P) g(M) + ceil(log2 P) L``),
    and seed 000's gamma/lambda edge by edge on the binomial tree otherwise
    (:func:`gridcoll.models.single_layer.binomial_model`).

Scatter + allgather (otherwise), ``T = T_scatter + T_allgather``
    * ``T_scatter``: the binomial scatter tree, relative rank ``i`` getting the
      ``n_i = lowbit(i)`` blocks of its subtree. A child's message arrives at
      ``t_v + sum_{earlier siblings} s(n b) + r(n_i b)`` after its parent ``v`` has the
      data at ``t_v``; ``T_scatter`` is the latest arrival.
    * ring: step ``j`` sends the block received in step ``j - 1``, so the steps form a
      max-plus recurrence whose cycle mean is
      ``lam = max(max_e g_e(b), max_r (os_out(b) + or_in(b)), sum_e (L_e + g_e(b)) / P)``
      (a link carries one block per step; a rank sends and receives one per step; a
      block goes once round the ring of ``P`` edges in ``P`` steps), and
      ``T_ring = (P - 2) lam + max_e (L_e + g_e(b))``. On one network this is
      Thakur et al.'s ``(P - 1)(L + g(b))``. Where several ring edges cross one WAN
      link (interleaved placements) ``lam`` is also at least that link's
      ``sum g_link(b) + L``.
    * recursive doubling (``M < 524288``, ``P`` a power of two): step ``j`` swaps the
      ``2^j`` blocks of a subtree between partners ``i`` and ``i xor 2^j``;
      ``T_doubling = sum_j max(max_pairs max(r(n_j), os(n_j) + or(n_j)), W_j)`` with
      ``n_j`` the bytes swapped and ``W_j`` the busiest WAN link's ``sum g_link(n_j) +
      L`` over the swaps that cross it (from ``2^j >= N`` every rank of a cluster swaps
      with a partner in one other cluster, all over the same link).

These are upper-bound style estimates: the scatter and the allgather are added though a
rank may start its allgather before the scatter ends elsewhere.

References
----------
R. Thakur, R. Rabenseifner, W. Gropp, *Optimization of collective communication
operations in MPICH*, IJHPCA 19(1), 2005, sec. 4.1; seed 000, sec. 2.1 and 3.1.1;
seed 002, Table 1.
"""

from __future__ import annotations

from collections.abc import Callable

from gridcoll.algorithms.mpich import mpich_blocks, mpich_variant
from gridcoll.models.single_layer import binomial_model, check_model_call
from gridcoll.network.grid import Grid

__all__ = ["MODELS", "mpich_model"]


class _Edges:
    """P-LogP costs of messages between two ranks, memoised per cluster pair and size."""

    def __init__(self, grid: Grid):
        self.grid = grid
        self.cache: dict[tuple[int, int, int], tuple[float, float, float, float, float]] = {}

    def __call__(self, a: int, b: int, m: int) -> tuple[float, float, float, float, float]:
        """``(s, r, g, os, or)`` of an m-byte message from rank a to rank b."""
        grid = self.grid
        key = (grid.cluster_of[a], grid.cluster_of[b], m)
        costs = self.cache.get(key)
        if costs is None:
            net = grid.plogp(a, b)
            g, os = net.g(m), net.os(m)
            s = max(grid.lan(a).g(m), os)  # s_w(m) = max(g_l(m), os_w(m)); g_l on a LAN
            costs = self.cache[key] = (s, net.L + g, g, os, net.or_(m))
        return costs


def _scatter_time(grid: Grid, edges: _Edges, root: int, sizes: list[int]) -> float:
    """Latest arrival of MPICH's binomial scatter (``sizes[i]``: bytes of block i)."""
    P = grid.nranks
    prefix = [0]
    for n in sizes:
        prefix.append(prefix[-1] + n)

    def nbytes(first: int, count: int) -> int:
        return prefix[min(first + count, P)] - prefix[first]

    have = [0.0] * P  # by relative rank: when it holds its subtree's blocks
    for rel in range(P):  # a parent's relative rank is smaller than its children's
        low = rel & -rel if rel else 1 << (P - 1).bit_length()
        t = have[rel]
        mask = low >> 1
        while mask:
            child = rel + mask
            n = nbytes(child, mask) if child < P else 0
            if n:
                s, r, *_ = edges((rel + root) % P, (child + root) % P, n)
                have[child] = t + r
                t += s
            mask >>= 1
    return max(have)


def _link_load(grid: Grid, messages: list[tuple[int, int, int]]) -> float:
    """Time the busiest shared WAN link needs for ``messages`` ``(a, b, bytes)`` sent at
    once: the sum of its ``g_link`` plus the largest latency of a route crossing it (0
    when no two messages share a link)."""
    busy: dict[str, list[float]] = {}
    for a, b, n in messages:
        ca, cb = grid.cluster_of[a], grid.cluster_of[b]
        if ca != cb:
            route = grid.routes[(ca, cb)]
            for name in route.links:
                load = busy.setdefault(name, [0.0, 0.0, 0])
                load[0] += grid.links[name].g(n)
                load[1] = max(load[1], route.plogp.L)
                load[2] += 1
    return max((g + L for g, L, count in busy.values() if count > 1), default=0.0)


def _ring_time(grid: Grid, edges: _Edges, block: int) -> float:
    """``(P - 2) lam + max_e r_e(b)``: the ring allgather's max-plus cycle mean."""
    P = grid.nranks
    costs = [edges(a, (a + 1) % P, block) for a in range(P)]
    g_max = max(c[2] for c in costs)
    r_max = max(c[1] for c in costs)
    cpu = max(costs[a][3] + costs[a - 1][4] for a in range(P))  # os out + or in, per rank
    ring = sum(c[1] for c in costs) / P
    # ring edges that share a WAN link (interleaved placements) each put a block on it
    # per step
    shared = _link_load(grid, [(a, (a + 1) % P, block) for a in range(P)])
    return (P - 2) * max(g_max, cpu, ring, shared) + r_max


def _doubling_time(grid: Grid, edges: _Edges, root: int, sizes: list[int]) -> float:
    """``sum_j max(max_pairs max(r(n_j), os(n_j) + or(n_j)), busiest shared link)``."""
    P = grid.nranks
    total, mask = 0.0, 1
    while mask < P:
        step = 0.0
        messages = []
        for rel in range(P):
            first = rel & ~(mask - 1)
            n = sum(sizes[first : first + mask])
            if n:
                a, b = (rel + root) % P, ((rel ^ mask) + root) % P
                _, r, _, os, or_ = edges(a, b, n)
                step = max(step, r, os + or_)
                messages.append((a, b, n))
        total += max(step, _link_load(grid, messages))
        mask <<= 1
    return total


def mpich_model(grid: Grid, nbytes: int, root: int = 0, *, itemsize: int = 1) -> float:
    """Model of :func:`gridcoll.algorithms.mpich.mpich` (seconds); see the module notes."""
    M = check_model_call(grid, nbytes, root, itemsize)
    P = grid.nranks
    variant = mpich_variant(P, M)
    if variant == "binomial":
        return binomial_model(grid, M, root, itemsize=itemsize)
    sizes = [length for _, length in mpich_blocks(P, M, itemsize)]
    edges = _Edges(grid)
    scatter = _scatter_time(grid, edges, root, sizes)
    if variant == "scatter-doubling":
        return scatter + _doubling_time(grid, edges, root, sizes)
    return scatter + _ring_time(grid, edges, sizes[0])


MODELS: dict[tuple[str, str], Callable[..., float]] = {("bcast", "mpich"): mpich_model}
"""The model of the MPICH baseline, by ``(op, name)``."""
