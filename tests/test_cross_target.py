"""Rankers across targets: groups never mix targets, held-out models and the held-out target stay out of
training, adaptation goes on from the shared model, a transfer picks the shared ranker (issue 40 items 2-3),
and the noise ceiling scores with evaluate's metric (item 4). No TVM: plain rows and LightGBM."""
from __future__ import annotations

import json
from types import SimpleNamespace

import numpy as np
import pytest

from recommender.core.rows import CandidateRow
from training.cross_target import adapt, fold_sets, pooled_parts, sample_kernels, stacked, zero_shot_parts
from training.dataset import RankingSet
from training.rankers import LGBMRanker, RandomRanker, RankerError

MODELS = ("alpha", "beta", "gamma")


def _rows(target_id: int, rng) -> list[CandidateRow]:
    """Rows of one target: every model's two kernels, each with 2 x (4 - target_id) donor candidates from the
    other models (groups of another size on each target); the same (model, kernel) names on every target, as
    the shipped matrices have."""
    rows = []
    for model in MODELS:
        for kernel in ("k0", "k1"):
            for i, source in enumerate(m for m in MODELS if m != model for _ in range(4 - target_id)):
                rows.append(CandidateRow(
                    target_model=model, target_kernel=kernel, class_key="dense/s2r1:@dense", match="class",
                    status="ok", weight=1 + target_id, source_model=source, source_kernel=f"s{i}", source_rank=i,
                    trace=[[], []], latency_s=float(1e-4 * (1 + rng.random()))))
    return rows


class _Table:
    """Feature column 0 is the target's id, column 1 a feature the latency follows."""

    def __init__(self, target_id: int, rows: list[CandidateRow]) -> None:
        self.index = {r.key: i for i, r in enumerate(rows)}
        self.target_id = target_id

    def get(self, feature_set: str, rows: list[CandidateRow]) -> np.ndarray:
        return np.asarray([[self.target_id, -r.latency_s * 1e4, self.index[r.key]] for r in rows], dtype=np.float32)


def _datas(n: int = 3) -> dict:
    rng = np.random.default_rng(0)
    out = {}
    for t in range(n):
        rows = _rows(t, rng)
        out[f"llvm-cpu{t}-2c"] = SimpleNamespace(rows=rows, extra=[], table=_Table(t, rows),
                                                 featurizer=SimpleNamespace(version="v-test"))
    return out


def test_no_group_mixes_targets():
    datas = _datas()
    sets = fold_sets(datas, ["alpha"])
    parts = [(datas[k], sets[k][0]) for k in datas]
    X, y, sizes = stacked(parts)
    at = 0
    for n in sizes:  # every query group is one target's kernel, whole
        assert len(set(X[at:at + n, 0])) == 1
        at += n
    assert at == len(X) and len(sizes) == sum(len(rs.groups) for _, rs in parts) == 3 * 4


def test_held_out_models_are_out_of_every_targets_training():
    datas = _datas()
    sets = fold_sets(datas, ["alpha"])
    for key, (train, test) in sets.items():
        assert {r.target_model for r in test.rows} == {"alpha"}
        assert all(r.target_model != "alpha" and r.source_model != "alpha" for r in train.rows), key


def test_the_zero_shot_split_leaves_the_held_out_target_out():
    datas = _datas()
    sets = fold_sets(datas, ["beta"])
    for key in datas:
        parts = zero_shot_parts(datas, sets, key)
        assert len(parts) == len(datas) - 1 and all(d is not datas[key] for d, _ in parts)
        X, _, _ = stacked(parts)
        assert datas[key].table.target_id not in set(X[:, 0])


