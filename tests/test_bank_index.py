"""The bank's index (`recommender/bank/index.py`): it gives the pools a full read of the bank gives, is kept fresh
by every add, refreshed when a model folder changed behind its back, rebuilt when damaged, and serves a bank at
a URL. Six small shipped-bank models copied into a temporary folder; TVM parses their workloads, nothing is built
or timed."""
from __future__ import annotations

import gzip
import hashlib
import json
import shutil
import types
from pathlib import Path

import pytest

from recommender.bank.index import MODELS_FILE, IndexedBank, order_name, shard_name
from recommender.bank.location import bank_files
from recommender.transfer.candidates import BankIndex

from .cli_helpers import assert_one_line_error, main_printing

SHIPPED = Path(__file__).resolve().parents[1] / "models" / "llvm-rocketlake-2c" / "bank"
MODELS = ("bert_tiny", "distilbert", "gpt2", "mobilebert", "resnet18", "vgg16")
# pools of every kind: capped below and above the donor models, uncapped, anchors joining, models left out
POOLS = [dict(top_n=3, cap=48), dict(top_n=1, cap=None), dict(top_n=2, cap=1), dict(top_n=3, cap=2),
         dict(top_n=3, cap=3, min_class_models=4), dict(top_n=64, cap=None, min_class_models=9)]


def copy_model(src: Path, bank: Path, name: str) -> None:
    """A bank model filed again under another name (its records unchanged)."""
    shutil.copytree(src, bank / name)
    meta = json.loads((bank / name / "meta.json").read_text())
    (bank / name / "meta.json").write_text(json.dumps(dict(meta, model=name)))


@pytest.fixture()
def bank(tmp_path: Path) -> Path:
    out = tmp_path / "bank"
    for m in MODELS:
        shutil.copytree(SHIPPED / m, out / m)
    copy_model(SHIPPED / "bert_tiny", out, "bert_tiny_copy")  # a class with more donor models than a small cap
    return out


def kernels_of(index: BankIndex) -> list[types.SimpleNamespace]:
    """A target kernel of every class the bank has (a pool lookup reads only its class key)."""
    return [types.SimpleNamespace(name=c, class_key=c) for c in sorted(index.by_class)]


def key(s) -> tuple:
    return s.model, s.kernel, s.rank, s.latency_s, s.class_key, s.match


def assert_same_pools(scan: BankIndex, indexed: BankIndex) -> int:
    """Every pool and source list of the indexed bank equals the full read's; returns the sources compared."""
    assert indexed._indexed is not None and scan._indexed is None
    assert (indexed.models, indexed.target_keys) == (scan.models, scan.target_keys)
    n = 0
    for k in kernels_of(scan):
        for exclude in ((), ("bert_tiny", "resnet18")):
            for p in POOLS:
                a, b = scan.pool_for(k, exclude_models=exclude, **p), indexed.pool_for(k, exclude_models=exclude, **p)
                assert [key(s) for s in a] == [key(s) for s in b], (k.class_key, exclude, p)
                n += len(a)
            for match in ("class", "anchor"):
                for cap in (None, 1, 3):
                    a = scan.sources_for(k, top_n=2, exclude_models=exclude, cap=cap, match=match)
                    b = indexed.sources_for(k, top_n=2, exclude_models=exclude, cap=cap, match=match)
                    assert [key(s) for s in a] == [key(s) for s in b], (k.class_key, match, cap)
    return n


def folder_hashes(bank: Path) -> dict[str, str]:
    return {str(p.relative_to(bank)): hashlib.sha1(p.read_bytes()).hexdigest()
            for p in bank.rglob("*") if p.is_file() and ".index" not in p.parts}


