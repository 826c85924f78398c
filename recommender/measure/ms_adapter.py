"""The measurer as MetaSchedule's Builder and Runner, so `tune_tasks` / `tune_relax` measure through it.

MetaSchedule builds a batch, then runs it: the builder builds the whole batch in the parallel build
workers, and the runner times each artifact in the timing worker, one at a time.
"""
from __future__ import annotations

import time

from tvm.ir.utils import derived_object
from tvm.s_tir.meta_schedule.builder import BuilderInput, BuilderResult, PyBuilder
from tvm.s_tir.meta_schedule.runner import PyRunner, RunnerFuture, RunnerInput, RunnerResult

from .args import arg_specs
from .measurer import Measurer


@derived_object
class MeasurerBuilder(PyBuilder):
    """A MetaSchedule Builder backed by the measurer's persistent build workers."""

    def __init__(self, measurer: Measurer) -> None:
        super().__init__()
        self.measurer = measurer

    def build(self, build_inputs: list[BuilderInput]) -> list[BuilderResult]:
        t0 = time.perf_counter()
        results = self.measurer.build([bi.mod for bi in build_inputs])
        self.measurer.stats["build_wall_s"] += time.perf_counter() - t0
        self.measurer.stats["built"] += len(build_inputs)
        return [BuilderResult(path, None) if path is not None else BuilderResult(None, f"{status}: {error}")
                for path, status, error, _ in results]


def _done_future(result: RunnerResult) -> RunnerFuture:
    return RunnerFuture(f_done=lambda: True, f_result=lambda: result)


@derived_object
class MeasurerRunner(PyRunner):
    """A MetaSchedule Runner that times artifacts in the measurer's isolated timing worker."""

    def __init__(self, measurer: Measurer) -> None:
        super().__init__()
        self.measurer = measurer

    def run(self, runner_inputs: list[RunnerInput]) -> list[RunnerFuture]:
        t0 = time.perf_counter()
        futures = []
        for ri in runner_inputs:
            r = self.measurer.time_artifact(str(ri.artifact_path), arg_specs(ri.args_info))  # MetaSchedule deletes the artifact
            if r.ok:
                futures.append(_done_future(RunnerResult(r.costs, None)))
            else:
                futures.append(_done_future(RunnerResult(None, f"{r.status}: {r.error}")))
        self.measurer.stats["run_wall_s"] += time.perf_counter() - t0
        self.measurer.stats["timed"] += len(runner_inputs)
        return futures
