"""Leave-one-model-out evaluation of rankers on measured rows.

For each bank model M, every ranker is fitted on the rows whose target is another model and whose source
is not M (so M's schedules are neither in the training data nor in the candidate pool it is scored on),
then ranks M's kernels. Figures per model and pooled over all held-out kernels (training.metrics).
"""
from __future__ import annotations

import sys
import time
from typing import Callable

import numpy as np

from featurize.candidate_features import Featurizer
from featurize.validity import demote_known_failures
from recommender.core.rows import CandidateRow

from .dataset import RankingSet, leave_model_out, ranking_set, trainable
from .fold_store import FoldStore, entry_key
from .metrics import KS, score_groups, summarize_outcomes
from .rankers import Ranker, TransferTuningHeuristic
from .registry import featurize_for, ranker_class


class FeatureTable:
    """Features of every row for each feature set, computed once and sliced per fold."""

    def __init__(self, featurizer: Featurizer, rows: list[CandidateRow],
                 per_store: Callable[[list[CandidateRow]], np.ndarray] | None = None) -> None:
        self.featurizer = featurizer
        self._index = {r.key: i for i, r in enumerate(rows)}
        self._sets: dict[str, np.ndarray] = {}
        self._rows = rows
        self._per_store = per_store
        self.seconds: dict[str, float] = {}

    @property
    def rows(self) -> list[CandidateRow]:
        return self._rows

    def has(self, feature_set: str) -> bool:
        """Whether this table can give `feature_set` (per_store needs its saved vectors)."""
        return feature_set != "per_store" or self._per_store is not None

    def _compute(self, feature_set: str) -> np.ndarray:
        t0 = time.perf_counter()
        if feature_set == "per_store":
            if self._per_store is None:
                raise KeyError("per_store features are not available")
            X = self._per_store(self._rows)
        else:
            X = featurize_for(self.featurizer, feature_set)(self._rows)
        self.seconds[feature_set] = round(time.perf_counter() - t0, 2)
        return X

    def get(self, feature_set: str, rows: list[CandidateRow]) -> np.ndarray:
        if feature_set not in self._sets:
            self._sets[feature_set] = self._compute(feature_set)
        X = self._sets[feature_set][[self._index[r.key] for r in rows]]
        if X.dtype.kind == "f" and np.isnan(X).any():
            from recommender.core.errors import BankError
            missing = next(r.key for r, bad in zip(rows, np.isnan(X).reshape(len(X), -1).any(axis=1)) if bad)
            raise BankError(f"no {feature_set} features for {int(np.isnan(X).reshape(len(X), -1).any(axis=1).sum())} "
                            f"candidates (e.g. {missing}); for per_store run scripts/per_store_features.py again")
        return X


def make_ranker(name: str, featurizer: Featurizer, params: dict | None = None) -> Ranker:
    cls = ranker_class(name)
    if cls is TransferTuningHeuristic:
        return TransferTuningHeuristic.for_names(featurizer.tabular_names)
    return cls(**(params or {}))


def fit_ranker(name: str, data: RankingSet, table: FeatureTable, params: dict | None = None,
               data_hash: str = "", client: object | None = None) -> Ranker:
    """The ranker `name` fitted on `data` (on a Dask cluster's workers with `client`)."""
    ranker = make_ranker(name, table.featurizer, params)
    X = table.get(ranker.feature_set, data.rows)
    return ranker.fit(X, data.relevance(), data.sizes, feature_version=table.featurizer.version,
                      data_hash=data_hash, client=client,
                      group_weight=data.time_weights() if ranker.wants_group_weight else None)


def predict(ranker: Ranker, data: RankingSet, table: FeatureTable, validity: bool = True) -> np.ndarray:
    """The ranker's scores; with `validity`, candidates known to fail (featurize.validity) go last."""
    scores = ranker.predict(table.get(ranker.feature_set, data.rows), data.sizes)
    return demote_known_failures(data.rows, scores) if validity else scores


