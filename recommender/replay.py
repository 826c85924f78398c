"""Replaying a schedule of one kernel onto another kernel of the same class (the transfer step).

The trace is cut before its postprocessing part, its block lookups are renamed from the source
kernel's block names to the target's (blocks correspond by position within a class), it is applied to
the target kernel, and then the target kernel's own postprocessors run (parallel, vectorize, unroll,
reduction rewriting), as MetaSchedule does for its own candidates.
"""
from __future__ import annotations

from dataclasses import dataclass

from featurize.tir_structure import block_infos
from featurize.trace_json import rename_blocks, strip_postproc

# failure reasons, shared with measurement records
REPLAY_ERROR = "replay_error"
POSTPROC_FAILURE = "postproc_failure"
CLASS_MISMATCH = "class_mismatch"


class ReplayFailure(Exception):
    """A candidate that could not be replayed; `reason` is one of the constants above."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(f"{reason}: {message}")
        self.reason = reason
        self.message = message


@dataclass
class Replayed:
    sch: object  # tvm.s_tir.Schedule, postprocessed, on the target kernel
    trace_json: list  # the replayed trace (target block names, no postproc part)


def block_mapping(source_mod: object, target_mod: object) -> dict[str, str]:
    """Source block name -> target block name, by position; raises if the block lists differ in shape."""
    src, dst = block_infos(source_mod), block_infos(target_mod)
    if len(src) != len(dst) or any(a.op != b.op or a.axis_kinds != b.axis_kinds for a, b in zip(src, dst)):
        raise ReplayFailure(CLASS_MISMATCH, "source and target kernels have different block structures")
    return {a.name: b.name for a, b in zip(src, dst)}


def postprocs_for(mod: object, target: object) -> list:
    """The postprocessors MetaSchedule's default CPU design space uses for this kernel."""
    from tvm.s_tir import meta_schedule as ms

    from .tvm_setup import load_tensor_intrinsics
    load_tensor_intrinsics()
    ctx = ms.TuneContext(mod=mod, target=target, space_generator="post-order-apply", num_threads=1)
    return list(ctx.space_generator.postprocs)


def replay_trace(trace_json: list, source_mod: object, target_mod: object, target: object,
                 postprocs: list | None = None) -> Replayed:
    """Apply a source kernel's trace (JSON form) to `target_mod`; raises ReplayFailure with the reason."""
    from tvm.s_tir import Schedule, Trace
    try:
        body = rename_blocks(strip_postproc(trace_json), block_mapping(source_mod, target_mod))
    except ReplayFailure:
        raise
    except Exception as err:  # malformed trace JSON
        raise ReplayFailure(REPLAY_ERROR, f"malformed trace: {type(err).__name__}: {err}") from err
    sch = Schedule(target_mod, debug_mask="all")
    try:
        Trace.apply_json_to_schedule(body, sch)
    except Exception as err:
        raise ReplayFailure(REPLAY_ERROR, _one_line(err)) from err
    replayed_json = _trace_json_of(sch)
    sch.enter_postproc()
    for p in postprocs if postprocs is not None else postprocs_for(target_mod, target):
        try:
            ok = p.apply(sch)
        except Exception as err:
            raise ReplayFailure(POSTPROC_FAILURE, f"{p}: {_one_line(err)}") from err
        if not ok:
            raise ReplayFailure(POSTPROC_FAILURE, f"{p} rejected the replayed schedule")
    return Replayed(sch=sch, trace_json=replayed_json)


def _trace_json_of(sch: object) -> list:
    from featurize.trace_json import trace_to_json
    return trace_to_json(sch.trace)


def _one_line(err: BaseException) -> str:
    lines = [ln.strip() for ln in str(err).splitlines() if ln.strip()]
    for ln in reversed(lines):
        if "Error" in ln or "error" in ln:
            return ln[:300]
    return (lines[-1] if lines else type(err).__name__)[:300]
