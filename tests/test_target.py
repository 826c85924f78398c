import json

import pytest

from recommender.core.errors import TargetError
from recommender.target.spec import native_target, parse_target, physical_cores, target_key


def test_native_target_is_the_host_cpu():
    t = native_target()
    assert t.config["kind"] == "llvm"
    assert t.config["num-cores"] == physical_cores() >= 1
    from tvm.target import codegen
    assert codegen.llvm_is_valid_cpu(t.config["mcpu"], "")
    assert t.key == f"llvm-{t.config['mcpu']}-{t.config['num-cores']}c"
    assert str(t.tvm().kind) == "llvm"
    # checked against what the kernel says of the CPU, not against the function that produced it
    info = open("/proc/cpuinfo").read() if __import__("os").path.exists("/proc/cpuinfo") else ""
    family = next((int(ln.split(":")[1]) for ln in info.splitlines() if ln.startswith("cpu family")), None)
    if "AuthenticAMD" in info and family in ZEN_FAMILIES:
        assert t.config["mcpu"] in ZEN_FAMILIES[family]


ZEN_FAMILIES = {23: ("znver1", "znver2"), 25: ("znver3", "znver4"), 26: ("znver5",)}  # AMD family 17h, 19h, 1Ah


def test_json_string_and_file(tmp_path):
    cfg = {"kind": "llvm", "mcpu": "skylake-avx512", "num-cores": 4}
    assert parse_target(json.dumps(cfg)).key == "llvm-skylake-avx512-4c"
    f = tmp_path / "t.json"
    f.write_text(json.dumps(cfg))
    assert parse_target(str(f)).config == cfg


def test_key_names_cross_compile_triple():
    assert target_key({"kind": "llvm", "mcpu": "cortex-a72", "mtriple": "aarch64-linux-gnu",
                       "num-cores": 4}) == "llvm-cortex-a72-aarch64-4c"


@pytest.mark.parametrize("spec, message", [
    ("{not json", "not valid JSON"),
    ('{"kind": "cuda"}', "targets CPUs"),
    ('[1, 2]', "must be an object"),
    ("/nonexistent/target.json", "no such file"),
    ('{"kind": "llvm", "mcpu": "nosuchcpu", "num-cores": 2}', "LLVM knows no CPU 'nosuchcpu'"),
    ('{"kind": "llvm", "mcpu": "znver9", "num-cores": 2}', "nearest: .*znver"),
    ('{"kind": "llvm", "mcpu": "znver4"}', 'needs "num-cores"'),
    ('{"kind": "llvm", "mcpu": "znver4", "num-cores": 0}', "1 or more"),
])
def test_bad_targets(spec, message, capfd):
    with pytest.raises(TargetError, match=message):
        parse_target(spec)
    assert "not valid" not in capfd.readouterr().err  # refused before LLVM warns of a CPU it does not know


def test_avx512_cpus_get_the_no_gather_target_and_others_do_not():
    from recommender.target.spec import NO_GATHER, TargetSpec, native_config
    zen5 = native_config("znver5", 2, {"avx2", "fma", "avx512f", "avx512bw"})
    assert zen5["mattr"] == NO_GATHER == ["+prefer-no-gather", "+prefer-no-scatter"]
    assert "mattr" not in native_config("znver3", 2, {"avx2", "fma"})
    t = TargetSpec(zen5)
    assert t.key == "llvm-znver5-2c"  # same folder: the attributes are how this CPU is compiled for
    assert list(t.tvm().attrs["mattr"]) == NO_GATHER  # TVM accepts them


def test_native_target_reads_the_cpu_flags_of_this_host():
    from recommender.target.spec import host_cpu_flags, native_target
    flags = host_cpu_flags()
    assert ("mattr" in native_target().config) == ("avx512f" in flags)
    if flags:  # x86-64 Linux
        assert "sse2" in flags


def _target_folders(root, *keys, need="bank"):
    for k in keys:
        (root / k / need).mkdir(parents=True)
    return root


@pytest.mark.parametrize("here, have, expected", [
    ("llvm-znver5-2c", ["llvm-znver3-2c", "llvm-skylake-avx512-2c"], "llvm-skylake-avx512-2c"),  # width first
    ("llvm-znver5-2c", ["llvm-znver3-2c", "llvm-haswell-2c"], "llvm-znver3-2c"),  # then the vendor line
    ("llvm-znver4-8c", ["llvm-znver5-2c", "llvm-znver4-2c"], "llvm-znver4-2c"),  # then the generation
    ("llvm-znver3-16c", ["llvm-znver3-2c", "llvm-znver3-8c"], "llvm-znver3-8c"),  # then the cores
])
def test_the_nearest_target_folder_serves_a_cpu_without_its_own(tmp_path, here, have, expected):
    from recommender.target.folders import resolve
    folder, note = resolve(_target_folders(tmp_path, *have), here, "bank")
    assert folder == tmp_path / expected
    assert note.startswith(f"note: no bank for this CPU ({here}); using the nearest, {expected}") and "\n" not in note


