"""Write the README's results section from the committed comparison files, or check that it is current.

Reads every `models/<target-key>/compare/<model>/compare.json` (written by `schedrec compare`) and replaces
the text between `<!-- results:begin -->` and `<!-- results:end -->` in README.md with one table per
target and the plots. No number in that section is typed by hand.

Usage: python scripts/readme_results.py [--check]   (--check: exit 1 if the README differs, for CI)
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BEGIN, END = "<!-- results:begin -->", "<!-- results:end -->"


def _ms(s: float | None) -> str:
    return f"{s * 1e3:.1f}" if s else "-"


def model_row(data: dict, budgets: list[int]) -> list[str]:
    m = data["methods"]
    ex = m.get("exhaustive", {})
    ex_lat, ex_s = ex.get("latency_s"), ex.get("search_s")
    cells = [data["model"], f"{_ms(m.get('untuned', {}).get('latency_s'))}",
             f"{_ms(ex_lat)} ({ex_s:.0f} s)" if ex_lat and ex_s else "-"]
    for k in budgets:
        r = m.get(f"lgbm-k{k}", {})
        if r.get("latency_s") and ex_lat and ex_s:
            cells.append(f"{_ms(r['latency_s'])}: Q {ex_lat / r['latency_s']:.2f}, {r['search_s'] / ex_s:.0%}")
        else:
            cells.append(_ms(r.get("latency_s")))
    rnd = m.get("random-k3", {})
    cells.append(f"{ex_lat / rnd['latency_s']:.2f}" if rnd.get("latency_s") and ex_lat else "-")
    ttm = data.get("time_to_match", {}).get("lgbm-k3")
    cells.append(("> " if ttm["censored"] else "") + f"{ttm['ratio']}x" if ttm else "-")
    ref = m.get("reference", {}).get("latency_s")
    k3 = m.get("lgbm-k3", {}).get("latency_s")
    cells.append(f"{ref / k3:.2f}" if ref and k3 else "-")
    rf = m.get("lgbm-k3+refine", {})
    if rf.get("latency_s"):
        same = rf.get("scratch_latency_at_same_time_s")
        cells.append(f"{_ms(rf['latency_s'])} after {rf['search_s']:.0f} s" +
                     (f" (scratch then: {_ms(same)})" if same else ""))
    else:
        cells.append("-")
    cells += [_ms(m.get("pytorch", {}).get("latency_s")), _ms(m.get("onnxruntime", {}).get("latency_s"))]
    return cells


def render(root: Path = ROOT) -> str:
    parts = []
    for target_dir in sorted(p for p in (root / "models").iterdir() if (p / "compare").is_dir()):
        files = sorted((target_dir / "compare").glob("*/compare.json"))
        if not files:
            continue
        datas = [json.loads(f.read_text()) for f in files]
        budgets = sorted({b for d in datas for b in d["budgets"]})
        threads = sorted({d["threads"] for d in datas})
        parts.append(f"#### Measured on `{target_dir.name}` ({', '.join(map(str, threads))} threads; "
                     f"{', '.join(sorted({d['date'] for d in datas}))})\n")
        parts.append("Model latency in ms, every figure of a row timed in one run. Exhaustive: every candidate of "
                     "the pool measured (the shipped held-out run's choices, timed in this run, and that run's "
                     "search time). For each per-kernel budget k of the lgbm recommender: latency, quality "
                     "Q against exhaustive replay (its latency / ours) and our search time as a share of "
                     "exhaustive replay's. Random k=3: Q of measuring 3 random candidates per kernel. "
                     "MS to match: MetaSchedule from scratch, same measurer, tuning time until its model is as fast "
                     "as lgbm k=3, over our search time ('>' = it stopped at its cap first). Qmax: the long-tuning "
                     "reference's latency / lgbm k=3's. k=3 + refine: MetaSchedule seeded with k=3's schedules "
                     "(`--refine-s`), total search time, and what from-scratch tuning had reached by then.\n")
        header = (["model", "untuned", "exhaustive (search)"] + [f"lgbm k={k}" for k in budgets] +
                  ["random k=3 Q", "MS to match k=3", "Qmax k=3", "k=3 + refine", "PyTorch", "ONNX Runtime"])
        parts.append("| " + " | ".join(header) + " |")
        parts.append("|" + "---|" * len(header))
        for d in datas:
            parts.append("| " + " | ".join(model_row(d, budgets)) + " |")
        parts.append("")
        retimed = [(d, json.loads((f.parent / "retime.json").read_text())) for d, f in zip(datas, files)
                   if (f.parent / "retime.json").exists()]
        if retimed:
            names = [n for n in ["exhaustive"] + [f"{s}-k{k}" for s in ("lgbm", "random") for k in budgets]
                     if any(n in r["methods"] for _, r in retimed)]
            parts.append("Timing noise on this machine is large: the same databases, built once and re-timed in "
                         "interleaved rounds (`python benchmarks/retime_compare.py FOLDER`), median ms and "
                         "(min-max) over the rounds:\n")
            parts.append("| model | rounds | " + " | ".join(names) + " |")
            parts.append("|" + "---|" * (len(names) + 2))
            for d, r in retimed:
                cells = [d["model"], str(r["rounds"])]
                for n in names:
                    v = r["methods"].get(n)
                    cells.append(f"{_ms(v['median_s'])} ({_ms(v['min_s'])}-{_ms(v['max_s'])})" if v else "-")
                parts.append("| " + " | ".join(cells) + " |")
            parts.append("")
        parts.append(f"Reproduce a row: `schedrec compare --model zoo:MODEL --out "
                     f"{target_dir.relative_to(root)}/compare/MODEL`. "
                     "Per-model tables: " + ", ".join(
                         f"[{d['model']}]({f.parent.relative_to(root)}/compare.md)" for d, f in zip(datas, files)) + ".\n")
        for d, f in zip(datas, files):
            png = f.parent / "compare.png"
            if png.exists():
                parts.append(f"![{d['model']}: latency against search time]({png.relative_to(root)})")
        parts.append("")
    return "\n".join(parts).rstrip() + "\n" if parts else "No comparison has been run yet.\n"


def splice(readme: str, body: str) -> str:
    if BEGIN not in readme or END not in readme:
        raise SystemExit(f"README.md has no {BEGIN} ... {END} section")
    head, rest = readme.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    return f"{head}{BEGIN}\n{body}{END}{tail}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="exit 1 if README.md is not what this script writes")
    args = ap.parse_args()
    path = ROOT / "README.md"
    old = path.read_text()
    new = splice(old, render())
    if args.check:
        if new != old:
            print("README.md results section is stale: run python scripts/readme_results.py", file=sys.stderr)
            return 1
        return 0
    path.write_text(new)
    print(f"wrote the results section of {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
