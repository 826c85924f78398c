"""What every model-level run shares: open the model and the bank, check a resumed run's settings, write
the database, time the compiled model, and total the kernels' figures for the report."""
from __future__ import annotations

import time
from dataclasses import dataclass, replace
from pathlib import Path

from ..core.errors import BankError
from ..core.fileio import atomic_write_json, read_json
from ..core.rows import ANCHOR, CLASS, NOT_MEASURED, RULE, SAMPLED, SOURCE_KINDS
from ..frontend.kernels import Kernel, extract_kernels
from ..frontend.model_import import ImportedModel, import_model
from ..measure import MeasureSettings, Measurer
from ..target.spec import TargetSpec
from .candidates import BankIndex
from .choice import KernelChoice
from .database import write_database
from .short_tune import SHORT_TUNE


@dataclass
class ModelRun:
    """A model opened for transfer: its kernels, the bank index, and the bank models left out."""

    spec: str
    target: TargetSpec
    tvm_target: object
    model: ImportedModel
    kernels: list[Kernel]
    index: BankIndex
    exclude: tuple[str, ...]
    import_s: float
    workers_wait_s: float = 0.0  # after the import, until the measurer's workers were up (open_model_measured)


def open_model(spec: str, target: TargetSpec, bank_dir: Path, exclude_models: tuple[str, ...] = (),
               pack_weights: bool = False) -> ModelRun:
    """Import the model (its weights marked layout-free with `pack_weights`), extract its kernels and read
    the bank; the model's own records are never donors. Which CPU the bank was measured on is the caller's
    to say (`bank.info.bank_warnings`; the CLI says it once, with the bank's choice)."""
    from ..core.tvm_setup import load_tensor_intrinsics
    load_tensor_intrinsics()
    tt = target.tvm()
    t0 = time.perf_counter()
    model = import_model(spec, tt, pack_weights=pack_weights)
    kernels = extract_kernels(model, tt)
    index = BankIndex(bank_dir)
    if not index.models:
        raise BankError(f"the bank at {bank_dir} holds no model")
    exclude = tuple(sorted(set(exclude_models) | {model.name}))
    return ModelRun(spec, target, tt, model, kernels, index, exclude, time.perf_counter() - t0)


def open_model_measured(spec: str, target: TargetSpec, bank_dir: Path, exclude_models: tuple[str, ...] = (),
                        settings: MeasureSettings | None = None,
                        pack_weights: bool = False) -> tuple[Measurer, ModelRun]:
    """A Measurer whose workers start first, so that their start (TVM's import; the build workers' tensor
    intrinsics) overlaps the model's import, and the model opened (`open_model`); returns once the workers are up,
    so that search time excludes both (the wait after the import is `ModelRun.workers_wait_s`). The measurer is
    closed if the model fails to open."""
    measurer = Measurer(target.config, settings).start_workers()
    try:
        mr = open_model(spec, target, bank_dir, exclude_models, pack_weights=pack_weights)
        return measurer, replace(mr, workers_wait_s=measurer.wait_ready())
    except BaseException:
        measurer.close()
        raise


# settings that runs recorded before they existed ran with: such a run resumes under these values only
ADDED_SETTINGS = {"tune_missing": 0, "pack_weights": False, "fast_math": False, "rule_space": 0}


def check_run(path: Path, run: dict) -> None:
    """A resumed run must have the settings of the run it continues; a fresh folder records them."""
    if path.exists():
        previous = read_json(path, hint="remove the folder or use another --out", error=BankError)
        if not isinstance(previous, dict):
            raise BankError(f"corrupt {path}: not a JSON object; remove the folder or use another --out")
        diff = sorted(k for k in run if previous.get(k, ADDED_SETTINGS.get(k)) != run[k])
        if diff:
            raise BankError(f"{path.parent} holds a run with other settings ({', '.join(diff)}); "
                            f"use another --out or remove that folder")
    else:
        atomic_write_json(str(path), run)


@dataclass
class ModelTiming:
    records: int
    tuned: object  # MeasureResult
    untuned: object | None
    compile_s: float


def finish(choices: list[KernelChoice], run: ModelRun, measurer: Measurer, out_dir: Path,
           untuned: bool = True) -> ModelTiming:
    """Write the database of the chosen schedules, then compile and time the model with it (and without)."""
    n_records = write_database(choices, run.tvm_target, out_dir / "database")
    inputs = list(zip(run.model.input_shapes, run.model.input_dtypes))
    t0 = time.perf_counter()
    tuned = measurer.measure_model(run.model.mod, inputs, database_dir=str(out_dir / "database"),
                                   settings=model_timing(measurer.settings))
    compile_s = time.perf_counter() - t0
    plain = measurer.measure_model(run.model.mod, inputs) if untuned else None
    return ModelTiming(n_records, tuned, plain, compile_s)


