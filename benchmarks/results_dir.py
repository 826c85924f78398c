"""Where the benchmark scripts keep their results: one folder per target key (benchmarks/results/<target-key>/),
so that a probe run on one CPU never overwrites another CPU's figures."""
from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def results_dir(target_key: str) -> Path:
    """benchmarks/results/<target_key>/, created if it does not exist yet."""
    path = ROOT / "benchmarks" / "results" / target_key
    path.mkdir(parents=True, exist_ok=True)
    return path
