"""Does timing candidates as a kernel runs in the model (cold caches) choose faster schedules than timing them warm?

In the model a kernel reads its weights once, from memory; the measurer times it over and over with everything in
cache (`schedrec profile --cold` shows the difference: on llvm-rocketlake-2c resnet50's kernels alone sum to 87% of
the model's time warm and 101% cold). From an exhaustive replay's candidates (a run folder's candidates.jsonl.gz:
each candidate with its trace and recorded warm latency), each kernel's `--top` fastest valid candidates are timed
again in one measurer, three passes: warm, cold (`recommender.measure.vm_profile.COLD`), warm again. Three databases
follow: the best of each kernel by the first warm pass, by the cold pass, and by the second warm pass (the control:
how much a choice moves on warm noise alone); the model built with each is timed side by side in rotating rounds.

    python benchmarks/cold_choice.py --model zoo:resnet50 --run models/llvm-rocketlake-2c/heldout/resnet50 \
        [--top 6] [--rounds 6]

Writes benchmarks/results/<target-key>/cold_choice.<model>.json and .md. Keep the machine otherwise idle.
"""
from __future__ import annotations

import argparse
import contextlib
import gzip
import json
import statistics
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from recommender.core.errors import SchedrecError, run_script  # noqa: E402
from recommender.core.fileio import atomic_write_json, atomic_write_text, display_path  # noqa: E402
from results_dir import results_dir, run_header  # noqa: E402

PASSES = ("warm", "cold", "warm again")


def top_candidates(run: Path, top: int) -> dict[str, list[dict]]:
    """Kernel name -> its `top` fastest valid candidates with a trace, by the run's recorded latency."""
    by_kernel = defaultdict(list)
    with gzip.open(run / "candidates.jsonl.gz", "rt") as f:
        for line in f:
            r = json.loads(line)
            if r["match"] != "default" and r["status"] == "ok" and r.get("latency_s") and r.get("trace"):
                by_kernel[r["target_kernel"]].append(r)
    return {k: sorted(rows, key=lambda r: r["latency_s"])[:top] for k, rows in by_kernel.items()}


