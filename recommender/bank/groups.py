"""A bank model's record groups: per workload with a valid record, its kernel (name, class, weight, FLOPs,
arguments) and its valid records fastest first. The one definition that the full read of a bank
(`transfer.candidates.BankIndex`) and its index (`bank.index`) share, so both name and rank donors alike."""
from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

from featurize.tir_structure import class_key

from ..core.errors import BankError
from ..measure.args import kernel_args
from .store import BankRecord


@dataclass(frozen=True)
class RecordGroup:
    """One tuned kernel of a bank model: `records` index the model's records (as `read_records` returns them),
    fastest first (ties in file order), and `latencies` are theirs."""

    workload: int
    kernel: str  # task name in the model's meta ("workload_<i>" if meta does not name it)
    class_key: str
    weight: int
    flops: float | None
    args: list  # [{"shape", "dtype"}] as the kernel's TIR has them
    records: tuple[int, ...]
    latencies: tuple[float, ...]


def workload_mod(workload: object, where: object, index: int) -> object:
    """The TIR module of a MetaSchedule workload JSON value; a BankError naming it when TVM refuses it."""
    from tvm.s_tir import meta_schedule as ms
    try:
        return ms.database.Workload.from_json(workload).mod
    except Exception as err:
        text = str(err).strip()
        raise BankError(f"{where}: workload {index} is not a valid MetaSchedule workload: "
                        f"{text.splitlines()[-1] if text else err}") from err


def record_groups(folder: Path, meta: dict, workloads: list,
                  records: list[BankRecord]) -> list[tuple[RecordGroup, object]]:
    """(group, its TIR module) for every workload of the model with a valid record, by workload index."""
    entries = meta.get("kernels", {})
    names = {(k["class_key"], json.dumps(k["args"])): name for name, k in entries.items()}
    valid: dict[int, list[int]] = defaultdict(list)
    for i, r in enumerate(records):
        if r.ok:
            valid[r.workload_index].append(i)
    out = []
    for wi, idx in sorted(valid.items()):
        mod = workload_mod(workloads[wi], folder, wi)
        key = class_key(mod)
        args = [{"shape": list(s), "dtype": d} for s, d in kernel_args(mod)]
        name = names.get((key, json.dumps(args)), f"workload_{wi}")
        ordered = sorted(idx, key=lambda i: records[i].latency)
        entry = entries.get(name, {})
        flops = entry.get("flops")
        out.append((RecordGroup(wi, name, key, int(entry.get("weight", 1)),
                                float(flops) if flops is not None else None, args, tuple(ordered),
                                tuple(records[i].latency for i in ordered)), mod))
    return out
