"""`schedrec replay | matrix | transfer`: transfer-tuning from the bank, exhaustive or under a budget."""
from __future__ import annotations

import argparse
import json
from pathlib import Path

from ..core.errors import SchedrecError
from . import options
from .output import donor_folders, own_folder, print_table, say


def cmd_replay(args: argparse.Namespace) -> int:
    """Exhaustive-replay transfer-tuning of a model from the bank (the original transfer-tuning method)."""
    from ..frontend.model_import import model_name_from_spec
    from ..measure import MeasureSettings
    from ..target.spec import parse_target
    from ..transfer import exhaustive_replay
    from ..transfer.budgeted import knob_text
    target = parse_target(args.target)
    if (args.add_donors or args.add_instances) and not args.all_pairs:
        raise SchedrecError(f"--add-{'donors' if args.add_donors else 'instances'} extends a transfer matrix: use it "
                            f"with --all-pairs")
    if args.all_pairs:
        args.rule_space = args.rule_space or 0
        return replay_all_pairs(args, target, own_folder(args, target.key))
    bank_dir, _ = donor_folders(args, target.key, with_recommender=False)
    if not args.model:
        raise SchedrecError("give --model MODEL, or --all-pairs for the transfer matrix of the bank")
    out_dir = Path(args.out) if args.out else Path("out") / "replay" / model_name_from_spec(args.model)
    report = exhaustive_replay(args.model, target, bank_dir, out_dir, top_n=args.top_n or 1,
                               exclude_models=options.names_list(args.exclude_models), cap=args.cap,
                               settings=MeasureSettings(repeat=args.repeat, fast_math=not args.exact_math),
                               anchor_fallback=not args.no_anchor_fallback, remeasure=args.remeasure,
                               rule_space=options.RULE_SPACE if args.rule_space is None else args.rule_space,
                               cluster=args.cluster)
    rows = []
    for k in report["kernels"]:
        chosen = k["chosen"]
        rows.append([k["kernel"][:44], k["class_key"].split("/")[0], str(k["candidates"]), str(k["valid"]),
                     ",".join(f"{r}:{n}" for r, n in k["failures"].items()) or "-",
                     f"{k['default_s'] * 1e3:.3f}" if k["default_s"] else "-",
                     f"{k['latency_s'] * 1e3:.3f}" if k["latency_s"] else "-",
                     f"{chosen['source_model']}/{chosen['rank']} {knob_text(chosen.get('knobs'))}".rstrip()
                     if chosen else "default"])
    print_table(rows, ["kernel", "kind", "cands", "valid", "failures", "default ms", "chosen ms", "source"])
    t = report["totals"]
    tuned, untuned = t["model_latency_tuned_s"], t["model_latency_untuned_s"]
    print(f"{report['model']}: search {t['search_s']:.1f} s (replay {t['replay_s']:.1f}, build {t['build_s']:.1f}, "
          f"run {t['run_s']:.1f}), coverage {100 * t['flop_coverage_valid']:.1f}% of FLOPs "
          f"({100 * t['flop_coverage_class_only']:.1f}% from same-class donors), "
          f"model {tuned * 1e3 if tuned else float('nan'):.2f} ms tuned vs "
          f"{untuned * 1e3 if untuned else float('nan'):.2f} ms untuned -> {out_dir / 'report.json'}")
    print_timing_caveats(t)
    return 0


def print_timing_caveats(totals: dict) -> None:
    """One line per model timing of the report that got no clean run (its figure above is likely too slow)."""
    for which, text in (totals.get("model_timing_caveats") or {}).items():
        print(f"caveat: the {which} model timing: {text}")


