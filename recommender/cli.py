"""The `schedrec` command line."""
from __future__ import annotations

import argparse
import sys
import traceback

from .errors import SchedrecError


def _fmt_flops(f: float) -> str:
    for unit, scale in (("G", 1e9), ("M", 1e6), ("K", 1e3)):
        if f >= scale:
            return f"{f / scale:.2f}{unit}"
    return f"{f:.0f}"


def _print_table(rows: list[list[str]], header: list[str]) -> None:
    widths = [max(len(str(r[i])) for r in rows + [header]) for i in range(len(header))]
    line = "  ".join(h.ljust(w) for h, w in zip(header, widths))
    print(line)
    print("-" * len(line))
    for r in rows:
        print("  ".join(str(c).ljust(w) for c, w in zip(r, widths)))


def cmd_kernels(args: argparse.Namespace) -> int:
    """List a model's kernels with their class, weight, FLOPs and shapes."""
    from featurize.tir_structure import class_label

    from .fileio import atomic_write_json
    from .kernels import extract_kernels, flop_shares
    from .model_import import import_model
    from .target import parse_target

    target = parse_target(args.target)
    print(f"importing {args.model} for {target.key} ...", file=sys.stderr)
    model = import_model(args.model, target.tvm())
    kernels = extract_kernels(model, target.tvm())
    shares = flop_shares(kernels)
    rows = []
    for i, (k, share) in enumerate(zip(kernels, shares)):
        shapes = " ".join("x".join(map(str, s)) or "scalar" for s, _ in k.args)
        rows.append([str(i), k.name[:48], k.kind, str(k.weight), _fmt_flops(k.flops), f"{100 * share:.1f}%",
                     shapes[:60], k.class_key if args.full_class else class_label(k.class_key)])
    _print_table(rows, ["#", "kernel", "kind", "w", "FLOPs", "share", "arg shapes", "class"])
    classes = {k.class_key for k in kernels}
    print(f"{model.name}: {len(kernels)} kernels, {len(classes)} classes, "
          f"{_fmt_flops(sum(k.total_flops for k in kernels))}FLOPs per inference, target {target.key}")
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
    from .zoo import ZOO
    _print_table([[e.name, e.family, e.description] for e in ZOO.values()], ["name", "family", "description"])
    return 0


def cmd_target(args: argparse.Namespace) -> int:
    """Show the target and its key."""
    import json
    from .target import parse_target
    t = parse_target(args.target)
    print(json.dumps({"target": t.config, "target_key": t.key}, indent=2))
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="schedrec", description="ML-guided schedule recommender for TVM MetaSchedule.")
    p.add_argument("--debug", action="store_true", help="show full tracebacks on errors")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", required=True)

    def target_opt(sp: argparse.ArgumentParser) -> None:
        sp.add_argument("--target", default="native",
                        help="'native' (detect the host CPU), a JSON object, or a JSON file (default: native)")

    k = sub.add_parser("kernels", help=cmd_kernels.__doc__, description=cmd_kernels.__doc__)
    k.add_argument("model", metavar="MODEL", help="zoo:NAME, a .onnx file or a .pt2 (torch.export) file")
    target_opt(k)
    k.add_argument("--json", metavar="FILE", help="also write the kernel list as JSON")
    k.add_argument("--full-class", action="store_true", help="print full class keys (with the block list)")
    k.set_defaults(func=cmd_kernels)

    z = sub.add_parser("zoo", help=cmd_zoo.__doc__, description=cmd_zoo.__doc__)
    z.set_defaults(func=cmd_zoo)

    t = sub.add_parser("target", help=cmd_target.__doc__, description=cmd_target.__doc__)
    target_opt(t)
    t.set_defaults(func=cmd_target)
    return p


def main(argv: list[str] | None = None) -> int:
    import warnings
    warnings.filterwarnings("ignore", category=FutureWarning)  # torch/transformers deprecation chatter
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except SchedrecError as err:
        if args.debug:
            traceback.print_exc()
        print(f"schedrec: error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("schedrec: interrupted", file=sys.stderr)
        return 130
    except Exception as err:  # an unexpected failure: one line unless --debug
        if args.debug:
            traceback.print_exc()
        msg = str(err).strip().splitlines()
        print(f"schedrec: internal error: {type(err).__name__}: {msg[-1] if msg else ''} "
              f"(rerun with --debug for the traceback)", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
