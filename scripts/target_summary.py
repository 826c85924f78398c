"""What each CPU with a bank has measured, as Markdown for its page docs/results/<target-key>.md, made only from
committed JSON.

One block per `models/<target-key>/` that holds a bank: the bank (meta.json), the transfer matrix
(transfer/summary.json), the held-out replays (transfer/heldout.json, `scripts/transfer_figures.py`), the
rankers' leave-one-model-out evaluation (rankers/evaluation.json), and, where they were run on that CPU, the
cross-target ranking check, the FMA peak and the tile rules' probes (benchmarks/results/<target-key>/). Each
figure names the command that reproduces it; links are relative to the repository root (`scripts/readme_results.py`
rewrites them for the page it writes).
"""
from __future__ import annotations

import json
import statistics
from pathlib import Path

RANKER_COLUMNS = ("top1", "top3", "top5", "q1", "q5", "ndcg5")


def _read(path: Path) -> dict | list | None:
    return json.loads(path.read_text()) if path.exists() else None


def _f3(x: object) -> str:
    return f"{x:.3f}" if isinstance(x, (int, float)) else "-"


def _cpu(target_dir: Path, results: Path) -> str:
    """The CPU name its latency rows or probes recorded ('' when none did)."""
    names = {r.get("cpu") for r in (_read(target_dir / "latency.json") or {}).values()}
    names |= {(_read(results / f) or {}).get("cpu") for f in ("conv_rules.json",)}
    return ", ".join(sorted(n for n in names if n))


def bank_line(target_dir: Path) -> str:
    from recommender.bank.store import bank_models, read_meta
    metas = [read_meta(f) for f in bank_models(target_dir / "bank")]  # the records themselves are not needed
    kernels = [k for m in metas for k in m.get("kernels", {}).values()]
    trials = sorted({str(m.get("trials_per_task")) for m in metas})
    hours = sum(k.get("seconds", 0.0) for k in kernels) / 3600
    return (f"- Bank: {len(metas)} models ({', '.join(m['model'] for m in metas)}), "
            f"{sum(bool(k.get('tuned')) for k in kernels)} tuned kernels, {'/'.join(trials)} trials per kernel, "
            f"{hours:.2f} h of tuning (`scripts/tune_bank.sh`; per model in the [card](models/{target_dir.name}/card.md)).")


def matrix_line(target_dir: Path, bank: list[str]) -> str:
    s = _read(target_dir / "transfer" / "summary.json")
    if not s:
        return "- Transfer matrix: not built yet (`schedrec replay --all-pairs --top-n 3 --cap 48`)."
    a = s["all"]
    lag = [m for m in bank if m not in s.get("bank_models", [])]
    return (f"- Transfer matrix (`schedrec replay --all-pairs --top-n {s['top_n']} --cap {s['cap']}`): "
            f"{a['kernels']} kernels of {len(s['bank_models'])} bank models, {a['kernels_with_valid']} with a valid "
            f"candidate, {s['rows']} rows, {a['candidates_per_kernel']:.1f} candidates per kernel. Medians over "
            f"kernels: the median candidate is {a['median_over_best']:.2f}x slower than the best, the default "
            f"schedule {a['default_over_best']:.1f}x; the best transfer is {a['best_over_tuned']:.2f}x of the "
            f"kernel's own tuning"
            + (f". Built before the bank had {', '.join(lag)}: those models are neither rows nor donors" if lag
               else "") + f" ([figures](models/{target_dir.name}/transfer/FIGURES.md)).")


def heldout_table(target_dir: Path) -> list[str]:
    rows = _read(target_dir / "transfer" / "heldout.json") or []
    if not rows:
        return []
    lines = ["- Exhaustive replay of the zoo models held out of the bank, from the bank models it held then "
             f"(`schedrec replay --model zoo:M --top-n 3 --cap 48 --out models/{target_dir.name}/heldout/M`; "
             "batch 1). Untuned is TVM's plain loops, not a baseline:", "",
             "  | model | donor models | kernels | candidates (valid) | FLOP coverage same class / with anchor "
             "fallback | search | untuned TVM | after replay |", "  |---|---|---|---|---|---|---|---|"]
    for r in rows:
        report = _read(target_dir / "heldout" / r["model"] / "report.json") or {}
        donors = len(report.get("bank_models", [])) or "-"
        lines.append(f"  | {r['model']} | {donors} | {r['kernels']} | {r['candidates']} ({r['valid']}) | "
                     f"{100 * r['coverage_class']:.1f}% / {100 * r['coverage_anchor']:.1f}% | "
                     f"{r['search_s'] / 60:.1f} min | {r['untuned_ms']:.0f} ms | {r['tuned_ms']:.1f} ms |")
    return lines + [""]


