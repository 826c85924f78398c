"""What a set of comparisons (compare.json, one per model) says about the pool and the ranker: each selector at
each budget (random as the median over its seeds), against exhaustive replay of the pool, and the geometric
means the goals are stated in. Pure functions of the JSON; the results pages print them.

Per model and budget k, `T(s, k)` is the model latency of selector s measuring its first k per kernel. The
ratios, geometric means over models: `T(random, k) / T(lgbm, k)` (> 1: the ranker beats random at the same
measurement count), `T(tiles-then-donors, k) / T(lgbm, k)` (against the fixed tiles first, then the donors by
the heuristic: what schedrec measured before one pool), and `T(fixed-tiles) / T(exhaustive)` (> 1: the pool
holds more than today's fixed tiles; the fixed tiles alone at their largest budget).
"""
from __future__ import annotations

import math
import re
import statistics

RANDOM = re.compile(r"^random(@\d+)?$")


def caveat_entry(text: str | None) -> dict:
    """A method's (or checkpoint's) `timing_caveat` entry where its timing got no clean run, else nothing:
    `cmp.add(..., **caveat_entry(text))`."""
    return {"timing_caveat": text} if text else {}
ROWS = ("lgbm", "tlp", "heuristic", "random", "tiles-then-donors", "donors", "fixed-tiles")


def _geomean(values: list[float]) -> float | None:
    values = [v for v in values if v and v > 0]
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else None


