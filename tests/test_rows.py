"""CandidateRow, the one reader and writer of candidate rows: the shipped rows survive it unchanged, the
committed summary is what it gives, and a row without its required fields is refused (plain Python)."""
from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from recommender.core import rows as rows_mod
from recommender.core.errors import BankError
from recommender.core.rows import DEFAULT, CandidateRow, key_from_json
from recommender.core.row_files import count_rows, read_rows, summarize, write_rows

SHIPPED = Path(__file__).resolve().parents[1] / "models" / "llvm-znver3-2c"
TRANSFER = sorted((SHIPPED / "transfer").glob("*.jsonl.gz"))
FILES = TRANSFER + sorted((SHIPPED / "heldout").glob("*/candidates.jsonl.gz"))


def _raw_lines(path: Path) -> list[str]:
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return [line for line in f if line.strip()]


@pytest.mark.skipif(not FILES, reason="no shipped transfer rows in this checkout")
def test_every_shipped_row_round_trips_unchanged(tmp_path):
    n = 0
    for path in FILES:
        lines = _raw_lines(path)
        raw = [json.loads(line) for line in lines]
        rows = [CandidateRow.from_json(obj) for obj in raw]
        assert [r.to_json() for r in rows] == raw, path
        # what a resumed run rewrites is the file it read, byte for byte (key order included)
        again = tmp_path / path.name
        write_rows(again, rows)
        assert _raw_lines(again) == lines, path
        assert count_rows(path) == (len(rows), sum(r.is_default for r in rows)), path  # its fast path agrees
        n += len(raw)
    assert n > 0


@pytest.mark.skipif(not TRANSFER, reason="no shipped transfer matrix in this checkout")
def test_summary_of_the_shipped_rows_is_the_committed_summary():
    committed = json.loads((SHIPPED / "transfer" / "summary.json").read_text())
    rows = [r for p in TRANSFER for r in read_rows(p)]
    assert len(rows) == committed["rows"]
    s = summarize(rows)
    assert s["all"] == committed["all"] and s["models"] == committed["models"]


def test_default_row_keeps_seconds_and_workload():
    obj = {"target_model": "m", "target_kernel": "k", "class_key": "c", "match": DEFAULT, "status": "ok",
           "latency_s": 1e-4, "seconds": {"total": 1.0}, "workload": ["w"]}
    row = CandidateRow.from_json(obj)
    assert row.is_default and row.seconds == {"total": 1.0} and row.workload == ["w"]
    assert not CandidateRow.from_json(dict(obj, match="class")).is_default


def test_rows_are_counted_by_their_own_match_field(tmp_path):
    """count_rows reads `match` off the line: a name holding its text is escaped and not taken for it, nor is a
    nested object's key after the row's own, and a line whose keys come in another order (not this writer's) is
    parsed."""
    obj = {"target_model": "m", "target_kernel": 'k"match":"default"', "class_key": "c", "match": "class",
           "status": "ok", "latency_s": 1e-4, "workload": [{"match": DEFAULT}]}
    path = tmp_path / "m.jsonl.gz"
    write_rows(path, [CandidateRow.from_json(obj), CandidateRow.from_json(dict(obj, match=DEFAULT))])
    assert count_rows(path) == (2, 1)
    with gzip.open(path, "at") as f:
        f.write(json.dumps({"match": DEFAULT, **{k: v for k, v in obj.items() if k != "match"}},
                           separators=(", ", ": ")) + "\n\n")
    assert count_rows(path) == (3, 2)


def test_rule_instances_of_one_rank_but_other_knobs_have_their_own_keys():
    """`matrix --add-instances` restarts the ranks of the rule instances it adds: the knob values keep their rows
    apart, else training looks both up as one feature row (training.evaluate.FeatureTable indexes by key)."""
    base = {"target_model": "m", "target_kernel": "k", "class_key": "c", "match": "class", "status": "ok",
            "source_model": "(conv rule)", "source_kernel": "k", "source_rank": 3, "latency_s": 1e-4}
    a = CandidateRow.from_json(dict(base, knobs={"channels": 8, "rows": 2, "fixed": True}))
    b = CandidateRow.from_json(dict(base, knobs={"channels": 8, "rows": 2, "reduction": 16, "fixed": False}))
    same = CandidateRow.from_json(dict(base, knobs={"rows": 2, "channels": 8, "fixed": False}))
    assert a.key != b.key and a.key == same.key  # "fixed" marks today's tiles; it names no other schedule
    assert key_from_json(json.loads(json.dumps(b.key))) == b.key
    donor = CandidateRow.from_json(dict(base, source_model="resnet18"))
    assert key_from_json(json.loads(json.dumps(donor.key[:6]))) == donor.key  # saved before the knobs joined it


def test_a_row_missing_a_required_field_is_refused(tmp_path):
    obj = {"target_model": "m", "target_kernel": "k", "class_key": "c", "match": "class", "status": "ok"}
    CandidateRow.from_json(obj)
    for name in rows_mod.REQUIRED:
        broken = {k: v for k, v in obj.items() if k != name}
        with pytest.raises(ValueError, match=f"missing {name}"):
            CandidateRow.from_json(broken)
    path = tmp_path / "m.jsonl.gz"
    with gzip.open(path, "wt") as f:
        f.write(json.dumps(obj) + "\n" + json.dumps({k: v for k, v in obj.items() if k != "status"}) + "\n")
    with pytest.raises(BankError, match=r"row 2: .*missing status") as err:
        read_rows(path)
    assert str(path) in str(err.value)


def test_a_field_of_the_wrong_shape_is_a_bank_error(tmp_path):
    path = tmp_path / "m.jsonl.gz"
    obj = {"target_model": "m", "target_kernel": "k", "class_key": "c", "match": "class", "status": "ok",
           "target_args": 5}
    with gzip.open(path, "wt") as f:
        f.write(json.dumps(obj) + "\n")
    with pytest.raises(BankError, match="row 1"):
        read_rows(path)


def test_status_constants_have_one_home():
    from recommender.transfer import candidates, replay
    from recommender.measure import measurer
    for name in ("OK", "BUILD_ERROR", "RUNTIME_ERROR", "TIMEOUT", "CRASH", "WRONG_RESULT"):
        assert getattr(measurer, name) is getattr(rows_mod, name)
    for name in ("REPLAY_ERROR", "POSTPROC_FAILURE", "CLASS_MISMATCH", "REPLAY_TIMEOUT", "REPLAY_CRASH"):
        assert getattr(replay, name) is getattr(rows_mod, name)
    assert (candidates.CLASS, candidates.ANCHOR) == (rows_mod.CLASS, rows_mod.ANCHOR)
