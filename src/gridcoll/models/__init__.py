"""The models layer: closed-form P-LogP cost formulas, one module per algorithm family.

:data:`MODELS` maps ``(op, name)`` to a model with the builder's signature that returns
seconds; :func:`predict` looks one up and evaluates it. The formula functions of seed 002
Table 1 and seed 000 sec. 3.1.1 (:mod:`gridcoll.models.single_layer`) and the per-edge
tree model (:mod:`gridcoll.models.tree_model`) are exported for other models to reuse.
"""

from gridcoll.models.single_layer import (
    binary_time,
    binomial_rendezvous_time,
    binomial_segmented_time,
    binomial_time,
    chain_rendezvous_time,
    chain_segmented_time,
    chain_time,
    check_model_call,
    dary_gamma,
    dary_lam,
    dary_segmented_time,
    flat_gamma,
    flat_lam,
    flat_rendezvous_time,
    flat_segmented_time,
    flat_time,
    nsegments,
    segmented_time,
)
from gridcoll.models.tree_model import tree_gamma_lambda, tree_time

# isort: split
# The registry imports the family modules last: they may import the names above from
# this package while it initialises.
from gridcoll.models.registry import FAMILIES, MODELS, get_model, predict

__all__ = [
    "FAMILIES",
    "MODELS",
    "binary_time",
    "binomial_rendezvous_time",
    "binomial_segmented_time",
    "binomial_time",
    "chain_rendezvous_time",
    "chain_segmented_time",
    "chain_time",
    "check_model_call",
    "dary_gamma",
    "dary_lam",
    "dary_segmented_time",
    "flat_gamma",
    "flat_lam",
    "flat_rendezvous_time",
    "flat_segmented_time",
    "flat_time",
    "get_model",
    "nsegments",
    "predict",
    "segmented_time",
    "tree_gamma_lambda",
    "tree_time",
]
