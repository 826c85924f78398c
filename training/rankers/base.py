"""The ranker interface: scikit-learn shaped, one query group per target kernel.

`fit(X, y, group)` learns from feature rows `X` (one per candidate), relevance `y` (higher is better;
failed candidates 0) and `group` (candidates per query, in the order of `X`); `predict(X)` gives one score
per candidate, higher = more likely fastest. `save(dir)` writes the model and `meta.json`; `load(dir)`
refuses a model saved for another feature schema. Learned state ends with `_` and exists after `fit`.
"""
from __future__ import annotations

import json
import time
from pathlib import Path
from typing import ClassVar

import numpy as np

from recommender.core.errors import SchedrecError
from recommender.core.fileio import atomic_write_json

META_FILE = "meta.json"


class RankerError(SchedrecError):
    """A ranker used wrongly: unfitted, bad input, or a saved model that does not match."""


def check_ranking_data(X: np.ndarray, y: np.ndarray | None, group: np.ndarray | None, n_features: int | None = None
                       ) -> tuple[np.ndarray, np.ndarray | None, np.ndarray | None]:
    """Validate fit/predict input once, at the boundary; returns float32 X, float y, int group."""
    X = np.asarray(X, dtype=np.float32)
    if X.ndim < 2:
        raise RankerError(f"X must be 2-D (candidates x features) or 3-D (candidates x tokens x features), got shape {X.shape}")
    if not np.isfinite(X).all():
        raise RankerError("X has NaN or infinite values")
    if n_features is not None and X.shape[1:] != tuple(np.atleast_1d(n_features)):
        raise RankerError(f"X has feature shape {X.shape[1:]}, the model was fitted on {tuple(np.atleast_1d(n_features))}")
    if y is not None:
        y = np.asarray(y, dtype=np.float64)
        if y.shape != (X.shape[0],):
            raise RankerError(f"y has shape {y.shape}, expected ({X.shape[0]},)")
        if not np.isfinite(y).all() or (y < 0).any():
            raise RankerError("y must be finite and non-negative (relevance: higher is better)")
    if group is not None:
        group = np.asarray(group, dtype=np.int64)
        if group.ndim != 1 or (group <= 0).any() or group.sum() != X.shape[0]:
            raise RankerError(f"group must be positive counts summing to the {X.shape[0]} rows of X, "
                              f"got {group.size} groups summing to {int(group.sum()) if group.size else 0}")
    return X, y, group


