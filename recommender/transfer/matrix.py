"""The transfer matrix: leave-one-model-out exhaustive replay over every bank model, every candidate kept.

For each bank model M and each of its tuned kernels, the candidates are the best `top_n` records of every
same-class kernel of the other bank models (capped per kernel, spread across source models), replayed,
checked and measured beside the kernel's default schedule. The rows (`rows.CandidateRow`) go to
`<out>/<M>.jsonl.gz`, rewritten atomically after every kernel: a killed run resumes at the first kernel
whose rows are missing. This is the data rankers learn from.

`<out>/donors.json` records, per kernel, the bank models its candidates were drawn from. A bank that has
gained models since leaves finished kernels without them as donors: `add_donors` replays and measures the
new donors' candidates onto those kernels (up to the cap) and adds their rows, instead of a rebuild.
"""
from __future__ import annotations

import sys
import time
from dataclasses import dataclass
from pathlib import Path

from ..bank.store import locked, wait_while_paused
from ..core.errors import BankError
from ..core.fileio import atomic_write_json, display_path, read_json
from ..core.row_files import read_rows, summarize
from ..core.rows import knob_key
from ..frontend.kernels import kernel_from_mod
from ..measure import MeasureSettings, Measurer
from ..rules import tile_rule_for
from ..target.spec import TargetSpec
from .candidates import BankIndex, BankKernel
from .choice import KernelChoice
from .driver import RowFile, drive
from .kernel import find_candidates, measure_kernel, transfer_kernel

DONORS_FILE = "donors.json"  # {target model: {kernel: [bank models its candidates were drawn from]}}


def matrix_file(out_dir: Path, model: str) -> Path:
    return out_dir / f"{model}.jsonl.gz"


@dataclass(frozen=True)
class MatrixPool:
    """How a matrix kernel's pool is drawn (what a cluster worker needs besides the kernel and the bank)."""

    top_n: int = 3
    cap: int | None = 48
    anchor_fallback: bool = True
    rule_space: int = 0


def matrix_kernels(index: BankIndex, model: str, rule_space: int) -> list[BankKernel]:
    """The bank model's kernels that the matrix measures, in the order its rows are written."""
    return [bk for bk in index.kernels[model] if not rule_space or tile_rule_for(bk.class_key)]


def model_rows(out_dir: Path, index: BankIndex, donors: "Donors", model: str, pool: MatrixPool,
               remeasure: tuple[str, ...], log) -> tuple[RowFile, list[BankKernel], dict[str, list[str]]]:
    """A bank model's matrix rows so far, the kernels the matrix measures of it, and its finished kernels that
    lack donors the bank gained since they were measured (`Donors.lacking`)."""
    rows = RowFile(matrix_file(out_dir, model), remeasure, log)
    kernels = matrix_kernels(index, model, pool.rule_space)
    return rows, kernels, donors.lacking(model, [bk.name for bk in kernels if bk.name in rows.by_kernel])


def measure_matrix_kernel(bk: BankKernel, index: BankIndex, measurer: Measurer, tt: object,
                          pool: MatrixPool) -> KernelChoice:
    """One matrix kernel: the other bank models' donors (only; or + the rule's space) replayed and measured."""
    return transfer_kernel(kernel_from_mod(bk.name, bk.mod, bk.weight), index, measurer, tt, pool.top_n,
                           (bk.model,), pool.cap, pool.anchor_fallback, tile_rules=False,
                           rule_space=pool.rule_space)


