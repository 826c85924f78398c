"""The measurer with real TVM: timing, isolation of crashing / hanging / failing kernels, MetaSchedule."""
from __future__ import annotations

import os
import time

import pytest

from recommender.core.errors import SchedrecError
from recommender.measure import MeasureSettings, Measurer
from recommender.measure.measurer import BUILD_ERROR, CRASH, OK, RUNTIME_ERROR, TIMEOUT, WRONG_RESULT, parse_runner
from recommender.measure.worker import timing_repeats

from .kernels_tir import add1024, add1024_wrong, as_mod, fails_at_run, fails_build, hangs, matmul64, segfaults

pytestmark = pytest.mark.slow  # real tuning, replays or whole-model compiles: not in `make test-fast`


@pytest.fixture(scope="module")
def measurer(target):
    with Measurer(target.config, MeasureSettings(repeat=3, min_repeat_ms=1, run_timeout_s=15)) as m:
        yield m


def test_times_kernels_with_all_repeats(measurer):
    results = measurer.measure([as_mod(matmul64), as_mod(add1024)])
    assert [r.status for r in results] == [OK, OK]
    for r in results:
        assert len(r.costs) == 3 and all(c > 0 for c in r.costs)
        assert min(r.costs) <= r.median <= max(r.costs)
    mm, add = results
    assert mm.median > add.median  # 2*64^3 flops vs 1024 adds


def test_a_timing_whose_repeats_spread_is_timed_again_and_the_fastest_try_kept(target, monkeypatch):
    """Repeats that spread more than MAX_SPREAD (a disturbance PSI did not see) get the timing done again, up to
    RETRIES times; where every try spreads, the fastest is kept with its caveat. A limit of 1.0 makes every real
    timing of more than one distinct repeat unsteady."""
    from recommender.measure import contention
    monkeypatch.setattr(contention, "MAX_SPREAD", 1.0)
    from recommender.measure import measurer as measurer_module
    monkeypatch.setattr(contention, "spoiled", lambda share: False)  # only the spread decides here
    monkeypatch.setattr(measurer_module.parallel_probe, "slow", lambda ratio: False)
    tries: list = []
    with Measurer(target.config, MeasureSettings(repeat=3, min_repeat_ms=1)) as m:
        once = m._timed_once
        monkeypatch.setattr(m, "_timed_once", lambda *a: tries.append(once(*a)) or tries[-1])
        r, = m.measure([as_mod(matmul64)])
        assert r.ok and len(tries) == contention.RETRIES + 1 and m.stats["timed_again_unsteady"] == contention.RETRIES
        assert r.kept_spoiled == "unsteady" and m.stats["kept_unsteady"] == 1 and "spread" in r.caveat
        assert r.median == min(t.median for t in tries)
        monkeypatch.setattr(contention, "MAX_SPREAD", 1e9)  # steady: one try
        tries.clear()
        r, = m.measure([as_mod(matmul64)])
        assert r.ok and len(tries) == 1 and r.kept_spoiled is None


def test_a_slow_kernel_gets_as_many_repeats_as_fit_in_the_timing_cap():
    assert timing_repeats(0.001, 1, 5, 0.2) == 5  # 5 ms in all: every repeat
    assert timing_repeats(0.05, 1, 5, 0.2) == 4
    assert timing_repeats(0.09, 1, 5, 0.2) == 2
    assert timing_repeats(0.1, 1, 5, 0.2) == 2  # one at least: time_evaluator's warm-up and one call fit
    assert timing_repeats(0.15, 1, 5, 0.2) == 0  # those two would not: its warmup call is its timing
    assert timing_repeats(0.3, 1, 5, 0.2) == 0
    assert timing_repeats(0.3, 1, 5, 0.0) == 5  # no cap


def test_a_timing_over_the_cap_runs_fewer_repeats_and_one_under_it_all(measurer):
    capped, full = (measurer.measure([as_mod(matmul64)], settings=MeasureSettings(repeat=5, min_repeat_ms=0,
                                                                                  max_timing_s=cap))[0]
                    for cap in (1e-7, 0.0))
    assert capped.ok and full.ok
    assert len(capped.costs) == 1 and len(full.costs) == 5


def test_failures_are_recorded_with_reasons_and_the_next_candidate_is_fine(measurer):
    results = measurer.measure([as_mod(segfaults), as_mod(fails_build), as_mod(fails_at_run), as_mod(add1024)])
    assert [r.status for r in results] == [CRASH, BUILD_ERROR, RUNTIME_ERROR, OK]
    assert "exit code" in results[0].error
    assert "tvm_thread_allreduce" in results[1].error
    assert "runtime check failed" in results[2].error


