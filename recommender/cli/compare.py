"""`schedrec compare`: every method on one model, side by side, same measurer."""
from __future__ import annotations

import argparse
from pathlib import Path

from . import options
from .output import donor_folders


def cmd_compare(args: argparse.Namespace) -> int:
    """Every method on one model in one run, same measurer: untuned, the recommender and random-k at each
    per-kernel budget, exhaustive replay, MetaSchedule from scratch, the reference, PyTorch, ONNX Runtime."""
    from ..compare.run import compare, finish_stopped, format_compare
    from ..frontend.model_import import model_name_from_spec
    from ..measure import MeasureSettings
    from ..target.spec import parse_target
    target = parse_target(args.target)
    bank_dir, rec_dir = donor_folders(args, target.key)
    out_dir = Path(args.out) if args.out else Path("out") / "compare" / model_name_from_spec(args.model)
    if args.finish:
        print(format_compare(finish_stopped(out_dir, baselines=not args.no_baselines)))
        return 0
    data = compare(args.model, target, bank_dir, rec_dir, out_dir, budgets=args.budgets, selectors=args.selectors,
                   top_n=args.top_n, cap=args.cap, exhaustive=args.exhaustive,
                   scratch_cap_s=args.scratch_cap_s, scratch_factor=args.scratch_factor,
                   refine_s=args.refine_s, fallback_samples=args.fallback_samples,
                   tune_missing=args.tune_missing, baselines=not args.no_baselines, rule_space=args.rule_space,
                   settings=MeasureSettings(fast_math=not args.exact_math))
    print(format_compare(data))
    print(f"-> {out_dir / 'compare.json'}, {out_dir / 'compare.md'}, {out_dir / 'compare.png'}")
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    cp = sub.add_parser("compare", help=cmd_compare.__doc__, description=cmd_compare.__doc__)
    options.model(cp)
    options.input_shape(cp)
    options.fallback(cp)
    cp.add_argument("--budgets", type=options.budgets, default=(1, 2, 3, 5), help="per-kernel budgets (1,2,3,5)")
    cp.add_argument("--selectors", type=options.selector_names, default=("lgbm", "random"),
                    help="selectors to compare (lgbm,random)")
    options.target(cp)
    options.bank(cp)
    options.recommender(cp)
    options.pool(cp, anchor_fallback=False)
    options.rule_space(cp)
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
    options.out(cp, "out/compare/<model>")
    options.exact_math(cp)
    cp.set_defaults(func=cmd_compare)
