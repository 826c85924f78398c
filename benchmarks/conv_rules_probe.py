"""How fast are the conv (or matmul) rule's register tiles against the best transferred donor, and PyTorch?

For the heaviest conv kernels of a model, the register tiles of `recommender.rules.conv` (with --all-tiles,
more shapes than the rule keeps) are built, checked against the unscheduled kernel and measured, side by
side with the fastest donor schedule the model's latency run measured (its trace replayed from
models/<target>/latency/<model>/candidates.jsonl.gz, where this target has one) and with PyTorch's conv on the same shapes; GFLOP/s
against the CPU's FMA peak (benchmarks/results/<target-key>/peak_gflops.json). With --rule matmul, the
same for the heaviest matmul and batch_matmul kernels and `recommender.rules.matmul`.

    python benchmarks/conv_rules_probe.py [--models vgg16,resnet50] [--kernels 4] [--all-tiles] [--rule matmul]
        [--reduction-blocks]
writes benchmarks/results/<target-key>/conv_rules.json and .md (matmul_rules.* with --rule matmul); keep the
machine otherwise idle.
"""
from __future__ import annotations

import argparse
import gzip
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from recommender.core.fileio import atomic_write_json, atomic_write_text  # noqa: E402


def all_tiles(channels: int, height: int, width: int, lanes: int) -> list[tuple[int, int, int]]:
    """Every register tile of the rule's shapes for `lanes` and a few more, over every column tile of
    either register width that divides the width (not only the few the rule keeps)."""
    from recommender.rules import conv as cr
    widths = sorted({w for ws in (*cr.COLUMN_TILES.values(), *cr.NARROW_TILES.values()) for w in ws}, reverse=True)
    shapes = dict.fromkeys(cr.TILE_SHAPES[lanes] + ((2, 4), (8, 2), (4, 4), (16, 1))
                           if channels > 1 else cr.DEPTHWISE_SHAPES[lanes])
    return [(tc, th, tw) for tw in widths if width % tw == 0
            for tc, th in shapes if channels % tc == 0 and height % th == 0]


def all_matmul_tiles(rows: int, columns: int, depth: int, lanes: int) -> list[tuple[int, int, int, int, bool]]:
    """Every register tile of the matmul rule's shapes for `lanes` that fits the output, with every K block,
    W read in place and packed, and the rule's own (its ragged-row tiles included)."""
    from recommender.rules import matmul as mr
    every = [(tm, nv, lanes, kb, packed) for tm, nv in mr.TILE_SHAPES[lanes]
             if rows % tm == 0 and columns % (nv * lanes) == 0 for kb in mr.k_blocks(depth) for packed in (False, True)]
    return list(dict.fromkeys(mr.matmul_tiles(rows, columns, depth, lanes) + every))


def rule_kinds() -> dict:
    """Per --rule: (rule module, kernel class prefixes, its output shape, its own tiles, every tile, torch op)."""
    from recommender.rules import conv as conv_rules, matmul as matmul_rules
    return {"conv": (conv_rules, ("conv2d/", "group_conv2d/", "depthwise_conv2d/"), conv_rules.conv_output, conv_rules.conv_tiles, all_tiles, "conv2d"),
            "matmul": (matmul_rules, ("matmul/", "batch_matmul/"), matmul_rules.matmul_output,
                       matmul_rules.matmul_tiles, all_matmul_tiles, "matmul")}


def best_donor_trace(target_key: str, model: str, kernel: str, any_source: bool = False) -> tuple[list | None, str]:
    """The trace of the fastest transferred (donor) schedule the model's latency run measured for `kernel`
    (rule-built and design-space rows left out, unless `any_source`: then the fastest of every schedule it
    measured), and its source; (None, "none") if none was measured."""
    path = ROOT / "models" / target_key / "latency" / model / "candidates.jsonl.gz"
    best = None
    if not path.exists():  # no latency run of this model on this target
        return None, "none"
    with gzip.open(path, "rt") as f:
        for line in f:
            row = json.loads(line)
            if (row["target_kernel"] == kernel and row["status"] == "ok" and row["latency_s"] and row["trace"]
                    and (any_source or row["match"] in ("class", "anchor")) and (best is None or row["latency_s"] < best["latency_s"])):
                best = row
    if best is None:
        return None, "none"
    return best["trace"], f"{best['source_model']}/{best['source_kernel']}#{best['source_rank']}"


