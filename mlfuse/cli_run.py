"""``mlfuse run``: compile, run on random inputs, check against the NumPy interpreter."""
from __future__ import annotations

import sys
import warnings

import numpy as np

from .cli import _fuse_options, parse_dims
from .cli_program import load_program
from .device import choose_device

DEFAULT_DIM = 64


def run_command(args) -> int:
    program = load_program(args.file, args.func)  # a mistake in it is the only message
    dims = parse_dims(args.dim)
    target = choose_device(force_simulator=args.simulator)
    from .interp import run_tensor
    from .testing import bind_dims, compare, program_size
    from numba.core.errors import NumbaPerformanceWarning

    compiled = program.compile(fuse=not args.no_fuse, target=target,
                               fuse_options=_fuse_options(args))
    failures = 0
    for func in program.module.funcs:
        bound = bind_dims(func, dims, default=DEFAULT_DIM)
        inputs = program.inputs(func, bound, args.seed)
        expected = run_tensor(func, inputs)
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            # the simulator runs kernels through NumPy, which warns on inf/nan arithmetic
            warnings.simplefilter("ignore", RuntimeWarning)
            warnings.simplefilter("ignore", NumbaPerformanceWarning)  # small test grids
            got = compiled[func.sym_name](*inputs)
        got = got if isinstance(got, tuple) else (got,)
        ops, reduced = program_size(func)
        sizes = ", ".join(f"{k}={v}" for k, v in bound.items() if k in
                          {d for a in func.args for d in a.type.shape if isinstance(d, str)})
        print(f"func {func.sym_name}" + (f" ({sizes})" if sizes else "")
              + f": {len(compiled.kernels(func.sym_name))} kernel(s)")
        for i, (ref, out) in enumerate(zip(expected, got)):
            c = compare(ref, out, ops, reduced)
            status = "PASS" if c.ok else "FAIL"
            failures += not c.ok
            print(f"  result {i}: {ref.dtype}{list(ref.shape)} max abs error "
                  f"{c.max_abs_error:.3g}, max rel error {c.max_rel_error:.3g}; worst element at "
                  f"{100 * c.allowance_used:.0f}% of its allowance ({c.message}): {status}")
    print("PASS" if not failures else f"FAIL ({failures} result(s) differ)")
    sys.stdout.flush()
    return 0 if not failures else 1
