"""MetaSchedule from scratch, checkpointed: what tuning the model without a bank costs to reach a latency.

All the model's kernels are tuned together (MetaSchedule's gradient task scheduler, evolutionary search,
XGBoost cost model) through the schedrec measurer, in rounds of doubling trial budgets that continue from
the round before's database (its best records seed the next search). After each round the whole model is
compiled with the database and timed: one checkpoint (tuning seconds so far, trials, latency). It stops when
the latency reaches `goal_s` or the tuning time passes `cap_s`. Checkpoints are saved as they come, so a
killed run resumes after its last finished round.
"""
from __future__ import annotations

import time
from pathlib import Path

from ..core.fileio import atomic_write_json, read_json
from ..core.stopping import native_section
from ..measure import MeasureSettings, Measurer
from ..transfer.run import ModelRun
from .summary import caveat_entry

CHECKPOINT_TIMING = MeasureSettings(repeat=5, min_repeat_ms=100)


def tune_from_scratch(mr: ModelRun, measurer: Measurer, work_dir: Path, cap_s: float, goal_s: float | None,
                      log, first_trials_per_task: int = 8, seed_db: Path | None = None,
                      population_size: int = 512) -> list[dict]:
    """Checkpoints [{"search_s", "trials", "latency_s"}] of a from-scratch MetaSchedule run (see module doc).
    With `seed_db` (a transfer's output database) the search starts from its records instead: transfer +
    refine, the chosen schedules seeding the evolutionary search's first population."""
    import shutil

    from tvm.s_tir import meta_schedule as ms

    from ..bank.tune import quiet_metaschedule
    from ..measure.ms_adapter import MeasurerBuilder, MeasurerRunner
    quiet_metaschedule()
    work_dir.mkdir(parents=True, exist_ok=True)
    if seed_db is not None and not (work_dir / "database_tuning_record.json").exists():
        for name in ("database_workload.json", "database_tuning_record.json"):
            shutil.copyfile(seed_db / name, work_dir / name)
    curve_path = work_dir / "checkpoints.json"
    saved = read_json(curve_path) if curve_path.exists() else {}
    curve = saved.get("curve", []) if saved.get("cap_s") == cap_s else []
    spent = curve[-1]["search_s"] if curve else 0.0
    trials = curve[-1]["trials"] if curve else 0
    db = ms.database.JSONDatabase(work_dir=str(work_dir))
    builder, runner = MeasurerBuilder(measurer), MeasurerRunner(measurer)
    threads = int(mr.target.config.get("num-cores", 1))
    inputs = list(zip(mr.model.input_shapes, mr.model.input_dtypes))
    round_trials = max(first_trials_per_task * len(mr.kernels), trials)
    while spent < cap_s and not (curve and goal_s and curve[-1]["latency_s"] and curve[-1]["latency_s"] <= goal_s):
        if curve and trials:  # never plan a round far past the cap: fit it to the time left
            per_trial = spent / trials
            round_trials = max(len(mr.kernels), min(round_trials, int((cap_s - spent) / per_trial)))
        ctxs = [ms.TuneContext(mod=k.mod, target=mr.tvm_target, space_generator="post-order-apply",
                               search_strategy=ms.search_strategy.EvolutionarySearch(population_size=population_size),
                               task_name=k.name,
                               num_threads=threads) for k in mr.kernels]
        t0 = time.perf_counter()
        with native_section():  # a stop signal in here ends the process; finished rounds are saved
            ms.tune_tasks(tasks=ctxs, task_weights=[float(k.weight) for k in mr.kernels], work_dir=str(work_dir),
                          max_trials_global=round_trials, num_trials_per_iter=first_trials_per_task,
                          builder=builder, runner=runner, database=db, cost_model="xgb")
        spent += time.perf_counter() - t0
        trials += round_trials
        r = measurer.measure_model(mr.model.mod, inputs, database_dir=str(work_dir), settings=CHECKPOINT_TIMING)
        curve.append({"search_s": round(spent, 1), "trials": trials, "latency_s": r.median if r.ok else None,
                      **caveat_entry(r.caveat if r.ok else None)})
        atomic_write_json(str(curve_path), {"cap_s": cap_s, "curve": curve})
        log(f"MetaSchedule from scratch: {trials} trials, {spent:.0f} s, model "
            f"{r.median * 1e3 if r.ok else float('nan'):.2f} ms (goal {goal_s * 1e3 if goal_s else float('nan'):.2f} ms)")
        round_trials *= 2
    return curve