def leave_one_model_out(rows: list[CandidateRow], table: FeatureTable, names: list[str],
                        models: list[str] | None = None, params: dict[str, dict] | None = None,
                        train_fraction: float = 1.0, seed: int = 0, extra: list[CandidateRow] = (),
                        log: Callable[[str], None] = lambda m: print(m, file=sys.stderr),
                        store: FoldStore | None = None) -> dict:
    """Per-model and pooled figures of every ranker in `names`; `train_fraction` < 1 keeps a random share
    of the training kernels (the learning curve); `extra` rows (e.g. the bank's own tuning records) join
    the training data of every fold whose held-out model they do not belong to. With `store`, each fold's
    outcomes are saved as it finishes and a fold already there (same training share, seed, ranker, parameters
    and held-out model) is not fitted again."""
    models = models or sorted({r.target_model for r in rows})
    outcomes: dict[str, dict[str, list]] = {n: {} for n in names}
    seconds: dict[str, float] = {n: 0.0 for n in names}
    for model in models:
        keys = {n: entry_key(f"lomo {train_fraction} {seed}", n, _set_params(n, (params or {}).get(n)), model)
                for n in names}
        plain, held_out = leave_model_out(rows, model)
        test = ranking_set(held_out)
        more = plain + leave_model_out(list(extra), model)[0]
        sets = {False: _training_set(plain, train_fraction, seed), True: _training_set(more, train_fraction, seed)}
        kept_names = []
        for name in names:
            kept = store.get(keys[name]) if store is not None else None
            if kept is not None:  # finished by an earlier, interrupted run of the same evaluation
                outcomes[name][model] = kept["outcomes"]
                seconds[name] += kept["seconds"]
                kept_names.append(name)
                continue
            t0 = time.perf_counter()
            train = sets[bool(extra) and ranker_class(name).uses_extra_groups]
            ranker = fit_ranker(name, train, table, (params or {}).get(name))
            scores = predict(ranker, test, table)
            spent = time.perf_counter() - t0
            seconds[name] += spent
            outcomes[name][model] = score_groups(test.groups, scores)
            if store is not None:
                store.put(keys[name], outcomes[name][model], spent)
        train = sets[False]
        log(f"held out {model}: {len(test.groups)} kernels, trained on {len(train.groups)}"
            + (f" ({', '.join(kept_names)} kept from the last run)" if kept_names else ""))
    result: dict = {"models": models, "ks": list(KS), "rankers": {}}
    for name in names:
        per_model = {m: summarize_outcomes(o) for m, o in outcomes[name].items()}
        pooled = summarize_outcomes([x for o in outcomes[name].values() for x in o])
        result["rankers"][name] = {"pooled": pooled, "models": per_model, "seconds": round(seconds[name], 2)}
    return result


def _set_params(name: str, params: dict | None) -> dict:
    """`params` without those equal to the ranker's defaults: a fit under seed 0 is the main pass's fit, and the
    fold store keeps it once."""
    import inspect
    defaults = {k: p.default for k, p in inspect.signature(ranker_class(name).__init__).parameters.items()}
    return {k: v for k, v in (params or {}).items() if k not in defaults or defaults[k] != v}


def _training_set(rows: list[CandidateRow], fraction: float, seed: int) -> RankingSet:
    """Kernels with a valid candidate and 2 or more candidates; a seeded `fraction` of them if < 1."""
    train = trainable(rows)
    if fraction < 1.0:
        rng = np.random.default_rng(seed)
        keep = set(rng.permutation(len(train.groups))[:max(1, int(round(fraction * len(train.groups))))])
        train = RankingSet([g for i, g in enumerate(train.groups) if i in keep])
    return train


def format_table(result: dict, title: str = "") -> str:
    """The pooled figures of every ranker as a Markdown table."""
    cols = ["top1", "top3", "top5", "q1", "q3", "q5", "ndcg5", "hit1", "hit5", "fail1", "fail5"]
    lines = ([title, ""] if title else []) + [
        "| ranker | kernels | " + " | ".join(cols) + " | seconds |", "|---|---|" + "---|" * len(cols) + "---|"]
    for name, r in result["rankers"].items():
        p = r["pooled"]
        lines.append(f"| {name} | {p.get('kernels', 0)} | " + " | ".join(f"{p.get(c, float('nan')):.3f}" for c in cols)
                     + f" | {r['seconds']:.1f} |")
    return "\n".join(lines)


def per_model_table(result: dict, metric: str = "top1") -> str:
    names = list(result["rankers"])
    lines = ["| held-out model | " + " | ".join(names) + " |", "|---|" + "---|" * len(names)]
    for m in result["models"]:
        cells = [result["rankers"][n]["models"].get(m, {}).get(metric) for n in names]
        lines.append(f"| {m} | " + " | ".join("-" if c is None else f"{c:.3f}" for c in cells) + " |")
    return "\n".join(lines)
