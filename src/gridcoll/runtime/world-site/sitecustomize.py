"""gridcoll's ``sitecustomize``: ``gridcoll mpirun --world`` in every Python of a job.

Not a module of the package: package data in a directory that is not a package (its
name is no identifier), which ``gridcoll mpirun --world`` puts first on ``PYTHONPATH``
(:func:`gridcoll.runtime.world.environment`), so ``site`` imports this file at the
start of every Python interpreter of the job, whatever the command (``python app.py``,
``python -m pytest``, a script with a shebang). It belongs to the ``runtime`` layer: it
imports :mod:`gridcoll.runtime.world` only.

With ``GRIDCOLL_WORLD`` set (and not ``0``) it puts a finder first on
``sys.meta_path`` that finds nothing, until the process imports ``mpi4py.MPI``: then it
leaves ``sys.meta_path`` and hands the import to a
:class:`gridcoll.runtime.world.SwapOnImport`, which loads the module and makes
``MPI.COMM_WORLD`` a ``gridcoll.Comm``. Until that import it loads nothing but ``os``
and ``sys``: a process that never imports ``mpi4py.MPI`` never loads gridcoll, numpy
or MPI. An interpreter that cannot import gridcoll says so on stderr and runs on.

Then it runs the next ``sitecustomize`` on ``sys.path`` (a site's own), as ``site``
would have without this directory: the directory leaves ``sys.path`` (it stays in the
``PYTHONPATH`` that child processes inherit) and ``sitecustomize`` is imported again.

Standard library only and plain syntax (Python 3.6 on), since any Python of the job
reads it.
"""

import os
import sys

_HERE = os.path.dirname(os.path.realpath(__file__))


class _OnMPIImport:
    """Hands the first import of ``mpi4py.MPI`` to gridcoll's swapping finder."""

    gridcoll_world_hook = True  # gridcoll.runtime.world.HOOK_MARK

    @classmethod
    def find_spec(cls, fullname, path=None, target=None):
        if fullname != "mpi4py.MPI":
            return None
        if cls in sys.meta_path:
            sys.meta_path.remove(cls)
        try:
            from gridcoll.runtime.world import SwapOnImport
        except ImportError as err:
            sys.stderr.write(
                f"gridcoll: GRIDCOLL_WORLD is set, but {sys.executable} cannot import "
                f"gridcoll ({err}): MPI.COMM_WORLD stays mpi4py's\n"
            )
            return None
        return SwapOnImport().find_spec(fullname, path, target)


def _chain():
    """Import the next ``sitecustomize`` on ``sys.path``, if there is one."""
    this = sys.modules.pop(__name__, None)
    sys.path[:] = [p for p in sys.path if os.path.realpath(p or os.curdir) != _HERE]
    try:
        __import__("sitecustomize")
    except ImportError as err:
        if err.name != "sitecustomize":
            raise
        if this is not None:
            sys.modules[__name__] = this


_WANTED = os.environ.get("GRIDCOLL_WORLD", "").strip() not in ("", "0")
if _WANTED and _OnMPIImport not in sys.meta_path:
    sys.meta_path.insert(0, _OnMPIImport)
_chain()
