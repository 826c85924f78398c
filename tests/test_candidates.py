"""Candidates from a bank: same-class records of other models, replayed and checked on a new model."""
from __future__ import annotations

from dataclasses import replace

import pytest

from recommender.transfer.candidates import BankIndex, replay_candidates
from recommender.frontend.kernels import extract_kernels
from recommender.measure import MeasureSettings, Measurer
from recommender.measure.measurer import OK
from recommender.frontend.model_import import import_model

from .cli_helpers import main_printing
from .conftest import save_pt2

pytestmark = pytest.mark.slow  # real tuning, replays or whole-model compiles: not in `make test-fast`


@pytest.fixture(scope="module")
def bank_and_new_model(donor_bank, target, tmp_path_factory):
    """The shared donor bank (every kernel of one small CNN) and a wider CNN to transfer to."""
    d = tmp_path_factory.mktemp("cand")
    new_path = save_pt2(d / "new.pt2", 16, 24)
    new = import_model(new_path, target.tvm())
    return donor_bank, extract_kernels(new, target.tvm()), new_path


def test_every_kernel_of_the_new_model_gets_valid_candidates(bank_and_new_model, target):
    bank, kernels, _ = bank_and_new_model
    index = BankIndex(bank)
    assert index.models == ["donor"]
    mods, refs = [], []
    for k in kernels:
        sources = index.sources_for(k, top_n=2)
        assert sources and all(s.model == "donor" and s.rank < 2 for s in sources), k.name
        assert sources == sorted(sources, key=lambda s: s.rank)
        cands = replay_candidates(k, sources, target.tvm())
        assert cands and all(c.status == "ok" for c in cands)
        assert len({str(c.replayed.trace_json) for c in cands}) == len(cands)  # duplicates dropped
        mods.append(cands[0].replayed.mod)
        refs.append(k.mod)
    with Measurer(target.config, MeasureSettings(repeat=2, min_repeat_ms=1)) as m:
        for mod, ref in zip(mods, refs):
            (r,) = m.measure([mod], reference=ref)
            assert r.status == OK, r.error


class _FaultyWorkers:
    """A Measurer whose isolated call, for chosen sources, makes its real build worker hang or abort."""

    def __init__(self, measurer: Measurer, faults: dict[int, str]) -> None:
        self.measurer, self.faults, self.target_config = measurer, faults, measurer.target_config

    def call_isolated(self, function: str, kwargs: dict, timeout_s: float) -> object:
        fault = self.faults.get(id(kwargs["trace_json"]))
        if fault == "hang":
            return self.measurer.call_isolated("recommender.measure.worker:hang", {"seconds": 600}, 3.0)
        if fault == "abort":
            return self.measurer.call_isolated("recommender.measure.worker:abort", {}, timeout_s)
        return self.measurer.call_isolated(function, kwargs, timeout_s)

    def call_isolated_many(self, function: str, kwargs_list: list, timeout_s: float) -> list:
        out = []
        for kwargs in kwargs_list:
            try:
                out.append(self.call_isolated(function, kwargs, timeout_s))
            except Exception as err:  # as Measurer.call_isolated_many hands it back
                out.append(err)
        return out


def test_isolated_replay_matches_in_process_and_a_crash_or_hang_costs_one_candidate(bank_and_new_model, target):
    import copy

    import tvm
    bank, kernels, _ = bank_and_new_model
    k = kernels[0]
    sources = [s.loaded() for s in BankIndex(bank).sources_for(k, top_n=2)]  # traces read, to copy below
    here = replay_candidates(k, sources, target.tvm())
    with Measurer(target.config, MeasureSettings(repeat=2, min_repeat_ms=1)) as m:
        isolated = replay_candidates(k, sources, target.tvm(), isolated=m)
        assert [c.status for c in isolated] == [c.status for c in here] and here[0].status == "ok"
        for a, b in zip(isolated, here):
            assert a.replayed.trace_json == b.replayed.trace_json and a.replayed.sch is None
            tvm.ir.assert_structural_equal(a.replayed.mod, b.replayed.mod)
        crasher, hanger = (replace(sources[0], trace_json=copy.deepcopy(sources[0].trace_json)) for _ in range(2))
        faulty = _FaultyWorkers(m, {id(crasher.trace_json): "abort", id(hanger.trace_json): "hang"})
        cands = replay_candidates(k, [crasher, hanger, sources[0]], target.tvm(), isolated=faulty)
        assert [c.status for c in cands] == ["replay_crash", "replay_timeout", "ok"], [c.error for c in cands]
        assert "died" in cands[0].error and "no answer within 3 s" in cands[1].error
        assert cands[2].replayed.trace_json == here[0].replayed.trace_json
        assert m.describe()["builder_restarts"] == 2
        (r,) = m.measure([cands[2].replayed.mod], reference=k.mod)  # the worker that took over still builds
        assert r.status == OK, r.error


