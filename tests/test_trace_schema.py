"""The trace shape check: every shipped trace passes, malformed ones are refused with the place named."""
from __future__ import annotations

import gzip
import json
import os
from pathlib import Path

import pytest

from featurize.trace_schema import MalformedTrace, check_trace
from recommender.bank.store import read_records
from recommender.target.folders import repo_models_dir

SHIPPED = sorted(repo_models_dir().glob("*/bank/*/meta.json"))


def _check_distinct(traces) -> int:
    """Check each distinct trace of `traces` once (a rule instance or a donor recurs across kernels); how many
    traces there were."""
    n, seen = 0, set()
    for trace in traces:
        n += 1
        key = json.dumps(trace, separators=(",", ":"))
        if key not in seen:
            seen.add(key)
            check_trace(trace)
    return n


def _check_rows_file(path: Path) -> int:
    """Check every trace of a transfer-matrix or held-out row file; how many it holds."""
    with gzip.open(path, "rt") as f:
        return _check_distinct(t for t in (json.loads(line).get("trace") for line in f) if t)


def _check_bank_folder(folder: Path) -> int:
    _, records = read_records(folder)
    return _check_distinct(r.trace_json for r in records)


@pytest.mark.skipif(not SHIPPED, reason="no shipped bank in this checkout")
def test_every_shipped_trace_passes_bank_reference_matrix_and_heldout():
    """Every trace the project ships: bank and long-reference records, transfer-matrix and held-out rows (the
    files spread over the machine's cores: 31k rows take a minute on one)."""
    from concurrent.futures import ProcessPoolExecutor
    jobs = {part: [(_check_bank_folder, m.parent) for m in repo_models_dir().glob(f"*/{part}/*/meta.json")]
            for part in ("bank", "reference")}
    jobs |= {part: [(_check_rows_file, p) for p in repo_models_dir().glob(f"*/{part}/**/*.jsonl.gz")]
             for part in ("transfer", "heldout")}
    with ProcessPoolExecutor(max(1, min(4, os.cpu_count() or 1))) as pool:
        futures = {part: [pool.submit(fn, path) for fn, path in todo] for part, todo in jobs.items()}
        counts = {part: sum(f.result() for f in fs) for part, fs in futures.items()}
    assert counts["bank"] > 1000 and counts["transfer"] > 1000, counts
    assert counts["reference"] > 1000 and counts["heldout"] > 1000, counts


GOOD = [[["GetSBlock", [], ["C", "main"], ["b0"]],
         ["GetLoops", ["b0"], [], ["l1", "l2"]],
         ["SamplePerfectTile", ["l1"], [2, 64], ["v3", "v4"]],
         ["Split", ["l1", "v3", "v4"], [True, False], ["l5", "l6"]],
         ["Annotate", ["b0", "\"SSR\""], ["meta_schedule.tiling_structure"], []]],
        [[2, [4, 16]]]]


def _with(path, value):
    trace = json.loads(json.dumps(GOOD))
    node = trace
    for i in path[:-1]:
        node = node[i]
    node[path[-1]] = value
    return trace


@pytest.mark.parametrize("path, value, message", [
    ((0, 1, 1), ["l9"], "GetLoops: input 'l9' is not a defined block"),
    ((0, 3, 1), ["b0", "v3", "v4"], "Split: input 'b0' is not a defined loop"),
    ((0, 0, 0), "Tensorize", "unsupported instruction kind 'Tensorize'"),
    ((0, 2, 2), [2, 64, 1], "SamplePerfectTile: wrong number of attributes"),
    ((0, 2, 2), [40, 64], "SamplePerfectTile: bad attribute 40"),
    ((0, 0, 2), ["C", None], "GetSBlock: bad attribute None"),
    ((0, 3, 3), ["l5"], "Split: wrong number of outputs"),
    ((0, 3, 3), ["l5", "b0"], "repeated output name 'b0'"),
    ((0, 4, 1), ["b0", "{\"x\": 1}"], "is not an annotation value"),
    ((1, 0), [7, [4, 16]], "decision index 7 is out of range"),
    ((1, 0), [2, [4, []]], "bad decision"),
    ((1, 0), [0, 1], "decision for GetSBlock"),
    ((1,), "x", "a trace is [instructions, decisions]"),
])
def test_malformed_traces_are_refused_naming_the_instruction(path, value, message):
    check_trace(GOOD)
    with pytest.raises(MalformedTrace, match=message.replace("[", r"\[")):
        check_trace(_with(path, value))


def test_layout_transforms_pass_with_an_index_map_and_are_refused_with_anything_else():
    """The conv rule's flat tiles write ReIndex, TransformLayout and TransformBlockLayout, whose index maps TVM keeps as
    JSON graphs in the trace: one of a tirx.IndexMap passes; other JSON, a graph of something else, or a
    padding value is refused before TVM parses it."""
    from tvm import tirx
    from tvm.ir import save_json
    index_map = save_json(tirx.IndexMap.from_func(lambda n, c, h, w: (n, c, h * 7 + w)))
    other = save_json(tirx.IntImm("int32", 3))
    trace = [[["GetSBlock", [], ["C", "main"], ["b0"]],
              ["TransformLayout", ["b0", index_map], [0, 1, None, 0], []],
              ["TransformBlockLayout", ["b0"], [index_map], []],
              ["ReIndex", ["b0"], [0, 0], ["b1"]]], []]
    check_trace(trace)
    for attrs in ([0], [0, "read"]):  # ReIndex: buffer index and read/write, two integers
        broken = json.loads(json.dumps(trace))
        broken[0][3][2] = attrs
        with pytest.raises(MalformedTrace, match="instruction 3: ReIndex"):
            check_trace(broken)
    for bad, message in ((other, "is not an index map"), ("{", "is not an index map"), ("x" * 30000, "not an index map")):
        broken = json.loads(json.dumps(trace))
        broken[0][1][1][1] = bad
        with pytest.raises(MalformedTrace, match=f"instruction 1: TransformLayout: input .* {message}"):
            check_trace(broken)
    broken = json.loads(json.dumps(trace))
    broken[0][2][2] = [other]
    with pytest.raises(MalformedTrace, match="instruction 2: TransformBlockLayout: bad attribute"):
        check_trace(broken)
    broken = json.loads(json.dumps(trace))
    broken[0][1][2][2] = 0.0
    with pytest.raises(MalformedTrace, match="instruction 1: TransformLayout: bad attribute 0.0"):
        check_trace(broken)
