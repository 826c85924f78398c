"""Baseline: MetaSchedule's XGBoost cost model on its own PerStoreFeature features, trained on our data.

MetaSchedule's XGBModel (tvm.s_tir.meta_schedule.cost_model.XGBModel) fits gradient-boosted trees on
PerStoreFeature rows with max_depth 10, eta 0.2, gamma 0.001, min_child_weight 0, and a squared error on
normalised throughput (best latency in the group / latency), summed over a candidate's stores ("PackSum").
This baseline keeps the features and the tree settings, but
- ranks with xgboost's `rank:pairwise` objective (LambdaRank's pairwise RankNet loss) over query groups =
  target kernels, on the caller's relevance `y` (higher is better, failed candidates 0): the comparison is a
  ranking one, and only the order within a kernel matters, which a pairwise loss learns directly
  (`objective="reg:squarederror"` gives MetaSchedule's regression on `y` instead);
- reads one fixed-length row per candidate, PerStoreFeature summarised over stores
  (`featurize.per_store.summarize`: sum, max and mean over stores, and the store count; 493 values), not the
  per-store rows with the pack-sum objective;
- trains a fixed number of rounds (`n_rounds`) rather than up to 10000 with early stopping on a held-out
  split: model selection belongs to the caller's cross-validation.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from .base import Ranker, RankerError

MODEL_FILE = "xgb_per_store.ubj"  # xgboost's binary JSON: floats round-trip exactly


class XGBPerStoreRanker(Ranker):
    """xgboost `rank:pairwise` on summarised PerStoreFeature vectors, one query group per target kernel."""

    name = "xgb_per_store"
    feature_set = "per_store"

    def __init__(self, n_rounds: int = 200, max_depth: int = 10, learning_rate: float = 0.2, gamma: float = 0.001,
                 min_child_weight: float = 0.0, subsample: float = 1.0, colsample_bytree: float = 1.0,
                 objective: str = "rank:pairwise", pair_method: str = "mean", pairs_per_sample: int = 8,
                 tree_method: str = "hist", seed: int = 0, n_jobs: int | None = None) -> None:
        self.n_rounds = n_rounds
        self.max_depth = max_depth
        self.learning_rate = learning_rate
        self.gamma = gamma
        self.min_child_weight = min_child_weight
        self.subsample = subsample
        self.colsample_bytree = colsample_bytree
        self.objective = objective
        self.pair_method = pair_method
        self.pairs_per_sample = pairs_per_sample
        self.tree_method = tree_method
        self.seed = seed
        self.n_jobs = n_jobs

    def _params(self) -> dict:
        p = {"objective": self.objective, "max_depth": self.max_depth, "eta": self.learning_rate,
             "gamma": self.gamma, "min_child_weight": self.min_child_weight, "subsample": self.subsample,
             "colsample_bytree": self.colsample_bytree, "tree_method": self.tree_method, "seed": self.seed,
             "verbosity": 0}
        if self.objective.startswith("rank:"):
            p["lambdarank_pair_method"] = self.pair_method
            p["lambdarank_num_pair_per_sample"] = self.pairs_per_sample
        if self.n_jobs is not None:
            p["nthread"] = self.n_jobs
        return p

    def _fit(self, X: np.ndarray, y: np.ndarray, group: np.ndarray) -> None:
        import xgboost as xgb
        dtrain = xgb.DMatrix(X, label=y)
        if self.objective.startswith("rank:"):
            dtrain.set_group(group)
        self.booster_ = xgb.train(self._params(), dtrain, num_boost_round=self.n_rounds, verbose_eval=False)

    def _predict(self, X: np.ndarray, group: np.ndarray | None) -> np.ndarray:
        import xgboost as xgb
        booster = getattr(self, "booster_", None)
        if booster is None:
            raise RankerError(f"{self.name} has no trained booster")
        return booster.predict(xgb.DMatrix(X), output_margin=True)

    def _save_model(self, folder: Path) -> None:
        self.booster_.save_model(str(folder / MODEL_FILE))

    def _load_model(self, folder: Path) -> None:
        import xgboost as xgb
        path = folder / MODEL_FILE
        if not path.exists():
            raise OSError(f"missing {path}")
        booster = xgb.Booster()
        try:
            booster.load_model(str(path))
        except xgb.core.XGBoostError as err:
            raise ValueError(f"{path}: {str(err).splitlines()[0]}") from err
        if self.n_jobs is not None:
            booster.set_param({"nthread": self.n_jobs})
        self.booster_ = booster