def test_leave_one_model_out_and_cap(bank_and_new_model):
    bank, kernels, _ = bank_and_new_model
    index = BankIndex(bank)
    k = kernels[0]
    assert index.sources_for(k, top_n=2, exclude_models=("donor",)) == []
    assert len(index.sources_for(k, top_n=2, cap=1)) == 1


def _replay_argv(bank, new_path, out) -> list[str]:
    return ["replay", "--model", new_path, "--bank", str(bank), "--top-n", "2", "--repeat", "3", "--rule-space", "6",
            "--out", str(out)]


@pytest.fixture(scope="module")
def replay_run(bank_and_new_model, tmp_path_factory):
    """One exhaustive replay of the new model from the CLI, shared by the tests that read it or resume a
    copy of it: its output folder and what it printed."""
    bank, _, new_path = bank_and_new_model
    out = tmp_path_factory.mktemp("replay") / "replay"
    code, printed = main_printing(*_replay_argv(bank, new_path, out))
    assert code == 0
    return out, printed


def test_exhaustive_replay_cli_writes_report_database_and_a_faster_model(bank_and_new_model, replay_run):
    import json

    _, kernels, _ = bank_and_new_model
    out, printed = replay_run
    assert "coverage 100.0% of FLOPs" in printed
    report = json.loads((out / "report.json").read_text())
    t = report["totals"]
    assert report["excluded_models"] == ["new"] and t["kernels"] == len(kernels)
    for k in report["kernels"]:
        assert k["candidates"] >= 1 and k["default_s"] > 0
        assert k["latency_s"] <= k["default_s"]  # a transfer slower than none is not chosen
    assert t["records_written"] == sum(k["chosen"] is not None for k in report["kernels"]) >= 1
    assert (out / "database" / "database_tuning_record.json").exists()
    assert t["model_latency_tuned_s"] < t["model_latency_untuned_s"]
    assert t["flop_coverage_class_only"] == t["flop_coverage_valid"] == 1.0 and t["kernels_via_anchor"] == 0
    from recommender.core.row_files import read_rows
    rows = [r.to_json() for r in read_rows(out / "candidates.jsonl.gz")]
    assert len(rows) == t["kernels"] + t["candidates"]  # every candidate and every default schedule
    assert {r["target_kernel"] for r in rows} == {k["kernel"] for k in report["kernels"]}
    # the whole pool: the rule's fixed tiles and instances of its wider space, every one measured
    assert report["rule_space"] == 6
    rule = [r for r in rows if (r.get("knobs") or {}).get("fixed") is not None]
    assert any(r["knobs"]["fixed"] for r in rule) and any(not r["knobs"]["fixed"] for r in rule)
    assert all(r["status"] != "not_measured" for r in rows if r["match"] != "default")


def test_the_default_schedule_is_kept_unless_a_transfer_beats_it(bank_and_new_model, target):
    """The choice rule on every kernel: the fastest valid candidate if it beats the default, else the default."""
    from recommender.transfer import transfer_kernel
    bank, kernels, _ = bank_and_new_model
    index = BankIndex(bank)
    kept_default = 0
    with Measurer(target.config, MeasureSettings(repeat=3, min_repeat_ms=1)) as m:
        for k in kernels:
            choice = transfer_kernel(k, index, m, target.tvm(), top_n=2, exclude_models=(), cap=None)
            assert choice.default_s is not None and choice.candidate_s
            if min(choice.candidate_s) < choice.default_s:
                assert choice.chosen["latency_s"] == min(choice.candidate_s)
            else:
                assert choice.chosen is None and choice.latency_s == choice.default_s
                kept_default += 1
    # the tiny head matmul (1x16 @ 16x10) runs fastest untouched: parallel schedules only add overhead
    assert kept_default >= 1


