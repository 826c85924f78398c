"""Loop rules against design-space draws and the default, on the kernels no donor schedules.

For each model, the kernels of its committed latency run (models/<key>/latency/<model>/report.json) that
had no donor (match `sampled`), heaviest first by weight x default latency: the default version, 4 draws
of the kernel's MetaSchedule design space and the loop rules' schedules (recommender/rules/loop.py),
measured in one batch by schedrec's measurer (the target's threads, outputs checked against the default).

    python benchmarks/loop_rules_probe.py [--models densenet121,bert_base] [--kernels 4]
writes benchmarks/results/<target-key>/loop_rules.json and .md (keep the machine otherwise idle).
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

DRAWS = 4


def _ms(result: object) -> float | None:
    return round(result.median * 1e3, 4) if result.ok else None


def probe_kernel(kernel: object, measurer: object, target: object) -> dict:
    from recommender.transfer.replay import rule_schedules, sample_schedules
    rules = rule_schedules(kernel.mod, target)
    draws = sample_schedules(kernel.mod, target, DRAWS)
    results = measurer.measure([kernel.mod] + [r.mod for r in rules + draws], reference=kernel.mod)
    default, rule_res, draw_res = results[0], results[1:1 + len(rules)], results[1 + len(rules):]
    best = lambda rs: min((m for m in map(_ms, rs) if m is not None), default=None)  # noqa: E731
    return {"kernel": kernel.name, "class_key": kernel.class_key, "weight": kernel.weight,
            "default_ms": _ms(default), "rules_ms": [_ms(r) for r in rule_res], "draws_ms": [_ms(r) for r in draw_res],
            "best_rule_ms": best(rule_res), "best_draw_ms": best(draw_res),
            "failed": [r.status for r in results if not r.ok]}


def main() -> None:
    from recommender.frontend.kernels import extract_kernels
    from recommender.measure import Measurer
    from recommender.frontend.model_import import import_model
    from recommender.target.spec import parse_target
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--target", default="native")
    ap.add_argument("--models", default="densenet121,bert_base,mobilebert")
    ap.add_argument("--kernels", type=int, default=4, help="the heaviest this many donorless kernels per model")
    args = ap.parse_args()
    target = parse_target(args.target)
    tt = target.tvm()
    root = ROOT / "models" / target.key / "latency"
    out = {**run_header(target),
           "draws": DRAWS, "kernels": []}
    with Measurer(target.config) as measurer:
        for name in args.models.split(","):
            report = json.loads((root / name / "report.json").read_text())
            donorless = sorted((k for k in report["kernels"] if k["match"] == "sampled" and k.get("default_s")),
                               key=lambda k: -k["weight"] * k["default_s"])[:args.kernels]
            kernels = {k.name: k for k in extract_kernels(import_model(report["spec"], tt), tt)}
            for entry in donorless:
                row = dict(probe_kernel(kernels[entry["kernel"]], measurer, tt), model=name)
                out["kernels"].append(row)
                print(json.dumps(row), file=sys.stderr, flush=True)
    res = results_dir(target.key)
    atomic_write_json(str(res / "loop_rules.json"), out)
    threads = target.config.get("num-cores")
    lines = [f"# Loop rules on kernels without donors ({target.key}, {out['cpu']}, {threads} threads, {out['date']})",
             "", f"`python benchmarks/loop_rules_probe.py --models {args.models} --kernels {args.kernels}`: per "
             f"kernel, the default (plain loops), the best of {DRAWS} design-space draws and the best loop rule, "
             "measured in one batch by schedrec's measurer (median ms, outputs checked).", "",
             "| model | kernel | class | weight | default ms | best draw ms | best rule ms | default / rule |",
             "|---|---|---|---|---|---|---|---|"]
    for r in out["kernels"]:
        ratio = f"{r['default_ms'] / r['best_rule_ms']:.2f}x" if r["default_ms"] and r["best_rule_ms"] else "-"
        lines.append(f"| {r['model']} | {r['kernel'][:40]} | {r['class_key'].split(':')[0]} | {r['weight']} | "
                     f"{r['default_ms']} | {r['best_draw_ms']} | {r['best_rule_ms']} | {ratio} |")
    atomic_write_text(str(res / "loop_rules.md"), "\n".join(lines) + "\n")
    print(f"wrote {res / 'loop_rules.json'} and .md", file=sys.stderr)


if __name__ == "__main__":
    main()
