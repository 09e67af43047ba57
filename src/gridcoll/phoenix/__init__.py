"""Phoenix (seed 004): collectives over processes that come and go, as a sans-I/O core.

:mod:`~gridcoll.phoenix.protocol` is one process's state machine, fed the events
and returning the actions of :mod:`~gridcoll.phoenix.events`, its states and their
table in :mod:`~gridcoll.phoenix.states`, the messages it exchanges (each field's
encoding and charged size defined once) in :mod:`~gridcoll.phoenix.messages`;
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

from gridcoll.phoenix import events, messages, nodesets, protocol, states, trees, vnodes
from gridcoll.phoenix.events import *  # noqa: F403
from gridcoll.phoenix.messages import *  # noqa: F403
from gridcoll.phoenix.nodesets import *  # noqa: F403
from gridcoll.phoenix.protocol import *  # noqa: F403
from gridcoll.phoenix.states import *  # noqa: F403
from gridcoll.phoenix.vnodes import *  # noqa: F403

__all__ = [  # protocol re-exports the events, messages and states it uses
    *events.__all__,
    *messages.__all__,
    *nodesets.__all__,
    *protocol.__all__,
    *states.__all__,
    *vnodes.__all__,
    "events",
    "messages",
    "states",
    "trees",
]
__all__ = list(dict.fromkeys(__all__))
