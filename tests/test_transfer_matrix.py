"""The transfer matrix: leave-one-model-out replay over a two-model bank, every candidate kept, resumable."""
from __future__ import annotations

import dataclasses
import gzip
import json
import shutil
import statistics

import pytest

from recommender.core.row_files import read_rows


pytestmark = pytest.mark.slow  # real tuning, replays or whole-model compiles: not in `make test-fast`


def _dict_rows(path):
    """The file's rows as their JSON objects (what is on disk, traces included)."""
    return [r.to_json() for r in read_rows(path)]


@pytest.fixture(scope="module")
def bank2(two_model_bank):
    """Two small CNNs of other widths and sizes ("donor" and "wide"), 3 trials per kernel, in one bank."""
    return two_model_bank


MATRIX_ARGS = ("--cap", "2", "--repeat", "2")


@pytest.fixture(scope="module")
def donor_matrix(bank2, tmp_path_factory):
    """The donor model's rows of the matrix (leave-one-model-out replay onto it), run once; tests that resume
    or change the run work on a copy of its output folder."""
    out = tmp_path_factory.mktemp("donor_matrix") / "transfer"
    assert _cli("--all-pairs", "--models", "donor", "--bank", str(bank2), "--out", str(out), *MATRIX_ARGS) == 0
    return out


def _copy_of(folder, tmp_path):
    shutil.copytree(folder, tmp_path / "transfer")
    return tmp_path / "transfer"


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
    assert summary["bank_models"] == ["donor", "wide"] and summary["top_n"] == 2 and summary["cap"] == 4
    for model, other in (("donor", "wide"), ("wide", "donor")):
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
        assert json.loads((out / "donors.json").read_text())["kernels"][model] == {k: [other] for k in kernels}
    assert summary["all"]["valid_per_kernel"] > 0


def test_all_pairs_resumes_at_the_first_missing_kernel(bank2, donor_matrix, tmp_path):
    out = _copy_of(donor_matrix, tmp_path)
    path = out / "donor.jsonl.gz"
    rows = _dict_rows(path)
    kernels = list(dict.fromkeys(r["target_kernel"] for r in rows))
    assert len(kernels) >= 2
    # as if killed before the last kernel was written
    kept = [r for r in rows if r["target_kernel"] != kernels[-1]]
    with gzip.open(path, "wt") as f:
        f.writelines(json.dumps(r) + "\n" for r in kept)
    assert _cli("--all-pairs", "--models", "donor", "--bank", str(bank2), "--out", str(out), *MATRIX_ARGS) == 0
    again = _dict_rows(path)
    assert again[:len(kept)] == kept  # measured rows are kept as they were, not measured again
    assert {r["target_kernel"] for r in again[len(kept):]} == {kernels[-1]}
    assert not (out / "wide.jsonl.gz").exists()
    # measured with vectorized exp/erf (the default); resuming it with libm's is refused, nothing touched
    assert json.loads((out / "summary.json").read_text())["measurer"]["fast_math"] is True
    assert _cli("--all-pairs", "--models", "donor", "--bank", str(bank2), "--out", str(out), *MATRIX_ARGS,
                "--exact-math") == 2
    assert _dict_rows(path) == again


def test_a_matrix_resumed_on_a_bank_with_new_models_says_so_and_adds_their_candidates(bank2, donor_matrix,
                                                                                     tmp_path, capsys):
    """As if "wide" joined the bank after the donor model's kernels were measured: a plain resume says in one
    line that they lack it and keeps their rows; --add-donors measures wide's candidates onto them, after
    each kernel's rows, its default row kept; then nothing is left to add."""
    out = _copy_of(donor_matrix, tmp_path)
    full = _dict_rows(out / "donor.jsonl.gz")
    defaults = [r for r in full if r["match"] == "default"]
    with gzip.open(out / "donor.jsonl.gz", "wt") as f:  # measured when the bank held only "donor"
        f.writelines(json.dumps(r) + "\n" for r in defaults)
    (out / "donors.json").unlink()
    summary = json.loads((out / "summary.json").read_text())
    (out / "summary.json").write_text(json.dumps({**summary, "bank_models": ["donor"]}))
    argv = ["--all-pairs", "--models", "donor", "--bank", str(bank2), "--out", str(out), *MATRIX_ARGS]
    capsys.readouterr()
    assert _cli(*argv) == 0
    err = capsys.readouterr().err
    assert f"note: {len(defaults)} finished kernels" in err and "no candidates from wide" in err
    assert "--add-donors" in err
    assert _dict_rows(out / "donor.jsonl.gz") == defaults  # finished rows untouched
    assert _cli(*argv, "--add-donors") == 0
    assert "candidates of new donors added to" in capsys.readouterr().err
    rows = _dict_rows(out / "donor.jsonl.gz")
    assert [r for r in rows if r["match"] == "default"] == defaults
    kernels = [r["target_kernel"] for r in rows]
    assert kernels == sorted(kernels, key=kernels.index)  # each kernel's rows stay together
    added = [r for r in rows if r["match"] != "default"]
    assert added and {r["source_model"] for r in added} == {"wide"}
    assert len(added) == len([r for r in full if r["match"] != "default"])  # the same pool a full build drew
    donors = json.loads((out / "donors.json").read_text())
    assert donors["earlier_kernels"] == ["donor"] and donors["kernels"]["donor"] == {r["target_kernel"]: ["wide"] for r in defaults}
    assert _cli(*argv, "--add-donors") == 0
    assert "note:" not in capsys.readouterr().err and _dict_rows(out / "donor.jsonl.gz") == rows
    assert _cli("--model", "zoo:x", "--add-donors") == 2
    assert "use it with --all-pairs" in capsys.readouterr().err


