"""Conv rule schedules: a register tile of output channels x vector columns, for every stride-1 NCHW conv."""
from __future__ import annotations

from pathlib import Path

import pytest

from recommender.measure import MeasureSettings, Measurer
from recommender.core.rows import OK, SAMPLED
from recommender.rules.conv import PACKED_FIXED


def _conv_bias_relu(ci: int = 16, co: int = 32, hw: int = 28, stride: int = 1, kernel: int | tuple = 3):
    """conv2d (NCHW, padding half the filter: 'same' at stride 1) + bias + ReLU, as Relax legalizes it (topi:
    pad_temp, conv2d_nchw, epilogue); `kernel` a size or (height, width)."""
    import tvm
    from tvm import te, topi
    kh, kw = kernel if isinstance(kernel, tuple) else (kernel, kernel)
    x = te.placeholder((1, ci, hw, hw), name="x")
    w = te.placeholder((co, ci, kh, kw), name="w")
    b = te.placeholder((1, co, 1, 1), name="b")
    y = topi.nn.relu(topi.add(topi.nn.conv2d_nchw(x, w, stride, (kh // 2, kw // 2), 1), b))
    func = te.create_prim_func([x, w, b, y])
    return tvm.IRModule({"main": func.with_attr("global_symbol", "main")})


def test_tiles_divide_the_output_and_prefer_full_vectors():
    from recommender.rules.conv import conv_tiles
    assert conv_tiles(256, 56, 56) == [(8, 1, 8), (4, 2, 8), (8, 1, 7), (4, 2, 7)]
    assert conv_tiles(512, 7, 7) == [(8, 1, 7), (4, 1, 7)]  # 7 rows: no 2-row tile
    assert conv_tiles(64, 12, 12) == [(8, 1, 6), (4, 2, 6)]  # 6 of (8, 7, 6, 5) divides 12; 4 not needed
    assert conv_tiles(64, 4, 4) == [(8, 1, 4), (4, 2, 4)]  # half vectors only where nothing wider divides
    assert conv_tiles(6, 10, 10) == [(2, 1, 5)]  # 6 channels: pairs only
    assert conv_tiles(64, 17, 17) == []  # no column tile divides 17


def test_avx512_tiles_use_up_to_16_accumulators_of_up_to_16_columns():
    from recommender.rules.conv import conv_tiles
    assert conv_tiles(256, 56, 56, lanes=16) == [(8, 2, 14), (4, 4, 14), (8, 2, 8), (4, 4, 8), (16, 1, 14), (8, 1, 14)]
    assert conv_tiles(64, 224, 224, lanes=16) == [(8, 2, 16), (4, 4, 16), (8, 2, 14), (4, 4, 14), (16, 1, 16),
                                                  (8, 1, 16)]  # one-row tiles for Zen 4
    assert conv_tiles(256, 14, 14, lanes=16) == [(8, 2, 14), (16, 1, 14), (8, 1, 14)]  # 14 rows: no 4-row tile
    assert conv_tiles(512, 7, 7, lanes=16) == [(16, 1, 7), (8, 1, 7)]  # 7 wide: the narrow tile, one row
    assert conv_tiles(64, 17, 17, lanes=16) == []
    with pytest.raises(ValueError, match="8 or 16"):
        conv_tiles(64, 56, 56, lanes=4)


def test_the_tile_follows_the_targets_vector_registers():
    from recommender.transfer.replay import tile_rule_schedules
    from recommender.target.spec import float32_lanes, parse_target
    avx2 = parse_target('{"kind": "llvm", "mcpu": "znver3", "num-cores": 2}').tvm()
    avx512 = parse_target('{"kind": "llvm", "mcpu": "znver5", "num-cores": 2}').tvm()
    assert (float32_lanes(avx2), float32_lanes(avx512)) == (8, 16)
    mod = _conv_bias_relu(co=64, hw=56)
    narrow = [r.mod.script() for r in tile_rule_schedules(mod, avx2)]
    wide = [r.mod.script() for r in tile_rule_schedules(mod, avx512)]
    # AVX2: its packed tiles first (measured there only), then the column tiles
    assert all("layout_rewrite_preproc" in s for s in narrow[:PACKED_FIXED])
    narrow = narrow[PACKED_FIXED:]
    assert not any("layout_rewrite_preproc" in s for s in narrow + wide)
    assert len(narrow) == 4 and len(wide) == 6  # AVX-512: the one-row tiles on 14 columns as well
    assert all("T.vectorized(14)" not in s for s in narrow) and sum("T.vectorized(8)" in s for s in narrow) == 2
    assert sum("T.vectorized(14)" in s for s in wide) == 4 and sum("T.vectorized(8)" in s for s in wide) == 2
    assert "T.unroll(8)" in wide[0] and "T.unroll(2)" in wide[0], wide[0]  # 8 channels x 2 rows per tile


def test_a_conv_is_tiled_into_vector_columns_with_its_epilogue_per_tile():
    from recommender.transfer.replay import tile_rule_schedules
    from recommender.target.spec import parse_target
    mod = _conv_bias_relu()
    rules = tile_rule_schedules(mod, parse_target('{"kind": "llvm", "mcpu": "znver3", "num-cores": 2}').tvm())
    rules = rules[PACKED_FIXED:]  # after the packed tiles
    assert len(rules) == 2  # 28 columns: 7 wide, as 8 x 1 and 4 x 2 tiles (28 rows split in 2)
    script = rules[0].mod.script()
    # (channel tile, row) pairs in parallel: 32 / 8 x 28 rows; the padding parallel over its 16 x 30 rows
    assert "T.parallel(112)" in script and "T.parallel(480)" in script, script
    assert script.count("T.vectorized(7)") == 3, script  # zeroing, the multiply-add and the epilogue
    assert "T.unroll(8)" in script and "T.unroll(3)" in script, script  # channels and filter taps unrolled
    assert script.count("conv2d_nchw_update") >= 1 and "T.max(" in script  # the ReLU inside the tile loop


def test_depthwise_tiles_take_one_channel_and_the_tallest_rows_that_divide_the_map():
    from recommender.rules.conv import conv_tiles
    assert conv_tiles(1, 56, 56, lanes=16) == [(1, 8, 14), (1, 7, 14), (1, 8, 8), (1, 7, 8)]
    assert conv_tiles(1, 7, 7, lanes=16) == [(1, 7, 7), (1, 1, 7)]
    assert conv_tiles(1, 14, 14) == [(1, 7, 7), (1, 2, 7)]  # AVX2: 7 columns, the only width dividing 14


def test_stride_2_convs_get_the_rule_wider_strides_and_topi_depthwise_blocks_do_not(target):
    from tvm import te, topi

    from recommender.rules.conv import conv_output
    from recommender.transfer.replay import tile_rule_schedules
    assert conv_output(_conv_bias_relu(stride=2)) == (32, 14, 14)  # every other input column, shuffled out
    assert tile_rule_schedules(_conv_bias_relu(stride=2), target.tvm())
    assert tile_rule_schedules(_conv_bias_relu(stride=3, hw=30), target.tvm()) == []  # every third: no rule
    x = te.placeholder((1, 32, 28, 28), name="x")
    w = te.placeholder((32, 1, 3, 3), name="w")
    import tvm
    dw = te.create_prim_func([x, w, topi.nn.depthwise_conv2d_nchw(x, w, 1, 1, 1)])  # not Relax's form
    assert tile_rule_schedules(tvm.IRModule({"main": dw.with_attr("global_symbol", "main")}), target.tvm()) == []


def test_a_pointwise_convs_input_copy_is_inlined_and_padding_stays_at_the_root():
    """Relax gives an unpadded (1x1) conv a pad_temp block too, a plain copy of its input: the rule reads the
    input in place instead (median 1.09x over the 23 heaviest pointwise convs of mnasnet1_0, efficientnet_b0 and
    resnet50, benchmarks/results/llvm-znver4-2c/pad_copy.md);
    a padded conv keeps its padding, made once at the root."""
    from recommender.transfer.replay import tile_rule_schedules
    from recommender.target.spec import parse_target
    avx2 = parse_target('{"kind": "llvm", "mcpu": "znver3", "num-cores": 2}').tvm()
    pointwise = [r.mod.script() for r in tile_rule_schedules(_conv_bias_relu(kernel=1), avx2)]
    padded = [r.mod.script() for r in tile_rule_schedules(_conv_bias_relu(kernel=3), avx2)]
    assert pointwise and all('T.sblock("pad_temp")' not in s for s in pointwise), pointwise[0]
    assert padded and all('T.sblock("pad_temp")' in s for s in padded)


def test_a_conv_whose_epilogue_pads_the_output_keeps_the_padding_at_the_root_and_writes_the_border(target):
    """Relax fuses the next conv's padding into a 1x1 conv's epilogue (mobilenet_v2's expand convs feed padded
    depthwise convs): computed per tile the border stayed unwritten and every rule schedule was rejected; the
    pad now runs at the root over the whole padded map, after the tiles write the epilogue. Built for the host
    (it runs them: znver4's AVX-512 build stopped on an illegal instruction on an AVX2 host)."""
    import numpy as np
    import tvm
    from tvm import te, topi
    from recommender.transfer.replay import tile_rule_schedules
    x = te.placeholder((1, 16, 28, 28), name="x")
    w = te.placeholder((96, 16, 1, 1), name="w")
    b = te.placeholder((1, 96, 1, 1), name="b")
    relu6 = topi.clip(topi.add(topi.nn.conv2d_nchw(x, w, 1, 0, 1), b), 0.0, 6.0)
    padded = topi.nn.pad(relu6, [0, 0, 1, 1], [0, 0, 0, 0], name="PadInput")  # one side, as for a stride-2 conv
    mod = tvm.IRModule({"main": te.create_prim_func([x, w, b, padded]).with_attr("global_symbol", "main")})
    target = target.tvm()
    scheds = tile_rule_schedules(mod, target)
    assert scheds and all("for i0_i1_i2_fused in T.parallel(2784)" in r.mod.script() for r in scheds)  # 96 x 29 rows
    rng = np.random.default_rng(0)
    inputs = [rng.uniform(-1, 1, s).astype("float32") for s in ((1, 16, 28, 28), (96, 16, 1, 1), (1, 96, 1, 1))]

    def run(m) -> np.ndarray:
        out = tvm.runtime.tensor(np.full((1, 96, 29, 29), 7.0, "float32"))  # a border left unwritten stays 7
        tvm.compile(m, target=target)["main"](*[tvm.runtime.tensor(a) for a in inputs], out)
        return out.numpy()
    expected = run(mod)
    assert expected[:, :, 0].max() == 0.0 and expected[:, :, :, 0].max() == 0.0
    for r in scheds:
        np.testing.assert_allclose(run(r.mod), expected, rtol=1e-5, atol=1e-5)


def test_a_pointwise_conv_on_a_7x7_map_gets_flat_tiles_on_avx512_that_replay_from_their_trace():
    """A 1x1 conv on a map narrower than a vector also gets flat tiles (the map's 49 positions padded to 64,
    whole vectors of 16 lanes): checked against the unscheduled conv, and rebuilt from the trace the database
    keeps; none on AVX2 (7 columns fill 8 lanes well), none for a stride-1 conv on a wider map."""
    from recommender.rules.conv import FlatTile, flat_fits, rule_schedules
    from recommender.transfer.replay import apply_replayed, tile_rule_schedules
    from recommender.target.spec import parse_target
    pointwise = _conv_bias_relu(ci=64, co=32, hw=7, kernel=1)
    avx512 = parse_target('{"kind": "llvm", "mcpu": "znver4", "num-cores": 2}').tvm()
    assert flat_fits(pointwise, 16) and not flat_fits(pointwise, 8)
    assert not flat_fits(_conv_bias_relu(ci=64, co=32, hw=14, kernel=1), 16)  # over half a vector wide, stride 1
    assert not flat_fits(_conv_bias_relu(ci=64, co=32, hw=56, stride=2, kernel=3), 16)  # 28x28: rows too far apart
    assert flat_fits(_conv_bias_relu(ci=8, co=16, hw=71, kernel=3), 16)  # no column tile divides 71: flat, any size
    assert flat_fits(_conv_bias_relu(ci=8, co=16, hw=55, kernel=3), 16)  # only 5-column tiles divide 55: flat too
    assert not flat_fits(_conv_bias_relu(ci=8, co=16, hw=56, kernel=3), 16)  # 14- and 8-column tiles divide 56
    flat = rule_schedules(pointwise, [FlatTile(16, 1), FlatTile(8, 2)], lanes=16)
    assert len(flat) == 2 and all("T.vectorized(16)" in s.mod.script() for s in flat)
    scheds = tile_rule_schedules(pointwise, avx512)
    assert len(scheds) == 5  # two column tiles, three flat ones
    _check_against_the_unscheduled_conv(pointwise, scheds[2:], avx512, (64, 32, 7, 7, 1), apply_replayed)


@pytest.mark.parametrize("hw,stride,kernel", [(7, 1, 3), (14, 2, 3), (14, 2, 1), (16, 2, 1), (28, 2, 1), (56, 2, 1),
                                               (7, 1, (3, 1)), (17, 1, (7, 1)), (17, 1, 1), (55, 1, 3)])
def test_flat_tiles_gather_a_padded_or_strided_input_and_replay_from_their_trace(hw, stride, kernel):
    """A 3x3 conv on a 7x7 map and stride-2 convs (onto 7x7, and onto 14x14, wider than half a vector; a 1x1
    one onto a map of any size, 28x28 here, where 14-column tiles fit too; onto 8x8 and 28x28 the vectors of some
    tiles cover the map exactly, no padding) get flat tiles too, and a 3x1 conv, whose unit tap drops out of the gather, and Inception's 7x1 and 1x1 convs on 17x17
    maps, which no column tile divides, and SqueezeNet's 3x3 conv on 55x55, which only 5-column tiles divide: the
    input gathered into one row per input channel and tap, zero padding and stride resolved in the gather, per
    tile of positions inside the parallel loop on maps over FLAT_MAX_POSITIONS; output-checked against the
    unscheduled conv, border included, and rebuilt from the trace."""
    from recommender.rules.conv import FLAT_MAX_POSITIONS, flat_fits
    from recommender.transfer.replay import apply_replayed, tile_rule_schedules
    from recommender.target.spec import parse_target
    mod = _conv_bias_relu(ci=32, co=32, hw=hw, stride=stride, kernel=kernel)
    avx512 = parse_target('{"kind": "llvm", "mcpu": "znver4", "num-cores": 2}').tvm()
    assert flat_fits(mod, 16) and not flat_fits(mod, 8)
    flat = [r for r in tile_rule_schedules(mod, avx512) if "ReIndex" in str(r.trace_json)]
    assert len(flat) == 3  # FLAT_SHAPES[16]: 16 x 1, 8 x 2, 4 x 4
    local = (hw // stride) ** 2 > FLAT_MAX_POSITIONS
    assert all(("ComputeAt" in str(r.trace_json)) == local for r in flat)
    _check_against_the_unscheduled_conv(mod, flat, avx512, (32, 32, hw, hw // stride, kernel), apply_replayed)


def runs_here(target) -> bool:
    """Whether this host can run code built for `target`: an AVX-512 build stops on an illegal instruction on an
    AVX2 host (the tests that build for znver4 run such code only where the host has AVX-512)."""
    from recommender.target.spec import float32_lanes
    return float32_lanes(target) <= 8 or "avx512f" in Path("/proc/cpuinfo").read_text()


def _check_against_the_unscheduled_conv(mod, scheds, target, dims, apply_replayed) -> None:
    """Every schedule's output, and that of its trace replayed on `mod`, equals the unscheduled conv's (the output
    buffer starts full of sevens, so an element left unwritten shows); dims: (in channels, out channels, input
    height and width, output height and width, filter size or (height, width)). Skipped where the host cannot run
    the target's code (`runs_here`)."""
    import numpy as np
    import tvm
    if not runs_here(target):
        pytest.skip(f"{target} code does not run on this host (no AVX-512)")
    ci, co, hw, out_hw, kernel = dims
    kh, kw = kernel if isinstance(kernel, tuple) else (kernel, kernel)
    rng = np.random.default_rng(0)
    inputs = [rng.uniform(-1, 1, s).astype("float32") for s in ((1, ci, hw, hw), (co, ci, kh, kw), (1, co, 1, 1))]

    def run(m) -> np.ndarray:
        out = tvm.runtime.tensor(np.full((1, co, out_hw, out_hw), 7.0, "float32"))
        tvm.compile(m, target=target)["main"](*[tvm.runtime.tensor(a) for a in inputs], out)
        return out.numpy()
    expected = run(mod)
    for r in scheds:
        again = apply_replayed(r.trace_json, mod, target)
        np.testing.assert_allclose(run(r.mod), expected, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(run(again.mod), expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("hw,deinterleaved", [(28, True), (27, False)])
def test_a_stride_2_convs_padded_input_keeps_even_and_odd_columns_apart(hw, deinterleaved):
    """Under a column tile a stride-2 conv's padding, at the root, writes even and odd columns into halves of
    their own (each tap then reads one contiguous vector); a padded map of odd width stays as it is. Checked
    against the unscheduled conv and rebuilt from the trace."""
    from recommender.transfer.replay import apply_replayed, tile_rule_schedules
    from recommender.target.spec import parse_target
    mod = _conv_bias_relu(ci=16, co=32, hw=hw, stride=2, kernel=3)
    avx2 = parse_target('{"kind": "llvm", "mcpu": "znver3", "num-cores": 2}').tvm()
    scheds = tile_rule_schedules(mod, avx2)[PACKED_FIXED:]  # the column tiles, after the packed ones
    assert len(scheds) == 2  # (8, 1, 7) and (4, 2, 7)
    padded = f"T.sblock_alloc_buffer((1, 16, {hw + 2}, 2, {(hw + 2) // 2}))"
    assert all((padded in s.mod.script()) == deinterleaved for s in scheds)
    _check_against_the_unscheduled_conv(mod, scheds, avx2, (16, 32, hw, 14, 3), apply_replayed)


def test_only_a_bare_same_shape_copy_counts_as_a_copy_to_inline():
    """A unary elementwise block reads one buffer of its output's shape too: it is not a copy to read through."""
    import tvm
    from tvm import te
    from tvm.s_tir import Schedule
    from recommender.rules.conv import is_copy
    x = te.placeholder((1, 8, 4, 4), name="x")
    copy = te.compute(x.shape, lambda *i: x(*i), name="copy")
    exp = te.compute(x.shape, lambda *i: te.exp(x(*i)), name="exp")
    half = te.compute((1, 8, 2, 2), lambda n, c, h, w: x[n, c, h, w], name="half")  # a crop: other shape
    func = te.create_prim_func([x, copy, exp, half]).with_attr("global_symbol", "main")
    sch = Schedule(tvm.IRModule({"main": func}))
    assert [is_copy(sch, sch.get_sblock(n)) for n in ("copy", "exp", "half")] == [True, False, False]


@pytest.mark.slow
@pytest.mark.parametrize("stride, kernel_size, bound", [(1, 3, 0.2), (2, 3, 0.2), (1, 1, 0.7)])
def test_conv_rule_candidates_are_checked_measured_beside_the_default_and_beat_it(target, stride, kernel_size, bound):
    """The rule's tiles come as SAMPLED candidates (source CONV_RULE), measured with the output check against the
    unscheduled conv; on 32 -> 64 channels at 56 x 56 they
    beat one thread of plain loops by far (21-24x measured here for 3x3 convs; 2.3x for a 1x1 conv, whose
    plain loops LLVM vectorizes)."""
    from recommender.frontend.kernels import kernel_from_mod
    from recommender.transfer.kernel import CONV_RULE, FoundCandidates, measure_kernel, tile_rule_candidates
    kernel = kernel_from_mod("conv", _conv_bias_relu(ci=32, co=64, hw=56, stride=stride, kernel=kernel_size))
    with Measurer(target.config, MeasureSettings(repeat=5, min_repeat_ms=20)) as m:
        cands = tile_rule_candidates(kernel, m)
        assert len(cands) >= 2 and all(c.source.model == CONV_RULE and c.source.match == SAMPLED for c in cands)
        choice = measure_kernel(FoundCandidates(kernel, cands, SAMPLED, 0.0), m, target.tvm())  # every one
    rows = [r for r in choice.rows if r.source_model == CONV_RULE]
    assert len(rows) == len(cands) and all(r.status == OK and r.latency_s > 0 for r in rows)
    assert choice.chosen is not None and choice.chosen["source_model"] == CONV_RULE
    assert choice.latency_s < bound * choice.default_s, (choice.latency_s, choice.default_s)


def _group_conv(ci: int = 64, co: int = 64, groups: int = 4, hw: int = 14):
    """A grouped conv2d (NCHW, 3x3, padding 1), as Relax legalizes it (topi: pad_temp, group_conv2d_nchw)."""
    import tvm
    from tvm import te, topi
    x = te.placeholder((1, ci, hw, hw), name="x")
    w = te.placeholder((co, ci // groups, 3, 3), name="w")
    y = topi.nn.relu(topi.nn.group_conv2d_nchw(x, w, 1, 1, 1, groups))
    func = te.create_prim_func([x, w, y])
    return tvm.IRModule({"main": func.with_attr("global_symbol", "main")})


def test_a_grouped_conv_is_tiled_within_its_groups():
    """A register tile spans the channels of one group only (so that they read the same input row): 4 groups
    of 4 output channels allow 4- and 2-channel tiles, not the 8-channel ones a plain conv of 16 gets."""
    from recommender.rules.conv import conv_output
    from recommender.transfer.replay import tile_rule_schedules
    from recommender.target.spec import parse_target
    avx2 = parse_target('{"kind": "llvm", "mcpu": "znver3", "num-cores": 2}').tvm()
    assert conv_output(_group_conv(ci=16, co=16, groups=4, hw=14)) == (4, 14, 14)
    assert conv_output(_conv_bias_relu(ci=16, co=16, hw=14)) == (16, 14, 14)
    scripts = [r.mod.script() for r in tile_rule_schedules(_group_conv(ci=16, co=16, groups=4, hw=14), avx2)]
    assert scripts and all("T.unroll(8)" not in s and "T.vectorized(7)" in s for s in scripts), scripts
    assert any("T.unroll(4)" in s for s in scripts)


def test_relax_depthwise_conv_is_tiled_one_channel_by_rows():
    """Relax legalizes a depthwise conv as a group_conv2d_nchw block with one channel a group: its tiles are one
    channel by several rows of vector columns."""
    from recommender.rules.conv import conv_output
    from recommender.frontend.kernels import kernel_from_mod
    from recommender.transfer.replay import tile_rule_schedules
    from recommender.target.spec import parse_target
    mod = _group_conv(ci=32, co=32, groups=32, hw=28)
    assert kernel_from_mod("dw", mod).class_key.startswith("depthwise_conv2d/")
    assert conv_output(mod) == (1, 28, 28)
    avx512 = parse_target('{"kind": "llvm", "mcpu": "znver4", "num-cores": 2}').tvm()
    scripts = [r.mod.script() for r in tile_rule_schedules(mod, avx512)]
    assert len(scripts) == 2, scripts  # 7 and 4 rows of 14 columns (of 16, 14, 12 and 8, only 14 divides 28)
    assert "T.unroll(7)" in scripts[0] and "T.vectorized(14)" in scripts[0], scripts[0]


@pytest.mark.slow
@pytest.mark.parametrize("ci, groups, hw, kind, bound", [(128, 2, 14, "group_conv2d/", 0.2),
                                                      (64, 64, 56, "depthwise_conv2d/", 0.85)])
def test_grouped_conv_rule_candidates_compute_the_conv_and_beat_plain_loops(target, ci, groups, hw, kind, bound):
    """RegNet's grouped convs (64 channels a group) had no donor of their class nor a rule, and depthwise convs
    only donors at 12-55 GFLOP/s: the rule's tiles pass the output check against the unscheduled grouped conv
    and beat its plain loops, by far for a grouped conv; a depthwise conv's plain loops, which LLVM vectorizes,
    run 1.5x slower than its tile here (60 against 90 us on 64 channels of 56 x 56, llvm-znver4-2c)."""
    from recommender.frontend.kernels import kernel_from_mod
    from recommender.transfer.kernel import CONV_RULE, FoundCandidates, measure_kernel, tile_rule_candidates
    kernel = kernel_from_mod("group_conv", _group_conv(ci=ci, co=ci, groups=groups, hw=hw))
    assert kernel.class_key.startswith(kind)
    with Measurer(target.config, MeasureSettings(repeat=5, min_repeat_ms=20)) as m:
        cands = tile_rule_candidates(kernel, m)
        assert cands and all(c.source.model == CONV_RULE for c in cands)
        choice = measure_kernel(FoundCandidates(kernel, cands, SAMPLED, 0.0), m, target.tvm())  # every one
    rows = [r for r in choice.rows if r.source_model == CONV_RULE]
    assert rows and all(r.status == OK and r.latency_s > 0 for r in rows), [(r.status, r.error) for r in rows]
    assert choice.chosen is not None and choice.chosen["source_model"] == CONV_RULE
    assert choice.latency_s < bound * choice.default_s, (choice.latency_s, choice.default_s)


def _conv3d_bias_relu(ci: int = 8, co: int = 16, frames: int = 4, hw: int = 14, stride: int = 1):
    """conv3d (NCDHW, 3x3x3 filter, padding 1) + bias + ReLU, as Relax legalizes a video model's conv (topi:
    pad_temp, conv3d_ncdhw, epilogue)."""
    import tvm
    from tvm import te, topi
    x = te.placeholder((1, ci, frames, hw, hw), name="x")
    w = te.placeholder((co, ci, 3, 3, 3), name="w")
    b = te.placeholder((1, co, 1, 1, 1), name="b")
    y = topi.nn.relu(topi.add(topi.nn.conv3d_ncdhw(x, w, stride, 1, 1, 1), b))
    func = te.create_prim_func([x, w, b, y])
    return tvm.IRModule({"main": func.with_attr("global_symbol", "main")})


@pytest.mark.parametrize("stride,mcpu", [(1, "znver3"), (2, "znver3"), (1, "znver4")])
def test_a_conv3d_is_tiled_per_frame_and_replays_from_its_trace(stride, mcpu):
    """A video model's conv3d (no bank model has one) gets the rule's column tiles: frames parallel with the
    tile rows, depth taps outside the unrolled row and column taps, a stride-2 input's columns even/odd apart.
    Output-checked against the unscheduled conv3d (output full of sevens first) and rebuilt from the trace."""
    import numpy as np
    import tvm
    from recommender.rules.conv import conv_output, flat_fits
    from recommender.frontend.kernels import kernel_from_mod
    from recommender.transfer.replay import apply_replayed, tile_rule_schedules
    from recommender.target.spec import parse_target
    mod = _conv3d_bias_relu(stride=stride)
    assert kernel_from_mod("c3", mod).class_key.startswith("conv3d/")
    out_hw, frames = 14 // stride, 4 // stride
    assert conv_output(mod) == (16, out_hw, out_hw) and not flat_fits(mod, 16)
    target = parse_target(f'{{"kind": "llvm", "mcpu": "{mcpu}", "num-cores": 2}}').tvm()
    scheds = tile_rule_schedules(mod, target)
    assert len(scheds) >= 2, len(scheds)
    if stride == 2:  # the padded input (16 wide) stored with even and odd columns apart
        assert all("T.sblock_alloc_buffer((1, 8, 6, 16, 2, 8))" in s.mod.script() for s in scheds)
    if not runs_here(target):
        pytest.skip(f"{mcpu} code does not run on this host (no AVX-512)")
    rng = np.random.default_rng(0)
    inputs = [rng.uniform(-1, 1, s).astype("float32") for s in ((1, 8, 4, 14, 14), (16, 8, 3, 3, 3), (1, 16, 1, 1, 1))]

    def run(m) -> np.ndarray:
        out = tvm.runtime.tensor(np.full((1, 16, frames, out_hw, out_hw), 7.0, "float32"))
        tvm.compile(m, target=target)["main"](*[tvm.runtime.tensor(a) for a in inputs], out)
        return out.numpy()
    expected = run(mod)
    for r in scheds:
        np.testing.assert_allclose(run(r.mod), expected, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(run(apply_replayed(r.trace_json, mod, target).mod), expected, rtol=1e-5, atol=1e-5)


@pytest.mark.slow
def test_conv3d_rule_candidates_are_measured_and_beat_plain_loops(target):
    """transfer measures the rule's conv3d tiles as candidates of class conv3d/ (recommender.rules.tile_rule_for): on a
    64 -> 64 3x3x3 conv over 4 frames of 28 x 28 they beat the kernel's plain loops by far."""
    from recommender.frontend.kernels import kernel_from_mod
    from recommender.transfer.kernel import CONV_RULE, FoundCandidates, measure_kernel, tile_rule_candidates
    kernel = kernel_from_mod("conv3d", _conv3d_bias_relu(ci=64, co=64, frames=4, hw=28))
    with Measurer(target.config, MeasureSettings(repeat=5, min_repeat_ms=20)) as m:
        cands = tile_rule_candidates(kernel, m)
        assert len(cands) >= 2 and all(c.source.model == CONV_RULE for c in cands)
        choice = measure_kernel(FoundCandidates(kernel, cands, SAMPLED, 0.0), m, target.tvm())  # every one
    rows = [r for r in choice.rows if r.source_model == CONV_RULE]
    assert rows and all(r.status == OK and r.latency_s > 0 for r in rows), [(r.status, r.error) for r in rows]
    assert choice.chosen is not None and choice.chosen["source_model"] == CONV_RULE
    assert choice.latency_s < 0.2 * choice.default_s, (choice.latency_s, choice.default_s)


def _dilated(ci: int = 8, co: int = 16, hw: int = 20, dilation: int = 2, stride: int = 1):
    """A 3x3 atrous conv (DeepLab's ASPP), padding `dilation` ('same' at stride 1), + bias + ReLU."""
    import tvm
    from tvm import te, topi
    x = te.placeholder((1, ci, hw, hw), name="x")
    w = te.placeholder((co, ci, 3, 3), name="w")
    b = te.placeholder((1, co, 1, 1), name="b")
    y = topi.nn.relu(topi.add(topi.nn.conv2d_nchw(x, w, stride, dilation, dilation), b))
    return tvm.IRModule({"main": te.create_prim_func([x, w, b, y]).with_attr("global_symbol", "main")})


def test_a_dilated_conv_gets_column_tiles_that_compute_the_conv_and_replay_from_their_trace():
    """Each tap of a dilated conv at stride 1 still reads a contiguous vector of the input row (shifted by the
    dilation), so it gets the rule's column tiles (ASPP's 128 -> 128 3x3 convs of dilation 2 and 6 at 128x128 ran
    10.1-10.6 ms, 458-479 GFLOP/s, on llvm-znver5-2c, against 2.2 s for the default); a dilated conv at stride 2
    gets none. Output-checked against the unscheduled conv, border included, and rebuilt from the trace."""
    from recommender.rules.conv import conv_output
    from recommender.transfer.replay import apply_replayed, tile_rule_schedules
    from recommender.target.spec import parse_target
    avx512 = parse_target('{"kind": "llvm", "mcpu": "znver4", "num-cores": 2}').tvm()
    mod = _dilated()
    assert conv_output(mod) == (16, 20, 20) and conv_output(_dilated(stride=2)) is None
    scheds = tile_rule_schedules(mod, avx512)
    assert len(scheds) >= 2
    _check_against_the_unscheduled_conv(mod, scheds, avx512, (8, 16, 20, 20, 3), apply_replayed)
