"""The `schedrec` command line."""
from __future__ import annotations

import argparse
import signal
import sys
import traceback

from .errors import SchedrecError


def _fmt_flops(f: float) -> str:
    for unit, scale in (("G", 1e9), ("M", 1e6), ("K", 1e3)):
        if f >= scale:
            return f"{f / scale:.2f}{unit}"
    return f"{f:.0f}"


def _print_table(rows: list[list[str]], header: list[str]) -> None:
    widths = [max(len(str(r[i])) for r in rows + [header]) for i in range(len(header))]
    line = "  ".join(h.ljust(w) for h, w in zip(header, widths))
    print(line)
    print("-" * len(line))
    for r in rows:
        print("  ".join(str(c).ljust(w) for c, w in zip(r, widths)))


def cmd_kernels(args: argparse.Namespace) -> int:
    """List a model's kernels with their class, weight, FLOPs and shapes."""
    from featurize.tir_structure import class_label

    from .fileio import atomic_write_json
    from .kernels import extract_kernels, flop_shares
    from .model_import import import_model
    from .target import parse_target

    target = parse_target(args.target)
    print(f"importing {args.model} for {target.key} ...", file=sys.stderr)
    model = import_model(args.model, target.tvm())
    kernels = extract_kernels(model, target.tvm())
    shares = flop_shares(kernels)
    rows = []
    for i, (k, share) in enumerate(zip(kernels, shares)):
        shapes = " ".join("x".join(map(str, s)) or "scalar" for s, _ in k.args)
        rows.append([str(i), k.name[:48], k.kind, str(k.weight), _fmt_flops(k.flops), f"{100 * share:.1f}%",
                     shapes[:60], k.class_key if args.full_class else class_label(k.class_key)])
    _print_table(rows, ["#", "kernel", "kind", "w", "FLOPs", "share", "arg shapes", "class"])
    classes = {k.class_key for k in kernels}
    print(f"{model.name}: {len(kernels)} kernels, {len(classes)} classes, "
          f"{_fmt_flops(sum(k.total_flops for k in kernels))}FLOPs per inference, target {target.key}")
    if args.json:
        atomic_write_json(args.json, {"model": model.name, "spec": args.model, "target": target.config,
                                      "target_key": target.key,
                                      "inputs": [{"name": n, "shape": list(s), "dtype": d} for n, s, d in
                                                 zip(model.input_names, model.input_shapes, model.input_dtypes)],
                                      "kernels": [dict(k.to_json(), flop_share=s)
                                                  for k, s in zip(kernels, shares)]})
        print(f"wrote {args.json}", file=sys.stderr)
    return 0


def cmd_zoo(args: argparse.Namespace) -> int:
    """List the zoo models."""
    from .zoo import ZOO
    _print_table([[e.name, e.family, e.description] for e in ZOO.values()], ["name", "family", "description"])
    return 0


def cmd_target(args: argparse.Namespace) -> int:
    """Show the target and its key."""
    import json
    from .target import parse_target
    t = parse_target(args.target)
    print(json.dumps({"target": t.config, "target_key": t.key}, indent=2))
    return 0


def _int_at_least(low: int, what: str, too_low: str):
    """An argparse type: an integer >= `low`; `what` names it when the text is not a number."""
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}") from None
        if value < low:
            raise argparse.ArgumentTypeError(f"expected {too_low}, got {value}")
        return value
    return parse


_positive_int = _int_at_least(1, "a positive integer", "a positive integer")


def _statuses(text: str) -> tuple[str, ...]:
    from .transfer_data import FAILURE_STATUSES
    names = tuple(t.strip() for t in text.split(",") if t.strip())
    unknown = [n for n in names if n not in FAILURE_STATUSES]
    if unknown or not names:
        raise argparse.ArgumentTypeError(f"unknown status {', '.join(unknown) or repr(text)}; "
                                         f"one or more of {', '.join(FAILURE_STATUSES)}")
    return names


def _share(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a fraction between 0 and 1, got {text!r}") from None
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"expected a fraction between 0 and 1, got {value}")
    return value


class _Parser(argparse.ArgumentParser):
    """argparse with one-line errors."""

    def error(self, message: str) -> None:  # type: ignore[override]
        print(f"{self.prog}: error: {message} (see {self.prog} --help)", file=sys.stderr)
        sys.exit(2)


def _bank_dir(args: argparse.Namespace, target_key: str, kind: str = "bank"):
    """--bank, else this target's own folder (where tuning writes, and what matrix/info read)."""
    from pathlib import Path

    from .bank import repo_models_dir
    return Path(args.bank) if args.bank else repo_models_dir() / target_key / kind


def _say_bank_cpu(bank_dir, target_key: str) -> None:
    """The one line on bank models measured on another CPU than this run's (a --bank of another target's)."""
    from .candidates import bank_warnings
    for note in bank_warnings(bank_dir, target_key) if bank_dir.is_dir() else []:
        print(note, file=sys.stderr)


