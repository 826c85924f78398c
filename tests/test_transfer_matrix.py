"""The transfer matrix: leave-one-model-out replay over a two-model bank, every candidate kept, resumable."""
from __future__ import annotations

import gzip
import json
import shutil
import statistics

import pytest

from recommender.bank_tune import tune_model
from recommender.measure import MeasureSettings
from recommender.transfer_data import read_rows

from .conftest import save_pt2

pytestmark = pytest.mark.slow  # real tuning, replays or whole-model compiles: not in `make test-fast`


def _dict_rows(path):
    """The file's rows as their JSON objects (what is on disk, traces included)."""
    return [r.to_json() for r in read_rows(path)]


FAST = MeasureSettings(repeat=2, min_repeat_ms=1)


@pytest.fixture(scope="module")
def bank2(target, tmp_path_factory):
    """Two small CNNs of other widths and sizes, 3 trials per kernel, in one bank."""
    d = tmp_path_factory.mktemp("matrix")
    for name, width, size in (("narrow", 8, 32), ("wide", 16, 24)):
        tune_model(save_pt2(d / f"{name}.pt2", width, size), target, d / "bank", trials_per_task=3, min_share=0.0,
                   settings=FAST, trials_per_iter=3)
    return d / "bank"


def _cli(*argv):
    from recommender.cli import main
    return main(["replay", *argv])


def test_all_pairs_keeps_every_candidate_leaving_the_target_model_out(bank2, tmp_path, capsys):
    out = tmp_path / "transfer"
    assert _cli("--all-pairs", "--bank", str(bank2), "--out", str(out), "--top-n", "2", "--cap", "4",
                "--repeat", "2") == 0
    printed = capsys.readouterr().out
    assert "ALL" in printed and "rows ->" in printed
    summary = json.loads((out / "summary.json").read_text())
    assert summary["bank_models"] == ["narrow", "wide"] and summary["top_n"] == 2 and summary["cap"] == 4
    for model, other in (("narrow", "wide"), ("wide", "narrow")):
        rows = _dict_rows(out / f"{model}.jsonl.gz")
        kernels = {r["target_kernel"] for r in rows}
        meta = json.loads((bank2 / model / "meta.json").read_text())
        assert kernels == {n for n, k in meta["kernels"].items() if k["tuned"]}
        defaults = [r for r in rows if r["match"] == "default"]
        assert len(defaults) == len(kernels)
        assert all(r["workload"] and r["latency_s"] > 0 and r["source_model"] is None for r in defaults)
        cands = [r for r in rows if r["match"] != "default"]
        assert cands and all(r["source_model"] == other for r in cands)  # never the target's own records
        per_kernel = {}
        for r in cands:
            per_kernel.setdefault(r["target_kernel"], []).append(r)
        assert all(len(v) <= 4 for v in per_kernel.values())  # the cap
        for r in cands:
            assert r["source_rank"] < 2 and r["target_tuned_s"] > 0
            if r["status"] == "ok":
                assert r["trace"] and r["latency_s"] == statistics.median(r["costs"])
            else:
                assert r["latency_s"] is None and r["error"]
        assert summary["models"][model]["kernels"] == len(kernels)
    assert summary["all"]["valid_per_kernel"] > 0


def test_all_pairs_resumes_at_the_first_missing_kernel(bank2, tmp_path):
    out = tmp_path / "transfer"
    assert _cli("--all-pairs", "--models", "narrow", "--bank", str(bank2), "--out", str(out), "--cap", "2",
                "--repeat", "2") == 0
    path = out / "narrow.jsonl.gz"
    rows = _dict_rows(path)
    kernels = list(dict.fromkeys(r["target_kernel"] for r in rows))
    assert len(kernels) >= 2
    # as if killed before the last kernel was written
    kept = [r for r in rows if r["target_kernel"] != kernels[-1]]
    with gzip.open(path, "wt") as f:
        f.writelines(json.dumps(r) + "\n" for r in kept)
    assert _cli("--all-pairs", "--models", "narrow", "--bank", str(bank2), "--out", str(out), "--cap", "2",
                "--repeat", "2") == 0
    again = _dict_rows(path)
    assert again[:len(kept)] == kept  # measured rows are kept as they were, not measured again
    assert {r["target_kernel"] for r in again[len(kept):]} == {kernels[-1]}
    assert not (out / "wide.jsonl.gz").exists()


