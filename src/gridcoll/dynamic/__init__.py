"""Seed 004's dynamic collectives as a sans-I/O protocol core (issue 14).

:mod:`~gridcoll.dynamic.protocol` is one process's state machine;
:mod:`~gridcoll.dynamic.vnodes` the virtual nodes; :mod:`~gridcoll.dynamic.nodesets`
the compressed node sets of broadcast headers; :mod:`~gridcoll.dynamic.trees` the
spanning-tree rules as pure functions; :mod:`~gridcoll.dynamic.static` an instant
in-memory driver that runs the core to stable trees on a grid;
:mod:`~gridcoll.dynamic.wire` the messages' binary codec; :mod:`~gridcoll.dynamic.group`
:class:`Group`, the core over real processes (pyzmq, imported on first use of
``gridcoll.dynamic.Group``, so the rest works without the ``dynamic`` extra).
"""

from gridcoll.dynamic import nodesets, protocol, trees, vnodes
from gridcoll.dynamic.nodesets import *  # noqa: F403
from gridcoll.dynamic.protocol import *  # noqa: F403
from gridcoll.dynamic.vnodes import *  # noqa: F403

__all__ = [*nodesets.__all__, *protocol.__all__, *vnodes.__all__, "trees"]


def __getattr__(name: str) -> object:
    """``Group`` and its companions, imported lazily (they need pyzmq)."""
    if name in ("Group", "GroupError", "GroupStats", "Delivery", "ReduceResult"):
        from gridcoll.dynamic import group

        return getattr(group, name)
    raise AttributeError(f"module 'gridcoll.dynamic' has no attribute {name!r}")
