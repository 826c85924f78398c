"""Every command that takes a model, a bank or a target refuses bad ones the same way: one line naming the
problem and the file, exit 2, nothing written. In-process (the checks run before any measurement); the
read-only cases run in a child that cannot bypass file permissions."""
from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from recommender.target.folders import repo_models_dir
from recommender.cli import main

from .cli_helpers import assert_one_line_error, run_cli, single_op_onnx, without_root_file_access

pytestmark = pytest.mark.slow  # real tuning, replays or whole-model compiles: not in `make test-fast`


@pytest.fixture(scope="module")
def bad_models(tmp_path_factory) -> dict[str, tuple[str, str]]:
    """name -> (model spec, the message its error must carry)."""
    d = tmp_path_factory.mktemp("bad_models")
    garbage = d / "garbage.onnx"
    garbage.write_bytes(b"\x00\x01 not a protobuf \xff" * 10)
    return {
        "missing": (str(d / "missing.onnx"), "model file not found"),
        "not_a_model": (str(garbage), "not a valid ONNX model"),
        "unsupported_op": (single_op_onnx(d / "celu.onnx", "Celu"), "not supported by the TVM Relax frontend: Celu"),
        "no_tunable_kernel": (single_op_onnx(d / "ident.onnx", "Identity"), "has no tunable kernel"),
        "unknown_zoo": ("zoo:resnet1000", "unknown zoo model 'resnet1000'"),
    }


def _commands(spec: str, work: Path) -> dict[str, list[str]]:
    return {
        "kernels": ["kernels", spec],
        "replay": ["replay", "--model", spec, "--out", str(work / "replay")],
        "bank tune": ["bank", "tune", "--models", spec, "--bank", str(work / "bank"), "--trials-per-task", "8"],
        "transfer": ["transfer", "--model", spec, "--budget-per-kernel", "1", "--out", str(work / "transfer")],
        "compare": ["compare", "--model", spec, "--out", str(work / "compare")],
    }


@pytest.mark.parametrize("bad", ["missing", "not_a_model", "unsupported_op", "no_tunable_kernel", "unknown_zoo"])
@pytest.mark.parametrize("command", ["kernels", "replay", "bank tune", "transfer", "compare"])
def test_bad_models_are_refused_by_every_command(bad, command, bad_models, tmp_path, capsys):
    spec, message = bad_models[bad]
    code = main(_commands(spec, tmp_path)[command])
    assert_one_line_error(code, capsys.readouterr().err, message)
    assert not any(tmp_path.iterdir()), list(tmp_path.iterdir())  # no output folder left behind


@pytest.mark.parametrize("argv", [
    ["kernels", "zoo:bert_tiny"], ["replay", "--model", "zoo:bert_tiny"], ["replay", "--all-pairs"],
    ["bank", "tune", "--models", "zoo:bert_tiny"], ["bank", "info"], ["bank", "import", ".", "--name", "x"],
])
def test_a_target_that_is_not_a_cpu_is_refused_by_every_command(argv, capsys):
    code = main(argv + ["--target", '{"kind": "cuda"}'])
    assert_one_line_error(code, capsys.readouterr().err, "targets CPUs")


@pytest.fixture()
def small_bank(tmp_path) -> Path:
    """A bank holding a copy of one shipped bank model (bert_tiny, measured on this project's CPU)."""
    shipped = repo_models_dir() / "llvm-znver3-2c" / "bank" / "bert_tiny"
    if not shipped.is_dir():
        pytest.skip("the shipped bank is not here")
    bank = tmp_path / "bank"
    shutil.copytree(shipped, bank / "bert_tiny", ignore=shutil.ignore_patterns(".work", ".lock", "PAUSE"))
    return bank


