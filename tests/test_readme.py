"""The README's and docs' generated parts are what the scripts write from the committed JSON (no hand-typed figures)."""
from __future__ import annotations

from .cli_helpers import ROOT, load_script


def test_generated_sections_are_what_the_committed_data_gives():
    """Every generated file is current: README.md's sections (headline, demo, suite, pages), the docs' sections
    (tests, zoo, CLI options) and each CPU's page docs/results/<key>.md, one per CPU folder under models/."""
    results = load_script("readme_results")
    assert results.stale_files() == [], "stale generated files: run python scripts/readme_results.py"
    pages = sorted(p.stem for p in (ROOT / "docs" / "results").glob("*.md"))
    shared = ["shared"] if (ROOT / "models" / "shared" / "card.md").exists() else []
    assert pages == sorted([d.name for d in results.target_dirs()] + shared)
    for key in (p for p in pages if p != "shared"):  # each CPU's page says which CPU it was measured on
        assert f"# Results measured on `{key}`" in (ROOT / "docs" / "results" / f"{key}.md").read_text()
    if shared:  # the page across targets names the CPU of every figure (the card's tables do)
        text = (ROOT / "docs" / "results" / "shared.md").read_text()
        assert text.startswith("# Results: rankers across targets") and "| target (measured on) |" in text


def test_the_headline_is_the_cpu_with_the_latest_latency_date_and_exhaustive_replay_comes_from_its_own_run(tmp_path):
    """The README's one table: held-out rows of the target whose latency.json holds the latest date, schedrec /
    PyTorch / ORT from that file, exhaustive replay's latency and search time from its own report."""
    import json
    results = load_script("readme_results")
    row = {"kind": "held-out", "cpu": "X", "threads": {"tvm": 2}, "schedrec_ms": 10.0, "pytorch_ms": 20.0,
           "onnxruntime_ms": 8.0, "schedrec": {"per_kernel": 2, "search_s": 30.0, "selector": "lgbm"}}
    for key, date in (("llvm-a-2c", "2026-12-05"), ("llvm-b-2c", "2026-12-01")):
        folder = tmp_path / "models" / key
        (folder / "heldout" / "m").mkdir(parents=True)
        (folder / "latency.json").write_text(json.dumps({"m": {**row, "date": date},
                                                         "bank_model": {"kind": "bank", "date": "2026-11-01"}}))
        (folder / "heldout" / "m" / "report.json").write_text(json.dumps(
            {"totals": {"model_latency_tuned_s": 0.012, "search_s": 600.0}}))
    assert results.headline_key(tmp_path) == "llvm-a-2c"
    text = results.render_headline(tmp_path)
    assert "#### Held-out zoo models on `llvm-a-2c` (X, 2 threads; 2026-12-05)" in text
    assert "| m | 10.0 | 30 s | 12.0 | 600 s | 5% | 20.0 | 8.0 |" in text
    assert "not timed side by side" in text and "bank_model" not in text


def test_the_demo_says_what_was_measured_within_the_budget_and_beyond_it():
    """A budgeted run's measurements split into the ranker's picks and the rest (rule tiles, replacements,
    samples), from the report's totals."""
    results = load_script("readme_results")
    report = {"per_kernel": 2, "totals": {"measurements": 150, "replacements": 94, "kernels": 28, "defaults_measured": 28}}
    text = results.demo_counts(report)
    assert text.startswith("150 candidate measurements for 28 kernels: 56 within the budget (the ranker's top 2 of "
                           "each kernel) and 94 beyond it (rule-built tiles")
    assert text.endswith("plus 28 defaults")
    # one pool, one budget: every measurement within it, counted per source kind
    report = {"per_kernel": 2, "totals": {"measurements": 50, "kernels": 28, "defaults_measured": 28,
                                          "measured_by_kind": {"donor": 12, "rule": 38, "space": 0}}}
    assert results.demo_counts(report) == ("50 candidate measurements for 28 kernels, at most 2 per kernel by the "
                                           "budget (by source: 12 donor, 38 rule), plus 28 defaults")


def test_page_links_are_made_relative_to_the_page():
    results = load_script("readme_results")
    text = "[card](models/k/card.md) ![p](models/k/a.png) [web](https://x.org) [here](#top)"
    assert results.relink(text, "../../") == ("[card](../../models/k/card.md) ![p](../../models/k/a.png) "
                                              "[web](https://x.org) [here](#top)")


