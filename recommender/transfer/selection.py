"""Which candidates to measure: selectors and the split of a measurement budget across kernels.

A selector orders one kernel's replayed candidates, best first; it reads rows and features, never TVM
objects, so the same code scores offline against the measured matrix and runs online unchanged.
- `MeasureAll`: the order candidates came in (exhaustive replay measures them all);
- `RandomK`: a seeded random order (what measuring k arbitrary candidates gets);
- `Ranked`: a trained ranker's order, with candidates known to fail (featurize.validity) last; a learned
  ranker's order is spread over the pool's families first (`spread_order`);
- `Restricted`: another selector's order over part of the pool (the fixed-rule baselines, `restricted`);
- `ranked(selector, kernel)`: what callers use.

`split_budget` gives each kernel its number of measurements: every kernel with candidates gets its top-1
while the budget allows, in order of expected gain; the rest goes one measurement at a time to the kernel
with the largest expected gain of one more, where the k-th measurement of a kernel is worth its gain / k.
"""
from __future__ import annotations

import dataclasses
import heapq
import random
import time
from dataclasses import dataclass
from typing import Callable, Protocol, Sequence

import numpy as np

from featurize.validity import demote_known_failures
# baselines that measure part of the pool: today's fixed tiles alone; the donors alone (the heuristic's
# order: transfer-tuning); the fixed tiles then the donors (what schedrec measured before one pool)
from training.registry import RESTRICTED

from ..core.rows import DONOR, CandidateRow
from ..rules import STRUCTURAL_KNOBS


def candidate_family(row: CandidateRow) -> tuple:
    """The kind of schedule a candidate is: its source kind (donor, rule instance, design-space schedule) and,
    for a rule instance, which of the rules' structural knobs it sets (`ScheduleRule.structural`: a reduction
    block, a packed layout, a flat tile). Instances of one family differ in tile sizes only."""
    knobs = row.knobs or {}
    return (row.source_kind,) + tuple(bool(knobs.get(name)) for name in STRUCTURAL_KNOBS)


def spread_order(rows: Sequence[CandidateRow], order: Sequence[int]) -> list[int]:
    """`order` with the best-placed candidate of each family first (families in the order of their best),
    then the rest in `order`. A ranker's errors go by family: trained on kernels where a structural choice
    seldom pays, it scores that whole family low, also where it would win. Leave-one-model-out on the
    llvm-rocketlake-2c rule-space matrix, the spread raised lgbm's weighted top-2 from 0.933 to 0.953 and its
    top-1 stayed 0.906 (docs/design.md, "Spreading the first picks")."""
    head, seen = [], set()
    for i in order:
        family = candidate_family(rows[i])
        if family not in seen:
            seen.add(family)
            head.append(i)
    picked = set(head)
    return head + [i for i in order if i not in picked]


@dataclass(frozen=True)
class KernelCandidates:
    """One target kernel's replayed candidates (not yet measured), with what the budget split needs."""

    key: tuple[str, str]
    rows: tuple[CandidateRow, ...]
    weight: int = 1
    gain: float = 1.0  # expected gain of measuring here: weight x predicted room over the default (seconds)


class Selector(Protocol):
    name: str

    def order(self, kernel: KernelCandidates) -> list[int]:
        """Indices into kernel.rows, the candidate to measure first first."""


class MeasureAll:
    name = "all"

    def order(self, kernel: KernelCandidates) -> list[int]:
        return list(range(len(kernel.rows)))


class RandomK:
    name = "random"

    def __init__(self, seed: int = 0) -> None:
        self.seed = seed

    def order(self, kernel: KernelCandidates) -> list[int]:
        idx = list(range(len(kernel.rows)))
        random.Random(f"{self.seed}/{kernel.key}").shuffle(idx)
        return idx


