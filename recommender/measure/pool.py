"""Handles on worker processes: start, call with a timeout, and replace a worker that crashed or hung.

A worker costs seconds to start (it imports TVM, without torch: 2.5 s on a 2-core Zen 3). With `SCHEDREC_WARM_WORKERS=N`,
a closed handle leaves its live worker idle, up to N per kind, and the next handle of the same kind (same
thread count, working directory and environment) in this process takes it instead of starting one; the idle
ones exit with the process (or when it dies: a worker ends at the end of its pipe). The test suite sets it,
since it opens hundreds of measurers; without it every handle starts and stops its own worker.
"""
from __future__ import annotations

import atexit
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from multiprocessing.connection import Connection

_idle: dict[tuple, list[tuple[subprocess.Popen, Connection]]] = {}  # warm workers by kind
_idle_lock = threading.Lock()
_NOT_KIND = {"PYTEST_CURRENT_TEST"}  # environment that changes nothing a worker does


def warm_limit() -> int:
    """How many idle workers of one kind to keep ($SCHEDREC_WARM_WORKERS; 0, the default: none)."""
    try:
        return max(0, int(os.environ.get("SCHEDREC_WARM_WORKERS", "0")))
    except ValueError:
        return 0


def _take_idle(key: tuple) -> tuple[subprocess.Popen, Connection] | None:
    with _idle_lock:
        while _idle.get(key):
            proc, conn = _idle[key].pop()
            if proc.poll() is None:
                return proc, conn
            conn.close()
    return None


# a killed worker is reaped within this long (one holding gigabytes of a whole model's buffers took over 5 s to
# exit here); past it, it is left to the system rather than failing the run
REAP_S = 30.0


def _reap(proc: subprocess.Popen, timeout: float) -> int | None:
    """Its exit code once `proc` has exited within `timeout` seconds, else None."""
    try:
        return proc.wait(timeout)
    except subprocess.TimeoutExpired:
        return None


def _stop(proc: subprocess.Popen, conn: Connection) -> None:
    try:
        conn.send(("exit", {}))
        proc.wait(2)
    except (BrokenPipeError, OSError, subprocess.TimeoutExpired):
        pass
    if proc.poll() is None:
        proc.kill()
        _reap(proc, REAP_S)
    conn.close()


@atexit.register
def stop_idle_workers() -> None:
    """Stop every idle worker this process keeps."""
    with _idle_lock:
        kept = [w for workers in _idle.values() for w in workers]
        _idle.clear()
    for proc, conn in kept:
        _stop(proc, conn)


class WorkerCrash(Exception):
    """The worker process died while handling a request."""


class WorkerTimeout(Exception):
    """The worker did not answer in time; it was killed."""


class WorkerError(Exception):
    """The worker raised an exception for the request (it stays alive)."""


