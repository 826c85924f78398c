"""The command line: kernel listing, JSON output, and one-line errors on bad input."""
from __future__ import annotations

import json
import os

import pytest

from recommender.cli import main

from .cli_helpers import run_cli, single_op_onnx

pytestmark = pytest.mark.slow  # real tuning, replays or whole-model compiles: not in `make test-fast`


def test_help_lists_commands():
    out = run_cli("--help")
    assert out.returncode == 0
    for cmd in ("kernels", "zoo", "target"):
        assert cmd in out.stdout


def test_kernels_table_and_json(onnx_file, tmp_path, capsys):
    out_json = tmp_path / "k.json"
    assert main(["kernels", onnx_file, "--json", str(out_json)]) == 0
    table = capsys.readouterr().out
    assert "conv2d>add>relu" in table  # the ONNX exporter folds batch norm into the conv
    data = json.loads(out_json.read_text())
    assert data["model"] == "small_cnn" and data["target"]["kind"] == "llvm"
    assert data["inputs"] == [{"name": data["inputs"][0]["name"], "shape": [1, 3, 32, 32], "dtype": "float32"}]
    kinds = {k["kind"] for k in data["kernels"]}
    assert {"conv2d", "pool", "matmul"} <= kinds
    assert abs(sum(k["flop_share"] for k in data["kernels"]) - 1) < 1e-6
    assert not [p for p in os.listdir(tmp_path) if p.startswith(".tmp-")]


def test_bad_inputs_give_one_line_errors(tmp_path, capsys):
    """In process (the entry point itself is covered by the --help and --debug tests): exit 2, one line."""
    garbage = tmp_path / "garbage.onnx"
    garbage.write_bytes(b"\x00\x01 this is not a protobuf \xff" * 10)
    not_pt2 = tmp_path / "text.pt2"
    not_pt2.write_text("hello")
    celu = tmp_path / "celu.onnx"
    single_op_onnx(celu, "Celu", alpha=1.0)
    cases = [
        (["kernels", str(tmp_path / "missing.onnx")], "model file not found"),
        (["kernels", str(garbage)], "not a valid ONNX model"),
        (["kernels", str(not_pt2)], "not a torch.export program"),
        (["kernels", "zoo:resnet1000"], "unknown zoo model 'resnet1000'; known: resnet18, resnet50"),
        (["kernels", str(celu)], "not supported by the TVM Relax frontend: Celu"),
        (["kernels", str(tmp_path / "model.txt")], "model file not found"),
        (["kernels", "zoo:bert_tiny", "--target", '{"kind": "cuda"}'], "targets CPUs"),
        (["transfer", "--model", "zoo:bert_tiny", "--budget", "1", "--out", str(tmp_path / "t"),
          "--target", '{"kind": "llvm", "mcpu": "nosuchcpu", "num-cores": 2}'], "LLVM knows no CPU 'nosuchcpu'"),
        (["transfer", "--model", "zoo:bert_tiny", "--budget", "1", "--out", str(tmp_path / "t"),
          "--target", '{"kind": "llvm", "mcpu": "znver4"}'], 'needs "num-cores"'),
    ]
    (tmp_path / "model.bin").write_text("x")
    cases.append((["kernels", str(tmp_path / "model.bin")], "unrecognised model spec"))
    for argv, message in cases:
        code, err = main(argv), capsys.readouterr().err
        assert code == 2, (argv, err)
        err_lines = [ln for ln in err.splitlines() if ln.startswith("schedrec:")]
        assert len(err_lines) == 1 and message in err_lines[0], (argv, err)
        assert "Traceback" not in err, (argv, err)
    assert not (tmp_path / "t").exists()  # a target refused before any work leaves no output folder


def test_debug_flag_shows_the_traceback(tmp_path):
    out = run_cli("--debug", "kernels", str(tmp_path / "missing.onnx"))
    assert out.returncode == 2 and "Traceback" in out.stderr


def test_model_without_tunable_kernel(tmp_path, capsys):
    """An ONNX graph that only passes its input through has nothing to tune: a clear error."""
    path = single_op_onnx(tmp_path / "ident.onnx", "Identity")
    assert main(["kernels", path]) == 2
    assert "has no tunable kernel" in capsys.readouterr().err