def main() -> None:
    from recommender.compare.baselines import interleaved, worst_stalls
    from recommender.frontend.kernels import extract_kernels
    from recommender.frontend.model_import import import_model, model_name_from_spec
    from recommender.measure import MeasureSettings, Measurer
    from recommender.measure.vm_profile import COLD
    from recommender.target.spec import parse_target
    from recommender.transfer.database import commit_schedule
    from recommender.transfer.replay import ReplayFailure, apply_replayed
    from tvm.s_tir import meta_schedule as ms
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", required=True, help="the model spec the run replayed (zoo:NAME or a .onnx file)")
    ap.add_argument("--run", type=Path, required=True, help="an exhaustive replay's folder (candidates.jsonl.gz)")
    ap.add_argument("--top", type=int, default=6, help="candidates per kernel, the run's fastest")
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--target", default="native")
    args = ap.parse_args()
    target = parse_target(args.target)
    tt = target.tvm()
    run_target = json.loads((args.run / "report.json").read_text()).get("target_key")
    if run_target != target.key:
        raise SchedrecError(f"{display_path(args.run)} was measured on {run_target}; this CPU is {target.key}")
    model = import_model(args.model, tt)
    inputs = list(zip(model.input_shapes, model.input_dtypes))
    kernels = {k.name: k for k in extract_kernels(model, tt)}
    candidates = top_candidates(args.run, args.top)
    rows, best = [], {p: {} for p in PASSES}
    cold = MeasureSettings(**COLD)
    with Measurer(target.config) as measurer:
        for name, cands in sorted(candidates.items()):
            kernel = kernels.get(name)
            if kernel is None or len(cands) < 2:
                continue
            built, kept = [], []
            for c in cands:
                try:
                    built.append(apply_replayed(c["trace"], kernel.mod, tt).sch)
                    kept.append(c)
                except ReplayFailure:
                    continue
            mods = [s.mod for s in built]
            times = {"warm": measurer.measure(mods), "cold": measurer.measure(mods, settings=cold),
                     "warm again": measurer.measure(mods)}
            secs = {p: [r.median if r.ok else None for r in res] for p, res in times.items()}
            pick = {p: min((i for i, s in enumerate(secs[p]) if s), key=lambda i: secs[p][i], default=None)
                    for p in PASSES}
            for p, i in pick.items():
                if i is not None:
                    best[p][name] = (built[i], secs[p][i])
            rows.append({"kernel": name, "weight": kernel.weight,
                         "candidates": [f"{c['source_model']}/{c['source_kernel']}#{c['source_rank']}" for c in kept],
                         "recorded_s": [c["latency_s"] for c in kept], **{f"{p}_s": secs[p] for p in PASSES},
                         "pick": pick})
            print(f"{name[:40]}: picks {pick}", file=sys.stderr, flush=True)
        with contextlib.ExitStack() as stack:
            libraries = {}
            for p in PASSES:
                folder = stack.enter_context(tempfile.TemporaryDirectory())
                db = ms.database.JSONDatabase(work_dir=folder)
                for name, (sch, s) in best[p].items():
                    commit_schedule(db, kernels[name].mod, sch, [s], tt)
                built = stack.enter_context(measurer.model_library(model.mod, folder))
                if not built.ok:
                    raise SchedrecError(f"building the model with the {p} picks: {built.error[:300]}")
                libraries[p] = built
            timers = {p: (lambda b=b: measurer.time_model_library(b.path, inputs).costs) for p, b in libraries.items()}
            costs, errors, stalls = interleaved(timers, args.rounds)
    if errors:
        raise SchedrecError(f"timing failed: {errors}")
    name = model_name_from_spec(args.model)
    median_ms = {p: round(statistics.median([c for r in rs for c in r]) * 1e3, 3) for p, rs in costs.items()}
    sums_ms = {p: round(sum(r["weight"] * r[f"{p}_s"][r["pick"][p]] for r in rows if r["pick"][p] is not None) * 1e3, 3)
               for p in PASSES}
    changed = {p: sum(1 for r in rows if r["pick"][p] != r["pick"]["warm"]) for p in ("cold", "warm again")}
    command = (f"python benchmarks/cold_choice.py --model {args.model} --run {display_path(args.run)} --top {args.top} "
               f"--rounds {args.rounds}")
    out = {**run_header(target), "model": args.model, "run": display_path(args.run), "top": args.top,
           "rounds": args.rounds, "command": command, "cold_settings": COLD, "kernels": rows,
           "picks_changed_from_warm": changed, "picked_sum_ms": sums_ms, "model_median_ms": median_ms,
           "round_medians_ms": {p: [round(statistics.median(r) * 1e3, 3) for r in rs] for p, rs in costs.items()},
           "stall_share": worst_stalls(stalls)}
    res = results_dir(target.key)
    atomic_write_json(str(res / f"cold_choice.{name}.json"), out)
    atomic_write_text(str(res / f"cold_choice.{name}.md"), "\n".join([
        f"# {name}: schedules chosen by warm or by cold timings ({target.key}, {out['cpu']}, {out['date']})", "",
        f"`{command}`: each kernel's {args.top} fastest candidates of the run timed warm, cold and warm again in one "
        f"measurer; the model built with each pass's picks, timed side by side in {args.rounds} rotating rounds.", "",
        "| picks by | kernels whose pick differs from the first warm pass | sum of weight x picked time, ms | "
        "model median ms | round medians ms |", "|---|---|---|---|---|",
        *[f"| {p} | {changed.get(p, '-')} of {len(rows)} | {sums_ms[p]} | {median_ms[p]} | "
          f"{', '.join(map(str, out['round_medians_ms'][p]))} |" for p in PASSES]]) + "\n")
    print(f"{name}: model {median_ms} ms; picks changed {changed}; wrote "
          f"{display_path(res / f'cold_choice.{name}.json')} and .md")


if __name__ == "__main__":
    run_script(main)
