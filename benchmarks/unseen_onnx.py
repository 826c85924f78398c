"""What a user gets for an ONNX model of an architecture that no bank model has: each architecture of
tests/onnx_arch.py at a realistic size, exported here with torch.onnx (dynamic batch dim, as exporters write
it), transferred with the shipped default (`schedrec transfer --budget-per-kernel K` from the bank of this
CPU, or the nearest one, ranked by its lgbm), then timed side by side with ONNX Runtime on the same file and
PyTorch eager on the module it was exported from: 3 rounds, each timing every column (3 repeats of at least
200 ms), the order rotated; a column's figure is the median of its 9 repeats.

    python benchmarks/unseen_onnx.py [--models yolo,swin,...] [--k 2] [--redo]
writes benchmarks/results/<target-key>/unseen_onnx.json and .md (resumable: models already there are
skipped unless --redo, which transfers them afresh; a killed transfer resumes from its rows in
out/unseen_onnx/<model>/).
Keep the machine otherwise idle while it runs.
"""
from __future__ import annotations

import argparse
import contextlib
import shutil
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from recommender.core.errors import run_script  # noqa: E402
from recommender.core.fileio import atomic_write_json, atomic_write_text, read_json  # noqa: E402
from results_dir import results_dir  # noqa: E402

# (builder in tests/onnx_arch.py, its arguments): sizes of the models these architectures come from
SIZES = {
    "yolo": ("yolo", dict(ch=32, image=320)),
    "swin": ("swin", dict(d=96, heads=3, grid=56, window=7)),
    "t5": ("t5", dict(seq=128, vocab=8192, d=256, heads=4, ff=1024, layers=4, buckets=32)),
    "conformer": ("conformer", dict(d=144, time=200)),
    "style_transfer": ("style_transfer", dict(ch=32, image=256)),
    "gpt": ("gpt", dict(seq=128, vocab=8192, d=256, heads=4, layers=4)),
    "shufflenet": ("shufflenet", dict(ch=116, image=224)),
    "squeezenet": ("squeezenet", dict(image=224)),
    "espcn": ("espcn", dict(ch=64, image=224)),
    "diffusion": ("diffusion", dict(ch=256, image=32, embed=256)),
    "aspp": ("aspp", dict(image=256, ch=128, branch=128, classes=21)),
    "activations": ("activations", dict(ch=64, image=112)),
    "r3d": ("r3d", dict(ch=64, frames=8, image=112)),  # R3D-18's stem and first two stages
    "lraspp": ("lraspp", dict(ch=16, image=256, classes=21)),  # LR-ASPP on a MobileNetV3-sized backbone
}
DEFAULT = "yolo,swin,t5,conformer,style_transfer"


def build(name: str):
    from tests.onnx_arch import ARCHITECTURES, SEGMENTATION_ARCHITECTURES, VIDEO_ARCHITECTURES
    builder, kw = SIZES[name]
    return {**ARCHITECTURES, **VIDEO_ARCHITECTURES, **SEGMENTATION_ARCHITECTURES}[builder](**kw)


def time_side_by_side(spec: str, database: Path, torch_model, torch_args: tuple, target, cores: int) -> dict:
    """Medians (ms) and round medians of schedrec's build, ONNX Runtime and PyTorch eager, interleaved."""
    from recommender.compare.baselines import interleaved, median, onnx_file_timer, pytorch_timer, worst_stalls
    from recommender.measure import MeasureSettings, Measurer
    from recommender.frontend.model_import import import_model, split_spec
    from scripts.latency_table import MIN_REPEAT_S, REPEAT, ROUNDS, seconds_timer, tvm_timer
    model = import_model(spec, target.tvm())
    inputs = list(zip(model.input_shapes, model.input_dtypes))
    settings = MeasureSettings(repeat=REPEAT, min_repeat_ms=round(MIN_REPEAT_S * 1000))
    row: dict = {"errors": {}}
    with Measurer(target.config, settings) as measurer, contextlib.ExitStack() as stack:
        built = stack.enter_context(measurer.model_library(model.mod, str(database)))
        timers = {"onnxruntime": seconds_timer(onnx_file_timer(split_spec(spec)[0],
                                                               [a.numpy() for a in torch_args], cores)),
                  "pytorch": seconds_timer(pytorch_timer(torch_model, torch_args, cores))}
        if built.ok:
            timers["schedrec"] = tvm_timer(measurer, built.path, inputs)
        else:
            row["errors"]["schedrec"] = built.error[:300]
        costs, failed, stalls = interleaved(timers, ROUNDS)
    row["errors"].update(failed)
    row["stall_share"] = worst_stalls(stalls)
    for column, rounds in costs.items():
        if rounds and column not in failed:
            row[f"{column}_ms"] = round(median([c for r in rounds for c in r]) * 1e3, 3)
            row.setdefault("round_medians_ms", {})[column] = [round(median(r) * 1e3, 3) for r in rounds]
    row["timing"] = {"rounds": ROUNDS, "repeats": REPEAT, "min_repeat_s": MIN_REPEAT_S}
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default=DEFAULT, help=f"comma-separated, of {', '.join(SIZES)} (default: {DEFAULT})")
    ap.add_argument("--k", type=int, default=2, help="candidates measured per kernel (2, as make demo)")
    ap.add_argument("--redo", action="store_true", help="transfer afresh and time again the models already there")
    args = ap.parse_args()
    from tests.onnx_nets import export_onnx

    def export(name: str, work: Path) -> tuple[str, object, tuple, dict]:
        torch_model, torch_args = build(name)
        spec = export_onnx(torch_model, torch_args, str(work / f"{name}.onnx"), {"x0": {0: "batch"}})
        return spec, torch_model, torch_args, {"size": SIZES[name][1]}
    run_transfers("unseen_onnx", args.models, list(SIZES), args.k, args.redo, export, markdown)


