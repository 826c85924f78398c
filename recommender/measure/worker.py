"""A measurement worker process: imports TVM once, then builds or times kernels (or runs another schedrec
function that may crash or hang, such as a replay) on request.

Protocol over a multiprocessing Connection: the parent sends (op, payload) and the worker answers
("ok", value) or ("error", message). A crash shows as a closed pipe; a hang as a missing answer.
"""
from __future__ import annotations

import os
import time
import traceback
from typing import Callable


def _export(lib: object, path: str) -> str:
    """Write a compiled library under a temporary name, then rename it into place."""
    tmp = path + ".tmp.so"
    lib.export_library(tmp)
    os.replace(tmp, path)
    return path


def _build(payload: dict) -> dict:
    """Compile a kernel to `out_path`. A kernel whose schedule rewrites a weight's layout (MetaSchedule's
    RewriteLayout, on buffers marked layout-free) is built twice: as is, to `check_path`, for the output
    check (it takes the weight in the model's layout and packs it), and without the rewrite block, to
    `out_path`, for timing (it takes the packed weight, as the model does once the packing is folded into
    its constants; MetaSchedule's own builder strips the block the same way); `timing_args` then gives the
    [shape, dtype] of that build's arguments."""
    import tvm

    from .fast_math import fast_math
    mod = tvm.ir.load_json(payload["mod_json"])
    target = tvm.target.Target(payload["target"])
    packed = without_weight_rewrite(mod)
    with fast_math(payload.get("fast_math", False)):
        if packed is None:
            return {"path": _export(tvm.compile(mod, target=target), payload["out_path"])}
        check_path = payload["out_path"][:-len(".so")] + ".check.so"
        _export(tvm.compile(mod, target=target), check_path)
        stripped, timing_args = packed
        return {"path": _export(tvm.compile(stripped, target=target), payload["out_path"]),
                "check_path": check_path, "timing_args": timing_args}


def without_weight_rewrite(mod: object) -> tuple[object, list] | None:
    """(the kernel without its weight layout-rewrite blocks, its arguments' [shape, dtype]), or None if it
    has no such block (only a kernel with layout-free buffers can have one: the others skip the pass)."""
    import tvm_ffi
    from tvm.s_tir import meta_schedule as ms
    from tvm.s_tir.transform import RemoveWeightLayoutRewriteBlock
    if not _rewrites_weights(mod):
        return None
    stripped = RemoveWeightLayoutRewriteBlock(skip_tensor_rewrite=True)(mod)
    if tvm_ffi.structural_equal(stripped, mod):
        return None
    args = ms.arg_info.ArgInfo.from_entry_func(stripped, remove_preproc=False)
    return stripped, [[[int(d) for d in a.shape], str(a.dtype)] for a in args]


def build_model(payload: dict) -> dict:
    """Compile a whole Relax model (optionally with a MetaSchedule database's schedules) to a library.
    Answers the library's path and, with a database, how many kernels it scheduled."""
    import tvm
    from tvm import relax

    from .fast_math import fast_math
    mod = tvm.ir.load_json(payload["mod_json"])
    target = tvm.target.Target(payload["target"])
    scheduled, recorded = None, {}
    if payload.get("database_dir"):
        from tvm.s_tir import meta_schedule as ms
        db = ms.database.JSONDatabase(work_dir=payload["database_dir"], allow_missing=False)
        if payload.get("with_records"):
            recorded = {name: sum(float(x) for x in rec.run_secs) / len(rec.run_secs)
                        for name, rec in applied_records(mod, db, target).items() if rec.run_secs}
        with target, db:
            mod = relax.transform.MetaScheduleApplyDatabase()(mod)
        scheduled = sum(1 for f in mod.functions.values()
                        if isinstance(f, tvm.tirx.PrimFunc) and f.attrs and f.attrs.get("tirx.is_scheduled"))
        mod = pack_weights_ahead(mod)
    with fast_math(payload.get("fast_math", False)):
        return {"path": _export(tvm.compile(mod, target=target), payload["out_path"]), "scheduled": scheduled,
                "recorded_s": recorded}


