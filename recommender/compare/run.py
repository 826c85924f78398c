"""`schedrec compare`: every way to get a fast model, side by side in one run, with the same measurer.

One model import and one candidate replay feed every selector. Each kernel's default is measured once; for each
budget k, each selector's first k candidates are measured in one call, as a budgeted run of k measures them
(builds in parallel, then timings; the picks of a smaller budget are measured again), so the search time of
budget k is the replay, the ranking, the defaults and that call. For each method the chosen schedules become a database, and the whole model is compiled and timed
with it in this process, beside the untuned model, exhaustive replay, the long-tuning reference,
MetaSchedule from scratch (checkpointed) and what users run instead: PyTorch eager and ONNX Runtime.
Results go to compare.json (rewritten after each method), compare.md and compare.png.
"""
from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from ..bank.store import bank_models, read_meta, unpack
from ..core.errors import SchedrecError
from ..core.fileio import atomic_write_json, atomic_write_text, display_path, read_json
from ..frontend.model_import import split_spec
from ..measure import MeasureSettings, Measurer
from ..target.spec import TargetSpec
from ..transfer.choice import KernelChoice
from ..transfer.database import write_database
from ..transfer.kernel import FoundCandidates, choose, find_candidates
from ..transfer.run import ModelRun, open_model_measured
from ..transfer.selection import KernelCandidates, Selector, ranked
from ..transfer.short_tune import trials_per_kernel
from .summary import caveat_entry

UNTUNED_TIMING = MeasureSettings(repeat=3, min_repeat_ms=0)  # plain loops: seconds per inference on big models
MODEL_TIMING = MeasureSettings(repeat=7, min_repeat_ms=200)


@dataclass
class Measured:
    """One candidate measured during the comparison."""

    index: int  # into the kernel's found candidates
    result: object  # MeasureResult


@dataclass
class KernelRun:
    """A kernel's default measurement and each selector's measurements, in the order they were made."""

    found: FoundCandidates
    default: object | None = None  # MeasureResult
    default_wall_s: float = 0.0
    # selector -> [(measured, wall seconds, k)] by rising k: one call measured the selector's first k candidates
    # (fewer where its order ends; a larger budget whose first k are the same gets no call of its own)
    steps: dict[str, list[tuple[list[Measured], float, int]]] = field(default_factory=dict)

    def known(self) -> dict[int, tuple[object, float]]:
        """Every candidate some selector measured: index -> (its first result, its share of that step's wall)."""
        out: dict[int, tuple[object, float]] = {}
        for steps in self.steps.values():
            for measured, wall, _ in steps:
                for m in measured:
                    out.setdefault(m.index, (m.result, wall / len(measured)))
        return out

    def first(self, selector: str, k: int) -> tuple[list[Measured], float]:
        """What a budget of k measured for `selector` and the wall time its call took."""
        out: tuple[list[Measured], float] = ([], 0.0)
        for measured, wall, planned in self.steps.get(selector, []):
            if planned > k:
                break
            out = (measured, wall)
        return out


def _choice(run: KernelRun, measured: list[Measured], target: object) -> KernelChoice:
    """The choice among the default and `measured`: the fastest valid, never worse than the default."""
    return choose(run.found, run.default, {m.index: m.result for m in measured}, target,
                  measured_default=run.default is not None)


def _orders(mr: ModelRun, found: dict[str, FoundCandidates], selector: Selector) -> dict[str, list[int]]:
    out = {}
    for k in mr.kernels:
        f = found[k.name]
        rows = tuple(f.replayed_rows(mr.model.name))
        out[k.name] = [f.valid[i] for i in ranked(selector, KernelCandidates((mr.model.name, k.name), rows, k.weight))]
    return out


class Comparison:
    """Collects the methods' results and writes them after each one (a killed run keeps what it has)."""

    def __init__(self, out_dir: Path, header: dict) -> None:
        self.out_dir = out_dir
        self.path = out_dir / "compare.json"
        old = read_json(self.path) if self.path.exists() else {}
        self.data = {**header, "methods": old.get("methods", {}) if old.get("spec") == header["spec"] else {}}
        # the saved run's setup (other than its date): a rerun of the same one may finish it instead of measuring
        self.same_setup = bool(old) and all(old.get(k) == v for k, v in header.items() if k != "date")

    def has(self, name: str) -> bool:
        return name in self.data["methods"]

    def add(self, name: str, **entry: object) -> None:
        self.data["methods"][name] = entry
        atomic_write_json(str(self.path), self.data)


