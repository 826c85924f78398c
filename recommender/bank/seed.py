"""Seeded bank tuning: MetaSchedule's evolutionary search of each bank kernel, started from the kernel's rule
instances and its best records.

A bank model's kernels were tuned with 64 trials each; on the CPUs here the rules' register tiles beat those records
on most kernels, so a transfer mostly passes on schedules search has not improved. Seeding commits every rule
instance the target's rule-space matrix measured for the kernel (`models/<key>/space/<model>.jsonl.gz`: the same
measurer, the same CPU) into the kernel's database as a tuning record with its measured costs, then runs more trials
of the search. The evolutionary search draws part of its first population from the database's best records and
mutates their sampled choices (the rule instances carry theirs as `SamplePerfectTile` / `SampleCategorical`
decisions), so it starts where the rules are.

The extra trials are planned before any search: `extra_trials` per tuned kernel on average, split over the model's
kernels by their share of its time (weight x best latency known so far; at least `MIN_TRIALS` each), and written
into the model's meta (`seeded`). Records are only added (a bank folder is append-only); each kernel's step is
filed as it finishes, so a stopped run resumes with the next kernel and measures nothing twice.
"""
from __future__ import annotations

import math
import sys
import time
from pathlib import Path

from ..core.errors import BankError
from ..core.fileio import display_path
from ..core.row_files import read_rows
from ..core.rows import RULE, CandidateRow
from ..frontend.kernels import Kernel
from ..measure import MeasureSettings, Measurer
from ..measure.host_lock import exclusive
from ..target.spec import TargetSpec
from .add_run import row_record
from .index import refresh_after_add
from .store import pack, wait_while_paused, write_meta
from .tune import OpenModel, kernel_records, opened_model, record_seconds, search_kernel

MIN_TRIALS = 8  # a kernel's smallest share of the extra trials: one short round of the search