def test_the_recorded_suite_runs_passed_and_every_deliberate_break_was_caught():
    """The suite runs the README reports passed (scripts/record_suite.py refuses to record a run over the
    README's time limits), and every deliberate break of scripts/break_once.py made its test fail."""
    import json
    timing = json.loads((ROOT / "tests" / "suite_timing.json").read_text())
    assert "full" in timing and all(run["failed"] == 0 for run in timing.values()), timing
    breaks = json.loads((ROOT / "tests" / "break_once.json").read_text())["breaks"]
    assert breaks and all(b["caught"] for b in breaks), [b["name"] for b in breaks if not b["caught"]]


def test_record_suite_refuses_a_run_with_failures_or_over_the_limit(tmp_path, monkeypatch):
    """A run with failures, or slower than the README promises, is not recorded: the record is left as it was."""
    record = load_script("record_suite")
    path = ROOT / "tests" / "suite_timing.json"
    before = path.read_bytes()
    for tier, summary in (("full", "1 failed, 218 passed, 2 deselected in 1071.61s (0:17:51)"),
                          ("fast", "91 passed in 400.0s (0:06:40)")):
        log = tmp_path / f"{tier}.log"
        log.write_text(f"....F....\n{summary}\n")
        monkeypatch.setattr("sys.argv", ["record_suite.py", tier, str(log)])
        assert record.main() == 1
    assert path.read_bytes() == before


def test_the_per_cpu_block_says_when_the_matrix_lags_the_bank_and_what_is_not_built(tmp_path):
    """Every CPU folder with a bank gets a block made from its files; a matrix built before the bank gained a
    model names that model, and a folder without a matrix says how to build one."""
    import json
    import shutil
    summary = load_script("target_summary")
    shipped = ROOT / "models" / "llvm-znver3-2c"
    for key, matrix_models in (("llvm-a-2c", None), ("llvm-b-2c", ["resnet18"])):
        folder = tmp_path / "models" / key
        for model in ("resnet18", "bert_tiny"):
            shutil.copytree(shipped / "bank" / model, folder / "bank" / model)
        if matrix_models:
            s = json.loads((shipped / "transfer" / "summary.json").read_text())
            s["bank_models"] = matrix_models
            (folder / "transfer").mkdir()
            (folder / "transfer" / "summary.json").write_text(json.dumps(s))
    text = summary.render_targets(tmp_path)
    a, b = text.split("#### Measured on `llvm-b-2c`")
    assert "#### Measured on `llvm-a-2c`" in a and "Bank: 2 models (bert_tiny, resnet18)" in a
    assert "Transfer matrix: not built yet" in a and "Rankers" not in a
    assert "Built before the bank had bert_tiny" in b and "5596 rows" in b
    (tmp_path / "empty" / "models").mkdir(parents=True)
    assert summary.render_targets(tmp_path / "empty") == "No CPU has a bank yet.\n"


def test_a_latency_row_s_caveat_is_printed_under_the_table_until_the_row_is_redone():
    card = load_script("make_card")
    row = {"kind": "bank", "schedrec_ms": 2.0, "pytorch_ms": 3.0, "schedrec": {"time_share_default": 0.0}}
    lines = card.latency_table({"a": row, "b": {**row, "caveat": "measured beside the tuner; redo"}}, {})
    assert lines[-2:] == ["", "- b: measured beside the tuner; redo"]
    assert not any(line.startswith("- ") for line in card.latency_table({"a": row}, {}))


def test_a_row_that_drifted_gets_a_caveat_with_its_columns_stall_shares():
    """Over 1.5x between a column's rounds: a caveat, with each column's worst CPU stall share where the row kept
    them; a steady row, or one without rounds, gets none; a caveat written into the row wins."""
    card = load_script("make_card")
    steady = {"date": "2026-12-03", "round_medians_ms": {"schedrec": [10.0, 11.0, 12.0], "pytorch": [20.0, 21.0]}}
    drifted = {**steady, "round_medians_ms": {"schedrec": [6.8, 12.4, 12.9], "pytorch": [20.0, 21.0]}}
    assert card.caveat(steady) is None and card.caveat({}) is None
    assert "1.90x" in card.caveat(drifted) and "redo with --redo" in card.caveat(drifted)
    assert "stall" not in card.caveat(drifted)
    assert "(CPU stall share, worst round: schedrec 1%, pytorch 50%)" in card.caveat(
        {**drifted, "stall_share": {"schedrec": 0.008, "pytorch": 0.502}})
    assert card.caveat({**drifted, "caveat": "measured beside the tuner"}) == "measured beside the tuner"
    lines = card.latency_table({"a": {**drifted, "kind": "bank"}, "b": {**steady, "kind": "bank"}}, {})
    assert [line[:4] for line in lines if line.startswith("- ")] == ["- a:"]


