"""Budgeted transfer end to end on real TVM: a small bank, a new model exported to ONNX in the test, the
shipped ranker choosing what to measure, and the output database applied by stock TVM."""
from __future__ import annotations

import itertools
import json

import numpy as np
import pytest

from recommender.measure import MeasureSettings, Measurer
from recommender.core.rows import NOT_MEASURED, OK, RULE, SAMPLED, SOURCE_KINDS
from recommender.core.row_files import read_rows

from .cli_helpers import ROOT, main_printing
from .conftest import small_cnn

pytestmark = pytest.mark.slow
SHIPPED = ROOT / "models" / "llvm-znver3-2c"


@pytest.fixture(scope="module")
def bank_and_onnx(donor_bank, tmp_path_factory):
    """The shared donor bank (every kernel of one small CNN, 3 records each) and a wider CNN exported to
    ONNX (batch norm folded into conv + add by the exporter: other classes)."""
    import torch
    d = tmp_path_factory.mktemp("transfer")
    model, args = small_cnn(width=16, size=24, seed=1)
    path = str(d / "wide.onnx")
    torch.onnx.export(model, args, path, dynamo=False, input_names=["x"])
    return donor_bank, path


def _transfer_argv(bank, onnx_path, out, *budget: str, selector: str = "lgbm",
                   untuned: bool = False) -> list[str]:
    return (["transfer", "--model", onnx_path, "--bank", str(bank), "--recommender", str(SHIPPED),
             "--selector", selector, *budget, "--repeat", "3", "--out", str(out)] +
            ([] if untuned else ["--no-untuned"]))


def _transfer(bank, onnx_path, out, *budget: str, selector: str = "lgbm", untuned: bool = False) -> int:
    from recommender.cli import main
    return main(_transfer_argv(bank, onnx_path, out, *budget, selector=selector, untuned=untuned))


@pytest.fixture(scope="module")
def k2_run(bank_and_onnx, tmp_path_factory):
    """One budgeted transfer at 2 measurements per kernel (lgbm), shared by the tests that only read it:
    its output folder and what it printed."""
    bank, onnx_path = bank_and_onnx
    out = tmp_path_factory.mktemp("k2") / "out"
    code, printed = main_printing(*_transfer_argv(bank, onnx_path, out, "--budget-per-kernel", "2"))
    assert code == 0
    return out, printed


def _records(db_dir) -> list:
    from tvm.s_tir import meta_schedule as ms
    return ms.database.JSONDatabase(work_dir=str(db_dir)).get_all_tuning_records()


def test_top2_per_kernel_measures_two_candidates_and_writes_the_fastest_measured_trace(k2_run):
    from featurize.trace_json import strip_postproc, trace_to_json
    out, printed = k2_run
    assert "measurements" in printed
    report = json.loads((out / "report.json").read_text())
    t = report["totals"]
    with_cands = [k for k in report["kernels"] if k["candidates"]]
    rows = read_rows(out / "candidates.jsonl.gz")
    # the budget bounds what is measured: at most two per kernel, whatever their source (donor, rule instance,
    # design-space schedule), failed ones included; the default apart
    assert with_cands and len(with_cands) < t["measurements"] <= 2 * len(with_cands) < t["replayed_candidates"]
    for k in with_cands:
        mine = [r for r in rows if r.target_kernel == k["kernel"] and r.status != NOT_MEASURED and r.replayed]
        assert k["measured"] == len(mine) <= 2 and k["default_s"] > 0
        for kind in SOURCE_KINDS:
            assert sum(r.source_kind == kind for r in mine) <= 2
    assert sum(t["measured_by_kind"].values()) == t["measurements"]
    assert t["measured_by_kind"] == {kind: sum(1 for r in rows if r.replayed and r.status != NOT_MEASURED
                                               and r.source_kind == kind) for kind in SOURCE_KINDS}
    # the pool held rule instances beyond the fixed tiles, and the ranker measured some of what it held
    assert any(r.source_kind == RULE and not r.fixed_rule for r in rows)
    assert any(k["measured"] >= 2 for k in with_cands)  # so that "the fastest" is a choice
    assert t["search_s"] >= t["replay_s"] + t["run_s"] and t["featurize_s"] > 0 and t["predict_s"] > 0
    assert (out / "report.md").read_text().startswith("# Budgeted transfer")
    assert sum(r.status == NOT_MEASURED for r in rows) == t["replayed_candidates"] - t["measurements"]
    # every record is the trace of its kernel's fastest valid measured candidate, and beats the default
    by_kernel: dict[str, list] = {}
    for r in rows:
        by_kernel.setdefault(r.target_kernel, []).append(r)
    best = {}
    for name, rs in by_kernel.items():
        default = next(r for r in rs if r.is_default)
        ok = [r for r in rs if not r.is_default and r.status == OK and r.latency_s]
        fastest = min(ok, key=lambda r: r.latency_s, default=None)
        if fastest is not None and fastest.latency_s < default.latency_s:
            best[json.dumps(fastest.trace, sort_keys=True)] = name
    records = _records(out / "database")
    assert len(records) == t["records_written"] == len(best) == t["kernels_scheduled_in_build"] >= 1
    # (a record holds the measured schedule's whole trace: the replayed part, then what postprocessing added)
    written = {json.dumps(strip_postproc(trace_to_json(r.trace)), sort_keys=True) for r in records}
    assert written == set(best)


