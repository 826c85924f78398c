"""Rankers: one interface (`base.Ranker`), learned models and baselines as implementations of it."""
from __future__ import annotations

from .base import Ranker, RankerError
from .baselines import RandomRanker, TransferTuningHeuristic
from .lgbm import LGBMRanker
from .tlp import TLPRanker

LEARNED = ("lgbm", "tlp")
BASELINES = ("random", "heuristic", "xgb_per_store")


def ranker_class(name: str) -> type[Ranker]:
    if name == "xgb_per_store":
        from .xgb_per_store import XGBPerStoreRanker
        return XGBPerStoreRanker
    classes = {c.name: c for c in (LGBMRanker, TLPRanker, RandomRanker, TransferTuningHeuristic)}
    if name not in classes:
        raise RankerError(f"unknown ranker {name!r}; known: {', '.join(LEARNED + BASELINES)}")
    return classes[name]


__all__ = ["Ranker", "RankerError", "LGBMRanker", "TLPRanker", "RandomRanker", "TransferTuningHeuristic",
           "ranker_class", "LEARNED", "BASELINES"]