def test_remeasure_measures_again_only_the_kernels_with_that_status(bank2, tmp_path, capsys):
    out = tmp_path / "transfer"
    argv = ["--all-pairs", "--models", "narrow", "--bank", str(bank2), "--out", str(out), "--cap", "2",
            "--repeat", "2"]
    assert _cli(*argv) == 0
    path = out / "narrow.jsonl.gz"
    rows = _dict_rows(path)
    kernels = list(dict.fromkeys(r["target_kernel"] for r in rows))
    flagged = kernels[0]
    marked = [dict(r, status="wrong_result", latency_s=None, costs=[], error="WrongResult: as if an old check")
              if r["target_kernel"] == flagged and r["match"] != "default" else r for r in rows]
    with gzip.open(path, "wt") as f:
        f.writelines(json.dumps(r) + "\n" for r in marked)
    assert _cli(*argv) == 0  # a plain resume keeps them
    assert _dict_rows(path) == marked
    assert _cli(*argv, "--remeasure", "wrong_result,crash") == 0
    assert "measuring 1 kernels again" in capsys.readouterr().err
    again = _dict_rows(path)
    others = [r for r in marked if r["target_kernel"] != flagged]
    assert again[:len(others)] == others  # the other kernels are not measured again
    redone = again[len(others):]
    assert {r["target_kernel"] for r in redone} == {flagged}
    assert not any(r["error"] == "WrongResult: as if an old check" for r in redone)
    with pytest.raises(SystemExit) as exit_:
        _cli(*argv, "--remeasure", "slow")
    assert exit_.value.code == 2 and "unknown status slow" in capsys.readouterr().err


def test_all_pairs_bad_input(bank2, tmp_path, capsys):
    out = tmp_path / "transfer"
    assert _cli("--all-pairs", "--models", "nope", "--bank", str(bank2), "--out", str(out)) == 2
    assert "not in the bank" in capsys.readouterr().err
    assert _cli("--all-pairs", "--model", "zoo:resnet18", "--bank", str(bank2)) == 2
    assert "--all-pairs" in capsys.readouterr().err
    one = tmp_path / "one"
    shutil.copytree(bank2 / "narrow", one / "narrow")
    assert _cli("--all-pairs", "--bank", str(one), "--out", str(out)) == 2
    assert "2 or more bank models" in capsys.readouterr().err
    out.mkdir(exist_ok=True)
    (out / "narrow.jsonl.gz").write_bytes(b"\x1f\x8b\x08\x00garbage")
    assert _cli("--all-pairs", "--models", "narrow", "--bank", str(bank2), "--out", str(out)) == 2
    err = capsys.readouterr().err
    assert "corrupt or truncated transfer-matrix file" in err and "narrow.jsonl.gz" in err
    assert (out / "narrow.jsonl.gz").read_bytes() == b"\x1f\x8b\x08\x00garbage"  # left as it was


def test_sigterm_ends_the_run_cleanly_and_the_rerun_resumes(bank2, tmp_path):
    import os
    import signal
    import subprocess
    import sys
    import time
    from pathlib import Path

    import psutil
    out = tmp_path / "transfer"
    argv = ["replay", "--all-pairs", "--models", "wide", "--bank", str(bank2), "--out", str(out), "--cap", "2",
            "--repeat", "2"]
    proc = subprocess.Popen([sys.executable, "-m", "recommender.cli", *argv], stderr=subprocess.PIPE, text=True,
                            cwd=Path(__file__).resolve().parents[1])
    path = out / "wide.jsonl.gz"
    deadline = time.monotonic() + 300
    while not path.exists():
        assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read() if proc.poll() else "timeout"
        time.sleep(0.05)
    workers = [p.pid for p in psutil.Process(proc.pid).children(recursive=True)]
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(120) == 143
    assert "terminated; what was finished is saved" in proc.stderr.read()
    time.sleep(1)
    assert workers and not [p for p in workers if psutil.pid_exists(p) and
                            psutil.Process(p).status() != psutil.STATUS_ZOMBIE]  # no orphaned worker
    kept = _dict_rows(path)
    done = {r["target_kernel"] for r in kept}
    meta = json.loads((bank2 / "wide" / "meta.json").read_text())
    tuned = {n for n, k in meta["kernels"].items() if k["tuned"]}
    assert done and done < tuned  # stopped part-way
    assert not [p for p in os.listdir(out) if p.startswith(".tmp-")]
    assert _cli(*argv[1:]) == 0
    again = _dict_rows(path)
    assert again[:len(kept)] == kept and {r["target_kernel"] for r in again} == tuned
