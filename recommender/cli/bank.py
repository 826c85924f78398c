"""`schedrec bank tune | import | add-run | info | index`: the bank of tuning records."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..core.errors import SchedrecError
from . import options
from .output import own_folder, print_table


def cmd_bank_tune(args: argparse.Namespace) -> int:
    """Tune models into the bank with MetaSchedule through the schedrec measurer (resumable)."""
    from ..bank.tune import tune_model
    from ..target.spec import parse_target
    target = parse_target(args.target)
    settings = _settings(args)
    bank_dir = own_folder(args, target.key, "reference" if args.reference else "bank")
    specs = options.names_list(args.models)
    if not specs:
        raise SchedrecError("--models is empty: give a comma-separated list such as zoo:resnet18,zoo:bert_base")
    search = dict(trials_per_iter=args.trials_per_iter, population_size=args.population_size)
    if args.cluster:  # every model's kernels in one queue of Dask tasks (docs/scale.md)
        from ..bank.tune_cluster import tune_on_cluster
        metas = tune_on_cluster(args.cluster, specs, target, bank_dir, args.trials_per_task, args.min_share, settings,
                                **search)
    else:
        metas = (tune_model(spec, target, bank_dir, args.trials_per_task, args.min_share, settings, **search)
                 for spec in specs)
    for meta in metas:
        print(f"{meta['model']}: done in {meta['last_run']['seconds']:.0f} s -> {bank_dir / meta['model']}")
    return 0


def cmd_bank_seed(args: argparse.Namespace) -> int:
    """Tune the bank's models on with MetaSchedule's search started from their kernels' rule instances (measured in
    the target's rule-space matrix) and best records: more trials per kernel, split by its share of the model's
    time and planned before any search (resumable; records are only added)."""
    from ..bank.seed import seed_model
    from ..bank.store import bank_models, read_meta
    from ..target.spec import parse_target
    target = parse_target(args.target)
    settings = _settings(args)
    bank_dir = own_folder(args, target.key, "bank")
    held = [p.name for p in bank_models(bank_dir)]
    names = list(options.names_list(args.models)) or held
    missing = [n for n in names if n not in held]
    if missing:
        raise SchedrecError(f"not in {bank_dir}: {', '.join(missing)} (bank models: {', '.join(held) or 'none'})")
    for name in names:
        meta = read_meta(bank_dir / name)
        if not meta.get("spec") or str(meta["spec"]).startswith("import:"):
            raise SchedrecError(f"{name}: its meta.json names no model spec to import (imported from a work dir, "
                                f"or filed from a run that recorded none); seeding re-imports the model")
        plan = seed_model(meta["spec"], target, bank_dir, args.extra_trials, Path(args.space) if args.space else None,
                          settings, args.trials_per_iter, args.population_size,
                          min_share=float(meta.get("min_flop_share", 0.01)))
        print_table([[k, str(e["trials"]), str(e.get("rule_records", "-")), _ms(e.get("best_before_s")),
                      _ms(e.get("best_rule_s")), _ms(e.get("best_after_s"))] for k, e in plan["kernels"].items()],
                    ["kernel", "trials", "rule records", "best before ms", "best rule ms", "best after ms"])
        print(f"{name}: seeded in {plan.get('seconds', 0):.0f} s -> {bank_dir / name}")
    return 0


def _ms(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds * 1e3:.4g}"


def cmd_bank_import(args: argparse.Namespace) -> int:
    """Add an existing MetaSchedule work dir to the bank."""
    from ..bank.info import import_workdir
    from ..target.spec import parse_target
    target = parse_target(args.target)
    s = import_workdir(Path(args.work_dir), own_folder(args, target.key), args.name, target.key, target.config)
    print(f"imported {s['model']}: {s['workloads']} workloads, {s['records']} records ({s['valid_records']} valid)")
    return 0


def cmd_bank_add_run(args: argparse.Namespace) -> int:
    """File a finished transfer or replay run's measured candidates in this CPU's bank as a model of its own."""
    from ..bank.add_run import add_run
    from ..target.spec import parse_target
    target = parse_target(args.target)
    bank_dir = own_folder(args, target.key)
    s = add_run(Path(args.run_dir), bank_dir, target.key, target.config, args.name,
                allow_model_in_bank=args.allow_model_in_bank)
    if not s["added"]:
        print(f"unchanged: {args.run_dir} is filed already as {s['model']} ({s['records']} records) in {bank_dir}")
        return 0
    print(f"added {s['model']}: {s['tuned_kernels']} kernels, {s['records']} measured records -> "
          f"{bank_dir / s['model']}" + (f" ({len(s['overridden'])} guard overridden: the note above)"
                                        if s["overridden"] else ""))
    return 0


def cmd_bank_info(args: argparse.Namespace) -> int:
    """Print the bank's models, kernels, classes, records and best latencies."""
    from ..bank.info import bank_summary
    from ..target.spec import parse_target
    target = parse_target(args.target)
    dirs = [own_folder(args, target.key)] if args.bank else [own_folder(args, target.key, kind)
                                                             for kind in ("bank", "reference")]
    found = False
    for d in dirs:
        if not d.is_dir():
            continue
        rows = bank_summary(d)
        found = True
        print(f"{d} ({len(rows)} models)")
        print_table([[r["model"], r["target_key"], str(r["kernels"]), f"{r['done_kernels']}/{r['tuned_kernels']}",
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


def cmd_bank_index(args: argparse.Namespace) -> int:
    """Make or refresh the bank's index (<bank>/.index/), which lets a transfer read only the donors it needs."""
    from ..bank.index import index_bank
    from ..bank.location import bank_location
    from ..target.spec import parse_target
    bank = bank_location(args.bank) if args.bank else own_folder(args, parse_target(args.target).key)
    index = index_bank(bank, rebuild=args.rebuild)
    print(f"{bank}: {len(index.models)} models ({len(index.reread)} read now), {len(index.classes)} classes, "
          f"{sum(c['groups'] for c in index.classes.values())} record groups indexed")
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    b = sub.add_parser("bank", help="tune, import and inspect the bank of tuning records",
                       description="The bank: per target, MetaSchedule tuning records of the models tuned there.")
    bsub = b.add_subparsers(dest="bank_command", metavar="BANK_COMMAND", required=True, parser_class=options.Parser)

    bt = bsub.add_parser("tune", help=cmd_bank_tune.__doc__, description=cmd_bank_tune.__doc__)
    options.models(bt, "comma-separated model specs, e.g. zoo:resnet18,zoo:bert_base", required=True)
    options.target(bt)
    options.bank(bt)
    bt.add_argument("--reference", action="store_true",
                    help="write to models/<target-key>/reference (long 'full tuning' runs) instead of the bank")
    bt.add_argument("--trials-per-task", type=options.positive_int, default=64, help="measured trials per kernel (64)")
    bt.add_argument("--min-share", type=options.share, default=0.01,
                    help="tune kernels holding at least this share of the model's FLOPs (0.01)")
    _search_options(bt)
    options.cluster(bt, "tune each kernel")
    bt.set_defaults(func=cmd_bank_tune)

    bs = bsub.add_parser("seed", help=cmd_bank_seed.__doc__, description=cmd_bank_seed.__doc__)
    options.models(bs, "comma-separated bank model names (default: every model in the bank)")
    options.target(bs)
    options.bank(bs)
    bs.add_argument("--extra-trials", type=options.positive_int, default=128,
                    help="measured trials per kernel on average, split by the kernels' shares of the model's time "
                         "(128: with the bank's 64, three times the first tuning)")
    bs.add_argument("--space", metavar="DIR",
                    help="the rule-space matrix whose rule instances seed the search (default: <bank>/../space)")
    _search_options(bs)
    bs.set_defaults(func=cmd_bank_seed)

    bi = bsub.add_parser("import", help=cmd_bank_import.__doc__, description=cmd_bank_import.__doc__)
    bi.add_argument("work_dir", metavar="DIR", help="a MetaSchedule work dir with its two database files")
    options.bank_name(bi, required=True)
    options.target(bi)
    options.bank(bi)
    bi.set_defaults(func=cmd_bank_import)

    ba = bsub.add_parser("add-run", help=cmd_bank_add_run.__doc__, description=cmd_bank_add_run.__doc__)
    ba.add_argument("run_dir", metavar="DIR", help="the output folder of a finished `schedrec transfer` or `replay`")
    ba.add_argument("--allow-model-in-bank", action="store_true",
                    help="file the run (under a new --name) even though the bank already holds its model: its "
                         "kernels then count twice in training and donor pools (refused otherwise); said and "
                         "recorded in the new model's meta.json. A rerun of a run filed already adds nothing")
    options.bank_name(ba, required=False)
    options.target(ba)
    options.bank(ba)
    ba.set_defaults(func=cmd_bank_add_run)

    bn = bsub.add_parser("info", help=cmd_bank_info.__doc__, description=cmd_bank_info.__doc__)
    options.target(bn)
    options.bank(bn)
    bn.set_defaults(func=cmd_bank_info)

    bx = bsub.add_parser("index", help=cmd_bank_index.__doc__, description=cmd_bank_index.__doc__)
    options.target(bx)
    options.bank(bx)
    bx.add_argument("--rebuild", action="store_true",
                    help="read every model folder again instead of only those changed since the index was written")
    bx.set_defaults(func=cmd_bank_index)


def _search_options(p: argparse.ArgumentParser) -> None:
    """The evolutionary search's and the measurer's options of `bank tune` and `bank seed`."""
    p.add_argument("--trials-per-iter", type=options.positive_int, default=32,
                   help="candidates per evolutionary-search round (32)")
    p.add_argument("--population-size", type=options.positive_int, default=256,
                   help="evolutionary-search population: schedules sampled and evolved per round (256)")
    options.runner(p)
    options.repeat(p)
    p.add_argument("--min-repeat-ms", type=options.positive_int, default=4, help="minimum length of one repeat (4)")
    p.add_argument("--build-workers", type=options.positive_int, default=2, help="parallel build workers (2)")
    options.exact_math(p)


def _settings(args: argparse.Namespace) -> object:
    """The measurer settings of `_search_options`."""
    from ..measure import MeasureSettings
    return MeasureSettings(repeat=args.repeat, min_repeat_ms=args.min_repeat_ms, runner=args.runner,
                           build_workers=args.build_workers, fast_math=not args.exact_math)