def test_a_rerun_resumes_and_measures_nothing(bank_and_onnx, k2_run, tmp_path, monkeypatch):
    import shutil
    import recommender.transfer.budgeted as budgeted
    bank, onnx_path = bank_and_onnx
    out = tmp_path / "resume"
    shutil.copytree(k2_run[0], out)  # a finished run, rerun in a copy of its folder
    first = json.loads((out / "report.json").read_text())
    rows_before = (out / "candidates.jsonl.gz").read_bytes()

    def no_measuring(*args, **kwargs):
        raise AssertionError("a finished kernel was measured again")

    monkeypatch.setattr(budgeted, "_measure", no_measuring)
    assert _transfer(bank, onnx_path, out, "--budget-per-kernel", "2") == 0
    again = json.loads((out / "report.json").read_text())
    assert (out / "candidates.jsonl.gz").read_bytes() == rows_before
    assert [k["chosen"] for k in again["kernels"]] == [k["chosen"] for k in first["kernels"]]
    assert again["totals"]["measurements"] == first["totals"]["measurements"]
    # another budget in the same folder is refused, with the setting named
    assert _transfer(bank, onnx_path, out, "--budget-per-kernel", "1") == 2


def test_a_model_timing_with_no_clean_run_is_reported_with_its_caveat(bank_and_onnx, k2_run, tmp_path, monkeypatch):
    """The whole-model timing is timed again while the stall detector says another process spoiled it; where no
    try is clean the last is kept, and the report says so: a JSON field, a Markdown line and a printed line
    (here the detector reads every try as spoiled and two tries are allowed; the finished run's kernels are
    resumed, so only the model is timed)."""
    import shutil

    import recommender.transfer.budgeted as budgeted
    from recommender.measure import contention, measurer
    bank, onnx_path = bank_and_onnx
    assert "model_timing_caveats" in json.loads((k2_run[0] / "report.json").read_text())["totals"]  # {}: clean
    out = tmp_path / "contended"
    shutil.copytree(k2_run[0], out)

    def no_measuring(*args, **kwargs):
        raise AssertionError("a finished kernel was measured again")

    monkeypatch.setattr(budgeted, "_measure", no_measuring)
    monkeypatch.setattr(contention, "spoiled", lambda share: True)  # the detector only: TVM runs as ever
    monkeypatch.setattr(measurer, "MODEL_RETRIES", 1)
    monkeypatch.setattr(measurer, "MODEL_RETRY_WAIT_S", 0.0)
    code, printed = main_printing(*_transfer_argv(bank, onnx_path, out, "--budget-per-kernel", "2"))
    assert code == 0
    t = json.loads((out / "report.json").read_text())["totals"]
    assert t["model_latency_tuned_s"] > 0 and set(t["model_timing_caveats"]) == {"tuned"}
    assert t["model_timing_caveats"]["tuned"].startswith("no clean run in 2 tries: another process took the CPU")
    assert "- **caveat** (model timing with the chosen schedules): no clean run in 2 tries" in (
        out / "report.md").read_text()
    assert "caveat: the tuned model timing: no clean run in 2 tries" in printed


def test_budget_zero_trusts_the_checked_top1_and_a_total_budget_is_split(bank_and_onnx, tmp_path):
    bank, onnx_path = bank_and_onnx
    out0 = tmp_path / "b0"
    assert _transfer(bank, onnx_path, out0, "--budget", "0", untuned=True) == 0
    t0 = json.loads((out0 / "report.json").read_text())["totals"]
    kernels0 = json.loads((out0 / "report.json").read_text())["kernels"]
    # (a kernel with no candidate at all has its default timed, for the report's share of plain loops)
    assert t0["measurements"] == 0 and t0["defaults_measured"] == sum(1 for k in kernels0 if not k["candidates"])
    assert t0["checked_only"] == sum(1 for k in kernels0 if k["candidates"]) >= 1
    assert t0["records_written"] >= 1
    if not t0["model_timing_caveats"]:  # a loaded machine (every try stalled: parallel kernels wait a scheduler
        # slice each, loop nests do not) gets its caveat, which says nothing of the schedules
        assert t0["model_latency_tuned_s"] < t0["model_latency_untuned_s"]
    out2 = tmp_path / "b2"
    assert _transfer(bank, onnx_path, out2, "--budget", "2") == 0
    report = json.loads((out2 / "report.json").read_text())
    t = report["totals"]
    assert t["measurements"] == 2  # a failed one spends its measurement: no replacement
    assert sum(k["measured"] for k in report["kernels"] if not k["checked_only"]) == t["measurements"]
    assert report["totals"]["checked_only"] == t0["checked_only"] - 2