def saved_ranker_hashes(recommender_dir: Path, selectors: tuple[str, ...]) -> dict[str, str]:
    """The training-data hash of each saved ranker among `selectors` (which rankers a comparison ran with)."""
    out = {}
    for name in selectors:
        meta = Path(recommender_dir) / "rankers" / name / "meta.json"
        if meta.exists():
            out[name] = read_json(meta).get("data_hash", "")
    return out


def compare(spec: str, target: TargetSpec, bank_dir: Path, recommender_dir: Path, out_dir: Path,
            budgets: tuple[int, ...] = (1, 2, 3, 5), selectors: tuple[str, ...] = ("lgbm", "random"),
            top_n: int = 3, cap: int | None = 48, exclude_models: tuple[str, ...] = (),
            exhaustive: str = "auto", scratch_cap_s: float | None = None, scratch_factor: float = 10.0,
            scratch_first_trials: int = 8, scratch_population: int = 512, refine_s: float = 0.0,
            settings: MeasureSettings | None = None, fallback_samples: int = 4, tune_missing: int = 0,
            baselines: bool = True, rule_space: int = 32, log=None) -> dict:
    """Run every method on one model and write compare.json / .md / .png under `out_dir`; returns the data.
    A rerun of the same setup whose saved run has every method up to MetaSchedule from scratch only adds what
    follows (`finish_stopped`: the baselines, table and plot); any other rerun measures every method again.

    exhaustive: "shipped" (choose from the rows of the shipped exhaustive replay of this model, time the model
    here, take its recorded search time), "measure" (measure every remaining candidate now), "auto" (shipped
    if there is one), "skip". MetaSchedule from scratch runs until it matches the best budgeted latency or
    spends `scratch_cap_s` (default: `scratch_factor` x the search time of lgbm at k=3); 0 skips it.
    A kernel without a donor that replays gets the best records of a `tune_missing`-trial search of its design
    space if it holds 1% of the FLOPs or more (`transfer.short_tune`), else `fallback_samples` design-space
    samples, as candidates (budgeted methods only: the shipped exhaustive replay had none).
    """
    from ..transfer.recommend import load_selector
    log = log or (lambda m: print(m, file=sys.stderr))
    from tqdm import tqdm
    # a bad model or bank: nothing written
    measurer, mr = open_model_measured(spec, target, bank_dir, exclude_models, settings)
    out_dir.mkdir(parents=True, exist_ok=True)
    name = mr.model.name
    budgets = tuple(sorted(set(budgets)))
    cmp = Comparison(out_dir, {"model": name, "spec": spec, "target_key": target.key, "target": target.config,
                               "threads": int(target.config.get("num-cores", 1)), "bank": display_path(bank_dir),
                               "bank_models": mr.index.models, "excluded_models": list(mr.exclude),
                               "recommender": display_path(recommender_dir),
                               "rankers": saved_ranker_hashes(recommender_dir, selectors), "budgets": list(budgets),
                               "pool": {"top_n": top_n, "cap": cap, "fallback_samples": fallback_samples,
                                        "tune_missing": tune_missing, "rule_space": rule_space},
                               "date": time.strftime("%Y-%m-%d")})
    measured = [f"{s}-k{k}" for s in selectors for k in budgets] + ["untuned"] + (
        ["exhaustive"] if exhaustive != "skip" else []) + (["metaschedule"] if scratch_cap_s != 0 else []) + (
        ["lgbm-k3+refine"] if refine_s > 0 and "lgbm" in selectors and 3 in budgets else [])
    if cmp.same_setup and all(cmp.has(m) for m in measured):
        measurer.close()
        log(f"{display_path(out_dir / 'compare.json')} holds every measured method of this setup: finishing it")
        return finish_stopped(out_dir, baselines=baselines, log=log)
    with measurer:
        t0 = time.perf_counter()
        trials = trials_per_kernel(mr.kernels, tune_missing)
        found = {k.name: find_candidates(k, mr.index, measurer, mr.tvm_target, top_n, mr.exclude, cap,
                                         samples=fallback_samples, tune_trials=trials[k.name],
                                         rule_space=rule_space)
                 for k in tqdm(mr.kernels, desc=f"candidates {name}", unit="kernel", file=sys.stderr)}
        replay_s = time.perf_counter() - t0
        runs = {k.name: KernelRun(found[k.name]) for k in mr.kernels}
        rank_s, orders = {}, {}
        for sel_name in selectors:
            selector = load_selector(sel_name, recommender_dir, bank_dir, target_key=target.key)
            t1 = time.perf_counter()
            orders[sel_name] = _orders(mr, found, selector)
            rank_s[sel_name] = time.perf_counter() - t1
        # kernel by kernel: its default (the reference's build, kept by the measurer, and its outputs, kept by
        # the timing worker, for every check of the kernel's candidates: what a budgeted run's one call shares
        # too), then each selector's steps
        for k in tqdm(mr.kernels, desc="measure", unit="kernel", file=sys.stderr):
            if not found[k.name].valid:
                continue
            t1 = time.perf_counter()
            (runs[k.name].default,) = measurer.measure([k.mod], reference=k.mod)
            runs[k.name].default_wall_s = time.perf_counter() - t1
            for sel_name in selectors:
                order, done = orders[sel_name][k.name], 0
                runs[k.name].steps[sel_name] = []
                for b in budgets:
                    idx = order[:b]
                    if len(idx) == done:  # the order ended: a larger budget measures what a smaller one did
                        continue
                    done = len(idx)
                    t1 = time.perf_counter()  # a failed candidate spends its measurement: no replacement
                    results = measurer.measure([found[k.name].candidates[i].replayed.to_build for i in idx],
                                               reference=k.mod)
                    runs[k.name].steps[sel_name].append(([Measured(i, r) for i, r in zip(idx, results)],
                                                         time.perf_counter() - t1, b))
        defaults_s = sum(r.default_wall_s for r in runs.values())
        common = {"replay_s": round(replay_s, 2), "defaults_s": round(defaults_s, 2)}
        for sel_name in selectors:
            for k in budgets:
                choices, wall = [], 0.0
                for kern in mr.kernels:
                    measured, w = runs[kern.name].first(sel_name, k)
                    wall += w
                    choices.append(_choice(runs[kern.name], measured, mr.tvm_target))
                search = replay_s + rank_s[sel_name] + defaults_s + wall
                lat, caveat = _time_with(choices, mr, measurer, out_dir / "db" / f"{sel_name}-k{k}")
                cmp.add(f"{sel_name}-k{k}", kind=sel_name, budget=k, latency_s=lat, search_s=round(search, 2),
                        rank_s=round(rank_s[sel_name], 3), measure_s=round(wall, 2), **common,
                        measurements=sum(len(runs[kern.name].first(sel_name, k)[0]) for kern in mr.kernels),
                        **caveat)
                log(f"{sel_name} k={k}: {lat * 1e3 if lat else float('nan'):.2f} ms, search {search:.0f} s")
        _exhaustive(cmp, exhaustive, mr, runs, measurer, out_dir, recommender_dir, rule_space, log)
        untuned = measurer.measure_model(mr.model.mod, _inputs(mr), settings=UNTUNED_TIMING)
        cmp.add("untuned", kind="untuned", latency_s=untuned.median if untuned.ok else None, search_s=0.0,
                **timing_caveat(untuned))
        _reference(cmp, mr, measurer, recommender_dir)
        best_budgeted = [m for m in cmp.data["methods"].values() if m.get("kind") == "lgbm" and m.get("latency_s")]
        if scratch_cap_s is None:  # enough to tell whether it needs `scratch_factor` x our time at k=3
            at = next((m for m in best_budgeted if m["budget"] == 3), None) or max(
                best_budgeted, key=lambda m: m["budget"], default=None)
            scratch_cap_s = scratch_factor * at["search_s"] if at else 0.0
        if scratch_cap_s > 0:
            from .scratch import tune_from_scratch
            goal = min((m["latency_s"] for m in best_budgeted), default=None)
            curve = tune_from_scratch(mr, measurer, out_dir / "scratch", scratch_cap_s, goal, log,
                                      first_trials_per_task=scratch_first_trials,
                                      population_size=scratch_population)
            cmp.add("metaschedule", kind="scratch", curve=curve, cap_s=round(scratch_cap_s, 1),
                    latency_s=curve[-1]["latency_s"] if curve else None,
                    search_s=curve[-1]["search_s"] if curve else None,
                    **caveat_entry(curve[-1].get("timing_caveat") if curve else None))
        if refine_s > 0 and "lgbm-k3" in cmp.data["methods"]:
            _refine(cmp, mr, measurer, out_dir, refine_s, log)
    if baselines:
        _baselines(cmp, mr.spec, mr.target, mr.model.name, log)
    return _write(cmp, out_dir)


