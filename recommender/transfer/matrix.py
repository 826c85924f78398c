"""The transfer matrix: leave-one-model-out exhaustive replay over every bank model, every candidate kept.

For each bank model M and each of its tuned kernels, the candidates are the best `top_n` records of every
same-class kernel of the other bank models (capped per kernel, spread across source models), replayed,
checked and measured beside the kernel's default schedule. The rows (`rows.CandidateRow`) go to
`<out>/<M>.jsonl.gz`, rewritten atomically after every kernel: a killed run resumes at the first kernel
whose rows are missing. This is the data rankers learn from.
"""
from __future__ import annotations

import sys
import time
from pathlib import Path

from ..bank import BankError, locked
from ..candidates import BankIndex
from ..fileio import atomic_write_json, display_path, read_json
from ..kernels import kernel_from_mod
from ..measure import MeasureSettings, Measurer
from ..target import TargetSpec
from ..transfer_data import read_rows, summarize
from .driver import RowFile, drive
from .kernel import transfer_kernel


def matrix_file(out_dir: Path, model: str) -> Path:
    return out_dir / f"{model}.jsonl.gz"


def all_pairs(target: TargetSpec, bank_dir: Path, out_dir: Path, top_n: int = 3, cap: int | None = 48,
              models: list[str] | None = None, settings: MeasureSettings | None = None,
              anchor_fallback: bool = True, remeasure: tuple[str, ...] = (),
              log=lambda msg: print(msg, file=sys.stderr)) -> dict:
    """Build (or resume) the transfer matrix; returns its summary (also written to `<out>/summary.json`).
    Kernels with a candidate whose status is in `remeasure` are measured again."""
    from ..tvm_setup import load_tensor_intrinsics
    load_tensor_intrinsics()
    tt = target.tvm()
    index = BankIndex(bank_dir)
    if len(index.models) < 2:
        raise BankError(f"the transfer matrix needs 2 or more bank models; {bank_dir} holds {len(index.models)}")
    unknown = [m for m in models or [] if m not in index.models]
    if unknown:
        raise BankError(f"not in the bank at {bank_dir}: {', '.join(unknown)} (bank models: {', '.join(index.models)})")
    for w in index.warnings(target.key):
        log(w)
    with locked(out_dir, "transfer matrix"):
        settings_json = (settings or MeasureSettings()).to_json()
        _check_math(out_dir, settings_json["fast_math"])
        _note_new_donors(out_dir, index.models, log)
        with Measurer(target.config, settings) as measurer:
            for model in models or index.models:
                rows = RowFile(matrix_file(out_dir, model), remeasure, log)
                todo = [bk for bk in index.kernels[model] if bk.name not in rows.by_kernel]
                if not todo:
                    continue
                t0 = time.time()
                for _ in drive(todo, rows, model, name=lambda bk: bk.name,
                               step=lambda bk: transfer_kernel(kernel_from_mod(bk.name, bk.mod, bk.weight), index,
                                                               measurer, tt, top_n, (model,), cap, anchor_fallback,
                                                               conv_rules=False),  # donors only: the rankers' data
                               resume=lambda bk, saved: None, pause_dir=bank_dir, desc=f"matrix {model}",
                               tuned_best_s=lambda bk: bk.best_s, log=log):
                    pass
                log(f"{model}: {len(todo)} kernels in {time.time() - t0:.0f} s -> {rows.path}")
    rows = [r for m in index.models if matrix_file(out_dir, m).exists() for r in read_rows(matrix_file(out_dir, m))]
    summary = {"bank": display_path(bank_dir), "bank_models": index.models, "target_key": target.key, "top_n": top_n,
               "cap": cap, "anchor_fallback": anchor_fallback, "measurer": settings_json, "rows": len(rows),
               **summarize(rows)}
    atomic_write_json(str(out_dir / "summary.json"), summary)
    return summary


def _note_new_donors(out_dir: Path, bank_models: list[str], log) -> None:
    """A matrix resumes per kernel: where the bank gained models since it was built, the kernels it already
    holds keep rows without those donors. Said in one line, so that a rebuild is a choice."""
    path = out_dir / "summary.json"
    if not path.exists():
        return
    before = read_json(path, error=BankError).get("bank_models", [])
    new = [m for m in bank_models if m not in before]
    if new and any(matrix_file(out_dir, m).exists() for m in before):
        log(f"note: the bank has {', '.join(new)} since {display_path(out_dir)} was built ({len(before)} models): "
            f"its finished kernels keep their rows, without these donors; build into a new --out to include them")


def _check_math(out_dir: Path, fast_math: bool) -> None:
    """A matrix is resumed with the exp/erf it was measured with (one recorded before fast math existed:
    libm's), so that its rows stay comparable."""
    path = out_dir / "summary.json"
    if not path.exists():
        return
    before = bool(read_json(path, error=BankError).get("measurer", {}).get("fast_math", False))
    if before != fast_math:
        raise BankError(f"{out_dir} was measured with {'fast' if before else 'exact'} math; "
                        f"{'add' if not before else 'drop'} --exact-math or use another --out")