@pytest.fixture()
def damaged_bank(small_bank) -> Path:
    """The small bank with its record file cut in half."""
    bank = small_bank
    gz = bank / "bert_tiny" / "database_tuning_record.json.gz"
    data = gz.read_bytes()
    gz.write_bytes(data[: len(data) // 2])
    return bank


def test_a_truncated_bank_is_refused_by_every_reader(damaged_bank, onnx_file, tmp_path, capsys):
    before = {p: p.read_bytes() for p in damaged_bank.rglob("*") if p.is_file()}
    out = tmp_path / "out"
    for argv in (["bank", "info", "--bank", str(damaged_bank)],
                 ["replay", "--model", onnx_file, "--bank", str(damaged_bank), "--out", str(out / "r")],
                 ["replay", "--all-pairs", "--bank", str(damaged_bank), "--out", str(out / "m")]):
        code = main(argv)
        err = capsys.readouterr().err
        assert_one_line_error(code, err, "corrupt or truncated")
        assert "database_tuning_record.json.gz" in err
    assert {p: p.read_bytes() for p in damaged_bank.rglob("*") if p.is_file()} == before  # left as it was
    assert not out.exists() or not any(out.rglob("*.jsonl.gz"))


def test_bank_import_of_a_damaged_work_dir(tmp_path, capsys):
    work = tmp_path / "work"
    work.mkdir()
    (work / "database_workload.json").write_text('["not a workload"\n')
    (work / "database_tuning_record.json").write_text("")
    code = main(["bank", "import", str(work), "--name", "broken", "--bank", str(tmp_path / "bank")])
    assert_one_line_error(code, capsys.readouterr().err, "database_workload")
    assert not (tmp_path / "bank" / "broken").exists()


@pytest.mark.parametrize("command", ["replay", "bank tune"])
def test_read_only_output_folders(command, onnx_file, small_bank, tmp_path):
    ro = tmp_path / "ro"
    ro.mkdir()
    os.chmod(ro, 0o555)
    argv = {"replay": ["replay", "--model", onnx_file, "--bank", str(small_bank), "--out", str(ro / "r")],
            "bank tune": ["bank", "tune", "--models", onnx_file, "--bank", str(ro / "bank"),
                          "--trials-per-task", "8"]}[command]
    out = run_cli(*argv, preexec=without_root_file_access if os.getuid() == 0 else None)
    assert_one_line_error(out.returncode, out.stderr, "Permission denied")
    assert str(ro) in out.stderr
    assert os.listdir(ro) == []



@pytest.mark.parametrize("script, damaged", [
    ("make_card.py", "bank/m/meta.json"),
    ("make_card.py", "latency.json"),
    ("latency_table.py", "bank/m/meta.json"),
    ("latency_table.py", "latency.json"),
    ("transfer_figures.py", "transfer/summary.json"),
    ("transfer_figures.py", "transfer/m.jsonl.gz"),
])
def test_data_scripts_refuse_damaged_files_in_one_line(script, damaged, target, tmp_path, monkeypatch, capsys):
    """The scripts that write the card, the latency table and the transfer figures name a damaged input
    file in one line, exit 2, and leave it as it was (run in process, as `python scripts/X.py` runs them)."""
    import gzip

    from recommender.core.errors import run_script

    from .cli_helpers import ROOT, load_script
    root = tmp_path / "models"
    key_dir = root / target.key
    (key_dir / "transfer").mkdir(parents=True)
    if damaged.startswith("bank/"):
        (key_dir / "bank" / "m").mkdir(parents=True)
    (key_dir / "latency.json").write_text("{}")
    (key_dir / "transfer" / "summary.json").write_text("{}")
    (key_dir / "transfer" / "m.jsonl.gz").write_bytes(gzip.compress(b"{}\n"))
    bad = key_dir / damaged
    content = gzip.compress(b'{"target_model": "m"')[:-6] if damaged.endswith(".gz") else b'{"model": "m", "target_'
    bad.write_bytes(content)
    monkeypatch.setenv("SCHEDREC_MODELS_DIR", str(root))
    monkeypatch.setattr("sys.argv", [str(ROOT / "scripts" / script)])
    main = load_script(script.removesuffix(".py")).main
    capsys.readouterr()
    with pytest.raises(SystemExit) as stop:
        run_script(main)
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if ln.startswith(f"{script}: error:")]
    assert stop.value.code == 2 and len(lines) == 1 and "Traceback" not in err, err
    assert "corrupt" in lines[0] and str(bad) in lines[0], lines[0]
    assert bad.read_bytes() == content
