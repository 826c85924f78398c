"""The featurizer: token sequences, vocabulary, kernel and pair features (plain Python, no TVM)."""
from __future__ import annotations

import copy
import math

import numpy as np
import pytest

from featurize.candidate_features import LOOKUP_WORDS, SEQUENCE_TOKENS, Featurizer, SourceKernel, kernel_features, pair_features
from featurize.trace_tokens import MAX_TOKENS, TraceFeatureError, Vocabulary, schedule_summary, token_sequence, trace_tokens
from recommender.core.rows import CandidateRow

# a replayed matmul trace from the shipped matrix (bert_tiny, 128x128 by 128x512, fused bias add)
MATMUL_TRACE = [
    [["GetSBlock", [], ["matmul", "main"], ["b0"]], ["GetSBlock", [], ["root", "main"], ["b1"]],
     ["Annotate", ["b0", "\"SSRSRS\""], ["meta_schedule.tiling_structure"], []],
     ["GetLoops", ["b0"], [], ["l2", "l3", "l4"]],
     ["SamplePerfectTile", ["l2"], [4, 64], ["v5", "v6", "v7", "v8"]],
     ["Split", ["l2", "v5", "v6", "v7", "v8"], [True, False], ["l9", "l10", "l11", "l12"]],
     ["SamplePerfectTile", ["l3"], [4, 64], ["v13", "v14", "v15", "v16"]],
     ["Split", ["l3", "v13", "v14", "v15", "v16"], [True, False], ["l17", "l18", "l19", "l20"]],
     ["SamplePerfectTile", ["l4"], [2, 64], ["v21", "v22"]],
     ["Split", ["l4", "v21", "v22"], [True, False], ["l23", "l24"]],
     ["Reorder", ["l9", "l17", "l10", "l18", "l23", "l11", "l19", "l24", "l12", "l20"], [], []],
     ["Annotate", ["b1", 32], ["meta_schedule.parallel"], []],
     ["Annotate", ["b1", 64], ["meta_schedule.vectorize"], []],
     ["SampleCategorical", [], [[0, 16, 64, 512], [0.25, 0.25, 0.25, 0.25]], ["v25"]],
     ["Annotate", ["b1", "v25"], ["meta_schedule.unroll_explicit"], []]],
    [[4, [1, 1, 128, 1]], [6, [2, 4, 1, 64]], [8, [1, 128]], [13, 3]]]
ARGS = (((128, 128), "float32"), ((128, 512), "float32"), ((512,), "float32"), ((128, 512), "float32"))


def _row(trace=MATMUL_TRACE, **kw) -> CandidateRow:
    base = dict(target_model="m", target_kernel="k", class_key="matmul/s2r1:@matmul+add", match="class",
                status="ok", flops=2 * 128 * 128 * 512, target_args=ARGS, source_model="s", source_kernel="sk",
                source_rank=0, source_latency_s=1e-4, trace=trace, latency_s=1e-4)
    base.update(kw)
    return CandidateRow(**base)


@pytest.fixture(scope="module")
def vocab() -> Vocabulary:
    return Vocabulary.load()


def test_tokens_are_deterministic_and_follow_the_trace(vocab):
    ids, nums = trace_tokens(MATMUL_TRACE, vocab)
    ids2, nums2 = trace_tokens(copy.deepcopy(MATMUL_TRACE), vocab)
    assert ids == ids2 and np.array_equal(nums, nums2)
    assert len(ids) == len(MATMUL_TRACE[0]) and 1 not in ids  # every word of a shipped trace is known
    assert ids[4] == vocab.id("SamplePerfectTile:4") and ids[13] == vocab.id("SampleCategorical")
    # the tile of loop l3 is [2, 4, 1, 64]: factors and the loop extent 512 they multiply to
    assert nums[6, :4].tolist() == pytest.approx([math.log2(3), math.log2(5), 1.0, math.log2(65)])
    assert nums[6, 4] == pytest.approx(math.log2(513))
    # the split's outputs carry their extents into the split token; the unroll choice is 64 (index 3 -> 512)
    assert nums[7, 4] == pytest.approx(math.log2(513))
    assert nums[13, 0] == pytest.approx(math.log2(513))
    assert nums[14, 0] == pytest.approx(math.log2(513))  # the annotation resolves the sampled variable


