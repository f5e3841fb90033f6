"""Batch-norm training at shapes where the segment rows' launch choices matter: the old
strips kernel over rows (flatten-row-nests' segment rows turned off), the row kernel as
the host picks, and its split plan forced; torch.compile beside them, every result
checked against PyTorch. Times are `mlfuse.tools.benchmark.time_gpu` medians over three
input sets.

    python benchmarks/probe_segments.py          # on a GPU (BENCHMARKS.md, eleventh session)
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import torch  # noqa: E402
import mlfuse  # noqa: E402
import mlfuse.transforms.flatten_row_nests as frn  # noqa: E402

src = (
    Path(__file__).resolve().parent.parent / "examples" / "batchnorm_train.fuse"
).read_text()

from mlfuse.tools.benchmark import time_gpu  # noqa: E402


def timeit(fn):
    return time_gpu(lambda i: fn(i), n_sets=3, repeats=11, budget_ms=300).median_ms


new = mlfuse.compile_source(src, "bn_new.fuse")
orig = frn.flattened
frn.flattened = lambda *a, **k: None
old = mlfuse.compile_source(src + "\n# old\n", "bn_old.fuse")
frn.flattened = orig
py = new.python_module
real_split = py._split_stages
rows = []


def bn(x, g, b):
    k = x.shape[1]
    m = x.mean(dim=(0, 2, 3), keepdim=True)
    v = ((x - m) * (x - m)).mean(dim=(0, 2, 3), keepdim=True)
    return (
        (x - m) * (v + 1e-5).rsqrt() * g.reshape(1, k, 1, 1) + b.reshape(1, k, 1, 1),
        m.reshape(k),
        v.reshape(k),
    )


tc = torch.compile(bn)
for N, K, H, W in [
    (64, 512, 14, 14),
    (256, 1024, 7, 7),
    (32, 256, 56, 56),
    (128, 512, 7, 7),
    (16, 2048, 7, 7),
    (32, 128, 28, 28),
]:
    xs = [torch.randn(N, K, H, W, device="cuda") for _ in range(3)]
    g = torch.randn(K, device="cuda")
    b = torch.randn(K, device="cuda")
    x = xs[0]
    torch._dynamo.reset()
    res = {}
    res["old-strips"] = timeit(lambda i: old["batchnorm_train"](xs[i], g, b))
    py._split_stages = real_split
    res["new"] = timeit(lambda i: new["batchnorm_train"](xs[i], g, b))
    py._split_stages = lambda p, e, r: True
    res["tc"] = timeit(lambda i: tc(xs[i], g, b))
    res["new-split"] = timeit(lambda i: new["batchnorm_train"](xs[i], g, b))
    py._split_stages = real_split
    y = new["batchnorm_train"](x, g, b)[0]
    m = x.mean(dim=(0, 2, 3), keepdim=True)
    v = ((x - m) ** 2).mean(dim=(0, 2, 3), keepdim=True)
    ref = (x - m) * (v + 1e-5).rsqrt() * g.reshape(1, K, 1, 1) + b.reshape(1, K, 1, 1)
    err = (y - ref).abs().max().item()
    rows.append(((N, K, H, W), res, err))
    print(rows[-1], flush=True)
print("| shape | old strips | new | new forced split | torch.compile | max err |")
for s, r, e in rows:
    print(
        f"| {s} | {r['old-strips']:.4f} | {r['new']:.4f} | {r['new-split']:.4f} | {r['tc']:.4f} | {e:.2e} |"
    )
