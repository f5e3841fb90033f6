"""Fusion on the example programs: the groups chosen, explain snapshots, and
fused/unfused kernels agreeing with the NumPy interpreter under the simulator."""
import os
from pathlib import Path

import numpy as np
import pytest

import mlfuse
from mlfuse.pipeline import compile_text, parse_program
from mlfuse.tools.explain import explain_module, format_json, format_text
from mlfuse.interp import run_loops, run_tensor
from mlfuse.tools.checking import program_size, random_inputs

from helpers import assert_close

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = sorted((ROOT / "examples").glob("*.fuse"))
SNAPSHOTS = Path(__file__).resolve().parent / "snapshots" / "explain"
# sizes for the explain model (the report's bytes) and small ones for the simulator
MODEL_DIMS = {"N": 32, "R": 16384, "C": 4096, "B": 8192, "D": 1024, "S": 128, "H": 56, "W": 56, "K": 64}
SIM_DIMS = {"N": 2, "R": 3, "C": 37, "B": 3, "D": 5, "S": 7, "H": 3, "W": 5, "K": 3}
SIM_DIMS_OF = {"group_norm": {"N": 1, "C": 8},  # C*H*W must divide by its 8 groups
               "group_norm_nhwc": {"N": 1, "C": 16}}  # C by its 8


def fused(name, **kw):
    text = (ROOT / "examples" / f"{name}.fuse").read_text()
    return compile_text(text, f"{name}.fuse", level="fused", **kw)


def kernels(module):
    return [op for op in module.funcs[0].body.ops if op.name == "fused.kernel"]


def test_chain_is_one_kernel_reading_each_input_once_and_writing_once():
    module = fused("chain")
    (k,) = kernels(module)
    loads = [op.operands[0].name_hint for op in k.walk() if op.name == "loops.load"]
    stores = [op for op in k.walk() if op.name == "loops.store"]
    assert sorted(loads) == ["b", "x"] and len(stores) == 1
    allocs = [op for op in module.funcs[0].body.ops if op.name == "loops.alloc"]
    assert len(allocs) == 1  # the result; no intermediate buffer


@pytest.mark.parametrize("name", ["softmax", "layernorm", "sumsq", "l2norm", "bn_relu",
                                  "scale_relu_add", "conv_block", "matmul_bias_relu", "mlp"])
def test_each_pattern_is_one_kernel(name):
    assert len(kernels(fused(name))) == 1


@pytest.mark.parametrize("name, schedule", [("softmax", "row"), ("layernorm", "warp-rows"),
                                            ("sumsq", "row")])
def test_row_reductions_run_as_row_kernels(name, schedule):
    """Rows of C (the model size: long) take a block each; layernorm's rows of 64 a group
    of 8 threads, several rows per warp (mlfuse/row_groups.py)."""
    (k,) = kernels(fused(name, fuse_options={"dims": MODEL_DIMS}))
    assert k["schedule"] == schedule


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_explain_snapshot(path):
    """The report users read, frozen: regenerate with MLFUSE_UPDATE_SNAPSHOTS=1."""
    loops = compile_text(path.read_text(), path.name, level="loops")
    reports = explain_module(loops, MODEL_DIMS)
    text = format_text(reports)
    snap = SNAPSHOTS / f"{path.stem}.txt"
    if os.environ.get("MLFUSE_UPDATE_SNAPSHOTS") == "1":
        snap.write_text(text)
    assert text == snap.read_text()
    for r in reports:  # fusion never adds kernels, bytes or intermediates
        assert r.kernels_after <= r.kernels_before
        assert r.bytes_after <= r.bytes_before
        assert r.intermediate_bytes_after <= r.intermediate_bytes_before


def test_explain_json_has_the_documented_keys():
    loops = compile_text((ROOT / "examples/chain.fuse").read_text(), "chain.fuse", level="loops")
    import json
    data = json.loads(format_json(explain_module(loops, {"N": 1 << 26})))["chain"]
    assert (data["kernels_before"], data["kernels_after"]) == (5, 1)
    assert data["bytes_after"] == 3 * 4 << 26   # read x, b; write the result
    assert data["bytes_before"] > data["bytes_after"]
    assert (data["intermediates_before"], data["intermediates_after"]) == (4, 0)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # NaN inputs to sqrt in simulated threads
@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_every_level_agrees_with_the_tensor_interpreter(path):
    text = path.read_text()
    tensor = parse_program(text, path.name)
    fused_ir = compile_text(text, path.name, level="fused")
    unfused_ir = compile_text(text, path.name, level="fused", fuse=False)
    compiled = {True: mlfuse.compile_source(text, path.name, fuse=True, target="simulator"),
                False: mlfuse.compile_source(text, path.name, fuse=False, target="simulator")}
    for func in tensor.funcs:
        args = random_inputs(func, {**SIM_DIMS, **SIM_DIMS_OF.get(path.stem, {})}, seed=3)
        want = run_tensor(func, args)
        ops, reduced = program_size(func)
        results = {"fused IR": run_loops(fused_ir.func(func.sym_name), args),
                   "unfused IR": run_loops(unfused_ir.func(func.sym_name), args)}
        for fuse, mod in compiled.items():
            with np.errstate(all="ignore"):
                got = mod[func.sym_name](*args)
            results[f"kernels fuse={fuse}"] = got if isinstance(got, tuple) else (got,)
        for what, got in results.items():
            for g, w in zip(got, want):
                assert_close(g, w, ops, f"{func.sym_name} {what}", reduced)


class _FakeKernel:
    def __init__(self, regs):
        self.overloads = {("sig",): object()} if regs else {}
        self.regs = regs

    def get_regs_per_thread(self):
        return {"sig": self.regs}

    def get_local_mem_per_thread(self):
        return {"sig": 0}

    def get_shared_mem_per_block(self):
        return {"sig": 128}


def test_explain_compile_reports_the_variant_that_ran():
    """A row kernel's vector twin, or a contraction's tile shape, is what compiled."""
    import types
    from mlfuse.tools.explain import KernelReport, attach_compiled_resources
    tiles = types.SimpleNamespace(factory=object(), kernels={(128, 128, True, True): _FakeKernel(96)})
    module = types.SimpleNamespace(f_0=_FakeKernel(0), f_0_vector=_FakeKernel(40), f_1=tiles,
                                   f_10=_FakeKernel(7))
    kernels = [KernelReport("f_0", "row", ["R"], [], 0, 0, 0, 0.0),
               KernelReport("f_1", "contraction", ["M"], [], 0, 0, 0, 0.0)]
    report = types.SimpleNamespace(kernels=kernels)  # the FunctionReport's part read here
    attach_compiled_resources([report], module)
    assert [k.registers for k in kernels] == [40, 96]
    assert kernels[0].shared_memory_bytes == 128