def test_the_per_cpu_block_gives_the_unseen_onnx_figures_where_they_were_measured(tmp_path):
    """benchmarks/unseen_onnx.py's figures (schedrec / ONNX Runtime / PyTorch, ms) appear in the block of the
    CPU they were measured on, with the command; a model whose schedrec column failed is left out."""
    import json
    summary = load_script("target_summary")
    assert summary.unseen_onnx_line(tmp_path) == ""
    rows = {"yolo": {"schedrec_ms": 32.61, "onnxruntime_ms": 14.2, "pytorch_ms": 29.8},
            "t5": {"schedrec_ms": 7.07, "pytorch_ms": 12.9}, "broken": {"errors": {"schedrec": "x"}}}
    (tmp_path / "unseen_onnx.json").write_text(json.dumps(
        {"selector": "lgbm of llvm-x-2c", "command": "python benchmarks/unseen_onnx.py", "models": rows}))
    line = summary.unseen_onnx_line(tmp_path)
    assert "yolo 32.6 / 14.2 / 29.8; t5 7.1 / - / 12.9 (`python benchmarks/unseen_onnx.py`" in line
    assert "lgbm of llvm-x-2c" in line and "broken" not in line
    assert summary.unseen_onnx_line(tmp_path, "torchvision_onnx", "torchvision models") == ""
    (tmp_path / "torchvision_onnx.json").write_text(json.dumps(
        {"selector": "lgbm of llvm-x-2c", "command": "python benchmarks/torchvision_onnx.py",
         "models": {"r3d_18": {"schedrec_ms": 266.2, "onnxruntime_ms": 281.7, "pytorch_ms": 277.6}}}))
    line = summary.unseen_onnx_line(tmp_path, "torchvision_onnx", "torchvision models")
    assert line.startswith("- torchvision models, ") and "r3d_18 266.2 / 281.7 / 277.6" in line
    assert "torchvision_onnx.md" in line


def test_the_latency_summary_counts_held_out_rows_apart_and_own_records_only_where_a_row_has_them():
    card = load_script("make_card")
    bank = {"kind": "bank", "schedrec_ms": 2.0, "pytorch_ms": 3.0, "onnxruntime_ms": 1.0, "tvm_tuned_ms": 2.5}
    held = {"kind": "held-out", "schedrec_ms": 4.0, "pytorch_ms": 5.0, "onnxruntime_ms": 3.0}
    slow = {**held, "schedrec_ms": 6.0}
    text = card.latency_summary({"a": bank, "b": held, "c": slow})
    assert "faster than PyTorch eager on 2 of 3 models, within 1.5x of ONNX Runtime on 1 of 3" in text
    assert "faster than the model's own tuning records on 1 of 1." in text  # held-out rows have none
    assert "Held-out rows alone: faster than PyTorch on 1 of 2, within 1.5x of ONNX Runtime on 1 of 2." in text
    assert "*held-out* rows (b, c)" in card.heldout_text({"a": bank, "b": held, "c": slow})
    assert card.heldout_text({"a": bank}) == ""
    rows = {"a": {**bank, "schedrec": {"selector": "lgbm (trained without a) on llvm-znver4-2c's matrix"}},
            "b": {**held, "schedrec": {"selector": "lgbm shipped for llvm-znver4-2c (the nearest target with rankers)"}},
            "c": {**slow, "schedrec": {"selector": "lgbm"}}, "d": {**bank, "schedrec": {"selector": "lgbm (trained without d)"}}}
    assert card.rankers_text(rows) == (
        "Rankers used: lgbm fitted without the row's model on llvm-znver4-2c's matrix (a); the lgbm shipped for "
        "llvm-znver4-2c (the nearest target with rankers) (b); this target's shipped lgbm (c); lgbm fitted without "
        "the row's model on this target's matrix (d). ")
    assert card.rankers_text({"a": bank}) == ""
    assert "| b | held-out | - |" in "\n".join(card.latency_table({"b": {**held, "schedrec": {}}}, {}))


