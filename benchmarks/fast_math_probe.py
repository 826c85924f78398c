"""What vectorized exp/erf (recommender/measure/fast_math.py) buys on the kernels of real models.

For every kernel of the given zoo models whose TIR calls exp, erf, tanh or sigmoid (softmax, GELU, SiLU,
...), it draws 8 schedules from the kernel's MetaSchedule design space (the fallback schedrec gives such
kernels) and times the kernel's default and every sample built with libm's scalar calls (`--exact-math`,
stock TVM) and with schedrec's polynomials, through the same measurer settings, in 2 interleaved rounds;
each side keeps its fastest sample. Per model it adds up weight x latency over those kernels.

    python benchmarks/fast_math_probe.py [--models distilbert,gpt2]
writes benchmarks/results/<target-key>/fast_math.json and .md (keep the machine otherwise idle).
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from recommender.core.fileio import atomic_write_json, atomic_write_text  # noqa: E402
from results_dir import results_dir, run_header  # noqa: E402

TRANSCENDENTAL = ("T.exp(", "T.erf(", "T.tanh(", "T.sigmoid(")
SAMPLES, ROUNDS = 8, 2


def transcendental_kernels(spec: str, target) -> list:
    """The model's kernels whose TIR calls exp, erf, tanh or sigmoid."""
    from recommender.frontend.kernels import extract_kernels
    from recommender.frontend.model_import import import_model
    kernels = extract_kernels(import_model(spec, target.tvm()), target.tvm())
    return [k for k in kernels if any(call in k.mod.script() for call in TRANSCENDENTAL)]


def time_kernel(kernel, target, measurers: dict) -> dict:
    """Default and best-sample latency (s) of the kernel built with libm's calls ("exact") and with fast math
    ("fast"), each side measured by its own measurer, the sides interleaved."""
    from recommender.transfer.replay import sample_schedules
    mods = [kernel.mod] + [s.mod for s in sample_schedules(kernel.mod, target.tvm(), SAMPLES)]
    best: dict[str, list[float]] = {}
    for _ in range(ROUNDS):
        for side, m in measurers.items():
            lat = [r.median if r.ok else float("inf") for r in m.measure(mods, reference=kernel.mod)]
            best[side] = [min(a, b) for a, b in zip(best.get(side, lat), lat)]
    return {side: {"default_s": v[0], "best_sample_s": min(v[1:], default=float("inf"))}
            for side, v in best.items()} | {"samples": len(mods) - 1}


def main() -> None:
    from dataclasses import replace

    from recommender.measure import MeasureSettings, Measurer
    from recommender.target.spec import parse_target
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="distilbert,gpt2")
    ap.add_argument("--target", default="native")
    args = ap.parse_args()
    target = parse_target(args.target)
    settings = MeasureSettings(repeat=5, min_repeat_ms=20)
    res = results_dir(target.key)
    out = {**run_header(target),
           "command": f"python benchmarks/fast_math_probe.py --models {args.models}", "samples": SAMPLES,
           "rounds": ROUNDS, "models": {}}
    with Measurer(target.config, replace(settings, fast_math=False)) as exact, \
            Measurer(target.config, replace(settings, fast_math=True)) as fast:
        for name in [m for m in args.models.split(",") if m]:
            out["models"][name] = model_rows(name, target, {"exact": exact, "fast": fast})
            atomic_write_json(str(res / "fast_math.json"), out)
    atomic_write_text(str(res / "fast_math.md"), render(out))


def model_rows(name: str, target, measurers: dict) -> list[dict]:
    rows = []
    for k in transcendental_kernels(f"zoo:{name}", target):
        t = time_kernel(k, target, measurers)
        rows.append({"kernel": k.name, "class_key": k.class_key, "weight": k.weight, **t})
        print(f"{name} {k.name} x{k.weight}: exact {t['exact']['best_sample_s'] * 1e3:.3f} ms, "
              f"fast {t['fast']['best_sample_s'] * 1e3:.3f} ms", flush=True)
    return rows


def render(out: dict) -> str:
    lines = [f"# Vectorized exp/erf against libm's calls ({out['target_key']}, {out['cpu']}, {out['date']})", "",
             f"`{out['command']}`. Every kernel that calls exp, erf, tanh or sigmoid; the fastest of "
             f"{out['samples']} design-space samples built each way, {out['rounds']} interleaved rounds of the "
             f"measurer's 5-repeat medians (target `{json.dumps(out['target'], sort_keys=True)}`). *exact*: libm's scalar calls (stock TVM, "
             "`--exact-math`); *fast*: `recommender/measure/fast_math.py`.", "",
             "| model | kernel | calls | exact ms | fast ms | speed-up | weight x saved ms |", "|---|---|---|---|---|---|---|"]
    for model, rows in out["models"].items():
        saved = 0.0
        for r in rows:
            e, f = r["exact"]["best_sample_s"], r["fast"]["best_sample_s"]
            saved += r["weight"] * (e - f)
            lines.append(f"| {model} | {r['kernel'][:48]} | {r['weight']} | {e * 1e3:.3f} | {f * 1e3:.3f} | "
                         f"{e / f:.1f}x | {r['weight'] * (e - f) * 1e3:.2f} |")
        lines.append(f"| {model} | **all {len(rows)} kernels** | | | | | **{saved * 1e3:.2f}** |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
