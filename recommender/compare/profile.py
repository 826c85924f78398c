"""`schedrec profile`: build a model with a schedule database and time every call it makes."""
from __future__ import annotations

import time
from pathlib import Path

from ..core.errors import SchedrecError
from ..core.fileio import atomic_write_json, display_path, read_json
from ..measure import MeasureSettings, Measurer
from ..target.spec import TargetSpec
from ..measure.vm_profile import COLD, summarize


def profile_model(spec: str, target: TargetSpec, database_dir: Path | None, runs: int = 20,
                  pack_weights: bool | None = None, fast_math: bool = True, cold: bool = False) -> dict:
    """The model built with `database_dir`'s schedules (none: MetaSchedule's defaults), every call timed
    (`measure.vm_profile.summarize`). `pack_weights` as the transfer that wrote the database imported the model
    (None: read it from the run.json beside the database; absent, False). With `cold`, each kernel with a record
    is also timed alone with cold caches (`vm_profile.COLD`)."""
    import tvm

    from ..frontend.model_import import import_model
    if database_dir is not None and not (database_dir / "database_tuning_record.json").exists():
        raise SchedrecError(f"{database_dir} is not a MetaSchedule database (no database_tuning_record.json)")
    if runs < 1:
        raise SchedrecError("--runs must be at least 1")
    if pack_weights is None:
        run_json = database_dir.parent / "run.json" if database_dir is not None else None
        pack_weights = bool(run_json and run_json.exists() and read_json(run_json).get("pack_weights"))
    model = import_model(spec, target.tvm(), pack_weights=pack_weights)
    kernels = {gv.name_hint for gv, f in model.mod.functions.items() if isinstance(f, tvm.tirx.PrimFunc)}
    inputs = list(zip(model.input_shapes, model.input_dtypes))
    with Measurer(target.config, MeasureSettings(fast_math=fast_math)) as measurer:
        with measurer.model_library(model.mod, str(database_dir) if database_dir else None,
                                    with_records=True) as built:
            if not built.ok:
                raise SchedrecError(f"the model does not build: {built.status}: {built.error}")
            raw = measurer.profile_model_library(built.path, inputs, runs)
        cold_s = cold_kernel_times(model.mod, database_dir, target, measurer) if cold and database_dir else None
    out = summarize(raw, kernels, built.recorded_s, cold_s)
    return {"model": model.name, "spec": spec, "target_key": target.key, "target": target.config,
            "threads": int(target.config.get("num-cores", 1)),
            "database": display_path(database_dir) if database_dir else None, "pack_weights": pack_weights,
            "fast_math": fast_math, "date": time.strftime("%Y-%m-%d"),
            **({"cold_settings": COLD} if cold_s is not None else {}), **out}


def cold_kernel_times(mod: object, database_dir: Path, target: TargetSpec, measurer: Measurer) -> dict[str, float]:
    """Seconds of each kernel of `mod` that has a record in the database (the record MetaScheduleApplyDatabase
    applies), its schedule timed alone with cold caches (`vm_profile.COLD`); a kernel whose timing fails is left
    out."""
    from tvm.s_tir import meta_schedule as ms

    from ..measure.worker import applied_records, record_module
    records = applied_records(mod, ms.database.JSONDatabase(work_dir=str(database_dir), allow_missing=False),
                              target.tvm())
    names = sorted(records)
    scheduled = [record_module(records[name]) for name in names]
    results = measurer.measure(scheduled, settings=MeasureSettings(**COLD, fast_math=measurer.settings.fast_math))
    return {name: r.median for name, r in zip(names, results) if r.ok}


def write_profile(data: dict, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_json(str(path), data)
