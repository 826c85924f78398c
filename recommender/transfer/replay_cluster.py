"""Exhaustive replay of one model on a Dask cluster (`schedrec replay --model M --cluster ADDRESS`): one task per
kernel of the model, the rows written by the client alone.

A task carries the kernel (its TIR module as JSON) and the run's settings. The worker replays the bank's donors
and the tile rules onto it and measures them as a local run does (`kernel.transfer_kernel`, under its host's
measurement lock, with the bank index and measurer it keeps between tasks: `matrix_cluster.worker_state`), and
sends back the kernel's rows. The client files them at the kernel's place in the model's order
(`RowFile.put`); the local loop then rebuilds every choice from the rows, measuring nothing, and the client
compiles and times the whole model, so it must be a host of the target CPU too. A rerun measures only the
kernels without rows, and reaches no cluster when none is missing.
"""
from __future__ import annotations

import dataclasses
import sys
from dataclasses import dataclass
from pathlib import Path

from ..core.row_files import kernel_rows
from ..core.rows import CandidateRow
from ..frontend.kernels import Kernel
from ..measure import MeasureSettings, Measurer
from ..measure.cluster import ClusterAddress
from ..target.spec import TargetSpec
from .candidates import BankIndex
from .driver import RowFile
from .kernel import transfer_kernel
from .matrix_cluster import bank_stamp, kernel_task, run_kernel_jobs
from .run import ModelRun


@dataclass(frozen=True)
class ReplayJob:
    """One kernel of the model to replay and measure on a worker: plain data, so that it pickles to any host.
    Its bank and settings fields are a matrix task's (`matrix_cluster.KernelJob`): a worker keeps one bank index
    and measurer for both."""

    model: str
    kernel: Kernel  # without its module: `mod` carries it
    mod: str  # tvm.ir.save_json of the kernel's IRModule
    bank_dir: str
    bank_models: tuple[str, ...]
    bank_stamp: str
    target: dict
    target_key: str
    settings: dict  # MeasureSettings.to_json()
    top_n: int
    exclude: tuple[str, ...]
    cap: int | None
    anchor_fallback: bool
    rule_space: int


def run_replay_job(job: ReplayJob) -> dict:
    """Replay and measure one kernel of the model on this worker (`matrix_cluster.kernel_task`)."""
    import tvm

    def measure(index: BankIndex, measurer: Measurer, tt: object) -> list[CandidateRow]:
        kernel = dataclasses.replace(job.kernel, mod=tvm.ir.load_json(job.mod))
        choice = transfer_kernel(kernel, index, measurer, tt, job.top_n, job.exclude, job.cap, job.anchor_fallback,
                                 rule_space=job.rule_space)
        return kernel_rows(choice, job.model)
    return kernel_task(job, f"a replay kernel ({job.model}/{job.kernel.name})", measure)


def replay_on_cluster(address: ClusterAddress, mr: ModelRun, rows: RowFile, bank_dir: Path, target: TargetSpec,
                      settings: MeasureSettings, top_n: int, cap: int | None, anchor_fallback: bool, rule_space: int,
                      log=lambda msg: print(msg, file=sys.stderr)) -> int:
    """Measure the model's kernels that have no rows in `rows` on the cluster and file their rows; returns how
    many. No cluster is started or reached when none is missing."""
    import tvm
    order = [k.name for k in mr.kernels]
    missing = [k for k in mr.kernels if k.name not in rows.by_kernel]
    if not missing:
        return 0
    common = dict(bank_dir=str(Path(bank_dir).resolve()), bank_models=tuple(mr.index.models),
                  bank_stamp=bank_stamp(bank_dir), target=target.config, target_key=target.key,
                  settings=settings.to_json(), top_n=top_n, exclude=tuple(mr.exclude), cap=cap,
                  anchor_fallback=anchor_fallback, rule_space=rule_space)
    jobs = [ReplayJob(mr.model.name, dataclasses.replace(k, mod=None), tvm.ir.save_json(k.mod), **common)
            for k in missing]
    for job, result in run_kernel_jobs(address, run_replay_job, jobs, target, settings, bank_dir, mr.model.name,
                                       f"replay {mr.model.name} (cluster)", log):
        rows.put(job.kernel.name, [CandidateRow.from_json(o) for o in result["rows"]], order)
    return len(jobs)
