"""Time every call a compiled Relax model makes (runs inside a measurement worker).

TVM 0.27's Relax VM has no profiler of its own; `VirtualMachine.set_instrument` calls a hook before and after
each Call instruction (kernels, `vm.builtin.*` functions, closures). Two VMs over the same library run in
alternation: a plain one (the model's time) and an instrumented one (each call's time and the whole run's),
so the hook's own cost shows as the difference of the two.
"""
from __future__ import annotations

import statistics
import time


def profile_library(lib_path: str, args_info: list, runs: int = 20, warmup: int = 3, seed: int = 0) -> dict:
    """Run the model `runs` times plain and `runs` times instrumented, interleaved.

    Returns {"plain_s": [run seconds], "instrumented_s": [run seconds], "calls": [{"symbol", "depth",
    "seconds": [one per instrumented run]}]} with the calls in the order the VM makes them (the same every run
    for a model without control flow; a run whose sequence differs raises)."""
    import tvm
    from tvm import relax

    from ..measure.worker import random_args
    dev = tvm.cpu()
    lib = tvm.runtime.load_module(lib_path)
    plain, traced = relax.VirtualMachine(lib, dev), relax.VirtualMachine(lib, dev)
    args = random_args(args_info, seed, dev)
    open_calls: list[float] = []
    run_calls: list[tuple[str, int, float]] = []

    def hook(func: object, symbol: str, before_run: bool, ret_value: object, *call_args: object) -> int:
        now = time.perf_counter()
        if before_run:
            open_calls.append(now)
        else:
            start = open_calls.pop()
            run_calls.append((str(symbol), len(open_calls), now - start))
        return int(relax.VMInstrumentReturnKind.NO_OP)

    traced.set_instrument(hook)
    for _ in range(max(1, warmup)):
        plain["main"](*args)
        traced["main"](*args)
    plain_s, traced_s, sequence, seconds = [], [], None, []
    for _ in range(runs):
        t0 = time.perf_counter()
        plain["main"](*args)
        plain_s.append(time.perf_counter() - t0)
        run_calls.clear()
        t0 = time.perf_counter()
        traced["main"](*args)
        traced_s.append(time.perf_counter() - t0)
        # the hook records a call when it ends: back in start order (a parent ends after its children)
        this = [(s, d) for s, d, _ in run_calls]
        if sequence is None:
            sequence, seconds = this, [[] for _ in this]
        elif this != sequence:
            raise RuntimeError("the model made different calls from one run to the next (control flow?): "
                               "a per-call profile needs the same sequence every run")
        for i, (_, _, sec) in enumerate(run_calls):
            seconds[i].append(sec)
    return {"plain_s": plain_s, "instrumented_s": traced_s,
            "calls": [{"symbol": s, "depth": d, "seconds": sec} for (s, d), sec in zip(sequence or [], seconds)],
            "median_plain_s": statistics.median(plain_s)}
