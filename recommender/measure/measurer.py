"""The measurer: build kernels in parallel in persistent workers, then time them one at a time.

Builds run in `build_workers` processes that import TVM once (about 0.1 s per small kernel instead of a
fresh process per build). Timing runs in one separate worker (or on a remote board through the TVM RPC
tracker), never while a build is running. A candidate that crashes or hangs costs only its worker: it is
recorded with its reason and a fresh worker takes over. Every build and timing holds the machine's
measurement lock (host_lock.py), so two schedrec processes never measure at once.
"""
from __future__ import annotations

import os
import shutil
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from queue import Empty, Queue

from ..core.errors import SchedrecError
# candidate status values: defined once with the rows that record them, importable from here too
from ..core.rows import BUILD_ERROR, CRASH, OK, RUNTIME_ERROR, TIMEOUT, WRONG_RESULT  # noqa: F401
from . import contention, parallel_probe
from .args import index_bounds, kernel_args
from .host_lock import exclusive
from .pool import WorkerCrash, WorkerError, WorkerHandle, WorkerTimeout


# a whole model's timing spoiled by contention or taken in a slow stretch (parallel_probe.py) is timed again this
# often, this far apart: slow stretches last seconds to minutes, and a model's timing matters more than a kernel's
MODEL_RETRIES = 12
MODEL_RETRY_WAIT_S = 5.0


@dataclass
class MeasureSettings:
    """How candidates are built and timed. `min_repeat_ms` makes `time_evaluator` raise `number` until
    one repeat lasts that long; the reported latency is the median over `repeat` repeats. A kernel whose
    `repeat` repeats would run longer than `max_timing_s` in all gets as many as fit, one at least (its warmup
    call says how long one takes): such a kernel is slow, and one repeat of it is close to the median of five
    (see `worker.timing_repeats`). 0: every timing runs `repeat` repeats."""

    repeat: int = 5
    number: int = 1
    min_repeat_ms: int = 4
    warmup: int = 1
    flush_cache: bool = False
    build_workers: int = 2
    build_timeout_s: float = 120.0
    run_timeout_s: float = 60.0
    runner: str = "local"  # or rpc://HOST:PORT/KEY
    fast_math: bool = True  # vectorized float32 exp/erf in every build (recommender.measure.fast_math); False: libm calls
    max_timing_s: float = 0.2

    def __post_init__(self) -> None:
        for name in ("repeat", "number", "build_workers"):
            if int(getattr(self, name)) < 1:
                raise SchedrecError(f"measure setting {name} must be at least 1, got {getattr(self, name)}")
        for name in ("min_repeat_ms", "warmup", "max_timing_s"):
            if getattr(self, name) < 0:
                raise SchedrecError(f"measure setting {name} must not be negative, got {getattr(self, name)}")
        parse_runner(self.runner)

    def to_json(self) -> dict:
        return asdict(self)


@dataclass
class MeasureResult:
    status: str
    costs: list[float] = field(default_factory=list)  # seconds, one per repeat
    error: str = ""
    build_s: float = 0.0
    run_s: float = 0.0
    scheduled_kernels: int | None = None  # whole models built with a database: the kernels it scheduled
    path: str | None = None  # model_library: the built library
    recorded_s: dict[str, float] = field(default_factory=dict)  # model_library: kernel -> its record's seconds
    stall_share: float | None = None  # share of the timing in which a task waited for a CPU (contention.py)
    parallel_ratio: float | None = None  # the parallel probe's worse reading around the timing (parallel_probe.py)
    # where every try was spoiled and the last one kept (Measurer._timed): "contended" or "not_parallel"; the
    # figure is then likely too slow, and a report must say so (`caveat`)
    kept_spoiled: str | None = None
    tries: int = 1

    @property
    def ok(self) -> bool:
        return self.status == OK

    @property
    def median(self) -> float:
        return statistics.median(self.costs) if self.costs else float("inf")

    @property
    def caveat(self) -> str | None:
        """One line saying why this timing is not clean (every try spoiled, the last kept), None if it is."""
        if self.kept_spoiled is None:
            return None
        if self.kept_spoiled == "contended":
            share = "" if self.stall_share is None else f" (the kept one stalled {self.stall_share:.0%} of its time)"
            why = f"another process took the CPU in every try{share}"
        elif self.kept_spoiled == "unsteady":
            why = (f"its repeats spread more than {contention.MAX_SPREAD}x in every try (the fastest try kept: "
                   f"{contention.spread(self.costs):.2f}x)")
        else:
            ratio = "" if self.parallel_ratio is None else f" (parallel probe {self.parallel_ratio:.2f})"
            why = f"the timing worker's threads did not run side by side in any try{ratio}"
        return contention.no_clean_run(self.tries, why)


