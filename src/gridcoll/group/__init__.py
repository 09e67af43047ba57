"""Phoenix (seed 004) over real processes: :class:`Group`.

A :class:`Group` is one operating-system process's member of a computation whose
processes join and leave; it drives the sans-I/O core of :mod:`gridcoll.phoenix` with
pyzmq sockets and a real clock. Needs pyzmq (``pip install gridcoll[phoenix]``).

* :mod:`~gridcoll.group.group`: :class:`Group`, the application's API and the I/O
  thread that coordinates the others (its theory of operation);
* :mod:`~gridcoll.group.transport`: sockets, handshakes, frames, the process directory
  and the emulated WAN's delay heap (the security rules);
* :mod:`~gridcoll.group.detector`: heartbeats, round trips and the failure detector;
* :mod:`~gridcoll.group.probes`: the probes of sec. IV-A, over UDP;
* :mod:`~gridcoll.group.reassembly`: pipelined broadcasts put together per vnode.

References
----------
H. Saito, K. Taura, T. Chikayama, *Collective operations for wide-area message passing
systems using adaptive spanning trees* (seed 004), sec. III, IV.
"""

from gridcoll.group import group
from gridcoll.group.group import *  # noqa: F403

__all__ = list(group.__all__)
