"""A target's recommender, loaded for use: the featurizer (with the bank's source kernels) and a trained
ranker from `models/<key>/rankers/<name>/`, wrapped as a `selection.Ranked` selector."""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from training.registry import RESTRICTED, SELECTORS, featurize_for, random_seed, ranker_class

from ..core.errors import SchedrecError
from ..core.fileio import display_path, read_json
from .selection import RandomK, Ranked, Selector, restricted

if TYPE_CHECKING:
    from training.train import TargetData


def load_selector(name: str, recommender_dir: Path, bank_dir: Path, seed: int = 0,
                  target_key: str | None = None) -> Selector:
    """`random` (seeded; `random@S`: seed S), a restricted baseline (`selection.restricted`, over the heuristic),
    or a ranker by name: learned ones are loaded from `<recommender_dir>/rankers/<name>` and refused if they
    were trained on another feature version, and their order is spread over the pool's families first
    (`selection.spread_order`). A ranker trained across targets (its meta says `hardware`)
    featurizes with the hardware of `target_key`, the CPU the transfer runs for."""
    given = random_seed(name)
    if given != -1:
        selector = RandomK(seed if given is None else given)
        selector.name = name
        return selector
    if name in RESTRICTED:
        return restricted(name, load_selector("heuristic", recommender_dir, bank_dir))
    if name not in SELECTORS:
        raise SchedrecError(f"unknown selector {name!r}; one of {', '.join(SELECTORS)}")
    from featurize.candidate_features import SCHEMA_VERSION, SCHEMAS, Featurizer, schema_of
    from featurize.trace_tokens import Vocabulary
    from recommender.bank.sources import read_source_kernels
    featurizer = Featurizer(Vocabulary.load(), read_source_kernels(bank_dir))
    cls = ranker_class(name)
    if cls.needs_fit:
        folder = Path(recommender_dir) / "rankers" / name
        if not (folder / "meta.json").exists():
            raise SchedrecError(f"no trained {name} ranker in {display_path(folder)}: train one with "
                                f"`schedrec train --target-key {Path(recommender_dir).name} --ranker {name}`")
        meta = read_json(folder / "meta.json")
        hardware = None
        if meta.get("hardware"):
            if not target_key:
                raise SchedrecError(f"{display_path(folder)} was trained across targets: it needs the target key "
                                    f"of the CPU it ranks for")
            from recommender.target.hardware import hardware_for
            hardware = hardware_for(target_key)[0]
        # the features of the schema the ranker was trained on, where this schedrec still makes them
        schema = schema_of(meta.get("feature_version", ""))
        featurizer = Featurizer(featurizer.vocab, featurizer.sources, hardware,
                                schema if schema in SCHEMAS else SCHEMA_VERSION)
        ranker = cls.load(folder, feature_version=featurizer.version)
        # a ranker saved before rule kinds were recorded saw no rule instance (the matrix had none)
        kinds = frozenset(meta.get("rule_kinds", ()))
        return Ranked(ranker, featurize_for(featurizer, cls.feature_set), rule_kinds=kinds, spread=True)
    else:  # a baseline: built for this featurizer's columns (the heuristic reads three of them by name)
        from training.evaluate import make_ranker
        ranker = make_ranker(name, featurizer)
    return Ranked(ranker, featurize_for(featurizer, cls.feature_set))


def leave_out_selector(data: TargetData, model: str, name: str = "lgbm") -> Ranked:
    """The recommender a model would get if it were new: ranker `name` fitted on every matrix row (and bank
    record) that neither targets `model` nor comes from it, wrapped as a transfer selector."""
    from training.dataset import leave_model_out, trainable
    from training.evaluate import fit_ranker
    rows = leave_model_out(data.rows, model)[0]
    if ranker_class(name).uses_extra_groups:
        rows += leave_model_out(data.extra, model)[0]
    ranker = fit_ranker(name, trainable(rows), data.table)
    selector = Ranked(ranker, featurize_for(data.featurizer, ranker.feature_set), spread=True)
    selector.name = f"{name} (trained without {model})"
    return selector
