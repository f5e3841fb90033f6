"""``mlfuse run``: compile, run on random inputs (or the arrays of an .npz file), check
against the NumPy interpreter.

The check is ``mlfuse.tools.checking.compare``; elements whose NaN/inf status the evaluation
order decides (``mlfuse.interp.rounding``, e.g. an infinite input times a difference
that cancels) are left out and counted, as in the fuzz tests (docs/fuzzing.md)."""
from __future__ import annotations

import sys
import warnings

import numpy as np

from mlfuse.cli.options import fuse_options, parse_dims
from mlfuse.cli.program import load_program
from mlfuse.dtypes import from_saved
from mlfuse.runtime.device import choose_device
from mlfuse.errors import MlfuseError

DEFAULT_DIM = 64


def run_command(args) -> int:
    program = load_program(args.file, args.func)  # a mistake in it is the only message
    dims = program.dims(parse_dims(args.dim))
    given = _load_arrays(args.inputs) if args.inputs else {}
    target = choose_device(force_simulator=args.simulator)
    from mlfuse.interp import run_tensor
    from mlfuse.interp.rounding import rounding_decided
    from mlfuse.tools.checking import bind_dims, compare, matmul_eps, program_size
    from numba.core.errors import NumbaPerformanceWarning

    # kernels planned at the sizes given, as `mlfuse explain --dim` reports them
    compiled = program.compile(fuse=not args.no_fuse, target=target,
                               fuse_options={**fuse_options(args), "dims": dims},
                               matmul_precision=args.matmul_precision)
    failures = 0
    for func in program.module.funcs:
        bound = bind_dims(func, {**_dims_of(func, given), **dims}, default=DEFAULT_DIM)
        try:
            drawn = program.inputs(func, bound, args.seed)
        except (MemoryError, ValueError) as e:  # NumPy: too large to allocate
            raise MlfuseError(f"cannot make inputs for {func.sym_name} with "
                              f"{', '.join(f'{k}={v}' for k, v in bound.items()) or 'its dims'}"
                              f": {e}") from None
        inputs = [from_saved(given[p.name_hint], p.type.dtype) if p.name_hint in given else a
                  for p, a in zip(func.args, drawn)]
        with np.errstate(all="ignore"):
            expected = run_tensor(func, inputs)
            undecided = rounding_decided(func, inputs)
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            # the simulator runs kernels through NumPy, which warns on inf/nan arithmetic
            warnings.simplefilter("ignore", RuntimeWarning)
            warnings.simplefilter("ignore", NumbaPerformanceWarning)  # small test grids
            got = compiled[func.sym_name](*inputs)
        got = got if isinstance(got, tuple) else (got,)
        ops, reduced = program_size(func, dims=bound)
        unit = matmul_eps(compiled.kernels(func.sym_name))  # TF32: its coarser rounding
        sizes = ", ".join(f"{k}={v}" for k, v in bound.items() if k in
                          {d for a in func.args for d in a.type.shape if isinstance(d, str)})
        print(f"func {func.sym_name}" + (f" ({sizes})" if sizes else "")
              + f": {len(compiled.kernels(func.sym_name))} kernel(s)")
        for i, (ref, out, u) in enumerate(zip(expected, got, undecided)):
            c = compare(ref, out, ops, reduced, undecided=u, unit=unit)
            status = "PASS" if c.ok else "FAIL"
            failures += not c.ok
            print(f"  result {i}: {ref.dtype}{list(ref.shape)} max abs error "
                  f"{c.max_abs_error:.3g}, max rel error {c.max_rel_error:.3g}; worst element at "
                  f"{100 * c.allowance_used:.0f}% of its allowance ({c.message}): {status}")
    print("PASS" if not failures else f"FAIL ({failures} result(s) differ)")
    sys.stdout.flush()
    return 0 if not failures else 1


def _load_arrays(path: str) -> dict:
    """The arrays of an .npz file (np.savez), by name: a function's parameters take the
    arrays named like them."""
    try:
        with np.load(path, allow_pickle=False) as npz:
            return {name: np.ascontiguousarray(npz[name]) if npz[name].ndim else npz[name]
                    for name in npz.files}
    except OSError as e:
        raise MlfuseError(f"cannot read inputs {path}: {e.strerror or e}") from None
    except (ValueError, EOFError):
        raise MlfuseError(f"{path} is not an .npz file of arrays (np.savez)") from None


def _dims_of(func, given: dict) -> dict:
    """Sizes of symbolic dims read off the given arrays (a disagreement is caught when
    the arguments are bound)."""
    dims = {}
    for p in func.args:
        array = given.get(p.name_hint)
        if array is not None and array.ndim == len(p.type.shape):
            for d, n in zip(p.type.shape, array.shape):
                if isinstance(d, str):
                    dims.setdefault(d, n)
    return dims
