"""Small architectures outside the zoo, exported to ONNX with torch.onnx (the legacy TorchScript exporter,
as most ONNX files in the wild were made): what users bring, and how the kernels of ONNX imports look."""
from __future__ import annotations

import torch
from torch import nn


class EncoderLayer(nn.Module):
    """A post-norm transformer encoder layer written out op by op (ONNX: 3-D MatMul, 4-D attention)."""

    def __init__(self, d: int, heads: int, ff: int) -> None:
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.fc1, self.fc2 = nn.Linear(d, ff), nn.Linear(ff, d)
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, s, d = x.shape
        q, k, v = self.qkv(x).reshape(b, s, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        att = torch.softmax(q @ k.transpose(-1, -2) / (d // self.heads) ** 0.5, dim=-1)
        x = self.ln1(x + self.proj((att @ v).transpose(1, 2).reshape(b, s, d)))
        return self.ln2(x + self.fc2(torch.nn.functional.gelu(self.fc1(x))))


def encoder(d: int = 384, heads: int = 6, ff: int = 1536, layers: int = 2, seq: int = 96):
    """A transformer encoder over embeddings [1, seq, d]."""
    torch.manual_seed(0)
    return nn.Sequential(*[EncoderLayer(d, heads, ff) for _ in range(layers)]).eval(), (torch.randn(1, seq, d),)


def export_onnx(model: nn.Module, args: tuple, path: str, dynamic: dict | None = None) -> str:
    """Export with input names x0, x1, ...; `dynamic`: ONNX dynamic_axes (e.g. {"x0": {0: "batch"}})."""
    names = [f"x{i}" for i in range(len(args))]
    with torch.no_grad():
        torch.onnx.export(model, args, path, dynamo=False, input_names=names, dynamic_axes=dynamic)
    return path