def replay_all_pairs(args: argparse.Namespace, target: object, bank_dir: Path) -> int:
    """Leave-one-model-out replay over every bank model into the transfer matrix."""
    from ..bank.info import bank_warnings
    from ..measure import MeasureSettings
    from ..target.folders import repo_models_dir
    from ..transfer.matrix import all_pairs
    if args.model or args.exclude_models:
        raise SchedrecError("--all-pairs replays every bank model leaving itself out; drop --model/--exclude-models "
                            "(use --models to restrict the target models)")
    out_dir = Path(args.out) if args.out else repo_models_dir() / target.key / ("space" if args.rule_space else "transfer")
    say(bank_warnings(bank_dir, target.key) if bank_dir.is_dir() else [])
    s = all_pairs(target, bank_dir, out_dir, top_n=args.top_n or 3, cap=args.cap or 48,
                  models=list(options.names_list(args.models)) or None,
                  settings=MeasureSettings(repeat=args.repeat, fast_math=not args.exact_math,
                                           runner=getattr(args, "runner", "local")),
                  anchor_fallback=not args.no_anchor_fallback, remeasure=args.remeasure,
                  add_donors=args.add_donors, rule_space=args.rule_space, cluster=args.cluster,
                  add_instances=args.add_instances)
    rows = [[m, str(v["kernels"]), str(v["kernels_with_valid"]), f"{v['candidates_per_kernel']:.1f}",
             f"{v['valid_per_kernel']:.1f}", str(v["median_over_best"]), str(v["default_over_best"]),
             str(v["best_over_tuned"])] for m, v in list(s["models"].items()) + [("ALL", s["all"])]]
    print_table(rows, ["target model", "kernels", "with valid", "cands/kernel", "valid/kernel",
                       "median/best", "default/best", "best/tuned"])
    print(f"{s['rows']} rows -> {out_dir}")
    return 0


def cmd_matrix(args: argparse.Namespace) -> int:
    """The transfer matrix: every bank model replayed from the others, every candidate measured (resumable)."""
    from ..target.spec import parse_target
    target = parse_target(args.target)
    args.model, args.exclude_models = None, ""
    return replay_all_pairs(args, target, own_folder(args, target.key))


