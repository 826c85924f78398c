"""Should the LightGBM ranker weigh each kernel by its time? Leave-one-model-out on a target's shipped matrix
with the query groups weighted by (kernel weight x fastest latency)^p, for several p and seeds.

The top-k score (DESIGN.md) sums kernel times: a model's heaviest kernels decide it, while LambdaRank gives
every kernel the same say. p = 0 is the shipped ranker (every kernel alike); p = 1 weighs a kernel as the score
does. Each (p, seed) pass is saved as it finishes, so a killed run resumes.

    python benchmarks/time_weight_ablation.py [--target-key llvm-znver3-2c] [--powers 0,0.5,1] [--seeds 0,5,10]
writes benchmarks/results/<target-key>/time_weight_ablation.json (or --out). About 3.5 min per pass on 2 cores
(llvm-znver3-2c's rule-space matrix: 12 folds, 5 boosters each). Keep the machine otherwise idle.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from recommender.core.errors import run_script  # noqa: E402
from recommender.core.fileio import atomic_write_json  # noqa: E402
from recommender.target.folders import repo_models_dir  # noqa: E402
from results_dir import results_dir  # noqa: E402

METRICS = ("top1", "top3", "top5", "q1")


def _floats(text: str) -> list[float]:
    return [float(x) for x in text.split(",") if x.strip()]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--target-key", default="llvm-znver3-2c")
    ap.add_argument("--powers", default="0,0.5,1", help="exponents p of the kernel time (0: unweighted)")
    ap.add_argument("--seeds", default="0,5,10")
    ap.add_argument("--out", type=Path, help="default benchmarks/results/<target-key>/time_weight_ablation.json")
    a = ap.parse_args()
    from training.dataset import rows_digest
    from training.evaluate import leave_one_model_out
    from training.train import TargetData

    data = TargetData(repo_models_dir() / a.target_key, lambda m: None)
    path = a.out or results_dir(a.target_key) / "time_weight_ablation.json"
    digest = f"{data.featurizer.version} {rows_digest(list(data.rows) + list(data.extra))}"
    old = json.loads(path.read_text()) if path.exists() else {}
    passes = old.get("passes", {}) if old.get("data") == digest else {}  # passes of other rows start afresh
    header = {"target_key": a.target_key, "date": time.strftime("%Y-%m-%d")}
    for power in _floats(a.powers):
        for seed in (int(s) for s in _floats(a.seeds)):
            key = f"p={power:g} seed={seed}"
            if key in passes:
                continue
            r = leave_one_model_out(data.rows, data.table, ["lgbm"], extra=data.extra, log=lambda m: None,
                                    params={"lgbm": {"seed": seed, "time_weight_power": power}})
            lg = r["rankers"]["lgbm"]
            passes[key] = {"power": power, "seed": seed, "pooled": {m: lg["pooled"][m] for m in METRICS},
                           "models_top1": {m: v["top1"] for m, v in lg["models"].items()}}
            print(f"{key}: " + ", ".join(f"{m} {lg['pooled'][m]:.4f}" for m in METRICS), flush=True)
            atomic_write_json(str(path), {**header, "data": digest, "passes": passes})
    summary = {}
    for power in sorted({p["power"] for p in passes.values()}):
        mine = [p for p in passes.values() if p["power"] == power]
        summary[f"{power:g}"] = {m: {"mean": round(float(np.mean([p["pooled"][m] for p in mine])), 4),
                                     "min": min(p["pooled"][m] for p in mine), "max": max(p["pooled"][m] for p in mine)}
                                 for m in METRICS} | {"seeds": sorted(p["seed"] for p in mine)}
        s = summary[f"{power:g}"]
        print(f"p={power:g} over seeds {s['seeds']}: " + ", ".join(
            f"{m} {s[m]['mean']:.4f} ({s[m]['min']:.4f}-{s[m]['max']:.4f})" for m in METRICS), flush=True)
    atomic_write_json(str(path), {**header, "data": digest, "passes": passes, "summary": summary})
    print(f"-> {path}")


if __name__ == "__main__":
    run_script(main)
