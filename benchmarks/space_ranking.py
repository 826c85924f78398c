"""How well each selector ranks a pool that holds a rule's space, offline and leave-one-model-out: for every
model of `models/<key>/space/` (`schedrec matrix --rule-space N`), lgbm fitted on every training row that
neither targets that model nor comes from it (bank records too, as `schedrec train` does), then scored on
that model's rule-space kernels (their donors and up to N rule instances, all measured), in the order a transfer
measures them (the best of each candidate family first: `selection.spread_order`) and by its scores alone,
beside random orders (3 seeds) and `tiles-then-donors` (the rules' fixed tiles first, then the donors in the heuristic's order:
what schedrec measured before one pool). Top-k as in docs/design.md (weighted best / latency of the best of the
k first; a restricted order shorter than k ranks the rest of the pool after it). Measures nothing.

    python benchmarks/space_ranking.py [--target-key llvm-znver5-2c] [--pools RUN_DIR,...]
writes benchmarks/results/<key>/space_ranking.json. With --pools, also each pool an exhaustive replay measured for a
model outside the bank (`schedrec replay --model M --rule-space N`: RUN_DIR/candidates.jsonl.gz), scored by lgbm
fitted on every training row (the model is in no fold), in the spread order and by its scores alone.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from recommender.core.fileio import atomic_write_json  # noqa: E402
from recommender.core.row_files import read_rows  # noqa: E402
from recommender.target.folders import repo_models_dir  # noqa: E402
from recommender.transfer.selection import KernelCandidates, restricted  # noqa: E402
from training.dataset import leave_model_out, ranking_set, trainable  # noqa: E402
from training.evaluate import fit_ranker, make_ranker, predict  # noqa: E402
from training.metrics import score_groups, summarize_outcomes  # noqa: E402
from training.train import TargetData  # noqa: E402

SEEDS = (0, 1, 2)
KS = (1, 2, 3, 5)


def order_scores(groups: list, selector: object) -> np.ndarray:
    """Scores that rank each group as `selector` orders it, the rows it leaves out after the others."""
    out = []
    for g in groups:
        order = selector.order(KernelCandidates(g.key, g.rows))
        s = np.full(len(g.rows), -1e9)
        s[order] = -np.arange(len(order), dtype=float)
        out.append(s)
    return np.concatenate(out) if out else np.zeros(0)


def spread_scores(groups: list, scores: np.ndarray) -> np.ndarray:
    """Scores that rank each group in the spread order of `scores` (what `selection.Ranked` measures first)."""
    from recommender.transfer.selection import spread_order
    out, at = [], 0
    for g in groups:
        s = scores[at:at + len(g.rows)]
        at += len(g.rows)
        order = spread_order(g.rows, [int(i) for i in np.argsort(-s, kind="stable")])
        ranks = np.empty(len(order))
        ranks[order] = -np.arange(len(order), dtype=float)
        out.append(ranks)
    return np.concatenate(out) if out else np.zeros(0)


def score_pools(run_dirs: list[Path], data: object, baseline: object) -> dict:
    """Per run folder: its measured pool scored by lgbm fitted on every training row (spread order and scores
    alone) and by `baseline`."""
    from training.evaluate import FeatureTable
    ranker = fit_ranker("lgbm", trainable(data.rows + list(data.extra)), data.table)
    out = {}
    for run in run_dirs:
        rows = read_rows(run / "candidates.jsonl.gz")
        test = ranking_set(rows).where(lambda g: g.best_s is not None)
        scores = predict(ranker, test, FeatureTable(data.featurizer, test.rows))
        out[run.name] = {"kernels": len(test.groups), "candidates": int(test.sizes.sum()), **{
            n: summarize_outcomes(o, KS) for n, o in {
                "lgbm": score_groups(test.groups, spread_scores(test.groups, scores), KS),
                "lgbm-scores": score_groups(test.groups, scores, KS),
                "tiles-then-donors": score_groups(test.groups, order_scores(test.groups, baseline), KS)}.items()}}
        print(run.name, {n: (out[run.name][n]["top1"], out[run.name][n]["top2"]) for n in ("lgbm", "lgbm-scores")},
              file=sys.stderr)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--target-key", default="llvm-znver5-2c")
    ap.add_argument("--pools", default="",
                    help="exhaustive replays of models outside the bank (run folders), comma-separated")
    a = ap.parse_args()
    target_dir = repo_models_dir() / a.target_key
    files = sorted((target_dir / "space").glob("*.jsonl.gz"))
    if not files:
        raise SystemExit(f"no rule-space rows in {target_dir / 'space'}: run `schedrec matrix --rule-space N` first")
    data = TargetData(target_dir, log=lambda m: print(m, file=sys.stderr))
    from recommender.transfer.selection import Ranked
    from training.registry import featurize_for
    heuristic = Ranked(make_ranker("heuristic", data.featurizer), featurize_for(data.featurizer, "tabular"))
    baseline = restricted("tiles-then-donors", heuristic)
    per_model, pooled = {}, {}
    for f in files:
        model = f.name.split(".")[0]
        keys = {r.kernel_key for r in read_rows(f)}
        train, test_rows = leave_model_out(data.rows, model)
        test = ranking_set([r for r in test_rows if r.kernel_key in keys]).where(lambda g: g.best_s is not None)
        if not test.groups:
            continue
        ranker = fit_ranker("lgbm", trainable(train + leave_model_out(data.extra, model)[0]), data.table)
        scores = predict(ranker, test, data.table)
        outcomes = {"lgbm": score_groups(test.groups, spread_scores(test.groups, scores), KS),
                    "lgbm-scores": score_groups(test.groups, scores, KS),
                    "tiles-then-donors": score_groups(test.groups, order_scores(test.groups, baseline), KS)}
        for seed in SEEDS:
            rng = np.random.default_rng(seed)
            outcomes[f"random@{seed}"] = score_groups(test.groups, rng.random(len(test.rows)), KS)
        per_model[model] = {"kernels": len(test.groups), "candidates": int(test.sizes.sum()),
                            **{n: summarize_outcomes(o, KS) for n, o in outcomes.items()}}
        for n, o in outcomes.items():
            pooled.setdefault(n, []).extend(o)
        print(model, {n: per_model[model][n]["top1"] for n in outcomes}, file=sys.stderr)
    summary = {"target_key": a.target_key, "date": time.strftime("%Y-%m-%d"),
               "command": f"python benchmarks/space_ranking.py --target-key {a.target_key}"
                          + (f" --pools {a.pools}" if a.pools else ""),
               "pooled": {n: summarize_outcomes(o, KS) for n, o in pooled.items()}, "models": per_model}
    if a.pools:
        summary["pools"] = score_pools([Path(p) for p in a.pools.split(",")], data, baseline)
    from results_dir import results_dir
    path = results_dir(a.target_key) / "space_ranking.json"
    atomic_write_json(str(path), summary)
    p = summary["pooled"]
    print(f"pooled top-2: lgbm {p['lgbm']['top2']} (by its scores alone {p['lgbm-scores']['top2']}); top-1: lgbm "
          f"{p['lgbm']['top1']}, tiles-then-donors {p['tiles-then-donors']['top1']}, random "
          f"{', '.join(str(p[f'random@{s}']['top1']) for s in SEEDS)} -> {path}")


if __name__ == "__main__":
    main()
