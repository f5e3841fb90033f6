"""Rows of odd length: the peeled kernels (codegen/peeled_rows.py) against the scalar ones
they replace (forced by refusing ``_peel_ready``) and torch.compile, on a GPU; LONG=1 for
rows past registers (held-rows kernels). Prints a table; BENCHMARKS.md, thirteenth session.

    python benchmarks/probe_peeled_rows.py; LONG=1 python benchmarks/probe_peeled_rows.py
"""
import os

import torch
import mlfuse
from mlfuse.tools.benchmark import time_gpu

PROGRAMS = {
 "layernorm": ("func f(x: {t}[R, C], g: {t}[C], b: {t}[C]) -> {t}[R, C] {{\n"
               "    return layernorm(x, g, b, axis=-1, eps=1e-5)\n}}", 3),
 "residual_layernorm": ("func f(x: {t}[R, C], r: {t}[R, C], g: {t}[C], b: {t}[C]) -> ({t}[R, C], {t}[R, C]) {{\n"
               "    h = x + r\n    return h, layernorm(h, g, b, axis=-1, eps=1e-5)\n}}", 4),
 "softmax": ("func f(x: {t}[R, C]) -> {t}[R, C] {{ return softmax(x, axis=1) }}", 1),
 "rmsnorm": ("func f(x: {t}[R, C], w: {t}[C]) -> {t}[R, C] {{\n"
             "    return x * rsqrt(mean(x * x, axis=1, keepdims=true) + 1e-6) * w\n}}", 2),
}
F = torch.nn.functional
def ref(name, C):
    if name == "layernorm":
        return lambda x, g, b: F.layer_norm(x, (C,), g, b, 1e-5)
    if name == "residual_layernorm":
        def rl(x, r, g, b):
            s = x + r
            return s, F.layer_norm(s, (C,), g, b, 1e-5)
        return rl
    if name == "softmax":
        return lambda x: torch.softmax(x, dim=1)
    return lambda x, w: x * torch.rsqrt((x * x).mean(dim=1, keepdim=True) + 1e-6) * w

CASES = [("layernorm", "f16", 16384, 4094), ("layernorm", "f32", 16384, 2047),
         ("layernorm", "f16", 8192, 3001), ("residual_layernorm", "f16", 16384, 4094),
         ("residual_layernorm", "f32", 16384, 1535), ("softmax", "f32", 16384, 4001),
         ("softmax", "f16", 16384, 4093), ("rmsnorm", "f16", 32768, 4095),
         ("rmsnorm", "bf16", 16384, 3003)]
if os.environ.get("LONG"):
    CASES = [("residual_layernorm", "f16", 8192, 8190), ("softmax", "f32", 4000, 12289),
             ("layernorm", "f16", 4096, 16382), ("softmax", "f16", 2048, 12287),
             ("layernorm", "f32", 8192, 5119), ("rmsnorm", "bf16", 4096, 8191)]
TD = {"f16": torch.float16, "f32": torch.float32, "bf16": torch.bfloat16}
dev = torch.device("cuda")
rows = []
for name, t, R, C in CASES:
    src, n_in = PROGRAMS[name]
    src = src.format(t=t)
    dt = TD[t]
    args = [torch.randn(R, C, device=dev, dtype=dt)] + \
           ([torch.randn(R, C, device=dev, dtype=dt)] if name == "residual_layernorm" else []) + \
           [torch.randn(C, device=dev, dtype=dt) for _ in range(n_in - (2 if name == "residual_layernorm" else 1))]
    r = ref(name, C)
    want = r(*[a.float() for a in args])
    want = want if isinstance(want, tuple) else (want,)
    res = {}
    for label in ("peeled", "scalar"):
        m = mlfuse.compile_source(src, "p.fuse", target="cuda")
        if label == "scalar":
            m.python_module._peel_ready = lambda *a, **k: False
        f = m["f"]
        out = f(*args)
        out = out if isinstance(out, tuple) else (out,)
        err = max(float((torch.as_tensor(o).float() - w).abs().max()) for o, w in zip(out, want))
        res[label] = (time_gpu(lambda i: f(*args), n_sets=1, repeats=11, budget_ms=300).median_ms, err)
    tc = torch.compile(r)
    tc(*args)
    tt = time_gpu(lambda i: tc(*args), n_sets=1, repeats=11, budget_ms=300).median_ms
    rows.append((name, t, R, C, res["scalar"][0], res["peeled"][0], tt, res["peeled"][1], res["scalar"][1]))
    print(rows[-1], flush=True)
print(f"{'program':20s} {'dtype':5s} {'shape':12s} {'scalar':>7s} {'peeled':>7s} {'t.comp':>7s} {'ratio':>6s} {'err':>8s}")
for name, t, R, C, s, p, tt, e, es in rows:
    print(f"{name:20s} {t:5s} {R}x{C:<7d} {s:7.3f} {p:7.3f} {tt:7.3f} {p/tt:6.2f} {e:8.2g} ({es:.2g})")