def _write(cmp: Comparison, out_dir: Path) -> dict:
    data = cmp.data
    data["time_to_match"] = time_to_match(data["methods"])
    atomic_write_json(str(cmp.path), data)
    atomic_write_text(str(out_dir / "compare.md"), format_compare(data))
    plot_compare(data, out_dir / "compare.png")
    return data


def finish_stopped(out_dir: Path, baselines: bool = True, log=None) -> dict:
    """Complete a comparison stopped during MetaSchedule from scratch, measuring nothing else again: the
    checkpoints it saved become its `metaschedule` method (marked stopped before its cap), then the
    baselines, time-to-match, table and plot."""
    from ..target.spec import TargetSpec
    log = log or (lambda m: print(m, file=sys.stderr))
    data = read_json(out_dir / "compare.json")
    cmp = Comparison(out_dir, {k: v for k, v in data.items() if k not in ("methods", "time_to_match")})
    saved = read_json(out_dir / "scratch" / "checkpoints.json") if (out_dir / "scratch" / "checkpoints.json").exists() else {}
    curve = saved.get("curve") or []
    if curve and not cmp.has("metaschedule"):
        cmp.add("metaschedule", kind="scratch", curve=curve, cap_s=saved.get("cap_s"), stopped_early=True,
                latency_s=curve[-1]["latency_s"], search_s=curve[-1]["search_s"])
    if baselines and not cmp.has("pytorch") and not cmp.has("onnxruntime"):
        _baselines(cmp, data["spec"], TargetSpec(data["target"]), data["model"], log)
    return _write(cmp, out_dir)


