"""One kernel through the pipeline: candidates -> (selection) -> measure -> choose.

`find_candidates` replays the bank's donors onto the kernel (same class first; where none replays, the same
anchor op with another epilogue). `measure_kernel` measures the kernel's default version and the selected
candidates, with every output checked against the unscheduled kernel, and chooses. Which candidates to
measure is the caller's: all of them (exhaustive replay, the transfer matrix) or a selector's top-k
(budgeted transfer, `recommender.transfer.selection`).
"""
from __future__ import annotations

import time
from dataclasses import dataclass, replace

from ..core.rows import ANCHOR, CLASS, DESIGN_SPACE, OK, SAMPLED, CandidateRow
from ..frontend.kernels import Kernel
from ..measure import MeasureSettings, Measurer
from ..rules import RULES, tile_rule_for
from ..rules.conv import MIN_FLOPS as TILE_RULE_MIN_FLOPS  # the conv rule's threshold serves the matmul rule too
from .candidates import BankIndex, Candidate, SourceSchedule, replay_candidates
from .choice import KernelChoice, candidate_row, choose_rebuilt, kernel_match
from .replay import apply_replayed, sample_isolated, tile_rules_isolated
from .short_tune import short_tune

LOOP_RULE = RULES["loop"].source  # the source models of SAMPLED candidates built by recommender.rules
CONV_RULE = RULES["conv"].source
MATMUL_RULE = RULES["matmul"].source


@dataclass
class FoundCandidates:
    """A kernel's replayed candidates (failed replays included), where they came from, and the replay time."""

    kernel: Kernel
    candidates: list[Candidate]
    match: str | None
    replay_s: float

    @property
    def valid(self) -> list[int]:
        """Indices of the candidates that replayed (the ones a selector may pick)."""
        return [i for i, c in enumerate(self.candidates) if c.status == OK]

    def replayed_rows(self, model: str = "") -> list[CandidateRow]:
        """Rows of the replayed candidates (`valid` order), not measured yet: what a selector ranks."""
        return [replace(candidate_row(self.kernel, self.candidates[i], measured=False), target_model=model)
                for i in self.valid]


def find_candidates(kernel: Kernel, index: BankIndex, measurer: Measurer, target: object, top_n: int,
                    exclude_models: tuple[str, ...], cap: int | None, anchor_fallback: bool = True,
                    samples: int = 0, min_class_models: int = 2, tune_trials: int = 0,
                    tile_rules: bool = True, rule_space: int = 0) -> FoundCandidates:
    """Replay the kernel's donors (in `measurer`'s workers, so a crashing replay costs only its worker): its
    class's, joined by same-anchor donors where the class's come from fewer than `min_class_models` models
    (`BankIndex.pool_for`), and the same-anchor donors alone where no class donor replays. Where none
    replays, the kernel's own design space stands in (SAMPLED): the best records of a `tune_trials` search
    (`short_tune`) if given and the kernel's tile rule builds nothing, else (or if it finds nothing) up to
    `samples` random draws. A conv kernel of 2 MFLOP or more also gets the conv rule's register tiles after its
    donors, a matmul or batch matmul the matmul rule's (`tile_rule_candidates`); with `rule_space`, up to that
    many instances of the rule's template instead (its fixed tiles first), whether or not `tile_rules`, on a
    kernel of any size."""
    t0 = time.perf_counter()
    cands = donor_candidates(kernel, index, measurer, target, top_n, exclude_models, cap, anchor_fallback,
                             min_class_models)
    match = kernel_match((c.source.match, c.status == OK) for c in cands)
    # the fixed tiles only where a kernel is worth their builds; a rule space asked for is built whatever its size
    tiles = (tile_rule_candidates(kernel, measurer, rule_space)
             if rule_space or (tile_rules and kernel.flops >= TILE_RULE_MIN_FLOPS) else [])
    own = own_space_candidates(kernel, measurer, target, tune_trials, samples, cands, tiles)
    if own:
        cands, match = cands + own, SAMPLED
    if tiles:
        cands = cands + tiles
        match = kernel_match((c.source.match, c.status == OK) for c in cands)
    return FoundCandidates(kernel, cands, match, time.perf_counter() - t0)


def donor_candidates(kernel: Kernel, index: BankIndex, measurer: Measurer, target: object, top_n: int,
                     exclude_models: tuple[str, ...], cap: int | None, anchor_fallback: bool,
                     min_class_models: int) -> list[Candidate]:
    """The bank's donors replayed onto the kernel (failed replays included): `find_candidates`' first step."""
    sources = (index.pool_for(kernel, top_n, exclude_models, cap, min_class_models) if anchor_fallback
               else index.sources_for(kernel, top_n=top_n, exclude_models=exclude_models, cap=cap, match=CLASS))
    cands = replay_candidates(kernel, sources, target, isolated=measurer) if sources else []
    if anchor_fallback and not any(c.status == OK for c in cands) and not any(s.match == ANCHOR for s in sources):
        anchors = index.sources_for(kernel, top_n=top_n, exclude_models=exclude_models, cap=cap, match=ANCHOR)
        if anchors:
            cands += replay_candidates(kernel, anchors, target, isolated=measurer)
    return cands


