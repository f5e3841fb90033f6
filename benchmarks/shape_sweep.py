"""The suite's programs at shapes they were not tuned on (issues 13 and 14 keep acceptance
shapes we do not see: the same programs at other extents). Each variant is checked
against the NumPy interpreter and timed against torch eager and torch.compile in the
same run, with run.py's machinery; a table is printed last.

    python benchmarks/shape_sweep.py [--only CASE ...] [--out DIR] [--hw NAME=VALUE ...]

``--hw``: mlfuse compiled and generated with that hardware knob changed (mlfuse/hardware.py),
a variant timed through the real runtime (the knob probes replay kernels through Numba's
dispatcher, host-bound under about 0.1 ms).

Shapes are chosen to move 64-512 MB (enough to time at bandwidth) with other aspect
ratios than the suite's: short and long rows, extents that are no multiple of a block or
a vector, few and many rows, skinny and fat contractions.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent), str(HERE)]

VARIANTS = {
    "softmax": [{"R": 65536, "C": 1024}, {"R": 4000, "C": 12289}, {"R": 131072, "C": 100},
                {"R": 1024, "C": 50257},
                {"R": 32768, "C": 2048, "dtype": "f16"}, {"R": 8192, "C": 3000, "dtype": "bf16"}],
    "layernorm": [{"R": 65536, "C": 768}, {"R": 8192, "C": 5120}, {"R": 1000, "C": 50000},
                  {"R": 65536, "C": 1024, "dtype": "f16"}, {"R": 4096, "C": 16384, "dtype": "f16"},
                  {"R": 16384, "C": 4094, "dtype": "f16"}, {"R": 16384, "C": 2047}],
    "colsum": [{"R": 65536, "C": 1024}, {"R": 1024, "C": 65536}, {"R": 100000, "C": 300},
               {"R": 4194304, "C": 16}, {"R": 32768, "C": 4096, "dtype": "f16"}],
    "sumsq_all": [{"N": 2 ** 24 + 3}, {"N": 100_000_000}, {"N": 2 ** 27, "dtype": "bf16"}],
    "softmax_long": [{"R": 128, "C": 262144}, {"R": 2048, "C": 16384},
                     {"R": 512, "C": 131072, "dtype": "f16"}],
    "bias_gelu_f16": [{"R": 4096, "C": 30000}, {"R": 100000, "C": 768},
                      {"R": 16384, "C": 4096, "dtype": "bf16"}],
    "transpose_add": [{"N": 4096}, {"N": 6000}, {"N": 8192, "dtype": "f16"},
                      {"N": 8192, "dtype": "bf16"}],
    "nchw_nhwc": [{"N": 8, "C": 64, "H": 224, "W": 224}, {"N": 64, "C": 512, "H": 14, "W": 14}],
    "bce_mean": [{"N": 65536, "C": 1000}, {"N": 1000, "C": 65536}],
    "attn_tail": [{"B": 32, "H": 12, "S": 512, "D": 64}, {"B": 4, "H": 32, "S": 2048, "D": 128}],
    "softmax_middle": [{"B": 32, "S": 128, "D": 4096}, {"B": 8, "S": 1024, "D": 2048},
                       {"B": 512, "S": 32, "D": 1024}, {"B": 64, "S": 256, "D": 2048, "dtype": "f16"}],
    "instance_norm": [{"N": 32, "C": 64, "H": 128, "W": 128}, {"N": 64, "C": 512, "H": 16, "W": 16},
                      {"N": 8, "C": 32, "H": 256, "W": 256},
                      {"N": 128, "C": 128, "H": 64, "W": 64, "dtype": "f16"},
                      # (thirtieth session) few long rows: one kernel, split over the GPU
                      {"N": 2, "C": 16, "H": 1024, "W": 1024}],
    "column_centring": [{"R": 65536, "C": 1024}, {"R": 1024, "C": 65536}, {"R": 100000, "C": 300},
                        {"R": 1048576, "C": 8}],
    "group_norm": [{"N": 8, "C": 512, "H": 64, "W": 64}, {"N": 64, "C": 128, "H": 28, "W": 28},
                   {"N": 16, "C": 512, "H": 32, "W": 32},
                   {"N": 16, "C": 512, "H": 32, "W": 32, "dtype": "f16"},
                   {"N": 32, "C": 256, "H": 64, "W": 64, "dtype": "f16"}],
    "l2norm_both": [{"R": 65536, "C": 1024}, {"R": 4096, "C": 16384}],
    "residual_layernorm": [{"R": 65536, "C": 768}, {"R": 16384, "C": 4096, "dtype": "f16"},
                           {"R": 8192, "C": 8192, "dtype": "f16"},
                           {"R": 8192, "C": 8190, "dtype": "f16"}],
    "masked_mean_pool": [{"B": 256, "S": 512, "D": 768}, {"B": 16, "S": 8192, "D": 1024}],
    # programs of the families that the suite does not time (EXTRA_CASES below)
    "batchnorm_train": [{"N": 32, "K": 256, "H": 56, "W": 56}, {"N": 256, "K": 64, "H": 28, "W": 28},
                        {"N": 64, "K": 512, "H": 14, "W": 14}, {"N": 8, "K": 64, "H": 112, "W": 112},
                        {"N": 32, "K": 128, "H": 56, "W": 56, "dtype": "f16"},
                        {"N": 256, "K": 1024, "H": 7, "W": 7}, {"N": 32, "K": 2048, "H": 7, "W": 7},
                        {"N": 64, "K": 1024, "H": 14, "W": 14},
                        # streamed rows of segments with no whole vectors (stream_narrow.py)
                        {"N": 256, "K": 2048, "H": 7, "W": 7}, {"N": 512, "K": 512, "H": 7, "W": 7},
                        {"N": 96, "K": 768, "H": 9, "W": 9},
                        {"N": 256, "K": 512, "H": 7, "W": 7, "dtype": "f16"}],
    "channel_softmax": [{"N": 32, "K": 64, "H": 112, "W": 112}, {"N": 64, "K": 21, "H": 128, "W": 128}],
    "spatial_centring": [{"N": 64, "C": 256, "H": 56, "W": 56}],
    "rmsnorm": [{"R": 32768, "C": 4096, "dtype": "f16"}, {"R": 65536, "C": 1000}],
    # seventeenth session: masks, reshapes and permutes around the same reductions
    "causal_softmax": [{"B": 64, "S": 1024}, {"B": 256, "S": 512}, {"B": 16, "S": 2048}],
    "group_norm_split": [{"N": 32, "C": 256, "H": 64, "W": 64}, {"N": 64, "C": 128, "H": 28, "W": 28}],
    # eighteenth session: group norm through a 5-d view with its affine
    "group_norm_5d": [{"N": 16, "C": 320, "H": 64, "W": 64}, {"N": 32, "C": 128, "H": 56, "W": 56},
                      {"N": 8, "C": 640, "H": 32, "W": 32, "dtype": "f16"}],
    # twenty-seventh session: group norm over channels-last (a view splitting C)
    "group_norm_nhwc": [{"N": 16, "H": 64, "W": 64, "C": 320}, {"N": 32, "H": 56, "W": 56, "C": 128},
                        {"N": 8, "H": 32, "W": 32, "C": 640, "dtype": "f16"},
                        # (twenty-eighth session) 40 channels a group, as a UNet's 1280;
                        # and f16 over more pixels
                        {"N": 8, "H": 32, "W": 32, "C": 1280},
                        {"N": 8, "H": 64, "W": 64, "C": 640, "dtype": "f16"}],
    "channel_layernorm": [{"N": 32, "C": 96, "H": 56, "W": 56}, {"N": 32, "C": 384, "H": 14, "W": 14},
                          {"N": 8, "C": 2048, "H": 14, "W": 14}],
    "layernorm_nhwc": [{"N": 32, "C": 96, "H": 56, "W": 56}, {"N": 32, "C": 384, "H": 14, "W": 14}],
    "layernorm_transposed": [{"R": 16384, "C": 1024}, {"R": 4096, "C": 4096},
                             {"R": 65536, "C": 768}, {"R": 1000, "C": 50000}],
    "softmax_columns_transposed": [{"R": 4096, "C": 8192}, {"R": 512, "C": 65536}],
    "softmax_rows_transposed": [{"R": 16384, "C": 1024}, {"R": 4096, "C": 4096},
                                {"R": 100000, "C": 300}],
    "l1norm_channels": [{"N": 32, "C": 1024, "H": 14, "W": 14}, {"N": 32, "C": 64, "H": 56, "W": 56}],
    # twentieth session: a column's variance in its mean's pass (moments.py over columns),
    # compiled for sizes (--for-sizes) where the strips hold no column on chip
    "column_standardise": [{"R": 100352, "C": 64}, {"R": 16384, "C": 4096}, {"R": 1024, "C": 65536},
                           {"R": 262144, "C": 256, "dtype": "f16"}],
    "batchnorm_nhwc": [{"N": 32, "H": 56, "W": 56, "C": 64}, {"N": 8, "H": 28, "W": 28, "C": 256}],
    "instance_norm_nhwc": [{"N": 16, "H": 64, "W": 64, "C": 128}, {"N": 32, "H": 56, "W": 56, "C": 64}],
    # twenty-fourth session: statistics over neighbouring leading axes walked as one loop
    # (flatten-column-nests): a sequence's batch norm over [N, L] of [N, L, C]
    "batchnorm_nlc": [{"N": 64, "L": 1024, "C": 256}, {"N": 32, "L": 197, "C": 768}],
    # (thirty-first session) batch norm's training step over [N, C, L] (BatchNorm1d of a
    # sequence) and over NCHW at small spatial sizes and large batches: one reduction
    # where the inner runs are two sectors or more, split (columns first) where shorter
    # (--for-sizes with --hw split_reduction_max_segment=1000000000: split as before)
    "batchnorm_ncl": [{"N": 8192, "C": 256, "L": 32}, {"N": 16384, "C": 512, "L": 16},
                      {"N": 4096, "C": 512, "L": 64, "dtype": "f16"}, {"N": 65536, "C": 256, "L": 4}],
    "batchnorm_small_spatial": [{"N": 4096, "C": 512, "H": 4, "W": 4},
                                {"N": 65536, "C": 1024, "H": 1, "W": 1}],
    # twenty-first session: a prologue value returned beside its whole-tensor or few-row
    # reduction, stored as the values are reduced (split_stages.py's staged fors)
    "residual_mse": [{"N": 2 ** 26}, {"N": 50_000_003}],
    "residual_mse_2d": [{"B": 8192, "D": 8192}, {"B": 3001, "D": 7001}],
    "residual_row_energy": [{"R": 4, "C": 2 ** 23}, {"R": 64, "C": 1 << 20}],
    # thirtieth session: group norm then silu and a per-sample, per-channel add (a
    # diffusion ResNet block's time embedding); a middle softmax with a mask over [B, S, 1]
    "group_norm_temb": [{"N": 16, "C": 320, "H": 64, "W": 64}, {"N": 8, "C": 640, "H": 32, "W": 32},
                        {"N": 16, "C": 320, "H": 64, "W": 64, "dtype": "f16"}],
    "softmax_middle_masked": [{"B": 32, "S": 1024, "D": 1024}, {"B": 8, "S": 256, "D": 4096},
                              {"B": 64, "S": 256, "D": 2048, "dtype": "f16"},
                              # (thirty-first session) columns of 4096 too long to hold: the
                              # mask's re-reads counted at its size; bf16 where it made two kernels
                              {"B": 64, "S": 4096, "D": 64, "dtype": "f16"},
                              {"B": 64, "S": 1024, "D": 256, "dtype": "bf16"}],
    # thirty-second session: reductions of a transpose and its source's shape, split
    # through tiles (codegen/split_tiles.py); one kernel, where a transpose kernel and a
    # split reduction were two (a short side: the flat split)
    "transposed_mse": [{"R": 8192, "C": 8192}, {"R": 16384, "C": 4096, "dtype": "f16"},
                       {"R": 6000, "C": 5000}, {"R": 2 ** 22, "C": 4}],
    "batched_transposed_dot": [{"N": 16, "R": 2048, "C": 2048}, {"N": 4096, "R": 64, "C": 64}],
    "transposed_residual_mse": [{"R": 8192, "C": 8192}, {"R": 16384, "C": 4096, "dtype": "f16"}],
    # ... and strips through tiles (codegen/schedule_strip_tiles.py): one kernel, where a
    # block per row read a a row apart, or a transpose kernel preceded the reduction
    "row_sum_transposed": [{"R": 65536, "C": 1024}, {"R": 16384, "C": 4096, "dtype": "f16"},
                           {"R": 100000, "C": 300}],
    "spatial_dot_nchw_nhwc": [{"N": 64, "C": 256, "H": 32, "W": 32},
                              {"N": 32, "C": 512, "H": 28, "W": 28, "dtype": "f16"}],
    "matmul_bias_relu": [{"M": 2048, "K": 2048, "N": 2048}, {"M": 3000, "K": 1000, "N": 2000}],
    "matmul_f16_bias_relu": [{"M": 8192, "K": 1024, "N": 8192}, {"M": 2048, "K": 8192, "N": 2048}],
    "matmul_decode": [{"M": 8, "K": 8192, "N": 8192}, {"M": 64, "K": 2048, "N": 8192}],
    "matmul_projection": [{"M": 16384, "K": 1024, "N": 1024}, {"M": 4096, "K": 512, "N": 2048}],
}


def _extra_cases() -> list:
    """Programs of issue 13's families that the suite does not time: batch-norm's training
    step (statistics over [0, 2, 3], also returned), a channel softmax over NCHW, centring
    by spatial means, RMSNorm; a causal softmax (its mask from iotas), group norm over
    the axes [2, 3] of a 4-d reshape and over [2, 3, 4] of a 5-d one with its affine,
    layernorms through permutes (ConvNeXt's channels-first layout, NCHW read as NHWC, a
    transposed result), a column softmax stored transposed and an L1 norm over
    channels."""
    from cases import Case, _torch

    def t_batchnorm_train(x, g, b):
        m = x.mean(dim=(0, 2, 3), keepdim=True)
        v = ((x - m) * (x - m)).mean(dim=(0, 2, 3), keepdim=True)
        k = x.shape[1]
        y = (x - m) * (v + 1e-5).rsqrt() * g.reshape(1, k, 1, 1) + b.reshape(1, k, 1, 1)
        return y, m.reshape(k), v.reshape(k)

    def t_channel_softmax(x):
        return _torch()[0].softmax(x, dim=1)

    def t_spatial_centring(x):
        return x - x.mean(dim=(2, 3), keepdim=True)

    def t_rmsnorm(x, g):
        return x * (x * x).mean(dim=-1, keepdim=True).add(1e-6).rsqrt() * g

    def t_causal_softmax(s):
        torch, _ = _torch()
        n = s.shape[-1]
        i = torch.arange(n, device=s.device)
        return torch.softmax(torch.where(i[None, :] <= i[:, None], s, -1e30), dim=-1)

    def t_group_norm_split(x):
        n, c, h, w = x.shape
        rows = x.reshape(n, 8, c // 8, h * w)
        m = rows.mean(dim=(2, 3), keepdim=True)
        v = ((rows - m) * (rows - m)).mean(dim=(2, 3), keepdim=True)
        return ((rows - m) * (v + 1e-5).rsqrt()).reshape(n, c, h, w)

    def t_group_norm_5d(x, g, b):
        n, c, h, w = x.shape
        rows = x.reshape(n, 32, c // 32, h, w)
        m = rows.mean(dim=(2, 3, 4), keepdim=True)
        v = ((rows - m) * (rows - m)).mean(dim=(2, 3, 4), keepdim=True)
        y = ((rows - m) * (v + 1e-5).rsqrt()).reshape(n, c, h, w)
        return y * g.reshape(c, 1, 1) + b.reshape(c, 1, 1)

    def t_group_norm_nhwc(x, g):
        n, h, w, c = x.shape
        rows = x.reshape(n, h * w, 32, c // 32)
        m = rows.mean(dim=(1, 3), keepdim=True)
        v = ((rows - m) * (rows - m)).mean(dim=(1, 3), keepdim=True)
        return ((rows - m) * (v + 1e-5).rsqrt()).reshape(n, h, w, c) * g

    def t_channel_layernorm(x, g, b):  # ConvNeXt's channels-first LayerNorm, as a layout
        _, F = _torch()
        y = F.layer_norm(x.permute(0, 2, 3, 1), (x.shape[1],), g, b, eps=1e-5)
        return y.permute(0, 3, 1, 2).contiguous()

    def t_layernorm_nhwc(x, g, b):
        _, F = _torch()
        return F.layer_norm(x.permute(0, 2, 3, 1), (x.shape[1],), g, b, eps=1e-5)

    def t_layernorm_transposed(x, g, b):
        _, F = _torch()
        return F.layer_norm(x, (x.shape[1],), g, b, eps=1e-5).t().contiguous()

    def t_softmax_columns_transposed(x):
        return _torch()[0].softmax(x, dim=0).t().contiguous()

    def t_softmax_rows_transposed(x):
        return _torch()[0].softmax(x, dim=1).t().contiguous()

    def t_column_standardise(x):
        d = x - x.mean(0, keepdim=True)
        v = (d * d).mean(0, keepdim=True)
        return d * (v + 1e-5).rsqrt(), v

    def t_batchnorm_nhwc(x, g, b):
        m = x.mean((0, 1, 2))
        d = x - m
        v = (d * d).mean((0, 1, 2))
        return d * (v + 1e-5).rsqrt() * g + b, m, v

    def t_batchnorm_nlc(x):
        m = x.mean((0, 1))
        d = x - m
        return d * ((d * d).mean((0, 1)) + 1e-5).rsqrt()

    def t_batchnorm_ncl(x):
        m = x.mean((0, 2), keepdim=True)
        v = ((x - m) * (x - m)).mean((0, 2), keepdim=True)
        k = x.shape[1]
        return (x - m) * (v + 1e-5).rsqrt(), m.reshape(k), v.reshape(k)

    def t_batchnorm_small_spatial(x):
        m = x.mean((0, 2, 3), keepdim=True)
        v = ((x - m) * (x - m)).mean((0, 2, 3), keepdim=True)
        k = x.shape[1]
        return (x - m) * (v + 1e-5).rsqrt(), m.reshape(k), v.reshape(k)

    def t_instance_norm_nhwc(x, g, b):
        d = x - x.mean((1, 2), keepdim=True)
        return d * ((d * d).mean((1, 2), keepdim=True) + 1e-5).rsqrt() * g + b

    def t_group_norm_temb(x, t, g, b):
        n, c, h, w = x.shape
        rows = x.reshape(n, 32, -1)
        m = rows.mean(dim=2, keepdim=True)
        v = ((rows - m) * (rows - m)).mean(dim=2, keepdim=True)
        y = ((rows - m) * (v + 1e-5).rsqrt()).reshape(n, c, h, w)
        silu = _torch()[1].silu
        return silu(y * g.reshape(c, 1, 1) + b.reshape(c, 1, 1)) + t.reshape(n, c, 1, 1)

    def t_softmax_middle_masked(x, m):
        return (x * 0.5 + m).softmax(dim=1)

    def t_transposed_mse(a, b):
        d = a.t() - b
        return (d * d).mean()

    def t_batched_transposed_dot(a, b):
        return (a.transpose(1, 2) * b).sum(dim=(1, 2))

    def t_transposed_residual_mse(a, b):
        d = a.t() - b
        return d, (d * d).mean()

    def t_row_sum_transposed(a, b):
        return (a.t() + b).sum(dim=1)

    def t_spatial_dot_nchw_nhwc(a, b):
        return (a.permute(0, 2, 3, 1) * b).sum(dim=(1, 2))

    def t_residual_mse(p, t):
        d = p - t
        return d, (d * d).mean()

    def t_residual_row_energy(x, r):
        h = x + r
        return h, (h * h).sum(dim=1, keepdim=True)

    def t_l1norm_channels(x):
        return x / (x.abs().sum(dim=1, keepdim=True) + 1e-6)

    root = HERE.parent / "examples"
    return [
        Case("batchnorm_train", (root / "batchnorm_train.fuse").read_text(), {}, t_batchnorm_train),
        Case("channel_softmax", (root / "channel_softmax.fuse").read_text(), {}, t_channel_softmax),
        Case("spatial_centring", """
