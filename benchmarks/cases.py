"""The benchmark cases: each a .fuse program, its sizes, and the same computation
written for the peers (PyTorch eager / torch.compile, and cupy.fuse where the case
is elementwise). Peers take and return torch CUDA tensors (CuPy: CuPy arrays)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

CHAIN = """
func ew_chain(x: f32[N], b: f32[N]) -> f32[N] {
    return relu(x * 2.0 + b) * 0.5 + x
}
"""

CHAIN10 = """
func ew_chain10(x: f32[N], y: f32[N]) -> f32[N] {
    a = tanh(x) * 0.5 + y
    e = exp(-abs(a))
    c = maximum(e * x, y)
    return c * 2.0 + a
}
"""

SOFTMAX = """
func softmax(x: f32[R, C]) -> f32[R, C] {
    return softmax(x, axis=1)
}
"""

LAYERNORM = """
func layernorm(x: f32[R, C], gamma: f32[C], beta: f32[C]) -> f32[R, C] {
    return layernorm(x, gamma, beta, axis=-1, eps=1e-5)
}
"""

SUMSQ = """
func sumsq(x: f32[R, C]) -> f32[R] {
    return sum(x * x, axis=1)
}
"""

MATMUL = """
func matmul_bias_relu(x: f32[M, K], w: f32[K, N], b: f32[N]) -> f32[M, N] {
    return relu(matmul(x, w) + b)
}
"""

CONV = """
func conv_bias_relu(x: f32[N, 64, 56, 56], w: f32[64, 64, 3, 3], b: f32[64]) -> f32[N, 64, 56, 56] {
    y = conv2d(x, w, stride=1, padding=1)
    return relu(y + reshape(b, [1, 64, 1, 1]))
}
"""

MLP = """
func mlp(x: f32[B, 1024], w1: f32[1024, 4096], b1: f32[4096], w2: f32[4096, 1024], b2: f32[1024]) -> f32[B, 1024] {
    h = gelu(matmul(x, w1) + b1)
    return matmul(h, w2) + b2 + x
}
"""

# Contraction shapes (issue 14): the f32 matmul shapes with bias + relu fused (an
# MLP layer, a transformer projection, decode: 32 rows, where split-K fills the GPU), the
# two convolutions, and the ONNX MLP's graph (Linear 1024 -> 4096, GELU, Linear 4096 ->
# 1024 on 256 rows; nn.Linear's weights are [out, in], so the matmuls take them
# transposed, as the imported Gemm(transB=1) does; benchmarks/models.py's "mlp" runs the
# exported model itself).
# Tensor cores (issue 14): the same program on 16-bit operands, f32 accumulation, the
# result in the operand dtype; the peer is torch's f16/bf16 matmul + bias + relu (cuBLAS)
MATMUL_HALF = {dtype: MATMUL.replace("f32", dtype).replace("matmul_bias_relu",
                                                           f"matmul_{dtype}_bias_relu")
               for dtype in ("f16", "bf16")}

MATMUL_CASES = {  # name -> (M, K, N)
    "matmul_mlp_layer": (256, 4096, 1024),
    "matmul_projection": (8192, 768, 768),
    "matmul_decode": (32, 4096, 4096),
}

CONV1X1 = """
func conv1x1_bias_relu(x: f32[N, 256, 28, 28], w: f32[256, 256, 1, 1], b: f32[256]) -> f32[N, 256, 28, 28] {
    y = conv2d(x, w)
    return relu(y + reshape(b, [1, 256, 1, 1]))
}
"""

CONV3X3_256 = """
func conv3x3_256_bias_relu(x: f32[N, 256, 14, 14], w: f32[256, 256, 3, 3], b: f32[256]) -> f32[N, 256, 14, 14] {
    y = conv2d(x, w, stride=1, padding=1)
    return relu(y + reshape(b, [1, 256, 1, 1]))
}
"""

MLP_LINEAR = """
func mlp_linear_gelu(x: f32[B, 1024], w1: f32[4096, 1024], b1: f32[4096], w2: f32[1024, 4096], b2: f32[1024]) -> f32[B, 1024] {
    h = gelu(matmul(x, transpose(w1)) + b1)
    return matmul(h, transpose(w2)) + b2
}
"""

# Reductions of every shape (issue 13): each moves at least 256 MB.
COLSUM = """
func colsum(x: f32[R, C]) -> f32[C] {
    return sum(x, axis=0)
}
"""

SUMSQ_ALL = """
func sumsq_all(x: f32[N]) -> f32[] {
    return sum(x * x)
}
"""

SOFTMAX_SHORT = """
func softmax_short(x: f32[R, 16]) -> f32[R, 16] {
    return softmax(x, axis=1)
}
"""

BIAS_GELU_F16 = """
func bias_gelu_f16(x: f16[R, C], b: f16[C]) -> f16[R, C] {
    return gelu(x + b)
}
"""

# Reductions over non-last axes with their broadcast-back epilogue (one strips kernel each).
SOFTMAX_MIDDLE = """
func softmax_middle(x: f32[B, S, D]) -> f32[B, S, D] {
    return softmax(x, axis=1)
}
"""

INSTANCE_NORM = """
func instance_norm(x: f32[N, C, H, W]) -> f32[N, C, H, W] {
    m = mean(x, axis=[2, 3], keepdims=true)
    v = mean((x - m) * (x - m), axis=[2, 3], keepdims=true)
    return (x - m) * rsqrt(v + 1e-5)
}
"""

COLUMN_CENTRING = """
func column_centring(x: f32[R, C]) -> f32[R, C] {
    return x - mean(x, axis=0, keepdims=true)
}
"""

TRANSPOSE_ADD = """
func transpose_add(x: f32[N, N], y: f32[N, N]) -> f32[N, N] {
    return transpose(x) + y
}
"""

# NCHW -> NHWC with a per-channel scale (a layout change fused with elementwise work).
NCHW_NHWC = """
func nchw_nhwc(x: f32[N, C, H, W], g: f32[C]) -> f32[N, H, W, C] {
    return transpose(x, [0, 2, 3, 1]) * g
}
"""

# Binary cross-entropy with logits, averaged to a scalar: the [N, C] loss never stored.
BCE_MEAN = """
func bce_mean(x: f32[N, C], t: f32[N, C]) -> f32[] {
    l = maximum(x, 0.0) - x * t + log1p(exp(-abs(x)))
    return mean(l)
}
"""

# Attention's tail: P.V, then the heads merged back ([B, H, S, D] -> [B, S, H*D]).
ATTN_TAIL = """
func attn_tail(p: f32[B, H, S, S], v: f32[B, H, S, D]) -> f32[B, S, H*D] {
    return reshape(transpose(matmul(p, v), [0, 2, 1, 3]), [B, S, H*D])
}
"""

# Fusion misses of issue 13 (each one kernel, as XLA/Inductor make): group norm (8 groups:
# rows of the reshaped view [N, 8, C/8*H*W], the output stored back through the
# reshape), the row L2 norm returning the norm too, and a residual add returned beside
# its layernorm.
GROUP_NORM = """
func group_norm(x: f32[N, C, H, W], gamma: f32[C], beta: f32[C]) -> f32[N, C, H, W] {
    rows = reshape(x, [N, 8, C / 8 * H * W])
    m = mean(rows, axis=2, keepdims=true)
    d = rows - m
    v = mean(d * d, axis=2, keepdims=true)
    y = reshape(d * rsqrt(v + 1e-5), [N, C, H, W])
    return y * reshape(gamma, [1, C, 1, 1]) + reshape(beta, [1, C, 1, 1])
}
"""

L2NORM_BOTH = """
func l2norm_both(x: f32[R, C]) -> (f32[R, 1], f32[R, C]) {
    n = sqrt(sum(x * x, axis=1, keepdims=true))
    return n, x / (n + 1e-6)
}
"""

# a masked mean pool with soft weights (sigmoid keeps the weights' sums away from 0):
# two reductions over S, one of them over a [B, S, 1] operand, in one kernel
MASKED_MEAN_POOL = """
func masked_mean_pool(x: f32[B, S, D], m: f32[B, S, 1]) -> f32[B, D] {
    w = sigmoid(m)
    return sum(x * w, axis=1) / sum(w, axis=1)
}
"""

RESIDUAL_LAYERNORM = """
func residual_layernorm(x: f32[R, C], r: f32[R, C], gamma: f32[C], beta: f32[C]) -> (f32[R, C], f32[R, C]) {
    h = x + r
    return h, layernorm(h, gamma, beta, axis=-1, eps=1e-5)
}
"""


def _torch():
    import torch
    import torch.nn.functional as F
    return torch, F


def t_chain(x, b):
    torch, _ = _torch()
    return torch.relu(x * 2.0 + b) * 0.5 + x


def t_chain10(x, y):
    torch, _ = _torch()
    a = torch.tanh(x) * 0.5 + y
    e = torch.exp(-torch.abs(a))
    c = torch.maximum(e * x, y)
    return c * 2.0 + a


def t_softmax(x):
    torch, _ = _torch()
    return torch.softmax(x, dim=1)


def t_layernorm(x, g, b):
    _, F = _torch()
    return F.layer_norm(x, (x.shape[-1],), g, b, eps=1e-5)


def t_sumsq(x):
    return (x * x).sum(dim=1)


def t_matmul(x, w, b):
    torch, _ = _torch()
    return torch.relu(x @ w + b)


def t_conv(x, w, b):
    torch, F = _torch()
    return torch.relu(F.conv2d(x, w, stride=1, padding=1) + b.reshape(1, -1, 1, 1))


def t_mlp(x, w1, b1, w2, b2):
    _, F = _torch()
    return F.gelu(x @ w1 + b1) @ w2 + b2 + x


def t_conv_valid(x, w, b):
    torch, F = _torch()
    return torch.relu(F.conv2d(x, w) + b.reshape(1, -1, 1, 1))


def t_mlp_linear(x, w1, b1, w2, b2):
    _, F = _torch()
    return F.linear(F.gelu(F.linear(x, w1, b1)), w2, b2)


def t_colsum(x):
    return x.sum(dim=0)


def t_sumsq_all(x):
    return (x * x).sum()


def t_bias_gelu(x, b):
    _, F = _torch()
    return F.gelu(x + b)


def t_softmax_middle(x):
    torch, _ = _torch()
    return torch.softmax(x, dim=1)


def t_instance_norm(x):
    torch, _ = _torch()
    m = x.mean(dim=(2, 3), keepdim=True)
    v = ((x - m) * (x - m)).mean(dim=(2, 3), keepdim=True)
    return (x - m) * torch.rsqrt(v + 1e-5)


def t_column_centring(x):
    return x - x.mean(dim=0, keepdim=True)


def t_transpose_add(x, y):
    return x.t() + y


def t_nchw_nhwc(x, g):
    return x.permute(0, 2, 3, 1) * g


def t_bce_mean(x, t):
    _, F = _torch()
    return F.binary_cross_entropy_with_logits(x, t)


def t_attn_tail(p, v):
    b, h, s, d = v.shape
    return (p @ v).transpose(1, 2).reshape(b, s, h * d)


def t_group_norm(x, g, b):
    _, F = _torch()
    return F.group_norm(x, 8, g, b, eps=1e-5)


def t_l2norm_both(x):
    torch, _ = _torch()
    n = torch.sqrt((x * x).sum(dim=1, keepdim=True))
    return n, x / (n + 1e-6)


def t_masked_mean_pool(x, m):
    torch, _ = _torch()
    w = torch.sigmoid(m)
    return (x * w).sum(dim=1) / w.sum(dim=1)


def t_residual_layernorm(x, r, g, b):
    _, F = _torch()
    h = x + r
    return h, F.layer_norm(h, (h.shape[-1],), g, b, eps=1e-5)


def c_chain():
    import cupy

    def ew_chain(x, b):  # cupy names the kernel after the function: no lambdas
        return cupy.maximum(x * 2.0 + b, 0) * 0.5 + x
    return cupy.fuse(ew_chain)


def c_chain10():
    import cupy

    def ew_chain10(x, y):
        a = cupy.tanh(x) * 0.5 + y
        e = cupy.exp(-cupy.abs(a))
        c = cupy.maximum(e * x, y)
        return c * 2.0 + a
    return cupy.fuse(ew_chain10)


# Small sizes for --dry-run (the simulator runs every thread in Python).
DRY_DIMS = {"N": 64, "R": 4, "C": 40, "M": 8, "K": 8, "B": 2}


@dataclass
class Case:
    name: str
    source: str
    dims: dict
    torch_fn: Callable
    cupy_factory: Callable | None = None   # builds the cupy.fuse kernel
    latency: bool = False                  # host microseconds per call instead of device ms
    dry_dims: dict = field(default_factory=dict)  # overrides DRY_DIMS for this case
    simulate: bool = True                  # --dry-run runs mlfuse on the simulator (else
                                           # only the peers on the CPU: too many threads)
    matmul_precision: str | None = None    # mlfuse's f32 contractions (mlfuse/matmul_precision.py)
    f64_error: bool = False                # also report every peer's error against float64

    def dims_for(self, dry_run: bool) -> dict:
        if not dry_run:
            return self.dims
        return {k: self.dry_dims.get(k, DRY_DIMS.get(k, v)) for k, v in self.dims.items()}


CASES = [
    Case("ew_chain", CHAIN, {"N": 1 << 26}, t_chain, c_chain),
    Case("ew_chain10", CHAIN10, {"N": 1 << 26}, t_chain10, c_chain10),
    Case("softmax", SOFTMAX, {"R": 16384, "C": 4096}, t_softmax),
    Case("layernorm", LAYERNORM, {"R": 16384, "C": 4096}, t_layernorm),
    Case("sumsq", SUMSQ, {"R": 16384, "C": 4096}, t_sumsq),
    Case("matmul_bias_relu", MATMUL, {"M": 4096, "K": 4096, "N": 4096}, t_matmul),
    Case("conv_bias_relu", CONV, {"N": 32}, t_conv, dry_dims={"N": 1}, simulate=False),
    Case("mlp", MLP, {"B": 8192}, t_mlp, dry_dims={"B": 2}, simulate=False),
    *[Case(name, MATMUL.replace("matmul_bias_relu", name), {"M": m, "K": k, "N": n}, t_matmul,
           dry_dims={"M": 3, "K": 40, "N": 9})
      for name, (m, k, n) in MATMUL_CASES.items()],
    Case("conv1x1_bias_relu", CONV1X1, {"N": 32}, t_conv_valid, dry_dims={"N": 1},
         simulate=False),
    Case("conv3x3_256_bias_relu", CONV3X3_256, {"N": 32}, t_conv, dry_dims={"N": 1},
         simulate=False),
    Case("mlp_linear_gelu", MLP_LINEAR, {"B": 256}, t_mlp_linear, dry_dims={"B": 2},
         simulate=False),
    Case("colsum", COLSUM, {"R": 16384, "C": 4096}, t_colsum),
    Case("sumsq_all", SUMSQ_ALL, {"N": 1 << 26}, t_sumsq_all),
    Case("softmax_short", SOFTMAX_SHORT, {"R": 1 << 22}, t_softmax),
    Case("softmax_long", SOFTMAX.replace("func softmax", "func softmax_long"),
         {"R": 512, "C": 65536}, t_softmax),
    Case("bias_gelu_f16", BIAS_GELU_F16, {"R": 16384, "C": 8192}, t_bias_gelu),
    Case("transpose_add", TRANSPOSE_ADD, {"N": 8192}, t_transpose_add, dry_dims={"N": 9}),
    Case("nchw_nhwc", NCHW_NHWC, {"N": 32, "C": 256, "H": 64, "W": 64}, t_nchw_nhwc,
         dry_dims={"N": 1, "C": 17, "H": 2, "W": 16}),
    Case("bce_mean", BCE_MEAN, {"N": 16384, "C": 4096}, t_bce_mean, dry_dims={"N": 5, "C": 41}),
    Case("attn_tail", ATTN_TAIL, {"B": 8, "H": 16, "S": 1024, "D": 64}, t_attn_tail,
         dry_dims={"B": 1, "H": 2, "S": 5, "D": 3}),
    *[Case(f"matmul_{dtype}_bias_relu", MATMUL_HALF[dtype], {"M": 4096, "K": 4096, "N": 4096},
           t_matmul, dry_dims={"M": 3, "K": 40, "N": 9}) for dtype in ("f16", "bf16")],
    # 3xTF32 on tensor cores (issue 14): its error against float64 is reported beside
    # cuBLAS SGEMM's (torch with TF32 off), as the target compares them
    Case("matmul_3xtf32", MATMUL.replace("func matmul_bias_relu", "func matmul_3xtf32"),
         {"M": 4096, "K": 4096, "N": 4096}, t_matmul, dry_dims={"N": 16},
         matmul_precision="high", f64_error=True),
    Case("softmax_middle", SOFTMAX_MIDDLE, {"B": 64, "S": 256, "D": 2048}, t_softmax_middle,
         dry_dims={"B": 2, "S": 9, "D": 40}),
    Case("instance_norm", INSTANCE_NORM, {"N": 128, "C": 128, "H": 64, "W": 64}, t_instance_norm,
         dry_dims={"N": 2, "C": 3, "H": 5, "W": 7}),
    Case("column_centring", COLUMN_CENTRING, {"R": 16384, "C": 4096}, t_column_centring),
    Case("group_norm", GROUP_NORM, {"N": 32, "C": 256, "H": 64, "W": 64}, t_group_norm,
         dry_dims={"N": 1, "C": 16, "H": 3, "W": 5}),
    Case("l2norm_both", L2NORM_BOTH, {"R": 16384, "C": 4096}, t_l2norm_both),
    Case("residual_layernorm", RESIDUAL_LAYERNORM, {"R": 16384, "C": 4096}, t_residual_layernorm),
    Case("masked_mean_pool", MASKED_MEAN_POOL, {"B": 64, "S": 2048, "D": 1024},
         t_masked_mean_pool, dry_dims={"B": 2, "S": 9, "D": 40}),
    Case("small_latency", CHAIN.replace("ew_chain", "small_latency"), {"N": 1024}, t_chain, c_chain,
         latency=True),
]