def run_transfers(name: str, models: str, known: list[str], k: int, redo: bool, export, markdown,
                  header: dict | None = None) -> None:
    """For each of the comma-separated `models` (of `known`) not yet in benchmarks/results/<key>/<name>.json
    (all with `redo`): `export(model, work folder)` -> (ONNX spec, torch module, its inputs, fields of the row),
    the shipped default's transfer (k per kernel), `time_side_by_side`; the row is written to <name>.json and
    the table, `markdown(results)`, to <name>.md after each model (resumable)."""
    from recommender.core.errors import SchedrecError
    from recommender.transfer.recommend import load_selector
    from recommender.target.spec import cpu_name, parse_target
    from recommender.target.folders import resolve
    from recommender.transfer.budgeted import budgeted_transfer
    names = [m for m in models.split(",") if m]
    unknown = sorted(set(names) - set(known))
    if unknown:
        raise SchedrecError(f"unknown model(s) {', '.join(unknown)}; known: {', '.join(known)}")
    target = parse_target("native")
    bank_folder, note = resolve(ROOT / "models", target.key)
    rankers_folder, rnote = resolve(ROOT / "models", target.key, "rankers")
    for line in {note, rnote} - {None, ""}:
        print(line, file=sys.stderr)
    selector = load_selector("lgbm", rankers_folder, bank_folder / "bank")
    cores = int(target.config.get("num-cores", 1))
    out = results_dir(target.key)
    path = out / f"{name}.json"
    results = read_json(path) if path.exists() else {}
    results.update({"target_key": target.key, "target": target.config, "cpu": cpu_name(),
                    "bank": str(bank_folder.relative_to(ROOT) / "bank"), "selector": f"lgbm of {rankers_folder.name}",
                    "threads": cores, **(header or {}), "command": f"python benchmarks/{name}.py"})
    rows = results.setdefault("models", {})
    work = ROOT / "out" / name
    work.mkdir(parents=True, exist_ok=True)
    for model in names:
        if model in rows and not redo:
            continue
        t0 = time.time()
        spec, torch_model, torch_args, fields = export(model, work)
        run_dir = work / model
        if model in rows:  # --redo of a finished row: a fresh transfer, not a resume of the last one's rows
            shutil.rmtree(run_dir, ignore_errors=True)
        report = budgeted_transfer(spec, target, bank_folder / "bank", run_dir, selector, per_kernel=k,
                                   untuned=False, recommender=selector.name, tune_missing=32)
        row = time_side_by_side(spec, run_dir / "database", torch_model, torch_args, target, cores)
        t = report["totals"]
        row.update({**fields, "kernels": t["kernels"], "search_s": t["search_s"],
                    "flop_coverage_transferred": round(t["flop_coverage_transferred"], 4),
                    "flop_coverage_chosen": round(t["flop_coverage_chosen"], 4),
                    "time_share_default": t["time_share_default"], "kernels_via_samples": t["kernels_via_samples"],
                    "kernels_short_tuned": t.get("kernels_short_tuned", 0),
                    "flop_share_chosen_rule": round(t.get("flop_share_chosen_rule", 0.0), 4),
                    "per_kernel": k, "date": time.strftime("%Y-%m-%d"), "seconds": round(time.time() - t0, 1)})
        rows[model] = row
        atomic_write_json(str(path), results)
        atomic_write_text(str(out / f"{name}.md"), markdown(results))
        print(f"{model}: schedrec {row.get('schedrec_ms')} ms, ONNX Runtime {row.get('onnxruntime_ms')} ms, "
              f"PyTorch {row.get('pytorch_ms')} ms (search {row['search_s']:.0f} s)", flush=True)
    print(f"wrote {path} and .md")


def markdown(results: dict) -> str:
    def ratio(a, b):
        return f"{a / b:.2f}" if a and b else "-"
    lines = [f"# ONNX models of architectures outside the bank ({results['target_key']}, {results['cpu']})", "",
             f"`{results['command']}`. Exported here with torch.onnx (dynamic batch dim), transferred from "
             f"`{results['bank']}` with {results['selector']} (top k per kernel measured), then schedrec's build, "
             f"ONNX Runtime on the same file and PyTorch eager on the module timed side by side, "
             f"{results['threads']} threads each, target `{results['target']}`.", "",
             "| model | size | kernels | FLOPs transferred | plain loops (time) | search s | schedrec ms | ONNX Runtime ms "
             "| PyTorch ms | schedrec / ORT | schedrec / PyTorch |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    for name, r in results["models"].items():
        size = ", ".join(f"{k}={v}" for k, v in r["size"].items())
        lines.append(f"| {name} | {size} | {r['kernels']} | {r['flop_coverage_transferred']:.1%} | "
                     f"{r['time_share_default']:.1%} | {r['search_s']:.0f} | {r.get('schedrec_ms', '-')} | "
                     f"{r.get('onnxruntime_ms', '-')} | {r.get('pytorch_ms', '-')} | "
                     f"{ratio(r.get('schedrec_ms'), r.get('onnxruntime_ms'))} | "
                     f"{ratio(r.get('schedrec_ms'), r.get('pytorch_ms'))} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    run_script(main)
