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


class AudioNet(nn.Module):
    """A 1-D conv net over a waveform (conv1d + batch norm + ReLU, pooled, a linear head)."""

    def __init__(self) -> None:
        super().__init__()
        self.convs = nn.Sequential(nn.Conv1d(1, 32, 80, stride=4), nn.BatchNorm1d(32), nn.ReLU(), nn.MaxPool1d(4),
                                   nn.Conv1d(32, 64, 3, padding=1), nn.BatchNorm1d(64), nn.ReLU(),
                                   nn.Conv1d(64, 64, 5, stride=2, padding=3, dilation=2, groups=4), nn.ReLU())
        self.head = nn.Linear(64, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.convs(x).mean(-1))


class UpConvNet(nn.Module):
    """A decoder's up-convolutions: a 2x2 stride-2 one (as in U-Nets) and a 3x3 stride-2 one with padding
    and output padding (as in GANs)."""

    def __init__(self) -> None:
        super().__init__()
        self.up2 = nn.ConvTranspose2d(16, 8, 2, stride=2)
        self.up3 = nn.ConvTranspose2d(8, 4, 3, stride=2, padding=1, output_padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.up3(torch.relu(self.up2(x)))


class Recurrent(nn.Module):
    """A recurrent classifier over [batch, steps, features]: its outputs and its last hidden state."""

    def __init__(self, cell: type, **kw: object) -> None:
        super().__init__()
        self.rnn = cell(16, 12, batch_first=True, **kw)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        out, state = self.rnn(x)
        return out, state[0] if isinstance(state, tuple) else state


class EinsumHeads(nn.Module):
    """Per-head projections written as an einsum (bhsd,hde->bhse), as in some attention implementations."""

    def __init__(self, heads: int = 3, d: int = 8, e: int = 5) -> None:
        super().__init__()
        self.w = nn.Parameter(torch.randn(heads, d, e))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.einsum("bhsd,hde->bhse", x, self.w)


def peephole_lstm(path: str, layout: int, hidden: int = 5, features: int = 4, steps: int = 6, batch: int = 2) -> list:
    """An ONNX LSTM node written by hand with peepholes, direction reverse and the given layout (torch
    exports neither); returns the input shape."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    rng = np.random.default_rng(3)
    arrays = {"W": (1, 4 * hidden, features), "R": (1, 4 * hidden, hidden), "B": (1, 8 * hidden), "P": (1, 3 * hidden)}
    inits = [numpy_helper.from_array(rng.standard_normal(s).astype("float32"), n) for n, s in arrays.items()]
    xs = [batch, steps, features] if layout else [steps, batch, features]
    node = helper.make_node("LSTM", ["x0", "W", "R", "B", "", "", "", "P"], ["Y", "Yh", "Yc"], hidden_size=hidden,
                            layout=layout, direction="reverse")
    state = [batch, 1, hidden] if layout else [1, batch, hidden]
    outs = [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [batch, steps, 1, hidden] if layout
                                          else [steps, 1, batch, hidden])]
    outs += [helper.make_tensor_value_info(n, TensorProto.FLOAT, state) for n in ("Yh", "Yc")]
    graph = helper.make_graph([node], "lstm", [helper.make_tensor_value_info("x0", TensorProto.FLOAT, xs)], outs, inits)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)]), path)
    return xs
