"""A rule is a template whose knobs are sampling instructions: the conv rule's register tile is three
SamplePerfectTile decisions, its space holds today's tiles and the other tiles that fit, every instance
computes what the unscheduled conv computes and replays from its own trace, and another decision in the same
trace is another instance (real TVM, small convs)."""
from __future__ import annotations

import json

import pytest

from recommender.rules import RULES
from recommender.rules.conv import (ACCUMULATORS, PACKED_ACCUMULATORS, PACKED_FIXED, PACKED_SHAPES, PackedTile, conv_tiles,
                                    packed_tiles, reduction_blocks, space_tiles)

from .test_conv_rules import _check_against_the_unscheduled_conv, _conv_bias_relu


def test_the_conv_space_holds_every_fitting_tile_and_today_s_tiles_among_them():
    for shape, lanes in (((32, 28, 28), 8), ((64, 56, 56), 16), ((512, 7, 7), 16), ((1, 112, 112), 16)):
        tiles = space_tiles(*shape, lanes=lanes)
        assert set(conv_tiles(*shape, lanes=lanes)) <= set(tiles), shape  # today's hand-picked ones are points of it
        assert len(set(tiles)) == len(tiles) >= 7
        for c, r, w in tiles:
            assert shape[0] % c == 0 and shape[1] % r == 0 and shape[2] % w == 0
            assert c * r * -(-w // lanes) <= ACCUMULATORS[lanes]
    assert len(space_tiles(64, 56, 56, lanes=16)) > 4 * len(conv_tiles(64, 56, 56, lanes=16))


def test_a_conv_s_space_lists_today_s_instances_first_then_a_seeded_spread_up_to_the_limit():
    mod = _conv_bias_relu(ci=8, co=32, hw=28)
    rule = RULES["conv"]
    fixed = [i.knobs for i in rule.instances(mod, lanes=8)]
    limit = len(fixed) + len(packed_tiles(32, 28, 28)) + 6  # room for six of the seeded spread
    space = rule.space(mod, lanes=8, limit=limit, seed=0)
    assert [i.knobs for i in space][:len(fixed)] == fixed and len(space) == limit
    assert len({tuple(sorted(i.knobs.items())) for i in space}) == limit
    assert [i.knobs for i in rule.space(mod, lanes=8, limit=limit, seed=0)] == [i.knobs for i in space]  # seeded
    assert [i.knobs for i in rule.space(mod, lanes=8, limit=limit, seed=1)] != [i.knobs for i in space]
    assert len(rule.space(mod, lanes=8, limit=500)) == len(space_tiles(32, 28, 28, lanes=8)) + len(packed_tiles(32, 28, 28))
    loop = RULES["loop"]  # a template without knobs beyond its instances: its space is they
    assert [i.knobs for i in loop.space(mod, lanes=8)] == [i.knobs for i in loop.instances(mod, lanes=8)]


def test_a_conv_s_reduction_blocks_come_after_today_s_tiles_and_leave_the_other_tiles_in_their_order():
    """Blocks of input channels that divide them into two or more (none for a depthwise conv); the space holds
    today's instances, today's register tiles with each block, the other tiles in the seeded order they had
    before blocks existed, then every other tile with each block: all the tiles, each once per block."""
    import random
    mod = _conv_bias_relu(ci=32, co=32, hw=28)
    assert reduction_blocks(mod) == [8, 16] and reduction_blocks(_conv_bias_relu(ci=8, co=32, hw=28)) == []
    rule = RULES["conv"]
    fixed = [i.knobs for i in rule.instances(mod, lanes=8)]
    space = [i.knobs for i in rule.space(mod, lanes=8, limit=1000, seed=0)]
    register = [k for k in fixed if not k.get("flat") and not k.get("packed")]
    assert space[:len(fixed)] == fixed
    packed = len(packed_tiles(32, 28, 28)) - PACKED_FIXED  # the other packed tiles next
    assert all(k.get("packed") for k in space[len(fixed):len(fixed) + packed])
    packed_fixed = [k for k in fixed if k.get("packed")]
    after = space[len(fixed) + packed:len(fixed) + packed + 2 * len(packed_fixed)]
    assert after == [{**k, "reduction": rb} for rb in (8, 16) for k in packed_fixed]  # then those with each block
    fixed = fixed + space[len(fixed):len(fixed) + packed] + after
    blocked = space[len(fixed):len(fixed) + 2 * len(register)]
    assert blocked == [{**k, "reduction": rb} for rb in (8, 16) for k in register]
    others = [t for t in space_tiles(32, 28, 28, lanes=8)
              if t not in [(k["channels"], k["rows"], k["columns"]) for k in register]]
    random.Random(0).shuffle(others)
    after = space[len(fixed) + len(blocked):]
    assert [(k["channels"], k["rows"], k["columns"]) for k in after[:len(others)]] == others
    assert all("reduction" not in k for k in after[:len(others)])
    assert sorted((k["channels"], k["rows"], k["columns"], k["reduction"]) for k in after[len(others):]) == \
        sorted((*t, rb) for rb in (8, 16) for t in others)
    assert len(space) == len(fixed) + len(others) + 2 * len(space_tiles(32, 28, 28, lanes=8))  # every tile twice blocked
    assert not [k for k in space[len(fixed):] if k.get("packed")]
    assert len(space) == len(set(json.dumps(k, sort_keys=True) for k in space))


@pytest.mark.slow
def test_every_reduction_blocked_instance_computes_the_conv_and_replays_from_its_trace(target):
    """A reduction block's instance (its accumulators through the output between blocks, the epilogue once a
    row's blocks are done) computes what the unscheduled conv computes; its block is the trace's fourth
    sampled split."""
    from recommender.transfer.replay import apply_replayed, postprocess
    mod = _conv_bias_relu(ci=16, co=16, hw=14)
    tvm_target = target.tvm()
    blocked = [i for i in RULES["conv"].space(mod, lanes=8, limit=1000) if i.knobs.get("reduction")]
    # every tile with its one block, 8, and so the fixed packed tiles
    assert len(blocked) == len(space_tiles(16, 14, 14, lanes=8)) + len(packed_tiles(16, 14, 14, fixed=True)) >= 10
    built = [postprocess(i.schedule, mod, tvm_target, None) for i in blocked]
    _check_against_the_unscheduled_conv(mod, built, tvm_target, (16, 16, 14, 14, 3), apply_replayed)
    for instance, replayed in zip(blocked, built):
        k = instance.knobs
        assert [d[1] for d in _knob_decisions(replayed.trace_json)] == [k["channels"], k["rows"], k["columns"],
                                                                       k["reduction"]]


def _knob_decisions(trace_json: list) -> list:
    """The SamplePerfectTile decisions of a trace, in order: the template's knob values."""
    insts, decisions = trace_json
    kinds = {i: inst[0] for i, inst in enumerate(insts)}
    return [d for i, d in decisions if kinds[i] == "SamplePerfectTile"]


@pytest.mark.slow
def test_every_instance_of_the_conv_space_computes_the_conv_and_replays_from_its_trace(target):
    import tvm_ffi

    from recommender.transfer.replay import apply_replayed, postprocess
    mod = _conv_bias_relu(ci=8, co=16, hw=14)
    tvm_target = target.tvm()
    space = RULES["conv"].space(mod, lanes=8, limit=64)
    assert len(space) == len(space_tiles(16, 14, 14, lanes=8)) + len(packed_tiles(16, 14, 14)) >= 10
    built = [postprocess(i.schedule, mod, tvm_target, None) for i in space]
    _check_against_the_unscheduled_conv(mod, built, tvm_target, (8, 16, 14, 14, 3), apply_replayed)
    # the knobs are the trace's sampling decisions: [outer, inner] of channels, rows and columns
    for instance, replayed in zip(space, built):
        k = instance.knobs
        assert [d[1] for d in _knob_decisions(replayed.trace_json)] == [k["channels"], k["rows"], k["columns"]]
    # another instance of a family (packed or not) is the same trace with other decisions
    for packed in (False, True):
        family = [r for i, r in zip(space, built) if bool(i.knobs.get("packed")) == packed]
        a, b = family[0], family[-1]
        insts, decisions = a.trace_json
        swapped = [insts, [[i, d] for (i, _), (_, d) in zip(decisions, b.trace_json[1])]]
        assert [i for i, _ in a.trace_json[1]] == [i for i, _ in b.trace_json[1]]
        assert tvm_ffi.structural_equal(apply_replayed(swapped, mod, tvm_target).mod,
                                        apply_replayed(b.trace_json, mod, tvm_target).mod)


def test_the_matmul_space_holds_every_fitting_tile_and_today_s_tiles_among_them():
    from recommender.rules.matmul import ACCUMULATORS as MATMUL_ACCUMULATORS
    from recommender.rules.matmul import matmul_tiles
    from recommender.rules.matmul import space_tiles as matmul_space
    for shape, lanes in (((128, 768, 768), 8), ((128, 3072, 768), 16), ((197, 768, 768), 16), ((64, 197, 128), 8)):
        tiles = matmul_space(*shape, lanes=lanes)
        assert set(matmul_tiles(*shape, lanes=lanes)) <= set(tiles), shape
        assert len(set(tiles)) == len(tiles) >= 16
        for tm, nv, ln, kb, packed in tiles:
            assert ln == lanes and tm * nv <= MATMUL_ACCUMULATORS[lanes]
            assert kb == 0 or (shape[2] % kb == 0 and kb < shape[2])
            assert packed or shape[1] % (nv * lanes) == 0  # padded columns only in a packed panel
    assert len(matmul_space(128, 768, 768, lanes=16)) > 4 * len(matmul_tiles(128, 768, 768, lanes=16))


@pytest.mark.slow
def test_every_instance_of_the_matmul_space_computes_the_matmul_and_replays_from_its_trace(target):
    """A spread of the matmul space on 70 x 192 by 256 deep, with ragged row tiles (8 rows: the last one short):
    each instance's output and that of its trace replayed equal the unscheduled kernel's, and its rows (where they
    divide M), vectors and K block are its trace's sampling decisions (padded tiles: test_matmul_rules.py)."""
    import numpy as np
    import tvm

    from recommender.rules.matmul import space_tiles as matmul_space
    from recommender.transfer.replay import apply_replayed, postprocess

    from .test_matmul_rules import _matmul_bias
    m, n, depth = 70, 192, 256
    mod = _matmul_bias(m=m, k=depth, n=n)
    tvm_target = target.tvm()
    space = RULES["matmul"].space(mod, lanes=8, limit=24, seed=0)
    fixed = RULES["matmul"].instances(mod, lanes=8)
    assert len(space) == 24 < len(matmul_space(m, n, depth)) and [i.fixed for i in space].count(True) == len(fixed)
    assert {i.knobs["vectors"] for i in space} == {1, 2, 3, 4} and any(m % i.knobs["rows"] for i in space)
    rng = np.random.default_rng(0)
    inputs = [rng.uniform(-1, 1, s).astype("float32") for s in ((m, depth), (depth, n), (n,))]

    def run(mod_) -> np.ndarray:
        out = tvm.runtime.tensor(np.full((m, n), 7.0, "float32"))
        tvm.compile(mod_, target=tvm_target)["main"](*[tvm.runtime.tensor(a) for a in inputs], out)
        return out.numpy()
    expected = run(mod)
    for instance in space:
        built = postprocess(instance.schedule, mod, tvm_target, None)
        np.testing.assert_allclose(run(built.mod), expected, rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(run(apply_replayed(built.trace_json, mod, tvm_target).mod), expected,
                                   rtol=1e-4, atol=1e-4)
        k = instance.knobs
        width = k["vectors"] * k["lanes"]
        knobs = ([[m // k["rows"], k["rows"]]] if m % k["rows"] == 0 else []) \
            + [[-(-n // width), k["vectors"], k["lanes"]]] + ([[depth // k["k_block"], k["k_block"]]] if k["k_block"] else [])
        assert _knob_decisions(built.trace_json) == knobs, k


@pytest.mark.slow
def test_a_rule_space_built_in_parts_over_the_build_workers_is_the_whole_space_in_its_order(target):
    from recommender.measure import MeasureSettings, Measurer
    from recommender.transfer.replay import tile_rule_schedules, tile_rules_isolated
    mod = _conv_bias_relu(ci=8, co=16, hw=14)
    here = tile_rule_schedules(mod, target.tvm(), space=12)
    assert len(here) >= 8
    thirds = [tile_rule_schedules(mod, target.tvm(), space=12, part=(i, 3)) for i in range(3)]
    assert sorted(str(r.trace_json) for p in thirds for r in p) == sorted(str(r.trace_json) for r in here)
    with Measurer(target.config, MeasureSettings(build_workers=2)) as m:
        spread = tile_rules_isolated(m, mod, space=12)
    assert [r.trace_json for r in spread] == [r.trace_json for r in here]
    assert [r.knobs for r in spread] == [r.knobs for r in here]


def test_packed_tiles_fit_the_registers_divide_the_output_and_list_the_preferred_first():
    """Every packed tile's channel vectors divide the output channels, its rows and columns the map, its
    accumulators within the target's bounds; the preferred shapes come first and the first PACKED_FIXED of them
    are the fixed ones; AVX-512 has none until measured there."""
    tiles = packed_tiles(64, 28, 28)
    assert tiles[:3] == [PackedTile(2, 2, 2), PackedTile(1, 1, 7), PackedTile(2, 1, 4)]
    assert packed_tiles(64, 28, 28, fixed=True) == tiles[:PACKED_FIXED]
    assert packed_tiles(512, 7, 7, fixed=True) == [PackedTile(1, 1, 7)]  # (2, 2, 2) needs an even map
    assert len(set(tiles)) == len(tiles) > len(PACKED_SHAPES[8])
    low, high = PACKED_ACCUMULATORS[8]
    for t in tiles:
        assert 64 % (t.vectors * 8) == 0 and 28 % t.rows == 0 and 28 % t.columns == 0
        assert low <= t.vectors * t.rows * t.columns <= high or (t.vectors, t.rows, t.columns) in PACKED_SHAPES[8]
    assert packed_tiles(12, 28, 28) == [] and packed_tiles(64, 28, 28, lanes=16) == []


@pytest.mark.slow
@pytest.mark.parametrize("stride, kernel", [(2, 3), (1, 1), (2, 1)])
def test_every_packed_instance_computes_the_conv_at_any_stride_and_replays_from_its_trace(target, stride, kernel):
    """A packed tile (channel vectors, input broadcast, weights packed by a block of its own) computes what the
    unscheduled conv computes, a 3x3 at stride 2 and 1x1 convs too, and replays from its trace."""
    from recommender.transfer.replay import apply_replayed, postprocess
    mod = _conv_bias_relu(ci=16, co=32, hw=28, stride=stride, kernel=kernel)
    tvm_target = target.tvm()
    packed = [i for i in RULES["conv"].space(mod, lanes=8, limit=1000) if i.knobs.get("packed")]
    out_hw = (28 + 2 * (kernel // 2) - kernel) // stride + 1
    blocks = reduction_blocks(mod)
    assert blocks == [8] and len(packed) == len(packed_tiles(32, out_hw, out_hw)) + len(
        packed_tiles(32, out_hw, out_hw, fixed=True)) * len(blocks) >= 3  # the fixed ones with each block too
    built = [postprocess(i.schedule, mod, tvm_target, None) for i in packed]
    _check_against_the_unscheduled_conv(mod, built, tvm_target, (16, 32, 28, out_hw, kernel), apply_replayed)


@pytest.mark.slow
def test_a_packed_tile_is_timed_on_packed_weights_and_a_model_folds_its_packing_into_the_constants(target):
    """The measurer builds a packed instance's timing copy without its packing block (the weight argument
    packed [O/8, C, KH, KW, 8]), and a model built with it moves the packing out of the kernel and folds it
    into the constants: the model calls the kernel on a packed constant and computes what it computed
    unscheduled."""
    import numpy as np
    import tvm
    from tvm import relax
    from tvm.script import relax as R

    from recommender.frontend.model_import import lower_for_tuning
    from recommender.measure.worker import pack_weights_ahead, without_weight_rewrite
    from recommender.transfer.replay import postprocess
    tt = target.tvm()
    rng = np.random.default_rng(0)
    bb = relax.BlockBuilder()
    x = relax.Var("x", R.Tensor((1, 16, 14, 14), "float32"))
    with bb.function("main", [x]):
        with bb.dataflow():
            conv = bb.emit(relax.op.nn.conv2d(x, relax.const(rng.standard_normal((32, 16, 3, 3)).astype("float32")),
                                              padding=1))
            out = bb.emit_output(bb.emit(relax.op.nn.relu(conv)))
        bb.emit_func_output(out)
    model = lower_for_tuning(bb.get(), tt, canonical=False)
    gv = next(g for g, f in model.functions.items() if isinstance(f, tvm.tirx.PrimFunc) and "conv" in g.name_hint)
    kernel = tvm.IRModule({"main": model[gv]})
    instance = next(i for i in RULES["conv"].instances(kernel, lanes=8) if i.knobs.get("packed"))
    scheduled = postprocess(instance.schedule, kernel, tt, None).mod
    stripped, timing_args = without_weight_rewrite(scheduled)
    assert timing_args[1] == [[32 // instance.knobs["channels"] * instance.knobs["vectors"], 16, 3, 3, 8], "float32"]
    funcs = {g: (scheduled["main"].with_attr("tirx.is_scheduled", True) if g.same_as(gv) else f)
             for g, f in model.functions.items()}
    folded = pack_weights_ahead(tvm.IRModule(funcs, attrs=model.attrs))
    calls = folded["main"].script()
    assert "_prepacked" in calls and "_weight_prepack" not in calls
    data = rng.standard_normal((1, 16, 14, 14)).astype("float32")

    def run(mod) -> np.ndarray:
        vm = relax.VirtualMachine(tvm.compile(mod, target=tt), tvm.cpu())
        return vm["main"](tvm.runtime.tensor(data)).numpy()
    np.testing.assert_allclose(run(folded), run(model), rtol=1e-4, atol=1e-4)


def test_a_wide_pointwise_conv_gets_its_fixed_packed_tiles_with_a_reduction_block():
    """From PACKED_BLOCK_FROM input channels a 1x1 conv's fixed packed tiles read them in blocks of PACKED_BLOCK (a
    3x3 conv and a narrower 1x1 conv keep the whole reduction); their unblocked twins stay in the space."""
    from recommender.rules.conv import PACKED_BLOCK, PACKED_BLOCK_FROM
    rule = RULES["conv"]

    def fixed_packed(**kw) -> list[dict]:
        return [i.knobs for i in rule.instances(_conv_bias_relu(co=32, hw=14, **kw), lanes=8) if i.knobs.get("packed")]
    wide = fixed_packed(ci=PACKED_BLOCK_FROM, kernel=1)
    assert wide and all(k["reduction"] == PACKED_BLOCK for k in wide)
    assert all("reduction" not in k for k in fixed_packed(ci=PACKED_BLOCK_FROM // 2, kernel=1) + fixed_packed(
        ci=PACKED_BLOCK_FROM, kernel=3))
    space = [i.knobs for i in rule.space(_conv_bias_relu(ci=PACKED_BLOCK_FROM, co=32, hw=14, kernel=1), lanes=8, limit=1000)]
    assert all({x: y for x, y in k.items() if x != "reduction"} in space for k in wide)
    assert len(space) == len(set(json.dumps(k, sort_keys=True) for k in space))
