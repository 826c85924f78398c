"""Where a model's time goes once schedrec's schedules are applied: each kernel's time inside the whole model
(every VM call timed through `vm.set_instrument`) next to the time the search measured for it alone, and the
model's own time without the instrument; for a zoo model, ONNX Runtime's per-node profile of the same model
on the same threads beside it. A kernel that runs slower in the model than alone (cold weights,
an input that left the cache, threads that went to sleep) shows there; the rest of the gap is what the VM
does between kernels.

    python benchmarks/model_profile.py --model mnasnet1_0 [--run models/<key>/latency/mnasnet1_0] [--iters 30]

The run folder is a `schedrec transfer` output (report.json + database/), by default the model's latency-table
run on this CPU. Writes benchmarks/results/<target-key>/profile.<model>.json and .md. Keep the machine
otherwise idle: it holds the measurement lock while it times.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from recommender.core.errors import SchedrecError, run_script  # noqa: E402
from recommender.core.fileio import atomic_write_json, atomic_write_text, read_json  # noqa: E402
from recommender.frontend.zoo import ZOO  # noqa: E402
from results_dir import results_dir, run_header  # noqa: E402


def build(model, target, database: Path, out: str) -> str:
    """The imported model compiled with the run's database applied, as the latency table builds it (the same
    worker code, in this process): the library's path."""
    import tvm
    from recommender.measure.worker import build_model
    build_model({"mod_json": tvm.ir.save_json(model.mod), "target": target.config, "database_dir": str(database),
                  "fast_math": True, "out_path": out})
    return out


def profile(lib_path: str, inputs: list[tuple[list[int], str]], iters: int
            ) -> tuple[dict[str, list[float]], list[float], list[float]]:
    """(per VM call symbol: the seconds of each of its calls over `iters` instrumented runs; the instrumented
    runs' totals; as many uninstrumented runs' totals), on the timing worker's inputs. Two VMs over the one
    library, one instrumented, run in turn, so that a slow spell of the machine spoils both alike."""
    import tvm
    from tvm import relax
    from recommender.measure.worker import random_args
    dev = tvm.cpu()
    lib = tvm.runtime.load_module(lib_path)
    plain_vm, timed_vm = relax.VirtualMachine(lib, dev), relax.VirtualMachine(lib, dev)
    # the inputs the latency table's timing worker feeds the model (uniform floats, zeros for integers)
    args = random_args([[[int(d) for d in s], d] for s, d in inputs], 0, dev)
    for vm in (plain_vm, timed_vm):
        for _ in range(3):
            vm["main"](*args)
    calls: dict[str, list[float]] = defaultdict(list)
    started: dict[str, float] = {}

    def instrument(func, symbol, before, ret, *rest):
        if before:
            started[symbol] = time.perf_counter()
        else:
            calls[symbol].append(time.perf_counter() - started.pop(symbol))
        return 0  # VMInstrumentReturnKind.NO_OP
    timed_vm.set_instrument(instrument)

    def run(vm) -> float:
        t0 = time.perf_counter()
        vm["main"](*args)
        return time.perf_counter() - t0
    plain, timed = [], []
    for _ in range(iters):
        plain.append(run(plain_vm))
        timed.append(run(timed_vm))
    return dict(calls), timed, plain


def onnxruntime_profile(name: str, threads: int, iters: int) -> dict:
    """A zoo model exported to ONNX (as the latency table's ONNX Runtime column) and run `iters` times with ONNX
    Runtime's profiler: the median run, and per node its op, output shape and median microseconds, the
    heaviest first."""
    import json
    from recommender.compare.baselines import export_onnx, onnxruntime_session
    from recommender.frontend.zoo import build_zoo_model
    model, args = build_zoo_model(name)
    with tempfile.TemporaryDirectory() as tmp:
        path = export_onnx(model, args, os.path.join(tmp, "model.onnx"))
        sess = onnxruntime_session(path, threads, profile_prefix=os.path.join(tmp, "ort"))
        feeds = {i.name: a.numpy() for i, a in zip(sess.get_inputs(), args)}
        for _ in range(3):
            sess.run(None, feeds)
        runs = []
        for _ in range(iters):
            t0 = time.perf_counter()
            sess.run(None, feeds)
            runs.append(time.perf_counter() - t0)
        events = json.loads(Path(sess.end_profiling()).read_text())
    nodes: dict[str, dict] = {}
    for e in events:
        if e.get("cat") != "Node" or not e.get("name", "").endswith("_kernel_time"):
            continue
        a = e.get("args", {})
        n = nodes.setdefault(e["name"][:-len("_kernel_time")], {
            "op": a.get("op_name"), "output": [list(d.values())[0] for d in a.get("output_type_shape", [])][:1],
            "us": []})
        n["us"].append(e["dur"])
    per_node = [{"node": k, "op": v["op"], "output": v["output"][0] if v["output"] else None,
                 "us": statistics.median(v["us"][-iters:])} for k, v in nodes.items()]
    return {"model_s": statistics.median(runs), "nodes": sorted(per_node, key=lambda n: -n["us"])}


def rows(report: dict, calls: dict[str, list[float]], iters: int) -> list[dict]:
    """One row per kernel of the run, heaviest in-model time first: calls per inference, median in-model
    seconds per call, the search's measured seconds (alone), their ratio and in-model GFLOP/s."""
    out = []
    for k in report["kernels"]:
        times = calls.get(k["kernel"])
        if not times:
            continue
        per_call = statistics.median(times)
        alone = k.get("latency_s") or k.get("default_s")
        out.append({"kernel": k["kernel"], "class_key": k["class_key"], "calls": len(times) // iters,
                    "in_model_s": per_call, "alone_s": alone, "ratio": per_call / alone if alone else None,
                    "gflops": k["flops"] / per_call / 1e9 if k.get("flops") else None,
                    "source": (k.get("chosen") or {}).get("source_model", "default")})
    return sorted(out, key=lambda r: -r["in_model_s"] * r["calls"])


