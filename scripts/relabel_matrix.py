"""Time again the matrix rows whose repeats spread widely (a disturbed timing), beside steady anchors.

For each kernel of a matrix (`--matrix`, default the target's rule-space matrix `space/`), the valid candidates
whose slowest repeat is more than `--spread` times their fastest (training.relabel) are rebuilt from their recorded
trace and timed twice (passes A and B) with the matrix's own measurer settings, together with the kernel's
3 fastest steady candidates. Each new label is the faster fresh median scaled by the anchors (training.relabel).
Written to `<matrix>/noise/relabel.jsonl.gz` after each kernel (a killed run resumes; the bank's PAUSE file is
honoured between kernels); every reader of the matrix applies it. The matrix files are not touched.
Keep the machine free of other load while it runs.

    python scripts/relabel_matrix.py [--matrix models/<target-key>/space] [--spread 1.5] [--limit-kernels N]
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from recommender.core.errors import SchedrecError, run_script  # noqa: E402
from recommender.core.fileio import display_path, read_json_lines, write_json_lines  # noqa: E402
from recommender.core.row_files import read_rows  # noqa: E402
from recommender.target.spec import parse_target  # noqa: E402
from training.relabel import RELABEL_FILE, SPREAD_LIMIT, anchors_of, new_label, spread, unsteady  # noqa: E402


def relabel(matrix_dir: Path, target_spec: str, limit: float, max_kernels: int | None) -> Path:
    from recommender.bank.store import wait_while_paused
    from recommender.core.tvm_setup import load_tensor_intrinsics
    from recommender.measure import MeasureSettings, Measurer
    from recommender.target.folders import default_bank_dir
    from recommender.transfer.replay import ReplayFailure, apply_replayed
    from tvm.s_tir import meta_schedule as ms

    load_tensor_intrinsics()
    target = parse_target(target_spec)
    summary = json.loads((matrix_dir / "summary.json").read_text())
    if summary["target_key"] != target.key:
        raise SchedrecError(f"{display_path(matrix_dir)} was measured on {summary['target_key']}; this machine is "
                            f"{target.key}: relabel it on its own CPU")
    settings = MeasureSettings(**{"fast_math": False, **summary["measurer"]})
    by_kernel: dict = defaultdict(list)
    for f in sorted(matrix_dir.glob("*.jsonl.gz")):
        for r in read_rows(f):
            by_kernel[r.kernel_key].append(r)
    out = matrix_dir / RELABEL_FILE
    done = read_json_lines(out, what="relabel file") if out.exists() else []
    done_kernels = {tuple(e["key"][:2]) for e in done}
    todo = [k for k, rows in sorted(by_kernel.items())
            if k not in done_kernels and any(unsteady(r, limit) for r in rows)][:max_kernels]
    total = sum(sum(1 for r in by_kernel[k] if unsteady(r, limit)) for k in todo)
    print(f"{display_path(matrix_dir)}: {total} unsteady rows (spread > {limit}) in {len(todo)} kernels to time "
          f"again ({len(done_kernels)} kernels done before)", file=sys.stderr, flush=True)
    tt = target.tvm()
    with Measurer(target.config, settings) as measurer:
        for i, key in enumerate(todo, 1):
            wait_while_paused(default_bank_dir(target.key), lambda m: print(m, file=sys.stderr))
            rows = by_kernel[key]
            default = next(r for r in rows if r.is_default)
            mod = ms.database.Workload.from_json(default.workload).mod
            shaky = [r for r in rows if unsteady(r, limit)]
            anchors = anchors_of(rows, limit)
            mods, kept = [], []
            for r in shaky + anchors:
                try:
                    mods.append(apply_replayed(r.trace, mod, tt).sch.mod)
                    kept.append(r)
                except ReplayFailure as err:
                    print(f"{key}: a recorded candidate no longer replays: {err}", file=sys.stderr)
            t0 = time.time()
            a, b = measurer.measure(mods), measurer.measure(mods)
            fresh = {r.key: [x for x in (a[j], b[j]) if x.ok] for j, r in enumerate(kept)}
            pairs = [(r.latency_s, min(x.median for x in fresh[r.key])) for r in anchors if fresh.get(r.key)]
            n_new = 0
            for r in shaky:
                got = fresh.get(r.key)
                if not got:  # failed again or no longer replays: the matrix label stays
                    continue
                best = min(got, key=lambda x: x.median)
                label = new_label([x.median for x in got], pairs)
                scale = label / best.median
                done.append({"key": json.loads(json.dumps(r.key)), "latency_s": label,
                             "costs": [c * scale for c in best.costs], "old_latency_s": r.latency_s,
                             "old_costs": list(r.costs), "old_spread": round(spread(r.costs), 3),
                             "fresh_medians": [x.median for x in got], "anchors": len(pairs),
                             "anchor_ratio": round(label / min(x.median for x in got), 4)})
                n_new += 1
            out.parent.mkdir(parents=True, exist_ok=True)
            write_json_lines(out, done)
            faster = sum(1 for e in done[-n_new:] if e["latency_s"] < e["old_latency_s"]) if n_new else 0
            print(f"[{i}/{len(todo)}] {key[0]} {key[1]}: {n_new} relabelled ({faster} faster than their label), "
                  f"{len(pairs)} anchors, {time.time() - t0:.0f} s", file=sys.stderr, flush=True)
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--matrix", type=Path, help="default models/<this CPU's target key>/space")
    p.add_argument("--target", default="native")
    p.add_argument("--spread", type=float, default=SPREAD_LIMIT, help="slowest / fastest repeat above which a row "
                                                                      "is timed again (%(default)s)")
    p.add_argument("--limit-kernels", type=int, help="at most this many kernels in this run")
    a = p.parse_args()
    if a.spread <= 1.0:
        raise SchedrecError(f"--spread must be above 1 (slowest over fastest repeat), got {a.spread}")
    matrix = a.matrix
    if matrix is None:
        from recommender.target.folders import repo_models_dir
        matrix = repo_models_dir() / parse_target(a.target).key / "space"
    if not (matrix / "summary.json").exists():
        raise SchedrecError(f"{display_path(matrix)} holds no matrix (no summary.json)")
    print(f"-> {display_path(relabel(matrix, a.target, a.spread, a.limit_kernels))}")


if __name__ == "__main__":
    run_script(main)
