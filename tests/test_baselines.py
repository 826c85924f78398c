"""Latencies outside TVM used by the latency table: PyTorch eager and ONNX Runtime on the same input."""
from __future__ import annotations

import pytest

from recommender.baselines import median, time_onnxruntime, time_pytorch
from tests.conftest import small_cnn

pytestmark = pytest.mark.slow  # real tuning, replays or whole-model compiles: not in `make test-fast`


def test_pytorch_and_onnxruntime_time_the_same_model():
    pytest.importorskip("onnxruntime")
    model, args = small_cnn(width=8, size=32)
    torch_s = time_pytorch(model, args, threads=1, repeat=3, min_repeat_s=0.02)
    ort_s = time_onnxruntime(model, args, threads=1, repeat=3, min_repeat_s=0.02)
    for costs in (torch_s, ort_s):
        assert len(costs) == 3 and all(0 < c < 1.0 for c in costs)
    # the same small network: the two runtimes agree within two orders of magnitude
    assert 0.01 < median(ort_s) / median(torch_s) < 100
    assert median([]) != median([])  # nan for no measurement