def test_anchor_fallback_end_to_end_and_switched_off(bank_and_onnx, k2_run, tmp_path):
    """The ONNX export folds batch norm into conv + add: no same-class donor in the torch-exported bank, so
    its convs get the anchor's schedules (same conv, other epilogue); --no-anchor-fallback leaves them none
    (and without a short search or samples, no candidate but the conv rule's own tiles)."""
    from recommender.core.rows import ANCHOR
    bank, onnx_path = bank_and_onnx
    on, on_rows = json.loads((k2_run[0] / "report.json").read_text()), read_rows(k2_run[0] / "candidates.jsonl.gz")
    out = tmp_path / "off"
    assert _transfer(bank, onnx_path, out, "--budget-per-kernel", "1", "--fallback-samples", "0",
                     "--tune-missing", "0", "--no-anchor-fallback") == 0
    off, off_rows = json.loads((out / "report.json").read_text()), read_rows(out / "candidates.jsonl.gz")
    assert on["totals"]["kernels_via_anchor"] >= 1 and off["totals"]["kernels_via_anchor"] == 0
    assert any(r.match == ANCHOR for r in on_rows) and not any(r.match == ANCHOR for r in off_rows)
    assert on["totals"]["flop_coverage_transferred"] > off["totals"]["flop_coverage_transferred"]
    anchored = {k["kernel"] for k in on["kernels"] if k["match"] == ANCHOR and k["valid"]}
    assert anchored and all(r.source_kind == RULE for r in off_rows  # no donor: the conv rule's instances at most
                            if r.target_kernel in anchored and not r.is_default)
    # they replayed into the pool, where the ranker weighs them against the conv rule's instances (which win
    # here since one pool: the choice is the ranker's, not the fallback's)
    assert any(r.match == ANCHOR and r.replayed for r in on_rows)


def test_a_kernel_without_donors_gets_measured_design_space_samples(bank_and_onnx, target):
    """No bank model has a layer norm: with samples it gets schedules drawn from its own design space, ranked
    like any candidate, measured with the output check, and the fastest is chosen if it beats
    the default; without samples it has no candidate."""
    from recommender.transfer.candidates import BankIndex
    from recommender.frontend.kernels import extract_kernels
    from recommender.measure import Measurer
    from recommender.frontend.model_import import import_model
    from recommender.transfer.selection import KernelCandidates, RandomK, ranked
    from recommender.transfer.choice import choice_from_rows
    from recommender.transfer.kernel import DESIGN_SPACE, LOOP_RULE, find_candidates, measure_kernel

    from .onnx_nets import encoder, export_onnx
    bank, _ = bank_and_onnx
    path = export_onnx(*encoder(d=64, heads=2, ff=128, layers=1, seq=16), str(bank.parent / "enc.onnx"))
    tt = target.tvm()
    (ln,) = [k for k in extract_kernels(import_model(path, tt), tt) if "layer_norm" in k.class_key]
    index = BankIndex(bank)
    with Measurer(target.config, MeasureSettings(repeat=3, min_repeat_ms=1)) as m:
        assert not find_candidates(ln, index, m, tt, 3, (), None).valid
        found = find_candidates(ln, index, m, tt, 3, (), None, samples=3)
        assert found.match == SAMPLED and 1 <= len(found.valid) <= 3 + 2  # the draws and the loop rules
        models = [c.source.model for c in found.candidates]
        assert models[0] == LOOP_RULE and set(models) == {LOOP_RULE, DESIGN_SPACE}  # rules first
        assert all(c.source.kernel == ln.name for c in found.candidates)
        rows = tuple(found.replayed_rows("enc"))
        assert sorted(ranked(RandomK(seed=3), KernelCandidates(("enc", ln.name), rows))) == list(range(len(rows)))
        choice = measure_kernel(found, m, tt)
    samples = [r for r in choice.rows if r.match == SAMPLED]
    assert len(samples) == len(found.valid) and all(r.status == OK for r in samples)
    fastest = min(samples, key=lambda r: r.latency_s)
    if fastest.latency_s < choice.default_s:
        assert choice.chosen["match"] == SAMPLED and choice.latency_s == fastest.latency_s
    else:
        assert choice.chosen is None and choice.latency_s == choice.default_s
    resumed = choice_from_rows(ln, choice.rows, tt)  # a resumed run reports it the same way
    assert resumed.match == SAMPLED and resumed.latency_s == choice.latency_s


def test_a_failed_pick_spends_its_measurement_and_nothing_else_is_measured(target):
    """A budget of one on a kernel whose one donor computes a wrong result: that candidate is measured (and
    fails the output check), the kernel keeps its default, and nothing more is measured: no replacement, no
    design-space draws beyond the budget."""
    from dataclasses import replace

    from recommender.core.rows import CLASS
    from recommender.frontend.kernels import kernel_from_mod
    from recommender.transfer.kernel import FoundCandidates, measure_kernel, sampled_candidates

    from .kernels_tir import add1024, add1024_wrong, as_mod
    tt = target.tvm()
    kernel = kernel_from_mod("add1024", as_mod(add1024))
    with Measurer(target.config, MeasureSettings(repeat=3, min_repeat_ms=1)) as m:
        wrong = sampled_candidates(kernel_from_mod("add1024", as_mod(add1024_wrong)), m, 1)[0]
        donor = replace(wrong, source=replace(wrong.source, model="donor", match=CLASS))
        found = FoundCandidates(kernel, [donor, replace(donor, source=replace(donor.source, rank=1))], CLASS, 0.0)
        sent = []
        measure = m.measure
        m.measure = lambda mods, **kw: sent.append(len(mods)) or measure(mods, **kw)
        choice = measure_kernel(found, m, tt, selected=[0])
    assert sent == [2]  # the default and the one pick, in one call
    assert [r.status for r in choice.rows[1:]] == ["wrong_result", NOT_MEASURED] and choice.chosen is None
    assert choice.latency_s == choice.default_s