def test_sequences_are_cropped_and_padded_with_a_mask(vocab):
    ids, nums, mask = token_sequence(MATMUL_TRACE, vocab, max_tokens=8)
    assert ids.shape == (8,) and nums.shape[0] == 8 and mask.all()
    ids, nums, mask = token_sequence(MATMUL_TRACE, vocab)
    n = len(MATMUL_TRACE[0])
    assert ids.shape == (MAX_TOKENS,) and mask.sum() == n and (ids[n:] == 0).all() and not nums[n:].any()


def test_unknown_instruction_kinds_become_the_unknown_token(vocab):
    trace = copy.deepcopy(MATMUL_TRACE)
    trace[0].insert(2, ["BrandNewPrimitive", ["b0"], [7], []])
    trace[1] = [[i + 1 if i >= 2 else i, v] for i, v in trace[1]]
    ids, _ = trace_tokens(trace, vocab)
    assert ids[2] == vocab.id("<unk>") == 1
    assert ids[:2] + ids[3:] == trace_tokens(MATMUL_TRACE, vocab)[0]


@pytest.mark.parametrize("damage", [
    lambda t: "not a trace",
    lambda t: [t[0]],
    lambda t: [t[0][:3] + [["Split", ["l2"]]] + t[0][4:], t[1]],
    lambda t: [t[0], [[99, [1, 2]]]],
    lambda t: [t[0], [[4, "eight"]] + t[1][1:]],
    lambda t: [t[0], [[13, [1]]] + t[1][:3]],
])
def test_a_damaged_trace_gets_a_clear_error(vocab, damage):
    with pytest.raises(TraceFeatureError, match="malformed trace"):
        trace_tokens(damage(copy.deepcopy(MATMUL_TRACE)), vocab)
    with pytest.raises(TraceFeatureError, match="malformed trace"):
        schedule_summary(damage(copy.deepcopy(MATMUL_TRACE)))


def test_vocabulary_round_trip_and_digest(tmp_path, vocab):
    vocab.save(tmp_path / "v.json")
    again = Vocabulary.load(tmp_path / "v.json")
    assert again.words == vocab.words and again.digest == vocab.digest
    assert Vocabulary(vocab.words[2:] + ["Extra"]).digest != vocab.digest
    built = Vocabulary.build([MATMUL_TRACE])
    assert built.id("Reorder") > 1 and built.id("CacheWrite") == 1


def test_schedule_summary_reads_tiles_and_unroll():
    s = schedule_summary(MATMUL_TRACE)
    assert s["n_spatial_tiles"] == 2 and s["n_reduce_tiles"] == 1
    assert s["spatial_tile_l3"] == pytest.approx(math.log2(64))  # innermost factors 1 and 64
    assert s["reduce_tile_l1"] == pytest.approx(math.log2(128))
    assert s["unroll"] == pytest.approx(math.log2(513))
    assert s["vectorize_limit"] == pytest.approx(math.log2(65))


def test_kernel_and_pair_features():
    k = kernel_features("matmul/s2r1:@matmul+add", ARGS, 2 * 128 * 128 * 512)
    assert k["kind_matmul"] == 1 and k["kind_conv2d"] == 0 and k["n_spatial_axes"] == 2 and k["n_epilogue"] == 1
    nbytes = 4 * (128 * 128 + 128 * 512 + 512 + 128 * 512)
    assert k["log_bytes"] == pytest.approx(math.log2(1 + nbytes))
    assert k["out_dim3"] == pytest.approx(math.log2(513)) and k["out_dim2"] == pytest.approx(math.log2(129))
    src = SourceKernel(2 * 128 * 128 * 128, (((128, 128), "float32"), ((128, 128), "float32"),
                                              ((128,), "float32"), ((128, 128), "float32")))
    p = pair_features(_row(), src)
    assert p["log_flop_ratio"] == pytest.approx(2.0) and p["dims_multiple"] == 1.0 and p["dims_equal"] == 0.5
    assert p["shape_distance"] == pytest.approx(2.0) and p["source_known"] == 1.0
    assert pair_features(_row(), None)["source_known"] == 0.0


