"""What Relax's pad_temp copy of an unpadded (1x1) conv's input costs the conv rule's tiles.

Relax legalizes every conv with a pad_temp block, a plain copy of the input where the conv has no padding.
The conv rule inlines such a copy (`recommender.rules.conv.rule_schedules`, inline_copies), so the tile reads the input in place;
this probe builds the rule's own tiles of a model's heaviest pointwise convs both ways (copy inlined, copy
made once at the root as before) and measures them side by side in one measurer call, output-checked
against the unscheduled kernel.

    python benchmarks/pad_copy_probe.py [--models mnasnet1_0,efficientnet_b0] [--kernels 8]
writes benchmarks/results/<target-key>/pad_copy.json and .md; keep the machine otherwise idle.

With --stride-2, the 1x1 stride-2 convs (ResNet's projections): each of the rule's column tiles with the input copy
inlined (the strided input read in place, as the rule builds them), at the root with even and odd columns apart,
and with rows and columns apart (the conv then reads one dense map per channel), beside the rule's flat tiles
(`rules.conv.flat_tiles`, which it gives such convs on maps of any size since 2026-12-07); to pad_copy.stride2.json
and .md.
"""
from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from recommender.core.fileio import atomic_write_json, atomic_write_text  # noqa: E402


def pointwise_convs(model: str, target: object, count: int) -> list:
    """The model's `count` heaviest conv kernels with a 1x1 filter that the conv rule applies to."""
    from recommender.rules import conv as cr
    from recommender.frontend.kernels import extract_kernels
    from recommender.frontend.model_import import import_model
    kernels = [k for k in extract_kernels(import_model(f"zoo:{model}", target), target)
               if k.class_key.startswith("conv2d/") and cr.conv_output(k.mod)]
    return [k for k in kernels if (cr.conv_extents(k.mod) or [])[5:] == [1, 1]][:count]


def both_ways(kernel: object, target: object, lanes: int) -> tuple[list, list, list]:
    """(tiles, their modules with the copy inlined, the same tiles with the copy at the root), postprocessed;
    a tile that either way refuses is left out of both."""
    from recommender.rules import conv as cr
    from recommender.transfer.replay import ReplayFailure, postprocess
    tiles = cr.conv_tiles(*cr.conv_output(kernel.mod), lanes=lanes)
    built = {}
    for inline in (True, False):
        for tile in tiles:
            scheds = cr.rule_schedules(kernel.mod, [tile], lanes=lanes, inline_copies=inline)
            try:
                built[(tile, inline)] = postprocess(scheds[0], kernel.mod, target, None).mod if scheds else None
            except ReplayFailure:
                built[(tile, inline)] = None
    kept = [t for t in tiles if built[(t, True)] is not None and built[(t, False)] is not None]
    return kept, [built[(t, True)] for t in kept], [built[(t, False)] for t in kept]


