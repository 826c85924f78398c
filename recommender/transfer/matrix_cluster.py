"""The transfer matrix on a Dask cluster (`schedrec matrix --cluster ADDRESS`): one task per target kernel,
the rows written by the client alone.

A worker keeps one measurer for its life, replays and measures a kernel exactly as a local run does
(`matrix.measure_matrix_kernel`, under its host's measurement lock) and sends back the kernel's rows as
JSON: TVM objects never leave the worker. The client files each kernel's rows into its model's file at the
kernel's place in the local run's order (`RowFile.put`), so a cluster run writes the file a local run
writes, in its format, and a rerun after a killed client or worker measures only the kernels whose rows
are missing. Workers read the bank at the client's path: a shared file system, or the same folder copied
to every host (a worker whose bank holds other models is refused).
"""
from __future__ import annotations

import atexit
import hashlib
import json
import sys
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator, TypeVar

from ..bank.location import bank_files
from ..bank.store import wait_while_paused
from ..core.errors import ClusterError
from ..core.row_files import kernel_rows
from ..core.rows import CandidateRow
from ..measure import MeasureSettings, Measurer
from ..measure.cluster import ClusterAddress, check_workers, connect, require_key, run_tasks, worker_name
from ..measure.host_lock import exclusive
from ..measure.measurer import parse_runner
from ..target.spec import TargetSpec
from .candidates import BankIndex
from .driver import RowFile
from .matrix import Donors, MatrixPool, measure_matrix_kernel, model_rows

# submitted tasks per worker: one running and one queued keeps a worker busy, and leaves a stopped client
# little that was measured and not written
QUEUED_PER_WORKER = 2
T = TypeVar("T")


@dataclass(frozen=True)
class KernelJob:
    """One matrix kernel to measure on a worker: plain data, so that it pickles to any host."""

    model: str
    kernel: str
    bank_dir: str
    bank_models: tuple[str, ...]
    bank_stamp: str  # what the worker's cached bank index must have been read from
    target: dict
    target_key: str
    settings: dict  # MeasureSettings.to_json()
    pool: MatrixPool
    tuned_best_s: float | None


def bank_stamp(bank_dir: Path) -> str:
    """A digest of the bank's model folders' stamps (the index's staleness check, `BankFiles.model_stamps`): a
    worker reads its bank again when it changes."""
    stamps = json.dumps(bank_files(bank_dir).model_stamps(), sort_keys=True)
    return hashlib.sha256(stamps.encode()).hexdigest()[:16]


# -- on the worker ---------------------------------------------------------------------------------
_state: dict = {}  # this worker process's bank index, measurer and TVM target, kept between tasks


@atexit.register
def _close_measurer() -> None:
    measurer = _state.pop("measurer", None)
    if measurer is not None:
        measurer.close()


def worker_state(job: KernelJob) -> tuple[BankIndex, Measurer, object]:
    """The bank index and measurer of this worker (for `job`'s bank, target and settings fields: a
    `replay_cluster.ReplayJob` has them too), made once (TVM workers cost seconds to start) and again
    only when the bank, the target or the settings change."""
    key = (job.bank_dir, job.bank_stamp, json.dumps(job.target, sort_keys=True), json.dumps(job.settings, sort_keys=True))
    if _state.get("key") != key:
        from ..core.tvm_setup import load_tensor_intrinsics
        _close_measurer()
        load_tensor_intrinsics()
        index = BankIndex(Path(job.bank_dir))
        if tuple(index.models) != job.bank_models:
            raise ClusterError(f"Dask worker {worker_name()} reads other bank models at {job.bank_dir} "
                               f"({', '.join(index.models)}) than the client ({', '.join(job.bank_models)}): give "
                               f"every worker the client's bank at that path")
        _state.update(key=key, index=index, measurer=Measurer(job.target, MeasureSettings(**job.settings)),
                      tt=TargetSpec(job.target).tvm())
    return _state["index"], _state["measurer"], _state["tt"]


def kernel_task(job: KernelJob, what: str, measure: Callable[[BankIndex, Measurer, object], list[CandidateRow]]
                ) -> dict:
    """One kernel task on this worker (a matrix kernel, or a `replay_cluster.ReplayJob`'s): the host checked
    where it times here, then `measure` on the worker's bank index, measurer and TVM target; {"rows": the rows it
    gives as JSON, "worker", "wall_s"}."""
    if parse_runner(job.settings.get("runner", "local")) is None:  # timed here: this host must be the target
        require_key(job.target_key)
    t0 = time.perf_counter()
    # the whole task holds the host's measurement lock, not only its builds and timings: another worker on
    # this host would otherwise spend its unlocked steps (its start, the pool lookup) beside a timing and spoil
    # it (two workers on 2 cores: timings stalled 13-82% and timed again)
    with exclusive(f"{what} for a Dask task"):
        rows = measure(*worker_state(job))
    return {"rows": [r.to_json() for r in rows], "worker": worker_name(), "wall_s": time.perf_counter() - t0}