def by_selector(data: dict) -> dict[str, dict[int, dict]]:
    """selector -> budget -> {latency_s, measurements, search_s, seeds}; the random seeds folded into one row
    `random` (the median latency over seeds, with the median seed's measurements and search time)."""
    out: dict[str, dict[int, list[dict]]] = {}
    for m in data["methods"].values():
        if "budget" not in m or not m.get("latency_s"):
            continue
        kind = "random" if RANDOM.match(m["kind"]) else m["kind"]
        out.setdefault(kind, {}).setdefault(int(m["budget"]), []).append(m)
    folded: dict[str, dict[int, dict]] = {}
    for kind, budgets in out.items():
        for k, runs in budgets.items():
            runs = sorted(runs, key=lambda m: m["latency_s"])
            lat = statistics.median(m["latency_s"] for m in runs)
            pick = runs[(len(runs) - 1) // 2]  # the median run (the lower of two middle ones)
            folded.setdefault(kind, {})[k] = {"latency_s": lat, "measurements": pick.get("measurements"),
                                              "search_s": pick.get("search_s"), "seeds": len(runs),
                                              # a timing of it (a seed's, for random) got no clean run
                                              "caveat": any(m.get("timing_caveat") for m in runs)}
    return folded


def retimed(data: dict, retime: dict | None, stat: str = "median_s") -> dict:
    """`data` with each method's latency replaced by its median (`stat` "min_s": its fastest round) over the
    interleaved rounds of benchmarks/retime_compare.py (its database built once, every method timed once per
    round), where given."""
    if not retime:
        return data
    # a retimed latency is not the single timing that may have had no clean run: its caveat goes with it
    methods = {n: ({**{k: v for k, v in m.items() if k != "timing_caveat"}, "latency_s": retime["methods"][n][stat],
                    "first_latency_s": m.get("latency_s")} if n in retime["methods"] else m)
               for n, m in data["methods"].items()}
    return {**data, "methods": methods, "retimed_rounds": retime.get("rounds")}


def model_summary(data: dict, retime: dict | None = None, stat: str = "median_s") -> dict:
    """One model's figures: exhaustive replay, each selector by budget, Q against exhaustive, the ratios (the
    latencies of `retime`'s interleaved rounds where given: their median, or `stat`)."""
    data = retimed(data, retime, stat)
    m = data["methods"]
    ex = m.get("exhaustive") or {}
    sel = by_selector(data)
    ex_lat = ex.get("latency_s")
    out = {"model": data["model"], "target_key": data["target_key"], "date": data.get("date"),
           "retimed_rounds": data.get("retimed_rounds"),
           "pool": data.get("pool", {}), "exhaustive": {k: ex.get(k) for k in ("latency_s", "search_s", "measurements")},
           "selectors": sel, "baselines": {n: (m.get(n) or {}).get("latency_s")
                                            for n in ("untuned", "pytorch", "torch.compile", "onnxruntime")}}
    out["q"] = {kind: {k: round(ex_lat / v["latency_s"], 3) for k, v in ks.items()} if ex_lat else {}
                for kind, ks in sel.items()}
    fixed = sel.get("fixed-tiles", {})
    out["fixed_alone_s"] = fixed[max(fixed)]["latency_s"] if fixed else None
    scratch = m.get("metaschedule") or {}
    out["scratch"] = {k: scratch.get(k) for k in ("latency_s", "search_s", "cap_s")} if scratch else None
    out["time_to_match"] = data.get("time_to_match", {})
    # the methods whose model timing got no clean run (compare.run.timing_caveat), with their caveat
    out["timing_caveats"] = {n: v["timing_caveat"] for n, v in m.items() if v.get("timing_caveat")}
    return out


def ratio(summaries: list[dict], over: str, under: str, k: int) -> float | None:
    """Geometric mean over models of T(over, k) / T(under, k) (both measured at budget k)."""
    vals = [s["selectors"][over][k]["latency_s"] / s["selectors"][under][k]["latency_s"] for s in summaries
            if k in s["selectors"].get(over, {}) and k in s["selectors"].get(under, {})]
    return _geomean(vals)


def goals(summaries: list[dict], k: int = 2) -> dict:
    """The issue's goals, as measured: the pool's worth (fixed tiles alone over exhaustive), lgbm's Q and search
    share at k, and lgbm against random and against the fixed tiles then donors at k (geometric means)."""
    pool = _geomean([s["fixed_alone_s"] / s["exhaustive"]["latency_s"] for s in summaries
                     if s["fixed_alone_s"] and s["exhaustive"].get("latency_s")])
    q = [s["q"].get("lgbm", {}).get(k) for s in summaries]
    share = [s["selectors"]["lgbm"][k]["search_s"] / s["exhaustive"]["search_s"] for s in summaries
             if k in s["selectors"].get("lgbm", {}) and s["exhaustive"].get("search_s")]
    slower = [s["model"] for s in summaries if k in s["selectors"].get("lgbm", {}) and k in s["selectors"].get(
        "random", {}) and s["selectors"]["lgbm"][k]["latency_s"] > s["selectors"]["random"][k]["latency_s"]]
    return {"k": k, "models": [s["model"] for s in summaries],
            "fixed_alone_over_exhaustive": round(pool, 3) if pool else None,
            "lgbm_q": {s["model"]: v for s, v in zip(summaries, q)},
            "lgbm_search_share": round(max(share), 3) if share else None,
            "random_over_lgbm": _round(ratio(summaries, "random", "lgbm", k)),
            "tiles_then_donors_over_lgbm": _round(ratio(summaries, "tiles-then-donors", "lgbm", k)),
            "models_where_lgbm_is_slower_than_random": slower}


def _round(x: float | None) -> float | None:
    return round(x, 3) if x else None


def _ms(s: float | None) -> str:
    return f"{s * 1e3:.2f}" if s else "-"


MARK = " (!)"  # a latency whose timing got no clean run: its caveat is under the table


def _mark(flag: object) -> str:
    return MARK if flag else ""


def budget_table(summaries: list[dict]) -> str:
    """Markdown: one row per model and selector, one column per budget (latency ms / measurements), beside
    exhaustive replay of the pool and the baselines outside TVM."""
    budgets = sorted({k for s in summaries for ks in s["selectors"].values() for k in ks})
    head = ["model", "selector"] + [f"k={k}: ms (Q, measurements)" for k in budgets]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for s in summaries:
        ex, caveats = s["exhaustive"], s.get("timing_caveats", {})
        lines.append(f"| {s['model']} | exhaustive (whole pool) | " + " | ".join(
            [f"{_ms(ex.get('latency_s'))}{_mark('exhaustive' in caveats)} (1, {ex.get('measurements', '-')}; "
             f"search {ex.get('search_s') or 0:.0f} s)"]
            + [""] * (len(budgets) - 1)) + " |")
        for kind in [r for r in ROWS if r in s["selectors"]]:
            cells = []
            for k in budgets:
                v = s["selectors"][kind].get(k)
                q = s["q"].get(kind, {}).get(k)
                lat = _ms(v["latency_s"]) + _mark(v.get("caveat")) if v else "-"
                cells.append(f"{lat} ({q:.2f}, {v['measurements']})" if v and q else lat)
            name = f"random (median of {max(v['seeds'] for v in s['selectors'][kind].values())} seeds)" \
                if kind == "random" else kind
            lines.append(f"| {s['model']} | {name} | " + " | ".join(cells) + " |")
        sc = s.get("scratch") or {}
        if sc.get("latency_s"):
            ttm = s["time_to_match"].get("lgbm-k2")
            match = (f"; to match lgbm k=2: {'> ' if ttm['censored'] else ''}{ttm['ratio']}x its search time"
                     if ttm else "")
            lines.append(f"| {s['model']} | MetaSchedule from scratch | {_ms(sc['latency_s'])}"
                         f"{_mark('metaschedule' in caveats)} after {sc['search_s']:.0f} "
                         f"s (cap {sc.get('cap_s') or 0:.0f} s{match}) |" + " |" * (len(budgets) - 1))
        base = ", ".join(f"{n} {_ms(v)} ms{_mark(n in caveats)}" for n, v in s["baselines"].items() if v)
        if base:
            lines.append(f"| {s['model']} | outside any search | {base} |" + " |" * (len(budgets) - 1))
    notes = [f"- {s['model']} {name}: {text}" for s in summaries
             for name, text in s.get("timing_caveats", {}).items()]
    if notes:
        lines += ["", f"{MARK.strip()}: timed with no clean run, kept with its caveat:", *notes]
    return "\n".join(lines) + "\n"
