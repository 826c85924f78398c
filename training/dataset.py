"""Ranking data from measured candidate rows: one query group per target kernel.

Only candidates that replayed are ranked: replay runs before ranking, so a replay failure is known and
costs no measurement. A replayed candidate that then fails (wrong result, build error, timeout) stays in
its group with relevance 0, below every valid one: the rankers learn to put such schedules last.
Relevance of a valid candidate is best / latency in (0, 1]: 1 for the kernel's fastest.
"""
from __future__ import annotations

import hashlib
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from recommender.bank.store import bank_models, read_meta
from recommender.core.errors import BankError
from recommender.core.row_files import read_rows
from recommender.core.rows import CandidateRow

from .relabel import apply_relabels, read_relabels


@dataclass(frozen=True)
class KernelGroup:
    """The ranked candidates of one target kernel, with what scoring needs."""

    key: tuple[str, str]  # (target model, kernel)
    rows: tuple[CandidateRow, ...]
    weight: int
    default_s: float | None

    @property
    def best_s(self) -> float | None:
        valid = [r.latency_s for r in self.rows if r.ok]
        return min(valid) if valid else None

    def relevance(self) -> np.ndarray:
        best = self.best_s
        return np.asarray([best / r.latency_s if r.ok and best else 0.0 for r in self.rows])


@dataclass
class RankingSet:
    groups: list[KernelGroup] = field(default_factory=list)

    @property
    def rows(self) -> list[CandidateRow]:
        return [r for g in self.groups for r in g.rows]

    @property
    def sizes(self) -> np.ndarray:
        return np.asarray([len(g.rows) for g in self.groups], dtype=np.int64)

    def relevance(self) -> np.ndarray:
        return np.concatenate([g.relevance() for g in self.groups]) if self.groups else np.zeros(0)

    def time_weights(self) -> np.ndarray:
        """Each group's time as the top-k score weighs it: kernel weight x fastest valid latency (seconds), the
        default's latency where no candidate is valid, and the smallest of the others where neither is known."""
        t = np.asarray([g.weight * (g.best_s if g.best_s is not None else g.default_s or 0.0) for g in self.groups],
                       dtype=np.float64)
        known = t[t > 0]
        return np.where(t > 0, t, known.min() if known.size else 1.0)

    def where(self, keep) -> "RankingSet":
        return RankingSet([g for g in self.groups if keep(g)])

    def digest(self) -> str:
        """A hash of what the set holds (candidates and their outcomes): saved rankers carry it."""
        return rows_digest(r for g in self.groups for r in g.rows)


def rows_digest(rows: Iterable[CandidateRow], files: Iterable[Path] = ()) -> str:
    """A hash of measured rows (key, status, latency) and of the bytes of those `files` that exist."""
    h = hashlib.sha256()
    for r in rows:
        h.update(repr((r.key, r.status, r.latency_s)).encode())
    for f in files:
        if Path(f).exists():
            h.update(Path(f).read_bytes())
    return h.hexdigest()[:16]


def read_matrix(matrix_dir: Path, relabelled: bool = True) -> list[CandidateRow]:
    """Every row of a transfer matrix (one gzipped JSON-lines file per target model); with `relabelled`, the rows
    timed again because their repeats spread (`noise/relabel.jsonl.gz`, training.relabel) carry the new labels."""
    files = sorted(Path(matrix_dir).glob("*.jsonl.gz"))
    if not files:
        raise BankError(f"no transfer-matrix files (*.jsonl.gz) in {matrix_dir}: build it with "
                        f"`schedrec replay --all-pairs` first")
    rows = [r for f in files for r in read_rows(f)]
    return apply_relabels(rows, read_relabels(matrix_dir)) if relabelled else rows


def read_target_matrix(target_dir: Path) -> list[CandidateRow]:
    """A target's training rows: its transfer matrix (`transfer/`), where its rule-space matrix (`space/`)
    holds a kernel, that matrix's rows of it instead (its donors beside its rule's wider space)."""
    rows = read_matrix(Path(target_dir) / "transfer")
    space_dir = Path(target_dir) / "space"
    if any(space_dir.glob("*.jsonl.gz")):
        space = read_matrix(space_dir)
        spaced = {r.kernel_key for r in space}
        rows = [r for r in rows if r.kernel_key not in spaced] + space
    return rows


def ranking_set(rows: list[CandidateRow], min_candidates: int = 1) -> RankingSet:
    """Group replayed candidates by target kernel (kernels with fewer than `min_candidates` dropped)."""
    by_kernel: dict[tuple[str, str], list[CandidateRow]] = defaultdict(list)
    defaults: dict[tuple[str, str], CandidateRow] = {}
    for r in rows:
        if r.is_default:
            defaults[r.kernel_key] = r
        elif r.replayed:
            by_kernel[r.kernel_key].append(r)
    groups = []
    for key in sorted(by_kernel):
        cands = by_kernel[key]
        if len(cands) < min_candidates:
            continue
        d = defaults.get(key)
        groups.append(KernelGroup(key, tuple(cands), cands[0].weight, d.latency_s if d is not None else None))
    return RankingSet(groups)


def trainable(rows: list[CandidateRow]) -> RankingSet:
    """The kernels a ranker can learn from: a valid candidate and 2 or more candidates."""
    return ranking_set(rows).where(lambda g: g.best_s is not None and len(g.rows) >= 2)


def leave_model_out(rows: list[CandidateRow], model: str) -> tuple[list[CandidateRow], list[CandidateRow]]:
    """(training rows, test rows) for held-out `model`: no training row targets it or comes from it."""
    train = [r for r in rows if r.target_model != model and r.source_model != model]
    test = [r for r in rows if r.target_model == model]
    return train, test


def bank_record_rows(bank_dir: Path) -> list[CandidateRow]:
    """The bank's own tuning records as extra ranking groups (as TLP trains on tuning logs): each tuned
    kernel's valid records, measured on that kernel itself. They carry no source (a record's own latency
    would leak its label): pair features read "unknown". Records are matched to their kernel by argument
    shapes (meta.json); a record whose shapes name no kernel, or more than one, is skipped."""
    from featurize.trace_json import strip_postproc
    from recommender.bank.store import read_records
    rows = []
    for folder in bank_models(Path(bank_dir)):
        meta = read_meta(folder)
        by_args: dict[tuple, list[str]] = defaultdict(list)
        for name, k in (meta.get("kernels") or {}).items():
            by_args[tuple((a["dtype"], tuple(a["shape"])) for a in k.get("args", []))].append(name)
        _, records = read_records(folder)
        for rec in records:
            key = tuple((a[1], tuple(a[2])) for a in rec.args_info if isinstance(a, list) and len(a) == 3)
            names = by_args.get(key, [])
            if len(names) != 1 or not rec.ok:
                continue
            k = meta["kernels"][names[0]]
            rows.append(CandidateRow(
                target_model=meta["model"], target_kernel=names[0], class_key=k["class_key"], match="class",
                status="ok", weight=int(k.get("weight", 1)), flops=float(k.get("flops") or 0.0),
                target_args=tuple((tuple(a["shape"]), a["dtype"]) for a in k["args"]),
                source_model=None, source_kernel=f"record{len(rows)}", source_rank=None,
                trace=strip_postproc(rec.trace_json), latency_s=rec.latency))
    return rows
