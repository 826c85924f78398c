"""Matrix labels measured again where their own repeats say the timing was disturbed.

A matrix row's latency is the median of a few repeats taken back to back. When those repeats spread widely
(slowest over fastest above `SPREAD_LIMIT`), something else ran during the timing, and the median can be many
times the schedule's real time: on `llvm-znver3-2c` a donor of mobilebert's 128x512x128 matmul was labelled
3.58 ms (repeats 2.1-4.2 ms) and runs in 0.13-0.15 ms, so a ranker that put it first was scored as if it had
picked a schedule 30x slower than the best. `scripts/relabel_matrix.py` times such rows again beside a few steady
rows of the same kernel (its anchors), and writes `<matrix>/noise/relabel.jsonl.gz`; `apply_relabels` puts the new
labels on the rows whenever a matrix is read. The matrix files themselves are never rewritten.

A new label is the faster of two fresh medians, scaled by the anchors (median of their matrix latency over their
fresh time), so that it is in the units of the day the kernel's other rows were measured.
"""
from __future__ import annotations

import dataclasses
import statistics
from pathlib import Path
from typing import Iterable, Sequence

from recommender.core.fileio import read_json_lines
from recommender.core.rows import CandidateRow, key_from_json
# the measurer's own bound on a timing's spread (it times such a timing again): the same test for the matrix
from recommender.measure.contention import MAX_SPREAD as SPREAD_LIMIT, spread

RELABEL_FILE = Path("noise") / "relabel.jsonl.gz"
ANCHORS = 3  # steady rows per kernel timed beside its unsteady ones


def unsteady(row: CandidateRow, limit: float = SPREAD_LIMIT) -> bool:
    """A measured candidate whose repeats spread more than `limit`: its label may be a disturbed timing."""
    return not row.is_default and row.ok and spread(row.costs) > limit


def anchors_of(rows: Iterable[CandidateRow], limit: float = SPREAD_LIMIT, n: int = ANCHORS) -> list[CandidateRow]:
    """The kernel's `n` fastest steady candidates (the anchors that put fresh timings in the matrix's units)."""
    steady = [r for r in rows if not r.is_default and r.ok and not unsteady(r, limit)]
    return sorted(steady, key=lambda r: r.latency_s)[:n]


def new_label(fresh: Sequence[float], anchors: Sequence[tuple[float, float]]) -> float:
    """The label of a row timed again: the fastest of its fresh medians, times the median anchor ratio
    (matrix latency / fresh latency of each anchor; 1.0 without anchors)."""
    if not fresh:
        raise ValueError("no fresh timing")
    ratio = statistics.median(m / f for m, f in anchors) if anchors else 1.0
    return min(fresh) * ratio


def read_relabels(matrix_dir: Path) -> dict[tuple, dict]:
    """The relabels of a matrix by row key ({} where it has none)."""
    path = Path(matrix_dir) / RELABEL_FILE
    if not path.exists():
        return {}
    return {key_from_json(r["key"]): r for r in read_json_lines(path, what="relabel file")}


def apply_relabels(rows: list[CandidateRow], relabels: dict[tuple, dict]) -> list[CandidateRow]:
    """`rows` with the relabelled ones carrying their new latency and repeats (the fresh pass's, scaled)."""
    if not relabels:
        return rows
    out = []
    for r in rows:
        new = relabels.get(r.key) if r.ok and not r.is_default else None
        if new is None:
            out.append(r)
            continue
        out.append(dataclasses.replace(r, latency_s=new["latency_s"], costs=tuple(new["costs"])))
    return out
