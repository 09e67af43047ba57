"""All-to-all builders: rank ``s`` sends its block ``s -> d`` (``b = nbytes`` bytes) to
every rank ``d``.

The data space is ``P * P`` blocks of ``b`` bytes, block ``s * P + d`` going from rank
``s`` to rank ``d`` (:mod:`gridcoll.algorithms._collective`); ``nbytes`` is the count per
peer, as MPI's ``sendcount``. All-to-all has no root: the schedules have root 0.

* :func:`direct_alltoall` - seed 002's Direct Exchange: every rank starts all its sends
  (to ranks 0, 1, ..., as LAM 6.5.2 does), then takes its receives;
* :func:`direct_rotated_alltoall` - the optimised Direct Exchange: rank ``r`` sends to
  ``r+1, r+2, ...`` and receives from ``r-1, r-2, ...`` (LAM 7, MPICH 1.2.5);
* :func:`cluster_aware_alltoall` - one combined WAN message per ordered cluster pair:
  an *agent* rank of every cluster collects its cluster's blocks for one remote
  cluster, sends them in one message, and the remote agent hands them out;
* :func:`segmented_alltoall` - the rotated Direct Exchange in segments dealt to the
  peers in turn, so that a rank's wide-area links all carry data at once.
"""

from __future__ import annotations

from gridcoll.algorithms._collective import (
    Blocks,
    check_blocks,
    check_segment_count,
    check_segment_size,
    finish,
    rotated,
)
from gridcoll.network.grid import Grid
from gridcoll.schedule.ir import Op, Recv, Schedule, Send

__all__ = [
    "agent",
    "alltoall_segments",
    "cluster_aware_alltoall",
    "direct_alltoall",
    "direct_rotated_alltoall",
    "segmented_alltoall",
]


def alltoall_segments(nranks: int, nbytes: int) -> tuple[tuple[int, int], ...]:
    """One segment per block: segment ``s * P + d`` is block ``s -> d``."""
    return tuple((i * nbytes, nbytes) for i in range(nranks * nranks))


def _empty(P: int) -> list[list[Op]]:
    return [[] for _ in range(P)]


def direct_alltoall(grid: Grid, nbytes: int, root: int = 0, *, itemsize: int = 1) -> Schedule:
    """Direct Exchange: every rank sends to ranks ``0, 1, ..., P-1`` in order, then
    receives from them in order.

    Parameters
    ----------
    grid : Grid
    nbytes : int
        ``b``: bytes per peer (a whole number of ``itemsize`` elements).
    root : int
        Checked, otherwise ignored.
    itemsize : int

    Returns
    -------
    Schedule
        ``P (P-1)`` messages of ``b`` bytes.

    Raises
    ------
    ParameterError
        For a bad root or a size <= 0 or not whole elements.

    Notes
    -----
    Between the bounds of seed 002, Table 3: lower ``(P-1) os(b) + (P-1) or(b) + L``
    (every send returns as soon as the network interface has it), upper ``(P-1) g(b) +
    (P-1) or(b) + L`` (a rank's transmissions are serialised); every rank starting
    with the same destination piles the first round onto rank 0. Builds in O(P^2).

    References
    ----------
    Seed 002, sec. 5 ("all sends and receives are started simultaneously", LAM 6.5.2).

    Examples
    --------
    >>> from gridcoll.network import magpie
    >>> [(type(op).__name__, op.peer) for op in direct_alltoall(magpie(1, 3), 8).programs[1]]
    [('Send', 0), ('Send', 2), ('Recv', 0), ('Recv', 2)]
    """
    check_blocks(grid, nbytes, root, itemsize)
    P = grid.nranks
    programs = _empty(P)
    for r in range(P):
        programs[r] += [Send(d, (r * P + d,)) for d in range(P) if d != r]
        programs[r] += [Recv(s, (s * P + r,)) for s in range(P) if s != r]
    segments = alltoall_segments(P, nbytes)
    return finish("alltoall", "direct", grid, 0, nbytes, segments, programs)


def direct_rotated_alltoall(
    grid: Grid, nbytes: int, root: int = 0, *, itemsize: int = 1
) -> Schedule:
    """Optimised Direct Exchange: rank ``r`` sends to ``r+1, r+2, ...`` and receives from
    ``r-1, r-2, ...`` (mod P), so no rank is every sender's first destination.

    Notes
    -----
    Seed 002, Table 3's bounds, as :func:`direct_alltoall`; "rotating the
    communication order from each process ... avoids the overload of a specific
    process". Builds in O(P^2).

    References
    ----------
    Seed 002, sec. 5 (LAM 7.0.4, MPICH 1.2.5).
    """
    check_blocks(grid, nbytes, root, itemsize)
    P = grid.nranks
    programs = _empty(P)
    for r in range(P):
        programs[r] += [Send((r + i) % P, (r * P + (r + i) % P,)) for i in range(1, P)]
        programs[r] += [Recv((r - i) % P, (((r - i) % P) * P + r,)) for i in range(1, P)]
    segments = alltoall_segments(P, nbytes)
    return finish("alltoall", "direct-rotated", grid, 0, nbytes, segments, programs)


def agent(grid: Grid, cluster: int, other: int) -> int:
    """The rank of ``cluster`` that handles its traffic with cluster ``other``, both ways:
    member ``other mod N`` of the cluster, so a cluster's pairs spread over its ranks."""
    members = grid.members[cluster]
    return members[other % len(members)]