def all_pairs(target: TargetSpec, bank_dir: Path, out_dir: Path, top_n: int = 3, cap: int | None = 48,
              models: list[str] | None = None, settings: MeasureSettings | None = None,
              anchor_fallback: bool = True, remeasure: tuple[str, ...] = (), add_donors: bool = False,
              rule_space: int = 0, cluster: object | None = None, add_instances: bool = False,
              log=lambda msg: print(msg, file=sys.stderr)) -> dict:
    """Build (or resume) the transfer matrix; returns its summary (also written to `<out>/summary.json`).
    Kernels with a candidate whose status is in `remeasure` are measured again. With `add_donors`, finished
    kernels whose donors lack bank models added since get those models' candidates measured and added. With
    `rule_space`, only the kernels whose class has a tile rule, each with up to that many instances of the
    rule's template measured beside its donors (the data a ranker needs to choose among them). With `cluster`
    (a `measure.cluster.ClusterAddress`), each kernel is measured by a worker of that Dask cluster and its rows
    come back here to be written, in the order a local run writes them (`matrix_cluster.py`). With
    `add_instances` (and `rule_space`), finished kernels whose rows lack instances of the rule space as it is now
    (a template that gained a knob) get those measured and added (`_add_instances`)."""
    if add_instances and not rule_space:
        raise BankError("--add-instances adds rule-space instances: give --rule-space N")
    from ..core.tvm_setup import load_tensor_intrinsics
    load_tensor_intrinsics()
    target.tvm()  # a target TVM rejects is refused before any folder is locked or cluster started
    index = BankIndex(bank_dir)
    if len(index.models) < 2:
        raise BankError(f"the transfer matrix needs 2 or more bank models; {bank_dir} holds {len(index.models)}")
    unknown = [m for m in models or [] if m not in index.models]
    if unknown:
        raise BankError(f"not in the bank at {bank_dir}: {', '.join(unknown)} (bank models: {', '.join(index.models)})")
    with locked(out_dir, "transfer matrix"):
        settings_json = (settings or MeasureSettings()).to_json()
        _check_math(out_dir, settings_json["fast_math"])
        donors = Donors(out_dir, index.models)
        pool = MatrixPool(top_n, cap, anchor_fallback, rule_space)
        if cluster is not None:
            if add_donors or add_instances:
                raise BankError(f"--add-{'donors' if add_donors else 'instances'} measures on this machine: run it "
                                f"without --cluster")
            from .matrix_cluster import measure_on_cluster
            lacking = measure_on_cluster(cluster, index, models or index.models, out_dir, donors, target,
                                         settings or MeasureSettings(), pool, remeasure, bank_dir, log)
        else:
            lacking = _measure_here(index, models or index.models, out_dir, donors, target, settings, pool,
                                    remeasure, add_donors, bank_dir, log, add_instances)
        _note_lacking(lacking, out_dir, log)
    rows = [r for m in index.models if matrix_file(out_dir, m).exists() for r in read_rows(matrix_file(out_dir, m))]
    summary = {"bank": display_path(bank_dir), "bank_models": index.models, "target_key": target.key, "top_n": top_n,
               "cap": cap, "anchor_fallback": anchor_fallback, "measurer": settings_json, "rows": len(rows),
               **summarize(rows)}
    atomic_write_json(str(out_dir / "summary.json"), summary)
    return summary


def _measure_here(index: BankIndex, models: list[str], out_dir: Path, donors: "Donors", target: TargetSpec,
                  settings: MeasureSettings | None, pool: MatrixPool, remeasure: tuple[str, ...], add_donors: bool,
                  bank_dir: Path, log, add_instances: bool = False) -> dict[str, dict[str, list[str]]]:
    """Measure the matrix's missing kernels on this machine, one model after another; returns, per model, the
    finished kernels that lack donors the bank gained since (unless `add_donors` measured them). With
    `add_instances`, finished kernels get the instances of their rule space their rows lack."""
    tt = target.tvm()
    lacking = {}
    with Measurer(target.config, settings) as measurer:
        for model in models:
            rows, kernels, lack = model_rows(out_dir, index, donors, model, pool, remeasure, log)
            if add_donors and lack:
                _add_donors(model, lack, rows, index, donors, measurer, tt, pool.top_n, pool.cap,
                            pool.anchor_fallback, bank_dir, log)
            elif lack:
                lacking[model] = lack
            if add_instances:
                _add_instances(model, [bk for bk in kernels if bk.name in rows.by_kernel], rows, measurer, tt,
                               pool.rule_space, bank_dir, log)
            todo = [bk for bk in kernels if bk.name not in rows.by_kernel]
            if not todo:
                continue
            t0 = time.time()
            for choice in drive(todo, rows, model, name=lambda bk: bk.name,
                                step=lambda bk: measure_matrix_kernel(bk, index, measurer, tt, pool),
                                resume=lambda bk, saved: None, pause_dir=bank_dir, desc=f"matrix {model}",
                                tuned_best_s=lambda bk: bk.best_s, log=log):
                donors.record(model, choice.kernel.name, [m for m in index.models if m != model])
            log(f"{model}: {len(todo)} kernels in {time.time() - t0:.0f} s -> {rows.path}")
    return lacking


class Donors:
    """`<out>/donors.json`: which bank models each finished kernel's candidates were drawn from. Kernels
    finished before the file existed drew from the models the matrix's summary.json listed then (the bank
    when the matrix was last built; the whole bank where there was no summary), kept in the file as
    `earlier_kernels`, since the summary is rewritten at the end of every run."""

    def __init__(self, out_dir: Path, bank_models: list[str]) -> None:
        self.path = out_dir / DONORS_FILE
        self.bank_models = bank_models
        if self.path.exists():
            data = read_json(self.path, error=BankError)
            if not isinstance(data, dict) or not isinstance(data.get("kernels"), dict):
                raise BankError(f"corrupt {self.path}: expected {{\"earlier_kernels\": [...], \"kernels\": {{...}}}}; "
                                f"remove it to take every finished kernel as drawn from the bank's models")
        else:
            summary = out_dir / "summary.json"
            earlier = read_json(summary, error=BankError).get("bank_models") if summary.exists() else None
            data = {"earlier_kernels": earlier or list(bank_models), "kernels": {}}
        self.earlier: list[str] = data.get("earlier_kernels") or list(bank_models)
        self.by_model: dict[str, dict[str, list[str]]] = data["kernels"]
        if not self.path.exists():  # before the summary that says what earlier kernels drew from is rewritten
            self._save()

    def _save(self) -> None:
        atomic_write_json(str(self.path), {"earlier_kernels": self.earlier, "kernels": self.by_model})

    def drawn_from(self, model: str, kernel: str) -> list[str]:
        return self.by_model.get(model, {}).get(kernel, [m for m in self.earlier if m != model])

    def lacking(self, model: str, kernels: list[str]) -> dict[str, list[str]]:
        """Per finished kernel of `model`, the bank models (itself left out) it has not drawn donors from."""
        out = {}
        for k in kernels:
            new = [m for m in self.bank_models if m != model and m not in self.drawn_from(model, k)]
            if new:
                out[k] = new
        return out

    def record(self, model: str, kernel: str, drawn_from: list[str]) -> None:
        self.by_model.setdefault(model, {})[kernel] = sorted(drawn_from)
        self._save()


