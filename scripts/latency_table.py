"""For every bank and reference model of a target, time the same input with untuned TVM, tuned TVM (the
model's own best records in the bank), PyTorch eager and ONNX Runtime, in one run. Writes
models/<target-key>/latency.json (resumable: models already in it are skipped unless --redo).

Usage: python scripts/latency_table.py [--target native] [--models resnet18,...] [--redo]
Keep the machine otherwise idle while it runs. Tuned TVM: median of 7 repeats of at least 200 ms; PyTorch and
ONNX Runtime: median of 5 repeats of at least 200 ms; untuned TVM (plain loops, seconds per inference on big models): median of 3 single runs.
"""
from __future__ import annotations

import argparse
import json
import tempfile
import time

from recommender.bank import bank_models, read_meta, repo_models_dir, unpack
from recommender.baselines import median, time_onnxruntime, time_pytorch
from recommender.errors import run_script
from recommender.fileio import atomic_write_json, read_json
from recommender.measure import MeasureSettings, Measurer
from recommender.model_import import import_model
from recommender.target import cpu_name, parse_target
from recommender.zoo import ZOO, build_zoo_model


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--target", default="native")
    ap.add_argument("--models", default="", help="comma-separated model names (default: all)")
    ap.add_argument("--redo", action="store_true")
    args = ap.parse_args()
    target = parse_target(args.target)
    root = repo_models_dir() / target.key
    out_path = root / "latency.json"
    table = read_json(out_path) if out_path.exists() and not args.redo else {}
    folders = [f for kind in ("bank", "reference") if (root / kind).is_dir() for f in bank_models(root / kind)]
    wanted = {m for m in args.models.split(",") if m}
    cores = int(target.config.get("num-cores", 1))
    settings = MeasureSettings(repeat=7, min_repeat_ms=200)
    # untuned TVM runs plain loops (seconds per inference on the big models): 3 repeats of one inference
    untuned_settings = MeasureSettings(repeat=3, min_repeat_ms=0)
    with Measurer(target.config, settings) as measurer:
        for folder in folders:
            meta = read_meta(folder)
            name = meta["model"]
            if (wanted and name not in wanted) or name in table:
                continue
            t0 = time.time()
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
            row["errors"] = {k: r.error[:300] for k, r in (("untuned", untuned), ("tuned", tuned)) if not r.ok}
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
