"""Matmul rule schedules: a register tile of rows x vectors of columns, K cut into blocks where it is deep."""
from __future__ import annotations

import pytest

from recommender.measure import MeasureSettings, Measurer
from recommender.core.rows import OK, SAMPLED


def _matmul_bias(m: int = 64, k: int = 256, n: int = 128, batch: int = 0, transposed: bool = False):
    """X[(b,) M, K] by W[(b,) K, N] (or W[N, K] with `transposed`) + a bias over N, as Relax legalizes a
    dense layer: a `matmul` block and an `T_add` epilogue."""
    import tvm
    from tvm import te
    lead = (batch,) if batch else ()
    x = te.placeholder((*lead, m, k), name="x")
    w = te.placeholder((*lead, n, k) if transposed else (*lead, k, n), name="w")
    b = te.placeholder((n,), name="b")
    r = te.reduce_axis((0, k), name="k")
    if transposed:
        y = te.compute((m, n), lambda i, j: te.sum(x[i, r] * w[j, r], axis=r), name="matmul")
    else:
        y = te.compute((*lead, m, n), lambda *ij: te.sum(x[(*ij[:-1], r)] * w[(*ij[:-2], r, ij[-1])], axis=r),
                       name="matmul")
    z = te.compute(y.shape, lambda *ij: y[ij] + b[ij[-1]], name="T_add")
    func = te.create_prim_func([x, w, b, z])
    return tvm.IRModule({"main": func.with_attr("global_symbol", "main")})


def test_tiles_divide_the_output_and_block_only_a_deep_reduction():
    from recommender.rules.matmul import matmul_tiles
    # AVX-512: 8 rows x 3 vectors (24 accumulators) where 6 rows do not divide 128; K blocks of 128 and 256
    # each K block with W read in place, then packed; the second shape in blocks of 128, in place
    assert matmul_tiles(128, 3072, 768, lanes=16) == [(8, 3, 16, 0, False), (8, 3, 16, 128, False),
                                                      (8, 3, 16, 256, False), (8, 3, 16, 0, True),
                                                      (8, 3, 16, 128, True), (8, 3, 16, 256, True),
                                                      (4, 4, 16, 128, False)]
    # K of 64: never blocked
    assert matmul_tiles(120, 768, 64, lanes=16) == [(6, 4, 16, 0, False), (6, 4, 16, 0, True), (8, 3, 16, 0, False)]
    assert matmul_tiles(128, 768, 768)[::3] == [(4, 3, 8, 0, False), (4, 3, 8, 0, True), (8, 1, 8, 128, False)]  # AVX2
    # a prime row count (ViT's 197 tokens): 6-row tiles, the last one cut short, not 1-row ones
    assert matmul_tiles(197, 768, 768, lanes=16)[:3] == [(6, 4, 16, 0, False), (6, 4, 16, 128, False),
                                                         (6, 4, 16, 256, False)]
    assert matmul_tiles(197, 768, 768)[0] == (6, 2, 8, 0, False)
    assert matmul_tiles(7, 768, 768, lanes=16)[0] == (1, 2, 16, 0, False)  # 8 rows for 7 would add 14%: none ragged
    # 24 columns: no vector of 16 without padding 33%, and nothing else fits: the fallback's two shapes, padded
    assert matmul_tiles(128, 24, 64, lanes=16) == [(4, 2, 16, 0, True), (8, 1, 16, 0, True)]
    # a window attention's 49 x 49 products: neither rows nor columns fit; 6 x 4 and 8 x 1 over 64 columns
    assert matmul_tiles(49, 49, 32, lanes=16) == [(6, 4, 16, 0, True), (8, 1, 16, 0, True)]
    assert matmul_tiles(49, 49, 32) == [(8, 1, 8, 0, True)]  # AVX2: 56 columns
    # 197 columns (ViT's Q by K-transposed): packed tiles over columns padded to 208 or 216
    assert matmul_tiles(197, 197, 64) == [(6, 2, 8, 0, True), (4, 3, 8, 0, True)]
    assert matmul_tiles(197, 197, 64, lanes=16) == [(8, 1, 16, 0, True)]
    with pytest.raises(ValueError, match="8 or 16"):
        matmul_tiles(128, 768, 768, lanes=4)


