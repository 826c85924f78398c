"""Write the README's generated sections from committed data, or check that they are current.

Each section lies between `<!-- NAME:begin -->` and `<!-- NAME:end -->` in README.md:
- results: every `models/<target-key>/compare/<model>/compare.json` (`schedrec compare`), one table per
  target, and the plots;
- demo: `models/<target-key>/demo/<model>.json` (`python scripts/record_demo.py`: a timed `make demo`);
- data: what the shipped folders hold (bank and reference models, kernels, records; matrix and held-out
  rows), counted from the files;
- latency: every `models/<target-key>/latency.json` (`python scripts/latency_table.py`): untuned TVM, the
  models' own records, schedrec's output, PyTorch and ONNX Runtime, as in the target's card;
- targets: per CPU with a bank, its bank, transfer matrix, held-out replays, rankers and probes
  (`scripts/target_summary.py`);
- tests: the last recorded test-suite runs (tests/suite_timing.json, `python scripts/record_suite.py`) and the
  deliberate breaks their tests caught (tests/break_once.json, `python scripts/break_once.py`).
No number in these sections is typed by hand.

Usage: python scripts/readme_results.py [--check]   (--check: exit 1 if the README differs, for CI)
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


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
    if rf.get("error"):
        cells.append("failed (MetaSchedule error, in compare.json)")
    elif rf.get("latency_s"):
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
                     f"{target_dir.relative_to(root)}/compare/MODEL` (each row's spec and options are in its "
                     "compare.json; `scripts/compare_heldout.sh` runs the held-out zoo models and the ONNX files "
                     "that `scripts/export_onnx_examples.py` writes). "
                     "Per-model tables: " + ", ".join(
                         f"[{d['model']}]({f.parent.relative_to(root)}/compare.md)" for d, f in zip(datas, files)) + ".\n")
        for d, f in zip(datas, files):
            png = f.parent / "compare.png"
            if png.exists():
                parts.append(f"![{d['model']}: latency against search time]({png.relative_to(root)})")
        parts.append("")
    return "\n".join(parts).rstrip() + "\n" if parts else "No comparison has been run yet.\n"


def _bank_used(report: dict) -> str:
    """'; bank and ranker of `<key>`, the nearest, ...' where the run used another target's bank, else ''."""
    bank_key = Path(report.get("bank", "")).parent.name
    if not bank_key or bank_key == report["target_key"]:
        return ""
    return f"; bank and ranker of `{bank_key}`, the nearest, since this CPU had no bank of its own"


def render_demo(root: Path = ROOT) -> str:
    """The demo paragraph, from each target's recorded `make demo` report."""
    parts = []
    for path in sorted((root / "models").glob("*/demo/*.json")):
        r = json.loads(path.read_text())
        t = r["totals"]
        shipped = root / "models" / r["target_key"] / "heldout" / r["model"] / "report.json"
        ex = json.loads(shipped.read_text())["totals"] if shipped.exists() else {}
        base = r.get("baselines", {})
        tuned = t["model_latency_tuned_s"]
        versus = "; ".join(f"{name} {_ms(lat)} ms (schedrec {'faster' if tuned < lat else 'slower'}: "
                           f"{lat / tuned:.2f}x)" for name, lat in
                           (("PyTorch eager", base.get("pytorch")), ("ONNX Runtime", base.get("onnxruntime"))) if lat)
        share = t.get("time_share_default")
        parts.append(
            f"Measured here (`{r['command']}` via `python scripts/record_demo.py`, `{r['target_key']}`, "
            f"{r['target'].get('num-cores', '?')} threads, {path.relative_to(root)}"
            + _bank_used(r) + f"): {r['make_demo_wall_s']:.0f} s "
            f"in all; search {t['search_s']:.1f} s (replay of {t['replayed_candidates']} candidates "
            f"{t['replay_s']:.1f} s, featurize {t['featurize_s']:.1f} s, predict {t['predict_s']:.1f} s, build "
            f"{t['build_wall_s']:.1f} s wall, run {t['run_s']:.1f} s; {t['measurements']} candidate measurements "
            f"and {t['defaults_measured']} defaults)"
            + (f", {t['search_s'] / ex['search_s']:.0%} of the {ex['search_s']:.0f} s the shipped exhaustive replay "
               f"of {r['model']} searched" if ex.get("search_s") else "")
            + f". {r['model']} then runs in {_ms(tuned)} ms (untuned: {_ms(t['model_latency_untuned_s'])} ms"
            + (f"; the shipped exhaustive replay's run: {_ms(ex['model_latency_tuned_s'])} ms" if ex.get(
                "model_latency_tuned_s") else "") + ")"
            + (f"; {t.get('kernels_via_samples', 0)} kernels without a donor got design-space samples, "
               f"{t['kernels_default']} still run unscheduled ({100 * share:.1f}% of kernel time)"
               if share is not None else "")
            + (f". Same input, same threads: {versus}." if versus else "."))
    return "\n\n".join(parts) + "\n" if parts else "No demo run has been recorded yet.\n"


