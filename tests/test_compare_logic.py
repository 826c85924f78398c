"""The comparison's bookkeeping without TVM: search time per budget, time-to-match, the table and plot,
and the budgeted plan's pieces (expected gain, check-only marks)."""
from __future__ import annotations

import pytest

from recommender.compare.run import KernelRun, Measured, format_compare, plot_compare, time_to_match
from recommender.frontend.kernels import Kernel
from recommender.core.rows import CLASS, CandidateRow
from recommender.transfer.budgeted import expected_gain, take_planned


def _methods() -> dict:
    return {
        "lgbm-k1": {"kind": "lgbm", "budget": 1, "latency_s": 0.010, "search_s": 100.0, "measurements": 20},
        "lgbm-k3": {"kind": "lgbm", "budget": 3, "latency_s": 0.008, "search_s": 200.0, "measurements": 60},
        "random-k1": {"kind": "random", "budget": 1, "latency_s": 0.020, "search_s": 100.0, "measurements": 20},
        "exhaustive": {"kind": "exhaustive", "latency_s": 0.0078, "search_s": 1000.0, "measurements": 900},
        "untuned": {"kind": "untuned", "latency_s": 1.0, "search_s": 0.0},
        "reference": {"kind": "reference", "latency_s": 0.006, "search_s": 36000.0},
        "pytorch": {"kind": "pytorch", "latency_s": 0.012, "search_s": 0.0},
        "metaschedule": {"kind": "scratch", "latency_s": 0.009, "search_s": 1500.0, "curve": [
            {"search_s": 500.0, "trials": 100, "latency_s": 0.5},
            {"search_s": 1000.0, "trials": 300, "latency_s": 0.015},
            {"search_s": 1500.0, "trials": 700, "latency_s": 0.009}]},
    }


def test_time_to_match_divides_the_first_matching_checkpoint_and_censors_the_rest():
    ttm = time_to_match(_methods())
    assert ttm["random-k1"] == {"ratio": 10.0, "censored": False, "scratch_s": 1000.0}  # 0.015 <= 0.020
    assert ttm["lgbm-k1"] == {"ratio": 15.0, "censored": False, "scratch_s": 1500.0}
    assert ttm["lgbm-k3"] == {"ratio": 7.5, "censored": True, "scratch_s": 1500.0}  # never reached 8 ms
    assert ttm["exhaustive"]["censored"] and "untuned" not in ttm and "pytorch" not in ttm
    assert time_to_match({k: v for k, v in _methods().items() if k != "metaschedule"}) == {}


def test_table_gives_quality_against_exhaustive_and_reference(tmp_path):
    data = {"model": "m", "target_key": "llvm-x-2c", "threads": 2, "date": "2026-11-30", "methods": _methods()}
    data["time_to_match"] = time_to_match(data["methods"])
    md = format_compare(data)
    assert "llvm-x-2c (2 threads)" in md
    line = next(ln for ln in md.splitlines() if ln.startswith("| lgbm-k3 "))
    assert "| 8.00 | 0.975 | 0.750 | 200.0 | 60 | > 7.5x |" in line
    plot_compare(data, tmp_path / "c.png")
    assert (tmp_path / "c.png").stat().st_size > 10_000


class _R:
    def __init__(self, s: float) -> None:
        self.median, self.ok = s, True


def test_the_first_k_measurements_and_the_time_their_call_took():
    """Budget k is one call that measured the selector's first k (as a budgeted run of k does): its wall is
    the search's measuring time; a budget between two calls gets the smaller one's (its order ended)."""
    run = KernelRun(found=None)
    failed = _R(1.0)
    failed.ok = False
    # k=1 measured 1 candidate, which failed (it spent its measurement); k=2 and k=4 measured 2 and 4 afresh
    run.steps["lgbm"] = [([Measured(4, failed)], 2.0, 1), ([Measured(4, failed), Measured(0, _R(0.5))], 3.0, 2),
                         ([Measured(4, failed), Measured(0, _R(0.5)), Measured(2, _R(0.7)), Measured(1, _R(0.9))],
                          4.0, 4)]
    assert [m.index for m in run.first("lgbm", 1)[0]] == [4] and run.first("lgbm", 1)[1] == 2.0
    assert [m.index for m in run.first("lgbm", 2)[0]] == [4, 0] and run.first("lgbm", 2)[1] == 3.0
    assert run.first("lgbm", 3) == run.first("lgbm", 2)
    assert [m.index for m in run.first("lgbm", 4)[0]] == [4, 0, 2, 1] and run.first("lgbm", 4)[1] == 4.0
    assert run.first("lgbm", 9) == run.first("lgbm", 4)
    assert run.first("random", 3) == ([], 0.0)


