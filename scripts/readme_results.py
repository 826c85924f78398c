"""Write the generated parts of README.md and docs/ from committed data, or check that they are current.

Two kinds of generated text, neither with a number typed by hand:
- sections between `<!-- NAME:begin -->` and `<!-- NAME:end -->` in hand-written files (SECTIONS):
  README.md: `headline` (the held-out models on one CPU, chosen from the data: schedrec against exhaustive
  replay, PyTorch eager and ONNX Runtime), `demo` (the recorded `make demo` runs), `suite` (the last test-suite
  run), `pages` (links to the per-CPU pages); docs/reliability.md: `tests` (suite runs and the deliberate breaks
  their tests caught); docs/zoo.md: `zoo` (kernels, classes, GFLOPs per zoo model, from the committed kernel
  lists); docs/cli.md: `options` (every command's options, from the CLI's own parser);
- whole pages: docs/results/<target-key>.md, one per CPU folder under models/: what that folder holds, its
  recorded `make demo`, its latency table (`models/<key>/latency.json`), its comparisons
  (`models/<key>/compare/*/compare.json`), its bank / matrix / held-out / rankers / probes block
  (scripts/target_summary.py) and its other probes (benchmarks/results/<key>/).
Links in a page are written relative to the page.

Usage: python scripts/readme_results.py [--check]   (--check: exit 1 if any generated file differs, for CI)
"""
from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import textwrap
from pathlib import Path
from typing import Callable

ROOT = Path(__file__).resolve().parents[1]
WIDTH = 118  # generated prose is wrapped at this width; table rows are not


def _ms(s: float | None, digits: int = 1) -> str:
    return f"{s * 1e3:.{digits}f}" if s else "-"


def _read(path: Path) -> dict | list | None:
    return json.loads(path.read_text()) if path.exists() else None


def _imports(root: Path) -> None:
    for p in (str(root / "scripts"), str(root)):
        if p not in sys.path:
            sys.path.insert(0, p)


def target_dirs(root: Path = ROOT) -> list[Path]:
    """The CPU folders under models/ (each gets a page): those with a bank or a latency table."""
    return sorted(p for p in (root / "models").iterdir()
                  if p.is_dir() and ((p / "bank").is_dir() or (p / "latency.json").exists()))


# -- comparisons (schedrec compare) -------------------------------------------------------------------------

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


def render_pool_compare(datas: list[dict], files: list[Path], root: Path = ROOT) -> str:
    """Comparisons of one pool under one budget (compare.json with a `rule_space` in its pool): the goals line
    and every selector at every budget (recommender.compare.summary)."""
    _imports(root)
    from recommender.compare.summary import budget_table, goals, model_summary
    retimes = [_read(f.parent / "retime.json") for f in files]
    summaries = [model_summary(d, r) for d, r in zip(datas, retimes)]
    g = goals(summaries, k=2)
    rounds = sorted({s["retimed_rounds"] for s in summaries if s["retimed_rounds"]})
    pools = sorted({(d["pool"].get("top_n"), d["pool"].get("cap"), d["pool"]["rule_space"]) for d in datas})
    q = ", ".join(f"{m} {v:.3f}" for m, v in g["lgbm_q"].items() if v)
    text = (f"One pool per kernel (donors: top-n {', '.join(str(p[0]) for p in pools)}, cap "
            f"{', '.join(str(p[1]) for p in pools)}; rule space {', '.join(str(p[2]) for p in pools)} instances), "
            f"one budget: each selector measures its first k per kernel, a failed one included, every method of a "
            f"model searched in one run" + (
                f" and its database then timed in {', '.join(map(str, rounds))} interleaved rounds, the median "
                f"(`benchmarks/retime_compare.py`; the baselines outside TVM and models without a retime.json as "
                f"timed in the run)" if rounds else "") + f" ({', '.join(sorted({d['date'] for d in datas}))}, "
            f"{', '.join(sorted({str(d['threads']) for d in datas}))} threads). Geometric means over "
            f"{', '.join(g['models'])}: today's fixed tiles alone / exhaustive replay of the pool "
            f"{g['fixed_alone_over_exhaustive']}x; at k=2, random (median of its seeds) / lgbm "
            f"{g['random_over_lgbm']}x and tiles-then-donors / lgbm {g['tiles_then_donors_over_lgbm']}x; lgbm k=2's "
            f"Q against exhaustive: {q or '-'}, its search time at most {g['lgbm_search_share']:.0%} of "
            f"exhaustive's; models where lgbm k=2 is slower than random: "
            f"{', '.join(g['models_where_lgbm_is_slower_than_random']) or 'none'}.")
    if rounds:  # the fastest round of each method: this machine's rounds fall into two modes on small models
        fastest = [model_summary(d, r, "min_s") for d, r in zip(datas, retimes)]
        gf = goals(fastest, k=2)
        text += (f" With each method's fastest round instead of its median: fixed tiles alone / exhaustive "
                 f"{gf['fixed_alone_over_exhaustive']}x, random / lgbm {gf['random_over_lgbm']}x, tiles-then-donors "
                 f"/ lgbm {gf['tiles_then_donors_over_lgbm']}x at k=2; lgbm k=2's Q "
                 + ", ".join(f"{m} {v:.3f}" for m, v in gf["lgbm_q"].items() if v) + ".")
    parts = [wrap(text).rstrip(), "", budget_table(summaries).rstrip(), "",
             "Per-model tables: " + ", ".join(f"[{d['model']}]({f.parent.relative_to(root)}/compare.md)"
                                              for d, f in zip(datas, files)) + ".", ""]
    for d, f in zip(datas, files):
        png = f.parent / "compare.png"
        if png.exists():
            parts.append(f"![{d['model']}: latency against search time]({png.relative_to(root)})")
    return wrap_block("\n".join(parts).rstrip() + "\n")


