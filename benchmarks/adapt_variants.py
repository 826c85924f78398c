"""Ways to adapt the ranker across targets to a target with N=50 of its kernels (issue 40's goal: adapted-50 at
least as good as the target's own ranker). Models dealt into 4 folds, every target scored on each fold's held-out
kernels; cells: zero_shot (other targets only), adapt100 / adapt30 (continued boosting, 100 or 30 trees per
booster, as training.cross_target.adapt), adapt30_lr01 (30 trees at learning rate 0.01), pooled (fitted from
scratch on the other targets plus the N kernels), pooled_x4 (the N kernels' groups four times), own (the target's
training kernels, no hardware features), own50 (the same N kernels alone). Resumable per fold (raw outcomes in
out/adapt_variants.json); pooled top-1/top-5 per finished fold in benchmarks/results/shared/adapt_variants.json.

    python benchmarks/adapt_variants.py      # about 15 minutes per fold on 2 cores, alone
"""
import json, sys, time
from pathlib import Path
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from training.cross_target import (load_targets, fold_sets, zero_shot_parts, fit_across, sample_kernels, adapt,
                                   score_cell, stable_seed, folds_of, plain_columns, matrix_targets)
from training.metrics import summarize_outcomes
from training.rankers import LGBMRanker
from recommender.target.folders import repo_models_dir

models_dir = repo_models_dir()
keys = [k for k in matrix_targets(models_dir) if k != "shared"]
datas = load_targets(models_dir, keys, lambda m: print(m, file=sys.stderr))
models = sorted({r.target_model for d in datas.values() for r in d.rows})
out_path = ROOT / "out" / "adapt_variants.json"
out_path.parent.mkdir(exist_ok=True)
res = json.loads(out_path.read_text()) if out_path.exists() else {}
N = 50
for fi, held in enumerate(folds_of(models, 4)):
    if len(sys.argv) > 1 and sys.argv[1] == "--summary":
        break
    if str(fi) in res:
        continue
    t0 = time.time()
    sets = fold_sets(datas, held)
    fold = {}
    for key, data in datas.items():
        train, test = sets[key]
        if not test.groups:
            continue
        cells = {}
        parts = zero_shot_parts(datas, sets, key)
        zero = fit_across(parts)
        cells["zero_shot"] = score_cell(zero, data, test)
        part = sample_kernels(train, N, stable_seed(key, *held, N))
        cells["adapt100"] = score_cell(adapt(zero, data, part, 100), data, test)
        cells["adapt30"] = score_cell(adapt(zero, data, part, 30), data, test)
        cells["adapt30_lr01"] = score_cell(fit_across([(data, part)], {**zero.get_params(), "n_estimators": 30,
                                                                    "learning_rate": 0.01}, init_model=zero), data, test)
        cells["pooled"] = score_cell(fit_across(parts + [(data, part)]), data, test)
        cells["pooled_x4"] = score_cell(fit_across(parts + [(data, part)] * 4), data, test)
        cols = plain_columns(data)
        X = data.table.get("tabular", train.rows)[:, cols]
        cells["own"] = score_cell(LGBMRanker().fit(X, train.relevance(), train.sizes), data, test, cols)
        Xp = data.table.get("tabular", part.rows)[:, cols]
        cells["own50"] = score_cell(LGBMRanker().fit(Xp, part.relevance(), part.sizes), data, test, cols)
        fold[key] = cells
        print(key, {c: round(summarize_outcomes(o)["top1"], 3) for c, o in cells.items()}, flush=True)
    res[str(fi)] = fold
    out_path.write_text(json.dumps(res, default=str))
    print(f"fold {fi} {held} in {time.time()-t0:.0f} s", flush=True)
summary = {"n": N, "folds": {fi: folds_of(models, 4)[int(fi)] for fi in res}, "targets": {}}
for key in keys:
    cells = {}
    for fold in res.values():
        for c, o in fold.get(key, {}).items():
            cells.setdefault(c, []).extend(o)
    summary["targets"][key] = {c: {m: round(summarize_outcomes(o)[m], 3) for m in ("kernels", "top1", "top5")}
                               for c, o in cells.items()}
    print(key, summary["targets"][key])
dest = ROOT / "benchmarks" / "results" / "shared" / "adapt_variants.json"
dest.parent.mkdir(parents=True, exist_ok=True)
dest.write_text(json.dumps(summary, indent=1) + "\n")
