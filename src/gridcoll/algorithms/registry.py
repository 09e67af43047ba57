"""The table of builders, by collective and name (the names ``--algo`` takes)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from gridcoll.algorithms import (
    binary_tree,
    binomial_tree,
    chain,
    dary_tree,
    flat_tree,
    magpie,
    mpich,
    multitree,
)
from gridcoll.errors import UnknownAlgorithm
from gridcoll.schedule.ir import Schedule

__all__ = ["BUILDERS", "Builder", "get_builder", "list_builders"]


@dataclass(frozen=True, slots=True)
class Builder:
    """A registered algorithm.

    ``build(grid, nbytes, root=0, *, itemsize=1, **params) -> Schedule``; ``params``
    names the keyword parameters the tuner chooses (``segment_size``, ``degree``...).
    """

    op: str
    name: str
    build: Callable[..., Schedule]
    summary: str
    params: tuple[str, ...] = ()


def _table() -> dict[tuple[str, str], Builder]:
    seg = ("segment_size",)
    entries = [
        Builder("bcast", "flat", flat_tree.flat, "root sends the whole message to every rank"),
        Builder(
            "bcast",
            "flat-rendezvous",
            flat_tree.flat_rendezvous,
            "flat tree with a request/clear-to-send handshake per rank",
        ),
        Builder(
            "bcast",
            "flat-segmented",
            flat_tree.flat_segmented,
            "flat tree, message sent as k segments",
            seg,
        ),
        Builder("bcast", "chain", chain.chain, "each rank passes the whole message to the next"),
        Builder(
            "bcast",
            "chain-rendezvous",
            chain.chain_rendezvous,
            "chain with a handshake on every hop",
        ),
        Builder(
            "bcast",
            "chain-segmented",
            chain.chain_segmented,
            "pipeline: segments flow down the chain",
            seg,
        ),
        Builder("bcast", "binary", binary_tree.binary, "complete binary tree, whole message"),
        Builder(
            "bcast", "binomial", binomial_tree.binomial, "MPICH's binomial tree, whole message"
        ),
        Builder(
            "bcast",
            "binomial-rendezvous",
            binomial_tree.binomial_rendezvous,
            "binomial tree with a handshake on every edge",
        ),
        Builder(
            "bcast",
            "binomial-segmented",
            binomial_tree.binomial_segmented,
            "binomial tree forwarding each segment as it arrives",
            seg,
        ),
        Builder(
            "bcast",
            "dary-segmented",
            dary_tree.dary_segmented,
            "segmented tree of any degree d, minimal height (seed 000, 3.1.1)",
            ("segment_size", "degree"),
        ),
        Builder(
            "bcast",
            "magpie-original",
            magpie.magpie_original,
            "MagPIe's original: flat WAN tree, then binomial LAN trees, whole message",
        ),
        Builder(
            "bcast",
            "magpie-sequential",
            magpie.magpie_sequential,
            "segmented d-ary WAN tree, then segmented d-ary LAN trees (seed 000, 3.1.2)",
            ("wan_segment_size", "wan_degree", "lan_segment_size", "lan_degree"),
        ),
        Builder(
            "bcast",
            "magpie-segmented",
            magpie.magpie_segmented,
            "pipelined two-layer tree, LAN trees grafted on the WAN tree (seed 000, 3.1.2)",
            ("segment_size", "wan_degree", "lan_degree"),
        ),
        Builder(
            "bcast",
            "mpich",
            mpich.mpich,
            "MPICH's choice, clusters ignored: binomial or scatter + allgather",
        ),
        Builder(
            "bcast",
            "multitree",
            multitree.multitree,
            "one part per remote cluster, relayed to all others: every WAN link busy",
            ("segment_size", "lan_degree"),
        ),
    ]
    return {(b.op, b.name): b for b in entries}


BUILDERS: dict[tuple[str, str], Builder] = _table()
"""Every builder by ``(op, name)``; read-only."""


def list_builders(op: str | None = None) -> list[Builder]:
    """Every registered builder (of one collective, if ``op`` is given), in table order."""
    return [b for (o, _), b in BUILDERS.items() if op is None or o == op]


def get_builder(op: str, name: str) -> Builder:
    """The builder ``name`` of collective ``op``; UnknownAlgorithm lists the choices."""
    try:
        return BUILDERS[(op, name)]
    except KeyError:
        names = ", ".join(b.name for b in list_builders(op)) or "none"
        raise UnknownAlgorithm(f"unknown {op} algorithm {name!r}; choose one of: {names}") from None
