"""A kernel's outcome: its rows (default first, then one per candidate) and the schedule chosen from them.

The rule, the same for every selector: the fastest valid measured candidate if it beats the kernel's
default (unscheduled) version, else the default. A run's rows are the only record; a resumed run rebuilds
each finished kernel's choice from them (`choice_from_rows`) and measures nothing again.
"""
from __future__ import annotations

import sys
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace

from ..core.rows import ANCHOR, CLASS, DEFAULT, NOT_MEASURED, OK, SAMPLED, CandidateRow
from ..frontend.kernels import Kernel
from .replay import ReplayFailure, apply_replayed


@dataclass
class KernelChoice:
    kernel: Kernel
    match: str | None = None  # CLASS or ANCHOR: which donors the candidates came from (None: no donor)
    candidates: int = 0
    valid: int = 0  # measured and correct
    measured: int = 0  # candidates sent to the measurer (a budgeted run measures some of the valid replays)
    failures: Counter = field(default_factory=Counter)
    default_s: float | None = None
    # {"source_model", "source_kernel", "rank", "match", "kind", "knobs", "latency_s"} or None (default)
    chosen: dict | None = None
    chosen_sch: object = None
    chosen_costs: list = field(default_factory=list)
    candidate_s: list = field(default_factory=list)  # medians of the valid measured candidates
    replay_s: float = 0.0
    build_s: float = 0.0  # summed over the parallel build workers (CPU side)
    run_s: float = 0.0
    wall_s: float = 0.0
    rows: list[CandidateRow] = field(default_factory=list)  # the default schedule's first, then one per candidate

    @property
    def latency_s(self) -> float | None:
        return self.chosen["latency_s"] if self.chosen else self.default_s

    def seconds(self) -> dict:
        return {"replay": round(self.replay_s, 3), "build": round(self.build_s, 3), "run": round(self.run_s, 3),
                "total": round(self.wall_s, 3)}

    def to_json(self) -> dict:
        k = self.kernel
        return {"kernel": k.name, "class_key": k.class_key, "weight": k.weight, "flops": k.flops,
                "match": self.match, "candidates": self.candidates, "valid": self.valid, "failures": dict(self.failures),
                "default_s": self.default_s, "chosen": self.chosen, "latency_s": self.latency_s,
                "candidate_s": self.candidate_s, "seconds": self.seconds()}


def target_fields(kernel: Kernel) -> dict:
    """The target-kernel fields of a row. The target model and the kernel's tuned latency are not known
    here: `transfer_data.kernel_rows` fills them in."""
    return {"target_model": "", "target_kernel": kernel.name, "class_key": kernel.class_key,
            "weight": kernel.weight, "flops": kernel.flops,
            "target_args": tuple((tuple(s), d) for s, d in kernel.args)}


def candidate_row(kernel: Kernel, cand: object | None, result: object | None = None,
                  measured: bool = True) -> CandidateRow:
    """The row of the default schedule (`cand` None) or of a candidate (a candidates.Candidate). `result` is
    its MeasureResult; None with `measured` set means it failed before measurement (its replay), and with
    `measured` unset that a budgeted run left it unmeasured."""
    if result is None and not measured:
        outcome = {"status": NOT_MEASURED, "error": "", "costs": (), "latency_s": None}
    elif result is None:
        outcome = {"status": cand.status, "error": cand.error[:300], "costs": (), "latency_s": None}
    else:
        outcome = {"status": result.status, "error": (result.error or "")[:300], "costs": tuple(result.costs),
                   "latency_s": result.median if result.ok else None}
    if cand is None:
        return CandidateRow(**target_fields(kernel), match=DEFAULT, **outcome)
    s = cand.source
    return CandidateRow(**target_fields(kernel), match=s.match, source_model=s.model, source_kernel=s.kernel,
                        source_class_key=s.class_key, source_rank=s.rank, source_latency_s=s.latency_s,
                        trace=cand.replayed.trace_json if cand.replayed is not None else None,
                        knobs=cand.replayed.knobs if cand.replayed is not None else None, **outcome)


