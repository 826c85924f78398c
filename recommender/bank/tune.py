"""Tuning models into the bank with MetaSchedule's evolutionary search, measured by the schedrec measurer."""
from __future__ import annotations

import logging
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from ..core.errors import BankError
from ..core.stopping import native_section
from ..frontend.kernels import Kernel, extract_kernels, flop_shares
from ..frontend.model_import import import_model
from ..measure import MeasureSettings, Measurer
from ..measure.host_lock import exclusive
from ..target.spec import TargetSpec
from .index import refresh_after_add
from .store import META_FILE, locked, pack, read_meta, unpack, wait_while_paused, write_meta


def quiet_metaschedule() -> None:
    """MetaSchedule logs every iteration to the console; keep its logs in the work dir only."""
    for name in ("tvm.s_tir.meta_schedule", "tvm.meta_schedule"):
        logging.getLogger(name).setLevel(logging.WARNING)


def selected_kernels(kernels: list[Kernel], min_share: float) -> list[tuple[Kernel, float]]:
    """Kernels holding at least `min_share` of the model's FLOPs, heaviest first."""
    return [(k, s) for k, s in zip(kernels, flop_shares(kernels)) if s >= min_share]


def _new_meta(spec: str, name: str, target: TargetSpec, kernels: list[Kernel], min_share: float,
              trials_per_task: int) -> dict:
    shares = flop_shares(kernels)
    return {"model": name, "spec": spec, "target": target.config, "target_key": target.key,
            "min_flop_share": min_share, "trials_per_task": trials_per_task,
            "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "kernels": {k.name: dict(k.to_json(), flop_share=s, tuned=s >= min_share, status="pending",
                                     trials=0, valid=0, best_s=None, seconds=0.0)
                        for k, s in zip(kernels, shares)}}


def search_kernel(kernel: Kernel, target: object, measurer: Measurer, work_dir: str, database: object,
                  trials: int, trials_per_iter: int = 32, population_size: int = 256) -> None:
    """`trials` measured trials of MetaSchedule's evolutionary search (XGBoost cost model) on one kernel,
    through `measurer`, into `database` (its best records seed the search). A stop signal inside ends the
    process (see stopping.py): what the database holds so far is kept."""
    from tvm.s_tir import meta_schedule as ms

    from ..measure.ms_adapter import MeasurerBuilder, MeasurerRunner
    ctx = ms.TuneContext(mod=kernel.mod, target=target, space_generator="post-order-apply",
                         search_strategy=ms.search_strategy.EvolutionarySearch(population_size=population_size),
                         task_name=kernel.name, num_threads=int(measurer.target_config.get("num-cores", 1)))
    with native_section():
        ms.tune_tasks(tasks=[ctx], task_weights=[1.0], work_dir=work_dir, max_trials_global=trials,
                      num_trials_per_iter=min(trials_per_iter, trials), builder=MeasurerBuilder(measurer),
                      runner=MeasurerRunner(measurer), database=database, cost_model="xgb")


def kernel_records(db: object, mod: object) -> tuple[int, int, float | None]:
    """(records, valid records, best median seconds) of one kernel's workload in a MetaSchedule database."""
    import tvm_ffi
    if not db.has_workload(mod):
        return 0, 0, None
    workload = db.commit_workload(mod)
    n = valid = 0
    best = None
    for rec in db.get_all_tuning_records():
        if not tvm_ffi.structural_equal(rec.workload.mod, workload.mod):
            continue
        n += 1
        secs = [float(x) for x in (rec.run_secs or [])]
        if secs and max(secs) < 1e9:
            valid += 1
            med = record_seconds(secs)
            best = med if best is None else min(best, med)
    return n, valid, best


