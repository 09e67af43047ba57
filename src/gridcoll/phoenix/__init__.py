"""Phoenix (seed 004): collectives over processes that come and go, as a sans-I/O core.

:mod:`~gridcoll.phoenix.protocol` is one process's state machine;
:mod:`~gridcoll.phoenix.vnodes` the virtual nodes; :mod:`~gridcoll.phoenix.nodesets`
the compressed node sets of broadcast headers; :mod:`~gridcoll.phoenix.trees` the
spanning-tree rules as pure functions; :mod:`~gridcoll.phoenix.static` an instant
in-memory driver that runs the core to stable trees on a grid;
:mod:`~gridcoll.phoenix.wire` the messages' binary codec.

The core holds no clock and no socket. Two drivers run it: the simulator
(:mod:`gridcoll.simulate.phoenix`) and real processes (:class:`gridcoll.group.Group`,
pyzmq, the ``phoenix`` extra).

References
----------
H. Saito, K. Taura, T. Chikayama, *Collective operations for wide-area message passing
systems using adaptive spanning trees* (seed 004).
"""

from gridcoll.phoenix import nodesets, protocol, trees, vnodes
from gridcoll.phoenix.nodesets import *  # noqa: F403
from gridcoll.phoenix.protocol import *  # noqa: F403
from gridcoll.phoenix.vnodes import *  # noqa: F403

__all__ = [*nodesets.__all__, *protocol.__all__, *vnodes.__all__, "trees"]