def test_a_cpu_with_its_own_folder_uses_it_and_none_at_all_is_a_clear_error(tmp_path):
    from recommender.core.errors import SchedrecError
    from recommender.target.folders import resolve
    _target_folders(tmp_path, "llvm-znver3-2c", "llvm-znver5-2c")
    assert resolve(tmp_path, "llvm-znver5-2c") == (tmp_path / "llvm-znver5-2c", None)
    with pytest.raises(SchedrecError, match="no rankers for llvm-znver5-2c, and no other target has one"):
        resolve(tmp_path, "llvm-znver5-2c", "rankers")


def test_a_run_names_the_bank_it_uses_and_its_cpu_in_one_line(tmp_path, monkeypatch):
    """The nearest target's bank: resolve's line only; the same bank passed as --bank: the line on its models'
    CPU instead; this CPU's own bank: nothing."""
    import shutil

    from recommender.bank.info import donor_folders
    from recommender.target.folders import repo_models_dir
    shipped = repo_models_dir() / "llvm-znver3-2c" / "bank" / "bert_tiny"
    models = tmp_path / "models"
    shutil.copytree(shipped, models / "llvm-znver3-2c" / "bank" / "bert_tiny")
    monkeypatch.setenv("SCHEDREC_MODELS_DIR", str(models))
    bank, _, (line,) = donor_folders("llvm-znver5-2c", with_recommender=False)
    assert bank == models / "llvm-znver3-2c" / "bank"
    assert line.startswith("note: no bank for this CPU (llvm-znver5-2c); using the nearest, llvm-znver3-2c")
    _, _, (line,) = donor_folders("llvm-znver5-2c", bank=str(bank), with_recommender=False)
    assert "1 bank model was measured on another CPU than llvm-znver5-2c (bert_tiny on llvm-znver3-2c)" in line
    assert donor_folders("llvm-znver3-2c", with_recommender=False)[2] == []


def test_a_latency_row_on_a_cpu_without_a_matrix_ranks_with_the_nearest_matrix_that_has_the_model(tmp_path):
    """schedrec's latency column leaves the model out of its ranker's fit: on a CPU whose matrix lacks the
    model, the nearest target's matrix that has it (the same vector width first), not a ranker that saw it."""
    from .cli_helpers import load_script
    table = load_script("latency_table")
    for key, models in (("llvm-znver4-2c", ()), ("llvm-rocketlake-2c", ("resnet18",)),
                        ("llvm-znver3-2c", ("resnet18", "gpt2"))):
        (tmp_path / key / "bank").mkdir(parents=True)
        (tmp_path / key / "transfer").mkdir()
        for m in models:
            (tmp_path / key / "transfer" / f"{m}.jsonl.gz").write_bytes(b"")
    here = table.Recommenders(tmp_path / "llvm-znver4-2c")
    assert here.matrix_for("resnet18") == tmp_path / "llvm-rocketlake-2c"  # 512-bit vectors, as znver4
    assert here.matrix_for("gpt2") == tmp_path / "llvm-znver3-2c"  # the only matrix with gpt2
    assert here.matrix_for("vgg16") is None
    (tmp_path / "llvm-znver4-2c" / "transfer" / "resnet18.jsonl.gz").write_bytes(b"")
    assert here.matrix_for("resnet18") == tmp_path / "llvm-znver4-2c"  # its own, once measured


def test_held_out_latency_rows_take_only_zoo_models_outside_the_bank():
    """--heldout names zoo models in neither the bank nor the references; anything else is refused by name."""
    from recommender.core.errors import SchedrecError
    from .cli_helpers import load_script
    table = load_script("latency_table")
    assert table.heldout_models("resnet50,convnext_tiny", {"resnet18"}) == ["resnet50", "convnext_tiny"]
    assert table.heldout_models("", {"resnet18"}) == []
    with pytest.raises(SchedrecError, match="not zoo models: nope"):
        table.heldout_models("resnet50,nope", set())
    with pytest.raises(SchedrecError, match="resnet18 in the bank or the references: use --models"):
        table.heldout_models("resnet18", {"resnet18"})


def test_every_probe_s_results_start_with_the_target_its_key_the_cpu_and_the_date():
    """benchmarks/results_dir.run_header: the fields the README's per-CPU lines read from a probe's JSON."""
    import sys
    import time
    from pathlib import Path
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    from results_dir import run_header
    from recommender.target.spec import cpu_name
    target = parse_target('{"kind": "llvm", "mcpu": "znver4", "num-cores": 2}')
    header = run_header(target)
    assert header == {"target": target.config, "target_key": "llvm-znver4-2c", "cpu": cpu_name(),
                      "date": time.strftime("%Y-%m-%d")}
