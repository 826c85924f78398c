"""Where the benchmark scripts keep their results: one folder per target key (benchmarks/results/<target-key>/),
so that a probe run on one CPU never overwrites another CPU's figures."""
from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def results_dir(target_key: str, create: bool = True) -> Path:
    """benchmarks/results/<target_key>/, created if it does not exist yet (unless `create` is False: a reader
    asking for another target's figures leaves no empty folder behind)."""
    path = ROOT / "benchmarks" / "results" / target_key
    if create:
        path.mkdir(parents=True, exist_ok=True)
    return path


def run_header(target: object) -> dict:
    """What every probe's results file starts with: the target it measured under, its key, the CPU and the date."""
    import time
    from recommender.target.spec import cpu_name
    return {"target": target.config, "target_key": target.key, "cpu": cpu_name(), "date": time.strftime("%Y-%m-%d")}