def _refine(cmp: Comparison, mr: ModelRun, measurer: Measurer, out_dir: Path, refine_s: float, log) -> None:
    """Transfer + refine: MetaSchedule's search seeded with lgbm k=3's schedules for `refine_s` more seconds;
    beside it, what MetaSchedule from scratch had reached at the same total time (if it ran that long)."""
    from .scratch import tune_from_scratch
    base = cmp.data["methods"]["lgbm-k3"]
    try:
        curve = tune_from_scratch(mr, measurer, out_dir / "refine", refine_s, None, log, first_trials_per_task=4,
                                  seed_db=out_dir / "db" / "lgbm-k3")
    except (KeyboardInterrupt, SchedrecError):
        raise
    except Exception as err:  # MetaSchedule's search failing on a seed: the other methods stand, the error is kept
        message = (str(err).strip().splitlines() or [type(err).__name__])[0][:300]
        log(f"warning: transfer + refine failed, the other methods are kept: {type(err).__name__}: {message}")
        cmp.add("lgbm-k3+refine", kind="refine", latency_s=None, search_s=None, error=message)
        return
    if not curve:
        return
    total = base["search_s"] + curve[-1]["search_s"]
    scratch = (cmp.data["methods"].get("metaschedule") or {}).get("curve") or []
    at_same = [p for p in scratch if p["search_s"] <= total and p["latency_s"]]
    cmp.add("lgbm-k3+refine", kind="refine", latency_s=curve[-1]["latency_s"], search_s=round(total, 1),
            refine_s=curve[-1]["search_s"], trials=curve[-1]["trials"],
            scratch_latency_at_same_time_s=at_same[-1]["latency_s"] if at_same else None,
            **caveat_entry(curve[-1].get("timing_caveat")))


def _inputs(mr: ModelRun) -> list:
    return list(zip(mr.model.input_shapes, mr.model.input_dtypes))


def timing_caveat(result: object) -> dict:
    """A method's entry's `timing_caveat` where its model timing got no clean run (every try stalled by another
    process: measurer._timed), else nothing: `cmp.add(..., **timing_caveat(r))`."""
    return caveat_entry(result.caveat if result.ok else None)


