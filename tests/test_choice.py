"""A kernel's choice from its rows: the fastest valid candidate that beats the default, with a schedule
rebuilt in the driving process. A candidate whose schedule does not rebuild there fails with the reason and
the next fastest is chosen, whether the rows were just measured (`choose`) or recorded by an earlier run
(`choice_from_rows`, a resumed run); neither stops the run."""
from __future__ import annotations

import pytest

from .kernels_tir import as_mod, matmul64


@pytest.fixture(scope="module")
def kernel_and_traces():
    from tvm.s_tir import Schedule

    from recommender.frontend.kernels import kernel_from_mod
    kernel = kernel_from_mod("matmul", as_mod(matmul64))
    sch = Schedule(kernel.mod)
    sch.parallel(sch.get_loops(sch.get_sblock("C"))[0])
    return kernel, sch.trace.as_json(), [[["NoSuchInstruction", [], [], []]], []]  # the second: refused by the check


def test_a_measured_candidate_whose_trace_does_not_rebuild_fails_and_the_next_is_chosen(kernel_and_traces, target):
    from recommender.transfer.candidates import Candidate, SourceSchedule
    from recommender.measure.measurer import MeasureResult
    from recommender.transfer.replay import Replayed
    from recommender.core.rows import OK, REPLAY_ERROR, SAMPLED
    from recommender.transfer.kernel import FoundCandidates, choose
    kernel, good, bad = kernel_and_traces

    def cand(name, trace):
        source = SourceSchedule(name, "k", 0, 1e-3, trace, kernel.mod, kernel.class_key, SAMPLED)
        return Candidate(source, Replayed(mod=kernel.mod, trace_json=trace), OK)

    found = FoundCandidates(kernel, [cand("fast-but-broken", bad), cand("slower", good)], SAMPLED, 0.0)
    results = {0: MeasureResult(OK, [1e-6]), 1: MeasureResult(OK, [2e-6])}
    choice = choose(found, MeasureResult(OK, [1.0]), results, target.tvm())
    assert choice.chosen is not None and choice.chosen["source_model"] == "slower"
    broken = next(r for r in choice.rows if r.source_model == "fast-but-broken")
    assert broken.status == REPLAY_ERROR and "rebuilt from its trace" in broken.error
    assert choice.failures[REPLAY_ERROR] == 1 and choice.valid == 1


def _row(kernel, name, trace, latency_s):
    from recommender.core.rows import DEFAULT, OK, SAMPLED, CandidateRow
    from recommender.transfer.choice import target_fields
    fields = dict(status=OK, error="", costs=(latency_s,), latency_s=latency_s)
    if name is None:
        return CandidateRow(**target_fields(kernel), match=DEFAULT, **fields)
    return CandidateRow(**target_fields(kernel), match=SAMPLED, source_model=name, source_kernel="k",
                        source_class_key=kernel.class_key, source_rank=0, source_latency_s=1e-3, trace=trace,
                        **fields)


def test_a_resumed_choice_whose_recorded_trace_does_not_rebuild_takes_the_next(kernel_and_traces, target, capsys):
    from recommender.core.rows import REPLAY_ERROR
    from recommender.transfer.choice import choice_from_rows
    kernel, good, bad = kernel_and_traces
    rows = [_row(kernel, None, None, 1.0), _row(kernel, "fast-but-broken", bad, 1e-6),
            _row(kernel, "slower", good, 2e-6)]
    choice = choice_from_rows(kernel, rows, target.tvm())
    assert choice.chosen is not None and choice.chosen["source_model"] == "slower"
    assert choice.chosen_sch is not None and choice.latency_s == 2e-6
    assert choice.rows[1].status == REPLAY_ERROR and rows[1].status != REPLAY_ERROR  # the recorded rows are kept
    assert "does not rebuild from its trace" in capsys.readouterr().err
    # every candidate broken: the default, not a stop
    choice = choice_from_rows(kernel, [rows[0], rows[1]], target.tvm())
    assert choice.chosen is None and choice.latency_s == 1.0 and choice.failures[REPLAY_ERROR] == 1