def parse_runner(spec: str) -> dict | None:
    """`local` -> None; `rpc://HOST:PORT/KEY` -> {"host", "port", "key"}."""
    if spec == "local":
        return None
    if spec.startswith("rpc://"):
        rest = spec[len("rpc://"):]
        hostport, _, key = rest.partition("/")
        host, _, port = hostport.rpartition(":")
        if host and port.isdigit() and key:
            return {"host": host, "port": int(port), "key": key}
    raise SchedrecError(f"runner must be 'local' or rpc://HOST:PORT/KEY, got {spec!r}")


class Measurer:
    """Builds and times TIR kernels (IRModules with a `main` PrimFunc) for one target."""

    def __init__(self, target_config: dict, settings: MeasureSettings | None = None) -> None:
        self.target_config = dict(target_config)
        self.settings = settings or MeasureSettings()
        self.rpc = parse_runner(self.settings.runner)
        self._builders = [WorkerHandle(f"schedrec-build-{i}") for i in range(self.settings.build_workers)]
        threads = int(self.target_config.get("num-cores", 0)) or None
        self._timer = WorkerHandle("schedrec-run", threads=threads)
        self._tmp = tempfile.mkdtemp(prefix="schedrec-measure-")
        self._lock = threading.Lock()
        self._counter = 0
        self.stats = {"build_wall_s": 0.0, "run_wall_s": 0.0, "built": 0, "timed": 0, "timed_again_contended": 0,
                      "kept_contended": 0, "timed_again_not_parallel": 0, "kept_not_parallel": 0,
                      "timed_again_unsteady": 0, "kept_unsteady": 0}
        self._packing: dict[str, dict] = {}  # artifact path -> check_path, timing_args (worker._build)
        # the last reference kernel measured against: (its module, its build's path, build seconds)
        self._reference: tuple[object, str, float] | None = None

    # -- lifecycle -------------------------------------------------------------------------------
    def start_workers(self) -> "Measurer":
        """Start the build and timing workers in the background now (each imports TVM, 2-3 s; the build workers,
        which also replay, then load TVM's tensor intrinsics, 1-3 s), not at their first call: what the caller
        does meanwhile (a model's import) hides it. Returns self."""
        for w in self._builders:
            w.start_soon(prepare=True)
        self._timer.start_soon()
        return self

    def wait_ready(self) -> float:
        """Wait until the workers begun by `start_workers` are up; the seconds waited."""
        t0 = time.perf_counter()
        for w in self._builders + [self._timer]:
            w.join_start()
        return time.perf_counter() - t0

    def close(self) -> None:
        for w in self._builders + [self._timer]:
            w.close()
        shutil.rmtree(self._tmp, ignore_errors=True)

    def __enter__(self) -> "Measurer":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- building --------------------------------------------------------------------------------
    def _artifact_path(self) -> str:
        """A fresh directory per artifact: MetaSchedule's RemoveBuildArtifact deletes the artifact's folder."""
        with self._lock:
            self._counter += 1
            n = self._counter
        folder = os.path.join(self._tmp, f"cand-{n}")
        os.makedirs(folder, exist_ok=True)
        return os.path.join(folder, f"cand-{n}.so")  # unique name: RPC uploads share one remote folder

    def _in_parallel(self, jobs: list, work) -> list:
        """work(handle, job) for each job, spread over the build workers (one thread each); results in
        job order. `work` must return a result for every job (it catches its own errors)."""
        queue: Queue = Queue()
        for i, job in enumerate(jobs):
            queue.put((i, job))
        results: list = [None] * len(jobs)

        def drain(handle: WorkerHandle) -> None:
            while True:
                try:
                    i, job = queue.get_nowait()
                except Empty:
                    return
                results[i] = work(handle, job)

        threads = [threading.Thread(target=drain, args=(h,), daemon=True)
                   for h in self._builders[:max(1, min(len(jobs), len(self._builders)))]]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        return results

    def build(self, mods: list[object]) -> list[tuple[str | None, str, str, float]]:
        """Build each module (an IRModule or its `tvm.ir.save_json`) in parallel workers: [(artifact path or
        None, status, error, seconds)]."""
        import tvm

        def build_one(handle: WorkerHandle, mod_json: str) -> tuple:
            path = self._artifact_path()
            t0 = time.perf_counter()
            try:
                built = handle.call("build", {"mod_json": mod_json, "target": self.target_config, "out_path": path,
                                              "fast_math": self.settings.fast_math},
                                    self.settings.build_timeout_s)
                if built.get("check_path"):
                    with self._lock:
                        self._packing[path] = {k: built[k] for k in ("check_path", "timing_args")}
                return path, OK, "", time.perf_counter() - t0
            except WorkerError as err:
                os.rmdir(os.path.dirname(path))
                return None, BUILD_ERROR, str(err), time.perf_counter() - t0
            except WorkerTimeout as err:
                return None, TIMEOUT, f"build: {err}", time.perf_counter() - t0
            except WorkerCrash as err:
                return None, CRASH, f"build: {err}", time.perf_counter() - t0
            except Exception as err:  # never leave a candidate without a result
                return None, CRASH, f"build: {type(err).__name__}: {err}", time.perf_counter() - t0

        with exclusive("building kernels"):
            return self._in_parallel([mod if isinstance(mod, str) else tvm.ir.save_json(mod) for mod in mods],
                                     build_one)

    # -- timing ----------------------------------------------------------------------------------
    def time_artifact(self, path: str, args_info: list, seed: int = 0,
                      reference_path: str | None = None, settings: MeasureSettings | None = None) -> MeasureResult:
        """Time one built artifact in the timing worker (or through RPC). With `reference_path` (a local
        build of the unscheduled kernel), the output is first checked against it: `wrong_result` if not equal;
        the reference's own build (`path` is `reference_path`) is not checked, its outputs are kept instead.
        `settings` overrides the timing settings (repeat, number, min_repeat_ms, warmup) for this call."""
        s = settings or self.settings
        with self._lock:
            packing = self._packing.pop(path, {})  # a kernel that packs its weights (worker._build)
        payload = {"lib_path": path, "args_info": args_info, "seed": seed, "warmup": s.warmup, **packing,
                   "reference_path": reference_path if self.rpc is None else None,
                   "number": s.number, "repeat": s.repeat, "min_repeat_ms": s.min_repeat_ms,
                   "max_timing_s": s.max_timing_s, "flush_cache": s.flush_cache, "rpc": self.rpc}
        with exclusive("timing a kernel"):
            return self._timed("time", payload, s.run_timeout_s)

    def _timed(self, op: str, payload: dict, timeout: float) -> MeasureResult:
        """Run a timing request in the timing worker; failures become results with their reason. A timing
        that another process spoiled (it stalled for a CPU, contention.py) or that ran while the worker's threads
        did not run side by side (parallel_probe.py) is timed again, up to contention.RETRIES times (a whole
        model's up to MODEL_RETRIES times, further apart: a slow stretch lasts seconds to minutes); the last is
        kept with its stall share and probe ratio, and the first of each kind is told. So is a timing whose repeats
        spread more than contention.MAX_SPREAD (disturbed where PSI saw nothing); of those the fastest try is kept.
        Through RPC this machine's stalls say nothing of the board's, and the board keeps no artifact for a second
        try: never timed again there, no stall share."""
        if self.rpc is not None:
            return self._timed_once(op, payload, timeout)
        retries, wait = ((MODEL_RETRIES, MODEL_RETRY_WAIT_S) if op == "time_model" else
                         (contention.RETRIES, contention.RETRY_WAIT_S))
        unsteady: MeasureResult | None = None  # the fastest of the tries whose repeats spread (only stalls slow)
        for attempt in range(retries + 1):
            with contention.StallWatch() as watch:
                result = self._timed_once(op, payload, timeout)
            result.stall_share = watch.share
            spoiled = contention.spoiled(watch.share)
            slow = parallel_probe.slow(result.parallel_ratio)
            if result.ok and not (spoiled or slow) and contention.unsteady(result.costs):
                if unsteady is None or result.median < unsteady.median:
                    unsteady = result
                kind = "unsteady"
            elif not (result.ok and (spoiled or slow)):
                return result
            else:
                kind = "contended" if spoiled else "not_parallel"
            if attempt == retries:
                self.stats[f"kept_{kind}"] += 1
                if kind == "unsteady":
                    result = unsteady
                result.kept_spoiled, result.tries = kind, attempt + 1  # reports carry its caveat
                return result
            if not self.stats[f"timed_again_{kind}"]:
                why = (f"another process took the CPU during a timing (stalled {watch.share:.0%} of it)" if spoiled
                       else f"the timing worker's threads did not run side by side (parallel probe "
                            f"{result.parallel_ratio:.2f} of one thread's time)" if slow
                       else f"a timing's repeats spread {contention.spread(result.costs):.2f}x (slowest over "
                            f"fastest)")
                print(f"note: {why}; timed again (up to {retries} times), as every such timing will be",
                      file=sys.stderr, flush=True)
            self.stats[f"timed_again_{kind}"] += 1
            time.sleep(0.0 if kind == "unsteady" and op != "time_model" else wait)  # no stranger to wait out
        return result

    def _timed_once(self, op: str, payload: dict, timeout: float) -> MeasureResult:
        t0 = time.perf_counter()
        try:
            reply = self._timer.call(op, payload, timeout)
            return MeasureResult(OK, list(reply["costs"]), run_s=time.perf_counter() - t0,
                                 parallel_ratio=reply["parallel_ratio"])
        except WorkerError as err:
            status = WRONG_RESULT if str(err).startswith("WrongResult") else RUNTIME_ERROR
            return MeasureResult(status, error=str(err), run_s=time.perf_counter() - t0)
        except WorkerTimeout as err:
            return MeasureResult(TIMEOUT, error=f"run: {err}", run_s=time.perf_counter() - t0)
        except WorkerCrash as err:
            return MeasureResult(CRASH, error=f"run: {err}", run_s=time.perf_counter() - t0)

    def measure(self, mods: list[object], args_infos: list[list] | None = None,
                reference: object | None = None, settings: MeasureSettings | None = None) -> list[MeasureResult]:
        """Build all modules (in parallel; each an IRModule or its JSON), then time the built ones one after
        another. With `reference`
        (the unscheduled kernel), every candidate's output is checked against it before timing; the reference's
        build is kept for the next calls with the same reference, and the reference itself among `mods` (the
        kernel's default) is timed from that build, unchecked. `settings`
        overrides the timing settings for these modules (e.g. a single short run that only checks).
        The builds and timings hold the machine's measurement lock from the first build to the last timing."""
        with exclusive("measuring a kernel's candidates"):
            return self._measure(mods, args_infos, reference, settings)

    def _measure(self, mods: list[object], args_infos: list[list] | None, reference: object | None,
                 settings: MeasureSettings | None) -> list[MeasureResult]:
        # the reference itself among `mods` (a kernel's default) is timed from the reference's build, unchecked
        itself = [reference is not None and m is reference for m in mods]
        fresh = [] if reference is None or self._reference_path(reference) else [reference]
        built = self.build([m for m, same in zip(mods, itself) if not same] + fresh)
        ref_path = None
        if reference is not None:
            if fresh:
                path, ref_status, ref_error, build_s = built.pop()
                if path is None:
                    raise SchedrecError(f"the reference (unscheduled) kernel does not build: {ref_status}: "
                                        f"{ref_error}")
                self._keep_reference(reference, path, build_s)
            ref_path = self._reference[1]
        builds = iter(built)
        bounds = index_bounds(reference) if reference is not None else None
        out = []
        for i, same in enumerate(itself):
            path, status, error, build_s = (ref_path, OK, "", self._reference[2]) if same else next(builds)
            if path is None:
                out.append(MeasureResult(status, error=error, build_s=build_s))
                continue
            info = args_infos[i] if args_infos is not None else kernel_args(_module(mods[i], reference))
            if bounds and any(b is not None for b in bounds) and len(bounds) == len(info):
                info = [[list(shape), dtype, b] for (shape, dtype, *_), b in zip(info, bounds)]
            r = self.time_artifact(path, info, reference_path=ref_path, settings=settings)
            r.build_s = build_s
            out.append(r)
            if not same:
                shutil.rmtree(os.path.dirname(path), ignore_errors=True)
        return out

    def _reference_path(self, reference: object) -> str | None:
        """The kept build of this reference kernel (the last one measured against), or None."""
        import tvm_ffi
        if self._reference is None:
            return None
        mod, path, _ = self._reference
        return path if mod is reference or tvm_ffi.structural_equal(mod, reference) else None

    def _keep_reference(self, reference: object, path: str, build_s: float) -> None:
        """Keep this reference's build for the next measurements against it (one kernel's candidates come in
        several calls: a comparison's budget steps); the previous one is deleted."""
        if self._reference is not None:
            shutil.rmtree(os.path.dirname(self._reference[1]), ignore_errors=True)
        self._reference = (reference, path, build_s)

    def measure_model(self, mod: object, input_info: list, database_dir: str | None = None,
                      settings: MeasureSettings | None = None) -> MeasureResult:
        """Build a whole Relax model (with a MetaSchedule database's schedules if given) in a build worker,
        then time `main` in the timing worker. `input_info` is [(shape, dtype)] of the model's inputs;
        `settings` overrides the timing settings for this model (repeat, number, min_repeat_ms, warmup)."""
        with self.model_library(mod, database_dir) as built:
            if not built.ok:
                return built
            result = self.time_model_library(built.path, input_info, settings)
            result.build_s, result.scheduled_kernels = built.build_s, built.scheduled_kernels
            return result

    @contextmanager
    def model_library(self, mod: object, database_dir: str | None = None,
                      with_records: bool = False) -> Iterator[MeasureResult]:
        """Build a whole Relax model (with a database's schedules if given) to a library, for timing it
        several times (`time_model_library`, e.g. in rounds side by side with other builds); the library is
        deleted on exit. Yields a result whose `path` is the library, or, where the build failed, its status;
        `with_records`: its `recorded_s` has each kernel's database record cost (for `schedrec profile`)."""
        import tvm
        path = self._artifact_path()
        t0 = time.perf_counter()
        try:
            try:
                with exclusive("building a model"):
                    built = self._builders[0].call("build_model", {"mod_json": tvm.ir.save_json(mod),
                                                                   "target": self.target_config, "out_path": path,
                                                                   "database_dir": database_dir,
                                                                   "with_records": with_records,
                                                                   "fast_math": self.settings.fast_math},
                                                   max(self.settings.build_timeout_s, 1800.0))
            except (WorkerError, WorkerTimeout, WorkerCrash) as err:
                status = {WorkerError: BUILD_ERROR, WorkerTimeout: TIMEOUT, WorkerCrash: CRASH}[type(err)]
                yield MeasureResult(status, error=str(err), build_s=time.perf_counter() - t0)
                return
            yield MeasureResult(OK, build_s=time.perf_counter() - t0, scheduled_kernels=built["scheduled"],
                                path=path, recorded_s=built.get("recorded_s") or {})
        finally:
            shutil.rmtree(os.path.dirname(path), ignore_errors=True)

    def time_model_library(self, path: str, input_info: list, settings: MeasureSettings | None = None) -> MeasureResult:
        """Time `main` of a compiled Relax model library (`export_library` output) in the timing worker, as
        `measure_model` times its own builds; `input_info` is [(shape, dtype)] of the model's inputs."""
        s = settings or self.settings
        payload = {"lib_path": path, "args_info": [[list(shape), dtype] for shape, dtype in input_info],
                   "warmup": max(1, s.warmup), "number": s.number, "repeat": s.repeat,
                   "min_repeat_ms": s.min_repeat_ms}
        # a spoiled timing is timed again like a kernel's (the baselines beside it too: compare.baselines); the
        # last try is kept with its stall share, which reports carry
        with exclusive("timing a model"):
            return self._timed("time_model", payload, max(s.run_timeout_s, 600.0))

    def profile_model_library(self, path: str, input_info: list, runs: int = 20) -> dict:
        """Every call of a compiled Relax model timed in the timing worker (`measure.vm_profile`), run
        `runs` times instrumented and `runs` times plain, interleaved; adds `stall_share` (contention.py)."""
        if self.rpc is not None:
            raise SchedrecError("a per-call profile runs on this machine's CPU, not through RPC")
        kwargs = {"lib_path": path, "args_info": [[list(shape), dtype] for shape, dtype in input_info],
                  "runs": runs}
        with exclusive("profiling a model"), contention.StallWatch() as watch:
            try:
                out = self._timer.call("call", {"function": "recommender.measure.vm_profile:profile_library",
                                                "kwargs": kwargs}, max(self.settings.run_timeout_s, 900.0))
            except (WorkerError, WorkerTimeout, WorkerCrash) as err:
                raise SchedrecError(f"profiling the model failed: {err}") from err
        out["stall_share"] = watch.share
        return out

    def call_isolated(self, function: str, kwargs: dict, timeout_s: float) -> object:
        """Run `module:function`(**kwargs) in a build worker (between measurements, never during one).
        Raises WorkerCrash or WorkerTimeout if it kills or hangs that worker, which is then replaced,
        and WorkerError with the message if it raises."""
        with exclusive(f"running {function} in a worker"):
            return self._builders[0].call("call", {"function": function, "kwargs": kwargs}, timeout_s)

    def call_isolated_many(self, function: str, kwargs_list: list[dict], timeout_s: float) -> list:
        """call_isolated for each kwargs, spread over the build workers; in order, each item the result or
        the exception it raised (WorkerCrash, WorkerTimeout, WorkerError)."""
        def call_one(handle: WorkerHandle, kwargs: dict) -> object:
            try:
                return handle.call("call", {"function": function, "kwargs": kwargs}, timeout_s)
            except Exception as err:  # WorkerCrash, WorkerTimeout, WorkerError; never leave a job without one
                return err
        with exclusive(f"running {function} in the workers"):
            return self._in_parallel(kwargs_list, call_one)

    def describe(self) -> dict:
        return {"target": self.target_config, "settings": self.settings.to_json(),
                "timer_restarts": self._timer.restarts, "stats": dict(self.stats),
                "builder_restarts": sum(b.restarts for b in self._builders)}


def _module(mod: object, reference: object | None) -> object:
    """The module a measured item stands for, for its arguments: a module given as JSON is a candidate of the
    `reference` kernel, whose arguments it has (loaded only where there is no reference)."""
    if not isinstance(mod, str):
        return mod
    if reference is not None:
        return reference
    import tvm
    return tvm.ir.load_json(mod)
