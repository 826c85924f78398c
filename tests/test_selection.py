"""Selectors and the budget split: pure logic on small fixtures of rows (no TVM)."""
from __future__ import annotations

import numpy as np
import pytest

from recommender.core.rows import CandidateRow
from recommender.transfer.selection import KernelCandidates, MeasureAll, RandomK, Ranked, split_budget


def _kernel(name, n, gain=1.0, match="class", class_key="matmul/s2r1:@matmul"):
    rows = tuple(CandidateRow(target_model="m", target_kernel=name, class_key=class_key, match=match, status="ok",
                              source_rank=i, trace=[[], []]) for i in range(n))
    return KernelCandidates(("m", name), rows, gain=gain)


def test_per_kernel_budget_is_capped_by_the_candidates():
    ks = [_kernel("a", 5), _kernel("b", 2), _kernel("c", 0)]
    assert split_budget(ks, per_kernel=3) == {("m", "a"): 3, ("m", "b"): 2, ("m", "c"): 0}
    assert split_budget(ks, per_kernel=0) == {("m", "a"): 0, ("m", "b"): 0, ("m", "c"): 0}
    with pytest.raises(ValueError):
        split_budget(ks, budget=3, per_kernel=3)


def test_total_budget_gives_every_kernel_its_top1_first_then_follows_the_gain():
    ks = [_kernel("small", 5, gain=1.0), _kernel("big", 5, gain=10.0), _kernel("mid", 5, gain=3.0)]
    assert split_budget(ks, budget=2) == {("m", "small"): 0, ("m", "big"): 1, ("m", "mid"): 1}
    counts = split_budget(ks, budget=9)
    assert sum(counts.values()) == 9 and min(counts.values()) >= 1
    assert counts[("m", "big")] > counts[("m", "mid")] > counts[("m", "small")]
    # never more measurements than candidates; a budget beyond all candidates measures them all
    assert split_budget(ks, budget=100) == {("m", "small"): 5, ("m", "big"): 5, ("m", "mid"): 5}


def test_measure_all_and_random_orders():
    k = _kernel("a", 6)
    assert MeasureAll().order(k) == list(range(6))
    r = RandomK(seed=1).order(k)
    assert sorted(r) == list(range(6)) and r == RandomK(seed=1).order(k) and r != RandomK(seed=2).order(k)


class _ByRank:
    """A stand-in ranker: prefers low source ranks."""

    name = "by_rank"

    def predict(self, X, group=None):
        return -np.asarray(X)[:, 0]


def test_ranked_orders_by_the_ranker_and_puts_known_failures_last():
    featurize = lambda rows: np.asarray([[r.source_rank] for r in rows], dtype=float)  # noqa: E731
    k = _kernel("a", 4)
    assert Ranked(_ByRank(), featurize).order(k) == [0, 1, 2, 3]
    # anchor-trace schedules of a kernel whose epilogue pads are known to compute the border wrong
    bad = _kernel("p", 3, match="anchor", class_key="conv2d/s4r3:pad_temp+@conv2d_nchw+add+PadInput")
    good = _kernel("p", 2)
    mixed = KernelCandidates(("m", "p"), bad.rows + tuple(
        CandidateRow(**{**r.__dict__, "source_rank": 5 + i}) for i, r in enumerate(good.rows)))
    assert Ranked(_ByRank(), featurize).order(mixed) == [3, 4, 0, 1, 2]
    assert Ranked(_ByRank(), featurize, validity=False).order(mixed) == [0, 1, 2, 3, 4]


