"""How search cost and quality scale with the bank: exhaustive replay against budgeted top-k, replayed offline
on the measured rows of the held-out zoo models' exhaustive replays (models/<key>/heldout/*/candidates).

For a pool of n bank models (nested random orders, several seeds) each kernel's candidates are the rows whose
donor is in the pool. Exhaustive replay measures them all and keeps the fastest; budgeted transfer measures the
shipped lgbm ranker's top-k (a failed candidate replaced once by the next, as `schedrec transfer` does). Quality is the weighted kernel-latency sum of exhaustive replay over the method's
(defaults where a kernel has no valid candidate); search time is estimated from the run's own per-candidate
costs (replay seconds per replayed candidate, measurement seconds per measured one, both from its report), so
both methods pay the replay of the whole pool and differ in what they measure. The latencies are the recorded
measurements, not new ones: this isolates the effect of the pool from machine noise.

    python benchmarks/pool_scaling.py [--target-key llvm-znver3-2c] [--sizes 3,6,9,12] [--k 3] [--seeds 3]
writes benchmarks/results/<target-key>/pool_scaling.json and .png (or --out).
"""
from __future__ import annotations

import argparse
import random
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from recommender.target.folders import repo_models_dir  # noqa: E402
from recommender.core.fileio import atomic_write_json, read_json  # noqa: E402
from results_dir import results_dir  # noqa: E402


def kernel_groups(rows: list) -> dict[str, list]:
    out: dict[str, list] = {}
    for r in rows:
        out.setdefault(r.target_kernel, []).append(r)
    return out


def simulate(groups: dict[str, list], pool: set[str], selector, k: int) -> dict:
    """Kernel-latency sums and candidate counts of exhaustive replay and top-k for one pool."""
    from recommender.transfer.selection import KernelCandidates
    ex_sum = top_sum = 0.0
    replayed = measured_ex = measured_top = 0
    for name, rows in groups.items():
        default = next(r for r in rows if r.is_default)
        cands = [r for r in rows if not r.is_default and r.source_model in pool and r.replayed]
        base = default.latency_s or 0.0
        w = default.weight
        replayed += len(cands)
        measured_ex += len(cands)
        if not cands:
            ex_sum += w * base
            top_sum += w * base
            continue
        ok = [r.latency_s for r in cands if r.ok]
        ex_sum += w * min(ok + [base])
        ranked = selector.order(KernelCandidates(("m", name), tuple(cands), w))
        order = ranked[:k]
        order += ranked[k:k + sum(1 for i in order if not cands[i].ok)]  # a failed one is replaced by the next
        measured_top += len(order)
        top = [cands[i].latency_s for i in order if cands[i].ok]
        top_sum += w * min(top + [base])
    return {"exhaustive_sum_s": ex_sum, "topk_sum_s": top_sum, "replayed": replayed,
            "measured_exhaustive": measured_ex, "measured_topk": measured_top}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--target-key", default="llvm-znver3-2c")
    ap.add_argument("--sizes", default="3,6,9,12")
    ap.add_argument("--k", type=int, default=3)
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--out", type=Path, help="default benchmarks/results/<target-key>/pool_scaling.json")
    a = ap.parse_args()
    a.out = a.out or results_dir(a.target_key) / "pool_scaling.json"
    from recommender.transfer.recommend import load_selector
    from recommender.core.row_files import read_rows
    target_dir = repo_models_dir() / a.target_key
    selector = load_selector("lgbm", target_dir, target_dir / "bank")
    sizes = [int(s) for s in a.sizes.split(",")]
    result = {"target_key": a.target_key, "k": a.k, "seeds": a.seeds, "sizes": sizes, "models": {}}
    for folder in sorted((target_dir / "heldout").iterdir()):
        report = read_json(folder / "report.json")
        t = report["totals"]
        replay_per = t["replay_s"] / max(1, t["candidates"])
        measure_per = (t["search_s"] - t["replay_s"]) / max(1, t["valid"] + t["kernels"])
        groups = kernel_groups(read_rows(folder / "candidates.jsonl.gz"))
        bank = report["bank_models"]
        per_size = []
        for n in sizes:
            runs = []
            for seed in range(a.seeds):
                order = list(bank)
                random.Random(seed).shuffle(order)
                s = simulate(groups, set(order[:n]), selector, a.k)
                defaults = len(groups)
                s["exhaustive_search_s"] = s["replayed"] * replay_per + (s["measured_exhaustive"] + defaults) * measure_per
                s["topk_search_s"] = s["replayed"] * replay_per + (s["measured_topk"] + defaults) * measure_per
                runs.append(s)
            q_top = [r["exhaustive_sum_s"] / r["topk_sum_s"] for r in runs]
            full = simulate(groups, set(bank), selector, a.k)["exhaustive_sum_s"]
            per_size.append({
                "bank_models": n,
                "q_topk_vs_exhaustive": round(float(np.median(q_top)), 4),
                "q_exhaustive_vs_full_pool": round(float(np.median([full / r["exhaustive_sum_s"] for r in runs])), 4),
                "q_topk_vs_full_pool": round(float(np.median([full / r["topk_sum_s"] for r in runs])), 4),
                "exhaustive_search_s": round(float(np.median([r["exhaustive_search_s"] for r in runs])), 1),
                "topk_search_s": round(float(np.median([r["topk_search_s"] for r in runs])), 1),
                "candidates": int(np.median([r["replayed"] for r in runs])),
            })
        result["models"][report["model"]] = per_size
        print(report["model"], per_size)
    atomic_write_json(str(a.out), result)
    plot(result, a.out.with_suffix(".png"))
    print(f"-> {a.out}, {a.out.with_suffix('.png')}")


def plot(result: dict, path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 4))
    for model, rows in result["models"].items():
        n = [r["bank_models"] for r in rows]
        line, = ax1.plot(n, [r["exhaustive_search_s"] for r in rows], "o-", label=f"{model} exhaustive")
        ax1.plot(n, [r["topk_search_s"] for r in rows], "s--", color=line.get_color(), label=f"{model} top-{result['k']}")
        ax2.plot(n, [r["q_exhaustive_vs_full_pool"] for r in rows], "o-", color=line.get_color())
        ax2.plot(n, [r["q_topk_vs_full_pool"] for r in rows], "s--", color=line.get_color())
    ax1.set_xlabel("bank models in the pool")
    ax1.set_ylabel("search time, s (estimated from per-candidate costs)")
    ax1.legend(fontsize=7)
    ax2.set_xlabel("bank models in the pool")
    ax2.set_ylabel("quality vs exhaustive replay of the full pool (kernel sums)")
    fig.suptitle(f"Pool scaling on {result['target_key']} (solid: exhaustive, dashed: top-{result['k']})")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


if __name__ == "__main__":
    main()
