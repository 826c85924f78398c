"""How much of a comparison's spread is timing noise: build the model once with each method's database from a
`schedrec compare` folder, then time all of them in interleaved rounds (round 1: every method once, round 2:
every method again, ...), and report each method's median and range over the rounds.

    python benchmarks/retime_compare.py models/llvm-znver3-2c/compare/resnet50 [--rounds 5] [--baselines]

With --baselines, PyTorch eager and ONNX Runtime (zoo models) join every round, in the rotation.

Writes <folder>/retime.json. Keep the machine otherwise idle.
"""
from __future__ import annotations

import argparse
import contextlib
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from recommender.core.fileio import atomic_write_json, read_json  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("folder", type=Path)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--baselines", action="store_true", help="PyTorch and ONNX Runtime in every round (zoo models)")
    a = ap.parse_args()

    from recommender.compare.baselines import interleaved
    from recommender.measure import MeasureSettings, Measurer
    from recommender.frontend.model_import import import_model
    from recommender.target.spec import TargetSpec
    data = read_json(a.folder / "compare.json")
    target = TargetSpec(data["target"])
    model = import_model(data["spec"], target.tvm())
    inputs = list(zip(model.input_shapes, model.input_dtypes))
    dbs = sorted(p for p in (a.folder / "db").iterdir() if (p / "database_tuning_record.json").exists())
    settings = MeasureSettings(repeat=7, min_repeat_ms=200)
    with Measurer(target.config, settings) as m, contextlib.ExitStack() as libraries:
        libs = {}
        for p in dbs:  # build once per method (the timing below is what varies)
            built = libraries.enter_context(m.model_library(model.mod, str(p)))
            if built.path is None:
                raise SystemExit(f"{p.name}: the model did not build ({built.status}: {built.error})")
            libs[p.name] = built.path
        timers = {name: (lambda path=path: m.time_model_library(path, inputs, settings).costs)
                  for name, path in libs.items()}
        if a.baselines and data["spec"].startswith("zoo:"):
            from recommender.compare.baselines import onnxruntime_timer, pytorch_timer
            from recommender.frontend.zoo import build_zoo_model
            torch_model, args = build_zoo_model(data["spec"][4:])
            threads = int(target.config.get("num-cores", 1))
            for name, make in (("pytorch", pytorch_timer), ("onnxruntime", onnxruntime_timer)):
                timer = make(torch_model, args, threads)
                timers[name] = lambda timer=timer: timer(settings.repeat, 0.2)
        t0 = time.time()
        rounds, errors, _ = interleaved(timers, a.rounds)  # rotated rounds: none always first
        if errors:
            raise SystemExit("; ".join(f"{n}: {e}" for n, e in errors.items()))
        times = {n: [statistics.median(c) for c in v] for n, v in rounds.items()}
        for r in range(a.rounds):
            print(f"round {r + 1}: " + ", ".join(f"{n} {t[r] * 1e3:.1f}" for n, t in times.items()), flush=True)
    out = {"model": data["model"], "target_key": data["target_key"], "rounds": a.rounds,
           "seconds": round(time.time() - t0, 1),
           "methods": {n: {"median_s": statistics.median(t), "min_s": min(t), "max_s": max(t),
                           "compare_run_s": data["methods"].get(n, {}).get("latency_s"), "all_s": t}
                       for n, t in times.items()}}
    atomic_write_json(str(a.folder / "retime.json"), out)
    for n, v in out["methods"].items():
        run = v["compare_run_s"]
        print(f"{n:16s} median {v['median_s'] * 1e3:8.2f} ms  range {v['min_s'] * 1e3:8.2f}-{v['max_s'] * 1e3:8.2f}  "
              f"compare run {run * 1e3 if run else float('nan'):8.2f}")


if __name__ == "__main__":
    main()
