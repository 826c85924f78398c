"""`schedrec train | evaluate`: the target's rankers, fitted and scored on its transfer matrix."""
from __future__ import annotations

import argparse
from pathlib import Path

from . import options


def target_folder(args: argparse.Namespace) -> Path:
    """models/<key>/ for --target-key, or for the --target's key (the host CPU by default)."""
    from ..target.folders import target_dir
    if args.target_key:
        return target_dir(args.target_key)
    from ..target.spec import parse_target
    return target_dir(parse_target(args.target).key)


def cross_targets(args: argparse.Namespace) -> list[str]:
    """The target keys of --targets (`all`: every target folder with a transfer matrix), each checked."""
    from training.cross_target import matrix_targets

    from ..target.folders import repo_models_dir, target_dir
    if args.targets in (None, "all"):
        return matrix_targets(repo_models_dir())
    keys = list(options.names_list(args.targets))
    for key in keys:
        target_dir(key)  # refused with the list of targets that have a matrix
    return keys


def cmd_train(args: argparse.Namespace) -> int:
    """Train the target's rankers on its transfer matrix; saved to models/<key>/rankers/<name>/. With
    --targets, one lgbm ranker across those targets instead, saved to models/shared/rankers/lgbm/."""
    if args.targets is not None:
        if args.cluster:
            from ..core.errors import SchedrecError
            raise SchedrecError("--cluster fits one target's lgbm ranker; --targets fits on this machine")
        from training.cross_target import train_shared
        from training.report import update_shared_card

        from ..target.folders import repo_models_dir, shared_dir
        train_shared(repo_models_dir(), cross_targets(args), shared_dir())
        update_shared_card(shared_dir())
        return 0
    from training.train import train
    names = args.ranker or (["lgbm"] if args.cluster else ["lgbm", "tlp"])
    train(target_folder(args), names, bank_records=not args.no_bank_records, cluster=args.cluster)
    return 0


def cmd_cross_target(args: argparse.Namespace) -> int:
    from training.cross_target import evaluate_cross_target, format_cross_table, plot_against_n
    from training.report import update_shared_card

    from ..target.folders import repo_models_dir, shared_dir
    out = shared_dir() / "rankers"
    result = evaluate_cross_target(repo_models_dir(), cross_targets(args), out, n_folds=args.folds)
    json_path = out / result["result_file"]
    png_path = json_path.with_suffix(".png")
    plot_against_n(result, png_path)
    update_shared_card(shared_dir())
    print(f"Rankers across targets ({result['protocol']}; each target's figures measured on that CPU)\n")
    print(format_cross_table(result))
    print(f"\nwritten to {json_path} and {png_path}")
    return 0


def cmd_evaluate(args: argparse.Namespace) -> int:
    """Leave-one-model-out evaluation of rankers and baselines on the target's transfer matrix; with
    --cross-target, rankers trained across targets against each target's own (models/shared/rankers/)."""
    if args.cross_target:
        return cmd_cross_target(args)
    from training.evaluate import format_table, per_model_table
    from training.train import evaluate
    folder = target_folder(args)
    names = args.ranker or ["lgbm", "tlp", "heuristic", "random"] + (
        ["xgb_per_store"] if (folder / "features" / "per_store.npz").exists() else [])
    from training.train import SPREAD_SEEDS
    result = evaluate(folder, names, models=list(options.names_list(args.models)) or None,
                      fractions=args.learning_curve or (), bank_records=not args.no_bank_records,
                      seeds=SPREAD_SEEDS if args.seeds is None else args.seeds)
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
    for name, r in (result.get("seed_spread") or {}).get("rankers", {}).items():
        print(f"{name} over seeds {result['seed_spread']['seeds']}: " + ", ".join(
            f"{k} {r[k]['mean']:.3f} ({r[k]['min']:.3f}-{r[k]['max']:.3f})" for k in ("top1", "top5", "q1")))
    print(f"\n{result['seconds']} s; written to {folder / 'rankers' / 'evaluation.json'} (wall times: "
          f"evaluation_timing.json)")
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    tr = sub.add_parser("train", help=cmd_train.__doc__, description=cmd_train.__doc__)
    options.target_key(tr)
    options.rankers(tr, None, "lgbm, tlp, all (both), or a comma-separated list with baselines (default: all; "
                              "lgbm with --cluster)")
    options.bank_records(tr)
    options.cluster(tr, "fit the lgbm ranker with LightGBM's Dask interface")
    targets_option(tr, "train one lgbm ranker across these targets (comma-separated target keys, or all: every "
                       "target with a transfer matrix) -> models/shared/rankers/lgbm/")
    tr.set_defaults(func=cmd_train)

    ev = sub.add_parser("evaluate", help=cmd_evaluate.__doc__, description=cmd_evaluate.__doc__)
    options.target_key(ev)
    options.rankers(ev, None, "rankers and baselines to compare (default: lgbm,tlp,heuristic,random, and "
                              "xgb_per_store when its features exist)")
    options.models(ev, "only these held-out bank models (comma-separated)")
    ev.add_argument("--learning-curve", type=options.fractions, metavar="F[,F]",
                    help="also score with these shares of the training kernels, e.g. 0.25,0.5,1")
    options.bank_records(ev)
    ev.add_argument("--seeds", type=seed_list, metavar="S1,S2|none",
                    help="refit the seeded rankers (lgbm, random) with each seed and report mean and min-max "
                         "(default: 0,5,10,15,20; none: skip)")
    ev.add_argument("--cross-target", action="store_true",
                    help="per target: its own ranker, zero-shot (trained on the others), adapted with N of its "
                         "kernels, and shared; held-out models out of every target (resumable)")
    targets_option(ev, "the targets of --cross-target (default: all with a transfer matrix)")
    ev.add_argument("--folds", type=options.positive_int, metavar="N",
                    help="with --cross-target: deal the models into N folds instead of leaving one out at a time")
    ev.set_defaults(func=cmd_evaluate)


def targets_option(p: argparse.ArgumentParser, words: str) -> None:
    p.add_argument("--targets", metavar="K1,K2|all", nargs="?", const="all", help=words)


def seed_list(text: str) -> tuple[int, ...]:
    """`0,5,10` -> (0, 5, 10); `none` -> ()."""
    if text.strip().lower() == "none":
        return ()
    try:
        seeds = tuple(int(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"seeds are comma-separated integers or none, got {text!r}") from None
    if not seeds or any(x < 0 for x in seeds):
        raise argparse.ArgumentTypeError(f"seeds are comma-separated integers >= 0 or none, got {text!r}")
    return seeds
