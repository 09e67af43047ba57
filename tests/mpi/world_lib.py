"""A library that an unchanged mpi4py program imports: its default communicator is
evaluated when it is imported, as in many mpi4py libraries (``comm=MPI.COMM_WORLD``).

``world_prog.py`` imports it after ``COMM_WORLD`` was swapped, so the default is the
``gridcoll.Comm``.
"""

import numpy as np
from mpi4py import MPI


def default_comm(comm=MPI.COMM_WORLD):
    """The communicator this library uses when none is given."""
    return comm


def total(values: np.ndarray, comm=MPI.COMM_WORLD) -> np.ndarray:
    """The element-wise sum of every rank's ``values`` (``Allreduce``)."""
    out = np.empty_like(values)
    comm.Allreduce(values, out, op=MPI.SUM)
    return out