def _donor_dirs(args: argparse.Namespace, target_key: str, recommender: bool = True):
    """(bank, recommender folder or None) for a run that reads them: --bank / --recommender, else this
    target's own folder, else the nearest target's, named in one line (a --bank whose models were tuned on
    another CPU: that line instead)."""
    from pathlib import Path

    from .bank import repo_models_dir
    from .target_dirs import resolve
    notes = []
    if args.bank:
        bank = Path(args.bank)
        _say_bank_cpu(bank, target_key)
    else:
        folder, note = resolve(repo_models_dir(), target_key, "bank")
        bank = folder / "bank"
        notes.append(note)
        if note is None:  # this CPU's own bank, which may hold models imported from another
            _say_bank_cpu(bank, target_key)
    rec = None
    if recommender and args.recommender:
        rec = Path(args.recommender)
    elif recommender:
        rec, note = resolve(repo_models_dir(), target_key, "rankers")
        if rec / "bank" != bank:
            notes.append(note)
    for note in filter(None, notes):
        print(note, file=sys.stderr)
    return bank, rec


def cmd_bank_tune(args: argparse.Namespace) -> int:
    """Tune models into the bank with MetaSchedule through the schedrec measurer (resumable)."""
    from .bank_tune import tune_model
    from .measure import MeasureSettings
    from .target import parse_target
    target = parse_target(args.target)
    settings = MeasureSettings(repeat=args.repeat, min_repeat_ms=args.min_repeat_ms, runner=args.runner,
                               build_workers=args.build_workers, fast_math=not args.exact_math)
    bank_dir = _bank_dir(args, target.key, "reference" if args.reference else "bank")
    specs = [s.strip() for s in args.models.split(",") if s.strip()]
    if not specs:
        raise SchedrecError("--models is empty: give a comma-separated list such as zoo:resnet18,zoo:bert_base")
    for spec in specs:
        meta = tune_model(spec, target, bank_dir, args.trials_per_task, args.min_share, settings,
                          trials_per_iter=args.trials_per_iter, population_size=args.population_size)
        print(f"{meta['model']}: done in {meta['last_run']['seconds']:.0f} s -> {bank_dir / meta['model']}")
    return 0


def cmd_bank_import(args: argparse.Namespace) -> int:
    """Add an existing MetaSchedule work dir to the bank."""
    from pathlib import Path

    from .bank_info import import_workdir
    from .target import parse_target
    target = parse_target(args.target)
    s = import_workdir(Path(args.work_dir), _bank_dir(args, target.key), args.name, target.key, target.config)
    print(f"imported {s['model']}: {s['workloads']} workloads, {s['records']} records ({s['valid_records']} valid)")
    return 0


def cmd_bank_info(args: argparse.Namespace) -> int:
    """Print the bank's models, kernels, classes, records and best latencies."""
    from .bank_info import bank_summary
    from .target import parse_target
    target = parse_target(args.target)
    dirs = [_bank_dir(args, target.key)] if args.bank else [_bank_dir(args, target.key, kind)
                                                            for kind in ("bank", "reference")]
    found = False
    for d in dirs:
        if not d.is_dir():
            continue
        rows = bank_summary(d)
        found = True
        print(f"{d} ({len(rows)} models)")
        _print_table([[r["model"], r["target_key"], str(r["kernels"]), f"{r['done_kernels']}/{r['tuned_kernels']}",
                       str(r["classes"]), str(r["records"]), str(r["valid_records"]),
                       f"{r['tuned_kernels_latency_ms']:.2f}", f"{r['tuning_hours']:.2f}"] for r in rows],
                     ["model", "target", "kernels", "tuned", "classes", "records", "valid",
                      "tuned kernels ms", "hours"])
        for r in rows:
            if r["target_key"] != target.key:
                print(f"warning: {r['model']} was measured on {r['target_key']}, not on {target.key}: "
                      f"its latencies and rankings do not carry over", file=sys.stderr)
    if not found:
        raise SchedrecError(f"no bank for {target.key} under {dirs[0].parent}; "
                            f"tune one with `schedrec bank tune` or pass --bank DIR")
    return 0


