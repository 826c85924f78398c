"""The output check's inputs: integer arguments used as indices are filled with random indices in range,
so that a schedule that reads the wrong rows of a gather cannot pass by every index being 0."""
from __future__ import annotations

import pytest

from recommender.measure import MeasureSettings, Measurer
from recommender.measure.args import index_bounds

from .kernels_tir import add1024, as_mod, matmul64, take_rows, take_rows_wrong


def test_index_bounds_come_from_the_extent_an_integer_argument_indexes():
    assert index_bounds(as_mod(take_rows)) == [None, 100, None]
    assert index_bounds(as_mod(matmul64)) == [None, None, None]
    assert index_bounds(as_mod(add1024)) == [None, None]


@pytest.mark.slow
def test_a_gather_that_reads_the_wrong_rows_is_a_wrong_result(target):
    with Measurer(target.config, MeasureSettings(repeat=2, min_repeat_ms=1)) as m:
        right, wrong = m.measure([as_mod(take_rows), as_mod(take_rows_wrong)], reference=as_mod(take_rows))
    assert right.status == "ok", right.error
    assert wrong.status == "wrong_result" and "argument 2 differs" in wrong.error, (wrong.status, wrong.error)
