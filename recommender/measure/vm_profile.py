"""Time every call a compiled Relax model makes (runs inside a measurement worker).

TVM 0.27's Relax VM has no profiler of its own; `VirtualMachine.set_instrument` calls a hook before and after
each Call instruction (kernels, `vm.builtin.*` functions, closures). Two VMs over the same library run in
alternation: a plain one (the model's time) and an instrumented one (each call's time and the whole run's),
so the hook's own cost shows as the difference of the two.

`summarize` turns a profile into rows, one per called symbol (a kernel is called once per use; its row sums the
uses):
- kind `kernel`: a kernel with a database record, with the record's isolated time x calls beside its time in
  the model (the difference is what running inside the model costs it: cold caches, other threads' state);
- kind `kernel, no record`: a kernel the database did not schedule (MetaSchedule's default schedule);
- kind `vm builtin`: the VM's own functions (allocation, shape checks, reshapes, copies);
- kind `other`: anything else the VM calls (closures, packed functions);
- `between calls`: the instrumented run's time outside any top-level call (VM dispatch between instructions,
  the hook's own cost included: `hook overhead` estimates it from the plain runs).

With `cold` times (`schedrec profile --cold`: each recorded kernel timed alone once more, one call a repeat,
every argument but the first flushed from the caches before each call, `COLD`), a kernel row also has
`cold_s`: in the model a kernel reads its weights once, from memory, where the recorded (warm) timing calls it
over and over with everything in cache.
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

    from .worker import random_args
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
            "calls": [{"symbol": s, "depth": d, "seconds": sec} for (s, d), sec in zip(sequence or [], seconds)]}


KERNEL, UNRECORDED, BUILTIN, OTHER = "kernel", "kernel, no record", "vm builtin", "other"
# a cold timing: one call a repeat, the caches flushed of every argument but the first (the input activation,
# which the previous kernel just wrote) before each call (TVM's cache_flush_cpu_non_first_arg)
COLD = {"repeat": 15, "number": 1, "min_repeat_ms": 0, "flush_cache": True}


def _kind(symbol: str, kernels: set[str], recorded: dict[str, float]) -> str:
    if symbol in recorded:
        return KERNEL
    if symbol in kernels:
        return UNRECORDED
    return BUILTIN if symbol.startswith("vm.builtin.") else OTHER


PREPACKED = "_prepacked"  # what relax.transform.SplitLayoutRewritePreproc appends to a kernel it moves packing out of


def kernel_symbol(symbol: str, kernels: set[str], recorded: dict[str, float]) -> str:
    """The model's kernel a called symbol runs: a kernel whose weight packing a build moved out
    (`measure.worker.pack_weights_ahead`: packed tiles, --pack-weights) is called as `<kernel>_prepacked`."""
    base = symbol[:-len(PREPACKED)] if symbol.endswith(PREPACKED) else symbol
    return base if base != symbol and (base in recorded or base in kernels) else symbol


def summarize(raw: dict, kernels: set[str], recorded: dict[str, float], cold: dict[str, float] | None = None) -> dict:
    """The per-symbol rows and the totals of one profile (`profile_library`'s output); `kernels` are the
    model's PrimFunc names, `recorded` the database's isolated seconds per kernel, `cold` (optional) each recorded
    kernel's isolated seconds with cold caches. Times are medians over the runs, per run of the model."""
    rows: dict[str, dict] = {}
    top_level = 0.0
    for call in raw["calls"]:
        med = statistics.median(call["seconds"])
        symbol = kernel_symbol(call["symbol"], kernels, recorded)
        kind = _kind(symbol, kernels, recorded)
        row = rows.setdefault(symbol, {"symbol": symbol, "kind": kind, "calls": 0, "model_s": 0.0})
        row["calls"] += 1
        row["model_s"] += med
        if call["depth"] == 0:
            top_level += med
    for row in rows.values():
        if row["kind"] == KERNEL:
            row["isolated_s"] = recorded[row["symbol"]] * row["calls"]
            if cold is not None and row["symbol"] in cold:
                row["cold_s"] = cold[row["symbol"]] * row["calls"]
    plain = statistics.median(raw["plain_s"])
    traced = statistics.median(raw["instrumented_s"])
    by_kind = {k: sum(r["model_s"] for r in rows.values() if r["kind"] == k)
               for k in (KERNEL, UNRECORDED, BUILTIN, OTHER)}
    return {
        "rows": sorted(rows.values(), key=lambda r: -r["model_s"]),
        "totals": {"model_s": plain, "instrumented_s": traced, "hook_overhead_s": traced - plain,
                   "calls_per_run": len(raw["calls"]), "between_calls_s": max(0.0, traced - top_level),
                   "kernels_isolated_s": sum(r.get("isolated_s", 0.0) for r in rows.values()),
                   **({"kernels_cold_s": sum(r.get("cold_s", 0.0) for r in rows.values()),
                       "kernels_without_cold_time": sorted(r["symbol"] for r in rows.values()
                                                           if r["kind"] == KERNEL and "cold_s" not in r)}
                      if cold is not None else {}),
                   **{f"{k.replace(', ', '_').replace(' ', '_')}_s": v for k, v in by_kind.items()}},
        "runs": len(raw["plain_s"]), "stall_share": raw.get("stall_share"),
    }


def gap_lines(summary: dict) -> list[str]:
    """The model's time split into what its kernels take in isolation and everything else, in words."""
    t = summary["totals"]
    ms = lambda s: f"{s * 1e3:.2f} ms"  # noqa: E731
    per_call = t["hook_overhead_s"] / max(1, t["calls_per_run"])
    return [
        f"model {ms(t['model_s'])} per run (median of {summary['runs']} plain runs); instrumented "
        f"{ms(t['instrumented_s'])}: the hook costs {ms(t['hook_overhead_s'])} ({per_call * 1e6:.1f} us per call, "
        f"{t['calls_per_run']} calls)",
        f"kernels with a record: {ms(t['kernel_s'])} in the model vs {ms(t['kernels_isolated_s'])} measured "
        f"alone; kernels without a record {ms(t['kernel_no_record_s'])}; VM builtins {ms(t['vm_builtin_s'])}; "
        f"other calls {ms(t['other_s'])}; between calls {ms(t['between_calls_s'])} (hook included)",
        f"outside the recorded kernels' isolated times: {ms(t['model_s'] - t['kernels_isolated_s'])} "
        f"({(t['model_s'] - t['kernels_isolated_s']) / t['model_s']:.0%} of the model)",
    ] + ([f"the same kernels alone with cold caches (every argument but the first flushed before each call): "
          f"{ms(t['kernels_cold_s'])}, so the model minus them is {ms(t['model_s'] - t['kernels_cold_s'])} "
          f"({(t['model_s'] - t['kernels_cold_s']) / t['model_s']:.0%})"
          + (f"; {len(t['kernels_without_cold_time'])} kernel(s) failed the cold timing"
             if t["kernels_without_cold_time"] else "")] if "kernels_cold_s" in t else [])