def test_a_hanging_kernel_costs_only_its_worker(target):
    with Measurer(target.config, MeasureSettings(repeat=1, min_repeat_ms=0, run_timeout_s=3)) as m:
        hung, after = m.measure([as_mod(hangs), as_mod(add1024)])
        assert hung.status == TIMEOUT and after.status == OK
        assert m.describe()["timer_restarts"] == 1


def test_a_worker_killed_from_outside_is_replaced(measurer):
    import os
    import signal
    import time

    import psutil
    measurer.measure([as_mod(add1024)])
    pid = measurer._timer.pid
    os.kill(pid, signal.SIGKILL)
    # SIGKILL is delivered asynchronously: wait until the worker is dead (a zombie or gone), so that the next
    # request meets a dead worker rather than one that dies under it (which measures as a crash, by design)
    def dead() -> bool:
        try:
            return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
        except psutil.NoSuchProcess:
            return True
    deadline = time.monotonic() + 10
    while not dead() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert measurer.measure([as_mod(add1024)])[0].status == OK


def test_settings_are_validated():
    with pytest.raises(SchedrecError, match="repeat"):
        MeasureSettings(repeat=0)
    with pytest.raises(SchedrecError, match="max_timing_s"):
        MeasureSettings(max_timing_s=-0.5)
    with pytest.raises(SchedrecError, match="rpc://HOST:PORT/KEY"):
        MeasureSettings(runner="rpc://nohost")
    assert parse_runner("rpc://127.0.0.1:9190/board") == {"host": "127.0.0.1", "port": 9190, "key": "board"}


def test_metaschedule_tunes_through_the_measurer(target, tmp_path):
    from tvm.s_tir import meta_schedule as ms

    from recommender.measure.ms_adapter import MeasurerBuilder, MeasurerRunner
    from recommender.core.tvm_setup import load_tensor_intrinsics
    load_tensor_intrinsics()
    with Measurer(target.config, MeasureSettings(repeat=3, min_repeat_ms=1)) as m:
        db = ms.tir_integration.tune_tir(as_mod(matmul64), target.tvm(), str(tmp_path), max_trials_global=8,
                                         num_trials_per_iter=4, builder=MeasurerBuilder(m),
                                         runner=MeasurerRunner(m))
        stats = m.describe()["stats"]
    records = db.get_all_tuning_records()
    assert len(records) == 8 and stats["built"] == 8 and stats["timed"] == 8
    assert all(r.run_secs is not None and len(r.run_secs) == 3 and max(float(x) for x in r.run_secs) < 1
               for r in records)


def test_correctness_check_catches_a_wrong_kernel_and_passes_real_schedules(measurer, target):
    from tvm.s_tir import meta_schedule as ms

    from recommender.core.tvm_setup import load_tensor_intrinsics
    wrong, right = measurer.measure([as_mod(add1024_wrong), as_mod(add1024)], reference=as_mod(add1024))
    assert wrong.status == WRONG_RESULT and "differs from the reference" in wrong.error
    assert right.status == OK
    # tiled, parallel, vectorized schedules of a matmul reorder its sums and still pass
    load_tensor_intrinsics()
    scheduled = []
    for seed in range(3):
        ctx = ms.TuneContext(mod=as_mod(matmul64), target=target.tvm(), space_generator="post-order-apply",
                             num_threads=1, rand_state=seed)
        sch = ctx.space_generator.generate_design_space(as_mod(matmul64))[0]
        sch.enter_postproc()
        assert all(p.apply(sch) for p in ctx.space_generator.postprocs)
        scheduled.append(sch.mod)
    results = measurer.measure(scheduled, reference=as_mod(matmul64))
    assert [r.status for r in results] == [OK, OK, OK]


def test_a_kernels_reference_is_built_once_over_its_calls_and_times_its_default(target):
    """A kernel's candidates measured in several calls (a comparison's budget steps) build its unscheduled
    reference once; the reference itself among the modules (the default) is timed from that build; a wrong
    candidate is still caught in a later call; another kernel's reference is built afresh."""
    with Measurer(target.config, MeasureSettings(repeat=1, min_repeat_ms=0)) as m:
        built: list[int] = []
        build = m.build
        m.build = lambda mods: built.append(len(mods)) or build(mods)
        ref = as_mod(add1024)
        default, wrong = m.measure([ref, as_mod(add1024_wrong)], reference=ref)
        assert default.ok and wrong.status == WRONG_RESULT and built == [2]  # the wrong one and the reference
        right, wrong = m.measure([as_mod(add1024), as_mod(add1024_wrong)], reference=as_mod(add1024))  # equal
        assert right.ok and wrong.status == WRONG_RESULT and built == [2, 2]
        (default,) = m.measure([ref], reference=ref)
        assert default.ok and built == [2, 2, 0]
        (mm,) = m.measure([as_mod(matmul64)], reference=as_mod(matmul64))
        assert mm.ok and built == [2, 2, 0, 2]