def cmd_transfer(args: argparse.Namespace) -> int:
    """Budgeted transfer: the recommender ranks each kernel's transferred schedules and only the top-k are
    measured; writes a MetaSchedule database and a report (JSON and Markdown)."""
    from ..core.fileio import display_path
    from ..frontend.model_import import model_name_from_spec
    from ..measure import MeasureSettings
    from ..target.spec import parse_target
    from ..transfer.budgeted import budgeted_transfer, kinds_text
    from ..transfer.recommend import load_selector
    target = parse_target(args.target)
    bank_dir, rec_dir = donor_folders(args, target.key)
    selector = load_selector(args.selector, rec_dir, bank_dir, seed=args.seed, target_key=target.key)
    name = model_name_from_spec(args.model)
    budget_tag = f"k{args.budget_per_kernel}" if args.budget_per_kernel is not None else f"b{args.budget}"
    out_dir = Path(args.out) if args.out else Path("out") / "transfer" / f"{name}-{args.selector}-{budget_tag}"
    report = budgeted_transfer(args.model, target, bank_dir, out_dir, selector, budget=args.budget,
                               per_kernel=args.budget_per_kernel, top_n=args.top_n, cap=args.cap,
                               exclude_models=options.names_list(args.exclude_models),
                               settings=MeasureSettings(repeat=args.repeat, fast_math=not args.exact_math),
                               anchor_fallback=not args.no_anchor_fallback, untuned=not args.no_untuned,
                               recommender=display_path(rec_dir), fallback_samples=args.fallback_samples,
                               tune_missing=args.tune_missing, pack_weights=args.pack_weights,
                               rule_space=args.rule_space)
    t = report["totals"]
    tuned, untuned = t["model_latency_tuned_s"], t["model_latency_untuned_s"]
    line = (f"{report['model']} on {report['target_key']}: {tuned * 1e3 if tuned else float('nan'):.2f} ms "
            f"with {t['records_written']} transferred schedules")
    if untuned:
        line += f" (untuned {untuned * 1e3:.2f} ms, {untuned / tuned:.1f}x)" if tuned else ""
    print(line)
    print_timing_caveats(t)
    print(f"search {t['search_s']:.1f} s: replay {t['replay_s']:.1f}, featurize {t['featurize_s']:.2f}, "
          f"predict {t['predict_s']:.2f}, build {t['build_wall_s']:.1f} (wall), run {t['run_s']:.1f}; "
          f"{t['measurements']} measurements of {t['replayed_candidates']} candidates "
          f"({kinds_text(t['measured_by_kind'])}; +{t['defaults_measured']} defaults, {t['checked_only']} checked only) -> {out_dir / 'report.md'}")
    share = t.get("time_share_default")
    print(f"{t['kernels_via_samples']} kernels without a donor got schedules from their own design space "
          f"({t.get('kernels_short_tuned', 0)} by a short search, the others by samples); {t['kernels_default']} "
          f"kernels run unscheduled (plain loops): {'?' if share is None else f'{100 * share:.1f}%'} of kernel time")
    shipped = rec_dir / "heldout" / report["model"] / "report.json"
    if shipped.exists() and tuned:
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
        from ..compare.run import time_baselines
        from ..core.fileio import atomic_write_json
        report["baselines"], caveats = time_baselines(args.model, target, report["model"])
        if caveats:
            report["baseline_caveats"] = caveats
        for name, lat in report["baselines"].items():
            print(f"{name}: {lat * 1e3:.2f} ms ({'schedrec faster' if tuned < lat else 'schedrec slower'}: "
                  f"{lat / tuned:.2f}x), {target.config.get('num-cores', 1)} threads"
                  + (f"; caveat: {caveats[name]}" if name in caveats else ""))
        atomic_write_json(str(out_dir / "report.json"), report)  # with the baselines, for the README's figures
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    from training.registry import SELECTORS

    r = sub.add_parser("replay", help=cmd_replay.__doc__, description=cmd_replay.__doc__)
    options.model(r, required=False)
    options.input_shape(r)
    r.add_argument("--all-pairs", action="store_true", help="the transfer matrix (the same as `schedrec matrix`)")
    options.models(r, "with --all-pairs: only these bank models as targets (comma-separated)")
    options.target(r)
    options.bank(r)
    options.exclude_models(r)
    options.pool(r, top_n=None, cap=None, top_n_note="1; 3 with --all-pairs", cap_note="none; 48 with --all-pairs")
    options.repeat(r)
    options.matrix_resume(r)
    options.rule_space(r, use="replay")
    options.out(r, "out/replay/<model>")
    options.exact_math(r)
    options.cluster(r, "replay and measure each kernel (of the model; with --all-pairs, of the matrix)")
    r.set_defaults(func=cmd_replay)

    mx = sub.add_parser("matrix", help=cmd_matrix.__doc__, description=cmd_matrix.__doc__)
    options.models(mx, "only these bank models as targets (comma-separated)")
    options.target(mx)
    options.bank(mx)
    options.pool(mx)
    options.repeat(mx)
    options.matrix_resume(mx)
    options.rule_space(mx, use="matrix")
    options.out(mx, "models/<target-key>/transfer")
    options.exact_math(mx)
    options.runner(mx, " (with --cluster: the Dask workers build, on any CPU; docs/scale.md)")
    options.cluster(mx, "measure each kernel")
    mx.set_defaults(func=cmd_matrix)

    tf = sub.add_parser("transfer", help=cmd_transfer.__doc__, description=cmd_transfer.__doc__)
    options.model(tf)
    options.input_shape(tf)
    options.fallback(tf)
    tf.add_argument("--pack-weights", action="store_true",
                    help="mark the model's weights layout-free, so that the replayed schedules read them packed in "
                         "their own order; the packing is folded into the model's constants at build (the output "
                         "database then applies to a module imported the same way: see docs/cli.md)")
    budget = tf.add_mutually_exclusive_group(required=True)
    budget.add_argument("--budget", type=options.measurement_count, metavar="B",
                        help="candidate measurements in total, split across kernels by expected gain "
                             "(0: trust each kernel's top-ranked candidate after a correctness check)")
    budget.add_argument("--budget-per-kernel", type=options.measurement_count, metavar="K",
                        help="candidate measurements per kernel (the top K of its ranking)")
    options.target(tf)
    options.bank(tf)
    options.recommender(tf)
    tf.add_argument("--selector", default="lgbm", choices=SELECTORS,
                    help="which ranking picks the candidates to measure (lgbm)")
    tf.add_argument("--seed", type=int, default=0, help="seed of the random selector (0)")
    options.exclude_models(tf)
    options.pool(tf)
    options.rule_space(tf)
    options.repeat(tf)
    tf.add_argument("--no-untuned", action="store_true", help="do not time the untuned model for the report")
    tf.add_argument("--baselines", action="store_true",
                    help="also time PyTorch eager (zoo models) and ONNX Runtime on the same input")
    options.out(tf, "out/transfer/<model>-<selector>-<budget>")
    options.exact_math(tf)
    tf.set_defaults(func=cmd_transfer)
