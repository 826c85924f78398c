"""Loop-rule schedules: the kernel's own loops made parallel and vectorized, for kernels without donors."""
from __future__ import annotations

import pytest

from recommender.measure import MeasureSettings, Measurer
from recommender.core.rows import OK, SAMPLED


def _batch_norm_relu(c: int = 64, hw: int = 56):
    """Batch norm (inference) + ReLU as Relax legalizes it: per-channel operands broadcast over H x W."""
    from tvm import te, topi
    x = te.placeholder((1, c, hw, hw), name="x")
    mean, scale, shift = (te.placeholder((1, c, 1, 1), name=n) for n in ("mean", "scale", "shift"))
    y = topi.nn.relu(topi.add(topi.multiply(topi.subtract(x, mean), scale), shift))
    return te.create_prim_func([x, mean, scale, shift, y])


def _softmax(rows: int = 256, n: int = 128):
    from tvm import te, topi
    x = te.placeholder((1, 2, rows // 2, n), name="x")
    return te.create_prim_func([x, topi.nn.softmax(x, axis=-1)])


def _kernel(name: str, func):
    import tvm

    from recommender.frontend.kernels import kernel_from_mod
    return kernel_from_mod(name, tvm.IRModule({"main": func.with_attr("global_symbol", "main")}))




def test_an_elementwise_kernel_keeps_its_loops_parallel_outside_and_vectorized_inside(target):
    from recommender.transfer.replay import rule_schedules
    kernel = _kernel("bn_relu", _batch_norm_relu())
    (rule,) = rule_schedules(kernel.mod, target.tvm())  # one block left after inlining: one schedule
    script = rule.mod.script()
    # channels x rows in parallel, a row of 56 vectorized: the per-channel operands are read once per row
    assert "T.parallel(T.int64(3584))" in script or "T.parallel(3584)" in script, script
    assert "T.vectorized(56)" in script or "T.vectorized(T.int64(56))" in script, script
    kinds = [inst[0] for inst in rule.trace_json[0]]
    assert kinds.count("ComputeInline") == 3 and "Parallel" in kinds and "Vectorize" in kinds


def test_a_softmax_computes_its_reductions_per_row_of_the_parallel_loop(target):
    from recommender.transfer.replay import rule_schedules
    kernel = _kernel("softmax", _softmax())
    rules = rule_schedules(kernel.mod, target.tvm())
    assert len(rules) == 2  # row-wise and block-wise
    row_wise = rules[0].mod.script()
    parallel_at = row_wise.index("T.parallel")
    for block in ("T_softmax_maxelem", "T_softmax_expsum"):  # inside the parallel loop, not at the root
        assert row_wise.index(f'T.sblock("{block}') > parallel_at, row_wise
    # the exp feeds a sum: it stays a block of its own, vectorized, rather than inlined into the sum
    assert 'T.sblock("T_softmax_exp")' in row_wise
    # each row's sums split into a lane per vector element (rfactor), the lanes vectorized, then added up
    for block in ("T_softmax_maxelem_rf", "T_softmax_expsum_rf"):
        assert f'T.sblock("{block}' in row_wise, row_wise
    block_wise = rules[1].mod.script()
    assert block_wise.count("T.parallel") == 4  # every block parallel at the root


@pytest.mark.slow
def test_rule_candidates_are_measured_with_the_output_check_and_beat_the_default(target):
    """sampled_candidates puts the rules first (source LOOP_RULE); measured with the output check beside a
    design-space draw, on a batch norm + ReLU over 64 x 56 x 56 the rule beats one thread of plain loops by far
    (3.5x measured here), and a draw that fuses every loop does not."""
    from recommender.transfer.kernel import DESIGN_SPACE, LOOP_RULE, FoundCandidates, measure_kernel, sampled_candidates
    kernel = _kernel("bn_relu", _batch_norm_relu())
    with Measurer(target.config, MeasureSettings(repeat=5, min_repeat_ms=20)) as m:
        cands = sampled_candidates(kernel, m, 2)
        assert [c.source.model for c in cands][:1] == [LOOP_RULE]
        assert {c.source.model for c in cands[1:]} <= {DESIGN_SPACE}
        found = FoundCandidates(kernel, cands, SAMPLED, 0.0)
        draws = [i for i, c in enumerate(cands) if c.source.model == DESIGN_SPACE]
        rules = [i for i, c in enumerate(cands) if c.source.model == LOOP_RULE]
        choice = measure_kernel(found, m, target.tvm(), selected=rules + draws[:1])
    rule_row = next(r for r in choice.rows if r.source_model == LOOP_RULE)
    assert rule_row.status == OK and rule_row.latency_s > 0
    assert rule_row.latency_s < 0.7 * choice.default_s, (rule_row.latency_s, choice.default_s)
    assert choice.chosen is not None and choice.latency_s <= rule_row.latency_s


def test_a_kernel_without_loops_to_spare_gets_no_rule(target):
    """A reduction to one scalar has no spatial loop to run in parallel: no rule schedule, no error."""
    from tvm import te

    from recommender.transfer.replay import rule_schedules
    x = te.placeholder((4096,), name="x")
    k = te.reduce_axis((0, 4096), name="k")
    total = te.compute((), lambda: te.sum(x[k], axis=k), name="total")
    assert rule_schedules(_kernel("sum", te.create_prim_func([x, total])).mod, target.tvm()) == []


def _max_pool(c: int = 64, hw: int = 55):
    """A 3x3 stride-2 ceil-mode max pool (SqueezeNet's), as Relax legalizes it: padded input, then the window."""
    from tvm import te, topi
    x = te.placeholder((1, c, hw, hw), name="x")
    return te.create_prim_func([x, topi.nn.pool2d(x, (3, 3), (2, 2), (1, 1), (0, 0, 0, 0), "max", ceil_mode=True)])


def test_a_pooling_gets_a_window_schedule_parallel_over_rows_with_its_rows_left_to_llvm(target):
    """Besides the row- and block-wise rules, a pooling's window reduction gets `windowed`'s schedule: channels x
    rows parallel, each output row a plain loop over the window (not fused into the parallel loop); a softmax
    (one reduction loop) and a conv (two inputs) get none."""
    from recommender.rules import loop as loop_rules
    from recommender.transfer.replay import rule_schedules
    pool = _kernel("pool", _max_pool())
    rules = rule_schedules(pool.mod, target.tvm())
    assert len(rules) == 3
    windowed = rules[2].mod.script()
    assert "T.parallel(T.int64(1728))" in windowed or "T.parallel(1728)" in windowed, windowed  # 64 x 27 rows
    assert loop_rules.windowed(_kernel("softmax", _softmax()).mod) is None
    from tests.test_conv_rules import _conv_bias_relu
    assert loop_rules.windowed(_conv_bias_relu()) is None


@pytest.mark.slow
def test_the_window_schedule_beats_the_pools_default(target):
    """Measured with the output check, beside the default: on the pool over 64 x 111 x 111 the window schedule
    ran 0.062 ms against the default's 0.103 (llvm-znver5-2c; the row- and block-wise rules 0.25-0.27)."""
    from recommender.transfer.kernel import LOOP_RULE, FoundCandidates, measure_kernel, sampled_candidates
    kernel = _kernel("pool", _max_pool(hw=111))
    with Measurer(target.config, MeasureSettings(repeat=5, min_repeat_ms=20)) as m:
        cands = sampled_candidates(kernel, m, 0)
        assert [c.source.model for c in cands] == [LOOP_RULE] * 3
        choice = measure_kernel(FoundCandidates(kernel, cands, SAMPLED, 0.0), m, target.tvm())  # every one
    window = [r for r in choice.rows if r.source_model == LOOP_RULE][2]
    assert window.status == OK and window.latency_s < 0.8 * choice.default_s, (window.latency_s, choice.default_s)
    assert choice.chosen is not None and choice.latency_s <= window.latency_s