def test_remeasure_measures_again_only_the_kernels_with_that_status(bank2, donor_matrix, tmp_path, capsys):
    out = _copy_of(donor_matrix, tmp_path)
    argv = ["--all-pairs", "--models", "donor", "--bank", str(bank2), "--out", str(out), *MATRIX_ARGS]
    path = out / "donor.jsonl.gz"
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
    shutil.copytree(bank2 / "donor", one / "donor")
    assert _cli("--all-pairs", "--bank", str(one), "--out", str(out)) == 2
    assert "2 or more bank models" in capsys.readouterr().err
    out.mkdir(exist_ok=True)
    (out / "donor.jsonl.gz").write_bytes(b"\x1f\x8b\x08\x00garbage")
    assert _cli("--all-pairs", "--models", "donor", "--bank", str(bank2), "--out", str(out)) == 2
    err = capsys.readouterr().err
    assert "corrupt or truncated transfer-matrix file" in err and "donor.jsonl.gz" in err
    assert (out / "donor.jsonl.gz").read_bytes() == b"\x1f\x8b\x08\x00garbage"  # left as it was


@pytest.mark.bench  # half a minute on 2 cores: make test-bench (make test: SIGTERM ends test_run_control's transfer
# rerun, with its workers; an all-pairs run resumes in test_all_pairs_resumes_at_the_first_missing_kernel)
def test_sigterm_ends_the_run_cleanly_and_the_rerun_resumes(bank2, tmp_path):
    import os
    import signal
    import subprocess
    import sys
    import time
    from pathlib import Path

    import psutil

    from .cli_helpers import still_running
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
    assert workers and not still_running(workers)  # no orphaned worker
    kept = _dict_rows(path)
    done = {r["target_kernel"] for r in kept}
    meta = json.loads((bank2 / "wide" / "meta.json").read_text())
    tuned = {n for n, k in meta["kernels"].items() if k["tuned"]}
    assert done and done < tuned  # stopped part-way
    assert not [p for p in os.listdir(out) if p.startswith(".tmp-")]
    assert _cli(*argv[1:]) == 0
    again = _dict_rows(path)
    assert again[:len(kept)] == kept and {r["target_kernel"] for r in again} == tuned


def test_a_rule_space_matrix_measures_the_template_s_instances_beside_the_donors(bank2, tmp_path):
    """--rule-space N: only kernels whose class has a tile rule, each with up to N instances of the rule's
    template (the fixed tiles first, ranked in that order, their knob values the traces' tile decisions) measured
    beside its donors and its default."""
    from recommender.rules import RULES, tile_rule_for
    out = tmp_path / "space"
    assert _cli("--all-pairs", "--models", "wide", "--bank", str(bank2), "--out", str(out), *MATRIX_ARGS,
                "--rule-space", "6") == 0
    rows = read_rows(out / "wide.jsonl.gz")
    meta = json.loads((bank2 / "wide" / "meta.json").read_text())
    ruled = {n for n, k in meta["kernels"].items() if k["tuned"] and tile_rule_for(k["class_key"])}
    assert {r.target_kernel for r in rows} == ruled and ruled
    rule_rows = [r for r in rows if r.source_model == RULES["conv"].source]
    assert rule_rows and all(r.match == "sampled" for r in rule_rows)
    for kernel in {r.target_kernel for r in rule_rows}:
        mine = sorted((r for r in rule_rows if r.target_kernel == kernel), key=lambda r: r.source_rank)
        assert 2 < len(mine) <= 6 and [r.source_rank for r in mine] == list(range(len(mine)))
        assert sum(r.status == "ok" for r in mine) >= 2
        tiles = [[d for i, d in r.trace[1] if r.trace[0][i][0] == "SamplePerfectTile"] for r in mine]
        # channels, rows, columns, and the reduction block where the instance has one
        assert all(len(t) == 3 + ("reduction" in r.knobs) for t, r in zip(tiles, mine))
        assert len({json.dumps(t) for t in tiles}) == len(mine)
    assert any(r.source_model == "donor" for r in rows) and any(r.is_default for r in rows)