func spatial_centring(x: f32[N, C, H, W]) -> f32[N, C, H, W] {
    return x - mean(x, axis=[2, 3], keepdims=true)
}
""", {}, t_spatial_centring),
        Case("causal_softmax", """
func causal_softmax(s: f32[B, S, S]) -> f32[B, S, S] {
    i = iota([S, S], axis=0)
    j = iota([S, S], axis=1)
    return softmax(where(j <= i, s, -1e30), axis=-1)
}
""", {}, t_causal_softmax),
        Case("group_norm_split", """
func group_norm_split(x: f32[N, C, H, W]) -> f32[N, C, H, W] {
    rows = reshape(x, [N, 8, C / 8, H * W])
    m = mean(rows, axis=[2, 3], keepdims=true)
    d = rows - m
    v = mean(d * d, axis=[2, 3], keepdims=true)
    return reshape(d * rsqrt(v + 1e-5), [N, C, H, W])
}
""", {}, t_group_norm_split),
        Case("group_norm_5d", """
func group_norm_5d(x: f32[N, C, H, W], g: f32[C], b: f32[C]) -> f32[N, C, H, W] {
    rows = reshape(x, [N, 32, C / 32, H, W])
    m = mean(rows, axis=[2, 3, 4], keepdims=true)
    d = rows - m
    v = mean(d * d, axis=[2, 3, 4], keepdims=true)
    y = reshape(d * rsqrt(v + 1e-5), [N, C, H, W])
    return y * reshape(g, [C, 1, 1]) + reshape(b, [C, 1, 1])
}
""", {}, t_group_norm_5d),
        Case("group_norm_nhwc", """