def test_a_kernel_without_measurements_checks_its_top1_only():
    assert take_planned([3, 1, 2], 2) == [3, 1]
    assert take_planned([3, 1, 2], 0) == [-4]  # check-only mark of candidate 3
    assert take_planned([], 0) == [] and take_planned([], 2) == []


def _row(src_lat: float, kernel: str = "s") -> CandidateRow:
    return CandidateRow("m", "t", "conv2d/s4r3:@conv", CLASS, "ok", source_model="b", source_kernel=kernel,
                        source_latency_s=src_lat)


def test_expected_gain_scales_source_latency_by_flops_and_weight():
    k = Kernel(name="t", mod=None, class_key="conv2d/s4r3:@conv", weight=3, flops=2e9, args=())
    gain = expected_gain(k, [_row(0.01), _row(0.03), _row(0.02)], {("b", "s"): 1e9})
    assert gain == pytest.approx(3 * 0.02 * 2)  # weight x median(source latency x FLOP ratio)
    assert expected_gain(k, [_row(0.01, kernel="unknown")], {}) == pytest.approx(3 * 2e9 / 1e9)


def _method(kind, k, ms, n, search=10.0):
    return {"kind": kind, "budget": k, "latency_s": ms / 1e3, "measurements": n, "search_s": search}


def test_the_pool_summary_folds_random_seeds_into_their_median_and_states_the_goals():
    from recommender.compare.summary import budget_table, goals, model_summary
    methods = {f"{kind}-k{k}": _method(kind, k, ms, n) for kind, k, ms, n in (
        ("lgbm", 2, 10.0, 20), ("random@0", 2, 12.0, 20), ("random@1", 2, 15.0, 20), ("random@2", 2, 11.0, 20),
        ("fixed-tiles", 2, 13.0, 16), ("fixed-tiles", 5, 12.5, 30), ("tiles-then-donors", 2, 12.0, 20))}
    methods["exhaustive"] = {"kind": "exhaustive", "latency_s": 0.0095, "search_s": 400.0, "measurements": 900}
    methods["onnxruntime"] = {"kind": "onnxruntime", "latency_s": 0.009, "search_s": 0.0}
    s = model_summary({"model": "m", "target_key": "llvm-x-2c", "methods": methods, "pool": {"rule_space": 32}})
    rnd = s["selectors"]["random"][2]
    assert rnd["latency_s"] == 0.012 and rnd["seeds"] == 3  # the median of 11, 12 and 15 ms
    assert s["q"]["lgbm"][2] == 0.95 and s["fixed_alone_s"] == 0.0125  # fixed tiles at their largest budget
    g = goals([s], k=2)
    assert g["random_over_lgbm"] == 1.2 and g["tiles_then_donors_over_lgbm"] == 1.2
    assert g["fixed_alone_over_exhaustive"] == round(12.5 / 9.5, 3) and g["lgbm_search_share"] == 0.025
    assert g["models_where_lgbm_is_slower_than_random"] == []
    table = budget_table([s])
    assert "| m | lgbm | 10.00 (0.95, 20) | - |" in table and "random (median of 3 seeds)" in table
    assert "onnxruntime 9.00 ms" in table


def test_retimed_medians_replace_the_single_timings_of_the_run():
    from recommender.compare.summary import model_summary
    methods = {"lgbm-k2": _method("lgbm", 2, 10.0, 20), "random@0-k2": _method("random@0", 2, 12.0, 20),
               "exhaustive": {"kind": "exhaustive", "latency_s": 0.0095, "search_s": 400.0, "measurements": 900}}
    retime = {"rounds": 5, "methods": {"lgbm-k2": {"median_s": 0.009}, "exhaustive": {"median_s": 0.009}}}
    s = model_summary({"model": "m", "target_key": "k", "methods": methods}, retime)
    assert s["selectors"]["lgbm"][2]["latency_s"] == 0.009 and s["q"]["lgbm"][2] == 1.0
    assert s["selectors"]["random"][2]["latency_s"] == 0.012 and s["retimed_rounds"] == 5


def test_a_baseline_timing_another_process_stalled_is_timed_again(monkeypatch):
    """PyTorch's and ONNX Runtime's timings are retried like the measurer's when the CPU stall watch says a
    stranger spoiled them: here the first two tries read as spoiled, the third as clean, and it is kept."""
    from recommender.compare import baselines
    from recommender.measure import contention
    verdicts = [True, True, False]
    seen = []
    monkeypatch.setattr(contention, "spoiled", lambda share: seen.append(share) or verdicts[len(seen) - 1])
    monkeypatch.setattr(contention, "RETRY_WAIT_S", 0.0)
    calls = []
    costs = baselines._median_of_repeats(lambda: calls.append(1), repeat=2, min_repeat_s=0.0)
    assert len(seen) == 3 and len(costs) == 2 and len(calls) == 1 + 3 * 2  # warm-up, then 3 tries of 2 repeats


