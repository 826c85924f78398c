"""Exhaustive-replay transfer-tuning: measure every valid candidate of every kernel, keep the fastest.

For each kernel of the new model: replay the bank's same-class schedules onto it, measure the valid ones and
the kernel's default (unscheduled) version with the output checked against the unscheduled kernel, and
choose the fastest (a transfer slower than none is not chosen). The choices become a MetaSchedule database;
the whole model is compiled with it and timed, and a JSON report is written.
"""
from __future__ import annotations

import os
import sys
import time
from collections import Counter
from dataclasses import dataclass, field, replace
from pathlib import Path

from .bank import BankError, locked, wait_while_paused
from .candidates import BankIndex, Candidate, replay_candidates
from .fileio import atomic_write_json, display_path, read_json
from .kernels import Kernel, extract_kernels
from .measure import MeasureSettings, Measurer
from .model_import import import_model
from .replay import ReplayFailure, apply_replayed
from .rows import ANCHOR, CLASS, DEFAULT, OK, CandidateRow
from .target import TargetSpec
from .transfer_data import kernel_rows, rows_to_resume, write_rows


@dataclass
class KernelChoice:
    kernel: Kernel
    match: str | None = None  # CLASS or ANCHOR: which donors the candidates came from (None: no donor)
    candidates: int = 0
    valid: int = 0
    failures: Counter = field(default_factory=Counter)
    default_s: float | None = None
    chosen: dict | None = None  # {"source_model", "source_kernel", "rank", "latency_s"} or None (default)
    chosen_sch: object = None
    chosen_costs: list = field(default_factory=list)
    candidate_s: list = field(default_factory=list)  # medians of the valid measured candidates
    replay_s: float = 0.0
    build_s: float = 0.0
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


def transfer_kernel(kernel: Kernel, index: BankIndex, measurer: Measurer, target: object, top_n: int,
                    exclude_models: tuple[str, ...], cap: int | None, anchor_fallback: bool = True) -> KernelChoice:
    """Replay, check and measure every candidate of one kernel; choose the fastest, default included.

    Donors are the same-class kernels of the bank; where none replays, and `anchor_fallback` is set, the
    same anchor op with another epilogue (anchor-trace application)."""
    choice = KernelChoice(kernel)
    t0 = time.perf_counter()
    cands: list[Candidate] = []
    for match in (CLASS, ANCHOR) if anchor_fallback else (CLASS,):
        sources = index.sources_for(kernel, top_n=top_n, exclude_models=exclude_models, cap=cap, match=match)
        if sources:
            cands += replay_candidates(kernel, sources, target, isolated=measurer)
            choice.match = match
        if any(c.status == OK for c in cands):
            break
    choice.replay_s = time.perf_counter() - t0
    choice.candidates = len(cands)
    valid = [c for c in cands if c.status == OK]
    results = measurer.measure([kernel.mod] + [c.replayed.mod for c in valid], reference=kernel.mod)
    choice.build_s = sum(r.build_s for r in results)
    choice.run_s = sum(r.run_s for r in results)
    default, measured = results[0], results[1:]
    choice.default_s = default.median if default.ok else None
    choice.rows.append(_row(kernel, None, default))
    by_cand = dict(zip(map(id, valid), measured))
    best = None
    for c in cands:
        r = by_cand.get(id(c))
        choice.rows.append(_row(kernel, c, r))
        status = r.status if r is not None else c.status
        if status != OK:
            choice.failures[status] += 1
            continue
        choice.valid += 1
        choice.candidate_s.append(r.median)
        if best is None or r.median < best[1].median:
            best = (c, r)
    if best is not None and (choice.default_s is None or best[1].median < choice.default_s):
        c, r = best
        choice.chosen = {"source_model": c.source.model, "source_kernel": c.source.kernel,
                         "rank": c.source.rank, "match": c.source.match, "latency_s": r.median}
        # replayed in a worker: the schedule is rebuilt here from its trace (it replayed there, so it will here)
        choice.chosen_sch = (c.replayed.sch if c.replayed.sch is not None
                             else apply_replayed(c.replayed.trace_json, kernel.mod, target).sch)
        choice.chosen_costs = r.costs
    choice.wall_s = time.perf_counter() - t0
    choice.rows[0] = replace(choice.rows[0], seconds=choice.seconds())
    return choice


