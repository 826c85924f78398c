"""For every bank and reference model of a target, time the same input with untuned TVM, tuned TVM (the
model's own best records in the bank), schedrec's output, PyTorch eager and ONNX Runtime, in one run. Writes
models/<target-key>/latency.json (resumable: models already in it are skipped unless --redo).

schedrec's output is what a user gets for the model as if it were new: budgeted transfer at --k candidates
per kernel from the bank's other models, ranked by lgbm fitted without the model (leave one model out;
models outside the matrix use the shipped ranker), with design-space samples where no donor replays. Its
runs live in models/<target-key>/latency/<model>/ (resumable; a finished one is reused and only re-timed; its
database is rebuilt from the committed rows where it is missing).

Usage: python scripts/latency_table.py [--target native] [--models resnet18,...] [--redo] [--fresh] [--k 2]
Keep the machine otherwise idle while it runs. Tuned TVM and schedrec: median of 7 repeats of at least 200 ms;
PyTorch and ONNX Runtime: median of 5 repeats of at least 200 ms; untuned TVM (plain loops, seconds per
inference on big models): median of 3 single runs.
"""
from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

from recommender.bank import bank_models, read_meta, repo_models_dir, unpack
from recommender.baselines import median, time_onnxruntime, time_pytorch
from recommender.errors import run_script
from recommender.fileio import atomic_write_json, display_path, read_json
from recommender.measure import MeasureSettings, Measurer
from recommender.model_import import import_model
from recommender.target import cpu_name, parse_target
from recommender.zoo import ZOO, build_zoo_model