def cmd_replay(args: argparse.Namespace) -> int:
    """Exhaustive-replay transfer-tuning of a model from the bank (the original transfer-tuning method)."""
    from pathlib import Path

    from .measure import MeasureSettings
    from .model_import import model_name_from_spec
    from .target import parse_target
    from .transfer import exhaustive_replay
    target = parse_target(args.target)
    if args.add_donors and not args.all_pairs:
        raise SchedrecError("--add-donors extends a transfer matrix: use it with --all-pairs")
    if args.all_pairs:
        return _replay_all_pairs(args, target, _bank_dir(args, target.key))
    bank_dir, _ = _donor_dirs(args, target.key, recommender=False)
    if not args.model:
        raise SchedrecError("give --model MODEL, or --all-pairs for the transfer matrix of the bank")
    out_dir = Path(args.out) if args.out else Path("out") / "replay" / model_name_from_spec(args.model)
    exclude = tuple(m for m in (args.exclude_models or "").split(",") if m)
    report = exhaustive_replay(args.model, target, bank_dir, out_dir, top_n=args.top_n or 1, exclude_models=exclude,
                               cap=args.cap, settings=MeasureSettings(repeat=args.repeat, fast_math=not args.exact_math),
                               anchor_fallback=not args.no_anchor_fallback, remeasure=args.remeasure)
    rows = []
    for k in report["kernels"]:
        chosen = k["chosen"]
        rows.append([k["kernel"][:44], k["class_key"].split("/")[0], str(k["candidates"]), str(k["valid"]),
                     ",".join(f"{r}:{n}" for r, n in k["failures"].items()) or "-",
                     f"{k['default_s'] * 1e3:.3f}" if k["default_s"] else "-",
                     f"{k['latency_s'] * 1e3:.3f}" if k["latency_s"] else "-",
                     f"{chosen['source_model']}/{chosen['rank']}" if chosen else "default"])
    _print_table(rows, ["kernel", "kind", "cands", "valid", "failures", "default ms", "chosen ms", "source"])
    t = report["totals"]
    tuned, untuned = t["model_latency_tuned_s"], t["model_latency_untuned_s"]
    print(f"{report['model']}: search {t['search_s']:.1f} s (replay {t['replay_s']:.1f}, build {t['build_s']:.1f}, "
          f"run {t['run_s']:.1f}), coverage {100 * t['flop_coverage_valid']:.1f}% of FLOPs "
          f"({100 * t['flop_coverage_class_only']:.1f}% from same-class donors), "
          f"model {tuned * 1e3 if tuned else float('nan'):.2f} ms tuned vs "
          f"{untuned * 1e3 if untuned else float('nan'):.2f} ms untuned -> {out_dir / 'report.json'}")
    return 0


def _replay_all_pairs(args: argparse.Namespace, target: object, bank_dir: object) -> int:
    """Leave-one-model-out replay over every bank model into the transfer matrix."""
    from pathlib import Path

    from .bank import repo_models_dir
    from .measure import MeasureSettings
    from .transfer.matrix import all_pairs
    if args.model or args.exclude_models:
        raise SchedrecError("--all-pairs replays every bank model leaving itself out; drop --model/--exclude-models "
                            "(use --models to restrict the target models)")
    out_dir = Path(args.out) if args.out else repo_models_dir() / target.key / "transfer"
    models = [m for m in (args.models or "").split(",") if m] or None
    _say_bank_cpu(Path(bank_dir), target.key)
    s = all_pairs(target, bank_dir, out_dir, top_n=args.top_n or 3, cap=args.cap or 48,
                  models=models, settings=MeasureSettings(repeat=args.repeat, fast_math=not args.exact_math),
                  anchor_fallback=not args.no_anchor_fallback, remeasure=args.remeasure,
                  add_donors=args.add_donors)
    rows = [[m, str(v["kernels"]), str(v["kernels_with_valid"]), f"{v['candidates_per_kernel']:.1f}",
             f"{v['valid_per_kernel']:.1f}", str(v["median_over_best"]), str(v["default_over_best"]),
             str(v["best_over_tuned"])] for m, v in list(s["models"].items()) + [("ALL", s["all"])]]
    _print_table(rows, ["target model", "kernels", "with valid", "cands/kernel", "valid/kernel",
                        "median/best", "default/best", "best/tuned"])
    print(f"{s['rows']} rows -> {out_dir}")
    return 0


def cmd_matrix(args: argparse.Namespace) -> int:
    """The transfer matrix: every bank model replayed from the others, every candidate measured (resumable)."""
    from .target import parse_target
    target = parse_target(args.target)
    args.model, args.exclude_models = None, ""
    return _replay_all_pairs(args, target, _bank_dir(args, target.key))


_non_negative_int = _int_at_least(0, "a whole number of measurements", "0 or more measurements")