def _time_with(choices: list[KernelChoice], mr: ModelRun, measurer: Measurer, db_dir: Path
               ) -> tuple[float | None, dict]:
    """The model timed with the choices' database: (median seconds or None, its `timing_caveat` entry)."""
    write_database(choices, mr.tvm_target, db_dir)
    r = measurer.measure_model(mr.model.mod, _inputs(mr), database_dir=str(db_dir), settings=MODEL_TIMING)
    return (r.median if r.ok else None), timing_caveat(r)


def _exhaustive(cmp: Comparison, how: str, mr: ModelRun, runs: dict[str, KernelRun], measurer: Measurer,
                out_dir: Path, target_dir: Path, rule_space: int, log) -> None:
    """Exhaustive replay of the pool: measured here, or (`how` shipped, or auto where the shipped replay's pool
    had the same rule space) the shipped replay's choices timed here with its recorded search time."""
    from ..core.row_files import read_rows
    from ..transfer.choice import choice_from_rows
    shipped = target_dir / "heldout" / mr.model.name
    if how == "skip":
        return
    report = read_json(shipped / "report.json") if (shipped / "report.json").exists() else {}
    same_pool = report.get("rule_space", 0) == rule_space
    if (how == "shipped" or (how == "auto" and same_pool)) and (shipped / "candidates.jsonl.gz").exists():
        rows: dict[str, list] = {}
        for r in read_rows(shipped / "candidates.jsonl.gz"):
            rows.setdefault(r.target_kernel, []).append(r)
        choices = [choice_from_rows(k, rows[k.name], mr.tvm_target) for k in mr.kernels if k.name in rows]
        lat, caveat = _time_with(choices, mr, measurer, out_dir / "db" / "exhaustive")
        t = report["totals"]
        cmp.add("exhaustive", kind="exhaustive", latency_s=lat, search_s=t["search_s"],
                measurements=t["valid"], source=f"search time and choices from {display_path(shipped)} "
                                                f"(pool top-n {report['top_n']}, cap {report['cap']}, rule space "
                                                f"{report.get('rule_space', 0)}); latency timed here", **caveat)
        log(f"exhaustive (shipped choices): {lat * 1e3 if lat else float('nan'):.2f} ms")
        return
    if how == "shipped":
        raise FileNotFoundError(f"no shipped exhaustive replay of {mr.model.name} in {display_path(shipped)}")
    # every candidate of the pool: those the selectors measured in this run are reused (their share of the
    # measuring wall counted in the search time), the others measured now
    choices, search, measured = [], sum(r.found.replay_s + r.default_wall_s for r in runs.values()), 0
    for run in runs.values():
        known = run.known()
        rest = [i for i in run.found.valid if i not in known]
        t0 = time.perf_counter()
        results = (measurer.measure([run.found.candidates[i].replayed.to_build for i in rest], reference=run.found.kernel.mod)
                   if rest and run.default is not None else [])
        search += time.perf_counter() - t0 + sum(known[i][1] for i in run.found.valid if i in known)
        by_index = {i: known[i][0] for i in run.found.valid if i in known} | dict(zip(rest, results))
        measured += len(by_index)
        choices.append(_choice(run, [Measured(i, r) for i, r in by_index.items()], mr.tvm_target))
    lat, caveat = _time_with(choices, mr, measurer, out_dir / "db" / "exhaustive")
    cmp.add("exhaustive", kind="exhaustive", latency_s=lat, search_s=round(search, 2), measurements=measured,
            source="measured in this run (the candidates a selector measured reused, with their share of its "
                   "measuring time)", **caveat)


def _reference(cmp: Comparison, mr: ModelRun, measurer: Measurer, target_dir: Path) -> None:
    """The long-tuning reference of this model (models/<key>/reference/<model>), if there is one."""
    import tempfile

    ref_dir = target_dir / "reference"
    folder = next((f for f in bank_models(ref_dir) if f.name == mr.model.name), None) if ref_dir.is_dir() else None
    if folder is None:
        return
    meta = read_meta(folder)
    with tempfile.TemporaryDirectory() as scratch:
        unpack(folder, scratch)
        r = measurer.measure_model(mr.model.mod, _inputs(mr), database_dir=scratch, settings=MODEL_TIMING)
    hours = sum(float(k.get("seconds", 0.0)) for k in meta.get("kernels", {}).values()) / 3600
    cmp.add("reference", kind="reference", latency_s=r.median if r.ok else None, search_s=round(hours * 3600, 1),
            trials_per_task=meta.get("trials_per_task"), source=display_path(folder), **timing_caveat(r))


