"""The rankers section of a target's card, made from `rankers/evaluation.json` and the saved rankers' meta.

`schedrec train` and `schedrec evaluate` rewrite it in `models/<key>/card.md` (replacing an older one);
`scripts/make_card.py` includes it when it writes the card.
"""
from __future__ import annotations

import json
from pathlib import Path

from recommender.core.fileio import atomic_write_text

HEADING = "## Rankers"
_COLS = ("top1", "top3", "top5", "q1", "q5", "ndcg5", "hit1", "fail1")


def _f(x: object) -> str:
    return "-" if x is None else f"{x:.3f}" if isinstance(x, float) else str(x)


def _pooled_table(rankers: dict) -> list[str]:
    """Markdown rows of each ranker's pooled figures."""
    lines = ["| ranker | kernels | " + " | ".join(_COLS) + " |", "|---|---|" + "---|" * len(_COLS)]
    for name, r in rankers.items():
        p = r["pooled"]
        lines.append(f"| {name} | {p.get('kernels')} | " + " | ".join(_f(p.get(c)) for c in _COLS) + " |")
    return lines


def _spread_table(spread: dict | None) -> list[str]:
    """Markdown rows of the seeded rankers' figures over seeds: mean (min-max)."""
    if not spread:
        return []
    metrics = ("top1", "top5", "q1")
    lines = [f"The same, refitted with seeds {', '.join(map(str, spread['seeds']))}: mean (min-max) of the "
             f"{len(spread['seeds'])} runs (the table above is seed {spread['seeds'][0]}).", "",
             "| ranker | " + " | ".join(metrics) + " |", "|---|" + "---|" * len(metrics)]
    for name, r in spread["rankers"].items():
        lines.append(f"| {name} | " + " | ".join(
            f"{r[k]['mean']:.3f} ({r[k]['min']:.3f}-{r[k]['max']:.3f})" for k in metrics) + " |")
    return lines + [""]


