"""The machine's measurement lock: a second process waits for the holder, says for whom, and gets the lock when
the holder ends, however it ends."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from recommender.measure import host_lock

ROOT = Path(__file__).resolve().parents[1]
HOLD = ("import sys, time; from recommender.measure.host_lock import exclusive\n"
        "with exclusive('tuning a test kernel'):\n"
        "    print('held', flush=True); time.sleep(float(sys.argv[1]))\n")


@pytest.fixture
def lock_file(tmp_path, monkeypatch) -> Path:
    path = tmp_path / "measure.lock"
    monkeypatch.setenv("SCHEDREC_LOCK_FILE", str(path))
    monkeypatch.setitem(host_lock._state, "told", False)
    return path


def _holder(seconds: float) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, "-c", HOLD, str(seconds)], cwd=ROOT, stdout=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.stdout.readline().strip() == "held"
    return proc


def test_a_second_process_waits_for_the_holder_and_names_it(lock_file):
    proc = _holder(1.5)
    said = []
    t0 = time.monotonic()
    with host_lock.exclusive("timing", log=said.append):
        waited = time.monotonic() - t0
        assert host_lock.holder(str(lock_file)) == f"pid {os.getpid()}: timing"
    assert waited > 1.0  # the holder's step (1.5 s) had to end first
    proc.wait(timeout=30)
    assert len(said) == 1 and f"pid {proc.pid}: tuning a test kernel" in said[0]


def test_the_lock_is_freed_when_its_holder_is_killed(lock_file):
    proc = _holder(60)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    t0 = time.monotonic()
    with host_lock.exclusive("timing", log=lambda msg: None):
        assert time.monotonic() - t0 < 5


def test_reentrant_within_a_process_and_released_after_the_outer_step(lock_file):
    with host_lock.exclusive("outer"):
        with host_lock.exclusive("inner"):
            assert host_lock._state["depth"] == 2
        assert host_lock.holder(str(lock_file)) == f"pid {os.getpid()}: outer"
    assert host_lock._state["depth"] == 0 and host_lock._state["fd"] is None
    proc = subprocess.run([sys.executable, "-c", HOLD, "0"], cwd=ROOT, capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 0 and proc.stdout.strip() == "held" and "waiting" not in proc.stderr


def test_off_takes_no_lock(tmp_path, monkeypatch):
    monkeypatch.setenv("SCHEDREC_LOCK_FILE", "off")
    with host_lock.exclusive("timing"):
        assert host_lock._state["fd"] is None
    assert host_lock.lock_path() is None