@pytest.mark.bench  # minutes each on 2 cores: make test-bench (make test resumes a matrix from its rows: test_transfer_matrix)
def test_exhaustive_replay_resumes_from_its_rows_and_refuses_other_settings(bank_and_new_model, replay_run,
                                                                            tmp_path, capsys, monkeypatch):
    import gzip
    import json
    import shutil

    import recommender.transfer.exhaustive as exhaustive
    from recommender.cli import main
    from recommender.core.row_files import read_rows
    bank, kernels, new_path = bank_and_new_model
    out = tmp_path / "replay"
    shutil.copytree(replay_run[0], out)  # a finished run, resumed in a copy of its folder
    argv = _replay_argv(bank, new_path, out)
    first = json.loads((out / "report.json").read_text())
    rows_before = (out / "candidates.jsonl.gz").read_bytes()

    def no_measuring(*args, **kwargs):
        raise AssertionError("a finished kernel was replayed and measured again")

    with monkeypatch.context() as m:  # a second full replay: every kernel comes from its rows
        m.setattr(exhaustive, "transfer_kernel", no_measuring)
        assert main(argv) == 0
    assert (out / "candidates.jsonl.gz").read_bytes() == rows_before
    assert [k["chosen"] for k in json.loads((out / "report.json").read_text())["kernels"]] == \
        [k["chosen"] for k in first["kernels"]]
    rows = [r.to_json() for r in read_rows(out / "candidates.jsonl.gz")]
    keep = {kernels[0].name, kernels[1].name}
    kept = [r for r in rows if r["target_kernel"] in keep]
    with gzip.open(out / "candidates.jsonl.gz", "wt") as f:  # as if stopped after two kernels
        f.writelines(json.dumps(r) + "\n" for r in kept)
    assert main(argv) == 0
    again = [r.to_json() for r in read_rows(out / "candidates.jsonl.gz")]
    assert [r for r in again if r["target_kernel"] in keep] == kept  # not measured again
    second = json.loads((out / "report.json").read_text())
    for a, b in zip(first["kernels"], second["kernels"]):
        if a["kernel"] in keep:
            assert a == b  # the same choice, rebuilt from the rows
    t = second["totals"]
    assert t["records_written"] >= 1 and t["model_latency_tuned_s"] < t["model_latency_untuned_s"]
    capsys.readouterr()
    import psutil

    from .cli_helpers import still_running
    before = {p.pid for p in psutil.Process().children(recursive=True)}
    assert main(argv[:-2] + ["--top-n", "1", "--out", str(out)]) == 2
    assert "other settings (top_n)" in capsys.readouterr().err
    # the refused run closed the measurer it had started: no worker of it is left beside this process
    assert still_running([p.pid for p in psutil.Process().children(recursive=True) if p.pid not in before]) == []
    # the run was measured with vectorized exp/erf (the default); libm's would be other measurements
    assert json.loads((out / "run.json").read_text())["fast_math"] is True
    assert main(argv + ["--exact-math"]) == 2
    assert "other settings (fast_math)" in capsys.readouterr().err


def test_a_bank_model_of_another_target_is_flagged(bank_and_new_model, target, tmp_path):
    import json
    import shutil
    bank, _, _ = bank_and_new_model
    shutil.copytree(bank / "donor", tmp_path / "donor", ignore=shutil.ignore_patterns(".work", ".lock"))
    meta = json.loads((tmp_path / "donor" / "meta.json").read_text())
    meta["target_key"] = "llvm-skylake-avx512-8c"
    (tmp_path / "donor" / "meta.json").write_text(json.dumps(meta))
    assert BankIndex(bank).warnings(target.key) == []
    (w,) = BankIndex(tmp_path).warnings(target.key)
    assert "1 bank model was measured on another CPU" in w and "(donor on llvm-skylake-avx512-8c)" in w
    from recommender.bank.info import bank_warnings
    assert bank_warnings(tmp_path, target.key) == [w]  # from the meta files alone