def test_a_baseline_timing_stalled_in_every_try_is_kept_with_its_caveat(monkeypatch):
    """A PyTorch or ONNX Runtime timing whose every try the stall detector reads as spoiled is kept, the last try,
    with a caveat; a clean first try has none (the costs read as a plain list either way)."""
    from recommender.compare import baselines
    from recommender.measure import contention
    monkeypatch.setattr(contention, "RETRY_WAIT_S", 0.0)
    monkeypatch.setattr(contention, "spoiled", lambda share: True)
    costs = baselines._median_of_repeats(lambda: None, repeat=2, min_repeat_s=0.0)
    assert len(costs) == 2 and baselines.median(costs) >= 0
    assert costs.caveat.startswith(f"no clean run in {contention.RETRIES + 1} tries: another process took the CPU")
    monkeypatch.setattr(contention, "spoiled", lambda share: False)
    assert baselines._median_of_repeats(lambda: None, repeat=2, min_repeat_s=0.0).caveat is None


def test_a_kept_spoiled_model_timing_says_why_and_a_clean_one_says_nothing():
    from recommender.measure import MeasureResult
    contended = MeasureResult("ok", [0.01], stall_share=0.34, kept_spoiled="contended", tries=13)
    assert contended.caveat == ("no clean run in 13 tries: another process took the CPU in every try (the kept one "
                                "stalled 34% of its time); the figure is likely too slow")
    slow = MeasureResult("ok", [0.01], parallel_ratio=1.93, kept_spoiled="not_parallel", tries=1)
    assert "1 try: the timing worker's threads did not run side by side in any try (parallel probe 1.93)" in slow.caveat
    assert MeasureResult("ok", [0.01], stall_share=0.34).caveat is None


def test_methods_timed_with_no_clean_run_are_marked_in_the_table_and_the_summary_until_retimed():
    """compare.md marks a method whose model timing got no clean run and prints its caveat under the table; the
    pool summary marks its cell and lists it, and a retimed latency (a quiet machine's rounds) drops the mark.
    Without caveats, the table has neither."""
    from recommender.compare.summary import budget_table, model_summary
    methods = _methods()
    clean = format_compare({"model": "m", "target_key": "k", "threads": 2, "date": "d", "methods": methods})
    assert "(!)" not in clean and "no clean run" not in clean
    methods["lgbm-k3"]["timing_caveat"] = "no clean run in 13 tries: another process took the CPU in every try"
    methods["pytorch"]["timing_caveat"] = "no clean run in 3 tries: another process took the CPU in every try"
    md = format_compare({"model": "m", "target_key": "k", "threads": 2, "date": "d", "methods": methods})
    assert next(ln for ln in md.splitlines() if ln.startswith("| lgbm-k3 ")).startswith("| lgbm-k3 | 8.00 (!) |")
    assert "- (!) lgbm-k3: no clean run in 13 tries" in md and "- (!) pytorch: no clean run in 3 tries" in md
    assert "(!)" not in next(ln for ln in md.splitlines() if ln.startswith("| lgbm-k1 "))
    data = {"model": "m", "target_key": "k", "methods": methods}
    table = budget_table([model_summary(data)])
    assert "| m | lgbm | " in table and "8.00 (!) (0.97, 60)" in table and "pytorch 12.00 ms (!)" in table
    assert "- m lgbm-k3: no clean run in 13 tries" in table and "10.00 (!)" not in table
    retimed = model_summary(data, {"rounds": 5, "methods": {"lgbm-k3": {"median_s": 0.0079}}})
    assert set(retimed["timing_caveats"]) == {"pytorch"} and "7.90 (!)" not in budget_table([retimed])


def test_a_comparison_names_the_saved_rankers_it_ran_with_by_their_training_data(tmp_path):
    import json

    from recommender.compare.run import saved_ranker_hashes
    (tmp_path / "rankers" / "lgbm").mkdir(parents=True)
    (tmp_path / "rankers" / "lgbm" / "meta.json").write_text(json.dumps({"data_hash": "9eb07d1c9b5f3977"}))
    assert saved_ranker_hashes(tmp_path, ("lgbm", "random@1", "fixed-tiles")) == {"lgbm": "9eb07d1c9b5f3977"}
