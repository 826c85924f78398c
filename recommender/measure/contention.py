"""Whether another process took the CPU while a timing ran: Linux's CPU pressure stall information (PSI).

The measurement lock (host_lock.py) keeps schedrec processes apart, not a test run, a compiler or a package
install beside them. With as many timing threads as cores, one runnable stranger is enough: a thread of the
kernel waits a whole scheduler slice for its core, and every repeat lasts about 4 ms whatever the kernel
(resnet50's held-out search on llvm-znver4-2c measured 22 of its 150 candidates at 3.97-4.06 ms beside a short
pytest run, kernels that run in 0.7-1.5 ms alone). `/proc/pressure/cpu`'s `some` total counts the microseconds
in which a task was runnable but had no CPU: on that machine a quiet timing of a 2-thread kernel stalled
0.1-1.2 ms of its 190 ms, the same timing beside a busy shell loop 1052 of 2087 ms (its median 3.86 against
0.26-0.30 ms). Where the kernel has no PSI (not Linux, or built without it), nothing is checked.
"""
from __future__ import annotations

import time

PSI_CPU = "/proc/pressure/cpu"
# a timing stalled longer than this share of its wall time is spoiled: searches with nothing else running
# saw stalls of 6-7% now and then on llvm-znver4-2c, a busy neighbour 26-50%
MAX_STALL_SHARE = 0.10
RETRIES = 2  # a spoiled timing is timed again this many times, then kept with its stall share
RETRY_WAIT_S = 0.5  # between a spoiled timing and the next try: a short stranger may finish meanwhile


def no_clean_run(tries: int, why: str) -> str:
    """The caveat of a timing whose every try was spoiled, the last one kept: `why` says by what."""
    return f"no clean run in {tries} {'try' if tries == 1 else 'tries'}: {why}; the figure is likely too slow"


def stalled_us(path: str = PSI_CPU) -> int | None:
    """The machine's cumulative CPU stall (`some` total, microseconds), None where PSI is not available."""
    try:
        with open(path) as f:
            for line in f:
                if line.startswith("some"):
                    return int(line.rsplit("total=", 1)[1])
    except (OSError, ValueError, IndexError):
        return None
    return None


class StallWatch:
    """Context manager: `share` is the share of the body's wall time in which some task waited for a CPU
    (None where PSI is not available)."""

    def __init__(self, path: str = PSI_CPU) -> None:
        self.path = path
        self.share: float | None = None

    def __enter__(self) -> "StallWatch":
        self._start, self._t0 = stalled_us(self.path), time.perf_counter()
        return self

    def __exit__(self, *exc: object) -> None:
        end, wall = stalled_us(self.path), time.perf_counter() - self._t0
        if self._start is not None and end is not None and wall > 0:
            self.share = max(0.0, (end - self._start) / 1e6 / wall)


def spoiled(share: float | None) -> bool:
    return share is not None and share > MAX_STALL_SHARE


# slowest over fastest repeat of one timing above which it was disturbed even where PSI saw no stall (another
# VM on the host, a frequency drop): 7% of llvm-znver3-2c's rule-space matrix rows, one of them labelled 3.58 ms
# (repeats 2.1-4.2 ms) for a schedule that runs in 0.13 ms
MAX_SPREAD = 1.5


def spread(costs: list[float] | tuple[float, ...]) -> float:
    """Slowest over fastest repeat (1.0 for fewer than two)."""
    costs = [c for c in costs if c > 0]
    return max(costs) / min(costs) if len(costs) >= 2 else 1.0


def unsteady(costs: list[float] | tuple[float, ...]) -> bool:
    """Whether a timing's repeats spread more than MAX_SPREAD."""
    return spread(costs) > MAX_SPREAD
