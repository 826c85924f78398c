"""Latencies outside TVM used by the latency table: PyTorch eager and ONNX Runtime on the same input."""
from __future__ import annotations

import pytest

from recommender.compare.baselines import interleaved, median, time_onnxruntime, time_pytorch
from tests.conftest import small_cnn

pytestmark = pytest.mark.slow  # real tuning, replays or whole-model compiles: not in `make test-fast`


def test_pytorch_and_onnxruntime_time_the_same_model():
    pytest.importorskip("onnxruntime")
    model, args = small_cnn(width=8, size=32)
    torch_s = time_pytorch(model, args, threads=1, repeat=3, min_repeat_s=0.02)
    ort_s = time_onnxruntime(model, args, threads=1, repeat=3, min_repeat_s=0.02)
    for costs in (torch_s, ort_s):
        assert len(costs) == 3 and all(0 < c < 1.0 for c in costs)
    # each times the model and input it is given: 16x the pixels (16x the FLOPs) takes 3x longer or more. Fastest
    # repeats compared: another process only adds time (the medians failed this once, a ranker evaluation running
    # beside the suite)
    big_model, big_args = small_cnn(width=8, size=128)
    big_torch = time_pytorch(big_model, big_args, threads=1, repeat=3, min_repeat_s=0.02)
    big_ort = time_onnxruntime(big_model, big_args, threads=1, repeat=3, min_repeat_s=0.02)
    assert min(big_torch) > 3 * min(torch_s), (big_torch, torch_s)
    assert min(big_ort) > 3 * min(ort_s), (big_ort, ort_s)
    assert median([]) != median([])  # nan for no measurement


def test_interleaved_rounds_rotate_the_order_and_keep_a_failing_column_apart():
    calls = []

    def timer(name: str, fails_at: int | None = None):
        def run() -> list[float]:
            calls.append(name)
            if fails_at is not None and calls.count(name) == fails_at:
                raise RuntimeError(f"{name} crashed\nC++ trace")
            return [float(len(calls))]
        return run
    costs, errors, stalls = interleaved({"a": timer("a"), "b": timer("b"), "c": timer("c", fails_at=2)}, rounds=3)
    # round 1: a b c; round 2 starts one further: b c(raises) a; round 3: c is left out: a b
    assert calls == ["a", "b", "c", "b", "c", "a", "a", "b"]
    assert costs == {"a": [[1.0], [6.0], [7.0]], "b": [[2.0], [4.0], [8.0]], "c": [[3.0]]}
    assert errors == {"c": "c crashed"}


def test_interleaved_keeps_the_cpu_stall_share_of_every_round():
    """A column timed while more tasks want the CPU than it has (busy loops on every core, and its own) shows
    the stall in its share; a column that sleeps waits for no CPU of its own. worst_stalls keeps the largest."""
    import os
    import subprocess
    import sys
    import time

    from recommender.compare.baselines import worst_stalls
    from recommender.measure.contention import MAX_STALL_SHARE, stalled_us
    if stalled_us() is None:
        pytest.skip("this kernel has no CPU pressure stall information")

    def crowded() -> list[float]:
        busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(os.cpu_count() or 1)]
        try:
            t0 = time.perf_counter()
            while time.perf_counter() - t0 < 0.6:
                pass
        finally:
            for p in busy:
                p.kill()
                p.wait()
        return [0.6]

    costs, errors, stalls = interleaved({"crowded": crowded, "quiet": lambda: [time.sleep(0.3) or 0.3]}, rounds=2)
    assert not errors and len(stalls["crowded"]) == len(stalls["quiet"]) == 2
    worst = worst_stalls(stalls)
    assert worst["crowded"] > MAX_STALL_SHARE, stalls
    assert worst_stalls({"a": [None, None], "b": [0.01234, None]}) == {"b": 0.012}