def render_compare(target_dir: Path, root: Path = ROOT) -> str:
    """One target's comparisons (every compare/<model>/compare.json), '' where it has none; those of one pool
    under one budget get their own table (`render_pool_compare`)."""
    files = sorted((target_dir / "compare").glob("*/compare.json"))
    if not files:
        return ""
    datas = [json.loads(f.read_text()) for f in files]
    # a comparison still running has no compare.md yet (written when it ends): left out until then
    pooled = [(d, f) for d, f in zip(datas, files) if "rule_space" in d.get("pool", {}) and (f.parent / "compare.md").exists()]
    if pooled:
        return render_pool_compare([d for d, _ in pooled], [f for _, f in pooled], root)
    budgets = sorted({b for d in datas for b in d["budgets"]})
    threads = sorted({d["threads"] for d in datas})
    parts = [f"Measured with {', '.join(map(str, threads))} threads on {', '.join(sorted({d['date'] for d in datas}))}. "
             "Model latency in ms, every figure of a row timed in one run. Exhaustive: every candidate of "
             "the pool measured (the shipped held-out run's choices, timed in this run, and that run's "
             "search time). For each per-kernel budget k of the lgbm recommender: latency, quality "
             "Q against exhaustive replay (its latency / ours) and our search time as a share of "
             "exhaustive replay's. Random k=3: Q of measuring 3 random candidates per kernel. "
             "MS to match: MetaSchedule from scratch, same measurer, tuning time until its model is as fast "
             "as lgbm k=3, over our search time ('>' = it stopped at its cap first). Qmax: the long-tuning "
             "reference's latency / lgbm k=3's. k=3 + refine: MetaSchedule seeded with k=3's schedules "
             "(`--refine-s`), total search time, and what from-scratch tuning had reached by then.", ""]
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
                     "(min-max) over the rounds:")
        parts += ["", "| model | rounds | " + " | ".join(names) + " |", "|" + "---|" * (len(names) + 2)]
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
                     f"[{d['model']}]({f.parent.relative_to(root)}/compare.md)" for d, f in zip(datas, files)) + ".")
    parts.append("")
    for d, f in zip(datas, files):
        png = f.parent / "compare.png"
        if png.exists():
            parts.append(f"![{d['model']}: latency against search time]({png.relative_to(root)})")
    return wrap_block("\n".join(parts).rstrip() + "\n")


# -- make demo ----------------------------------------------------------------------------------------------

def _bank_used(report: dict) -> str:
    """'; bank and ranker of `<key>`, the nearest, ...' where the run used another target's bank, else ''."""
    bank_key = Path(report.get("bank", "")).parent.name
    if not bank_key or bank_key == report["target_key"]:
        return ""
    return f"; bank and ranker of `{bank_key}`, the nearest, since this CPU had no bank of its own"


def demo_counts(r: dict) -> str:
    """What a budgeted run measured. Since one pool and one budget (`measured_by_kind` in its totals): every
    measurement is within the budget, counted per source kind. Runs recorded before: the measurements within
    the per-kernel budget (the ranker's picks) and beyond it (rule-built tiles measured beside each default,
    replacements of failed picks, design-space samples)."""
    t = r["totals"]
    k = r.get("per_kernel")
    if "measured_by_kind" in t:
        kinds = ", ".join(f"{n} {kind}" for kind, n in t["measured_by_kind"].items() if n)
        bound = f"at most {k} per kernel by the budget" if k is not None else f"a total budget of {r.get('budget')}"
        return (f"{t['measurements']} candidate measurements for {t['kernels']} kernels, {bound} (by source: "
                f"{kinds or 'none'}), plus {t['defaults_measured']} defaults")
    beyond = t.get("replacements", 0)
    within = t["measurements"] - beyond
    picks = f"the ranker's top {k} of each kernel" if k else "the ranker's picks"
    return (f"{t['measurements']} candidate measurements for {t['kernels']} kernels: {within} within the budget "
            f"({picks}) and {beyond} beyond it (rule-built tiles, measured beside each kernel's default whatever "
            f"the budget, replacements of failed picks and design-space samples; recorded before the budget bounded "
            f"every measurement), plus {t['defaults_measured']} defaults")


def demo_paragraph(path: Path, root: Path = ROOT) -> str:
    """One recorded `make demo` (scripts/record_demo.py), against the shipped exhaustive replay and the baselines."""
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
    return (
        f"`{r['command']}` on `{r['target_key']}`, timed by `python scripts/record_demo.py` "
        f"({r['target'].get('num-cores', '?')} threads, `{path.relative_to(root)}`"
        + _bank_used(r) + f"): {r['make_demo_wall_s']:.0f} s in all. {demo_counts(r)}. Search "
        f"{t['search_s']:.1f} s (replay of {t['replayed_candidates']} candidates {t['replay_s']:.1f} s, featurize "
        f"{t['featurize_s']:.1f} s, predict {t['predict_s']:.1f} s, build {t['build_wall_s']:.1f} s wall, run "
        f"{t['run_s']:.1f} s)"
        + (f", {t['search_s'] / ex['search_s']:.0%} of the {ex['search_s']:.0f} s the shipped exhaustive replay "
           f"of {r['model']} searched" if ex.get("search_s") else "")
        + f". {r['model']} then runs in {_ms(tuned)} ms (untuned: {_ms(t['model_latency_untuned_s'])} ms"
        + (f"; the shipped exhaustive replay's run: {_ms(ex['model_latency_tuned_s'])} ms" if ex.get(
            "model_latency_tuned_s") else "") + ")"
        + (f"; {t.get('kernels_via_samples', 0)} kernels without a donor got design-space samples, "
           f"{t['kernels_default']} still run unscheduled ({100 * share:.1f}% of kernel time)"
           if share is not None else "")
        + (f". Same input, same threads: {versus}." if versus else "."))