def test_the_index_gives_the_same_sources_as_reading_every_model(bank: Path) -> None:
    scan = BankIndex(bank, use_index=False)
    assert not (bank / MODELS_FILE).exists()
    assert BankIndex(bank)._indexed is None  # a bank without an index is read as before
    built = BankIndex(bank, use_index=True)
    assert (bank / MODELS_FILE).exists()
    assert assert_same_pools(scan, BankIndex(bank)) > 500  # the saved index, opened again
    assert assert_same_pools(scan, built) > 500
    # a lookup reads its class's shard only as far as the cap's donor models, and no model file
    shared = next(k for k in kernels_of(scan) if len({s.model for s in scan.sources_for(k)}) >= 3)
    opened = BankIndex(bank)
    assert [s.model for s in opened.sources_for(shared, cap=2)] == [s.model for s in scan.sources_for(shared)][:2]
    assert len({g.model for g in opened._indexed.groups([shared.class_key], (), model_limit=2)}) == 2
    assert len(opened._indexed.ordered(shared.class_key, (), top_n=3, limit=5)) == 5
    assert opened._indexed._read_cache == {}
    # a donor's trace and TIR module are read when it is replayed, and are the full read's
    k = next(k for k in kernels_of(scan) if len(scan.pool_for(k, top_n=3, cap=48)) > 3)
    lazy = BankIndex(bank).pool_for(k, top_n=3, cap=48)
    assert all(s.trace_json is None and s.load is not None for s in lazy)
    loaded = [s.loaded() for s in lazy]
    import tvm
    for a, b in zip(scan.pool_for(k, top_n=3, cap=48), loaded):
        assert a.trace_json == b.trace_json
        tvm.ir.assert_structural_equal(a.source_mod, b.source_mod)
    # the kernels a matrix walks: read in full either way
    assert {m: [(b.name, b.class_key, len(b.sources)) for b in ks] for m, ks in BankIndex(bank).kernels.items()} == \
        {m: [(b.name, b.class_key, len(b.sources)) for b in ks] for m, ks in scan.kernels.items()}


def test_adding_a_model_through_the_bank_updates_its_index(bank: Path, tmp_path: Path) -> None:
    from recommender.bank.info import import_workdir
    from recommender.bank.store import read_meta, unpack
    BankIndex(bank, use_index=True)
    work = tmp_path / "work"
    unpack(SHIPPED / "vgg16", str(work))
    meta = read_meta(SHIPPED / "vgg16")
    import_workdir(work, bank, "vgg16_imported", meta["target_key"], meta["target"])
    # models.json names the new model with its folder's present stamp: the index is fresh, not merely refreshable
    saved = json.loads((bank / MODELS_FILE).read_text())
    assert saved["models"]["vgg16_imported"]["stamp"] == bank_files(bank).model_stamps()["vgg16_imported"]
    opened = IndexedBank(bank_files(bank))
    assert opened.reread == []
    assert assert_same_pools(BankIndex(bank, use_index=False), BankIndex(bank)) > 500


