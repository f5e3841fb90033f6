"""Run a .fuse program once on the GPU, generated with hardware knobs changed: the
process that ``ncu`` or ``compute-sanitizer`` watches when a variant that is not the
default is profiled (ncu_profile.py profiles ``mlfuse run``, the defaults).

    ncu --kernel-name regex:epilogue ... python benchmarks/run_with_knobs.py FILE \\
        --dim R=16384 --dim C=4096 --hw column_lanes_rows=one [--repeat 3]

Inputs are random (seed 1), every call's result checked against the NumPy interpreter
(a wrong variant says so rather than being profiled silently).
"""
from __future__ import annotations

import argparse
import dataclasses
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("file")
    p.add_argument("--dim", action="append", default=[], help="NAME=SIZE (repeatable)")
    p.add_argument("--hw", action="append", default=[], help="NAME=VALUE (repeatable)")
    p.add_argument("--repeat", type=int, default=1)
    args = p.parse_args(argv)
    from numba import cuda

    from mlfuse.codegen import generate
    from mlfuse.hardware import get_target, hw_setting, target_in_effect
    from mlfuse.interp import run_tensor
    from mlfuse.pipeline import compile_text, parse_program
    from mlfuse.runtime.loader import load_source
    from mlfuse.tools.checking import compare, program_size, random_inputs
    text = Path(args.file).read_text()
    dims = {k: int(v) for k, _, v in (d.partition("=") for d in args.dim)}
    hw = dataclasses.replace(get_target(), **dict(hw_setting(h) for h in args.hw))
    target = "simulator" if os.environ.get("NUMBA_ENABLE_CUDASIM") == "1" else "cuda"
    with target_in_effect(hw):  # (the schedule choices read the knobs too)
        fused = compile_text(text, args.file)
    module = load_source(generate(fused, target, hw), Path(args.file).stem)
    func = parse_program(text, args.file).funcs[0]
    inputs = random_inputs(func, dims, seed=1)
    expected = run_tensor(func, inputs)
    ops, reduced = program_size(func)
    device_inputs = [cuda.to_device(a) for a in inputs]
    for _ in range(args.repeat):
        got = module.ENTRY_POINTS[func.sym_name](*device_inputs)
        cuda.synchronize()
    got = got if isinstance(got, (tuple, list)) else (got,)
    ok = all(compare(want, have.copy_to_host(), ops, reduced).ok
             for want, have in zip(expected, got))
    print(f"{func.sym_name} {dims} {args.hw}: {'ok' if ok else 'WRONG'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
