"""Budgeted transfer: a selector picks which replayed candidates to measure, under a measurement budget.

kernels -> candidates (replayed, for every kernel first) -> features -> ranking -> the budget split across
kernels by expected gain -> the default and the top-k of each kernel measured, outputs checked -> choose
(never worse than the measured default) -> MetaSchedule database -> the model compiled and timed -> report.

A budget counts timed candidate measurements; the kernel's default version is measured beside them (it is
what "never worse than the default" needs) and reported apart. A kernel given no measurement (a budget of 0,
or a total budget spent elsewhere) gets its top-ranked candidate after a single correctness-checked run,
unmeasured against the default. Rows are saved after each kernel: a rerun resumes, and Ctrl-C writes the
database of what was chosen so far.
"""
from __future__ import annotations

import statistics
import time
from pathlib import Path

from ..bank.store import locked
from ..core.fileio import atomic_write_json, atomic_write_text, display_path
from ..core.rows import CandidateRow
from ..frontend.kernels import Kernel
from ..measure import MeasureSettings, Measurer
from ..target.spec import TargetSpec
from .choice import KernelChoice, choice_from_rows
from .driver import RowFile, drive
from .kernel import FoundCandidates, find_candidates, measure_kernel
from .run import ModelRun, check_run, finish, open_model_measured, totals
from .selection import KernelCandidates, Selector, ranked, split_budget
from .short_tune import trials_per_kernel

# a correctness check of a candidate nobody will time: one short run after the output check
CHECK_ONLY = MeasureSettings(repeat=1, number=1, min_repeat_ms=0, warmup=0)


def expected_gain(kernel: Kernel, rows: list[CandidateRow], source_flops: dict[tuple[str, str], float]) -> float:
    """What measuring this kernel may win, in seconds per inference: its weight x its expected latency under a
    transferred schedule, each candidate's source latency scaled by the FLOP ratio (median over candidates).
    Without source FLOPs, 1 GFLOP/s is assumed."""
    est = []
    for r in rows:
        f = source_flops.get((r.source_model, r.source_kernel))
        if r.source_latency_s and f:
            est.append(r.source_latency_s * kernel.flops / f)
    latency = statistics.median(est) if est else kernel.flops / 1e9
    return kernel.weight * max(latency, 1e-9)


