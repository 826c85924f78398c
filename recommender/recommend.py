"""A target's recommender, loaded for use: the featurizer (with the bank's source kernels) and a trained
ranker from `models/<key>/rankers/<name>/`, wrapped as a `selection.Ranked` selector."""
from __future__ import annotations

from pathlib import Path

from .errors import SchedrecError
from .fileio import display_path
from .selection import RandomK, Ranked, Selector

SELECTORS = ("lgbm", "tlp", "heuristic", "random")


def load_selector(name: str, recommender_dir: Path, bank_dir: Path, seed: int = 0) -> Selector:
    """`random` (seeded), or a ranker by name: learned ones are loaded from `<recommender_dir>/rankers/<name>`
    and refused if they were trained on another feature version."""
    if name == "random":
        return RandomK(seed)
    if name not in SELECTORS:
        raise SchedrecError(f"unknown selector {name!r}; one of {', '.join(SELECTORS)}")
    from featurize.candidate_features import Featurizer
    from featurize.trace_tokens import Vocabulary
    from training.dataset import read_source_kernels
    from training.rankers import ranker_class
    featurizer = Featurizer(Vocabulary.load(), read_source_kernels(bank_dir))
    cls = ranker_class(name)
    if cls.needs_fit:
        folder = Path(recommender_dir) / "rankers" / name
        if not (folder / "meta.json").exists():
            raise SchedrecError(f"no trained {name} ranker in {display_path(folder)}: train one with "
                                f"`schedrec train --target-key {Path(recommender_dir).name} --ranker {name}`")
        ranker = cls.load(folder, feature_version=featurizer.version)
    else:
        ranker = cls()
    featurize = featurizer.sequences if cls.feature_set == "tokens" else featurizer.tabular
    return Ranked(ranker, featurize)
