"""Reference interpreters on NumPy arrays: ``run_tensor`` for the tensor dialect
(the oracle) and ``run_loops`` for the loops and fused dialects."""
from mlfuse.interp.loops_interp import run_loops
from mlfuse.interp.tensor_interp import run_tensor

__all__ = ["run_loops", "run_tensor"]