def cmd_transfer(args: argparse.Namespace) -> int:
    """Budgeted transfer: the recommender ranks each kernel's transferred schedules and only the top-k are
    measured; writes a MetaSchedule database and a report (JSON and Markdown)."""
    from pathlib import Path

    from .fileio import display_path
    from .measure import MeasureSettings
    from .model_import import model_name_from_spec
    from .recommend import load_selector
    from .target import parse_target
    from .transfer.budgeted import budgeted_transfer
    target = parse_target(args.target)
    bank_dir, rec_dir = _donor_dirs(args, target.key)
    selector = load_selector(args.selector, rec_dir, bank_dir, seed=args.seed)
    name = model_name_from_spec(args.model)
    budget_tag = f"k{args.budget_per_kernel}" if args.budget_per_kernel is not None else f"b{args.budget}"
    out_dir = Path(args.out) if args.out else Path("out") / "transfer" / f"{name}-{args.selector}-{budget_tag}"
    exclude = tuple(m for m in (args.exclude_models or "").split(",") if m)
    report = budgeted_transfer(args.model, target, bank_dir, out_dir, selector, budget=args.budget,
                               per_kernel=args.budget_per_kernel, top_n=args.top_n, cap=args.cap,
                               exclude_models=exclude,
                               settings=MeasureSettings(repeat=args.repeat, fast_math=not args.exact_math),
                               anchor_fallback=not args.no_anchor_fallback, untuned=not args.no_untuned,
                               recommender=display_path(rec_dir), fallback_samples=args.fallback_samples,
                               tune_missing=args.tune_missing, pack_weights=args.pack_weights)
    t = report["totals"]
    tuned, untuned = t["model_latency_tuned_s"], t["model_latency_untuned_s"]
    line = (f"{report['model']} on {report['target_key']}: {tuned * 1e3 if tuned else float('nan'):.2f} ms "
            f"with {t['records_written']} transferred schedules")
    if untuned:
        line += f" (untuned {untuned * 1e3:.2f} ms, {untuned / tuned:.1f}x)" if tuned else ""
    print(line)
    print(f"search {t['search_s']:.1f} s: replay {t['replay_s']:.1f}, featurize {t['featurize_s']:.2f}, "
          f"predict {t['predict_s']:.2f}, build {t['build_wall_s']:.1f} (wall), run {t['run_s']:.1f}; "
          f"{t['measurements']} measurements of {t['replayed_candidates']} candidates "
          f"(+{t['defaults_measured']} defaults, {t['checked_only']} checked only) -> {out_dir / 'report.md'}")
    share = t.get("time_share_default")
    print(f"{t['kernels_via_samples']} kernels without a donor got schedules from their own design space "
          f"({t.get('kernels_short_tuned', 0)} by a short search, the others by samples); {t['kernels_default']} "
          f"kernels run unscheduled (plain loops): {'?' if share is None else f'{100 * share:.1f}%'} of kernel time")
    shipped = rec_dir / "heldout" / report["model"] / "report.json"
    if shipped.exists() and tuned:
        import json
        shipped_report = json.loads(shipped.read_text())
        ex, where = shipped_report["totals"], shipped_report.get("target_key", rec_dir.name)
        if where != target.key:  # its latency is another CPU's: not comparable
            print(f"exhaustive replay of this model: none measured on {target.key} (the shipped one ran on "
                  f"{where}, another CPU, so its latency is not compared)")
        elif ex.get("model_latency_tuned_s"):
            print(f"exhaustive replay of this model (shipped run on {where}, {ex['valid']} candidates measured): "
                  f"{ex['model_latency_tuned_s'] * 1e3:.2f} ms after {ex['search_s']:.0f} s of search; "
                  f"this run: {t['search_s'] / ex['search_s']:.0%} of that search time")
    if args.baselines and tuned:
        from .compare import time_baselines
        from .fileio import atomic_write_json
        report["baselines"] = time_baselines(args.model, target, report["model"])
        for name, lat in report["baselines"].items():
            print(f"{name}: {lat * 1e3:.2f} ms ({'schedrec faster' if tuned < lat else 'schedrec slower'}: "
                  f"{lat / tuned:.2f}x), {target.config.get('num-cores', 1)} threads")
        atomic_write_json(str(out_dir / "report.json"), report)  # with the baselines, for the README's figures
    return 0