def test_featurizer_outputs_match_their_names(vocab):
    f = Featurizer(vocab, {("s", "sk"): SourceKernel(1e6, ARGS)})
    rows = [_row(), _row(source_rank=2, match="anchor")]
    X = f.tabular(rows)
    assert X.shape == (2, len(f.tabular_names)) and np.isfinite(X).all()
    assert X[1, f.tabular_names.index("source_rank")] == 2 and X[1, f.tabular_names.index("match_anchor")] == 1
    S = f.sequences(rows)
    assert S.shape == (2, 1 + SEQUENCE_TOKENS, f.token_width)
    decisions = [i for i in MATMUL_TRACE[0] if i[0] not in LOOKUP_WORDS]  # lookups are left out
    assert S[0, 0, 0] == len(vocab) and (S[0, 1:1 + len(decisions), 0] > 1).all() and S[0, 1 + len(decisions), 0] == 0
    assert S[0, 1, 0] == vocab.id("Annotate:meta_schedule.tiling_structure")
    assert np.array_equal(f.tabular(rows), X)  # deterministic
    with pytest.raises(TraceFeatureError, match="no replayed trace"):
        f.tabular([_row(trace=None, status="replay_error")])


CONV_ARGS = (((1, 64, 32, 32), "float32"), ((128, 64, 3, 3), "float32"), ((1, 128, 32, 32), "float32"))


def _conv_rule(**knobs) -> CandidateRow:
    return _row(class_key="conv2d/s4r3:pad_temp+@conv2d_nchw", target_args=CONV_ARGS, source_model="(conv rule)",
                source_kernel="tile", knobs=knobs, flops=2 * 128 * 64 * 9 * 32 * 32)


def test_schema_3_gives_a_conv_tile_its_footprint_per_reduction_block(vocab):
    """Weights and input window one register tile reads per block of input channels (the whole reduction
    without a block), log2; schema 2 has none of it and names another version."""
    from featurize.candidate_features import schema_of
    new, old = Featurizer(vocab), Featurizer(vocab, schema="2")
    names = ("knob_reduction", "knob_weight_bytes", "knob_input_bytes")
    assert all(n in new.tabular_names and n not in old.tabular_names for n in names)
    assert schema_of(new.version) == "3" and schema_of(old.version) == "2" and new.version != old.version
    assert all(n in new.tabular_names and n not in old.tabular_names for n in ("knob_packed", "knob_flat"))
    packed = new.tabular([_conv_rule(packed=True, channels=16, rows=2, columns=2, vectors=2)])
    assert packed[0, new.tabular_names.index("knob_packed")] == 1 and packed[0, new.tabular_names.index("knob_flat")] == 0
    X = new.tabular([_conv_rule(channels=8, rows=2, columns=16, reduction=16), _conv_rule(channels=4, rows=4, columns=16)])
    assert (X[:, new.tabular_names.index("knob_packed")] == 0).all()
    got = [[X[i, new.tabular_names.index(n)] for n in names] for i in range(2)]
    log = lambda v: math.log2(1 + v)  # noqa: E731
    assert got[0] == pytest.approx([log(16), log(8 * 16 * 9 * 4), log(4 * 18 * 16 * 4)])
    assert got[1] == pytest.approx([log(64), log(4 * 64 * 9 * 4), log(6 * 18 * 64 * 4)])
    assert (X[:, [new.tabular_names.index(n) for n in names]] != 0).all()
    assert (new.tabular([_row()])[:, [new.tabular_names.index(n) for n in names]] == 0).all()  # no conv tile
    with pytest.raises(ValueError, match="schema"):
        Featurizer(vocab, schema="1")


def test_a_ranker_saved_on_an_older_schema_still_ranks(tmp_path, vocab):
    """`load_selector` featurizes with the schema the ranker was trained on, so shipped rankers keep working
    after the schema grows (each target is retrained when its data is)."""
    from recommender.transfer.recommend import load_selector
    from recommender.transfer.selection import KernelCandidates, ranked
    from training.rankers.lgbm import LGBMRanker
    rows = [_conv_rule(channels=c, rows=r, columns=16) for c in (4, 8, 16) for r in (1, 2, 4)]
    old = Featurizer(Vocabulary.load(), schema="2")
    X, y = old.tabular(rows), np.asarray([i % 3 for i in range(len(rows))], dtype=float)
    LGBMRanker(n_estimators=5).fit(X, y, np.asarray([len(rows)]), feature_version=old.version).save(
        tmp_path / "rankers" / "lgbm")
    selector = load_selector("lgbm", tmp_path, tmp_path)
    assert sorted(ranked(selector, KernelCandidates(("m", "k"), tuple(rows)))) == list(range(len(rows)))
