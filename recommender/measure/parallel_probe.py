"""Whether the timing worker's threads really run side by side: a probe timed before and after every timing.

On the 2-vCPU cloud machine of llvm-znver5-2c, stretches of a session (a few seconds to minutes, a third of
the time or more) run TVM's 2-thread models at one thread's speed: mobilenet_v2 with one database 2.6-3.0 ms,
then 4.5-5.3 ms (a 1-thread build runs 4.8-5.4 ms throughout), in the same process, with no CPU stall in Linux's
pressure file (contention.py), no steal time, a single-threaded copy of 6 or 64 MB as fast as ever, and two
Python threads hashing side by side as fast as one. What changes is the cost of a parallel launch: a kernel of
about a microsecond split over the threads takes 1.1x the time of the same work on one thread in a good stretch
and 1.9-2.0x in a slow one, in step with the model.

`probe_ratio` times that kernel parallel and serial, interleaved, and answers their ratio; nothing is kept
between calls, so no reference can come from a slow stretch.
"""
from __future__ import annotations

import os
import statistics

SLOW_RATIO = 1.5  # a parallel/serial ratio above this: the threads did not run side by side
_ELEMENTS = 16384  # per thread: about a microsecond of work, so that the parallel launch itself is timed
_CACHE: dict = {}


def _kernels(threads: int) -> tuple[object, object, list]:
    """The probe's parallel and serial kernels for this host (built once per process) and their arguments."""
    if threads not in _CACHE:
        import numpy as np
        import tvm
        from tvm import te
        a = te.placeholder((threads, _ELEMENTS), name="a")
        b = te.compute((threads, _ELEMENTS), lambda i, j: a[i, j] * 0.999 + 0.001, name="b")
        built = []
        for parallel in (True, False):
            sch = tvm.s_tir.Schedule(te.create_prim_func([a, b]))
            i, j = sch.get_loops(sch.get_sblock("b"))
            if parallel:
                sch.parallel(i)
            sch.vectorize(sch.split(j, [None, 16])[1])
            built.append(tvm.compile(sch.mod, target=tvm.target.Target("llvm")).mod)
        dev = tvm.cpu()
        args = [tvm.runtime.tensor(np.ones((threads, _ELEMENTS), "float32"), dev) for _ in range(2)]
        _CACHE[threads] = (built[0], built[1], args)
    return _CACHE[threads]


def worker_threads() -> int:
    """The threads this process's TVM runs (the timing worker sets TVM_NUM_THREADS to the target's cores)."""
    try:
        return max(1, int(os.environ.get("TVM_NUM_THREADS", "1")))
    except ValueError:
        return 1


def probe_ratio(rounds: int = 3, calls: int = 20) -> float | None:
    """Median over `rounds` of (parallel kernel time / serial kernel time); None with one thread. About 2 ms."""
    import tvm
    threads = worker_threads()
    if threads < 2:
        return None
    par, ser, args = _kernels(threads)
    dev = tvm.cpu()
    time_par = par.time_evaluator("main", dev, number=calls, repeat=1)
    time_ser = ser.time_evaluator("main", dev, number=calls, repeat=1)
    ratios = []
    for _ in range(rounds):
        p, s = time_par(*args).mean, time_ser(*args).mean
        ratios.append(p / s if s > 0 else 1.0)
    return statistics.median(ratios)


def slow(ratio: float | None) -> bool:
    return ratio is not None and ratio > SLOW_RATIO