def demo_short(path: Path, root: Path = ROOT) -> str:
    """The README's account of one recorded `make demo`: what it measured, its search time, what it gave."""
    r = json.loads(path.read_text())
    t = r["totals"]
    ex = ((_read(root / "models" / r["target_key"] / "heldout" / r["model"] / "report.json") or {}).get("totals") or {})
    base = r.get("baselines", {})
    return (f"Recorded on `{r['target_key']}` (`{path.relative_to(root)}`, {r['target'].get('num-cores', '?')} threads"
            + _bank_used(r) + f"): {demo_counts(r)}. Search {t['search_s']:.0f} s of {r['make_demo_wall_s']:.0f} s in all"
            + (f", {t['search_s'] / ex['search_s']:.0%} of the {ex['search_s']:.0f} s the shipped exhaustive replay "
               "searched" if ex.get("search_s") else "")
            + f"; {r['model']} then runs in {_ms(t['model_latency_tuned_s'])} ms (untuned "
            f"{_ms(t['model_latency_untuned_s'])} ms"
            + (f", exhaustive replay's choices {_ms(ex['model_latency_tuned_s'])} ms" if ex.get("model_latency_tuned_s")
               else "") + ")"
            + (f", against PyTorch eager {_ms(base['pytorch'])} ms" if base.get("pytorch") else "")
            + (f" and ONNX Runtime {_ms(base['onnxruntime'])} ms" if base.get("onnxruntime") else "")
            + " on the same input and threads.")


def render_readme_demo(root: Path = ROOT) -> str:
    """README: the headline CPU's recorded demo in full, the others' measurement counts in one line."""
    paths = sorted((root / "models").glob("*/demo/*.json"))
    if not paths:
        return "No demo run has been recorded yet.\n"
    key = headline_key(root)
    main = [p for p in paths if p.parts[-3] == key] or paths[-1:]
    text = " ".join(demo_short(p, root) for p in main)
    others = []
    for p in paths:
        if p in main:
            continue
        r = json.loads(p.read_text())
        t = r["totals"]
        split = ("all within the budget" if "measured_by_kind" in t else
                 f"{t['measurements'] - t.get('replacements', 0)} within the budget, {t.get('replacements', 0)} beyond")
        others.append(f"`{r['target_key']}` {t['measurements']} ({split}; {r['model']} "
                      f"{_ms(t['model_latency_tuned_s'])} ms)")
    if others:
        text += (" Other CPUs' recorded demos, candidate measurements: " + "; ".join(others)
                 + " (each CPU's page, linked below, has its run in full).")
    return wrap(text)


# -- what the shipped folders hold --------------------------------------------------------------------------

def data_line(target_dir: Path, root: Path = ROOT) -> str:
    """What one CPU folder holds (bank and reference models, kernels, records; matrix and held-out rows)."""
    _imports(root)
    from recommender.bank.store import bank_models, count_records, read_meta
    from recommender.core.row_files import count_rows
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
        counts = [count_rows(p) for p in sorted(target_dir.glob(pattern))]
        rows, defaults = sum(n for n, _ in counts), sum(d for _, d in counts)
        if rows:
            parts.append(f"{kind}: {defaults} kernels, {rows - defaults} candidates + {defaults} default rows")
    return ("Counted from the files: " + "; ".join(parts) + ".") if parts else "Nothing shipped yet."


# -- test-suite runs ----------------------------------------------------------------------------------------

def _suite_runs(root: Path, slowest: int) -> list[str]:
    data = _read(root / "tests" / "suite_timing.json") or {}
    parts = []
    for tier, words in (("full", "`make test` (`pytest -m \"not bench\"`)"),
                        ("fast", "`make test-fast` (`pytest -m \"not slow\"`)"),
                        ("bench", "`make test-bench` (`pytest -m bench`)")):
        r = data.get(tier)
        if r:
            m, s = divmod(round(r["seconds"]), 60)
            slow = ", ".join(f"{name.split('::')[-1]} {sec:.0f} s" for name, sec in r["slowest"][:slowest])
            parts.append(f"{words}: {r['passed']} passed" + (f", {r['failed']} failed" if r["failed"] else "") +
                         f" in {m} min {s} s on `{r['target_key']}` ({r['date']})" +
                         (f"; slowest: {slow}" if slow else ""))
    return parts


def render_suite(root: Path = ROOT) -> str:
    """README: the last recorded run of each test tier, one line."""
    parts = _suite_runs(root, 0)
    if not parts:
        return "No test-suite run has been recorded yet.\n"
    return wrap("Last recorded: " + "; ".join(parts) + " (`python scripts/record_suite.py`).")


def render_tests(root: Path = ROOT) -> str:
    """docs/reliability.md: the test-suite runs with their slowest tests, and the deliberate breaks."""
    parts = _suite_runs(root, 3)
    if not parts:
        return "No test-suite run has been recorded yet.\n"
    text = wrap("; ".join(parts) + ". Recorded with `python scripts/record_suite.py`.")
    b = _read(root / "tests" / "break_once.json")
    if b:  # the deliberate breaks of scripts/break_once.py and whether a test caught each
        caught = [r["name"] for r in b["breaks"] if r["caught"]]
        missed = [r["name"] for r in b["breaks"] if not r["caught"]]
        text += "\n" + wrap(
            f"Broken on purpose, one at a time, with `python scripts/break_once.py` on `{b['target_key']}` "
            f"({b['date']}): {len(caught)} of {len(b['breaks'])} breaks made their test fail "
            f"({', '.join(caught)})" + (f"; missed: {', '.join(missed)}" if missed else "") + ".")
    return text


# -- latency tables -----------------------------------------------------------------------------------------

LATENCY_TEXT = (
    "Each model of the CPU's latency table, timed in one run per model by `python scripts/latency_table.py "
    "--redo` (`models/{key}/latency.json`; the [card](models/{key}/card.md) explains every column). *schedrec* is "
    "budgeted transfer at {k} candidates per kernel with the model left out of the bank and of the ranker's training "
    "data, i.e. what a user gets for a new model; *TVM, own records* applies the model's own tuning records.")


def render_latency(target_dir: Path, root: Path = ROOT) -> str:
    """One target's latency table (`models/<key>/latency.json`), as in its card; '' without one."""
    path = target_dir / "latency.json"
    if not path.exists():
        return ""
    _imports(root)
    from make_card import latency_summary, latency_table, own_record_coverage, rankers_text
    lat = json.loads(path.read_text())
    dates = sorted({r.get("date", "?") for r in lat.values()})
    threads = sorted({str(r.get("threads", {}).get("tvm", "?")) for r in lat.values()})
    ks = sorted({str(r["schedrec"]["per_kernel"]) for r in lat.values() if (r.get("schedrec") or {}).get("per_kernel")})
    head = (LATENCY_TEXT.format(key=target_dir.name, k=" or ".join(ks) or "k")
            + f" Measured with {'/'.join(threads)} threads on {', '.join(dates)}. {rankers_text(lat)}")
    table = wrap_block("\n".join(latency_table(lat, own_record_coverage(target_dir)))).rstrip("\n")
    return "\n".join([wrap(head).rstrip("\n"), "", table, "", wrap(latency_summary(lat)).rstrip("\n")]) + "\n"