def main() -> None:
    from peak_gflops import measured_peak, torch_seconds
    from results_dir import results_dir, run_header

    from recommender.frontend.kernels import extract_kernels
    from recommender.measure import Measurer
    from recommender.frontend.model_import import import_model
    from recommender.transfer.replay import postprocess, apply_replayed
    from recommender.target.spec import float32_lanes, parse_target
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--target", default="native")
    ap.add_argument("--models", default="vgg16,resnet50")
    ap.add_argument("--kernels", type=int, default=4, help="the heaviest this many conv kernels per model")
    ap.add_argument("--all-tiles", action="store_true", help="every tile allowed, not only the rule's own")
    ap.add_argument("--rule", choices=("conv", "matmul"), default="conv")
    ap.add_argument("--reduction-blocks", action="store_true",
                    help="conv: also every tile with each of the kernel's reduction blocks (blocks of input "
                         "channels outside the column tiles, rules.conv.reduction_blocks)")
    ap.add_argument("--flat", action="store_true",
                    help="only 1x1 convs that get flat tiles (maps narrower than a vector), their column and flat "
                         "tiles against the fastest schedule of any source the latency run measured; results to "
                         "conv_rules.flat.json and .md")
    ap.add_argument("--stride-2-plain", action="store_true",
                    help="conv rule, stride-2 convs only: also measure each column tile with the padded input in its own "
                         "layout (tile label + 'plain'), beside the rule's even/odd columns apart; to <rule>_rules.stride2.*")
    ap.add_argument("--padded", action="store_true",
                    help="only convs whose epilogue pads the output for the next conv (class ending +PadInput), "
                         "against the fastest schedule of any source the latency run measured; results to "
                         "<rule>_rules.padded.json and .md")
    ap.add_argument("--only", default="", help="only kernels of this class prefix (e.g. depthwise_conv2d/); "
                    "the results then go to <rule>_rules.<kind>.json and .md")
    args = ap.parse_args()
    rule, prefixes, output_of, own_tiles, every_tile, torch_op = rule_kinds()[args.rule]
    name = f"{args.rule}_rules"
    if args.only:
        if not args.only.startswith(prefixes):
            ap.error(f"--only {args.only}: not a class of the {args.rule} rule ({', '.join(prefixes)})")
        prefixes = (args.only,)
        name += "." + args.only.rstrip("/")
    if args.padded:
        name += ".padded"
    if args.stride_2_plain:
        name += ".stride2"
    if args.reduction_blocks:
        name += ".reduction"
    if args.flat:
        if args.rule != "conv":
            ap.error("--flat: conv rule only")
        name += ".flat"
    target = parse_target(args.target)
    tt = target.tvm()
    lanes = float32_lanes(tt)
    res = results_dir(target.key)
    threads = int(target.config.get("num-cores", 1))
    out = {**run_header(target),
           "peak_gflops": measured_peak(target.key),
           "threads": threads, "lanes": lanes, "all_tiles": args.all_tiles, "kernels": []}
    with Measurer(target.config) as measurer:
        for model in args.models.split(","):
            kernels = [k for k in extract_kernels(import_model(f"zoo:{model}", tt), tt)
                       if k.class_key.startswith(prefixes) and (not args.padded or k.class_key.endswith("+PadInput"))
                       and (not args.flat or rule.flat_fits(k.mod, lanes))
                       and (not args.stride_2_plain or rule.is_stride_2(k.mod))]
            if args.rule == "matmul":  # a transformer's kernels come in graph order: the heaviest first
                kernels.sort(key=lambda k: -k.total_flops)
            for k in kernels[:args.kernels]:
                shape = output_of(k.mod)
                tiles = (every_tile(*shape, lanes) if args.all_tiles else own_tiles(*shape, lanes=lanes)) if shape else []
                if args.flat:
                    tiles += rule.flat_tiles(shape[0], lanes, shape[1] * shape[2])
                if args.reduction_blocks and args.rule == "conv":
                    tiles += [(*t, rb) for rb in rule.reduction_blocks(k.mod) for t in tiles if len(t) == 3]
                scheds = rule.rule_schedules(k.mod, tiles)
                if args.stride_2_plain and rule.is_stride_2(k.mod):
                    columns = [t for t in tiles if not isinstance(t, rule.FlatTile)]
                    plain = rule.rule_schedules(k.mod, columns, deinterleave=False)
                    if len(plain) == len(columns) and len(scheds) == len(tiles):
                        tiles, scheds = tiles + [(*t, "plain") for t in columns], scheds + plain
                mods = [postprocess(s, k.mod, tt, None).mod for s in scheds]
                trace, source = best_donor_trace(target.key, model, k.name, any_source=args.padded or args.flat)
                donor = [apply_replayed(trace, k.mod, tt).mod] if trace else []
                results = measurer.measure(donor + mods, reference=k.mod)
                # a padded output is not what PyTorch's conv gives: no PyTorch column there
                t_torch = None if args.padded else torch_seconds(
                    torch_op, [{"shape": list(s), "dtype": d} for s, d in k.args], threads)
                gf = lambda s: round(k.flops / s / 1e9, 1) if s else None  # noqa: E731
                row = {"model": model, "kernel": k.name, "weight": k.weight, "gflop": round(k.flops / 1e9, 3),
                       "shapes": [list(s) for s, _ in k.args[:2]], "donor_source": source,
                       "donor_gflops": gf(results[0].median) if donor and results[0].ok else None,
                       "rule_tiles": [list(t) for t in own_tiles(*shape, lanes=lanes)
                                      + (rule.flat_tiles(shape[0], lanes, shape[1] * shape[2]) if args.flat else [])] if shape else [],
                       "pytorch_gflops": gf(t_torch),
                       "tiles": [{"tile": list(t), "ok": r.ok, "gflops": gf(r.median) if r.ok else None,
                                  "error": "" if r.ok else r.error[:200]}
                                 for t, r in zip(tiles, results[len(donor):])]}
                out["kernels"].append(row)
                print(json.dumps(row), file=sys.stderr, flush=True)
                atomic_write_json(str(res / f"{name}.json"), out)
    lines = [f"# {args.rule.capitalize()} rule tiles against the best transferred donor and PyTorch ({target.key}, "
             f"{out['cpu']}, {threads} threads, {out['date']})", "",
             f"`python benchmarks/conv_rules_probe.py --models {args.models} --kernels {args.kernels}"
             f"{' --all-tiles' if args.all_tiles else ''}{' --rule matmul' if args.rule == 'matmul' else ''}"
             f"{f' --only {args.only}' if args.only else ''}{' --padded' if args.padded else ''}{' --flat' if args.flat else ''}"
             f"{' --stride-2-plain' if args.stride_2_plain else ''}{' --reduction-blocks' if args.reduction_blocks else ''}`"
             f": GFLOP/s (median of the measurer's runs); FMA peak "
             f"{out['peak_gflops']} GFLOP/s." + (" A tile of two numbers is a flat tile (channels, vectors of the "
             "map's positions flattened)." if args.flat else "") + (" A tile ending in 'plain' is a column tile of a stride-2 conv "
             "whose padded input keeps its own layout (the rule's keeps even and odd columns apart)."
             if args.stride_2_plain else "") + (" A tile of four numbers has a reduction block: that many input "
             "channels at a time, outside the column tiles." if args.reduction_blocks else ""), "",
             f"| model | kernel | shapes | {'best of the latency run' if args.padded or args.flat else 'best donor'} GFLOP/s (source) | best tile | its GFLOP/s | best of the rule's "
             "own tiles | PyTorch GFLOP/s |", "|---|---|---|---|---|---|---|---|"]
    for r in out["kernels"]:
        ok = [t for t in r["tiles"] if t["ok"]]
        best = max(ok, key=lambda t: t["gflops"]) if ok else None
        own = max((t["gflops"] for t in ok if t["tile"] in r["rule_tiles"]), default=None)
        lines.append(f"| {r['model']} | {r['kernel'][:36]} | {' '.join('x'.join(map(str, s)) for s in r['shapes'])} | "
                     f"{r['donor_gflops']} ({r['donor_source'][:40]}) | {best['tile'] if best else '-'} | "
                     f"{best['gflops'] if best else '-'} | {own if own is not None else '-'} | {r['pytorch_gflops'] or '-'} |")
    atomic_write_text(str(res / f"{name}.md"), "\n".join(lines) + "\n")
    print(f"wrote {res / name}.json and .md", file=sys.stderr)


if __name__ == "__main__":
    main()
