"""The passes that take a module from one level to the next, and the table of them
by name (``mlfuse opt --passes``, the pipeline): the one place that lists them.

tensor -> tensor: ``decompose`` (composites into primitives), ``cse``, ``split-reductions``
                  (a reduction whose axes a kept axis separates, as two);
tensor -> loops:  ``lower-tensor-to-loops`` (one loop nest per op);
loops -> fused:   ``fuse`` / ``no-fuse`` (kernels), then ``schedule-contractions``,
                  ``coalesce-axes``, ``flatten-row-nests`` and ``flatten-column-nests``.
"""
from __future__ import annotations

import inspect

from mlfuse.errors import MlfuseError
from mlfuse.ir.pass_manager import Pass
from mlfuse.transforms.coalesce_axes import CoalesceAxes
from mlfuse.transforms.contraction import ScheduleContractionsPass
from mlfuse.transforms.cse import CSEPass
from mlfuse.transforms.decompose import Decompose
from mlfuse.transforms.flatten_column_nests import FlattenColumnNests
from mlfuse.transforms.flatten_row_nests import FlattenRowNests
from mlfuse.transforms.fusion.fuse import FusePass, NoFusePass
from mlfuse.transforms.lower_to_loops import LowerTensorToLoops
from mlfuse.transforms.split_reductions import SplitReductions

PASSES: dict[str, type[Pass]] = {cls.name: cls for cls in (
    Decompose, CSEPass, SplitReductions, LowerTensorToLoops, FusePass, NoFusePass, ScheduleContractionsPass,
    CoalesceAxes, FlattenRowNests, FlattenColumnNests)}


def get_pass(name: str, **options) -> Pass:
    """A new instance of the pass called ``name``, built with ``options``."""
    cls = PASSES.get(name)
    if cls is None:
        raise MlfuseError(f"unknown pass '{name}' (known: {', '.join(sorted(PASSES))})")
    params = inspect.signature(cls.__init__).parameters
    takes = sorted(p for p in params if p != "self")
    for option in options:  # checked here, not as a TypeError from inside the pass
        if option not in params or option == "self":
            raise MlfuseError(f"pass '{name}' has no option '{option}' "
                              f"(options: {', '.join(takes) or 'none'})")
    return cls(**options)
