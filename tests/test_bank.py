"""The bank: resumable tuning through the measurer, info, import, and clear errors on damaged banks."""
from __future__ import annotations

import gzip
import json
import os
import time
from pathlib import Path

import pytest

from recommender.bank.store import META_FILE, RECORD_FILE, locked, read_records, unpack
from recommender.core.errors import BankError
from recommender.bank.info import bank_summary, import_workdir
from recommender.bank.tune import tune_model
from recommender.cli import main
from recommender.measure import MeasureSettings

pytestmark = pytest.mark.slow  # real tuning, replays or whole-model compiles: not in `make test-fast`

FAST = MeasureSettings(repeat=3, min_repeat_ms=1)


@pytest.fixture(scope="module")
def bank(onnx_file, target, tmp_path_factory) -> Path:
    """A bank holding the small CNN with its heaviest kernel (43% of the FLOPs) tuned for 4 trials."""
    bank_dir = tmp_path_factory.mktemp("bank")
    tune_model(onnx_file, target, bank_dir, trials_per_task=4, min_share=0.4, settings=FAST, trials_per_iter=4,
               population_size=16)
    return bank_dir


def test_tuning_writes_a_metaschedule_bank(bank, target):
    folder = bank / "small_cnn"
    meta = json.loads((folder / META_FILE).read_text())
    tuned = {n: k for n, k in meta["kernels"].items() if k["tuned"]}
    assert len(tuned) == 1 and len(meta["kernels"]) == 6
    (k,) = tuned.values()
    assert k["status"] == "done" and k["trials"] == 4 and k["valid"] >= 1 and 0 < k["best_s"] < 0.1
    assert meta["target_key"] == target.key and meta["measurer"]["repeat"] == 3
    workloads, records = read_records(folder)
    assert len(workloads) == 1 and len(records) == 4
    assert k["best_s"] == pytest.approx(min(r.latency for r in records if r.ok), rel=1e-6)
    assert k["valid"] == sum(1 for r in records if r.ok)
    assert all(len(r.run_secs) == 3 for r in records if r.ok)
    assert not (folder / RECORD_FILE).exists() and (folder / (RECORD_FILE + ".gz")).exists()


def test_tuning_resumes_instead_of_restarting(bank, onnx_file, target):
    tune_model(onnx_file, target, bank, trials_per_task=6, min_share=0.4, settings=FAST, trials_per_iter=4,
               population_size=16)
    meta = json.loads((bank / "small_cnn" / META_FILE).read_text())
    (k,) = [k for k in meta["kernels"].values() if k["tuned"]]
    assert k["trials"] == 6  # 4 kept, 2 more measured
    assert meta["last_run"]["built"] == 2
    # a rerun with nothing left to measure leaves every file byte for byte (gzip headers hold no time)
    files = {p.name: p.read_bytes() for p in (bank / "small_cnn").iterdir() if p.is_file() and p.name != ".lock"}
    time.sleep(1.1)
    tune_model(onnx_file, target, bank, trials_per_task=6, min_share=0.4, settings=FAST, trials_per_iter=4,
               population_size=16)
    assert {p.name: p.read_bytes() for p in (bank / "small_cnn").iterdir() if p.name in files} == files


def test_info_and_import(bank, target, tmp_path, capsys):
    (summary,) = bank_summary(bank)
    assert summary["model"] == "small_cnn" and summary["records"] >= 4 and summary["valid_records"] >= 1
    work = tmp_path / "work"
    unpack(bank / "small_cnn", str(work))
    s = import_workdir(work, bank, "imported_cnn", target.key, target.config)
    assert s["workloads"] == 1 and s["records"] == summary["records"]
    assert main(["bank", "info", "--bank", str(bank)]) == 0
    out = capsys.readouterr().out
    assert "small_cnn" in out and "imported_cnn" in out
    with pytest.raises(BankError, match="already has a model named imported_cnn"):
        import_workdir(work, bank, "imported_cnn", target.key, target.config)
    with pytest.raises(BankError, match="not a MetaSchedule work dir"):
        import_workdir(tmp_path, bank, "x", target.key, target.config)
    # a record whose trace TVM would misread (a decision index past the end) is refused, nothing filed
    lines = (work / "database_tuning_record.json").read_text().splitlines()
    rec = json.loads(lines[0])
    rec[1][0][1].append([len(rec[1][0][0]) + 100, 1])
    (work / "database_tuning_record.json").write_text("\n".join([json.dumps(rec), *lines[1:]]) + "\n")
    with pytest.raises(BankError, match=r"record 1 of .*database_tuning_record.json: malformed trace: decision"):
        import_workdir(work, bank, "bad_trace", target.key, target.config)
    assert not (bank / "bad_trace").exists()


