"""Measure a sample of transfer-matrix kernels again: the label-noise ceiling of any ranker.

For each sampled kernel every valid candidate is rebuilt from its recorded trace and timed twice more, back
to back (passes A and B), with the matrix's measurer settings. Ranking candidates by one measurement and
scoring with another gives the top-k score a perfect ranker of the first measurement would reach: no
learned ranker can do better. Two ceilings are reported: matrix -> A (labels measured on another day, as
rankers are trained on them) and A -> B (one run, a quiet machine). Rows go to
`<matrix>/noise/remeasure.jsonl.gz`, rewritten after each kernel (a killed run resumes); the bank's PAUSE
file is honoured between kernels. Keep the machine free of other load while it runs.

    python scripts/remeasure_matrix.py --kernels 24            # measure (resumable), then print the ceilings
    python scripts/remeasure_matrix.py --report-only            # ceilings from what is measured
"""
from __future__ import annotations

import argparse
import json
import random
import sys
import time
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from recommender.bank.store import wait_while_paused
from recommender.core.fileio import read_json_lines
from recommender.target.folders import default_bank_dir  # noqa: E402
from recommender.core.errors import SchedrecError, run_script  # noqa: E402
from recommender.target.spec import parse_target  # noqa: E402
from recommender.core.fileio import atomic_write_json, write_json_lines  # noqa: E402
from recommender.core.row_files import read_rows  # noqa: E402
from training.noise_ceiling import CEILING_FILE, REMEASURE_FILE, ceiling  # noqa: E402


def sample_kernels(rows_by_kernel: dict, n: int, seed: int) -> list:
    """`n` kernels with 3 or more valid candidates, spread evenly over target models (seeded)."""
    per_model = defaultdict(list)
    for key, rows in sorted(rows_by_kernel.items()):
        if sum(1 for r in rows if r["match"] != "default" and r["status"] == "ok") >= 3:
            per_model[key[0]].append(key)
    rng = random.Random(seed)
    for keys in per_model.values():
        rng.shuffle(keys)
    picked: list = []
    while len(picked) < n and any(per_model.values()):
        for model in sorted(per_model):
            if per_model[model] and len(picked) < n:
                picked.append(per_model[model].pop())
    return picked


def measure_again(matrix_dir: Path, target_spec: str, n: int, seed: int) -> Path:
    from recommender.measure import MeasureSettings, Measurer
    from recommender.transfer.replay import ReplayFailure, apply_replayed
    from recommender.core.tvm_setup import load_tensor_intrinsics
    from tvm.s_tir import meta_schedule as ms

    load_tensor_intrinsics()
    target = parse_target(target_spec)
    summary = json.loads((matrix_dir / "summary.json").read_text())
    if summary["target_key"] != target.key:
        raise SchedrecError(f"{matrix_dir} was measured on {summary['target_key']}; this target is {target.key}")
    # the matrix's own settings; one measured before fast math existed was measured with libm's exp/erf
    settings = MeasureSettings(**{"fast_math": False, **summary["measurer"]})
    by_kernel: dict = defaultdict(list)
    for f in sorted(matrix_dir.glob("*.jsonl.gz")):
        for r in read_rows(f):
            by_kernel[r.kernel_key].append(r.to_json())
    out = matrix_dir / "noise" / "remeasure.jsonl.gz"
    done = read_json_lines(out, what="remeasure file") if out.exists() else []
    done_keys = {(r["target_model"], r["target_kernel"]) for r in done}
    todo = [k for k in sample_kernels(by_kernel, n, seed) if k not in done_keys]
    tt = target.tvm()
    bank_dir = default_bank_dir(target.key)
    with Measurer(target.config, settings) as measurer:
        for i, key in enumerate(todo, 1):
            wait_while_paused(bank_dir, lambda m: print(m, file=sys.stderr))
            rows = by_kernel[key]
            default = next(r for r in rows if r["match"] == "default")
            mod = ms.database.Workload.from_json(default["workload"]).mod
            valid = [r for r in rows if r["match"] != "default" and r["status"] == "ok"]
            mods, kept = [], []
            for r in valid:
                try:
                    mods.append(apply_replayed(r["trace"], mod, tt).sch.mod)
                    kept.append(r)
                except ReplayFailure as err:
                    print(f"{key}: a recorded candidate no longer replays: {err}", file=sys.stderr)
            t0 = time.time()
            first, second = measurer.measure(mods), measurer.measure(mods)
            for r, a, b in zip(kept, first, second):
                done.append({k: v for k, v in r.items() if k not in ("trace", "workload")} | {
                    "status": a.status if a.ok else b.status, "costs": list(a.costs),
                    "latency_s": a.median if a.ok and b.ok else None, "again_latency_s": b.median if b.ok else None,
                    "again_costs": list(b.costs),
                    "first_latency_s": r["latency_s"], "first_costs": r["costs"]})
            _write(out, done)
            print(f"[{i}/{len(todo)}] {key[0]} {key[1]}: {len(kept)} measured in {time.time() - t0:.0f} s",
                  file=sys.stderr, flush=True)
    return out


def _write(path: Path, rows: list[dict]) -> None:
    """Remeasured rows (matrix rows plus the first measurement) as gzipped JSON lines, atomically."""
    write_json_lines(path, rows)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--matrix", type=Path, default=Path("models/llvm-znver3-2c/transfer"))
    p.add_argument("--target", default="native")
    p.add_argument("--kernels", type=int, default=24)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--report-only", action="store_true")
    a = p.parse_args()
    path = a.matrix / REMEASURE_FILE
    if not a.report_only:
        path = measure_again(a.matrix, a.target, a.kernels, a.seed)
    result = ceiling(a.matrix, path)
    atomic_write_json(str(a.matrix / CEILING_FILE), result)
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    run_script(main)
