"""Replaying one kernel's schedule onto another kernel of its class (real TVM, small kernels)."""
from __future__ import annotations

import pytest

from featurize.trace_json import block_names, postproc_start, trace_to_json
from recommender.frontend.kernels import extract_kernels
from recommender.frontend.model_import import ImportedModel, export_torch, from_exported, lower_for_tuning
from recommender.transfer.replay import CLASS_MISMATCH, ReplayFailure, replay_anchor_trace, replay_trace

from .conftest import small_cnn


def _kernels(target, width, size):
    return _kernels_of(*small_cnn(width=width, size=size), target)


def _kernels_of(model, args, target):
    mod = lower_for_tuning(from_exported(export_torch(model, args, "t"), "t"), target.tvm())
    return extract_kernels(ImportedModel("t", "t", mod), target.tvm())


def _tuned_like_trace(kernel, target, space: int = 0):
    """A design-space point of the kernel (`space`: which of the design spaces), postprocessed like a
    MetaSchedule tuning record."""
    from tvm.s_tir import meta_schedule as ms

    from recommender.core.tvm_setup import load_tensor_intrinsics
    load_tensor_intrinsics()
    ctx = ms.TuneContext(mod=kernel.mod, target=target, space_generator="post-order-apply", num_threads=1,
                         rand_state=1)
    sch = ctx.space_generator.generate_design_space(kernel.mod)[space]
    sch.enter_postproc()
    assert all(p.apply(sch) for p in ctx.space_generator.postprocs)
    return trace_to_json(sch.trace)


@pytest.fixture(scope="module")
def two_models(target):
    return _kernels(target, 8, 32), _kernels(target, 24, 40)


def test_every_shared_class_replays_across_models_and_builds(two_models, target):
    import tvm
    a, b = two_models
    b_by_class = {k.class_key: k for k in b}
    replayed = 0
    for src in a:
        dst = b_by_class[src.class_key]
        trace = _tuned_like_trace(src, target.tvm())
        assert postproc_start(trace) < len(trace[0])
        r = replay_trace(trace, src.mod, dst.mod, target.tvm())
        assert postproc_start(r.trace_json) == len(r.trace_json[0])  # postprocs are rerun, not replayed
        if src.kind == "conv2d":  # the target's postprocessors turned the annotations into real loops
            script = r.sch.mod.script()
            assert "T.parallel" in script and "T.vectorized" in script, src.name
        tvm.compile(r.sch.mod, target=target.tvm())
        replayed += 1
    assert replayed == len(a) >= 5


def _mean_kernel(target, prelude_ops: int, channels: int):
    import torch

    class Mean(torch.nn.Module):
        def forward(self, x):
            for _ in range(prelude_ops):
                x = torch.exp(x)
            return x.mean(dim=(2, 3))

    args = (torch.randn(1, channels, 8, 8),)
    mod = lower_for_tuning(from_exported(export_torch(Mean(), args, "t"), "t"), target.tvm())
    return next(k for k in extract_kernels(ImportedModel("t", "t", mod), target.tvm()) if k.kind == "reduction")


def test_reduction_block_lookups_are_renamed(target):
    """TVM names a mean's reduction block after a model variable (lv3_red); replay maps the trace's lookups
    to the target kernel's own block names."""
    from featurize.tir_structure import block_infos
    src, dst = _mean_kernel(target, 0, 16), _mean_kernel(target, 2, 32)
    assert src.class_key == dst.class_key
    src_names, dst_names = ({b.name for b in block_infos(k.mod)} for k in (src, dst))
    assert src_names != dst_names
    trace = _tuned_like_trace(src, target.tvm())
    assert set(block_names(trace)) & (src_names - dst_names)
    r = replay_trace(trace, src.mod, dst.mod, target.tvm())
    assert set(block_names(r.trace_json)) - {"root"} <= dst_names