# -- the headline: held-out models on one CPU ---------------------------------------------------------------

def headline_key(root: Path = ROOT) -> str | None:
    """The CPU of the headline table: of the targets whose latency.json has held-out rows, the one holding the
    latest date (a tie: the last folder name)."""
    best: tuple[str, str] | None = None
    for path in sorted((root / "models").glob("*/latency.json")):
        lat = json.loads(path.read_text())
        if not any(r.get("kind") == "held-out" and r.get("schedrec_ms") for r in lat.values()):
            continue
        latest = max(r.get("date", "") for r in lat.values())
        if best is None or latest >= best[0]:
            best = (latest, path.parent.name)
    return best[1] if best else None


def render_headline(root: Path = ROOT) -> str:
    """README: schedrec on the held-out zoo models of the headline CPU, against exhaustive replay (its own run),
    PyTorch eager and ONNX Runtime (timed side by side with schedrec)."""
    key = headline_key(root)
    if key is None:
        return "No held-out model has been timed yet.\n"
    _imports(root)
    from make_card import caveat, rankers_text
    target_dir = root / "models" / key
    lat = json.loads((target_dir / "latency.json").read_text())
    held = {n: r for n, r in lat.items() if r.get("kind") == "held-out" and r.get("schedrec_ms")}
    cpu = ", ".join(sorted({r["cpu"] for r in held.values() if r.get("cpu")})) or "CPU not recorded"
    threads = "/".join(sorted({str(r.get("threads", {}).get("tvm", "?")) for r in held.values()}))
    ks = " or ".join(sorted({str(r["schedrec"]["per_kernel"]) for r in held.values()
                             if (r.get("schedrec") or {}).get("per_kernel")})) or "k"
    lines = [f"#### Held-out zoo models on `{key}` ({cpu}, {threads} threads; "
             f"{', '.join(sorted({r.get('date', '?') for r in held.values()}))})", "",
             "| model | schedrec ms | schedrec search | exhaustive replay ms (own run) | exhaustive replay search "
             "(own run) | schedrec's search / exhaustive's | PyTorch eager ms | ONNX Runtime ms |",
             "|---|---|---|---|---|---|---|---|"]
    for name, r in held.items():
        ex = (_read(target_dir / "heldout" / name / "report.json") or {}).get("totals", {})
        search = (r.get("schedrec") or {}).get("search_s")
        ex_search = ex.get("search_s")
        cells = [name, f"{r['schedrec_ms']:.1f}", f"{search:.0f} s" if search else "-",
                 _ms(ex.get("model_latency_tuned_s")), f"{ex_search:.0f} s" if ex_search else "-",
                 f"{search / ex_search:.0%}" if search and ex_search else "-",
                 _ms((r.get("pytorch_ms") or 0) / 1e3), _ms((r.get("onnxruntime_ms") or 0) / 1e3)]
        lines.append("| " + " | ".join(cells) + " |")
    notes = [f"schedrec: `schedrec transfer --budget-per-kernel {ks}` with the model left out of the bank and of the "
             "ranker's training data, timed side by side with PyTorch eager and ONNX Runtime in one run per model "
             f"(`python scripts/latency_table.py --heldout MODEL`, `models/{key}/latency.json`). {rankers_text(held)}"
             "Exhaustive replay: `schedrec replay`, every candidate of the pool measured; its latency and search time "
             f"come from its own run (`models/{key}/heldout/<model>/report.json`), not timed side by side with the "
             "other columns. The CPU is the one whose latency table holds the latest date; the other CPUs' pages "
             "are linked below."]
    old = [name for name, r in held.items() if "rule_space" not in (r.get("schedrec") or {})]
    if old:
        notes.append(f"{', '.join(old)}: recorded before one pool and one budget, when the rules' fixed tiles were "
                     "measured beside each kernel's default on top of the budget; the `schedrec compare` runs on each "
                     "CPU's page measure within it.")
    notes += [f"{name}: {text}" for name, r in held.items() if (text := caveat(r))]
    return "\n".join(lines) + "\n\n" + "\n".join(wrap(n) for n in notes)


def render_pages_list(root: Path = ROOT) -> str:
    """README: one link per CPU page."""
    _imports(root)
    from target_summary import cpu_name
    items = []
    for d in target_dirs(root):
        cpu = cpu_name(root, d)
        items.append(f"- [`{d.name}`](docs/results/{d.name}.md)" + (f" ({cpu})" if cpu else ""))
    if (root / "models" / "shared" / "card.md").exists():
        items.append("- [rankers across targets](docs/results/shared.md) (one ranker over every CPU's matrix, "
                     "zero-shot and adapted, and a new CPU simulated)")
    return "\n".join(items) + "\n" if items else "No CPU has results yet.\n"


def render_shared_page(root: Path = ROOT) -> str:
    """docs/results/shared.md: the rankers trained across targets, from models/shared/card.md."""
    card = (root / "models" / "shared" / "card.md").read_text()
    body = card.split("\n", 1)[1].lstrip("\n")  # the card's own title gives way to the page's
    body = body.replace("](rankers/", "](models/shared/rankers/")
    head = ["# Results: rankers across targets", "",
            wrap("Generated by `python scripts/readme_results.py` from `models/shared/card.md` (written by "
                 "`schedrec train --targets`, `schedrec evaluate --cross-target` and `benchmarks/new_cpu.py`); do "
                 "not edit. Each figure names the CPU it was measured on. Metrics as defined in "
                 "[design](docs/design.md#metrics); how it works: [design](docs/design.md#rankers-across-targets)."
                 ).rstrip("\n"), ""]
    return relink(wrap_block("\n".join(head) + "\n" + body), "../../")


# -- the zoo ------------------------------------------------------------------------------------------------

