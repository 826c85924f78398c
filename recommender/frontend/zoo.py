"""The model zoo: standard architectures at batch 1 with random weights; nothing is downloaded.

Architectures come from transformers model classes built from configs where transformers has them,
and from compact in-project definitions (``zoo_nets``) otherwise.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch
from torch import nn

from ..core.errors import ModelImportError

IMAGE_SHAPE = (1, 3, 224, 224)
CLIP_SHAPE = (1, 3, 8, 112, 112)  # video: 8 frames of 112x112, as R3D and C3D read them
SEQ_LEN = 128


@dataclass(frozen=True)
class ZooEntry:
    name: str
    family: str  # "cnn" or "transformer"
    description: str
    build: Callable[[], tuple[nn.Module, tuple[torch.Tensor, ...]]]


class _FirstOutput(nn.Module):
    """Wraps a transformers model so that it returns one tensor (logits or last hidden state)."""

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, *args: torch.Tensor) -> torch.Tensor:
        out = self.model(*args, return_dict=False)
        return out[0]


def _image() -> tuple[torch.Tensor, ...]:
    return (torch.randn(*IMAGE_SHAPE),)


def _clip() -> tuple[torch.Tensor, ...]:
    return (torch.randn(*CLIP_SHAPE),)


def _tokens(vocab: int) -> tuple[torch.Tensor, ...]:
    return (torch.randint(0, vocab, (1, SEQ_LEN), dtype=torch.int64),)


def _hf_vision(model_cls: str, config_cls: str, patch: Callable[[nn.Module], None] | None = None,
               **config: object):
    def build() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
        import transformers
        cfg = getattr(transformers, config_cls)(num_labels=1000, **config)
        model = getattr(transformers, model_cls)(cfg)
        if patch is not None:
            patch(model)
        return _FirstOutput(model), _image()
    return build


def _global_pool_efficientnet(model: nn.Module) -> None:
    """transformers' EfficientNet pools with AvgPool2d(hidden_dim, ceil_mode=True): a 1280x1280 window over
    a 7x7 map, the same numbers as a global average but a pathological kernel once compiled (2.1 GFLOPs of
    bounds-checked adds). Use the global average pool that the architecture means."""
    model.efficientnet.pooler = nn.AdaptiveAvgPool2d(1)


def _hf_text(model_cls: str, config_cls: str, **config: object):
    def build() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
        import transformers
        cfg = getattr(transformers, config_cls)(**config)
        # eager attention keeps the attention as matmul + softmax kernels, as deployed TVM models see it
        cfg._attn_implementation = "eager"
        cfg.use_cache = False  # a decoder's KV cache concatenates onto empty tensors, which Relax rejects
        model = getattr(transformers, model_cls)(cfg)
        return _FirstOutput(model), _tokens(cfg.vocab_size)
    return build


def _local(cls_name: str, inputs: Callable[[], tuple[torch.Tensor, ...]] = _image):
    def build() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
        from . import zoo_nets
        return getattr(zoo_nets, cls_name)(), inputs()
    return build


_ENTRIES = [
    ZooEntry("resnet18", "cnn", "ResNet-18 (transformers ResNet, basic blocks)",
             _hf_vision("ResNetForImageClassification", "ResNetConfig", depths=[2, 2, 2, 2],
                        hidden_sizes=[64, 128, 256, 512], layer_type="basic")),
    ZooEntry("resnet50", "cnn", "ResNet-50 (transformers ResNet, bottleneck blocks)",
             _hf_vision("ResNetForImageClassification", "ResNetConfig", depths=[3, 4, 6, 3],
                        hidden_sizes=[256, 512, 1024, 2048], layer_type="bottleneck")),
    ZooEntry("mobilenet_v2", "cnn", "MobileNetV2 1.0 (transformers)",
             _hf_vision("MobileNetV2ForImageClassification", "MobileNetV2Config")),
    ZooEntry("efficientnet_b0", "cnn", "EfficientNet-B0 (transformers)",
             _hf_vision("EfficientNetForImageClassification", "EfficientNetConfig", width_coefficient=1.0,
                        depth_coefficient=1.0, image_size=224, dropout_rate=0.2,
                        hidden_dim=1280, patch=_global_pool_efficientnet)),
    ZooEntry("mnasnet1_0", "cnn", "MnasNet-1.0 (in-project definition)", _local("MnasNet10")),
    ZooEntry("googlenet", "cnn", "GoogLeNet / Inception v1 with BN (in-project definition)", _local("GoogLeNet")),
    ZooEntry("vgg16", "cnn", "VGG-16 (in-project definition)", _local("VGG16")),
    ZooEntry("densenet121", "cnn", "DenseNet-121 (in-project definition)", _local("DenseNet121")),
    ZooEntry("c3d", "cnn", "C3D-style video net, 8 frames of 112x112 (in-project definition, half width)",
             _local("C3D", _clip)),
    ZooEntry("fcn8s", "cnn", "FCN-8s segmentation net, bilinear skip fusion (in-project definition, half width)",
             _local("FCN8s")),
    ZooEntry("convnext_tiny", "cnn", "ConvNeXt-T (transformers)",
             _hf_vision("ConvNextForImageClassification", "ConvNextConfig")),
    ZooEntry("regnet_y_040", "cnn", "RegNetY-4.0GF (transformers RegNet default config)",
             _hf_vision("RegNetForImageClassification", "RegNetConfig")),
    ZooEntry("vit_b16", "transformer", "ViT-B/16, 224x224 (transformers)",
             _hf_vision("ViTForImageClassification", "ViTConfig")),
    ZooEntry("bert_base", "transformer", f"BERT-base, sequence {SEQ_LEN} (transformers)",
             _hf_text("BertModel", "BertConfig")),
    ZooEntry("mobilebert", "transformer", f"MobileBERT, sequence {SEQ_LEN} (transformers)",
             _hf_text("MobileBertModel", "MobileBertConfig")),
    ZooEntry("distilbert", "transformer", f"DistilBERT, sequence {SEQ_LEN} (transformers)",
             _hf_text("DistilBertModel", "DistilBertConfig")),
    ZooEntry("bert_tiny", "transformer", f"BERT-tiny (2 layers, hidden 128), sequence {SEQ_LEN}",
             _hf_text("BertModel", "BertConfig", hidden_size=128, num_hidden_layers=2,
                      num_attention_heads=2, intermediate_size=512)),
    ZooEntry("gpt2", "transformer", f"GPT-2 small, sequence {SEQ_LEN} (transformers)",
             _hf_text("GPT2Model", "GPT2Config")),
]

ZOO: dict[str, ZooEntry] = {e.name: e for e in _ENTRIES}


def zoo_names() -> list[str]:
    return list(ZOO)


def build_zoo_model(name: str, seed: int = 0) -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    """Build a zoo model (eval mode, random weights from `seed`) and its example inputs."""
    if name not in ZOO:
        raise ModelImportError(f"unknown zoo model {name!r}; known: {', '.join(zoo_names())}")
    torch.manual_seed(seed)
    model, args = ZOO[name].build()
    return model.eval(), args