func group_norm_nhwc(x: f32[N, H, W, C], g: f32[C]) -> f32[N, H, W, C] {
    rows = reshape(x, [N, H * W, 32, C / 32])
    m = mean(rows, axis=[1, 3], keepdims=true)
    d = rows - m
    v = mean(d * d, axis=[1, 3], keepdims=true)
    return reshape(d * rsqrt(v + 1e-5), [N, H, W, C]) * g
}
""", {}, t_group_norm_nhwc),
        Case("channel_layernorm", """
func channel_layernorm(x: f32[N, C, H, W], g: f32[C], b: f32[C]) -> f32[N, C, H, W] {
    return transpose(layernorm(transpose(x, [0, 2, 3, 1]), g, b), [0, 3, 1, 2])
}
""", {}, t_channel_layernorm),
        Case("layernorm_nhwc", """
func layernorm_nhwc(x: f32[N, C, H, W], g: f32[C], b: f32[C]) -> f32[N, H, W, C] {
    return layernorm(transpose(x, [0, 2, 3, 1]), g, b)
}
""", {}, t_layernorm_nhwc),
        Case("layernorm_transposed", """
func layernorm_transposed(x: f32[R, C], g: f32[C], b: f32[C]) -> f32[C, R] {
    return transpose(layernorm(x, g, b))
}
""", {}, t_layernorm_transposed),
        Case("softmax_rows_transposed", """