def test_other_class_is_refused_with_its_reason(two_models, target):
    a, b = two_models
    src = next(k for k in a if k.kind == "conv2d")
    dst = next(k for k in b if k.kind == "pool")
    with pytest.raises(ReplayFailure) as info:
        replay_trace(_tuned_like_trace(src, target.tvm()), src.mod, dst.mod, target.tvm())
    assert info.value.reason == CLASS_MISMATCH


def test_anchor_trace_replays_onto_another_epilogue_and_computes_the_right_result(two_models, target):
    """conv+bn+relu's schedule onto conv+bn+sigmoid: no same-class donor, same anchor; the anchor-trace
    replay builds, keeps the tiling, and the result matches the unscheduled kernel."""
    import torch

    from featurize.tir_structure import anchor_key
    from recommender.measure import MeasureSettings, Measurer
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Conv2d(3, 16, 3, padding=1, bias=False), torch.nn.BatchNorm2d(16),
                              torch.nn.Sigmoid()).eval()
    (dst,) = [k for k in _kernels_of(net, (torch.randn(1, 3, 24, 24),), target) if k.kind == "conv2d"]
    src = next(k for k in two_models[0] if k.kind == "conv2d" and anchor_key(k.class_key) == anchor_key(dst.class_key))
    assert src.class_key != dst.class_key
    trace = _tuned_like_trace(src, target.tvm())
    with pytest.raises(ReplayFailure) as err:
        replay_trace(trace, src.mod, dst.mod, target.tvm())
    assert err.value.reason == CLASS_MISMATCH
    r = replay_anchor_trace(trace, src.mod, dst.mod, target.tvm())
    kinds = [inst[0] for inst in r.trace_json[0]]
    assert "Split" in kinds and "SamplePerfectTile" in kinds  # the anchor tiling survived
    with Measurer(target.config, MeasureSettings(repeat=2, min_repeat_ms=1)) as m:
        (res,) = m.measure([r.sch.mod], reference=dst.mod)
    assert res.status == "ok", res.error


@pytest.mark.parametrize("act,space", [("elu", 0), ("mish", 1)])  # space 1: the donor's write cache
def test_anchor_trace_replays_onto_an_epilogue_that_reads_the_conv_twice(two_models, target, act, space):
    """conv+bn+ELU (exp(x) and max(x, 0) both read the conv's output) and conv+bn+Mish: TVM's anchor-trace
    application keeps the exp block, leaves the conv with two consumers where the donor's trace expects one,
    and fails; replay_anchor_trace folds the epilogue into the output block first, and the result matches
    the unscheduled kernel."""
    import torch
    from tvm.s_tir import Schedule
    from tvm.s_tir.meta_schedule.trace_apply import schedule_using_anchor_trace

    from featurize.tir_structure import anchor_key
    from featurize.trace_json import strip_postproc
    from recommender.measure import MeasureSettings, Measurer
    from recommender.transfer.replay import renamed_trace, anchor_block_mapping
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Conv2d(3, 16, 3, padding=1, bias=False), torch.nn.BatchNorm2d(16),
                              torch.nn.ELU() if act == "elu" else torch.nn.Mish()).eval()
    (dst,) = [k for k in _kernels_of(net, (torch.randn(1, 3, 24, 24),), target) if k.kind == "conv2d"]
    src = next(k for k in two_models[0] if k.kind == "conv2d" and anchor_key(k.class_key) == anchor_key(dst.class_key))
    tt = target.tvm()
    trace = _tuned_like_trace(src, tt, space=space)
    with pytest.raises(Exception):  # TVM alone
        schedule_using_anchor_trace(Schedule(dst.mod), renamed_trace(strip_postproc(trace), src.mod,
                                                                      anchor_block_mapping(src.mod, dst.mod)), tt)
    r = replay_anchor_trace(trace, src.mod, dst.mod, tt)
    assert "SamplePerfectTile" in [inst[0] for inst in r.trace_json[0]]  # the anchor tiling kept
    with Measurer(target.config, MeasureSettings(repeat=2, min_repeat_ms=1)) as m:
        (res,) = m.measure([r.sch.mod], reference=dst.mod)
    assert res.status == "ok", res.error


