"""Rankers trained across CPU targets: one LightGBM ranker on every target's query groups, its per-target
adaptation, and their evaluation against each target's own ranker (what `schedrec train --targets` and
`schedrec evaluate --cross-target` run).

Each target contributes its own rows (transfer matrix, rule space, bank records), featurized with its
recorded hardware (`recommender.target.hardware`): a query group is one kernel of one target and never mixes
targets, and the source kind is a feature as in a target's own ranker. Held-out models are held out of every
target at once: neither their kernels nor their schedules are in any training set of that fold.

Cells per target T (DESIGN.md, "Rankers across targets"):
- own: T's own ranker (its rows only, without the hardware block: what `schedrec train` ships);
- zero_shot: trained on the other targets only;
- adapted_N: the zero-shot model trained on (LightGBM continued training) with N of T's training kernels
  (N = 0 is zero-shot; "all" every one);
- shared: trained on every target, T included (what ships under models/shared/rankers/).
"""
from __future__ import annotations

import sys
import time
import zlib
from pathlib import Path
from typing import Callable

import numpy as np

from featurize.hardware_features import HARDWARE_NAMES, HARDWARE_VERSION
from recommender.core.errors import BankError
from recommender.core.fileio import atomic_write_json, display_path, read_json

from .dataset import RankingSet, leave_model_out, ranking_set, trainable
from .evaluate import predict
from .metrics import score_groups, summarize_outcomes
from .rankers import LGBMRanker
from .train import TargetData, rule_kinds

SHARED_NAME = "lgbm"  # the ranker trained across targets (LightGBM: it can go on from a fitted model)
ADAPT_TREES = 100  # trees per booster added by an adaptation
ADAPT_NS = (0, 25, 50, 100, None)  # None: every training kernel of the target
RESULT_FILE = "cross_target.json"
ADAPT_KINDS = ("continued", "pooled")
CELLS_ORDER = ("own", "zero_shot", "shared")


def matrix_targets(models_dir: Path) -> list[str]:
    """Every target folder under `models_dir` with a transfer matrix (the default of --targets)."""
    return sorted(p.name for p in Path(models_dir).iterdir() if any((p / "transfer").glob("*.jsonl.gz")))


def load_targets(models_dir: Path, keys: list[str], log: Callable[[str], None]) -> dict[str, TargetData]:
    """Each target's rows and features with its hardware block."""
    if len(set(keys)) != len(keys):
        raise BankError(f"a target is named twice in {','.join(keys)}")
    if len(keys) < 2:
        raise BankError(f"training across targets needs two or more targets; got {', '.join(keys) or 'none'}")
    return {k: TargetData(Path(models_dir) / k, log, hardware=True) for k in keys}


def plain_columns(data: TargetData) -> np.ndarray:
    """Indices of the tabular columns outside the hardware block (a target's own ranker's features)."""
    hw = set(HARDWARE_NAMES)
    return np.asarray([i for i, n in enumerate(data.featurizer.tabular_names) if n not in hw])


def stacked(parts: list[tuple[TargetData, RankingSet]], columns: np.ndarray | None = None
            ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(X, relevance, group sizes) of several targets' ranking sets, one after another: each group is one
    target's kernel (features from that target's table)."""
    xs, ys, sizes = [], [], []
    for data, rs in parts:
        if not rs.groups:
            continue
        X = data.table.get("tabular", rs.rows)
        xs.append(X if columns is None else X[:, columns])
        ys.append(rs.relevance())
        sizes.append(rs.sizes)
    if not xs:
        raise BankError("no training kernels in any of the targets")
    return np.concatenate(xs), np.concatenate(ys), np.concatenate(sizes)


def _version(parts: list[tuple[TargetData, RankingSet]]) -> str:
    versions = {d.featurizer.version for d, _ in parts}
    if len(versions) != 1:
        raise BankError(f"the targets' features differ in version: {', '.join(sorted(versions))}")
    return versions.pop()


def fit_across(parts: list[tuple[TargetData, RankingSet]], params: dict | None = None,
               init_model: LGBMRanker | None = None) -> LGBMRanker:
    """One ranker on every part's groups (with `init_model`, continued from it)."""
    X, y, sizes = stacked(parts)
    ranker = LGBMRanker(**(params or {}))
    return ranker.fit(X, y, sizes, feature_version=_version(parts), init_model=init_model)


