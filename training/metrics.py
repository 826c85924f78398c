"""Ranking metrics on measured kernels (definitions in DESIGN.md; one place computes them all).

For kernel t with weight w_t, best_t is its fastest measured candidate and lat_k(t) the fastest valid
candidate among the k top-ranked; when none of those k is valid the kernel keeps its default schedule, so
lat_k(t) is the default latency. Kernels without a valid candidate have no best and are not scored.
- top-k score = sum_t w_t best_t / sum_t w_t lat_k(t)
- Q@k = mean over kernels of best_t / lat_k(t)
- NDCG@k with gain best/latency (0 for a failed candidate)
- hit@k = share of kernels whose fastest candidate is among the top k
- fail@k = share of the top-k slots taken by candidates that failed to build, run or give the right result
"""
from __future__ import annotations

import numpy as np

from .dataset import KernelGroup

KS = (1, 3, 5)


def kernel_outcomes(group: KernelGroup, scores: np.ndarray, ks: tuple[int, ...] = KS) -> dict | None:
    """Per-kernel lat_k, hits, failures and NDCG@5 for one kernel ranked by `scores` (None if unscorable)."""
    best = group.best_s
    if best is None:
        return None
    order = np.argsort(-np.asarray(scores), kind="stable")
    rows = [group.rows[i] for i in order]
    rel = group.relevance()[order]
    out: dict = {"key": group.key, "weight": group.weight, "best_s": best}
    fallback = group.default_s if group.default_s is not None else float("inf")
    for k in ks:
        top = rows[:k]
        valid = [r.latency_s for r in top if r.ok]
        out[f"lat{k}"] = min(valid) if valid else max(fallback, best)
        out[f"hit{k}"] = float(any(r.ok and r.latency_s <= best for r in top))
        out[f"fail{k}"] = sum(1 for r in top if not r.ok) / len(top)
    ideal = np.sort(group.relevance())[::-1]
    discount = 1.0 / np.log2(np.arange(2, 7))
    dcg = float((rel[:5] * discount[:len(rel[:5])]).sum())
    idcg = float((ideal[:5] * discount[:len(ideal[:5])]).sum())
    out["ndcg5"] = dcg / idcg if idcg else 0.0
    return out


def summarize_outcomes(outcomes: list[dict], ks: tuple[int, ...] = KS) -> dict:
    """Pooled figures over kernel outcomes (any mix of models)."""
    outcomes = [o for o in outcomes if o is not None]
    if not outcomes:
        return {"kernels": 0}
    w = np.asarray([o["weight"] for o in outcomes], dtype=float)
    best = np.asarray([o["best_s"] for o in outcomes])
    out: dict = {"kernels": len(outcomes)}
    for k in ks:
        lat = np.asarray([o[f"lat{k}"] for o in outcomes])
        out[f"top{k}"] = round(float((w * best).sum() / (w * lat).sum()), 4)
        out[f"q{k}"] = round(float(np.mean(best / lat)), 4)
        out[f"hit{k}"] = round(float(np.mean([o[f"hit{k}"] for o in outcomes])), 4)
        out[f"fail{k}"] = round(float(np.mean([o[f"fail{k}"] for o in outcomes])), 4)
    out["ndcg5"] = round(float(np.mean([o["ndcg5"] for o in outcomes])), 4)
    return out


def score_groups(groups: list[KernelGroup], scores: np.ndarray, ks: tuple[int, ...] = KS) -> list[dict]:
    """Kernel outcomes of every group, `scores` concatenated in group order."""
    out, at = [], 0
    for g in groups:
        n = len(g.rows)
        out.append(kernel_outcomes(g, scores[at:at + n], ks))
        at += n
    if at != len(scores):
        raise ValueError(f"{len(scores)} scores for {at} candidates")
    return out
