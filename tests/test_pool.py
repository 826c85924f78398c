"""Warm workers (recommender.measure.pool, $SCHEDREC_WARM_WORKERS): a closed handle leaves its live worker
idle and the next handle of the same kind takes it; never one in the middle of a request, never one started
with another environment, and none at all when the setting is 0."""
from __future__ import annotations

import threading

import pytest

from recommender.measure import pool
from recommender.measure.pool import WorkerHandle


@pytest.fixture()
def no_idle():
    pool.stop_idle_workers()
    yield
    pool.stop_idle_workers()


def _pid_after_ping(handle: WorkerHandle) -> int:
    handle.call("ping", {}, 60)
    return handle.pid


def test_the_next_handle_takes_the_idle_worker_and_pings_it(no_idle, monkeypatch):
    monkeypatch.setenv("SCHEDREC_WARM_WORKERS", "1")
    first = WorkerHandle("a")
    pid = _pid_after_ping(first)
    first.close()
    assert first.pid is None
    second = WorkerHandle("b")
    assert _pid_after_ping(second) == pid and second.restarts == 0
    third = WorkerHandle("c")  # the only idle one is taken: a new worker
    assert _pid_after_ping(third) != pid
    second.close()
    third.close()  # over the limit of 1: it exits
    assert len([w for kept in pool._idle.values() for w in kept]) == 1


def test_no_worker_is_kept_without_the_setting_or_across_environments(no_idle, monkeypatch):
    monkeypatch.setenv("SCHEDREC_WARM_WORKERS", "0")
    handle = WorkerHandle("a")
    _pid_after_ping(handle)
    proc = handle._proc
    handle.close()
    assert proc.wait(10) is not None and not pool._idle.get(handle._kind)

    monkeypatch.setenv("SCHEDREC_WARM_WORKERS", "2")
    handle = WorkerHandle("a")
    pid = _pid_after_ping(handle)
    handle.close()
    monkeypatch.setenv("SCHEDREC_ARG_FILL", "tvm_random_fill")  # the worker reads it: another kind
    other = WorkerHandle("b")
    assert _pid_after_ping(other) != pid
    other.close()


def test_a_worker_closed_in_the_middle_of_a_request_is_stopped_not_kept(no_idle, monkeypatch):
    monkeypatch.setenv("SCHEDREC_WARM_WORKERS", "2")
    handle = WorkerHandle("a")
    _pid_after_ping(handle)
    proc = handle._proc
    # a request whose answer nobody reads: the pipe would hand it to the next caller
    raised: list[Exception] = []
    sleeper = threading.Thread(target=lambda: _call_keeping_the_error(handle, raised))
    sleeper.start()
    while not handle._busy:
        pass
    handle.close()  # from another thread than the request's: one of the two closes the pipe, once
    sleeper.join(30)
    assert proc.wait(10) is not None and not any(pool._idle.values())
    assert [type(e) for e in raised] == [pool.WorkerCrash]  # the caller hears that its worker is gone
    assert handle.pid is None and _pid_after_ping(handle) != proc.pid  # and the handle starts a new one
    handle.close()


def test_a_worker_that_closes_its_pipe_and_is_slow_to_exit_costs_its_request_not_the_run(no_idle):
    """A timing worker holding a whole model's buffers closed its pipe and took over 5 s to exit: the run ended
    with an internal error (subprocess.TimeoutExpired). Now the request fails as a crash and the worker is killed."""
    import time
    handle = WorkerHandle("a")
    _pid_after_ping(handle)
    proc = handle._proc
    t0 = time.monotonic()
    with pytest.raises(pool.WorkerCrash, match="worker died"):
        handle.call("linger", {"seconds": 30}, 60)
    assert time.monotonic() - t0 < 20 and proc.poll() is not None  # killed, not waited for
    assert _pid_after_ping(handle) != proc.pid  # the next request gets a fresh worker
    handle.close()


def _call_keeping_the_error(handle: WorkerHandle, raised: list[Exception]) -> None:
    try:
        handle.call("call", {"function": "recommender.measure.worker:hang", "kwargs": {"seconds": 5}}, 60)
    except Exception as err:  # the handle is closed under it
        raised.append(err)


def test_a_worker_started_soon_is_the_one_the_first_call_uses(no_idle, monkeypatch):
    """start_soon launches the worker in the background (its TVM import overlaps the caller's work); the first
    call waits for that worker and uses it, no second start; a handle closed while its worker starts stops it."""
    monkeypatch.setenv("SCHEDREC_WARM_WORKERS", "0")
    handle = WorkerHandle("soon")
    handle.start_soon()
    handle.start_soon()  # a second ask while starting: the same start
    assert handle._starting is not None
    handle._starting.join(60)
    started = handle.pid
    assert started is not None and _pid_after_ping(handle) == started and handle.restarts == 0
    handle.close()
    quitting = WorkerHandle("closed-while-starting")
    quitting.start_soon()
    quitting.close()
    assert quitting.pid is None and quitting._starting is None


def test_the_measurers_workers_are_up_and_ready_to_replay_when_the_search_starts(no_idle, monkeypatch):
    """Search time excludes the workers' start (docs/design.md, "Search time"): `wait_ready` returns once every
    worker begun by `start_workers` answers, and the build workers (which replay) have TVM's tensor intrinsics
    loaded already, so the first replay does not pay 1-3 s for them."""
    from recommender.measure import Measurer
    from recommender.target.spec import parse_target
    monkeypatch.setenv("SCHEDREC_WARM_WORKERS", "0")
    with Measurer(parse_target("native").config).start_workers() as m:
        assert m.wait_ready() >= 0.0
        handles = m._builders + [m._timer]
        assert all(w._starting is None and w.pid is not None for w in handles)
        assert all(w.call("prepare", {}, 60) < 0.05 for w in m._builders)  # loaded before: nothing left to do


def test_the_timing_worker_starts_without_torch(no_idle, monkeypatch):
    """A worker blocks torch before it imports TVM (tvm_ffi would load it: 4 s of a 6.7 s start on a 2-core
    EPYC): once it answers, TVM's library is mapped into it and torch's is not."""
    monkeypatch.setenv("SCHEDREC_WARM_WORKERS", "0")
    handle = WorkerHandle("a")
    maps = open(f"/proc/{_pid_after_ping(handle)}/maps").read()
    handle.close()
    assert "libtvm" in maps and "libtorch" not in maps
