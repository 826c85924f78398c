"""Bank tuning on a Dask cluster (`schedrec bank tune --cluster ADDRESS`): one task per (model, kernel), the
records written by the client alone.

The client opens every model's bank folder as a local `bank tune` does (`tune.opened_model`: its lock, its
meta, its work dir restored from the bank) and counts each kernel's records there: a kernel that has its
trials is not sent, so a rerun after a killed client or worker tunes only the kernels it had not written. A
task carries the kernel's TIR module and the records the bank holds of it (the search starts from them, as a
local rerun's does) and the trials still to measure; the worker runs MetaSchedule's search in a scratch
database under its host's measurement lock and sends back only the records the search added, as the
database's own JSON. The client commits them to the model's database and packs the folder after each kernel,
exactly as a local run does: the same files, meta and index. Workers need no bank and no model file. A
database's workloads follow the order in which kernels finished, not the local run's order (readers match a
workload to its kernel by class and shapes).
"""
from __future__ import annotations

import atexit
import dataclasses
import json
import os
import sys
import tempfile
import time
from collections import Counter
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

from ..frontend.kernels import Kernel
from ..measure import MeasureSettings, Measurer
from ..measure.cluster import ClusterAddress, check_workers, connect, require_key, run_tasks, worker_name
from ..measure.host_lock import exclusive
from ..measure.measurer import parse_runner
from ..target.spec import TargetSpec
from .index import refresh_after_add
from .store import RECORD_FILE, wait_while_paused
from .tune import OpenModel, kernel_records, opened_model, quiet_metaschedule, search_kernel

# submitted tasks per worker: one running and one queued keeps a worker busy, and leaves a stopped client
# little that was tuned and not written
QUEUED_PER_WORKER = 2


@dataclass(frozen=True)
class TuneJob:
    """One kernel to tune on a worker: plain data, so that it pickles to any host."""

    model: str
    kernel: Kernel  # without its module: `mod` carries it
    mod: str  # tvm.ir.save_json of the kernel's IRModule
    seed: tuple  # the records the bank holds of the kernel, as MetaSchedule's JSON (TuningRecord.as_json)
    trials: int  # still to measure
    trials_per_iter: int
    population_size: int
    target: dict
    target_key: str
    settings: dict  # MeasureSettings.to_json()


# -- on the worker ---------------------------------------------------------------------------------
_state: dict = {}  # this worker process's measurer, kept between tasks (its worker processes cost seconds)


@atexit.register
def _close_measurer() -> None:
    measurer = _state.pop("measurer", None)
    if measurer is not None:
        measurer.close()


def _worker_measurer(job: TuneJob) -> Measurer:
    key = (json.dumps(job.target, sort_keys=True), json.dumps(job.settings, sort_keys=True))
    if _state.get("key") != key:
        from ..core.tvm_setup import load_tensor_intrinsics
        _close_measurer()
        load_tensor_intrinsics()
        quiet_metaschedule()
        _state.update(key=key, measurer=Measurer(job.target, MeasureSettings(**job.settings)),
                      tt=TargetSpec(job.target).tvm())
    return _state["measurer"]


def run_tune_job(job: TuneJob) -> dict:
    """Tune one kernel on this worker: {"records": the records the search added (JSON), "seconds" (the
    search), "stats" (the measurer's counts of this task), "worker", "wall_s"}."""
    import tvm
    from tvm.s_tir import meta_schedule as ms
    if parse_runner(job.settings.get("runner", "local")) is None:  # timed here: this host must be the target
        require_key(job.target_key)
    t0 = time.perf_counter()
    # the whole task holds the host's measurement lock, as a matrix task does: a local tune holds it over the
    # search (its cost model is CPU-bound), and another worker's start beside a timing would spoil the timing
    with exclusive(f"bank tune {job.model}: {job.kernel.name} for a Dask task"), \
            tempfile.TemporaryDirectory(prefix="schedrec-tune-") as work:
        measurer = _worker_measurer(job)
        before = dict(measurer.stats)
        kernel = dataclasses.replace(job.kernel, mod=tvm.ir.load_json(job.mod))
        db = ms.database.JSONDatabase(work_dir=work)
        workload = db.commit_workload(kernel.mod)
        for record in job.seed:
            db.commit_tuning_record(ms.database.TuningRecord.from_json(record, workload))
        t1 = time.perf_counter()
        search_kernel(kernel, _state["tt"], measurer, work, db, job.trials, job.trials_per_iter, job.population_size)
        seconds = time.perf_counter() - t1
        with open(os.path.join(work, RECORD_FILE), encoding="utf-8") as f:  # one record a line, seeds first
            lines = [line for line in f if line.strip()]
        stats = {k: v - before.get(k, 0) for k, v in measurer.stats.items()}
    return {"records": [json.loads(line)[1] for line in lines[len(job.seed):]], "seconds": seconds,
            "stats": stats, "worker": worker_name(), "wall_s": time.perf_counter() - t0}


