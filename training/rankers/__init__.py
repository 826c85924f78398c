"""Rankers: one interface (`base.Ranker`), learned models and baselines as implementations of it; the
name -> class table is `training.registry`."""
from __future__ import annotations

from .base import Ranker, RankerError
from .baselines import RandomRanker, TransferTuningHeuristic
from .lgbm import LGBMRanker
from .tlp import TLPRanker

__all__ = ["Ranker", "RankerError", "LGBMRanker", "TLPRanker", "RandomRanker", "TransferTuningHeuristic"]