def _budgets(text: str) -> tuple[int, ...]:
    try:
        values = tuple(int(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected per-kernel budgets like 1,2,3,5, got {text!r}") from None
    if not values or any(v < 1 for v in values):
        raise argparse.ArgumentTypeError(f"budgets must be 1 or more, got {text!r}")
    return values


def cmd_compare(args: argparse.Namespace) -> int:
    """Every method on one model in one run, same measurer: untuned, the recommender and random-k at each
    per-kernel budget, exhaustive replay, MetaSchedule from scratch, the reference, PyTorch, ONNX Runtime."""
    from pathlib import Path

    from .compare import compare
    from .measure import MeasureSettings
    from .model_import import model_name_from_spec
    from .target import parse_target
    target = parse_target(args.target)
    bank_dir, rec_dir = _donor_dirs(args, target.key)
    out_dir = Path(args.out) if args.out else Path("out") / "compare" / model_name_from_spec(args.model)
    selectors = tuple(s.strip() for s in args.selectors.split(",") if s.strip())
    bad = [s for s in selectors if s not in ("lgbm", "tlp", "heuristic", "random")]
    if bad or not selectors:
        raise SchedrecError(f"unknown selector {', '.join(bad) or repr(args.selectors)}; "
                            f"use lgbm, tlp, heuristic or random")
    if args.finish:
        from .compare import finish_stopped
        data = finish_stopped(out_dir, baselines=not args.no_baselines)
        from .compare import format_compare
        print(format_compare(data))
        return 0
    data = compare(args.model, target, bank_dir, rec_dir, out_dir, budgets=args.budgets, selectors=selectors,
                   top_n=args.top_n, cap=args.cap, exhaustive=args.exhaustive,
                   scratch_cap_s=args.scratch_cap_s, scratch_factor=args.scratch_factor,
                   refine_s=args.refine_s, fallback_samples=args.fallback_samples,
                   tune_missing=args.tune_missing, baselines=not args.no_baselines,
                   settings=MeasureSettings(fast_math=not args.exact_math))
    from .compare import format_compare
    print(format_compare(data))
    print(f"-> {out_dir / 'compare.json'}, {out_dir / 'compare.md'}, {out_dir / 'compare.png'}")
    return 0


def _target_dir(args: argparse.Namespace):
    """models/<key>/ for --target-key, or for the --target's key (the host CPU by default)."""
    from pathlib import Path

    from .bank import repo_models_dir
    if args.target_key:
        key = args.target_key
    else:
        from .target import parse_target
        key = parse_target(args.target).key
    folder = repo_models_dir() / key
    if not (folder / "transfer").is_dir():
        have = sorted(p.name for p in repo_models_dir().iterdir() if (p / "transfer").is_dir())
        raise SchedrecError(f"no transfer matrix for target {key} (looked in {folder / 'transfer'}); "
                            f"targets with one: {', '.join(have) or 'none'} (use --target-key)")
    return Path(folder)


def _ranker_names(text: str) -> list[str]:
    from training.rankers import BASELINES, LEARNED
    names = list(LEARNED) if text == "all" else [n.strip() for n in text.split(",") if n.strip()]
    unknown = [n for n in names if n not in LEARNED + BASELINES]
    if unknown or not names:
        raise argparse.ArgumentTypeError(f"unknown ranker {', '.join(unknown) or repr(text)}; "
                                         f"one or more of {', '.join(LEARNED + BASELINES)}, or all")
    return names


def _fractions(text: str) -> tuple[float, ...]:
    try:
        values = tuple(float(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected fractions like 0.25,0.5,1, got {text!r}") from None
    if not values or any(not 0.0 < v <= 1.0 for v in values):
        raise argparse.ArgumentTypeError(f"fractions must be in (0, 1], got {text!r}")
    return values


def cmd_train(args: argparse.Namespace) -> int:
    """Train the target's rankers on its transfer matrix; saved to models/<key>/rankers/<name>/."""
    from training.train import train
    folder = _target_dir(args)
    train(folder, args.ranker, bank_records=not args.no_bank_records)
    return 0


def cmd_evaluate(args: argparse.Namespace) -> int:
    """Leave-one-model-out evaluation of rankers and baselines on the target's transfer matrix."""
    from training.evaluate import format_table, per_model_table
    from training.train import evaluate
    folder = _target_dir(args)
    models = [m for m in (args.models or "").split(",") if m] or None
    names = args.ranker or ["lgbm", "tlp", "heuristic", "random"] + (
        ["xgb_per_store"] if (folder / "features" / "per_store.npz").exists() else [])
    result = evaluate(folder, names, models=models, fractions=args.learning_curve or (),
                      bank_records=not args.no_bank_records)
    print(format_table(result["lomo"], f"Leave-one-model-out, pooled over held-out bank kernels "
                                       f"(measured on {folder.name})"))
    print()
    print(per_model_table(result["lomo"]))
    if result.get("heldout", {}).get("rankers"):
        print()
        print(format_table({"rankers": {n: dict(r, seconds=0.0) for n, r in result["heldout"]["rankers"].items()}},
                           f"Zoo models outside the bank ({', '.join(result['heldout']['models'])}), rankers "
                           f"trained on the whole matrix"))
    if "noise_ceiling" in result:
        nc = result["noise_ceiling"]
        for part, words in (("matrix_to_a", "ranked by the matrix's measurement, scored by a new one"),
                            ("a_to_b", "ranked by one new measurement, scored by the next")):
            c = nc[part]
            print(f"label-noise ceiling, {words} ({nc['kernels']} kernels): top1 {c['top1']}, top3 {c['top3']}, "
                  f"top5 {c['top5']}")
    print(f"\n{result['seconds']} s; written to {folder / 'rankers' / 'evaluation.json'}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="schedrec", description="ML-guided schedule recommender for TVM MetaSchedule.")
    p.add_argument("--debug", action="store_true", help="show full tracebacks on errors")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", required=True, parser_class=_Parser)

    def target_opt(sp: argparse.ArgumentParser) -> None:
        sp.add_argument("--target", default="native",
                        help="'native' (detect the host CPU), a JSON object, or a JSON file (default: native)")

    def math_opt(sp: argparse.ArgumentParser) -> None:
        sp.add_argument("--exact-math", action="store_true",
                        help="build with libm's scalar exp/erf, as stock TVM does, instead of schedrec's vectorized "
                             "float32 polynomials (within 2e-6 of libm; several times faster softmax, GELU, tanh, sigmoid)")

    def shape_opt(sp: argparse.ArgumentParser) -> None:
        sp.add_argument("--input-shape", action="append", metavar="NAME=D0,D1,...",
                        help="bind an ONNX input's dynamic dims, e.g. x=1,3,224,224, or a named dim wherever it "
                             "appears, e.g. seq=128 (repeat per input or dim; a named dim bound in one input holds "
                             "in the others; an unbound dynamic batch dim is taken as 1)")

    def fallback_opt(sp: argparse.ArgumentParser) -> None:
        sp.add_argument("--fallback-samples", type=_int_at_least(0, "a sample count", "0 or more"), default=4,
                        metavar="N", help="where no donor replays on a kernel, or none of those measured beats its "
                                          "default, draw N schedules from its own design space as candidates, "
                                          "so that no kernel is left as plain loops (default 4; 0: off)")
        sp.add_argument("--tune-missing", type=_int_at_least(0, "a trial count", "0 or more"), default=32,
                        metavar="TRIALS", help="where no donor replays on a kernel that holds 1%% or more of the "
                                               "model's FLOPs (0.25%% for a conv or matmul), search its design space for TRIALS measured trials "
                                               "(MetaSchedule, cost model on) before any random draw; its best "
                                               "records are the candidates (default 32; 0: off)")

    k = sub.add_parser("kernels", help=cmd_kernels.__doc__, description=cmd_kernels.__doc__)
    k.add_argument("model", metavar="MODEL", help="zoo:NAME, a .onnx file or a .pt2 (torch.export) file")
    target_opt(k)
    shape_opt(k)
    k.add_argument("--json", metavar="FILE", help="also write the kernel list as JSON")
    k.add_argument("--full-class", action="store_true", help="print full class keys (with the block list)")
    k.set_defaults(func=cmd_kernels)

    z = sub.add_parser("zoo", help=cmd_zoo.__doc__, description=cmd_zoo.__doc__)
    z.set_defaults(func=cmd_zoo)

    t = sub.add_parser("target", help=cmd_target.__doc__, description=cmd_target.__doc__)
    target_opt(t)
    t.set_defaults(func=cmd_target)

    r = sub.add_parser("replay", help=cmd_replay.__doc__, description=cmd_replay.__doc__)
    r.add_argument("--model", help="zoo:NAME, a .onnx or a .pt2 file")
    shape_opt(r)
    r.add_argument("--all-pairs", action="store_true",
                   help="the transfer matrix (the same as `schedrec matrix`)")
    r.add_argument("--models", help="with --all-pairs: only these bank models as targets (comma-separated)")
    target_opt(r)
    r.add_argument("--bank", metavar="DIR", help="bank folder (default: models/<target-key>/bank)")
    r.add_argument("--exclude-models", default="", help="comma-separated bank models to leave out")
    r.add_argument("--top-n", type=_positive_int, default=None,
                   help="best records per source kernel (1; 3 with --all-pairs)")
    r.add_argument("--cap", type=_positive_int, default=None,
                   help="at most this many candidates per kernel (none; 48 with --all-pairs)")
    r.add_argument("--no-anchor-fallback", action="store_true",
                   help="do not fall back to same-anchor donors with another epilogue where a class has none")
    r.add_argument("--repeat", type=_positive_int, default=5, help="timing repeats per candidate (5)")
    r.add_argument("--remeasure", type=_statuses, default=(), metavar="STATUS[,STATUS]",
                   help="when resuming, measure again the kernels with a candidate of these statuses "
                        "(e.g. wrong_result after a fix to the check)")
    r.add_argument("--add-donors", action="store_true",
                   help="measure the candidates of bank models added since the matrix's finished kernels were "
                        "measured, and add their rows")
    r.add_argument("--out", metavar="DIR", help="output folder (default: out/replay/<model>)")
    math_opt(r)
    r.set_defaults(func=cmd_replay)

    mx = sub.add_parser("matrix", help=cmd_matrix.__doc__, description=cmd_matrix.__doc__)
    mx.add_argument("--models", help="only these bank models as targets (comma-separated)")
    target_opt(mx)
    mx.add_argument("--bank", metavar="DIR", help="bank folder (default: models/<target-key>/bank)")
    mx.add_argument("--top-n", type=_positive_int, default=3, help="best records per source kernel (3)")
    mx.add_argument("--cap", type=_positive_int, default=48, help="at most this many candidates per kernel (48)")
    mx.add_argument("--no-anchor-fallback", action="store_true",
                    help="do not fall back to same-anchor donors with another epilogue where a class has none")
    mx.add_argument("--repeat", type=_positive_int, default=5, help="timing repeats per candidate (5)")
    mx.add_argument("--remeasure", type=_statuses, default=(), metavar="STATUS[,STATUS]",
                    help="when resuming, measure again the kernels with a candidate of these statuses")
    mx.add_argument("--add-donors", action="store_true",
                    help="measure the candidates of bank models added since the matrix's finished kernels were "
                         "measured, and add their rows")
    mx.add_argument("--out", metavar="DIR", help="output folder (default: models/<target-key>/transfer)")
    math_opt(mx)
    mx.set_defaults(func=cmd_matrix)

    tf = sub.add_parser("transfer", help=cmd_transfer.__doc__, description=cmd_transfer.__doc__)
    tf.add_argument("--model", required=True, help="zoo:NAME, a .onnx or a .pt2 file")
    shape_opt(tf)
    fallback_opt(tf)
    tf.add_argument("--pack-weights", action="store_true",
                    help="mark the model's weights layout-free, so that the replayed schedules read them packed in "
                         "their own order; the packing is folded into the model's constants at build (the output "
                         "database then applies to a module imported the same way: see the README)")
    budget = tf.add_mutually_exclusive_group(required=True)
    budget.add_argument("--budget", type=_non_negative_int, metavar="B",
                        help="candidate measurements in total, split across kernels by expected gain "
                             "(0: trust each kernel's top-ranked candidate after a correctness check)")
    budget.add_argument("--budget-per-kernel", type=_non_negative_int, metavar="K",
                        help="candidate measurements per kernel (the top K of its ranking)")
    target_opt(tf)
    tf.add_argument("--bank", metavar="DIR", help="bank folder (default: models/<target-key>/bank)")
    tf.add_argument("--recommender", metavar="DIR",
                    help="target folder with the trained rankers (default: models/<target-key>)")
    tf.add_argument("--selector", default="lgbm", choices=["lgbm", "tlp", "heuristic", "random"],
                    help="which ranking picks the candidates to measure (lgbm)")
    tf.add_argument("--seed", type=int, default=0, help="seed of the random selector (0)")
    tf.add_argument("--exclude-models", default="", help="comma-separated bank models to leave out")
    tf.add_argument("--top-n", type=_positive_int, default=3, help="best records per source kernel in the pool (3)")
    tf.add_argument("--cap", type=_positive_int, default=48, help="at most this many candidates per kernel (48)")
    tf.add_argument("--no-anchor-fallback", action="store_true",
                    help="do not fall back to same-anchor donors with another epilogue where a class has none")
    tf.add_argument("--repeat", type=_positive_int, default=5, help="timing repeats per measurement (5)")
    tf.add_argument("--no-untuned", action="store_true", help="do not time the untuned model for the report")
    tf.add_argument("--baselines", action="store_true",
                    help="also time PyTorch eager (zoo models) and ONNX Runtime on the same input")
    tf.add_argument("--out", metavar="DIR", help="output folder (default: out/transfer/<model>-<selector>-<budget>)")
    math_opt(tf)
    tf.set_defaults(func=cmd_transfer)

    cp = sub.add_parser("compare", help=cmd_compare.__doc__, description=cmd_compare.__doc__)
    cp.add_argument("--model", required=True, help="zoo:NAME, a .onnx or a .pt2 file")
    shape_opt(cp)
    fallback_opt(cp)
    cp.add_argument("--budgets", type=_budgets, default=(1, 2, 3, 5), help="per-kernel budgets (1,2,3,5)")
    cp.add_argument("--selectors", default="lgbm,random", help="selectors to compare (lgbm,random)")
    target_opt(cp)
    cp.add_argument("--bank", metavar="DIR", help="bank folder (default: models/<target-key>/bank)")
    cp.add_argument("--recommender", metavar="DIR",
                    help="target folder with the trained rankers (default: models/<target-key>)")
    cp.add_argument("--top-n", type=_positive_int, default=3, help="best records per source kernel in the pool (3)")
    cp.add_argument("--cap", type=_positive_int, default=48, help="at most this many candidates per kernel (48)")
    cp.add_argument("--exhaustive", choices=["auto", "shipped", "measure", "skip"], default="auto",
                    help="exhaustive replay: the shipped run's choices and search time (timed here), measured "
                         "now, or skipped (auto: shipped if there is one)")
    cp.add_argument("--scratch-cap-s", type=float, default=None,
                    help="MetaSchedule from scratch: stop after this many tuning seconds (0 skips it; default: "
                         "--scratch-factor x the search time of lgbm at k=3)")
    cp.add_argument("--scratch-factor", type=float, default=10.0, help="see --scratch-cap-s (10)")
    cp.add_argument("--refine-s", type=float, default=0.0,
                    help="transfer + refine: seed MetaSchedule with lgbm k=3's schedules and tune this many "
                         "seconds more (0: skip)")
    cp.add_argument("--no-baselines", action="store_true", help="skip PyTorch and ONNX Runtime")
    cp.add_argument("--finish", action="store_true",
                    help="complete a comparison stopped during MetaSchedule from scratch from its saved files "
                         "(its checkpoints so far, then the baselines), measuring nothing else again")
    cp.add_argument("--out", metavar="DIR", help="output folder (default: out/compare/<model>)")
    math_opt(cp)
    cp.set_defaults(func=cmd_compare)

    b = sub.add_parser("bank", help="tune, import and inspect the bank of tuning records",
                       description="The bank: per target, MetaSchedule tuning records of the models tuned there.")
    bsub = b.add_subparsers(dest="bank_command", metavar="BANK_COMMAND", required=True, parser_class=_Parser)

    def bank_opt(sp: argparse.ArgumentParser) -> None:
        sp.add_argument("--bank", metavar="DIR", help="bank folder (default: models/<target-key>/bank)")

    bt = bsub.add_parser("tune", help=cmd_bank_tune.__doc__, description=cmd_bank_tune.__doc__)
    bt.add_argument("--models", required=True, help="comma-separated model specs, e.g. zoo:resnet18,zoo:bert_base")
    target_opt(bt)
    bank_opt(bt)
    bt.add_argument("--reference", action="store_true",
                    help="write to models/<target-key>/reference (long 'full tuning' runs) instead of the bank")
    bt.add_argument("--trials-per-task", type=_positive_int, default=64, help="measured trials per kernel (64)")
    bt.add_argument("--trials-per-iter", type=_positive_int, default=32,
                    help="candidates per evolutionary-search round (32)")
    bt.add_argument("--population-size", type=_positive_int, default=256,
                    help="evolutionary-search population: schedules sampled and evolved per round (256)")
    bt.add_argument("--min-share", type=_share, default=0.01,
                    help="tune kernels holding at least this share of the model's FLOPs (0.01)")
    bt.add_argument("--runner", default="local", help="local, or rpc://HOST:PORT/KEY for a remote board")
    bt.add_argument("--repeat", type=_positive_int, default=5, help="timing repeats per candidate (5)")
    bt.add_argument("--min-repeat-ms", type=_positive_int, default=4, help="minimum length of one repeat (4)")
    bt.add_argument("--build-workers", type=_positive_int, default=2, help="parallel build workers (2)")
    math_opt(bt)
    bt.set_defaults(func=cmd_bank_tune)

    bi = bsub.add_parser("import", help=cmd_bank_import.__doc__, description=cmd_bank_import.__doc__)
    bi.add_argument("work_dir", metavar="DIR", help="a MetaSchedule work dir with its two database files")
    bi.add_argument("--name", required=True, help="the model name to file it under")
    target_opt(bi)
    bank_opt(bi)
    bi.set_defaults(func=cmd_bank_import)

    bn = bsub.add_parser("info", help=cmd_bank_info.__doc__, description=cmd_bank_info.__doc__)
    target_opt(bn)
    bank_opt(bn)
    bn.set_defaults(func=cmd_bank_info)

    def target_key_opt(sp: argparse.ArgumentParser) -> None:
        target_opt(sp)
        sp.add_argument("--target-key", metavar="KEY",
                        help="the target folder models/KEY/ (default: the key of --target)")

    tr = sub.add_parser("train", help=cmd_train.__doc__, description=cmd_train.__doc__)
    target_key_opt(tr)
    tr.add_argument("--ranker", type=_ranker_names, default=["lgbm", "tlp"],
                    help="lgbm, tlp, all (both), or a comma-separated list with baselines (default: all)")
    tr.add_argument("--no-bank-records", action="store_true",
                    help="train on the transfer matrix alone, without the bank's own tuning records")
    tr.set_defaults(func=cmd_train)

    ev = sub.add_parser("evaluate", help=cmd_evaluate.__doc__, description=cmd_evaluate.__doc__)
    target_key_opt(ev)
    ev.add_argument("--ranker", type=_ranker_names, default=None,
                    help="rankers and baselines to compare (default: lgbm,tlp,heuristic,random, and "
                         "xgb_per_store when its features exist)")
    ev.add_argument("--models", help="only these held-out bank models (comma-separated)")
    ev.add_argument("--learning-curve", type=_fractions, metavar="F[,F]",
                    help="also score with these shares of the training kernels, e.g. 0.25,0.5,1")
    ev.add_argument("--no-bank-records", action="store_true",
                    help="train on the transfer matrix alone, without the bank's own tuning records")
    ev.set_defaults(func=cmd_evaluate)
    return p


class _Terminated(KeyboardInterrupt):
    """SIGTERM, turned into an exception so that workers are closed and locks released on the way out."""


_stopped_by: list[int] = []  # the signal that stopped this run, if any


def _on_signal(signum: int, frame: object) -> None:
    from .stopping import hard_stop, in_native_section
    _stopped_by.append(signum)
    if in_native_section():
        hard_stop(signum)  # does not return
    raise _Terminated() if signum == signal.SIGTERM else KeyboardInterrupt()


def _stopped(signum: int) -> int:
    from .stopping import exit_code, stop_message
    print(stop_message(signum == signal.SIGTERM), file=sys.stderr)
    return exit_code(signum)


def main(argv: list[str] | None = None) -> int:
    import warnings
    warnings.filterwarnings("ignore", category=FutureWarning)  # torch/transformers deprecation chatter
    parser = build_parser()
    args = parser.parse_args(argv)
    _stopped_by.clear()
    previous = signal.signal(signal.SIGTERM, _on_signal), signal.signal(signal.SIGINT, _on_signal)
    try:
        if getattr(args, "input_shape", None) and getattr(args, "model", None):
            from .model_import import parse_input_shape, with_input_shapes
            args.model = with_input_shapes(args.model, dict(map(parse_input_shape, args.input_shape)))
        return args.func(args)
    except SchedrecError as err:
        if _stopped_by:  # a worker or a pool that the signal stopped, reported as an error on the way out
            return _stopped(_stopped_by[0])
        if args.debug:
            traceback.print_exc()
        print(f"schedrec: error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as err:
        return _stopped(signal.SIGTERM if isinstance(err, _Terminated) else signal.SIGINT)
    except OSError as err:  # a folder that cannot be created or written, a full disk
        if _stopped_by:  # e.g. a pipe to a worker that the signal closed
            return _stopped(_stopped_by[0])
        if args.debug:
            traceback.print_exc()
        where = f": {err.filename}" if err.filename else ""
        print(f"schedrec: error: {err.strerror or err}{where}", file=sys.stderr)
        return 2
    except Exception as err:  # an unexpected failure: one line unless --debug
        if _stopped_by:  # the signal's exception came back wrapped by TVM (raised inside a tuning callback)
            return _stopped(_stopped_by[0])
        if args.debug:
            traceback.print_exc()
        msg = str(err).strip().splitlines()
        print(f"schedrec: internal error: {type(err).__name__}: {msg[-1] if msg else ''} "
              f"(rerun with --debug for the traceback)", file=sys.stderr)
        return 1
    finally:
        signal.signal(signal.SIGTERM, previous[0])
        signal.signal(signal.SIGINT, previous[1])


if __name__ == "__main__":
    sys.exit(main())