def test_a_heavy_kernel_without_donors_gets_the_best_records_of_a_short_search(target):
    """find_candidates with tune_trials: where no donor replays, a short MetaSchedule search of the kernel's
    design space (schedrec's measurer) gives its candidates, best first, checked and measured like donors';
    trials_per_kernel gives the search to kernels of 1% of the FLOPs or more only."""
    from recommender.transfer.candidates import BankIndex
    from recommender.frontend.kernels import Kernel, kernel_from_mod
    from recommender.transfer.kernel import DESIGN_SPACE, LOOP_RULE, find_candidates, measure_kernel
    from recommender.transfer.short_tune import SHORT_TUNE, trials_per_kernel

    from .kernels_tir import as_mod, matmul64
    tt = target.tvm()
    kernel = kernel_from_mod("matmul64", as_mod(matmul64))
    index = BankIndex.__new__(BankIndex)
    index.by_class, index.by_anchor = {}, {}  # no donor at all
    with Measurer(target.config, MeasureSettings(repeat=3, min_repeat_ms=1)) as m:
        found = find_candidates(kernel, index, m, tt, 1, (), 4, tune_trials=8, samples=2)
        choice = measure_kernel(found, m, tt, selected=found.valid[:2])
        drawn = find_candidates(kernel, index, m, tt, 1, (), 4, tune_trials=0, samples=1)
    sources = [c.source for c in found.candidates]
    assert found.match == SAMPLED and 1 <= len(sources) <= 4 and found.valid
    assert {s.model for s in sources} == {SHORT_TUNE} and [s.rank for s in sources] == list(range(len(sources)))
    assert [s.latency_s for s in sources] == sorted(s.latency_s for s in sources)  # the search's best first
    measured = [r for r in choice.rows if r.source_model == SHORT_TUNE and r.status != NOT_MEASURED]
    assert measured and all(r.status == OK and r.latency_s > 0 and r.match == SAMPLED for r in measured)
    assert choice.default_s > 0 and (choice.chosen is None or choice.chosen["source_model"] == SHORT_TUNE)
    # no search asked: the loop rule (the i x j loops in parallel) and a random draw
    assert [c.source.model for c in drawn.candidates] == [LOOP_RULE, DESIGN_SPACE]
    small = Kernel("tiny", 1, 1.0, "elementwise", [((4,), "float32")])
    assert trials_per_kernel([kernel, small], 32) == {"matmul64": 32, "tiny": 0}



def test_a_kernel_its_tile_rule_builds_gets_no_short_search(target):
    """A conv without donors whose tile rule builds is not searched: on all 24 kernels whose candidates had both
    (RegNet's grouped convs on three CPUs), the rule's best beat the search's. Its candidates are the rule's
    (and the few random samples any kernel without donors gets)."""
    from recommender.transfer.candidates import BankIndex
    from recommender.frontend.kernels import kernel_from_mod
    from recommender.transfer.kernel import CONV_RULE, find_candidates
    from recommender.transfer.short_tune import SHORT_TUNE

    from .test_conv_rules import _group_conv
    kernel = kernel_from_mod("group_conv", _group_conv(ci=64, co=64, groups=4, hw=14))
    index = BankIndex.__new__(BankIndex)
    index.by_class, index.by_anchor = {}, {}  # no donor at all
    with Measurer(target.config, MeasureSettings(repeat=3, min_repeat_ms=1)) as m:
        found = find_candidates(kernel, index, m, target.tvm(), 1, (), 4, tune_trials=8, samples=2)
    sources = {c.source.model for c in found.candidates}
    assert found.valid and CONV_RULE in sources and SHORT_TUNE not in sources  # samples still drawn: cheap


def test_a_short_search_goes_to_convs_and_matmuls_from_a_quarter_of_the_share_the_others_need():
    """RegNet's last grouped convs (0.8% of its FLOPs each, no donor) ran 14 ms in loop-rule loops: a conv or
    matmul gets the search from 0.25% of the model's FLOPs, any other kernel from 1%."""
    from recommender.frontend.kernels import Kernel
    from recommender.transfer.short_tune import trials_per_kernel
    args = [((4,), "float32")]
    kernels = [Kernel("big", 1, 990.0, "elementwise/s2r0:@add", args),
               Kernel("conv", 1, 5.0, "group_conv2d/s4r3:@group_conv2d_nchw", args),
               Kernel("add", 1, 5.0, "elementwise/s2r0:@add", args),
               Kernel("tiny_matmul", 1, 1.0, "matmul/s2r1:@matmul", args)]
    assert trials_per_kernel(kernels, 32) == {"big": 32, "conv": 32, "add": 0, "tiny_matmul": 0}


def test_pack_weights_transfers_packing_schedules_and_the_model_computes_the_same(bank_and_onnx, tmp_path, target):
    """--pack-weights: the replayed schedules pack the weights they read (RewriteLayout on layout-free
    buffers), the database applies to the module imported the same way, and with the packing folded into
    the constants (pack_weights_ahead) the model computes what the plain one does."""
    import tvm
    from tvm import relax
    from tvm.s_tir import meta_schedule as ms

    from recommender.measure.worker import pack_weights_ahead
    from recommender.frontend.model_import import import_model
    bank, onnx_path = bank_and_onnx
    out = tmp_path / "packed"
    assert _transfer(bank, onnx_path, out, "--budget-per-kernel", "1", "--fallback-samples", "0", "--tune-missing",
                     "0", "--pack-weights") == 0
    report = json.loads((out / "report.json").read_text())
    assert report["pack_weights"] is True and report["totals"]["model_latency_tuned_s"] > 0
    tt = target.tvm()
    packed = import_model(onnx_path, tt, pack_weights=True).mod
    with tt, ms.database.JSONDatabase(work_dir=str(out / "database"), allow_missing=False):
        scheduled = relax.transform.MetaScheduleApplyDatabase()(packed)
    folded = pack_weights_ahead(scheduled)
    assert not folded.same_as(scheduled)  # some kernel packed its weight, and the packing moved out
    x = tvm.runtime.tensor(np.random.default_rng(0).standard_normal((1, 3, 24, 24)).astype("float32"))
    outs = [relax.VirtualMachine(tvm.compile(m, target=tt), tvm.cpu())["main"](x).numpy()
            for m in (folded, import_model(onnx_path, tt).mod)]
    np.testing.assert_allclose(outs[0], outs[1], rtol=1e-4, atol=1e-4)