def render_zoo(root: Path = ROOT) -> str:
    """docs/zoo.md: each zoo model's kernels, classes and GFLOPs, counted from the committed kernel lists
    (bank meta.json, held-out replay reports); a range where two CPU folders' imports differ."""
    _imports(root)
    from recommender.frontend.zoo import ZOO
    seen: dict[str, dict[str, set]] = {}
    files = sorted((root / "models").glob("*/bank/*/meta.json")) + sorted((root / "models").glob("*/heldout/*/report.json"))
    for path in files:
        data = json.loads(path.read_text())
        kernels = data.get("kernels") or []
        kernels = list(kernels.values()) if isinstance(kernels, dict) else kernels
        name = data.get("model") or path.parent.name
        if not kernels or name not in ZOO:
            continue
        s = seen.setdefault(name, {"kernels": set(), "classes": set(), "gflops": set(), "where": set()})
        s["kernels"].add(len(kernels))
        s["classes"].add(len({k["class_key"] for k in kernels}))
        s["gflops"].add(round(sum(k["weight"] * k["flops"] for k in kernels) / 1e9, 2))
        s["where"].add(path.parts[-3])

    def span(values: set, fmt: str = "{}") -> str:
        if not values:
            return "-"
        lo, hi = min(values), max(values)
        return fmt.format(lo) if lo == hi else f"{fmt.format(lo)}-{fmt.format(hi)}"
    lines = ["| name | kind | definition | kernels | classes | GFLOPs | counted in |", "|---|---|---|---|---|---|---|"]
    for name, entry in ZOO.items():
        s = seen.get(name, {})
        where = s.get("where", set())
        lines.append(f"| {name} | {entry.family} | {entry.description} | {span(s.get('kernels', set()))} | "
                     f"{span(s.get('classes', set()))} | {span(s.get('gflops', set()), '{:.2f}')} | "
                     + ("-" if not where else ("banks" if where == {"bank"} else
                                               "held-out replays" if where == {"heldout"} else "banks, held-out replays"))
                     + " |")
    return "\n".join(lines) + "\n"


# -- the CLI's options --------------------------------------------------------------------------------------

def render_options(root: Path = ROOT) -> str:
    """docs/cli.md: every command's arguments and options with their help, from the CLI's own parser."""
    import argparse as ap
    _imports(root)
    from recommender.cli.main import build_parser

    def subcommands(parser: ap.ArgumentParser) -> dict[str, ap.ArgumentParser]:
        return next((dict(a.choices) for a in parser._actions if isinstance(a, ap._SubParsersAction)), {})

    def describe(name: str, parser: ap.ArgumentParser) -> list[str]:
        subs = subcommands(parser)
        if subs:
            return [line for sub, p in subs.items() for line in describe(f"{name} {sub}", p)]
        lines = [f"### `schedrec {name}`", "", wrap(" ".join((parser.description or "").split())).rstrip("\n")]
        formatter = parser._get_formatter()
        for a in parser._actions:
            if isinstance(a, ap._HelpAction):
                continue
            if len(lines) == 3:
                lines.append("")
            if a.option_strings:
                metavar = "" if a.nargs == 0 else " " + (a.metavar or (
                    "{" + ",".join(a.choices) + "}" if a.choices else a.dest.upper()))
                flag = " | ".join(a.option_strings) + metavar
            else:
                flag = a.metavar or a.dest.upper()
            required = " (required)" if a.required and a.option_strings else ""
            text = " ".join(formatter._expand_help(a).split()) if a.help else ""
            lines.append(wrap(f"- `{flag}`{required}: {text}", indent="  ").rstrip("\n"))
        group_excl = [g for g in parser._mutually_exclusive_groups if g.required]
        for g in group_excl:
            lines.append(wrap("- one of " + ", ".join(f"`{a.option_strings[0]}`" for a in g._group_actions)
                              + " is required", indent="  ").rstrip("\n"))
        return lines + [""]
    out = []
    for name, p in subcommands(build_parser()).items():
        out += describe(name, p)
    return "\n".join(out).rstrip() + "\n"


# -- other probes of a CPU (benchmarks/results/<key>/) ------------------------------------------------------

def _best_rule(k: dict) -> float | None:
    own = [t["gflops"] for t in k.get("tiles", []) if t.get("ok") and t["tile"] in k.get("rule_tiles", [])]
    return max(own) if own else None


def conv_variant_line(path: Path, root: Path) -> str:
    """A conv-rule probe variant (conv_rules.<variant>.json): the rule's best tile against the latency run's
    best schedule and PyTorch, per kernel, counted."""
    p = json.loads(path.read_text())
    ks = [k for k in p.get("kernels", []) if _best_rule(k)]
    if not ks:
        return ""
    donor = [k for k in ks if k.get("donor_gflops")]
    torch = [k for k in ks if k.get("pytorch_gflops")]
    variant = path.stem.split(".", 1)[1]
    text = (f"- Conv rule, `{variant}` probe ({p.get('date', '?')}, models {', '.join(sorted({k['model'] for k in ks}))}): "
            f"the best of the rule's own tiles against the fastest schedule the latency run had chosen, ahead on "
            f"{sum(_best_rule(k) > k['donor_gflops'] for k in donor)} of {len(donor)} kernels")
    if torch:
        ratios = [_best_rule(k) / k["pytorch_gflops"] for k in torch]
        text += (f", and against PyTorch, ahead on {sum(r > 1 for r in ratios)} of {len(torch)} (median ratio "
                 f"{statistics.median(ratios):.2f})")
    return text + f" ([table]({path.with_suffix('.md').relative_to(root)}))."


