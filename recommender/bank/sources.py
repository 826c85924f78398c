"""The bank's source kernels as the featurizer reads them: FLOPs and argument shapes from each model's meta."""
from __future__ import annotations

from pathlib import Path

from featurize.candidate_features import SourceKernel

from .store import bank_models, read_meta


def read_source_kernels(bank_dir: Path) -> dict[tuple[str, str], SourceKernel]:
    """(model, kernel) -> FLOPs and arguments of every kernel in the bank's meta.json files."""
    out = {}
    for folder in bank_models(Path(bank_dir)):
        meta = read_meta(folder)
        for name, k in (meta.get("kernels") or {}).items():
            args = tuple((tuple(a["shape"]), a["dtype"]) for a in k.get("args", []))
            out[(meta["model"], name)] = SourceKernel(float(k.get("flops") or 0.0), args)
    return out