def _pool(name="k"):
    """One kernel's pool: 2 donors, the rule's 2 fixed tiles and 2 points of its wider space, 1 design-space
    draw, in that order."""
    def row(model, rank, **kw):
        return CandidateRow(target_model="m", target_kernel=name, class_key="conv2d/s4r3:@conv2d_nchw",
                            match=kw.pop("match", "class"), status="ok", source_model=model, source_rank=rank,
                            trace=[[], []], **kw)
    rows = (row("resnet18", 0), row("vgg16", 0),
            row("(conv rule)", 0, match="sampled", knobs={"channels": 8, "rows": 2, "columns": 16, "fixed": True}),
            row("(conv rule)", 1, match="sampled", knobs={"channels": 4, "rows": 4, "columns": 16, "fixed": True}),
            row("(conv rule)", 2, match="sampled", knobs={"channels": 2, "rows": 1, "columns": 32, "fixed": False}),
            row("(conv rule)", 3, match="sampled", knobs={"channels": 16, "rows": 1, "columns": 8, "fixed": False}),
            row("(design space)", 0, match="sampled"))
    return KernelCandidates(("m", name), rows)


def test_every_candidate_of_the_pool_is_ranked_alike_whatever_its_source():
    """One pool: rule instances and design-space schedules go through the selector as donors do (none is
    kept in a fixed place), so a ranker's order decides which of them are measured."""
    from recommender.transfer.selection import ranked
    pool = _pool()
    assert [r.source_kind for r in pool.rows] == ["donor", "donor", "rule", "rule", "rule", "rule", "space"]
    assert [r.fixed_rule for r in pool.rows] == [False, False, True, True, False, False, False]
    featurize = lambda rows: np.asarray([[-i] for i, _ in enumerate(rows)], dtype=float)  # noqa: E731
    assert ranked(Ranked(_ByRank(), featurize), pool) == [6, 5, 4, 3, 2, 1, 0]  # the last first: it scores best
    shuffled = ranked(RandomK(seed=3), pool)
    assert sorted(shuffled) == list(range(7)) and shuffled != list(range(7))
    assert ranked(RandomK(seed=3), _kernel("none", 0)) == []


def test_restricted_baselines_measure_their_part_of_the_pool_only():
    """fixed-tiles: today's tiles alone; donors: the donors alone, in the heuristic's (here: the given) order;
    tiles-then-donors: the fixed tiles first, then the donors, never the wider space."""
    from recommender.transfer.selection import ranked, restricted
    pool = _pool()
    reverse = Ranked(_ByRank(), lambda rows: np.asarray([[-r.source_rank] for r in rows], dtype=float))
    assert ranked(restricted("fixed-tiles", reverse), pool) == [3, 2]
    assert ranked(restricted("donors", reverse), pool) == [0, 1]  # equal scores: pool order (a stable sort)
    assert ranked(restricted("tiles-then-donors", reverse), pool)[:2] == [2, 3]
    assert sorted(ranked(restricted("tiles-then-donors", reverse), pool)) == [0, 1, 2, 3]
    # a per-kernel budget beyond a restricted order's length measures that order, no more
    from recommender.transfer.budgeted import take_planned
    assert take_planned(ranked(restricted("fixed-tiles", reverse), pool), 5) == [3, 2]
    with pytest.raises(ValueError):
        restricted("tiles-only", reverse)


def test_the_kth_measurement_of_a_kernel_is_worth_its_gain_over_k():
    """After every kernel's top-1, the big kernel's 2nd..6th measurements (worth 10/2 .. 10/6) beat the mid
    kernel's 2nd (3/2), and its 7th (10/7 = 1.43) does not: without the decay the big kernel takes all six."""
    ks = [_kernel("small", 20, gain=1.0), _kernel("big", 20, gain=10.0), _kernel("mid", 20, gain=3.0)]
    assert split_budget(ks, budget=9) == {("m", "small"): 1, ("m", "big"): 6, ("m", "mid"): 2}


