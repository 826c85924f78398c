"""Measuring through the TVM RPC tracker, on loopback (a tracker and a server on 127.0.0.1)."""
from __future__ import annotations

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
        server_port = _free_port()
        procs.append(subprocess.Popen([sys.executable, "-m", "tvm.exec.rpc_server", "--tracker",
                                       f"127.0.0.1:{port}", "--key", KEY, "--host", "127.0.0.1",
                                       "--port", str(server_port), "--port-end", str(server_port + 20)],
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        while True:
            summary = rpc.connect_tracker("127.0.0.1", port).summary()
            if any(q.get("free", 0) for k, q in summary.get("queue_info", {}).items() if k == KEY):
                break
            if time.time() > deadline:
                raise TimeoutError(f"rpc server did not register: {summary}")
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