def applied_records(mod: object, db: object, target: object) -> dict[str, object]:
    """Kernel name -> the database's tuning record that MetaScheduleApplyDatabase applies to it (the same
    query), for the model's kernels that have one."""
    import tvm
    from tvm.s_tir.meta_schedule.tune_context import _normalize_mod
    out = {}
    for gv, func in mod.functions.items():
        if isinstance(func, tvm.tirx.PrimFunc):
            rec = db.query_tuning_record(_normalize_mod(func), target, gv.name_hint)
            if rec is not None:
                out[gv.name_hint] = rec
    return out


def record_module(rec: object) -> object:
    """The scheduled IRModule of a MetaSchedule tuning record: its trace applied to its workload, postprocessing
    kept as recorded."""
    from tvm.s_tir import Schedule
    sch = Schedule(rec.workload.mod)
    rec.trace.apply_to_schedule(sch, remove_postproc=False)
    return sch.mod


def pack_weights_ahead(mod: object) -> object:
    """A scheduled Relax model whose kernels pack their weights (layout-free buffers, RewriteLayout) with the
    packing moved out of the kernels and folded into the model's constants, so it runs once, at compile
    time (TVM's own `static_shape_tuning_pipeline(cpu_weight_prepack=True)` does the same). A model
    without layout-free buffers is returned as is."""
    import tvm
    from tvm import relax
    if not _rewrites_weights(mod):
        return mod
    return tvm.transform.Sequential([relax.transform.SplitLayoutRewritePreproc(),
                                     relax.transform.FoldConstant()])(mod)


REWRITE_ANNOTATION = "meta_schedule.layout_rewrite_preproc"  # a block that packs a weight (TVM's own key)


def _rewrites_weights(mod: object) -> bool:
    """Whether a PrimFunc of `mod` may pack a weight: it marks buffers layout-free (those RewriteLayout may
    pack), or a block at its root is annotated as a layout rewrite (the conv rule's packed tiles, `rules.conv`)."""
    import tvm
    from tvm.s_tir import Schedule
    for f in mod.functions.values():
        if not isinstance(f, tvm.tirx.PrimFunc):
            continue
        if f.attrs and f.attrs.get("layout_free_buffers"):
            return True
        scheduled = bool(f.attrs and f.attrs.get("tirx.is_scheduled"))
        if not scheduled and len(mod.functions) > 1:  # a model's kernels without a schedule pack nothing
            continue
        try:
            sch = Schedule(tvm.IRModule({"main": f}))
            roots = sch.get_child_blocks(sch.get_sblock("root"))
        except Exception:  # no block structure to look into
            continue
        if any(REWRITE_ANNOTATION in sch.get(b).annotations for b in roots):
            return True
    return False


def _probed(timing: Callable[[dict], list[float]]) -> Callable[[dict], dict]:
    """A timing op that also answers the parallel probe before and after it (parallel_probe.py): {"costs",
    "parallel_ratio": the worse of the two, None with one thread}."""
    def op(payload: dict) -> dict:
        from .parallel_probe import probe_ratio
        if payload.get("rpc"):  # timed on a board: this host's threads say nothing of it
            return {"costs": timing(payload), "parallel_ratio": None}
        before = probe_ratio()
        costs = timing(payload)
        after = probe_ratio()
        ratios = [r for r in (before, after) if r is not None]
        return {"costs": costs, "parallel_ratio": max(ratios) if ratios else None}
    return op


def _time_model(payload: dict) -> list[float]:
    """Time a compiled Relax model's `main` on the given inputs (float: uniform, int: zeros)."""
    import tvm
    from tvm import relax
    dev = tvm.cpu()
    vm = relax.VirtualMachine(tvm.runtime.load_module(payload["lib_path"]), dev)
    args = random_args(payload["args_info"], payload.get("seed", 0), dev)
    for _ in range(max(1, payload["warmup"])):
        vm["main"](*args)
    evaluator = vm.time_evaluator("main", dev, number=payload["number"], repeat=payload["repeat"],
                                  min_repeat_ms=payload["min_repeat_ms"])
    return [float(x) for x in evaluator(*args).results]


