"""Transfer-matrix rows: round trip through the gz file and the summary statistics (plain Python)."""
from __future__ import annotations

import gzip
import json

import pytest

from recommender.core.rows import CandidateRow
from recommender.core.row_files import read_rows, summarize, write_rows


def _row(model, kernel, match, latency, rank=0, status="ok", tuned=None):
    return CandidateRow.from_json({
        "target_model": model, "target_kernel": kernel, "class_key": "c", "match": match,
        "status": status if latency is not None else "build_error", "latency_s": latency,
        "source_rank": rank, "target_tuned_s": tuned, "weight": 1, "flops": 1.0})


def test_round_trip_and_summary(tmp_path):
    rows = [
        _row("a", "k1", "default", 4.0, rank=None, tuned=1.0),
        _row("a", "k1", "class", 1.0, rank=1, tuned=1.0),
        _row("a", "k1", "class", 2.0, rank=0, tuned=1.0),
        _row("a", "k1", "class", 8.0, rank=0, tuned=1.0),
        _row("a", "k1", "class", None, rank=0, tuned=1.0),
        _row("b", "k2", "default", 1.0, rank=None, tuned=0.5),
        _row("b", "k2", "anchor", 2.0, rank=0, tuned=0.5),
    ]
    path = tmp_path / "x.jsonl.gz"
    write_rows(path, rows)
    assert read_rows(path) == rows
    s = summarize(rows)
    a, b = s["models"]["a"], s["models"]["b"]
    assert a["kernels"] == 1 and a["candidates_per_kernel"] == 4 and a["valid_per_kernel"] == 3
    assert a["median_over_best"] == 2.0 and a["worst_over_best"] == 8.0
    assert a["default_over_best"] == 4.0 and a["best_over_tuned"] == 1.0
    assert a["rank0_best_over_best"] == 2.0 and a["share_best_beats_default"] == 1.0
    assert b["share_best_beats_default"] == 0.0 and b["best_over_tuned"] == 4.0
    assert s["all"]["kernels"] == 2 and s["all"]["kernels_with_valid"] == 2


def test_rows_missing_required_fields_are_refused(tmp_path):
    from recommender.core.errors import BankError
    path = tmp_path / "x.jsonl.gz"
    with gzip.open(path, "wt") as f:  # write_rows only writes whole rows: the damaged file is made by hand
        f.write(json.dumps({"target_model": "a"}) + "\n")
    with pytest.raises(BankError, match="row 1"):
        read_rows(path)
