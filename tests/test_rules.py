"""The rules interface: every rule family lists its instances for a kernel, each a schedule with the knob
values that chose it, behind one registry keyed by name and by kernel class (real TVM, small kernels)."""
from __future__ import annotations

import json

from recommender.rules import RULES, TILE_RULES, ConvRule, LoopRule, MatmulRule, rule_named, tile_rule_for
from recommender.rules.conv import conv_tiles, packed_tiles, tile_knobs
from recommender.rules.matmul import matmul_tiles

from .test_conv_rules import _conv_bias_relu
from .test_loop_rules import _kernel, _max_pool, _softmax
from .test_matmul_rules import _matmul_bias


def test_the_registry_names_each_rule_and_maps_kernel_classes_to_tile_rules():
    assert set(RULES) == {"conv", "matmul", "loop"} and TILE_RULES == ("conv", "matmul")
    assert isinstance(rule_named("conv"), ConvRule) and isinstance(rule_named("loop"), LoopRule)
    for class_key in ("conv2d/s4r3:x", "group_conv2d/s4r3:x", "depthwise_conv2d/s4r2:x", "conv3d/s5r4:x"):
        assert tile_rule_for(class_key) is RULES["conv"]
    for class_key in ("matmul/s2r1:x", "batch_matmul/s3r1:x"):
        assert isinstance(tile_rule_for(class_key), MatmulRule)
    assert tile_rule_for("softmax/s2r1:x") is None and tile_rule_for("pool2d/s4r2:x") is None
    assert len({r.source for r in RULES.values()}) == 3  # rows tell the families apart by source
    try:
        rule_named("winograd")
    except ValueError as err:
        assert "conv, matmul, loop" in str(err)
    else:
        raise AssertionError("an unknown rule name was accepted")


def test_a_conv_s_instances_are_its_tiles_in_order_with_their_knob_values():
    mod = _conv_bias_relu(ci=16, co=32, hw=28)
    instances = RULES["conv"].instances(mod, lanes=8)
    packed = packed_tiles(32, 28, 28, lanes=8, fixed=True)  # AVX2: the packed tiles first
    tiles = packed + conv_tiles(32, 28, 28, lanes=8)
    assert [i.knobs for i in instances] == [tile_knobs(t) for t in tiles] and instances and packed
    assert instances[0].knobs == {"packed": True, "channels": 16, "rows": 2, "columns": 2, "vectors": 2}
    first = tiles[len(packed)]
    assert instances[len(packed)].knobs == {"channels": first[0], "rows": first[1], "columns": first[2]}
    assert all(i.rule == "conv" and i.schedule is not None for i in instances)
    assert json.loads(json.dumps([i.knobs for i in instances])) == [i.knobs for i in instances]
    # the same schedules the rule's function gives: the interface adds the knobs, nothing else
    import tvm_ffi
    from recommender.rules.conv import rule_schedules
    plain = rule_schedules(mod, lanes=8)
    assert len(plain) == len(instances)
    assert all(tvm_ffi.structural_equal(a.mod, b.schedule.mod) for a, b in zip(plain, instances))


def test_a_matmul_s_instances_carry_its_tile_fields_and_other_kernels_get_none():
    mod = _matmul_bias(m=64, k=256, n=128)
    instances = RULES["matmul"].instances(mod, lanes=16)
    expected = [dict(zip(("rows", "vectors", "lanes", "k_block", "packed"), t)) for t in matmul_tiles(64, 128, 256, 16)]
    assert [i.knobs for i in instances] == expected and instances
    assert RULES["matmul"].instances(_conv_bias_relu(), lanes=16) == []
    assert RULES["conv"].instances(mod, lanes=16) == []


def test_the_loop_rule_names_where_each_instance_computes_its_reductions():
    pool = RULES["loop"].instances(_kernel("pool", _max_pool()).mod, lanes=8)
    assert "window" in [i.knobs["at"] for i in pool]
    softmax = RULES["loop"].instances(_kernel("softmax", _softmax()).mod)
    assert [i.knobs["at"] for i in softmax][:1] == ["rows"] and all(i.rule == "loop" for i in softmax)
    assert len({i.knobs["at"] for i in softmax}) == len(softmax)  # one instance per distinct placement