def model_timing(settings: MeasureSettings) -> MeasureSettings:
    """The settings that time the output model: the kernels' settings with at least 5 repeats of at least
    50 ms each (a model of tens of microseconds timed in 3 short repeats was off by 2x on a busy machine)."""
    return replace(settings, repeat=max(settings.repeat, 5), min_repeat_ms=max(settings.min_repeat_ms, 50))


def default_time(choices: list[KernelChoice]) -> dict:
    """How much of the kernels' time (weight x latency, summed) runs in their default, unscheduled version
    (plain loops): kernels with no schedule chosen, whether none replayed or none beat the default. Kernels
    whose latency is unknown (a check-only run) are left out of both sums."""
    known = [c for c in choices if c.latency_s is not None]
    total = sum(c.kernel.weight * c.latency_s for c in known)
    plain = [c for c in known if not c.chosen]
    return {"kernels_default": sum(1 for c in choices if not c.chosen),
            "time_share_default": round(sum(c.kernel.weight * c.latency_s for c in plain) / total, 4) if total else None}


def chosen_kind(choice: KernelChoice) -> str | None:
    """The source kind (DONOR, RULE, SPACE) of the kernel's chosen schedule, None where it keeps its default."""
    return choice.chosen["kind"] if choice.chosen else None


def measured_by_kind(choices: list[KernelChoice]) -> dict[str, int]:
    """Candidates sent to the measurer, per source kind (failed measurements included, replay failures not)."""
    out = {k: 0 for k in SOURCE_KINDS}
    for c in choices:
        for r in c.rows[1:]:
            if r.replayed and r.status != NOT_MEASURED:
                out[r.source_kind] += 1
    return out


def totals(choices: list[KernelChoice], kernels: list[Kernel], timing: ModelTiming, import_s: float,
           workers_wait_s: float = 0.0) -> dict:
    """The report's totals: counts, FLOP coverage, seconds, model latencies. `build_s` sums the parallel
    build workers (CPU side); `build_wall_s` is the wall time the builds took."""
    flops = sum(k.total_flops for k in kernels)
    covered = sum(c.kernel.total_flops for c in choices if c.chosen)
    transferable = sum(c.kernel.total_flops for c in choices if c.valid)
    by_class = sum(c.kernel.total_flops for c in choices if c.valid and c.match == CLASS)
    transferred = sum(c.kernel.total_flops for c in choices if c.valid and c.match in (CLASS, ANCHOR))
    tuned, untuned = timing.tuned, timing.untuned
    measured = [(k, r) for k, r in (("tuned", tuned), ("untuned", untuned)) if r is not None]
    return {
        "kernels": len(choices), "candidates": sum(c.candidates for c in choices),
        "valid": sum(c.valid for c in choices), "records_written": timing.records,
        "kernels_scheduled_in_build": tuned.scheduled_kernels,  # what the final build took from the database
        "flop_coverage_class_only": by_class / flops if flops else 0.0,
        "flop_coverage_valid": transferable / flops if flops else 0.0,
        "kernels_via_anchor": sum(1 for c in choices if c.valid and c.match == ANCHOR),
        "kernels_via_samples": sum(1 for c in choices if c.valid and c.match == SAMPLED),
        # of those, the ones whose candidates came from a short search of their design space (short_tune)
        "kernels_short_tuned": sum(1 for c in choices if c.valid and any(r.source_model == SHORT_TUNE
                                                                         for r in c.rows)),
        # kernels whose chosen schedule a rule built (recommender.rules), and their share of the FLOPs
        "kernels_chosen_rule": sum(1 for c in choices if chosen_kind(c) == RULE),
        "flop_share_chosen_rule": round(sum(c.kernel.total_flops for c in choices
                                            if chosen_kind(c) == RULE) / flops, 4) if flops else 0.0,
        # candidate measurements per source kind (the defaults apart)
        "measured_by_kind": measured_by_kind(choices),
        "flop_coverage_transferred": transferred / flops if flops else 0.0,
        **default_time(choices),
        "flop_coverage_chosen": covered / flops if flops else 0.0,
        "import_s": round(import_s, 2),
        "workers_wait_s": round(workers_wait_s, 2),  # workers' start not hidden by the import (not search time)
        "search_s": round(sum(c.wall_s for c in choices), 2),
        "replay_s": round(sum(c.replay_s for c in choices), 2),
        "build_s": round(sum(c.build_s for c in choices), 2),
        "build_wall_s": round(sum(max(0.0, c.wall_s - c.replay_s - c.run_s) for c in choices), 2),
        "run_s": round(sum(c.run_s for c in choices), 2),
        "final_compile_and_time_s": round(timing.compile_s, 2),
        "model_latency_tuned_s": tuned.median if tuned.ok else None,
        "model_latency_untuned_s": untuned.median if untuned is not None and untuned.ok else None,
        # the model timings that got no clean run (every try stalled by another process, measurer._timed)
        "model_timing_caveats": {k: r.caveat for k, r in measured if r.ok and r.caveat},
        "errors": {k: r.error[:300] for k, r in measured if not r.ok},
    }