def sample_kernels(rs: RankingSet, n: int | None, seed: int) -> RankingSet:
    """A seeded choice of `n` of the set's kernels (every one when `n` is None or not smaller)."""
    if n is None or n >= len(rs.groups):
        return rs
    rng = np.random.default_rng(seed)
    keep = set(int(i) for i in rng.permutation(len(rs.groups))[:n])
    return RankingSet([g for i, g in enumerate(rs.groups) if i in keep])


def adapt(shared: LGBMRanker, data: TargetData, rs: RankingSet, trees: int = ADAPT_TREES) -> LGBMRanker:
    """`shared` trained on with `trees` more trees per booster on one target's groups."""
    params = {**shared.get_params(), "n_estimators": trees}
    return fit_across([(data, rs)], params, init_model=shared)


def stable_seed(*names: object) -> int:
    """A seed that depends only on the names (stable across runs and machines, unlike hash())."""
    return zlib.crc32("/".join(map(str, names)).encode())


def fold_sets(datas: dict[str, TargetData], held_out: list[str]) -> dict[str, tuple[RankingSet, RankingSet]]:
    """Per target: (training set, test set) with every model of `held_out` out of every training set (as
    target and as source); bank records join the training kernels' groups as in a target's own lgbm."""
    out = {}
    for key, data in datas.items():
        train_rows, extra, test_rows = data.rows, data.extra, []
        for m in held_out:
            train_rows, test = leave_model_out(train_rows, m)
            extra = leave_model_out(extra, m)[0]
            test_rows += test
        out[key] = (trainable(train_rows + extra), ranking_set(test_rows))
    return out


def zero_shot_parts(datas: dict[str, TargetData], sets: dict[str, tuple[RankingSet, RankingSet]],
                    key: str) -> list[tuple[TargetData, RankingSet]]:
    """The training parts of a zero-shot ranker for target `key`: every other target's, none of its own."""
    return [(datas[k], sets[k][0]) for k in datas if k != key]


def folds_of(models: list[str], n_folds: int | None) -> list[list[str]]:
    """Leave-one-model-out (n_folds None), or the models dealt round-robin into `n_folds` folds."""
    if n_folds is None or n_folds >= len(models):
        return [[m] for m in models]
    if n_folds < 2:
        raise BankError("--folds needs 2 or more")
    return [models[i::n_folds] for i in range(n_folds)]


def score_cell(ranker, data: TargetData, test: RankingSet, columns: np.ndarray | None = None) -> list:
    if not test.groups:
        return []
    if columns is None:
        scores = predict(ranker, test, data.table)
    else:
        from featurize.validity import demote_known_failures
        X = data.table.get("tabular", test.rows)[:, columns]
        scores = demote_known_failures(test.rows, ranker.predict(X, test.sizes))
    return [o for o in score_groups(test.groups, scores) if o is not None]


def pooled_parts(datas: dict[str, TargetData], sets: dict[str, tuple[RankingSet, RankingSet]], key: str,
                 part: RankingSet) -> list[tuple[TargetData, RankingSet]]:
    """The training parts of a pooled adaptation: every other target's, and `part` (N of the target's own
    training kernels), fitted together from scratch."""
    return zero_shot_parts(datas, sets, key) + [(datas[key], part)]


