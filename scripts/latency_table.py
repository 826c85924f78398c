"""For every bank and reference model of a target, time the same input with untuned TVM, tuned TVM (the
model's own best records in the bank), schedrec's output, PyTorch eager and ONNX Runtime, in one run. Writes
models/<target-key>/latency.json (resumable: models already in it are skipped unless --redo).

schedrec's output is what a user gets for the model as if it were new: budgeted transfer at --k candidates
per kernel from the bank's other models, ranked by lgbm fitted without the model (leave one model out; on
a CPU whose matrix lacks the model, fitted on the nearest target's matrix that has it; models in no matrix use
the shipped ranker), with design-space samples where no donor replays. Its
runs live in models/<target-key>/latency/<model>/ (resumable; a finished one is reused and only re-timed; its
database is rebuilt from the committed rows where it is missing).

Held-out zoo models (in neither the bank nor the references, e.g. --heldout resnet50,convnext_tiny) get rows of
their own: no own-records column, schedrec's transfer from the whole bank, ranked by the target's shipped lgbm.

Usage: python scripts/latency_table.py [--target native] [--models resnet18,...] [--heldout resnet50,...] [--redo]
       [--fresh] [--k 2]
Keep the machine otherwise idle while it runs. Tuned TVM, schedrec, PyTorch and ONNX Runtime are timed side by
side: 3 rounds, each timing every column (3 repeats of at least 200 ms), the order rotated between rounds; a
column's figure is the median of its 9 repeats, and the row keeps each round's median (round_medians_ms), so
that the machine's drift during the row is visible. Untuned TVM (plain loops, seconds per inference on big
models), timed once before the rounds: median of 3 single runs.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from recommender.cli.options import RULE_SPACE
from recommender.bank.store import bank_models, read_meta, unpack
from recommender.target.folders import repo_models_dir
from recommender.compare.baselines import interleaved, median, onnxruntime_timer, pytorch_timer, worst_stalls
from recommender.core.errors import SchedrecError, run_script
from recommender.core.fileio import atomic_write_json, display_path, read_json
from recommender.measure import MeasureSettings, Measurer
from recommender.frontend.model_import import import_model
from recommender.target.spec import cpu_name, parse_target
from recommender.frontend.zoo import ZOO, build_zoo_model


ROUNDS, REPEAT, MIN_REPEAT_S = 3, 3, 0.2  # every timed column: rounds x repeats of at least 200 ms
COLUMNS = {"tuned": "tvm_tuned_ms", "schedrec": "schedrec_ms", "pytorch": "pytorch_ms",
           "onnxruntime": "onnxruntime_ms"}  # timed column -> its key in a row


def tvm_timer(measurer: Measurer, library: str, inputs: list) -> Callable[[], list[float]]:
    """A timer of a built TVM model library in the measurer's timing worker (seconds per repeat); a failed
    run raises, with the worker's error."""
    def timer() -> list[float]:
        r = measurer.time_model_library(library, inputs)
        if not r.ok:
            raise SchedrecError(f"timing {library}: {r.status}: {r.error[:300]}")
        return r.costs
    return timer


def seconds_timer(timer: Callable[[int, float], list[float]]) -> Callable[[], list[float]]:
    return lambda: timer(REPEAT, MIN_REPEAT_S)


class Recommenders:
    """Per model, the selector schedrec would use for it if it were new: lgbm fitted on the target's matrix
    without the model; where the target's matrix lacks the model (a CPU whose matrix is not measured yet),
    fitted without it on the nearest target's matrix that has it (recommender/target/folders.py); else the shipped
    ranker. Each matrix and featurizer is read once, at the first model that needs it."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.data: dict[Path, object] = {}

    def matrix_for(self, name: str) -> Path | None:
        """The target folder whose matrix serves `name`: this target's, else the nearest one with the model."""
        from recommender.target.folders import distance
        have = [d for d in self.root.parent.iterdir()
                if (d / "transfer" / f"{name}.jsonl.gz").exists() and (d / "bank").is_dir()]
        # the target itself is at distance zero from itself: its own matrix wins wherever it has the model
        return min(have, key=lambda d: distance(self.root.name, d.name)) if have else None

    def for_model(self, name: str):
        from recommender.transfer.recommend import load_selector
        source = self.matrix_for(name)
        if source is None:
            from recommender.target.folders import resolve
            folder = resolve(self.root.parent, self.root.name, "rankers")[0]
            selector = load_selector("lgbm", folder, self.root / "bank")
            if folder.name != self.root.name:  # this target has no rankers yet: the row says whose it used
                selector.name += f" shipped for {folder.name} (the nearest target with rankers)"
            return selector
        from recommender.transfer.recommend import leave_out_selector
        from training.train import TargetData
        if source not in self.data:
            self.data[source] = TargetData(source, log=lambda m: print(m, file=sys.stderr, flush=True))
        selector = leave_out_selector(self.data[source], name)
        if source != self.root:
            selector.name += f" on {source.name}'s matrix"
        return selector