def test_the_rule_applies_to_row_major_right_operands_batched_or_not():
    from recommender.rules import matmul as matmul_rules
    assert matmul_rules.matmul_output(_matmul_bias()) == (64, 128, 256)
    assert matmul_rules.matmul_output(_matmul_bias(batch=3)) == (64, 128, 256)
    # 4 rows x 4 vectors, unblocked and in K blocks of 128 (256 is K itself), in place and packed, then 4 x 2
    # in blocks of 128
    assert matmul_rules.matmul_tiles(64, 128, 256, lanes=16) == [
        (4, 4, 16, 0, False), (4, 4, 16, 128, False), (4, 4, 16, 0, True), (4, 4, 16, 128, True),
        (4, 2, 16, 128, False)]
    assert len(matmul_rules.rule_schedules(_matmul_bias(batch=3), lanes=16)) == 5
    assert matmul_rules.matmul_output(_matmul_bias(transposed=True)) is None  # W[N, K]: no vector rows of W
    assert matmul_rules.rule_schedules(_matmul_bias(transposed=True)) == []


@pytest.mark.slow
@pytest.mark.parametrize("m,n", [(64, 256), (197, 256), (64, 197), (49, 49)])
def test_matmul_rule_candidates_are_checked_measured_beside_the_default_and_beat_it(target, m, n):
    """The rule's tiles come as SAMPLED candidates (source MATMUL_RULE) that measure_kernel measures whatever
    the selection, each output checked against the unscheduled kernel; blocked or not, packed or not, with a
    last row tile cut short (197 rows, ViT's tokens) or columns padded (197), or both (49 x 49, a window
    attention's products), they beat plain loops by far."""
    from recommender.frontend.kernels import kernel_from_mod
    from recommender.transfer.kernel import MATMUL_RULE, FoundCandidates, measure_kernel, tile_rule_candidates
    kernel = kernel_from_mod("matmul", _matmul_bias(m=m, k=512, n=n))
    assert kernel.class_key.startswith("matmul/"), kernel.class_key
    with Measurer(target.config, MeasureSettings(repeat=5, min_repeat_ms=20)) as m:
        cands = tile_rule_candidates(kernel, m)
        # 49 columns on AVX2: only the fixed tile, every other vector width pads them by over 10%
        from recommender.target.spec import float32_lanes
        least = 1 if n == 49 and float32_lanes(target.tvm()) == 8 else 2
        assert len(cands) >= least and all(c.source.model == MATMUL_RULE and c.source.match == SAMPLED for c in cands)
        choice = measure_kernel(FoundCandidates(kernel, cands, SAMPLED, 0.0), m, target.tvm())  # every one
    rows = [r for r in choice.rows if r.source_model == MATMUL_RULE]
    assert len(rows) == len(cands) and all(r.status == OK and r.latency_s > 0 for r in rows)
    assert choice.chosen is not None and choice.chosen["source_model"] == MATMUL_RULE
    assert choice.latency_s < 0.2 * choice.default_s, (choice.latency_s, choice.default_s)


def test_a_padded_tile_rebuilds_from_its_trace(target):
    """The padded tiles' traces hold PadEinsum: the trace check accepts it and the schedule is rebuilt from
    the trace, as a transfer does for the database after measuring it in a worker."""
    from featurize.trace_schema import check_trace
    from recommender.rules import matmul as matmul_rules
    from recommender.transfer.replay import apply_replayed, tile_rule_schedules
    mod = _matmul_bias(m=64, k=128, n=197)
    replayed = tile_rule_schedules(mod, target.tvm(), rule="matmul")
    assert replayed and all(t[-1] for t in matmul_rules.matmul_tiles(64, 197, 128))  # packed only
    for r in replayed:
        assert any(inst[0] == "PadEinsum" for inst in r.trace_json[0])
        check_trace(r.trace_json)
        assert apply_replayed(r.trace_json, mod, target.tvm()).sch is not None