def evaluate_fold(datas: dict[str, TargetData], held_out: list[str], ns=ADAPT_NS,
                  log: Callable[[str], None] = lambda m: None,
                  kinds: tuple[str, ...] = ADAPT_KINDS) -> dict[str, dict[str, list]]:
    """Kernel outcomes of every cell for every target on one fold (held-out models out of every target).
    `kinds`: `continued` gives `adapted_N` (zero shot boosted on with N of the target's kernels), `pooled` also
    `pooled_N` (the other targets' kernels and the N, fitted from scratch; with every kernel that is `shared`)."""
    sets = fold_sets(datas, held_out)
    out: dict[str, dict[str, list]] = {k: {} for k in datas}
    t0 = time.perf_counter()
    shared = fit_across([(datas[k], sets[k][0]) for k in datas])
    for key, data in datas.items():
        train, test = sets[key]
        if not test.groups:
            continue
        cells = out[key]
        cells["shared"] = score_cell(shared, data, test)
        zero = fit_across(zero_shot_parts(datas, sets, key))
        for n in ns:
            label = f"adapted_{'all' if n is None else n}"
            if n == 0:
                cells[label] = cells["zero_shot"] = score_cell(zero, data, test)
                continue
            part = sample_kernels(train, n, stable_seed(key, *held_out, n))
            cells[label] = score_cell(adapt(zero, data, part), data, test)
            if n is not None and "pooled" in kinds:
                cells[f"pooled_{n}"] = score_cell(fit_across(pooled_parts(datas, sets, key, part)), data, test)
        cols = plain_columns(data)
        X = data.table.get("tabular", train.rows)[:, cols]
        own = LGBMRanker().fit(X, train.relevance(), train.sizes)
        cells["own"] = score_cell(own, data, test, cols)
        log(f"  {key}: {len(test.groups)} test kernels; top-1 own {summarize_outcomes(cells['own'])['top1']}, "
            f"zero-shot {summarize_outcomes(cells['zero_shot'])['top1']}, shared "
            f"{summarize_outcomes(cells['shared'])['top1']}")
    log(f"fold {','.join(held_out)} in {time.perf_counter() - t0:.0f} s")
    return out


def result_name(n_folds: int | None, n_models: int) -> str:
    """`cross_target.json` for leave-one-model-out, `cross_target_<N>folds.json` for N model folds."""
    return RESULT_FILE if n_folds is None or n_folds >= n_models else f"cross_target_{n_folds}folds.json"


def evaluate_cross_target(models_dir: Path, keys: list[str], out_dir: Path, n_folds: int | None = None,
                          ns=ADAPT_NS, log: Callable[[str], None] = lambda m: print(m, file=sys.stderr),
                          kinds: tuple[str, ...] = ADAPT_KINDS) -> dict:
    """Every cell for every target over the folds, pooled (training.metrics), written to
    `out_dir/cross_target.json`. Each finished fold is kept in `cross_target.partial.json`: a killed run
    resumes where it stopped (the same targets, folds and feature version only)."""
    datas = load_targets(models_dir, keys, log)
    models = sorted({r.target_model for d in datas.values() for r in d.rows})
    folds = folds_of(models, n_folds)
    version = _version([(d, RankingSet()) for d in datas.values()])
    config = {"targets": keys, "folds": folds, "ns": [n if n is not None else "all" for n in ns],
              "feature_version": version, "adapt_trees": ADAPT_TREES, "adapt_kinds": list(kinds),
              "params": LGBMRanker().get_params()}
    out_dir.mkdir(parents=True, exist_ok=True)
    result_file = result_name(n_folds, len(models))
    partial_path = out_dir / result_file.replace(".json", ".partial.json")
    partial = read_json(partial_path) if partial_path.exists() else {}
    if partial.get("config") != config:
        partial = {"config": config, "folds": {}}
    for i, held_out in enumerate(folds, 1):
        name = ",".join(held_out)
        if name in partial["folds"]:
            continue
        log(f"[{i}/{len(folds)}] holding out {name} from every target")
        partial["folds"][name] = evaluate_fold(datas, held_out, ns, log, kinds)
        atomic_write_json(str(partial_path), partial)
    cells: dict[str, dict[str, dict]] = {}
    for key in keys:
        pooled: dict[str, list] = {}
        for fold in partial["folds"].values():
            for cell, outcomes in fold.get(key, {}).items():
                pooled.setdefault(cell, []).extend(outcomes)
        cells[key] = {c: summarize_outcomes(pooled[c]) for c in _cell_order(pooled)}
    result = {**config, "protocol": "leave-one-model-out" if n_folds is None else f"{len(folds)} model folds",
              "hardware_version": HARDWARE_VERSION, "result_file": result_file, "cells": cells}
    atomic_write_json(str(out_dir / result_file), result)
    partial_path.unlink()
    return result