def schedrec_output(name: str, spec: str, target, root: Path, k: int, cap: int, tune_missing: int,
                    recommenders: Recommenders, settings: MeasureSettings, fresh: bool = False) -> tuple[Path, dict]:
    """Budgeted transfer of `name` from the bank's other models (a finished run is reused unless `fresh`):
    its database folder and report."""
    from recommender.transfer.budgeted import budgeted_transfer
    out_dir = root / "latency" / name
    run_file, report_file = out_dir / "run.json", out_dir / "report.json"
    run = read_json(run_file) if run_file.exists() else None
    if run is not None and (fresh or (run.get("per_kernel"), run.get("cap"), run.get("tune_missing", 0),
                                      run.get("rule_space", 0)) != (k, cap, tune_missing, RULE_SPACE)):
        shutil.rmtree(out_dir)  # a run with other settings, or asked for: searched again
        run = None
    if report_file.exists() and (out_dir / "database").is_dir():
        return out_dir / "database", read_json(report_file)
    # a run kept (resumed, or its database rebuilt) keeps the math it was searched with
    search_fast_math = settings.fast_math if run is None else run.get("fast_math", False)
    # a new run, a killed one (resumed from its rows), or a committed one without its database (rebuilt from
    # the rows, nothing measured again but the final timing)
    selector = recommenders.for_model(name)
    report = budgeted_transfer(spec, target, root / "bank", out_dir, selector, per_kernel=k, cap=cap,
                               untuned=False, recommender=selector.name, tune_missing=tune_missing,
                               rule_space=RULE_SPACE, settings=replace(MeasureSettings(), fast_math=search_fast_math))
    return out_dir / "database", report