def record_seconds(run_secs: list[float]) -> float:
    """A tuning record's latency as the bank reports it: the median of its run seconds (the upper one of two)."""
    return sorted(run_secs)[len(run_secs) // 2]


@dataclass
class OpenModel:
    """One model's bank folder opened for tuning, under its lock: its meta (updated in place), its MetaSchedule
    work dir and database, and the kernels to tune, heaviest first."""

    spec: str
    name: str
    folder: Path
    meta: dict
    work: str
    db: object  # ms.database.JSONDatabase over `work`
    todo: list[Kernel]
    tt: object  # the TVM target

    def file_kernel(self, kernel: Kernel) -> None:
        """Mark `kernel` done with the records the database holds and save the folder (records, then meta):
        what a stopped run keeps, and where its rerun resumes."""
        n, valid, best = kernel_records(self.db, kernel.mod)
        self.meta["kernels"][kernel.name].update(status="done", trials=n, valid=valid, best_s=best)
        self.meta["updated"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        pack(self.work, self.folder)
        write_meta(self.folder, self.meta)

    def finish(self, last_run: dict | None, log) -> None:
        """Write the meta once more with the run's figures (`last_run`, None where nothing was measured: a
        rerun of a finished model keeps the figures of the run that measured)."""
        if last_run is not None:
            self.meta["last_run"] = last_run
        if last_run is not None or not (self.folder / META_FILE).exists():
            write_meta(self.folder, self.meta)
        log(f"{self.name}: {len(self.todo)} kernels tuned, "
            f"{sum(self.meta['kernels'][k.name]['trials'] for k in self.todo)} trials in the bank")


@contextmanager
def opened_model(spec: str, target: TargetSpec, bank_dir: Path, trials_per_task: int, min_share: float,
                 settings: MeasureSettings, trials_per_iter: int, population_size: int,
                 record_settings: bool = True, existing_only: bool = False) -> Iterator[OpenModel]:
    """Import the model, lock its bank folder, bring its meta up to this run (kernels newly above
    `min_share` become pending; with `record_settings`, this run's measurer and search settings) and restore its
    work dir from the bank. With `existing_only`, a model the bank does not hold is refused."""
    from tvm.s_tir import meta_schedule as ms

    from ..core.tvm_setup import load_tensor_intrinsics

    if trials_per_task < 1:
        raise BankError(f"--trials-per-task must be at least 1, got {trials_per_task}")
    quiet_metaschedule()
    load_tensor_intrinsics()
    tt = target.tvm()
    model = import_model(spec, tt)
    kernels = extract_kernels(model, tt)
    folder = bank_dir / model.name
    with locked(folder, f"bank tune {spec}"):
        if (folder / META_FILE).exists():
            meta = read_meta(folder)
            if meta["target_key"] != target.key:
                raise BankError(f"{folder} holds records for {meta['target_key']}, not {target.key}; "
                                f"use the bank folder of this target")
            meta["trials_per_task"] = max(int(meta.get("trials_per_task", 0)), trials_per_task)
            for k, s in zip(kernels, flop_shares(kernels)):
                if k.name in meta["kernels"] and s >= min_share and not meta["kernels"][k.name]["tuned"]:
                    meta["kernels"][k.name].update(tuned=True, status="pending")
        elif existing_only:
            raise BankError(f"{model.name} is not in {bank_dir}: tune it first with `schedrec bank tune --models "
                            f"{spec}`")
        else:
            meta = _new_meta(spec, model.name, target, kernels, min_share, trials_per_task)
        if record_settings or "measurer" not in meta:
            meta["measurer"] = settings.to_json()
            meta["search"] = {"strategy": "evolutionary", "population_size": population_size,
                              "trials_per_iter": trials_per_iter, "cost_model": "xgb"}
        work = str(folder / ".work")
        unpack(folder, work)
        yield OpenModel(spec, model.name, folder, meta, work, ms.database.JSONDatabase(work_dir=work),
                        [k for k, _ in selected_kernels(kernels, min_share)], tt)


def tune_model(spec: str, target: TargetSpec, bank_dir: Path, trials_per_task: int, min_share: float = 0.01,
               settings: MeasureSettings | None = None, trials_per_iter: int = 32, population_size: int = 256,
               log=lambda msg: print(msg, file=sys.stderr)) -> dict:
    """Tune the model's kernels that hold >= min_share of its FLOPs into `bank_dir/<model>/`. Resumable.
    (`tune_cluster.tune_on_cluster` tunes them on a Dask cluster into the same files.)"""
    from tqdm import tqdm

    settings = settings or MeasureSettings()
    with opened_model(spec, target, bank_dir, trials_per_task, min_share, settings, trials_per_iter,
                      population_size) as m:
        t_model, measured = time.time(), False
        with Measurer(target.config, settings) as measurer:
            bar = tqdm(m.todo, desc=m.name, unit="kernel", file=sys.stderr)
            for k in bar:
                wait_while_paused(bank_dir, log)
                entry = m.meta["kernels"][k.name]
                n, _, _ = kernel_records(m.db, k.mod)
                remaining = trials_per_task - n
                bar.set_postfix_str(f"{k.name[:40]} {n}/{trials_per_task} trials")
                if remaining > 0:
                    t0, measured = time.time(), True
                    with exclusive(f"bank tune {spec}: {k.name}"):  # the search too: its cost model is CPU-bound
                        search_kernel(k, m.tt, measurer, m.work, m.db, remaining, trials_per_iter, population_size)
                    entry["seconds"] = round(entry.get("seconds", 0.0) + time.time() - t0, 1)
                if remaining > 0 or entry.get("status") != "done":
                    m.file_kernel(k)
            bar.close()
            last_run = ({"seconds": round(time.time() - t_model, 1), **measurer.describe()["stats"]} if measured
                        else None)
        m.finish(last_run, log)
    refresh_after_add(bank_dir, log=log)  # every add to a bank leaves its index fresh
    return m.meta