def _cell_order(cells) -> list[str]:
    def by_n(prefix: str) -> list[str]:
        return sorted((c for c in cells if c.startswith(prefix)),
                      key=lambda c: (c.endswith("_all"), int(c.split("_")[1]) if not c.endswith("_all") else 0))
    return [c for c in CELLS_ORDER if c in cells] + by_n("adapted_") + by_n("pooled_")


def train_shared(models_dir: Path, keys: list[str], out_dir: Path,
                 log: Callable[[str], None] = lambda m: print(m, file=sys.stderr)) -> dict:
    """Fit the ranker across `keys` on every row they hold and save it under `out_dir/rankers/lgbm/`."""
    t0 = time.perf_counter()
    datas = load_targets(models_dir, keys, log)
    parts = [(d, d.training_set(SHARED_NAME)) for d in datas.values()]
    ranker = fit_across(parts)
    folder = Path(out_dir) / "rankers" / SHARED_NAME
    extra = {"targets": keys, "hardware": True, "hardware_version": HARDWARE_VERSION,
             "trained_on": [display_path(d.target_dir / "transfer") for d in datas.values()],
             "kernels": {k: len(rs.groups) for k, (_, rs) in zip(keys, parts)},
             "candidates": int(sum(rs.sizes.sum() for _, rs in parts)),
             "rule_kinds": sorted({k for _, rs in parts for k in rule_kinds(rs)}),
             "models": sorted({g.key[0] for _, rs in parts for g in rs.groups}),
             "train_seconds": round(time.perf_counter() - t0, 2)}
    ranker.save(folder, extra)
    log(f"{SHARED_NAME} across {', '.join(keys)}: {sum(extra['kernels'].values())} kernels "
        f"({extra['candidates']} candidates) in {extra['train_seconds']} s -> {display_path(folder)}")
    return extra


def format_cross_table(result: dict, metrics: tuple[str, ...] = ("top1", "top5", "q1")) -> str:
    """One row per (target, cell): the pooled figures, Markdown."""
    lines = ["| target (measured on) | ranker | kernels | " + " | ".join(metrics) + " |",
             "|---|---|---|" + "---|" * len(metrics)]
    for key, cells in result["cells"].items():
        for cell, p in cells.items():
            lines.append(f"| {key} | {cell.replace('_', ' ')} | {p.get('kernels', 0)} | " +
                         " | ".join(f"{p[m]:.3f}" if m in p else "-" for m in metrics) + " |")
    return "\n".join(lines)


def plot_against_n(result: dict, path: Path, metric: str = "top1") -> Path:
    """Score against N (the target's kernels the shared model was adapted with), one line per target, with
    its own ranker as a dashed level."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(6, 4))
    for i, (key, cells) in enumerate(result["cells"].items()):
        pts = [(c, p) for c, p in cells.items() if c.startswith("adapted_") and metric in p]
        labels = [c.split("_")[1] for c, _ in pts]
        color = f"C{i}"
        ax.plot(range(len(pts)), [p[metric] for _, p in pts], marker="o", color=color, label=key)
        pooled = {c.split("_")[1]: p for c, p in cells.items() if c.startswith("pooled_") and metric in p}
        pooled.setdefault("0", cells.get("zero_shot", {}))
        pooled.setdefault("all", cells.get("shared", {}))
        xs = [(j, pooled[lab][metric]) for j, lab in enumerate(labels) if metric in pooled.get(lab, {})]
        if len(xs) > 2:  # beside the continued boosting, the pooled refit (dash-dot)
            ax.plot([x for x, _ in xs], [y for _, y in xs], marker="s", color=color, linestyle="-.", linewidth=0.9)
        if "own" in cells:
            ax.axhline(cells["own"][metric], color=color, linestyle="--", linewidth=0.8)
        ax.set_xticks(range(len(pts)), labels)
    ax.set_xlabel("target kernels the shared ranker was adapted with (N)")
    ax.set_ylabel(f"pooled {metric} (dashed: own ranker; dash-dot: pooled refit)")
    ax.set_title(f"Rankers across targets ({result['protocol']})")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
