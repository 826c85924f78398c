"""The noise ceiling: how far any ranker can get when the labels themselves are one noisy measurement.

`scripts/remeasure_matrix.py` measures a sample of a matrix's kernels again, every valid candidate twice in
a row (passes A and B) with the matrix's own measurer settings. The "oracle by measurement" ranks each
kernel's candidates by one measurement and is scored by another under exactly `schedrec evaluate`'s metric
(training.metrics: the kernel weights, the default fallback when none of the top k is valid, and the
candidates that failed in the matrix kept as failures): A -> B is the ceiling within one session,
matrix -> A the one across sessions (the matrix was measured days before). The repeats curve ranks by the
median of A's first j repeats and scores by B, to say how many repeats a measurement needs.
"""
from __future__ import annotations

import dataclasses
import statistics
from pathlib import Path

import numpy as np

from recommender.core.fileio import read_json_lines
from recommender.core.rows import CandidateRow, OK

from .dataset import KernelGroup, ranking_set, read_matrix
from .metrics import score_groups, summarize_outcomes

REMEASURE_FILE = Path("noise") / "remeasure.jsonl.gz"
CEILING_FILE = Path("noise") / "ceiling.json"
FAILED = "wrong_result"  # the status a candidate gets here when a pass did not give it a latency


def ceiling_file(target_dir: Path) -> Path | None:
    """The target's noise ceiling for `schedrec evaluate`: measured on its rule-space matrix where it has one
    (evaluate's groups of the kernels that matrix holds are its rows: donors beside the rule's space), else on
    its transfer matrix; None where neither was measured."""
    return next((p for p in (Path(target_dir) / "space" / CEILING_FILE, Path(target_dir) / "transfer" / CEILING_FILE)
                 if p.exists()), None)


def _remeasured(path: Path) -> dict[tuple, dict]:
    """Remeasured candidates by row key (CandidateRow.key)."""
    return {CandidateRow.from_json(r).key: r for r in read_json_lines(path, what="remeasure file")}


def _relabel(group: KernelGroup, latency: dict[tuple, float | None]) -> KernelGroup:
    """The group with each candidate's latency from `latency` (a candidate without one there is failed)."""
    rows = []
    for r in group.rows:
        lat = latency.get(r.key)
        rows.append(dataclasses.replace(r, status=OK if lat else (r.status if r.status != OK else FAILED),
                                        latency_s=lat or None))
    return dataclasses.replace(group, rows=tuple(rows))


def _oracle_scores(group: KernelGroup, latency: dict[tuple, float | None]) -> np.ndarray:
    """Scores that rank the group by `latency`, fastest first (no latency: last)."""
    return np.asarray([-latency[r.key] if latency.get(r.key) else -np.inf for r in group.rows])


def _median(costs: list, j: int) -> float | None:
    return statistics.median(costs[:j]) if costs and len(costs) >= j else None


def oracle_score(groups: list[KernelGroup], rank_by: dict, score_by: dict) -> dict:
    """evaluate's pooled figures for ranking by `rank_by` latencies and scoring with `score_by` ones."""
    labelled = [_relabel(g, score_by) for g in groups]
    scores = np.concatenate([_oracle_scores(g, rank_by) for g in groups]) if groups else np.zeros(0)
    return summarize_outcomes(score_groups(labelled, scores))


def ceiling(matrix_dir: Path, remeasure: Path | None = None) -> dict:
    """The noise ceiling of a matrix from its remeasured kernels (module docstring)."""
    matrix_dir = Path(matrix_dir)
    again = _remeasured(remeasure or matrix_dir / REMEASURE_FILE)
    kernels = {(r["target_model"], r["target_kernel"]) for r in again.values()}
    groups = ranking_set(read_matrix(matrix_dir)).where(lambda g: g.key in kernels and g.best_s is not None)
    groups = groups.groups
    in_matrix = {r.key: r.latency_s if r.ok else None for g in groups for r in g.rows}
    first = {k: r["latency_s"] for k, r in again.items()}
    second = {k: r.get("again_latency_s") for k, r in again.items()}
    both_ok = {k for k in again if first[k] and second[k]}
    first = {k: v for k, v in first.items() if k in both_ok}
    second = {k: v for k, v in second.items() if k in both_ok}
    out: dict = {"kernels": len(groups), "candidates": sum(len(g.rows) for g in groups),
                 "remeasured": len(both_ok),
                 "metric": "training.metrics (evaluate's pooled top-k score, Q@k, hit@k)",
                 "a_to_b": oracle_score(groups, first, second),
                 "matrix_to_a": oracle_score(groups, in_matrix, first)}
    changes = sorted(abs(second[k] / first[k] - 1) for k in both_ok)
    out["a_to_b"]["median_abs_change"] = round(changes[len(changes) // 2], 4) if changes else None
    changes = sorted(abs(first[k] / in_matrix[k] - 1) for k in both_ok if in_matrix.get(k))
    out["matrix_to_a"]["median_abs_change"] = round(changes[len(changes) // 2], 4) if changes else None
    repeats = min((len(r.get("costs") or []) for k, r in again.items() if k in both_ok), default=0)
    curve = {}
    for j in range(1, repeats + 1):
        by_j = {k: _median(again[k]["costs"], j) for k in both_ok}
        s = oracle_score(groups, by_j, second)
        curve[str(j)] = {"top1": s["top1"], "top5": s["top5"], "q1": s["q1"]}
    out["repeats_curve"] = curve
    # the fewest repeats from which every longer median also reaches 0.95 (the curve is itself noisy)
    steady = [j for j in range(1, repeats + 1) if all(curve[str(i)]["top1"] >= 0.95 for i in range(j, repeats + 1))]
    out["repeats_for_top1_095"] = min(steady) if steady else None
    return out