func softmax_rows_transposed(x: f32[R, C]) -> f32[C, R] {
    return transpose(softmax(x, axis=1))
}
""", {}, t_softmax_rows_transposed),
        Case("softmax_columns_transposed", """
func softmax_columns_transposed(x: f32[R, C]) -> f32[C, R] {
    return transpose(softmax(x, axis=0))
}
""", {}, t_softmax_columns_transposed),
        Case("l1norm_channels", """
func l1norm_channels(x: f32[N, C, H, W]) -> f32[N, C, H, W] {
    return x / (sum(abs(x), axis=1, keepdims=true) + 1e-6)
}
""", {}, t_l1norm_channels),
        Case("rmsnorm", """
func rmsnorm(x: f32[R, C], g: f32[C]) -> f32[R, C] {
    return x * rsqrt(mean(x * x, axis=1, keepdims=true) + 1e-6) * g
}
""", {}, t_rmsnorm),
        Case("column_standardise", """
func column_standardise(x: f32[R, C]) -> (f32[R, C], f32[1, C]) {
    m = mean(x, axis=0, keepdims=true)
    d = x - m
    v = mean(d * d, axis=0, keepdims=true)
    return d * rsqrt(v + 1e-5), v
}
""", {}, t_column_standardise),
        Case("batchnorm_nhwc", """
