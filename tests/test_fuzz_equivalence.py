"""Property-based fuzzing: random programs (tests/strategies.py) mean the same at every level.

1. The tensor-level NumPy interpreter, the loops and fused-level interpreters (fused and
   unfused) and the generated kernels (fused and unfused; the simulator in CI, the GPU
   with MLFUSE_FUZZ=gpu) agree within mlfuse.tools.checking's tolerance, NaN where and only
   where the reference has NaN.
2. Every level verifies and its IR text round-trips.
3. Fusion never adds kernels or bytes moved (explain model) over --no-fuse.
Magnitudes that overflow get their own property with a looser rule (see docs/fuzzing.md).
A failing program is printed as .fuse source; `mlfuse run` on it reproduces it.
"""
import numpy as np
import pytest
from hypothesis import assume, event, given, note
from hypothesis import strategies as st
from strategies import (
    KERNEL_DIMS,
    SMALL_DIMS,
    TARGET,
    fuzz_settings,
    inputs_for,
    programs,
)

import mlfuse
from mlfuse.pipeline import compile_text, parse_program
from mlfuse.tools.explain import explain_module
from mlfuse.interp import run_loops, run_tensor
from mlfuse.interp.rounding import rounding_decided
from mlfuse.ir import print_ir, verify
from mlfuse.dialects import parse_ir
from mlfuse.dtypes import eps, finfo, is_float, numpy_dtype
from mlfuse.tools.checking import compare, program_size, tolerance

LEVELS = {"tensor": ("tensor", True), "loops": ("loops", True), "fused": ("fused", True),
          "unfused": ("fused", False)}
MAX_KERNEL_ELEMENTS = 1 << 22  # per value, at KERNEL_DIMS (GPU profile)


def _coarsest_float(func):
    """The least precise float dtype the function computes in: an f64 result cast from
    an f32 sum carries f32 rounding, so that dtype's eps sets the tolerance."""
    dtypes = {numpy_dtype(v.type.dtype) for v in func.args} | \
        {numpy_dtype(r.type.dtype) for op in func.body.ops for r in op.results}
    floats = [d for d in dtypes if is_float(d)]
    return max(floats, key=eps) if floats else None


def _check_same(ref, got, func, what, undecided, dims):
    ops, reduced = program_size(func, dims=dims)  # the reductions as long as computed
    precision = _coarsest_float(func)
    assert len(got) == len(ref), f"{what}: {len(got)} results, reference has {len(ref)}"
    for i, (r, g, u) in enumerate(zip(ref, got, undecided)):
        c = compare(r, g, ops, reduced, precision, undecided=u)
        event(f"{what}: undecided elements {'left out' if c.left_out else 'none'}")
        assert c.ok, f"{what}, result {i}: {c.message} (max abs error {c.max_abs_error:.3g})"


def _levels(source):
    """The program at every level; the passes verify after each step (PassManager's
    verify_each), and each level's text must print, parse and print the same."""
    out = {}
    for name, (level, fuse) in LEVELS.items():
        module = compile_text(source, "fuzz.fuse", level=level, fuse=fuse)
        verify(module)
        text = print_ir(module)
        assert print_ir(parse_ir(text)) == text, f"{name} IR does not round-trip"
        out[name] = module
    return out


def _run_kernels(source, args, fuse):
    out = mlfuse.compile_source(source, "fuzz.fuse", fuse=fuse, target=TARGET).f(*args)
    return out if isinstance(out, tuple) else (out,)


@fuzz_settings("interpreters")
@given(st.data())
def test_interpreters_agree_at_every_level(data):
    program = data.draw(programs())
    source = program.source()
    note(source)
    levels = _levels(source)
    func = levels["tensor"].funcs[0]
    args = data.draw(inputs_for(func, SMALL_DIMS))
    with np.errstate(all="ignore"):
        ref = run_tensor(func, args)
        undecided = rounding_decided(func, args)
        for name in ("loops", "fused", "unfused"):
            _check_same(ref, run_loops(levels[name].funcs[0], args), func, f"{name} interpreter",
                        undecided, SMALL_DIMS)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # NaN/inf inputs in simulated threads
@fuzz_settings("kernels")
@given(st.data())
def test_generated_kernels_agree_fused_and_unfused(data):
    program = data.draw(programs(max_ops=6))
    assume(program.max_elements(KERNEL_DIMS) <= MAX_KERNEL_ELEMENTS)
    source = program.source()
    note(source)
    func = parse_program(source, "fuzz.fuse").funcs[0]
    args = data.draw(inputs_for(func, KERNEL_DIMS))
    with np.errstate(all="ignore"):
        ref = run_tensor(func, args)
        undecided = rounding_decided(func, args)
    for fuse in (True, False):
        _check_same(ref, _run_kernels(source, args, fuse), func, f"kernels fuse={fuse}",
                    undecided, KERNEL_DIMS)


