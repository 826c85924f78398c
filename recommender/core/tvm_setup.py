"""One-time TVM set-up for this process.

MetaSchedule's TuneContext imports TVM's tensor intrinsics, hundreds of TVMScript functions whose
parser calls `inspect.stack()` for each one. With the default context of one source line per frame,
Python looks up the module of every frame, which scans `sys.modules`; with torch and transformers
loaded that import took 80-280 s on this machine. The parser needs the frames' variables and, for one
frame, its source line; both are cheap to get without the module lookup, so the import runs with a
light `inspect.getouterframes` that reads lines through `linecache` only.

Most of what remains is the GPU intrinsics (CUDA's alone are 200 of the 248 functions): with them the import took
4.3-6.0 s on `llvm-znver3-2c`, without them 0.3-0.4 s, paid by every schedrec process and every measurer worker.
No CPU schedule uses them, so the CUDA, ROCm and Hexagon submodules are left out of this import (empty modules
stand in while the package's `__init__` runs and are taken away afterwards: a later
`import tvm.s_tir.tensor_intrin.cuda` in the same process loads the real one).
"""
from __future__ import annotations

import functools
import inspect
import linecache
import sys
import types

_done = False
_INTRIN = "tvm.s_tir.tensor_intrin"
GPU_INTRINSICS = ("cuda", "rocm", "hexagon")  # tensor_intrin submodules no CPU schedule uses


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
    # empty stand-ins for the GPU submodules (none where the package was imported already, GPU ones and all)
    stubs = [] if _INTRIN in sys.modules else [f"{_INTRIN}.{m}" for m in GPU_INTRINSICS
                                               if f"{_INTRIN}.{m}" not in sys.modules]
    for name in stubs:
        sys.modules[name] = types.ModuleType(name)
    try:
        from tvm.s_tir import tensor_intrin  # noqa: F401
    finally:
        inspect.getouterframes = saved
        package = sys.modules.get(_INTRIN)
        for name in stubs:
            if not hasattr(sys.modules.get(name), "__file__"):  # still the stand-in
                sys.modules.pop(name, None)
                if package is not None:
                    package.__dict__.pop(name.rsplit(".", 1)[1], None)
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
    skip_schedule_type_checks()
    return Schedule(mod, debug_mask=ScheduleDebugMask.VERIFY_SREF_TREE, **kwargs)


@functools.cache
def skip_schedule_type_checks() -> int:
    """Call Schedule's primitives without TVM's Python-side argument type check (`type_checked`: it binds and
    walks every argument's type hints on each call, then calls the same function); the FFI still refuses a
    wrong type, with TVM's own error. It was a third of a rule space's build: 256 conv instances of 4 U-Net
    kernels in 1.47 s with it, 0.98 s without (llvm-rocketlake-2c), the same schedules. Once per process;
    returns how many primitives were unwrapped."""
    from tvm.s_tir import Schedule
    unwrapped = 0
    for name, method in list(vars(Schedule).items()):
        inner = getattr(method, "__wrapped__", None)
        code = getattr(method, "__code__", None)
        if inner is not None and code is not None and code.co_name == "wrap":  # type_checked's wrapper
            setattr(Schedule, name, inner)
            unwrapped += 1
    return unwrapped