class Ranker:
    """Base class: subclasses set `name` and `feature_set`, and implement `_fit`, `_predict`,
    `_save_model(dir)` and `_load_model(dir)`."""

    name: ClassVar[str] = "ranker"
    feature_set: ClassVar[str] = "tabular"  # which featurizer output X is: "tabular" | "tokens" | "per_store"
    needs_fit: ClassVar[bool] = True
    # whether training adds the bank's own tuning records to the kernels' groups (training.dataset)
    uses_extra_groups: ClassVar[bool] = False
    # whether `fit(..., init_model=...)` can continue a fitted model (LightGBM's continued training)
    continues_training: ClassVar[bool] = False
    # whether `fit(..., client=...)` can fit on a Dask cluster (LightGBM's own Dask interface)
    fits_on_cluster: ClassVar[bool] = False

    @property
    def wants_group_weight(self) -> bool:
        """Whether this ranker, with its parameters, weighs query groups (`fit(..., group_weight=...)`)."""
        return False

    def get_params(self) -> dict:
        return {k: v for k, v in vars(self).items() if not k.endswith("_")}

    # -- the interface ----------------------------------------------------------------------------
    def fit(self, X: np.ndarray, y: np.ndarray, group: np.ndarray, feature_version: str = "",
            data_hash: str = "", init_model: "Ranker | None" = None, client: object | None = None,
            group_weight: np.ndarray | None = None) -> "Ranker":
        """Learn from (X, y, group); with `init_model` (a fitted ranker of the same class and features), go on
        from what it learned instead of starting anew (rankers with `continues_training` only); with `client`
        (a `dask.distributed.Client`), fit on its workers (rankers with `fits_on_cluster` only); with
        `group_weight` (one positive value per group), weigh the groups (rankers that `wants_group_weight`)."""
        if group is None:
            raise RankerError(f"{self.name}: a ranking fit needs `group` (candidates per target kernel)")
        X, y, group = check_ranking_data(X, y, group)
        kwargs = {}
        if group_weight is not None:
            if not self.wants_group_weight:
                raise RankerError(f"{self.name} with these parameters does not weigh query groups")
            group_weight = np.asarray(group_weight, dtype=np.float64)
            if group_weight.shape != group.shape or not np.isfinite(group_weight).all() or (group_weight <= 0).any():
                raise RankerError(f"group_weight must be one positive finite value per group ({group.size}), got "
                                  f"shape {group_weight.shape}")
            kwargs["group_weight"] = group_weight
        if client is not None:
            if not self.fits_on_cluster:
                raise RankerError(f"{self.name} does not fit on a cluster (lgbm does)")
            if init_model is not None:
                raise RankerError(f"{self.name}: a fit on a cluster starts anew (no initial model)")
            kwargs["client"] = client
        if init_model is not None:
            if not self.continues_training or type(init_model) is not type(self):
                raise RankerError(f"{self.name} cannot go on from a {init_model.name} model")
            if not hasattr(init_model, "n_features_") or tuple(init_model.n_features_) != X.shape[1:]:
                raise RankerError(f"{self.name}: the initial model was fitted on feature shape "
                                  f"{tuple(getattr(init_model, 'n_features_', ()))}, X has {X.shape[1:]}")
            if feature_version and init_model.feature_version_ != feature_version:
                raise RankerError(f"{self.name}: the initial model was fitted on features "
                                  f"{init_model.feature_version_!r}, these are {feature_version!r}")
            kwargs["init_model"] = init_model
        t0 = time.perf_counter()
        self._fit(X, y, group, **kwargs)
        self.n_features_ = X.shape[1:]
        self.feature_version_ = feature_version
        self.data_hash_ = data_hash
        self.fit_seconds_ = round(time.perf_counter() - t0, 2)
        return self

    def predict(self, X: np.ndarray, group: np.ndarray | None = None) -> np.ndarray:
        if self.needs_fit and not hasattr(self, "n_features_"):
            raise RankerError(f"{self.name} is not fitted: call fit or load a saved model first")
        X, _, group = check_ranking_data(X, None, group, getattr(self, "n_features_", None) or None)
        return np.asarray(self._predict(X, group), dtype=np.float64)

    def save(self, folder: str | Path, extra: dict | None = None) -> Path:
        if self.needs_fit and not hasattr(self, "n_features_"):
            raise RankerError(f"{self.name} is not fitted: nothing to save")
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        self._save_model(folder)
        meta = {"ranker": self.name, "feature_set": self.feature_set, "params": _jsonable(self.get_params()),
                "feature_version": getattr(self, "feature_version_", ""), "data_hash": getattr(self, "data_hash_", ""),
                "n_features": list(getattr(self, "n_features_", ())), "fit_seconds": getattr(self, "fit_seconds_", 0.0),
                **(extra or {})}
        atomic_write_json(str(folder / META_FILE), meta)
        return folder

    @classmethod
    def load(cls, folder: str | Path, feature_version: str | None = None, data_hash: str | None = None) -> "Ranker":
        """Load a saved ranker; refuses one saved for another feature version (or data, when given)."""
        from recommender.core.fileio import read_json
        folder = Path(folder)
        meta = read_json(folder / META_FILE, hint="train the ranker again", error=RankerError)
        if not isinstance(meta, dict) or meta.get("ranker") != cls.name:
            raise RankerError(f"{folder} holds no {cls.name} ranker (meta.json says {meta.get('ranker') if isinstance(meta, dict) else meta!r})")
        if feature_version is not None and meta.get("feature_version") != feature_version:
            raise RankerError(f"{folder} was trained on features {meta.get('feature_version')!r}; this schedrec makes "
                              f"{feature_version!r}: train it again (schedrec train)")
        if data_hash is not None and meta.get("data_hash") != data_hash:
            raise RankerError(f"{folder} was trained on other data (hash {meta.get('data_hash')}, expected {data_hash})")
        obj = cls(**meta.get("params", {}))
        obj.n_features_ = tuple(meta.get("n_features", ()))
        obj.feature_version_ = meta.get("feature_version", "")
        obj.data_hash_ = meta.get("data_hash", "")
        obj.fit_seconds_ = meta.get("fit_seconds", 0.0)
        try:
            obj._load_model(folder)
        except (OSError, ValueError) as err:
            raise RankerError(f"cannot load the {cls.name} model in {folder}: {err}") from err
        return obj

    # -- for subclasses ---------------------------------------------------------------------------
    def _fit(self, X: np.ndarray, y: np.ndarray, group: np.ndarray) -> None:
        raise NotImplementedError

    def _predict(self, X: np.ndarray, group: np.ndarray | None) -> np.ndarray:
        raise NotImplementedError

    def _save_model(self, folder: Path) -> None:
        pass

    def _load_model(self, folder: Path) -> None:
        pass


def _jsonable(params: dict) -> dict:
    return json.loads(json.dumps(params, default=str))