def render_data(root: Path = ROOT) -> str:
    """What the shipped folders hold, counted from the files."""
    sys.path.insert(0, str(root))
    from recommender.bank.store import bank_models, count_records, read_meta
    from recommender.core.row_files import read_rows
    lines = []
    for target_dir in sorted(p for p in (root / "models").iterdir() if (p / "bank").is_dir()):
        parts = []
        for kind in ("bank", "reference"):
            if not (target_dir / kind).is_dir():
                continue
            models = bank_models(target_dir / kind)
            kernels = records = 0
            for folder in models:
                kernels += sum(1 for k in read_meta(folder)["kernels"].values() if k.get("tuned"))
                records += count_records(folder)
            parts.append(f"{kind}: {len(models)} models, {kernels} tuned kernels, {records} records")
        for kind, pattern in (("transfer matrix", "transfer/*.jsonl.gz"), ("held-out replays", "heldout/*/*.jsonl.gz")):
            rows = [r for p in sorted(target_dir.glob(pattern)) for r in read_rows(p)]
            if rows:
                defaults = sum(r.is_default for r in rows)
                parts.append(f"{kind}: {defaults} kernels, {len(rows) - defaults} candidates + {defaults} default rows")
        lines.append(f"- `{target_dir.name}`: " + "; ".join(parts))
    return "\n".join(lines) + "\n"


def render_tests(root: Path = ROOT) -> str:
    """The test-suite line, from the last recorded runs (scripts/record_suite.py)."""
    path = root / "tests" / "suite_timing.json"
    if not path.exists():
        return "No test-suite run has been recorded yet.\n"
    data = json.loads(path.read_text())
    parts = []
    for tier, words in (("full", "`make test` (`pytest -m \"not bench\"`)"),
                        ("fast", "`make test-fast` (`pytest -m \"not slow\"`)"),
                        ("bench", "`make test-bench` (`pytest -m bench`)")):
        r = data.get(tier)
        if r:
            m, s = divmod(round(r["seconds"]), 60)
            slowest = ", ".join(f"{name.split('::')[-1]} {sec:.0f} s" for name, sec in r["slowest"][:3])
            parts.append(f"{words}: {r['passed']} passed" + (f", {r['failed']} failed" if r["failed"] else "") +
                         f" in {m} min {s} s on `{r['target_key']}` ({r['date']})" +
                         (f"; slowest: {slowest}" if slowest else ""))
    text = "; ".join(parts) + ". Recorded with `python scripts/record_suite.py`.\n"
    breaks = root / "tests" / "break_once.json"
    if breaks.exists():  # the deliberate breaks of scripts/break_once.py and whether a test caught each
        b = json.loads(breaks.read_text())
        caught = [r["name"] for r in b["breaks"] if r["caught"]]
        missed = [r["name"] for r in b["breaks"] if not r["caught"]]
        text += (f"\nBroken on purpose, one at a time, with `python scripts/break_once.py` on `{b['target_key']}` "
                 f"({b['date']}): {len(caught)} of {len(b['breaks'])} breaks made their test fail "
                 f"({', '.join(caught)})" + (f"; missed: {', '.join(missed)}" if missed else "") + ".\n")
    return text


def render_latency(root: Path = ROOT) -> str:
    """Each target's latency table (`models/<key>/latency.json`, `python scripts/latency_table.py`), as in its card."""
    sys.path[:0] = [str(root), str(root / "scripts")]
    from make_card import latency_summary, latency_table, own_record_coverage
    parts = []
    for path in sorted((root / "models").glob("*/latency.json")):
        lat = json.loads(path.read_text())
        first = next(iter(lat.values()), {})
        dates = sorted({r.get("date", "?") for r in lat.values()})
        threads = sorted({str(r.get("threads", {}).get("tvm", "?")) for r in lat.values()})
        parts += [f"#### Measured on `{path.parent.name}` ({first.get('cpu', 'CPU not recorded')}, "
                  f"{'/'.join(threads)} threads; {', '.join(dates)})", "",
                  *latency_table(lat, own_record_coverage(path.parent)), "", latency_summary(lat), ""]
    return "\n".join(parts) if parts else "No latency table has been measured yet.\n"


def render_targets_section(root: Path = ROOT) -> str:
    """Per CPU with a bank: bank, matrix, held-out replays, rankers, probes (scripts/target_summary.py)."""
    sys.path[:0] = [str(root), str(root / "scripts")]
    from target_summary import render_targets
    return render_targets(root)


SECTIONS = {"results": render, "demo": render_demo, "data": render_data, "tests": render_tests,
            "latency": render_latency, "targets": render_targets_section}


def splice(readme: str, body: str, name: str = "results") -> str:
    begin, end = f"<!-- {name}:begin -->", f"<!-- {name}:end -->"
    if begin not in readme or end not in readme:
        raise SystemExit(f"README.md has no {begin} ... {end} section")
    head, rest = readme.split(begin, 1)
    _, tail = rest.split(end, 1)
    return f"{head}{begin}\n{body}{end}{tail}"


def generate(readme: str, root: Path = ROOT) -> str:
    """The README with every generated section rewritten."""
    for name, render_section in SECTIONS.items():
        readme = splice(readme, render_section(root), name)
    return readme


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="exit 1 if README.md is not what this script writes")
    args = ap.parse_args()
    path = ROOT / "README.md"
    old = path.read_text()
    new = generate(old)
    if args.check:
        if new != old:
            print("README.md's generated sections are stale: run python scripts/readme_results.py", file=sys.stderr)
            return 1
        return 0
    path.write_text(new)
    print(f"wrote the generated sections of {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
