"""Does a search that may pack the weights find faster convs than one that may not, at the same trials?

The bank is tuned on kernels as Relax extracts them: the conv's weight keeps its OIHW layout, so a schedule
that vectorizes over output channels reads the weight with a stride. Marking the weights layout-free lets
MetaSchedule's RewriteLayout postprocessor pack them in the order the schedule's loops read them (the packing
runs once, folded into the model's constants at build; the measurer times the kernel without it). This
tunes each of the heaviest conv kernels of a model twice with the same evolutionary search and trial count,
once as extracted and once with layout-free weights, and reports each search's best latency and GFLOP/s
next to PyTorch's conv on the same shapes and the CPU's FMA peak (benchmarks/results/<target-key>/peak_gflops.json).

    python benchmarks/packed_tuning_probe.py [--model resnet50] [--kernels 3] [--trials 64]
writes benchmarks/results/<target-key>/packed_tuning.json and .md; resumable (each finished search is kept in
out/packed_tuning/); keep the machine otherwise idle.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from recommender.core.fileio import atomic_write_json, atomic_write_text  # noqa: E402

VARIANTS = ("plain", "packed")


def tune_once(kernel: object, target: object, measurer: object, work: Path, trials: int) -> dict:
    """`trials` trials of the bank's search on `kernel` into a fresh database under `work`; its best."""
    from tvm.s_tir import meta_schedule as ms

    from recommender.bank.tune import kernel_records, search_kernel
    work.mkdir(parents=True, exist_ok=True)
    db = ms.database.JSONDatabase(work_dir=str(work))
    t0 = time.time()
    search_kernel(kernel, target, measurer, str(work), db, trials)
    n, valid, best = kernel_records(db, kernel.mod)
    return {"trials": n, "valid": valid, "best_s": best, "search_s": round(time.time() - t0, 1),
            "gflops": round(kernel.flops / best / 1e9, 1) if best else None}


def search_kept(kernel: object, target: object, measurer: object, work: Path, trials: int) -> dict:
    """tune_once into `work`, its result kept in work/result.json: a rerun reads it instead of searching."""
    done = work / "result.json"
    if done.exists():
        return json.loads(done.read_text())
    result = tune_once(kernel, target, measurer, work, trials)
    atomic_write_json(str(done), result)
    return result


def main() -> None:
    from peak_gflops import measured_peak, torch_seconds
    from results_dir import results_dir, run_header

    from recommender.bank.tune import quiet_metaschedule
    from recommender.frontend.kernels import extract_kernels
    from recommender.measure import Measurer
    from recommender.frontend.model_import import import_model
    from recommender.target.spec import parse_target
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--target", default="native")
    ap.add_argument("--model", default="zoo:resnet50")
    ap.add_argument("--kernels", type=int, default=3, help="the heaviest this many conv2d kernels")
    ap.add_argument("--trials", type=int, default=64, help="measured trials per search")
    args = ap.parse_args()
    quiet_metaschedule()
    target = parse_target(args.target)
    tt = target.tvm()
    plain = {k.name: k for k in extract_kernels(import_model(args.model, tt), tt)}
    # marking renames a kernel by a trailing "1" (a new PrimFunc with the attribute)
    packed = {(k.name[:-1] if k.name[:-1] in plain else k.name): k
              for k in extract_kernels(import_model(args.model, tt, pack_weights=True), tt)}
    heavy = sorted((k for k in plain.values() if k.class_key.startswith("conv2d/") and k.name in packed),
                   key=lambda k: -k.total_flops)[:args.kernels]
    model = args.model.split(":")[-1]
    work = ROOT / "out" / "packed_tuning" / target.key / model
    res = results_dir(target.key)
    out = {**run_header(target), "model": model,
           "trials": args.trials,
           "peak_gflops": measured_peak(target.key), "kernels": []}
    threads = int(target.config.get("num-cores", 1))
    with Measurer(target.config) as measurer:
        for k in heavy:
            row = {"kernel": k.name, "weight": k.weight, "gflop": round(k.flops / 1e9, 4),
                   "shapes": [list(s) for s, _ in k.args[:2]]}
            for variant, kern in (("plain", k), ("packed", packed[k.name])):
                row[variant] = search_kept(kern, tt, measurer, work / k.name / variant, args.trials)
                print(f"{k.name} {variant}: {row[variant]}", file=sys.stderr, flush=True)
            t = torch_seconds("conv2d", [{"shape": list(s), "dtype": d} for s, d in k.args], threads)
            row["pytorch_gflops"] = round(k.flops / t / 1e9, 1)
            out["kernels"].append(row)
    atomic_write_json(str(res / "packed_tuning.json"), out)
    lines = [f"# Tuning with packed weights against tuning without ({target.key}, {out['cpu']}, {threads} threads, "
             f"{out['date']})", "",
             f"`python benchmarks/packed_tuning_probe.py --model {args.model} --kernels {args.kernels} --trials "
             f"{args.trials}`: each kernel tuned twice by the bank's search ({args.trials} trials, XGBoost cost "
             "model), as extracted (*plain*) and with its weights layout-free (*packed*, RewriteLayout; timed "
             "without the packing, which runs once at build). GFLOP/s of each search's best record; PyTorch's "
             f"conv on the same shapes timed after; FMA peak {out['peak_gflops']} GFLOP/s "
             f"(benchmarks/results/{target.key}/peak_gflops.md).", "",
             "| kernel | weight | shapes | plain GFLOP/s | packed GFLOP/s | packed / plain | PyTorch GFLOP/s | "
             "search s (plain, packed) |", "|---|---|---|---|---|---|---|---|"]
    for r in out["kernels"]:
        p, q = r["plain"]["gflops"], r["packed"]["gflops"]
        lines.append(f"| {r['kernel'][:40]} | {r['weight']} | {' '.join('x'.join(map(str, s)) for s in r['shapes'])} "
                     f"| {p} | {q} | {q / p if p and q else float('nan'):.2f} | {r['pytorch_gflops']} | "
                     f"{r['plain']['search_s']}, {r['packed']['search_s']} |")
    atomic_write_text(str(res / "packed_tuning.md"), "\n".join(lines) + "\n")
    print(f"wrote {res / 'packed_tuning.json'} and .md", file=sys.stderr)


if __name__ == "__main__":
    main()
