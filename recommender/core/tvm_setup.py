"""One-time TVM set-up for this process.

MetaSchedule's TuneContext imports TVM's tensor intrinsics, hundreds of TVMScript functions whose
parser calls `inspect.stack()` for each one. With the default context of one source line per frame,
Python looks up the module of every frame, which scans `sys.modules`; with torch and transformers
loaded that import took 80-280 s on this machine. The parser needs the frames' variables and, for one
frame, its source line; both are cheap to get without the module lookup, so the import runs with a
light `inspect.getouterframes` that reads lines through `linecache` only.
"""
from __future__ import annotations

import functools
import inspect
import linecache

_done = False


def load_tensor_intrinsics() -> None:
    """Import `tvm.s_tir.tensor_intrin` quickly (idempotent)."""
    global _done
    if _done:
        return
    saved = inspect.getouterframes

    @functools.wraps(saved)
    def light_outer_frames(frame, context=1):  # inspect.stack() calls this too
        frames = []
        while frame is not None:
            code = frame.f_code
            line = linecache.getline(code.co_filename, frame.f_lineno)
            frames.append(inspect.FrameInfo(frame, code.co_filename, frame.f_lineno, code.co_name,
                                            [line] if line else None, 0 if line else None))
            frame = frame.f_back
        return frames

    inspect.getouterframes = light_outer_frames
    try:
        from tvm.s_tir import tensor_intrin  # noqa: F401
    finally:
        inspect.getouterframes = saved
    _done = True


def new_schedule(mod: object, **kwargs: object) -> object:
    """A tvm.s_tir.Schedule of `mod` that verifies its block tree after every primitive, but not its cached
    flags (affine binding, region cover, stage pipeline). Verifying the flags too made replays and rule
    instances about 4x slower: over 130 kernels of resnet50, mobilenet_v2, bert_tiny and the ONNX encoder and
    U-Net (5,352 donor replays and rule instances, llvm-rocketlake-2c, in one process) 318 s against 78 s
    without any check, the same traces and modules for 127 kernels; on the other three (matmul + add) the flag
    check refused every matmul rule instance, and resnet50's 20 all compute what the unscheduled kernel
    computes. The block tree check costs nothing measurable (32 conv rule instances built in 0.13 s with it
    and without any, 0.72 s with the flags')."""
    from tvm.s_tir import Schedule
    from tvm.s_tir.schedule.state import ScheduleDebugMask
    return Schedule(mod, debug_mask=ScheduleDebugMask.VERIFY_SREF_TREE, **kwargs)
