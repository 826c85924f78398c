"""Compact PyTorch definitions of zoo architectures that no installable library here provides.

transformers covers ResNet, MobileNetV2, EfficientNet, ConvNeXt, RegNet, ViT and the BERT/GPT family;
torchvision does not import beside the CPU torch build on this machine, so the remaining classic CNNs
(VGG-16, DenseNet-121, MnasNet-1.0, GoogLeNet), a video net (C3D) and a segmentation net (FCN-8s) are defined
here from their papers' layer tables.
Weights are random; only the structure (and so the kernels) matters.
"""
from __future__ import annotations

import torch
from torch import nn


def _conv_bn_relu(cin: int, cout: int, k: int, stride: int = 1, groups: int = 1,
                  relu: bool = True) -> nn.Sequential:
    layers: list[nn.Module] = [nn.Conv2d(cin, cout, k, stride, k // 2, groups=groups, bias=False),
                               nn.BatchNorm2d(cout)]
    if relu:
        layers.append(nn.ReLU(inplace=False))
    return nn.Sequential(*layers)


def _plain_stages(cfg: list, conv: type[nn.Module], pools: dict[str, nn.Module],
                  cin: int = 3) -> tuple[nn.Sequential, int]:
    """VGG-style features from a layer table over `cin` input channels: an int is a 3x3 (x3) conv with padding
    1 + ReLU of that width, a string the pool it names. Returns the layers and the last width."""
    layers: list[nn.Module] = []
    for v in cfg:
        if isinstance(v, str):
            layers.append(pools[v])
        else:
            layers += [conv(cin, v, 3, padding=1), nn.ReLU(inplace=False)]
            cin = v
    return nn.Sequential(*layers), cin


class VGG16(nn.Module):
    """VGG-16 (configuration D), 224x224 input, 1000 classes."""

    _CFG = [64, 64, "M", 128, 128, "M", 256, 256, 256, "M", 512, 512, 512, "M", 512, 512, 512, "M"]

    def __init__(self, num_classes: int = 1000) -> None:
        super().__init__()
        self.features, _ = _plain_stages(self._CFG, nn.Conv2d, {"M": nn.MaxPool2d(2, 2)})
        self.classifier = nn.Sequential(
            nn.Linear(512 * 7 * 7, 4096), nn.ReLU(inplace=False),
            nn.Linear(4096, 4096), nn.ReLU(inplace=False),
            nn.Linear(4096, num_classes))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(torch.flatten(self.features(x), 1))


class _DenseLayer(nn.Module):
    def __init__(self, cin: int, growth: int, bn_size: int) -> None:
        super().__init__()
        self.body = nn.Sequential(
            nn.BatchNorm2d(cin), nn.ReLU(inplace=False),
            nn.Conv2d(cin, bn_size * growth, 1, bias=False),
            nn.BatchNorm2d(bn_size * growth), nn.ReLU(inplace=False),
            nn.Conv2d(bn_size * growth, growth, 3, padding=1, bias=False))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cat([x, self.body(x)], 1)


class DenseNet121(nn.Module):
    """DenseNet-121: growth 32, blocks (6, 12, 24, 16), compression 0.5."""

    def __init__(self, num_classes: int = 1000, growth: int = 32, bn_size: int = 4) -> None:
        super().__init__()
        ch = 64
        layers: list[nn.Module] = [nn.Conv2d(3, ch, 7, 2, 3, bias=False), nn.BatchNorm2d(ch),
                                   nn.ReLU(inplace=False), nn.MaxPool2d(3, 2, 1)]
        for i, n in enumerate((6, 12, 24, 16)):
            for _ in range(n):
                layers.append(_DenseLayer(ch, growth, bn_size))
                ch += growth
            if i != 3:
                layers += [nn.BatchNorm2d(ch), nn.ReLU(inplace=False),
                           nn.Conv2d(ch, ch // 2, 1, bias=False), nn.AvgPool2d(2, 2)]
                ch //= 2
        layers += [nn.BatchNorm2d(ch), nn.ReLU(inplace=False), nn.AdaptiveAvgPool2d(1)]
        self.features = nn.Sequential(*layers)
        self.classifier = nn.Linear(ch, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(torch.flatten(self.features(x), 1))


class _InvertedResidual(nn.Module):
    def __init__(self, cin: int, cout: int, k: int, stride: int, expand: int) -> None:
        super().__init__()
        mid = cin * expand
        self.residual = stride == 1 and cin == cout
        layers: list[nn.Module] = []
        if expand != 1:
            layers.append(_conv_bn_relu(cin, mid, 1))
        layers += [_conv_bn_relu(mid, mid, k, stride, groups=mid), _conv_bn_relu(mid, cout, 1, relu=False)]
        self.body = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.body(x)
        return x + y if self.residual else y


class MnasNet10(nn.Module):
    """MnasNet-A1 without squeeze-excitation at depth multiplier 1.0 (the 'mnasnet1_0' layout)."""

    # (expansion, out channels, repeats, first stride, kernel)
    _STAGES = [(3, 24, 3, 2, 3), (3, 40, 3, 2, 5), (6, 80, 3, 2, 5),
               (6, 96, 2, 1, 3), (6, 192, 4, 2, 5), (6, 320, 1, 1, 3)]

    def __init__(self, num_classes: int = 1000) -> None:
        super().__init__()
        layers: list[nn.Module] = [_conv_bn_relu(3, 32, 3, 2), _conv_bn_relu(32, 32, 3, groups=32),
                                   _conv_bn_relu(32, 16, 1, relu=False)]
        cin = 16
        for expand, cout, repeats, stride, k in self._STAGES:
            for i in range(repeats):
                layers.append(_InvertedResidual(cin, cout, k, stride if i == 0 else 1, expand))
                cin = cout
        layers += [_conv_bn_relu(cin, 1280, 1), nn.AdaptiveAvgPool2d(1)]
        self.features = nn.Sequential(*layers)
        self.classifier = nn.Linear(1280, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(torch.flatten(self.features(x), 1))


class _Inception(nn.Module):
    def __init__(self, cin: int, c1: int, c3r: int, c3: int, c5r: int, c5: int, pool: int) -> None:
        super().__init__()
        self.b1 = _conv_bn_relu(cin, c1, 1)
        self.b2 = nn.Sequential(_conv_bn_relu(cin, c3r, 1), _conv_bn_relu(c3r, c3, 3))
        # GoogLeNet's "5x5" branch, as commonly implemented, uses a 3x3 convolution
        self.b3 = nn.Sequential(_conv_bn_relu(cin, c5r, 1), _conv_bn_relu(c5r, c5, 3))
        self.b4 = nn.Sequential(nn.MaxPool2d(3, 1, 1), _conv_bn_relu(cin, pool, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cat([self.b1(x), self.b2(x), self.b3(x), self.b4(x)], 1)


class GoogLeNet(nn.Module):
    """GoogLeNet (Inception v1) with batch norm, no auxiliary heads."""

    def __init__(self, num_classes: int = 1000) -> None:
        super().__init__()
        self.features = nn.Sequential(
            _conv_bn_relu(3, 64, 7, 2), nn.MaxPool2d(3, 2, 1),
            _conv_bn_relu(64, 64, 1), _conv_bn_relu(64, 192, 3), nn.MaxPool2d(3, 2, 1),
            _Inception(192, 64, 96, 128, 16, 32, 32), _Inception(256, 128, 128, 192, 32, 96, 64),
            nn.MaxPool2d(3, 2, 1),
            _Inception(480, 192, 96, 208, 16, 48, 64), _Inception(512, 160, 112, 224, 24, 64, 64),
            _Inception(512, 128, 128, 256, 24, 64, 64), _Inception(512, 112, 144, 288, 32, 64, 64),
            _Inception(528, 256, 160, 320, 32, 128, 128), nn.MaxPool2d(2, 2),
            _Inception(832, 256, 160, 320, 32, 128, 128), _Inception(832, 384, 192, 384, 48, 128, 128),
            nn.AdaptiveAvgPool2d(1))
        self.classifier = nn.Linear(1024, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(torch.flatten(self.features(x), 1))


class C3D(nn.Module):
    """C3D (Tran et al. 2015) at half width and 8 frames: 3x3x3 conv3d + ReLU stages between max pools (the
    first pools space only), global average pooling and a 400-class head (Kinetics-400)."""

    _CFG = [32, "P1", 64, "P", 128, 128, "P", 256, 256]

    def __init__(self, num_classes: int = 400) -> None:
        super().__init__()
        self.features, cin = _plain_stages(self._CFG, nn.Conv3d,
                                           {"P1": nn.MaxPool3d((1, 2, 2), (1, 2, 2)), "P": nn.MaxPool3d(2, 2)})
        self.head = nn.Linear(cin, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(torch.flatten(nn.functional.adaptive_avg_pool3d(self.features(x), 1), 1))


class FCN8s(nn.Module):
    """FCN-8s (Long et al. 2015) on a VGG-style encoder at half width, 224x224 input, 21 classes: 1x1 score
    layers at 1/8, 1/16 and 1/32 of the input, the coarser ones upsampled bilinearly by 2 and added to the next
    (skip fusion), the sum upsampled by 8 to the input's size."""

    def __init__(self, num_classes: int = 21) -> None:
        super().__init__()
        pool = nn.MaxPool2d(2, 2)
        self.to8, c8 = _plain_stages([32, "M", 64, "M", 128, 128, "M"], nn.Conv2d, {"M": pool})
        self.to16, c16 = _plain_stages([256, 256, "M"], nn.Conv2d, {"M": pool}, c8)
        self.to32, c32 = _plain_stages([256, 256, "M"], nn.Conv2d, {"M": pool}, c16)
        self.score8, self.score16, self.score32 = (nn.Conv2d(c, num_classes, 1) for c in (c8, c16, c32))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        f8 = self.to8(x)
        f16 = self.to16(f8)
        f32 = self.to32(f16)
        y = self.score16(f16) + _upsample(self.score32(f32), 2)
        y = self.score8(f8) + _upsample(y, 2)
        return _upsample(y, 8)


def _upsample(x: torch.Tensor, factor: int) -> torch.Tensor:
    return nn.functional.interpolate(x, scale_factor=factor, mode="bilinear", align_corners=False)
