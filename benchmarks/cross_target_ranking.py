"""Does a ranker trained on one CPU's measurements rank another CPU's candidates? (A CPU without its own
matrix is served by the nearest target's ranker, recommender/target/folders.py.)

For each model M of the test target's transfer matrix, leave one model out on both sides: each ranker is
fitted on the train target's matrix without M (neither as target nor as source, plus that target's bank
records for the rankers that use them) and scores M's kernels as measured on the test target; beside it the
test target's own leave-one-model-out figures (its rankers/evaluation.json). Pooled top-k as in DESIGN.md.
Nothing is measured: it reads both targets' committed rows.

    python benchmarks/cross_target_ranking.py --train-key llvm-znver3-2c --test-key llvm-rocketlake-2c
writes benchmarks/results/<test-key>/cross_target_ranking.json and .md.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from recommender.core.fileio import atomic_write_json, atomic_write_text  # noqa: E402

METRICS = ("top1", "top3", "top5", "q1", "q5")


def cross_scores(train_dir: Path, test_dir: Path, names: list[str]) -> dict:
    """Pooled and per-model outcomes of `names` fitted on train_dir's matrix (model left out) and scored on
    test_dir's rows of that model."""
    from training.dataset import leave_model_out, ranking_set, trainable
    from training.evaluate import FeatureTable, fit_ranker, predict
    from training.metrics import score_groups, summarize_outcomes
    from training.registry import ranker_class
    from training.train import TargetData
    log = lambda m: print(m, file=sys.stderr, flush=True)  # noqa: E731
    train, test = TargetData(train_dir, log), TargetData(test_dir, log, bank_records=False)
    models = sorted({r.target_model for r in test.rows})
    outcomes: dict[str, dict[str, list]] = {n: {} for n in names}
    for model in models:
        test_set = ranking_set(leave_model_out(test.rows, model)[1])
        test_table = FeatureTable(test.featurizer, [r for r in test_set.rows if r.replayed])
        plain, extra = leave_model_out(train.rows, model)[0], leave_model_out(train.extra, model)[0]
        for name in names:
            use_extra = bool(train.extra) and ranker_class(name).uses_extra_groups
            fit_set = trainable(plain + (extra if use_extra else []))
            ranker = fit_ranker(name, fit_set, train.table)
            outcomes[name][model] = score_groups(test_set.groups, predict(ranker, test_set, test_table))
        log(f"{model}: {len(test_set.groups)} kernels scored")
    return {"models": models, "rankers": {
        n: {"pooled": summarize_outcomes([x for o in per.values() for x in o]),
            "models": {m: summarize_outcomes(o) for m, o in per.items()}} for n, per in outcomes.items()}}


def main() -> None:
    from results_dir import results_dir

    from recommender.target.folders import repo_models_dir
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--train-key", default="llvm-znver3-2c", help="the target whose matrix the rankers learn from")
    ap.add_argument("--test-key", required=True, help="the target whose measured candidates they rank")
    ap.add_argument("--rankers", default="lgbm,tlp")
    args = ap.parse_args()
    names = [n for n in args.rankers.split(",") if n]
    models_dir = repo_models_dir()
    t0 = time.perf_counter()
    out = {"train_key": args.train_key, "test_key": args.test_key, "date": time.strftime("%Y-%m-%d"),
           "cross": cross_scores(models_dir / args.train_key, models_dir / args.test_key, names)}
    out["seconds"] = round(time.perf_counter() - t0, 1)
    own_path = models_dir / args.test_key / "rankers" / "evaluation.json"
    own = json.loads(own_path.read_text())["lomo"]["rankers"] if own_path.exists() else {}
    res = results_dir(args.test_key)
    atomic_write_json(str(res / "cross_target_ranking.json"), out)
    lines = [f"# Rankers trained on `{args.train_key}`, ranking candidates measured on `{args.test_key}` "
             f"({out['date']})", "",
             f"`python benchmarks/cross_target_ranking.py --train-key {args.train_key} --test-key {args.test_key}`: "
             f"leave-one-model-out over the {len(out['cross']['models'])} models of {args.test_key}'s matrix "
             f"({', '.join(out['cross']['models'])}); pooled over their kernels. *own* is {args.test_key}'s "
             "rankers trained on its own matrix (rankers/evaluation.json, the same folds).", "",
             "| ranker | trained on | kernels | " + " | ".join(METRICS) + " |",
             "|---|---|---|" + "---|" * len(METRICS)]
    for name in names:
        for where, figures in ((args.train_key, out["cross"]["rankers"][name]["pooled"]),
                               (f"{args.test_key} (own)", (own.get(name) or {}).get("pooled"))):
            if figures:
                lines.append(f"| {name} | {where} | {figures['kernels']} | "
                             + " | ".join(f"{figures[m]:.3f}" for m in METRICS) + " |")
    atomic_write_text(str(res / "cross_target_ranking.md"), "\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
