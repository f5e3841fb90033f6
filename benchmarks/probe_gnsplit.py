"""Probe (branch gnsplit): few long rows split across blocks (codegen/split_stages.py).

Run on the GPU from the repository root (about two minutes):

    python benchmarks/probe_gnsplit.py

For each case: mlfuse compiled with unbound dims (the suite's way), timed with its
host's choice ("mlfuse": the split plan where ``_split_stages`` picks it, its 16-byte
vector twins where the rows are whole aligned vectors), with the split plan's scalar
kernels in place of the vector twins ("scalar st.": round 2's kernels), and with the
split plan turned off ("row only": the one-block-per-row kernel of before), against
torch eager and torch.compile; every result checked against the NumPy interpreter.
CUDA events, median of 20 calls, ms. The table comes last.
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

GROUP_NORM = """
func group_norm(x: f32[N, C, H, W], gamma: f32[C], beta: f32[C]) -> f32[N, C, H, W] {{
    rows = reshape(x, [N, {G}, C / {G} * H * W])
    m = mean(rows, axis=2, keepdims=true)
    d = rows - m
    v = mean(d * d, axis=2, keepdims=true)
    y = reshape(d * rsqrt(v + 1e-5), [N, C, H, W])
    return y * reshape(gamma, [1, C, 1, 1]) + reshape(beta, [1, C, 1, 1])
}}
"""
SOFTMAX = "func softmax(x: f32[R, C]) -> f32[R, C] { return softmax(x, axis=1) }"
LAYERNORM = """
func layernorm(x: f32[R, C], g: f32[C], b: f32[C]) -> f32[R, C] {
    return layernorm(x, g, b, axis=-1, eps=1e-5)
}"""


def _torch_fns():
    import torch
    import torch.nn.functional as F
    return {
        "group_norm": lambda G: (lambda x, g, b: F.group_norm(x, G, g, b, eps=1e-5)),
        "softmax": lambda _: (lambda x: torch.softmax(x, dim=1)),
        "layernorm": lambda _: (lambda x, g, b: F.layer_norm(x, (x.shape[-1],), g, b, eps=1e-5)),
    }


CASES = [  # (label, kind, source, dims, groups)
    ("group_norm 32x256x64x64 G=32", "group_norm", GROUP_NORM.format(G=32),
     {"N": 32, "C": 256, "H": 64, "W": 64}, 32),
    ("group_norm 32x256x64x64 G=8 (suite)", "group_norm", GROUP_NORM.format(G=8),
     {"N": 32, "C": 256, "H": 64, "W": 64}, 8),
    ("group_norm 8x512x32x32 G=32", "group_norm", GROUP_NORM.format(G=32),
     {"N": 8, "C": 512, "H": 32, "W": 32}, 32),
    ("group_norm 16x128x128x128 G=8", "group_norm", GROUP_NORM.format(G=8),
     {"N": 16, "C": 128, "H": 128, "W": 128}, 8),
    ("softmax 64x262144", "softmax", SOFTMAX, {"R": 64, "C": 262144}, None),
    ("softmax 512x65536 (softmax_long)", "softmax", SOFTMAX, {"R": 512, "C": 65536}, None),
    ("layernorm 128x131072", "layernorm", LAYERNORM, {"R": 128, "C": 131072}, None),
]


def _time(fn, args, reps=20) -> float:
    import torch
    fn(*args)
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn(*args)
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end))
    return float(np.median(times))


def main() -> None:
    import torch
    import mlfuse
    from mlfuse.interp import run_tensor
    from mlfuse.pipeline import parse_program
    from mlfuse.tools.checking import program_size, random_inputs
    from mlfuse.tools.checking import compare  # the agreement rule
    fns = _torch_fns()
    rows = []
    for label, kind, source, dims, groups in CASES:
        func = parse_program(source, "probe.fuse").funcs[0]
        inputs = random_inputs(func, dims, seed=0)
        expected = run_tensor(func, inputs)[0]
        n_ops, reduced = program_size(func)
        module = mlfuse.compile_source(source, f"{kind}.fuse", target="cuda")
        fn = module[func.sym_name]
        py = module.python_module
        args = [torch.from_numpy(a).cuda() for a in inputs]
        results = {}
        choose = py._split_stages
        twins = {n: getattr(py, n) for n in vars(py) if n.endswith("_vector") and
                 ("_stage" in n or n.endswith("_epilogue_vector"))}
        for variant, switch in (("mlfuse", choose), ("scalar st.", choose),
                                ("row only", lambda *a: False)):
            py._split_stages = switch
            for name, twin in twins.items():  # the scalar stage in its twin's place
                setattr(py, name, getattr(py, name[:-len("_vector")]) if
                        variant == "scalar st." else twin)
            got = fn(*args)
            ok = compare(expected, got.cpu().numpy() if hasattr(got, "cpu") else
                         np.asarray(got), n_ops, reduced=reduced).ok
            results[variant] = (_time(fn, args), ok)
        py._split_stages = choose
        for name, twin in twins.items():
            setattr(py, name, twin)
        eager = fns[kind](groups)
        compiled = torch.compile(eager)
        t_eager = _time(eager, args)
        t_comp = _time(compiled, args)
        ref = eager(*args)
        err = float((ref.float().cpu() - torch.from_numpy(expected)).abs().max())
        rows.append((label, results["mlfuse"], results["scalar st."], results["row only"],
                     t_eager, t_comp, err))
        print(label, rows[-1], flush=True)
    print()
    print(f"{'case':40s} {'mlfuse':>8s} {'scalar st.':>10s} {'row only':>9s} {'eager':>8s} "
          f"{'compile':>8s} {'vs compile':>10s} checked")
    for label, (t, ok), (t_sc, ok_sc), (t_row, ok_row), t_eager, t_comp, _ in rows:
        print(f"{label:40s} {t:8.3f} {t_sc:10.3f} {t_row:9.3f} {t_eager:8.3f} {t_comp:8.3f} "
              f"{t / t_comp:10.2f} {bool(ok) and bool(ok_sc) and bool(ok_row)}")


if __name__ == "__main__":
    main()
