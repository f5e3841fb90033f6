"""Strips over columns reading a value that holds no point's last index (a mask
``m[a, b, 0]``, a per-row weight ``w[b]``): codegen/strips_vector.py's uniform loads, a
scalar load a slot that a vector's lanes share, read again by each loop rather than held
in a shared-memory plane. Random middle-axis reductions and normalisations with such
an operand, f32 and f16, at sizes whose points whole vectors cover or not, each run by
the kernel the host takes with shared strips on, and with them off and no strip held in
registers (the vector or scalar streaming kernel), agree with the NumPy interpreter."""
import dataclasses

import numpy as np
import pytest
from hypothesis import given, note, strategies as st

from mlfuse.api import CompiledModule
from mlfuse.codegen import generate
from mlfuse.hardware import get_target
from mlfuse.interp import run_tensor
from mlfuse.pipeline import compile_text, parse_program
from mlfuse.runtime.loader import load_source

from helpers import assert_results_close, record_launches
from strategies import fuzz_settings, inputs_for

# planned where a strip of 128 values over 4096 points is the kernel (test_strips' PLAN)
PLAN = {"dims": {"A": 32, "B": 128, "C": 4096}}
# bodies over x [A, B, C] and u, the operand one value for a row of points
BODIES = [
    "softmax(x * 0.5 + u, axis=1)",
    "x - max(x + u, axis=1, keepdims=true)",
    "(x * u) / sum(abs(x * u) + 1.0, axis=1, keepdims=true)",
    "(x - mean(x, axis=1, keepdims=true)) * rsqrt(mean((x - mean(x, axis=1, keepdims=true))"
    " * (x - mean(x, axis=1, keepdims=true)), axis=1, keepdims=true) + 1e-5) * u",
    "exp(x - u) / sum(exp(x - u), axis=1, keepdims=true)",
]
# the operand: a mask over [A, B, 1], or a weight over B read as [1, B, 1]
OPERANDS = {"mask": ("u: {dt}[A, B, 1]", "u"), "weight": ("w: {dt}[B]", "reshape(w, [1, B, 1])")}


def _module(source: str) -> CompiledModule:
    ir = compile_text(source, "t.fuse", level="fused", fuse_options=PLAN)
    hw = dataclasses.replace(get_target(), strip_shared_min_rereads=1)
    text = generate(ir, "simulator", hw)
    return CompiledModule(ir, text, "simulator", load_source(text, "t"))


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@fuzz_settings("uniform_strips")
@given(st.data())
def test_random_middle_reductions_with_a_row_operand_agree_with_numpy(data):
    body, dt = data.draw(st.sampled_from(BODIES)), data.draw(st.sampled_from(["f32", "f16"]))
    param, use = OPERANDS[data.draw(st.sampled_from(sorted(OPERANDS)))]
    source = (f"func f(x: {dt}[A, B, C], {param.replace('{dt}', dt)}) -> {dt}[A, B, C] {{\n"
              f"    u = {use}\n    return {body}\n}}") if use != "u" else \
        (f"func f(x: {dt}[A, B, C], {param.replace('{dt}', dt)}) -> {dt}[A, B, C] {{\n"
         f"    return {body}\n}}")
    shared = data.draw(st.booleans())
    sizes = {"A": data.draw(st.integers(1, 3)), "B": data.draw(st.integers(1, 20)),
             "C": data.draw(st.sampled_from([4, 5, 8, 12, 16]))}
    note(f"{source}\nsizes {sizes}, shared strips {shared}")
    func = parse_program(source, "fuzz.fuse").funcs[0]
    args = data.draw(inputs_for(func, sizes, special=True))
    module = _module(source)
    (kernel,) = [k for k in module.ir.funcs[0].body.ops if k.name == "fused.kernel"]
    assert kernel["schedule"] == "strips" and kernel.attributes.get("strip") == "columns"
    py, name = module.python_module, kernel["kernel_name"]
    assert hasattr(py, f"{name}_vector")  # the uniform load keeps the vector variant
    py.COLUMN_STAGES = False
    if not shared:  # the streaming kernels: vector where whole vectors cover the points
        py.STRIP_SHARED_BYTES, py.STRIP_HELD_THREADS = 0, 0
    launched = record_launches(py, [n for n in (name, f"{name}_streaming", f"{name}_vector",
                                                f"{name}_shared", f"{name}_shared_scalar")
                                    if hasattr(py, n)])
    with np.errstate(all="ignore"):
        assert_results_close(func, run_tensor(func, args), module["f"](*args))
    lanes = 8 if dt == "f16" else 4
    whole = sizes["C"] % lanes == 0
    expected = (f"{name}_shared" if whole else f"{name}_shared_scalar") if shared else \
        (f"{name}_vector" if whole else f"{name}_streaming")
    assert launched == [expected]