def stride_2_ways(kernel: object, target: object, lanes: int) -> tuple[list, list]:
    """(labels, postprocessed modules) of a 1x1 stride-2 conv: each column tile with its input copy inlined, at the
    root with the columns apart, and as the rule builds it (rows and columns apart), then each flat tile; a
    schedule a primitive refuses is left out."""
    from recommender.rules import conv as cr
    from recommender.rules.common import tiled
    from recommender.transfer.replay import ReplayFailure, postprocess

    def columns_apart(sch, tile):  # the rule's deinterleaving, applied to the copy kept at the root
        cr._tile(sch, tile, inline_copies=False)

    def rows_and_columns_apart(sch, tile):
        producers = cr._around_conv(sch)[1]
        cr._tile(sch, tile, inline_copies=False, deinterleave=False)
        for b in producers:
            sch.transform_layout(b, ("write", 0), lambda n, c, h, w: (n, c, h % 2, w % 2, h // 2, w // 2))

    shape = cr.conv_output(kernel.mod)
    ways = {"inlined": cr._tile, "columns apart": columns_apart, "rows and columns apart": rows_and_columns_apart}
    built = [((*tile, way), sch) for tile in cr.conv_tiles(*shape, lanes=lanes) for way, apply in ways.items()
             for _, sch in tiled(kernel.mod, [tile], apply)]
    built += [((tile.channels, tile.vectors, "flat"), sch) for tile, sch in tiled(
        kernel.mod, cr.flat_tiles(shape[0], lanes, shape[1] * shape[2]), lambda sch, t: cr._flat_tile(sch, t, lanes))]
    labels, mods = [], []
    for label, sch in built:
        try:
            mods.append(postprocess(sch, kernel.mod, target, None).mod)
        except ReplayFailure:
            continue
        labels.append(label)
    return labels, mods


def stride_2_main(args, target, measurer, out: dict, res: Path) -> list[str]:
    """--stride-2: the 1x1 stride-2 convs of each model, every way of `stride_2_ways` side by side, the JSON kept in
    `res` as it grows; the report's lines."""
    from recommender.frontend.kernels import extract_kernels
    from recommender.frontend.model_import import import_model
    from recommender.rules import conv as cr
    from recommender.target.spec import float32_lanes
    tt = target.tvm()
    lanes = float32_lanes(tt)
    for model in args.models.split(","):
        kernels = [k for k in extract_kernels(import_model(f"zoo:{model}", tt), tt)
                   if k.class_key.startswith("conv2d/") and cr.conv_output(k.mod) and cr.is_stride_2(k.mod)
                   and (cr.conv_extents(k.mod) or [])[5:] == [1, 1]][:args.kernels]
        for k in kernels:
            labels, mods = stride_2_ways(k, tt, lanes)
            results = measurer.measure(mods, reference=k.mod)
            gf = [round(k.flops / r.median / 1e9, 1) if r.ok else None for r in results]
            best = {way: max((g for lab, g in zip(labels, gf) if lab[-1] == way and g), default=None)
                    for way in ("inlined", "columns apart", "rows and columns apart", "flat")}
            out["kernels"].append({"model": model, "kernel": k.name, "weight": k.weight,
                                   "shapes": [list(s) for s, _ in k.args[:2]],
                                   "ways": [{"tile": list(lab[:-1]), "way": lab[-1], "gflops": g}
                                            for lab, g in zip(labels, gf)], "best": best})
            print(f"{model} {k.name[:36]} best {best}", file=sys.stderr, flush=True)
            atomic_write_json(str(res / "pad_copy.stride2.json"), out)
    lines = [f"# 1x1 stride-2 convs: the input copy inlined, at the root, and flat tiles ({target.key}, {out['cpu']}, "
             f"{out['threads']} threads, {out['date']})", "",
             f"`{out['command']}`: GFLOP/s of the best of the conv rule's column tiles each way and of its flat tiles, "
             "measured side by side (median of the measurer's runs), output-checked. *inlined*: the conv reads the "
             "strided input in place (the rule's column tiles); *columns apart*: Relax's copy of the input made at the "
             "root with even and odd columns apart; *rows and columns apart*: the conv then reads one dense map per "
             "channel; *flat*: the rule's flat tiles (their gather takes every other row and column).",
             "", "| model | kernel | calls | shapes | inlined | columns apart | rows and columns apart | flat |",
             "|---|---|---|---|---|---|---|---|"]
    for r in out["kernels"]:
        b = r["best"]
        lines.append(f"| {r['model']} | {r['kernel'][:36]} | {r['weight']} | "
                     f"{' '.join('x'.join(map(str, s)) for s in r['shapes'])} | {b['inlined'] or '-'} | "
                     f"{b['columns apart'] or '-'} | {b['rows and columns apart'] or '-'} | {b['flat'] or '-'} |")
    return lines


def main() -> None:
    from results_dir import results_dir, run_header

    from recommender.measure import MeasureSettings, Measurer
    from recommender.target.spec import float32_lanes, parse_target
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--target", default="native")
    ap.add_argument("--models", default="mnasnet1_0,efficientnet_b0")
    ap.add_argument("--kernels", type=int, default=8, help="the heaviest this many pointwise convs per model")
    ap.add_argument("--stride-2", action="store_true",
                    help="the 1x1 stride-2 convs: the input copy inlined or at the root, and flat tiles")
    args = ap.parse_args()
    target = parse_target(args.target)
    tt = target.tvm()
    lanes = float32_lanes(tt)
    res = results_dir(target.key)
    threads = int(target.config.get("num-cores", 1))
    out = {**run_header(target),
           "threads": threads, "command": f"python benchmarks/pad_copy_probe.py --models {args.models} "
                                          f"--kernels {args.kernels}{' --stride-2' if args.stride_2 else ''}",
           "kernels": []}
    if args.stride_2:
        with Measurer(target.config, MeasureSettings(repeat=7, min_repeat_ms=20)) as measurer:
            lines = stride_2_main(args, target, measurer, out, res)
        atomic_write_text(str(res / "pad_copy.stride2.md"), "\n".join(lines) + "\n")
        print(f"wrote {res / 'pad_copy.stride2.json'} and .md", file=sys.stderr)
        return
    with Measurer(target.config, MeasureSettings(repeat=7, min_repeat_ms=20)) as measurer:
        for model in args.models.split(","):
            for k in pointwise_convs(model, tt, args.kernels):
                tiles, inlined, at_root = both_ways(k, tt, lanes)
                if not tiles:
                    continue
                results = measurer.measure(inlined + at_root, reference=k.mod)
                gf = [round(k.flops / r.median / 1e9, 1) if r.ok else None for r in results]
                n = len(tiles)
                best_in, best_root = max(filter(None, gf[:n]), default=None), max(filter(None, gf[n:]), default=None)
                row = {"model": model, "kernel": k.name, "shapes": [list(s) for s, _ in k.args[:2]],
                       "tiles": [list(t) for t in tiles], "inlined_gflops": gf[:n], "at_root_gflops": gf[n:],
                       "best_inlined": best_in, "best_at_root": best_root,
                       "best_ratio": round(best_in / best_root, 3) if best_in and best_root else None}
                out["kernels"].append(row)
                print(f"{model} {k.name[:36]} best {best_in} inlined, {best_root} at the root", file=sys.stderr,
                      flush=True)
                atomic_write_json(str(res / "pad_copy.json"), out)
    ratios = [r["best_ratio"] for r in out["kernels"] if r["best_ratio"]]
    lines = [f"# Pointwise convs: the pad_temp copy inlined against made at the root ({target.key}, {out['cpu']}, "
             f"{threads} threads, {out['date']})", "",
             f"`{out['command']}`: GFLOP/s of the conv rule's own tiles both ways, measured side by side "
             f"(median of the measurer's runs). Best tile inlined over best tile at the root: "
             f"{min(ratios, default=0):.2f}-{max(ratios, default=0):.2f}x, median "
             f"{statistics.median(ratios) if ratios else 0:.2f}x over {len(ratios)} convs.", "",
             "| model | kernel | shapes | best inlined | best at the root | ratio |", "|---|---|---|---|---|---|"]
    for r in out["kernels"]:
        lines.append(f"| {r['model']} | {r['kernel'][:36]} | {' '.join('x'.join(map(str, s)) for s in r['shapes'])} | "
                     f"{r['best_inlined'] or '-'} | {r['best_at_root'] or '-'} | {r['best_ratio']} |")
    atomic_write_text(str(res / "pad_copy.md"), "\n".join(lines) + "\n")
    print(f"wrote {res / 'pad_copy.json'} and .md", file=sys.stderr)


if __name__ == "__main__":
    main()