def test_a_pooled_adaptation_sees_only_the_n_kernels_of_its_target():
    datas = _datas()
    sets = fold_sets(datas, ["beta"])
    key = "llvm-cpu0-2c"
    part = sample_kernels(sets[key][0], 2, seed=1)
    assert len(part.groups) == 2 < len(sets[key][0].groups)
    X, _, sizes = stacked(pooled_parts(datas, sets, key, part))
    own_id = datas[key].table.target_id
    assert int((X[:, 0] == own_id).sum()) == int(part.sizes.sum())  # the N kernels' rows, no other of its own
    others = stacked(zero_shot_parts(datas, sets, key))[0]
    assert len(X) == len(others) + int(part.sizes.sum()) and len(sizes) == len(stacked(zero_shot_parts(
        datas, sets, key))[2]) + 2


def test_adaptation_goes_on_from_the_shared_model():
    datas = _datas()
    sets = fold_sets(datas, ["gamma"])
    key = "llvm-cpu0-2c"
    X, y, sizes = stacked(zero_shot_parts(datas, sets, key))
    shared = LGBMRanker(n_estimators=20, n_models=2, min_child_samples=2).fit(X, y, sizes, feature_version="v-test")
    adapted = adapt(shared, datas[key], sets[key][0], trees=5)
    assert [b.num_trees() for b in adapted.boosters_] == [b.num_trees() + 5 for b in shared.boosters_]
    with pytest.raises(RankerError, match="feature shape"):
        LGBMRanker(n_models=2).fit(X[:, :2], y, sizes, init_model=shared)
    with pytest.raises(RankerError, match="features 'v-test'"):
        LGBMRanker(n_models=2).fit(X, y, sizes, feature_version="v-other", init_model=shared)
    with pytest.raises(RankerError, match="cannot go on"):
        RandomRanker().fit(X, y, sizes, init_model=shared)
    with pytest.raises(RankerError, match="boosters"):
        LGBMRanker(n_models=3).fit(X, y, sizes, feature_version="v-test", init_model=shared)


def test_a_cpu_without_rankers_gets_the_shared_one_and_never_a_shared_bank(tmp_path):
    from recommender.target.folders import SHARED, rankers_for, resolve
    for key in ("llvm-znver3-2c", "llvm-znver4-2c"):
        (tmp_path / key / "bank").mkdir(parents=True)
    (tmp_path / "llvm-znver3-2c" / "rankers").mkdir()
    assert rankers_for(tmp_path, "llvm-znver3-2c") == (tmp_path / "llvm-znver3-2c", None)
    folder, note = rankers_for(tmp_path, "llvm-znver2-2c")  # no shared ranker yet: the nearest target's
    assert folder.name == "llvm-znver3-2c" and "nearest" in note
    meta = tmp_path / SHARED / "rankers" / "lgbm" / "meta.json"
    meta.parent.mkdir(parents=True)
    meta.write_text(json.dumps({"targets": ["llvm-znver3-2c", "llvm-znver4-2c"], "hardware": True}))
    folder, note = rankers_for(tmp_path, "llvm-znver2-2c")
    assert folder.name == SHARED and "across targets (llvm-znver3-2c, llvm-znver4-2c)" in note
    (tmp_path / SHARED / "bank").mkdir()
    for key in ("llvm-znver2-2c", "llvm-nosuchcpu-2c"):  # shared/ is no target, however near its name sorts
        assert resolve(tmp_path, key, "bank")[0].name != SHARED


def test_a_ranker_trained_across_targets_needs_the_target_it_ranks_for(tmp_path):
    from recommender.core.errors import SchedrecError
    from recommender.transfer.recommend import load_selector
    folder = tmp_path / "rankers" / "lgbm"
    folder.mkdir(parents=True)
    (folder / "meta.json").write_text(json.dumps({"ranker": "lgbm", "hardware": True}))
    with pytest.raises(SchedrecError, match="target key"):
        load_selector("lgbm", tmp_path, tmp_path)