def test_the_reference_runs_once_for_the_candidates_that_follow_and_again_when_its_library_changes(target, tmp_path):
    """The output check runs the unscheduled kernel (plain loops; 3 s a call for a video model's conv3d) once for
    a kernel's candidates, not once per candidate; the next kernel's reference is run afresh."""
    import numpy as np
    import tvm

    from recommender.measure.worker import reference_outputs
    path = str(tmp_path / "reference.so")
    payload = {"reference_path": path, "args_info": [[[1024], "float32"], [[1024], "float32"]]}
    tvm.compile(as_mod(add1024), target=target.tvm()).export_library(path)
    first = reference_outputs(payload, 1, tvm.cpu())
    assert reference_outputs(payload, 1, tvm.cpu()) is first  # not run again
    np.testing.assert_allclose(first[1], first[0] + 1, rtol=1e-6)
    other = str(tmp_path / "other.so")  # the next kernel's reference
    tvm.compile(as_mod(add1024_wrong), target=target.tvm()).export_library(other)
    again = reference_outputs({**payload, "reference_path": other}, 1, tvm.cpu())
    np.testing.assert_allclose(again[1], again[0] + 2, rtol=1e-6)


def test_tolerance_allows_rounding_where_sums_cancel_but_not_a_wrong_region():
    """What the matrix showed on GoogLeNet convs: 1-2 of 600k outputs near a ReLU's threshold differ by 0.09
    while the largest output is 1e5 (another summation order); a wrong pad border differs in 2% of them."""
    import numpy as np

    from recommender.measure.worker import close_enough
    rng = np.random.default_rng(0)
    ref = np.maximum(rng.normal(0, 2e4, 600_000), 0).astype("float32")
    ref[0] = 1e5
    near_zero = ref.copy()
    near_zero[[10, 20]] += 0.09
    assert close_enough(near_zero, ref, "float32")[0]
    rounding = ref * (1 + 1e-6)
    assert close_enough(rounding, ref, "float32")[0]
    border = ref.copy()
    border[:12_000] += 1.0
    assert not close_enough(border, ref, "float32")[0]
    one_big = ref.copy()
    one_big[5] += 10.0  # beyond 1e-5 of the largest output
    assert not close_enough(one_big, ref, "float32")[0]
    small = np.array([1.0, 0.0, -2.0], "float32")
    assert not close_enough(small + np.array([0, 0.01, 0], "float32"), small, "float32")[0]  # no allowance
    assert not close_enough(np.array([np.nan, 1.0]), np.array([1.0, 1.0]), "float32")[0]
    assert close_enough(np.array([np.inf, 1.0]), np.array([np.inf, 1.0]), "float32")[0]
    assert not close_enough(np.array([3, 1], "int32"), np.array([3, 2], "int32"), "int32")[0]


def test_a_kernel_that_packs_its_weight_is_checked_packing_and_timed_packed(measurer, target):
    """A schedule on a kernel whose weight is marked layout-free carries a weight-rewrite block
    (RewriteLayout): the output check runs it with the block (weight in the model's layout, against the
    unscheduled kernel), the timing without it (the packed weight, as the model has it after
    pack_weights_ahead)."""
    from recommender.measure.worker import without_weight_rewrite
    from recommender.transfer.replay import sample_schedules

    marked = as_mod(matmul64.with_attr("layout_free_buffers", [1]))
    drawn = sample_schedules(marked, target.tvm(), 4, seed=0)
    packing = [d for d in drawn if without_weight_rewrite(d.mod) is not None]
    assert packing, "RewriteLayout packed no sample's weight"
    stripped, timing_args = without_weight_rewrite(packing[0].mod)
    assert timing_args[1][0] != [64, 64] and timing_args[0] == [[64, 64], "float32"]  # b is packed, a is not
    # OK needs both builds: the stripped one reads a packed weight, which the unscheduled reference lacks
    results = measurer.measure([d.mod for d in packing], reference=as_mod(matmul64))
    assert all(r.status == OK and r.median > 0 for r in results), results
    assert measurer._packing == {}  # nothing left behind


def test_psi_stall_share_is_read_from_the_pressure_file(tmp_path):
    """contention.StallWatch: the `some` total's growth over the body's wall time; None without PSI."""
    from recommender.measure import contention
    psi = tmp_path / "cpu"
    psi.write_text("some avg10=0.00 avg60=0.00 avg300=0.00 total=1000\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n")
    assert contention.stalled_us(str(psi)) == 1000
    with contention.StallWatch(str(psi)) as watch:
        time.sleep(0.1)
        psi.write_text("some avg10=1.00 avg60=0.00 avg300=0.00 total=51000\n")  # 50 ms stalled
    assert 0.3 < watch.share <= 0.5 and contention.spoiled(watch.share)
    assert contention.stalled_us(str(tmp_path / "missing")) is None
    with contention.StallWatch(str(tmp_path / "missing")) as watch:
        pass
    assert watch.share is None and not contention.spoiled(None)


