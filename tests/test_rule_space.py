"""A rule is a template whose knobs are sampling instructions: the conv rule's register tile is three
SamplePerfectTile decisions, its space holds today's tiles and the other tiles that fit, every instance
computes what the unscheduled conv computes and replays from its own trace, and another decision in the same
trace is another instance (real TVM, small convs)."""
from __future__ import annotations

import pytest

from recommender.rules import RULES
from recommender.rules.conv import ACCUMULATORS, conv_tiles, space_tiles

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
    space = rule.space(mod, lanes=8, limit=12, seed=0)
    assert [i.knobs for i in space][:len(fixed)] == fixed and len(space) == 12
    assert len({tuple(sorted(i.knobs.items())) for i in space}) == 12
    assert [i.knobs for i in rule.space(mod, lanes=8, limit=12, seed=0)] == [i.knobs for i in space]  # seeded
    assert [i.knobs for i in rule.space(mod, lanes=8, limit=12, seed=1)] != [i.knobs for i in space]
    assert len(rule.space(mod, lanes=8, limit=500)) == len(space_tiles(32, 28, 28, lanes=8))
    loop = RULES["loop"]  # a template without knobs beyond its instances: its space is they
    assert [i.knobs for i in loop.space(mod, lanes=8)] == [i.knobs for i in loop.instances(mod, lanes=8)]


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
    assert len(space) == len(space_tiles(16, 14, 14, lanes=8)) >= 10
    built = [postprocess(i.schedule, mod, tvm_target, None) for i in space]
    _check_against_the_unscheduled_conv(mod, built, tvm_target, (8, 16, 14, 14, 3), apply_replayed)
    # the knobs are the trace's sampling decisions: [outer, inner] of channels, rows and columns
    for instance, replayed in zip(space, built):
        k = instance.knobs
        assert [d[1] for d in _knob_decisions(replayed.trace_json)] == [k["channels"], k["rows"], k["columns"]]
    # another instance is the same trace with other decisions
    a, b = built[0], built[-1]
    insts, decisions = a.trace_json
    swapped = [insts, [[i, d] for (i, _), (_, d) in zip(decisions, b.trace_json[1])]]
    assert [i for i, _ in a.trace_json[1]] == [i for i, _ in b.trace_json[1]]
    assert tvm_ffi.structural_equal(apply_replayed(swapped, mod, tvm_target).mod, apply_replayed(b.trace_json, mod, tvm_target).mod)
