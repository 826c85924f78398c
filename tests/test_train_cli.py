"""`schedrec train` and `schedrec evaluate` on a small fixture target folder (rows in, files out; no TVM)."""
from __future__ import annotations

import gzip
import json

import numpy as np
import pytest

from recommender.core.rows import CandidateRow
from recommender.core.row_files import write_rows

from .cli_helpers import assert_one_line_error, run_main
from .test_featurize import ARGS, MATMUL_TRACE

MODELS = ("alpha", "beta", "gamma")


def _trace(unroll_choice: int, inner: int) -> list:
    insts, decisions = json.loads(json.dumps(MATMUL_TRACE))
    decisions = [[4, [1, 1, 128 // inner, inner]], [6, [2, 4, 1, 64]], [8, [1, 128]], [13, unroll_choice]]
    return [insts, decisions]


@pytest.fixture
def target_root(tmp_path, monkeypatch):
    """models/fx-key/ with a bank meta per model and a matrix whose latency follows the schedule."""
    rng = np.random.default_rng(0)
    root = tmp_path / "models"
    key = root / "fx-key"
    for model in MODELS:
        kernels = {f"k{i}": {"flops": 2.0 * 128 * 128 * 512, "args": [{"shape": list(s), "dtype": d} for s, d in ARGS],
                             "weight": 1} for i in range(4)}
        (key / "bank" / model).mkdir(parents=True)
        (key / "bank" / model / "meta.json").write_text(json.dumps({"model": model, "target_key": "fx-key",
                                                                    "kernels": kernels}))
        for name in ("database_workload.json.gz", "database_tuning_record.json.gz"):  # no records
            (key / "bank" / model / name).write_bytes(gzip.compress(b""))
        rows = []
        for i in range(4):
            base = dict(target_model=model, target_kernel=f"k{i}", class_key="matmul/s2r1:@matmul+add",
                        flops=2.0 * 128 * 128 * 512, target_args=ARGS)
            rows.append(CandidateRow(match="default", status="ok", latency_s=1.0, **base))
            for j in range(8):
                unroll, inner = int(rng.integers(0, 4)), int(2 ** rng.integers(0, 5))
                latency = 1e-3 * (1 + 0.5 * abs(unroll - 2)) * (8 / min(inner, 8)) * rng.uniform(0.95, 1.05)
                source = MODELS[(MODELS.index(model) + 1 + j % 2) % 3]
                rows.append(CandidateRow(match="class", status="ok", latency_s=latency, costs=(latency,),
                                         source_model=source, source_kernel=f"k{j % 4}", source_rank=j // 4,
                                         source_latency_s=1e-3, trace=_trace(unroll, inner), **base))
        write_rows(key / "transfer" / f"{model}.jsonl.gz", rows)
    (key / "card.md").write_text("# fx-key\n\n## bank\n\ntext\n")
    monkeypatch.setenv("SCHEDREC_MODELS_DIR", str(root))
    return key


def test_train_saves_rankers_and_evaluate_scores_them(target_root):
    r = run_main("train", "--target-key", "fx-key", "--ranker", "lgbm,heuristic")
    assert r.returncode == 0, r.stderr
    meta = json.loads((target_root / "rankers" / "lgbm" / "meta.json").read_text())
    assert meta["ranker"] == "lgbm" and meta["kernels"] == 12 and meta["candidates"] == 96
    assert meta["feature_version"].startswith("schema") and meta["data_hash"] and meta["models"] == list(MODELS)
    assert (target_root / "rankers" / "lgbm" / "model0.txt.gz").exists()
    r = run_main("evaluate", "--target-key", "fx-key", "--ranker", "lgbm,heuristic,random", "--learning-curve", "0.5,1")
    assert r.returncode == 0, r.stderr
    assert "Leave-one-model-out" in r.stdout and "| lgbm | 12 |" in r.stdout
    ev = json.loads((target_root / "rankers" / "evaluation.json").read_text())
    assert set(ev["lomo"]["rankers"]) == {"lgbm", "heuristic", "random"} and ev["lomo"]["models"] == list(MODELS)
    lgbm, rand = ev["lomo"]["rankers"]["lgbm"]["pooled"], ev["lomo"]["rankers"]["random"]["pooled"]
    assert lgbm["top1"] > rand["top1"]  # the schedule decides the latency here, and the model reads it
    assert set(ev["learning_curve"]) == {"0.5", "1.0"}
    card = (target_root / "card.md").read_text()
    assert card.startswith("# fx-key") and card.count("## Rankers") == 1 and "| lgbm | 12 |" in card
    assert not card.endswith("\n\n")  # one newline at the end, as scripts/make_card.py ends it
    run_main("evaluate", "--target-key", "fx-key", "--ranker", "random")  # a second run replaces the section
    assert (target_root / "card.md").read_text().count("## Rankers") == 1


def test_train_and_evaluate_refuse_bad_input_in_one_line(target_root):
    code_err = run_main("train", "--target-key", "no-such-key")
    assert_one_line_error(code_err.returncode, code_err.stderr, "no transfer matrix for target no-such-key")
    r = run_main("evaluate", "--target-key", "fx-key", "--ranker", "gbdt")
    assert r.returncode == 2 and "unknown ranker gbdt" in r.stderr
    r = run_main("evaluate", "--target-key", "fx-key", "--ranker", "xgb_per_store")
    assert_one_line_error(r.returncode, r.stderr, "no PerStoreFeature vectors")
    path = target_root / "transfer" / "beta.jsonl.gz"
    path.write_bytes(gzip.compress(b'{"target_model": "beta"}\n'))
    r = run_main("train", "--target-key", "fx-key", "--ranker", "lgbm")
    assert_one_line_error(r.returncode, r.stderr, "beta.jsonl.gz")


def test_a_saved_ranker_of_another_feature_version_is_refused(target_root):
    from training.rankers import LGBMRanker, RankerError
    assert run_main("train", "--target-key", "fx-key", "--ranker", "lgbm").returncode == 0
    meta_path = target_root / "rankers" / "lgbm" / "meta.json"
    meta = json.loads(meta_path.read_text())
    with pytest.raises(RankerError, match="train it again"):
        LGBMRanker.load(meta_path.parent, feature_version=meta["feature_version"] + "-next")


def test_bank_records_join_their_kernels_groups(tmp_path):
    from training.dataset import bank_record_rows, ranking_set
    folder = tmp_path / "bank" / "m"
    folder.mkdir(parents=True)
    shapes = {"k0": [[8, 8], [8, 8]], "k1": [[8, 16], [16, 16]]}
    kernels = {n: {"class_key": "matmul/s2r1:@matmul", "flops": 1.0, "weight": 2,
                   "args": [{"shape": s, "dtype": "float32"} for s in sh]} for n, sh in shapes.items()}
    (folder / "meta.json").write_text(json.dumps({"model": "m", "target_key": "k", "kernels": kernels}))
    (folder / "database_workload.json.gz").write_bytes(gzip.compress(b'["0", "w"]\n'))

    def record(shape, secs):
        trace = [MATMUL_TRACE[0] + [["EnterPostproc", [], [], []]], MATMUL_TRACE[1]]
        return json.dumps([0, [trace, secs, "llvm", [["TENSOR", "float32", s] for s in shape]]]) + "\n"

    lines = [record(shapes["k0"], [2e-3, 1e-3, 3e-3]), record(shapes["k0"], [5e-3]), record(shapes["k1"], [4e-3]),
             record(shapes["k1"], [1e10]), record([[3, 3]], [1e-3])]  # a failed one, an unmatched one
    (folder / "database_tuning_record.json.gz").write_bytes(gzip.compress("".join(lines).encode()))
    rows = bank_record_rows(tmp_path / "bank")
    assert [(r.target_kernel, r.latency_s) for r in rows] == [("k0", 2e-3), ("k0", 5e-3), ("k1", 4e-3)]
    assert all(r.source_model is None and r.weight == 2 and r.trace[0][-1][0] != "EnterPostproc" for r in rows)
    assert len({r.key for r in rows}) == 3  # distinct keys: features are looked up by key
    assert [len(g.rows) for g in ranking_set(rows).groups] == [2, 1]


def test_a_leave_out_selector_never_learns_from_its_model_and_ranks_its_kernels(target_root, monkeypatch):
    import training.evaluate as evaluate_mod
    from recommender.transfer.recommend import leave_out_selector
    from recommender.transfer.selection import KernelCandidates
    from training.dataset import ranking_set
    from training.train import TargetData
    fitted = []
    real_fit = evaluate_mod.fit_ranker
    monkeypatch.setattr(evaluate_mod, "fit_ranker", lambda name, data, *a, **kw: fitted.append(data)
                        or real_fit(name, data, *a, **kw))  # a spy: the real fit runs
    data = TargetData(target_root, log=lambda m: None)
    selector = leave_out_selector(data, "beta")
    assert selector.name == "lgbm (trained without beta)"
    (train_set,) = fitted
    used = {(r.target_model, r.source_model) for g in train_set.groups for r in g.rows}
    assert used and all("beta" not in pair for pair in used)
    assert {g.key[0] for g in train_set.groups} == {"alpha", "gamma"}
    group = next(g for g in ranking_set([r for r in data.rows if r.target_model == "beta"]).groups)
    candidates = [r for r in group.rows if r.replayed]
    order = selector.order(KernelCandidates(group.key, tuple(candidates), 1, 1.0))
    assert sorted(order) == list(range(len(candidates)))
    # it learned something: its first pick is faster than the median candidate
    assert candidates[order[0]].latency_s < np.median([r.latency_s for r in candidates])


def test_held_out_replays_are_scored_over_their_donor_candidates_only(target_root):
    """A held-out model's exhaustive replay also holds the kernel's own schedules (the rules' tiles, match
    SAMPLED), measured whatever the ranking and absent from the matrix the rankers learn from: they are not
    ranked. Here a rule tile is the fastest candidate of every kernel; scored with it, no donor order could
    reach a top-1 of 1, and the heuristic (rank 0 at shape distance 0) would pick it every time."""
    from recommender.core.row_files import read_rows
    rows = read_rows(target_root / "transfer" / "alpha.jsonl.gz")
    rows = [CandidateRow(**{**r.__dict__, "target_model": "delta"}) for r in rows]
    tiles = [CandidateRow(**{**r.__dict__, "match": "sampled", "source_model": "(conv rule)", "source_rank": 0,
                             "latency_s": 1e-5, "costs": (1e-5,), "source_kernel": r.target_kernel})
             for r in rows if r.match == "class" and r.source_rank == 0 and r.source_kernel == "k0"]
    write_rows(target_root / "heldout" / "delta" / "candidates.jsonl.gz", rows + tiles)
    r = run_main("evaluate", "--target-key", "fx-key", "--ranker", "lgbm,heuristic")
    assert r.returncode == 0, r.stderr
    held = json.loads((target_root / "rankers" / "evaluation.json").read_text())["heldout"]
    assert held["models"] == ["delta"] and held["candidates"] == "donors"
    pooled = held["rankers"]["lgbm"]["pooled"]
    assert pooled["kernels"] == 4 and pooled["top1"] > 0.5  # the donors' order, which the model learned
    assert "donor candidates only" in (target_root / "card.md").read_text()


def test_evaluate_writes_the_same_bytes_twice_with_the_spread_over_seeds(target_root):
    args = ("evaluate", "--target-key", "fx-key", "--ranker", "lgbm,random", "--seeds", "0,5,10")
    r = run_main(*args)
    assert r.returncode == 0, r.stderr
    path = target_root / "rankers" / "evaluation.json"
    first = path.read_bytes()
    ev = json.loads(first)
    assert "seconds" not in ev and all("seconds" not in r for r in ev["lomo"]["rankers"].values())
    timing = json.loads((target_root / "rankers" / "evaluation_timing.json").read_text())
    assert set(timing["rankers"]) == {"lgbm", "random"} and timing["seconds"] > 0
    spread = ev["seed_spread"]
    assert spread["seeds"] == [0, 5, 10] and set(spread["rankers"]) == {"lgbm", "random"}
    for name, s in spread["rankers"].items():
        values = [v["top1"] for v in s["per_seed"].values()]
        assert len(values) == 3 and s["top1"]["min"] == min(values) and s["top1"]["max"] == max(values)
        assert s["top1"]["min"] <= s["top1"]["mean"] <= s["top1"]["max"]
    # seed 0 is the run the main table reports
    assert spread["rankers"]["lgbm"]["per_seed"]["0"]["top1"] == ev["lomo"]["rankers"]["lgbm"]["pooled"]["top1"]
    # the random order differs between seeds, so the spread is not one figure copied
    assert len({v["top1"] for v in spread["rankers"]["random"]["per_seed"].values()}) > 1
    card = (target_root / "card.md").read_text()
    assert "refitted with seeds 0, 5, 10" in card and f"{spread['rankers']['lgbm']['top1']['mean']:.3f} (" in card
    assert run_main(*args).returncode == 0
    assert path.read_bytes() == first  # a rerun on the same data writes the same bytes
    r = run_main("evaluate", "--target-key", "fx-key", "--ranker", "random", "--seeds", "none")
    assert r.returncode == 0 and "seed_spread" not in json.loads(path.read_text())
    r = run_main("evaluate", "--target-key", "fx-key", "--seeds", "1,x")
    assert r.returncode == 2 and "comma-separated integers" in r.stderr


def test_an_interrupted_evaluation_resumes_from_its_finished_folds(target_root, monkeypatch):
    """A killed `schedrec evaluate` keeps every finished fold (rankers/evaluation.partial.json); the rerun fits
    only the rest and writes the bytes an uninterrupted run writes. Other rows start it afresh."""
    import training.evaluate as evaluate_mod
    from recommender.core.row_files import read_rows
    from training.train import evaluate
    names, kw = ["heuristic", "random"], dict(seeds=(0, 5), log=lambda m: None)  # quick fits: the folds are the point
    result, partial = target_root / "rankers" / "evaluation.json", target_root / "rankers" / "evaluation.partial.json"
    evaluate(target_root, names, **kw)
    reference = result.read_bytes()
    assert not partial.exists()
    fits, stop_after = [], [4]
    real_fit = evaluate_mod.fit_ranker

    def fit(name, data, *a, **k):
        if stop_after and len(fits) == stop_after[0]:
            raise KeyboardInterrupt
        fits.append(name)
        return real_fit(name, data, *a, **k)
    monkeypatch.setattr(evaluate_mod, "fit_ranker", fit)
    result.unlink()
    with pytest.raises(KeyboardInterrupt):
        evaluate(target_root, names, **kw)
    assert partial.exists() and not result.exists()
    fits.clear()
    stop_after.clear()
    evaluate(target_root, names, **kw)
    # 3 folds x 2 rankers, and the seeded one (random) again under seed 5 (seed 0 is the main pass's fit): 9 fits,
    # 4 kept from the killed run
    assert len(fits) == 9 - 4
    assert result.read_bytes() == reference and not partial.exists()
    # a partial file of other rows is not used
    stop_after.append(4)
    fits.clear()
    with pytest.raises(KeyboardInterrupt):
        evaluate(target_root, names, **kw)
    path = target_root / "transfer" / "alpha.jsonl.gz"
    rows = read_rows(path)
    write_rows(path, [CandidateRow(**{**r.__dict__, "latency_s": r.latency_s * 1.5}) if i == 3 else r
                      for i, r in enumerate(rows)])
    fits.clear()
    stop_after.clear()
    evaluate(target_root, names, **kw)
    assert len(fits) == 9 and not partial.exists()


def test_the_card_says_when_its_evaluation_is_of_other_data_than_the_saved_rankers(target_root):
    """Rankers retrained on a grown matrix and an evaluation of the old one: the card says its figures do not
    describe the saved rankers, until evaluate runs on the current rows."""
    from recommender.core.row_files import read_rows
    card = target_root / "card.md"
    assert run_main("train", "--target-key", "fx-key", "--ranker", "heuristic").returncode == 0
    assert run_main("evaluate", "--target-key", "fx-key", "--ranker", "heuristic", "--seeds", "none").returncode == 0
    assert "This evaluation is of other data" not in card.read_text()
    path = target_root / "transfer" / "beta.jsonl.gz"
    rows = read_rows(path)
    write_rows(path, rows + [CandidateRow(**{**rows[1].__dict__, "source_rank": 7, "latency_s": 5e-4})])
    assert run_main("train", "--target-key", "fx-key", "--ranker", "heuristic").returncode == 0
    text = card.read_text()
    assert "This evaluation is of other data than the saved heuristic" in text and "schedrec evaluate" in text
    assert run_main("evaluate", "--target-key", "fx-key", "--ranker", "heuristic", "--seeds", "none").returncode == 0
    assert "This evaluation is of other data" not in card.read_text()
