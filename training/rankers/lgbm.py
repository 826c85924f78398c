"""LightGBM LambdaRank over tabular candidate features (kernel, pair, schedule summary, token counts).

Relevance best/latency in (0, 1] is graded into `levels` integer labels (0 = failed candidate), since
LambdaRank's gains are per integer label; gains grow with the square of the relevance. `n_models` boosters
with other seeds (row and column subsampling) are averaged: with about 140 training kernels one booster's
top-1 pick swings with its seed, and the average picks fewer of the 10-100x slower schedules.

With a Dask client, each booster is fitted by LightGBM's own Dask interface (`DaskLGBMRanker`, data-parallel
over the workers): the rows are cut into one partition per worker at query-group boundaries, and `group` is
given per partition, since LightGBM reads the group array chunk by chunk beside the data's partitions. The
saved model is the same booster text, read by the same loader.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from .base import Ranker, RankerError


# Fixed, with LightGBM's deterministic mode and row-wise histograms: the same data and seed give the same
# boosters on any machine and in any run (LightGBM's threads otherwise sum histograms in varying order)
FIT_THREADS = 2


def graded(y: np.ndarray, levels: int) -> np.ndarray:
    """Relevance in [0, 1] to integer labels 0..levels-1; any valid candidate gets at least 1."""
    lab = np.ceil(y * (levels - 1)).astype(np.int64)
    return np.clip(lab, 0, levels - 1)


def group_partitions(group: np.ndarray, parts: int) -> list[int]:
    """Cut the query groups into at most `parts` runs of whole consecutive groups with about equal rows;
    the number of groups in each run (none empty)."""
    ends = np.cumsum(group)
    total = int(ends[-1]) if len(ends) else 0
    cuts, last = [], 0
    for k in range(1, parts):
        aim = total * k / parts
        i = int(np.searchsorted(ends, aim))  # ends[i - 1] < aim <= ends[i]: cut after group i - 1 or after i
        i = i if i > 0 and aim - ends[i - 1] <= ends[min(i, len(ends) - 1)] - aim else i + 1
        if last < i < len(group):
            cuts.append(i)
            last = i
    bounds = [0] + cuts + [len(group)]
    return [b - a for a, b in zip(bounds, bounds[1:]) if b > a]


def row_weights(group: np.ndarray, group_weight: np.ndarray | None, power: float) -> np.ndarray | None:
    """Per-row LightGBM weights: each group's `group_weight` to the `power`, scaled to mean 1 over the groups,
    repeated over its rows (LambdaRank multiplies a row's gradient and hessian by it); None for power 0."""
    if not power or group_weight is None:
        return None
    w = np.power(group_weight, power)
    return np.repeat(w / w.mean(), group)


def _fit_on_cluster(client: object, X: np.ndarray, labels: np.ndarray, group: np.ndarray, params: dict,
                    seed: int, weights: np.ndarray | None = None) -> object:
    """One booster fitted with `lightgbm.DaskLGBMRanker` over the client's workers, one partition each."""
    try:
        import dask.array as da
        import pandas  # noqa: F401  (lightgbm.dask refuses to fit without it)
    except ImportError as err:
        raise RankerError(f"lgbm on a cluster needs {err.name}: pip install 'schedrec[cluster]'") from None
    import lightgbm as lgb
    runs = group_partitions(group, max(1, len(client.scheduler_info()["workers"])))
    starts = np.cumsum([0] + runs)
    rows = tuple(int(group[a:b].sum()) for a, b in zip(starts, starts[1:]))
    dX = da.from_array(X, chunks=(rows, X.shape[1]))
    dy = da.from_array(labels, chunks=(rows,))
    dg = da.from_array(group, chunks=(tuple(runs),))  # chunk i holds the groups of partition i
    dw = da.from_array(weights, chunks=(rows,)) if weights is not None else None
    model = lgb.DaskLGBMRanker(client=client, **params, random_state=seed, tree_learner="data")
    model.fit(dX, dy, group=dg, sample_weight=dw)
    return model.booster_


class LGBMRanker(Ranker):
    name = "lgbm"
    feature_set = "tabular"
    # leave-one-model-out top-1 0.64 -> 0.73 with the bank's records (benchmarks/bank_records_ablation.py)
    uses_extra_groups = True
    continues_training = True
    fits_on_cluster = True

    def __init__(self, n_estimators: int = 300, learning_rate: float = 0.05, num_leaves: int = 31,
                 min_child_samples: int = 10, subsample: float = 0.8, colsample_bytree: float = 0.8,
                 levels: int = 16, gain_power: float = 2.0, n_models: int = 5, seed: int = 0,
                 time_weight_power: float = 0.0) -> None:
        self.n_estimators = n_estimators
        self.learning_rate = learning_rate
        self.num_leaves = num_leaves
        self.min_child_samples = min_child_samples
        self.subsample = subsample
        self.colsample_bytree = colsample_bytree
        self.levels = levels
        self.gain_power = gain_power
        self.n_models = n_models
        self.seed = seed
        # query groups weighted by (kernel weight x fastest latency)^p, the kernel's time as the top-k score
        # weighs it (training.dataset.RankingSet.time_weights); 0: every kernel alike
        self.time_weight_power = time_weight_power

    @property
    def wants_group_weight(self) -> bool:
        return bool(self.time_weight_power)

    def _fit(self, X: np.ndarray, y: np.ndarray, group: np.ndarray, init_model: "LGBMRanker | None" = None,
             client: object | None = None, group_weight: np.ndarray | None = None) -> None:
        import lightgbm as lgb
        gain = [float((i / (self.levels - 1)) ** self.gain_power * (self.levels - 1)) for i in range(self.levels)]
        labels = graded(y, self.levels)
        if init_model is not None and len(init_model.boosters_) != self.n_models:
            raise RankerError(f"lgbm: the initial model has {len(init_model.boosters_)} boosters, this one "
                              f"{self.n_models}")
        params = dict(objective="lambdarank", n_estimators=self.n_estimators, learning_rate=self.learning_rate,
                      num_leaves=self.num_leaves, min_child_samples=self.min_child_samples, subsample=self.subsample,
                      subsample_freq=1, colsample_bytree=self.colsample_bytree, deterministic=True,
                      force_row_wise=True, label_gain=gain, lambdarank_truncation_level=10, verbose=-1)
        weights = row_weights(group, group_weight, self.time_weight_power)
        if client is not None:
            self.boosters_ = [_fit_on_cluster(client, X, labels, group, params, self.seed + m, weights)
                              for m in range(self.n_models)]
            return
        self.boosters_ = []
        for m in range(self.n_models):
            model = lgb.LGBMRanker(**params, random_state=self.seed + m, n_jobs=FIT_THREADS)
            # continued training: booster m goes on from the initial model's booster m with n_estimators more
            # trees (the target's own groups after the shared ones: training.cross_target.adapt)
            model.fit(X, labels, group=group, sample_weight=weights,
                      init_model=init_model.boosters_[m] if init_model else None)
            self.boosters_.append(model.booster_)

    def _predict(self, X: np.ndarray, group) -> np.ndarray:
        # a plain mean: a candidate's score must not depend on which other candidates are scored with it
        return np.mean([b.predict(X) for b in self.boosters_], axis=0)

    def _save_model(self, folder: Path) -> None:
        from recommender.core.fileio import gzip_writer, replacing
        for i, b in enumerate(self.boosters_):  # LightGBM's text format, gzipped (a fifth of the size)
            with replacing(str(folder / f"model{i}.txt.gz")) as tmp, gzip_writer(tmp, text=True) as f:
                f.write(b.model_to_string())

    def _load_model(self, folder: Path) -> None:
        import gzip

        import lightgbm as lgb
        self.boosters_ = []
        for i in range(self.n_models):
            path = folder / f"model{i}.txt.gz"
            if not path.exists():
                raise ValueError(f"missing {path}")
            try:
                with gzip.open(path, "rt", encoding="utf-8") as f:
                    self.boosters_.append(lgb.Booster(model_str=f.read()))
            except (OSError, EOFError, lgb.basic.LightGBMError) as err:
                raise ValueError(f"{path}: {err}") from err
