"""Reliability: bad counts, unwritable or full output folders, and mutated trace / database / matrix input
fed to every reader (property-based): each works or raises its own clear error, never crashes the process."""
from __future__ import annotations

import copy
import gzip
import json
import os
import resource
import signal
import subprocess
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from featurize.trace_schema import check_trace
from recommender.bank.store import read_records
from recommender.core.errors import BankError
from recommender.transfer.replay import ReplayFailure, replay_anchor_trace, replay_trace
from recommender.core.row_files import read_rows

from .cli_helpers import assert_one_line_error, run_cli, without_root_file_access

pytestmark = pytest.mark.slow  # real tuning, replays or whole-model compiles: not in `make test-fast`


def _one_line_error(out: subprocess.CompletedProcess, message: str) -> None:
    assert_one_line_error(out.returncode, out.stderr, message)


@pytest.mark.parametrize("argv, message", [
    (["bank", "tune", "--models", "zoo:bert_tiny", "--trials-per-task", "-3"], "expected a positive integer, got -3"),
    (["bank", "tune", "--models", "zoo:bert_tiny", "--trials-per-task", "many"], "expected a positive integer, got 'many'"),
    (["bank", "tune", "--models", "zoo:bert_tiny", "--min-share", "1.5"], "between 0 and 1"),
    (["replay", "--model", "zoo:bert_tiny", "--cap", "0"], "expected a positive integer, got 0"),
    (["replay", "--model", "zoo:bert_tiny", "--top-n", "-1"], "expected a positive integer, got -1"),
    (["replay", "--model", "zoo:bert_tiny", "--repeat", "x"], "expected a positive integer, got 'x'"),
    (["replay"], "give --model MODEL, or --all-pairs"),
])
def test_bad_counts_and_missing_arguments(argv, message):
    _one_line_error(run_cli(*argv), message)


def test_read_only_output_folder(onnx_file, tmp_path):
    ro = tmp_path / "ro"
    ro.mkdir()
    os.chmod(tmp_path, 0o755)
    os.chmod(ro, 0o555)
    out = run_cli("kernels", onnx_file, "--json", str(ro / "sub" / "k.json"),
               preexec=without_root_file_access if os.getuid() == 0 else None)
    _one_line_error(out, "Permission denied")
    assert str(ro / "sub") in out.stderr
    assert os.listdir(ro) == []


def _small_disk() -> None:
    """Writes past 4 KiB fail with EFBIG, as on a full disk (the signal that would kill us is ignored)."""
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))


def test_full_disk_keeps_the_previous_file(onnx_file, tmp_path):
    target = tmp_path / "k.json"
    target.write_text('{"previous": true}\n')
    out = run_cli("kernels", onnx_file, "--json", str(target), preexec=_small_disk)
    _one_line_error(out, f"cannot write {target}")
    assert json.loads(target.read_text()) == {"previous": True}
    assert [p.name for p in tmp_path.iterdir()] == ["k.json"]  # no temporary file left behind


