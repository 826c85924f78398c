"""`schedrec zoo`, `target`, `kernels`: what a model and a target look like to schedrec."""
from __future__ import annotations

import argparse
import json
import sys

from . import options
from .output import fmt_flops, print_table


def cmd_kernels(args: argparse.Namespace) -> int:
    """List a model's kernels with their class, weight, FLOPs and shapes."""
    from featurize.tir_structure import class_label

    from ..core.fileio import atomic_write_json
    from ..frontend.kernels import extract_kernels, flop_shares
    from ..frontend.model_import import import_model
    from ..target.spec import parse_target

    target = parse_target(args.target)
    print(f"importing {args.model} for {target.key} ...", file=sys.stderr)
    model = import_model(args.model, target.tvm())
    kernels = extract_kernels(model, target.tvm())
    shares = flop_shares(kernels)
    rows = []
    for i, (k, share) in enumerate(zip(kernels, shares)):
        shapes = " ".join("x".join(map(str, s)) or "scalar" for s, _ in k.args)
        rows.append([str(i), k.name[:48], k.kind, str(k.weight), fmt_flops(k.flops), f"{100 * share:.1f}%",
                     shapes[:60], k.class_key if args.full_class else class_label(k.class_key)])
    print_table(rows, ["#", "kernel", "kind", "w", "FLOPs", "share", "arg shapes", "class"])
    classes = {k.class_key for k in kernels}
    print(f"{model.name}: {len(kernels)} kernels, {len(classes)} classes, "
          f"{fmt_flops(sum(k.total_flops for k in kernels))}FLOPs per inference, target {target.key}")
    if args.json:
        atomic_write_json(args.json, {"model": model.name, "spec": args.model, "target": target.config,
                                      "target_key": target.key,
                                      "inputs": [{"name": n, "shape": list(s), "dtype": d} for n, s, d in
                                                 zip(model.input_names, model.input_shapes, model.input_dtypes)],
                                      "kernels": [dict(k.to_json(), flop_share=s)
                                                  for k, s in zip(kernels, shares)]})
        print(f"wrote {args.json}", file=sys.stderr)
    return 0


def cmd_zoo(args: argparse.Namespace) -> int:
    """List the zoo models."""
    from ..frontend.zoo import ZOO
    print_table([[e.name, e.family, e.description] for e in ZOO.values()], ["name", "family", "description"])
    return 0


def cmd_target(args: argparse.Namespace) -> int:
    """Show the target, its key, its hardware as rankers see it, and which bank and ranker a transfer on it
    would use."""
    from dataclasses import asdict

    from ..core.errors import SchedrecError
    from ..core.fileio import display_path
    from ..target.folders import rankers_for, repo_models_dir, resolve
    from ..target.hardware import hardware_for
    from ..target.spec import parse_target
    t = parse_target(args.target)
    out: dict = {"target": t.config, "target_key": t.key}
    notes = []
    hw, note = hardware_for(t.key)
    out["hardware"] = asdict(hw)
    notes.append(note)
    try:
        bank, note = resolve(repo_models_dir(), t.key, "bank")
        out["transfer_bank"] = display_path(bank / "bank")
        notes.append(note)
        rec, note = rankers_for(repo_models_dir(), t.key)
        out["transfer_rankers"] = display_path(rec / "rankers")
        notes.append(note)
    except SchedrecError as err:
        notes.append(f"note: {err}")
    print(json.dumps(out, indent=2))
    for n in notes:
        if n:
            print(n, file=sys.stderr)
    return 0


def _short(name: str, width: int) -> str:
    """`name` cut in the middle to `width` characters (kernels differ in their numbers at both ends)."""
    return name if len(name) <= width else name[:width - 17] + "..." + name[-14:]


def cmd_profile(args: argparse.Namespace) -> int:
    """Time every call of a model built with a schedule database: each kernel in the model beside its
    isolated (recorded) time, the VM's own calls, and the time between calls."""
    from pathlib import Path

    from ..core.errors import SchedrecError
    from ..frontend.model_import import model_name_from_spec
    from ..compare.profile import profile_model, write_profile
    from ..measure.vm_profile import gap_lines
    from ..target.spec import parse_target
    target = parse_target(args.target)
    db = Path(args.database) if args.database else None
    print(f"profiling {args.model} on {target.key} ({args.runs} runs) ...", file=sys.stderr)
    if args.cold and db is None:
        raise SchedrecError("--cold times the database's schedules alone: give --database")
    data = profile_model(args.model, target, db, runs=args.runs, fast_math=not args.exact_math, cold=args.cold)
    rows = [[_short(r["symbol"], 56), r["kind"], str(r["calls"]), f"{r['model_s'] * 1e3:.3f}",
             f"{r['isolated_s'] * 1e3:.3f}" if "isolated_s" in r else "-",
             f"{r['model_s'] / r['isolated_s']:.2f}" if r.get("isolated_s") else "-"]
            + ([f"{r['cold_s'] * 1e3:.3f}" if "cold_s" in r else "-"] if args.cold else [])
            for r in data["rows"][:args.top]]
    print_table(rows, ["call", "kind", "calls", "model ms", "isolated ms", "model/isolated"]
                + (["cold ms"] if args.cold else []))
    if len(data["rows"]) > args.top:
        print(f"... {len(data['rows']) - args.top} more in the JSON")
    for line in gap_lines(data):
        print(line)
    out = Path(args.out) if args.out else Path("out") / "profile" / f"{model_name_from_spec(args.model)}.json"
    write_profile(data, out)
    print(f"-> {out}")
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    k = sub.add_parser("kernels", help=cmd_kernels.__doc__, description=cmd_kernels.__doc__)
    k.add_argument("model", metavar="MODEL", help="zoo:NAME, a .onnx file or a .pt2 (torch.export) file")
    options.target(k)
    options.input_shape(k)
    k.add_argument("--json", metavar="FILE", help="also write the kernel list as JSON")
    k.add_argument("--full-class", action="store_true", help="print full class keys (with the block list)")
    k.set_defaults(func=cmd_kernels)

    z = sub.add_parser("zoo", help=cmd_zoo.__doc__, description=cmd_zoo.__doc__)
    z.set_defaults(func=cmd_zoo)

    pr = sub.add_parser("profile", help=cmd_profile.__doc__, description=cmd_profile.__doc__)
    pr.add_argument("model", metavar="MODEL", help="zoo:NAME, a .onnx file or a .pt2 (torch.export) file")
    pr.add_argument("--database", metavar="DIR",
                    help="a MetaSchedule database (a transfer's OUT/database); none: MetaSchedule's defaults")
    options.target(pr)
    options.input_shape(pr)
    pr.add_argument("--runs", type=options.positive_int, default=20,
                    help="instrumented and plain runs, interleaved (20)")
    pr.add_argument("--top", type=options.positive_int, default=30, help="rows to print (30); the JSON has all")
    pr.add_argument("--cold", action="store_true",
                    help="also time each kernel with a record alone with cold caches (one call a repeat, every "
                         "argument but the first flushed before each call), as it reads its weights in the model")
    options.exact_math(pr)
    options.out(pr, "out/profile/MODEL.json", what="the profile's JSON", metavar="FILE")
    pr.set_defaults(func=cmd_profile)

    t = sub.add_parser("target", help=cmd_target.__doc__, description=cmd_target.__doc__)
    options.target(t)
    t.set_defaults(func=cmd_target)
