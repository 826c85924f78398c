"""Would a conv template that vectorizes output channels beat the conv rule's column vectors? Measured before
building it into the rule.

The conv rule (`recommender/rules/conv.py`) keeps NCHW and OIHW: each register tile is a vector of output
columns, the weights broadcast one at a time. On maps of 7, 14 and 28 columns the 8-lane vectors of AVX2
hold 7 columns, and resnet50's convs there reach 60-85 GFLOP/s on `llvm-znver3-2c` where PyTorch reaches
95-120 (`conv_rules.md`). The *channel-vector* tile here does what oneDNN's NCHWc kernels do without
changing the model's layout: a vector holds `lanes` output channels, each input value is broadcast, and the
weights are read as vectors from a copy packed [O / lanes, C, KH, KW, lanes] (folded into the model's
constants at build, as `--pack-weights` does for MetaSchedule's RewriteLayout, so the timing leaves it out).
The accumulators (`vectors` channel vectors x `rows` x `columns` positions) stay in registers over the
whole reduction and go through a small buffer, channels innermost, into the NCHW output with the epilogue.

Each shape is built twice in the same process, timed by the measurer side by side: as `topi.nn.conv2d_nchw`
+ ReLU under the conv rule's first N instances (`ConvRule.space`: its fixed tiles first), and with packed
weights under every channel-vector tile that fits the registers. Both are output-checked against their own
unscheduled kernel.

    python benchmarks/channel_vector_probe.py [--space 32] [--rounds 3]

With --rule-packed, the channel-vector side is the conv rule's own packed tiles (`rules.conv.PackedTile`, every
packed tile and each with every reduction block), built on the plain kernel: the rule packs the weights in a
block of its own, which the measurer leaves out of the timing. Results then go to channel_vector.rule.json / .md.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from recommender.core.errors import run_script  # noqa: E402
from recommender.core.fileio import atomic_write_json, atomic_write_text  # noqa: E402

# (name, in channels, map, out channels, filter, stride): resnet50's convs where the rule trails PyTorch most
SHAPES = (
    ("3x3 256@14", 256, 14, 256, 3, 1),
    ("3x3 128@28", 128, 28, 128, 3, 1),
    ("3x3 512@7", 512, 7, 512, 3, 1),
    ("3x3 64@56", 64, 56, 64, 3, 1),
    ("1x1 256->1024@14", 256, 14, 1024, 1, 1),
    ("1x1 1024->256@14", 1024, 14, 256, 1, 1),
    ("1x1 512->2048@7", 512, 7, 2048, 1, 1),
    ("1x1 128->512@28", 128, 28, 512, 1, 1),
)
MAX_ACCUMULATORS = 14  # AVX2: 16 vector registers, less a weight vector and a broadcast


def conv_mod(c: int, size: int, o: int, k: int, stride: int, packed_lanes: int = 0) -> object:
    """A conv + ReLU PrimFunc over NCHW data; OIHW weights, or with `packed_lanes` L weights packed
    [O / L, C, KH, KW, L]. The blocks are named as topi names them (pad_temp, conv2d_nchw)."""
    import tvm
    from tvm import te, topi
    pad = k // 2
    out_size = (size + 2 * pad - k) // stride + 1
    data = te.placeholder((1, c, size, size), name="data")
    if not packed_lanes:
        weight = te.placeholder((o, c, k, k), name="weight")
        conv = topi.nn.conv2d_nchw(data, weight, stride, pad, 1)
    else:
        lanes = packed_lanes
        weight = te.placeholder((o // lanes, c, k, k, lanes), name="weight")
        padded = topi.nn.pad(data, [0, 0, pad, pad], [0, 0, pad, pad], name="pad_temp") if pad else data
        rc, ry, rx = te.reduce_axis((0, c), "rc"), te.reduce_axis((0, k), "ry"), te.reduce_axis((0, k), "rx")
        conv = te.compute((1, o, out_size, out_size), lambda n, f, y, x: te.sum(
            padded[n, rc, y * stride + ry, x * stride + rx] * weight[f // lanes, rc, ry, rx, f % lanes],
            axis=[rc, ry, rx]), name="conv2d_nchw")
    out = topi.nn.relu(conv)
    return tvm.IRModule({"main": te.create_prim_func([data, weight, out]).with_attr("global_symbol", "main")})


def channel_tiles(o: int, size: int, lanes: int) -> list[tuple[int, int, int]]:
    """(vectors, rows, columns) with vectors x lanes dividing the channels, rows and columns dividing the map,
    and 6 to MAX_ACCUMULATORS accumulators."""
    div = [d for d in range(1, size + 1) if size % d == 0]
    return [(v, r, w) for v in (1, 2, 3, 4) if o % (v * lanes) == 0 for r in div if r <= 4 for w in div
            if 6 <= v * r * w <= MAX_ACCUMULATORS]


def channel_vector_schedule(mod: object, tile: tuple[int, int, int], lanes: int) -> object:
    """The channel-vector tile written into a schedule of the packed kernel (see the module's docstring)."""
    from recommender.core.tvm_setup import new_schedule
    from recommender.rules.common import parallel_root, vectorize_innermost
    vectors, rows, columns = tile
    sch = new_schedule(mod)
    conv, relu = sch.get_sblock("conv2d_nchw"), sch.get_sblock("compute")
    # the accumulators' buffer with the channels of a vector innermost: the update stores whole vectors
    sch.transform_layout(conv, ("write", 0), lambda n, f, y, x: (n, f // lanes, y, x, f % lanes))
    n, f, y, x, rc, ry, rx = sch.get_loops(conv)
    f_o, f_v, f_l = sch.split(f, [None, vectors, lanes])
    y_o, y_i = sch.split(y, [None, rows])
    x_o, x_i = sch.split(x, [None, columns])
    sch.reorder(n, f_o, y_o, x_o, rc, ry, rx, y_i, x_i, f_v, f_l)
    outer = sch.fuse(n, f_o, y_o)
    sch.parallel(outer)
    sch.reverse_compute_at(relu, x_o, preserve_unit_loops=True)
    for loop in (ry, rx, y_i, x_i, f_v):
        sch.unroll(loop)
    sch.vectorize(f_l)
    vectorize_innermost(sch, relu)
    init = sch.decompose_reduction(conv, rc)
    vectorize_innermost(sch, init)
    try:
        pad = sch.get_sblock("pad_temp")
    except Exception:  # a 1x1 conv reads its input in place
        pad = None
    if pad is not None:
        parallel_root(sch, pad)
    return sch


def main() -> None:
    from peak_gflops import measured_peak
    from results_dir import results_dir, run_header

    from recommender.compare.baselines import interleaved
    from recommender.measure import Measurer
    from recommender.rules.conv import ConvRule
    from recommender.target.spec import float32_lanes, parse_target
    from recommender.transfer.replay import postprocess
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--target", default="native")
    ap.add_argument("--space", type=int, default=32, help="the conv rule's first this many instances (32)")
    ap.add_argument("--rounds", type=int, default=3, help="side-by-side timings of the two bests, rotating (3)")
    ap.add_argument("--only", default="", help="only shapes whose name contains this")
    ap.add_argument("--rule-packed", action="store_true", help="the rule's packed tiles (+ reduction blocks)")
    args = ap.parse_args()
    from recommender.rules.conv import packed_fits, reduction_blocks, rule_instances
    target = parse_target(args.target)
    tt = target.tvm()
    lanes = float32_lanes(tt)
    out = {**run_header(target), "peak_gflops": measured_peak(target.key), "lanes": lanes, "space": args.space,
           "command": "python benchmarks/channel_vector_probe.py " + " ".join(sys.argv[1:]), "shapes": []}
    path = results_dir(target.key) / ("channel_vector.rule.json" if args.rule_packed else "channel_vector.json")
    with Measurer(target.config) as measurer:
        for name, c, size, o, k, stride in SHAPES:
            if args.only and args.only not in name:
                continue
            plain, packed = conv_mod(c, size, o, k, stride), conv_mod(c, size, o, k, stride, lanes)
            flops = 2 * o * c * k * k * ((size + 2 * (k // 2) - k) // stride + 1) ** 2
            # the column template's first instances (the rule's space less its packed tiles, in its order)
            rule = [i for i in ConvRule().space(plain, lanes=lanes, limit=1000) if not i.knobs.get("packed")][:args.space]
            rule_mods = [postprocess(i.schedule, plain, tt, None).mod for i in rule]
            rule_res = measurer.measure(rule_mods, reference=plain)
            if args.rule_packed:
                unblocked = packed_fits(plain, lanes)
                tiles = unblocked + [t._replace(reduction=rb) for rb in reduction_blocks(plain) for t in unblocked]
                instances = rule_instances(plain, tiles, lanes)
                tiles = [tuple(i.knobs[k] for k in ("vectors", "rows", "columns")) + (i.knobs.get("reduction", 0),)
                         for i in instances]
                cv_mods, cv_ref = [postprocess(i.schedule, plain, tt, None).mod for i in instances], plain
            else:
                tiles = channel_tiles(o, size, lanes)
                cv_mods = [postprocess(channel_vector_schedule(packed, t, lanes), packed, tt, None).mod for t in tiles]
                cv_ref = packed
            cv_res = measurer.measure(cv_mods, reference=cv_ref)
            gf = lambda r: round(flops / r.median / 1e9, 1) if r.ok else None  # noqa: E731
            rule_rows = [{"knobs": i.knobs, "gflops": gf(r), "error": "" if r.ok else r.error[:160]}
                         for i, r in zip(rule, rule_res)]
            cv_rows = [{"tile": list(t), "gflops": gf(r), "error": "" if r.ok else r.error[:160]}
                       for t, r in zip(tiles, cv_res)]
            best_rule = max((j for j, r in enumerate(rule_res) if r.ok), key=lambda j: gf(rule_res[j]), default=None)
            best_cv = max((j for j, r in enumerate(cv_res) if r.ok), key=lambda j: gf(cv_res[j]), default=None)
            side = {}
            if best_rule is not None and best_cv is not None:  # the two bests again, rotating, medians
                def timer(mod: object, ref: object) -> Callable[[], list[float]]:
                    def costs() -> list[float]:  # a failed round gives none: the arm's other rounds count
                        (r,) = measurer.measure([mod], reference=ref)
                        return r.costs if r.ok else []
                    return costs
                rounds, _, _ = interleaved({"rule": timer(rule_mods[best_rule], plain),
                                            "channel_vector": timer(cv_mods[best_cv], cv_ref)}, args.rounds)
                times = {k: [statistics.median(c) for c in v if c] for k, v in rounds.items()}
                med = {k: sorted(v)[len(v) // 2] for k, v in times.items() if v}
                side = {k: round(flops / v / 1e9, 1) for k, v in med.items()}
            row = {"shape": name, "in_channels": c, "map": size, "out_channels": o, "filter": k, "stride": stride,
                   "gflop": round(flops / 1e9, 4), "rule": rule_rows, "channel_vector": cv_rows,
                   "best_rule": rule_rows[best_rule] if best_rule is not None else None,
                   "best_channel_vector": cv_rows[best_cv] if best_cv is not None else None,
                   "side_by_side_gflops": side}
            out["shapes"].append(row)
            print(json.dumps({k: row[k] for k in ("shape", "best_rule", "best_channel_vector", "side_by_side_gflops")}),
                  file=sys.stderr, flush=True)
            atomic_write_json(str(path), out)
    lines = [f"# Channel-vector conv tiles against the conv rule ({target.key}, {out['cpu']}, {out['date']})", "",
             f"`{out['command']}`: GFLOP/s; best of each side's instances, then the two bests timed again side by "
             f"side ({args.rounds} rotating rounds, medians). The rule: its first {args.space} instances on NCHW / "
             f"OIHW; channel vectors: weights packed [O/{lanes}, C, KH, KW, {lanes}] ahead (not timed)"
             + (", the rule's packed tiles (vectors, rows, columns, reduction block)" if args.rule_packed else "")
             + ". FMA peak "
             f"{out['peak_gflops']} GFLOP/s.", "",
             "| shape | rule best (knobs) | channel-vector best (vectors, rows, columns) | side by side: rule | "
             "channel vector | ratio |", "|---|---|---|---|---|---|"]
    for r in out["shapes"]:
        s = r["side_by_side_gflops"]
        ratio = f"{s['channel_vector'] / s['rule']:.2f}" if len(s) == 2 else "-"
        br, bc = r["best_rule"] or {}, r["best_channel_vector"] or {}
        lines.append(f"| {r['shape']} | {br.get('gflops')} ({br.get('knobs')}) | {bc.get('gflops')} ({bc.get('tile')}) | "
                     f"{s.get('rule', '-')} | {s.get('channel_vector', '-')} | {ratio} |")
    atomic_write_text(str(path.with_suffix(".md")), "\n".join(lines) + "\n")
    print(f"wrote {path} and .md", file=sys.stderr)


if __name__ == "__main__":
    run_script(main)
