"""What the rule-space matrix says so far: for each kernel of `models/<key>/space/` (`schedrec matrix --rule-space
N`), the best conv-rule instance against the best donor, and where in the space's order the best instance lies
(today's fixed tiles come first: at most 9 of them, so a best at rank 9 or later is a tile only the space holds).
Reads committed rows only; measures nothing.

    python benchmarks/rule_space_summary.py [--target-key llvm-znver5-2c]
writes benchmarks/results/<key>/rule_space.json.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from recommender.core.fileio import atomic_write_json  # noqa: E402
from recommender.core.row_files import read_rows  # noqa: E402
from recommender.rules import RULES  # noqa: E402
from recommender.target.folders import repo_models_dir  # noqa: E402

FIXED_AT_MOST = 9  # conv_tiles: 2 widths x 2 shapes + 2 one-row shapes; flat_tiles: 3


def summarize(rows: list) -> dict:
    by_kernel: dict = {}
    for r in rows:
        by_kernel.setdefault(r.kernel_key, []).append(r)
    out = {"kernels": 0, "rule_instances": 0, "best_rule_beats_best_donor": 0, "best_rank": {},
           "beyond_fixed": [], "rule_over_donor_weighted": None}
    t_rule = t_donor = 0.0
    for key, rs in sorted(by_kernel.items()):
        rule = [r for r in rs if r.source_model == RULES["conv"].source]
        ok = [r for r in rule if r.ok]
        if not ok:
            continue
        out["kernels"] += 1
        out["rule_instances"] += len(rule)
        best = min(ok, key=lambda r: r.latency_s)
        out["best_rank"][str(best.source_rank)] = out["best_rank"].get(str(best.source_rank), 0) + 1
        donors = [r.latency_s for r in rs if r.ok and r.source_model and not r.source_model.startswith("(")]
        if donors:
            out["best_rule_beats_best_donor"] += best.latency_s < min(donors)
            t_rule += best.weight * best.latency_s
            t_donor += best.weight * min(donors)
        early = [r.latency_s for r in ok if r.source_rank < FIXED_AT_MOST]
        if best.source_rank >= FIXED_AT_MOST and early:
            out["beyond_fixed"].append({"model": key[0], "kernel": key[1], "rank": best.source_rank,
                                        "over_best_of_first_ranks": round(min(early) / best.latency_s, 3)})
    out["best_rank"] = dict(sorted(out["best_rank"].items(), key=lambda kv: int(kv[0])))
    out["rule_over_donor_weighted"] = round(t_rule / t_donor, 3) if t_donor else None
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--target-key", default="llvm-znver5-2c")
    a = ap.parse_args()
    folder = repo_models_dir() / a.target_key / "space"
    files = sorted(folder.glob("*.jsonl.gz"))
    if not files:
        raise SystemExit(f"no rule-space rows in {folder}: run `schedrec matrix --rule-space N` there first")
    summary = {"target_key": a.target_key, "date": time.strftime("%Y-%m-%d"), "models": [f.name.split(".")[0] for f in files],
               "command": f"python benchmarks/rule_space_summary.py --target-key {a.target_key}",
               **summarize([r for f in files for r in read_rows(f)])}
    from results_dir import results_dir
    path = results_dir(a.target_key) / "rule_space.json"
    atomic_write_json(str(path), summary)
    print(f"{summary['kernels']} kernels, {summary['rule_instances']} rule instances; best rule beats the best donor on "
          f"{summary['best_rule_beats_best_donor']}; best beyond the fixed tiles on {len(summary['beyond_fixed'])} -> {path}")


if __name__ == "__main__":
    main()
