"""Transfer-matrix rows: every replayed candidate of a kernel with its measurement, as gzipped JSON lines.

A row is one (target kernel, candidate) pair: the target kernel's fields (`target_model`, `target_kernel`,
`class_key`, `weight`, `flops`, `target_args`, `target_tuned_s` = the kernel's own best bank latency when it
has one), the source (`source_model`, `source_kernel`, `source_class_key`, `source_rank`, `source_latency_s`,
`match` = class | anchor | default), the replayed `trace` (target block names, no postprocessing part), and
the outcome (`status`, `error`, `costs`, `latency_s`). The kernel's default schedule is a row with
`match = "default"`; it also carries the kernel's MetaSchedule `workload` JSON so rankers can featurize it.
"""
from __future__ import annotations

import json
import statistics
from collections import defaultdict
from pathlib import Path
from typing import Callable

from .bank import BankError, read_json_lines
from .fileio import gzip_writer, replacing
from .measure.measurer import BUILD_ERROR, CRASH, RUNTIME_ERROR, TIMEOUT, WRONG_RESULT
from .replay import CLASS_MISMATCH, POSTPROC_FAILURE, REPLAY_CRASH, REPLAY_ERROR, REPLAY_TIMEOUT

REQUIRED = ("target_model", "target_kernel", "class_key", "match", "status")
# why a candidate has no latency
FAILURE_STATUSES = (CLASS_MISMATCH, REPLAY_ERROR, POSTPROC_FAILURE, REPLAY_TIMEOUT, REPLAY_CRASH, BUILD_ERROR,
                    RUNTIME_ERROR, TIMEOUT, CRASH, WRONG_RESULT)


def kernel_rows(choice: object, model: str, tuned_best_s: float | None = None) -> list[dict]:
    """The rows of one transferred kernel (a transfer.KernelChoice)."""
    from tvm.s_tir import meta_schedule as ms
    k = choice.kernel
    base = {"target_model": model, "target_kernel": k.name, "class_key": k.class_key, "weight": k.weight,
            "flops": k.flops, "target_args": [{"shape": list(s), "dtype": d} for s, d in k.args],
            "target_tuned_s": tuned_best_s}
    rows = []
    for r in choice.rows:
        row = dict(base, **r)
        if r["match"] == "default":
            row["workload"] = ms.database.Workload(k.mod).as_json()
        rows.append(row)
    return rows


def write_rows(path: Path, rows: list[dict]) -> None:
    """Write rows as gzipped JSON lines, atomically (readers see the old file or the new one)."""
    with replacing(str(path)) as tmp, gzip_writer(tmp, text=True) as f:
        for row in rows:
            f.write(json.dumps(row, separators=(",", ":")) + "\n")


def read_rows(path: Path) -> list[dict]:
    """Rows of a transfer-matrix file, validated; a damaged file raises BankError naming it."""
    rows = read_json_lines(path, what="transfer-matrix file")
    for n, row in enumerate(rows, 1):
        if not isinstance(row, dict) or any(f not in row for f in REQUIRED):
            raise BankError(f"corrupt transfer-matrix file {path}, row {n}: expected an object with {', '.join(REQUIRED)}")
    return rows


def rows_to_resume(path: Path, remeasure: tuple[str, ...], log: Callable[[str], None]) -> list[dict]:
    """The rows a resumed run keeps from `path` (none if it does not exist yet). Every kernel that has a
    candidate whose status is in `remeasure` is dropped from the file, so the run measures it again (after a
    fix to the replay, the build or the check)."""
    rows = read_rows(path) if path.exists() else []
    again = {r["target_kernel"] for r in rows if r["status"] in remeasure}
    if again:
        rows = [r for r in rows if r["target_kernel"] not in again]
        write_rows(path, rows)
        log(f"{path.name}: measuring {len(again)} kernels again (candidates with status {', '.join(remeasure)})")
    return rows


def kernel_stats(rows: list[dict]) -> dict:
    """Per-kernel view of rows: default latency, valid candidate latencies, tuned best."""
    out: dict[tuple[str, str], dict] = {}
    for r in rows:
        key = (r["target_model"], r["target_kernel"])
        k = out.setdefault(key, {"default_s": None, "valid_s": [], "failed": 0, "tuned_s": r.get("target_tuned_s"),
                                 "weight": r.get("weight", 1), "flops": r.get("flops", 0.0),
                                 "rank0_s": []})
        if r["match"] == "default":
            k["default_s"] = r.get("latency_s")
        elif r["status"] == "ok" and r.get("latency_s"):
            k["valid_s"].append(r["latency_s"])
            if r.get("source_rank") == 0:
                k["rank0_s"].append(r["latency_s"])
        else:
            k["failed"] += 1
    return out


def summarize(rows: list[dict]) -> dict:
    """How rankable the matrix is: candidates per kernel, best vs median candidate, best vs default/tuned."""
    per_model: dict[str, list[dict]] = defaultdict(list)
    for (model, _), k in kernel_stats(rows).items():
        per_model[model].append(k)

    def stats(ks: list[dict]) -> dict:
        with_valid = [k for k in ks if k["valid_s"]]
        med = lambda xs: round(statistics.median(xs), 4) if xs else None  # noqa: E731
        return {
            "kernels": len(ks),
            "kernels_with_valid": len(with_valid),
            "candidates_per_kernel": round(sum(len(k["valid_s"]) + k["failed"] for k in ks) / len(ks), 2) if ks else 0,
            "valid_per_kernel": round(sum(len(k["valid_s"]) for k in ks) / len(ks), 2) if ks else 0,
            "median_over_best": med([statistics.median(k["valid_s"]) / min(k["valid_s"]) for k in with_valid]),
            "worst_over_best": med([max(k["valid_s"]) / min(k["valid_s"]) for k in with_valid]),
            "share_best_beats_default": round(sum(1 for k in with_valid if k["default_s"] and
                                                  min(k["valid_s"]) < k["default_s"]) / len(with_valid), 3)
            if with_valid else None,
            "default_over_best": med([k["default_s"] / min(k["valid_s"]) for k in with_valid if k["default_s"]]),
            "best_over_tuned": med([min(k["valid_s"]) / k["tuned_s"] for k in with_valid if k["tuned_s"]]),
            "rank0_best_over_best": med([min(k["rank0_s"]) / min(k["valid_s"]) for k in with_valid if k["rank0_s"]]),
            # kernels where the original transfer-tuning pool (rank-0 records only) misses the best by > 5%
            "share_rank0_misses_best": round(sum(1 for k in with_valid if not k["rank0_s"] or
                                                 min(k["rank0_s"]) > 1.05 * min(k["valid_s"])) / len(with_valid), 3)
            if with_valid else None,
        }

    return {"all": stats([k for ks in per_model.values() for k in ks]),
            "models": {m: stats(ks) for m, ks in sorted(per_model.items())}}
