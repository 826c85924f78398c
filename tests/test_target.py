import json

import pytest

from recommender.errors import TargetError
from recommender.target import native_target, parse_target, physical_cores, target_key


def test_native_target_is_the_host_cpu():
    t = native_target()
    assert t.config["kind"] == "llvm"
    assert t.config["num-cores"] == physical_cores() >= 1
    from tvm.target import codegen
    assert codegen.llvm_is_valid_cpu(t.config["mcpu"], "")
    assert t.key == f"llvm-{t.config['mcpu']}-{t.config['num-cores']}c"
    assert str(t.tvm().kind) == "llvm"


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
])
def test_bad_targets(spec, message):
    with pytest.raises(TargetError, match=message):
        parse_target(spec)
