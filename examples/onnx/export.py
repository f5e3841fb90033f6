"""Export the small PyTorch models whose ONNX files sit beside this script.

    python examples/onnx/export.py        # rewrites mlp.onnx and encoder_block.onnx

Run on the CPU with torch's TorchScript-based exporter (dynamo=False) at opset 17
(the first with LayerNormalization), fixed shapes and constant folding, so the
graphs hold only operators mlfuse imports. tests/test_onnx_models.py compiles them
and compares with ONNX Runtime.
"""
from __future__ import annotations

import math
from pathlib import Path

import torch
from torch import nn

HERE = Path(__file__).resolve().parent
OPSET = 17


class MLP(nn.Module):
    """Linear -> LayerNorm -> GELU -> Linear."""

    def __init__(self, d_in=16, d_hidden=32, d_out=8):
        super().__init__()
        self.fc1 = nn.Linear(d_in, d_hidden)
        self.norm = nn.LayerNorm(d_hidden)
        self.fc2 = nn.Linear(d_hidden, d_out)

    def forward(self, x):
        return self.fc2(nn.functional.gelu(self.norm(self.fc1(x))))


class EncoderBlock(nn.Module):
    """A pre-norm transformer encoder block: softmax self-attention, then a GELU MLP,
    each with a residual connection. Written out (rather than nn.TransformerEncoderLayer)
    so the export has fixed reshapes instead of shape arithmetic, and separate q, k, v
    projections (benchmarks/models.py has real models with fused ones and Split)."""

    def __init__(self, seq=8, d_model=16, heads=2, d_ff=32):
        super().__init__()
        self.seq, self.heads, self.d_head = seq, heads, d_model // heads
        self.norm1 = nn.LayerNorm(d_model)
        self.q, self.k, self.v = (nn.Linear(d_model, d_model) for _ in range(3))
        self.proj = nn.Linear(d_model, d_model)
        self.norm2 = nn.LayerNorm(d_model)
        self.ff1 = nn.Linear(d_model, d_ff)
        self.ff2 = nn.Linear(d_ff, d_model)

    def forward(self, x):  # x: [batch, seq, d_model]
        b, s, d = x.shape
        h = self.norm1(x)
        q, k, v = (t(h).reshape(b, s, self.heads, self.d_head).transpose(1, 2)
                   for t in (self.q, self.k, self.v))
        scores = q @ k.transpose(-1, -2) / math.sqrt(self.d_head)
        attended = (scores.softmax(dim=-1) @ v).transpose(1, 2).reshape(b, s, d)
        x = x + self.proj(attended)
        return x + self.ff2(nn.functional.gelu(self.ff1(self.norm2(x))))


def export(module: nn.Module, example: torch.Tensor, name: str) -> Path:
    path = HERE / f"{name}.onnx"
    module.eval()
    torch.onnx.export(module, (example,), str(path), input_names=["x"], output_names=["y"],
                      opset_version=OPSET, do_constant_folding=True, dynamo=False)
    return path


def main() -> None:
    torch.manual_seed(0)
    models = [(MLP(), (4, 16), "mlp"), (EncoderBlock(), (2, 8, 16), "encoder_block")]
    for module, shape, name in models:
        path = export(module, torch.randn(*shape), name)
        print(f"{path.name}: {path.stat().st_size} bytes")


if __name__ == "__main__":
    main()