def loop_rules_line(path: Path, root: Path) -> str:
    p = json.loads(path.read_text())
    ks = [k for k in p["kernels"] if k.get("best_rule_ms") and k.get("default_ms")]
    if not ks:
        return ""
    by_kind: dict[str, list[dict]] = {}
    for k in ks:
        by_kind.setdefault(k["class_key"].split("/")[0], []).append(k)
    kinds = ", ".join(f"{sum(k['best_rule_ms'] < k['best_draw_ms'] for k in group if k.get('best_draw_ms'))} of "
                      f"{sum(1 for k in group if k.get('best_draw_ms'))} {kind}" for kind, group in sorted(by_kind.items()))
    return (f"- Loop rules against {p.get('draws', '?')} design-space draws and the default on {len(ks)} kernels without "
            f"a donor ({p.get('date', '?')}; `python benchmarks/loop_rules_probe.py`): the best rule beats the "
            f"default on {sum(k['best_rule_ms'] < k['default_ms'] for k in ks)} of {len(ks)}, and the best draw on "
            f"{kinds} kernels; so both are measured ([table]({path.with_suffix('.md').relative_to(root)})).")


def pad_copy_line(path: Path, root: Path) -> str:
    p = json.loads(path.read_text())
    r = [k["best_ratio"] for k in p["kernels"] if k.get("best_ratio")]
    if not r:
        return ""
    return (f"- Unpadded 1x1 convs reading their input in place against Relax's copy of it (`{p['command']}`, "
            f"{p.get('date', '?')}): {min(r):.2f}-{max(r):.2f}x as fast, median {statistics.median(r):.2f}x, on "
            f"{len(r)} convs ([table]({path.with_suffix('.md').relative_to(root)})).")


def measurer_line(path: Path, root: Path) -> str:
    p = json.loads(path.read_text())
    return (f"- schedrec's measurer against MetaSchedule's LocalBuilder + LocalRunner on the same {p['candidates']} "
            f"candidates ({', '.join(p['kinds'])}), same settings, `TVM_NUM_THREADS={p.get('tvm_num_threads', 'unset')}`: "
            f"{p['schedrec']['seconds']:.1f} s against {p['stock']['seconds']:.1f} s ({p['throughput_ratio']}x); "
            f"median |log ratio| of the latencies {p['median_abs_log_ratio']} (`{p['command']}`, "
            f"`{path.relative_to(root)}`).")


def agreement_line(path: Path, root: Path) -> str:
    p = json.loads(path.read_text())
    c = p["comparisons"]
    pairs = "; ".join(f"{name}: {v['median_abs_log_ratio']}" for name, v in c.items())
    return (f"- Where two measurers' readings differ, measured in turns on {p['candidates']} candidates (median "
            f"|log ratio| per pair of passes): {pairs} (`{p['command']}`, `{path.relative_to(root)}`).")


def build_cost_line(path: Path, root: Path) -> str:
    p = json.loads(path.read_text())
    one, batch = p["one_by_one_cpu_s_per_candidate"], p["batched_cpu_s_per_candidate"]
    fmt = lambda d: " + ".join(f"{d[s]:.2f}" for s in ("lower", "emit", "link"))  # noqa: E731
    return (f"- Build cost of one candidate of `{p['model']}`'s {p['kernel']}, CPU seconds lowering + LLVM emission + "
            f"linking: {fmt(one)} one by one, {fmt(batch)} per candidate with {p['candidates']} built as one module "
            f"(`python benchmarks/build_cost_probe.py`, `{path.relative_to(root)}`).")


def ranking_speed_line(path: Path, root: Path) -> str:
    p = json.loads(path.read_text())
    return (f"- Featurizing {p['tabular_per_s']} candidates/s (tabular) and {p['sequences_per_s']}/s (sequences); "
            f"ranking 1,000 candidates {p['rank_1000_lgbm_s']} s with lgbm, {p['rank_1000_tlp_s']} s with tlp, "
            f"featurizing included (`python benchmarks/ranking_speed.py`, `{path.relative_to(root)}`).")


def bank_records_line(path: Path, root: Path) -> str:
    p = json.loads(path.read_text())
    a, b = p["matrix"], p["matrix+bank_records"]
    return (f"- lgbm trained on the matrix alone against the matrix with the bank's own tuning records added to their "
            f"kernels' groups, leave-one-model-out top-1 (mean of {p['seeds']} seeds): {a['top1']:.3f} against "
            f"{b['top1']:.3f}; top-5 {a['top5']:.3f} against {b['top5']:.3f} (`python benchmarks/bank_records_ablation.py`, "
            f"`{path.relative_to(root)}`).")


def denormal_line(path: Path, root: Path) -> str:
    p = json.loads(path.read_text())
    parts = "; ".join(f"{m} {v['kept_ms']:.1f} ms kept, {v['flushed_ms']:.1f} flushed, {v['kept_again_ms']:.1f} kept again"
                      for m, v in p["models"].items())
    return (f"- PyTorch eager with denormals kept and flushed to zero ({p.get('date', '?')}): {parts} "
            f"(`python benchmarks/denormal_probe.py --models {','.join(p['models'])}`, `{path.relative_to(root)}`).")


def pack_weights_line(path: Path, root: Path) -> str:
    p = json.loads(path.read_text())
    ks = [k for k in p["kernels"] if k.get("speedup")]
    if not ks:
        return ""
    sp = [k["speedup"] for k in ks]
    return (f"- `--pack-weights`: {p['model']}'s own records replayed onto its {len(ks)} heaviest kernels with packed "
            f"weights against plain ({p.get('date', '?')}): {min(sp):.2f}-{max(sp):.2f}x as fast, median "
            f"{statistics.median(sp):.2f}x; output check passed on {sum(bool(k.get('check_ok')) for k in ks)} of "
            f"{len(ks)} (`python benchmarks/pack_weights_probe.py --model {p['model']}`, "
            f"[table]({path.with_suffix('.md').relative_to(root)})).")


def rule_space_line(path: Path, root: Path) -> str:
    p = json.loads(path.read_text())
    beyond = sorted(b["over_best_of_first_ranks"] for b in p["beyond_fixed"])
    return (f"- The conv rule's space (`schedrec matrix --rule-space`, {p['date']}; so far {', '.join(p['models'])}): "
            f"{p['rule_instances']} instances on {p['kernels']} kernels; the best instance beats the best donor on "
            f"{p['best_rule_beats_best_donor']} (weighted time {p['rule_over_donor_weighted']}x the best donor's); "
            f"on {len(beyond)} the best lies beyond the first 9 ranks (today's fixed tiles are among those), "
            + (f"{beyond[0]:.3f}-{beyond[-1]:.3f}x as fast as the best of them " if beyond else "")
            + f"(`{p['command']}`, `{path.relative_to(root)}`).")


