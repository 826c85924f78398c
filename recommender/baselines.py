"""Reference latencies outside TVM for the same model and input: PyTorch eager and ONNX Runtime."""
from __future__ import annotations

import os
import statistics
import tempfile
import time


def _median_of_repeats(call, repeat: int, min_repeat_s: float) -> list[float]:
    """Seconds per call, one value per repeat; each repeat runs the call until it lasts `min_repeat_s`."""
    call()  # warm-up
    costs = []
    for _ in range(repeat):
        n, t0 = 0, time.perf_counter()
        while True:
            call()
            n += 1
            elapsed = time.perf_counter() - t0
            if elapsed >= min_repeat_s:
                break
        costs.append(elapsed / n)
    return costs


def time_pytorch(model, args: tuple, threads: int, repeat: int = 5, min_repeat_s: float = 0.2) -> list[float]:
    import torch
    torch.set_num_threads(threads)
    with torch.no_grad():
        return _median_of_repeats(lambda: model(*args), repeat, min_repeat_s)


def time_onnxruntime(model, args: tuple, threads: int, repeat: int = 5, min_repeat_s: float = 0.2) -> list[float]:
    import onnxruntime as ort
    import torch
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "model.onnx")
        names = [f"input{i}" for i in range(len(args))]
        with torch.no_grad():
            torch.onnx.export(model, args, path, dynamo=False, input_names=names)
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = threads
        opts.inter_op_num_threads = 1
        sess = ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])
    feeds = {n: a.numpy() for n, a in zip(names, args)}
    return _median_of_repeats(lambda: sess.run(None, feeds), repeat, min_repeat_s)


def median(costs: list[float]) -> float:
    return statistics.median(costs) if costs else float("nan")
