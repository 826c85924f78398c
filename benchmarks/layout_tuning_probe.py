"""Do convs in NHWC layout tune faster than the NCHW convs the bank holds, at the same trials?

The bank's convs are NCHW (as PyTorch and ONNX export them). MetaSchedule's x86 schedules then vectorize
along the output row, which wastes lanes on 14- and 7-wide rows and broadcasts one weight per FMA. In NHWC
with OHWI weights the output channels are contiguous: a schedule can vectorize along them and reuse one
input value over a vector of weights, as oneDNN's blocked layouts do. This converts the model's convs with
Relax's ConvertLayout (`{"relax.nn.conv2d": ["NHWC", "OHWI"]}`) before the usual lowering, pairs each of
the heaviest NCHW conv kernels with its NHWC twin (same weight, same FLOPs), tunes both with the bank's
search and trial count, and reports each search's best GFLOP/s next to PyTorch's conv on the same shapes.

    python benchmarks/layout_tuning_probe.py [--model zoo:resnet50] [--kernels 2] [--trials 64]
writes benchmarks/results/<target-key>/layout_tuning.json and .md; resumable (finished searches are kept in
out/layout_tuning/); keep the machine otherwise idle.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from recommender.core.fileio import atomic_write_json, atomic_write_text  # noqa: E402

NHWC = {"relax.nn.conv2d": ["NHWC", "OHWI"]}


def conv_kernels(spec: str, target: object, layout: str) -> list:
    """The model's conv2d kernels, lowered as the bank lowers them, with its convs in `layout`."""
    from tvm import relax

    from recommender.frontend.kernels import extract_kernels
    from recommender.frontend.model_import import ImportedModel, main_inputs, load_relax, lower_for_tuning
    mod, name = load_relax(spec)
    if layout == "NHWC":
        mod = relax.transform.ConvertLayout(NHWC)(mod)
    mod = lower_for_tuning(mod, target, spec)
    names, shapes, dtypes = main_inputs(mod)
    model = ImportedModel(name=name, spec=spec, mod=mod, input_names=names, input_shapes=shapes, input_dtypes=dtypes)
    return [k for k in extract_kernels(model, target) if k.class_key.startswith("conv2d/")]


def main() -> None:
    from packed_tuning_probe import search_kept
    from peak_gflops import measured_peak, torch_seconds
    from results_dir import results_dir, run_header

    from recommender.bank.tune import quiet_metaschedule
    from recommender.measure import Measurer
    from recommender.target.spec import parse_target
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--target", default="native")
    ap.add_argument("--model", default="zoo:resnet50")
    ap.add_argument("--kernels", type=int, default=2, help="the heaviest this many conv2d kernels")
    ap.add_argument("--trials", type=int, default=64, help="measured trials per search")
    args = ap.parse_args()
    quiet_metaschedule()
    target = parse_target(args.target)
    tt = target.tvm()
    nchw = sorted(conv_kernels(args.model, tt, "NCHW"), key=lambda k: -k.total_flops)[:args.kernels]
    nhwc = conv_kernels(args.model, tt, "NHWC")
    model = args.model.split(":")[-1]
    work = ROOT / "out" / "layout_tuning" / target.key / model
    res = results_dir(target.key)
    threads = int(target.config.get("num-cores", 1))
    out = {**run_header(target), "model": model,
           "trials": args.trials,
           "peak_gflops": measured_peak(target.key), "kernels": []}
    with Measurer(target.config) as measurer:
        for k in nchw:
            twin = min((t for t in nhwc if t.weight == k.weight), key=lambda t: abs(t.flops - k.flops))
            row = {"kernel": k.name, "nhwc_kernel": twin.name, "weight": k.weight, "gflop": round(k.flops / 1e9, 4),
                   "shapes": [list(s) for s, _ in k.args[:2]], "nhwc_shapes": [list(s) for s, _ in twin.args[:2]]}
            for layout, kern in (("nchw", k), ("nhwc", twin)):
                row[layout] = search_kept(kern, tt, measurer, work / k.name / layout, args.trials)
                print(f"{k.name} {layout}: {row[layout]}", file=sys.stderr, flush=True)
            t = torch_seconds("conv2d", [{"shape": list(s), "dtype": d} for s, d in k.args], threads)
            row["pytorch_gflops"] = round(k.flops / t / 1e9, 1)
            out["kernels"].append(row)
    atomic_write_json(str(res / "layout_tuning.json"), out)
    lines = [f"# Convs tuned in NHWC against NCHW ({target.key}, {out['cpu']}, {threads} threads, {out['date']})", "",
             f"`python benchmarks/layout_tuning_probe.py --model {args.model} --kernels {args.kernels} --trials "
             f"{args.trials}`: each conv kernel as the bank holds it (NCHW, OIHW weights) and its twin after "
             "Relax's ConvertLayout to NHWC (OHWI weights), each tuned by the bank's search "
             f"({args.trials} trials, XGBoost cost model); GFLOP/s of each search's best record; PyTorch's conv on "
             f"the same shapes timed after; FMA peak {out['peak_gflops']} GFLOP/s "
             f"(benchmarks/results/{target.key}/peak_gflops.md).",
             "", "| kernel | weight | NCHW shapes | NCHW GFLOP/s | NHWC GFLOP/s | NHWC / NCHW | PyTorch GFLOP/s |",
             "|---|---|---|---|---|---|---|"]
    for r in out["kernels"]:
        p, q = r["nchw"]["gflops"], r["nhwc"]["gflops"]
        lines.append(f"| {r['kernel'][:40]} | {r['weight']} | {' '.join('x'.join(map(str, s)) for s in r['shapes'])} "
                     f"| {p} | {q} | {q / p if p and q else float('nan'):.2f} | {r['pytorch_gflops']} |")
    atomic_write_text(str(res / "layout_tuning.md"), "\n".join(lines) + "\n")
    print(f"wrote {res / 'layout_tuning.json'} and .md", file=sys.stderr)


if __name__ == "__main__":
    main()