def test_cap_spreads_the_pool_across_donor_models_best_ranks_first():
    """--cap keeps every donor model represented: rank 0 of each model first, then rank 1
    of each, ...; the model's own records and excluded models never come back."""
    from recommender.transfer.candidates import BankIndex, SourceSchedule
    from recommender.frontend.kernels import Kernel
    key = "matmul/s2r1:@matmul+add"
    index = BankIndex.__new__(BankIndex)
    latency = {"a": 3e-3, "b": 1e-3, "c": 2e-3, "me": 1e-4}
    index.by_class = {key: [SourceSchedule(m, f"{m}_k", r, latency[m] * (1 + r), [[], []], None, key)
                            for m in ("a", "b", "c", "me") for r in range(3)]}
    index.by_anchor = {}
    kernel = Kernel("t", 1, 1.0, key, [((4, 4), "float32")])
    picked = index.sources_for(kernel, top_n=3, exclude_models=("me",), cap=5)
    assert [(s.model, s.rank) for s in picked] == [("a", 0), ("b", 0), ("c", 0), ("a", 1), ("b", 1)]
    assert len(index.sources_for(kernel, top_n=2, exclude_models=("me",))) == 6
    assert [s.rank for s in index.sources_for(kernel, top_n=1, exclude_models=("me", "a"))] == [0, 0]


def test_a_class_with_one_donor_model_is_joined_by_same_anchor_donors_within_the_cap():
    """pool_for: with class donors from two models the class alone is the pool; from one model, the same-anchor
    donors of other epilogues join it, their models queued after the class's model, all within the cap."""
    from featurize.tir_structure import anchor_key
    from recommender.transfer.candidates import BankIndex, SourceSchedule
    from recommender.frontend.kernels import Kernel
    key, other = "conv2d/s4r3:pad_temp+@conv2d_nchw+add+relu", "conv2d/s4r3:pad_temp+@conv2d_nchw+relu"
    assert anchor_key(key) == anchor_key(other)

    def src(model, rank, k):
        return SourceSchedule(model, f"{model}_k", rank, 1e-3 * (1 + rank), [[], []], None, k)
    index = BankIndex.__new__(BankIndex)
    one = [src("regnet", r, key) for r in range(3)]
    anchors = [src(m, r, other) for m in ("googlenet", "vgg") for r in range(3)]
    index.by_class, index.by_anchor = {key: one}, {anchor_key(key): one + anchors}
    kernel = Kernel("t", 1, 1.0, key, [((1, 64, 56, 56), "float32")])
    picked = index.pool_for(kernel, top_n=3, cap=5)
    assert [(s.model, s.rank, s.match) for s in picked] == [
        ("regnet", 0, "class"), ("googlenet", 0, "anchor"), ("vgg", 0, "anchor"), ("regnet", 1, "class"),
        ("googlenet", 1, "anchor")]
    assert len(index.pool_for(kernel, top_n=3)) == 9
    assert [s.match for s in index.pool_for(kernel, top_n=3, min_class_models=1)] == ["class"] * 3
    index.by_class[key] = one + [src("resnet", r, key) for r in range(3)]  # two class models: no anchors
    assert {s.match for s in index.pool_for(kernel, top_n=3)} == {"class"}
    assert index.pool_for(kernel, top_n=3, exclude_models=("regnet", "resnet"), cap=2) == [
        index.sources_for(kernel, top_n=3, match="anchor")[i] for i in (0, 1)]


def test_a_kernels_match_is_where_its_replayed_schedules_came_from():
    from recommender.transfer.choice import kernel_match
    assert kernel_match([("class", True), ("anchor", True)]) == "class"  # a pool joined by anchor donors
    assert kernel_match([("class", False), ("anchor", True)]) == "anchor"
    assert kernel_match([("class", False), ("sampled", True)]) == "sampled"
    assert kernel_match([("class", True), ("sampled", True)]) == "class"  # samples after the donors lost
    assert kernel_match([("class", False), ("anchor", False)]) == "anchor"
    assert kernel_match([("class", False)]) == "class" and kernel_match([]) is None


