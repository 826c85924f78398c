"""How fast candidates are featurized and ranked at use time (the issue asks for 2,000+ candidates/s for
tokens + shape features, and 1,000 candidates ranked in under a second).

Reads the shipped transfer matrix's replayed candidates, featurizes them (tabular and sequence features),
and ranks 1,000 of them with each saved ranker; prints medians of `--repeat` runs and writes JSON.

    python benchmarks/ranking_speed.py [--target-key llvm-znver3-2c] [--repeat 5]
writes benchmarks/results/<target-key>/ranking_speed.json (or --out).
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from recommender.target.folders import repo_models_dir  # noqa: E402
from recommender.core.errors import run_script  # noqa: E402
from recommender.core.fileio import atomic_write_json  # noqa: E402
from results_dir import results_dir  # noqa: E402


def _median_time(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--target-key", default="llvm-znver3-2c")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--out", type=Path, help="default benchmarks/results/<target-key>/ranking_speed.json")
    a = ap.parse_args()
    from featurize.candidate_features import Featurizer, schema_of
    from training.registry import ranker_class
    from training.train import TargetData

    data = TargetData(repo_models_dir() / a.target_key, lambda m: None)
    rows = data.table.rows
    f = data.featurizer
    out: dict = {"target_key": a.target_key, "candidates": len(rows), "repeat": a.repeat}
    for kind, fn in (("tabular", f.tabular), ("sequences", f.sequences)):
        s = _median_time(lambda: fn(rows), a.repeat)
        out[f"{kind}_per_s"] = round(len(rows) / s)
        print(f"featurize {kind}: {len(rows)} candidates in {s:.2f} s = {len(rows) / s:.0f} per s (median of {a.repeat})")
    sample = rows[:1000]
    for folder in sorted((repo_models_dir() / a.target_key / "rankers").glob("*/meta.json")):
        name = folder.parent.name
        meta = json.loads(folder.read_text())
        if meta.get("feature_set") == "per_store":
            continue  # its features need lowering: 0.039 s per candidate (scripts/per_store_features.py)
        fr = Featurizer(f.vocab, f.sources, schema=schema_of(meta.get("feature_version", "")) or f.schema)
        ranker = ranker_class(name).load(folder.parent, feature_version=fr.version)
        feats = fr.tabular if ranker.feature_set == "tabular" else fr.sequences
        s = _median_time(lambda: ranker.predict(feats(sample)), a.repeat)
        out[f"rank_1000_{name}_s"] = round(s, 3)
        print(f"rank 1000 candidates with {name} (featurize + predict): {s:.3f} s (median of {a.repeat})")
    atomic_write_json(str(a.out or results_dir(a.target_key) / "ranking_speed.json"), out)


if __name__ == "__main__":
    run_script(main)
