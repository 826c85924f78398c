"""Probe: why small kernels read faster in the schedrec measurer than in MetaSchedule's LocalRunner.

Measures the same small-kernel candidates alternately (schedrec, stock, schedrec, stock) in one run, and
once more with the stock runner's way of filling arguments (tvm.contrib.random.random_fill) in the schedrec
worker, so that order effects, argument values and the runner itself can be told apart.

Usage: python benchmarks/agreement_probe.py [--models zoo:bert_tiny] [--per-kernel 2]
       [--out benchmarks/results/<target-key>/agreement_probe.json]
Keep the machine otherwise idle while it runs.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))

from measurer_vs_stock import native_setup, sample_candidates, stock_measure  # noqa: E402
from results_dir import results_dir  # noqa: E402

from recommender.measure import MeasureSettings, Measurer  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", default="zoo:bert_tiny")
    ap.add_argument("--per-kernel", type=int, default=2)
    ap.add_argument("--out", help="default benchmarks/results/<target-key>/agreement_probe.json")
    args = ap.parse_args()
    spec, target = native_setup()
    out = args.out or str(results_dir(spec.key) / "agreement_probe.json")
    mods, labels = sample_candidates(args.models.split(","), target, args.per_kernel,
                                     keep_kind=lambda kind: kind in ("reduction", "batch_matmul", "matmul"))
    settings = MeasureSettings(repeat=5, min_repeat_ms=4)
    passes: dict[str, list] = {}
    t0 = time.perf_counter()
    for name in ("schedrec_1", "stock_1", "schedrec_2", "stock_2", "schedrec_random_fill"):
        if name.startswith("stock"):
            passes[name] = stock_measure(mods, target, settings)
            continue
        if name == "schedrec_random_fill":
            os.environ["SCHEDREC_ARG_FILL"] = "tvm_random_fill"
        with Measurer(spec.config, settings) as m:
            passes[name] = [r.median if r.ok else None for r in m.measure(mods)]
        os.environ.pop("SCHEDREC_ARG_FILL", None)

    def agreement(a: str, b: str) -> dict:
        logs = [math.log(x / y) for x, y in zip(passes[a], passes[b]) if x and y]
        return {"median_log_ratio": round(statistics.median(logs), 4),
                "median_abs_log_ratio": round(statistics.median(abs(v) for v in logs), 4), "n": len(logs)}

    report = {"candidates": len(mods), "seconds": round(time.perf_counter() - t0, 1),
              "comparisons": {f"{a} vs {b}": agreement(a, b) for a, b in (
                  ("schedrec_1", "stock_1"), ("schedrec_2", "stock_2"), ("schedrec_1", "schedrec_2"),
                  ("stock_1", "stock_2"), ("schedrec_random_fill", "schedrec_2"),
                  ("schedrec_random_fill", "stock_2"))},
              "pairs": [dict(label=lbl, **{k: v[i] for k, v in passes.items()}) for i, lbl in enumerate(labels)],
              "command": f"python benchmarks/agreement_probe.py --models {args.models} --per-kernel {args.per_kernel}"}
    os.makedirs(os.path.dirname(out), exist_ok=True)
    with open(out, "w") as f:
        json.dump(report, f, indent=1)
    print(json.dumps(report["comparisons"], indent=1))


if __name__ == "__main__":
    main()
