"""Reference latencies outside TVM for the same model and input: PyTorch eager, `torch.compile` (Inductor, what a
PyTorch user tries first on a CPU) and ONNX Runtime."""
from __future__ import annotations

import os
import statistics
import tempfile
import time
from collections.abc import Callable

from ..measure import contention
from ..measure.contention import StallWatch
from ..measure.host_lock import exclusive


class Costs(list):
    """Seconds per call, one value per repeat (a plain list to every reader), and `caveat`: why the timing is
    not clean (every try stalled by another process, the last kept), None when it is; reports print it."""

    caveat: str | None = None


def _median_of_repeats(call, repeat: int, min_repeat_s: float) -> Costs:
    """Seconds per call, one value per repeat; each repeat runs the call until it lasts `min_repeat_s`.
    Holds the machine's measurement lock (measure/host_lock.py); a timing that another process stalled
    (measure/contention.py) is timed again, as the measurer's are, up to contention.RETRIES times, and the
    last try, still stalled, is kept with its caveat."""
    with exclusive("timing a baseline"):
        call()  # warm-up
        for attempt in range(contention.RETRIES + 1):
            if attempt:
                time.sleep(contention.RETRY_WAIT_S)
            with StallWatch() as watch:
                costs = Costs(_repeats(call, repeat, min_repeat_s))
            if not contention.spoiled(watch.share):
                return costs
        share = "" if watch.share is None else f" (the kept one stalled {watch.share:.0%} of its time)"
        costs.caveat = contention.no_clean_run(contention.RETRIES + 1,
                                               f"another process took the CPU in every try{share}")
        return costs


def _repeats(call, repeat: int, min_repeat_s: float) -> list[float]:
    """Seconds per call, one value per repeat of at least `min_repeat_s`."""
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


def pytorch_timer(model, args: tuple, threads: int) -> Callable[[int, float], list[float]]:
    """A timer of PyTorch eager inference: timer(repeat, min_repeat_s) -> seconds per call, one per repeat."""
    import torch

    def timer(repeat: int, min_repeat_s: float) -> list[float]:
        torch.set_num_threads(threads)
        with torch.no_grad():
            return _median_of_repeats(lambda: model(*args), repeat, min_repeat_s)
    return timer


def torch_compile_timer(model, args: tuple, threads: int) -> Callable[[int, float], list[float]]:
    """A timer of the model under `torch.compile` (Inductor's default mode, C++ kernels for the CPU), compiled
    on its first call (the warm-up): timer(repeat, min_repeat_s) -> seconds per call, one per repeat."""
    import torch
    compiled = torch.compile(model)

    def timer(repeat: int, min_repeat_s: float) -> list[float]:
        torch.set_num_threads(threads)
        with torch.no_grad():
            return _median_of_repeats(lambda: compiled(*args), repeat, min_repeat_s)
    return timer


def onnxruntime_timer(model, args: tuple, threads: int) -> Callable[[int, float], list[float]]:
    """The model exported to ONNX (TorchScript exporter) in an ONNX Runtime CPU session with `threads`
    intra-op threads: timer(repeat, min_repeat_s) -> seconds per call, one per repeat."""
    with tempfile.TemporaryDirectory() as tmp:
        path = export_onnx(model, args, os.path.join(tmp, "model.onnx"))
        return onnx_file_timer(path, [a.numpy() for a in args], threads)


def export_onnx(model, args: tuple, path: str) -> str:
    """The model exported to `path` with the TorchScript exporter, inputs named input0, input1, ...: `path`."""
    import torch
    with torch.no_grad():
        torch.onnx.export(model, args, path, dynamo=False, input_names=[f"input{i}" for i in range(len(args))])
    return path


def onnxruntime_session(path: str, threads: int, profile_prefix: str | None = None) -> object:
    """An ONNX Runtime CPU session of the file with `threads` intra-op threads (one inter-op thread); with
    `profile_prefix`, ONNX Runtime's profiler on, writing there."""
    import onnxruntime as ort
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    if profile_prefix is not None:
        opts.enable_profiling, opts.profile_file_prefix = True, profile_prefix
    return ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])


def onnx_file_timer(path: str, inputs: list, threads: int) -> Callable[[int, float], list[float]]:
    """An ONNX file in an ONNX Runtime CPU session with `threads` intra-op threads, fed `inputs` (arrays, in
    the order of the file's inputs): timer(repeat, min_repeat_s) -> seconds per call, one per repeat."""
    sess = onnxruntime_session(path, threads)
    feeds = {i.name: x for i, x in zip(sess.get_inputs(), inputs)}
    return lambda repeat, min_repeat_s: _median_of_repeats(lambda: sess.run(None, feeds), repeat, min_repeat_s)


def time_pytorch(model, args: tuple, threads: int, repeat: int = 5, min_repeat_s: float = 0.2) -> Costs:
    return pytorch_timer(model, args, threads)(repeat, min_repeat_s)


def time_torch_compile(model, args: tuple, threads: int, repeat: int = 5, min_repeat_s: float = 0.2) -> Costs:
    return torch_compile_timer(model, args, threads)(repeat, min_repeat_s)


def time_onnxruntime(model, args: tuple, threads: int, repeat: int = 5, min_repeat_s: float = 0.2) -> Costs:
    return onnxruntime_timer(model, args, threads)(repeat, min_repeat_s)


def interleaved(timers: dict[str, Callable[[], list[float]]], rounds: int
                ) -> tuple[dict[str, list[list[float]]], dict[str, str], dict[str, list[float | None]]]:
    """Time several ways of running one model side by side: `rounds` rounds, each calling every timer once
    (seconds per repeat), the order rotated from round to round so that none always runs first or after the
    same neighbour; a machine that slows down for a while slows every column alike. Answers, per timer, its
    costs round by round, the first line of the error of each timer that raised (not called again), and per
    timer the share of each round's call in which a task of this machine waited for a CPU
    (measure/contention.py; None without PSI): a slow round with no stall was slowed from outside the machine.
    The rounds hold the machine's measurement lock (measure/host_lock.py) from the first to the last."""
    names = list(timers)
    costs: dict[str, list[list[float]]] = {n: [] for n in names}
    stalls: dict[str, list[float | None]] = {n: [] for n in names}
    errors: dict[str, str] = {}
    with exclusive("timing side by side"):
        for r in range(rounds):
            for name in names[r % len(names):] + names[:r % len(names)]:
                if name in errors:
                    continue
                try:
                    with StallWatch() as watch:
                        timed = list(timers[name]())
                    costs[name].append(timed)
                    stalls[name].append(watch.share)
                except Exception as err:  # one column failing leaves the others their rounds
                    errors[name] = (str(err).splitlines() or [type(err).__name__])[0][:300]
    return costs, errors, stalls


def worst_stalls(stalls: dict[str, list[float | None]]) -> dict[str, float]:
    """Per timer, the largest stall share of its rounds (rounded to 0.1%), timers without PSI figures left out."""
    return {n: round(max(v), 3) for n, shares in stalls.items() if (v := [x for x in shares if x is not None])}


def median(costs: list[float]) -> float:
    return statistics.median(costs) if costs else float("nan")