def test_the_database_works_with_stock_tvm_on_the_users_own_module(bank_and_onnx, k2_run, target, tmp_path):
    """The user imports the ONNX file with TVM's frontend and applies the database with
    relax.transform.MetaScheduleApplyDatabase: the records apply, the output is right, the latency matches."""
    import onnx
    import tvm
    import tvm_ffi
    from tvm import relax
    from tvm.relax.frontend.onnx import from_onnx
    from tvm.s_tir import meta_schedule as ms

    from recommender.frontend.model_import import import_model
    _, onnx_path = bank_and_onnx
    out = k2_run[0]
    report = json.loads((out / "report.json").read_text())
    tt = tvm.target.Target(target.config)
    mod = from_onnx(onnx.load(onnx_path), keep_params_in_input=False)
    with tt:
        mod = tvm.transform.Sequential([relax.transform.DecomposeOpsForInference(),
                                        relax.transform.CanonicalizeBindings(), relax.get_pipeline("zero")])(mod)
    plain = mod
    with tt, ms.database.JSONDatabase(work_dir=str(out / "database"), allow_missing=False):
        tuned = relax.transform.MetaScheduleApplyDatabase()(mod)
    scheduled = [g for g, f in tuned.functions.items()
                 if isinstance(f, tvm.tirx.PrimFunc) and f.attrs and f.attrs.get("tirx.is_scheduled")]
    assert len(scheduled) >= report["totals"]["records_written"] >= 1
    dev = tvm.cpu()
    x = tvm.runtime.tensor(np.random.default_rng(0).standard_normal((1, 3, 24, 24)).astype("float32"), dev)
    # timed as schedrec times its own builds (the timing worker, the target's threads), before anything runs
    # in this process: TVM's and torch's thread pools here spin after a call and slowed a 60 us model 2-3x
    libs = {name: tvm.compile(m, target=tt) for name, m in (("tuned", tuned), ("plain", plain))}
    for name, lib in libs.items():
        lib.export_library(str(tmp_path / f"{name}.so"))
    best = {}
    inputs = [((1, 3, 24, 24), "float32")]
    schedrecs = import_model(onnx_path, tt).mod  # the module schedrec built and timed for its report
    settings = MeasureSettings(repeat=7, min_repeat_ms=20)
    with Measurer(target.config, settings) as measurer:
        for _ in range(4):  # interleaved rounds, side by side with schedrec's own build; the best median of each
            timed = {name: measurer.time_model_library(str(tmp_path / f"{name}.so"), inputs) for name in libs}
            timed["schedrec"] = measurer.measure_model(schedrecs, inputs, database_dir=str(out / "database"))
            for name, r in timed.items():
                assert r.ok, r.error
                best[name] = min(best.get(name, r.median), r.median)
    outs = [relax.VirtualMachine(libs[name], dev)["main"](x).numpy() for name in ("tuned", "plain")]
    np.testing.assert_allclose(outs[0], outs[1], rtol=1e-4, atol=1e-4)
    # the same schedules: every kernel schedrec scheduled is, TIR for TIR, a kernel of the user's module
    with tt, ms.database.JSONDatabase(work_dir=str(out / "database"), allow_missing=False):
        mine = relax.transform.MetaScheduleApplyDatabase()(schedrecs)
    users = [f for f in tuned.functions.values() if isinstance(f, tvm.tirx.PrimFunc)]
    for g, f in mine.functions.items():
        if isinstance(f, tvm.tirx.PrimFunc) and f.attrs and f.attrs.get("tirx.is_scheduled"):
            assert any(tvm_ffi.structural_equal(f, u) for u in users), g.name_hint
    # so the same speed, within what a 0.1 ms model's timing varies on a shared machine (CI saw 1.6x and, with two rounds, 2.1x)
    assert 0.5 < best["tuned"] / best["schedrec"] < 2.0, best
    assert best["tuned"] < best["plain"], best
    # and the report's figure, timed alone in the transfer run, is of the same order
    assert 0.33 < best["schedrec"] / report["totals"]["model_latency_tuned_s"] < 3.0, (best, report["totals"])


def test_bad_budgets_and_recommenders_get_one_line_errors(bank_and_onnx, tmp_path, capsys):
    from recommender.cli import main
    bank, onnx_path = bank_and_onnx
    with pytest.raises(SystemExit) as e:
        main(["transfer", "--model", onnx_path, "--budget", "2", "--budget-per-kernel", "1"])
    assert e.value.code == 2 and "not allowed with argument" in capsys.readouterr().err
    with pytest.raises(SystemExit) as e:
        main(["transfer", "--model", onnx_path, "--budget", "-1"])
    assert e.value.code == 2 and "0 or more" in capsys.readouterr().err
    assert main(["transfer", "--model", onnx_path, "--bank", str(bank), "--recommender", str(tmp_path),
                 "--budget", "1", "--out", str(tmp_path / "x")]) == 2
    assert "no trained lgbm ranker" in capsys.readouterr().err