def budgeted_transfer(spec: str, target: TargetSpec, bank_dir: Path, out_dir: Path, selector: Selector,
                      budget: int | None = None, per_kernel: int | None = None, top_n: int = 3, cap: int | None = 48,
                      exclude_models: tuple[str, ...] = (), settings: MeasureSettings | None = None,
                      anchor_fallback: bool = True, untuned: bool = True, recommender: str = "",
                      fallback_samples: int = 4, tune_missing: int = 0, pack_weights: bool = False,
                      rule_space: int = 32, log=None) -> dict:
    """Transfer-tune a model measuring only what `selector` ranks first: `per_kernel` candidates per kernel,
    or a total `budget` split by expected gain, from one pool per kernel: its donors (`top_n` records of each
    source kernel, at most `cap`), up to `rule_space` instances of its tile rule's template (0: the rule's fixed
    tiles alone, on kernels of 2 MFLOP or more), and its own design space where no donor replays. A kernel that
    no donor replays on gets the best records of a
    `tune_missing`-trial search of its design space if it holds 1% of the FLOPs or more (0.25% for a conv or a
    matmul; `short_tune.trials_per_kernel`), else
    `fallback_samples` design-space samples, as its candidates (best or drawn first, under the same budget).
    With `pack_weights` the model's weights are marked layout-free: replayed schedules pack them ahead of
    time (`model_import.lower_for_tuning`). Returns (and writes) the report (report.json, report.md)."""
    from .driver import stderr_log
    log = log or stderr_log
    if (budget is None) == (per_kernel is None):
        raise ValueError("give a total budget or a per-kernel budget, not both or neither")
    with locked(out_dir, f"transfer {spec}"):  # a folder in use is refused before the model is imported
        measurer, mr = open_model_measured(spec, target, bank_dir, exclude_models, settings,
                                           pack_weights=pack_weights)
        with measurer:  # closed whatever fails from here on (a refused resume included)
            name = mr.model.name
            run = {"spec": spec, "model": name, "target_key": target.key, "bank_models": mr.index.models,
                   "excluded_models": list(mr.exclude), "top_n": top_n, "cap": cap, "anchor_fallback": anchor_fallback,
                   "selector": selector.name, "budget": budget, "per_kernel": per_kernel,
                   "fallback_samples": fallback_samples, "tune_missing": tune_missing, "pack_weights": pack_weights,
                   "rule_space": rule_space, "fast_math": (settings or MeasureSettings()).fast_math}
            t_start = time.perf_counter()
            check_run(out_dir / "run.json", run)
            rows = RowFile(out_dir / "candidates.jsonl.gz")
            found = _candidates(mr, rows, measurer, top_n, cap, anchor_fallback, fallback_samples, tune_missing,
                                rule_space)
            plan = _plan(mr, bank_dir, rows, found, selector, budget, per_kernel)
            choices: list[KernelChoice] = []
            try:
                for choice in drive(mr.kernels, rows, name, name=lambda k: k.name,
                                    step=lambda k: _measure(found[k.name], plan[k.name], measurer, mr),
                                    resume=lambda k, saved: choice_from_rows(k, saved, mr.tvm_target),
                                    pause_dir=bank_dir, desc=f"transfer {name}", log=log):
                    choices.append(choice)
            except KeyboardInterrupt:
                from .database import write_database
                n = write_database(choices, mr.tvm_target, out_dir / "database")
                log(f"interrupted: {len(choices)} of {len(mr.kernels)} kernels done, {n} schedules written to "
                    f"{display_path(out_dir / 'database')}")
                raise
            timing = finish(choices, mr, measurer, out_dir, untuned=untuned)
    secs = getattr(selector, "seconds", {"featurize": 0.0, "predict": 0.0})
    report = _report(mr, bank_dir, run, choices, timing, plan, secs, recommender)
    report["totals"]["wall_s"] = round(time.perf_counter() - t_start + mr.import_s + mr.workers_wait_s, 2)
    atomic_write_json(str(out_dir / "report.json"), report)
    atomic_write_text(str(out_dir / "report.md"), format_report(report))
    return report


def _candidates(mr: ModelRun, rows: RowFile, measurer: Measurer, top_n: int, cap: int | None,
                anchor_fallback: bool, samples: int = 0, tune_missing: int = 0,
                rule_space: int = 0) -> dict[str, FoundCandidates]:
    """The pool of every kernel not finished yet (the split of a total budget needs them all)."""
    import sys

    from tqdm import tqdm
    todo = [k for k in mr.kernels if k.name not in rows.by_kernel]
    trials = trials_per_kernel(mr.kernels, tune_missing)
    return {k.name: find_candidates(k, mr.index, measurer, mr.tvm_target, top_n, mr.exclude, cap, anchor_fallback,
                                    samples, tune_trials=trials[k.name], rule_space=rule_space)
            for k in tqdm(todo, desc=f"candidates {mr.model.name}", unit="kernel", file=sys.stderr, disable=not todo)}


