"""The algorithms layer: builders that return schedules, one module per family.

Builders are plain functions in their family's module (``gridcoll.algorithms.chain``);
:data:`BUILDERS` maps ``(op, name)`` to each, with the names ``--algo`` takes.
"""

from gridcoll.algorithms.registry import BUILDERS, Builder, get_builder, list_builders
from gridcoll.algorithms.trees import Tree, tree_broadcast

__all__ = ["BUILDERS", "Builder", "Tree", "get_builder", "list_builders", "tree_broadcast"]
