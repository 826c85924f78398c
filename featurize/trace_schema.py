"""The shape of a MetaSchedule trace in JSON form, checked before TVM sees it.

TVM's `Trace.apply_json_to_schedule` trusts its input: a decision index past the end of the trace writes
out of bounds, and an attribute of the wrong type or count is cast without a check. Either can kill the
process (SIGSEGV) instead of raising. Traces come from banks, imported MetaSchedule work dirs and matrix
rows, so every reader checks them here first: the instruction kinds MetaSchedule's CPU search produces,
each with its inputs, attributes, outputs and decision typed, random variables defined before use.
"""
from __future__ import annotations

import json
import math
from typing import Any

INT32 = 2**31 - 1

# input kinds: B block, L loop, V expression variable, F split factor (V, None or a positive int),
# A annotation value (V, int, float or a quoted string), BS a list of blocks, M an index map (TVM's JSON
# graph of a tirx.IndexMap, as a string).
# attr kinds: s non-empty string, i integer (bool allowed), n tile count, ci list of ints, cf list of floats,
# m an index map (as input M), p a padding value (None: the conv rule's flat tiles never pad a layout).
# outputs: an int (exactly that many), "*" (any number), "n" (attrs[0] of SamplePerfectTile),
# "factors" (one per split factor).
_SCHEMA: dict[str, tuple[tuple[str, ...], str | None, tuple[str, ...], Any, str | None]] = {
    # kind: (fixed inputs, variadic input kind, attrs, outputs, output RV kind)
    "GetSBlock": ((), None, ("s", "s"), 1, "B"),
    "GetLoops": (("B",), None, (), "*", "L"),
    "GetChildBlocks": (("B",), None, (), "*", "B"),
    "GetConsumers": (("B",), None, (), "*", "B"),
    "GetProducers": (("B",), None, (), "*", "B"),
    "SamplePerfectTile": (("L",), None, ("n", "i"), "n", "V"),
    "SampleCategorical": ((), None, ("ci", "cf"), 1, "V"),
    "SampleComputeLocation": (("B",), None, (), 1, "L"),
    "Split": (("L",), "F", ("i", "i"), "factors", "L"),
    "Fuse": ((), "L", ("i",), 1, "L"),
    "Reorder": ((), "L", (), 0, None),
    "Parallel": (("L",), None, (), 0, None),
    "Vectorize": (("L",), None, (), 0, None),
    "Unroll": (("L",), None, (), 0, None),
    "Annotate": (("BL", "A"), None, ("s",), 0, None),
    "Unannotate": (("BL",), None, ("s",), 0, None),
    "CacheRead": (("B", "BS"), None, ("i", "s"), 1, "B"),
    "CacheWrite": (("B", "BS"), None, ("i", "s"), 1, "B"),
    "ComputeAt": (("B", "L"), None, ("i", "i"), 0, None),
    "ReverseComputeAt": (("B", "L"), None, ("i", "i"), 0, None),
    "ComputeInline": (("B",), None, (), 0, None),
    "ReverseComputeInline": (("B",), None, (), 0, None),
    "DecomposeReduction": (("B", "L"), None, (), 1, "B"),
    "RFactor": (("L",), None, ("i",), 1, "B"),
    "PadEinsum": (("B",), None, ("ci",), 0, None),  # the matmul rule's padded columns, the conv rule's flat map
    # the conv rule's flat tiles: buffer index, read (0) or write (1), padding value, assume injective
    "TransformLayout": (("B", "M"), None, ("i", "i", "p", "i"), 0, None),
    "TransformBlockLayout": (("B",), None, ("m",), 0, None),
    "ReIndex": (("B",), None, ("i", "i"), 1, "B"),  # the flat tiles' gather: buffer index, read (0) or write (1)
    "EnterPostproc": ((), None, (), 0, None),
}
_SAMPLING = {"SamplePerfectTile", "SampleCategorical", "SampleComputeLocation"}
MAX_TILES = 16
MAX_INDEX_MAP_CHARS = 20000


class MalformedTrace(ValueError):
    """Trace JSON that is not a well-formed MetaSchedule trace; the message says where."""


def check_trace(trace: Any) -> None:
    """Raise MalformedTrace unless `trace` is `[instructions, decisions]` in the shape TVM expects."""
    if not (isinstance(trace, list) and len(trace) == 2 and all(isinstance(x, list) for x in trace)):
        raise MalformedTrace("a trace is [instructions, decisions]")
    insts, decisions = trace
    rvs: dict[str, str] = {}  # name -> B, L or V
    for i, inst in enumerate(insts):
        try:
            _check_inst(inst, rvs)
        except MalformedTrace as err:
            raise MalformedTrace(f"instruction {i}: {err}") from None
    seen: set[int] = set()
    for d in decisions:
        if not (isinstance(d, list) and len(d) == 2 and _is_int(d[0])):
            raise MalformedTrace(f"decision {d!r:.60} is not [index, value]")
        index, value = d
        if not 0 <= index < len(insts) or index in seen:
            raise MalformedTrace(f"decision index {index} is out of range or repeated")
        seen.add(index)
        _check_decision(insts[index], value)


