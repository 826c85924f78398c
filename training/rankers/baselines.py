"""Baselines in the ranker interface: random order, and the heuristic of the original transfer-tuning.

Transfer-tuning (Gibson & Cano, PACT 2022) replays each source kernel's best record and prefers the
source whose shape is closest to the target. `TransferTuningHeuristic` ranks rank-0 records first, then
by output-shape distance, then by the source's latency scaled to the target's FLOPs.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from .base import Ranker


class RandomRanker(Ranker):
    """Uniformly random scores (seeded): what measuring k arbitrary candidates gets."""

    name = "random"
    feature_set = "tabular"
    needs_fit = False

    def __init__(self, seed: int = 0) -> None:
        self.seed = seed

    def _fit(self, X, y, group) -> None:
        pass

    def _predict(self, X: np.ndarray, group) -> np.ndarray:
        return np.random.default_rng(self.seed).random(X.shape[0])


class TransferTuningHeuristic(Ranker):
    """Each source's best record first, closest shape first. The column indices come from the featurizer's
    `tabular_names` (source_rank, shape_distance, expected_latency)."""

    name = "heuristic"
    feature_set = "tabular"
    needs_fit = False

    def __init__(self, rank_column: int = 0, distance_column: int = 1, expected_column: int = 2) -> None:
        self.rank_column = rank_column
        self.distance_column = distance_column
        self.expected_column = expected_column

    @classmethod
    def for_names(cls, names: list[str]) -> "TransferTuningHeuristic":
        return cls(names.index("source_rank"), names.index("shape_distance"), names.index("expected_latency"))

    def _fit(self, X, y, group) -> None:
        pass

    def _predict(self, X: np.ndarray, group) -> np.ndarray:
        # lexicographic: rank, then distance (rounded so near-equal shapes tie), then expected latency
        return -(X[:, self.rank_column] * 1e6 + np.round(X[:, self.distance_column], 1) * 1e3
                 + X[:, self.expected_column])

    def _save_model(self, folder: Path) -> None:
        pass
