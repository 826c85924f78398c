"""What the relabelled matrix changes: leave-one-model-out lgbm trained on the matrix's first labels or on the
relabelled ones (training.relabel), each scored against both, per seed.

The relabelled labels are the better truth for the rows timed again (their first timing was disturbed); the
others are the same in both. So "train first, score relabelled" against "train relabelled, score relabelled" says
what the ranker gains from cleaner training labels, and "score first" against "score relabelled" of one ranker
says how much of evaluate's figure was the disturbed labels. Each (seed) pass is saved as it finishes.

    python benchmarks/relabel_effect.py [--target-key llvm-znver3-2c] [--seeds 0,10]
writes benchmarks/results/<target-key>/relabel_effect.json. About 4 min per seed on 2 cores (llvm-znver3-2c).
Keep the machine otherwise idle.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from recommender.core.errors import run_script  # noqa: E402
from recommender.core.fileio import atomic_write_json  # noqa: E402
from recommender.target.folders import repo_models_dir  # noqa: E402
from results_dir import results_dir  # noqa: E402

METRICS = ("top1", "top3", "top5", "q1", "q3")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--target-key", default="llvm-znver3-2c")
    ap.add_argument("--seeds", default="0,10")
    a = ap.parse_args()
    from training.dataset import leave_model_out, ranking_set, read_matrix, rows_digest
    from training.evaluate import fit_ranker, predict
    from training.metrics import score_groups, summarize_outcomes
    from training.relabel import RELABEL_FILE, read_relabels
    from training.train import TargetData

    target_dir = repo_models_dir() / a.target_key
    data = TargetData(target_dir, lambda m: None)  # rows relabelled as every reader gets them
    relabels = read_relabels(target_dir / "space")
    first = read_matrix(target_dir / "space", relabelled=False)
    spaced = {r.kernel_key for r in first}
    rows = {"relabelled": data.rows,
            "first": [r for r in data.rows if r.kernel_key not in spaced] + first}
    assert len(rows["first"]) == len(rows["relabelled"])
    path = results_dir(a.target_key) / "relabel_effect.json"
    digest = f"{data.featurizer.version} {rows_digest(rows['relabelled'])} {rows_digest(rows['first'])}"
    old = json.loads(path.read_text()) if path.exists() else {}
    passes = old.get("passes", {}) if old.get("data") == digest else {}
    header = {"target_key": a.target_key, "date": time.strftime("%Y-%m-%d"),
              "relabelled_rows": len(relabels), "relabel_file": str(Path("space") / RELABEL_FILE),
              "models": sorted({r.target_model for r in data.rows})}
    for seed in (int(s) for s in a.seeds.split(",") if s.strip()):
        if str(seed) in passes:
            continue
        outcomes: dict[str, list] = {f"train {t}, score {s}": [] for t in rows for s in rows}
        per_model: dict[str, dict] = {}
        for model in header["models"]:
            for train_on in rows:
                plain, _ = leave_model_out(rows[train_on], model)
                train = ranking_set(plain + leave_model_out(list(data.extra), model)[0])
                ranker = fit_ranker("lgbm", train, data.table, {"seed": seed})
                for score_on in rows:
                    test = ranking_set(leave_model_out(rows[score_on], model)[1])
                    got = score_groups(test.groups, predict(ranker, test, data.table))
                    outcomes[f"train {train_on}, score {score_on}"] += got
                    per_model.setdefault(model, {})[f"train {train_on}, score {score_on}"] = \
                        summarize_outcomes(got)["top1"]
            print(f"seed {seed}: {model} done", file=sys.stderr, flush=True)
        passes[str(seed)] = {"pooled": {k: {m: summarize_outcomes(v)[m] for m in METRICS}
                                        for k, v in outcomes.items()}, "models_top1": per_model}
        for k, v in passes[str(seed)]["pooled"].items():
            print(f"seed {seed} {k}: " + ", ".join(f"{m} {v[m]:.4f}" for m in METRICS), flush=True)
        atomic_write_json(str(path), {**header, "data": digest, "passes": passes})
    print(f"-> {path}")


if __name__ == "__main__":
    run_script(main)
