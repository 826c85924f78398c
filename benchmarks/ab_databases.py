"""Did a change of the rules make a model faster as a whole? The model built with its latency run's database as
committed at an older revision and as it is now, timed side by side in rotating rounds (the latency table's
`interleaved`), so that the machine's drift slows both alike. A kernel's time alone can improve while the model
does not (cold weights, a larger working set), and rows of the latency table timed an hour apart differ by up
to 2x on these machines: this is the comparison to trust.

The older database is rebuilt from that revision's report.json (each kernel's chosen candidate) and
candidates.jsonl.gz (its trace), replayed on this TVM onto the model's kernels; the run folder's database/
itself is not in git.

    python benchmarks/ab_databases.py --model regnet_y_040 --rev 702fbaa [--rounds 6]

Writes benchmarks/results/<target-key>/ab.<model>.json and .md. Keep the machine otherwise idle.
"""
from __future__ import annotations

import argparse
import contextlib
import gzip
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from recommender.core.errors import SchedrecError, run_script  # noqa: E402
from recommender.core.fileio import atomic_write_json, atomic_write_text, display_path  # noqa: E402
from results_dir import results_dir, run_header  # noqa: E402


def _git_show(rev: str, path: Path) -> bytes:
    done = subprocess.run(["git", "show", f"{rev}:{path.relative_to(ROOT).as_posix()}"], cwd=ROOT,
                          capture_output=True)
    if done.returncode != 0:
        raise SchedrecError(f"{path.relative_to(ROOT)} at {rev}: {done.stderr.decode().strip()[:200]}")
    return done.stdout


def rebuild_database(run: Path, rev: str, kernels: dict, target: object, out: str) -> int:
    """Write into `out` (a MetaSchedule JSON database) the schedule the run at `rev` chose for each kernel, its
    trace replayed on `kernels` (name -> Kernel); answers the number of records."""
    from tvm.s_tir import meta_schedule as ms

    from recommender.transfer.replay import apply_replayed
    from recommender.transfer.database import commit_schedule
    report = json.loads(_git_show(rev, run / "report.json"))
    rows = [json.loads(line) for line in gzip.decompress(_git_show(rev, run / "candidates.jsonl.gz")).splitlines()]
    traces = {(r["target_kernel"], r["source_model"], r["source_kernel"], r["source_rank"]): r["trace"]
              for r in rows if r.get("trace")}
    db = ms.database.JSONDatabase(work_dir=out)
    n = 0
    for k in report["kernels"]:
        chosen = k.get("chosen")
        trace = chosen and traces.get((k["kernel"], chosen["source_model"], chosen["source_kernel"], chosen["rank"]))
        if not trace or k["kernel"] not in kernels:
            continue  # the default code, or a kernel this import no longer has
        kernel = kernels[k["kernel"]]
        commit_schedule(db, kernel.mod, apply_replayed(trace, kernel.mod, target).sch, [chosen["latency_s"]], target)
        n += 1
    return n


def main() -> None:
    import statistics

    from recommender.compare.baselines import interleaved, worst_stalls
    from recommender.frontend.kernels import extract_kernels
    from recommender.measure import MeasureSettings, Measurer
    from recommender.frontend.model_import import import_model
    from recommender.target.spec import parse_target
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", required=True, help="a zoo model with a latency run on this CPU")
    ap.add_argument("--rev", required=True, help="the git revision whose committed run is compared (e.g. 702fbaa)")
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--target", default="native")
    args = ap.parse_args()
    target = parse_target(args.target)
    tt = target.tvm()
    run = ROOT / "models" / target.key / "latency" / args.model
    if not (run / "database").is_dir():
        raise SchedrecError(f"no latency run with a database at {display_path(run)}: run scripts/latency_table.py first")
    model = import_model(f"zoo:{args.model}", tt)
    inputs = list(zip(model.input_shapes, model.input_dtypes))
    kernels = {k.name: k for k in extract_kernels(model, tt)}
    with tempfile.TemporaryDirectory() as old, \
            Measurer(target.config, MeasureSettings(repeat=3, min_repeat_ms=200)) as measurer, \
            contextlib.ExitStack() as stack:
        records = rebuild_database(run, args.rev, kernels, tt, old)
        libraries = {args.rev: stack.enter_context(measurer.model_library(model.mod, old)),
                     "now": stack.enter_context(measurer.model_library(model.mod, str(run / "database")))}
        for name, built in libraries.items():
            if not built.ok:
                raise SchedrecError(f"building {args.model} with the {name} database: {built.error[:300]}")
        timers = {name: (lambda b=built: measurer.time_model_library(b.path, inputs).costs)
                  for name, built in libraries.items()}
        costs, errors, stalls = interleaved(timers, args.rounds)
    if errors:
        raise SchedrecError(f"timing failed: {errors}")
    out = {**run_header(target), "model": args.model, "rev": args.rev, "records_rebuilt": records,
           "kernels": len(kernels), "rounds": args.rounds, "stall_share": worst_stalls(stalls),
           "round_medians_ms": {n: [round(statistics.median(r) * 1e3, 3) for r in rs] for n, rs in costs.items()},
           "median_ms": {n: round(statistics.median([c for r in rs for c in r]) * 1e3, 3) for n, rs in costs.items()}}
    then, now = out["median_ms"][args.rev], out["median_ms"]["now"]
    wins = sum(a > b for a, b in zip(out["round_medians_ms"][args.rev], out["round_medians_ms"]["now"]))
    res = results_dir(target.key)
    atomic_write_json(str(res / f"ab.{args.model}.json"), out)
    atomic_write_text(str(res / f"ab.{args.model}.md"), "\n".join([
        f"# {args.model}: the latency run's database at {args.rev} against now ({target.key}, {out['cpu']}, "
        f"{out['date']})", "",
        f"`python benchmarks/ab_databases.py --model {args.model} --rev {args.rev} --rounds {args.rounds}`: both "
        f"builds timed side by side, {args.rounds} rotating rounds of 3 repeats of at least 200 ms; {records} of "
        f"{len(kernels)} kernels had a chosen schedule at {args.rev}.", "",
        "| database | median ms | round medians ms | worst stall share |", "|---|---|---|---|",
        *[f"| {n} | {out['median_ms'][n]} | {', '.join(map(str, out['round_medians_ms'][n]))} | "
          f"{out['stall_share'].get(n, '-')} |" for n in (args.rev, "now")], "",
        f"Now / {args.rev}: {now / then:.2f}x; faster in {wins} of {args.rounds} rounds."]) + "\n")
    print(f"{args.model}: {args.rev} {then} ms, now {now} ms ({now / then:.2f}x; faster in {wins} of "
          f"{args.rounds} rounds); wrote {display_path(res / f'ab.{args.model}.json')} and .md")


if __name__ == "__main__":
    run_script(main)
