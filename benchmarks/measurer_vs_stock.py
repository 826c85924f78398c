"""Benchmark: the schedrec measurer against MetaSchedule's LocalBuilder + LocalRunner, same candidates,
same timing settings, in one run. Prints candidates per second for each, the ratio, and how well the
medians agree (median |log ratio| over candidates that both measured).

Usage: python benchmarks/measurer_vs_stock.py [--per-kernel 4]
       [--out benchmarks/results/<target-key>/measurer_vs_stock.json]
Keep the machine otherwise idle while it runs.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import time

from recommender.frontend.kernels import extract_kernels
from recommender.measure import MeasureSettings, Measurer
from recommender.frontend.model_import import import_model
from recommender.target.spec import native_target
from recommender.core.tvm_setup import load_tensor_intrinsics
from results_dir import results_dir


def candidates(kernel, target, n: int) -> list:
    """n postprocessed random points of the kernel's MetaSchedule design space."""
    from tvm.s_tir import meta_schedule as ms
    out = []
    seed = 0
    while len(out) < n and seed < 10 * n:
        ctx = ms.TuneContext(mod=kernel.mod, target=target, space_generator="post-order-apply",
                             num_threads=1, rand_state=seed)
        spaces = ctx.space_generator.generate_design_space(kernel.mod)
        sch = spaces[seed % len(spaces)]
        sch.enter_postproc()
        if all(p.apply(sch) for p in ctx.space_generator.postprocs):
            out.append(sch.mod)
        seed += 1
    return out


def stock_measure(mods: list, target, settings: MeasureSettings) -> list[float | None]:
    from tvm.s_tir import meta_schedule as ms
    # generous timeouts: with the defaults (30 s) a fresh worker's `import tvm` alone can time out here
    builder = ms.builder.LocalBuilder(timeout_sec=600)
    runner = ms.runner.LocalRunner(timeout_sec=600, evaluator_config=ms.runner.EvaluatorConfig(
        number=settings.number, repeat=settings.repeat, min_repeat_ms=settings.min_repeat_ms,
        enable_cpu_cache_flush=settings.flush_cache))
    built = builder.build([ms.builder.BuilderInput(m, target) for m in mods])
    inputs, index = [], []
    for i, (m, b) in enumerate(zip(mods, built)):
        if b.error_msg is None:
            inputs.append(ms.runner.RunnerInput(b.artifact_path, "cpu", ms.arg_info.ArgInfo.from_prim_func(m["main"])))
            index.append(i)
    out: list[float | None] = [None] * len(mods)
    for i, fut in zip(index, runner.run(inputs)):
        r = fut.result()
        if r.error_msg is None:
            out[i] = statistics.median(float(x) for x in r.run_secs)
    return out


def native_setup() -> tuple:
    """(target spec, tvm target) of this machine, with TVM's thread count pinned to its cores."""
    load_tensor_intrinsics()
    spec = native_target()
    # Same thread count for both: unset, TVM's runtime assumes hyperthreading on x86 and starts
    # logical_cores / 2 threads (1 on this 2-vCPU machine) in the stock runner's workers.
    os.environ.setdefault("TVM_NUM_THREADS", str(spec.config["num-cores"]))
    return spec, spec.tvm()


def sample_candidates(models: list[str], target, per_kernel: int, keep_kind) -> tuple[list, list[str]]:
    """`per_kernel` design-space points of one kernel per class (heaviest first) whose kind is kept."""
    mods, labels = [], []
    for model in models:
        seen = set()
        for k in extract_kernels(import_model(model, target), target):
            if k.class_key in seen or not keep_kind(k.kind):
                continue
            seen.add(k.class_key)
            for m in candidates(k, target, per_kernel):
                mods.append(m)
                labels.append(f"{model}:{k.name}:{k.kind}")
    return mods, labels


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--per-kernel", type=int, default=4)
    ap.add_argument("--models", default="zoo:resnet18,zoo:bert_tiny")
    ap.add_argument("--out", help="default benchmarks/results/<target-key>/measurer_vs_stock.json")
    args = ap.parse_args()
    spec, target = native_setup()
    out = args.out or str(results_dir(spec.key) / "measurer_vs_stock.json")
    mods, labels = sample_candidates(args.models.split(","), target, args.per_kernel,
                                     keep_kind=lambda kind: kind != "elementwise")
    settings = MeasureSettings(repeat=5, min_repeat_ms=4)
    classes = sorted({lbl.split(":")[-1] for lbl in labels})
    print(f"{len(mods)} candidates from {len({l.rsplit(':', 1)[0] for l in labels})} kernels, kinds {classes}")

    t0 = time.perf_counter()
    with Measurer(spec.config, settings) as m:
        ours_results = m.measure(mods)
    ours_s = time.perf_counter() - t0
    ours = [r.median if r.ok else None for r in ours_results]

    t0 = time.perf_counter()
    stock = stock_measure(mods, target, settings)
    stock_s = time.perf_counter() - t0

    both = [(a, b) for a, b in zip(ours, stock) if a and b]
    logs = [abs(math.log(a / b)) for a, b in both]
    report = {
        "candidates": len(mods), "kinds": classes, "settings": settings.to_json(),
        "tvm_num_threads": os.environ["TVM_NUM_THREADS"],
        "schedrec": {"seconds": round(ours_s, 2), "per_second": round(len(mods) / ours_s, 3),
                     "measured": sum(x is not None for x in ours)},
        "stock": {"seconds": round(stock_s, 2), "per_second": round(len(mods) / stock_s, 3),
                  "measured": sum(x is not None for x in stock)},
        "throughput_ratio": round(stock_s / ours_s, 2),
        "median_abs_log_ratio": round(statistics.median(logs), 4) if logs else None,
        "within_10_percent": round(sum(l < math.log(1.1) for l in logs) / len(logs), 3) if logs else None,
        "pairs": [{"label": l, "schedrec_s": a, "stock_s": b} for l, a, b in zip(labels, ours, stock)],
        "command": "python benchmarks/measurer_vs_stock.py " + f"--per-kernel {args.per_kernel} --models {args.models}",
    }
    os.makedirs(os.path.dirname(out), exist_ok=True)
    with open(out, "w") as f:
        json.dump(report, f, indent=1)
    print(json.dumps({k: v for k, v in report.items() if k != "pairs"}, indent=1))


if __name__ == "__main__":
    main()