def test_anchor_trace_that_leaves_a_padded_border_unwritten_is_refused_and_would_compute_wrong(target):
    """conv+bn+relu6 fused with the zero padding of the next (TF-style, one-sided) conv, as in MobileNetV2:
    TVM's anchor-trace application computes the padding epilogue at the anchor's loops over the anchor's
    extent, so the border row and column are never written. replay_anchor_trace refuses such a schedule
    without building it, and the measurer's output check rejects it when it is built anyway."""
    import torch
    from tvm.s_tir import Schedule
    from tvm.s_tir.meta_schedule.trace_apply import schedule_using_anchor_trace

    from featurize.tir_structure import anchor_key
    from recommender.measure import MeasureSettings, Measurer
    from recommender.transfer.replay import renamed_trace, anchor_block_mapping, unwritten_output
    from featurize.trace_json import strip_postproc
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Conv2d(3, 16, 1, bias=False), torch.nn.BatchNorm2d(16), torch.nn.ReLU6(),
                              torch.nn.ZeroPad2d((0, 1, 0, 1)), torch.nn.Conv2d(16, 16, 3, stride=2, groups=16)).eval()
    kernels = _kernels_of(net, (torch.randn(1, 3, 16, 16),), target)
    (dst,) = [k for k in kernels if k.kind == "conv2d" and k.class_key.endswith("PadInput")]
    src = next(k for k in _kernels(target, 8, 32) if k.kind == "conv2d" and k.class_key != dst.class_key
               and anchor_key(k.class_key) == anchor_key(dst.class_key))
    tt = target.tvm()
    trace = _tuned_like_trace(src, tt, space=1)  # the space with a write cache: the epilogue computed at a loop
    with pytest.raises(ReplayFailure) as err:
        replay_anchor_trace(trace, src.mod, dst.mod, tt)
    assert "unwritten" in err.value.message, err.value.message
    # the same schedule, built without that check, computes a wrong result
    sch = Schedule(dst.mod)
    schedule_using_anchor_trace(sch, renamed_trace(strip_postproc(trace), src.mod,
                                                    anchor_block_mapping(src.mod, dst.mod)), tt)
    assert unwritten_output(sch)
    with Measurer(target.config, MeasureSettings(repeat=1, min_repeat_ms=0)) as m:
        (res,) = m.measure([sch.mod], reference=dst.mod)
    assert res.status == "wrong_result", (res.status, res.error)


def test_a_committed_latency_runs_database_is_rebuilt_from_its_report_and_traces(tmp_path):
    """benchmarks/ab_databases.rebuild_database: each kernel's chosen schedule at a git revision, its trace
    (candidates.jsonl.gz) replayed onto the model's kernels, one record per kernel that had one; a revision
    git does not know is refused by name."""
    import json
    import sys

    from tvm.s_tir import meta_schedule as ms

    from recommender.core.errors import SchedrecError
    from recommender.frontend.model_import import import_model
    from recommender.target.spec import parse_target
    from .cli_helpers import ROOT
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import ab_databases
    target = parse_target('{"kind": "llvm", "mcpu": "znver4", "num-cores": 2}').tvm()
    run = ROOT / "models" / "llvm-znver4-2c" / "latency" / "bert_tiny"
    kernels = {k.name: k for k in extract_kernels(import_model("zoo:bert_tiny", target), target)}
    chosen = [k for k in json.loads((run / "report.json").read_text())["kernels"] if k.get("chosen")]
    n = ab_databases.rebuild_database(run, "HEAD", kernels, target, str(tmp_path))
    assert n == len(chosen) > 0  # every chosen schedule of the committed run has its trace
    records = ms.database.JSONDatabase(work_dir=str(tmp_path)).get_all_tuning_records()
    import tvm_ffi
    assert len(records) == n  # each on one of the model's own kernels
    assert all(any(tvm_ffi.structural_equal(r.workload.mod, k.mod) for k in kernels.values()) for r in records)
    with pytest.raises(SchedrecError, match="at no-such-rev"):
        ab_databases.rebuild_database(run, "no-such-rev", kernels, target, str(tmp_path / "x"))
