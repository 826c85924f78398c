"""The scripts that write the model card, the transfer figures and the latency table run on the committed
data and reproduce the committed files (so no figure in them is typed by hand), and the latency table
records the target string and threads each column used."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

from .cli_helpers import ROOT

pytestmark = pytest.mark.slow
KEY = "llvm-znver3-2c"
SHIPPED = ROOT / "models" / KEY
# the shipped target, pinned: the same key on any host CPU (the scripts compile for it, they need not run it)
TARGET = json.dumps({"kind": "llvm", "mcpu": "znver3", "num-cores": 2})


def _run(script: str, models_dir, *args: str, timeout: int = 600) -> subprocess.CompletedProcess:
    out = subprocess.run([sys.executable, str(ROOT / "scripts" / script), "--target", TARGET, *args],
                         capture_output=True, text=True, timeout=timeout, cwd=ROOT,
                         env={**os.environ, "SCHEDREC_MODELS_DIR": str(models_dir)})
    assert out.returncode == 0, out.stderr[-2000:]
    return out


@pytest.fixture(scope="module")
def shipped_copy(tmp_path_factory):
    if not SHIPPED.is_dir():
        pytest.skip("the shipped target folder is not here")
    root = tmp_path_factory.mktemp("models")
    shutil.copytree(SHIPPED, root / KEY, ignore=shutil.ignore_patterns("compare", "db", ".lock", "PAUSE", ".work"))
    return root


def test_card_and_transfer_figures_reproduce_the_committed_files(shipped_copy):
    folder = shipped_copy / KEY
    (folder / "card.md").unlink()
    (folder / "transfer" / "FIGURES.md").unlink()
    for png in ("best_vs_median.png", "heldout.png"):
        (folder / "transfer" / png).unlink()
    _run("make_card.py", shipped_copy)
    _run("transfer_figures.py", shipped_copy)
    # whole, the CPU line included: it names the CPU the latency rows were measured on, whatever this host is
    assert (folder / "card.md").read_text() == (SHIPPED / "card.md").read_text(), \
        "models/<key>/card.md is stale: run python scripts/make_card.py"
    assert (folder / "transfer" / "FIGURES.md").read_text() == (SHIPPED / "transfer" / "FIGURES.md").read_text(), \
        "FIGURES.md is stale: run python scripts/transfer_figures.py"
    for png in ("best_vs_median.png", "heldout.png"):
        assert (folder / "transfer" / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.bench  # a whole latency-table run (a transfer, five timed columns): make test-bench
def test_latency_table_times_a_bank_model_and_the_card_says_how(tmp_path):
    folder = tmp_path / KEY
    # schedrec's column: transfer from the other bank models, lgbm fitted here. A bank of three transformers
    # (and their rows of the matrix) keeps the fit and the donor pool small; the whole bank took 50 s more
    for model in ("bert_tiny", "distilbert", "mobilebert"):
        shutil.copytree(SHIPPED / "bank" / model, folder / "bank" / model)
        (folder / "transfer").mkdir(exist_ok=True)
        shutil.copy(SHIPPED / "transfer" / f"{model}.jsonl.gz", folder / "transfer")
    _run("latency_table.py", tmp_path, "--models", "bert_tiny", "--k", "1", "--cap", "4", "--tune-missing", "0")
    row = json.loads((folder / "latency.json").read_text())["bert_tiny"]
    assert row["kind"] == "bank" and row["tuned_kernels"] == 5 and not row["errors"], row
    assert row["target"] == json.loads(TARGET) and row["threads"] == {"tvm": 2, "pytorch": 2, "onnxruntime": 2}
    for column in ("tvm_untuned_ms", "tvm_tuned_ms", "schedrec_ms", "pytorch_ms", "onnxruntime_ms"):
        assert row[column] > 0, column
    assert row["tvm_tuned_ms"] < row["tvm_untuned_ms"]  # the bank's records are applied
    # four columns timed side by side in 3 rounds; each round's median kept, the figure within their range
    rounds = row["round_medians_ms"]
    assert set(rounds) == {"tuned", "schedrec", "pytorch", "onnxruntime"} and all(len(r) == 3 for r in rounds.values())
    assert row["timing"] == {"rounds": 3, "repeats": 3, "min_repeat_s": 0.2}  # what the card's sentence says
    assert min(rounds["pytorch"]) <= row["pytorch_ms"] <= max(rounds["pytorch"])
    assert row["schedrec_ms"] < row["tvm_untuned_ms"]  # and the transferred ones
    out = row["schedrec"]
    assert out["selector"] == "lgbm (trained without bert_tiny)" and out["left_out"] == ["bert_tiny"]
    assert out["per_kernel"] == 1 and out["kernels"] == 18 and 0 <= out["time_share_default"] < 1
    report = json.loads((folder / "latency" / "bert_tiny" / "report.json").read_text())
    assert report["totals"]["records_written"] > 0
    assert {k["kernel"] for k in report["kernels"] if k["match"] != "sampled"}  # some donors replayed
    _run("make_card.py", tmp_path)
    card = (folder / "card.md").read_text()
    assert f'with target `{json.dumps(json.loads(TARGET), sort_keys=True)}` and 2 threads' in card
    assert "| bert_tiny | bank |" in card
    assert "schedrec's output is faster than PyTorch eager on" in card
    assert "3 rounds, each timing every column (3 repeats of at least 200 ms)" in card
