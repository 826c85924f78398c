"""`schedrec bank seed`: a bank model tuned on from its kernels' measured rule instances (real TVM, small CNN)."""
from __future__ import annotations

import json
import shutil

import pytest

from recommender.bank.seed import MIN_TRIALS, plan_trials
from recommender.bank.store import read_records
from recommender.core.row_files import read_rows
from recommender.core.rows import RULE


def test_the_trials_are_split_by_time_share_with_a_floor_and_an_exact_sum():
    plan = plan_trials({"big": 9.0, "mid": 1.0, "tiny": 0.0}, extra_trials=40)
    assert sum(plan.values()) == 120 and plan["tiny"] == MIN_TRIALS
    assert plan["big"] > plan["mid"] > plan["tiny"]
    assert plan["big"] == pytest.approx(MIN_TRIALS + (120 - 3 * MIN_TRIALS) * 0.9, abs=1)
    # fewer trials than the floor asks for: an even split, never more than planned
    assert plan_trials({"a": 1.0, "b": 3.0}, extra_trials=2) == {"a": 2, "b": 2}
    assert plan_trials({}, 5) == {}


def _seed(*argv):
    from recommender.cli import main
    return main(["bank", "seed", *argv])


def test_seeding_commits_the_rule_instances_then_searches_and_resumes(two_model_bank, tmp_path, capsys):
    """The kernel's rule instances measured in the rule-space matrix go into its database with their costs, then
    the planned trials of the search; a rerun measures nothing. Records are only added."""
    from recommender.cli import main
    bank = tmp_path / "bank"
    shutil.copytree(two_model_bank, bank, ignore=shutil.ignore_patterns(".work", ".lock"))
    space = tmp_path / "space"  # the default place: beside the bank
    assert main(["replay", "--all-pairs", "--models", "wide", "--bank", str(bank), "--out", str(space),
                 "--cap", "2", "--repeat", "2", "--rule-space", "3"]) == 0
    rule_rows = [r for r in read_rows(space / "wide.jsonl.gz") if r.source_kind == RULE and r.ok]
    assert rule_rows
    _, before = read_records(bank / "wide")
    args = ["--models", "wide", "--bank", str(bank), "--extra-trials", "2", "--trials-per-iter", "2",
            "--population-size", "8", "--repeat", "2", "--min-repeat-ms", "1"]
    capsys.readouterr()
    assert _seed(*args) == 0
    out = capsys.readouterr().out
    assert "best rule ms" in out and "wide: seeded in" in out
    meta = json.loads((bank / "wide" / "meta.json").read_text())
    plan = meta["seeded"]
    tuned = [k for k, e in meta["kernels"].items() if e["tuned"]]
    assert sorted(plan["kernels"]) == sorted(tuned)
    assert sum(e["trials"] for e in plan["kernels"].values()) == 2 * len(tuned)
    _, after = read_records(bank / "wide")
    assert [r.trace_json for r in after[:len(before)]] == [r.trace_json for r in before]  # only added
    costs_after = {tuple(round(x, 12) for x in r.run_secs) for r in after}
    committed = 0
    for kernel, e in plan["kernels"].items():
        assert e["status"] == "done"
        mine = [r for r in rule_rows if r.target_kernel == kernel]
        assert e["rule_records"] + e["rule_failed"] == len(mine)
        committed += e["rule_records"]
        if e["rule_records"]:
            assert e["best_rule_s"] == min(sorted(r.costs)[len(r.costs) // 2] for r in mine)  # as records report it
            # the best of the kernel's records is no worse than its best rule instance
            assert e["best_after_s"] <= e["best_rule_s"] * (1 + 1e-9)
        for r in mine[:e["rule_records"]]:
            assert tuple(round(x, 12) for x in r.costs) in costs_after  # committed with its measured costs
    assert committed >= 1
    searched = len(after) - len(before) - committed
    assert 1 <= searched <= 2 * len(tuned)
    # a rerun of a finished seeding measures and adds nothing
    assert _seed(*args) == 0
    assert len(read_records(bank / "wide")[1]) == len(after)
    # another plan over a seeded model is refused, not mixed
    capsys.readouterr()
    assert _seed(*args[:4], "--extra-trials", "3", *args[6:]) == 2
    assert "rerun with that value" in capsys.readouterr().err


def test_seeding_refuses_what_it_cannot_seed_in_one_line(two_model_bank, tmp_path, capsys):
    bank = tmp_path / "bank"
    shutil.copytree(two_model_bank, bank, ignore=shutil.ignore_patterns(".work", ".lock"))
    assert _seed("--models", "nosuch", "--bank", str(bank)) == 2
    assert "not in" in capsys.readouterr().err
    assert _seed("--models", "wide", "--bank", str(bank)) == 2  # no rule-space matrix beside the bank
    err = capsys.readouterr().err
    assert "no rule-space matrix for wide" in err and "--rule-space" in err
    assert json.loads((bank / "wide" / "meta.json").read_text()).get("seeded") is None
