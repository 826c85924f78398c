"""Target-aware features: a target's recorded hardware, never the host's (issue 40 item 1)."""
from __future__ import annotations

import json

import numpy as np
import pytest

from featurize.candidate_features import Featurizer
from featurize.hardware_features import HARDWARE_NAMES, Hardware
from featurize.trace_tokens import Vocabulary
from recommender.core.errors import TargetError
from recommender.core.rows import CandidateRow
from recommender.target.hardware import CPU_TABLE, hardware_for, known_cpus


def _row(trace=None, knobs=None, source="(conv2d rule)") -> CandidateRow:
    return CandidateRow(target_model="m", target_kernel="k", class_key="conv2d/s3r1:@conv", match="class",
                        status="ok", weight=1, flops=2.0e8,
                        target_args=(((1, 64, 56, 56), "float32"), ((64, 64, 3, 3), "float32")),
                        source_model=source, source_kernel="k0", source_rank=0, trace=trace or [[], []],
                        knobs=knobs, latency_s=1e-4)


def test_a_targets_hardware_comes_from_its_record_not_the_host(monkeypatch):
    import os
    hw = hardware_for("llvm-znver4-2c")[0]
    assert (hw.lanes, hw.cores, hw.l2_kib) == (16, 2, 1024) and hw.published
    monkeypatch.setattr(os, "cpu_count", lambda: 96)  # another host: nothing changes
    assert hardware_for("llvm-znver4-2c")[0] == hw
    assert hardware_for("llvm-znver4-8c")[0].cores == 8  # cores from the key


def test_hardware_features_are_deterministic_and_versioned():
    vocab = Vocabulary.load()
    rows = [_row(knobs={"fixed": True, "co": 16, "ow": 7}), _row(source="bert")]
    a = Featurizer(vocab, {}, hardware_for("llvm-znver4-2c")[0])
    b = Featurizer(vocab, {}, hardware_for("llvm-znver4-2c")[0])
    plain = Featurizer(vocab, {})
    Xa, Xb, Xp = a.tabular(rows), b.tabular(rows), plain.tabular(rows)
    assert np.array_equal(Xa, Xb) and np.isfinite(Xa).all()
    assert "+hw" in a.version and "+hw" not in plain.version
    # the block adds columns and changes none of the others (a target's own ranker reads the rest)
    keep = [i for i, n in enumerate(a.tabular_names) if n not in HARDWARE_NAMES]
    assert np.array_equal(Xa[:, keep], Xp) and len(a.tabular_names) == len(plain.tabular_names) + len(HARDWARE_NAMES)
    # another CPU reads other numbers for the same candidate
    c = Featurizer(vocab, {}, hardware_for("llvm-znver3-2c")[0]).tabular(rows)
    lanes = a.tabular_names.index("hw_lanes")
    assert c[0, lanes] < Xa[0, lanes]


def test_an_unknown_cpu_gets_its_vector_widths_defaults_with_a_note():
    hw, note = hardware_for("llvm-nosuchcpu-4c")
    defaults = json.loads(CPU_TABLE.read_text())["defaults"]["256"]
    assert not hw.published and hw.lanes == defaults["lanes"] and hw.cores == 4
    assert note and "nosuchcpu" in note and "defaults" in note
    assert hardware_for("llvm-znver5-2c")[1] is None
    with pytest.raises(TargetError, match="core count"):
        hardware_for("llvm-znver4")
    with pytest.raises(ValueError):
        Hardware("x", cores=2, lanes=0, l1d_kib=32, l2_kib=512, l3_mib=16, flops_per_cycle=32)


def test_the_tables_lanes_agree_with_llvm():
    """The recorded lanes of every CPU are what LLVM vectorizes for with that -mcpu (real TVM)."""
    from recommender.target.spec import float32_lanes, parse_target
    for mcpu in known_cpus():
        target = parse_target(json.dumps({"kind": "llvm", "mcpu": mcpu, "num-cores": 2})).tvm()
        assert hardware_for(f"llvm-{mcpu}-2c")[0].lanes == float32_lanes(target), mcpu
