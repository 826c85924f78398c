"""Probe: where a candidate's build time goes (CPU seconds, so other load on the machine does not inflate
it): TVM lowering (`tvm.compile`), LLVM object emission (`export_library`, in-process) and the linker
(child process); then the same candidates compiled as one module, to see whether batching builds helps.

Usage: python benchmarks/build_cost_probe.py [--model zoo:resnet18] [--n 8]
       [--out benchmarks/results/<target-key>/build_cost_probe.json]
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import tempfile

from measurer_vs_stock import candidates, native_setup
from results_dir import results_dir

from recommender.frontend.kernels import extract_kernels
from recommender.frontend.model_import import import_model


def _cpu() -> tuple[float, float]:
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime, kids.ru_utime + kids.ru_stime


def main() -> None:
    import tvm
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="zoo:resnet18")
    ap.add_argument("--n", type=int, default=8)
    ap.add_argument("--out", help="default benchmarks/results/<target-key>/build_cost_probe.json")
    args = ap.parse_args()
    spec, target = native_setup()
    kernel = max(extract_kernels(import_model(args.model, target), target), key=lambda k: k.flops)
    mods = candidates(kernel, target, args.n)
    scratch = tempfile.mkdtemp()
    one = {"lower": 0.0, "emit": 0.0, "link": 0.0}
    for i, mod in enumerate(mods):
        s0, c0 = _cpu()
        lib = tvm.compile(mod, target=target)
        s1, _ = _cpu()
        lib.export_library(os.path.join(scratch, f"{i}.so"))
        s2, c2 = _cpu()
        one["lower"] += s1 - s0
        one["emit"] += s2 - s1
        one["link"] += c2 - c0
    s0, c0 = _cpu()
    batch = tvm.IRModule({f"cand{i}": m["main"].with_attr("global_symbol", f"cand{i}") for i, m in enumerate(mods)})
    lib = tvm.compile(batch, target=target)
    s1, _ = _cpu()
    lib.export_library(os.path.join(scratch, "all.so"))
    s2, c2 = _cpu()
    n = len(mods)
    result = {"model": args.model, "kernel": kernel.name, "candidates": n,
              "one_by_one_cpu_s_per_candidate": {k: round(v / n, 3) for k, v in one.items()},
              "batched_cpu_s_per_candidate": {"lower": round((s1 - s0) / n, 3), "emit": round((s2 - s1) / n, 3),
                                              "link": round((c2 - c0) / n, 3)}}
    print(json.dumps(result, indent=1))
    with open(args.out or results_dir(spec.key) / "build_cost_probe.json", "w", encoding="utf-8") as f:
        json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