def rankers_table(target_dir: Path) -> list[str]:
    ev = _read(target_dir / "rankers" / "evaluation.json")
    if not ev:
        return []
    lomo = ev["lomo"]
    kernels = max(r["pooled"]["kernels"] for r in lomo["rankers"].values())
    lines = [f"- Rankers, leave-one-model-out over {len(lomo['models'])} bank models and {kernels} kernels "
             f"(`schedrec evaluate --target-key {target_dir.name}`; pooled, metrics as in docs/design.md):", "",
             "  | ranker | " + " | ".join(RANKER_COLUMNS) + " |", "  |---|" + "---|" * len(RANKER_COLUMNS)]
    for name, r in sorted(lomo["rankers"].items(), key=lambda kv: -kv[1]["pooled"].get("top1", 0)):
        lines.append(f"  | {name} | " + " | ".join(_f3(r["pooled"].get(c)) for c in RANKER_COLUMNS) + " |")
    lines.append("")
    held = (ev.get("heldout") or {}).get("rankers", {})
    if "lgbm" in held:
        p, rnd = held["lgbm"]["pooled"], held.get("random", {}).get("pooled", {})
        donors = ", donor candidates only" if ev["heldout"].get("candidates") == "donors" else ""
        lines += [f"  On the held-out zoo models ({', '.join(ev['heldout']['models'])}; {p['kernels']} kernels of "
                  f"their exhaustive replays{donors}), "
                  f"lgbm trained on the whole matrix scores top-1 {_f3(p['top1'])}, "
                  f"top-5 {_f3(p['top5'])} (random {_f3(rnd.get('top1'))} / {_f3(rnd.get('top5'))}).", ""]
    return lines


def cross_target_line(target_dir: Path, results: Path) -> str:
    c = _read(results / "cross_target_ranking.json")
    ev = _read(target_dir / "rankers" / "evaluation.json")
    if not c or not ev:
        return ""
    own = ev["lomo"]["rankers"]
    cross = c["cross"]["rankers"]
    pairs = [f"{n} {_f3(cross[n]['pooled']['top1'])} / {_f3(cross[n]['pooled']['top5'])} (own: "
             f"{_f3(own[n]['pooled']['top1'])} / {_f3(own[n]['pooled']['top5'])})" for n in cross if n in own]
    return (f"- Rankers fitted on `{c['train_key']}`'s matrix in the same folds, scoring this CPU's candidates "
            f"(`python benchmarks/cross_target_ranking.py --train-key {c['train_key']} --test-key "
            f"{c['test_key']}`), top-1 / top-5: " + "; ".join(pairs) + ".")


def unseen_onnx_line(results: Path, name: str = "unseen_onnx",
                     what: str = "ONNX models of architectures outside the bank") -> str:
    """What schedrec handed back for ONNX models of architectures outside the bank, against ONNX Runtime and
    PyTorch eager in the same run ('' where benchmarks/<name>.py was not run on this CPU): unseen_onnx's own
    architectures, or torchvision's (`name` torchvision_onnx)."""
    u = _read(results / f"{name}.json")
    rows = [(n, r) for n, r in ((u or {}).get("models") or {}).items() if r.get("schedrec_ms")]
    if not rows:
        return ""

    def ms(value: float | None) -> str:
        return f"{value:.1f}" if value else "-"
    parts = [f"{n} {ms(r['schedrec_ms'])} / {ms(r.get('onnxruntime_ms'))} / {ms(r.get('pytorch_ms'))}"
             for n, r in rows]
    return (f"- {what}, exported and transferred in the run (k=2, "
            f"{u['selector']}), ms schedrec / ONNX Runtime / PyTorch eager, timed side by side: "
            + "; ".join(parts) + f" (`{u['command']}`, [table](benchmarks/results/{results.name}/{name}.md)).")


def onnx_coverage_line(results: Path) -> str:
    """The share of each model's FLOPs in kernels with a donor whose replay succeeds, per import path (the zoo's
    torch.export, ONNX), from benchmarks/onnx_coverage.py ('' where it was not run on this CPU)."""
    c = _read(results / "onnx_coverage.json")
    if not c or not c.get("models"):
        return ""
    def share(r: dict | None) -> str:
        return f"{100 * r['replayed']:.1f}%" if r else "-"
    parts = [f"{name} {share(paths.get('torch.export (zoo)'))} / {share(paths.get('ONNX'))}"
             for name, paths in c["models"].items()]
    return ("- Share of FLOPs in kernels with a bank donor that replays, imported through the zoo's torch.export / "
            f"as an ONNX export ({c['date']}): " + "; ".join(parts)
            + f" (`python benchmarks/onnx_coverage.py`, [table](benchmarks/results/{results.name}/onnx_coverage.md)).")


