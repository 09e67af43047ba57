"""Segment-size and tree-shape search: seed 000's heuristics and an exhaustive reference.

Seed 000 (sec. 3.1.1) avoids "an exhaustive search over the complete search space with
m in [1..M] and d in [1..P-1]":

Degrees, for a segment size m
    (1) only ``d in [floor(g(m)/s(m)) .. P-1]``: "lower values for d can only lead to
    higher completion times, because less accumulated bandwidth would be used";
    (2) starting with ``d = floor(g(m)/s(m))``, only the values of d for which the
    height h drops (:func:`degree_candidates`), plus ``P-1``.

Segment sizes
    (1) a binary search over ``m = M/2^i, i in [0..log2 M]`` (:func:`segment_sizes`),
    with the best d for each m;
    (2) from the best ``m'``, hill-climbing on ``k' = ceil(M/m')``: try ``k'-5, k'-1,
    k'+1, k'+5`` (each with its best d) and move to the best while it improves.

Which network gives ``g`` and ``s`` (:func:`degree_start`): a single cluster's LAN for a
single-layer tree (``s = g``, so d starts at 1); for the WAN degree of a two-layer tree
the slowest WAN route with ``s_w(m) = max(g_l(m), os_w(m))`` (seed 000, sec. 4: "P-LogP
parameters according to the slowest available link"); on a multi-cluster grid a
single-layer tree mixes both, so d starts at 1. For the pipelined two-layer tree the LAN
degree ranges over ``d_l in [1..floor(gamma'(m)/s_l(m))]`` with ``gamma'(m) =
max(g_w(m) - or_w(m) - d_w s_w(m), s_l(m))``, the share of gamma left to the LAN without
slowing down the WAN (seed 000, sec. 3.1.2; :func:`lan_degree_limit`).

The parameters searched follow the builder's ``params`` (a *space*): ``segment_size``;
``segment_size, degree``; ``segment_size, wan_degree, lan_degree`` (pipelined two-layer);
``wan_segment_size, wan_degree, lan_segment_size, lan_degree`` (sequential two-layer:
the WAN and LAN phases are searched one after the other, each with the other held
fixed, until neither changes; ``T = T_w + T_l`` makes them independent);
``segment_size, lan_degree`` (multi-tree: the same m search with ``d_l in [1..4]``).

The model is a parameter (as networkx's ``flow_func``): any callable with the builder's
signature returning seconds. Configurations the model rejects with a
:class:`~gridcoll.errors.GridcollError` count as infinitely slow.

A planning deadline (``deadline=``, :class:`gridcoll.tune.deadline.Deadline`) cuts the
search short: the first evaluation always runs, the second if the search's part of the
deadline has not passed (a builder's first evaluation often builds its tree), and each
later one only if the one before it, timed on the deadline's clock, would still end
within it; the configurations not evaluated count as infinitely slow, so the search
ends with the best it found (:attr:`SearchResult.refused` counts them).

References
----------
Kielmann et al., *Network performance-aware collective communication for clustered
wide area systems* (seed 000), sec. 3.1.1, 3.1.2 and 4.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from gridcoll.algorithms.trees import minimal_height
from gridcoll.errors import GridcollError, Unfeasible
from gridcoll.models.single_layer import check_model_call
from gridcoll.network.grid import Grid
from gridcoll.network.plogp import PLogP
from gridcoll.tune.deadline import Deadline

__all__ = [
    "MULTITREE_MAX_LAN_DEGREE",
    "SearchResult",
    "degree_candidates",
    "degree_start",
    "exhaustive_search",
    "heuristic_search",
    "lan_degree_limit",
    "reference_segment_sizes",
    "segment_for",
    "segment_sizes",
    "slowest_lan",
    "slowest_route",
]

Model = Callable[..., float]
Params = dict[str, int]

MULTITREE_MAX_LAN_DEGREE = 4
"""The "small d_l range" of the multi-tree search: ``d_l in [1..4]``."""

_MAX_CLIMB = 100_000
"""Hill-climbing stops after this many moves (it always stops earlier in practice)."""


@dataclass(frozen=True)
class SearchResult:
    """The best parameters a search found."""

    params: Params
    """Keyword parameters for the builder (empty if it has none)."""
    predicted_s: float
    """The model's time for them, in seconds."""
    evaluations: int
    """Distinct configurations the model was evaluated on."""
    reasoning: str = field(default="", compare=False)
    """How the search got there, for :meth:`gridcoll.tune.Plan.explain`."""
    refused: int = field(default=0, compare=False)
    """Configurations not evaluated because the planning deadline was near (0: the
    search ran to its end)."""
    first_s: float = field(default=0.0, compare=False)
    """Seconds of the first model evaluation on the deadline's clock (0 without one):
    the tuner's estimate of the next builder's first evaluation."""


