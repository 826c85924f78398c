"""Train a target's rankers on its transfer matrix, and evaluate them: what `schedrec train` / `evaluate` run.

Everything is per hardware target: `models/<key>/transfer/` (measured rows) and `models/<key>/bank/`
(source kernels) in, `models/<key>/rankers/<name>/` (model + meta.json) and
`models/<key>/rankers/evaluation.json` out. A new CPU's bank and matrix train its own rankers with the
same command.
"""
from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Callable

import numpy as np

from featurize.candidate_features import Featurizer
from featurize.trace_tokens import Vocabulary
from recommender.bank.sources import read_source_kernels
from recommender.core.errors import BankError
from recommender.core.fileio import atomic_write_json, display_path
from recommender.core.rows import CandidateRow, key_from_json

from .dataset import RankingSet, bank_record_rows, ranking_set, read_target_matrix, rows_digest, trainable
from .evaluate import FeatureTable, fit_ranker, leave_one_model_out, predict
from .fold_store import PARTIAL_FILE, FoldStore, entry_key
from .metrics import score_groups, summarize_outcomes
from .noise_ceiling import ceiling_file
from .registry import ranker_class
from .report import update_card

EVALUATION_FILE = "evaluation.json"
TIMING_FILE = "evaluation_timing.json"  # wall times: the one part of an evaluation that differs between runs
# the seeds of the spread: LightGBM's ensemble seeds seed..seed+4, so these never share a booster's seed
SPREAD_SEEDS = (0, 5, 10, 15, 20)
SPREAD_RANKERS = ("lgbm", "random")  # seeded and quick; tlp takes minutes per pass
SPREAD_METRICS = ("top1", "top5", "q1")


def per_store_lookup(features_file: Path) -> Callable[[list[CandidateRow]], np.ndarray] | None:
    """PerStoreFeature summaries saved by scripts/per_store_features.py, looked up by row key."""
    if not features_file.exists():
        return None
    import json
    data = np.load(features_file, allow_pickle=False)
    keys = [key_from_json(k) for k in json.loads(str(data["keys"]))]
    index = {k: i for i, k in enumerate(keys)}
    X = data["X"]

    def lookup(rows: list[CandidateRow]) -> np.ndarray:
        """Vectors of `rows`; NaN rows for candidates without one (the evaluation refuses to use those)."""
        out = np.full((len(rows), X.shape[1]), np.nan, dtype=np.float32)
        have = [i for i, r in enumerate(rows) if r.key in index]
        out[have] = X[[index[rows[i].key] for i in have]]
        return out

    return lookup


class TargetData:
    """A target's measured rows, featurizer and feature table, loaded once; with `hardware`, the featurizer
    adds the target's hardware block (what rankers trained across CPUs read: training.cross_target)."""

    def __init__(self, target_dir: Path, log: Callable[[str], None], bank_records: bool = True,
                 hardware: bool = False) -> None:
        self.target_dir = Path(target_dir)
        if not self.target_dir.is_dir():
            raise BankError(f"no target folder {self.target_dir}")
        t0 = time.perf_counter()
        self.rows = read_target_matrix(self.target_dir)
        spec = None
        if hardware:
            from recommender.target.hardware import hardware_for
            spec, note = hardware_for(self.target_dir.name)
            if note:
                log(note)
        self.featurizer = Featurizer(Vocabulary.load(), read_source_kernels(self.target_dir / "bank"), spec)
        # the bank's own tuning records join their kernels' groups for the rankers that use them
        self.extra = bank_record_rows(self.target_dir / "bank") if bank_records else []
        self.table = FeatureTable(self.featurizer, [r for r in self.rows if r.replayed] + self.extra,
                                  per_store_lookup(self.target_dir / "features" / "per_store.npz"))
        log(f"{display_path(self.target_dir)}: {len(self.rows)} rows and {len(self.extra)} bank records read in "
            f"{time.perf_counter() - t0:.1f} s")

    def training_set(self, name: str) -> RankingSet:
        """Every matrix kernel with a valid candidate (and its bank records, if the ranker uses them)."""
        use = bool(self.extra) and ranker_class(name).uses_extra_groups
        return trainable(self.rows + self.extra if use else self.rows)


def _names(requested: list[str], data: TargetData) -> list[str]:
    if "xgb_per_store" in requested and not data.table.has("per_store"):
        raise BankError(f"no PerStoreFeature vectors in {data.target_dir / 'features'}: run "
                        f"scripts/per_store_features.py first, or leave out xgb_per_store")
    return requested


def rule_kinds(data: RankingSet) -> list[str]:
    """The kernel kinds whose rule instances the training set holds measured (a transfer ranks the rule
    instances of other kinds by their rule's fixed order: `transfer.selection.Ranked`)."""
    return sorted({g.rows[0].class_key.split("/")[0] for g in data.groups
                   if any(r.source_kind == "rule" and r.ok for r in g.rows)})