def space_ranking_line(path: Path, root: Path) -> str:
    p = json.loads(path.read_text())
    pooled = p["pooled"]
    rnd = sorted(v["q1"] for n, v in pooled.items() if n.startswith("random@"))
    models = ", ".join(f"{m} {v['lgbm']['q1']:.2f} vs {v['tiles-then-donors']['q1']:.2f}" for m, v in p["models"].items())
    return (f"- Ranking a pool that holds the rule's space, offline, leave-one-model-out ({p['date']}): over "
            f"{pooled['lgbm']['kernels']} rule-space kernels, q@1 (mean over kernels of best / latency of the top-1) "
            f"lgbm {pooled['lgbm']['q1']}, tiles-then-donors (the fixed tiles first, then the donors by the heuristic) "
            f"{pooled['tiles-then-donors']['q1']}, random {rnd[len(rnd) // 2]} (median of {len(rnd)} seeds); q@3 "
            f"{pooled['lgbm']['q3']} / {pooled['tiles-then-donors']['q3']}; weighted top-1 {pooled['lgbm']['top1']} / "
            f"{pooled['tiles-then-donors']['top1']}" + (
                f"; weighted top-2 lgbm {pooled['lgbm']['top2']} in the order a transfer measures (the best of each "
                f"candidate family first), {pooled['lgbm-scores']['top2']} by its scores alone, tiles-then-donors "
                f"{pooled['tiles-then-donors']['top2']}" if "lgbm-scores" in pooled else "")
            + f". Per held-out model, q@1 lgbm vs tiles-then-donors: {models} "
            f"(`{p['command']}`, `{path.relative_to(root)}`).")


PROBES: dict[str, Callable[[Path, Path], str]] = {
    "loop_rules.json": loop_rules_line, "pad_copy.json": pad_copy_line, "measurer_vs_stock.json": measurer_line,
    "agreement_probe.json": agreement_line, "build_cost_probe.json": build_cost_line,
    "ranking_speed.json": ranking_speed_line, "bank_records_ablation.json": bank_records_line,
    "denormal_probe.json": denormal_line, "pack_weights.json": pack_weights_line, "rule_space.json": rule_space_line,
    "space_ranking.json": space_ranking_line,
}
# files the target_summary block already cites
SUMMARIZED = {"conv_rules", "matmul_rules", "peak_gflops", "cross_target_ranking", "onnx_coverage", "unseen_onnx",
              "torchvision_onnx"}


def render_probes(target_dir: Path, root: Path = ROOT) -> str:
    """The CPU's other probe results: a line for those with a known shape, a link for every other file."""
    results = root / "benchmarks" / "results" / target_dir.name
    if not results.is_dir():
        return ""
    lines, cited = [], set(SUMMARIZED)
    for path in sorted(results.glob("conv_rules.*.json")):
        if (line := conv_variant_line(path, root)):
            lines.append(line)
            cited.add(path.stem)
    for name, render in PROBES.items():
        if (results / name).exists() and (line := render(results / name, root)):
            lines.append(line)
            cited.add(Path(name).stem)
    rest = sorted({p.stem for p in results.iterdir() if p.suffix in (".md", ".json", ".png")} - cited)
    rest = [s for s in rest if not s.startswith("ab.")]  # the A/B comparisons are in the block above
    if rest:
        links = []
        for stem in rest:
            best = next((results / f"{stem}{ext}" for ext in (".md", ".png", ".json") if (results / f"{stem}{ext}").exists()))
            links.append(f"[{stem}]({best.relative_to(root)})")
        lines.append("- Other results of this CPU: " + ", ".join(links) + ".")
    return "\n".join(wrap(line, indent="  ").rstrip("\n") for line in lines) + "\n" if lines else ""


def render_profiles(target_dir: Path, root: Path = ROOT) -> str:
    """A table of `schedrec profile` results (benchmarks/results/<key>/profile/*.json): where each model's time
    goes, against what its kernels measured alone."""
    files = sorted((root / "benchmarks" / "results" / target_dir.name / "profile").glob("*.json"))
    if not files:
        return ""
    rows = ["| model | database | model ms | kernels alone | kernels in the model | kernels without a record | "
            "VM builtins | between calls (hook incl.) | hook | model - kernels alone | kernels alone, cold | "
            "model - kernels alone, cold |", "|---|---|" + "---|" * 10]
    dates = set()
    for f in files:
        d = json.loads(f.read_text())
        t = d["totals"]
        dates.add(d["date"])
        gap = t["model_s"] - t["kernels_isolated_s"]
        cells = [t[k] for k in ("model_s", "kernels_isolated_s", "kernel_s", "kernel_no_record_s", "vm_builtin_s",
                                "between_calls_s", "hook_overhead_s")]
        cold = t.get("kernels_cold_s")
        cold_cells = (f"{_ms(cold, 2)} | {_ms(t['model_s'] - cold, 2)} ({(t['model_s'] - cold) / t['model_s']:.0%})"
                      if cold is not None else "- | -")
        rows.append(f"| [{d['model']}]({f.relative_to(root)}) | `{d['database']}` | "
                    + " | ".join(_ms(c, 2) for c in cells) + f" | {_ms(gap, 2)} ({gap / t['model_s']:.0%}) | "
                    + cold_cells + " |")
    intro = wrap(f"`schedrec profile MODEL --database DIR --runs 20` ({', '.join(sorted(dates))}; each model's database "
                 "from `schedrec transfer --budget-per-kernel 2`): every call of the compiled model timed through the "
                 "Relax VM's instrument hook, medians of 20 runs; \"kernels alone\" sums the database records' "
                 "isolated times (what the transfer measured) x calls. Milliseconds per inference, 2 threads. "
                 "\"Cold\" (profiles run with `--cold`): the same kernels timed alone once more, one call a repeat, every "
                 "argument but the first flushed from the caches before each call, as a kernel reads its weights in "
                 "the model.")
    return intro + "\n" + "\n".join(rows) + "\n"


# -- a CPU's page -------------------------------------------------------------------------------------------

