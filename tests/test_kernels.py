"""Model import (zoo, ONNX, torch.export) and kernel extraction, with real TVM on small models."""
from __future__ import annotations

import pytest
import torch

from featurize.tir_structure import class_label, kernel_kind
from recommender.frontend.kernels import extract_kernels, flop_shares
from recommender.frontend.model_import import import_model

from .conftest import small_cnn

pytestmark = pytest.mark.slow  # real tuning, replays or whole-model compiles: not in `make test-fast`


def _kernels(spec, target):
    return extract_kernels(import_model(spec, target.tvm()), target.tvm())


def _cnn_kinds(kernels):
    return {k.kind for k in kernels}


def test_zoo_transformer_kernels(target):
    kernels = _kernels("zoo:bert_tiny", target)
    kinds = _cnn_kinds(kernels)
    assert {"matmul", "batch_matmul", "reduction", "elementwise"} <= kinds
    # heaviest first, weights count repeated calls, FLOP shares sum to one
    totals = [k.total_flops for k in kernels]
    assert totals == sorted(totals, reverse=True)
    assert kernels[0].kind == "matmul" and kernels[0].weight == 2
    assert abs(sum(flop_shares(kernels)) - 1.0) < 1e-9
    # BERT-tiny's FFN up-projection: (128 x 128) @ (128 x 512) + bias per layer
    up = [k for k in kernels if k.kind == "matmul" and k.args[1][0] == (128, 512)]
    # exact counts (coverage and FLOP shares are built on them): 2 FLOPs per multiply-add, 1 per bias add
    assert [k.flops for k in up] == [2 * 128 * 128 * 512 + 128 * 512]
    # attention scores per layer: 2 heads x (128 x 64) @ (64 x 128), no epilogue
    scores = [k for k in kernels if k.kind == "batch_matmul" and k.args[0][0] == (2, 128, 64)]
    assert [k.flops for k in scores] == [2 * 2 * 128 * 128 * 64]


def test_onnx_import(onnx_file, target):
    model = import_model(onnx_file, target.tvm())
    assert model.name == "small_cnn"
    assert model.input_shapes == [(1, 3, 32, 32)] and model.input_dtypes == ["float32"]
    kernels = extract_kernels(model, target.tvm())
    assert {"conv2d", "pool", "matmul"} <= _cnn_kinds(kernels)
    conv = [k for k in kernels if k.kind == "conv2d"]
    # stem conv: 3->8 channels, 3x3, 32x32 output: 2*8*32*32*3*9 multiply-adds
    assert any((8, 3, 3, 3) in [s for s, _ in k.args] for k in conv)
    assert max(k.flops for k in conv) >= 2 * 8 * 16 * 16 * 8 * 9


def test_pt2_import(pt2_file, target):
    model = import_model(pt2_file, target.tvm())
    assert model.input_shapes == [(1, 3, 24, 24)]
    kernels = extract_kernels(model, target.tvm())
    assert {"conv2d", "pool"} <= _cnn_kinds(kernels)
    assert all(k.class_key.count("@") == 1 for k in kernels)


def test_class_keys_ignore_shapes_and_numbering(target):
    """Two models of one structure but other widths and input sizes share their class keys."""
    from recommender.frontend.model_import import export_torch, from_exported, lower_for_tuning
    from recommender.frontend.model_import import ImportedModel

    def kernels_of(width, size):
        model, args = small_cnn(width=width, size=size)
        mod = lower_for_tuning(from_exported(export_torch(model, args, "t"), "t"), target.tvm())
        return extract_kernels(ImportedModel("t", "t", mod), target.tvm())

    a, b = kernels_of(8, 32), kernels_of(24, 40)
    keys_a, keys_b = {k.class_key for k in a}, {k.class_key for k in b}
    assert keys_a == keys_b
    shapes_a = {tuple(s for s, _ in k.args) for k in a}
    shapes_b = {tuple(s for s, _ in k.args) for k in b}
    assert not shapes_a & shapes_b
    # conv with BN + ReLU and conv with BN + residual add + ReLU are different classes
    conv_labels = {class_label(k.class_key) for k in a if kernel_kind(k.class_key) == "conv2d"}
    assert "conv2d>subtract>divide>multiply>add>relu" in conv_labels
    assert "conv2d>subtract>divide>multiply>add>add>relu" in conv_labels


def test_depthwise_and_grouped_convs_get_their_own_kind(target):
    from recommender.frontend.model_import import export_torch, from_exported, lower_for_tuning
    from recommender.frontend.model_import import ImportedModel

    class Convs(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.dw = torch.nn.Conv2d(8, 8, 3, padding=1, groups=8)
            self.gc = torch.nn.Conv2d(8, 16, 3, padding=1, groups=2)

        def forward(self, x):
            return self.gc(torch.relu(self.dw(x)))

    mod = lower_for_tuning(from_exported(export_torch(Convs().eval(), (torch.randn(1, 8, 16, 16),), "t"), "t"),
                           target.tvm())
    kinds = {k.kind for k in extract_kernels(ImportedModel("t", "t", mod), target.tvm())}
    assert {"depthwise_conv2d", "group_conv2d"} <= kinds