def random_args(args_info: list, seed: int, dev: object) -> list:
    """Inputs for timing and the output check: uniform floats; integer arguments are random indices below
    their bound where the kernel uses them as indices (`args_info` entries [shape, dtype, bound]), else zeros
    (so that index inputs stay in range)."""
    import numpy as np
    import tvm
    rng = np.random.default_rng(seed)
    out = []
    if os.environ.get("SCHEDREC_ARG_FILL") == "tvm_random_fill":  # as MetaSchedule's LocalRunner (probe)
        fill = tvm.get_global_func("tvm.contrib.random.random_fill")
        for shape, dtype, *_ in args_info:
            t = tvm.runtime.empty(shape, dtype, dev)
            fill(t)
            out.append(t)
        return out
    for shape, dtype, *bound in args_info:
        if dtype.startswith(("int", "uint")) and bound and bound[0]:  # indices into a tensor of that extent
            arr = rng.integers(0, bound[0], size=shape).astype(dtype)
        elif dtype.startswith(("int", "uint", "bool")):
            arr = np.zeros(shape, dtype=dtype)
        else:
            arr = rng.uniform(-1, 1, size=shape).astype(dtype)
        out.append(tvm.runtime.tensor(arr, dev))
    return out


def _remote(rpc: dict) -> object:
    """A session to a board of the tracker's `key` queue, for one timing: a board serves one session at a time,
    so a timing worker that kept its session would keep the board from every other worker (with more timing
    workers than boards, theirs waited past the run timeout)."""
    from tvm import rpc as tvm_rpc
    tracker = tvm_rpc.connect_tracker(rpc["host"], rpc["port"])
    return tracker.request(rpc["key"], priority=1, session_timeout=600)


def _load(payload: dict) -> tuple[object, object]:
    """The timed module and its device: local, or uploaded to a board (the session closes with the module)."""
    import tvm
    if not payload.get("rpc"):
        return tvm.runtime.load_module(payload["lib_path"]), tvm.cpu()
    remote = _remote(payload["rpc"])
    remote.upload(payload["lib_path"])
    lib = remote.load_module(os.path.basename(payload["lib_path"]))
    return lib, remote.cpu()


# (elementwise rtol, atol, share of the output's largest magnitude) by dtype. The last term is for reductions:
# another summation order moves a result by rounding error of the size of its terms, which shows where
# terms cancel (an output near zero, or at a ReLU's threshold) and is then scaled by the epilogue. Only a
# few such elements (1 in 10^4) may use it; a schedule that is wrong (a border, a tile) fails many more.
_TOLERANCE = {"float16": (1e-2, 1e-2, 1e-3), "bfloat16": (2e-2, 2e-2, 1e-2), "float32": (1e-3, 1e-4, 1e-5),
              "float64": (1e-7, 1e-9, 1e-12)}
_CANCELLATION_SHARE = 1e-4


def close_enough(x: object, y: object, dtype: str) -> tuple[bool, float]:
    """Whether candidate output `x` matches reference `y` within the dtype's tolerance, and the worst
    absolute difference. Integers must match exactly; NaNs and infinities must sit in the same places."""
    import numpy as np
    rtol, atol, scale_share = _TOLERANCE.get(dtype, (0.0, 0.0, 0.0))
    x64, y64 = np.asarray(x, dtype="float64").ravel(), np.asarray(y, dtype="float64").ravel()
    finite = np.isfinite(y64)
    if not np.array_equal(x64[~finite], y64[~finite], equal_nan=True):
        return False, float("nan")
    x64, y64 = x64[finite], y64[finite]
    if x64.size == 0:
        return True, 0.0
    with np.errstate(invalid="ignore", over="ignore"):
        diff = np.abs(x64 - y64)
    diff[np.isnan(diff)] = np.inf
    worst = float(diff.max())
    off = diff > atol + rtol * np.abs(y64)
    if not off.any():
        return True, worst
    scale = float(np.abs(y64).max())
    ok = int(off.sum()) <= int(_CANCELLATION_SHARE * diff.size) and bool(np.all(diff[off] <= scale_share * scale))
    return ok, worst


