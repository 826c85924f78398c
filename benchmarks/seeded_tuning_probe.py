"""Does MetaSchedule's evolutionary search improve on the rule tiles when they seed it? (issue 41 item 2)

For each of a bank model's heaviest tuned kernels, on the CPU at hand:
1. the tile rule's space (`--space` instances) is measured, output-checked;
2. two searches of `--trials` more trials each start from the kernel's bank records (its 64-trial search):
   "continued" with those records alone, "seeded" with the `--seeds` fastest rule instances added to its
   database (their traces carry SamplePerfectTile decisions, which the search's tile mutator changes);
3. the best old bank record, the best rule instance and each search's best new record are timed again side
   by side, `--rounds` rotating rounds, median per schedule.
Nothing is written to the bank. JSON under benchmarks/results/<target key>/seeded_tuning.json.

    python benchmarks/seeded_tuning_probe.py --model zoo:resnet18 --kernels 2 --trials 96
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.results_dir import results_dir, run_header  # noqa: E402


def _best_records(db: object, mod: object, n: int) -> list:
    """The `n` fastest valid records of `mod`'s workload in `db`."""
    if not db.has_workload(mod):
        return []
    return list(db.get_top_k(db.commit_workload(mod), n))


def probe_kernel(kernel: object, tt: object, measurer: object, bank_work: str, args: argparse.Namespace) -> dict:
    from tvm.s_tir import meta_schedule as ms

    from recommender.bank.tune import kernel_records, search_kernel
    from recommender.compare.baselines import interleaved
    from recommender.measure.worker import record_module
    from recommender.rules import tile_rule_for
    from recommender.transfer.database import commit_schedule
    from recommender.transfer.replay import tile_rule_schedules

    bank_db = ms.database.JSONDatabase(work_dir=bank_work)
    old = _best_records(bank_db, kernel.mod, 64)
    rule = tile_rule_for(kernel.class_key)
    rules = tile_rule_schedules(kernel.mod, tt, rule.name, space=args.space) if rule else []
    t0 = time.perf_counter()
    timed = measurer.measure([r.to_build for r in rules], reference=kernel.mod)
    rule_s = time.perf_counter() - t0
    ok = sorted((res.median, n) for n, res in enumerate(timed) if res.ok)
    out = {"kernel": kernel.name, "class": kernel.class_key, "flops": kernel.flops, "old_records": len(old),
           "rule_instances": len(rules), "rule_valid": len(ok), "rule_measure_s": round(rule_s, 1)}
    best = {"old bank best": record_module(old[0]) if old else None,
            "best rule": rules[ok[0][1]].to_build if ok else None}
    with tempfile.TemporaryDirectory() as tmp:
        for arm in ("continued", "seeded"):
            work = str(Path(tmp) / arm)
            Path(work).mkdir()
            db = ms.database.JSONDatabase(work_dir=work)
            for rec in old:
                db.commit_tuning_record(ms.database.TuningRecord(rec.trace, db.commit_workload(kernel.mod),
                                                                 rec.run_secs, rec.target, rec.args_info))
            if arm == "seeded":
                for _, n in ok[:args.seeds]:
                    commit_schedule(db, kernel.mod, rules[n].sch, timed[n].costs, tt)
            before, _, best_before = kernel_records(db, kernel.mod)
            t0 = time.perf_counter()
            search_kernel(kernel, tt, measurer, work, db, args.trials, population_size=args.population)
            n_all, valid, best_s = kernel_records(db, kernel.mod)
            top = _best_records(db, kernel.mod, 1)
            out[arm] = {"records_before": before, "records_after": n_all, "valid": valid,
                        "search_s": round(time.perf_counter() - t0, 1), "best_recorded_before_s": best_before,
                        "best_recorded_s": best_s}
            best[f"{arm} best"] = record_module(top[0]) if top else None
    def timer(mod: object) -> Callable[[], list[float]]:
        def costs() -> list[float]:
            (res,) = measurer.measure([mod], reference=kernel.mod)
            if not res.ok:
                raise RuntimeError(f"{res.status}: {res.error}")
            return res.costs
        return costs

    rounds, _, _ = interleaved({k: timer(v) for k, v in best.items() if v is not None}, args.rounds)
    out["side_by_side_s"] = {k: (statistics.median(statistics.median(c) for c in v) if v else None)
                             for k, v in rounds.items()}
    out["gflops"] = {k: (round(kernel.flops / v / 1e9, 1) if v else None) for k, v in out["side_by_side_s"].items()}
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="zoo:resnet18")
    ap.add_argument("--kernels", type=int, default=2, help="the model's heaviest tuned kernels to probe")
    ap.add_argument("--trials", type=int, default=96, help="search trials per arm and kernel")
    ap.add_argument("--space", type=int, default=64, help="rule-space instances measured per kernel")
    ap.add_argument("--seeds", type=int, default=8, help="fastest rule instances put into the seeded database")
    ap.add_argument("--population", type=int, default=256)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()

    from recommender.bank.store import unpack
    from recommender.bank.tune import quiet_metaschedule, selected_kernels
    from recommender.core.tvm_setup import load_tensor_intrinsics
    from recommender.frontend.kernels import extract_kernels
    from recommender.frontend.model_import import import_model
    from recommender.measure import MeasureSettings, Measurer
    from recommender.target.spec import parse_target

    quiet_metaschedule()
    load_tensor_intrinsics()
    target = parse_target(None)
    tt = target.tvm()
    model = import_model(args.model, tt)
    kernels = [k for k, _ in selected_kernels(extract_kernels(model, tt), 0.01)][:args.kernels]
    rows = []
    out_path = results_dir(target.key) / "seeded_tuning.json"
    with tempfile.TemporaryDirectory() as bank_work, Measurer(target.config, MeasureSettings()) as measurer:
        unpack(Path("models") / target.key / "bank" / model.name, bank_work)
        for k in kernels:
            print(f"{k.name}: {k.class_key}, {k.flops / 1e6:.0f} MFLOP", file=sys.stderr, flush=True)
            rows.append(probe_kernel(k, tt, measurer, bank_work, args))
            print(json.dumps(rows[-1], indent=1), file=sys.stderr, flush=True)
            out_path.write_text(json.dumps({**run_header(target), "model": model.name, "args": vars(args),
                                            "command": " ".join(sys.argv), "kernels": rows}, indent=1) + "\n")
    print(f"wrote {out_path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