def test_add_instances_measures_only_the_rule_instances_a_finished_kernel_lacks(bank2, tmp_path, capsys):
    """A rule space grown since the matrix was measured (here: 3 -> 6 instances; in use, a template that gained a
    knob): --add-instances measures the instances each finished kernel's rows lack, after its rows, which stay
    as they were; run again, it measures nothing."""
    from recommender.core.rows import RULE
    from recommender.core.rows import knob_key
    out = tmp_path / "space"
    args = ["--all-pairs", "--models", "wide", "--bank", str(bank2), "--out", str(out), *MATRIX_ARGS]
    assert _cli(*args, "--rule-space", "3") == 0
    before = read_rows(out / "wide.jsonl.gz")
    capsys.readouterr()
    assert _cli(*args, "--rule-space", "6", "--add-instances") == 0
    after = read_rows(out / "wide.jsonl.gz")
    assert "new rule instances added to" in capsys.readouterr().err
    gained = 0
    for kernel in {r.target_kernel for r in before}:
        old = [r.to_json() for r in before if r.target_kernel == kernel]
        new = [r for r in after if r.target_kernel == kernel]
        assert [r.to_json() for r in new[:len(old)]] == old  # its rows as they were, the new ones after them
        rules = [knob_key(r.knobs) for r in new if r.source_kind == RULE]
        assert len(rules) == len(set(rules)) <= 6
        assert all(not r.is_default and r.source_kind == RULE for r in new[len(old):])
        gained += len(new) - len(old)
    assert gained > 0
    capsys.readouterr()
    assert _cli(*args, "--rule-space", "6", "--add-instances") == 0
    assert "0 new rule instances added to 0" in capsys.readouterr().err
    assert [r.to_json() for r in read_rows(out / "wide.jsonl.gz")] == [r.to_json() for r in after]



def test_a_disturbed_label_is_timed_again_beside_anchors_and_every_reader_gets_the_new_one(donor_matrix, tmp_path):
    """A row whose repeats spread (here: made 40x slow, repeats 20-60x) is rebuilt and timed again beside the
    kernel's steady anchors; read_matrix gives its new label, close to its neighbours' scale, and the matrix file
    is left as it was. A rerun times nothing."""
    from recommender.core.row_files import write_rows
    from training.dataset import read_matrix
    from training.relabel import RELABEL_FILE, unsteady

    from .cli_helpers import load_script
    out = _copy_of(donor_matrix, tmp_path)
    path = out / "donor.jsonl.gz"
    rows = read_rows(path)
    by_kernel: dict = {}
    for r in rows:
        if not r.is_default and r.ok:
            by_kernel.setdefault(r.target_kernel, []).append(r)
    kernel, cands = max(by_kernel.items(), key=lambda kv: len(kv[1]))
    victim = max(cands, key=lambda r: r.latency_s)
    assert any(not unsteady(r) for r in cands if r.key != victim.key)  # an anchor
    true_s = victim.latency_s
    spoiled = [x * true_s for x in (20.0, 40.0, 60.0)]
    rows = [dataclasses.replace(r, latency_s=40 * true_s, costs=tuple(spoiled)) if r.key == victim.key else r
            for r in rows]
    write_rows(path, rows)
    before = path.read_bytes()
    script = load_script("relabel_matrix")
    script.relabel(out, "native", 1.5, None)
    assert path.read_bytes() == before  # the matrix file untouched
    entries = read_relabels_file(out / RELABEL_FILE)
    mine = [e for e in entries if tuple(e["key"][:2]) == ("donor", kernel)]
    assert mine and mine[0]["old_latency_s"] == 40 * true_s and mine[0]["anchors"] >= 1
    new = {r.key: r for r in read_matrix(out)}[victim.key]
    assert new.latency_s < 5 * true_s and not unsteady(new)  # timed again: of the kernel's own scale
    assert {r.key: r for r in read_matrix(out, relabelled=False)}[victim.key].latency_s == 40 * true_s
    n = len(entries)
    script.relabel(out, "native", 1.5, None)  # nothing left to time
    assert len(read_relabels_file(out / RELABEL_FILE)) == n


def read_relabels_file(path):
    from recommender.core.fileio import read_json_lines
    return read_json_lines(path, what="relabel file")
