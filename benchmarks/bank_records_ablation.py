"""Do the bank's own tuning records help the LightGBM ranker? Leave-one-model-out with and without them,
three seeds each, on a target's shipped matrix (about 5 minutes here).

    python benchmarks/bank_records_ablation.py [--target-key llvm-znver3-2c]
writes benchmarks/results/<target-key>/bank_records_ablation.json (or --out).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from recommender.target.folders import repo_models_dir  # noqa: E402
from recommender.core.errors import run_script  # noqa: E402
from recommender.core.fileio import atomic_write_json  # noqa: E402
from results_dir import results_dir  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--target-key", default="llvm-znver3-2c")
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--out", type=Path, help="default benchmarks/results/<target-key>/bank_records_ablation.json")
    a = ap.parse_args()
    from training.evaluate import leave_one_model_out
    from training.train import TargetData

    data = TargetData(repo_models_dir() / a.target_key, lambda m: None)
    out: dict = {"target_key": a.target_key, "seeds": a.seeds}
    for label, extra in (("matrix", []), ("matrix+bank_records", data.extra)):
        res = []
        for seed in range(a.seeds):
            r = leave_one_model_out(data.rows, data.table, ["lgbm"], params={"lgbm": {"seed": seed}}, extra=extra,
                                    log=lambda m: None)
            p = r["rankers"]["lgbm"]["pooled"]
            res.append([p["top1"], p["top3"], p["top5"], p["q1"], p["q5"]])
        m = np.asarray(res)
        out[label] = {k: round(float(v), 4) for k, v in zip(("top1", "top3", "top5", "q1", "q5"), m.mean(axis=0))}
        out[label]["top1_std"] = round(float(m[:, 0].std()), 4)
        print(f"{label}: " + ", ".join(f"{k} {v}" for k, v in out[label].items()), flush=True)
    atomic_write_json(str(a.out or results_dir(a.target_key) / "bank_records_ablation.json"), out)


if __name__ == "__main__":
    run_script(main)
