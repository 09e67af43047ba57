"""mpi4py's own test suite on this rank: every test's outcome, one JSON file per rank.

    python tests/mpi/mpi4py_suite.py OUT TESTDIR MODULE...             (plain mpi4py)
    python -m gridcoll tests/mpi/mpi4py_suite.py OUT TESTDIR MODULE...  (gridcoll.Comm)

Run under ``mpiexec``. ``TESTDIR`` is the ``test/`` folder of mpi4py's source
distribution (its helpers ``mpiunittest`` and ``arrayimpl`` live there); each
``MODULE`` (``test_cco_buf``...) is loaded with unittest and run as mpi4py's own
``test/main.py`` runs it, unchanged. Under ``python -m gridcoll`` (or ``gridcoll mpirun
--world``) ``MPI.COMM_WORLD`` is a ``gridcoll.Comm`` before the modules are imported, so
their ``COMM = MPI.COMM_WORLD`` classes, ``Dup``s and ``Split``s run on gridcoll. Each
rank writes ``OUT.<rank>.json``: ``{"swapped", "seconds", "tests": {id: [outcome,
detail]}}`` with outcome ``ok``, ``skip``, ``fail``, ``error``, ``xfail`` or ``xpass``.
"""

import json
import sys
import time
import unittest

from mpi4py import MPI

sys.dont_write_bytecode = True


class Outcomes(unittest.TestResult):
    """Every test's outcome and the end of its traceback."""

    def __init__(self):
        super().__init__()
        self.outcomes = {}

    def _put(self, test, outcome, detail=""):
        self.outcomes[test.id()] = [outcome, detail[-1500:]]

    def addSuccess(self, test):
        self._put(test, "ok")

    def addFailure(self, test, err):
        self._put(test, "fail", self._exc_info_to_string(err, test))

    def addError(self, test, err):
        self._put(test, "error", self._exc_info_to_string(err, test))

    def addSkip(self, test, reason):
        self._put(test, "skip", str(reason))

    def addExpectedFailure(self, test, err):
        self._put(test, "xfail")

    def addUnexpectedSuccess(self, test):
        self._put(test, "xpass")


def main(argv):
    out, testdir, modules = argv[0], argv[1], argv[2:]
    sys.path.insert(0, testdir)
    world = MPI.COMM_WORLD
    swapped = type(world).__module__.startswith("gridcoll")
    suite = unittest.TestSuite()
    loader = unittest.TestLoader()
    for name in modules:
        suite.addTests(loader.loadTestsFromName(name))
    result = Outcomes()
    start = time.monotonic()
    suite.run(result)
    seconds = time.monotonic() - start
    with open(f"{out}.{world.Get_rank()}.json", "w") as f:
        json.dump({"swapped": swapped, "seconds": seconds, "tests": result.outcomes}, f)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