func batchnorm_nhwc(x: f32[N, H, W, C], g: f32[C], b: f32[C]) -> (f32[N, H, W, C], f32[C], f32[C]) {
    m = mean(x, axis=[0, 1, 2])
    d = x - m
    v = mean(d * d, axis=[0, 1, 2])
    return d * rsqrt(v + 1e-5) * g + b, m, v
}
""", {}, t_batchnorm_nhwc),
        Case("batchnorm_nlc", """
func batchnorm_nlc(x: f32[N, L, C]) -> f32[N, L, C] {
    m = mean(x, axis=[0, 1])
    d = x - m
    return d * rsqrt(mean(d * d, axis=[0, 1]) + 1e-5)
}
""", {}, t_batchnorm_nlc),
        Case("batchnorm_ncl", """
func batchnorm_ncl(x: f32[N, C, L]) -> (f32[N, C, L], f32[C], f32[C]) {
    m = mean(x, axis=[0, 2], keepdims=true)
    v = mean((x - m) * (x - m), axis=[0, 2], keepdims=true)
    return (x - m) * rsqrt(v + 1e-5), reshape(m, [C]), reshape(v, [C])
}
""", {}, t_batchnorm_ncl),
        Case("batchnorm_small_spatial", """
func batchnorm_small_spatial(x: f32[N, C, H, W]) -> (f32[N, C, H, W], f32[C], f32[C]) {
    m = mean(x, axis=[0, 2, 3], keepdims=true)
    v = mean((x - m) * (x - m), axis=[0, 2, 3], keepdims=true)
    return (x - m) * rsqrt(v + 1e-5), reshape(m, [C]), reshape(v, [C])
}
""", {}, t_batchnorm_small_spatial),
        Case("instance_norm_nhwc", """