def rankers_markdown(target_dir: Path) -> str:
    """The section as Markdown ('' when the target has neither trained rankers nor an evaluation)."""
    target_dir = Path(target_dir)
    folder = target_dir / "rankers"
    ev_path = folder / "evaluation.json"
    metas = {p.parent.name: json.loads(p.read_text()) for p in sorted(folder.glob("*/meta.json"))}
    if not metas and not ev_path.exists():
        return ""
    lines = [HEADING, "", f"Measured on `{target_dir.name}` (its transfer matrix, `transfer/`). Candidates that "
             "fail to replay are known before ranking and are never ranked; a replayed candidate that then fails "
             "(wrong result, timeout) is labelled last (relevance 0), and anchor-trace schedules of kernels whose "
             "epilogue pads, the source of every wrong result in the matrix, are ranked after all others "
             "(`featurize/validity.py`).", ""]
    if metas:
        lines += ["| saved ranker | kernels | candidates | train s | feature version |", "|---|---|---|---|---|"]
        for name, m in metas.items():
            lines.append(f"| {name} | {m.get('kernels', '-')} | {m.get('candidates', '-')} | "
                         f"{_f(m.get('train_seconds'))} | `{m.get('feature_version', '')}` |")
        lines.append("")
    if ev_path.exists():
        ev = json.loads(ev_path.read_text())
        lomo = ev["lomo"]
        stale = stale_rankers(ev, metas)
        if stale:
            lines += [f"**This evaluation is of other data than the saved {', '.join(stale)}** (feature version "
                      f"`{ev.get('feature_version', '?')}`"
                      + (f", against `{metas[stale[0]].get('feature_version', '?')}`"
                         if metas[stale[0]].get('feature_version') != ev.get('feature_version') else "")
                      + f"): its figures do not describe them. `schedrec evaluate --target-key {target_dir.name}` "
                      "scores rankers fitted on the current rows (about two hours on two cores; a stopped run "
                      "resumes).", ""]
        lines += [f"Leave-one-model-out over {len(lomo['models'])} bank models (`schedrec evaluate`): no row "
                  "of the evaluated model is in the training data or the candidate pool. Pooled over held-out "
                  "kernels; top-k score weights kernels by weight x latency (DESIGN.md), Q@k is the unweighted "
                  "mean per kernel, fail1 the share of top-1 picks that fail.", "", *_pooled_table(lomo["rankers"]),
                  "", *_spread_table(ev.get("seed_spread"))]
        held = ev.get("heldout") or {}
        if held.get("rankers"):
            lines += [f"Zoo models outside the bank ({', '.join(held['models'])}), their exhaustive replays "
                      "(`heldout/`) ranked by rankers trained on the whole matrix"
                      + (", donor candidates only (the rules' tiles are measured whatever the ranking):"
                         if held.get("candidates") == "donors" else ":"), "",
                      *_pooled_table(held["rankers"]), ""]
        nc = ev.get("noise_ceiling")
        if nc:
            a, b = nc.get("matrix_to_a", {}), nc.get("a_to_b", {})
            metric = ("evaluate's metric (the same weights, default fallback and failures)" if "metric" in nc
                      else "valid candidates only (not evaluate's metric)")
            lines += [f"Label-noise ceiling ({nc['kernels']} kernels, {nc['candidates']} candidates measured twice "
                      f"more, `scripts/remeasure_matrix.py`), on {metric}: ranking by the matrix's measurement and "
                      f"scoring with a new one gives top-1 {_f(a.get('top1'))}, top-5 {_f(a.get('top5'))} (median "
                      f"change {_f(a.get('median_abs_change'))}); two new measurements back to back give top-1 "
                      f"{_f(b.get('top1'))}, top-5 {_f(b.get('top5'))} (median change "
                      f"{_f(b.get('median_abs_change'))})."
                      + _repeats_sentence(nc), ""]
        curve = ev.get("learning_curve")
        if curve:
            names = sorted({n for v in curve.values() for n in v})
            lines += ["Learning curve (share of training kernels kept; pooled top-1 / top-5):", "",
                      "| share | " + " | ".join(names) + " |", "|---|" + "---|" * len(names)]
            for frac, v in sorted(curve.items(), key=lambda kv: float(kv[0])):
                lines.append(f"| {float(frac):.0%} | " + " | ".join(
                    f"{_f(v[n]['top1'])} / {_f(v[n]['top5'])}" if n in v else "-" for n in names) + " |")
            lines.append("")
    return "\n".join(lines)


def stale_rankers(evaluation: dict, metas: dict[str, dict]) -> list[str]:
    """The saved rankers (name -> meta.json) that `evaluation` did not score the data of: by the training
    data hashes it records, or, in an evaluation older than those, by feature version."""
    hashes = evaluation.get("data_hashes")
    out = []
    for name, meta in metas.items():
        if hashes is not None:
            if name in hashes and hashes[name] != meta.get("data_hash"):
                out.append(name)
        elif meta.get("feature_version") != evaluation.get("feature_version"):
            out.append(name)
    return out


def update_card(target_dir: Path) -> Path | None:
    """Replace the rankers section of `<target>/card.md` (append it if the card has none)."""
    card = Path(target_dir) / "card.md"
    section = rankers_markdown(target_dir)
    if not card.exists() or not section:
        return None
    text = card.read_text()
    if HEADING in text:
        head, _, rest = text.partition(HEADING)
        nxt = rest.find("\n## ")
        text = head.rstrip("\n") + "\n\n" + section + ("\n" + rest[nxt + 1:] if nxt >= 0 else "")
    else:
        text = text.rstrip("\n") + "\n\n" + section
    text = text.rstrip("\n") + "\n"  # one newline at the end, as make_card writes it
    atomic_write_text(str(card), text)
    return card


