"""Does packing the weights pay for schedules transferred from a bank tuned without packing?

`schedrec transfer --pack-weights` marks a model's weights layout-free, so that a replayed schedule packs
them (MetaSchedule's RewriteLayout postprocessor) in the order its loops read them; the packing is folded
into the model's constants at build. For the heaviest kernels of a model this replays each kernel's own
best bank record onto the kernel as extracted and onto the kernel with its weights marked layout-free,
checks the packing version's output against the plain one, and times the plain version against the packed
one without its packing block (the weight packed ahead, as the model runs it), interleaved, in process with
the target's threads; the best of 3 rounds of 7-repeat medians of each.

    TVM_NUM_THREADS=2 python benchmarks/pack_weights_probe.py [--model resnet50] [--kernels 5]
writes benchmarks/results/<target-key>/pack_weights.json and .md (keep the machine otherwise idle).
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from recommender.core.fileio import atomic_write_json, atomic_write_text  # noqa: E402
from results_dir import results_dir, run_header  # noqa: E402


def _timed(libs: dict, args: dict, rounds: int = 3) -> dict[str, float]:
    """The best 7-repeat median of each library over interleaved rounds, in seconds."""
    import tvm
    best: dict[str, float] = {}
    for _ in range(rounds):
        for name, lib in libs.items():
            ev = lib.time_evaluator("main", tvm.cpu(), number=1, repeat=7, min_repeat_ms=50)
            best[name] = min(best.get(name, float("inf")), float(np.median(ev(*args[name]).results)))
    return best


def probe_kernel(k: object, marked: object, source: object, tt: object) -> dict:
    """Replay `source` onto the kernel as is and onto its layout-free twin; check and time both."""
    import tvm
    from tvm.s_tir import meta_schedule as ms

    from recommender.measure.worker import without_weight_rewrite
    from recommender.transfer.replay import replay_trace
    plain = replay_trace(source.trace_json, source.source_mod, k.mod, tt)
    packing = replay_trace(source.trace_json, source.source_mod, marked.mod, tt)
    stripped = without_weight_rewrite(packing.mod)
    row = {"kernel": k.name, "weight": k.weight, "gflop": round(k.flops / 1e9, 4),
           "weight_shape": list(k.args[1][0]), "packed": stripped is not None}
    if stripped is None:
        return row
    libs = {"plain": tvm.compile(plain.mod, target=tt).jit(), "packed": tvm.compile(stripped[0], target=tt).jit()}
    check = tvm.compile(packing.mod, target=tt).jit()
    rng = np.random.default_rng(0)
    args = {"plain": [tvm.runtime.tensor(rng.uniform(-1, 1, [int(d) for d in a.shape]).astype(a.dtype))
                      for a in ms.arg_info.ArgInfo.from_entry_func(plain.mod, remove_preproc=False)]}
    args["packed"] = [tvm.runtime.tensor(rng.uniform(-1, 1, shape).astype(dtype)) for shape, dtype in stripped[1]]
    same = [tvm.runtime.tensor(a.numpy()) for a in args["plain"]]
    libs["plain"]["main"](*args["plain"])
    check["main"](*same)
    row["check_ok"] = bool(np.allclose(args["plain"][-1].numpy(), same[-1].numpy(), rtol=1e-3, atol=1e-4))
    row["packed_weight_shape"] = stripped[1][1][0]
    t = _timed(libs, args)
    row.update(plain_ms=round(t["plain"] * 1e3, 4), packed_ms=round(t["packed"] * 1e3, 4),
               speedup=round(t["plain"] / t["packed"], 3))
    return row


def main() -> None:
    from recommender.transfer.candidates import BankIndex
    from recommender.frontend.kernels import extract_kernels
    from recommender.frontend.model_import import import_model
    from recommender.target.spec import parse_target
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--target", default="native")
    ap.add_argument("--model", default="resnet50", help="a bank or reference model with its own records")
    ap.add_argument("--kernels", type=int, default=5, help="the heaviest this many kernels with records")
    args = ap.parse_args()
    target = parse_target(args.target)
    tt = target.tvm()
    root = ROOT / "models" / target.key
    folder = next((root / kind for kind in ("bank", "reference") if (root / kind / args.model).is_dir()), None)
    if folder is None:
        raise SystemExit(f"pack_weights_probe.py: error: {args.model} is in neither bank nor reference of {target.key}")
    own = {bk.name: bk for bk in BankIndex(folder).kernels[args.model] if bk.sources}
    spec = f"zoo:{args.model}"
    kernels = {k.name: k for k in extract_kernels(import_model(spec, tt), tt)}
    # marking renames a kernel by a trailing "1" (a new PrimFunc with the attribute)
    marked = {(k.name[:-1] if k.name[:-1] in kernels else k.name): k
              for k in extract_kernels(import_model(spec, tt, pack_weights=True), tt)}
    heavy = sorted((k for k in kernels.values() if k.name in own and k.name in marked),
                   key=lambda k: -k.total_flops)[:args.kernels]
    out = {**run_header(target), "model": args.model, "kernels": []}
    for k in heavy:
        row = probe_kernel(k, marked[k.name], own[k.name].sources[0], tt)
        print(json.dumps(row), file=sys.stderr, flush=True)
        out["kernels"].append(row)
    res = results_dir(target.key)
    atomic_write_json(str(res / "pack_weights.json"), out)
    speedups = [r["speedup"] for r in out["kernels"] if r.get("speedup")]
    lines = [f"# Packed weights under transferred schedules ({target.key}, {out['cpu']}, "
             f"{target.config.get('num-cores')} threads, {out['date']})", "",
             f"`TVM_NUM_THREADS={target.config.get('num-cores')} python benchmarks/pack_weights_probe.py --model "
             f"{args.model} --kernels {args.kernels}`: each kernel's own best {folder.name} record (tuned without "
             "packing) replayed onto the kernel as extracted and onto the kernel with its weights marked "
             "layout-free (RewriteLayout packs them); the packed version timed without its packing block (the "
             "weight packed ahead, as the model runs it); best of 3 interleaved rounds of 7-repeat medians.", "",
             "| kernel | weight | weight shape | packed as | output check | plain ms | packed ms | plain / packed |",
             "|---|---|---|---|---|---|---|---|"]
    for r in out["kernels"]:
        lines.append(f"| {r['kernel'][:44]} | {r['weight']} | {'x'.join(map(str, r['weight_shape']))} | "
                     f"{'x'.join(map(str, r.get('packed_weight_shape', []))) or 'not packed'} | "
                     f"{'ok' if r.get('check_ok') else '-'} | {r.get('plain_ms', '-')} | {r.get('packed_ms', '-')} | "
                     f"{r.get('speedup', '-')} |")
    if speedups:
        lines += ["", f"Median plain / packed: {float(np.median(speedups)):.2f} over {len(speedups)} kernels."]
    atomic_write_text(str(res / "pack_weights.md"), "\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    from recommender.core.errors import run_script
    run_script(main)