class Recommenders:
    """Per model, the selector schedrec would use for it if it were new (the target's matrix and featurizer
    are read once, at the first model that needs them)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.data = None

    def for_model(self, name: str):
        from recommender.recommend import load_selector
        if (self.root / "transfer" / f"{name}.jsonl.gz").exists():  # the matrix: one file per target model
            from training.train import TargetData, leave_out_selector
            if self.data is None:
                self.data = TargetData(self.root, log=lambda m: print(m, file=sys.stderr, flush=True))
            return leave_out_selector(self.data, name)
        return load_selector("lgbm", self.root, self.root / "bank")


def schedrec_output(name: str, spec: str, target, root: Path, k: int, cap: int, tune_missing: int,
                    recommenders: Recommenders, fresh: bool = False) -> tuple[Path, dict]:
    """Budgeted transfer of `name` from the bank's other models (a finished run is reused unless `fresh`):
    its database folder and report."""
    from recommender.transfer.budgeted import budgeted_transfer
    out_dir = root / "latency" / name
    run_file, report_file = out_dir / "run.json", out_dir / "report.json"
    run = read_json(run_file) if run_file.exists() else None
    if run is not None and (fresh or (run.get("per_kernel"), run.get("cap"), run.get("tune_missing", 0))
                            != (k, cap, tune_missing)):
        shutil.rmtree(out_dir)  # a run with other settings, or asked for: searched again
    if report_file.exists() and (out_dir / "database").is_dir():
        return out_dir / "database", read_json(report_file)
    # a new run, a killed one (resumed from its rows), or a committed one without its database (rebuilt from
    # the rows, nothing measured again but the final timing)
    selector = recommenders.for_model(name)
    report = budgeted_transfer(spec, target, root / "bank", out_dir, selector, per_kernel=k, cap=cap,
                               untuned=False, recommender=selector.name, tune_missing=tune_missing)
    return out_dir / "database", report


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--target", default="native")
    ap.add_argument("--models", default="", help="comma-separated model names (default: all)")
    ap.add_argument("--redo", action="store_true", help="time again the models already in the table")
    ap.add_argument("--k", type=int, default=2, help="schedrec's candidates measured per kernel (2)")
    ap.add_argument("--cap", type=int, default=48, help="at most this many transferred candidates per kernel")
    ap.add_argument("--tune-missing", type=int, default=32,
                    help="schedrec's search trials for a kernel of 1%% of the FLOPs or more without donors (32)")
    ap.add_argument("--fresh", action="store_true",
                    help="search schedrec's transfer again for the models timed (its folder is replaced)")
    ap.add_argument("--no-schedrec", action="store_true", help="leave out schedrec's column")
    args = ap.parse_args()
    target = parse_target(args.target)
    root = repo_models_dir() / target.key
    out_path = root / "latency.json"
    table = read_json(out_path) if out_path.exists() else {}
    done = set() if args.redo else set(table)  # redone rows replace the old ones one by one: a stop loses none
    folders = [f for kind in ("bank", "reference") if (root / kind).is_dir() for f in bank_models(root / kind)]
    wanted = {m for m in args.models.split(",") if m}
    cores = int(target.config.get("num-cores", 1))
    settings = MeasureSettings(repeat=7, min_repeat_ms=200)
    # untuned TVM runs plain loops (seconds per inference on the big models): 3 repeats of one inference
    untuned_settings = MeasureSettings(repeat=3, min_repeat_ms=0)
    recommenders = Recommenders(root)
    with Measurer(target.config, settings) as measurer:
        for folder in folders:
            meta = read_meta(folder)
            name = meta["model"]
            if (wanted and name not in wanted) or name in done:
                continue
            t0 = time.time()
            if not args.no_schedrec:  # the search first: its own measurer, then every column is timed here
                database, report = schedrec_output(name, meta["spec"], target, root, args.k, args.cap,
                                                   args.tune_missing, recommenders, fresh=args.fresh)
            model = import_model(meta["spec"], target.tvm())
            inputs = list(zip(model.input_shapes, model.input_dtypes))
            row = {"kind": folder.parent.name, "tuned_kernels": sum(k["tuned"] for k in meta["kernels"].values()),
                   "target": target.config, "cpu": cpu_name(), "date": time.strftime("%Y-%m-%d"),
                   "threads": {"tvm": cores, "pytorch": cores, "onnxruntime": cores}}
            untuned = measurer.measure_model(model.mod, inputs, settings=untuned_settings)
            row["tvm_untuned_ms"] = untuned.median * 1e3 if untuned.ok else None
            with tempfile.TemporaryDirectory() as scratch:
                unpack(folder, scratch)
                tuned = measurer.measure_model(model.mod, inputs, database_dir=scratch)
            row["tvm_tuned_ms"] = tuned.median * 1e3 if tuned.ok else None
            results = [("untuned", untuned), ("tuned", tuned)]
            if not args.no_schedrec:
                output = measurer.measure_model(model.mod, inputs, database_dir=str(database))
                row["schedrec_ms"] = output.median * 1e3 if output.ok else None
                t = report["totals"]
                row["schedrec"] = {
                    "per_kernel": args.k, "cap": args.cap, "tune_missing": args.tune_missing,
                    "kernels_short_tuned": t.get("kernels_short_tuned", 0), "selector": report["selector"],
                    "left_out": report["excluded_models"], "search_s": t["search_s"],
                    "flop_coverage_transferred": t["flop_coverage_transferred"],
                    "kernels": t["kernels"], "kernels_via_samples": t["kernels_via_samples"],
                    "kernels_default": t["kernels_default"], "time_share_default": t["time_share_default"],
                    "run": display_path(root / "latency" / name)}
                results.append(("schedrec", output))
            row["errors"] = {k: r.error[:300] for k, r in results if not r.ok}
            if name in ZOO:
                torch_model, torch_args = build_zoo_model(name)
                row["pytorch_ms"] = median(time_pytorch(torch_model, torch_args, cores)) * 1e3
                try:
                    row["onnxruntime_ms"] = median(time_onnxruntime(torch_model, torch_args, cores)) * 1e3
                except Exception as err:  # an export the ONNX exporter cannot do
                    row["onnxruntime_ms"] = None
                    row["errors"]["onnxruntime"] = str(err).splitlines()[0][:300]
            row["seconds"] = round(time.time() - t0, 1)
            table[name] = row
            atomic_write_json(str(out_path), table)
            print(name, json.dumps(row), flush=True)


if __name__ == "__main__":
    run_script(main)