def shared_markdown(shared_dir: Path) -> str:
    """The card of the rankers trained across targets: the saved ranker and the cross-target table."""
    from training.cross_target import RESULT_FILE, format_cross_table
    folder = Path(shared_dir) / "rankers"
    lines = ["# Rankers across targets", "",
             "One LightGBM ranker trained on the query groups of several CPU targets (each group one kernel of "
             "one target), with each target's recorded hardware as features (`featurize/hardware_features.py`, "
             "`recommender/target/cpus.json`). A transfer on a CPU without rankers of its own uses it "
             "(`schedrec target` says which ranker a transfer would use). Written by `schedrec train --targets` "
             "and `schedrec evaluate --cross-target`.", ""]
    meta_path = folder / "lgbm" / "meta.json"
    if meta_path.exists():
        m = json.loads(meta_path.read_text())
        lines += [f"Saved: `rankers/lgbm/`, trained on {', '.join(m.get('targets', []))} "
                  f"({', '.join(f'{k}: {v}' for k, v in m.get('kernels', {}).items())} kernels; "
                  f"{m.get('candidates')} candidates; {_f(m.get('train_seconds'))} s), features "
                  f"`{m.get('feature_version', '')}`.", ""]
    results = sorted(folder.glob("cross_target*.json"), key=lambda q: (q.name != RESULT_FILE, q.name))
    for ev_path in (q for q in results if not q.name.endswith(".partial.json")):
        ev = json.loads(ev_path.read_text())
        pooled = ("pooled N: fitted from scratch on the other targets and those N kernels; "
                  if any(c.startswith("pooled_") for cells in ev["cells"].values() for c in cells) else "")
        lines += [f"Evaluation ({ev['protocol']}, a held-out model out of every target at once; each target's "
                  "figures measured on that CPU, pooled over its held-out kernels). own: the target's own ranker; "
                  "zero shot: trained on the other targets only; adapted N: zero shot trained on (continued, "
                  f"{ev.get('adapt_trees')} trees per booster) with N of the target's training kernels; "
                  f"{pooled}shared: trained on every target (`rankers/{ev_path.name}`).", "", format_cross_table(ev),
                  "", f"![score against N](rankers/{ev_path.with_suffix('.png').name})", ""]
    for path in sorted(Path(shared_dir).glob("new_cpu/*/*/summary.json")):
        lines += new_cpu_markdown(json.loads(path.read_text()), path.parent.relative_to(shared_dir))
    return "\n".join(lines)


def new_cpu_markdown(summary: dict, folder: Path) -> list[str]:
    """A new CPU simulated on one at hand (`benchmarks/new_cpu.py`): each method's interleaved median and Q."""
    lines = [f"## A new CPU: {summary['target_key']} with its own folder set aside, {summary['model']}", "",
             f"Measured on `{summary['target_key']}`, with `{summary['bank']}`'s bank (the nearest) and the ranker "
             f"trained across {', '.join(summary['borrowed_from'])} only (no row of this CPU). Median of "
             f"interleaved rounds (`{folder}/retime.json`); Q against the exhaustive replay of the same pool "
             "(`python benchmarks/new_cpu.py`).", "",
             "| method | model ms | Q vs exhaustive | measurements | search s |", "|---|---|---|---|---|"]
    for name, r in summary["methods"].items():
        search = "-" if r["search_s"] is None else f"{r['search_s']:.0f}"
        lines.append(f"| {name} | {r['median_ms']:.2f} | {r['q_vs_exhaustive']:.3f} | {_f(r['measurements'])} | "
                     f"{search} |")
    return lines + [""]


def update_shared_card(shared_dir: Path) -> Path:
    """Write `<shared>/card.md`."""
    card = Path(shared_dir) / "card.md"
    card.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(str(card), shared_markdown(shared_dir).rstrip("\n") + "\n")
    return card


def _repeats_sentence(nc: dict) -> str:
    """What the ceiling's repeats curve says: top-1 ranked by the median of 1..n repeats, and how many reach 0.95."""
    curve = nc.get("repeats_curve") or {}
    if not curve:
        return ""
    n, enough = len(curve), nc.get("repeats_for_top1_095")
    ranked = (f"by one repeat, top-1 {_f(next(iter(curve.values()))['top1'])}" if n == 1 else
              f"by the median of 1..{n} repeats, top-1 " + " / ".join(_f(v["top1"]) for v in curve.values()))
    held = (f"{enough} {'repeat holds' if enough == 1 else 'repeats hold'} 0.95" if enough else
            f"no count up to {n} holds 0.95")
    return f" Ranked {ranked}; {held}."