def test_the_heuristic_selector_reads_the_columns_it_is_built_for(tmp_path):
    """`--selector heuristic` (and the restricted baselines over it) orders by the source record's rank first:
    a heuristic built without the featurizer's names read other columns (the kernel kind flags) and kept the
    pool order."""
    from recommender.transfer.recommend import load_selector
    from recommender.transfer.selection import ranked
    rows = tuple(CandidateRow(target_model="m", target_kernel="k", class_key="matmul/s2r1:@matmul", match="class",
                              status="ok", source_model=f"d{i}", source_kernel="k", source_rank=rank,
                              target_args=(((4, 4), "float32"),), flops=128.0, trace=[[], []])
                 for i, rank in enumerate((2, 0, 1)))
    pool = KernelCandidates(("m", "k"), rows)
    assert ranked(load_selector("heuristic", tmp_path, tmp_path), pool) == [1, 2, 0]
    assert ranked(load_selector("donors", tmp_path, tmp_path), pool) == [1, 2, 0]


def test_a_ranker_places_rule_instances_only_of_the_kinds_it_saw_measured():
    """A conv pool under a ranker that saw no conv rule instance in training: the rule's fixed tiles first, in
    the rule's order, then the ranker's order of the rest; under one that saw them, its own order throughout."""
    pool = _pool()
    last_first = lambda rows: np.asarray([[-i] for i, _ in enumerate(rows)], dtype=float)  # noqa: E731
    assert Ranked(_ByRank(), last_first, rule_kinds=frozenset({"conv2d"})).order(pool) == [6, 5, 4, 3, 2, 1, 0]
    assert Ranked(_ByRank(), last_first, rule_kinds=frozenset({"matmul"})).order(pool) == [2, 3, 6, 5, 4, 1, 0]
    assert Ranked(_ByRank(), last_first, rule_kinds=frozenset()).order(pool)[:2] == [2, 3]
    assert Ranked(_ByRank(), last_first).order(pool) == [6, 5, 4, 3, 2, 1, 0]  # None: trusted on every kind


def test_a_learned_order_measures_the_best_of_each_candidate_family_first():
    """The spread: the best-scored candidate of each family (source kind, and for a rule instance which
    structural knobs it sets), families in the order of their best, then the rest by score. A ranker that
    scores every reduction-blocked instance low still gets the best of them measured at k = 3 here."""
    from recommender.transfer.selection import candidate_family, spread_order
    pool = _pool()
    blocked = CandidateRow(**{**pool.rows[2].__dict__, "source_rank": 4,
                              "knobs": {"channels": 8, "rows": 2, "columns": 16, "reduction": 16, "fixed": False}})
    pool = KernelCandidates(pool.key, pool.rows + (blocked,))
    families = [candidate_family(r) for r in pool.rows]
    assert len(set(families)) == 4  # donors, unblocked rule instances, blocked ones, the design-space draw
    assert families[2] == families[3] == families[4] != families[7]
    # scores: the rule's fixed tiles best, then the other rule points, the donors, the draw; the blocked last
    scores = {2: 9.0, 3: 8.0, 4: 7.0, 5: 6.0, 0: 5.0, 1: 4.0, 6: 3.0, 7: 1.0}
    by_score = sorted(scores, key=lambda i: -scores[i])
    assert spread_order(pool.rows, by_score) == [2, 0, 6, 7, 3, 4, 5, 1]
    featurize = lambda rows: np.asarray([[-scores[i]] for i, _ in enumerate(rows)], dtype=float)  # noqa: E731
    assert Ranked(_ByRank(), featurize).order(pool) == by_score  # a plain ranker's order: no spread
    assert Ranked(_ByRank(), featurize, spread=True).order(pool) == [2, 0, 6, 7, 3, 4, 5, 1]
    # a matmul instance's K block and packed layout are families of their own too
    mm = [CandidateRow(target_model="m", target_kernel="mm", class_key="matmul/s2r1:@matmul", match="sampled",
                       status="ok", source_model="(matmul rule)", source_rank=i, trace=[[], []],
                       knobs={"rows": 4, "vectors": 2, "lanes": 16, "k_block": kb, "packed": p})
          for i, (kb, p) in enumerate([(0, False), (64, False), (0, True), (64, True), (0, False)])]
    assert len({candidate_family(r) for r in mm}) == 4
    assert spread_order(mm, [0, 4, 1, 2, 3]) == [0, 1, 2, 3, 4]