def plan_trials(times: dict[str, float], extra_trials: int, floor: int = MIN_TRIALS) -> dict[str, int]:
    """`extra_trials` x len(times) trials split by each kernel's share of `times` (weight x latency), at least
    `floor` each; the sum is exact (rounding leftovers go to the largest shares)."""
    if not times:
        return {}
    total = extra_trials * len(times)
    floor = min(floor, total // len(times))
    spare = total - floor * len(times)
    weight = sum(times.values())
    ideal = {k: spare * (t / weight if weight > 0 else 1 / len(times)) for k, t in times.items()}
    out = {k: floor + math.floor(v) for k, v in ideal.items()}
    left = total - sum(out.values())
    for k in sorted(ideal, key=lambda k: (-(ideal[k] - math.floor(ideal[k])), -times[k], k))[:left]:
        out[k] += 1
    return out


def rule_rows(space_dir: Path, model: str) -> dict[str, list[CandidateRow]]:
    """The measured, output-checked rule instances of each kernel of `model` in a rule-space matrix."""
    path = space_dir / f"{model}.jsonl.gz"
    if not path.exists():
        raise BankError(f"no rule-space matrix for {model} in {display_path(space_dir)}: seeding starts from the "
                        f"rule instances it measured; build it with `schedrec matrix --rule-space 64 --out "
                        f"{display_path(space_dir)}` first")
    out: dict[str, list[CandidateRow]] = {}
    for r in read_rows(path):
        if r.target_model == model and r.source_kind == RULE and r.ok and r.trace:
            out.setdefault(r.target_kernel, []).append(r)
    return out


def commit_rule_instances(m: OpenModel, kernel: Kernel, rows: list[CandidateRow],
                          target: dict) -> tuple[int, int, float | None]:
    """Commit each rule row's trace (measured on this very kernel) with its measured costs, as `bank add-run`
    files a run's candidates; (committed, refused as malformed, best latency committed)."""
    from tvm.s_tir import meta_schedule as ms
    workload = m.db.commit_workload(kernel.mod)
    done = failed = 0
    best = None
    for r in rows:
        try:
            record = row_record(r, target)
        except BankError:
            failed += 1
            continue
        m.db.commit_tuning_record(ms.database.TuningRecord.from_json(record, workload))
        done += 1
        seconds = record_seconds(record[1])
        best = seconds if best is None else min(best, seconds)
    return done, failed, best


def _new_plan(m: OpenModel, rules: dict[str, list[CandidateRow]], extra_trials: int, space_dir: Path) -> dict:
    times = {}
    for k in m.todo:
        entry = m.meta["kernels"][k.name]
        known = [x for x in [entry.get("best_s")] + [r.latency_s for r in rules.get(k.name, [])] if x]
        times[k.name] = float(entry.get("weight", 1)) * (min(known) if known else 0.0)
    trials = plan_trials(times, extra_trials)
    return {"extra_trials": extra_trials, "space": display_path(space_dir),
            "planned": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "kernels": {k.name: {"trials": trials[k.name], "status": "pending"} for k in m.todo}}


def seed_model(spec: str, target: TargetSpec, bank_dir: Path, extra_trials: int = 128, space_dir: Path | None = None,
               settings: MeasureSettings | None = None, trials_per_iter: int = 32, population_size: int = 256,
               min_share: float = 0.01, log=lambda msg: print(msg, file=sys.stderr)) -> dict:
    """Seed and search the bank model `spec`'s tuned kernels (see the module's docstring; `min_share`: the
    model's own `min_flop_share`, so that no kernel changes its tuned mark); returns the meta's `seeded` section:
    per kernel its trials, rule records, and the best latency before, of the rules and after."""
    from tqdm import tqdm
    if extra_trials < 1:
        raise BankError(f"--extra-trials must be at least 1, got {extra_trials}")
    settings = settings or MeasureSettings()
    space_dir = Path(space_dir) if space_dir is not None else Path(bank_dir).parent / "space"
    with opened_model(spec, target, bank_dir, 1, min_share, settings, trials_per_iter, population_size,
                      record_settings=False, existing_only=True) as m:
        m.todo = [k for k in m.todo if m.meta["kernels"][k.name].get("status") == "done"]
        rules = rule_rows(space_dir, m.name)
        plan = m.meta.get("seeded")
        if plan is None or plan.get("extra_trials") != extra_trials:
            if plan is not None and any(e["status"] != "pending" for e in plan["kernels"].values()):
                raise BankError(f"{m.name} was seeded with --extra-trials {plan['extra_trials']}; rerun with that "
                                f"value to resume it")
            plan = m.meta["seeded"] = _new_plan(m, rules, extra_trials, space_dir)
            plan.update(measurer=settings.to_json(), search={"strategy": "evolutionary", "cost_model": "xgb",
                        "population_size": population_size, "trials_per_iter": trials_per_iter})
            write_meta(m.folder, m.meta)
        log(f"{m.name}: {sum(e['trials'] for e in plan['kernels'].values())} trials planned over "
            f"{len(plan['kernels'])} kernels (" + ", ".join(f"{k[:24]} {e['trials']}" for k, e in
                                                           plan["kernels"].items()) + ")")
        t_model = time.time()
        with Measurer(target.config, settings) as measurer:
            bar = tqdm(m.todo, desc=f"seed {m.name}", unit="kernel", file=sys.stderr)
            measured = False
            for k in bar:
                entry = plan["kernels"].get(k.name)
                if entry is None or entry["status"] == "done":
                    continue
                measured = True
                wait_while_paused(bank_dir, log)
                _seed_kernel(m, k, entry, rules.get(k.name, []), target.config)
                n, _, _ = kernel_records(m.db, k.mod)
                remaining = entry["trials"] - (n - entry["records_before"] - entry["rule_records"])
                bar.set_postfix_str(f"{k.name[:40]} {remaining} trials")
                if remaining > 0:
                    t0 = time.time()
                    with exclusive(f"bank seed {spec}: {k.name}"):
                        search_kernel(k, m.tt, measurer, m.work, m.db, remaining, trials_per_iter, population_size)
                    entry["seconds"] = round(entry.get("seconds", 0.0) + time.time() - t0, 1)
                _, _, best = kernel_records(m.db, k.mod)
                entry.update(status="done", best_after_s=best)
                m.file_kernel(k)  # records, then the meta with this entry
            bar.close()
        if measured:
            plan["seconds"] = round(plan.get("seconds", 0.0) + time.time() - t_model, 1)
            write_meta(m.folder, m.meta)
    refresh_after_add(bank_dir, log=log)
    return plan


def _seed_kernel(m: OpenModel, kernel: Kernel, entry: dict, rows: list[CandidateRow], target: dict) -> None:
    """Commit the kernel's rule instances once: the count before is filed first, so a run stopped between the
    commit and the meta's write finds the records it packed and does not commit them twice."""
    if "rule_records" in entry:
        return
    if "records_before" not in entry:
        n0, _, best0 = kernel_records(m.db, kernel.mod)
        entry.update(records_before=n0, best_before_s=best0)
        write_meta(m.folder, m.meta)
    n_now, _, _ = kernel_records(m.db, kernel.mod)
    if n_now > entry["records_before"]:  # packed by the stopped run: already committed
        entry.update(rule_records=n_now - entry["records_before"], rule_failed=None,
                     best_rule_s=min((record_seconds(list(r.costs or [r.latency_s])) for r in rows),
                                     default=None))
    else:
        done, failed, best = commit_rule_instances(m, kernel, rows, target)
        entry.update(rule_records=done, rule_failed=failed, best_rule_s=best)
        pack(m.work, m.folder)
    write_meta(m.folder, m.meta)