@pytest.mark.bench  # every method, each model timed: make test-bench
def test_compare_runs_every_method_on_an_onnx_model_in_one_run(bank_and_onnx, tmp_path, target):
    from recommender.compare.run import compare
    bank, onnx_path = bank_and_onnx
    out = tmp_path / "cmp"
    def run():
        return compare(onnx_path, target, bank, SHIPPED, out, budgets=(1, 2), exhaustive="measure", top_n=2,
                       fallback_samples=2, selectors=("lgbm", "random", "random@1", "fixed-tiles"), rule_space=4,
                       scratch_cap_s=1.0, scratch_first_trials=1, scratch_population=16,
                       settings=MeasureSettings(repeat=3, min_repeat_ms=1))
    data = run()
    m = data["methods"]
    assert {"lgbm-k1", "lgbm-k2", "random-k1", "random-k2", "exhaustive", "untuned", "metaschedule",
            "onnxruntime"} <= set(m)
    saved = json.loads((out / "compare.json").read_text())
    assert saved["methods"].keys() == m.keys() and set(saved["rankers"]) == {"lgbm"}
    k1 = m["lgbm-k1"]["measurements"]  # one per kernel with a candidate
    assert 1 <= k1 < m["lgbm-k2"]["measurements"] <= 2 * k1 and m["exhaustive"]["measurements"] >= k1
    # the budget bounds every selector; the fixed tiles alone measure the rule's fixed tiles at most
    assert m["random@1-k2"]["measurements"] <= 2 * k1 and m["fixed-tiles-k2"]["measurements"] <= 2 * k1
    assert m["exhaustive"]["measurements"] >= max(v.get("measurements", 0) for v in m.values())
    for sel, k in itertools.product(("lgbm", "random"), (1, 2)):  # each budget's own call, over the fixed costs
        e = m[f"{sel}-k{k}"]
        assert e["measure_s"] > 0 and e["search_s"] == pytest.approx(
            e["replay_s"] + e["defaults_s"] + e["rank_s"] + e["measure_s"], abs=0.02)
    for name in ("lgbm-k1", "lgbm-k2", "random-k2", "exhaustive"):
        assert 0 < m[name]["latency_s"] < m["untuned"]["latency_s"], name
    curve = m["metaschedule"]["curve"]
    assert len(curve) == 1 and curve[0]["trials"] >= 1  # the cap stops it after its first round
    assert set(data["time_to_match"]) >= {"lgbm-k1", "exhaustive"}
    assert (out / "compare.md").read_text().count("\n| ") >= len(m)
    assert (out / "compare.png").stat().st_size > 10_000
    # stopped after MetaSchedule from scratch (the baselines lost): the same command measures nothing again
    saved = json.loads((out / "compare.json").read_text())
    baseline_names = ("pytorch", "torch.compile", "onnxruntime")
    saved["methods"] = {k: v for k, v in saved["methods"].items() if k not in baseline_names}
    (out / "compare.json").write_text(json.dumps(saved))
    again = run()["methods"]
    assert {k: again[k] for k in saved["methods"]} == saved["methods"] and "onnxruntime" in again


def test_a_finished_run_is_filed_in_the_bank_with_its_checked_measurements_only(bank_and_onnx, k2_run, tmp_path,
                                                                                  target, capsys):
    """bank add-run: every kernel measured beside its default becomes a tuned kernel of a new bank model, its
    valid measured candidates its records (what the bank reads and replays like a tuning run's); a run of
    another CPU, a name the bank has and a held-out model are refused, and nothing is written then."""
    from recommender.bank.add_run import add_run
    from recommender.bank.store import read_meta, read_records
    from recommender.cli import main
    from recommender.core.errors import BankError
    from recommender.transfer.candidates import BankIndex
    mine, out, rows, measured = _bank_copy_and_run(bank_and_onnx, k2_run, tmp_path, target)
    want = [r for r in rows if not r.is_default and r.ok and r.target_kernel in measured]
    assert main(["bank", "add-run", str(out), "--bank", str(mine), "--name", "wide_run"]) == 0
    assert "added wide_run" in capsys.readouterr().out
    meta = read_meta(mine / "wide_run")
    workloads, records = read_records(mine / "wide_run")
    assert meta["target_key"] == target.key and len(records) == len(want) and all(r.ok for r in records)
    assert set(meta["kernels"]) == {r.target_kernel for r in want} and len(workloads) == len(meta["kernels"])
    assert sorted(r.latency for r in records) == pytest.approx(sorted(r.latency_s for r in want))
    index = BankIndex(mine)  # the bank reads it: its kernels, classes and records, fastest first
    assert {k.name for k in index.kernels["wide_run"]} == set(meta["kernels"])
    assert all(k.sources and k.best_s == min(s.latency_s for s in k.sources) for k in index.kernels["wide_run"])
    before = sorted(p.name for p in mine.iterdir())
    with pytest.raises(BankError, match="measured on"):
        add_run(out, mine, "llvm-other-2c", target.config, "elsewhere")
    (mine.parent / "heldout" / "wide_again").mkdir(parents=True)
    with pytest.raises(BankError, match="held-out"):
        add_run(out, mine, target.key, target.config, "wide_again")
    assert sorted(p.name for p in mine.iterdir()) == before


