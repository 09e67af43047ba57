"""Seed 004's dynamic collectives as a sans-I/O protocol core (issue 14).

:mod:`~gridcoll.dynamic.protocol` is one process's state machine;
:mod:`~gridcoll.dynamic.vnodes` the virtual nodes; :mod:`~gridcoll.dynamic.nodesets`
the compressed node sets of broadcast headers; :mod:`~gridcoll.dynamic.trees` the
spanning-tree rules as pure functions; :mod:`~gridcoll.dynamic.static` an instant
in-memory driver that runs the core to stable trees on a grid.
"""

from gridcoll.dynamic import nodesets, protocol, trees, vnodes
from gridcoll.dynamic.nodesets import *  # noqa: F403
from gridcoll.dynamic.protocol import *  # noqa: F403
from gridcoll.dynamic.vnodes import *  # noqa: F403

__all__ = [*nodesets.__all__, *protocol.__all__, *vnodes.__all__, "trees"]
