"""How well kernel classes group replayable kernels: replay one schedule per class onto the class's
other kernels and count successes (replay + postprocessors + build).

The source schedule of each class is a random point of MetaSchedule's design space for the class's
heaviest kernel, postprocessed like a tuning record (the bank does not exist yet at this step).
Also counts how many replays would fail without renaming the trace's block lookups.

Usage: python scripts/class_replay_check.py zoo:resnet50 zoo:mobilenet_v2 ... [--out FILE]
"""
from __future__ import annotations

import argparse
import json
import time
from collections import defaultdict

from featurize.trace_json import strip_postproc, trace_to_json
from recommender.frontend.kernels import extract_kernels
from recommender.frontend.model_import import import_model
from recommender.transfer.replay import ReplayFailure, postprocs_for, replay_trace
from recommender.target.spec import native_target


def source_schedule(kernel, target, seed: int = 0):
    from tvm.s_tir import meta_schedule as ms

    from recommender.core.tvm_setup import load_tensor_intrinsics
    load_tensor_intrinsics()
    ctx = ms.TuneContext(mod=kernel.mod, target=target, space_generator="post-order-apply",
                         num_threads=1, rand_state=seed)
    for sch in ctx.space_generator.generate_design_space(kernel.mod):
        sch.enter_postproc()
        if all(p.apply(sch) for p in ctx.space_generator.postprocs):
            return trace_to_json(sch.trace)
    return None


def raw_replay_ok(trace_json, kernel, target) -> bool:
    """Replay without block renaming, then the target's postprocessors and a build."""
    import tvm
    from tvm.s_tir import Schedule, Trace
    try:
        sch = Schedule(kernel.mod)
        Trace.apply_json_to_schedule(strip_postproc(trace_json), sch)
        sch.enter_postproc()
        if not all(p.apply(sch) for p in postprocs_for(kernel.mod, target)):
            return False
        tvm.compile(sch.mod, target=target)
        return True
    except Exception:
        return False


def try_replay(trace, src, dst, target, failures) -> bool:
    import tvm
    try:
        r = replay_trace(trace, src.mod, dst.mod, target, postprocs_for(dst.mod, target))
        tvm.compile(r.sch.mod, target=target)
        return True
    except ReplayFailure as err:
        failures[err.reason] += 1
    except Exception as err:  # build error
        failures["build_error"] += 1
        print("  build error", dst.name, str(err).splitlines()[-1][:200])
    return False


def cross_model(models: dict, target, cap: int) -> dict:
    """Replay the heaviest kernel of each class onto the class's kernels in the other models, and, as a
    control, onto kernels of the same anchor kind but another class (no renaming possible there)."""
    by_class = defaultdict(list)
    for spec, kernels in models.items():
        for k in kernels:
            by_class[k.class_key].append((spec, k))
    pairs = ok = raw_ok = 0
    failures: dict[str, int] = defaultdict(int)
    control_pairs = control_ok = 0
    for key, members in by_class.items():
        members.sort(key=lambda m: -m[1].total_flops)
        src_spec, src = members[0]
        others = [k for spec, k in members if spec != src_spec][:cap]
        kind = key.split("/", 1)[0]
        controls = [k for ckey, cm in by_class.items() if ckey != key and ckey.split("/", 1)[0] == kind
                    for spec, k in cm if spec != src_spec][:max(2, cap // 4)]
        if not others and not controls:
            continue
        trace = source_schedule(src, target)
        if trace is None:
            continue
        for dst in others:
            pairs += 1
            raw_ok += raw_replay_ok(trace, dst, target)
            ok += try_replay(trace, src, dst, target, failures)
        for dst in controls:
            control_pairs += 1
            control_ok += raw_replay_ok(trace, dst, target)
    return {"models": list(models), "pairs": pairs, "replayed_and_built": ok,
            "success_rate": round(ok / pairs, 4) if pairs else None,
            "success_without_block_renaming": raw_ok, "failures": dict(failures),
            "control_other_class_same_kind_pairs": control_pairs, "control_success": control_ok}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("models", nargs="+")
    ap.add_argument("--out", default="class_replay_check.json")
    ap.add_argument("--cross", action="store_true", help="replay across models instead of within each")
    ap.add_argument("--cap", type=int, default=12, help="targets per class in --cross mode")
    args = ap.parse_args()
    target = native_target().tvm()
    report = {}
    if args.cross:
        models = {spec: extract_kernels(import_model(spec, target), target) for spec in args.models}
        report["cross"] = cross_model(models, target, args.cap)
        print(json.dumps(report["cross"]))
        with open(args.out, "w") as f:
            json.dump(report, f, indent=1)
        return
    for spec in args.models:
        t0 = time.time()
        kernels = extract_kernels(import_model(spec, target), target)
        by_class = defaultdict(list)
        for k in kernels:
            by_class[k.class_key].append(k)
        pairs = ok = raw_ok = 0
        failures: dict[str, int] = defaultdict(int)
        for key, members in by_class.items():
            if len(members) < 2:
                continue
            src = members[0]  # heaviest first
            trace = source_schedule(src, target)
            if trace is None:
                failures["no_source_schedule"] += len(members) - 1
                continue
            for dst in members[1:]:
                pairs += 1
                raw_ok += raw_replay_ok(trace, dst, target)
                ok += try_replay(trace, src, dst, target, failures)
        multi = [k for k, m in by_class.items() if len(m) >= 2]
        report[spec] = {"kernels": len(kernels), "classes": len(by_class), "classes_with_2plus": len(multi),
                        "pairs": pairs, "replayed_and_built": ok,
                        "success_rate": round(ok / pairs, 4) if pairs else None,
                        "success_without_block_renaming": raw_ok, "failures": dict(failures),
                        "seconds": round(time.time() - t0, 1)}
        print(spec, json.dumps(report[spec]), flush=True)
        with open(args.out, "w") as f:
            json.dump(report, f, indent=1)


if __name__ == "__main__":
    main()
