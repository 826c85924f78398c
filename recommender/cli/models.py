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
    """Show the target and its key."""
    from ..target.spec import parse_target
    t = parse_target(args.target)
    print(json.dumps({"target": t.config, "target_key": t.key}, indent=2))
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

    t = sub.add_parser("target", help=cmd_target.__doc__, description=cmd_target.__doc__)
    options.target(t)
    t.set_defaults(func=cmd_target)
