"""The output of a transfer: a MetaSchedule JSON database with one record per kernel whose transferred
schedule was chosen, which `relax.transform.MetaScheduleApplyDatabase` (or `compile_relax`) applies as is."""
from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from .choice import KernelChoice


def write_database(choices: list[KernelChoice], target: object, db_dir: Path) -> int:
    """Write the chosen schedules into a fresh folder that then replaces `db_dir` (an old database is never
    edited in place); returns the number of records."""
    db_dir.parent.mkdir(parents=True, exist_ok=True)
    fresh = Path(tempfile.mkdtemp(prefix=".tmp-db-", dir=db_dir.parent))
    try:
        n = _fill_database(choices, target, fresh)
        os.chmod(fresh, 0o755)
        old = db_dir.with_name(f".old-{db_dir.name}")
        shutil.rmtree(old, ignore_errors=True)
        if db_dir.exists():
            os.replace(db_dir, old)
        os.replace(fresh, db_dir)
        shutil.rmtree(old, ignore_errors=True)
    except BaseException:
        shutil.rmtree(fresh, ignore_errors=True)
        raise
    return n


def _fill_database(choices: list[KernelChoice], target: object, db_dir: Path) -> int:
    from tvm.s_tir import meta_schedule as ms
    db = ms.database.JSONDatabase(work_dir=str(db_dir))
    n = 0
    for c in choices:
        if c.chosen_sch is None:
            continue
        commit_schedule(db, c.kernel.mod, c.chosen_sch, c.chosen_costs, target)
        n += 1
    return n


def commit_schedule(db: object, mod: object, sch: object, costs: list[float], target: object) -> None:
    """One tuning record in the MetaSchedule database `db`: the schedule `sch` of kernel `mod` and its costs."""
    from tvm.s_tir import meta_schedule as ms
    workload = db.commit_workload(mod)
    db.commit_tuning_record(ms.database.TuningRecord(
        sch.trace, workload, [float(x) for x in costs], target, ms.arg_info.ArgInfo.from_prim_func(mod["main"])))
