"""training.relabel: which matrix labels are timed again, and how the new labels reach every reader (no TVM)."""
from __future__ import annotations

import json

import pytest

from recommender.core.fileio import gzip_writer
from recommender.core.row_files import write_rows
from recommender.core.rows import DEFAULT, OK, CandidateRow
from training.dataset import read_matrix
from training.relabel import RELABEL_FILE, anchors_of, apply_relabels, new_label, spread, unsteady


def _row(rank: int, latency: float, costs: tuple, status: str = OK) -> CandidateRow:
    return CandidateRow("m", "k", "conv2d", "class", status, source_model="d", source_kernel="k2", source_rank=rank,
                        latency_s=latency, costs=costs, trace=[[], []])


def test_spread_marks_rows_whose_repeats_disagree():
    assert spread((1.0, 1.2, 1.1)) == pytest.approx(1.2) and spread((2.0,)) == 1.0 and spread(()) == 1.0
    assert unsteady(_row(0, 3.0, (2.0, 3.0, 4.0))) and not unsteady(_row(1, 1.0, (1.0, 1.1, 1.2)))
    assert not unsteady(_row(2, 3.0, (1.0, 4.0), status="timeout"))  # not measured: nothing to relabel
    default = CandidateRow("m", "k", "conv2d", DEFAULT, OK, latency_s=1.0, costs=(1.0, 9.0))
    assert not unsteady(default)


def test_anchors_are_the_fastest_steady_rows_and_scale_the_fresh_time():
    rows = [_row(0, 3.0, (2.0, 3.0, 4.0)), _row(1, 1.0, (1.0, 1.1)), _row(2, 2.0, (2.0, 2.1)),
            _row(3, 0.5, (0.4, 0.9)), _row(4, 4.0, (4.0, 4.0)), _row(5, 5.0, (5.0, 5.0))]
    assert [r.source_rank for r in anchors_of(rows)] == [1, 2, 4]
    # fresh medians 0.3 and 0.2; anchors ran 1.25x, 1.5x, 1.0x slower today than in the matrix: scale by 1/1.25
    assert new_label([0.3, 0.2], [(1.0, 1.25), (2.0, 3.0), (4.0, 4.0)]) == pytest.approx(0.2 / 1.25)
    assert new_label([0.3], []) == 0.3
    with pytest.raises(ValueError):
        new_label([], [])


def test_read_matrix_gives_the_new_labels_and_leaves_the_file(tmp_path):
    rows = [CandidateRow("m", "k", "conv2d", DEFAULT, OK, latency_s=9.0, costs=(9.0,)),
            _row(0, 3.0, (2.0, 3.0, 4.0)), _row(1, 1.0, (1.0, 1.1))]
    write_rows(tmp_path / "m.jsonl.gz", rows)
    (tmp_path / RELABEL_FILE).parent.mkdir()
    with gzip_writer(str(tmp_path / RELABEL_FILE), text=True) as f:
        f.write(json.dumps({"key": json.loads(json.dumps(rows[1].key)), "latency_s": 0.5, "costs": [0.5, 0.55],
                            "old_latency_s": 3.0}) + "\n")
    got = {r.source_rank: r for r in read_matrix(tmp_path) if not r.is_default}
    assert got[0].latency_s == 0.5 and got[0].costs == (0.5, 0.55) and got[1].latency_s == 1.0
    assert {r.source_rank: r.latency_s for r in read_matrix(tmp_path, relabelled=False) if not r.is_default} == \
        {0: 3.0, 1: 1.0}
    assert apply_relabels(rows, {}) is rows