def test_the_noise_ceiling_scores_with_evaluates_metric(tmp_path):
    """Two kernels: the oracle by pass A picks a candidate that B finds 2x slower on the heavy kernel; a
    candidate that failed in the matrix stays a failure; the metric weights the kernels."""
    from recommender.core.fileio import gzip_writer
    from recommender.core.row_files import write_rows
    from training.noise_ceiling import ceiling

    def row(kernel, i, status="ok", lat=1e-3, weight=1, match="class"):
        return CandidateRow(target_model="m", target_kernel=kernel, class_key="dense/s2r1:@dense", match=match,
                            status=status, weight=weight, source_model=None if match == "default" else "d",
                            source_kernel=f"s{i}", source_rank=i, trace=None if match == "default" else [[], []],
                            latency_s=lat if status == "ok" else None)
    rows = [row("heavy", 0, weight=3), row("heavy", 1, weight=3), row("heavy", 2, "wrong_result", weight=3),
            row("heavy", 9, lat=5e-3, weight=3, match="default"),
            row("light", 0), row("light", 1), row("light", 9, lat=4e-3, match="default")]
    write_rows(tmp_path / "m.jsonl.gz", rows)
    # pass A / pass B latencies: heavy s0 fastest by A, but 2x slower than s1 by B; light agrees
    passes = {("heavy", "s0"): (1.0e-3, 2.0e-3), ("heavy", "s1"): (1.1e-3, 1.0e-3),
              ("light", "s0"): (1.0e-3, 1.0e-3), ("light", "s1"): (2.0e-3, 2.0e-3)}
    (tmp_path / "noise").mkdir()
    with gzip_writer(str(tmp_path / "noise" / "remeasure.jsonl.gz"), text=True) as f:
        for r in rows:
            if r.match != "default" and r.status == "ok":
                a, b = passes[(r.target_kernel, r.source_kernel)]
                f.write(json.dumps({**r.to_json(), "trace": None, "latency_s": a, "costs": [a] * 5,
                                    "again_latency_s": b, "again_costs": [b] * 5}) + "\n")
    c = ceiling(tmp_path)
    assert c["kernels"] == 2 and c["remeasured"] == 4 and c["candidates"] == 5
    # top-1: weighted best/picked = (3 * 1.0 + 1 * 1.0) / (3 * 2.0 + 1 * 1.0)
    assert c["a_to_b"]["top1"] == round(4.0 / 7.0, 4) and c["a_to_b"]["q1"] == round((0.5 + 1.0) / 2, 4)
    assert c["a_to_b"]["top3"] == 1.0 and c["a_to_b"]["fail3"] == round((1 / 3 + 0) / 2, 4)
    assert c["repeats_curve"]["5"]["top1"] == c["a_to_b"]["top1"] and c["repeats_for_top1_095"] is None


def test_a_new_cpus_summary_takes_q_from_the_interleaved_medians_and_reaches_the_shared_card(tmp_path):
    import sys
    from pathlib import Path
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    from new_cpu import summarize
    from training.report import update_shared_card
    retime = {"methods": {"exhaustive": {"median_s": 0.050}, "lgbm-k2": {"median_s": 0.0625}}}
    compare = {"bank": "/x/llvm-znver5-2c/bank",
               "methods": {"exhaustive": {"measurements": 900, "search_s": 600.0},
                           "lgbm-k2": {"measurements": 56, "search_s": 101.4}}}
    s = summarize(retime, compare)
    assert s["bank"] == "llvm-znver5-2c"
    assert s["methods"]["lgbm-k2"] == {"median_ms": 62.5, "q_vs_exhaustive": 0.8, "measurements": 56,
                                       "search_s": 101.4}
    folder = tmp_path / "shared" / "new_cpu" / "llvm-znver4-2c" / "resnet50"
    folder.mkdir(parents=True)
    (folder / "summary.json").write_text(json.dumps({"target_key": "llvm-znver4-2c", "model": "resnet50",
                                                     "borrowed_from": ["llvm-znver5-2c"], **s}))
    card = update_shared_card(tmp_path / "shared").read_text()
    assert "| lgbm-k2 | 62.50 | 0.800 | 56 | 101 |" in card and "Measured on `llvm-znver4-2c`" in card
