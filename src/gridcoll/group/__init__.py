"""Phoenix (seed 004) over real processes: :class:`Group`.

A :class:`Group` is one operating-system process's member of a computation whose
processes join and leave; it drives the sans-I/O core of :mod:`gridcoll.phoenix` with
pyzmq sockets and a real clock (:mod:`gridcoll.group.group`, its theory of operation).
Needs pyzmq (``pip install gridcoll[phoenix]``).

References
----------
H. Saito, K. Taura, T. Chikayama, *Collective operations for wide-area message passing
systems using adaptive spanning trees* (seed 004), sec. III, IV.
"""

from gridcoll.group import group
from gridcoll.group.group import *  # noqa: F403

__all__ = list(group.__all__)