def _plan(mr: ModelRun, bank_dir: Path, rows: RowFile, found: dict[str, FoundCandidates], selector: Selector,
          budget: int | None, per_kernel: int | None) -> dict[str, list[int]]:
    """Per kernel, the indices (into its found candidates) to measure, best first; finished kernels are part
    of the split (from their rows) so a resumed run plans what the first one did."""
    from recommender.bank.sources import read_source_kernels
    source_flops = {key: k.flops for key, k in read_source_kernels(bank_dir).items()}
    kernels, order = [], {}
    for k in mr.kernels:
        if k.name in found:
            replayed = found[k.name].replayed_rows(mr.model.name)
            index = found[k.name].valid
        else:
            replayed = [r for r in rows.by_kernel[k.name] if r.replayed]
            index = list(range(len(replayed)))
        kc = KernelCandidates((mr.model.name, k.name), tuple(replayed), k.weight,
                              expected_gain(k, replayed, source_flops))
        kernels.append(kc)
        order[k.name] = [index[i] for i in ranked(selector, kc)]
    counts = split_budget(kernels, budget=budget, per_kernel=per_kernel)
    return {name: take_planned(order[name], counts[(mr.model.name, name)]) for name in order}


def take_planned(order: list[int], count: int) -> list[int]:
    """The first `count` of a kernel's order; with no measurement, its top-1 is still checked (negative marks
    check-only: -(index + 1))."""
    if count > 0:
        return order[:count]
    return [-(order[0] + 1)] if order else []


def _measure(found: FoundCandidates, plan: list[int], measurer: Measurer, mr: ModelRun) -> KernelChoice:
    """Measure a kernel's planned candidates beside its default, and nothing else; a check-only plan (a budget
    of 0 there) runs its one candidate once for the output check and trusts it."""
    if plan and plan[0] < 0:
        return measure_kernel(found, measurer, mr.tvm_target, selected=[-plan[0] - 1], measure_default=False,
                              settings=CHECK_ONLY)
    # no candidate: the kernel keeps its default, timed for the report's share of plain loops
    return measure_kernel(found, measurer, mr.tvm_target, selected=plan)


def _report(mr: ModelRun, bank_dir: Path, run: dict, choices: list[KernelChoice], timing: object, plan: dict,
            secs: dict, recommender: str) -> dict:
    t = totals(choices, mr.kernels, timing, mr.import_s, mr.workers_wait_s)
    measured = sum(c.measured for c in choices if c.default_s is not None)
    checked = sum(c.measured for c in choices if c.default_s is None)
    replayed = sum(sum(1 for r in c.rows if r.replayed) for c in choices)
    t.update({
        "measurements": measured, "checked_only": checked,
        "replayed_candidates": replayed,
        "defaults_measured": sum(1 for c in choices if c.default_s is not None),
        "featurize_s": round(secs.get("featurize", 0.0), 3), "predict_s": round(secs.get("predict", 0.0), 3),
    })
    # search time: replay + featurize + predict + measurement walls (the final compile is reported apart)
    t["search_s"] = round(t["search_s"] + t["featurize_s"] + t["predict_s"], 2)
    kernels = []
    for c in choices:
        j = c.to_json()
        j["measured"] = c.measured
        j["checked_only"] = c.default_s is None and c.measured > 0
        kernels.append(j)
    return {"model": mr.model.name, "spec": mr.spec, "target_key": mr.target.key, "target": mr.target.config,
            "bank": display_path(bank_dir), "recommender": recommender, **{k: run[k] for k in (
                "bank_models", "excluded_models", "top_n", "cap", "anchor_fallback", "selector", "budget",
                "per_kernel", "fallback_samples", "tune_missing", "pack_weights", "rule_space", "fast_math")},
            "kernels": kernels, "totals": t}


def kinds_text(counts: dict) -> str:
    """Measurements per source kind, short: "12 donor, 38 rule, 0 space"."""
    return ", ".join(f"{n} {kind}" for kind, n in counts.items()) or "-"


def knob_text(knobs: dict | None) -> str:
    """A rule instance's knob values, short: "channels=16 rows=2 columns=16 (fixed)"."""
    if not knobs:
        return ""
    text = " ".join(f"{k}={v}" for k, v in knobs.items() if k != "fixed")
    return f"{text} (fixed)" if knobs.get("fixed") else text


def _pct(share: float | None) -> str:
    return "?" if share is None else f"{100 * share:.1f}%"