def own_space_candidates(kernel: Kernel, measurer: Measurer, target: object, tune_trials: int, samples: int,
                         donors: list[Candidate], tiles: list[Candidate]) -> list[Candidate]:
    """Where no donor replayed: the kernel's own design space (SAMPLED), the best records of a `tune_trials`
    search unless its tile rule built something, else (or where the search found nothing) up to `samples`
    random draws. Empty where a donor replayed, or neither is asked for."""
    # no search where the kernel's tile rule builds: on all 24 kernels whose candidates had both (RegNet's
    # grouped convs, llvm-znver3/4/5-2c latency runs), the rule's best beat the 32-trial search's best
    cands = donors
    if tune_trials and not any(c.status == OK for c in cands + tiles):
        searched = replay_candidates(kernel, short_tune(kernel, measurer, target, tune_trials), target,
                                     isolated=measurer)
        if any(c.status == OK for c in searched):
            return searched
    if samples and not any(c.status == OK for c in cands):
        return sampled_candidates(kernel, measurer, samples)
    return []


def tile_rule_candidates(kernel: Kernel, measurer: Measurer, space: int = 0) -> list[Candidate]:
    """The schedules of the tile rule of the kernel's class (`recommender.rules.tile_rule_for`) as candidates
    (source the rule's, match SAMPLED, rank the tile's index); none where no rule applies (a strided or
    grouped conv, a matmul whose right operand is transposed, say). `space`: up to that many instances of the
    rule's template (`ScheduleRule.space`), the fixed tiles first, ranks in that order."""
    rule = tile_rule_for(kernel.class_key)
    if rule is None:
        return []
    return [Candidate(SourceSchedule(rule.source, kernel.name, i, 0.0, r.trace_json, kernel.mod, kernel.class_key,
                                     match=SAMPLED), r, OK)
            for i, r in enumerate(tile_rules_isolated(measurer, kernel.mod, rule.name, space=space))]


def sampled_candidates(kernel: Kernel, measurer: Measurer, n: int) -> list[Candidate]:
    """The kernel's own schedules as candidates: those of `recommender.rules.loop` (source LOOP_RULE), then up
    to `n` design-space samples (source DESIGN_SPACE); source kernel the kernel itself, rank the rule's or
    draw's index."""
    rules, drawn = sample_isolated(measurer, kernel.mod, n, rules=True)
    return [Candidate(SourceSchedule(model, kernel.name, i, 0.0, r.trace_json, kernel.mod, kernel.class_key,
                                     match=SAMPLED), r, OK)
            for model, replayed in ((LOOP_RULE, rules), (DESIGN_SPACE, drawn)) for i, r in enumerate(replayed)]


def measure_kernel(found: FoundCandidates, measurer: Measurer, target: object, selected: list[int] | None = None,
                   measure_default: bool = True, settings: MeasureSettings | None = None) -> KernelChoice:
    """Measure the default and the `selected` candidates (indices into found.candidates; None: every one
    that replayed) and choose: nothing else is measured, so a budget of k candidates is k measurements, a
    failed one included. Candidates that replayed but were not selected are kept as not-measured rows.
    Without `measure_default` the best valid selected candidate is chosen as is (a budget of 0)."""
    kernel = found.kernel
    t0 = time.perf_counter()
    picked = found.valid if selected is None else [i for i in selected if found.candidates[i].status == OK]
    mods = ([kernel.mod] if measure_default else []) + [found.candidates[i].replayed.to_build for i in picked]
    results = measurer.measure(mods, reference=kernel.mod, settings=settings) if mods else []
    default = results.pop(0) if measure_default else None
    choice = choose(found, default, dict(zip(picked, results)), target, measure_default)
    all_results = results + ([default] if default is not None else [])
    choice.build_s = sum(r.build_s for r in all_results)
    choice.run_s = sum(r.run_s for r in all_results)
    choice.wall_s = found.replay_s + time.perf_counter() - t0
    choice.rows[0] = replace(choice.rows[0], seconds=choice.seconds())
    return choice


def choose(found: FoundCandidates, default: object | None, by_index: dict[int, object], target: object,
           measured_default: bool = True) -> KernelChoice:
    """A kernel's rows (its default first, then every candidate: measured, failed to replay, or not measured)
    and its choice: the fastest valid measured candidate if it beats the default, else the default.
    `default` and the values of `by_index` (candidate index -> result) are MeasureResults."""
    kernel = found.kernel
    choice = KernelChoice(kernel, match=found.match, replay_s=found.replay_s)
    choice.default_s = default.median if default is not None and default.ok else None
    choice.rows.append(candidate_row(kernel, None, default, measured=measured_default))
    for i, c in enumerate(found.candidates):
        choice.rows.append(candidate_row(kernel, c, by_index.get(i), measured=i in by_index or c.status != OK))

    def rebuild(at: int, row: CandidateRow) -> object:  # replayed in a worker: the schedule is rebuilt here
        c = found.candidates[at - 1]
        return c.replayed.sch if c.replayed.sch is not None else apply_replayed(c.replayed.trace_json,
                                                                                kernel.mod, target).sch
    return choose_rebuilt(choice, rebuild)


def transfer_kernel(kernel: Kernel, index: BankIndex, measurer: Measurer, target: object, top_n: int,
                    exclude_models: tuple[str, ...], cap: int | None, anchor_fallback: bool = True,
                    tile_rules: bool = True, rule_space: int = 0) -> KernelChoice:
    """Exhaustive replay of one kernel: replay, check and measure every candidate (the tile rules' too,
    unless `tile_rules` is False; up to `rule_space` instances of the rule's template where given); choose the
    fastest, default included."""
    found = find_candidates(kernel, index, measurer, target, top_n, exclude_models, cap, anchor_fallback,
                            tile_rules=tile_rules, rule_space=rule_space)
    return measure_kernel(found, measurer, target)