def kernel_match(candidates: Iterable[tuple[str, bool]]) -> str | None:
    """Where a kernel's schedules come from, from its candidates' (match, replayed): CLASS if a same-class
    donor replayed, else ANCHOR if a same-anchor donor did, else SAMPLED if design-space samples stand in;
    where nothing replayed, ANCHOR if anchor donors were tried, else CLASS; None without candidates."""
    candidates = list(candidates)
    for m in (CLASS, ANCHOR, SAMPLED):
        if any(match == m and ok for match, ok in candidates):
            return m
    return ANCHOR if any(m == ANCHOR for m, _ in candidates) else CLASS if candidates else None


def tally(choice: KernelChoice) -> None:
    """Counts and candidate latencies of `choice` from its candidate rows."""
    cands = [r for r in choice.rows if not r.is_default]
    choice.candidates = len(cands)
    ok = [r for r in cands if r.ok]
    choice.failures = Counter(r.status for r in cands if not r.ok and r.status != NOT_MEASURED)
    choice.valid, choice.candidate_s = len(ok), [r.latency_s for r in ok]
    choice.measured = sum(1 for r in cands if r.status != NOT_MEASURED and r.replayed)


def best_row(choice: KernelChoice) -> CandidateRow | None:
    """The fastest valid candidate row if it beats the default (or the default failed), else None."""
    best = min((r for r in choice.rows if not r.is_default and r.ok), key=lambda r: r.latency_s, default=None)
    if best is not None and (choice.default_s is None or best.latency_s < choice.default_s):
        return best
    return None


def set_chosen(choice: KernelChoice, row: CandidateRow, sch: object) -> None:
    choice.chosen = {"source_model": row.source_model, "source_kernel": row.source_kernel,
                     "rank": row.source_rank, "match": row.match, "kind": row.source_kind, "knobs": row.knobs,
                     "latency_s": row.latency_s}
    choice.chosen_sch = sch
    choice.chosen_costs = list(row.costs)


def choose_rebuilt(choice: KernelChoice, rebuild: Callable[[int, CandidateRow], object]) -> KernelChoice:
    """Choose for `choice` from its rows: the fastest valid candidate that beats the default, its schedule
    from `rebuild(row index, row)`. A candidate whose schedule does not rebuild in this process (it was
    replayed in a worker, or recorded by an earlier run) fails with the reason, and the next fastest is
    chosen; the default where none is left."""
    while True:
        tally(choice)
        best = best_row(choice)
        if best is None:
            return choice
        at = next(i for i, r in enumerate(choice.rows) if r is best)
        try:
            sch = rebuild(at, best)
        except ReplayFailure as err:
            print(f"warning: {choice.kernel.name}: a chosen schedule does not rebuild from its trace ({err}); "
                  f"the next fastest is chosen", file=sys.stderr)
            choice.rows[at] = replace(best, status=err.reason, error=f"rebuilt from its trace: {err}"[:300])
            continue
        set_chosen(choice, best, sch)
        return choice


def choice_from_rows(kernel: Kernel, rows: list[CandidateRow], target: object) -> KernelChoice:
    """A kernel's choice rebuilt from its recorded rows (a resumed run measures nothing again); the
    chosen schedule is re-applied from its replayed trace."""
    choice = KernelChoice(kernel)
    default = next(r for r in rows if r.is_default)
    choice.rows = list(rows)
    choice.default_s = default.latency_s
    secs = default.seconds or {}
    choice.replay_s, choice.build_s, choice.run_s, choice.wall_s = (
        float(secs.get(k, 0.0)) for k in ("replay", "build", "run", "total"))
    choice.match = kernel_match((r.match, r.replayed) for r in rows if not r.is_default)  # as find_candidates
    return choose_rebuilt(choice, lambda _, row: apply_replayed(row.trace, kernel.mod, target).sch)


__all__ = ["KernelChoice", "candidate_row", "choice_from_rows", "choose_rebuilt", "best_row", "set_chosen", "tally", "OK"]