def run_kernel_job(job: KernelJob) -> dict:
    """Measure one matrix kernel on this worker (`kernel_task`)."""
    def measure(index: BankIndex, measurer: Measurer, tt: object) -> list[CandidateRow]:
        bk = next((b for b in index.kernels.get(job.model, []) if b.name == job.kernel), None)
        if bk is None:
            raise ClusterError(f"Dask worker {worker_name()}: the bank at {job.bank_dir} has no kernel "
                               f"{job.model}/{job.kernel}")
        choice = measure_matrix_kernel(bk, index, measurer, tt, job.pool)
        return kernel_rows(choice, job.model, tuned_best_s=job.tuned_best_s)
    return kernel_task(job, f"a matrix kernel ({job.model}/{job.kernel})", measure)


# -- on the client ---------------------------------------------------------------------------------
def measure_on_cluster(address: ClusterAddress, index: BankIndex, models: list[str], out_dir: Path, donors: Donors,
                       target: TargetSpec, settings: MeasureSettings, pool: MatrixPool, remeasure: tuple[str, ...],
                       bank_dir: Path, log=lambda msg: print(msg, file=sys.stderr)) -> dict[str, dict[str, list[str]]]:
    """Measure the matrix's missing kernels of `models` on the cluster and write their rows; returns, per
    model, the finished kernels that lack donors the bank gained since they were measured. No cluster is
    started or reached when no kernel is missing."""
    files: dict[str, RowFile] = {}
    order: dict[str, list[str]] = {}
    lacking: dict[str, dict[str, list[str]]] = {}
    jobs: list[KernelJob] = []
    stamp, settings_json = bank_stamp(bank_dir), settings.to_json()
    for model in models:
        rows, kernels, lack = model_rows(out_dir, index, donors, model, pool, remeasure, log)
        if lack:
            lacking[model] = lack
        files[model], order[model] = rows, [bk.name for bk in kernels]
        jobs += [KernelJob(model, bk.name, str(Path(bank_dir).resolve()), tuple(index.models), stamp, target.config,
                           target.key, settings_json, pool, bk.best_s)
                 for bk in kernels if bk.name not in rows.by_kernel]
    if not jobs:
        return lacking
    left = Counter(job.model for job in jobs)
    for job, result in run_kernel_jobs(address, run_kernel_job, jobs, target, settings, bank_dir,
                                       f"{len(left)} models", "matrix (cluster)", log):
        files[job.model].put(job.kernel, [CandidateRow.from_json(o) for o in result["rows"]], order[job.model])
        donors.record(job.model, job.kernel, [m for m in index.models if m != job.model])
        left[job.model] -= 1
        if not left[job.model]:
            log(f"{job.model}: done -> {files[job.model].path}")
    return lacking


def run_kernel_jobs(address: ClusterAddress, fn: Callable[[T], dict], jobs: list[T], target: TargetSpec,
                    settings: MeasureSettings, bank_dir: Path, what: str, desc: str,
                    log=lambda msg: print(msg, file=sys.stderr)) -> Iterator[tuple[T, dict]]:
    """Yield (job, fn(job)) of kernel tasks as they finish on the cluster (its workers checked against the target
    where they time), with a progress bar `desc` and a line on the workers before and on the time after."""
    from tqdm import tqdm
    with connect(address) as client:
        timed_here = parse_runner(settings.runner) is None
        workers = check_workers(client, target.key) if timed_here else client.scheduler_info()["workers"]
        log(f"cluster {address.text}: {len(workers)} workers; {len(jobs)} kernels of {what} to measure")
        t0, worker_s = time.time(), 0.0
        results = run_tasks(client, fn, jobs, window=QUEUED_PER_WORKER * len(workers),
                            before_submit=lambda: wait_while_paused(bank_dir, log))
        for job, result in tqdm(results, total=len(jobs), desc=desc, unit="kernel", file=sys.stderr):
            yield job, result
            worker_s += result["wall_s"]
        log(f"{len(jobs)} kernels in {time.time() - t0:.0f} s on {len(workers)} workers "
            f"({worker_s:.0f} s of worker time)")
