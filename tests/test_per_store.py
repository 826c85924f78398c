"""MetaSchedule PerStoreFeature features (real TVM, a small matmul) and the XGBoost per-store ranker."""
from __future__ import annotations

import numpy as np
import pytest

from featurize.per_store import FEATURE_VERSION, N_PER_STORE, SUMMARY_DIM, per_store_features, summarize, summarize_all
from tests.kernels_tir import matmul64
from training.rankers.base import RankerError
from training.rankers.xgb_per_store import XGBPerStoreRanker


def _schedules(target):
    """The untouched matmul and one tiled, parallel, vectorised version (postprocessed like a candidate)."""
    import tvm
    from tvm.s_tir import Schedule

    mod = tvm.IRModule({"main": matmul64})
    plain = Schedule(mod)
    sch = Schedule(mod)
    block = sch.get_sblock("C")
    i, j, k = sch.get_loops(block)
    io, ii = sch.split(i, [None, 8])
    jo, ji = sch.split(j, [None, 16])
    sch.reorder(io, jo, k, ii, ji)
    sch.parallel(sch.fuse(io, jo))
    sch.vectorize(ji)
    return mod, plain, sch


def test_features_shape_and_determinism(target):
    tt = target.tvm()
    mod, plain, tiled = _schedules(tt)
    timings: list = []
    a = per_store_features([plain, tiled, tiled.mod], tt, workload_mod=mod, timings=timings)
    b = per_store_features([plain, tiled], tt)
    assert len(a) == 3 and len(timings) == 3 and all(t > 0 for t in timings)
    for m in a:
        assert m.dtype == np.float32 and m.ndim == 2 and m.shape[1] == N_PER_STORE == 164
        assert m.shape[0] >= 1 and np.isfinite(m).all()
    np.testing.assert_array_equal(a[0], b[0])  # deterministic
    np.testing.assert_array_equal(a[1], b[1])
    np.testing.assert_array_equal(a[1], a[2])  # a Schedule or its module: the same features
    assert not np.array_equal(a[0], a[1])  # the schedule shows in the features
    s = summarize_all(a)
    assert s.shape == (3, SUMMARY_DIM) and s.dtype == np.float32 and SUMMARY_DIM == 3 * 164 + 1
    m = a[1].astype(np.float64)
    np.testing.assert_allclose(s[1, :164], m.sum(0), rtol=1e-6)
    np.testing.assert_allclose(s[1, 164:328], m.max(0), rtol=1e-6)
    np.testing.assert_allclose(s[1, 328:492], m.mean(0), rtol=1e-6)
    assert s[1, -1] == pytest.approx(np.log2(1 + m.shape[0]))
    np.testing.assert_array_equal(summarize(np.zeros((0, N_PER_STORE))), np.zeros(SUMMARY_DIM))


def _synthetic(seed: int = 0, groups: int = 12, per_group: int = 10, dim: int = 20):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(groups * per_group, dim)).astype(np.float32)
    y = np.maximum(0.0, X[:, 0] - 0.5 * X[:, 1] + 1.0)  # relevance, some zeros (failed)
    return X, y, np.full(groups, per_group)


def test_xgb_ranker_fit_predict_save_load(tmp_path):
    X, y, group = _synthetic()
    r = XGBPerStoreRanker(n_rounds=30, max_depth=4, n_jobs=1).fit(X, y, group, feature_version=FEATURE_VERSION)
    p = r.predict(X, group)
    assert p.shape == (X.shape[0],) and np.isfinite(p).all()
    # it learned the order within groups: the top prediction is a good candidate in most groups
    starts = np.concatenate([[0], np.cumsum(group)[:-1]])
    hits = sum(y[s + np.argmax(p[s:s + g])] >= np.sort(y[s:s + g])[-3] for s, g in zip(starts, group))
    assert hits >= 0.75 * len(group)
    r.save(tmp_path / "m")
    loaded = XGBPerStoreRanker.load(tmp_path / "m", feature_version=FEATURE_VERSION)
    assert loaded.get_params() == r.get_params()
    np.testing.assert_array_equal(loaded.predict(X), p)
    with pytest.raises(RankerError):
        XGBPerStoreRanker.load(tmp_path / "m", feature_version="another")
    with pytest.raises(RankerError):
        loaded.predict(X[:, :5])
    with pytest.raises(RankerError):
        XGBPerStoreRanker().predict(X)
