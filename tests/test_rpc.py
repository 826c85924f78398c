"""Measuring through the TVM RPC tracker, on loopback (a tracker and two servers on 127.0.0.1): the measurer alone,
and a transfer matrix built on Dask workers and timed on the servers."""
from __future__ import annotations

import json
import socket
import subprocess
import sys
import time

import pytest

from recommender.measure import MeasureSettings, Measurer
from recommender.measure.measurer import OK

from .kernels_tir import add1024, as_mod, matmul64

pytestmark = pytest.mark.slow  # real tuning, replays or whole-model compiles: not in `make test-fast`

KEY = "schedrec-loopback"
SERVERS = 2


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def tracker():
    from tvm import rpc
    port = _free_port()
    procs = [subprocess.Popen([sys.executable, "-m", "tvm.exec.rpc_tracker", "--host", "127.0.0.1",
                               "--port", str(port), "--port-end", str(port + 1)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)]
    try:
        deadline = time.time() + 60
        while True:
            try:
                rpc.connect_tracker("127.0.0.1", port).summary()
                break
            except Exception:
                if time.time() > deadline:
                    raise
                time.sleep(0.5)
        for _ in range(SERVERS):
            server_port = _free_port()
            procs.append(subprocess.Popen([sys.executable, "-m", "tvm.exec.rpc_server", "--tracker",
                                           f"127.0.0.1:{port}", "--key", KEY, "--host", "127.0.0.1",
                                           "--port", str(server_port), "--port-end", str(server_port + 20)],
                                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        while True:
            summary = rpc.connect_tracker("127.0.0.1", port).summary()
            if sum(q.get("free", 0) for k, q in summary.get("queue_info", {}).items() if k == KEY) == SERVERS:
                break
            if time.time() > deadline:
                raise TimeoutError(f"{SERVERS} rpc servers did not register: {summary}")
            time.sleep(0.5)
        yield port
    finally:
        for p in procs:
            p.kill()
            p.wait()


def test_measures_through_the_rpc_tracker(target, tracker):
    settings = MeasureSettings(repeat=3, min_repeat_ms=1, runner=f"rpc://127.0.0.1:{tracker}/{KEY}")
    with Measurer(target.config, settings) as m:
        results = m.measure([as_mod(matmul64), as_mod(add1024)])
    assert [r.status for r in results] == [OK, OK]
    assert all(len(r.costs) == 3 and r.median > 0 for r in results)
    assert results[0].median > results[1].median
    # the board's timings are never retried on this machine's CPU stalls (the board keeps no artifact for it)
    assert all(r.stall_share is None for r in results) and m.stats["timed_again_contended"] == 0


@pytest.mark.bench  # a minute or more on 2 cores: make test-bench (make test: measuring through the tracker above,
# a cluster's worker check in test_cluster, the cluster's row order in test_cluster's pure-logic tests)
def test_a_cluster_matrix_builds_on_dask_workers_and_times_on_the_rpc_servers(two_model_bank, tracker, tmp_path):
    """`matrix --cluster local:2 --runner rpc://...`: the Dask workers build and the tracker's two servers time.
    The run targets another CPU than the workers' host, which a run timed on the workers refuses
    (test_cluster.test_a_worker_on_another_cpu_is_refused_in_one_line): builds go anywhere, timings to the boards.
    Every kernel gets its rows once, together, in the bank's order, its default and a candidate timed."""
    from recommender.core.row_files import read_rows
    from recommender.target.spec import native_target
    from recommender.transfer.candidates import BankIndex

    from .cli_helpers import run_cli
    from .test_cluster import MATRIX_ARGS
    native = native_target().config
    board = dict(native, mcpu="znver3" if native["mcpu"] != "znver3" else "skylake")  # code this host runs
    out = tmp_path / "transfer"
    t0 = time.perf_counter()
    r = run_cli("matrix", "--bank", str(two_model_bank), "--models", "donor", "--out", str(out), "--target",
                json.dumps(board), *MATRIX_ARGS, "--runner", f"rpc://127.0.0.1:{tracker}/{KEY}", "--cluster", "local:2")
    print(f"matrix on local:2, timed through {SERVERS} rpc servers: {time.perf_counter() - t0:.1f} s")
    assert r.returncode == 0, r.stderr[-3000:]
    assert "2 workers;" in r.stderr
    rows = read_rows(out / "donor.jsonl.gz")
    kernels = [bk.name for bk in BankIndex(two_model_bank).kernels["donor"]]
    runs = [k for i, k in enumerate(r.target_kernel for r in rows) if i == 0 or rows[i - 1].target_kernel != k]
    assert runs and len(runs) == len(set(runs)) and runs == [k for k in kernels if k in runs]
    for kernel in runs:
        mine = [r for r in rows if r.target_kernel == kernel]
        assert sum(r.is_default for r in mine) == 1 and mine[0].is_default and mine[0].ok
        assert any(r.ok and not r.is_default for r in mine), kernel