def choice_from_rows(kernel: Kernel, rows: list[CandidateRow], target: object) -> KernelChoice:
    """A kernel's choice rebuilt from its recorded rows (a resumed run measures nothing again); the
    chosen schedule is re-applied from its replayed trace."""
    choice = KernelChoice(kernel)
    default = next(r for r in rows if r.is_default)
    choice.rows = rows
    choice.default_s = default.latency_s
    secs = default.seconds or {}
    choice.replay_s, choice.build_s, choice.run_s, choice.wall_s = (
        float(secs.get(k, 0.0)) for k in ("replay", "build", "run", "total"))
    cands = [r for r in rows if not r.is_default]
    choice.candidates = len(cands)
    choice.match = ANCHOR if any(r.match == ANCHOR for r in cands) else CLASS if cands else None
    ok = [r for r in cands if r.status == OK and r.latency_s]
    choice.failures.update(r.status for r in cands if not (r.status == OK and r.latency_s))
    choice.valid, choice.candidate_s = len(ok), [r.latency_s for r in ok]
    best = min(ok, key=lambda r: r.latency_s, default=None)
    if best is not None and (choice.default_s is None or best.latency_s < choice.default_s):
        try:
            choice.chosen_sch = apply_replayed(best.trace, kernel.mod, target).sch
        except ReplayFailure as err:
            print(f"warning: {kernel.name}: the recorded choice no longer replays ({err}); keeping the default",
                  file=sys.stderr)
            return choice
        choice.chosen = {"source_model": best.source_model, "source_kernel": best.source_kernel,
                         "rank": best.source_rank, "match": best.match, "latency_s": best.latency_s}
        choice.chosen_costs = list(best.costs)
    return choice


def _row(kernel: Kernel, cand: Candidate | None, result: object | None) -> CandidateRow:
    """One measurement of the transfer matrix: the default schedule (`cand` None) or a candidate, whose
    `result` is None when it failed before measurement. The target model and the kernel's tuned latency are
    not known here: `transfer_data.kernel_rows` fills them in."""
    target = {"target_model": "", "target_kernel": kernel.name, "class_key": kernel.class_key,
              "weight": kernel.weight, "flops": kernel.flops,
              "target_args": tuple((tuple(s), d) for s, d in kernel.args)}
    if result is None:  # failed before measurement (replay)
        outcome = {"status": cand.status, "error": cand.error[:300], "costs": (), "latency_s": None}
    else:
        outcome = {"status": result.status, "error": (result.error or "")[:300], "costs": tuple(result.costs),
                   "latency_s": result.median if result.ok else None}
    if cand is None:
        return CandidateRow(**target, match=DEFAULT, **outcome)
    s = cand.source
    return CandidateRow(**target, match=s.match, source_model=s.model, source_kernel=s.kernel,
                        source_class_key=s.class_key, source_rank=s.rank, source_latency_s=s.latency_s,
                        trace=cand.replayed.trace_json if cand.replayed is not None else None, **outcome)


def write_database(choices: list[KernelChoice], target: object, db_dir: Path) -> int:
    """A MetaSchedule JSON database with one record per kernel whose transferred schedule was chosen.
    Written into a fresh folder that then replaces `db_dir` (an old database is never edited in place)."""
    import shutil
    import tempfile
    db_dir.parent.mkdir(parents=True, exist_ok=True)
    fresh = Path(tempfile.mkdtemp(prefix=".tmp-db-", dir=db_dir.parent))
    try:
        n = _fill_database(choices, target, fresh)
        os.chmod(fresh, 0o755)
        old = db_dir.with_name(f".old-{db_dir.name}")
        shutil.rmtree(old, ignore_errors=True)
        if db_dir.exists():
            os.replace(db_dir, old)
        os.replace(fresh, db_dir)
        shutil.rmtree(old, ignore_errors=True)
    except BaseException:
        shutil.rmtree(fresh, ignore_errors=True)
        raise
    return n


def _fill_database(choices: list[KernelChoice], target: object, db_dir: Path) -> int:
    from tvm.s_tir import meta_schedule as ms
    db = ms.database.JSONDatabase(work_dir=str(db_dir))
    n = 0
    for c in choices:
        if c.chosen_sch is None:
            continue
        workload = db.commit_workload(c.kernel.mod)
        db.commit_tuning_record(ms.database.TuningRecord(
            c.chosen_sch.trace, workload, [float(x) for x in c.chosen_costs], target,
            ms.arg_info.ArgInfo.from_prim_func(c.kernel.mod["main"])))
        n += 1
    return n