def markdown(out: dict) -> str:
    t = out["totals"]
    lines = [f"# Where {out['model']}'s time goes ({out['target_key']}, {out['cpu']}, {out['date']})", "",
             f"`{out['command']}`; run `{out['run']}`. Medians over {out['iters']} inferences.", "",
             f"- whole model, no instrument: {1e3 * t['model_s']:.2f} ms; instrumented: {1e3 * t['instrumented_s']:.2f}"
             f" ms",
             f"- sum of the kernels' in-model times: {1e3 * t['kernels_in_model_s']:.2f} ms; the same kernels alone "
             f"(the search's measurements): {1e3 * t['kernels_alone_s']:.2f} ms",
             f"- VM calls that are not kernels of the run (allocation, reshapes, packing): "
             f"{1e3 * t['other_calls_s']:.2f} ms", "",
             "| kernel | class | calls | in model µs | alone µs | in model / alone | GFLOP/s in model | schedule |",
             "|---|---|---|---|---|---|---|---|"]
    for r in out["kernels"]:
        lines.append(f"| {r['kernel']} | {r['class_key'].split(':')[0]} | {r['calls']} | "
                     f"{1e6 * r['in_model_s']:.1f} | {'-' if r['alone_s'] is None else format(1e6 * r['alone_s'], '.1f')} | "
                     f"{'-' if r['ratio'] is None else format(r['ratio'], '.2f')} | "
                     f"{'-' if r['gflops'] is None else format(r['gflops'], '.1f')} | {r['source']} |")
    ort_ = out.get("onnxruntime")
    if ort_:
        by_op: dict[str, float] = defaultdict(float)
        for n in ort_["nodes"]:
            by_op[n["op"]] += n["us"]
        lines += ["", f"## ONNX Runtime, same model and threads: {1e3 * ort_['model_s']:.2f} ms per run; its nodes "
                  f"add up to {sum(by_op.values()) / 1e3:.2f} ms", "",
                  "By op: " + ", ".join(f"{op} {us / 1e3:.2f} ms" for op, us in sorted(by_op.items(), key=lambda kv: -kv[1])),
                  "", "| node | op | output shape | µs |", "|---|---|---|---|"]
        lines += [f"| {n['node'][:48]} | {n['op']} | {n['output']} | {n['us']:.1f} |" for n in ort_["nodes"][:30]]
    return "\n".join(lines) + "\n"


def main() -> None:
    from recommender.target.folders import repo_models_dir
    from recommender.measure.host_lock import exclusive
    from recommender.frontend.model_import import import_model
    from recommender.target.spec import parse_target
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", required=True, help="the run's model (its report names the spec)")
    ap.add_argument("--run", help="a schedrec transfer output folder (default: the latency table's run)")
    ap.add_argument("--target", default="native")
    ap.add_argument("--iters", type=int, default=30)
    ap.add_argument("--no-onnxruntime", action="store_true", help="leave out ONNX Runtime's per-node profile")
    args = ap.parse_args()
    target = parse_target(args.target)
    run = Path(args.run) if args.run else repo_models_dir() / target.key / "latency" / args.model
    if not (run / "report.json").exists() or not (run / "database").is_dir():
        raise SchedrecError(f"no finished run at {run} (report.json and database/; python scripts/latency_table.py "
                            f"--models {args.model} rebuilds a latency run's database from its committed rows)")
    report = read_json(run / "report.json")
    if report["target_key"] != target.key:
        raise SchedrecError(f"{run} was searched for {report['target_key']}, not {target.key}")
    model = import_model(report["spec"], target.tvm())
    threads = str(target.config.get("num-cores", 1))
    os.environ.setdefault("TVM_NUM_THREADS", threads)
    with tempfile.TemporaryDirectory() as scratch:
        lib = build(model, target, run / "database", str(Path(scratch) / "model.so"))
        with exclusive(f"profiling {args.model}"):
            calls, timed, plain = profile(lib, list(zip(model.input_shapes, model.input_dtypes)), args.iters)
            ort_profile = (onnxruntime_profile(args.model, int(threads), args.iters)
                           if args.model in ZOO and not args.no_onnxruntime else None)
    kernels = rows(report, calls, args.iters)
    names = {r["kernel"] for r in kernels}
    other = sum(statistics.median(v) * (len(v) // args.iters) for s, v in calls.items() if s not in names)
    out = {**run_header(target), "model": args.model, "run": str(run.relative_to(ROOT)) if run.is_relative_to(ROOT)
           else str(run), "iters": args.iters, "threads": int(threads),
           "command": f"python benchmarks/model_profile.py --model {args.model}",
           "totals": {"model_s": statistics.median(plain), "instrumented_s": statistics.median(timed),
                      "kernels_in_model_s": sum(r["in_model_s"] * r["calls"] for r in kernels),
                      "kernels_alone_s": sum((r["alone_s"] or 0) * r["calls"] for r in kernels),
                      "other_calls_s": other},
           "other_calls": {s: statistics.median(v) for s, v in calls.items() if s not in names},
           "kernels": kernels, **({"onnxruntime": ort_profile} if ort_profile else {})}
    folder = results_dir(target.key)
    atomic_write_json(str(folder / f"profile.{args.model}.json"), out)
    atomic_write_text(str(folder / f"profile.{args.model}.md"), markdown(out))
    print(markdown(out))


if __name__ == "__main__":
    run_script(main)
