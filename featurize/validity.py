"""Candidates known to fail before they are measured: the first stage of ranking.

Every wrong result in the shipped transfer matrix (62 of 5129 replayed candidates) is an anchor-trace
schedule (same anchor, other epilogue) applied to a kernel whose fused epilogue ends in a pad: MetaSchedule's
anchor-trace application schedules the anchor and inlines the rest, and the pad border then comes out
wrong. Such kernels are rare (2 of 155 in the matrix), so a learned ranker cannot learn the rule
leave-one-model-out; it is stated here instead, and the selectors rank such candidates after every other.
It is a coarse prior, not a verdict: whether the border comes out wrong depends on the schedule (21 of the 83
such candidates in the matrix are right), and where every candidate of a kernel is of this kind (21 of
MobileNetV2's kernels, 4 of them with 3 in 4 candidates wrong) it cannot help: there only the measured
correctness check finds the right ones.
"""
from __future__ import annotations

from typing import Protocol


class _Row(Protocol):
    match: str
    class_key: str


def known_failure(row: _Row) -> str | None:
    """Why `row` is expected to fail its correctness check, or None."""
    if row.match == "anchor":
        blocks = row.class_key.partition(":")[2].split("+")
        anchor = next((i for i, b in enumerate(blocks) if b.startswith("@")), len(blocks))
        if any("pad" in b.lower() for b in blocks[anchor + 1:]):
            return "anchor-trace schedule of a kernel whose epilogue pads (computes the border wrong)"
    return None


def demote_known_failures(rows: list, scores) -> "object":
    """Scores with every known failure moved below all other candidates (order among them kept)."""
    import numpy as np
    scores = np.asarray(scores, dtype=np.float64).copy()
    bad = np.asarray([known_failure(r) is not None for r in rows], dtype=bool)
    if bad.any() and len(scores):
        span = scores.max() - scores.min() + 1.0
        scores[bad] -= span * 2
    return scores
