"""The ranker interface: fit/predict/save/load, input checks, schema mismatch refused (no TVM)."""
from __future__ import annotations

import json

import numpy as np
import pytest

from training.rankers import LGBMRanker, RandomRanker, RankerError, TLPRanker, TransferTuningHeuristic
from training.registry import ranker_class


def _groups(n_groups=40, size=12, n_features=6, seed=0):
    """Tabular data whose relevance is a noisy function of feature 0 within each group."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n_groups * size, n_features)).astype(np.float32)
    y = 1.0 / (1.0 + np.exp(-2 * X[:, 0])) + 0.05 * rng.random(len(X))
    for g in range(n_groups):
        s = slice(g * size, (g + 1) * size)
        y[s] = y[s] / y[s].max()
    y[rng.random(len(X)) < 0.05] = 0.0  # failed candidates
    return X, y, np.full(n_groups, size)


def _top1_hits(scores, y, group):
    at, hits = 0, 0
    for n in group:
        hits += y[at + np.argmax(scores[at:at + n])] == y[at:at + n].max()
        at += n
    return hits / len(group)


def test_lgbm_learns_a_ranking_and_round_trips(tmp_path):
    X, y, g = _groups()
    ranker = LGBMRanker(n_estimators=60).fit(X, y, g, feature_version="v-test", data_hash="abc")
    Xt, yt, gt = _groups(seed=1)
    scores = ranker.predict(Xt)
    assert _top1_hits(scores, yt, gt) > 0.5 > _top1_hits(RandomRanker(seed=3).predict(Xt), yt, gt)
    ranker.save(tmp_path / "lgbm")
    loaded = LGBMRanker.load(tmp_path / "lgbm", feature_version="v-test")
    assert np.allclose(loaded.predict(Xt), scores)
    assert loaded.get_params() == ranker.get_params() and loaded.data_hash_ == "abc"


def test_lgbm_fits_the_same_boosters_on_the_same_data():
    """Evaluation figures must not move on a rerun of the same data: two fits give identical boosters."""
    X, y, g = _groups(n_groups=60, size=30, n_features=10)
    a, b = (LGBMRanker(n_estimators=40).fit(X, y, g, feature_version="v-test") for _ in range(2))
    assert [m.model_to_string() for m in a.boosters_] == [m.model_to_string() for m in b.boosters_]
    assert all("[deterministic: 1]" in m.model_to_string() for m in a.boosters_)


def test_a_saved_ranker_is_refused_for_other_features_or_data(tmp_path):
    X, y, g = _groups(n_groups=10)
    LGBMRanker(n_estimators=5).fit(X, y, g, feature_version="schema1").save(tmp_path / "r")
    with pytest.raises(RankerError, match="trained on features 'schema1'.*train it again"):
        LGBMRanker.load(tmp_path / "r", feature_version="schema2")
    with pytest.raises(RankerError, match="other data"):
        LGBMRanker.load(tmp_path / "r", data_hash="other")
    with pytest.raises(RankerError, match="holds no tlp ranker"):
        TLPRanker.load(tmp_path / "r")
    (tmp_path / "r" / "meta.json").write_text("{not json")
    with pytest.raises(RankerError, match="corrupt"):
        LGBMRanker.load(tmp_path / "r")
    with pytest.raises(RankerError, match="cannot read"):
        LGBMRanker.load(tmp_path / "missing")


def test_input_is_checked_at_the_boundary():
    X, y, g = _groups(n_groups=5)
    with pytest.raises(RankerError, match="needs `group`"):
        LGBMRanker().fit(X, y, None)
    with pytest.raises(RankerError, match="summing to"):
        LGBMRanker().fit(X, y, g[:-1])
    with pytest.raises(RankerError, match="y has shape"):
        LGBMRanker().fit(X, y[:-1], g)
    bad = X.copy()
    bad[0, 0] = np.nan
    with pytest.raises(RankerError, match="NaN"):
        LGBMRanker().fit(bad, y, g)
    with pytest.raises(RankerError, match="non-negative"):
        LGBMRanker().fit(X, -y, g)
    with pytest.raises(RankerError, match="not fitted"):
        LGBMRanker().predict(X)
    fitted = LGBMRanker(n_estimators=5).fit(X, y, g)
    with pytest.raises(RankerError, match="feature shape"):
        fitted.predict(X[:, :3])


def test_tlp_learns_from_token_sequences_and_round_trips(tmp_path):
    rng = np.random.default_rng(0)
    n_groups, size, tokens, width = 30, 8, 6, 5
    X = np.zeros((n_groups * size, 1 + tokens, width), dtype=np.float32)
    X[:, 0, 0] = 9  # the context token
    X[:, 1:, 0] = rng.integers(1, 9, size=(len(X), tokens))
    X[:, 1:, 1:] = rng.normal(size=(len(X), tokens, width - 1))
    X[:, -2:, 0] = 0  # padding
    X[:, -2:, 1:] = 0
    y = 1.0 / (1.0 + np.exp(-X[:, 1:, 1].sum(axis=1)))  # relevance from one numeric column
    g = np.full(n_groups, size)
    ranker = TLPRanker(dim=16, heads=2, epochs=15, learning_rate=3e-3).fit(X, y, g, feature_version="t")
    scores = ranker.predict(X)
    assert np.corrcoef(scores, y)[0, 1] > 0.5
    ranker.save(tmp_path / "tlp")
    loaded = TLPRanker.load(tmp_path / "tlp", feature_version="t")
    assert np.allclose(loaded.predict(X), scores, atol=1e-5)


def test_baselines_need_no_fit_and_the_heuristic_prefers_best_records_of_close_shapes(tmp_path):
    names = ["a", "source_rank", "shape_distance", "expected_latency"]
    h = TransferTuningHeuristic.for_names(names)
    X = np.array([[0, 1, 0.0, 1.0], [0, 0, 3.0, 9.0], [0, 0, 1.0, 5.0], [0, 0, 1.0, 2.0]], dtype=np.float32)
    assert list(np.argsort(-h.predict(X))) == [3, 2, 1, 0]
    r = RandomRanker(seed=1)
    assert np.array_equal(r.predict(X), RandomRanker(seed=1).predict(X))
    h.save(tmp_path / "h")
    assert json.loads((tmp_path / "h" / "meta.json").read_text())["ranker"] == "heuristic"
    assert np.array_equal(TransferTuningHeuristic.load(tmp_path / "h").predict(X), h.predict(X))


def test_unknown_ranker_names_are_refused():
    assert ranker_class("lgbm") is LGBMRanker
    with pytest.raises(RankerError, match="unknown ranker 'gbdt'"):
        ranker_class("gbdt")


def test_lgbm_weighs_query_groups_by_kernel_time_when_asked():
    """34 light kernels prefer a high feature 0, 6 heavy ones (100x the time) a low one, and no feature tells them
    apart: unweighted, the majority wins; weighted by time (p = 1), the heavy kernels do (Q@1 on kernels of the
    heavy kind: the chosen candidate's relevance against the best's, 0.68 against 0.02 here)."""
    rng = np.random.default_rng(0)
    n, size = 40, 10
    X = rng.normal(size=(n * size, 4)).astype(np.float32)
    heavy = np.arange(n) >= 34
    sign = np.repeat(np.where(heavy, -1.0, 1.0), size)
    y = 1.0 / (1.0 + np.exp(-3 * sign * X[:, 0]))
    group = np.full(n, size)
    time_s = np.where(heavy, 1e-2, 1e-4)
    Xt = rng.normal(size=(20 * size, 4)).astype(np.float32)
    yt = 1.0 / (1.0 + np.exp(3 * Xt[:, 0]))  # test kernels of the heavy kind
    gt = np.full(20, size)
    plain = LGBMRanker(n_estimators=40, n_models=1).fit(X, y, group)
    weighted = LGBMRanker(n_estimators=40, n_models=1, time_weight_power=1.0).fit(X, y, group, group_weight=time_s)
    def q1(scores):
        return np.mean([yt[i * size + np.argmax(scores[i * size:(i + 1) * size])] / yt[i * size:(i + 1) * size].max()
                        for i in range(len(gt))])
    assert q1(weighted.predict(Xt)) > 0.4 > 0.1 > q1(plain.predict(Xt))
    with pytest.raises(RankerError, match="does not weigh query groups"):
        LGBMRanker(n_estimators=5).fit(X, y, group, group_weight=time_s)
    with pytest.raises(RankerError, match="one positive finite value per group"):
        LGBMRanker(n_estimators=5, time_weight_power=1.0).fit(X, y, group, group_weight=time_s[:-1])


def test_a_group_weighs_its_kernel_weight_times_its_fastest_latency():
    from recommender.core.rows import CandidateRow
    from training.dataset import KernelGroup, RankingSet

    def row(status, latency):
        return CandidateRow("m", "k", "c", "class", status, latency_s=latency)
    groups = [KernelGroup(("m", "a"), (row("ok", 2e-3), row("ok", 1e-3)), 3, 5e-3),
              KernelGroup(("m", "b"), (row("build_error", None),), 2, 4e-3),  # none valid: its default's
              KernelGroup(("m", "c"), (row("build_error", None),), 1, None)]  # nothing known: the smallest
    assert np.allclose(RankingSet(groups).time_weights(), [3e-3, 8e-3, 3e-3])
