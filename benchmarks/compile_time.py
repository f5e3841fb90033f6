"""Compile time at model scale (issue 16): prints one table row per case.

    python benchmarks/compile_time.py            # all cases
    python benchmarks/compile_time.py --quick    # smaller programs (a smoke run)

Cases (each compiled in a fresh process, as `mlfuse compile` would, timed end to end):
  - chain:   y1 = x * 1.0001, y2 = y1 * 1.0001, ... (1000 statements), --emit numba
  - sum:     return x0 + x1 + ... over 500 parameters, --emit numba
  - bert12:  a 12-layer BERT-base encoder graph (hidden 768, 12 heads, FFN 3072, seq 128),
             built with onnx.helper (weights as graph inputs), --emit numba
  - second run: on a GPU, time to the first result of examples/softmax.fuse in a
             second process (kernels from the disk cache; mlfuse/runtime/kernel_cache.py);
             without a GPU the row says it was skipped.
Targets: chain and sum < 5 s, bert12 < 30 s, second run < 2 s.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def chain_source(n: int) -> str:
    lines = ["func chain(x: f32[N]) -> f32[N] {", "    y0 = x * 1.0001"]
    lines += [f"    y{i} = y{i - 1} * 1.0001" for i in range(1, n)]
    return "\n".join(lines + [f"    return y{n - 1}", "}", ""])


def sum_source(n: int) -> str:
    params = ", ".join(f"x{i}: f32[N]" for i in range(n))
    terms = " + ".join(f"x{i}" for i in range(n))
    return f"func sum{n}({params}) -> f32[N] {{\n    return {terms}\n}}\n"


def bert_model(layers: int, hidden: int = 768, heads: int = 12, ffn: int = 3072, seq: int = 128):
    """A post-norm BERT encoder (no attention mask, erf GELU) as an ONNX model."""
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper
    f32 = TensorProto.FLOAT
    d = hidden // heads
    inputs = [helper.make_tensor_value_info("x", f32, [1, seq, hidden])]
    inits = [numpy_helper.from_array(np.array(v, np.int64), n) for n, v in (
        ("heads_shape", [1, seq, heads, d]), ("flat_shape", [1, seq, hidden]))]
    inits += [numpy_helper.from_array(np.array(c, np.float32), n) for n, c in (
        ("scale", 1 / d ** 0.5), ("half", 0.5), ("one", 1.0), ("rsqrt2", 2 ** -0.5))]
    nodes = []

    def param(name, shape):
        inputs.append(helper.make_tensor_value_info(name, f32, shape))
        return name

    def node(op, ins, out, **attrs):
        nodes.append(helper.make_node(op, ins, [out], **attrs))
        return out

    def linear(x, p, n_in, n_out):
        h = node("MatMul", [x, param(f"{p}_w", [n_in, n_out])], f"{p}_mm")
        return node("Add", [h, param(f"{p}_b", [n_out])], f"{p}_out")

    def layer_norm(x, p):
        return node("LayerNormalization", [x, param(f"{p}_g", [hidden]), param(f"{p}_b", [hidden])],
                    f"{p}_out", axis=-1, epsilon=1e-12)

    x = "x"
    for i in range(layers):
        p = f"l{i}"
        q, k, v = (node("Reshape", [linear(x, f"{p}_{t}", hidden, hidden), "heads_shape"],
                        f"{p}_{t}_heads") for t in "qkv")
        q = node("Transpose", [q], f"{p}_qt", perm=[0, 2, 1, 3])
        k = node("Transpose", [k], f"{p}_kt", perm=[0, 2, 3, 1])
        v = node("Transpose", [v], f"{p}_vt", perm=[0, 2, 1, 3])
        scores = node("Mul", [node("MatMul", [q, k], f"{p}_qk"), "scale"], f"{p}_scores")
        probs = node("Softmax", [scores], f"{p}_probs", axis=-1)
        ctx = node("Transpose", [node("MatMul", [probs, v], f"{p}_ctx")], f"{p}_ctxt",
                   perm=[0, 2, 1, 3])
        ctx = node("Reshape", [ctx, "flat_shape"], f"{p}_ctxf")
        h = layer_norm(node("Add", [x, linear(ctx, f"{p}_o", hidden, hidden)], f"{p}_res1"),
                       f"{p}_ln1")
        f = linear(h, f"{p}_ff1", hidden, ffn)
        erf = node("Erf", [node("Mul", [f, "rsqrt2"], f"{p}_fs")], f"{p}_erf")
        gelu = node("Mul", [node("Mul", [f, "half"], f"{p}_fh"),
                            node("Add", [erf, "one"], f"{p}_e1")], f"{p}_gelu")
        x = layer_norm(node("Add", [h, linear(gelu, f"{p}_ff2", ffn, hidden)], f"{p}_res2"),
                       f"{p}_ln2")
    graph = helper.make_graph(nodes, "bert", inputs,
                              [helper.make_tensor_value_info(x, f32, [1, seq, hidden])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def timed(cmd: list[str], env=None) -> tuple[float, str]:
    start = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, env=env)
    seconds = time.perf_counter() - start
    if done.returncode:
        return seconds, "failed: " + (done.stderr.strip().splitlines() or ["?"])[-1]
    return seconds, "ok"


def has_gpu() -> bool:
    probe = "from numba import cuda; print(cuda.is_available())"
    env = dict(os.environ)
    env.pop("NUMBA_ENABLE_CUDASIM", None)
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env)
    return done.stdout.strip() == "True"


FIRST_RESULT = """
import time, numpy as np, mlfuse
start = time.perf_counter()
mod = mlfuse.compile_file("examples/softmax.fuse", target="cuda")
x = np.random.rand(8, 100).astype(np.float32)
mod.softmax(x)
print(time.perf_counter() - start)
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="smaller programs (a smoke run)")
    args = ap.parse_args()
    chain_n, sum_n, layers = (100, 50, 1) if args.quick else (1000, 500, 12)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        def compile_cmd(path):
            return [sys.executable, "-m", "mlfuse", "compile", str(path), "--emit", "numba",
                    "-o", str(tmp / "out.py")]
        (tmp / "chain.fuse").write_text(chain_source(chain_n))
        rows.append((f"chain of {chain_n} statements", 5.0,
                     *timed(compile_cmd(tmp / "chain.fuse"))))
        (tmp / "sum.fuse").write_text(sum_source(sum_n))
        rows.append((f"sum of {sum_n} parameters", 5.0,
                     *timed(compile_cmd(tmp / "sum.fuse"))))
        try:
            import onnx
            onnx.save(bert_model(layers), str(tmp / "bert.onnx"))
            rows.append((f"BERT-base encoder, {layers} layer(s)", 30.0,
                         *timed(compile_cmd(tmp / "bert.onnx"))))
        except ImportError:
            rows.append(("BERT-base encoder", 30.0, None, "skipped: onnx is not installed"))
        if has_gpu():
            env = dict(os.environ, MLFUSE_CACHE_DIR=str(tmp / "cache"))
            env.pop("NUMBA_ENABLE_CUDASIM", None)
            script = [sys.executable, "-c", FIRST_RESULT]
            first = subprocess.run(script, capture_output=True, text=True, cwd=ROOT, env=env)
            second = subprocess.run(script, capture_output=True, text=True, cwd=ROOT, env=env)
            for label, run in (("first run, softmax (cold cache)", first),
                               ("second run, softmax (disk cache)", second)):
                ok = run.returncode == 0
                rows.append((label, 2.0 if "second" in label else None,
                             float(run.stdout.split()[-1]) if ok else None,
                             "ok" if ok else "failed: " + run.stderr.strip()[-200:]))
        else:
            rows.append(("second run to first result", 2.0, None, "skipped: no GPU here"))
    print("| case | seconds | target | result |")
    print("|---|---|---|---|")
    for label, target, seconds, status in rows:
        shown = "-" if seconds is None else f"{seconds:.2f}"
        aim = "-" if target is None else f"< {target:g} s"
        met = "" if seconds is None or target is None or status != "ok" else (" (met)" if seconds < target else " (missed)")
        print(f"| {label} | {shown} | {aim} | {status}{met} |")


if __name__ == "__main__":
    main()