def _baselines(cmp: Comparison, spec: str, target: TargetSpec, model_name: str, log) -> None:
    latencies, caveats = time_baselines(spec, target, model_name, log)
    for name, lat in latencies.items():
        cmp.add(name, kind=name, latency_s=lat, search_s=0.0,
                **caveat_entry(caveats.get(name)))


def time_baselines(spec: str, target: TargetSpec, model_name: str,
                   log=None) -> tuple[dict[str, float], dict[str, str]]:
    """Median seconds of PyTorch eager and `torch.compile` (zoo models) and ONNX Runtime (zoo models exported
    here, or the given .onnx file), with the target's thread count, and the caveat of each whose timing got no
    clean run (baselines.Costs); a baseline that cannot run is reported, not fatal."""
    from .baselines import median, time_onnxruntime, time_pytorch, time_torch_compile
    log = log or (lambda m: print(m, file=sys.stderr))
    threads = int(target.config.get("num-cores", 1))
    timed: dict[str, list[float]] = {}  # baselines.Costs: each with its caveat
    out, caveats = {}, {}
    try:
        if spec.startswith("zoo:"):
            from ..frontend.zoo import build_zoo_model
            model, args = build_zoo_model(spec[4:])
            timed["pytorch"] = time_pytorch(model, args, threads)
            timed["onnxruntime"] = time_onnxruntime(model, args, threads)
            try:
                timed["torch.compile"] = time_torch_compile(model, args, threads)
            except Exception as err:  # Inductor needs a C++ compiler; eager and ONNX Runtime stand without it
                log(f"warning: {model_name}: torch.compile failed: {type(err).__name__}: "
                    f"{(str(err).splitlines() or [''])[0][:200]}")
        elif split_spec(spec)[0].lower().endswith(".onnx"):
            timed["onnxruntime"] = _time_onnx_file(spec, threads)
    except Exception as err:
        log(f"warning: {model_name}: a baseline failed: {type(err).__name__}: "
            f"{str(err).splitlines()[0] if str(err) else ''}")
    for name, costs in timed.items():
        out[name] = median(costs)
        if getattr(costs, "caveat", None):
            caveats[name] = costs.caveat
    return out, caveats


def _time_onnx_file(spec: str, threads: int) -> list[float]:
    """ONNX Runtime on the file of an ONNX spec, with the input shapes the spec binds (as schedrec imports it)."""
    import numpy as np
    import onnxruntime as ort

    from ..frontend.model_import import load_onnx, onnx_input_shapes
    from .baselines import _median_of_repeats
    path, bound = split_spec(spec)
    shapes = onnx_input_shapes(load_onnx(path), bound, path, log=lambda m: None)
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    sess = ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(0)
    types = {"tensor(float)": "float32", "tensor(int64)": "int64", "tensor(int32)": "int32"}
    feeds = {}
    for i in sess.get_inputs():
        dtype, shape = types.get(i.type, "float32"), shapes[i.name]
        feeds[i.name] = (rng.standard_normal(shape).astype(dtype) if dtype.startswith("float")
                         else np.zeros(shape, dtype=dtype))
    return _median_of_repeats(lambda: sess.run(None, feeds), 5, 0.2)


def time_to_match(methods: dict) -> dict:
    """For each searched method: MetaSchedule-from-scratch time until its model latency is at or below the
    method's, divided by the method's search time; ">x" where the scratch run stopped first (censored)."""
    scratch = methods.get("metaschedule")
    if not scratch or not scratch.get("curve"):
        return {}
    curve = scratch["curve"]
    out = {}
    for name, m in methods.items():
        if ("budget" not in m and m.get("kind") not in ("exhaustive", "refine")) or not m.get("latency_s"):
            continue
        hit = next((p for p in curve if p["latency_s"] and p["latency_s"] <= m["latency_s"]), None)
        if hit is not None:
            out[name] = {"ratio": round(hit["search_s"] / m["search_s"], 2), "censored": False,
                         "scratch_s": hit["search_s"]}
        else:
            out[name] = {"ratio": round(curve[-1]["search_s"] / m["search_s"], 2), "censored": True,
                         "scratch_s": curve[-1]["search_s"]}
    return out


