"""Does the lgbm ranker fitted on a Dask cluster rank as the local fit does? Leave-one-model-out on a target's
shipped matrix, for a few held-out models: the same training set (bank records included, as `schedrec
train` uses them) fitted locally and through LightGBM's Dask interface (`--cluster`), each scored on the
held-out model's kernels with training.metrics; the fit seconds of each.

    python benchmarks/cluster_train.py [--target-key llvm-znver3-2c] [--models resnet18,gpt2,vgg16] [--cluster local:2]

Reads models/<key>/ (not written); writes benchmarks/results/<host key>/cluster_train.json.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from recommender.core.errors import run_script  # noqa: E402
from recommender.core.fileio import atomic_write_json, display_path  # noqa: E402
from results_dir import results_dir, run_header  # noqa: E402

METRICS = ("top1", "top5", "q1")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--target-key", default="llvm-znver3-2c")
    p.add_argument("--models", default="resnet18,gpt2,vgg16")
    p.add_argument("--cluster", default="local:2")
    args = p.parse_args()
    from recommender.measure.cluster import connect, parse_cluster
    from recommender.target.folders import target_dir
    from recommender.target.spec import native_target
    from training.dataset import leave_model_out, ranking_set, trainable
    from training.evaluate import fit_ranker, predict
    from training.metrics import score_groups, summarize_outcomes
    from training.train import TargetData
    data = TargetData(target_dir(args.target_key), log=print)
    address = parse_cluster(args.cluster)
    folds, outcomes = {}, {"local": [], "cluster": []}
    with connect(address) as client:
        workers = len(client.scheduler_info()["workers"])
        for model in [m for m in args.models.split(",") if m]:
            plain, held_out = leave_model_out(data.rows, model)
            train = trainable(plain + leave_model_out(data.extra, model)[0])
            test = ranking_set(held_out)
            fold = {"train_kernels": len(train.groups), "train_candidates": int(train.sizes.sum()),
                    "test_kernels": len(test.groups)}
            for way, c in (("local", None), ("cluster", client)):
                t0 = time.perf_counter()
                ranker = fit_ranker("lgbm", train, data.table, client=c)
                fit_s = time.perf_counter() - t0
                scored = score_groups(test.groups, predict(ranker, test, data.table))
                outcomes[way] += scored
                s = summarize_outcomes(scored)
                fold[way] = {**{k: s[k] for k in METRICS}, "fit_s": round(fit_s, 1)}
            folds[model] = fold
            print(f"{model}: " + "; ".join(f"{w} " + ", ".join(f"{k} {fold[w][k]}" for k in (*METRICS, "fit_s"))
                                           for w in ("local", "cluster")), flush=True)
    pooled = {w: {k: summarize_outcomes(o)[k] for k in METRICS} for w, o in outcomes.items()}
    result = {**run_header(native_target()), "matrix": args.target_key, "cluster": args.cluster,
              "workers": workers, "folds": folds, "pooled": pooled,
              "pooled_difference": {k: round(pooled["cluster"][k] - pooled["local"][k], 4) for k in METRICS}}
    path = results_dir(native_target().key) / "cluster_train.json"
    atomic_write_json(str(path), result)
    print(f"pooled: local {pooled['local']}, cluster {pooled['cluster']} -> {display_path(path)}")


if __name__ == "__main__":
    run_script(main)
