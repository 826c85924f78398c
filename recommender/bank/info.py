"""Summaries of a bank: models, kernels, classes, records and best latencies (no TVM needed)."""
from __future__ import annotations

import tempfile
from pathlib import Path

from featurize.trace_schema import MalformedTrace, check_trace

from ..core.errors import BankError
from ..target.folders import other_cpu_note, rankers_for, repo_models_dir, resolve
from .index import IndexedBank, refresh_after_add
from .location import bank_files, bank_location, is_url
from .store import META_FILE, bank_models, locked, pack, read_meta, read_records, write_meta


def model_summary(folder: Path) -> dict:
    meta = read_meta(folder)
    workloads, records = read_records(folder)
    kernels = meta.get("kernels", {})
    tuned = {n: k for n, k in kernels.items() if k.get("tuned")}
    valid = [r for r in records if r.ok]
    best = {}
    for r in valid:
        best[r.workload_index] = min(best.get(r.workload_index, float("inf")), r.latency)
    # model latency estimate of the tuned kernels: sum over tuned kernels of weight * best
    est = sum(k.get("weight", 1) * (k.get("best_s") or 0.0) for k in tuned.values())
    return {"model": meta["model"], "target_key": meta["target_key"], "kernels": len(kernels),
            "tuned_kernels": len(tuned), "done_kernels": sum(k.get("status") == "done" for k in tuned.values()),
            "classes": len({k["class_key"] for k in kernels.values()}), "workloads": len(workloads),
            "records": len(records), "valid_records": len(valid),
            "tuned_kernels_latency_ms": round(est * 1e3, 3),
            "tuning_hours": sum(k.get("seconds", 0.0) for k in kernels.values()) / 3600}


def bank_summary(bank_dir: Path) -> list[dict]:
    return [model_summary(folder) for folder in bank_models(bank_dir)]


def import_workdir(work_dir: Path, bank_dir: Path, name: str, target_key: str, target: dict) -> dict:
    """Add an existing MetaSchedule work dir (database_workload.json + database_tuning_record.json) to the
    bank as model `name`. Its kernels are described from the workloads it holds."""
    from tvm.s_tir import meta_schedule as ms

    from ..frontend.kernels import kernel_from_mod
    for f in ("database_workload.json", "database_tuning_record.json"):
        if not (work_dir / f).is_file():
            raise BankError(f"{work_dir} is not a MetaSchedule work dir: {f} is missing")
    folder = bank_dir / name
    if (folder / META_FILE).exists():
        raise BankError(f"the bank already has a model named {name} ({folder}); choose another --name")
    with tempfile.TemporaryDirectory() as scratch:
        packed = Path(scratch) / "packed"
        pack(str(work_dir), packed)
        workloads, records = read_records(packed)  # validates the files
        for n, r in enumerate(records, 1):
            try:
                check_trace(r.trace_json)
            except MalformedTrace as err:
                raise BankError(f"record {n} of {work_dir / 'database_tuning_record.json'}: "
                                f"malformed trace: {err}") from None
        kernels = {}
        for i, wjson in enumerate(workloads):
            try:
                mod = ms.database.Workload.from_json(wjson).mod
            except Exception as err:
                raise BankError(f"workload {i} of {work_dir} is not a TIR module: {str(err).splitlines()[-1]}") from err
            k = kernel_from_mod(f"workload_{i}", mod)
            mine = [r for r in records if r.workload_index == i]
            lat = [r.latency for r in mine if r.ok]
            kernels[k.name] = dict(k.to_json(), flop_share=None, tuned=True, status="done", trials=len(mine),
                                   valid=len(lat), best_s=min(lat) if lat else None, seconds=0.0)
        record_targets = sorted({str(r.target.get("mcpu", "")) if isinstance(r.target, dict) else str(r.target)
                                 for r in records})
        with locked(folder, f"bank import {name}"):
            pack(str(work_dir), folder)
            write_meta(folder, {"model": name, "spec": f"import:{work_dir}", "target": target,
                                "target_key": target_key, "record_targets": record_targets, "kernels": kernels})
    refresh_after_add(bank_dir)  # every add to a bank leaves its index fresh
    return model_summary(folder)


def bank_warnings(bank_dir: Path | str, target_key: str) -> list[str]:
    """`other_cpu_note` of a bank folder, from its models' meta files alone (no records read); of a bank at a
    URL, from its index."""
    where = bank_location(bank_dir)
    if not isinstance(where, Path):
        return other_cpu_note({m["model"]: m["target_key"] for m in IndexedBank(bank_files(where)).models.values()},
                              target_key)
    metas = [read_meta(f) for f in bank_models(where)]
    return other_cpu_note({m["model"]: m["target_key"] for m in metas}, target_key)


def donor_folders(target_key: str, bank: str | None = None, recommender: str | None = None,
                  with_recommender: bool = True) -> tuple[Path | str, Path | None, list[str]]:
    """(bank, recommender folder or None, notes) for a run that reads them: the given folders, else this
    target's own, else the nearest target's (`target.folders.resolve`), with the lines to tell the user: the
    nearest target's choice, or, for a given bank or this target's own, the models in it measured on another
    CPU (`bank_warnings`). A bank at a URL (`location.bank_location`) stays one."""
    notes: list[str | None] = []
    if bank:
        bank_dir = bank_location(bank)
        notes += bank_warnings(bank_dir, target_key) if is_url(bank_dir) or bank_dir.is_dir() else []
    else:
        folder, note = resolve(repo_models_dir(), target_key, "bank")
        bank_dir = folder / "bank"
        notes.append(note)
        if note is None and bank_dir.is_dir():  # this CPU's own bank, which may hold models imported from another
            notes += bank_warnings(bank_dir, target_key)
    rec = None
    if with_recommender and recommender:
        rec = Path(recommender)
    elif with_recommender:
        rec, note = rankers_for(repo_models_dir(), target_key)
        if rec / "bank" != bank_dir:
            notes.append(note)
    return bank_dir, rec, [n for n in notes if n]
