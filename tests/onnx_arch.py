"""More architectures outside the zoo, for ONNX import: the operators and idioms that other model families
bring (shifted-window attention, channel shuffle, nearest-neighbour upsampling, RMS norms, causal masks over
token ids, instance norms with reflection padding, fire modules with ceil-mode pooling, conformer blocks,
depth-to-space upscaling, group norms with a timestep input and fused attention, dilated convs with bilinear
resizes, a run of activations with a local response norm, and a lite segmentation head whose bilinear
upsampling to the input holds a large share of its FLOPs).
Each builder returns (model in eval mode, example inputs), under a fixed seed; sizes are small enough for a
test and shaped like the real thing."""
from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F


class WindowAttention(nn.Module):
    """A Swin block: layer norm, attention inside 4x4 windows of a shifted token grid (roll, window
    partition by reshape/permute), a learned relative-position bias gathered from a table, an MLP."""

    def __init__(self, d: int = 64, heads: int = 2, grid: int = 8, window: int = 4, shift: int = 2) -> None:
        super().__init__()
        self.d, self.heads, self.grid, self.window, self.shift = d, heads, grid, window, shift
        self.norm1, self.norm2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))
        self.table = nn.Parameter(torch.randn((2 * window - 1) ** 2, heads) * 0.02)
        coords = torch.stack(torch.meshgrid(torch.arange(window), torch.arange(window), indexing="ij")).flatten(1)
        rel = (coords[:, :, None] - coords[:, None, :]).permute(1, 2, 0) + window - 1
        self.register_buffer("index", rel[..., 0] * (2 * window - 1) + rel[..., 1], persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, n, d = x.shape
        g, w, h = self.grid, self.window, self.heads
        y = torch.roll(self.norm1(x).reshape(b, g, g, d), (-self.shift, -self.shift), (1, 2))
        y = y.reshape(b, g // w, w, g // w, w, d).permute(0, 1, 3, 2, 4, 5).reshape(-1, w * w, d)
        q, k, v = self.qkv(y).reshape(-1, w * w, 3, h, d // h).permute(2, 0, 3, 1, 4)
        bias = self.table[self.index.reshape(-1)].reshape(w * w, w * w, h).permute(2, 0, 1)
        att = torch.softmax(q @ k.transpose(-1, -2) * (d // h) ** -0.5 + bias, dim=-1)
        y = self.proj((att @ v).transpose(1, 2).reshape(-1, w * w, d))
        y = y.reshape(b, g // w, g // w, w, w, d).permute(0, 1, 3, 2, 4, 5).reshape(b, g, g, d)
        x = x + torch.roll(y, (self.shift, self.shift), (1, 2)).reshape(b, n, d)
        return x + self.mlp(self.norm2(x))


def swin(d: int = 64, heads: int = 2, grid: int = 8, window: int = 4):
    torch.manual_seed(0)
    model = nn.Sequential(WindowAttention(d, heads, grid, window, 0), WindowAttention(d, heads, grid, window))
    return model.eval(), (torch.randn(1, grid * grid, d),)


class ShuffleUnit(nn.Module):
    """A ShuffleNetV2 unit: split the channels, 1x1 / depthwise 3x3 / 1x1 on one half, concatenate, shuffle."""

    def __init__(self, ch: int) -> None:
        super().__init__()
        c = ch // 2
        self.branch = nn.Sequential(nn.Conv2d(c, c, 1, bias=False), nn.BatchNorm2d(c), nn.ReLU(),
                                    nn.Conv2d(c, c, 3, padding=1, groups=c, bias=False), nn.BatchNorm2d(c),
                                    nn.Conv2d(c, c, 1, bias=False), nn.BatchNorm2d(c), nn.ReLU())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        a, b = x.chunk(2, dim=1)
        y = torch.cat([a, self.branch(b)], 1)
        n, c, h, w = y.shape
        return y.reshape(n, 2, c // 2, h, w).transpose(1, 2).reshape(n, c, h, w)


def shufflenet(ch: int = 48, image: int = 64, units: int = 2):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, ch, 3, 2, 1, bias=False), nn.BatchNorm2d(ch), nn.ReLU(),
                          nn.MaxPool2d(3, 2, 1), *[ShuffleUnit(ch) for _ in range(units)], nn.AdaptiveAvgPool2d(1),
                          nn.Flatten(), nn.Linear(ch, 10))
    return model.eval(), (torch.randn(1, 3, image, image),)


def _conv_silu(i: int, o: int, k: int = 1, s: int = 1) -> nn.Module:
    return nn.Sequential(nn.Conv2d(i, o, k, s, k // 2, bias=False), nn.BatchNorm2d(o), nn.SiLU())


class YoloNeck(nn.Module):
    """A YOLO-style backbone tail and neck: conv + BN + SiLU, SPPF (three chained 5x5 max pools,
    concatenated), nearest 2x upsampling, concatenation with the finer map, a sigmoid detection head."""

    def __init__(self, ch: int = 32) -> None:
        super().__init__()
        self.stem = nn.Sequential(_conv_silu(3, ch, 3, 2), _conv_silu(ch, 2 * ch, 3, 2))
        self.down = _conv_silu(2 * ch, 4 * ch, 3, 2)
        self.sppf_in, self.sppf_out = _conv_silu(4 * ch, 2 * ch), _conv_silu(8 * ch, 4 * ch)
        self.fuse = _conv_silu(6 * ch, 2 * ch, 3)
        self.head = nn.Conv2d(2 * ch, 3 * 9, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        fine = self.stem(x)
        y = self.sppf_in(self.down(fine))
        p1 = F.max_pool2d(y, 5, 1, 2)
        p2 = F.max_pool2d(p1, 5, 1, 2)
        y = self.sppf_out(torch.cat([y, p1, p2, F.max_pool2d(p2, 5, 1, 2)], 1))
        y = self.fuse(torch.cat([fine, F.interpolate(y, scale_factor=2.0, mode="nearest")], 1))
        return torch.sigmoid(self.head(y))


def yolo(ch: int = 32, image: int = 128):
    torch.manual_seed(0)
    return YoloNeck(ch).eval(), (torch.randn(1, 3, image, image),)


class RMSNorm(nn.Module):
    def __init__(self, d: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d) + 0.1 * torch.randn(d))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.weight * x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)


class T5Layer(nn.Module):
    """A T5-style encoder layer: RMS norms, bias-free projections, an additive position bias shared by the
    layers, a gated-GELU feed-forward."""

    def __init__(self, d: int, heads: int, ff: int) -> None:
        super().__init__()
        self.heads = heads
        self.n1, self.n2 = RMSNorm(d), RMSNorm(d)
        self.q, self.k, self.v, self.o = (nn.Linear(d, d, bias=False) for _ in range(4))
        self.wi0, self.wi1, self.wo = nn.Linear(d, ff, bias=False), nn.Linear(d, ff, bias=False), nn.Linear(ff, d, bias=False)

    def forward(self, x: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
        b, s, d = x.shape
        h = self.n1(x)
        q, k, v = (p(h).reshape(b, s, self.heads, -1).transpose(1, 2) for p in (self.q, self.k, self.v))
        att = torch.softmax(q @ k.transpose(-1, -2) + bias, -1)
        x = x + self.o((att @ v).transpose(1, 2).reshape(b, s, d))
        h = self.n2(x)
        return x + self.wo(F.gelu(self.wi0(h), approximate="tanh") * self.wi1(h))


class T5Encoder(nn.Module):
    def __init__(self, vocab: int = 512, d: int = 64, heads: int = 2, ff: int = 128, layers: int = 2,
                 buckets: int = 16) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, d)
        self.rel = nn.Embedding(buckets, heads)
        self.buckets = buckets
        self.layers = nn.ModuleList(T5Layer(d, heads, ff) for _ in range(layers))
        self.norm = RMSNorm(d)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        s = ids.shape[1]
        pos = torch.arange(s)
        rel = (pos[None, :] - pos[:, None]).clamp(-(self.buckets // 2), self.buckets // 2 - 1) + self.buckets // 2
        bias = self.rel(rel).permute(2, 0, 1).unsqueeze(0)
        x = self.embed(ids)
        for layer in self.layers:
            x = layer(x, bias)
        return self.norm(x)


def t5(seq: int = 32, **kw: int):
    torch.manual_seed(0)
    return T5Encoder(**kw).eval(), (torch.randint(0, 100, (1, seq)),)


class CausalDecoder(nn.Module):
    """A GPT-style decoder over token ids: token and position embeddings, pre-norm blocks with a causal mask
    (masked_fill of a triangular mask), and an LM head tied to the token embedding (a matmul by the
    embedding's transpose)."""

    def __init__(self, vocab: int = 512, d: int = 64, heads: int = 2, layers: int = 2, seq: int = 32) -> None:
        super().__init__()
        self.heads = heads
        self.tok, self.pos = nn.Embedding(vocab, d), nn.Embedding(seq, d)
        self.ln = nn.ModuleList(nn.LayerNorm(d) for _ in range(2 * layers + 1))
        self.qkv = nn.ModuleList(nn.Linear(d, 3 * d) for _ in range(layers))
        self.proj = nn.ModuleList(nn.Linear(d, d) for _ in range(layers))
        self.mlp = nn.ModuleList(nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))
                                 for _ in range(layers))

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        b, s = ids.shape
        x = self.tok(ids) + self.pos(torch.arange(s))
        mask = torch.triu(torch.ones(s, s, dtype=torch.bool), 1)
        for i, (qkv, proj, mlp) in enumerate(zip(self.qkv, self.proj, self.mlp)):
            q, k, v = qkv(self.ln[2 * i](x)).reshape(b, s, 3, self.heads, -1).permute(2, 0, 3, 1, 4)
            att = (q @ k.transpose(-1, -2)) / (q.shape[-1] ** 0.5)
            att = torch.softmax(att.masked_fill(mask, float("-inf")), -1)
            x = x + proj((att @ v).transpose(1, 2).reshape(b, s, -1))
            x = x + mlp(self.ln[2 * i + 1](x))
        return self.ln[-1](x) @ self.tok.weight.t()


def gpt(seq: int = 32, **kw: int):
    torch.manual_seed(0)
    return CausalDecoder(seq=seq, **kw).eval(), (torch.randint(0, 100, (1, seq)),)


def style_transfer(ch: int = 16, image: int = 64):
    """A fast style-transfer net: reflection padding, instance norms, a residual block, nearest upsampling."""
    torch.manual_seed(0)

    def conv(i: int, o: int, k: int, s: int = 1) -> nn.Module:
        return nn.Sequential(nn.ReflectionPad2d(k // 2), nn.Conv2d(i, o, k, s), nn.InstanceNorm2d(o, affine=True))

    class Residual(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.a, self.b = conv(2 * ch, 2 * ch, 3), conv(2 * ch, 2 * ch, 3)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x + self.b(torch.relu(self.a(x)))

    model = nn.Sequential(conv(3, ch, 9), nn.ReLU(), conv(ch, 2 * ch, 3, 2), nn.ReLU(), Residual(), Residual(),
                          nn.Upsample(scale_factor=2, mode="nearest"), conv(2 * ch, ch, 3), nn.ReLU(),
                          nn.ReflectionPad2d(4), nn.Conv2d(ch, 3, 9))
    return model.eval(), (torch.randn(1, 3, image, image),)


class Fire(nn.Module):
    """SqueezeNet's fire module: a 1x1 squeeze, then 1x1 and 3x3 expands concatenated."""

    def __init__(self, i: int, s: int, e: int) -> None:
        super().__init__()
        self.squeeze, self.e1, self.e3 = nn.Conv2d(i, s, 1), nn.Conv2d(s, e, 1), nn.Conv2d(s, e, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.relu(self.squeeze(x))
        return torch.cat([torch.relu(self.e1(x)), torch.relu(self.e3(x))], 1)


def squeezenet(image: int = 96):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 64, 3, 2), nn.ReLU(), nn.MaxPool2d(3, 2, ceil_mode=True), Fire(64, 16, 64),
                          Fire(128, 16, 64), nn.MaxPool2d(3, 2, ceil_mode=True), Fire(128, 32, 128),
                          nn.Dropout(), nn.Conv2d(256, 10, 1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten())
    return model.eval(), (torch.randn(1, 3, image, image),)


class ConformerConv(nn.Module):
    """A conformer's convolution module over [batch, time, d]: layer norm, pointwise conv to 2d, GLU,
    depthwise conv1d, batch norm, SiLU, pointwise conv; then self-attention through nn.MultiheadAttention."""

    def __init__(self, d: int = 64, kernel: int = 15, heads: int = 4) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(d)
        self.pw1, self.pw2 = nn.Conv1d(d, 2 * d, 1), nn.Conv1d(d, d, 1)
        self.dw = nn.Conv1d(d, d, kernel, padding=kernel // 2, groups=d)
        self.bn = nn.BatchNorm1d(d)
        self.attn = nn.MultiheadAttention(d, heads, batch_first=True)
        self.norm2 = nn.LayerNorm(d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.glu(self.pw1(self.norm(x).transpose(1, 2)), dim=1)
        x = x + self.pw2(F.silu(self.bn(self.dw(y)))).transpose(1, 2)
        h = self.norm2(x)
        a = self.attn  # its general path, as exported in training mode (the eval fast path has no ONNX form)
        return x + F.multi_head_attention_forward(
            h.transpose(0, 1), h.transpose(0, 1), h.transpose(0, 1), a.embed_dim, a.num_heads, a.in_proj_weight,
            a.in_proj_bias, None, None, False, 0.0, a.out_proj.weight, a.out_proj.bias, training=False,
            need_weights=False)[0].transpose(0, 1)


def conformer(d: int = 64, time: int = 48):
    torch.manual_seed(0)
    return nn.Sequential(ConformerConv(d), ConformerConv(d)).eval(), (torch.randn(1, time, d),)


class Block3d(nn.Module):
    """An R3D-18 basic block over [batch, channels, frames, height, width]: two 3x3x3 conv3d + batch norm, ReLU,
    a residual (through a strided 1x1x1 conv3d where the block downsamples)."""

    def __init__(self, i: int, o: int, stride: int = 1) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Conv3d(i, o, 3, stride, 1, bias=False), nn.BatchNorm3d(o), nn.ReLU(),
                                  nn.Conv3d(o, o, 3, 1, 1, bias=False), nn.BatchNorm3d(o))
        self.skip = (nn.Sequential(nn.Conv3d(i, o, 1, stride, bias=False), nn.BatchNorm3d(o))
                     if stride != 1 or i != o else nn.Identity())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.relu(self.body(x) + self.skip(x))


def r3d(ch: int = 16, frames: int = 8, image: int = 56):
    """A video classifier in R3D's shape: a (3, 7, 7) stem, residual conv3d blocks, global pooling, a head."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv3d(3, ch, (3, 7, 7), (1, 2, 2), (1, 3, 3), bias=False), nn.BatchNorm3d(ch), nn.ReLU(),
                          Block3d(ch, ch), Block3d(ch, 2 * ch, 2), nn.AdaptiveAvgPool3d(1), nn.Flatten(),
                          nn.Linear(2 * ch, 10))
    return model.eval(), (torch.randn(1, 3, frames, image, image),)


def espcn(ch: int = 32, image: int = 48, scale: int = 3):
    """A sub-pixel super-resolution net (ESPCN): tanh convs, then PixelShuffle (ONNX DepthToSpace)."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, ch, 5, padding=2), nn.Tanh(), nn.Conv2d(ch, ch // 2, 3, padding=1), nn.Tanh(),
                          nn.Conv2d(ch // 2, 3 * scale * scale, 3, padding=1), nn.PixelShuffle(scale))
    return model.eval(), (torch.randn(1, 3, image, image),)


class TimestepResBlock(nn.Module):
    """A diffusion U-Net's residual block: group norm, SiLU, 3x3 convs, a timestep embedding added per channel."""

    def __init__(self, ch: int, embed: int) -> None:
        super().__init__()
        self.n1, self.n2 = nn.GroupNorm(8, ch), nn.GroupNorm(8, ch)
        self.c1, self.c2 = nn.Conv2d(ch, ch, 3, padding=1), nn.Conv2d(ch, ch, 3, padding=1)
        self.t = nn.Linear(embed, ch)

    def forward(self, x: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        h = self.c1(F.silu(self.n1(x))) + self.t(F.silu(t))[:, :, None, None]
        return x + self.c2(F.silu(self.n2(h)))


class DiffusionMiddle(nn.Module):
    """A diffusion U-Net's middle: two timestep residual blocks around a spatial self-attention written with
    F.scaled_dot_product_attention; two inputs (latents and a timestep embedding)."""

    def __init__(self, ch: int = 64, embed: int = 32) -> None:
        super().__init__()
        self.inp, self.out = nn.Conv2d(4, ch, 3, padding=1), nn.Conv2d(ch, 4, 3, padding=1)
        self.r1, self.r2 = TimestepResBlock(ch, embed), TimestepResBlock(ch, embed)
        self.norm, self.qkv, self.proj = nn.GroupNorm(8, ch), nn.Conv2d(ch, 3 * ch, 1), nn.Conv2d(ch, ch, 1)

    def forward(self, x: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        h = self.r1(self.inp(x), t)
        b, c, height, width = h.shape
        q, k, v = (z.transpose(1, 2)[:, None] for z in self.qkv(self.norm(h)).reshape(b, 3, c, height * width).unbind(1))
        a = F.scaled_dot_product_attention(q, k, v)[:, 0].transpose(1, 2).reshape(b, c, height, width)
        return self.out(self.r2(h + self.proj(a), t))


def diffusion(ch: int = 64, image: int = 16, embed: int = 32):
    torch.manual_seed(0)
    return DiffusionMiddle(ch, embed).eval(), (torch.randn(1, 4, image, image), torch.randn(1, embed))


class ASPP(nn.Module):
    """DeepLab's atrous spatial pyramid pooling after a strided stem: a 1x1 conv, 3x3 convs of dilation 2, 4
    and 6, image pooling resized back bilinearly; the projection upsampled bilinearly by 2."""

    def __init__(self, ch: int = 64, branch: int = 32, classes: int = 8) -> None:
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, ch, 3, 2, 1), nn.BatchNorm2d(ch), nn.ReLU())
        self.branches = nn.ModuleList([nn.Conv2d(ch, branch, 1)] +
                                      [nn.Conv2d(ch, branch, 3, padding=d, dilation=d) for d in (2, 4, 6)])
        self.pool = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Conv2d(ch, branch, 1))
        self.proj = nn.Conv2d(5 * branch, classes, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.stem(x)
        pooled = F.interpolate(self.pool(x), size=x.shape[-2:], mode="bilinear", align_corners=False)
        y = self.proj(torch.cat([F.relu(c(x)) for c in self.branches] + [pooled], 1))
        return F.interpolate(y, scale_factor=2, mode="bilinear", align_corners=False)


def aspp(image: int = 64, ch: int = 64, branch: int = 32, classes: int = 8):
    torch.manual_seed(0)
    return ASPP(ch, branch, classes).eval(), (torch.randn(1, 3, image, image),)


class LRASPP(nn.Module):
    """A lite segmentation head in LR-ASPP's shape (MobileNetV3's): a small inverted-residual backbone with
    hard-swish, a 1x1 conv on the 1/16 features gated by a sigmoid of their global average, upsampled
    bilinearly to the 1/8 features, both classified and summed, the sum upsampled bilinearly to the input."""

    def __init__(self, ch: int = 16, classes: int = 21, inter: int = 128) -> None:
        super().__init__()

        def block(i: int, o: int, s: int, e: int = 4) -> nn.Module:
            return nn.Sequential(nn.Conv2d(i, i * e, 1, bias=False), nn.BatchNorm2d(i * e), nn.Hardswish(),
                                 nn.Conv2d(i * e, i * e, 3, s, 1, groups=i * e, bias=False), nn.BatchNorm2d(i * e),
                                 nn.Hardswish(), nn.Conv2d(i * e, o, 1, bias=False), nn.BatchNorm2d(o))
        self.to8 = nn.Sequential(nn.Conv2d(3, ch, 3, 2, 1, bias=False), nn.BatchNorm2d(ch), nn.Hardswish(),
                                 block(ch, 2 * ch, 2), block(2 * ch, 3 * ch, 2))
        self.to16 = nn.Sequential(block(3 * ch, 6 * ch, 2), block(6 * ch, 10 * ch, 1))
        self.cbr = nn.Sequential(nn.Conv2d(10 * ch, inter, 1, bias=False), nn.BatchNorm2d(inter), nn.ReLU())
        self.scale = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Conv2d(10 * ch, inter, 1, bias=False), nn.Sigmoid())
        self.low, self.high = nn.Conv2d(3 * ch, classes, 1), nn.Conv2d(inter, classes, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        low = self.to8(x)
        high = self.to16(low)
        y = F.interpolate(self.cbr(high) * self.scale(high), size=low.shape[-2:], mode="bilinear",
                          align_corners=False)
        y = self.low(low) + self.high(y)
        return F.interpolate(y, size=x.shape[-2:], mode="bilinear", align_corners=False)


def lraspp(ch: int = 16, image: int = 64, classes: int = 21):
    torch.manual_seed(0)
    return LRASPP(ch, classes).eval(), (torch.randn(1, 3, image, image),)


def activations(ch: int = 32, image: int = 32):
    """Convs between PReLU, LeakyReLU, Mish, HardSwish, ELU, Softplus, a local response norm (traced by torch
    into an If on the input's rank), tanh GELU and HardSigmoid; global max pooling and a log-softmax head."""
    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Conv2d(3, ch, 3, padding=1), nn.PReLU(ch), nn.Conv2d(ch, ch, 3, padding=1), nn.LeakyReLU(0.1),
        nn.Conv2d(ch, ch, 3, padding=1, groups=ch), nn.Mish(), nn.Conv2d(ch, ch, 1), nn.Hardswish(),
        nn.Conv2d(ch, ch, 1), nn.ELU(), nn.Conv2d(ch, ch, 1), nn.Softplus(), nn.LocalResponseNorm(5),
        nn.Conv2d(ch, ch, 3, stride=2), nn.GELU(approximate="tanh"), nn.Hardsigmoid(),
        nn.AdaptiveMaxPool2d(1), nn.Flatten(), nn.Linear(ch, 10), nn.LogSoftmax(-1))
    return model.eval(), (torch.randn(1, 3, image, image),)


# video models: where the bank has no video model (every bank but llvm-znver5-2c's, which has zoo:c3d), their
# conv3ds have no donor and get the conv rule's tiles instead
VIDEO_ARCHITECTURES = {"r3d": r3d}

# segmentation heads whose bilinear upsampling holds a large share of the FLOPs: their resizes have donors only
# in a bank with a segmentation model (llvm-znver5-2c's has zoo:fcn8s)
SEGMENTATION_ARCHITECTURES = {"lraspp": lraspp}

ARCHITECTURES = {
    "swin": swin,
    "shufflenet": shufflenet,
    "yolo": yolo,
    "t5": t5,
    "gpt": gpt,
    "style_transfer": style_transfer,
    "squeezenet": squeezenet,
    "conformer": conformer,
    "espcn": espcn,
    "diffusion": diffusion,
    "aspp": aspp,
    "activations": activations,
}


class LastHidden(nn.Module):
    """A Hugging Face model's last hidden state as its one output (what an ONNX export of it returns first)."""

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, *args: torch.Tensor) -> torch.Tensor:
        out = self.model(*args)
        return out[0] if isinstance(out, (tuple, list)) else out.last_hidden_state


def _hf(build) -> tuple[nn.Module, tuple]:
    torch.manual_seed(0)
    model, args = build()
    return LastHidden(model.eval()).eval(), args


def _hf_t5():
    import transformers as hf
    cfg = hf.T5Config(vocab_size=512, d_model=64, d_kv=32, d_ff=128, num_layers=2, num_heads=2)
    return hf.T5EncoderModel(cfg), (torch.randint(0, 100, (1, 32)),)


def _hf_swin():
    import transformers as hf
    cfg = hf.SwinConfig(image_size=64, patch_size=4, embed_dim=32, depths=[2, 2], num_heads=[2, 4], window_size=4)
    return hf.SwinModel(cfg), (torch.randn(1, 3, 64, 64),)


def _hf_wav2vec2():
    import transformers as hf
    cfg = hf.Wav2Vec2Config(hidden_size=64, num_hidden_layers=2, num_attention_heads=2, intermediate_size=128,
                            conv_dim=(32, 32, 32), conv_stride=(5, 2, 2), conv_kernel=(10, 3, 3),
                            num_conv_pos_embeddings=16, num_conv_pos_embedding_groups=4)
    return hf.Wav2Vec2Model(cfg), (torch.randn(1, 4000),)


def _hf_deberta():
    import transformers as hf
    cfg = hf.DebertaV2Config(vocab_size=512, hidden_size=64, num_hidden_layers=2, num_attention_heads=2,
                             intermediate_size=128)
    return hf.DebertaV2Model(cfg), (torch.randint(0, 100, (1, 32)),)


# Hugging Face architectures with random weights from small configs (nothing downloaded), as their users
# export them: relative position buckets, shifted windows, a conv feature encoder over a waveform, disentangled
# attention
HF_ARCHITECTURES = {
    "hf_t5_encoder": lambda: _hf(_hf_t5),
    "hf_swin": lambda: _hf(_hf_swin),
    "hf_wav2vec2": lambda: _hf(_hf_wav2vec2),
    "hf_deberta_v2": lambda: _hf(_hf_deberta),
}
