"""Write models/<target-key>/card.md from the bank and reference meta files and latency.json.

Usage: python scripts/make_card.py [--target native]
"""
from __future__ import annotations

import argparse
import json

from recommender.bank import bank_models, read_meta, repo_models_dir
from recommender.bank_info import model_summary
from recommender.errors import run_script
from recommender.fileio import atomic_write_text, read_json
from recommender.target import cpu_name, parse_target
from training.report import rankers_markdown


def _fmt(x: object) -> str:
    return "-" if x is None else f"{x:.2f}" if isinstance(x, float) else str(x)


def _ratio(a: object, b: object) -> str:
    return f"{a / b:.2f}" if isinstance(a, (int, float)) and isinstance(b, (int, float)) and b > 0 else "-"


def _tuned_share(meta: dict) -> str:
    """"<tuned>/<all> kernels, <p>% of FLOPs" of one bank or reference model."""
    ks = list(meta["kernels"].values())
    total = sum(k.get("flops", 0) * k.get("weight", 1) for k in ks)
    tuned = sum(k.get("flops", 0) * k.get("weight", 1) for k in ks if k.get("tuned"))
    share = f", {100 * tuned / total:.0f}% of FLOPs" if total else ""
    return f"{sum(1 for k in ks if k.get('tuned'))}/{len(ks)}{share}"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--target", default="native")
    args = ap.parse_args()
    target = parse_target(args.target)
    root = repo_models_dir() / target.key
    lines = [f"# {target.key}: bank and references", "",
             f"Target: `{json.dumps(target.config)}`; CPU: {cpu_name()}.", ""]
    coverage: dict[str, str] = {}
    for kind in ("bank", "reference"):
        if not (root / kind).is_dir():
            continue
        folders = bank_models(root / kind)
        lines += [f"## {kind} ({len(folders)} models)", "",
                  "| model | kernels | tuned (>= min FLOP share) | done | trials per kernel | records | valid | hours |",
                  "|---|---|---|---|---|---|---|---|"]
        settings, hours = None, 0.0
        for f in folders:
            s, meta = model_summary(f), read_meta(f)
            coverage[s["model"]] = _tuned_share(meta)
            settings = settings or {"measurer": meta.get("measurer"), "search": meta.get("search"),
                                    "min_flop_share": meta.get("min_flop_share")}
            lines.append(f"| {s['model']} | {s['kernels']} | {s['tuned_kernels']} | {s['done_kernels']} | "
                         f"{meta.get('trials_per_task')} | {s['records']} | {s['valid_records']} | "
                         f"{s['tuning_hours']:.2f} |")
            hours += s["tuning_hours"]
        lines += ["", f"Total tuning time: {hours:.2f} h (sum over kernels of MetaSchedule's search, measuring "
                  "included).", "", f"Settings: `{json.dumps(settings)}`", ""]
        if kind == "bank":
            held = sorted(p.name for p in (root / "heldout").glob("*") if p.is_dir()) if (root / "heldout").is_dir() else []
            if held:
                lines += [f"Held out of the bank for evaluation: {', '.join(held)} "
                          "(their exhaustive replay from the bank is in `heldout/`).", ""]
    lat_path = root / "latency.json"
    if lat_path.exists():
        lat = read_json(lat_path)
        lines += ["## Model latency (ms, batch 1, median)", "",
                  "The same input, one run per model (`python scripts/latency_table.py --redo`). Tuned TVM uses the "
                  "model's own records (bank or reference) and is the median of 7 repeats of at least 200 ms; PyTorch "
                  "and ONNX Runtime the median of 5 repeats of at least 200 ms; untuned TVM (no schedule: plain loops) the median of 3 runs. "
                  f"{_measured_with(lat, target)} Only the kernels that hold at least the minimum FLOP "
                  "share were tuned; the others run TVM's default code (plain loops), so a model with many small "
                  "kernels can stay slower than PyTorch even where its big kernels are fast. The `tuned` column says "
                  "how many kernels were tuned and what share of the model's FLOPs they hold.", "",
                  "| model | set | tuned | untuned TVM | tuned TVM | PyTorch eager | ONNX Runtime | tuned TVM / PyTorch | "
                  "tuned TVM / ORT |", "|---|---|---|---|---|---|---|---|---|"]
        for name, r in lat.items():
            lines.append(f"| {name} | {r.get('kind')} | {coverage.get(name, '-')} | {_fmt(r.get('tvm_untuned_ms'))} | "
                         f"{_fmt(r.get('tvm_tuned_ms'))} | "
                         f"{_fmt(r.get('pytorch_ms'))} | {_fmt(r.get('onnxruntime_ms'))} | "
                         f"{_ratio(r.get('tvm_tuned_ms'), r.get('pytorch_ms'))} | "
                         f"{_ratio(r.get('tvm_tuned_ms'), r.get('onnxruntime_ms'))} |")
        lines.append("")
    section = rankers_markdown(root)
    if section:
        lines += [section, ""]
    atomic_write_text(str(root / "card.md"), "\n".join(lines) + "\n")
    print(f"wrote {root / 'card.md'}")


def _measured_with(lat: dict, target: object) -> str:
    """Which target string and thread counts the latency columns used, from what each row recorded (rows
    timed before it was recorded: the script's fixed setting then, the folder's target and its cores)."""
    groups: dict[str, list[str]] = {}
    for name, r in lat.items():
        if "target" in r and "threads" in r:
            t = r["threads"]
            key = (f"TVM (both columns) with target `{json.dumps(r['target'], sort_keys=True)}` and {t['tvm']} "
                   f"threads, PyTorch with {t['pytorch']} threads, ONNX Runtime with {t['onnxruntime']} intra-op "
                   f"threads, on {r.get('cpu', 'an unnamed CPU')}")
        else:
            cores = target.config.get("num-cores", "?")
            key = (f"TVM (both columns) with this folder's target `{json.dumps(target.config, sort_keys=True)}` and "
                   f"{cores} threads, PyTorch and ONNX Runtime with {cores} threads (the script's fixed setting when "
                   f"these rows were timed, before each row recorded its own)")
        groups.setdefault(key, []).append(name)
    if len(groups) == 1:
        return f"Measured with {next(iter(groups))}."
    return " ".join(f"{', '.join(names)}: {how}." for how, names in groups.items())


if __name__ == "__main__":
    run_script(main)
