"""Transfer-matrix rows on disk: every replayed candidate of a kernel with its measurement, as gzipped JSON
lines, one `recommender.core.rows.CandidateRow` a line (fields: docs/DATA.md).

The kernel's default schedule is a row with `match == DEFAULT`; it also carries the kernel's MetaSchedule
`workload` JSON so rankers can featurize it, and the seconds spent on the kernel.
"""
from __future__ import annotations

import dataclasses
import json
import re
import statistics
from collections import defaultdict
from pathlib import Path
from typing import Callable

from .errors import BankError
from .fileio import read_json_lines, read_lines, write_json_lines
from .rows import DEFAULT, NOT_MEASURED, OK, REQUIRED, CandidateRow

# the key order of the files written before CandidateRow: rows are written in it so a rewritten file is
# byte-for-byte the file the old writer made (keys CandidateRow adds later go last)
_DISK_ORDER = ("target_model", "target_kernel", "class_key", "weight", "flops", "target_args", "target_tuned_s",
               "source_model", "source_kernel", "source_class_key", "source_rank", "source_latency_s", "match",
               "trace", "status", "error", "costs", "latency_s", "seconds", "workload")


def kernel_rows(choice: object, model: str, tuned_best_s: float | None = None) -> list[CandidateRow]:
    """The rows of one transferred kernel (a transfer.KernelChoice), with the target model filled in."""
    from tvm.s_tir import meta_schedule as ms
    rows = []
    for r in choice.rows:
        r = dataclasses.replace(r, target_model=model, target_tuned_s=tuned_best_s)
        if r.is_default:
            r = dataclasses.replace(r, workload=ms.database.Workload(choice.kernel.mod).as_json())
        rows.append(r)
    return rows


def _on_disk(row: CandidateRow) -> dict:
    obj = row.to_json()
    return {**{k: obj[k] for k in _DISK_ORDER if k in obj}, **obj}


def write_rows(path: Path, rows: list[CandidateRow]) -> None:
    """Write rows as gzipped JSON lines, atomically (readers see the old file or the new one)."""
    write_json_lines(path, (_on_disk(row) for row in rows))


def read_rows(path: Path) -> list[CandidateRow]:
    """Rows of a transfer-matrix file, validated; a damaged file raises BankError naming it and the row."""
    rows = []
    for n, obj in enumerate(read_json_lines(path, what="transfer-matrix file"), 1):
        where = f"corrupt transfer-matrix file {path}, row {n}"
        if not isinstance(obj, dict):
            raise BankError(f"{where}: expected a JSON object with {', '.join(REQUIRED)}")
        try:
            rows.append(CandidateRow.from_json(obj))
        except ValueError as err:  # a missing field (from_json names it) or a bad number
            raise BankError(f"{where}: {err}") from None
        except (TypeError, KeyError, AttributeError, OverflowError) as err:  # a field of the wrong shape
            raise BankError(f"{where}: {type(err).__name__}: {err}") from None
    return rows


_MATCH = re.compile(r'"match":"([^"\\]*)"')


def count_rows(path: Path) -> tuple[int, int]:
    """(rows, default rows) of a row file, the rows not parsed (a 30k-row folder: 1 s instead of 25). The writer
    puts `match` before every field that nests JSON (`_DISK_ORDER`), so the first `"match":"..."` on a line is the
    row's own (a string value holding that text is escaped); a line without one is parsed."""
    rows = defaults = 0
    for line in read_lines(path, "transfer-matrix file"):
        if not line.strip():
            continue
        m = _MATCH.search(line)
        rows += 1
        defaults += (m.group(1) if m else json.loads(line).get("match")) == DEFAULT
    return rows, defaults


def rows_to_resume(path: Path, remeasure: tuple[str, ...], log: Callable[[str], None]) -> list[CandidateRow]:
    """The rows a resumed run keeps from `path` (none if it does not exist yet). Every kernel that has a
    candidate whose status is in `remeasure` is dropped from the file, so the run measures it again (after a
    fix to the replay, the build or the check)."""
    rows = read_rows(path) if path.exists() else []
    again = {r.target_kernel for r in rows if r.status in remeasure}
    if again:
        rows = [r for r in rows if r.target_kernel not in again]
        write_rows(path, rows)
        log(f"{path.name}: measuring {len(again)} kernels again (candidates with status {', '.join(remeasure)})")
    return rows


def kernel_stats(rows: list[CandidateRow]) -> dict[tuple[str, str], dict]:
    """Per-kernel view of rows: default latency, valid candidate latencies, tuned best."""
    out: dict[tuple[str, str], dict] = {}
    for r in rows:
        k = out.setdefault(r.kernel_key, {"default_s": None, "valid_s": [], "failed": 0, "tuned_s": r.target_tuned_s,
                                          "weight": r.weight, "flops": r.flops, "rank0_s": []})
        if r.is_default:
            k["default_s"] = r.latency_s
        elif r.status == OK and r.latency_s:
            k["valid_s"].append(r.latency_s)
            if r.source_rank == 0:
                k["rank0_s"].append(r.latency_s)
        elif r.status != NOT_MEASURED:
            k["failed"] += 1
    return out


def summarize(rows: list[CandidateRow]) -> dict:
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