def _agree_where_finite(ref, got, args, func, what, undecided):
    """The overflow rule: where either side is NaN, infinite or beyond 2**-8 of the
    dtype's largest value, evaluation order may legitimately decide between inf, a huge
    finite number and NaN (inf - inf); other elements must meet the tolerance, scaled by
    the largest finite magnitude among the inputs and results (a sum of 1e30 and -1e30
    carries the rounding of its terms, whatever its result), but those the rounding
    analysis leaves ``undecided``: that rounding times another huge value (``v *
    sum(v)`` with v = [1e30, -1e30, 0, 1]: the sum 1 in one order and 0 in another,
    1e30 apart once multiplied; ``test_overflow_rule_leaves_out_a_huge_multiple_of_a_cancellation``)."""
    ops, reduced = program_size(func)
    magnitude = max([float(np.max(np.abs(a[np.isfinite(a)]), initial=1.0)) for a in args])
    for i, (r, g) in enumerate(zip(ref, got)):
        assert r.shape == g.shape and r.dtype == g.dtype, f"{what}, result {i}: type differs"
        if not is_float(r.dtype):
            continue  # a bool or integer result may come from a comparison with an overflow
        huge = float(finfo(r.dtype).max) / 256
        r64, g64 = r.astype(np.float64), g.astype(np.float64)
        with np.errstate(invalid="ignore"):
            tame = (np.abs(r64) < huge) & (np.abs(g64) < huge) & ~undecided[i]
        scale = max(magnitude, float(np.max(np.abs(r64[tame]), initial=1.0)))
        tol = tolerance(_coarsest_float(func), ops, reduced) * scale
        assert not (np.abs(r64[tame] - g64[tame]) > tol).any(), \
            f"{what}, result {i}: finite values differ by more than {tol:.3g}"


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@fuzz_settings("overflow")
@given(st.data())
def test_overflowing_magnitudes_agree_where_finite(data):
    program = data.draw(programs(max_ops=5))
    assume(program.max_elements(KERNEL_DIMS) <= MAX_KERNEL_ELEMENTS)
    source = program.source()
    note(source)
    levels = _levels(source)
    func = levels["tensor"].funcs[0]
    args = data.draw(inputs_for(func, KERNEL_DIMS, huge=True))
    with np.errstate(all="ignore"):
        ref = run_tensor(func, args)
        undecided = rounding_decided(func, args)
        _agree_where_finite(ref, run_loops(levels["fused"].funcs[0], args), args, func,
                            "fused interpreter", undecided)
    _agree_where_finite(ref, _run_kernels(source, args, True), args, func, "kernels",
                        undecided)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_overflow_rule_leaves_out_a_huge_multiple_of_a_cancellation():
    """Found by the overflow property's long profile: ``v * sum(v)`` with v = [1e30,
    -1e30, 0, 1]. The sum is 1 in order and 0 in a tree's; v[0] and v[1] times it are
    1e30 apart, which the rounding analysis leaves undecided (within err of overflow);
    1 times it differs by 1, within the rule's tolerance at magnitude 1e30."""
    source = """func f(x0: f32[3], x1: f32[3], x2: f32[1]) -> (f32[4], f32[3]) {
    v0 = neg(x0)
    v1 = concat([x2, x1], axis=0)
    return v1 * sum(v1, axis=[0], keepdims=true), v0
}
"""
    func = parse_program(source, "t.fuse").funcs[0]
    args = [np.zeros(3, np.float32), np.array([-1e30, 0, 1], np.float32),
            np.array([1e30], np.float32)]
    with np.errstate(all="ignore"):
        ref = run_tensor(func, args)
        undecided = rounding_decided(func, args)
    assert undecided[0].tolist() == [True, True, False, False]
    tree_order = (np.array([0, -0.0, 0, 0], np.float32), -args[0])  # the kernels' result
    _agree_where_finite(ref, tree_order, args, func, "tree order", undecided)
    _agree_where_finite(ref, _run_kernels(source, args, True), args, func, "kernels", undecided)


@fuzz_settings("explain")
@given(programs())
def test_fusion_never_adds_kernels_or_bytes(program):
    note(program.source())
    module = compile_text(program.source(), "fuzz.fuse", level="loops")
    for dims in ({"N": 1, "M": 1}, {"N": 1024, "M": 4096}):
        (report,) = explain_module(module, dims)
        assert report.kernels_after <= report.kernels_before, dims
        assert report.bytes_after <= report.bytes_before, dims
        assert report.intermediate_bytes_after <= report.intermediate_bytes_before, dims