def _bank_copy_and_run(bank_and_onnx, k2_run, tmp_path, target):
    """A copy of the test bank at a target folder's place, the k=2 run's folder and rows, and the kernels whose
    default that run measured (what add-run may file)."""
    import shutil
    mine = tmp_path / "models" / target.key / "bank"
    shutil.copytree(bank_and_onnx[0], mine)
    out = k2_run[0]
    rows = read_rows(out / "candidates.jsonl.gz")
    return mine, out, rows, {r.target_kernel for r in rows if r.is_default and r.ok}


def _run_copy(run_dir, dest, keep=lambda r: True, change=lambda r: r):
    """A copy of a run folder whose rows are those `keep` accepts, each passed through `change`."""
    import shutil

    from recommender.core.row_files import write_rows
    shutil.copytree(run_dir, dest)
    write_rows(dest / "candidates.jsonl.gz", [change(r) for r in read_rows(run_dir / "candidates.jsonl.gz") if keep(r)])
    return dest


def test_add_run_refuses_unchecked_unfinished_and_held_out_runs_and_a_banked_model_unless_asked(
        bank_and_onnx, k2_run, tmp_path, target, capsys):
    """bank add-run's guards, each refusing with nothing written: a candidate whose output check failed or that
    was only checked (its kernel's default not measured) is never filed, and a run with nothing else is refused;
    an unfinished run (no report.json) is refused; a held-out model is refused under any --name; a name the bank
    has is refused (a bank folder is never replaced); and a model the bank already holds is refused unless
    --allow-model-in-bank is given, which says what it let through and records it in meta.json."""
    import dataclasses
    import shutil

    from recommender.bank.add_run import add_run
    from recommender.bank.store import bank_models, read_meta, read_records
    from recommender.core.errors import BankError
    from recommender.core.rows import WRONG_RESULT
    mine, out, rows, measured = _bank_copy_and_run(bank_and_onnx, k2_run, tmp_path, target)
    kernels = sorted({r.target_kernel for r in rows if not r.is_default and r.ok} & measured)
    assert len(kernels) >= 2
    # one kernel's candidates failed their output check (their timings kept); another's default was not measured
    wrong, unchecked = kernels[0], kernels[1]
    mixed = _run_copy(out, tmp_path / "mixed", keep=lambda r: not (r.is_default and r.target_kernel == unchecked),
                      change=lambda r: dataclasses.replace(r, status=WRONG_RESULT)
                      if r.target_kernel == wrong and not r.is_default else r)
    s = add_run(mixed, mine, target.key, target.config, "mixed")
    meta, (_, records) = read_meta(mine / "mixed"), read_records(mine / "mixed")
    assert s["added"] and wrong not in meta["kernels"] and unchecked not in meta["kernels"] and meta["kernels"]
    assert len(records) == sum(1 for r in rows if not r.is_default and r.ok and r.target_kernel in meta["kernels"])
    nothing = _run_copy(out, tmp_path / "nothing", change=lambda r: r if r.is_default else dataclasses.replace(
        r, status=WRONG_RESULT))
    unfinished = tmp_path / "unfinished"
    shutil.copytree(out, unfinished)
    (unfinished / "report.json").unlink()
    listed = set(bank_models(mine))
    for run_dir, name, match in ((nothing, "nothing", "no measured, output-checked candidate"),
                                 (unfinished, "unfinished", "unfinished run"),
                                 (out, "mixed", "already has a model named mixed")):
        with pytest.raises(BankError, match=match):
            add_run(run_dir, mine, target.key, target.config, name)
    # the run's model is held out: refused under another name too
    (mine.parent / "heldout" / read_meta(mine / "mixed")["source"]["model"]).mkdir(parents=True)
    with pytest.raises(BankError, match="held-out models.*as other_name"):
        add_run(out, mine, target.key, target.config, "other_name")
    shutil.rmtree(mine.parent / "heldout")
    assert set(bank_models(mine)) == listed and not (mine / "nothing").exists() and not (mine / "unfinished").exists()
    # the model is in the bank (as "mixed"): refused unless asked
    with pytest.raises(BankError, match="already holds .* --allow-model-in-bank"):
        add_run(out, mine, target.key, target.config, "again")
    assert not (mine / "again").exists()
    capsys.readouterr()
    code, printed = main_printing("bank", "add-run", str(out), "--bank", str(mine), "--name", "again",
                                  "--allow-model-in-bank")
    assert code == 0 and "added again" in printed and "guard overridden" in printed
    assert "override (--allow-model-in-bank): the bank already holds" in capsys.readouterr().err
    assert read_meta(mine / "again")["source"]["overridden"] and set(bank_models(mine)) == listed | {mine / "again"}