def test_a_timing_beside_a_busy_process_is_timed_again_and_kept_with_its_stall_share(target):
    """Beside a busy loop on every core, a 2-thread kernel's timing stalls for a CPU (PSI): the measurer times
    it again and, the loops still running, keeps the last try with its stall share. Without the loops it is
    kept clean, or, where something else loads the machine (a CI runner did: 23% stalled after its retries),
    kept spoiled only after every retry and marked so."""
    import subprocess
    from recommender.measure import contention
    if contention.stalled_us() is None:
        pytest.skip("no CPU pressure information (PSI) on this machine")
    with Measurer(target.config, MeasureSettings(repeat=3, min_repeat_ms=20)) as m:
        (quiet,) = m.measure([as_mod(matmul64)])
        assert quiet.ok
        if contention.spoiled(quiet.stall_share):  # a loaded machine: the same bookkeeping as below, or a bug
            assert quiet.kept_spoiled == "contended" and quiet.tries == contention.RETRIES + 1, quiet
        else:
            assert quiet.kept_spoiled != "contended" and m.stats["kept_contended"] == 0, quiet
        before = dict(m.stats)
        hogs = [subprocess.Popen(["sh", "-c", "while :; do :; done"]) for _ in range(os.cpu_count() or 2)]
        try:
            (busy,) = m.measure([as_mod(matmul64)])
        finally:
            for h in hogs:
                h.kill()
        assert busy.ok and contention.spoiled(busy.stall_share), busy.stall_share
        assert m.stats["timed_again_contended"] - before["timed_again_contended"] == contention.RETRIES
        assert m.stats["kept_contended"] - before["kept_contended"] == 1


def test_a_timing_taken_while_the_threads_do_not_run_side_by_side_is_timed_again(target, monkeypatch):
    """The timing worker reads the parallel probe (a ~1 us kernel on the target's threads against one thread)
    before and after every timing; a ratio over SLOW_RATIO means a slow stretch (parallel_probe.py), and the
    timing is taken again up to contention.RETRIES times, then kept with its ratio. With the threshold at 0 every
    reading counts as slow; at its default a quiet machine's readings are about 1.1, 1.9-2.0 in a slow stretch."""
    from recommender.measure import contention, parallel_probe
    with Measurer(target.config, MeasureSettings(repeat=3, min_repeat_ms=5)) as m:
        (first,) = m.measure([as_mod(matmul64)])
        assert first.ok and 0.3 < first.parallel_ratio < 5.0, first.parallel_ratio
        before = dict(m.stats)
        monkeypatch.setattr(parallel_probe, "SLOW_RATIO", 0.0)
        (slow,) = m.measure([as_mod(matmul64)])
        assert slow.ok and parallel_probe.slow(slow.parallel_ratio)
        again = {k: m.stats[f"timed_again_{k}"] - before[f"timed_again_{k}"] for k in ("not_parallel", "contended")}
        kept = {k: m.stats[f"kept_{k}"] - before[f"kept_{k}"] for k in ("not_parallel", "contended")}
        # a try that another process also stalled counts as contended: the two kinds share the retries
        assert sum(again.values()) == contention.RETRIES and again["not_parallel"] >= 1, again
        assert sum(kept.values()) == 1, kept


def test_the_tensor_intrinsics_load_without_the_gpu_ones_and_leave_them_importable():
    """load_tensor_intrinsics registers the CPU intrinsics (x86's VNNI dot product) and leaves out CUDA, ROCm and
    Hexagon's (4-6 s of TVMScript parsing a process), with no stand-in left behind: a later import of those
    submodules would load the real files. In a fresh process (this one may hold them already)."""
    import subprocess
    import sys
    code = ("import sys; from recommender.core.tvm_setup import load_tensor_intrinsics, GPU_INTRINSICS; "
            "load_tensor_intrinsics(); from tvm.s_tir import TensorIntrin; TensorIntrin.get('dot_16x4_vnni'); "
            "import tvm.s_tir.tensor_intrin as t; "
            "left = [m for m in GPU_INTRINSICS if f'tvm.s_tir.tensor_intrin.{m}' in sys.modules or hasattr(t, m)]; "
            "print('left', left); TensorIntrin.get('mma_ldmatrix_f16_a')")  # CUDA's: not registered
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert "left []" in done.stdout, (done.stdout, done.stderr)
    assert done.returncode != 0 and "mma_ldmatrix_f16_a" in done.stderr, done.stderr