class Ranked:
    """A trained ranker's order. `featurize(rows) -> X` is the featurizer method the ranker was fitted on.
    `rule_kinds`: the kernel kinds (conv2d, matmul, ...) whose rule instances the ranker saw measured in
    training; a pool of another kind gets its rule's fixed tiles first (in the rule's order), then the ranker's
    order of the rest: a ranker cannot place candidates it never saw (the default, None, trusts it on all).
    `spread`: the first picks are the best-scored candidate of each family (`spread_order`)."""

    def __init__(self, ranker: object, featurize, validity: bool = True,
                 rule_kinds: frozenset[str] | None = None, spread: bool = False) -> None:
        self.ranker = ranker
        self.featurize = featurize
        self.validity = validity
        self.rule_kinds = rule_kinds
        self.spread = spread
        self.name = getattr(ranker, "name", "ranked")
        self.seconds = {"featurize": 0.0, "predict": 0.0}  # accumulated over calls

    def scores(self, kernel: KernelCandidates) -> np.ndarray:
        rows = list(kernel.rows)
        t0 = time.perf_counter()
        X = self.featurize(rows)
        t1 = time.perf_counter()
        s = self.ranker.predict(X, np.asarray([len(rows)]))
        s = demote_known_failures(rows, s) if self.validity else s
        self.seconds["featurize"] += t1 - t0
        self.seconds["predict"] += time.perf_counter() - t1
        return s

    def order(self, kernel: KernelCandidates) -> list[int]:
        if not kernel.rows:
            return []
        ranked = [int(i) for i in np.argsort(-self.scores(kernel), kind="stable")]
        if self.spread:
            ranked = spread_order(kernel.rows, ranked)
        if self.rule_kinds is None or kernel.rows[0].class_key.split("/")[0] in self.rule_kinds:
            return ranked
        head = [i for i, r in enumerate(kernel.rows) if r.fixed_rule]
        return head + [i for i in ranked if i not in head]


class Restricted:
    """Another selector's order over some of the pool: the rows `keep` accepts, those `first` accepts ahead
    in pool order (the baselines of a fixed rule of thumb: today's fixed tiles alone, donors alone, the fixed
    tiles then the donors)."""

    def __init__(self, name: str, then: Selector, keep: Callable[[CandidateRow], bool],
                 first: Callable[[CandidateRow], bool] = lambda r: False) -> None:
        self.name, self.then, self.keep, self.first = name, then, keep, first
        self.seconds = getattr(then, "seconds", {"featurize": 0.0, "predict": 0.0})

    def order(self, kernel: KernelCandidates) -> list[int]:
        kept = [i for i, r in enumerate(kernel.rows) if self.keep(r)]
        head = [i for i in kept if self.first(kernel.rows[i])]
        rest = [i for i in kept if i not in head]
        if not rest:
            return head
        sub = dataclasses.replace(kernel, rows=tuple(kernel.rows[i] for i in rest))
        return head + [rest[i] for i in self.then.order(sub)]


def restricted(name: str, then: Selector) -> Restricted:
    """The baseline selector `name` (one of RESTRICTED) over `then`'s order."""
    if name == "fixed-tiles":
        return Restricted(name, then, keep=lambda r: r.fixed_rule)
    if name == "donors":
        return Restricted(name, then, keep=lambda r: r.source_kind == DONOR)
    if name == "tiles-then-donors":
        return Restricted(name, then, keep=lambda r: r.fixed_rule or r.source_kind == DONOR,
                          first=lambda r: r.fixed_rule)
    raise ValueError(f"unknown restricted selector {name!r}; one of {', '.join(RESTRICTED)}")


def ranked(selector: Selector, kernel: KernelCandidates) -> list[int]:
    """The selector's order of a kernel's pool (donors, rule instances, design-space schedules alike; a
    restricted selector's order holds part of it)."""
    return selector.order(kernel) if kernel.rows else []


def split_budget(kernels: Sequence[KernelCandidates], budget: int | None = None,
                 per_kernel: int | None = None) -> dict[tuple[str, str], int]:
    """Measurements per kernel: `per_kernel` each (capped by its candidates), or a total `budget` split
    by expected gain. Exactly one of the two is given; 0 measures nothing."""
    if (budget is None) == (per_kernel is None):
        raise ValueError("give a total budget or a per-kernel budget, not both or neither")
    if per_kernel is not None:
        return {k.key: min(per_kernel, len(k.rows)) for k in kernels}  # a restricted order may hold fewer
    counts = {k.key: 0 for k in kernels}
    left = budget
    with_cands = sorted((k for k in kernels if k.rows), key=lambda k: -k.gain)
    for k in with_cands:  # everyone's top-1 first, largest gain first
        if left <= 0:
            return counts
        counts[k.key] = 1
        left -= 1
    heap = [(-k.gain / 2, i) for i, k in enumerate(with_cands) if len(k.rows) > 1]
    heapq.heapify(heap)
    while left > 0 and heap:
        _, i = heapq.heappop(heap)
        k = with_cands[i]
        counts[k.key] += 1
        left -= 1
        n = counts[k.key]
        if n < len(k.rows):
            heapq.heappush(heap, (-k.gain / (n + 1), i))
    return counts