def _check(lib: object, payload: dict, dev: object) -> None:
    """Compare the candidate with the reference library on the same random arguments; raise on mismatch.

    Every argument buffer is compared after the call (inputs stay equal, outputs must match), so which
    arguments are outputs need not be known."""
    seed = payload.get("seed", 0) + 1
    ours = random_args(payload["args_info"], seed, dev)
    lib["main"](*ours)
    for i, (a, b, info) in enumerate(zip(ours, reference_outputs(payload, seed, dev), payload["args_info"])):
        ok, worst = close_enough(a.numpy(), b, info[1])
        if not ok:
            raise WrongResult(f"argument {i} differs from the reference (max abs diff {worst:.3g})")


_REFERENCE_OUTPUTS: dict = {}  # the last reference run's arguments after the call, by (library file, seed, args)


def reference_outputs(payload: dict, seed: int, dev: object) -> list:
    """The reference library's argument buffers (numpy) after one call on the seeded arguments, computed once
    for the candidates of a kernel that follow one another: the unscheduled kernel is plain loops, and a
    video model's conv3d ran 3 s a call, once per candidate checked."""
    import json

    import tvm
    path = payload["reference_path"]
    stat = os.stat(path)
    key = (path, stat.st_mtime_ns, stat.st_size, seed, json.dumps(payload["args_info"]))
    if key not in _REFERENCE_OUTPUTS or os.environ.get("SCHEDREC_ARG_FILL"):  # a probe's fill is not seeded
        theirs = random_args(payload["args_info"], seed, dev)
        tvm.runtime.load_module(path)["main"](*theirs)
        _REFERENCE_OUTPUTS.clear()
        _REFERENCE_OUTPUTS[key] = [t.numpy() for t in theirs]
    return _REFERENCE_OUTPUTS[key]


class WrongResult(Exception):
    """The candidate computes something other than the unscheduled kernel."""


def _time(payload: dict) -> list[float]:
    import tvm
    lib, dev = _load(payload)
    if payload.get("reference_path") == payload["lib_path"]:  # the reference itself (the kernel's default): no
        reference_outputs(payload, payload.get("seed", 0) + 1, dev)  # check; its outputs kept for the candidates'
    elif payload.get("reference_path"):  # a kernel that packs its weights is checked in its packing build
        _check(tvm.runtime.load_module(payload["check_path"]) if payload.get("check_path") else lib, payload, dev)
    args = random_args(payload.get("timing_args") or payload["args_info"], payload.get("seed", 0), dev)
    func = lib["main"]
    t0 = time.perf_counter()
    for _ in range(max(1, payload["warmup"])):
        func(*args)
    dev.sync()
    call_s = (time.perf_counter() - t0) / max(1, payload["warmup"])
    repeat = timing_repeats(call_s, payload["number"], payload["repeat"], payload.get("max_timing_s", 0.0))
    if not repeat:  # time_evaluator would run past the timing cap: the warmup was the timing
        return [call_s]
    evaluator = lib.time_evaluator("main", dev, number=payload["number"], repeat=repeat,
                                   min_repeat_ms=payload["min_repeat_ms"],
                                   f_preproc="cache_flush_cpu_non_first_arg" if payload["flush_cache"] else "")
    return [float(x) for x in evaluator(*args).results]


