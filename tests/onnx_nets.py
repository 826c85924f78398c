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

    def __init__(self, cell: type, features: int = 16, hidden: int = 12, **kw: object) -> None:
        super().__init__()
        self.rnn = cell(features, hidden, batch_first=True, **kw)

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


class UNet(nn.Module):
    """A two-level U-Net: conv + batch norm + ReLU blocks, max pooling, 2x2 stride-2 up-convolutions and skip
    connections by concatenation."""

    def __init__(self, ch: int = 32) -> None:
        super().__init__()

        def block(i: int, o: int) -> nn.Module:
            return nn.Sequential(nn.Conv2d(i, o, 3, padding=1), nn.BatchNorm2d(o), nn.ReLU(),
                                 nn.Conv2d(o, o, 3, padding=1), nn.BatchNorm2d(o), nn.ReLU())
        self.down1, self.down2, self.mid = block(3, ch), block(ch, 2 * ch), block(2 * ch, 4 * ch)
        self.up2, self.dec2 = nn.ConvTranspose2d(4 * ch, 2 * ch, 2, stride=2), block(4 * ch, 2 * ch)
        self.up1, self.dec1 = nn.ConvTranspose2d(2 * ch, ch, 2, stride=2), block(2 * ch, ch)
        self.out = nn.Conv2d(ch, 2, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        a = self.down1(x)
        b = self.down2(nn.functional.max_pool2d(a, 2))
        c = self.mid(nn.functional.max_pool2d(b, 2))
        b = self.dec2(torch.cat([b, self.up2(c)], 1))
        return self.out(self.dec1(torch.cat([a, self.up1(b)], 1)))


class Mixer(nn.Module):
    """An MLP-Mixer: patch embedding, token-mixing and channel-mixing MLPs with layer norms."""

    def __init__(self, image: int = 128, patch: int = 16, d: int = 256, layers: int = 4) -> None:
        super().__init__()
        tokens = (image // patch) ** 2
        self.embed = nn.Conv2d(3, d, patch, patch)
        self.norms = nn.ModuleList(nn.LayerNorm(d) for _ in range(2 * layers))
        self.token_mlps = nn.ModuleList(nn.Sequential(nn.Linear(tokens, 2 * tokens), nn.GELU(),
                                                      nn.Linear(2 * tokens, tokens)) for _ in range(layers))
        self.channel_mlps = nn.ModuleList(nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))
                                          for _ in range(layers))
        self.head = nn.Linear(d, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.embed(x).flatten(2).transpose(1, 2)
        for i, (tok, ch) in enumerate(zip(self.token_mlps, self.channel_mlps)):
            x = x + tok(self.norms[2 * i](x).transpose(1, 2)).transpose(1, 2)
            x = x + ch(self.norms[2 * i + 1](x))
        return self.head(x.mean(1))


class CausalAttentionBlock(nn.Module):
    """A pre-norm causal self-attention block: nn.RMSNorm, a fused QKV projection, F.scaled_dot_product_attention
    (one Attention node when exported at opset 23 or later), an output projection and a residual."""

    def __init__(self, d: int = 64, heads: int = 4) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.heads, self.norm = heads, nn.RMSNorm(d)
        self.qkv, self.out = nn.Linear(d, 3 * d), nn.Linear(d, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = self.qkv(self.norm(x)).reshape(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        y = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        return x + self.out(y.transpose(1, 2).reshape(b, t, d))


class BooleanMask(nn.Module):
    """A head that sums the positive outputs of a linear layer (y[y > 0], an ONNX NonZero + GatherND): kernels
    whose shapes depend on the data."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.linear = nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.linear(x)
        return y[y > 0].sum() + torch.relu(y).mean()
