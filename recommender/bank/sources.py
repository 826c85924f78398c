"""The bank's source kernels as the featurizer reads them: FLOPs and argument shapes from each model's meta."""
from __future__ import annotations

import json
from pathlib import Path

from featurize.candidate_features import SourceKernel

from ..core.errors import BankError
from .location import bank_files, bank_location
from .store import META_FILE, bank_models, read_meta


def read_source_kernels(bank_dir: Path | str) -> dict[tuple[str, str], SourceKernel]:
    """(model, kernel) -> FLOPs and arguments of every kernel in the bank's meta.json files (at a URL too)."""
    where = bank_location(bank_dir)
    if isinstance(where, Path):
        metas = [read_meta(folder) for folder in bank_models(where)]
    else:
        files = bank_files(where)
        metas = [_meta(files.read(f"{folder}/{META_FILE}"), f"{files}/{folder}") for folder in files.model_stamps()]
    out = {}
    for meta in metas:
        for name, k in (meta.get("kernels") or {}).items():
            args = tuple((tuple(a["shape"]), a["dtype"]) for a in k.get("args", []))
            out[(meta["model"], name)] = SourceKernel(float(k.get("flops") or 0.0), args)
    return out


def _meta(data: bytes, where: str) -> dict:
    try:
        meta = json.loads(data)
    except ValueError as err:
        raise BankError(f"corrupt {where}/{META_FILE}: {err}") from err
    if not isinstance(meta, dict) or "model" not in meta:
        raise BankError(f"corrupt {where}/{META_FILE}: missing model")
    return meta