def cluster_aware_alltoall(
    grid: Grid, nbytes: int, root: int = 0, *, itemsize: int = 1
) -> Schedule:
    """All-to-all with one combined WAN message per ordered cluster pair.

    For clusters ``A != B``, the agent ``a = agent(A, B)`` (:func:`agent`) collects from
    each rank of A its blocks for all ranks of B, sends the ``N_A N_B`` blocks in one
    message to ``agent(B, A)``, which gives each rank of B its ``N_A`` blocks. Blocks
    inside a cluster go directly (rotated order). Every rank: sends to agents, direct
    sends; as an agent, collects and sends over the WAN; as a remote agent, receives
    and hands out; finally its receives.

    Notes
    -----
    Each WAN link of a pair carries one message of ``N_A N_B b`` bytes instead of
    ``N_A N_B`` messages: the per-message WAN costs (``L_w``, ``g_w(0)``, a sender's
    ``os_w``) are paid once per pair, at the price of two LAN hops. ``T`` is about
    ``T_collect + max_pairs (s_w + r_w)(N_A N_B b) + T_hand_out``. Builds in O(P^2).

    References
    ----------
    Seed 002, sec. 5 (all-to-all); seed 000, sec. 3.2 (message combining via
    coordinator nodes).
    """
    check_blocks(grid, nbytes, root, itemsize)
    P, C = grid.nranks, grid.nclusters
    members = grid.members
    programs = _empty(P)

    def blocks(sources, targets) -> tuple[int, ...]:
        return tuple(s * P + d for s in sources for d in targets)

    remote = {a: [(a + i) % C for i in range(1, C)] for a in range(C)}
    for x in range(P):  # sends to the agents first, then the direct sends
        A = grid.cluster_of[x]
        for B in remote[A]:
            a = agent(grid, A, B)
            if a != x:
                programs[x].append(Send(a, blocks([x], members[B])))
        local = rotated(members[A], members[A].index(x))[1:]
        programs[x] += [Send(y, (x * P + y,)) for y in local]
    for A in range(C):  # agents: collect, send over the WAN
        for B in remote[A]:
            a = agent(grid, A, B)
            programs[a] += [Recv(y, blocks([y], members[B])) for y in members[A] if y != a]
            programs[a].append(Send(agent(grid, B, A), blocks(members[A], members[B])))
    for B in range(C):  # remote agents: receive, hand out
        for A in remote[B]:
            a = agent(grid, B, A)
            programs[a].append(Recv(agent(grid, A, B), blocks(members[A], members[B])))
            programs[a] += [Send(z, blocks(members[A], [z])) for z in members[B] if z != a]
    for x in range(P):  # receives: direct ones, then from the agents
        A = grid.cluster_of[x]
        local = rotated(members[A], members[A].index(x))[1:]
        programs[x] += [Recv(y, (y * P + x,)) for y in reversed(local)]
        for B in remote[A]:
            a = agent(grid, A, B)
            if a != x:
                programs[x].append(Recv(a, blocks(members[B], [x])))
    segments = alltoall_segments(P, nbytes)
    return finish("alltoall", "cluster-aware", grid, 0, nbytes, segments, programs)


def segmented_alltoall(
    grid: Grid, nbytes: int, root: int = 0, *, segment_size: int, itemsize: int = 1
) -> Schedule:
    """The rotated Direct Exchange with every block cut into segments of ``m`` bytes,
    dealt to the peers in turn: rank ``r`` sends segment 0 of its blocks to ``r+1, r+2,
    ...``, then segment 1 to each, and so on; then receives in the same order from
    ``r-1, r-2, ...``.

    Parameters
    ----------
    grid : Grid
    nbytes : int
        ``b``: bytes per peer (a whole number of ``itemsize`` elements).
    root : int
        Checked, otherwise ignored.
    segment_size : int
        ``m``: bytes per message (a multiple of ``itemsize``).
    itemsize : int

    Returns
    -------
    Schedule
        ``P (P-1) ceil(b/m)`` messages.

    Notes
    -----
    Whole blocks one after another serialise a rank's wide-area links: past the
    rendezvous limit a sender is busy for a message's whole transfer (``os_w(b) =
    g_w(b)``), so on ``magpie:8,1`` a rank's seven 1 MB/s links carry 1 MiB each in
    ``7 g_w(b)``. Small messages return at once and the links fill together: ``T`` is
    the busiest resource's load (a NIC, a gateway, a wide-area link, shared ones
    included) plus one segment's way (:func:`gridcoll.models.alltoall.segmented_alltoall_model`).
    Builds in O(P^2 b/m).

    References
    ----------
    Seed 002, sec. 5 (Direct Exchange, rotated order); seed 000, sec. 3.1.1 (message
    segmentation, "all available wide-area links in parallel").
    """
    check_blocks(grid, nbytes, root, itemsize)
    check_segment_size(segment_size, itemsize)
    check_segment_count("alltoall", grid, nbytes, segment_size)
    P = grid.nranks
    blocks = Blocks.cut(P * P, nbytes, segment_size, itemsize)
    k = blocks.k
    programs = _empty(P)
    for r in range(P):
        programs[r] += [
            Send((r + i) % P, ((r * P + (r + i) % P) * k + j,))
            for j in range(k)
            for i in range(1, P)
        ]
        programs[r] += [
            Recv((r - i) % P, ((((r - i) % P) * P + r) * k + j,))
            for j in range(k)
            for i in range(1, P)
        ]
    params = {"segment_size": segment_size}
    return finish(
        "alltoall", "direct-segmented", grid, 0, nbytes, blocks.segments, programs, params
    )
