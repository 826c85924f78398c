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