# -- segment sizes ------------------------------------------------------------------------
def segment_for(nbytes: int, k: int, itemsize: int = 1) -> int:
    """The segment size giving ``k`` segments: ``ceil(M/k)`` rounded up to ``itemsize``."""
    n = nbytes // itemsize
    return -(-n // k) * itemsize


MAX_SEARCH_SEGMENTS = 2**14
"""The search never cuts a message into more segments than this. A network whose
per-message cost is 0 (a grid file's shorthand with the default ``overhead`` of 0) makes
every model prefer ever smaller segments; without a floor a 1 MiB call would be planned
as a million 1-byte messages. Seed 000's own searches stop far above it (the exhaustive
reference takes ``k <= 512``)."""


def segment_sizes(nbytes: int, itemsize: int = 1) -> list[int]:
    """Seed 000's binary-search sizes ``m = M/2^i, i in [0..log2 M]``, largest first.

    Each is rounded down to a multiple of ``itemsize`` and is at least ``itemsize``;
    duplicates are dropped, and so are sizes that would cut the message into more than
    :data:`MAX_SEARCH_SEGMENTS` segments.
    """
    sizes: list[int] = []
    for i in range(nbytes.bit_length()):
        m = max(itemsize, (nbytes >> i) // itemsize * itemsize)
        if sizes and -(-nbytes // m) > MAX_SEARCH_SEGMENTS:
            break
        if not sizes or m != sizes[-1]:
            sizes.append(m)
    return sizes


def reference_segment_sizes(nbytes: int, itemsize: int = 1, max_k: int = 512) -> list[int]:
    """The exhaustive search's sizes: one per k for every ``k <= max_k`` and every power
    of two ``k``, up to one element per segment; largest first, no duplicates."""
    n = nbytes // itemsize
    ks = set(range(1, min(n, max_k) + 1))
    ks.update(1 << j for j in range(n.bit_length()) if 1 << j <= n)
    return sorted({segment_for(nbytes, k, itemsize) for k in ks}, reverse=True)


# -- degrees ------------------------------------------------------------------------------
def degree_candidates(nodes: int, start: int = 1, upper: int | None = None) -> list[int]:
    """Degrees from ``start`` upward at which the minimal height drops, plus the top.

    ``nodes`` is the tree's ``P``; ``upper`` caps the degree (default ``P-1``). Seed 000
    sec. 3.1.1, rule (2): "values for d in between would increase gamma(m) but would not
    decrease lam(m)". O(h log P).
    """
    top = max(1, nodes - 1 if upper is None else min(upper, nodes - 1))
    d = min(max(1, start), top)
    out = [d]
    h = minimal_height(nodes, d)
    while d < top and h > 1:
        lo, hi = d + 1, top  # smallest degree with a lower height, by bisection
        if minimal_height(nodes, hi) >= h:
            break
        while lo < hi:
            mid = (lo + hi) // 2
            if minimal_height(nodes, mid) < h:
                hi = mid
            else:
                lo = mid + 1
        d, h = lo, minimal_height(nodes, lo)
        out.append(d)
    if out[-1] != top:
        out.append(top)
    return out


def _slowest(grid: Grid, kind: str, m: float) -> PLogP:
    """The network of ``kind`` ("route" or "lan") with the largest ``g(m)`` (then ``L``),
    memoised in ``grid.memo`` per ``m``: the degree rules ask for it at every size
    and degree the search tries, and a grid of C single-rank clusters has C(C-1) routes.
    """

    def make() -> PLogP:
        if kind == "route" and grid.routes:  # one batched pass over the C(C-1) routes
            batch = grid.route_batch
            gap = batch.g(m)
            tied = np.flatnonzero(gap == gap.max())  # then the largest L, first one
            index = int(tied[np.argmax(batch.latency[tied])])
            return list(grid.routes.values())[index].plogp
        nets = (
            (r.plogp for r in grid.routes.values())
            if kind == "route"
            else (c.lan for c in grid.clusters)
        )
        return max(nets, key=lambda p: (p.g(m), p.L))

    return grid.memo.get("search.slowest", (kind, m), make, 256)


def slowest_route(grid: Grid, m: float) -> PLogP:
    """The WAN route with the largest ``g_w(m)`` (then ``L_w``); seed 000, sec. 4."""
    return _slowest(grid, "route", m)


def slowest_lan(grid: Grid, m: float) -> PLogP:
    """The cluster LAN with the largest ``g_l(m)``."""
    return _slowest(grid, "lan", m)


def degree_start(net: PLogP, m: float, lan: PLogP | None = None) -> int:
    """Rule (1)'s lower end ``floor(g(m)/s(m))``, at least 1.

    ``s = g`` on one network; with ``lan`` given, ``net`` is a WAN route and
    ``s = s_w(m) = max(g_l(m), os_w(m))`` (seed 000, sec. 2.1).
    """
    s = net.s(m) if lan is None else max(lan.g(m), net.os(m))
    if s <= 0:
        return 1
    return max(1, math.floor(net.g(m) / s + 1e-9))


def lan_degree_limit(grid: Grid, m: float, wan_degree: int) -> int:
    """``floor(gamma'(m)/s_l(m))`` with ``gamma'(m) = max(g_w(m) - or_w(m) - d_w s_w(m),
    s_l(m))`` on the slowest route and LAN (seed 000, sec. 3.1.2), at least 1; on a
    single-cluster grid, ``N-1``."""
    if grid.nclusters < 2:  # no WAN to keep fed: the single-layer rule alone applies
        return max(1, _largest_cluster(grid) - 1)
    lan = slowest_lan(grid, m)
    s_l = lan.s(m)
    if s_l <= 0:
        return 1
    wan = slowest_route(grid, m)
    s_w = max(lan.g(m), wan.os(m))
    gamma_prime = max(wan.g(m) - wan.or_(m) - wan_degree * s_w, s_l)
    return max(1, math.floor(gamma_prime / s_l + 1e-9))


# -- the evaluator ------------------------------------------------------------------------
class _Evaluator:
    """Memoised model calls; rejected configurations are infinitely slow, and so are
    those a ``deadline`` leaves no time for (counted in ``refused``, not memoised)."""

    def __init__(
        self,
        model: Model,
        grid: Grid,
        nbytes: int,
        root: int,
        itemsize: int,
        deadline: Deadline | None = None,
    ):
        self.model = model
        self.grid = grid
        self.nbytes = nbytes
        self.root = root
        self.itemsize = itemsize
        self.memo: dict[tuple[tuple[str, int], ...], float] = {}
        self.error: GridcollError | None = None
        self.deadline = deadline
        self.last_s = 0.0  # the last evaluation's duration: the next one's estimate
        self.first_s = 0.0
        self.refused = 0

    def __call__(self, params: Mapping[str, int]) -> float:
        key = tuple(sorted(params.items()))
        t = self.memo.get(key)
        if t is None and self.deadline is not None:
            # the first evaluation of a builder often builds and memoises its tree, so
            # the second is timed before the durations serve as estimates
            estimate = self.last_s if len(self.memo) >= 2 else 0.0
            if self.memo and not self.deadline.allows(estimate, search=True):
                self.refused += 1
                return math.inf
            started = self.deadline.clock()
            t = self._evaluate(params, key)
            self.last_s = self.deadline.clock() - started
            if len(self.memo) == 1:
                self.first_s = self.last_s
        elif t is None:
            t = self._evaluate(params, key)
        return t

    def _evaluate(self, params: Mapping[str, int], key: tuple) -> float:
        try:
            t = float(
                self.model(self.grid, self.nbytes, self.root, itemsize=self.itemsize, **params)
            )
        except GridcollError as err:
            self.error = self.error or err
            t = math.inf
        self.memo[key] = t
        return t


# -- spaces -------------------------------------------------------------------------------
@dataclass(frozen=True)
class _Space:
    """One segment-size parameter and the degree parameters tried with each size."""

    seg: str
    inner: Callable[[Grid, int, bool], Iterable[Params]]  # (grid, m, exhaustive)
    why: Callable[[Grid, int, Params], str]  # the degree rule at m, in words


def _largest_cluster(grid: Grid) -> int:
    return max(c.nranks for c in grid.clusters)


def _dary_start(grid: Grid, m: int) -> int:
    return degree_start(grid.clusters[0].lan, m) if grid.is_single_cluster else 1


def _dary_inner(grid: Grid, m: int, exhaustive: bool) -> Iterable[Params]:
    P = grid.nranks
    ds = range(1, max(2, P)) if exhaustive else degree_candidates(P, _dary_start(grid, m))
    return ({"degree": d} for d in ds)


def _dary_why(grid: Grid, m: int, best: Params) -> str:
    if grid.is_single_cluster:
        start = f"d from floor(g(m)/s(m))={_dary_start(grid, m)} on the LAN"
    else:
        start = "d from 1 (the tree mixes LAN and WAN edges)"
    ds = degree_candidates(grid.nranks, _dary_start(grid, m))
    return f"{start}, h-dropping d in {ds}: d={best.get('degree')}"


def _wan_start(grid: Grid, m: int) -> int:
    if grid.nclusters < 2:
        return 1
    return degree_start(slowest_route(grid, m), m, slowest_lan(grid, m))


def _wan_why(grid: Grid, m: int) -> str:
    start, top = _wan_start(grid, m), max(1, grid.nclusters - 1)
    capped = f" (capped at P_w-1={top})" if start > top else ""
    ds = degree_candidates(grid.nclusters, start)
    return (
        f"d_w from floor(g_w(m)/s_w(m))={start}{capped} on the slowest WAN route, "
        f"h-dropping d_w in {ds}"
    )


def _two_layer_inner(grid: Grid, m: int, exhaustive: bool) -> Iterable[Params]:
    P_w, N = grid.nclusters, _largest_cluster(grid)
    if exhaustive:
        for d_w in range(1, max(2, P_w)):
            for d_l in range(1, max(2, N)):
                yield {"wan_degree": d_w, "lan_degree": d_l}
        return
    for d_w in degree_candidates(P_w, _wan_start(grid, m)):
        for d_l in degree_candidates(N, 1, lan_degree_limit(grid, m, d_w)):
            yield {"wan_degree": d_w, "lan_degree": d_l}


def _two_layer_why(grid: Grid, m: int, best: Params) -> str:
    d_w = best.get("wan_degree", 1)
    return (
        f"{_wan_why(grid, m)}: d_w={d_w}; d_l in [1..floor(gamma'(m)/s_l(m))="
        f"{lan_degree_limit(grid, m, d_w)}]: d_l={best.get('lan_degree')}"
    )


def _multitree_inner(grid: Grid, m: int, exhaustive: bool) -> Iterable[Params]:
    N = _largest_cluster(grid)
    top = max(1, N - 1) if exhaustive else max(1, min(MULTITREE_MAX_LAN_DEGREE, N - 1))
    return ({"lan_degree": d} for d in range(1, top + 1))


def _multitree_why(grid: Grid, m: int, best: Params) -> str:
    top = max(1, min(MULTITREE_MAX_LAN_DEGREE, _largest_cluster(grid) - 1))
    return f"d_l in [1..{top}]: d_l={best.get('lan_degree')}"


def _wan_phase_inner(grid: Grid, m: int, exhaustive: bool) -> Iterable[Params]:
    P_w = grid.nclusters
    ds = range(1, max(2, P_w)) if exhaustive else degree_candidates(P_w, _wan_start(grid, m))
    return ({"wan_degree": d} for d in ds)


def _lan_phase_inner(grid: Grid, m: int, exhaustive: bool) -> Iterable[Params]:
    N = _largest_cluster(grid)
    ds = range(1, max(2, N)) if exhaustive else degree_candidates(N, 1)
    return ({"lan_degree": d} for d in ds)


def _no_degrees(grid: Grid, m: int, exhaustive: bool) -> Iterable[Params]:
    return ({},)


_SEGMENT = _Space("segment_size", _no_degrees, lambda grid, m, best: "")
_DARY = _Space("segment_size", _dary_inner, _dary_why)
_TWO_LAYER = _Space("segment_size", _two_layer_inner, _two_layer_why)
_MULTITREE = _Space("segment_size", _multitree_inner, _multitree_why)
_WAN_PHASE = _Space(
    "wan_segment_size",
    _wan_phase_inner,
    lambda grid, m, best: f"WAN phase: {_wan_why(grid, m)}: d_w={best.get('wan_degree')}",
)
_LAN_PHASE = _Space(
    "lan_segment_size",
    _lan_phase_inner,
    lambda grid, m, best: (
        f"LAN phase: d_l from 1, h-dropping d_l in "
        f"{degree_candidates(_largest_cluster(grid), 1)}: d_l={best.get('lan_degree')}"
    ),
)

_SPACES: dict[frozenset[str], tuple[_Space, ...]] = {
    frozenset(): (),
    frozenset({"segment_size"}): (_SEGMENT,),
    frozenset({"segment_size", "degree"}): (_DARY,),
    frozenset({"segment_size", "wan_degree", "lan_degree"}): (_TWO_LAYER,),
    frozenset({"segment_size", "lan_degree"}): (_MULTITREE,),
    frozenset({"wan_segment_size", "wan_degree", "lan_segment_size", "lan_degree"}): (
        _WAN_PHASE,
        _LAN_PHASE,
    ),
}


def _spaces(params: Sequence[str]) -> tuple[_Space, ...]:
    try:
        return _SPACES[frozenset(params)]
    except KeyError:
        raise Unfeasible(
            f"no search space is defined for the parameters {tuple(params)!r}"
        ) from None


# -- the drivers --------------------------------------------------------------------------
BestAt = Callable[[int], tuple[float, Params]]


def _best_at(
    ev: _Evaluator, space: _Space, fixed: Params, exhaustive: bool, pinned: Params | None = None
) -> BestAt:
    """``m -> (time, degree params)``: the best degrees for segment size m, memoised;
    ``pinned`` parameters (the caller's) override the space's own."""
    memo: dict[int, tuple[float, Params]] = {}
    pinned = pinned or {}

    def best_at(m: int) -> tuple[float, Params]:
        found = memo.get(m)
        if found is None:
            best_t, best_inner = math.inf, None
            for inner in space.inner(ev.grid, m, exhaustive):
                inner = {k: v for k, v in inner.items() if k not in pinned}
                if best_inner is not None and not inner:
                    break  # every degree pinned: one evaluation
                t = ev({**fixed, space.seg: m, **inner, **pinned})
                if best_inner is None or t < best_t:
                    best_t, best_inner = t, inner
            found = memo[m] = (best_t, best_inner or {})
        return found

    return best_at


def _climb(best_at: BestAt, nbytes: int, itemsize: int) -> tuple[int, str]:
    """Seed 000's two steps: binary search over ``M/2^i``, then hill-climbing on k."""
    sizes = segment_sizes(nbytes, itemsize)
    m = min(sizes, key=lambda size: best_at(size)[0])  # ties: the larger size
    t, first = best_at(m)[0], m
    n = nbytes // itemsize
    k = k0 = -(-nbytes // m)  # k' = ceil(M/m')
    moves = 0
    while moves < _MAX_CLIMB:
        steps = [j for j in (k - 5, k - 1, k + 1, k + 5) if 1 <= j <= min(n, MAX_SEARCH_SEGMENTS)]
        trials = [(j, segment_for(nbytes, j, itemsize)) for j in steps]
        if not trials:
            break
        j, size = min(trials, key=lambda trial: best_at(trial[1])[0])
        if not best_at(size)[0] < t:
            break
        k, m, t = j, size, best_at(size)[0]
        moves += 1
    note = (
        f"binary search over {len(sizes)} sizes M/2^i: best m={first}; "
        f"hill-climbing k' {k0} -> {k} in {moves} move(s): m={m}"
    )
    return m, note


def _exhaust(best_at: BestAt, nbytes: int, itemsize: int, max_k: int) -> tuple[int, str]:
    sizes = reference_segment_sizes(nbytes, itemsize, max_k)
    m = min(sizes, key=lambda size: best_at(size)[0])
    return m, f"exhaustive over {len(sizes)} segment sizes and every degree: m={m}"


def _space_keys(space: _Space, grid: Grid, nbytes: int) -> Params:
    """Initial values of a space's parameters: one segment, its first degrees."""
    return {space.seg: nbytes, **next(iter(space.inner(grid, nbytes, False)), {})}


def _search(
    grid: Grid,
    nbytes: int,
    root: int,
    model: Model,
    params: Sequence[str],
    itemsize: int,
    exhaustive: bool,
    max_k: int,
    pinned: Params | None = None,
    deadline: Deadline | None = None,
) -> SearchResult:
    check_model_call(grid, nbytes, root, itemsize)
    spaces = _spaces(params)
    pinned = dict(pinned or {})
    ev = _Evaluator(model, grid, nbytes, root, itemsize, deadline)
    chosen: Params = {}
    for space in spaces:
        chosen.update(_space_keys(space, grid, nbytes))
    chosen.update(pinned)
    notes: list[str] = [] if spaces else ["no parameters to search"]
    for _ in range(3 if len(spaces) > 1 else len(spaces)):  # phases: until none changes
        before = dict(chosen)
        notes = []
        for space in spaces:
            own = _space_keys(space, grid, nbytes).keys()
            fixed = {key: v for key, v in chosen.items() if key not in own}
            best_at = _best_at(ev, space, fixed, exhaustive, pinned)
            if space.seg in pinned:
                m, note = pinned[space.seg], f"m={pinned[space.seg]} fixed by the caller"
            elif exhaustive:
                m, note = _exhaust(best_at, nbytes, itemsize, max_k)
            else:
                m, note = _climb(best_at, nbytes, itemsize)
            chosen.update({space.seg: m, **best_at(m)[1], **pinned})
            why = space.why(grid, m, best_at(m)[1])
            notes.append(f"{why}; {note}" if why and not exhaustive else note)
        if chosen == before:
            break
    t = ev(chosen)
    if not t < math.inf:  # inf or nan
        why = ev.error or f"it predicts {t!r} seconds"
        if ev.refused:
            why = f"{why} (the planning deadline stopped the search at {len(ev.memo)})"
        raise Unfeasible(f"the model rejected every configuration tried: {why}") from ev.error
    count = len(ev.memo)
    notes.append(f"{count} model evaluation{'s' if count != 1 else ''}")
    if ev.refused:
        notes.append(f"cut short by the planning deadline ({ev.refused} not evaluated)")
    return SearchResult(chosen, t, len(ev.memo), "; ".join(notes), ev.refused, ev.first_s)


def heuristic_search(
    grid: Grid,
    nbytes: int,
    root: int = 0,
    *,
    model: Model,
    params: Sequence[str] = (),
    itemsize: int = 1,
    pinned: Params | None = None,
    deadline: Deadline | None = None,
) -> SearchResult:
    """Seed 000's heuristic search for the builder parameters ``params``.

    Parameters
    ----------
    grid : Grid
    nbytes, root, itemsize : int
        The call: ``M`` bytes from ``root``, in elements of ``itemsize`` bytes.
    model : callable
        ``model(grid, nbytes, root, *, itemsize, **params) -> seconds``.
    params : sequence of str
        The builder's tunable parameters (:attr:`gridcoll.algorithms.Builder.params`).
    pinned : dict, optional
        Parameters the caller fixed (a segment size, a degree): kept as given, and only
        the others are searched.
    deadline : Deadline, optional
        The planning deadline (module docstring): the search ends with the best found
        so far rather than start an evaluation that would end past it.

    Returns
    -------
    SearchResult

    Raises
    ------
    ParameterError
        For a bad root, size or itemsize.
    Unfeasible
        If ``params`` has no search space, or the model rejects every configuration.

    Notes
    -----
    About ``log2(M) * |d|`` evaluations for the binary step plus ``4 |d|`` per
    hill-climbing move, with ``|d| <= h(d_0) + 1`` degrees per size.

    Examples
    --------
    >>> from gridcoll.network import lan
    >>> from gridcoll.models import MODELS
    >>> r = heuristic_search(lan(8), 2**20, model=MODELS["bcast", "dary-segmented"],
    ...                      params=("segment_size", "degree"))
    >>> r.params["degree"]
    1
    """
    return _search(grid, nbytes, root, model, params, itemsize, False, 0, pinned, deadline)


def exhaustive_search(
    grid: Grid,
    nbytes: int,
    root: int = 0,
    *,
    model: Model,
    params: Sequence[str] = (),
    itemsize: int = 1,
    max_k: int = 512,
) -> SearchResult:
    """The reference the heuristics are checked against: every degree and many sizes.

    Segment sizes: one per ``k`` for every ``k <= max_k`` and every power of two ``k``
    (:func:`reference_segment_sizes`); degrees: every ``d in [1..P-1]`` (``d_w in
    [1..P_w-1]``, ``d_l in [1..N-1]`` for the two-layer trees). The sequential
    two-layer space is searched phase by phase (exact, as ``T = T_w + T_l``). Same
    arguments and errors as :func:`heuristic_search`; O(|sizes| * |degrees|) model
    evaluations.
    """
    return _search(grid, nbytes, root, model, params, itemsize, True, max_k)
