"""What --cluster costs on one machine: the same transfer matrix measured locally and on LocalClusters, its
wall time and its seconds per kernel (replay, build, run, as the default rows record them) each way, and
whether the rows agree (same candidates and statuses in the same order).

    python benchmarks/cluster_overhead.py --bank DIR [--models a,b] [--cap 2] [--repeat 2] [--rule-space N]
        [--clusters local:1,local:2] [--name cluster_overhead]

The bank needs 2 or more models (e.g. the test suite's two small CNNs, or a shipped bank with `--models` naming
two of its models: their kernels are measured against every other model's donors). The local run goes first and
again last, so that the machine's drift shows. Writes benchmarks/results/<target-key>/<name>.json.
Keep the machine otherwise idle.
"""
from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from recommender.core.errors import SchedrecError, run_script  # noqa: E402
from recommender.core.fileio import atomic_write_json, display_path  # noqa: E402
from results_dir import results_dir, run_header  # noqa: E402


def measure(way: str, bank: Path, out: Path, extra: list[str]) -> dict:
    """One matrix run (`local`, or a --cluster address) into `out`: its wall time and per-kernel seconds."""
    from recommender.core.row_files import read_rows
    argv = [sys.executable, "-m", "recommender.cli", "matrix", "--bank", str(bank), "--out", str(out), *extra]
    if way != "local":
        argv += ["--cluster", way]
    t0 = time.perf_counter()
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if done.returncode != 0:
        raise SchedrecError(f"{way}: {done.stderr.strip().splitlines()[-1]}")
    rows = [r for f in sorted(out.glob("*.jsonl.gz")) for r in read_rows(f)]
    defaults = [r for r in rows if r.is_default]
    per = {k: round(statistics.mean((r.seconds or {}).get(k, 0.0) for r in defaults), 3)
           for k in ("replay", "build", "run", "total")}
    return {"way": way, "wall_s": round(wall, 1), "kernels": len(defaults), "candidates": len(rows) - len(defaults),
            "per_kernel_s": per,
            "outcomes": [(r.target_kernel, r.match, r.source_model, r.source_kernel, r.source_rank, r.status)
                         for r in rows]}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--bank", required=True, type=Path)
    p.add_argument("--models", default="")
    p.add_argument("--cap", default="2")
    p.add_argument("--repeat", default="2")
    p.add_argument("--rule-space", default="0", help="matrix --rule-space: rule instances per kernel (0: none)")
    p.add_argument("--clusters", default="local:1,local:2")
    p.add_argument("--name", default="cluster_overhead", help="the results file's name, without .json")
    args = p.parse_args()
    from recommender.target.spec import native_target
    target = native_target()
    extra = (["--cap", args.cap, "--repeat", args.repeat] + (["--models", args.models] if args.models else [])
             + (["--rule-space", args.rule_space] if int(args.rule_space) else []))
    ways = ["local", *[c for c in args.clusters.split(",") if c], "local"]
    runs = []
    with tempfile.TemporaryDirectory(prefix="cluster-overhead-") as tmp:
        for i, way in enumerate(ways):
            runs.append(measure(way, args.bank, Path(tmp) / f"{i}", extra))
            r = runs[-1]
            print(f"{way}: {r['wall_s']} s wall, {r['kernels']} kernels, per kernel {r['per_kernel_s']}", flush=True)
    local_wall = statistics.mean(r["wall_s"] for r in runs if r["way"] == "local")
    first = runs[0]["outcomes"]
    for r in runs:
        r["same_rows_as_local"] = r.pop("outcomes") == first
        r["over_local"] = round(r["wall_s"] / local_wall, 2)
    result = {**run_header(target), "bank": display_path(args.bank), "args": extra, "runs": runs,
              "local_wall_s_mean": round(local_wall, 1)}
    path = results_dir(target.key) / f"{args.name}.json"
    atomic_write_json(str(path), result)
    for r in runs:
        print(f"{r['way']:>10}: {r['wall_s']:6.1f} s ({r['over_local']:.2f}x local), per kernel "
              f"replay {r['per_kernel_s']['replay']} build {r['per_kernel_s']['build']} run "
              f"{r['per_kernel_s']['run']} total {r['per_kernel_s']['total']} s; rows as local: {r['same_rows_as_local']}")
    print(f"-> {display_path(path)}")


if __name__ == "__main__":
    run_script(main)