# -- property-based: mutated inputs to every reader ----------------------------------------------------------
def _in_child(fn) -> None:
    """Run `fn` in a forked child: an assertion failing there fails here with its message, and a crash
    (a signal) fails here as an ordinary assertion, so hypothesis shrinks and reports the example."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # child: never return into pytest
        os.close(r)
        code = 0
        try:
            fn()
        except BaseException as err:  # noqa: BLE001 - reported to the parent
            os.write(w, f"{type(err).__name__}: {err}".encode()[:4000])
            code = 1
        os._exit(code)
    os.close(w)
    with os.fdopen(r, "rb") as pipe:
        message = pipe.read().decode(errors="replace")
    _, status = os.waitpid(pid, 0)
    assert not os.WIFSIGNALED(status), f"the process died with signal {os.WTERMSIG(status)}"
    assert os.WEXITSTATUS(status) == 0, message


def _mutations(value):
    """Hypothesis strategy: the JSON value with one part replaced, dropped or duplicated."""
    scalars = st.one_of(st.none(), st.booleans(), st.integers(-2**40, 2**40), st.floats(allow_nan=True),
                        st.text(max_size=12))
    leaves = st.recursive(scalars, lambda c: st.lists(c, max_size=3), max_leaves=6)

    def paths(v, prefix=()):
        yield prefix
        if isinstance(v, list):
            for i, x in enumerate(v):
                yield from paths(x, prefix + (i,))

    all_paths = list(paths(value))

    @st.composite
    def mutate(draw):
        v = copy.deepcopy(value)
        for _ in range(draw(st.integers(1, 3))):
            p = draw(st.sampled_from(all_paths))
            parent, node = None, v
            try:
                for i in p:
                    if not isinstance(node, list):  # an earlier mutation replaced this part
                        raise TypeError
                    parent, node = node, node[i]
            except (IndexError, TypeError, KeyError):
                continue
            op = draw(st.sampled_from(["replace", "drop", "dup"]))
            if parent is None:
                v = draw(leaves) if op == "replace" else v
                continue
            i = p[-1]
            if op == "replace":
                parent[i] = draw(leaves)
            elif op == "drop":
                del parent[i]
            else:
                parent.insert(i, copy.deepcopy(node))
        return v

    return mutate()


@pytest.fixture(scope="module")
def tuned_matmul(target):
    """A small matmul kernel and a postprocessed MetaSchedule design-space trace of it."""
    from tvm.s_tir import meta_schedule as ms

    from featurize.trace_json import trace_to_json
    from recommender.frontend.kernels import kernel_from_mod
    from recommender.core.tvm_setup import load_tensor_intrinsics
    from tests.kernels_tir import as_mod, matmul64
    load_tensor_intrinsics()
    mod = as_mod(matmul64)
    ctx = ms.TuneContext(mod=mod, target=target.tvm(), space_generator="post-order-apply", num_threads=1,
                         rand_state=3)
    sch = ctx.space_generator.generate_design_space(mod)[0]
    sch.enter_postproc()
    assert all(p.apply(sch) for p in ctx.space_generator.postprocs)
    return kernel_from_mod("matmul", mod), trace_to_json(sch.trace)


@pytest.mark.bench  # minutes each on 2 cores: make test-bench (make test refuses malformed traces before TVM: test_trace_schema)
def test_mutated_traces_replay_or_fail_with_a_reason(tuned_matmul, target):
    kernel, trace = tuned_matmul
    tt = target.tvm()

    def replay_both(mutated) -> None:
        for replay in (replay_trace, replay_anchor_trace):
            try:
                r = replay(mutated, kernel.mod, kernel.mod, tt)
            except ReplayFailure as err:
                assert err.reason in ("replay_error", "postproc_failure", "class_mismatch") and err.message
            else:
                assert r.sch is not None

    @settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
    @given(_mutations(trace))
    def check(mutated):
        _in_child(lambda: replay_both(mutated))

    check()


def _set(value, path, new):
    value = copy.deepcopy(value)
    node = value
    for i in path[:-1]:
        node = node[i]
    node[path[-1]] = new
    return value


def test_traces_that_crashed_tvm_are_refused_before_it_sees_them(tuned_matmul, target):
    """Mutations that killed the process with SIGSEGV inside Trace.apply_json_to_schedule (found by the
    fuzzing above, before featurize.trace_schema existed) now fail as malformed traces."""
    kernel, trace = tuned_matmul
    insts = trace[0]
    tile = next(i for i, x in enumerate(insts) if x[0] == "SamplePerfectTile")
    split = next(i for i, x in enumerate(insts) if x[0] == "Split")
    crashers = {
        "decision index past the end": _set(trace, (1, 0, 0), len(insts) + 1500),
        "tile count attribute dropped": _set(trace, (0, tile, 2), [insts[tile][2][0]]),
        "split attribute added": _set(trace, (0, split, 2), [True, False, False]),
        "block name None": _set(trace, (0, 0, 2, 1), None),
        "tile decision holding a list": _set(trace, (1, 0, 1, 1), []),
    }
    for what, mutated in crashers.items():
        def refused(mutated=mutated):
            with pytest.raises(ReplayFailure, match="malformed trace"):
                replay_trace(mutated, kernel.mod, kernel.mod, target.tvm())
        _in_child(refused)
    check_trace(trace)  # the unmutated trace passes


def _write_db(folder: Path, workload_lines: list, record_lines: list) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    with gzip.open(folder / "database_workload.json.gz", "wt") as f:
        f.writelines(json.dumps(x) + "\n" for x in workload_lines)
    with gzip.open(folder / "database_tuning_record.json.gz", "wt") as f:
        f.writelines(json.dumps(x) + "\n" for x in record_lines)
    (folder / "meta.json").write_text(json.dumps({"model": "m", "target_key": "k", "kernels": {}}))


def test_mutated_database_lines_load_or_raise_bank_errors(tuned_matmul, target, tmp_path_factory):
    from tvm.s_tir import meta_schedule as ms

    from recommender.transfer.candidates import BankIndex
    kernel, trace = tuned_matmul
    workload = ms.database.Workload(kernel.mod).as_json()
    workload = [str(x) for x in workload]
    record = [0, [trace, [1e-4, 1.1e-4], {"kind": "llvm"}, [["TENSOR", "float32", [64, 64]]] * 3]]

    def load(folder: Path) -> None:
        try:
            read_records(folder)
            BankIndex(folder.parent)
        except BankError as err:
            assert str(err)

    @settings(max_examples=100, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
    @given(_mutations([workload, record]))
    def check(mutated):
        folder = tmp_path_factory.mktemp("db") / "bank" / "m"
        lines = mutated if isinstance(mutated, list) else [mutated]
        _write_db(folder, lines[:1], lines[1:])
        _in_child(lambda: load(folder))

    check()


def test_mutated_matrix_rows_load_or_raise_bank_errors(tmp_path_factory):
    row = {"target_model": "m", "target_kernel": "k", "class_key": "matmul/s2r1:@matmul", "match": "class",
           "status": "ok", "costs": [1e-4], "latency_s": 1e-4, "trace": [[], []]}

    @settings(max_examples=80, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
    @given(st.binary(max_size=40), st.integers(0, 200))
    def check(garbage, cut):
        path = tmp_path_factory.mktemp("rows") / "m.jsonl.gz"
        raw = gzip.compress((json.dumps(row) + "\n").encode() * 3)
        raw = raw[:cut] + garbage if cut < len(raw) else raw + garbage
        path.write_bytes(raw)
        try:
            rows = read_rows(path)
        except BankError as err:
            assert str(path) in str(err)
        else:
            assert all(r.target_model == "m" for r in rows)

    check()