def ab_line(results: Path) -> str:
    """Each model built with an older revision's latency database against now, side by side
    (benchmarks/ab_databases.py; '' where it was not run on this CPU)."""
    runs = [r for r in (_read(f) for f in sorted(results.glob("ab.*.json"))) if r and r.get("median_ms")]
    if not runs:
        return ""
    parts = [f"{r['model']} {r['median_ms'][r['rev']]:.1f} ms at {r['rev']}, {r['median_ms']['now']:.1f} now "
             f"({r['median_ms']['now'] / r['median_ms'][r['rev']]:.2f}x, {r['date']}; [table]"
             f"(benchmarks/results/{results.name}/ab.{r['model']}.md))" for r in runs]
    return ("- The latency run's database now against an older revision's, the whole model timed side by side "
            "(`python benchmarks/ab_databases.py --model M --rev R`): " + "; ".join(parts) + ".")


def probes_line(results: Path) -> str:
    """The FMA peak and the tile rules' probes (conv, matmul) where they were run on this CPU."""
    peak = _read(results / "peak_gflops.json")
    parts = []
    if peak:
        p = peak["peak"]
        parts.append(f"FMA peak {p['gflops']:.1f} GFLOP/s on {p['threads']} threads, {p['one_thread_gflops']:.1f} on "
                     f"one, {p['lanes']} float32 lanes (`python benchmarks/peak_gflops.py`)")
    parts += [x for x in (_rule_part(results, "conv", "convs"), _rule_part(results, "matmul", "matmul kernels")) if x]
    return ("- " + "; ".join(parts) + ".") if parts else ""


def _rule_part(results: Path, rule: str, what: str) -> str:
    """How the rule's own tiles did against PyTorch on the probed kernels ('' without a probe)."""
    probe = _read(results / f"{rule}_rules.json")
    best = []
    for k in (probe or {}).get("kernels", []):
        own = [t["gflops"] for t in k["tiles"] if t["ok"] and t["tile"] in k["rule_tiles"]]
        if own and k.get("pytorch_gflops"):
            best.append((max(own), k["pytorch_gflops"]))
    if not best:
        return ""
    ratios = [r / p for r, p in best]
    models = ", ".join(sorted({k["model"] for k in probe["kernels"]}))
    return (f"the {rule} rule's tiles on the {len(best)} heaviest {what} of {models} reach "
            f"{min(r for r, _ in best):.0f}-{max(r for r, _ in best):.0f} GFLOP/s against PyTorch's "
            f"{min(p for _, p in best):.0f}-{max(p for _, p in best):.0f} on the same shapes (median ratio "
            f"{statistics.median(ratios):.2f}, ahead on {sum(x > 1 for x in ratios)}; `{_probe_command(probe, rule)}`, "
            f"[table](benchmarks/results/{results.name}/{rule}_rules.md))")


def _probe_command(probe: dict, rule: str) -> str:
    """The rule probe's command line, from the kernels its JSON holds."""
    per_model: dict[str, int] = {}
    for k in probe["kernels"]:
        per_model[k["model"]] = per_model.get(k["model"], 0) + 1
    return (f"python benchmarks/conv_rules_probe.py --models {','.join(per_model)} --kernels "
            f"{max(per_model.values())}" + (" --all-tiles" if probe.get("all_tiles") else "")
            + (f" --rule {rule}" if rule != "conv" else ""))


def render_target(root: Path, target_dir: Path) -> str:
    """One CPU's block (without a heading): bank, matrix, held-out replays, rankers, probes."""
    from recommender.bank.store import bank_models
    results = root / "benchmarks" / "results" / target_dir.name
    bank = [f.name for f in bank_models(target_dir / "bank")]
    lines = [bank_line(target_dir), matrix_line(target_dir, bank), *heldout_table(target_dir),
             *rankers_table(target_dir)]
    lines += [x for x in (cross_target_line(target_dir, results), onnx_coverage_line(results),
                           unseen_onnx_line(results),
                           unseen_onnx_line(results, "torchvision_onnx", "torchvision models (random weights)"),
                           ab_line(results), probes_line(results)) if x]
    return "\n".join(lines).rstrip() + "\n"


def cpu_name(root: Path, target_dir: Path) -> str:
    """The CPU name the target's latency rows or probes recorded ('' when none did)."""
    return _cpu(target_dir, root / "benchmarks" / "results" / target_dir.name)


def render_targets(root: Path) -> str:
    """The per-CPU block, under a heading, for every target folder with a bank."""
    blocks = []
    for target_dir in sorted(p for p in (root / "models").iterdir() if (p / "bank").is_dir()):
        cpu = cpu_name(root, target_dir)
        blocks.append(f"#### Measured on `{target_dir.name}`" + (f" ({cpu})" if cpu else "") + "\n\n"
                      + render_target(root, target_dir))
    return "\n".join(blocks) if blocks else "No CPU has a bank yet.\n"
