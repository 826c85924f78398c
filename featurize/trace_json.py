"""MetaSchedule traces as plain JSON-able Python values (lists, str, int, float)."""
from __future__ import annotations

from typing import Any


def to_py(obj: Any) -> Any:
    """Convert TVM FFI containers and immediates (Array, String, IntImm, FloatImm) to Python values."""
    if obj is None or isinstance(obj, (bool, int, float)):
        return obj
    if isinstance(obj, str):
        return str(obj)
    name = type(obj).__name__
    if name == "IntImm":
        return int(obj.value)
    if name == "FloatImm":
        return float(obj.value)
    if isinstance(obj, dict) or name == "Map":
        return {str(k): to_py(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)) or name in ("Array", "List"):
        return [to_py(x) for x in obj]
    raise TypeError(f"unexpected value in trace JSON: {name}")


def trace_to_json(trace: Any) -> list:
    """`[insts, decisions]` of a trace as plain Python values."""
    return to_py(trace.as_json())


def postproc_start(trace_json: list) -> int:
    """Index of the EnterPostproc instruction (len(insts) when the trace has none)."""
    insts = trace_json[0]
    for i, inst in enumerate(insts):
        if inst[0] == "EnterPostproc":
            return i
    return len(insts)


def strip_postproc(trace_json: list) -> list:
    """The trace without EnterPostproc and what postprocessors added after it."""
    cut = postproc_start(trace_json)
    insts, decisions = trace_json
    return [insts[:cut], [d for d in decisions if d[0] < cut]]


def block_names(trace_json: list) -> list[str]:
    """Names of the blocks the trace looks up, in order of first use."""
    names: list[str] = []
    for inst in trace_json[0]:
        if inst[0] == "GetSBlock" and inst[2] and inst[2][0] not in names:
            names.append(inst[2][0])
    return names


def rename_blocks(trace_json: list, mapping: dict[str, str]) -> list:
    """A copy of the trace whose block lookups use `mapping` (names not in it are kept)."""
    insts, decisions = trace_json
    out = []
    for kind, inputs, attrs, outputs in insts:
        if kind == "GetSBlock" and attrs:
            attrs = [mapping.get(attrs[0], attrs[0]), *attrs[1:]]
        out.append([kind, inputs, attrs, outputs])
    return [out, decisions]
