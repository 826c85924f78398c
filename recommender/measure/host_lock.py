"""One measurement at a time on this machine: a lock that every schedrec process holds while it measures.

Two processes measuring at once spoil both: on 2 cores, TVM's thread pools of two processes spin against
each other, and a kernel's repeats scatter over several times its quiet latency (gpt2's attention products
measured at 1.4 to 4.0 ms in a latency row that ran beside the bank tuner, against 0.11 ms when the tuner
measured them alone). So each measuring step holds this lock: a kernel's candidates built and timed, a
model built or timed, a kernel's tuning search, a side-by-side latency round; and so does each step that
keeps the cores busy without timing anything (a model's import and kernel extraction, schedules replayed
in the workers), since a measurement beside it is spoiled as well (PyTorch's 1x1 conv on a 14x14 map timed
at 3.4 GFLOP/s beside the bank tuner's import of its next model, 152 alone). Another schedrec process waits
for the step to end instead of running alongside it, and says once that it waits and for whom. The
measurer's worker processes take no lock: the process that drives them holds it.

The lock is an flock on one file (`$SCHEDREC_LOCK_FILE`, default `<tmp>/schedrec-measure.lock`), released
by the kernel when its holder exits, however it exits; it is reentrant within a process (a step inside a
step takes it once). `SCHEDREC_LOCK_FILE=off` turns it off.
"""
from __future__ import annotations

import fcntl
import os
import sys
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager

_guard = threading.RLock()  # threads of one process take the lock in turn; the flock is held once
_state = {"depth": 0, "fd": None, "told": False}


def lock_path() -> str | None:
    """The lock file, or None where the lock is turned off."""
    path = os.environ.get("SCHEDREC_LOCK_FILE", os.path.join(tempfile.gettempdir(), "schedrec-measure.lock"))
    return None if path.strip().lower() in ("", "off", "0", "none") else path


def holder(path: str) -> str:
    """Who holds the lock, as its holder wrote it ("pid N: what"), or "" if unknown."""
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return ""


@contextmanager
def exclusive(what: str, log=lambda msg: print(msg, file=sys.stderr)) -> Iterator[None]:
    """Hold the machine's measurement lock for the body (`what` names the step for a process that waits)."""
    path = lock_path()
    if path is None:
        yield
        return
    with _guard:
        if _state["depth"] == 0:
            _state["fd"] = _acquire(path, what, log)
        _state["depth"] += 1
        try:
            yield
        finally:
            _state["depth"] -= 1
            if _state["depth"] == 0:
                fd, _state["fd"] = _state["fd"], None
                fcntl.flock(fd, fcntl.LOCK_UN)
                os.close(fd)


def _acquire(path: str, what: str, log) -> int:
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            if not _state["told"]:
                _state["told"] = True
                log(f"waiting: another schedrec process is measuring on this machine ({holder(path) or 'unknown'}); "
                    f"this one measures between its steps")
            fcntl.flock(fd, fcntl.LOCK_EX)
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"pid {os.getpid()}: {what}\n".encode(), 0)
        return fd
    except BaseException:
        os.close(fd)
        raise
