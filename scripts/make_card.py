"""Write models/<target-key>/card.md from the bank and reference meta files and latency.json.

Usage: python scripts/make_card.py [--target native]
"""
from __future__ import annotations

import argparse
import json

from recommender.bank.store import bank_models, read_meta
from recommender.target.folders import repo_models_dir
from recommender.bank.info import model_summary
from recommender.core.errors import run_script
from recommender.core.fileio import atomic_write_text, read_json
from recommender.target.spec import cpu_name, native_target, parse_target
from training.report import rankers_markdown

MAX_DRIFT = 1.5  # a latency row whose columns moved more than this between rounds gets a caveat on the card


def _fmt(x: object) -> str:
    return "-" if x is None else f"{x:.2f}" if isinstance(x, float) else str(x)


def _ratio(a: object, b: object) -> str:
    return f"{a / b:.2f}" if isinstance(a, (int, float)) and isinstance(b, (int, float)) and b > 0 else "-"


def _tuned_share(meta: dict) -> str:
    """"<tuned>/<all> kernels, <p>% of FLOPs" of one bank or reference model."""
    ks = list(meta["kernels"].values())
    total = sum(k.get("flops", 0) * k.get("weight", 1) for k in ks)
    tuned = sum(k.get("flops", 0) * k.get("weight", 1) for k in ks if k.get("tuned"))
    share = f", {100 * tuned / total:.0f}% of FLOPs" if total else ""
    return f"{sum(1 for k in ks if k.get('tuned'))}/{len(ks)}{share}"


def own_record_coverage(root) -> dict[str, str]:
    """Per bank and reference model of a target folder, what its own records cover (`_tuned_share`)."""
    metas = [read_meta(f) for kind in ("bank", "reference") if (root / kind).is_dir() for f in bank_models(root / kind)]
    return {meta["model"]: _tuned_share(meta) for meta in metas}


def _cpu(root, target) -> str:
    """The CPU the folder's data was measured on: as its latency rows recorded it, else this host's where it is
    the folder's target (a card written on another machine does not name that machine's CPU)."""
    lat = read_json(root / "latency.json") if (root / "latency.json").exists() else {}
    named = sorted({r["cpu"] for r in lat.values() if r.get("cpu")})
    if named:
        return ", ".join(named)
    if target.key == native_target().key:
        return cpu_name()
    return "not recorded (this card was written on another CPU)"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--target", default="native")
    args = ap.parse_args()
    target = parse_target(args.target, validate=False)  # compiles nothing: the key is enough
    root = repo_models_dir() / target.key
    lines = [f"# {target.key}: bank and references", "",
             f"Target: `{json.dumps(target.config)}`; CPU: {_cpu(root, target)}.", ""]
    coverage = own_record_coverage(root)
    for kind in ("bank", "reference"):
        if not (root / kind).is_dir():
            continue
        folders = bank_models(root / kind)
        lines += [f"## {kind} ({len(folders)} models)", "",
                  "| model | kernels | tuned (>= min FLOP share) | done | trials per kernel | records | valid | hours |",
                  "|---|---|---|---|---|---|---|---|"]
        settings, hours = None, 0.0
        for f in folders:
            s, meta = model_summary(f), read_meta(f)
            settings = settings or {"measurer": meta.get("measurer"), "search": meta.get("search"),
                                    "min_flop_share": meta.get("min_flop_share")}
            lines.append(f"| {s['model']} | {s['kernels']} | {s['tuned_kernels']} | {s['done_kernels']} | "
                         f"{meta.get('trials_per_task')} | {s['records']} | {s['valid_records']} | "
                         f"{s['tuning_hours']:.2f} |")
            hours += s["tuning_hours"]
        lines += ["", f"Total tuning time: {hours:.2f} h (sum over kernels of MetaSchedule's search, measuring "
                  "included).", "", f"Settings: `{json.dumps(settings)}`", ""]
        if kind == "bank":
            held = sorted(p.name for p in (root / "heldout").glob("*") if p.is_dir()) if (root / "heldout").is_dir() else []
            if held:
                lines += [f"Held out of the bank for evaluation: {', '.join(held)} "
                          "(their exhaustive replay from the bank is in `heldout/`).", ""]
    lat_path = root / "latency.json"
    if lat_path.exists():
        lat = read_json(lat_path)
        lines += ["## Model latency (ms, batch 1, median)", "",
                  "The same input, one run per model (`python scripts/latency_table.py --redo`). "
                  "*Own records* applies the model's own tuning records (bank or reference): only kernels that hold "
                  "at least the minimum FLOP share were tuned, the others run TVM's default code (plain loops). "
                  "*schedrec* is what schedrec hands back for the model as if it were new: budgeted transfer from "
                  "the bank's other models (the model itself left out, and lgbm fitted without it), the top "
                  f"{_k(lat)} candidates per kernel measured, design-space samples where no donor replays; "
                  "*plain loops* is the share of its kernel time in kernels that kept TVM's default code (no "
                  "candidate beat it, or none compiled), and *search* its search time. "
                  f"{heldout_text(lat)}{rankers_text(lat)}{_timing(lat)} {_measured_with(lat, target)}", ""]
        lines += latency_table(lat, coverage)
        lines += ["", latency_summary(lat)]
        lines.append("")
    section = rankers_markdown(root)
    if section:
        lines.append(section)
    atomic_write_text(str(root / "card.md"), "\n".join(lines).rstrip("\n") + "\n")  # as update_card ends it
    print(f"wrote {root / 'card.md'}")