def test_a_stale_index_is_refreshed_from_the_changed_models_only(bank: Path) -> None:
    BankIndex(bank, use_index=True)
    copy_model(SHIPPED / "distilbert", bank, "distilbert_late")  # a model added by hand
    records = bank / "gpt2" / "database_tuning_record.json.gz"  # a model rewritten by hand: half its records
    lines = gzip.decompress(records.read_bytes()).splitlines(keepends=True)
    records.write_bytes(gzip.compress(b"".join(lines[: len(lines) // 2])))
    shutil.rmtree(bank / "vgg16")  # and one removed
    opened = IndexedBank(bank_files(bank))
    assert sorted(opened.reread) == ["distilbert_late", "gpt2"]
    assert "vgg16" not in opened.models
    assert assert_same_pools(BankIndex(bank, use_index=False), BankIndex(bank)) > 300


def test_a_damaged_index_is_rebuilt_and_no_record_is_lost(bank: Path, capsys) -> None:
    scan = BankIndex(bank, use_index=False)
    BankIndex(bank, use_index=True)
    before = folder_hashes(bank)
    (bank / MODELS_FILE).write_text('{"format": 1, "models": {"bert_tiny": ')  # cut short
    assert assert_same_pools(scan, BankIndex(bank)) > 500
    assert "damaged bank index" in capsys.readouterr().err
    some = next(k for k in kernels_of(scan) if scan.pool_for(k))
    for name in (order_name(some.class_key), shard_name(some.class_key)):  # truncated: found when a lookup reads it
        intact = IndexedBank(bank_files(bank)).groups([some.class_key])
        (bank / name).write_bytes((bank / name).read_bytes()[:40])
        assert IndexedBank(bank_files(bank)).groups([some.class_key]) == intact
        assert assert_same_pools(scan, BankIndex(bank)) > 500
        assert "rebuilding" in capsys.readouterr().err
    assert folder_hashes(bank) == before  # the model folders were only read
    # an index that names records its model no longer has says so in one line, naming the fix
    ix = BankIndex(bank)
    src = ix.pool_for(some, top_n=1)[0]
    records = bank / next(f for f, m in ix._indexed.models.items() if m["model"] == src.model) / \
        "database_tuning_record.json.gz"
    records.write_bytes(gzip.compress(b""))
    from recommender.core.errors import BankError
    with pytest.raises(BankError, match="does not match .* bank index --rebuild"):
        src.loaded()


def test_a_bank_at_a_url(bank: Path) -> None:
    fsspec = pytest.importorskip("fsspec")
    fs = fsspec.filesystem("memory")
    fs.put(str(bank), "/bank_index_test", recursive=True)
    try:
        at_url = BankIndex("memory://bank_index_test")  # no index there yet: built and saved beside the models
        assert fs.exists("/bank_index_test/.index/models.json")
        scan = BankIndex(bank, use_index=False)
        assert assert_same_pools(scan, at_url) > 500
        k = next(k for k in kernels_of(scan) if scan.pool_for(k))
        assert at_url.pool_for(k)[0].loaded().trace_json == scan.pool_for(k)[0].trace_json
        assert assert_same_pools(scan, BankIndex(f"file://{bank}", use_index=True)) > 500
    finally:
        fs.rm("/bank_index_test", recursive=True)


def test_bank_index_command_and_url_refusals(bank: Path, capsys) -> None:
    code, out = main_printing("bank", "index", "--bank", f"file://{bank}")
    assert code == 0 and "7 models (7 read now)" in out
    code, out = main_printing("bank", "index", "--bank", str(bank))
    assert code == 0 and "(0 read now)" in out
    code = main_printing("bank", "info", "--bank", "memory://nowhere")[0]
    assert_one_line_error(code, capsys.readouterr().err, "needs a local bank folder")


@pytest.mark.slow
@pytest.mark.bench  # minutes each on 2 cores: make test-bench (make test reads a bank at a URL in test_a_bank_at_a_url)
def test_replay_from_a_bank_at_a_url_measures_what_the_folder_gives(donor_bank, target, tmp_path):
    """The same replay (candidates, order, statuses) from the session's tuned bank by path, file:// and memory://
    (its index made by `bank tune`, then built again at the URL)."""
    fsspec = pytest.importorskip("fsspec")
    from recommender.core.row_files import read_rows

    from .conftest import save_pt2
    assert (donor_bank / MODELS_FILE).exists()  # bank tune left an index
    new = save_pt2(tmp_path / "new.pt2", 16, 24)
    fs = fsspec.filesystem("memory")
    fs.put(str(donor_bank), "/replay_url_bank", recursive=True)
    fs.rm("/replay_url_bank/.index", recursive=True)
    seen = {}
    try:
        for name, bank in (("path", str(donor_bank)), ("file", f"file://{donor_bank}"),
                           ("memory", "memory://replay_url_bank")):
            out = tmp_path / name
            code, _ = main_printing("replay", "--model", new, "--bank", bank, "--top-n", "2", "--repeat", "2",
                                    "--rule-space", "0", "--out", str(out))
            assert code == 0
            seen[name] = [(r.target_kernel, r.match, r.source_model, r.source_kernel, r.source_rank, r.status)
                          for r in read_rows(out / "candidates.jsonl.gz")]
        assert seen["path"] == seen["file"] == seen["memory"] and any(s[2] == "donor" for s in seen["path"])
        assert fs.exists("/replay_url_bank/.index/models.json")
    finally:
        fs.rm("/replay_url_bank", recursive=True)