func instance_norm_nhwc(x: f32[N, H, W, C], g: f32[C], b: f32[C]) -> f32[N, H, W, C] {
    m = mean(x, axis=[1, 2], keepdims=true)
    d = x - m
    return d * rsqrt(mean(d * d, axis=[1, 2], keepdims=true) + 1e-5) * g + b
}
""", {}, t_instance_norm_nhwc),
        Case("transposed_mse", """
func transposed_mse(a: f32[C, R], b: f32[R, C]) -> f32[] {
    d = transpose(a) - b
    return mean(d * d)
}
""", {}, t_transposed_mse),
        Case("batched_transposed_dot", """
func batched_transposed_dot(a: f32[N, C, R], b: f32[N, R, C]) -> f32[N] {
    return sum(transpose(a, [0, 2, 1]) * b, axis=[1, 2])
}
""", {}, t_batched_transposed_dot),
        Case("transposed_residual_mse", """
func transposed_residual_mse(a: f32[C, R], b: f32[R, C]) -> (f32[R, C], f32[]) {
    d = transpose(a) - b
    return d, mean(d * d)
}
""", {}, t_transposed_residual_mse),
        Case("row_sum_transposed", """
func row_sum_transposed(a: f32[C, R], b: f32[R, C]) -> f32[R] {
    return sum(transpose(a) + b, axis=1)
}
""", {}, t_row_sum_transposed),
        Case("spatial_dot_nchw_nhwc", """