def latency_table(lat: dict, coverage: dict[str, str]) -> list[str]:
    """The latency table's Markdown lines (card and README), one row per model of latency.json, then the
    caveat a row carries (a row measured under conditions that spoil it, until it is redone)."""
    lines = ["| model | set | kernels with own records | untuned TVM | TVM, own records | schedrec | plain loops | "
             "search s | PyTorch eager | ONNX Runtime | schedrec / PyTorch | schedrec / ORT | drift |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for name, r in lat.items():
        out = r.get("schedrec") or {}
        share = out.get("time_share_default")
        lines.append(f"| {name} | {r.get('kind')} | {coverage.get(name, '-')} | {_fmt(r.get('tvm_untuned_ms'))} | "
                     f"{_fmt(r.get('tvm_tuned_ms'))} | {_fmt(r.get('schedrec_ms'))} | "
                     f"{'-' if share is None else format(100 * share, '.1f') + '%'} | "
                     f"{_fmt(None if out.get('search_s') is None else round(out['search_s']))} | "
                     f"{_fmt(r.get('pytorch_ms'))} | {_fmt(r.get('onnxruntime_ms'))} | "
                     f"{_ratio(r.get('schedrec_ms'), r.get('pytorch_ms'))} | "
                     f"{_ratio(r.get('schedrec_ms'), r.get('onnxruntime_ms'))} | {_drift(r)} |")
    caveats = [f"- {name}: {text}" for name, r in lat.items() if (text := caveat(r))]
    return lines + ([""] + caveats if caveats else [])


def heldout_text(lat: dict) -> str:
    """The sentence on held-out rows (zoo models in neither the bank nor the references), where there are any."""
    held = [n for n, r in lat.items() if r.get("kind") == "held-out"]
    if not held:
        return ""
    return (f"*held-out* rows ({', '.join(held)}) are zoo models in neither the bank nor the references: they have "
            "no own records, and schedrec transfers to them from the whole bank "
            "(`python scripts/latency_table.py --heldout MODEL`). ")


def ranker_used(selector: str) -> str:
    """A row's selector as the card names it: which lgbm, fitted on which target's matrix."""
    if " shipped for " in selector:
        return "the lgbm " + selector.split(" ", 1)[1]
    if "(trained without " in selector:
        where = selector.split(") on ", 1)[1] if ") on " in selector else "this target's matrix"
        return f"lgbm fitted without the row's model on {where}"
    return "this target's shipped lgbm" if selector == "lgbm" else selector


def rankers_text(lat: dict) -> str:
    """Which ranker ranked each row's candidates (from the rows' recorded selector), grouped."""
    groups: dict[str, list[str]] = {}
    for name, r in lat.items():
        selector = (r.get("schedrec") or {}).get("selector")
        if selector:
            groups.setdefault(ranker_used(selector), []).append(name)
    if not groups:
        return ""
    return ("Rankers used: " + "; ".join(f"{used} ({', '.join(names)})" for used, names in groups.items()) + ". ")


def _timing(lat: dict) -> str:
    """How the row's columns were timed: side by side in rounds (round_medians_ms, with the rows' `timing`:
    rounds, repeats per round, least seconds per repeat), or, for rows timed before that, one column after
    the other."""
    rounds = [n for n, r in lat.items() if r.get("round_medians_ms")]
    settings = sorted({json.dumps(lat[n].get("timing"), sort_keys=True) for n in rounds})
    how = "; ".join(_rounds_text(json.loads(s)) for s in settings)
    text = (f"Own records, schedrec, PyTorch and ONNX Runtime are timed side by side: {how}, the order rotated "
            "between rounds; *drift* is the largest ratio between one column's slowest and fastest round (how much "
            "the machine moved during the row). Untuned TVM (plain loops everywhere): the median of 3 runs, before "
            "the rounds.")
    fast = [n for n, r in lat.items() if r.get("fast_math")]
    if fast:
        searched = [n for n in fast if (lat[n].get("schedrec") or {}).get("search_fast_math")]
        text += (f" TVM builds of {'every row' if len(fast) == len(lat) else ', '.join(fast)} use schedrec's "
                 "vectorized float32 exp/erf (`recommender/measure/fast_math.py`; the others libm's scalar calls, as stock "
                 f"TVM); schedrec's search measured with them on {len(searched)} of {len(fast)}.")
    if len(rounds) == len(lat):
        return text
    earlier = ("one column after the other: both TVM columns the median of 7 repeats of at least 200 ms, PyTorch "
               "and ONNX Runtime of 5, untuned TVM of 3 runs")
    if not rounds:
        return f"Timed {earlier}."
    return f"{text} Rows without a drift figure were timed {earlier}."


def _rounds_text(timing: dict | None) -> str:
    if not timing:
        return "in rounds, each timing every column"
    n, rep = timing["rounds"], timing["repeats"]
    return (f"{n} rounds, each timing every column ({rep} repeats of at least {timing['min_repeat_s'] * 1000:.0f} ms); "
            f"a column's figure is the median of its {n * rep} repeats")


def _drift(r: dict) -> str:
    drift = drift_ratio(r)
    return "-" if drift is None else f"{drift:.2f}x"


def drift_ratio(r: dict) -> float | None:
    """The largest ratio of a column's slowest round to its fastest in a latency row (None without rounds)."""
    rounds = [v for v in (r.get("round_medians_ms") or {}).values() if v and min(v) > 0]
    return max(max(v) / min(v) for v in rounds) if rounds else None


def caveat(r: dict) -> str | None:
    """What spoils a latency row, if anything: the caveat written into it, else a drift over MAX_DRIFT, with the
    worst CPU stall share of each column where the row kept them (a share over 10% in a column timed in the
    timing worker means another process took the CPU)."""
    drift = drift_ratio(r)
    if r.get("caveat") or drift is None or drift <= MAX_DRIFT:
        return r.get("caveat")
    stalls = r.get("stall_share") or {}
    shown = ", ".join(f"{column} {share:.0%}" for column, share in stalls.items())
    return (f"timed on {r.get('date')} while the machine's speed moved by up to {drift:.2f}x within the row"
            + (f" (CPU stall share, worst round: {shown})" if shown else "") + ": redo with --redo on a steadier machine")


def _k(lat: dict) -> str:
    ks = sorted({r["schedrec"]["per_kernel"] for r in lat.values() if r.get("schedrec")})
    return " or ".join(map(str, ks)) or "k"


def latency_summary(lat: dict) -> str:
    """How many rows schedrec's output beats PyTorch on, and is within 1.5x of ONNX Runtime on."""
    both = [r for r in lat.values() if r.get("schedrec_ms") and r.get("pytorch_ms")]
    ort = [r for r in lat.values() if r.get("schedrec_ms") and r.get("onnxruntime_ms")]
    if not both:
        return "No row has schedrec's output yet."
    beats, near = _beats(both), _near_ort(ort)
    with_own = [r for r in both if r.get("tvm_tuned_ms")]
    own = sum(r["schedrec_ms"] < r["tvm_tuned_ms"] for r in with_own)
    text = (f"schedrec's output is faster than PyTorch eager on {beats} of {len(both)} models, within 1.5x of ONNX "
            f"Runtime on {near} of {len(ort)}, and faster than the model's own tuning records on {own} of "
            f"{len(with_own)}.")
    held = [r for r in both if r.get("kind") == "held-out"]
    if held:
        held_ort = [r for r in held if r.get("onnxruntime_ms")]
        text += (f" Held-out rows alone: faster than PyTorch on {_beats(held)} of {len(held)}, within 1.5x of ONNX "
                 f"Runtime on {_near_ort(held_ort)} of {len(held_ort)}.")
    ruled = {n: r["schedrec"]["flop_share_chosen_rule"] for n, r in lat.items()
             if "flop_share_chosen_rule" in (r.get("schedrec") or {})}
    if ruled:
        shares = ", ".join(f"{n} {100 * v:.0f}%" for n, v in sorted(ruled.items(), key=lambda kv: -kv[1]))
        text += (f" Share of the FLOPs whose chosen schedule a rule built (the conv, matmul and loop rules), on the "
                 f"{len(ruled)} rows searched since the runs recorded it: {shares}.")
    return text


def _beats(rows: list[dict]) -> int:
    """How many of the rows (each with both columns) have schedrec's output faster than PyTorch eager."""
    return sum(r["schedrec_ms"] < r["pytorch_ms"] for r in rows)


def _near_ort(rows: list[dict]) -> int:
    """How many of the rows (each with both columns) have schedrec's output within 1.5x of ONNX Runtime."""
    return sum(r["schedrec_ms"] <= 1.5 * r["onnxruntime_ms"] for r in rows)


def _measured_with(lat: dict, target: object) -> str:
    """Which target string and thread counts the latency columns used, from what each row recorded (rows
    timed before it was recorded: the script's fixed setting then, the folder's target and its cores)."""
    groups: dict[str, list[str]] = {}
    for name, r in lat.items():
        if "target" in r and "threads" in r:
            t = r["threads"]
            key = (f"TVM (all three columns) with target `{json.dumps(r['target'], sort_keys=True)}` and {t['tvm']} "
                   f"threads, PyTorch with {t['pytorch']} threads, ONNX Runtime with {t['onnxruntime']} intra-op "
                   f"threads, on {r.get('cpu', 'an unnamed CPU')}")
        else:
            cores = target.config.get("num-cores", "?")
            key = (f"TVM (both columns) with this folder's target `{json.dumps(target.config, sort_keys=True)}` and "
                   f"{cores} threads, PyTorch and ONNX Runtime with {cores} threads (the script's fixed setting when "
                   f"these rows were timed, before each row recorded its own)")
        groups.setdefault(key, []).append(name)
    if len(groups) == 1:
        return f"Measured with {next(iter(groups))}."
    return " ".join(f"{', '.join(names)}: {how}." for how, names in groups.items())


if __name__ == "__main__":
    run_script(main)
