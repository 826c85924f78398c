"""How much of a model's FLOPs the shipped bank covers when the model comes as an ONNX file instead of through
the zoo's torch.export path: the held-out zoo models exported here with torch.onnx (dynamic batch dim, as
exporters write it) and architectures outside the zoo (scripts/export_onnx_examples.py).

For each model and import path: the share of FLOPs in kernels with a same-class donor, with any donor (class
or anchor), and with a donor whose replay succeeds (replayed in the measurer's workers, nothing timed), plus
the kernels left without a replayed donor (where `schedrec transfer` draws design-space samples instead).

    python benchmarks/onnx_coverage.py [--models resnet50,bert_base,...] [--cap 8]
writes benchmarks/results/<target-key>/onnx_coverage.json and .md.
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from recommender.core.fileio import atomic_write_json, atomic_write_text  # noqa: E402
from results_dir import results_dir  # noqa: E402

HELDOUT = ("resnet50", "bert_base", "mobilenet_v2", "convnext_tiny")


def coverage(spec: str, target, index, measurer, cap: int) -> dict:
    from recommender.frontend.kernels import extract_kernels, flop_shares
    from recommender.frontend.model_import import import_model
    from recommender.core.rows import ANCHOR, CLASS
    from recommender.transfer.kernel import find_candidates
    tt = target.tvm()
    kernels = extract_kernels(import_model(spec, tt), tt)
    out = {"kernels": len(kernels), "class": 0.0, "donor": 0.0, "replayed": 0.0, "without": []}
    for k, share in zip(kernels, flop_shares(kernels)):
        if index.sources_for(k, top_n=1, match=CLASS):
            out["class"] += share
        if index.sources_for(k, top_n=1, match=CLASS) or index.sources_for(k, top_n=1, match=ANCHOR):
            out["donor"] += share
        found = find_candidates(k, index, measurer, tt, top_n=1, exclude_models=(), cap=cap, tile_rules=False)
        if found.valid:
            out["replayed"] += share
        else:
            out["without"].append({"kernel": k.name, "class_key": k.class_key, "flop_share": round(share, 5)})
    for key in ("class", "donor", "replayed"):
        out[key] = round(out[key], 4)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default=",".join(HELDOUT))
    ap.add_argument("--cap", type=int, default=8, help="donors replayed per kernel (default 8)")
    args = ap.parse_args()
    from recommender.transfer.candidates import BankIndex
    from recommender.measure import Measurer
    from recommender.target.spec import parse_target
    from recommender.target.folders import resolve
    from recommender.frontend.zoo import build_zoo_model
    from tests.onnx_nets import export_onnx

    from scripts.export_onnx_examples import EXAMPLES
    target = parse_target("native")
    folder, note = resolve(ROOT / "models", target.key)
    if note:
        print(note, file=sys.stderr)
    index = BankIndex(folder / "bank")
    results = {"target_key": target.key, "bank": str(folder.relative_to(ROOT) / "bank"), "cap": args.cap,
               "date": time.strftime("%Y-%m-%d"), "models": {}}
    with tempfile.TemporaryDirectory() as tmp, Measurer(target.config) as measurer:
        specs = []
        for name in [m for m in args.models.split(",") if m]:
            model, inputs = build_zoo_model(name)
            specs.append((name, "torch.export (zoo)", f"zoo:{name}"))
            specs.append((name, "ONNX", export_onnx(model, inputs, f"{tmp}/{name}.onnx", {"x0": {0: "batch"}})))
        for name, build in EXAMPLES.items():
            specs.append((name, "ONNX", export_onnx(*build(), f"{tmp}/{name}.onnx", {"x0": {0: "batch"}})))
        for name, path, spec in specs:
            t0 = time.perf_counter()
            r = coverage(spec, target, index, measurer, args.cap)
            r["seconds"] = round(time.perf_counter() - t0, 1)
            results["models"].setdefault(name, {})[path] = r
            print(f"{name} via {path}: {r['kernels']} kernels, FLOPs with a same-class donor {r['class']:.1%}, any "
                  f"donor {r['donor']:.1%}, a replayed donor {r['replayed']:.1%} ({r['seconds']} s)", flush=True)
    out = results_dir(target.key)
    atomic_write_json(str(out / "onnx_coverage.json"), results)
    lines = [f"# FLOP coverage by import path ({results['target_key']}, bank `{results['bank']}`, "
             f"{results['date']})", "", "`python benchmarks/onnx_coverage.py`", "",
             "| model | import | kernels | same-class donor | any donor | replayed donor | kernels without |",
             "|---|---|---|---|---|---|---|"]
    for name, paths in results["models"].items():
        for path, r in paths.items():
            lines.append(f"| {name} | {path} | {r['kernels']} | {r['class']:.1%} | {r['donor']:.1%} | "
                         f"{r['replayed']:.1%} | {len(r['without'])} |")
    atomic_write_text(str(out / "onnx_coverage.md"), "\n".join(lines) + "\n")
    print(f"wrote {out / 'onnx_coverage.json'} and .md")


if __name__ == "__main__":
    main()