def _add_donors(model: str, lacking: dict[str, list[str]], rows: RowFile, index: BankIndex, donors: Donors,
                measurer: Measurer, tt: object, top_n: int, cap: int | None, anchor_fallback: bool, bank_dir: Path,
                log) -> None:
    """Measure the candidates of the donors each finished kernel lacks (at most the room its cap leaves) and
    add their rows after the kernel's; its default row stays the first session's. The default is measured
    again, and a drift of more than 10% between the sessions is said."""
    from tqdm import tqdm
    t0, added = time.time(), 0
    by_name = {bk.name: bk for bk in index.kernels[model]}
    for name, new in tqdm(list(lacking.items()), desc=f"matrix {model}: new donors", unit="kernel", file=sys.stderr):
        bk = by_name[name]
        have = rows.by_kernel[name]
        room = None if cap is None else cap - sum(not r.is_default for r in have)
        if room is None or room > 0:
            wait_while_paused(bank_dir, log)
            kernel = kernel_from_mod(bk.name, bk.mod, bk.weight)
            exclude = tuple(m for m in index.models if m not in new)
            found = find_candidates(kernel, index, measurer, tt, top_n, exclude, room, anchor_fallback,
                                    tile_rules=False)
            if found.candidates:
                choice = measure_kernel(found, measurer, tt)
                _note_default_drift(f"{model}/{name}", choice, have, "candidates", log)
                added += rows.extend(choice, model, bk.best_s)
        donors.record(model, name, donors.drawn_from(model, name) + new)
    log(f"{model}: {added} candidates of new donors added to {len(lacking)} finished kernels in "
        f"{time.time() - t0:.0f} s -> {rows.path}")


def _note_default_drift(kernel: str, choice: KernelChoice, have: list, added: str, log) -> None:
    """One line where a finished kernel's default, measured again beside what is added to its rows, is more than
    10% off the first session's: the added `added` are timed against this session's machine."""
    old_default = next((r.latency_s for r in have if r.is_default), None)
    if choice.default_s and old_default and not 0.9 <= choice.default_s / old_default <= 1.1:
        log(f"note: {kernel}: its default measured {choice.default_s / old_default:.2f}x the first session's; the "
            f"added {added} are timed against this session's machine")


def _add_instances(model: str, kernels: list[BankKernel], rows: RowFile, measurer: Measurer, tt: object,
                   rule_space: int, bank_dir: Path, log) -> None:
    """For each finished kernel, the first `rule_space` instances of its rule's template as the template is now,
    less those its rows have (by knob values), measured beside its default and added after its rows; its default
    row stays the first session's, and a drift of more than 10% between the sessions is said."""
    from tqdm import tqdm

    from ..core.rows import RULE
    from .kernel import FoundCandidates, tile_rule_candidates
    t0, added, touched = time.time(), 0, 0
    for bk in tqdm(kernels, desc=f"matrix {model}: new rule instances", unit="kernel", file=sys.stderr):
        have = rows.by_kernel[bk.name]
        known = {knob_key(r.knobs) for r in have if r.source_kind == RULE}
        wait_while_paused(bank_dir, log)
        kernel = kernel_from_mod(bk.name, bk.mod, bk.weight)
        t1 = time.perf_counter()
        new = [c for c in tile_rule_candidates(kernel, measurer, rule_space) if knob_key(c.replayed.knobs) not in known]
        if not new:
            continue
        choice = measure_kernel(FoundCandidates(kernel, new, None, time.perf_counter() - t1), measurer, tt)
        _note_default_drift(f"{model}/{bk.name}", choice, have, "instances", log)
        added += rows.extend(choice, model, bk.best_s)
        touched += 1
    log(f"{model}: {added} new rule instances added to {touched} of {len(kernels)} finished kernels in "
        f"{time.time() - t0:.0f} s -> {rows.path}")


def _note_lacking(lacking: dict[str, dict[str, list[str]]], out_dir: Path, log) -> None:
    """One line where finished kernels lack donors the bank has gained since they were measured."""
    kernels = sum(len(v) for v in lacking.values())
    if not kernels:
        return
    new = sorted({m for v in lacking.values() for ms in v.values() for m in ms})
    log(f"note: {kernels} finished kernels of {display_path(out_dir)} have no candidates from {', '.join(new)}, "
        f"which the bank gained since they were measured; rerun with --add-donors to measure theirs, or build "
        f"into a new --out")


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