def train(target_dir: Path, names: list[str], bank_records: bool = True, cluster: object | None = None,
          log: Callable[[str], None] = lambda m: print(m, file=sys.stderr)) -> dict:
    """Fit each ranker on the whole matrix (and the bank's own records, for rankers that use them) and save
    it under `<target>/rankers/<name>/`. With `cluster` (a `recommender.measure.cluster.ClusterAddress`), the
    rankers are fitted on that Dask cluster's workers (those with `fits_on_cluster`; others are refused)."""
    if cluster is not None:
        local_only = [n for n in names if not ranker_class(n).fits_on_cluster]
        if local_only:
            raise BankError(f"--cluster fits lgbm only; {', '.join(local_only)} fit on this machine: train "
                            f"them without --cluster")
    data = TargetData(target_dir, log, bank_records)
    names = _names(names, data)
    with _client(cluster) as client:
        return _train(data, names, client, cluster, log)


@contextmanager
def _client(cluster: object | None) -> Iterator[object | None]:
    """A Dask client of `cluster`, or None without one (Dask is then not imported)."""
    if cluster is None:
        yield None
        return
    from recommender.measure.cluster import connect
    with connect(cluster) as client:
        yield client


def _train(data: TargetData, names: list[str], client: object | None, cluster: object | None,
           log: Callable[[str], None]) -> dict:
    out = {}
    for name in names:
        t0 = time.perf_counter()
        train_set = data.training_set(name)
        digest = train_set.digest()
        ranker = fit_ranker(name, train_set, data.table, data_hash=digest, client=client)
        folder = data.target_dir / "rankers" / name
        spaced = (data.target_dir / "space").is_dir()
        trained_on = display_path(data.target_dir / "transfer") + (
            " + " + display_path(data.target_dir / "space") if spaced else "")
        extra = {"target_key": data.target_dir.name, "trained_on": trained_on,
                 "bank_records": bool(data.extra) and ranker.uses_extra_groups,
                 "kernels": len(train_set.groups), "candidates": int(train_set.sizes.sum()),
                 "rule_kinds": rule_kinds(train_set),
                 "models": sorted({g.key[0] for g in train_set.groups}),
                 "train_seconds": round(time.perf_counter() - t0, 2),
                 "feature_seconds": dict(data.table.seconds)}
        if client is not None:  # distributed LightGBM is not bit-identical to the local fit: say where it ran
            extra["cluster"] = {"address": cluster.text, "workers": len(client.scheduler_info()["workers"])}
        ranker.save(folder, extra)
        out[name] = extra
        log(f"{name}: trained on {extra['kernels']} kernels ({extra['candidates']} candidates) in "
            f"{extra['train_seconds']} s -> {display_path(folder)}")
    update_card(data.target_dir)
    return out


def evaluate(target_dir: Path, names: list[str], models: list[str] | None = None,
             fractions: tuple[float, ...] = (), bank_records: bool = True,
             seeds: tuple[int, ...] = SPREAD_SEEDS,
             log: Callable[[str], None] = lambda m: print(m, file=sys.stderr)) -> dict:
    """Leave-one-model-out figures of every ranker, the held-out zoo models' replays scored by rankers
    trained on the whole matrix, optionally a learning curve, and the spread of the seeded rankers over
    `seeds`; written to rankers/evaluation.json, which holds nothing that differs between two runs on the same
    data (wall times go to rankers/evaluation_timing.json)."""
    data = TargetData(target_dir, log, bank_records)
    names = _names(names, data)
    t0 = time.perf_counter()
    store = fold_store(data)
    if store.resumed:
        log(f"resuming: {store.resumed} fits kept in {display_path(store.path)}")
    result = {"target_key": data.target_dir.name, "feature_version": data.featurizer.version,
              "bank_records": len(data.extra),
              # what `schedrec train` on these rows records as each ranker's data hash: the card tells an
              # evaluation of other data from the saved rankers' own
              "data_hashes": {n: data.training_set(n).digest() for n in names},
              "lomo": leave_one_model_out(data.rows, data.table, names, models, extra=data.extra, log=log,
                                          store=store)}
    result["heldout"] = heldout_scores(data, names, log, store)
    if fractions:
        # the fast learned ranker only: the TLP model takes minutes per leave-one-model-out pass
        result["learning_curve"] = learning_curve(data, [n for n in names if n == "lgbm"], fractions, log, store)
    noise = ceiling_file(data.target_dir)
    if noise is not None:
        import json
        result["noise_ceiling"] = json.loads(noise.read_text())
    spread = [n for n in names if n in SPREAD_RANKERS]
    if spread and seeds:
        result["seed_spread"] = seed_spread(data, spread, seeds, models, log, store)
    timing = {"seconds": round(time.perf_counter() - t0, 1), "feature_seconds": dict(data.table.seconds),
              "rankers": {n: r.pop("seconds") for n, r in result["lomo"]["rankers"].items()}}
    atomic_write_json(str(data.target_dir / "rankers" / EVALUATION_FILE), result)
    atomic_write_json(str(data.target_dir / "rankers" / TIMING_FILE), timing)
    store.remove()
    update_card(data.target_dir)
    for name, r in result["lomo"]["rankers"].items():
        r["seconds"] = timing["rankers"][name]  # for the caller's table; not in the file
    result["seconds"] = timing["seconds"]
    return result