# -- on the client ---------------------------------------------------------------------------------
def _seed(db: object, mod: object) -> tuple:
    """The records `db` holds of kernel `mod`, as plain JSON (what its database file holds)."""
    import tvm_ffi

    from featurize.trace_json import to_py
    if not db.has_workload(mod):
        return ()
    workload = db.commit_workload(mod)
    return tuple(to_py(r.as_json()) for r in db.get_all_tuning_records()
                 if tvm_ffi.structural_equal(r.workload.mod, workload.mod))


def _jobs(m: OpenModel, target: TargetSpec, settings: MeasureSettings, trials_per_task: int, trials_per_iter: int,
          population_size: int) -> list[TuneJob]:
    """The tasks of one opened model: its kernels with fewer than `trials_per_task` records. A finished kernel
    whose meta says otherwise is filed here, as a local run files it."""
    import tvm
    jobs = []
    for k in m.todo:
        n, _, _ = kernel_records(m.db, k.mod)
        if n >= trials_per_task:
            if m.meta["kernels"][k.name].get("status") != "done":
                m.file_kernel(k)
            continue
        jobs.append(TuneJob(m.name, dataclasses.replace(k, mod=None), tvm.ir.save_json(k.mod), _seed(m.db, k.mod),
                            trials_per_task - n, trials_per_iter, population_size, target.config, target.key,
                            settings.to_json()))
    return jobs


def tune_on_cluster(address: ClusterAddress, specs: list[str], target: TargetSpec, bank_dir: Path,
                    trials_per_task: int, min_share: float = 0.01, settings: MeasureSettings | None = None,
                    trials_per_iter: int = 32, population_size: int = 256,
                    log=lambda msg: print(msg, file=sys.stderr)) -> list[dict]:
    """`tune.tune_model` for every model of `specs`, their kernels' searches spread over the cluster's workers
    (all models' kernels in one queue); returns the models' metas. No cluster is started or reached when no
    kernel lacks trials."""
    from tqdm import tqdm
    from tvm.s_tir import meta_schedule as ms
    settings = settings or MeasureSettings()
    with ExitStack() as stack:
        models = [stack.enter_context(opened_model(spec, target, bank_dir, trials_per_task, min_share, settings,
                                                   trials_per_iter, population_size)) for spec in specs]
        by_name = {m.name: m for m in models}
        jobs = [job for m in models for job in _jobs(m, target, settings, trials_per_task, trials_per_iter,
                                                      population_size)]
        last_runs: dict[str, dict] = {}
        if jobs:
            left = Counter(job.model for job in jobs)
            with connect(address) as client:
                timed_here = parse_runner(settings.runner) is None
                workers = check_workers(client, target.key) if timed_here else client.scheduler_info()["workers"]
                log(f"cluster {address.text}: {len(workers)} workers; {len(jobs)} kernels of {len(left)} models "
                    f"to tune")
                t0, worker_s = time.time(), 0.0
                results = run_tasks(client, run_tune_job, jobs, window=QUEUED_PER_WORKER * len(workers),
                                    before_submit=lambda: wait_while_paused(bank_dir, log))
                for job, result in tqdm(results, total=len(jobs), desc="bank tune (cluster)", unit="kernel",
                                        file=sys.stderr):
                    m = by_name[job.model]
                    kernel = next(k for k in m.todo if k.name == job.kernel.name)
                    workload = m.db.commit_workload(kernel.mod)
                    for record in result["records"]:
                        m.db.commit_tuning_record(ms.database.TuningRecord.from_json(record, workload))
                    entry = m.meta["kernels"][kernel.name]
                    entry["seconds"] = round(entry.get("seconds", 0.0) + result["seconds"], 1)
                    m.file_kernel(kernel)
                    run = last_runs.setdefault(m.name, {"seconds": 0.0, "cluster": {"address": address.text,
                                                                                    "workers": len(workers)}})
                    run["seconds"] = round(time.time() - t0, 1)  # until the model's last kernel was written
                    for stat, value in result["stats"].items():
                        run[stat] = run.get(stat, 0) + value
                    worker_s += result["wall_s"]
                    left[job.model] -= 1
                    if not left[job.model]:
                        log(f"{job.model}: done -> {m.folder}")
                log(f"{len(jobs)} kernels in {time.time() - t0:.0f} s on {len(workers)} workers "
                    f"({worker_s:.0f} s of worker time)")
        for m in models:
            m.finish(last_runs.get(m.name), log)
    refresh_after_add(bank_dir, log=log)  # every add to a bank leaves its index fresh
    return [m.meta for m in models]
