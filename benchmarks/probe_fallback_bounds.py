"""The scalar fallback of a row kernel (odd rows: the registers variant a value at a time)
with 1, 2 and 3 resident blocks asked in its launch bounds, against torch.compile; each
result checked against PyTorch in f32 (max abs error printed). The twelfth session's
measurements of the fallback's bound (codegen/emit_kernel.py) came from this script.

    python benchmarks/probe_fallback_bounds.py rl16|ln16|ln32 R C      # on a GPU
"""
import re, sys, torch
import mlfuse
from numba import cuda
from mlfuse.runtime.loader import load_source
from mlfuse.tools.benchmark import time_gpu
d = torch.device("cuda")
CASES = {
 "rl16": ("""func f(x: f16[R, C], r: f16[R, C], g: f16[C], b: f16[C]) -> (f16[R, C], f16[R, C]) {
    h = x + r
    return h, layernorm(h, g, b, axis=-1, eps=1e-5)
}""", torch.float16, lambda x, r, g, b: (lambda s: (s, torch.nn.functional.layer_norm(s, (s.shape[1],), g, b, 1e-5)))(x + r), 4),
 "ln32": ("""func f(x: f32[R, C], g: f32[C], b: f32[C]) -> f32[R, C] {
    return layernorm(x, g, b, axis=-1, eps=1e-5)
}""", torch.float32, lambda x, g, b: torch.nn.functional.layer_norm(x, (x.shape[1],), g, b, 1e-5), 3),
 "ln16": ("""func f(x: f16[R, C], g: f16[C], b: f16[C]) -> f16[R, C] {
    return layernorm(x, g, b, axis=-1, eps=1e-5)
}""", torch.float16, lambda x, g, b: torch.nn.functional.layer_norm(x, (x.shape[1],), g, b, 1e-5), 3),
}
name, R, C = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
src, dt, ref, n = CASES[name]
args = [torch.randn(R, C, device=d, dtype=dt) for _ in range(n - 2)]  # the rows' inputs
args += [torch.randn(C, device=d, dtype=dt), torch.randn(C, device=d, dtype=dt)]  # gamma, beta
m = mlfuse.compile_source(src, "p.fuse", target="cuda")
generated = re.search(r"launch_bounds=\(REGISTER_ROW_THREADS, (\d)\)\)\ndef f_0\(", m.source).group(1)
for blocks in (1, 2, 3):
    text = m.source.replace(f"launch_bounds=(REGISTER_ROW_THREADS, {generated}))\ndef f_0(", f"launch_bounds=(REGISTER_ROW_THREADS, {blocks}))\ndef f_0(")
    mod = load_source(text, f"lb{blocks}")
    fn = mod.ENTRY_POINTS["f"]
    dev = [cuda.as_cuda_array(a) for a in args]
    out = fn(*dev)
    outs = out if isinstance(out, tuple) else (out,)
    want = ref(*[a.float() for a in args])
    want = want if isinstance(want, tuple) else (want,)
    err = max(float((torch.as_tensor(o, device=d).float() - w).abs().max()) for o, w in zip(outs, want))
    t = time_gpu(lambda i: fn(*dev), n_sets=1, repeats=11, budget_ms=300).median_ms
    print(f"{name} {R}x{C} blocks>={blocks}: {t:.3f} ms err {err:.3g}")
tc = torch.compile(ref)
print(f"{name} {R}x{C} torch.compile: {time_gpu(lambda i: tc(*args), n_sets=1, repeats=11, budget_ms=300).median_ms:.3f} ms")