class WorkerHandle:
    """One persistent worker process; restarted transparently after a crash or a timeout."""

    def __init__(self, name: str, threads: int | None = None, start_timeout: float = 120.0) -> None:
        self.name = name
        self.threads = threads
        self.start_timeout = start_timeout
        self.restarts = 0
        self._proc = None
        self._conn = None
        self._kind: tuple = ()
        self._busy = False  # a request sent and its answer not read: such a worker is never kept idle
        # close() may come from another thread while a request waits: whoever takes the worker out of the
        # handle (under this lock) is the one that stops it and closes its pipe, exactly once
        self._own = threading.Lock()
        self._starting: threading.Thread | None = None  # start_soon's thread, until a call or close joins it

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    def _start(self) -> None:
        """Launch `python -m recommender.measure.worker SOCKET` and accept its connection.

        A plain subprocess, not multiprocessing's spawn or fork: the worker never re-imports the caller's
        main module, and no process holding TVM and torch thread pools is forked. The socket lives in a
        fresh private (0700) directory. With warm workers on, an idle one of this kind is taken instead."""
        self._kind = (self.threads, os.getcwd(),
                      tuple(sorted((k, v) for k, v in os.environ.items() if k not in _NOT_KIND)))
        if warm_limit() and self._take_warm():
            return
        sock_dir = tempfile.mkdtemp(prefix="schedrec-w-")
        address = os.path.join(sock_dir, "sock")
        env = dict(os.environ)
        if self.threads:
            env["TVM_NUM_THREADS"] = str(self.threads)
        env["SCHEDREC_LOCK_FILE"] = "off"  # the process that drives a worker holds the machine's lock for it
        server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            server.bind(address)
            server.listen(1)
            server.settimeout(self.start_timeout)
            proc = subprocess.Popen([sys.executable, "-m", "recommender.measure.worker", address], env=env,
                                    stdin=subprocess.DEVNULL)
            try:
                sock, _ = server.accept()
            except OSError as err:
                proc.kill()
                proc.wait()
                raise WorkerCrash(f"{self.name}: worker did not start ({err})") from err
        finally:
            server.close()
            shutil.rmtree(sock_dir, ignore_errors=True)
        sock.settimeout(None)
        self._proc, self._conn = proc, Connection(sock.detach())
        # wait until TVM is imported, so the first timed request does not pay for it
        self._request("ping", {}, self.start_timeout)

    def _take_warm(self) -> bool:
        """Adopt an idle worker of this kind that answers a ping; False if there is none."""
        while (worker := _take_idle(self._kind)) is not None:
            self._proc, self._conn = worker
            restarts = self.restarts
            try:
                self._request("ping", {}, 10.0)
                return True
            except (WorkerCrash, WorkerTimeout, WorkerError):
                self._kill()
                self.restarts = restarts  # an idle worker that died is not this handle's restart
        return False

    def _alive(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def _detach(self, conn: Connection | None = None) -> tuple[subprocess.Popen | None, Connection | None]:
        """Take the worker out of this handle: (proc, conn), or (None, None) when it is no longer the one
        whose pipe is `conn` (another thread closed or replaced it)."""
        with self._own:
            if conn is not None and conn is not self._conn:
                return None, None
            proc, own = self._proc, self._conn
            self._proc = self._conn = None
        return proc, own

    def _kill(self, conn: Connection | None = None) -> None:
        """Kill the worker (only if its pipe is still `conn`, when given) and close its pipe."""
        proc, conn = self._detach(conn)
        if proc is not None:
            if proc.poll() is None:
                proc.kill()
            _reap(proc, REAP_S)
        if conn is not None:
            conn.close()

    def _request(self, op: str, payload: dict, timeout: float) -> object:
        self._busy = True
        value = self._exchange(op, payload, timeout)
        self._busy = False
        return value

    def _exchange(self, op: str, payload: dict, timeout: float) -> object:
        proc, conn = self._proc, self._conn  # this request's worker, even if close() detaches it meanwhile
        if conn is None:
            raise WorkerCrash(f"{self.name}: handle closed")
        try:
            conn.send((op, payload))
        except (BrokenPipeError, OSError) as err:
            self._kill(conn)
            raise WorkerCrash(f"{self.name}: worker gone before the request ({err})") from err
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                self._kill(conn)
                self.restarts += 1
                raise WorkerTimeout(f"{self.name}: no answer within {timeout:.0f} s")
            try:
                ready = conn.poll(min(left, 0.5))
            except (EOFError, OSError):
                ready = True
            if ready:
                try:
                    status, value = conn.recv()
                except (EOFError, OSError) as err:
                    code = _reap(proc, 5)  # its pipe closed: it is exiting (or hung on the way out: killed here)
                    self._kill(conn)
                    self.restarts += 1
                    raise WorkerCrash(f"{self.name}: worker died (exit code {code})") from err
                if status == "ok":
                    return value
                self._busy = False  # answered: the worker is fine
                raise WorkerError(str(value))
            if proc.poll() is not None:
                self._kill(conn)
                self.restarts += 1
                raise WorkerCrash(f"{self.name}: worker died (exit code {proc.returncode})")

    def start_soon(self, prepare: bool = False) -> None:
        """Start the worker in a background thread, so that its TVM import overlaps the caller's own work (a
        model's import); with `prepare`, it then loads what replays need (worker `prepare`). The next call or
        close waits for it. A start that fails there is tried again by the call, which then raises."""
        if self._starting is None and not self._alive():
            self._starting = threading.Thread(target=self._start_quietly, args=(prepare,), name=f"{self.name}-start",
                                              daemon=True)
            self._starting.start()

    def _start_quietly(self, prepare: bool = False) -> None:
        try:
            self._start()
            if prepare:
                self._request("prepare", {}, self.start_timeout)
        except (WorkerCrash, WorkerTimeout, WorkerError, OSError):
            pass  # call() starts it again and raises what it gets

    def join_start(self) -> None:
        """Wait for a start begun by `start_soon` (nothing to wait for otherwise)."""
        if self._starting is not None:
            self._starting.join()
            self._starting = None

    def call(self, op: str, payload: dict, timeout: float) -> object:
        """Run one request; a dead worker is replaced first."""
        self.join_start()
        if not self._alive():
            self._kill()
            self._start()
        return self._request(op, payload, timeout)

    def close(self) -> None:
        """Keep the live worker idle for the next handle of its kind (when allowed and not in the middle of a
        request), else stop it."""
        self.join_start()
        limit = 0 if self._busy else warm_limit()
        proc, conn = self._detach()
        if conn is None:
            if proc is not None and proc.poll() is None:
                proc.kill()
            return
        if proc.poll() is None:
            with _idle_lock:
                kept = _idle.setdefault(self._kind, [])
                if len(kept) < limit:
                    kept.append((proc, conn))
                    return
        _stop(proc, conn)