def format_compare(data: dict) -> str:
    """The comparison as a Markdown table (latency, quality against exhaustive replay and the reference,
    search time, time-to-match)."""
    methods = data["methods"]
    ex = (methods.get("exhaustive") or {}).get("latency_s")
    ref = (methods.get("reference") or {}).get("latency_s")
    ttm = data.get("time_to_match", {})
    lines = [f"### {data['model']} on {data['target_key']} ({data['threads']} threads), {data['date']}", "",
             "| method | latency ms | Q vs exhaustive | Qmax vs reference | search s | measurements | scratch to match |",
             "|---|---|---|---|---|---|---|"]
    for name, m in methods.items():
        lat = m.get("latency_s")
        q = f"{ex / lat:.3f}" if ex and lat else "-"
        qm = f"{ref / lat:.3f}" if ref and lat else "-"
        t = ttm.get(name)
        match = "-" if not t else (f"> {t['ratio']}x" if t["censored"] else f"{t['ratio']}x")
        search = m.get("search_s")
        mark = " (!)" if m.get("timing_caveat") else ""  # its timing got no clean run: the line under the table
        lines.append(f"| {name} | {lat * 1e3:.2f}{mark} | {q} | {qm} | {search if search is not None else '-'} | "
                     f"{m.get('measurements', '-')} | {match} |" if lat else
                     f"| {name} | failed | - | - | - | - | - |")
    caveats = [f"- (!) {name}: {m['timing_caveat']}" for name, m in methods.items()
               if m.get("timing_caveat") and m.get("latency_s")]
    if caveats:
        lines += ["", "Timings that got no clean run, kept with their caveat (retime them on a quiet machine: "
                      "benchmarks/retime_compare.py):", *caveats]
    return "\n".join(lines) + "\n"


def plot_compare(data: dict, path: Path) -> None:
    """Model latency against search time (log x): a curve per selector over budgets, the MetaSchedule
    checkpoints, points for exhaustive replay and the reference, lines for untuned, PyTorch and ONNX Runtime."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    methods = data["methods"]
    fig, ax = plt.subplots(figsize=(7, 4.5))
    kinds = list(dict.fromkeys(m["kind"] for m in methods.values() if "budget" in m))  # the budgeted selectors
    styles = ("o-", "s--", "^-", "v--", "<:", ">-.", "d--", "p-", "h:")
    for kind, style in zip(kinds, styles):
        pts = sorted((m["search_s"], m["latency_s"] * 1e3, m["budget"]) for m in methods.values()
                     if m.get("kind") == kind and m.get("latency_s"))
        if pts:
            ax.plot([p[0] for p in pts], [p[1] for p in pts], style, label=f"{kind} top-k (k={','.join(str(p[2]) for p in pts)})")
    scratch = methods.get("metaschedule")
    if scratch and scratch.get("curve"):
        c = [p for p in scratch["curve"] if p["latency_s"]]
        ax.plot([p["search_s"] for p in c], [p["latency_s"] * 1e3 for p in c], "x:", label="MetaSchedule from scratch")
    for name, marker in (("exhaustive", "D"), ("reference", "*"), ("lgbm-k3+refine", "P")):
        m = methods.get(name)
        if m and m.get("latency_s") and m.get("search_s"):
            ax.plot([m["search_s"]], [m["latency_s"] * 1e3], marker, markersize=9, label=name)
    for name, ls in (("pytorch", "-."), ("torch.compile", "--"), ("onnxruntime", ":")):
        m = methods.get(name)
        if m and m.get("latency_s"):
            ax.axhline(m["latency_s"] * 1e3, linestyle=ls, color="gray", label=name)
    ax.set_xscale("log")
    ax.set_yscale("log")
    from matplotlib.ticker import NullFormatter
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_xlabel("search time, s (log)")
    ax.set_ylabel("model latency, ms (log)")
    ax.set_title(f"{data['model']} on {data['target_key']}, {data['threads']} threads")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)