def render_page(target_dir: Path, root: Path = ROOT) -> str:
    """docs/results/<key>.md: everything measured on one CPU, generated."""
    _imports(root)
    from target_summary import cpu_name, render_target
    key = target_dir.name
    cpu = cpu_name(root, target_dir)
    out = [f"# Results measured on `{key}`" + (f" ({cpu})" if cpu else ""), "",
           wrap(f"Generated by `python scripts/readme_results.py` from the files committed under `models/{key}/` and "
                f"`benchmarks/results/{key}/`; do not edit (`--check` fails when this page differs from what it "
                f"writes). Every figure on this page was measured on `{key}`. Metrics as defined in "
                f"[design](docs/design.md#metrics); the bank per model and the rankers' full tables are in the "
                f"[card](models/{key}/card.md).").rstrip("\n"), ""]
    sections = [("What the folder holds", wrap(data_line(target_dir, root)) if (target_dir / "bank").is_dir() else ""),
                ("`make demo`", "\n".join(wrap(demo_paragraph(p, root)) for p in sorted(target_dir.glob("demo/*.json")))),
                ("Latency: what schedrec hands back, against PyTorch and ONNX Runtime", render_latency(target_dir, root)),
                ("Budgeted transfer against the alternatives (`schedrec compare`)", render_compare(target_dir, root)),
                ("Where the model's time goes (`schedrec profile`)", render_profiles(target_dir, root)),
                ("Bank, transfer matrix, held-out replays, rankers, rule probes",
                 wrap_block(render_target(root, target_dir)) if (target_dir / "bank").is_dir() else ""),
                ("Other probes", render_probes(target_dir, root))]
    for title, body in sections:
        if body.strip():
            out += [f"## {title}", "", body.rstrip("\n"), ""]
    return relink("\n".join(out).rstrip("\n") + "\n", "../../")


# -- text helpers -------------------------------------------------------------------------------------------

_GLUE = re.compile(r"(?<=\S) (?=(?:[-+*>#|]|\d+[.)])(?: |$))")  # a break here would start a list, quote or heading


def _fill(text: str, initial: str = "", indent: str = "") -> str:
    """textwrap.fill at WIDTH, never inside a word or a link, and never so that a line starts with Markdown syntax."""
    glued = _GLUE.sub("\x01", text)
    return textwrap.fill(glued, WIDTH, initial_indent=initial, subsequent_indent=indent, break_long_words=False,
                         break_on_hyphens=False).replace("\x01", " ")


def wrap(text: str, indent: str = "") -> str:
    """A paragraph (or list item, continued with `indent`) wrapped at WIDTH."""
    return _fill(text, indent=indent) + "\n"


def wrap_block(text: str) -> str:
    """Wrap a block's prose lines (list items and paragraphs); table rows and headings stay as they are."""
    out = []
    for line in text.splitlines():
        stripped = line.lstrip()
        if not stripped or stripped.startswith(("|", "#", "![")) or len(line) <= WIDTH:
            out.append(line)
            continue
        lead = line[:len(line) - len(stripped)]
        indent = lead + ("  " if stripped.startswith("- ") else "")
        out.append(_fill(stripped, initial=lead, indent=indent))
    return "\n".join(out) + "\n"


_LINK = re.compile(r"(\]\()(?!https?:|mailto:|#|/)([^)\s]+)\)")


def relink(text: str, prefix: str) -> str:
    """Markdown links written relative to the repository root, made relative to a page `prefix` deep."""
    return _LINK.sub(lambda m: f"{m.group(1)}{prefix}{m.group(2)})", text)


# -- files --------------------------------------------------------------------------------------------------

SECTIONS: dict[str, dict[str, Callable[[Path], str]]] = {
    "README.md": {"demo": render_readme_demo, "suite": render_suite, "headline": render_headline,
                  "pages": render_pages_list},
    "docs/reliability.md": {"tests": render_tests},
    "docs/zoo.md": {"zoo": render_zoo},
    "docs/cli.md": {"options": render_options},
}


def splice(text: str, body: str, name: str, where: str = "README.md") -> str:
    begin, end = f"<!-- {name}:begin -->", f"<!-- {name}:end -->"
    if begin not in text or end not in text:
        raise SystemExit(f"{where} has no {begin} ... {end} section")
    head, rest = text.split(begin, 1)
    _, tail = rest.split(end, 1)
    return f"{head}{begin}\n{body}{end}{tail}"


def generate_all(root: Path = ROOT) -> dict[Path, str]:
    """Every generated file's content: the hand-written files with their sections rewritten, and the pages."""
    files = {}
    for rel, sections in SECTIONS.items():
        path = root / rel
        text = path.read_text()
        for name, render_section in sections.items():
            text = splice(text, render_section(root), name, rel)
        files[path] = text
    for target_dir in target_dirs(root):
        files[root / "docs" / "results" / f"{target_dir.name}.md"] = render_page(target_dir, root)
    if (root / "models" / "shared" / "card.md").exists():
        files[root / "docs" / "results" / "shared.md"] = render_shared_page(root)
    return files


def stale_files(root: Path = ROOT) -> list[str]:
    """The generated files that differ from what this script writes, and pages of CPU folders that are gone."""
    files = generate_all(root)
    stale = [str(p.relative_to(root)) for p, text in files.items() if not p.exists() or p.read_text() != text]
    stale += [f"{p.relative_to(root)} (no models/{p.stem}/)" for p in sorted((root / "docs" / "results").glob("*.md"))
              if p not in files]
    return stale


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="exit 1 if a generated file is not what this script writes")
    args = ap.parse_args()
    if args.check:
        stale = stale_files()
        if stale:
            print("stale generated files (run python scripts/readme_results.py): " + ", ".join(stale), file=sys.stderr)
            return 1
        return 0
    for path, text in generate_all().items():
        if not path.exists() or path.read_text() != text:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
            print(f"wrote {path.relative_to(ROOT)}")
    for orphan in (p for p in sorted((ROOT / "docs" / "results").glob("*.md")) if not (ROOT / "models" / p.stem).is_dir()):
        print(f"{orphan.relative_to(ROOT)} has no models/{orphan.stem}/: delete it", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