def timing_caveat_lines(totals: dict) -> list[str]:
    """The report's caveat lines: one per model timing that got no clean run (none where all were clean)."""
    what = {"tuned": "with the chosen schedules", "untuned": "untuned"}
    return [f"- **caveat** (model timing {what.get(k, k)}): {text}"
            for k, text in (totals.get("model_timing_caveats") or {}).items()]


def format_report(report: dict) -> str:
    """The report as Markdown: the summary, where the seconds went, and one line per kernel."""
    t = report["totals"]
    ms = lambda s: f"{s * 1e3:.3f}" if s else "-"  # noqa: E731
    budget = (f"{report['per_kernel']} per kernel" if report["per_kernel"] is not None
              else f"{report['budget']} in total")
    tuned, untuned = t["model_latency_tuned_s"], t["model_latency_untuned_s"]
    lines = [
        f"# Budgeted transfer: {report['model']} on {report['target_key']}", "",
        f"- selector `{report['selector']}`, budget {budget}; bank `{report['bank']}` "
        f"({len(report['bank_models'])} models, left out: {', '.join(report['excluded_models'])})",
        f"- model latency: {ms(tuned)} ms with the chosen schedules, {ms(untuned)} ms untuned "
        f"(target `{report['target_key']}`, {report['target'].get('num-cores', '?')} threads)",
        *timing_caveat_lines(t),
        f"- {t['measurements']} candidate measurements ({kinds_text(t.get('measured_by_kind', {}))}) and "
        f"{t['defaults_measured']} defaults measured, "
        f"{t['checked_only']} candidates checked only, out of {t['replayed_candidates']} replayed; "
        f"{t['records_written']} schedules written; FLOP coverage {100 * t['flop_coverage_chosen']:.1f}% chosen, "
        f"{100 * t['flop_coverage_valid']:.1f}% with a valid candidate "
        f"({100 * t.get('flop_coverage_transferred', t['flop_coverage_valid']):.1f}% transferred, "
        f"{t.get('kernels_via_samples', 0)} kernels from their own design space, "
        f"{t.get('kernels_short_tuned', 0)} of them by a short search)",
        f"- {t.get('kernels_default', '?')} kernels run their default (unscheduled) version: "
        f"{_pct(t.get('time_share_default'))} of the kernels' measured time; "
        f"{t.get('kernels_chosen_rule', 0)} kernels chose a rule-built schedule (a loop, conv or matmul rule: "
        f"{_pct(t.get('flop_share_chosen_rule', 0.0))} of the FLOPs)", "",
        "| search s | replay | featurize | predict | build (wall) | build (CPU, summed) | run | final compile |",
        "|---|---|---|---|---|---|---|---|",
        f"| {t['search_s']} | {t['replay_s']} | {t['featurize_s']} | {t['predict_s']} | {t['build_wall_s']} | "
        f"{t['build_s']} | {t['run_s']} | {t['final_compile_and_time_s']} |", "",
        "| kernel | class | weight | cands | measured | failures | default ms | chosen ms | source |",
        "|---|---|---|---|---|---|---|---|---|"]
    for k in report["kernels"]:
        ch = k["chosen"]
        src = (f"{ch.get('kind') or 'donor'} {ch['source_model']}/{ch['source_kernel']}#{ch['rank']} "
               f"{knob_text(ch.get('knobs'))}".rstrip() if ch else "default")
        fails = ",".join(f"{s}:{n}" for s, n in k["failures"].items()) or "-"
        measured = "check" if k.get("checked_only") else str(k.get("measured", 0))
        lines.append(f"| {k['kernel'][:40]} | {k['class_key'].split(':')[0]} | {k['weight']} | {k['candidates']} | "
                     f"{measured} | {fails} | {ms(k['default_s'])} | {ms(k['latency_s'])} | {src} |")
    return "\n".join(lines) + "\n"