def _check_inst(inst: Any, rvs: dict[str, str]) -> None:
    if not (isinstance(inst, list) and len(inst) == 4 and isinstance(inst[0], str)):
        raise MalformedTrace("an instruction is [kind, inputs, attrs, outputs]")
    kind, inputs, attrs, outputs = inst
    if kind not in _SCHEMA:
        raise MalformedTrace(f"unsupported instruction kind {kind!r:.40}")
    fixed, variadic, attr_kinds, n_out, out_kind = _SCHEMA[kind]
    if not (isinstance(inputs, list) and isinstance(attrs, list) and isinstance(outputs, list)):
        raise MalformedTrace(f"{kind}: inputs, attrs and outputs must be lists")
    if len(inputs) < len(fixed) or (variadic is None and len(inputs) != len(fixed)):
        raise MalformedTrace(f"{kind}: wrong number of inputs ({len(inputs)})")
    if variadic is not None and len(inputs) == len(fixed) == 0:
        raise MalformedTrace(f"{kind}: needs at least one input")
    for pos, x in enumerate(inputs):
        _check_input(kind, fixed[pos] if pos < len(fixed) else variadic, x, rvs)
    if len(attrs) != len(attr_kinds):
        raise MalformedTrace(f"{kind}: wrong number of attributes ({len(attrs)})")
    for a_kind, a in zip(attr_kinds, attrs):
        _check_attr(kind, a_kind, a)
    if kind == "SampleCategorical" and len(attrs[0]) != len(attrs[1]):
        raise MalformedTrace("SampleCategorical: candidates and probabilities differ in length")
    expected = {"n": attrs[0] if attrs else None, "factors": len(inputs) - 1, "*": None}.get(n_out, n_out)
    if expected is not None and len(outputs) != expected:
        raise MalformedTrace(f"{kind}: wrong number of outputs ({len(outputs)})")
    for name in outputs:
        if not (isinstance(name, str) and name.isidentifier() and name != "None") or name in rvs:
            raise MalformedTrace(f"{kind}: bad or repeated output name {name!r:.40}")
        rvs[name] = out_kind


def _check_input(kind: str, spec: str, x: Any, rvs: dict[str, str]) -> None:
    def rv(want: str) -> bool:
        return isinstance(x, str) and rvs.get(x, "?") in want

    if spec == "BS":
        ok = isinstance(x, list) and all(isinstance(b, str) and rvs.get(b) == "B" for b in x)
    elif spec == "BL":
        ok = rv("BL")
    elif spec == "F":
        ok = rv("V") or x == "None" or x is None or (_is_int(x) and 0 < x <= INT32)
    elif spec == "M":
        ok = _is_index_map(x)
    elif spec == "A":
        ok = rv("V") or (_is_int(x) and abs(x) <= INT32) or (isinstance(x, float) and math.isfinite(x)) or (
            isinstance(x, str) and len(x) >= 2 and x[0] == x[-1] == '"')
    else:
        ok = rv(spec)
    if not ok:
        raise MalformedTrace(f"{kind}: input {x!r:.40} is not {_INPUT_WORDS[spec]}")


_INPUT_WORDS = {"B": "a defined block", "L": "a defined loop", "V": "a defined variable",
                "BL": "a defined block or loop", "BS": "a list of defined blocks", "F": "a split factor",
                "A": "an annotation value", "M": "an index map"}


def _check_attr(kind: str, a_kind: str, a: Any) -> None:
    if a_kind == "s":
        ok = isinstance(a, str) and 0 < len(a) < 256
    elif a_kind == "i":
        ok = _is_int(a) and abs(a) <= INT32
    elif a_kind == "n":
        ok = _is_int(a) and 1 <= a <= MAX_TILES
    elif a_kind == "m":
        ok = _is_index_map(a)
    elif a_kind == "p":
        ok = a is None
    elif a_kind == "ci":
        ok = isinstance(a, list) and 0 < len(a) <= 64 and all(_is_int(v) and abs(v) <= INT32 for v in a)
    else:  # "cf"
        ok = isinstance(a, list) and 0 < len(a) <= 64 and all(
            isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v >= 0 for v in a)
    if not ok:
        raise MalformedTrace(f"{kind}: bad attribute {a!r:.40}")


def _check_decision(inst: list, value: Any) -> None:
    kind, _, attrs, _ = inst
    if kind not in _SAMPLING:
        raise MalformedTrace(f"decision for {kind}, which samples nothing")
    if kind == "SamplePerfectTile":
        ok = isinstance(value, list) and len(value) == attrs[0] and all(_is_int(v) and 0 < v <= INT32 for v in value)
    elif kind == "SampleCategorical":
        ok = _is_int(value) and 0 <= value < len(attrs[0])
    else:  # SampleComputeLocation: a loop index, -1 root, -2 inline
        ok = _is_int(value) and -2 <= value <= INT32
    if not ok:
        raise MalformedTrace(f"bad decision {value!r:.40} for {kind}")


def _is_index_map(x: Any) -> bool:
    """A string holding TVM's JSON graph of one tirx.IndexMap (its root), of a bounded size."""
    if not (isinstance(x, str) and len(x) <= MAX_INDEX_MAP_CHARS):
        return False
    try:
        graph = json.loads(x)
    except ValueError:
        return False
    if not (isinstance(graph, dict) and isinstance(graph.get("nodes"), list) and _is_int(graph.get("root_index"))):
        return False
    nodes, root = graph["nodes"], graph["root_index"]
    return (0 <= root < len(nodes) and all(isinstance(n, dict) and isinstance(n.get("type"), str) for n in nodes)
            and nodes[root]["type"] == "tirx.IndexMap")


def _is_int(x: Any) -> bool:
    return isinstance(x, int)  # bool is an int here, as in TVM's JSON
