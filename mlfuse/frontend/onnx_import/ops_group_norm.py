"""GroupNormalization (opsets 18 and 21), spelled out so that it fuses into one kernel.

The channels of each sample are cut into ``num_groups`` groups; mean and variance are
taken over a group's channels and all spatial positions: the rows of the view
``[N, G, C/G * D1 * ...]`` (a reshape with a quotient dim, exact). The normalized rows
are then scaled: per group in opset 18 (``scale`` and ``bias`` of shape [G], on the
rows), per channel since opset 21 (shape [C], after the reshape back), as the
specification of each version says. Opset 21's ``stash_type`` is the precision of the
statistics, as LayerNormalization's.

The fusion pass makes the whole of it one kernel: a block per row, the output stored
back through the reshape (mlfuse/transforms/fusion/kernel_builder.py). PyTorch's
exporter writes ``nn.GroupNorm`` as Reshape -> InstanceNormalization -> Reshape -> Mul
-> Add instead (ops.py and ops_nn.py convert each; the same kernel results).
"""
from __future__ import annotations

from mlfuse.dialects import tensor as T
from mlfuse.ir.types import FLOAT_DTYPES, IndivisibleDim, product_dim, quotient_dim

from mlfuse.frontend.onnx_import.builders import const_like, ew, reshape
from mlfuse.frontend.onnx_import.graph import IR_DTYPE


def _group_norm(g, node, attrs):
    x = g.input(node, 0)
    rank = x.type.rank
    if rank < 3:
        raise g.error(f"the input needs spatial axes (rank >= 3), got rank {rank}")
    if "num_groups" not in attrs:
        raise g.error("attribute num_groups is required")
    groups = int(attrs["num_groups"])
    n, channels, spatial = x.type.shape[0], x.type.shape[1], list(x.type.shape[2:])
    if groups < 1 or (isinstance(channels, int) and channels % groups):
        raise g.error(f"attribute num_groups = {groups} must divide the {channels} channels")
    per_group = g.opset < 21  # opset 18: scale and bias per group; 21: per channel
    want = groups if per_group else channels
    for i, what in ((1, "scale"), (2, "bias")):
        if list(g.input_shape(node, i)) != [want]:
            raise g.error(f"{what} has shape {list(g.input_shape(node, i))}; it must be "
                          f"[{want}] (one per {'group' if per_group else 'channel'} in opset "
                          f"{g.opset})")
    stash = IR_DTYPE.get(attrs.get("stash_type", 1))  # 1: FLOAT, the default
    if stash is None or stash not in FLOAT_DTYPES:
        raise g.error(f"attribute stash_type {attrs.get('stash_type')} is not a float type")
    dtype = x.type.dtype
    stash = dtype if per_group else stash
    eps = float(attrs.get("epsilon", 1e-5))
    try:
        row = quotient_dim(product_dim([channels, *spatial]), groups)
    except IndivisibleDim as e:
        raise g.error(str(e)) from None
    xs = x if stash == dtype else g.emit(T.CastOp, [x], {"dtype": stash})
    rows = reshape(g, xs, [n, groups, row])
    mean = g.emit(T.MeanOp, [rows], {"axis": [2], "keepdims": True})
    centered = ew(g, "sub", rows, mean)
    var = g.emit(T.MeanOp, [ew(g, "mul", centered, centered)], {"axis": [2], "keepdims": True})
    normalized = ew(g, "mul", centered, ew(g, "rsqrt", ew(g, "add", var, const_like(g, eps, var))))
    if stash != dtype:
        normalized = g.emit(T.CastOp, [normalized], {"dtype": dtype})
    scale, bias = g.input(node, 1, dtype), g.input(node, 2, dtype)
    if per_group:
        scaled = ew(g, "add", ew(g, "mul", normalized, reshape(g, scale, [groups, 1])),
                    reshape(g, bias, [groups, 1]))
        return [reshape(g, scaled, x.type.shape)]
    back = reshape(g, normalized, x.type.shape)
    per_channel = [channels] + [1] * len(spatial)
    return [ew(g, "add", ew(g, "mul", back, reshape(g, scale, per_channel)),
               reshape(g, bias, per_channel))]


CONVERTERS = {"GroupNormalization": _group_norm}