func spatial_dot_nchw_nhwc(a: f32[N, C, H, W], b: f32[N, H, W, C]) -> f32[N, C] {
    return sum(transpose(a, [0, 2, 3, 1]) * b, axis=[1, 2])
}
""", {}, t_spatial_dot_nchw_nhwc),
        Case("residual_mse", """
func residual_mse(p: f32[N], t: f32[N]) -> (f32[N], f32[]) {
    d = p - t
    return d, mean(d * d)
}
""", {}, t_residual_mse),
        Case("residual_mse_2d", """
func residual_mse_2d(p: f32[B, D], t: f32[B, D]) -> (f32[B, D], f32[]) {
    d = p - t
    return d, mean(d * d)
}
""", {}, t_residual_mse),  # (its mean is over every axis, any rank)
        Case("group_norm_temb", """
func group_norm_temb(x: f32[N, C, H, W], t: f32[N, C], g: f32[C], b: f32[C]) -> f32[N, C, H, W] {
    rows = reshape(x, [N, 32, C / 32 * H * W])
    m = mean(rows, axis=2, keepdims=true)
    d = rows - m
    v = mean(d * d, axis=2, keepdims=true)
    y = reshape(d * rsqrt(v + 1e-5), [N, C, H, W])
    return silu(y * reshape(g, [1, C, 1, 1]) + reshape(b, [1, C, 1, 1])) + reshape(t, [N, C, 1, 1])
}
""", {}, t_group_norm_temb),
        Case("softmax_middle_masked", """