def test_an_interrupted_or_repeated_add_run_files_the_model_once_with_every_record(bank_and_onnx, k2_run,
                                                                                    tmp_path, target, monkeypatch):
    """An add-run stopped after its records were packed but before its meta.json leaves a folder no reader lists;
    the rerun completes it with every record. Run again (same or another --name), it adds nothing and says so:
    the model is filed once."""
    from recommender.bank import add_run as add_run_module
    from recommender.bank.store import bank_models, read_records
    from recommender.core.errors import BankError
    from recommender.transfer.candidates import BankIndex
    mine, out, rows, measured = _bank_copy_and_run(bank_and_onnx, k2_run, tmp_path, target)
    want = sum(1 for r in rows if not r.is_default and r.ok and r.target_kernel in measured)
    listed = set(bank_models(mine))

    def stopped(folder, meta):
        raise KeyboardInterrupt

    with monkeypatch.context() as m:
        m.setattr(add_run_module, "write_meta", stopped)
        with pytest.raises(KeyboardInterrupt):
            add_run_module.add_run(out, mine, target.key, target.config, "wide_run")
    assert (mine / "wide_run").is_dir() and set(bank_models(mine)) == listed  # packed, not listed
    assert "wide_run" not in BankIndex(mine).kernels
    s = add_run_module.add_run(out, mine, target.key, target.config, "wide_run")
    assert s["added"] and len(read_records(mine / "wide_run")[1]) == want
    assert set(BankIndex(mine).kernels) == {p.name for p in listed} | {"wide_run"}
    for name in ("wide_run", "another_name", None):  # a rerun, the same run under another name, the default name
        notes = []
        again = add_run_module.add_run(out, mine, target.key, target.config, name, log=notes.append)
        assert not again["added"] and again["model"] == "wide_run" and "nothing added" in notes[0]
    assert set(bank_models(mine)) == listed | {mine / "wide_run"} and not (mine / "another_name").exists()
    assert len(read_records(mine / "wide_run")[1]) == want
    code, printed = main_printing("bank", "add-run", str(out), "--bank", str(mine))
    assert code == 0 and printed.startswith("unchanged:")
    # a run with other records of the same model is not a rerun: refused as a model the bank holds
    fewer = _run_copy(out, tmp_path / "fewer", keep=lambda r: r.is_default or r.target_kernel != sorted(measured)[0])
    with pytest.raises(BankError, match="already holds"):
        add_run_module.add_run(fewer, mine, target.key, target.config, "fewer")


def test_profile_times_every_call_of_the_transferred_model_beside_each_kernels_recorded_time(bank_and_onnx, k2_run,
                                                                                            target, tmp_path,
                                                                                            monkeypatch):
    """`schedrec profile MODEL --database DIR`: each kernel with a record is a row with as many calls as the
    model makes of it (its weight) and its record's isolated time; the VM's builtins and the time between
    calls are rows of their own; a folder that is not a database is refused before anything is built. With
    --cold, each recorded kernel is timed alone again, one call a repeat with flushed caches, beside the rest."""
    from recommender.core.errors import SchedrecError
    from recommender.compare.profile import profile_model
    from recommender.measure import Measurer
    _, onnx_path = bank_and_onnx
    out = k2_run[0]
    timed_with = []  # the settings of every kernel timing the profile asks for
    measure = Measurer.measure

    def spy(self, mods, *args, settings=None, **kw):
        timed_with.append(settings)
        return measure(self, mods, *args, settings=settings, **kw)
    monkeypatch.setattr(Measurer, "measure", spy)
    code, printed = main_printing("profile", onnx_path, "--database", str(out / "database"), "--runs", "3",
                                  "--cold", "--out", str(tmp_path / "profile.json"))
    # one kernel timing call, cold: caches flushed, one call a repeat
    assert [s and (s.flush_cache, s.number, s.min_repeat_ms) for s in timed_with] == [(True, 1, 0)]
    assert code == 0 and "between calls" in printed and "the hook costs" in printed and "cold caches" in printed
    data = json.loads((tmp_path / "profile.json").read_text())
    report = json.loads((out / "report.json").read_text())
    recorded = sorted(sum(float(x) for x in r.run_secs) / len(r.run_secs) for r in _records(out / "database"))
    kernels = {r["symbol"]: r for r in data["rows"] if r["kind"] == "kernel"}
    weights = {k["kernel"]: k["weight"] for k in report["kernels"]}
    assert kernels and len(kernels) == len(recorded)
    assert all(r["calls"] == weights[name] for name, r in kernels.items())
    assert sorted(r["isolated_s"] / r["calls"] for r in kernels.values()) == pytest.approx(recorded)
    assert any(r["kind"] == "vm builtin" for r in data["rows"])
    t = data["totals"]
    assert t["model_s"] > 0 and t["between_calls_s"] >= 0 and t["calls_per_run"] == sum(r["calls"] for r in data["rows"])
    assert t["kernel_s"] == pytest.approx(sum(r["model_s"] for r in kernels.values()))
    assert data["cold_settings"]["flush_cache"] and data["cold_settings"]["number"] == 1
    assert all(r["cold_s"] > 0 for r in kernels.values()) and t["kernels_without_cold_time"] == []
    assert t["kernels_cold_s"] == pytest.approx(sum(r["cold_s"] for r in kernels.values()))
    # cold vs warm is not asserted: the warm times are the records', timed at transfer under other load (CI
    # saw a cold sum 7% under them); the spy above checks the cold timing's settings instead
    code, _ = main_printing("profile", onnx_path, "--cold", "--out", str(tmp_path / "nodb.json"))
    assert code != 0 and not (tmp_path / "nodb.json").exists()  # nothing to time cold without a database
    with pytest.raises(SchedrecError, match="not a MetaSchedule database"):
        profile_model(onnx_path, target, tmp_path, runs=1)