def exhaustive_replay(spec: str, target: TargetSpec, bank_dir: Path, out_dir: Path, top_n: int = 1,
                      exclude_models: tuple[str, ...] = (), cap: int | None = None,
                      settings: MeasureSettings | None = None, anchor_fallback: bool = True,
                      remeasure: tuple[str, ...] = ()) -> dict:
    """Transfer-tune a model by exhaustive replay of the bank; returns (and writes) the report. A resumed
    run measures again the kernels that have a candidate whose status is in `remeasure`."""
    from tqdm import tqdm

    from .tvm_setup import load_tensor_intrinsics
    load_tensor_intrinsics()
    tt = target.tvm()
    t_start = time.perf_counter()
    model = import_model(spec, tt)
    kernels = extract_kernels(model, tt)
    index = BankIndex(bank_dir)
    if not index.models:
        raise BankError(f"the bank at {bank_dir} holds no model")
    exclude = tuple(sorted(set(exclude_models) | {model.name}))  # never the model's own records
    for w in index.warnings(target.key):
        print(w, file=sys.stderr)
    import_s = time.perf_counter() - t_start
    run = {"spec": spec, "model": model.name, "target_key": target.key, "bank_models": index.models,
           "excluded_models": list(exclude), "top_n": top_n, "cap": cap, "anchor_fallback": anchor_fallback}
    choices = []
    with locked(out_dir, f"replay {spec}"):
        _check_run(out_dir / "run.json", run)
        rows_path = out_dir / "candidates.jsonl.gz"
        rows = rows_to_resume(rows_path, remeasure, lambda msg: print(msg, file=sys.stderr))
        done: dict[str, list[CandidateRow]] = {}
        for r in rows:
            done.setdefault(r.target_kernel, []).append(r)
        with Measurer(target.config, settings) as measurer:
            for k in tqdm(kernels, desc=f"replay {model.name}", unit="kernel", file=sys.stderr):
                if k.name in done:
                    choices.append(choice_from_rows(k, done[k.name], tt))
                    continue
                wait_while_paused(bank_dir, lambda msg: print(msg, file=sys.stderr))
                choice = transfer_kernel(k, index, measurer, tt, top_n, exclude, cap, anchor_fallback)
                choices.append(choice)
                rows += kernel_rows(choice, model.name)
                write_rows(rows_path, rows)
            n_records = write_database(choices, tt, out_dir / "database")
            inputs = list(zip(model.input_shapes, model.input_dtypes))
            t0 = time.perf_counter()
            tuned = measurer.measure_model(model.mod, inputs, database_dir=str(out_dir / "database"))
            compile_s = time.perf_counter() - t0
            untuned = measurer.measure_model(model.mod, inputs)
    flops = sum(k.total_flops for k in kernels)
    covered = sum(c.kernel.total_flops for c in choices if c.chosen)
    transferable = sum(c.kernel.total_flops for c in choices if c.valid)
    by_class = sum(c.kernel.total_flops for c in choices if c.valid and c.match == CLASS)
    report = {
        "model": model.name, "spec": spec, "target_key": target.key, "bank": display_path(bank_dir),
        "bank_models": index.models, "excluded_models": list(exclude), "top_n": top_n, "cap": cap,
        "anchor_fallback": anchor_fallback,
        "kernels": [c.to_json() for c in choices],
        "totals": {
            "kernels": len(choices), "candidates": sum(c.candidates for c in choices),
            "valid": sum(c.valid for c in choices), "records_written": n_records,
            "flop_coverage_class_only": by_class / flops if flops else 0.0,
            "flop_coverage_valid": transferable / flops if flops else 0.0,
            "kernels_via_anchor": sum(1 for c in choices if c.valid and c.match == ANCHOR),
            "flop_coverage_chosen": covered / flops if flops else 0.0,
            "import_s": round(import_s, 2),
            "search_s": round(sum(c.wall_s for c in choices), 2),
            "replay_s": round(sum(c.replay_s for c in choices), 2),
            "build_s": round(sum(c.build_s for c in choices), 2),
            "run_s": round(sum(c.run_s for c in choices), 2),
            "final_compile_and_time_s": round(compile_s, 2),
            "model_latency_tuned_s": tuned.median if tuned.ok else None,
            "model_latency_untuned_s": untuned.median if untuned.ok else None,
            "errors": {k: r.error[:300] for k, r in (("tuned", tuned), ("untuned", untuned)) if not r.ok},
        },
    }
    atomic_write_json(str(out_dir / "report.json"), report)
    return report


def _check_run(path: Path, run: dict) -> None:
    """A resumed run must have the settings of the run it continues; a fresh folder records them."""
    if path.exists():
        previous = read_json(path, hint="remove the folder or use another --out", error=BankError)
        if not isinstance(previous, dict):
            raise BankError(f"corrupt {path}: not a JSON object; remove the folder or use another --out")
        diff = sorted(k for k in run if previous.get(k) != run[k])
        if diff:
            raise BankError(f"{path.parent} holds a replay run with other settings ({', '.join(diff)}); "
                            f"use another --out or remove that folder")
    else:
        atomic_write_json(str(path), run)
