"""Metrics and leave-one-model-out evaluation on small fixtures of rows (no TVM)."""
from __future__ import annotations

import numpy as np
import pytest

from recommender.core.rows import CandidateRow
from training.dataset import leave_model_out, ranking_set
from training.evaluate import FeatureTable
from training.metrics import kernel_outcomes, score_groups, summarize_outcomes

TRACE = [[["SampleCategorical", [], [[0, 16, 64, 512], [0.25, 0.25, 0.25, 0.25]], ["v0"]]], [[0, 1]]]


def _row(model, kernel, latency, status="ok", source="s", rank=0, match="class", weight=1):
    return CandidateRow(target_model=model, target_kernel=kernel, class_key="matmul/s2r1:@matmul", match=match,
                        status=status if latency is not None or match == "default" else "wrong_result",
                        latency_s=latency, weight=weight, source_model=None if match == "default" else source,
                        source_kernel=None if match == "default" else "k", source_rank=rank,
                        trace=None if match == "default" else TRACE,
                        target_args=(((4, 4), "float32"),), flops=128.0)


def _kernel(model, kernel, latencies, default=10.0, weight=1, sources=None):
    rows = [_row(model, kernel, default, match="default", weight=weight)]
    for i, lat in enumerate(latencies):
        rows.append(_row(model, kernel, lat, source=(sources or ["s"] * len(latencies))[i], rank=i, weight=weight))
    return rows


def test_top_k_scores_follow_the_definitions():
    rows = _kernel("m", "a", [2.0, 1.0, None, 4.0], default=10.0, weight=2) + _kernel("m", "b", [None, 3.0], default=6.0)
    data = ranking_set(rows)
    assert [len(g.rows) for g in data.groups] == [4, 2] and data.groups[0].best_s == 1.0
    # kernel a ranked 2.0, None, 1.0, 4.0; kernel b ranked None first: its top-1 keeps the default (6.0)
    scores = np.array([4.0, 2.0, 3.0, 1.0, 2.0, 1.0])
    out = score_groups(data.groups, scores)
    assert out[0]["lat1"] == 2.0 and out[0]["lat3"] == 1.0 and out[0]["hit1"] == 0.0 and out[0]["hit3"] == 1.0
    assert out[1]["lat1"] == 6.0 and out[1]["fail1"] == 1.0 and out[1]["lat3"] == 3.0
    s = summarize_outcomes(out)
    assert s["top1"] == pytest.approx((2 * 1.0 + 3.0) / (2 * 2.0 + 6.0))
    assert s["q1"] == pytest.approx((0.5 + 0.5) / 2)
    assert s["top3"] == 1.0 and s["hit1"] == 0.0 and s["fail1"] == 0.5
    assert s["fail3"] == pytest.approx((1 / 3 + 1 / 2) / 2, abs=1e-4)  # figures are rounded to 4 places
    perfect = score_groups(data.groups, np.array([3.0, 4.0, 0.0, 1.0, 0.0, 1.0]))
    assert summarize_outcomes(perfect)["top1"] == 1.0 and summarize_outcomes(perfect)["ndcg5"] == 1.0


def test_kernels_without_a_valid_candidate_are_not_scored():
    data = ranking_set(_kernel("m", "a", [None, None]))
    assert kernel_outcomes(data.groups[0], np.array([1.0, 0.0])) is None
    assert summarize_outcomes([None]) == {"kernels": 0}


def test_candidates_that_failed_to_replay_are_not_ranked():
    rows = _kernel("m", "a", [1.0, 2.0]) + [CandidateRow(
        target_model="m", target_kernel="a", class_key="c", match="class", status="replay_error", trace=None)]
    assert len(ranking_set(rows).groups[0].rows) == 2


def test_leave_model_out_keeps_the_model_out_of_training_as_target_and_as_source():
    rows = (_kernel("a", "k1", [1.0, 2.0], sources=["b", "c"]) + _kernel("b", "k2", [1.0, 2.0], sources=["a", "c"])
            + _kernel("c", "k3", [1.0, 2.0], sources=["a", "b"]))
    train, test = leave_model_out(rows, "a")
    assert {r.target_model for r in test} == {"a"}
    assert all(r.target_model != "a" and r.source_model != "a" for r in train)
    assert [r.source_model for r in train if not r.is_default] == ["c", "b"]


def test_evaluation_ranks_and_scores_every_held_out_model(monkeypatch):
    from featurize.candidate_features import Featurizer
    from featurize.trace_tokens import Vocabulary
    from training.evaluate import FeatureTable, leave_one_model_out
    rng = np.random.default_rng(0)
    rows = []
    for model in ("a", "b", "c"):
        for k in range(4):
            others = [m for m in ("a", "b", "c") if m != model]
            rows += _kernel(model, f"k{k}", list(rng.uniform(1, 4, size=6)), sources=others * 3)
    table = FeatureTable(Featurizer(Vocabulary.load()), [r for r in rows if r.replayed])
    result = leave_one_model_out(rows, table, ["heuristic", "random", "lgbm"], params={"lgbm": {"n_estimators": 5}},
                                 log=lambda m: None)
    for name in ("heuristic", "random", "lgbm"):
        r = result["rankers"][name]
        assert set(r["models"]) == {"a", "b", "c"} and r["pooled"]["kernels"] == 12
        assert 0 < r["pooled"]["top1"] <= r["pooled"]["top3"] <= r["pooled"]["top5"] <= 1.0


def test_no_fold_trains_on_its_held_out_model_as_target_or_as_donor(monkeypatch):
    """Every ranker a leave-one-model-out fold fits sees no row of the held-out model's kernels and no
    candidate donated by it, bank records included (recorded at the fit itself, so a fold filter removed or
    loosened anywhere on the way fails here)."""
    import training.evaluate as ev
    from featurize.candidate_features import Featurizer
    from featurize.trace_tokens import Vocabulary
    rows, extra = [], []
    for model in ("a", "b", "c"):
        others = [m for m in ("a", "b", "c") if m != model]
        for k in range(3):
            rows += _kernel(model, f"k{k}", [1.0 + k, 2.0, 3.0, 1.5], sources=others * 2)
        extra += [_row(model, "k0", 0.5 + i, source=None, rank=None) for i in range(2)]
    table = FeatureTable(Featurizer(Vocabulary.load()), [r for r in rows + extra if r.replayed])
    seen: list[tuple[str, set, set]] = []
    real_fit = ev.fit_ranker

    def recording_fit(name, data, table, params=None, **kw):
        seen.append((name, {r.target_model for r in data.rows}, {r.source_model for r in data.rows}))
        return real_fit(name, data, table, params, **kw)
    monkeypatch.setattr(ev, "fit_ranker", recording_fit)
    ev.leave_one_model_out(rows, table, ["random", "lgbm"], params={"lgbm": {"n_estimators": 3}}, extra=extra,
                           log=lambda m: None)
    assert len(seen) == 6
    for (name, targets, sources), held_out in zip(seen, ["a", "a", "b", "b", "c", "c"]):
        assert held_out not in targets and held_out not in sources, (name, held_out)
        assert targets == {"a", "b", "c"} - {held_out}  # the other models are there
