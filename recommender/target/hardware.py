"""A target's hardware as rankers trained across CPUs see it: the published figures of its CPU family.

Read from `cpus.json` beside this file by the target key's LLVM CPU name, and its cores from the key, never
from the host, so that a ranker trained on any machine is the same model and a target is described the same
wherever it is featurized. A CPU that is not in the table gets the defaults of its vector width
(`folders.vector_bits`) and a note saying so.
"""
from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

from featurize.hardware_features import Hardware

from ..core.errors import TargetError
from .folders import parse_key, vector_bits

CPU_TABLE = Path(__file__).with_name("cpus.json")
_FIELDS = ("lanes", "l1d_kib", "l2_kib", "l3_mib", "flops_per_cycle")


@lru_cache(maxsize=None)
def _table() -> dict:
    return json.loads(CPU_TABLE.read_text(encoding="utf-8"))


def hardware_for(target_key: str) -> tuple[Hardware, str | None]:
    """(the Hardware of target `target_key`, None) from the table, or (defaults, a one-line note) for a CPU
    the table does not hold. A key without a core count is refused: every ratio needs it."""
    mcpu, cores = parse_key(target_key)
    if cores < 1:
        raise TargetError(f"target key {target_key!r} names no core count (llvm-<mcpu>-<cores>c)")
    table = _table()
    spec = table["cpus"].get(mcpu)
    note = None
    if spec is None:
        bits = vector_bits(mcpu)
        spec = table["defaults"][str(bits)]
        note = (f"note: no published figures for CPU {mcpu!r} in {CPU_TABLE.name}: its hardware features use the "
                f"defaults of a {bits}-bit-vector CPU ({', '.join(f'{k} {spec[k]}' for k in _FIELDS)})")
    return Hardware(mcpu=mcpu, cores=cores, published=note is None, **{k: spec[k] for k in _FIELDS}), note


def known_cpus() -> list[str]:
    """The LLVM CPU names the table has figures for."""
    return sorted(_table()["cpus"])
