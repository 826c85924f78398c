"""Figures of the transfer matrix and the held-out replays of a target, as markdown and PNG plots.

Reads models/<key>/transfer/*.jsonl.gz (+ summary.json) and models/<key>/heldout/<model>/{report.json,
candidates.jsonl.gz}; writes models/<key>/transfer/FIGURES.md, best_vs_median.png and heldout.png.
For held-out models it also derives what the original transfer-tuning (N=1: only each source kernel's
best record) would have chosen per kernel, from the same measurements.

Usage: python scripts/transfer_figures.py [--target native]
"""
from __future__ import annotations

import argparse
import json
import statistics

from recommender.target.folders import repo_models_dir
from recommender.core.errors import SchedrecError, run_script
from recommender.core.fileio import atomic_write_text, read_json
from recommender.core.rows import CandidateRow
from recommender.target.spec import parse_target
from recommender.core.row_files import kernel_stats, read_rows


def _ms(x: float | None) -> str:
    return "-" if x is None else f"{x * 1e3:.2f}"


def heldout_rows(report: dict, rows: list[CandidateRow]) -> dict:
    """Per held-out model: coverage, candidates, search time, speedup, and N=1 vs N=3 kernel latency."""
    t = report["totals"]
    ks = kernel_stats(rows)
    n1 = n3 = dflt = 0.0  # weighted kernel time, seconds per inference
    for (_, name), k in ks.items():
        d = k["default_s"] or 0.0
        best3 = min(k["valid_s"] + [d]) if d else min(k["valid_s"], default=0.0)
        best1 = min(k["rank0_s"] + [d]) if d else min(k["rank0_s"], default=0.0)
        w = k["weight"]
        n1, n3, dflt = n1 + w * best1, n3 + w * best3, dflt + w * d
    tuned, untuned = t["model_latency_tuned_s"], t["model_latency_untuned_s"]
    return {"model": report["model"], "kernels": t["kernels"], "candidates": t["candidates"],
            "valid": t["valid"], "cands_per_kernel": t["candidates"] / max(t["kernels"], 1),
            "coverage_class": t["flop_coverage_class_only"], "coverage_anchor": t["flop_coverage_valid"],
            "kernels_via_anchor": t.get("kernels_via_anchor", 0), "search_s": t["search_s"],
            "replay_s": t["replay_s"], "build_s": t["build_s"], "run_s": t["run_s"],
            "compile_s": t["final_compile_and_time_s"], "tuned_ms": tuned and tuned * 1e3,
            "untuned_ms": untuned and untuned * 1e3, "speedup": untuned / tuned if tuned and untuned else None,
            "kernel_sum_default_ms": dflt * 1e3, "kernel_sum_n1_ms": n1 * 1e3, "kernel_sum_n3_ms": n3 * 1e3}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--target", default="native")
    args = ap.parse_args()
    key = parse_target(args.target, validate=False).key  # compiles nothing: the key is enough
    root = repo_models_dir() / key
    tdir = root / "transfer"
    lines = [f"# Transfer-tuning figures, {key}", ""]
    summary_path = tdir / "summary.json"
    if summary_path.exists():
        s = read_json(summary_path)
        rows = [r for p in sorted(tdir.glob("*.jsonl.gz")) for r in read_rows(p)]
        missing = sorted({"top_n", "cap", "rows", "models", "all"} - set(s if isinstance(s, dict) else ()))
        if missing:
            raise SchedrecError(f"corrupt {summary_path}: missing {', '.join(missing)}; rerun "
                                "`schedrec replay --all-pairs` to rewrite it")
        lines += ["## Transfer matrix (leave-one-model-out over the bank)", "",
                  f"Top {s['top_n']} records per source kernel, at most {s['cap']} candidates per kernel; "
                  f"{s['rows']} rows. Reproduce: `schedrec replay --all-pairs --top-n {s['top_n']} --cap {s['cap']}`.",
                  "", "| target model | kernels | with valid | candidates/kernel | valid/kernel | median/best | "
                  "worst/best | best beats default | default/best | best/tuned | rank-0 best/best | rank-0 misses best |",
                  "|---|---|---|---|---|---|---|---|---|---|---|---|"]
        for m, v in list(s["models"].items()) + [("all", s["all"])]:
            lines.append(f"| {m} | {v['kernels']} | {v['kernels_with_valid']} | {v['candidates_per_kernel']} | "
                         f"{v['valid_per_kernel']} | {v['median_over_best']} | {v['worst_over_best']} | "
                         f"{v['share_best_beats_default']} | {v['default_over_best']} | {v['best_over_tuned']} | "
                         f"{v['rank0_best_over_best']} | {v.get('share_rank0_misses_best', '-')} |")
        lines += ["", "Ratios are medians over kernels. median/best: how much slower the median candidate is "
                  "than the best (what a ranker can win over a random pick); best/tuned: the best transferred "
                  "candidate against the kernel's own 64-trial tuning; rank-0 best/best: the original "
                  "transfer-tuning (each source's best record only) against all candidates; rank-0 misses best: the "
                  "share of kernels where that pool's best is more than 5% slower than the best of all.", ""]
        ratios = [statistics.median(k["valid_s"]) / min(k["valid_s"])
                  for k in kernel_stats(rows).values() if len(k["valid_s"]) >= 2]
        if ratios:
            import matplotlib
            matplotlib.use("Agg")
            import matplotlib.pyplot as plt
            fig, ax = plt.subplots(figsize=(6, 3.2))
            ax.hist([min(r, 5.0) for r in ratios], bins=32, range=(1, 5), color="#4477aa")
            ax.set_xlabel("median candidate latency / best candidate latency (per kernel; 5 = 5 or more)")
            ax.set_ylabel("kernels")
            ax.set_title(f"Transfer matrix, {key}: room for ranking ({len(ratios)} kernels)")
            fig.tight_layout()
            fig.savefig(tdir / "best_vs_median.png", dpi=90)
            lines += ["![best vs median](best_vs_median.png)", ""]
    held = sorted((root / "heldout").glob("*/report.json")) if (root / "heldout").is_dir() else []
    if held:
        hs = [heldout_rows(read_json(p), read_rows(p.parent / "candidates.jsonl.gz")) for p in held]
        lines += ["## Held-out models: exhaustive replay from the whole bank", "",
                  "Reproduce: `schedrec replay --model zoo:M --top-n 3 --cap 48 --out models/<key>/heldout/M`.", "",
                  "| model | kernels | candidates (valid) | per kernel | FLOP coverage same class | with anchor "
                  "fallback | search s (replay/build/run) | compile+time s | untuned ms | tuned ms | speedup | "
                  "sum of kernels ms: default / N=1 / N=3 |",
                  "|---|---|---|---|---|---|---|---|---|---|---|---|"]
        for h in hs:
            lines.append(
                f"| {h['model']} | {h['kernels']} | {h['candidates']} ({h['valid']}) | {h['cands_per_kernel']:.1f} | "
                f"{100 * h['coverage_class']:.1f}% | {100 * h['coverage_anchor']:.1f}% "
                f"({h['kernels_via_anchor']} kernels) | {h['search_s']:.0f} ({h['replay_s']:.0f}/{h['build_s']:.0f}/"
                f"{h['run_s']:.0f}) | {h['compile_s']:.0f} | {h['untuned_ms']:.2f} | {h['tuned_ms']:.2f} | "
                f"{h['speedup']:.2f}x | {h['kernel_sum_default_ms']:.2f} / {h['kernel_sum_n1_ms']:.2f} / "
                f"{h['kernel_sum_n3_ms']:.2f} |")
        lines.append("")
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        fig, ax = plt.subplots(figsize=(6, 3.2))
        names = [h["model"] for h in hs]
        xs = range(len(hs))
        ax.bar([x - 0.2 for x in xs], [h["untuned_ms"] for h in hs], 0.4, label="untuned TVM", color="#bbbbbb")
        ax.bar([x + 0.2 for x in xs], [h["tuned_ms"] for h in hs], 0.4, label="exhaustive replay", color="#4477aa")
        ax.set_xticks(list(xs), names)
        ax.set_ylabel("latency, ms (batch 1)")
        ax.set_yscale("log")
        ax.legend()
        ax.set_title(f"Held-out models, {key}")
        fig.tight_layout()
        fig.savefig(tdir / "heldout.png", dpi=90)
        lines += ["![held-out](heldout.png)", ""]
        atomic_write_text(str(tdir / "heldout.json"), json.dumps(hs, indent=1) + "\n")
    atomic_write_text(str(tdir / "FIGURES.md"), "\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    run_script(main)
