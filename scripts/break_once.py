"""Break each guarded behaviour once and check that its test fails (a small, fixed mutation test).

Each break is one textual edit of the source (the exact old text must occur once); the file is restored
after its tests ran, also on Ctrl-C. A break whose tests still pass is MISSED: that test guards nothing.
Writes tests/break_once.json: per break, the tests run, caught or not, seconds, and the commit, date and
target it was last checked at (a run of some breaks keeps the others' last results, each with its own
commit); the README's test section is generated from it.

    python scripts/break_once.py            # every break (about 15 minutes on 2 cores)
    python scripts/break_once.py --only pause,locks
"""
from __future__ import annotations

import argparse
import datetime
import json
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "tests" / "break_once.json"


@dataclass(frozen=True)
class Break:
    name: str
    what: str  # the behaviour that stops working
    path: str
    old: str | None  # None: found at run time (see _card_break)
    new: str | None
    tests: tuple[str, ...]


BREAKS = (
    Break("locks", "a folder held by another run is no longer refused",
          "recommender/bank/store.py", "fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)", "pass",
          ("tests/test_run_control.py::test_a_folder_in_use_is_refused_and_a_killed_runs_lock_is_not",)),
    Break("stale-lock", "the .lock file a killed run leaves blocks the next run",
          "recommender/bank/store.py", '    path = folder / ".lock"\n',
          '    path = folder / ".lock"\n    if path.exists():\n'
          '        raise BankError(f"{folder} is in use by another schedrec run ({what})")\n',
          ("tests/test_run_control.py::test_a_folder_in_use_is_refused_and_a_killed_runs_lock_is_not",)),
    Break("workers-unprepared", "the build workers load TVM's tensor intrinsics at the first replay (in search time)",
          "recommender/measure/measurer.py", "            w.start_soon(prepare=True)\n", "            w.start_soon()\n",
          ("tests/test_pool.py::test_the_measurers_workers_are_up_and_ready_to_replay_when_the_search_starts",)),
    Break("flat-stride-2-pointwise", "a 1x1 stride-2 conv onto a map of more than FLAT_MAX_POSITIONS gets no flat tiles",
          "recommender/rules/conv.py", " or extents[5:] == [1, 1])))", ")))",
          ("tests/test_conv_rules.py::test_flat_tiles_gather_a_padded_or_strided_input_and_replay_from_their_trace",)),
    Break("flat-exact-cover", "a flat tile whose vectors cover the map exactly is refused (no gather to place)",
          "recommender/rules/conv.py", "    if positions % step:  # where", "    if True:  # where",
          ("tests/test_conv_rules.py::test_flat_tiles_gather_a_padded_or_strided_input_and_replay_from_their_trace",)),
    Break("profile-cold-warm", "schedrec profile --cold times the kernels warm, as the transfer did",
          "recommender/compare/profile.py", "settings=MeasureSettings(**COLD, fast_math=measurer.settings.fast_math)",
          "settings=None",
          ("tests/test_transfer.py::test_profile_times_every_call_of_the_transferred_model_beside_each_kernels_recorded_time",)),
    Break("pause", "PAUSE no longer holds the run between kernels",
          "recommender/bank/store.py", "    if pause.exists():\n", "    if False:\n",
          ("tests/test_run_control.py::test_pause_holds_the_driver_between_kernels",)),
    Break("sigint", "Ctrl-C exits 1 instead of 130",
          "recommender/cli/main.py",
          "        return _stopped(signal.SIGTERM if isinstance(err, _Terminated) else signal.SIGINT)",
          "        return 1",
          ("tests/test_run_control.py::test_ctrl_c_on_transfer_exits_130_keeps_the_finished_kernels_and_the_rerun_resumes",)),
    Break("failed-run-leaves-folder", "a run whose model fails to import leaves its empty output folder behind",
          "recommender/bank/store.py", "            if failed and made and ", "            if False and ",
          ("tests/test_run_control.py::test_a_folder_in_use_is_refused_and_a_killed_runs_lock_is_not",)),
    Break("evaluate-no-resume", "a rerun of an interrupted evaluation fits every fold again",
          "training/fold_store.py", "        return self.entries.get(key)", "        return None",
          ("tests/test_train_cli.py::test_an_interrupted_evaluation_resumes_from_its_finished_folds",)),
    Break("evaluate-resumes-other-rows", "an evaluation resumes from folds fitted on other rows",
          "training/fold_store.py", '            if isinstance(saved, dict) and saved.get("config") == self.config:',
          "            if isinstance(saved, dict):",
          ("tests/test_train_cli.py::test_an_interrupted_evaluation_resumes_from_its_finished_folds",)),
    Break("time-weight-ignored", "lgbm asked to weigh kernels by their time fits every kernel alike",
          "training/rankers/lgbm.py", "    if not power or group_weight is None:", "    if True:",
          ("tests/test_rankers.py::test_lgbm_weighs_query_groups_by_kernel_time_when_asked",)),
    Break("slow-exit-crashes-run", "a worker that closed its pipe and is slow to exit ends the run with an internal error",
          "recommender/measure/pool.py", "                    code = _reap(proc, 5)", "                    code = proc.wait(5)",
          ("tests/test_pool.py::test_a_worker_that_closes_its_pipe_and_is_slow_to_exit_costs_its_request_not_the_run",)),
    Break("unsteady-kept", "a timing whose repeats spread widely is kept as it came, not timed again",
          "recommender/measure/measurer.py",
          "            if result.ok and not (spoiled or slow) and contention.unsteady(result.costs):",
          "            if False:",
          ("tests/test_measure.py::test_a_timing_whose_repeats_spread_is_timed_again_and_the_fastest_try_kept",)),
    Break("relabel-ignored", "a matrix's relabelled rows are read with their disturbed labels",
          "training/dataset.py", "    return apply_relabels(rows, read_relabels(matrix_dir)) if relabelled else rows",
          "    return rows",
          ("tests/test_transfer_matrix.py::test_a_disturbed_label_is_timed_again_beside_anchors_and_every_reader_gets_the_new_one",
           "tests/test_relabel.py")),
    Break("gpu-intrinsics-loaded", "every process parses the GPU tensor intrinsics again (4-6 s each)",
          "recommender/core/tvm_setup.py", "        sys.modules[name] = types.ModuleType(name)", "        pass",
          ("tests/test_measure.py::test_the_tensor_intrinsics_load_without_the_gpu_ones_and_leave_them_importable",)),
    Break("gpu-stand-ins-left", "the empty stand-ins of the GPU intrinsics stay in sys.modules",
          "recommender/core/tvm_setup.py", "                sys.modules.pop(name, None)", "                pass",
          ("tests/test_measure.py::test_the_tensor_intrinsics_load_without_the_gpu_ones_and_leave_them_importable",)),
    Break("compare-rerun-remeasures", "a compare rerun after its search finished measures every method again",
          "recommender/compare/run.py", "    if cmp.same_setup and all(cmp.has(m) for m in measured):",
          "    if False:",
          ("tests/test_transfer.py::test_compare_runs_every_method_on_an_onnx_model_in_one_run",)),
    Break("refused-resume-keeps-workers", "a replay refused for other settings leaves its measurer's workers running",
          "recommender/transfer/exhaustive.py",
          "        with measurer:  # closed whatever fails from here on (a refused resume included)",
          "        with __import__('contextlib').nullcontext():",
          ("tests/test_candidates.py::test_exhaustive_replay_resumes_from_its_rows_and_refuses_other_settings",)),
    Break("stale-evaluation-unflagged", "the card shows an evaluation of other data as the saved rankers' own",
          "training/report.py", "            if name in hashes and hashes[name] != meta.get(\"data_hash\"):",
          "            if False:",
          ("tests/test_train_cli.py::test_the_card_says_when_its_evaluation_is_of_other_data_than_the_saved_rankers",)),
    Break("sigterm", "SIGTERM ends a run as Ctrl-C does (exit 130), not with 143",
          "recommender/cli/main.py",
          "    raise _Terminated() if signum == signal.SIGTERM else KeyboardInterrupt()",
          "    raise KeyboardInterrupt()",
          ("tests/test_run_control.py::test_ctrl_c_on_transfer_exits_130_keeps_the_finished_kernels_and_the_rerun_resumes",)),
    Break("cluster-other-bank", "a Dask worker measures from a bank whose models are not the client's",
          "recommender/transfer/matrix_cluster.py", "        if tuple(index.models) != job.bank_models:\n",
          "        if False:\n",
          ("tests/test_cluster.py::test_a_matrix_kernel_job_pickles_and_its_task_gives_the_kernel_s_rows",)),
    Break("sigterm-in-tuning", "SIGTERM while MetaSchedule tunes unwinds through its C++ frames",
          "recommender/cli/main.py", "    if in_native_section():\n", "    if False:\n",
          ("tests/test_run_control.py::test_a_signal_inside_native_code_ends_the_run_instead_of_raising_through_it",
           "tests/test_bank.py::test_sigterm_in_the_middle_of_tuning_ends_cleanly_and_the_rerun_resumes")),
    Break("database-ignored", "the whole-model build no longer applies the database's schedules",
          "recommender/measure/worker.py", "            mod = relax.transform.MetaScheduleApplyDatabase()(mod)\n",
          "            pass\n",
          ("tests/test_bank.py::test_whole_model_timing_untuned_and_with_the_bank",)),
    Break("slowest-chosen", "the choice takes the slowest valid candidate, not the fastest",
          "recommender/transfer/choice.py",
          "best = min((r for r in choice.rows if not r.is_default and r.ok), key=lambda r: r.latency_s, default=None)",
          "best = max((r for r in choice.rows if not r.is_default and r.ok), key=lambda r: r.latency_s, default=None)",
          ("tests/test_transfer.py::test_top2_per_kernel_measures_two_candidates_and_writes_the_fastest_measured_trace",)),
    Break("no-resume", "a rerun measures finished kernels again",
          "recommender/transfer/driver.py", "        if saved is not None:\n", "        if False:\n",
          ("tests/test_transfer.py::test_a_rerun_resumes_and_measures_nothing",)),
    Break("no-resume-after-ctrl-c", "the rerun after Ctrl-C measures the kernels it kept again",
          "recommender/transfer/driver.py", "        if saved is not None:\n", "        if False:\n",
          ("tests/test_run_control.py::test_ctrl_c_on_transfer_exits_130_keeps_the_finished_kernels_and_the_rerun_"
           "resumes",)),
    Break("no-resume-replay", "a second full exhaustive replay measures every kernel again",
          "recommender/transfer/driver.py", "        if saved is not None:\n", "        if False:\n",
          ("tests/test_candidates.py::test_exhaustive_replay_resumes_from_its_rows_and_refuses_other_settings",)),
    Break("no-anchor-fallback", "kernels without a same-class donor no longer get same-anchor donors",
          "recommender/transfer/kernel.py", "    sources = (index.pool_for(",
          "    anchor_fallback = False\n    sources = (index.pool_for(",
          ("tests/test_transfer.py::test_anchor_fallback_end_to_end_and_switched_off",)),
    Break("no-anchor-join", "a class whose donors come from one model is no longer joined by same-anchor donors",
          "recommender/transfer/candidates.py", "        if len({s.model for s in same}) >= min_class_models:",
          "        if len({s.model for s in same}) >= min(1, min_class_models):",
          ("tests/test_selection.py::test_a_class_with_one_donor_model_is_joined_by_same_anchor_donors_within_the_cap",)),
    Break("no-short-tune", "heavy kernels without donors get random samples instead of a short search",
          "recommender/transfer/kernel.py", "    if tune_trials and not any(c.status == OK for c in cands + tiles):",
          "    if False:",
          ("tests/test_transfer.py::test_a_heavy_kernel_without_donors_gets_the_best_records_of_a_short_search",)),
    Break("short-tune-beside-rule", "a kernel whose tile rule builds is searched as well (minutes per kernel)",
          "recommender/transfer/kernel.py", "    if tune_trials and not any(c.status == OK for c in cands + tiles):",
          "    if tune_trials and not any(c.status == OK for c in cands):",
          ("tests/test_transfer.py::test_a_kernel_its_tile_rule_builds_gets_no_short_search",)),
    Break("no-flat-where-no-column", "a conv onto a width no column tile divides (Inception's 17x17) gets no rule tile",
          "recommender/rules/conv.py", "    return (2 * extents[3] <= lanes or not widths or 2 * max(widths) <= lanes",
          "    return (2 * extents[3] <= lanes or 2 * max(widths, default=lanes) <= lanes",
          ("tests/test_conv_rules.py::test_flat_tiles_gather_a_padded_or_strided_input_and_replay_from_their_trace",)),
    Break("no-flat-where-narrow", "a conv onto a width only narrow column tiles divide (SqueezeNet's 55x55) gets no flat tile",
          "recommender/rules/conv.py", "    return (2 * extents[3] <= lanes or not widths or 2 * max(widths) <= lanes",
          "    return (2 * extents[3] <= lanes or not widths",
          ("tests/test_conv_rules.py::test_a_pointwise_conv_on_a_7x7_map_gets_flat_tiles_on_avx512_that_replay_from_their_trace",)),
    Break("no-window-rule", "a pooling gets no window schedule of its own (the other rules lose to its default)",
          "recommender/rules/loop.py", "    return loops[:n_spatial - 1] if rows >= MIN_WINDOW_ROWS else []",
          "    return []",
          ("tests/test_loop_rules.py::test_a_pooling_gets_a_window_schedule_parallel_over_rows_with_its_rows_left_to_llvm",)),
    Break("reference-per-candidate", "the output check runs the unscheduled kernel again for every candidate",
          "recommender/measure/worker.py", "    if key not in _REFERENCE_OUTPUTS or os.environ.get(\"SCHEDREC_ARG_FILL\"):",
          "    if True:",
          ("tests/test_measure.py::test_the_reference_runs_once_for_the_candidates_that_follow_and_again_when_its_library_changes",)),
    Break("pow-kept", "x ** 3 keeps calling pow per element",
          "recommender/frontend/canonical.py", "        if exponent not in _SMALL_POWERS or",
          "        if True or exponent not in _SMALL_POWERS or",
          ("tests/test_bool_ops.py::test_small_constant_powers_become_multiplies_and_keep_the_output",)),
    Break("fast-math-ignored", "the build worker ignores the measurer's fast_math setting (libm calls always)",
          "recommender/measure/worker.py", '''    with fast_math(payload.get("fast_math", False)):
        if packed is None:''',
          '''    with fast_math(False):
        if packed is None:''',
          ("tests/test_fast_math.py::test_every_measured_build_uses_it_unless_exact_math_is_asked",)),
    Break("fast-exp-off", "the exp rule falls back to libm's call",
          "recommender/measure/fast_math.py", "            if _enabled and _lanes(call) > 0:",
          "            if False:",
          ("tests/test_fast_math.py",)),
    Break("rounds-not-rotated", "every round times the columns in the same order",
          "recommender/compare/baselines.py", "        for name in names[r % len(names):] + names[:r % len(names)]:",
          "        for name in names:",
          ("tests/test_baselines.py::test_interleaved_rounds_rotate_the_order_and_keep_a_failing_column_apart",)),
    Break("cap-not-spread", "a cap keeps the first donor model's records only",
          "recommender/transfer/candidates.py", "    return ordered[:cap] if cap else ordered",
          "    return sorted(pool, key=lambda s: (s.model, s.rank))[:cap] if cap else ordered",
          ("tests/test_selection.py::test_cap_spreads_the_pool_across_donor_models_best_ranks_first",)),
    Break("pad-border", "anchor-trace schedules that leave a padded border unwritten are accepted",
          "recommender/transfer/replay.py", "    blocks = [sch.get_sblock(\"root\"), *all_blocks(sch)]\n",
          "    return \"\"\n    blocks = [sch.get_sblock(\"root\"), *all_blocks(sch)]\n",
          ("tests/test_replay.py::test_anchor_trace_that_leaves_a_padded_border_unwritten_is_refused_and_would_compute_wrong",)),
    Break("index-fill", "integer index inputs of the output check are all zeros again",
          "recommender/measure/args.py", "    if not ints:\n        return bounds\n",
          "    if True:\n        return bounds\n",
          ("tests/test_check_inputs.py",)),
    Break("onnx-rewrite", "ONNX 3-D matmuls keep their export-specific kernel class",
          "recommender/frontend/canonical.py", "        if not new.same_as(func):\n", "        if False:\n",
          ("tests/test_onnx_import.py::test_onnx_encoder_matmuls_fall_in_the_torch_classes",)),
    Break("flops-doubled", "kernel FLOP counts are twice the true count",
          "featurize/tir_structure.py", "        return float(estimate_tir_flops(mod))",
          "        return 2 * float(estimate_tir_flops(mod))",
          ("tests/test_kernels.py::test_zoo_transformer_kernels", "tests/test_kernels.py::test_onnx_import")),
    Break("if-branch", "an If on a static condition becomes the branch it does not take",
          "recommender/frontend/onnx_static.py", "_taken_branch(node, bool(np.asarray(known[node.input[0]]).reshape(-1)[0]))",
          "_taken_branch(node, not bool(np.asarray(known[node.input[0]]).reshape(-1)[0]))",
          ("tests/test_onnx_static.py::test_an_if_on_a_static_dim_becomes_the_branch_it_takes",)),
    Break("attention-scale", "opset-23 Attention rewritten without its default 1/sqrt(head size) scale",
          "recommender/frontend/onnx_rewrite.py", 'scale = a.get("scale") or 1.0 / float(np.sqrt(d))',
          'scale = a.get("scale") or 1.0',
          ("tests/test_onnx_rewrites.py::test_opset23_attention_is_rewritten_and_computes_what_onnx_runtime_computes",)),
    Break("dynamic-kernels", "a kernel sized by the data (after NonZero) is kept for MetaSchedule, which fails on it",
          "recommender/frontend/kernels.py", "        return False\n    return True\n", "        return True\n    return True\n",
          ("tests/test_onnx_import.py::test_kernels_with_data_dependent_shapes_are_left_to_tvm_and_the_rest_are_kept",)),
    Break("no-epilogue-fold", "an anchor trace that fails on an epilogue reading the anchor twice is not retried",
          "recommender/transfer/replay.py", "        if not fold_epilogue(sch, target_mod):", "        if True:",
          ("tests/test_replay.py::test_anchor_trace_replays_onto_an_epilogue_that_reads_the_conv_twice",)),
    Break("card-format", "the model card prints its numbers with one decimal fewer",
          "scripts/make_card.py", None, None,  # filled in below: the card's latency format
          ("tests/test_figures.py::test_card_and_transfer_figures_reproduce_the_committed_files",)),
    Break("budget-beside", "rule tiles are measured beside the default on top of the budget",
          "recommender/transfer/kernel.py",
          "    mods = ([kernel.mod] if measure_default else []) + [found.candidates[i].replayed.to_build for i in picked]",
          "    picked = picked + [i for i in found.valid if measure_default and 'rule' in found.candidates[i].source.model"
          " and i not in picked][:2]\n"
          "    mods = ([kernel.mod] if measure_default else []) + [found.candidates[i].replayed.to_build for i in picked]",
          ("tests/test_transfer.py::test_top2_per_kernel_measures_two_candidates_and_writes_the_fastest_measured_trace",)),
    Break("no-gain-decay", "a total budget's k-th measurement of a kernel counts its whole gain, not gain / k",
          "recommender/transfer/selection.py", "heapq.heappush(heap, (-k.gain / (n + 1), i))",
          "heapq.heappush(heap, (-k.gain / 2, i))",
          ("tests/test_selection.py::test_the_kth_measurement_of_a_kernel_is_worth_its_gain_over_k",)),
    Break("lomo-leak", "a leave-one-model-out fold trains on the held-out model's kernels and donors",
          "training/evaluate.py", "        plain, held_out = leave_model_out(rows, model)",
          "        plain, held_out = rows, leave_model_out(rows, model)[1]",
          ("tests/test_evaluate.py::test_no_fold_trains_on_its_held_out_model_as_target_or_as_donor",)),
    Break("lomo-donor-leak", "leave_model_out keeps the held-out model's schedules as donors",
          "training/dataset.py", "    train = [r for r in rows if r.target_model != model and r.source_model != model]",
          "    train = [r for r in rows if r.target_model != model]",
          ("tests/test_evaluate.py::test_no_fold_trains_on_its_held_out_model_as_target_or_as_donor",
           "tests/test_evaluate.py::test_leave_model_out_keeps_the_model_out_of_training_as_target_and_as_source")),
    Break("heuristic-columns", "the heuristic baseline reads columns 0-2 (kernel kind flags), not its own",
          "recommender/transfer/recommend.py", "        ranker = make_ranker(name, featurizer)",
          "        ranker = cls()",
          ("tests/test_selection.py::test_the_heuristic_selector_reads_the_columns_it_is_built_for",)),
    Break("rule-prior", "a ranker places rule instances of kernel kinds it never saw measured",
          "recommender/transfer/selection.py",
          "        if self.rule_kinds is None or kernel.rows[0].class_key.split(\"/\")[0] in self.rule_kinds:",
          "        if True:",
          ("tests/test_selection.py::test_a_ranker_places_rule_instances_only_of_the_kinds_it_saw_measured",)),
    Break("target-unchecked", "a typed target with an unknown mcpu or no num-cores reaches TVM",
          "recommender/target/spec.py", "    check_llvm_config(config, ask_llvm=validate)\n", "    pass\n",
          ("tests/test_target.py::test_bad_targets",)),
    Break("baseline-not-retimed", "a PyTorch / ONNX Runtime timing another process stalled is kept as it is",
          "recommender/compare/baselines.py", "            if not contention.spoiled(watch.share):",
          "            if True:",
          ("tests/test_compare_logic.py::test_a_baseline_timing_another_process_stalled_is_timed_again",)),
    Break("profile-record-lookup", "a profile's kernels lose their databases' isolated times",
          "recommender/measure/worker.py", "            if rec is not None:",
          "            if False:",
          ("tests/test_transfer.py::test_profile_times_every_call_of_the_transferred_model_beside_each_kernels_recorded_time",)),
    Break("parallel-probe", "a timing taken while the worker's threads did not run side by side is kept as it is",
          "recommender/measure/measurer.py", "            slow = parallel_probe.slow(result.parallel_ratio)",
          "            slow = False",
          ("tests/test_measure.py::test_a_timing_taken_while_the_threads_do_not_run_side_by_side_is_timed_again",)),
    Break("lgbm-nondeterministic", "a ranker fitted twice on the same data differs",
          "training/rankers/lgbm.py", "random_state=self.seed + m,", "random_state=int(np.random.randint(1 << 30)),",
          ("tests/test_rankers.py::test_lgbm_fits_the_same_boosters_on_the_same_data",)),
    Break("cross-target-groups", "query groups cut across the targets' rows when several targets are stacked",
          "training/cross_target.py", "return np.concatenate(xs), np.concatenate(ys), np.concatenate(sizes)",
          "return np.concatenate(xs), np.concatenate(ys), np.sort(np.concatenate(sizes))",
          ("tests/test_cross_target.py::test_no_group_mixes_targets",)),
    Break("cross-target-held-out-model", "a held-out model's kernels stay in the other targets' training",
          "training/cross_target.py", "train_rows, test = leave_model_out(train_rows, m)",
          "_, test = leave_model_out(train_rows, m)",
          ("tests/test_cross_target.py::test_held_out_models_are_out_of_every_targets_training",)),
    Break("zero-shot-leak", "the held-out target's own rows join its zero-shot ranker's training",
          "training/cross_target.py", "return [(datas[k], sets[k][0]) for k in datas if k != key]",
          "return [(datas[k], sets[k][0]) for k in datas]",
          ("tests/test_cross_target.py::test_the_zero_shot_split_leaves_the_held_out_target_out",)),
    Break("adapt-from-scratch", "an adaptation starts a new model instead of going on from the shared one",
          "training/rankers/lgbm.py", "init_model=init_model.boosters_[m] if init_model else None",
          "init_model=None", ("tests/test_cross_target.py::test_adaptation_goes_on_from_the_shared_model",)),
    Break("shared-as-target", "models/shared/ is taken for the nearest target's bank",
          "recommender/target/folders.py", "if p.name != SHARED and (p / need).is_dir()", "if (p / need).is_dir()",
          ("tests/test_cross_target.py::test_a_cpu_without_rankers_gets_the_shared_one_and_never_a_shared_bank",)),
    Break("ceiling-drops-failures", "the noise ceiling scores valid candidates only (not evaluate's metric)",
          "training/noise_ceiling.py", "groups = ranking_set(read_matrix(matrix_dir))",
          "groups = ranking_set([r for r in read_matrix(matrix_dir) if r.ok or r.is_default])",
          ("tests/test_cross_target.py::test_the_noise_ceiling_scores_with_evaluates_metric",)),
    Break("host-hardware", "a target's hardware features read the host's cores instead of its record",
          "recommender/target/hardware.py", "return Hardware(mcpu=mcpu, cores=cores,",
          "import os\n    return Hardware(mcpu=mcpu, cores=os.cpu_count(),",
          ("tests/test_hardware.py::test_a_targets_hardware_comes_from_its_record_not_the_host",)),
    Break("unknown-cpu-silent", "an unknown CPU gets defaults without a note",
          "recommender/target/hardware.py", "        note = (f\"note: no published figures", "        note = None and (f\"note: no published figures",
          ("tests/test_hardware.py::test_an_unknown_cpu_gets_its_vector_widths_defaults_with_a_note",)),
    Break("matmul-space-literal-split", "the matmul template's vectors are a literal split, not a sampling decision",
          "recommender/rules/matmul.py",
          "sch.split(n, sch.sample_perfect_tile(n, n=3, max_innermost_factor=lanes,",
          "sch.split(n, [None, nv, lanes]) or (sch.sample_perfect_tile(n, n=3, max_innermost_factor=lanes,",
          ("tests/test_rule_space.py::test_every_instance_of_the_matmul_space_computes_the_matmul_and_replays_from_its_trace",)),
    Break("matmul-space-accumulators", "the matmul space lists tiles with more accumulators than the registers hold",
          "recommender/rules/matmul.py", "if tm * nv <= ACCUMULATORS[lanes]", "if tm * nv <= 4 * ACCUMULATORS[lanes]",
          ("tests/test_rule_space.py::test_the_matmul_space_holds_every_fitting_tile_and_today_s_tiles_among_them",)),
    Break("pooled-leak", "a pooled adaptation trains on every kernel of its target, not the N",
          "training/cross_target.py", "return zero_shot_parts(datas, sets, key) + [(datas[key], part)]",
          "return zero_shot_parts(datas, sets, key) + [(datas[key], sets[key][0])]",
          ("tests/test_cross_target.py::test_a_pooled_adaptation_sees_only_the_n_kernels_of_its_target",)),
    Break("evaluation-wall-times", "evaluate writes its wall times into evaluation.json (two runs differ)",
          "training/train.py", '"rankers": {n: r.pop("seconds") for n, r in result["lomo"]["rankers"].items()}}',
          '"rankers": {n: r["seconds"] for n, r in result["lomo"]["rankers"].items()}}',
          ("tests/test_train_cli.py::test_evaluate_writes_the_same_bytes_twice_with_the_spread_over_seeds",)),
    Break("spread-one-seed", "the seed spread refits with the default seed every time",
          "training/train.py", 'params={n: {"seed": seed} for n in names}', "params=None",
          ("tests/test_train_cli.py::test_evaluate_writes_the_same_bytes_twice_with_the_spread_over_seeds",)),
    Break("timing-cap-ignored", "a kernel slower than the timing cap is timed with every repeat",
          "recommender/measure/worker.py", "if not max_timing_s or call_s * number * repeat <= max_timing_s:",
          "if True:",
          ("tests/test_measure.py::test_a_slow_kernel_gets_as_many_repeats_as_fit_in_the_timing_cap",
           "tests/test_measure.py::test_a_timing_over_the_cap_runs_fewer_repeats_and_one_under_it_all")),
    Break("reference-rebuilt", "a kernel's reference is built again for every call that checks against it",
          "recommender/measure/measurer.py",
          "return path if mod is reference or tvm_ffi.structural_equal(mod, reference) else None", "return None",
          ("tests/test_measure.py::test_a_kernels_reference_is_built_once_over_its_calls_and_times_its_default",)),
    Break("slow-call-timed-thrice", "a call whose least time_evaluator run is over the timing cap is timed again after its warmup",
          "recommender/measure/worker.py", "    if call_s * (1 + number) > max_timing_s:\n        return 0\n", "",
          ("tests/test_measure.py::test_a_slow_kernel_gets_as_many_repeats_as_fit_in_the_timing_cap",)),
    Break("instances-remeasured", "--add-instances measures every instance of the space again, not only those a kernel lacks",
          "recommender/transfer/matrix.py", "if knob_key(c.replayed.knobs) not in known]", "]",
          ("tests/test_transfer_matrix.py::test_add_instances_measures_only_the_rule_instances_a_finished_kernel_lacks",)),
    Break("key-without-knobs", "a row's key leaves out its knob values (rule instances added apart share ranks)",
          "recommender/core/rows.py", "self.match, knob_key(self.knobs))", "self.match, ())",
          ("tests/test_rows.py::test_rule_instances_of_one_rank_but_other_knobs_have_their_own_keys",)),
    Break("rpc-session-kept", "a timing worker keeps its RPC session (and so its board) for its life",
          "recommender/measure/worker.py",
          '    tracker = tvm_rpc.connect_tracker(rpc["host"], rpc["port"])\n'
          '    return tracker.request(rpc["key"], priority=1, session_timeout=600)\n',
          '    global _KEPT\n    if "_KEPT" not in globals():\n'
          '        _KEPT = tvm_rpc.connect_tracker(rpc["host"], rpc["port"]).request(rpc["key"], priority=1, '
          'session_timeout=600)\n    return _KEPT\n',
          ("tests/test_rpc.py",)),
    Break("spread-skipped", "a learned selector measures by its scores alone, not the best of each family first",
          "recommender/transfer/selection.py", "        if self.spread:\n", "        if False:\n",
          ("tests/test_selection.py::test_a_learned_order_measures_the_best_of_each_candidate_family_first",)),
    Break("family-ignores-structure", "a candidate's family is its source kind alone (blocked and unblocked alike)",
          "recommender/transfer/selection.py", "return (row.source_kind,) + tuple(", "return (row.source_kind,) + 0 * tuple(",
          ("tests/test_selection.py::test_a_learned_order_measures_the_best_of_each_candidate_family_first",)),
    Break("reduction-block-unplaced", "reduction-blocked instances mixed into the other tiles' seeded order",
          "recommender/rules/conv.py",
          "rest = packed + packed_blocked + [(*t, rb) for rb in blocks for t in known] + others + blocked_others",
          "rest = packed + packed_blocked + others + [(*t, rb) for rb in blocks for t in known] + blocked_others",
          ("tests/test_rule_space.py::test_a_conv_s_reduction_blocks_come_after_today_s_tiles_and_leave_the_other_tiles_in_their_order",)),
    Break("space-parts-unordered", "a rule space built in parts comes back part after part, not in the rule's order",
          "recommender/transfer/replay.py", 'for o in out), key=lambda o: o["index"])', "for o in out), key=lambda o: 0)",
          ("tests/test_rule_space.py::test_a_rule_space_built_in_parts_over_the_build_workers_is_the_whole_space_in_its_order",)),
    Break("cluster-wrong-cpu", "a Dask worker of another CPU than the run's target is not refused",
          "recommender/measure/cluster.py", "wrong = {w: k for w, k in keys.items() if k != key}", "wrong = {}",
          ("tests/test_cluster.py::test_a_worker_on_another_cpu_is_refused_in_one_line",)),
    Break("cluster-task-wrong-cpu", "a task times on a worker of another CPU than the run's target",
          "recommender/measure/cluster.py", "    if mine != key:", "    if False:",
          ("tests/test_cluster.py::test_a_task_refuses_to_time_for_another_cpu",)),
    Break("cluster-rows-unordered", "rows that come back from the cluster out of order are written out of order",
          "recommender/transfer/driver.py",
          "pos = next((i for i, r in enumerate(self.rows) if at.get(r.target_kernel, -1) > mine), len(self.rows))",
          "pos = len(self.rows)",
          ("tests/test_cluster.py::test_rows_that_come_back_out_of_order_are_written_in_the_local_order",)),
    Break("cluster-remeasures", "a matrix rerun on a cluster measures its finished kernels again",
          "recommender/transfer/matrix_cluster.py", "for bk in kernels if bk.name not in rows.by_kernel]",
          "for bk in kernels]",
          ("tests/test_cluster.py::test_a_cluster_matrix_equals_the_local_run_with_a_worker_killed_and_resumes_after_a_killed_client",)),
    Break("dask-without-cluster", "schedrec train imports Dask without --cluster",
          "training/train.py", "\nimport numpy as np\n", "\nimport numpy as np\nimport distributed\n",
          ("tests/test_cluster.py::test_a_run_without_cluster_imports_no_dask",)),
    Break("index-reads-past-cap", "a pool lookup on an indexed bank reads its class's order file past the cap",
          "recommender/bank/index.py", "                    if limit is not None and len(out) >= limit:",
          "                    if False:",
          ("tests/test_bank_index.py::test_the_index_gives_the_same_sources_as_reading_every_model",)),
    Break("index-order-unranked", "the index's round-robin order takes a model's records by group, not by rank",
          "recommender/bank/index.py", "for pos, s in enumerate(sorted(sources, key=lambda s: s[:4]))",
          "for pos, s in enumerate(sources)",
          ("tests/test_bank_index.py::test_the_index_gives_the_same_sources_as_reading_every_model",)),
    Break("index-order-bound", "a lookup stops reading a class's order file before its last rank below top_n",
          "recommender/bank/index.py", '        end = top_n * self.classes[class_key]["most_groups"]',
          '        end = self.classes[class_key]["most_groups"]',
          ("tests/test_bank_index.py::test_the_index_gives_the_same_sources_as_reading_every_model",)),
    Break("index-anchor-models", "an anchor lookup on an indexed bank reads one donor model past the cap",
          "recommender/bank/index.py", "                    if model_limit is not None and len(models) >= model_limit:",
          "                    if model_limit is not None and len(models) >= model_limit + 1:",
          ("tests/test_bank_index.py::test_the_index_gives_the_same_sources_as_reading_every_model",)),
    Break("index-stale-trusted", "a model folder rewritten since the index was written is not re-read",
          "recommender/bank/index.py",
          'changed = [f for f, s in stamps.items() if self.models.get(f, {}).get("stamp") != s]',
          "changed = [f for f in stamps if f not in self.models]",
          ("tests/test_bank_index.py::test_a_stale_index_is_refreshed_from_the_changed_models_only",)),
    Break("index-not-updated-on-import", "bank import leaves the bank's index without the new model",
          "recommender/bank/info.py", "    refresh_after_add(bank_dir)  # every add to a bank leaves its index fresh\n", "",
          ("tests/test_bank_index.py::test_adding_a_model_through_the_bank_updates_its_index",)),
    Break("index-damaged-models-file", "a damaged .index/models.json stops the run instead of being rebuilt",
          "recommender/bank/index.py", "                old = self._read_models()\n            except IndexDamaged as err:",
          "                old = self._read_models()\n            except KeyboardInterrupt as err:",
          ("tests/test_bank_index.py::test_a_damaged_index_is_rebuilt_and_no_record_is_lost",)),
    Break("index-damaged-order-file", "a damaged order file stops the lookup instead of the index being rebuilt",
          "recommender/bank/index.py",
          "            return self._ordered(class_key, exclude, top_n, limit)\n        except IndexDamaged as err:",
          "            return self._ordered(class_key, exclude, top_n, limit)\n        except KeyboardInterrupt as err:",
          ("tests/test_bank_index.py::test_a_damaged_index_is_rebuilt_and_no_record_is_lost",)),
    Break("index-damaged-group-file", "a damaged group file stops the lookup instead of the index being rebuilt",
          "recommender/bank/index.py",
          "            return self._groups(class_keys, exclude, model_limit)\n        except IndexDamaged as err:",
          "            return self._groups(class_keys, exclude, model_limit)\n        except KeyboardInterrupt as err:",
          ("tests/test_bank_index.py::test_a_damaged_index_is_rebuilt_and_no_record_is_lost",)),
    Break("bank-url-as-path", "--bank memory://... is read as a local folder",
          "recommender/bank/location.py",
          "    return BankFiles(where) if isinstance(where, Path) else RemoteBankFiles(where)",
          "    return BankFiles(Path(str(where)))",
          ("tests/test_bank_index.py::test_a_bank_at_a_url",)),
    Break("cluster-tune-twice", "bank tune --cluster tunes a resumed kernel's trials again on top of the records it kept",
          "recommender/bank/tune_cluster.py", "trials_per_task - n, trials_per_iter", "trials_per_task, trials_per_iter",
          ("tests/test_cluster.py::test_bank_tune_on_a_local_cluster_tunes_what_a_local_tune_does_and_resumes_without_"
           "tuning_twice",)),
    Break("add-run-held-out-model", "bank add-run files a held-out model given another --name",
          "recommender/bank/add_run.py", "    for which in dict.fromkeys(n for n in (name, model) if n):",
          "    for which in dict.fromkeys(n for n in (name,) if n):",
          ("tests/test_transfer.py::test_add_run_refuses_unchecked_unfinished_and_held_out_runs_and_a_banked_"
           "model_unless_asked",)),
    Break("add-run-banked-model", "bank add-run files a model the bank already holds without being asked",
          "recommender/bank/add_run.py", "            if not allow_model_in_bank:\n", "            if False:\n",
          ("tests/test_transfer.py::test_add_run_refuses_unchecked_unfinished_and_held_out_runs_and_a_banked_"
           "model_unless_asked",)),
    Break("add-run-unfinished", "bank add-run files an unfinished run (no report.json)",
          "recommender/bank/add_run.py", '    if not (run_dir / "report.json").is_file():\n', "    if False:\n",
          ("tests/test_transfer.py::test_add_run_refuses_unchecked_unfinished_and_held_out_runs_and_a_banked_"
           "model_unless_asked",)),
    Break("add-run-unchecked", "bank add-run files candidates whose output check failed",
          "recommender/bank/add_run.py", "r.status == OK and r.latency_s", "r.latency_s",
          ("tests/test_transfer.py::test_add_run_refuses_unchecked_unfinished_and_held_out_runs_and_a_banked_"
           "model_unless_asked",)),
    Break("add-run-twice", "a repeated bank add-run of the same run is refused or files it again, not a no-op",
          "recommender/bank/add_run.py", "        if filed is not None:\n", "        if False:\n",
          ("tests/test_transfer.py::test_an_interrupted_or_repeated_add_run_files_the_model_once_with_every_record",)),
    Break("add-run-resume", "an add-run stopped before its meta.json cannot be completed by its rerun",
          "recommender/bank/add_run.py", "        if name in metas:\n",
          "        if name in metas or folder.exists():\n",
          ("tests/test_transfer.py::test_an_interrupted_or_repeated_add_run_files_the_model_once_with_every_record",)),
    Break("model-timing-caveat", "a model timing kept with every try spoiled is reported without its caveat",
          "recommender/measure/measurer.py",
          "                result.kept_spoiled, result.tries = kind, attempt + 1  # reports carry its caveat\n",
          "                pass\n",
          ("tests/test_transfer.py::test_a_model_timing_with_no_clean_run_is_reported_with_its_caveat",)),
    Break("baseline-caveat", "a PyTorch / ONNX Runtime timing kept with every try spoiled carries no caveat",
          "recommender/compare/baselines.py", "            if not contention.spoiled(watch.share):\n",
          "            if True:\n",
          ("tests/test_compare_logic.py::test_a_baseline_timing_stalled_in_every_try_is_kept_with_its_caveat",)),
    Break("compare-caveat-unmarked", "compare.md no longer marks a method timed with no clean run",
          "recommender/compare/run.py", '        mark = " (!)" if m.get("timing_caveat") else ""', '        mark = ""',
          ("tests/test_compare_logic.py::test_methods_timed_with_no_clean_run_are_marked_in_the_table_and_the_"
           "summary_until_retimed",)),
    Break("footprint-features", "schema 3 no longer gives a conv tile its footprint features",
          "featurize/candidate_features.py", "    if int(schema) >= 3:\n", "    if int(schema) >= 4:\n",
          ("tests/test_featurize.py::test_schema_3_gives_a_conv_tile_its_footprint_per_reduction_block",)),
    Break("packed-not-folded", "a packed tile's weight packing is no longer moved out of the kernel and its timing",
          "recommender/measure/worker.py",
          "        if any(REWRITE_ANNOTATION in sch.get(b).annotations for b in roots):\n", "        if False:\n",
          ("tests/test_rule_space.py::test_a_packed_tile_is_timed_on_packed_weights_and_a_model_folds_its_packing_into_"
           "the_constants",)),
    Break("packed-tiles-gone", "the conv rule no longer gives packed tiles",
          "recommender/rules/conv.py", "    tiles = packed_tiles(extents[1], extents[2], extents[3], lanes, fixed)\n",
          "    tiles = []\n",
          ("tests/test_rule_space.py::test_packed_tiles_fit_the_registers_divide_the_output_and_list_the_preferred_first",
           "tests/test_rule_space.py::test_every_packed_instance_computes_the_conv_at_any_stride_and_replays_from_its_trace",
           "tests/test_rules.py::test_a_conv_s_instances_are_its_tiles_in_order_with_their_knob_values")),
    Break("packed-wide-unblocked", "a wide 1x1 conv's fixed packed tiles no longer read their input channels in blocks",
          "recommender/rules/conv.py", "        return [t._replace(reduction=PACKED_BLOCK) for t in tiles]",
          "        return tiles",
          ("tests/test_rule_space.py::test_a_wide_pointwise_conv_gets_its_fixed_packed_tiles_with_a_reduction_block",)),
    Break("profile-prepacked-unnamed", "the profile no longer counts a kernel whose packing a build moved out as that kernel",
          "recommender/measure/vm_profile.py",
          "    return base if base != symbol and (base in recorded or base in kernels) else symbol", "    return symbol",
          ("tests/test_transfer.py::test_profile_times_every_call_of_the_transferred_model_beside_each_kernels_"
           "recorded_time",)),
    Break("older-schema", "a ranker saved on an older feature schema is featurized with the newest one",
          "recommender/transfer/recommend.py", "schema if schema in SCHEMAS else SCHEMA_VERSION", "SCHEMA_VERSION",
          ("tests/test_featurize.py::test_a_ranker_saved_on_an_older_schema_still_ranks",)),
    Break("timing-worker-with-torch", "the measurer's worker imports torch again (through tvm_ffi)",
          "recommender/measure/worker.py", '    sys.modules.setdefault("torch", None)\n', "",
          ("tests/test_pool.py::test_the_timing_worker_starts_without_torch",)),
)


