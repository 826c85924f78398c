"""Stopping a run on SIGTERM or SIGINT.

Normally the signal handler raises an exception that unwinds Python: workers are closed, locks released.
Inside native TVM code that calls back into Python (MetaSchedule's search loop), an exception thrown
through the C++ frames terminates the process; there the handler ends the run itself: it stops the worker
processes, says what is kept, and exits. Work is saved per finished unit (a tuned kernel, a measured
kernel's rows) before the next begins, so both ways keep everything that was finished."""
from __future__ import annotations

import os
import signal
import sys
from contextlib import contextmanager
from typing import Iterator

_native_depth = 0


@contextmanager
def native_section() -> Iterator[None]:
    """Mark a call into native code that runs Python callbacks (e.g. `ms.tune_tasks`)."""
    global _native_depth
    _native_depth += 1
    try:
        yield
    finally:
        _native_depth -= 1


def in_native_section() -> bool:
    return _native_depth > 0


def stop_message(terminated: bool) -> str:
    what = "terminated" if terminated else "interrupted"
    return f"schedrec: {what}; what was finished is saved, run the same command again to resume"


def exit_code(signum: int) -> int:
    return 143 if signum == signal.SIGTERM else 130


def hard_stop(signum: int) -> None:
    """End the process now: stop child processes, report, exit without unwinding through native frames."""
    try:
        import psutil
        children = psutil.Process().children(recursive=True)
        for child in children:
            child.terminate()
        psutil.wait_procs(children, timeout=5)
    except Exception:  # nothing more can be done on the way out
        pass
    sys.stderr.write("\n" + stop_message(signum == signal.SIGTERM) + "\n")
    sys.stderr.flush()
    os._exit(exit_code(signum))
