"""Pickling communicators as mpi4py's own test (``test_comm.py``, ``testPickle``) does,
with ``MPI.COMM_WORLD`` swapped for a ``gridcoll.Comm`` or not.

``check()`` (collective: every rank calls it) returns ``{check: bool}``; every value
must be true. Run alone (``python world_pickle.py``, not swapped) rank 0 prints them as
one JSON line; ``world_prog.py`` runs it swapped.
"""

import json
import pickle

from mpi4py import MPI

import gridcoll


def _refused(comm, cls: str) -> bool:
    """``pickle.dumps(comm)`` raises mpi4py's ValueError naming ``cls``."""
    try:
        pickle.dumps(comm)
    except ValueError as err:
        return str(err) == f"cannot serialize '{cls}' instance"
    return False


def check() -> dict:
    world = MPI.COMM_WORLD
    out = {"swapped": isinstance(world, gridcoll.Comm)}
    for name in ("COMM_WORLD", "COMM_SELF"):  # mpi4py's testPickle, predefined branch
        comm = getattr(MPI, name)
        out[f"{name} unpickles to itself"] = pickle.loads(pickle.dumps(comm)) is comm
        view = pickle.loads(pickle.dumps(MPI.Intracomm(comm)))
        out[f"{name} view unpickles to a view"] = (
            view is not comm and view == comm and type(view) is MPI.Intracomm
        )
    wrapper = gridcoll.Comm(MPI.Intracomm(world))  # the world's handle, not the global
    copy = pickle.loads(pickle.dumps(wrapper))
    out["wrapper unpickles to a new Comm"] = (
        type(copy) is gridcoll.Comm and copy == world and copy is not wrapper
    )
    self_copy = pickle.loads(pickle.dumps(gridcoll.Comm(MPI.COMM_SELF)))
    out["COMM_SELF wrapper unpickles to a new Comm"] = (
        type(self_copy) is gridcoll.Comm and self_copy == MPI.COMM_SELF
    )
    plain_dup = MPI.Intracomm(world).Dup()
    out["plain dup refused"] = _refused(plain_dup, "mpi4py.MPI.Intracomm")
    plain_dup.Free()
    dup = wrapper.Dup()
    out["Comm dup refused"] = _refused(dup, "gridcoll.runtime.comm.Comm")
    dup.Free()
    sent = (world, MPI.COMM_SELF, wrapper) if world.Get_rank() == 0 else None
    got = world.bcast(sent, root=0)  # across processes: the object broadcast pickles
    out["sent world is the receiver's"] = got[0] is MPI.COMM_WORLD
    out["sent COMM_SELF is the receiver's"] = got[1] is MPI.COMM_SELF
    out["sent wrapper is a Comm"] = type(got[2]) is gridcoll.Comm and got[2] == world
    return out


if __name__ == "__main__":
    result = check()
    everyone = MPI.COMM_WORLD.gather(result, root=0)
    if MPI.COMM_WORLD.Get_rank() == 0:
        print(json.dumps({"ranks": everyone}), flush=True)
