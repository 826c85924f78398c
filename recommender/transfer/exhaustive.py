"""Exhaustive-replay transfer-tuning: measure every valid candidate of every kernel, keep the fastest.

For each kernel of the new model: replay the bank's same-class schedules onto it, measure the valid ones and
the kernel's default (unscheduled) version with the output checked against the unscheduled kernel, and
choose the fastest (a transfer slower than none is not chosen). The choices become a MetaSchedule database;
the whole model is compiled with it and timed, and a JSON report is written.
"""
from __future__ import annotations

from pathlib import Path

from ..bank.store import locked
from ..core.fileio import atomic_write_json, display_path
from ..measure import MeasureSettings
from ..measure.cluster import ClusterAddress
from ..target.spec import TargetSpec
from .choice import choice_from_rows
from .driver import RowFile, drive
from .kernel import transfer_kernel
from .run import check_run, finish, open_model_measured, totals


def exhaustive_replay(spec: str, target: TargetSpec, bank_dir: Path, out_dir: Path, top_n: int = 1,
                      exclude_models: tuple[str, ...] = (), cap: int | None = None,
                      settings: MeasureSettings | None = None, anchor_fallback: bool = True,
                      remeasure: tuple[str, ...] = (), rule_space: int = 0, cluster: ClusterAddress | None = None,
                      ) -> dict:
    """Transfer-tune a model by exhaustive replay of its whole pool (the bank's donors, and up to `rule_space`
    instances of each kernel's tile-rule template, or its fixed tiles alone with 0); returns (and writes) the
    report. A resumed run measures again the kernels that have a candidate whose status is in `remeasure`.
    With `cluster`, the kernels are replayed and measured on its workers (`replay_cluster`), the whole model
    here."""
    with locked(out_dir, f"replay {spec}"):  # a folder in use is refused before the model is imported
        measurer, mr = open_model_measured(spec, target, bank_dir, exclude_models, settings)
        with measurer:  # closed whatever fails from here on (a refused resume included)
            run = {"spec": spec, "model": mr.model.name, "target_key": target.key, "bank_models": mr.index.models,
                   "excluded_models": list(mr.exclude), "top_n": top_n, "cap": cap,
                   "anchor_fallback": anchor_fallback, "fast_math": (settings or MeasureSettings()).fast_math,
                   "rule_space": rule_space}
            check_run(out_dir / "run.json", run)
            rows = RowFile(out_dir / "candidates.jsonl.gz", remeasure)
            if cluster is not None:
                from .replay_cluster import replay_on_cluster
                replay_on_cluster(cluster, mr, rows, bank_dir, target, settings or MeasureSettings(), top_n, cap,
                                  anchor_fallback, rule_space)
            choices = list(drive(
                mr.kernels, rows, mr.model.name, name=lambda k: k.name,
                step=lambda k: transfer_kernel(k, mr.index, measurer, mr.tvm_target, top_n, mr.exclude, cap,
                                               anchor_fallback, rule_space=rule_space),
                resume=lambda k, saved: choice_from_rows(k, saved, mr.tvm_target),
                pause_dir=bank_dir, desc=f"replay {mr.model.name}"))
            timing = finish(choices, mr, measurer, out_dir)
    report = {
        "model": mr.model.name, "spec": spec, "target_key": target.key, "bank": display_path(bank_dir),
        "bank_models": mr.index.models, "excluded_models": list(mr.exclude), "top_n": top_n, "cap": cap,
        "anchor_fallback": anchor_fallback, "rule_space": rule_space,
        "kernels": [c.to_json() for c in choices],
        "totals": totals(choices, mr.kernels, timing, mr.import_s, mr.workers_wait_s),
    }
    atomic_write_json(str(out_dir / "report.json"), report)
    return report