func softmax_middle_masked(x: f32[B, S, D], m: f32[B, S, 1]) -> f32[B, S, D] {
    return softmax(x * 0.5 + m, axis=1)
}
""", {}, t_softmax_middle_masked),
        Case("residual_row_energy", """
func residual_row_energy(x: f32[R, C], r: f32[R, C]) -> (f32[R, C], f32[R, 1]) {
    h = x + r
    return h, sum(h * h, axis=1, keepdims=true)
}
""", {}, t_residual_row_energy),
    ]


def in_dtype(case, dtype: str | None):
    """The case with its f32 values in ``dtype`` (f16, bf16): the same program text and
    peer, the inputs and the result in the narrower type."""
    import dataclasses
    import re
    if dtype is None:
        return case
    name = f"{case.name}_{dtype}"
    source = re.sub(r"\b(f16|f32)\[", f"{dtype}[", case.source)
    return dataclasses.replace(case, name=name,
                               source=source.replace(f"func {case.name}(", f"func {name}("))


def main(argv=None) -> int:
    import run
    from cases import CASES
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--only", action="append", help="only this case's variants (repeatable)")
    p.add_argument("--out", default="/tmp/mlfuse-sweep", help="folder for sweep.json")
    p.add_argument("--no-peers", action="store_true",
                   help="time mlfuse alone (two trees compared in one session)")
    p.add_argument("--for-sizes", action="store_true",
                   help="compile mlfuse for each variant's sizes (--dim), not for symbols")
    p.add_argument("--hw", action="append", default=[],
                   help="NAME=VALUE: a hardware knob changed (repeatable)")
    args = p.parse_args(argv)
    if not run.gpu_setup("the sweep needs"):
        return 2
    import contextlib
    import dataclasses

    from mlfuse.hardware import get_target, hw_setting, target_in_effect
    knobs = dict(hw_setting(h) for h in args.hw)
    with target_in_effect(dataclasses.replace(get_target(), **knobs)) if knobs else \
            contextlib.nullcontext():
        return sweep(args, run, CASES)


def sweep(args, run, CASES) -> int:
    import torch
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    from mlfuse.cli.bench import measure_copy_bandwidth
    copy_gbps = measure_copy_bandwidth() / 1e9
    peers = {"mlfuse"} if args.no_peers else run.available_peers(True) - {"mlfuse_unfused", "cupy"}
    by_name = {c.name: c for c in CASES + _extra_cases()}
    rows, results = [], []
    for name, shapes in VARIANTS.items():
        if args.only and name not in args.only:
            continue
        for variant in shapes:
            dims = {k: v for k, v in variant.items() if k != "dtype"}
            case = in_dtype(by_name[name], variant.get("dtype"))
            torch._dynamo.reset()  # each shape compiled afresh: no dynamic-shape recompile
            started = time.perf_counter()
            r = run.run_case(case, dims, True, peers, args.for_sizes)
            r.update(case=case.name, dims=dims, wall_s=round(time.perf_counter() - started, 1))
            results.append(r)
            Path(args.out).mkdir(parents=True, exist_ok=True)
            (Path(args.out) / "sweep.json").write_text(json.dumps(results, indent=1, default=str))
            rows.append([case.name, ",".join(f"{k}={v}" for k, v in dims.items()),
                         *run.peer_columns(r, copy_gbps)])
            print("  ".join(str(c) for c in rows[-1]), flush=True)  # a run cut short keeps its rows
    from mlfuse.tools.benchmark import markdown_table
    print(f"copy bandwidth {copy_gbps:.0f} GB/s; times in ms (median)\n")
    print(markdown_table(["case", "dims", "mlfuse", "torch", "torch.compile", "mlfuse / best peer",
                          "% copy BW", "checked"], rows))
    return 0 if all(r["checked"] for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
