"""Finished evaluation folds kept on disk, so that a killed `schedrec evaluate` resumes where it stopped.

One JSON file beside the evaluation (`rankers/evaluation.partial.json`): the configuration it belongs to (feature
version and a digest of the rows) and, per fold, the held-out kernels' outcomes (training.metrics) and the fit's
wall time. A file of another configuration is started afresh; the evaluation removes it once it has written its
result. Outcomes read back are the ones a fresh run computes, so a resumed evaluation writes the same bytes.
"""
from __future__ import annotations

import json
from pathlib import Path

from recommender.core.fileio import atomic_write_json

PARTIAL_FILE = "evaluation.partial.json"


def entry_key(run: str, name: str, params: dict | None, model: str) -> str:
    """The key of one fit: the pass it belongs to (`lomo <train share> <seed>`, `heldout`), the ranker, its
    parameters (a seed-spread pass differs by them), the held-out model(s)."""
    return json.dumps([run, name, params or {}, model], sort_keys=True, default=str)


class FoldStore:
    """Fold outcomes of one evaluation configuration, saved after every fold."""

    def __init__(self, path: Path, config: dict) -> None:
        self.path = Path(path)
        self.config = json.loads(json.dumps(config, sort_keys=True, default=str))
        self.entries: dict[str, dict] = {}
        if self.path.exists():
            try:
                saved = json.loads(self.path.read_text())
            except (OSError, ValueError):
                saved = {}  # a torn or foreign file: start afresh (it is rewritten whole after each fold)
            if isinstance(saved, dict) and saved.get("config") == self.config:
                self.entries = dict(saved.get("entries", {}))
        self.resumed = len(self.entries)

    def get(self, key: str) -> dict | None:
        """{"outcomes": [...], "seconds": s} of a finished fit, or None."""
        return self.entries.get(key)

    def put(self, key: str, outcomes: list, seconds: float) -> None:
        # stored as JSON gives it back: a resumed run reads what a fresh one keeps
        self.entries[key] = json.loads(json.dumps({"outcomes": outcomes, "seconds": round(seconds, 3)}))
        self.path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_json(str(self.path), {"config": self.config, "entries": self.entries})

    def remove(self) -> None:
        self.path.unlink(missing_ok=True)