def fold_store(data: TargetData) -> FoldStore:
    """Where this evaluation keeps its finished folds (`rankers/evaluation.partial.json`), for these rows."""
    config = {"target_key": data.target_dir.name, "feature_version": data.featurizer.version,
              "rows": rows_digest(data.rows + data.extra, [data.target_dir / "features" / "per_store.npz"])}
    return FoldStore(data.target_dir / "rankers" / PARTIAL_FILE, config)


def seed_spread(data: TargetData, names: list[str], seeds: tuple[int, ...], models: list[str] | None,
                log: Callable[[str], None], store: FoldStore | None = None) -> dict:
    """Leave-one-model-out pooled top-1 / top-5 / Q@1 of each seeded ranker under every seed: each seed's
    figure, their mean, min and max."""
    per_seed: dict[str, dict[str, dict]] = {n: {} for n in names}
    for seed in seeds:
        r = leave_one_model_out(data.rows, data.table, names, models, extra=data.extra,
                                params={n: {"seed": seed} for n in names}, log=lambda m: None, store=store)
        for n in names:
            per_seed[n][str(seed)] = {k: r["rankers"][n]["pooled"][k] for k in SPREAD_METRICS}
        log(f"seed {seed}: " + ", ".join(f"{n} top1 {per_seed[n][str(seed)]['top1']:.3f}" for n in names))
    out: dict = {"seeds": list(seeds), "rankers": {}}
    for n in names:
        values = {k: [v[k] for v in per_seed[n].values()] for k in SPREAD_METRICS}
        out["rankers"][n] = {"per_seed": per_seed[n], **{k: {
            "mean": round(float(np.mean(v)), 4), "min": round(min(v), 4), "max": round(max(v), 4)}
            for k, v in values.items()}}
    return out


def heldout_scores(data: TargetData, names: list[str], log: Callable[[str], None],
                   store: FoldStore | None = None) -> dict:
    """Rankers fitted on every matrix row, scored on the exhaustive replays of models outside the bank
    (`<target>/heldout/<model>/candidates.jsonl.gz`), over their donor candidates only: those replays hold the
    rules' fixed tiles alone, not the rule space a pool ranks now, so their rule rows would score a choice among
    today's few tiles (on llvm-znver5-2c's resnet50 the conv rule's tiles were the best candidate of 23 of 25
    kernels); `schedrec compare` scores the whole pool."""
    from recommender.core.row_files import read_rows
    from recommender.core.rows import SAMPLED
    files = sorted((data.target_dir / "heldout").glob("*/candidates.jsonl.gz"))
    if not files:
        return {}
    rows = [r for f in files for r in read_rows(f) if r.match != SAMPLED]
    table = FeatureTable(data.featurizer, [r for r in rows if r.replayed])
    test = ranking_set(rows)
    out: dict = {"models": sorted({g.key[0] for g in test.groups}), "candidates": "donors", "rankers": {}}
    for name in names:
        if name == "xgb_per_store":
            continue  # no PerStoreFeature vectors for held-out replays
        # the held-out replays are not in the store's digest: their own digest is in the key
        key = entry_key("heldout", name, None, ",".join(out["models"]) + " " + rows_digest(rows))
        kept = store.get(key) if store is not None else None
        if kept is not None:
            outcomes = kept["outcomes"]
        else:
            t0 = time.perf_counter()
            ranker = fit_ranker(name, data.training_set(name), data.table)
            outcomes = score_groups(test.groups, predict(ranker, test, table))
            if store is not None:
                store.put(key, outcomes, time.perf_counter() - t0)
        per_model = {m: summarize_outcomes([o for o in outcomes if o and o["key"][0] == m]) for m in out["models"]}
        out["rankers"][name] = {"pooled": summarize_outcomes(outcomes), "models": per_model}
    log(f"held-out zoo models: {', '.join(out['models'])}")
    return out


def learning_curve(data: TargetData, names: list[str], fractions: tuple[float, ...],
                   log: Callable[[str], None], store: FoldStore | None = None) -> dict:
    """Pooled leave-one-model-out top-1/top-5 against the share of training kernels kept."""
    out: dict = {}
    for frac in fractions:
        r = leave_one_model_out(data.rows, data.table, names, train_fraction=frac, extra=data.extra,
                                log=lambda m: None, store=store)
        out[str(frac)] = {n: {k: r["rankers"][n]["pooled"][k] for k in ("top1", "top3", "top5")} for n in names}
        log(f"learning curve at {frac:.0%}: " + ", ".join(f"{n} top1 {out[str(frac)][n]['top1']}" for n in names))
    return out
