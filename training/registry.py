"""The one table of rankers: a name maps to its class (imported when first asked for) and, through the
class's `feature_set`, to the featurizer output it reads. The CLI, the selector loader, the trainer and the
evaluation all read it, so a new ranker is one line here.

- LEARNED: fitted on a target's transfer matrix and saved under `models/<key>/rankers/<name>/`;
- BASELINES: need no training data of the target (`xgb_per_store`: fitted per evaluation fold only);
- SELECTORS: what `schedrec transfer --selector` and `schedrec compare --selectors` take (`random` is the
  seeded `transfer.selection.RandomK`, not a ranker; RESTRICTED are rule-of-thumb baselines over part of the
  pool, `transfer.selection.restricted`, donors in the heuristic's order).
"""
from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Callable

from .rankers.base import Ranker, RankerError

if TYPE_CHECKING:
    from featurize.candidate_features import Featurizer

RANKERS = {
    "lgbm": "training.rankers.lgbm:LGBMRanker",
    "tlp": "training.rankers.tlp:TLPRanker",
    "random": "training.rankers.baselines:RandomRanker",
    "heuristic": "training.rankers.baselines:TransferTuningHeuristic",
    "xgb_per_store": "training.rankers.xgb_per_store:XGBPerStoreRanker",
}
LEARNED = ("lgbm", "tlp")
BASELINES = ("random", "heuristic", "xgb_per_store")
RESTRICTED = ("fixed-tiles", "donors", "tiles-then-donors")
SELECTORS = ("lgbm", "tlp", "heuristic", "random") + RESTRICTED


def random_seed(name: str) -> int | None:
    """The seed a selector name gives the random order: `random@S` -> S, `random` -> None; not random: -1."""
    if name == "random":
        return None
    head, _, seed = name.partition("@")
    return int(seed) if head == "random" and seed.isdigit() else -1


def ranker_class(name: str) -> type[Ranker]:
    """The ranker class registered as `name`."""
    if name not in RANKERS:
        raise RankerError(f"unknown ranker {name!r}; known: {', '.join(LEARNED + BASELINES)}")
    module, cls = RANKERS[name].split(":")
    return getattr(importlib.import_module(module), cls)


def featurize_for(featurizer: Featurizer, feature_set: str) -> Callable[[list], object]:
    """The featurizer's function that gives a ranker of `feature_set` its X from candidate rows
    ("per_store" vectors are saved per target, not computed from rows: see training.evaluate.FeatureTable)."""
    functions = {"tabular": featurizer.tabular, "tokens": featurizer.sequences}
    if feature_set not in functions:
        raise KeyError(f"unknown feature set {feature_set!r}")
    return functions[feature_set]