def timing_repeats(call_s: float, number: int, repeat: int, max_timing_s: float) -> int:
    """How many repeats a kernel whose warmup call took `call_s` gets: `repeat`, or as many as fit in
    `max_timing_s` (one at least) where `repeat` would run longer, or 0 where the least time_evaluator runs
    (its own warm-up call, then `number` calls timed) would run longer than `max_timing_s`: the warmup call
    is then its timing (a kernel's default of plain loops runs 0.1-0.3 s a call on a U-Net). In the rule-space
    matrix of llvm-znver4-2c (11,311 timings of 5 repeats), 4.8% of the timings were over 40 ms a call and took
    a third of the running time; their first repeat was within 0.8% of their median of five at the median and
    9.5% at the 90th percentile, against 0.5% and 5-7% for the faster ones: a slow kernel is timed about as
    well by one."""
    if not max_timing_s or call_s * number * repeat <= max_timing_s:
        return repeat
    if call_s * (1 + number) > max_timing_s:
        return 0
    return max(1, min(repeat, int(max_timing_s / max(call_s * number, 1e-9))))


def _call(payload: dict) -> object:
    """Run `module:function`(**kwargs) of this package here, isolated from the parent (replay, for one)."""
    import importlib
    module, _, name = payload["function"].partition(":")
    if not module.startswith(("recommender.", "featurize.")):
        raise ValueError(f"not a schedrec function: {payload['function']}")
    return getattr(importlib.import_module(module), name)(**payload["kwargs"])


def hang(seconds: float = 3600.0) -> None:
    """For tests, through `call`: never answer, like a replay stuck inside TVM."""
    import time
    time.sleep(seconds)


def abort() -> None:
    """For tests, through `call`: die like a segfault inside TVM."""
    os.abort()


def _prepare(payload: dict) -> float:
    """Load what a replay needs before the first one asks (TVM's tensor intrinsics: 1-3 s of TVMScript parsing
    per process); seconds taken."""
    import time
    from ..core.tvm_setup import load_tensor_intrinsics
    t0 = time.perf_counter()
    load_tensor_intrinsics()
    return time.perf_counter() - t0


def _crash(payload: dict) -> None:
    """For tests: die like a segfaulting kernel would."""
    os.abort()


_OPS = {"build": _build, "time": _probed(_time), "build_model": build_model, "time_model": _probed(_time_model),
        "ping": lambda payload: os.getpid(), "prepare": _prepare, "call": _call, "crash": _crash}


def serve(conn: object) -> None:
    """Worker main loop."""
    import tvm  # noqa: F401  (the one import this worker pays for)
    while True:
        try:
            op, payload = conn.recv()
        except (EOFError, OSError):
            return
        if op == "exit":
            return
        if op == "linger":  # for tests: close the pipe, then take a while to exit (as one freeing gigabytes does)
            import time
            conn.close()
            time.sleep(float(payload["seconds"]))
            return
        try:
            reply = ("ok", _OPS[op](payload))
        except Exception as err:  # reported to the parent, which records the reason
            lines = [ln for ln in str(err).strip().splitlines() if ln.strip()]
            msg = lines[-1] if lines else type(err).__name__
            reply = ("error", f"{type(err).__name__}: {msg}"[:2000] + "\n" + traceback.format_exc(limit=3)[-1500:])
        try:
            conn.send(reply)
        except OSError:  # the parent has gone (stopped or killed): nothing to report to
            return


def main() -> None:
    """Entry point: `python -m recommender.measure.worker SOCKET`."""
    import signal
    import socket
    import sys
    from multiprocessing.connection import Connection

    # Ctrl-C reaches the whole process group: the parent handles it and closes its workers
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # tvm_ffi imports torch whenever it can: 4 of the 6.7 s `import tvm` takes on a 2-core EPYC. Nothing a
    # worker runs touches a torch tensor, so it starts without torch (and with less memory)
    sys.modules.setdefault("torch", None)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect(sys.argv[1])
    except OSError:  # the parent stopped (a signal) while this worker was starting: nobody to serve
        sys.exit(0)
    serve(Connection(sock.detach()))


if __name__ == "__main__":
    main()