def test_the_per_cpu_block_gives_the_onnx_coverage_per_import_path_where_it_was_measured(tmp_path):
    """benchmarks/onnx_coverage.py's replayed-donor FLOP share appears per model as zoo / ONNX, '-' for a path
    the model was not imported through; nothing where the probe was not run on this CPU."""
    import json
    summary = load_script("target_summary")
    assert summary.onnx_coverage_line(tmp_path) == ""
    (tmp_path / "onnx_coverage.json").write_text(json.dumps({"date": "2026-12-03", "models": {
        "resnet50": {"torch.export (zoo)": {"replayed": 0.9998}, "ONNX": {"replayed": 0.71}},
        "encoder": {"ONNX": {"replayed": 0.995}}}}))
    line = summary.onnx_coverage_line(tmp_path)
    assert "(2026-12-03): resnet50 100.0% / 71.0%; encoder - / 99.5% (`python benchmarks/onnx_coverage.py`" in line
    assert f"[table](benchmarks/results/{tmp_path.name}/onnx_coverage.md)" in line


def test_the_per_cpu_block_gives_the_side_by_side_database_comparisons_run_on_that_cpu(tmp_path):
    """benchmarks/ab_databases.py's medians (an older revision's database against now) appear per model with the
    ratio and a link to the table; nothing where none was run."""
    import json
    summary = load_script("target_summary")
    assert summary.ab_line(tmp_path) == ""
    (tmp_path / "ab.resnet50.json").write_text(json.dumps(
        {"model": "resnet50", "rev": "702fbaa", "date": "2026-12-03", "median_ms": {"702fbaa": 61.412, "now": 56.908}}))
    line = summary.ab_line(tmp_path)
    assert "resnet50 61.4 ms at 702fbaa, 56.9 now (0.93x, 2026-12-03;" in line
    assert f"(benchmarks/results/{tmp_path.name}/ab.resnet50.md)" in line


def test_the_model_profile_sets_each_kernel_s_time_in_the_model_beside_its_time_alone():
    """benchmarks/model_profile.rows: calls per inference from the instrument's counts, the median in-model
    time per call against the search's measured latency (the default's where no schedule was chosen)."""
    import sys
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import model_profile
    report = {"kernels": [
        {"kernel": "conv", "class_key": "conv2d/s4r3:x", "flops": 2e6, "latency_s": 1e-5, "chosen": {"source_model": "a"}},
        {"kernel": "fc", "class_key": "matmul/s2r1:y", "flops": 1e6, "latency_s": None, "default_s": 4e-5},
        {"kernel": "unused", "class_key": "pool/s4r2:z", "flops": 1.0, "latency_s": 1e-6}]}
    calls = {"conv": [2e-5, 2e-5, 3e-5, 2e-5], "fc": [1e-5, 1.2e-5], "vm.builtin.reshape": [1e-6, 1e-6]}
    rows = model_profile.rows(report, calls, iters=2)
    assert [r["kernel"] for r in rows] == ["conv", "fc"]  # 2 calls x 20 us ahead of 1 call x 11 us
    conv, fc = rows
    assert conv["calls"] == 2 and conv["in_model_s"] == 2e-5 and conv["ratio"] == 2.0 and conv["source"] == "a"
    assert fc["calls"] == 1 and fc["alone_s"] == 4e-5 and fc["source"] == "default"
    assert abs(conv["gflops"] - 100.0) < 1e-9


def test_each_card_s_bank_hours_are_its_results_page_s():
    """The card sums the bank's tuning seconds before rounding, as the results page does: one figure, not two
    that differ by a rounding (each card was 0.01 h off once)."""
    import re
    for card in sorted(ROOT.glob("models/*/card.md")):
        page = ROOT / "docs" / "results" / f"{card.parent.name}.md"
        hours = re.search(r"Total tuning time: ([\d.]+) h", card.read_text())
        if hours and page.exists():
            assert f"{hours.group(1)} h of tuning" in page.read_text(), card.parent.name