def _card_break() -> tuple[str, str]:
    """The line of make_card.py with its first number format ('.2f' or '.1f') and its one-decimal-fewer twin."""
    text = (ROOT / "scripts" / "make_card.py").read_text()
    for fmt, fewer in ((":.2f}", ":.1f}"), (":.1f}", ":.0f}")):
        if fmt in text:
            i = text.index(fmt)
            line_start, line_end = text.rindex("\n", 0, i) + 1, text.index("\n", i)
            line = text[line_start:line_end]
            if text.count(line) == 1:
                return line, line.replace(fmt, fewer, 1)
    raise SystemExit("make_card.py has no latency format to break")


def run_break(b: Break, timeout_s: int) -> dict:
    path = ROOT / b.path
    original = path.read_text()
    old, new = (b.old, b.new) if b.old is not None else _card_break()
    if original.count(old) != 1:
        raise SystemExit(f"{b.name}: the text to break occurs {original.count(old)} times in {b.path}, not once")
    t0 = time.monotonic()
    try:
        path.write_text(original.replace(old, new))
        proc = subprocess.run([sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", *b.tests],
                              cwd=ROOT, capture_output=True, text=True, timeout=timeout_s)
        code, tail = proc.returncode, proc.stdout.strip().splitlines()[-1:] or [""]
    except subprocess.TimeoutExpired:
        code, tail = -1, ["timed out"]
    finally:
        path.write_text(original)
    caught = code not in (0, 5, -1)  # 5: no tests collected (a renamed test), -1: timeout
    return {"name": b.name, "what": b.what, "file": b.path, "tests": list(b.tests), "pytest_exit": code,
            "summary": tail[0], "caught": caught, "seconds": round(time.monotonic() - t0, 1)}


def checked_at() -> str:
    """The commit the breaks run on: HEAD's short hash, with "+changes" where tracked files differ from it."""
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True)
    dirty = subprocess.run(["git", "diff", "--quiet", "HEAD", "--"], cwd=ROOT).returncode != 0
    return (head.stdout.strip() or "unknown") + ("+changes" if dirty else "")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", help="comma-separated break names (default: all)")
    ap.add_argument("--timeout", type=int, default=900, help="seconds per break's tests")
    ap.add_argument("--no-write", action="store_true", help=f"do not update {OUT.relative_to(ROOT)}")
    a = ap.parse_args(argv)
    chosen = [b for b in BREAKS if not a.only or b.name in a.only.split(",")]
    if a.only and len(chosen) != len(a.only.split(",")):
        ap.error(f"unknown break; known: {', '.join(b.name for b in BREAKS)}")
    signal.signal(signal.SIGTERM, signal.default_int_handler)  # restore the file on SIGTERM as on Ctrl-C
    sys.path.insert(0, str(ROOT))
    from recommender.target.spec import native_target
    results = []
    stamp = {"commit": checked_at(), "date": datetime.date.today().isoformat(), "target_key": native_target().key}
    for b in chosen:
        r = run_break(b, a.timeout) | stamp
        results.append(r)
        print(f"{'caught' if r['caught'] else 'MISSED'}  {b.name:20s} {r['seconds']:6.1f} s  {r['summary']}", flush=True)
    if not a.no_write:
        previous = json.loads(OUT.read_text())["breaks"] if OUT.exists() else []
        merged = {r["name"]: r for r in previous} | {r["name"]: r for r in results}
        OUT.write_text(json.dumps({"target_key": stamp["target_key"], "date": stamp["date"],
                                   "breaks": [merged[b.name] for b in BREAKS if b.name in merged]}, indent=1) + "\n")
    missed = [r["name"] for r in results if not r["caught"]]
    print(f"{len(results) - len(missed)} of {len(results)} breaks caught" + (f"; missed: {', '.join(missed)}" if missed else ""))
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