def heldout_models(text: str, bank_and_references: set[str]) -> list[str]:
    """The zoo models named in `text` (comma-separated), each checked to be in neither the bank nor the
    references (those have rows of their own)."""
    names = [m for m in text.split(",") if m]
    unknown = [m for m in names if m not in ZOO]
    if unknown:
        raise SchedrecError(f"--heldout: not zoo models: {', '.join(unknown)} (the zoo: {', '.join(ZOO)})")
    inside = [m for m in names if m in bank_and_references]
    if inside:
        raise SchedrecError(f"--heldout: {', '.join(inside)} in the bank or the references: use --models")
    return names


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--target", default="native")
    ap.add_argument("--models", default="", help="comma-separated model names (default: all)")
    ap.add_argument("--heldout", default="",
                    help="comma-separated zoo models in neither the bank nor the references: rows without own records")
    ap.add_argument("--redo", action="store_true", help="time again the models already in the table")
    ap.add_argument("--k", type=int, default=2, help="schedrec's candidates measured per kernel (2)")
    ap.add_argument("--cap", type=int, default=48, help="at most this many transferred candidates per kernel")
    ap.add_argument("--tune-missing", type=int, default=32,
                    help="schedrec's search trials for a kernel without donors of 1%% of the FLOPs or more "
                         "(0.25%% for a conv or matmul) (32)")
    ap.add_argument("--fresh", action="store_true",
                    help="search schedrec's transfer again for the models timed (its folder is replaced)")
    ap.add_argument("--no-schedrec", action="store_true", help="leave out schedrec's column")
    ap.add_argument("--exact-math", action="store_true",
                    help="TVM builds with libm's scalar exp/erf (stock TVM) instead of schedrec's vectorized ones")
    args = ap.parse_args()
    target = parse_target(args.target)
    root = repo_models_dir() / target.key
    out_path = root / "latency.json"
    table = read_json(out_path) if out_path.exists() else {}
    done = set() if args.redo else set(table)  # redone rows replace the old ones one by one: a stop loses none
    folders = [f for kind in ("bank", "reference") if (root / kind).is_dir() for f in bank_models(root / kind)]
    wanted = [m for m in args.models.split(",") if m]
    metas = {f: read_meta(f) for f in folders}
    names = {f: m["model"] for f, m in metas.items()}
    unknown = sorted(set(wanted) - set(names.values()))
    if unknown:
        raise SchedrecError(f"no bank or reference model {', '.join(unknown)} for {target.key}")
    if wanted:  # the rows asked for, in the order asked for (bank and references alike)
        folders = sorted((f for f in folders if names[f] in wanted), key=lambda f: wanted.index(names[f]))
    elif args.heldout:  # only the held-out rows asked for
        folders = []
    rows = [(names[f], metas[f]["spec"], f) for f in folders]
    rows += [(name, f"zoo:{name}", None) for name in heldout_models(args.heldout, set(names.values()))]
    cores = int(target.config.get("num-cores", 1))
    settings = MeasureSettings(repeat=REPEAT, min_repeat_ms=round(MIN_REPEAT_S * 1000), fast_math=not args.exact_math)
    # untuned TVM runs plain loops (seconds per inference on the big models): 3 repeats of one inference
    untuned_settings = MeasureSettings(repeat=3, min_repeat_ms=0)
    recommenders = Recommenders(root)
    with Measurer(target.config, settings) as measurer:
        for name, spec, folder in rows:
            if name in done:
                continue
            t0 = time.time()
            if not args.no_schedrec:  # the search first: its own measurer, then every column is timed here
                database, report = schedrec_output(name, spec, target, root, args.k, args.cap,
                                                   args.tune_missing, recommenders, settings, fresh=args.fresh)
            model = import_model(spec, target.tvm())
            inputs = list(zip(model.input_shapes, model.input_dtypes))
            row = {"kind": folder.parent.name if folder else "held-out",
                   "tuned_kernels": sum(k["tuned"] for k in metas[folder]["kernels"].values()) if folder else None,
                   "target": target.config, "cpu": cpu_name(), "date": time.strftime("%Y-%m-%d"),
                   "threads": {"tvm": cores, "pytorch": cores, "onnxruntime": cores}, "fast_math": settings.fast_math}
            untuned = measurer.measure_model(model.mod, inputs, settings=untuned_settings)
            row["tvm_untuned_ms"] = untuned.median * 1e3 if untuned.ok else None
            row["errors"] = {} if untuned.ok else {"untuned": untuned.error[:300]}
            with contextlib.ExitStack() as stack:
                timers, libraries = {}, {}
                if folder is not None:  # the model's own records (a held-out model has none)
                    with tempfile.TemporaryDirectory() as scratch:  # the library keeps what it needs of the records
                        unpack(folder, scratch)
                        libraries["tuned"] = stack.enter_context(measurer.model_library(model.mod, scratch))
                if not args.no_schedrec:
                    libraries["schedrec"] = stack.enter_context(measurer.model_library(model.mod, str(database)))
                for column, built in libraries.items():
                    if built.ok:
                        timers[column] = tvm_timer(measurer, built.path, inputs)
                    else:
                        row["errors"][column] = built.error[:300]
                if name in ZOO:
                    torch_model, torch_args = build_zoo_model(name)
                    timers["pytorch"] = seconds_timer(pytorch_timer(torch_model, torch_args, cores))
                    try:
                        timers["onnxruntime"] = seconds_timer(onnxruntime_timer(torch_model, torch_args, cores))
                    except Exception as err:  # an export the ONNX exporter cannot do
                        row["errors"]["onnxruntime"] = str(err).splitlines()[0][:300]
                costs, failed, stalls = interleaved(timers, ROUNDS)
                row["errors"].update(failed)
                row["stall_share"] = worst_stalls(stalls)
            timed = list(libraries) + (
                ["pytorch", "onnxruntime"] if name in ZOO else [])
            for column in timed:
                rounds = costs.get(column) if column not in failed else None
                row[COLUMNS[column]] = median([c for r in rounds for c in r]) * 1e3 if rounds else None
                if rounds:
                    row.setdefault("round_medians_ms", {})[column] = [round(median(r) * 1e3, 3) for r in rounds]
            row["timing"] = {"rounds": ROUNDS, "repeats": REPEAT, "min_repeat_s": MIN_REPEAT_S}
            if not args.no_schedrec:
                t = report["totals"]
                row["schedrec"] = {
                    "per_kernel": args.k, "cap": args.cap, "tune_missing": args.tune_missing,
                    "rule_space": report.get("rule_space", 0), "measured_by_kind": t.get("measured_by_kind"),
                    "kernels_short_tuned": t.get("kernels_short_tuned", 0), "selector": report["selector"],
                    "left_out": report["excluded_models"], "search_s": t["search_s"],
                    "flop_coverage_transferred": t["flop_coverage_transferred"],
                    "kernels": t["kernels"], "kernels_via_samples": t["kernels_via_samples"],
                    "kernels_default": t["kernels_default"], "time_share_default": t["time_share_default"],
                    "kernels_chosen_rule": t.get("kernels_chosen_rule", 0),
                    "flop_share_chosen_rule": t.get("flop_share_chosen_rule", 0.0),
                    "search_fast_math": bool(report.get("fast_math", False)),
                    "run": display_path(root / "latency" / name)}
            row["seconds"] = round(time.time() - t0, 1)
            table[name] = row
            atomic_write_json(str(out_path), table)
            print(name, json.dumps(row), flush=True)


if __name__ == "__main__":
    run_script(main)
