"""A bank that learns from every run: a finished transfer or replay run's measured candidates filed in the bank as
a model of their own (Lorien-style accumulation), so that the next transfer and the next training run on this
CPU can use what that run measured.

Only what the run checked and timed goes in: each kernel whose default was measured, and each candidate whose
output matched the unscheduled kernel's and that has a latency (a candidate a budget-0 run only checked ran
once and is left out). The records are MetaSchedule tuning records (the candidate's replayed trace, its
timings, the target, the kernel's arguments) under the kernel's workload as the run recorded it, so the bank
reads, replays and resumes them like the records of `schedrec bank tune`.

Refused: a run that has not finished (no report.json; rerunning its command finishes it), a run measured on
another CPU than the bank's, a run with no checked and timed candidate, a name the bank already has (a bank
folder is never replaced), a model of this CPU's held-out sets, under its own name or another (it would stop
being held out without anyone noticing), and a model the bank already holds (its kernels would count twice in
the next training and donor pools) unless asked (`allow_model_in_bank`, `--allow-model-in-bank`), which is then
said and recorded in the new model's meta.json.

Idempotent: the records are fingerprinted (`records_sha256` in meta.json); a run already filed (a rerun, or the
same records under another --name) adds nothing and says where it is. An add-run killed before its meta.json
leaves a folder no reader lists; rerunning it completes that folder.
"""
from __future__ import annotations

import hashlib
import json
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

from featurize.trace_schema import MalformedTrace, check_trace

from ..core.errors import BankError
from ..core.fileio import read_json
from ..core.row_files import read_rows
from ..core.rows import OK, CandidateRow
from .index import refresh_after_add
from .info import model_summary
from .store import RECORD_FILE, WORKLOAD_FILE, bank_models, locked, pack, read_meta, write_meta


def held_out_names(target_dir: Path) -> set[str]:
    """The models this CPU keeps out of its bank: its held-out replays, its comparisons and the held-out rows of
    its latency table."""
    names = {p.name for kind in ("heldout", "compare") if (target_dir / kind).is_dir()
             for p in (target_dir / kind).iterdir() if p.is_dir()}
    latency = target_dir / "latency.json"
    if latency.exists():
        names |= {n for n, r in read_json(latency).items() if isinstance(r, dict) and r.get("kind") == "held-out"}
    return names


def row_record(row: CandidateRow, target: dict) -> list:
    """A measured row as a tuning record's JSON value (trace, run seconds, target, argument info), after its trace
    is checked (BankError if malformed): what `bank add-run` files, and `bank seed` for rule instances."""
    try:
        check_trace(row.trace)
    except MalformedTrace as err:
        raise BankError(f"kernel {row.target_kernel}: a candidate's trace is malformed: {err}") from None
    args_info = [["TENSOR", dtype, list(shape)] for shape, dtype in row.target_args]
    return [row.trace, list(row.costs or [row.latency_s]), target, args_info]


def run_records(rows: list[CandidateRow], target: dict) -> tuple[list, list, dict]:
    """(workload JSON values, record JSON values, kernels of meta.json) from a run's rows: every kernel whose
    default was measured and its valid measured candidates."""
    by_kernel: dict[str, list[CandidateRow]] = defaultdict(list)
    for r in rows:
        by_kernel[r.target_kernel].append(r)
    workloads, records, kernels = [], [], {}
    for name, rs in by_kernel.items():
        default = next((r for r in rs if r.is_default), None)
        if default is None or default.workload is None or not default.ok:
            continue  # not measured beside its default (a check-only kernel), or no workload recorded
        good = [r for r in rs if not r.is_default and r.status == OK and r.latency_s and r.trace and r.costs]
        if not good:
            continue
        wi = len(workloads)
        workloads.append(default.workload)
        records += [[wi, row_record(r, target)] for r in good]
        kernels[name] = {"name": name, "weight": default.weight, "flops": default.flops,
                         "kind": default.class_key.split("/")[0], "class_key": default.class_key,
                         "args": [{"shape": list(s), "dtype": d} for s, d in default.target_args],
                         "flop_share": None, "tuned": True, "status": "done", "trials": len(good),
                         "valid": len(good), "best_s": min(r.latency_s for r in good),
                         "default_s": default.latency_s, "seconds": 0.0}
    return workloads, records, kernels


ALLOW_FLAG = "--allow-model-in-bank"  # the CLI's name for `allow_model_in_bank`, quoted in messages


def records_sha256(workloads: list, records: list) -> str:
    """A fingerprint of what a run files (its workloads and records): the same run filed again has the same."""
    h = hashlib.sha256()
    for value in (workloads, records):
        h.update(json.dumps(value, sort_keys=True, separators=(",", ":")).encode())
    return h.hexdigest()


