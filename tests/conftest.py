"""Shared fixtures: the host target and small models built in the test (real TVM, no mocks)."""
from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch
from torch import nn

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# the suite opens hundreds of measurers: each takes idle workers left by the last (recommender.measure.pool)
os.environ.setdefault("SCHEDREC_WARM_WORKERS", "4")


class SmallCNN(nn.Module):
    """conv-bn-relu, a residual pair, max-pool, global pool and a linear head."""

    def __init__(self, width: int = 8, classes: int = 10) -> None:
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, width, 3, padding=1, bias=False), nn.BatchNorm2d(width), nn.ReLU())
        self.pool = nn.MaxPool2d(2)
        self.body = nn.Sequential(nn.Conv2d(width, width, 3, padding=1, bias=False), nn.BatchNorm2d(width),
                                  nn.ReLU(), nn.Conv2d(width, width, 3, padding=1, bias=False),
                                  nn.BatchNorm2d(width))
        self.head = nn.Linear(width, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.pool(self.stem(x))
        x = torch.relu(x + self.body(x))
        return self.head(x.mean(dim=(2, 3)))


def small_cnn(width: int = 8, size: int = 32, seed: int = 0) -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    torch.manual_seed(seed)
    return SmallCNN(width).eval(), (torch.randn(1, 3, size, size),)


def save_pt2(path, width: int, size: int) -> str:
    """The small CNN of this width and input size, saved with torch.export.save."""
    model, args = small_cnn(width=width, size=size)
    torch.export.save(torch.export.export(model, args), str(path))
    return str(path)


@pytest.fixture(scope="session")
def target():
    from recommender.target.spec import native_target
    return native_target()


SHIPPED_BANK = Path(__file__).resolve().parents[1] / "models" / "llvm-znver3-2c" / "bank"


@pytest.fixture(scope="session")
def shipped_bank_index():
    """The shipped znver3 bank, indexed once per session (reading it costs seconds): tests that ask which
    kernels have donors share it and do not change it."""
    from recommender.transfer.candidates import BankIndex
    return BankIndex(SHIPPED_BANK)


@pytest.fixture(scope="session")
def onnx_file(tmp_path_factory) -> str:
    model, args = small_cnn(width=8, size=32)
    path = str(tmp_path_factory.mktemp("onnx") / "small_cnn.onnx")
    torch.onnx.export(model, args, path, dynamo=False, input_names=["x"])
    return path


@pytest.fixture(scope="session")
def pt2_file(tmp_path_factory) -> str:
    model, args = small_cnn(width=16, size=24)
    path = str(tmp_path_factory.mktemp("pt2") / "small_cnn.pt2")
    torch.export.save(torch.export.export(model, args), path)
    return path


@pytest.fixture(scope="session")
def donor_bank(target, tmp_path_factory):
    """A bank with every kernel of one small CNN ("donor": width 8, 32x32), 3 trials each so that kernels
    have several records. Tuned once per session and shared: tests that change a bank copy it first."""
    from recommender.bank.tune import tune_model
    from recommender.measure import MeasureSettings
    d = tmp_path_factory.mktemp("donor_bank")
    tune_model(save_pt2(d / "donor.pt2", 8, 32), target, d / "bank", trials_per_task=3, min_share=0.0,
               settings=MeasureSettings(repeat=2, min_repeat_ms=1), trials_per_iter=3, population_size=16)
    return d / "bank"


@pytest.fixture(scope="session")
def two_model_bank(donor_bank, target, tmp_path_factory):
    """The donor bank plus a second small CNN ("wide": width 16, 24x24), for leave-one-model-out pairs."""
    import shutil
    from recommender.bank.tune import tune_model
    from recommender.measure import MeasureSettings
    d = tmp_path_factory.mktemp("two_model_bank")
    shutil.copytree(donor_bank, d / "bank", ignore=shutil.ignore_patterns(".work", ".lock"))
    tune_model(save_pt2(d / "wide.pt2", 16, 24), target, d / "bank", trials_per_task=3, min_share=0.0,
               settings=MeasureSettings(repeat=2, min_repeat_ms=1), trials_per_iter=3, population_size=16)
    return d / "bank"
