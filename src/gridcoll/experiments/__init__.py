"""Experiment harnesses: the seed papers' experiments, run on gridcoll's library.

* :mod:`~gridcoll.experiments.adaptive` -- seed 001's application of broadcasts on a
  loaded grid (sec. 3, figure 8), with each strategy, simulated or measured;
* :mod:`~gridcoll.experiments.adaptive_worker` -- what each rank runs when it is
  measured (``python -m gridcoll.experiments.adaptive_worker``);
* :mod:`~gridcoll.experiments.phoenix_simulated` -- Phoenix (seed 004): the four
  experiments of sec. V (figs. 6-9) in simulation, beside the paper's baselines;
* :mod:`~gridcoll.experiments.phoenix_measured` -- the same experiments, and the
  exactly-once churn checker, on real processes (:class:`gridcoll.group.Group`).

The harnesses sit above the library (:mod:`gridcoll.simulate`, :mod:`gridcoll.runtime`,
:mod:`gridcoll.group`, :mod:`gridcoll.measure`) and below the pictures and the command line
(:mod:`gridcoll.plot`, :mod:`gridcoll.cli`). Import the modules themselves: this
package imports none of them, so ``python -m`` of a worker stays light.
"""