def add_run(run_dir: Path, bank_dir: Path, target_key: str, target: dict, name: str | None = None,
            allow_model_in_bank: bool = False, log=None) -> dict:
    """File the finished run in `run_dir` (its run.json, report.json and candidates.jsonl.gz) in the bank
    `bank_dir` of `target_key` as model `name` (default: the run's model); returns the model's summary with
    `added` (False: this run was filed before, nothing written) and `overridden` (what `allow_model_in_bank`
    let through). See the module doc for what is refused."""
    log = log or (lambda m: print(m, file=sys.stderr))
    run_file, rows_file = run_dir / "run.json", run_dir / "candidates.jsonl.gz"
    for f in (run_file, rows_file):
        if not f.is_file():
            raise BankError(f"{run_dir} is not a transfer or replay folder: {f.name} is missing")
    if not (run_dir / "report.json").is_file():
        raise BankError(f"{run_dir} holds an unfinished run (no report.json): run its transfer or replay command "
                        f"again to finish it (it resumes), then add it")
    run = read_json(run_file, error=BankError)
    if run.get("target_key") != target_key:
        raise BankError(f"{run_dir} was measured on {run.get('target_key')!r}, not {target_key!r}: its timings "
                        f"would mislead this CPU's rankers; add it to the bank of {run.get('target_key')}")
    model = run.get("model")
    name = name or model
    if not name:
        raise BankError(f"{run_file} names no model: give --name")
    held = held_out_names(bank_dir.parent)
    for which in dict.fromkeys(n for n in (name, model) if n):
        if which in held:
            raise BankError(f"{which} is one of {target_key}'s held-out models (models/{target_key}/heldout, "
                            f"compare or latency.json): filed in the bank{'' if which == name else f' as {name}'} "
                            f"it would stop being held out")
    # the rows file is only ever replaced whole (row_files.write_rows): a rerun of the run beside us is no harm
    workloads, records, kernels = run_records(read_rows(rows_file), target)
    if not records:
        raise BankError(f"{run_dir} holds no measured, output-checked candidate beside a measured default")
    digest = records_sha256(workloads, records)
    folder = bank_dir / name
    overridden: list[str] = []
    bank_dir.mkdir(parents=True, exist_ok=True)
    with locked(bank_dir, f"bank add-run {name}"):  # two add-runs never both pass the checks below
        metas = {f.name: read_meta(f) for f in bank_models(bank_dir)}
        filed = next((n for n, m in metas.items() if (m.get("source") or {}).get("records_sha256") == digest), None)
        if filed is not None:
            log(f"{run_dir} is in the bank already, as {filed} (the same records): nothing added"
                + ("" if filed == name else f" under {name}"))
            refresh_after_add(bank_dir)  # an add-run killed after its meta.json left the index stale
            return {**model_summary(bank_dir / filed), "added": False, "overridden": []}
        if name in metas:
            raise BankError(f"the bank already has a model named {name} ({folder}); a bank folder is never "
                            f"replaced: give another --name")
        same = sorted(n for n, m in metas.items()
                      if model and model in (m.get("model"), (m.get("source") or {}).get("model")))
        if same:
            what = (f"the bank already holds {model} (as {', '.join(same)}): filed again, its kernels would count "
                    f"twice in the next training and donor pools")
            if not allow_model_in_bank:
                raise BankError(f"{what}; pass {ALLOW_FLAG} (with --name) to file this run beside it anyway")
            overridden.append(what)
            log(f"override ({ALLOW_FLAG}): {what}; filed as {name} all the same")
        if folder.exists():
            log(f"{folder} holds no meta.json (an add-run stopped before its end): completing it")
        with tempfile.TemporaryDirectory() as scratch:
            for file, lines in ((WORKLOAD_FILE, workloads), (RECORD_FILE, records)):
                with open(Path(scratch) / file, "w", encoding="utf-8") as f:
                    f.writelines(json.dumps(x) + "\n" for x in lines)
            with locked(folder, f"bank add-run {name}"):
                pack(scratch, folder)
                # meta.json last: until it exists no reader lists the model, and a rerun completes the folder
                write_meta(folder, {"model": name, "spec": run.get("spec", ""), "target": target,
                                    "target_key": target_key,
                                    "source": {"run": str(run_dir), "model": model, "selector": run.get("selector"),
                                               "per_kernel": run.get("per_kernel"), "budget": run.get("budget"),
                                               "records_sha256": digest, "overridden": overridden},
                                    "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                                    "kernels": kernels})
    refresh_after_add(bank_dir)  # every add to a bank leaves its index fresh
    return {**model_summary(folder), "added": True, "overridden": overridden}