def _copy_bank(bank: Path, dest: Path) -> Path:
    import shutil
    shutil.copytree(bank / "small_cnn", dest / "small_cnn", ignore=shutil.ignore_patterns(".work", ".lock"))
    return dest


def test_damaged_bank_files_give_clear_errors(bank, tmp_path):
    copy = _copy_bank(bank, tmp_path)
    gz = copy / "small_cnn" / (RECORD_FILE + ".gz")
    data = gz.read_bytes()
    gz.write_bytes(data[: len(data) // 2])
    with pytest.raises(BankError, match="corrupt or truncated"):
        bank_summary(copy)
    with gzip.open(gz, "wt") as f:
        f.write('[0, [[[], []], [0.1], {"kind": "llvm"}, []]]\n{not json\n')
    with pytest.raises(BankError, match="line 2"):
        bank_summary(copy)
    (copy / "small_cnn" / META_FILE).write_text("{")
    with pytest.raises(BankError, match="corrupt .*meta.json"):
        bank_summary(copy)


def test_bank_of_another_target_is_refused_for_tuning_and_flagged_by_info(bank, onnx_file, target, tmp_path, capsys):
    copy = _copy_bank(bank, tmp_path)
    meta_path = copy / "small_cnn" / META_FILE
    meta = json.loads(meta_path.read_text())
    meta["target_key"] = "llvm-skylake-avx512-8c"
    meta_path.write_text(json.dumps(meta))
    with pytest.raises(BankError, match="holds records for llvm-skylake-avx512-8c"):
        tune_model(onnx_file, target, copy, trials_per_task=6, min_share=0.4, settings=FAST, population_size=16)
    assert main(["bank", "info", "--bank", str(copy)]) == 0
    assert "measured on llvm-skylake-avx512-8c" in capsys.readouterr().err


def test_a_second_writer_is_refused(bank, onnx_file, target):
    with locked(bank / "small_cnn", "test"):
        with pytest.raises(BankError, match="in use by another schedrec run"):
            tune_model(onnx_file, target, bank, trials_per_task=8, min_share=0.4, settings=FAST, population_size=16)


def test_whole_model_timing_untuned_and_with_the_bank(bank, onnx_file, target, tmp_path):
    from recommender.measure import Measurer
    from recommender.frontend.model_import import import_model
    model = import_model(onnx_file, target.tvm())
    inputs = list(zip(model.input_shapes, model.input_dtypes))
    unpack(bank / "small_cnn", str(tmp_path / "db"))
    with Measurer(target.config, FAST) as m:
        untuned = m.measure_model(model.mod, inputs)
        tuned = m.measure_model(model.mod, inputs, database_dir=str(tmp_path / "db"))
    assert untuned.ok and tuned.ok, (untuned.error, tuned.error)
    assert len(untuned.costs) == 3 and untuned.median > 0 and tuned.median > 0
    # the build applied the database: its one tuned kernel is scheduled, and nothing is without one
    assert tuned.scheduled_kernels == 1 and untuned.scheduled_kernels is None
    # the database is read, not ignored: one that is not there fails the build
    with Measurer(target.config, FAST) as m:
        missing = m.measure_model(model.mod, inputs, database_dir=str(tmp_path / "no-database"))
        # built once, timed in rounds (the latency table's side-by-side columns); the library goes on exit
        with m.model_library(model.mod, str(tmp_path / "db")) as built:
            assert built.ok and built.scheduled_kernels == 1 and os.path.isfile(built.path)
            rounds = [m.time_model_library(built.path, inputs) for _ in range(2)]
        with m.model_library(model.mod, str(tmp_path / "no-database")) as failed:
            assert failed.status == "build_error" and failed.path is None
    assert missing.status == "build_error" and "no-database" in missing.error, (missing.status, missing.error)
    assert all(r.ok and len(r.costs) == 3 for r in rounds) and not os.path.exists(built.path)


def test_a_whole_models_timing_beside_busy_loops_is_timed_again_then_kept_with_its_stall_share(bank, onnx_file, target,
                                                                                                tmp_path, monkeypatch):
    """A whole model's timing that another process stalls is timed again like a kernel's (a single spoiled
    timing once reported a model 10x slower than it runs), and, the busy loops still running, the last try is
    kept with its stall share and counted."""
    import subprocess

    from recommender.measure import Measurer, contention, measurer
    from recommender.frontend.model_import import import_model
    monkeypatch.setattr(measurer, "MODEL_RETRY_WAIT_S", 0.2)  # a model waits longer between tries than a kernel
    if contention.stalled_us() is None:
        pytest.skip("no CPU pressure information (PSI) on this machine")
    model = import_model(onnx_file, target.tvm())
    inputs = list(zip(model.input_shapes, model.input_dtypes))
    unpack(bank / "small_cnn", str(tmp_path / "db"))
    with Measurer(target.config, FAST) as m, m.model_library(model.mod, str(tmp_path / "db")) as built:
        before = dict(m.stats)
        hogs = [subprocess.Popen(["sh", "-c", "while :; do :; done"]) for _ in range(os.cpu_count() or 2)]
        try:
            timed = m.time_model_library(built.path, inputs)
        finally:
            for h in hogs:
                h.kill()
    assert timed.ok and contention.spoiled(timed.stall_share), timed.stall_share
    assert m.stats["timed_again_contended"] - before["timed_again_contended"] == measurer.MODEL_RETRIES
    assert m.stats["kept_contended"] - before["kept_contended"] == 1


@pytest.mark.bench  # minutes each on 2 cores: make test-bench (make test stops a matrix and a transfer the same way: test_transfer_matrix, test_run_control)
def test_sigterm_in_the_middle_of_tuning_ends_cleanly_and_the_rerun_resumes(onnx_file, tmp_path):
    """The signal arrives while MetaSchedule tunes a kernel (in its search, a Python callback called from C++
    that wraps the exception, or a measurement): still exit 143 with the one-line message, no worker
    traceback, the finished kernels kept."""
    import signal
    import subprocess
    import sys
    import time
    bank_dir = tmp_path / "bank"
    argv = [sys.executable, "-m", "recommender.cli", "bank", "tune", "--models", onnx_file, "--bank", str(bank_dir),
            "--trials-per-task", "16", "--trials-per-iter", "4", "--population-size", "16", "--min-share", "0.05",
            "--repeat", "2", "--min-repeat-ms", "1"]
    proc = subprocess.Popen(argv, stderr=subprocess.PIPE, text=True, cwd=Path(__file__).resolve().parents[1])
    meta_path = bank_dir / "small_cnn" / META_FILE
    records = bank_dir / "small_cnn" / ".work" / "database_tuning_record.json"

    def tuning_records() -> int:
        try:
            return len(records.read_text().splitlines())
        except OSError:
            return 0

    def done_kernels() -> int:
        try:
            return sum(k["status"] == "done" for k in json.loads(meta_path.read_text())["kernels"].values())
        except (OSError, ValueError):
            return 0

    deadline = time.monotonic() + 300
    while done_kernels() < 1:
        assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read() if proc.poll() else "timeout"
        time.sleep(0.1)
    # into the next kernel's search: its first round of 4 trials is in the database, 3 rounds are to come (a
    # signal between two kernels would land outside MetaSchedule and test nothing of its C++ frames)
    first = tuning_records()
    while tuning_records() <= first:
        assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read() if proc.poll() else "timeout"
        time.sleep(0.02)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(120) == 143
    err = proc.stderr.read()
    assert "terminated; what was finished is saved" in err and "Traceback" not in err, err
    kept = done_kernels()
    assert kept >= 1
    assert main(argv[3:]) == 0  # the same command, resumed
    meta = json.loads(meta_path.read_text())
    tuned = [k for k in meta["kernels"].values() if k["tuned"]]
    assert len(tuned) > kept and all(k["status"] == "done" and k["trials"] == 16 for k in tuned)
