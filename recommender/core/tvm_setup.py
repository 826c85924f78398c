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
